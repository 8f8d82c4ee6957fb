"""Loading a model file whatever it holds: a `.clef` file, or a JSON model source (chosen by
content).  Above both :mod:`clefprove.model.clef` and :mod:`clefprove.model.source`, which
therefore never import each other's callers.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clefprove.errors import ClefFormatError, ClefproveError
from clefprove.fileio import read_bounded
from clefprove.model.clef import MAGIC, load, load_bytes, short_reason, single_tree
from clefprove.model.ensemble import Ensemble
from clefprove.model.source import MAX_SOURCE_BYTES, compile_source, load_source, parse_json_text
from clefprove.model.types import Model

#: A model read from a pipe larger than this is refused (the stream may never end).
MAX_STREAM_BYTES = MAX_SOURCE_BYTES


def load_model(
    path: str | os.PathLike[str], clef_only: bool = False, *, what: str = "this command"
) -> Model:
    """Load a single-tree model from a `.clef` file or a JSON source (chosen by content);
    an ensemble is refused (see :func:`load_any`)."""
    return single_tree(load_any(path, clef_only), str(path), what)


def load_any(path: str | os.PathLike[str], clef_only: bool = False) -> Model | Ensemble:
    """Load a model or an ensemble from a `.clef` file or a JSON source file (chosen by
    content).

    With *clef_only* (the gate, a service reload), anything but a genuine `.clef` file (its
    magic bytes) is refused: a deploy check must vouch for the exact bytes the runtime maps.
    A pipe (``/dev/stdin``, a shell's ``<(...)``) cannot be mapped: it is read into memory.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(MAGIC))
            regular = stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
            streamed = not regular and _looks_like_model(head, p)
            rest = read_bounded(fh, MAX_STREAM_BYTES) if streamed else None
    except IsADirectoryError:
        raise ClefproveError(f"{path}: is a directory, not a model") from None
    except OSError as exc:
        raise ClefproveError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if regular and not head:
        raise ClefFormatError(f"{path}: empty file, not a model")
    json_like = p.suffix.lower() == ".json" or head.lstrip()[:1] in (b"{", b"")
    json_source = head != MAGIC and json_like
    if clef_only and head != MAGIC:
        what = "it holds JSON model source" if json_source else "wrong magic bytes"
        hint = "; compile it with 'clefprove compile' first" if json_source else ""
        raise ClefFormatError(f"{path}: not a .clef file ({what}){hint}")
    if not regular:
        if rest is None:
            if streamed:
                raise ClefFormatError(f"{path}: larger than {MAX_STREAM_BYTES} bytes")
            raise ClefFormatError(f"{path}: {short_reason(head, len(head))}")
        data = head + rest
        if json_source:
            return compile_source(parse_json_text(data, str(path)), origin=str(path))
        return load_bytes(data, origin=str(path))
    if json_source:
        return load_source(p)
    return load(p)


def _looks_like_model(head: bytes, path: Path) -> bool:
    """Whether a stream's first bytes start a .clef file or JSON (never read /dev/zero whole)."""
    if head == MAGIC:
        return True
    stripped = head.lstrip()
    return stripped[:1] == b"{" or (path.suffix.lower() == ".json" and stripped[:1] in (b"", b"{"))
