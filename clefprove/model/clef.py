"""The binary ``.clef`` format, version 1 (layout in docs/format.md): encoder and loader.

Loading maps the file read-only and validates it in one linear, vectorised pass over the node
records (which stay in the mapping: the node array is a numpy view, not a copy).  Every defect
is a :class:`~clefprove.errors.ClefFormatError` with a one-line reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np

from clefprove.errors import ClefFormatError, ClefproveError
from clefprove.model.types import (
    MAX_TREE_DEPTH,
    NODE_DTYPE,
    Feature,
    FeatureType,
    Model,
    NodeKind,
)

MAGIC = b"\x89CLEF\r\n\x1a"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sHHIIIIIQQQQ")  # see docs/format.md
HEADER_SIZE = 64
DIGEST_SIZE = 32
assert HEADER.size == HEADER_SIZE


def _align8(n: int) -> int:
    return (n + 7) & ~7


def encode_clef(
    name: str,
    version: str,
    features: tuple[Feature, ...],
    actions: tuple[str, ...],
    nodes: np.ndarray,
    membership: np.ndarray,
    max_depth: int,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """Serialise a validated model into `.clef` v1 bytes (deterministic)."""
    from clefprove.model.source import feature_to_json

    meta = {
        "name": name,
        "version": version,
        "features": [feature_to_json(f) for f in features],
        "actions": list(actions),
        **(extra or {}),
    }
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    nodes_offset = _align8(HEADER_SIZE + len(meta_bytes))
    node_bytes = np.ascontiguousarray(nodes, dtype=NODE_DTYPE).tobytes()
    membership_offset = nodes_offset + len(node_bytes)
    member_bytes = np.ascontiguousarray(membership, dtype=np.uint8).tobytes()
    header = HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        HEADER_SIZE,
        0,
        1,
        len(nodes),
        max_depth,
        len(member_bytes),
        HEADER_SIZE,
        len(meta_bytes),
        nodes_offset,
        membership_offset,
    )
    body = b"".join(
        (
            header,
            meta_bytes,
            b"\0" * (nodes_offset - HEADER_SIZE - len(meta_bytes)),
            node_bytes,
            member_bytes,
        )
    )
    return body + hashlib.sha256(body).digest()


def write_clef(model: Model) -> bytes:
    """The `.clef` bytes of *model* (identical to the bytes it was loaded from)."""
    extra = {
        k: v
        for k, v in model.metadata.items()
        if k not in {"name", "version", "features", "actions"}
    }
    return encode_clef(
        model.name,
        model.version,
        model.features,
        model.actions,
        model.nodes,
        model.membership,
        model.max_depth,
        extra,
    )


def load(path: str | os.PathLike[str]) -> Model:
    """Map and validate a `.clef` file."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < HEADER_SIZE + DIGEST_SIZE:
                head = fh.read(8)
                raise ClefFormatError(_short_reason(head, size))
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except ClefFormatError as exc:
        raise ClefFormatError(f"{path}: {exc}") from None
    except IsADirectoryError:
        raise ClefFormatError(f"{path}: is a directory, not a .clef file") from None
    except OSError as exc:
        raise ClefFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return _parse(buf, str(path))
    except ClefFormatError as exc:
        reason = str(exc)
    # Out of the except block the failed parse's frames, and their numpy views of the
    # mapping, are gone, so the mapping can be closed (closing it inside raised BufferError).
    with contextlib.suppress(BufferError):  # a view still alive: the mapping goes with it
        buf.close()
    raise ClefFormatError(f"{path}: {reason}")


def load_bytes(data: bytes | bytearray | memoryview, origin: str = "<bytes>") -> Model:
    """Validate `.clef` bytes held in memory."""
    if len(data) < HEADER_SIZE + DIGEST_SIZE:
        raise ClefFormatError(f"{origin}: {_short_reason(bytes(data[:8]), len(data))}")
    try:
        return _parse(data, origin)
    except ClefFormatError as exc:
        raise ClefFormatError(f"{origin}: {exc}") from None


