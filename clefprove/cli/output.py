"""Command output: files written whole or not at all, and standard output."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys

from clefprove.errors import ClefproveError
from clefprove.fileio import utf8, write_atomic

__all__ = [
    "discard_stdout",
    "emit",
    "refuse_inputs",
    "remove_stale_output",
    "write_atomic",
    "write_model",
    "write_stdout",
]


def remove_stale_output(args: argparse.Namespace | None) -> None:
    """After a run that failed (status 2 or 4), remove the file at its ``-o`` path, so that no
    output of an earlier run is mistaken for this one's (SPEC §4; docs/robustness.md).

    Only a regular file itself is removed: never a symbolic link (nor what it points to), a
    directory, a device or a FIFO; never a file that is also one of the run's input paths, nor
    an ``.inv`` file below an input directory (invariant directories are read recursively)."""
    output = getattr(args, "output", None) if args is not None else None
    if not isinstance(output, str) or output == "-":
        return
    try:
        st = os.lstat(output)
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(st.st_mode):
        return
    real = os.path.realpath(output)
    for key, value in vars(args).items():
        if key == "output":
            continue
        for name in value if isinstance(value, list | tuple) else [value]:
            if not isinstance(name, str | os.PathLike) or name == "-":
                continue
            try:
                if os.path.samefile(output, name):
                    return
                inside = os.path.isdir(name) and real.startswith(
                    os.path.realpath(name).rstrip(os.sep) + os.sep
                )
            except (OSError, ValueError):
                continue
            if inside and real.endswith(".inv"):
                return
    with contextlib.suppress(OSError):
        os.unlink(output)


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
        try:
            sys.stdout.write(text)
        except UnicodeEncodeError:
            # A path that is not UTF-8 (its bytes kept as lone surrogates) on a strict
            # stdout: shown with U+FFFD as in an output file (the encoder wrote nothing yet).
            safe = utf8(text).decode()
            if safe == text:
                raise
            sys.stdout.write(safe)
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
