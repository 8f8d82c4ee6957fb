"""Words and numbers every renderer spells the same way."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 path``, ``2 paths``, ``1 leaf pair``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def confidence(value: float) -> str:
    """A leaf confidence as every output prints it: the shortest repr of the float64
    (``0.91``, ``1.0``), so that it reads back to the stored value exactly."""
    return repr(float(value))
