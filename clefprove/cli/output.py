"""Writing output files whole or not at all."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from clefprove.errors import ClefproveError


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write *data* to *path* through a temporary file and a rename (never a partial file).

    A symbolic link is kept and the file it points to is replaced.  A device, FIFO or socket
    (``/dev/null``, ``/dev/stdout``, a named pipe) cannot be replaced by a rename without
    destroying the node itself, so it is written into directly.
    """
    target = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        st = os.stat(target)  # follows symbolic links
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ClefproveError(f"{target}: cannot write: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ClefproveError(f"{target}: is a directory, not a file")
    if (st is not None and not stat.S_ISREG(st.st_mode)) or _is_special(target):
        _write_through(target, raw)
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ClefproveError(f"{target}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ClefproveError(f"{target}: cannot write: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ClefproveError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _is_special(target: Path) -> bool:
    """Paths such as ``/dev/stdout`` name a stream even when it is redirected to a file."""
    parts = target.absolute().parts
    if len(parts) > 1 and parts[1] == "proc":
        return True
    return len(parts) > 2 and parts[1] == "dev" and parts[2] in ("stdin", "stdout", "stderr", "fd")


def _write_through(target: Path, raw: bytes) -> None:
    try:
        with open(target, "wb") as fh:
            fh.write(raw)
    except OSError as exc:
        raise ClefproveError(f"{target}: cannot write: {exc.strerror or exc}") from None


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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
