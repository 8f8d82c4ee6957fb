"""The project's error types.

Every error a user can cause (bad usage, an unreadable or malformed file, a DSL mistake, a bad
input record) is a :class:`ClefproveError`.  The CLI turns it into one line on stderr and exit
status 2; anything else escaping is a bug in clefprove.
"""

from __future__ import annotations


class ClefproveError(Exception):
    """A user-facing error: bad usage or bad input (CLI exit status 2)."""

    def one_line(self) -> str:
        """The message as a single line, fit for stderr: control characters (a terminal
        escape in a path it names, '\\x1b[2J') written as escapes, never sent raw."""
        text = " ".join(str(self).split("\n")[0].split())
        return "".join(
            c.encode("unicode_escape").decode() if c < " " or "\x7f" <= c < "\xa0" else c
            for c in text
        )

    def render(self) -> str:
        """What the CLI prints on stderr (one line unless a subclass needs a caret display)."""
        return f"clefprove: error: {self.one_line()}\n"


class ModelSourceError(ClefproveError):
    """The JSON model source is malformed; the message names the JSON path."""


class ClefFormatError(ClefproveError):
    """A `.clef` file is truncated, corrupted, crafted or of another version."""


class InputError(ClefproveError):
    """An input record for evaluation is malformed (wrong type, unknown name, non-finite)."""


class ImportModelError(ClefproveError):
    """A trained model (scikit-learn, ONNX, XGBoost, LightGBM) cannot be converted."""