def load_model(path: str | os.PathLike[str], clef_only: bool = False) -> Model:
    """Load a model from a `.clef` file or a JSON source file (chosen by content).

    With *clef_only* (the gate, a service reload), anything but a genuine `.clef` file (its
    magic bytes) is refused: a deploy check must vouch for the exact bytes the runtime maps.
    A pipe (``/dev/stdin``, a shell's ``<(...)``) cannot be mapped: it is read into memory.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(MAGIC))
            regular = stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
            rest = fh.read() if not regular and _looks_like_model(head, p) else None
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
            raise ClefFormatError(f"{path}: {_short_reason(head, len(head))}")
        data = head + rest
        if json_source:
            from clefprove.model.source import compile_source, parse_json_text

            return compile_source(parse_json_text(data, str(path)), origin=str(path))
        return load_bytes(data, origin=str(path))
    if json_source:
        from clefprove.model.source import load_source

        return load_source(p)
    return load(p)


def _looks_like_model(head: bytes, path: Path) -> bool:
    """Whether a stream's first bytes start a .clef file or JSON (never read /dev/zero whole)."""
    if head == MAGIC:
        return True
    stripped = head.lstrip()
    return stripped[:1] == b"{" or (path.suffix.lower() == ".json" and stripped[:1] in (b"", b"{"))


def _short_reason(head: bytes, size: int) -> str:
    if size == 0:
        return "empty file, not a .clef model"
    if not MAGIC.startswith(head[: len(MAGIC)]) and head[: len(MAGIC)] != MAGIC:
        return "not a .clef file (wrong magic bytes)"
    return f"truncated: {size} bytes, a .clef file has at least {HEADER_SIZE + DIGEST_SIZE}"


def _parse(buf: Any, origin: str) -> Model:
    size = len(buf)
    fields = HEADER.unpack_from(buf, 0)
    (
        magic,
        version,
        header_size,
        flags,
        n_trees,
        n_nodes,
        max_depth,
        member_size,
        meta_offset,
        meta_size,
        nodes_offset,
        member_offset,
    ) = fields
    if magic != MAGIC:
        raise ClefFormatError("not a .clef file (wrong magic bytes)")
    if version != FORMAT_VERSION:
        if version > FORMAT_VERSION:
            raise ClefFormatError(
                f"format version {version} is newer than this clefprove reads "
                f"(version {FORMAT_VERSION}); upgrade clefprove"
            )
        raise ClefFormatError(f"unsupported format version {version}")
    if header_size != HEADER_SIZE or flags != 0:
        raise ClefFormatError("corrupted header (bad header size or flags)")
    # The digest is checked first: after it, any defect is a crafted file, not corruption.
    body = memoryview(buf)[: size - DIGEST_SIZE]
    hasher = hashlib.sha256(body)
    body.release()
    digest = hasher.digest()
    if digest != bytes(buf[size - DIGEST_SIZE :]):
        raise ClefFormatError("SHA-256 digest mismatch: the file is truncated or corrupted")
    hasher.update(digest)  # the model's identity is the digest of the whole file (sha256sum's)
    if n_trees != 1:
        raise ClefFormatError(
            f"the file holds {n_trees} trees; this clefprove reads single-tree models only"
        )
    if n_nodes < 1:
        raise ClefFormatError("the tree has no nodes")
    expected_nodes = _align8(HEADER_SIZE + meta_size)
    if (
        meta_offset != HEADER_SIZE
        or nodes_offset != expected_nodes
        or member_offset != nodes_offset + n_nodes * NODE_DTYPE.itemsize
        or member_offset + member_size + DIGEST_SIZE != size
    ):
        raise ClefFormatError("section table does not match the file size (truncated or crafted)")
    if max_depth > MAX_TREE_DEPTH:
        raise ClefFormatError(f"declared depth {max_depth} exceeds the limit of {MAX_TREE_DEPTH}")

    meta = _parse_meta(bytes(buf[meta_offset : meta_offset + meta_size]))
    features, actions = meta["_features"], meta["_actions"]
    nodes = np.frombuffer(buf, dtype=NODE_DTYPE, count=n_nodes, offset=nodes_offset)
    membership = np.frombuffer(buf, dtype=np.uint8, count=member_size, offset=member_offset)
    if nodes.flags.writeable:  # bytes from memory: make the views read-only too
        nodes = nodes.view()
        nodes.flags.writeable = False
        membership = membership.view()
        membership.flags.writeable = False
    _validate_nodes(nodes, membership, features, len(actions), max_depth)
    return Model(
        name=meta["name"],
        version=meta["version"],
        features=features,
        actions=actions,
        nodes=nodes,
        membership=membership,
        max_depth=int(max_depth),
        sha256=hasher.hexdigest(),
        size=size,
        metadata={k: v for k, v in meta.items() if not k.startswith("_")},
    )


