"""Words and numbers every renderer spells the same way."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 path``, ``2 paths``, ``1 leaf pair``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def proved(share: float | None) -> str:
    """``" (50.3% of the input domain proved)"`` for an undecided ensemble invariant (SPEC §5:
    the report says which share was proved), as the text warning words it; else empty."""
    return "" if share is None else f" ({share:.1%} of the input domain proved)"


def confidence(value: float) -> str:
    """A leaf confidence as every output prints it: the shortest repr of the float64
    (``0.91``, ``1.0``), so that it reads back to the stored value exactly."""
    return repr(float(value))


#: Bidirectional overrides and isolates (they reorder what a terminal shows: "Trojan Source").
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """*text* with every control character (escape sequences included) and bidirectional
    control shown as a visible escape (``\\x1b``, ``\\u202e``): user-provided strings must not
    drive the terminal or reorder what it shows."""
    import unicodedata

    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch in _BIDI or (unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn") and ch != " "):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)
