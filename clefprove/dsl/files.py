"""Finding and reading invariant files (no model and no numpy needed: ``fmt`` uses this too)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.errors import ClefproveError
from clefprove.fileio import read_file_bounded

#: The suffix of invariant files.
SUFFIX = ".inv"

#: An invariant file larger than this is refused (64 MiB: people write them; a device or a pipe
#: that never ends must not be read until memory runs out).
MAX_INVARIANT_FILE_BYTES = 64 << 20


def expand_paths(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Files named by *paths*: a directory means every ``*.inv`` below it, in sorted order.

    Order is that of the arguments; inside a directory, sorted by relative path (stable across
    machines).  A file named twice is kept once.  A missing path, a directory without any
    ``.inv`` file, or a dangling symbolic link named ``*.inv`` below a directory (not a link
    loop) is an error.
    """
    if not paths:
        raise ClefproveError("no invariant files given")
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            below = list(path.rglob(f"*{SUFFIX}"))
            for p in below:
                if _dangling(p):  # never skip a missing invariant file silently
                    raise ClefproveError(
                        f"{p}: symbolic link to {os.readlink(p)}, which does not exist"
                    )
            found = sorted(
                (p for p in below if p.is_file()),
                key=lambda p: p.relative_to(path).as_posix(),
            )
            if not found:
                raise ClefproveError(f"{path}: no {SUFFIX} files in this directory")
        elif path.exists():
            found = [path]
        else:
            raise ClefproveError(f"{path}: no such file or directory")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


def _dangling(path: Path) -> bool:
    """A symbolic link whose target does not exist (a link loop is not dangling: it is skipped
    like every other entry that is not a regular file)."""
    if not path.is_symlink():
        return False
    try:
        path.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an invariant file; an unreadable or endless file is one line."""
    try:
        data = read_file_bounded(path, MAX_INVARIANT_FILE_BYTES)
    except OSError as exc:
        raise ClefproveError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if data is None:
        raise ClefproveError(
            f"{path}: larger than {MAX_INVARIANT_FILE_BYTES} bytes, not an invariant file"
        )
    return data


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of an invariant file; undecodable UTF-8 is a DSL error at its position."""
    return decode(read_bytes(path), str(path))


def decode(data: bytes, file: str) -> str:
    """UTF-8 bytes -> text (a leading BOM is dropped, a lone carriage return, as old Mac files
    end their lines, read as a line end); a bad byte is a :class:`DslError`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        source = data.split(b"\n")[line - 1].decode("utf-8", errors="replace")
        message = f"invalid UTF-8 byte 0x{data[exc.start]:02x}"
        raise DslError([Diagnostic(file, line, column, message, source)]) from None
    text = text.removeprefix("\ufeff")
    if "\r" in text:  # (CRLF stays: the lexer takes the CR as whitespace before the LF)
        text = _LONE_CR.sub("\n", text)
    return text


_LONE_CR = re.compile("\r(?!\n)")
