"""Writing output files whole or not at all."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from clefprove.errors import ClefproveError


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write *data* to *path* through a temporary file and a rename (never a partial file)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ClefproveError(f"{target}: directory {directory} does not exist")
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def emit(text: str, output: str | None) -> None:
    """Write *text* to the file *output* atomically, or to stdout when it is None or '-'."""
    if output in (None, "-"):
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        write_atomic(output, text if text.endswith("\n") else text + "\n")
