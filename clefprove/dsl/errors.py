"""DSL mistakes as data: :class:`Diagnostic` (a position and a message) and :class:`DslError`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clefprove.errors import ClefproveError


@dataclass(frozen=True)
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
        head = f"{self.location}: {self.message}\n"
        if not self.source_line:
            return head
        line = self.source_line.rstrip("\r\n")
        # Keep tabs in the caret's indentation so that it lines up under the column.
        indent = "".join(c if c == "\t" else " " for c in line[: max(self.column - 1, 0)])
        return f"{head}    {line}\n    {indent}^\n"


class DslError(ClefproveError):
    """One or more mistakes in invariant files; ``str()`` is the first, ``render()`` shows all."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        if not diagnostics:
            raise ValueError("DslError needs at least one diagnostic")
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        first = self.diagnostics[0]
        super().__init__(f"{first.location}: {first.message}")

    def render(self) -> str:
        body = "".join(d.render() for d in self.diagnostics)
        n = len(self.diagnostics)
        return body + (f"{n} errors\n" if n > 1 else "")