def _parse_meta(raw: bytes) -> dict[str, Any]:
    from clefprove.errors import ModelSourceError
    from clefprove.model.source import parse_actions, parse_features

    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: an int > 4300 digits
        raise ClefFormatError("metadata block is not valid JSON") from None
    if not isinstance(meta, dict):
        raise ClefFormatError("metadata block is not a JSON object")
    try:
        meta["_features"] = parse_features(meta.get("features"), "metadata.features")
        meta["_actions"] = parse_actions(meta.get("actions"), "metadata.actions")
    except ModelSourceError as exc:
        raise ClefFormatError(str(exc)) from None
    from clefprove.model.source import has_control_characters

    for key in ("name", "version"):
        if not isinstance(meta.get(key), str):
            raise ClefFormatError(f"metadata.{key} is missing or not a string")
        if has_control_characters(meta[key]):
            raise ClefFormatError(f"metadata.{key} holds a control character")
    return meta


def _validate_nodes(
    nodes: np.ndarray,
    membership: np.ndarray,
    features: tuple[Feature, ...],
    n_actions: int,
    max_depth: int,
) -> None:
    """Vectorised structural checks; raises on the first kind of defect found."""
    n = len(nodes)
    # The fields are read in place (strided views of the mapping) and in their stored widths:
    # comparisons with wider operands are cast by numpy in small buffers, so validating a
    # million-node file allocates a few booleans per node rather than int64 copies of every
    # field.  All stored fields are unsigned, so no comparison can wrap.
    idx = np.arange(n, dtype=np.uint32 if n <= 2**32 else np.int64)
    kind = nodes["kind"]
    left = nodes["left"]
    right = nodes["right"]
    aux = nodes["aux"]
    feat = nodes["feature"]
    value = nodes["value"]
    depth = nodes["depth"]

    def bad(mask: np.ndarray, what: str) -> None:
        if mask.any():
            raise ClefFormatError(f"node {int(np.flatnonzero(mask)[0])}: {what}")

    bad(kind > NodeKind.CATEGORICAL, "unknown node kind")
    leaf = kind == NodeKind.LEAF
    split = ~leaf
    bad(leaf & ((left != idx) | (right != idx)), "a leaf must point to itself")
    bad(leaf & (aux >= n_actions), "action index out of range")
    bad(leaf & ~((value >= 0.0) & (value <= 1.0)), "confidence is NaN or outside [0, 1]")
    bad(split & ((left >= n) | (right >= n)), "child index out of range")
    bad(split & ((left <= idx) | (right <= idx)), "child index does not come after its parent")
    bad(split & (left == right), "both children are the same node")
    bad(split & (feat >= len(features)), "feature index out of range")
    bad(depth > max_depth, f"depth exceeds the declared maximum {max_depth}")
    if depth[0] != 0:
        raise ClefFormatError("node 0: the root must have depth 0")

    parents = np.flatnonzero(split)
    children = np.concatenate((left[parents], right[parents]))
    refs = np.bincount(children, minlength=n) if children.size else np.zeros(n, dtype=np.int64)
    bad(refs > 1, "node has more than one parent")
    orphan = refs == 0
    orphan[0] = False
    bad(orphan, "node is not reachable from the root")
    # int16: a parent at depth 255 must not wrap its child's expected depth to 0.
    parent_depth = np.concatenate((depth[parents], depth[parents])).astype(np.int16)
    if np.any(depth[children] != parent_depth + 1):
        child = int(children[np.flatnonzero(depth[children] != parent_depth + 1)[0]])
        raise ClefFormatError(f"node {child}: depth does not match its parent's")
    if int(depth.max()) != max_depth:
        raise ClefFormatError(f"declared depth {max_depth} but the tree is {int(depth.max())} deep")

    ftypes = np.array([list(FeatureType).index(f.type) for f in features], dtype=np.int8)
    vocab = np.array([len(f.values) for f in features], dtype=np.int64)
    last = np.uint16(max(len(features) - 1, 0))
    safe_feat = np.where(split, np.minimum(feat, last), np.uint16(0))
    numeric = kind == NodeKind.NUMERIC
    cat_type = list(FeatureType).index(FeatureType.CATEGORICAL)
    bad(numeric & (ftypes[safe_feat] == cat_type), "numeric split on a categorical feature")
    bad(numeric & ~np.isfinite(value), "threshold is NaN or infinite")
    categorical = kind == NodeKind.CATEGORICAL
    bad(
        categorical & (ftypes[safe_feat] != cat_type),
        "categorical split on a non-categorical feature",
    )
    bad(categorical & (aux + vocab[safe_feat] > len(membership)), "categorical set out of range")
    if membership.size and int(membership.max()) > 1:
        raise ClefFormatError("categorical membership table holds values other than 0 and 1")
    for i in np.flatnonzero(categorical):
        f = features[int(feat[i])]
        row = membership[int(aux[i]) : int(aux[i]) + len(f.values)]
        if not row.any():
            raise ClefFormatError(f"node {int(i)}: empty categorical set")
