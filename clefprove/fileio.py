"""Files written whole or not at all (a base module: every stage may write through it)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import IO

from clefprove.errors import ClefproveError


def utf8(text: str) -> bytes:
    """*text* as UTF-8.  A path that is not UTF-8 (Latin-1 'caf\\xe9.inv': Python keeps its
    undecodable bytes as lone surrogates) has no UTF-8 encoding: those bytes are shown as
    U+FFFD, one each, as a terminal shows the name (writing the report used to fail, exit 4)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace").encode()


def read_bounded(fh: IO[bytes], limit: int) -> bytes | None:
    """At most *limit* bytes of *fh*, or None when it holds more: a device or a pipe that
    never ends (``/dev/zero``) must be refused as input, not read until memory runs out."""
    data = fh.read(limit + 1)
    return None if len(data) > limit else data


def read_file_bounded(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of the file at *path*, or None when it holds more than *limit* (OSError as
    ``open`` raises it)."""
    with open(path, "rb") as fh:
        return read_bounded(fh, limit)


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write *data* to *path* through a temporary file and a rename (never a partial file).

    A symbolic link is kept and the file it points to is replaced.  A device, FIFO or socket
    (``/dev/null``, ``/dev/stdout``, a named pipe) cannot be replaced by a rename without
    destroying the node itself, so it is written into directly.
    """
    target = Path(path)
    raw = utf8(data) if isinstance(data, str) else data
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
