"""DSL mistakes as data: :class:`Diagnostic` (a position and a message) and :class:`DslError`."""

from __future__ import annotations

from collections.abc import Sequence

from clefprove.errors import ClefproveError
from clefprove.frozen import frozen


@frozen
class Diagnostic:
    """One mistake: where it is (1-based line and column), what it is, and the line it is on."""

    file: str
    line: int
    column: int
    message: str
    source_line: str = ""

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def render(self) -> str:
        """``file:line:col: message``, then the source line and a caret under the column."""
        # the file name too: a path may hold a terminal escape ('\x1b[2J.inv')
        head = f"{_escaped(self.location)}: {_escaped(self.message)}\n"
        if not self.source_line:
            return head
        line = _printable(self.source_line.rstrip("\r\n"))
        col = max(self.column - 1, 0)
        if len(line) > SHOWN_WIDTH:  # a huge line (a minified or binary file): show a window
            start = max(0, min(col - SHOWN_WIDTH // 2, len(line) - SHOWN_WIDTH))
            shown = line[start : start + SHOWN_WIDTH]
            line = (
                ("..." if start else "")
                + shown
                + ("..." if start + SHOWN_WIDTH < len(line) else "")
            )
            col = col - start + (3 if start else 0)
        # Keep tabs in the caret's indentation, and as many cells as a terminal gives each
        # character (two for a wide one, none for a combining mark), so that the caret lines
        # up under the column.
        indent = "".join(_cell(c) for c in line[:col])
        return f"{head}    {line}\n    {indent}^\n"


def cells(c: str) -> int:
    """How many cells a terminal gives the character *c*: two for a wide East Asian one,
    none for a combining mark, else one."""
    if c.isascii():
        return 1
    import unicodedata

    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def _cell(c: str) -> str:
    """The blank that takes the place of *c* on a terminal (a tab stays a tab)."""
    return "\t" if c == "\t" else " " * cells(c)


def _is_control(c: str) -> bool:
    return (c < " " and c != "\t") or "\x7f" <= c < "\xa0"


def _escaped(message: str) -> str:
    """The message with control characters written as escapes (``\\x1b``)."""
    return "".join(c.encode("unicode_escape").decode() if _is_control(c) else c for c in message)


#: The most characters of a source line shown under a diagnostic.
SHOWN_WIDTH = 160


def _printable(line: str) -> str:
    """The line with control characters (terminal escapes, NULs) shown as U+FFFD, one for one,
    so that a binary file cannot drive the terminal and the caret still lines up."""
    return "".join("\ufffd" if _is_control(c) else c for c in line)


class DslError(ClefproveError):
    """One or more mistakes in invariant files; ``str()`` is the first, ``render()`` shows all."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        if not diagnostics:
            raise ValueError("DslError needs at least one diagnostic")
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        first = self.diagnostics[0]
        super().__init__(f"{first.location}: {first.message}")

    def render(self) -> str:
        """Every mistake up to ``SHOWN_DIAGNOSTICS`` (a garbage file has thousands: the first
        ones say what is wrong), then how many there are."""
        shown = self.diagnostics[:SHOWN_DIAGNOSTICS]
        body = "".join(d.render() for d in shown)
        n = len(self.diagnostics)
        if n > len(shown):
            body += f"... and {n - len(shown)} more\n"
        return body + (f"{n} errors\n" if n > 1 else "")


#: The most diagnostics :meth:`DslError.render` prints.
SHOWN_DIAGNOSTICS = 50
