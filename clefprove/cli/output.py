"""Command output: files written whole or not at all, and standard output."""

from __future__ import annotations

import os
import sys

from clefprove.errors import ClefproveError
from clefprove.fileio import write_atomic

__all__ = [
    "discard_stdout",
    "emit",
    "refuse_inputs",
    "write_atomic",
    "write_model",
    "write_stdout",
]


def refuse_inputs(output: str | os.PathLike[str] | None, *inputs: str | os.PathLike[str]) -> None:
    """Refuse an output file that is one of the command's input files (it would be lost)."""
    if output in (None, "-"):
        return
    for name in inputs:
        try:
            same = os.path.samefile(output, name)
        except (OSError, ValueError):
            continue
        if same and os.path.isfile(name):
            raise ClefproveError(f"{output}: is also an input file; refusing to overwrite it")


def write_model(output: str, data: bytes) -> None:
    """Write a compiled model to the file *output* atomically, or to stdout for ``-`` (as every
    ``-o -`` means), refusing a terminal: binary bytes would garble it."""
    if output != "-":
        write_atomic(output, data)
        return
    if sys.stdout.isatty():
        raise ClefproveError(
            "-o -: refusing to write a binary .clef model to a terminal; redirect it to a file"
        )
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        discard_stdout()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ClefproveError(f"cannot write to standard output: {reason}") from None


def emit(text: str, output: str | None) -> None:
    """Write *text* to the file *output* atomically, or to stdout when it is None or '-'."""
    if output in (None, "-"):
        write_stdout(text if not text or text.endswith("\n") else text + "\n")
    else:
        write_atomic(output, text if text.endswith("\n") else text + "\n")


def write_stdout(text: str) -> None:
    """Write *text* to stdout and flush; a failing stdout (a full disk, a closed stream) is a
    :class:`ClefproveError`.  A closed pipe stays a :class:`BrokenPipeError`."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        discard_stdout()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ClefproveError(f"cannot write to standard output: {reason}") from None


def discard_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit cannot fail a second time."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
