"""The binary ``.clef`` format (layout in docs/format.md): encoder and loader.

Version 1 holds one tree (:class:`Model`), version 2 a tree ensemble
(:class:`~clefprove.model.ensemble.Ensemble`); a single tree is always written as version 1, so
v1 files load and re-encode byte for byte as before.

Loading maps the file read-only and validates it in one linear, vectorised pass over the node
records (which stay in the mapping: the node array is a numpy view, not a copy).  Every defect
is a :class:`~clefprove.errors.ClefFormatError` with a one-line reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import mmap
import os
import struct
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from clefprove.errors import ClefFormatError, ClefproveError
from clefprove.fileio import write_atomic
from clefprove.model.ensemble import Arithmetic, Combine, Ensemble, Link, Rule
from clefprove.model.types import (
    CATEGORICAL_CODE,
    CATEGORICAL_SPLITS,
    LEAF_CODE,
    LEAF_NODES,
    MAX_TREE_DEPTH,
    NODE_DTYPE,
    NUMERIC_CODE,
    Feature,
    FeatureType,
    Model,
)

MAGIC = b"\x89CLEF\r\n\x1a"
FORMAT_VERSION = 1
#: The ensemble format; the newest version this clefprove reads.
ENSEMBLE_VERSION = 2
NEWEST_VERSION = ENSEMBLE_VERSION
#: Most trees an ensemble may hold.
MAX_TREES = 100_000
TREE_RECORD = struct.Struct("<IIII")  # first record, record count, max depth, leaf count
HEADER = struct.Struct("<8sHHIIIIIQQQQ")  # see docs/format.md
HEADER_SIZE = 64
DIGEST_SIZE = 32
assert HEADER.size == HEADER_SIZE


def _align8(n: int) -> int:
    return (n + 7) & ~7


def _meta_bytes(
    name: str,
    version: str,
    features: tuple[Feature, ...],
    actions: tuple[str, ...],
    extra: dict[str, Any] | None,
) -> bytes:
    """The metadata block of either version: canonical JSON, keys sorted."""
    from clefprove.model.features import feature_to_json

    meta = {
        "name": name,
        "version": version,
        "features": [feature_to_json(f) for f in features],
        "actions": list(actions),
        **(extra or {}),
    }
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


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
    meta_bytes = _meta_bytes(name, version, features, actions, extra)
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


def encode_ensemble(
    name: str,
    version: str,
    features: tuple[Feature, ...],
    actions: tuple[str, ...],
    nodes: np.ndarray,
    membership: np.ndarray,
    sizes: np.ndarray,
    depths: np.ndarray,
    values: np.ndarray,
    combine: Combine,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """Serialise an ensemble into `.clef` v2 bytes (deterministic; layout in docs/format.md)."""
    meta_bytes = _meta_bytes(
        name, version, features, actions, {**(extra or {}), "ensemble": combine.to_json()}
    )
    nodes_offset = _align8(HEADER_SIZE + len(meta_bytes))
    nodes = np.ascontiguousarray(nodes, dtype=NODE_DTYPE)
    node_bytes = nodes.tobytes()
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    leaf = nodes["kind"] == LEAF_CODE
    table = _tree_table(starts, np.asarray(sizes), np.asarray(depths), leaf)
    value_bytes = np.ascontiguousarray(values, dtype="<f8").tobytes()
    membership_offset = nodes_offset + len(node_bytes) + len(table) + len(value_bytes)
    member_bytes = np.ascontiguousarray(membership, dtype=np.uint8).tobytes()
    header = HEADER.pack(
        MAGIC,
        ENSEMBLE_VERSION,
        HEADER_SIZE,
        0,
        len(sizes),
        len(nodes),
        int(max(depths)),
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
            table,
            value_bytes,
            member_bytes,
        )
    )
    return body + hashlib.sha256(body).digest()


def _tree_table(
    starts: np.ndarray, sizes: np.ndarray, depths: np.ndarray, leaf: np.ndarray
) -> bytes:
    """The tree table: one :data:`TREE_RECORD` per tree (first record, record count, max
    depth, leaf count), all at once; ``struct.pack`` of each row when a field does not fit
    (which then raises as it always did)."""
    n = starts.size
    if n and sizes.min() > 0:
        leaves = np.add.reduceat(leaf.astype(np.int64), starts) if leaf.size else sizes * 0
        rows = np.stack((starts, sizes.astype(np.int64), depths.astype(np.int64), leaves), axis=1)
        if rows.min() >= 0 and rows.max() <= 0xFFFFFFFF:
            return rows.astype("<u4").tobytes()
    return b"".join(
        TREE_RECORD.pack(
            int(a), int(k), int(d), int(np.count_nonzero(leaf[int(a) : int(a) + int(k)]))
        )
        for a, k, d in zip(starts, sizes, depths, strict=True)
    )


def save(model: Model | Ensemble, path: str | os.PathLike[str]) -> None:
    """Write *model* (what ``from_sklearn``, ``import_model``, ``compile_source`` or ``load``
    return) to *path* as a `.clef` file, whole or not at all: the bytes it was loaded from."""
    write_atomic(path, write_clef(model))


def write_clef(model: Model | Ensemble) -> bytes:
    """The `.clef` bytes of *model* (identical to the bytes it was loaded from)."""
    if isinstance(model, Ensemble):
        extra = {
            k: v
            for k, v in model.metadata.items()
            if k not in {"name", "version", "features", "actions", "ensemble"}
        }
        return encode_ensemble(
            model.name,
            model.version,
            model.features,
            model.actions,
            model.nodes,
            model.membership,
            model.sizes,
            model.depths,
            model.values,
            model.combine,
            extra,
        )
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


def load(path: str | os.PathLike[str]) -> Model | Ensemble:
    """Map and validate a `.clef` file."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < HEADER_SIZE + DIGEST_SIZE:
                head = fh.read(8)
                raise ClefFormatError(short_reason(head, size))
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


def load_bytes(data: bytes | bytearray | memoryview, origin: str = "<bytes>") -> Model | Ensemble:
    """Validate `.clef` bytes held in memory."""
    return _parse_held(data, origin)


def load_encoded(
    data: bytes, features: tuple[Feature, ...], actions: tuple[str, ...], origin: str = "<bytes>"
) -> Model | Ensemble:
    """:func:`load_bytes` of the bytes this process just encoded (``encode_clef`` /
    ``encode_ensemble``) from *features* and *actions*, themselves the output of
    ``parse_features`` / ``parse_actions``: the metadata block is decoded but its features and
    actions are not parsed again (``parse_features(feature_to_json(f)) == f``: tests/model
    check the model equals the one :func:`load_bytes` gives); the digest, the header, the
    section table and the node validation run as for any file."""
    return _parse_held(data, origin, encoded=(features, actions))


def load_admitted(
    data: bytes | bytearray | memoryview,
    sha256: str,
    origin: str = "<bytes>",
    like: Model | Ensemble | None = None,
) -> Model | Ensemble:
    """The model of `.clef` bytes that :func:`load_bytes` accepted already (in another
    process: the service's gate worker), identified by *sha256*, the digest of these very
    bytes that the caller computed itself: the header and the metadata are read, the arrays
    are views of *data*, and the validation of the nodes and the digest is not run again.

    *like*: a model loaded before (the one served until now); when the metadata's
    ``features`` and ``actions`` are the same JSON text as its own (:func:`interface_text`:
    ``1``, ``1.0`` and ``true`` differ), its parsed features and actions are taken instead
    of parsing them again (``parse_features`` is a function of that text)."""
    return _parse_held(data, origin, sha256, like=like)


def interface_text(features: Any, actions: Any) -> str:
    """The raw ``features`` and ``actions`` of a metadata block as one JSON text: equal
    texts parse to equal features and actions."""
    return json.dumps([features, actions], allow_nan=True)


def _interface_of(model: Model | Ensemble) -> str:
    """:func:`interface_text` of a loaded model's metadata (kept by the model)."""
    meta = model.metadata
    return model.derived.get(
        ("clef.interface_text",), lambda: interface_text(meta.get("features"), meta.get("actions"))
    )


def _parse_held(
    data: bytes | bytearray | memoryview,
    origin: str,
    admitted: str | None = None,
    encoded: tuple[tuple[Feature, ...], tuple[str, ...]] | None = None,
    like: Model | Ensemble | None = None,
) -> Model | Ensemble:
    """:func:`_parse` of bytes held in memory, its errors prefixed with *origin*."""
    if len(data) < HEADER_SIZE + DIGEST_SIZE:
        raise ClefFormatError(f"{origin}: {short_reason(bytes(data[:8]), len(data))}")
    try:
        return _parse(data, origin, admitted, encoded, like)
    except ClefFormatError as exc:
        raise ClefFormatError(f"{origin}: {exc}") from None


#: The commands that take tree ensembles (named in the refusal of the others).
ENSEMBLE_COMMANDS = "compile, import, info, eval, check, gate (without --previous)"


def single_tree(model: Model | Ensemble, origin: str, what: str = "this command") -> Model:
    """*model* if it is a single tree; an ensemble is refused with a one-line reason."""
    if isinstance(model, Ensemble):
        raise ClefproveError(
            f"{origin}: a tree ensemble ({model.n_trees} trees); {what} supports single trees "
            f"only (ensembles work with {ENSEMBLE_COMMANDS})"
        )
    return model


def short_reason(head: bytes, size: int) -> str:
    """Why *size* bytes starting with *head* are not a `.clef` file (too short, wrong magic)."""
    if size == 0:
        return "empty file, not a .clef model"
    if not MAGIC.startswith(head[: len(MAGIC)]) and head[: len(MAGIC)] != MAGIC:
        return "not a .clef file (wrong magic bytes)"
    return f"truncated: {size} bytes, a .clef file has at least {HEADER_SIZE + DIGEST_SIZE}"


def _parse(
    buf: Any,
    origin: str,
    admitted: str | None = None,
    encoded: tuple[tuple[Feature, ...], tuple[str, ...]] | None = None,
    like: Model | Ensemble | None = None,
) -> Model | Ensemble:
    """*admitted*: the sha256 of bytes validated before (:func:`load_admitted`): the digest
    and the node validation are skipped.  *encoded*: the parsed features and actions the
    bytes were just encoded from (:func:`load_encoded`).  *like*: see :func:`load_admitted`."""
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
    if version not in (FORMAT_VERSION, ENSEMBLE_VERSION):
        if version > NEWEST_VERSION:
            raise ClefFormatError(
                f"format version {version} is newer than this clefprove reads "
                f"(versions {FORMAT_VERSION} to {NEWEST_VERSION}); upgrade clefprove"
            )
        raise ClefFormatError(f"unsupported format version {version}")
    if header_size != HEADER_SIZE or flags != 0:
        raise ClefFormatError("corrupted header (bad header size or flags)")
    if admitted is not None:
        sha256 = admitted
    else:
        # The digest is checked first: after it, any defect is a crafted file, not corruption.
        body = memoryview(buf)[: size - DIGEST_SIZE]
        hasher = hashlib.sha256(body)
        body.release()
        digest = hasher.digest()
        if digest != bytes(buf[size - DIGEST_SIZE :]):
            raise ClefFormatError("SHA-256 digest mismatch: the file is truncated or corrupted")
        hasher.update(digest)  # the model's identity: the digest of the whole file (sha256sum's)
        sha256 = hasher.hexdigest()
    if version == ENSEMBLE_VERSION:
        return _parse_ensemble(buf, fields, sha256, origin, admitted is None, encoded, like)
    if n_trees != 1:
        raise ClefFormatError(
            f"the file holds {n_trees} trees under format version 1, which holds one tree"
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

    meta = _parse_meta(bytes(buf[meta_offset : meta_offset + meta_size]), encoded, like)
    features, actions = meta["_features"], meta["_actions"]
    nodes = np.frombuffer(buf, dtype=NODE_DTYPE, count=n_nodes, offset=nodes_offset)
    membership = np.frombuffer(buf, dtype=np.uint8, count=member_size, offset=member_offset)
    if nodes.flags.writeable:  # bytes from memory: make the views read-only too
        nodes = nodes.view()
        nodes.flags.writeable = False
        membership = membership.view()
        membership.flags.writeable = False
    found = None
    if admitted is None:
        found = _validate_nodes(nodes, membership, features, len(actions), max_depth)
    return _with_digest(
        sha256,
        Model(
            name=meta["name"],
            version=meta["version"],
            features=features,
            actions=actions,
            nodes=nodes,
            membership=membership,
            max_depth=int(max_depth),
            sha256=sha256,
            size=size,
            metadata={k: v for k, v in meta.items() if not k.startswith("_")},
        ),
        meta,
        found,
    )


M = TypeVar("M", Model, Ensemble)

#: ``Model.derived`` key of the sha256 of the very bytes the model's arrays were parsed from
#: (set by the loader only: a model built or copied otherwise, e.g. by ``dataclasses.replace``,
#: starts with an empty ``derived`` and has none), see :func:`parsed_digest`.
PARSED_DIGEST = ("clef.parsed_sha256",)


def parsed_digest(model: Model) -> str | None:
    """The sha256 of the ``.clef`` bytes *model* was parsed from, when the loader parsed it
    (the bytes determine everything in it), else None."""
    return model.derived.get(PARSED_DIGEST, lambda: None)


def _with_digest(
    sha256: str,
    model: Model,
    meta: dict[str, Any],
    found: tuple[np.ndarray, frozenset[int]] | None,
) -> Model:
    model.derived.get(PARSED_DIGEST, lambda: sha256)
    if found is not None:
        leaves, categorical = found
        leaves.flags.writeable = False
        model.derived.get(LEAF_NODES, lambda: leaves)
        model.derived.get(CATEGORICAL_SPLITS, lambda: categorical)
    return _with_interface(meta, model)


def _with_interface(meta: dict[str, Any], model: M) -> M:
    """*model*, keeping the :func:`interface_text` its metadata was compared with (if it was:
    ``load_admitted(..., like=...)``), for the comparison with the next model."""
    text = meta.get("_interface")
    if text is not None:
        model.derived.get(("clef.interface_text",), lambda: text)
    return model


class _KeyTwice(Exception):
    """A metadata object names a key twice (its JSON text in the message)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: JSON parsers disagree on which of two equal keys wins, so a
    file naming one twice could show another tool another model (the JSON source refuses
    it too)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(json.dumps(key, allow_nan=False))
            seen.add(key)
    return out


def _parse_meta(
    raw: bytes,
    encoded: tuple[tuple[Feature, ...], tuple[str, ...]] | None = None,
    like: Model | Ensemble | None = None,
) -> dict[str, Any]:
    """The metadata block; *encoded*: the parsed features and actions it was encoded from
    (taken instead of parsing them again); *like*: a model whose parsed features and actions
    are taken when its metadata's are the same JSON text (:func:`load_admitted`)."""
    from clefprove.errors import ModelSourceError
    from clefprove.model.features import check_name_clashes, parse_actions, parse_features

    try:
        meta = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _KeyTwice as exc:
        raise ClefFormatError(f"metadata block names the key {exc} twice") from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: an int > 4300 digits
        raise ClefFormatError("metadata block is not valid JSON") from None
    if not isinstance(meta, dict):
        raise ClefFormatError("metadata block is not a JSON object")
    if encoded is None and like is not None:
        text = interface_text(meta.get("features"), meta.get("actions"))
        if text == _interface_of(like):
            encoded = (like.features, like.actions)
        meta["_interface"] = text  # kept by the model (_with_interface): the next one's like
    try:
        if encoded is not None:
            meta["_features"], meta["_actions"] = encoded
        else:
            meta["_features"] = parse_features(meta.get("features"), "metadata.features")
            meta["_actions"] = parse_actions(meta.get("actions"), "metadata.actions")
        check_name_clashes(meta["_features"], meta["_actions"])
    except ModelSourceError as exc:
        raise ClefFormatError(str(exc)) from None
    from clefprove.model.features import unprintable

    for key in ("name", "version"):
        if not isinstance(meta.get(key), str):
            raise ClefFormatError(f"metadata.{key} is missing or not a string")
        problem = unprintable(meta[key])
        if problem is not None:
            raise ClefFormatError(f"metadata.{key} holds {problem}")
    return meta


def _parse_ensemble(
    buf: Any,
    fields: tuple[Any, ...],
    sha256: str,
    origin: str,
    validate: bool = True,
    encoded: tuple[tuple[Feature, ...], tuple[str, ...]] | None = None,
    like: Model | Ensemble | None = None,
) -> Ensemble:
    """The rest of a v2 (ensemble) file, after magic, version, flags and digest (*validate*
    False: bytes validated before, :func:`load_admitted`)."""
    size = len(buf)
    (_, _, _, _, n_trees, n_nodes, max_depth, member_size, meta_offset, meta_size) = fields[:10]
    nodes_offset, member_offset = fields[10], fields[11]
    if not 1 <= n_trees <= MAX_TREES:
        raise ClefFormatError(f"an ensemble holds 1 to {MAX_TREES} trees, not {n_trees}")
    if n_nodes < n_trees:
        raise ClefFormatError(f"{n_nodes} nodes cannot make {n_trees} trees")
    if max_depth > MAX_TREE_DEPTH:
        raise ClefFormatError(f"declared depth {max_depth} exceeds the limit of {MAX_TREE_DEPTH}")
    table_offset = nodes_offset + n_nodes * NODE_DTYPE.itemsize
    values_offset = table_offset + n_trees * TREE_RECORD.size
    if (
        meta_offset != HEADER_SIZE
        or nodes_offset != _align8(HEADER_SIZE + meta_size)
        or member_offset < values_offset
        or member_offset + member_size + DIGEST_SIZE != size
    ):
        raise ClefFormatError("section table does not match the file size (truncated or crafted)")
    meta = _parse_meta(bytes(buf[meta_offset : meta_offset + meta_size]), encoded, like)
    features, actions = meta["_features"], meta["_actions"]
    combine = parse_combine(meta.get("ensemble"), len(actions))
    if member_offset - values_offset != 0 and (member_offset - values_offset) % (
        8 * combine.outputs
    ):
        raise ClefFormatError("section table does not match the file size (truncated or crafted)")
    n_values = (member_offset - values_offset) // (8 * combine.outputs)
    table = np.frombuffer(buf, dtype="<u4", count=4 * n_trees, offset=table_offset).reshape(
        n_trees, 4
    )
    starts, sizes, depths, leaves = (table[:, k].astype(np.int64) for k in range(4))
    if starts[0] != 0 or np.any(sizes < 1) or np.any(starts[1:] != (starts + sizes)[:-1]):
        raise ClefFormatError("tree table: trees must follow each other without gaps")
    if int(starts[-1] + sizes[-1]) != n_nodes:
        raise ClefFormatError("tree table does not cover the node array")
    if int(leaves.sum()) != n_values:
        raise ClefFormatError(
            f"tree table counts {int(leaves.sum())} leaves but the value table has {n_values} rows"
        )
    if np.any(depths > max_depth) or int(depths.max()) != max_depth:
        raise ClefFormatError(f"tree table depths do not match the declared depth {max_depth}")
    nodes = np.frombuffer(buf, dtype=NODE_DTYPE, count=n_nodes, offset=nodes_offset)
    values = np.frombuffer(
        buf, dtype="<f8", count=n_values * combine.outputs, offset=values_offset
    ).reshape(n_values, combine.outputs)
    membership = np.frombuffer(buf, dtype=np.uint8, count=member_size, offset=member_offset)
    if nodes.flags.writeable:
        nodes, values, membership = nodes.view(), values.view(), membership.view()
        for a in (nodes, values, membership):
            a.flags.writeable = False
    if validate:
        _validate_ensemble(nodes, membership, values, features, combine, starts, sizes, depths,
                           leaves)  # fmt: skip
    ensemble = Ensemble(
        name=meta["name"],
        version=meta["version"],
        features=features,
        actions=actions,
        nodes=nodes,
        membership=membership,
        roots=starts,
        sizes=sizes,
        depths=depths,
        values=values,
        combine=combine,
        sha256=sha256,
        size=size,
        metadata={k: v for k, v in meta.items() if not k.startswith("_")},
    )
    return _with_interface(meta, ensemble)


def _validate_ensemble(
    nodes: np.ndarray,
    membership: np.ndarray,
    values: np.ndarray,
    features: tuple[Feature, ...],
    combine: Combine,
    starts: np.ndarray,
    sizes: np.ndarray,
    depths: np.ndarray,
    leaves: np.ndarray,
) -> None:
    n_trees = len(starts)
    first_leaf = np.concatenate(([0], np.cumsum(leaves)[:-1]))
    _validate_trees(nodes, membership, features, starts, sizes, depths)
    leaf_counts = np.add.reduceat((nodes["kind"] == LEAF_CODE).astype(np.int64), starts)
    if np.any(leaf_counts != leaves):
        t = int(np.flatnonzero(leaf_counts != leaves)[0])
        raise ClefFormatError(f"tree {t}: leaf count does not match the tree table")
    _validate_values(values, combine, n_trees, leaves)
    # Bounded sums: no order of adding the trees' values can overflow (or lose the scale
    # the verifier's rounding bounds assume).
    # The same bound after the divisor, which may be below 1.
    bound = max(abs(b) for b in combine.base)
    if values.size:
        top = np.maximum.reduceat(np.abs(values).max(axis=1), first_leaf)
        bound += float(top.sum())
    if bound > 2.0**100 or bound / combine.divisor > 2.0**100:
        raise ClefFormatError(
            "leaf values are too large: their sum (divided by the divisor) could overflow"
        )


_COMBINE_KEYS = {"outputs", "base", "arithmetic", "link", "rule", "divisor", "scale"}


def parse_combine(raw: Any, n_actions: int, path: str = "metadata.ensemble") -> Combine:
    """Validate the ``ensemble`` object (how leaf values combine) against the actions."""
    if not isinstance(raw, dict):
        raise ClefFormatError(f"{path} is missing or not an object")
    unknown = sorted(set(raw) - _COMBINE_KEYS)
    if unknown or set(raw) != _COMBINE_KEYS:
        what = f"unknown key '{unknown[0]}'" if unknown else "missing keys"
        raise ClefFormatError(f"{path}: {what} (expected {', '.join(sorted(_COMBINE_KEYS))})")
    try:
        arithmetic = Arithmetic(raw["arithmetic"])
        link = Link(raw["link"])
        rule = Rule(raw["rule"])
    except (ValueError, TypeError):
        raise ClefFormatError(f"{path}: unknown arithmetic, link or rule") from None
    outputs = raw["outputs"]
    if not isinstance(outputs, int) or isinstance(outputs, bool) or not 1 <= outputs <= 65535:
        raise ClefFormatError(f"{path}.outputs must be a whole number in [1, 65535]")
    base = raw["base"]
    if not isinstance(base, list) or len(base) != outputs:
        raise ClefFormatError(f"{path}.base must list one number per output ({outputs})")
    nums = [*base, raw["divisor"], raw["scale"]]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in nums):
        raise ClefFormatError(f"{path}: base, divisor and scale must be numbers")
    try:
        floats = [float(v) for v in nums]
    except OverflowError:  # a whole number beyond float64
        floats = [math.inf]
    if not all(np.isfinite(floats)):
        raise ClefFormatError(f"{path}: base, divisor and scale must be finite")
    divisor, scale = floats[-2], floats[-1]
    if not (divisor > 0 and scale > 0):
        raise ClefFormatError(f"{path}: divisor and scale must be positive")
    # The evaluator divides and scales in the arithmetic's precision: a divisor or scale it
    # rounds to 0 (or a subnormal) or to infinity makes 0 / 0 or 0 * inf, a NaN decision.
    dt = arithmetic.dtype
    tiny, top = float(np.finfo(dt).tiny), float(np.finfo(dt).max)
    if not all(tiny <= v <= top for v in (divisor, scale)):
        raise ClefFormatError(
            f"{path}: divisor and scale must be normal {arithmetic} numbers "
            f"(between {tiny:g} and {top:g})"
        )
    if link.single:
        if outputs != 1 or n_actions != 2:
            raise ClefFormatError(f"{path}: a {link} link has one output and two actions")
    elif outputs != n_actions or outputs < 2:
        raise ClefFormatError(f"{path}: a {link} link has one output per action (>= 2)")
    if rule is Rule.HALF and link is not Link.LOGISTIC:
        raise ClefFormatError(f"{path}: rule 'half' needs a logistic link")
    if rule in (Rule.POSITIVE, Rule.SCORE_HALF) and not link.single:
        raise ClefFormatError(f"{path}: rule '{rule}' needs a one-output link")
    if arithmetic is Arithmetic.FLOAT32 and any(
        not abs(v) <= top or float(np.float32(v)) != v for v in floats[:outputs]
    ):
        raise ClefFormatError(f"{path}.base: float32 arithmetic needs float32 values")
    return Combine(outputs, tuple(floats[:outputs]), arithmetic, link, rule, divisor, scale)


def _validate_values(
    values: np.ndarray, combine: Combine, n_trees: int, leaves: np.ndarray
) -> None:
    if not np.all(np.isfinite(values)):
        row = int(np.flatnonzero(~np.isfinite(values).all(axis=1))[0])
        raise ClefFormatError(f"leaf value row {row} is NaN or infinite")
    if combine.arithmetic is Arithmetic.FLOAT32:
        with np.errstate(over="ignore"):
            off = values.astype(np.float32).astype(np.float64) != values
        if off.any():
            row = int(np.flatnonzero(off.any(axis=1))[0])
            raise ClefFormatError(f"leaf value row {row} is not a float32 value")
    if combine.link is Link.IDENTITY:
        # Averaged probabilities: each in [0, 1], so the decision's confidence is too.
        if np.any((values < 0) | (values > 1)) or any(b != 0 for b in combine.base):
            raise ClefFormatError("an identity link needs leaf values in [0, 1] and base 0")
        if combine.divisor == 1 and values.size and n_trees:
            # Shares already divided by the number of trees (onnxruntime's random forests):
            # the largest sum of one value per tree must stay a probability.
            starts = np.concatenate(([0], np.cumsum(leaves)[:-1])).astype(np.intp)
            top = np.maximum.reduceat(values, starts, axis=0).sum(axis=0)
            if np.any(top > 1.0 + 1e-5):
                raise ClefFormatError(
                    "an identity link with divisor 1 needs per-tree shares summing to at most 1"
                )
        elif combine.divisor != n_trees:
            raise ClefFormatError(
                "an identity link averages: the divisor is the number of trees (or 1 for "
                "shares already divided)"
            )


def _validate_trees(
    nodes: np.ndarray,
    membership: np.ndarray,
    features: tuple[Feature, ...],
    starts: np.ndarray,
    sizes: np.ndarray,
    depths: np.ndarray,
) -> None:
    """The checks of :func:`_validate_nodes` on every tree of an ensemble at once (tree-local
    child indices; a leaf's ``aux`` is its rank among all leaves, its ``value`` 0); a defect
    is named ``tree T: node I`` with I tree-local."""
    n = len(nodes)
    tree = np.repeat(np.arange(starts.size), sizes)
    start = starts[tree]
    size = sizes[tree]
    idx = np.arange(n, dtype=np.int64) - start  # tree-local index of every record
    kind = nodes["kind"]
    left = nodes["left"].astype(np.int64)
    right = nodes["right"].astype(np.int64)
    aux = nodes["aux"].astype(np.int64)
    feat = nodes["feature"]
    value = nodes["value"]
    depth = nodes["depth"].astype(np.int64)

    def where(g: int) -> str:
        return f"tree {int(tree[g])}: node {int(idx[g])}"

    def bad(mask: np.ndarray, what: str) -> None:
        if mask.any():
            raise ClefFormatError(f"{where(int(np.flatnonzero(mask)[0]))}: {what}")

    bad(kind > CATEGORICAL_CODE, "unknown node kind")
    leaf = kind == LEAF_CODE
    split = ~leaf
    bad(leaf & ((left != idx) | (right != idx)), "a leaf must point to itself")
    rank = np.cumsum(leaf, dtype=np.int64) - 1
    bad(leaf & (aux != rank), "leaf value row out of order")
    bad(leaf & (value != 0.0), "an ensemble leaf's value field must be 0")
    bad(split & ((left >= size) | (right >= size)), "child index out of range")
    bad(split & ((left <= idx) | (right <= idx)), "child index does not come after its parent")
    bad(split & (left == right), "both children are the same node")
    bad(split & (feat >= len(features)), "feature index out of range")
    limit = depths[tree]
    bad(depth > limit, "depth exceeds the tree's declared maximum")
    bad((idx == 0) & (depth != 0), "the root must have depth 0")
    parents = np.flatnonzero(split)
    children = np.concatenate((left[parents], right[parents])) + np.concatenate(
        (start[parents], start[parents])
    )
    refs = np.bincount(children, minlength=n) if children.size else np.zeros(n, dtype=np.int64)
    bad(refs > 1, "node has more than one parent")
    bad((refs == 0) & (idx != 0), "node is not reachable from the root")
    parent_depth = np.concatenate((depth[parents], depth[parents]))
    off = depth[children] != parent_depth + 1
    if off.any():
        raise ClefFormatError(
            f"{where(int(children[np.flatnonzero(off)[0]]))}: depth does not match its parent's"
        )
    deepest = np.maximum.reduceat(depth, starts)
    if np.any(deepest != depths):
        t = int(np.flatnonzero(deepest != depths)[0])
        raise ClefFormatError(
            f"tree {t}: declared depth {int(depths[t])} but the tree is {int(deepest[t])} deep"
        )
    _check_splits(kind, feat, value, aux, split, membership, features, where)


def _check_splits(
    kind: np.ndarray,
    feat: np.ndarray,
    value: np.ndarray,
    aux: np.ndarray,
    split: np.ndarray,
    membership: np.ndarray,
    features: tuple[Feature, ...],
    where: Callable[[int], str],
) -> np.ndarray:
    """The checks of every split against its feature (shared by v1 trees and v2 ensembles);
    *where* names node *i* in a message.  Returns the categorical splits."""

    def bad(mask: np.ndarray, what: str) -> None:
        if mask.any():
            raise ClefFormatError(f"{where(int(np.flatnonzero(mask)[0]))}: {what}")

    ftypes, vocab = _feature_arrays(features)
    last = np.uint16(max(len(features) - 1, 0))
    safe_feat = np.where(split, np.minimum(feat, last), np.uint16(0))
    numeric = kind == NUMERIC_CODE
    cat_type = list(FeatureType).index(FeatureType.CATEGORICAL)
    bad(numeric & (ftypes[safe_feat] == cat_type), "numeric split on a categorical feature")
    bad(numeric & ~np.isfinite(value), "threshold is NaN or infinite")
    categorical = kind == CATEGORICAL_CODE
    bad(
        categorical & (ftypes[safe_feat] != cat_type),
        "categorical split on a non-categorical feature",
    )
    # docs/format.md: a categorical split's value field is 0 (nothing reads it; a NaN there
    # would be the one NaN a validated model holds).
    bad(categorical & (value != 0), "categorical split with a value field other than 0")
    bad(categorical & (aux + vocab[safe_feat] > len(membership)), "categorical set out of range")
    if membership.size and int(membership.max()) > 1:
        raise ClefFormatError("categorical membership table holds values other than 0 and 1")
    cat_nodes = np.flatnonzero(categorical)
    if cat_nodes.size:
        # Members per set from running totals (every set lies inside the table, checked above).
        total = np.concatenate(([0], np.cumsum(membership, dtype=np.int64)))
        start = aux[cat_nodes].astype(np.int64)
        members = total[start + vocab[safe_feat[cat_nodes]]] - total[start]
        empty = members == 0
        if empty.any():
            raise ClefFormatError(
                f"{where(int(cat_nodes[np.argmax(empty)]))}: empty categorical set"
            )
    return cat_nodes


def _feature_arrays(features: tuple[Feature, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per feature: its type's index in FeatureType and its vocabulary size."""
    return (
        np.array([_TYPE_INDEX[f.type] for f in features], dtype=np.int8),
        np.array([len(f.values) for f in features], dtype=np.int64),
    )


#: Each feature type's index in FeatureType.
_TYPE_INDEX = {t: i for i, t in enumerate(FeatureType)}


def _validate_nodes(
    nodes: np.ndarray,
    membership: np.ndarray,
    features: tuple[Feature, ...],
    n_actions: int,
    max_depth: int,
) -> tuple[np.ndarray, frozenset[int]]:
    """Vectorised structural checks; raises on the first kind of defect found.  Returns the
    leaf nodes and the categorical features some split tests."""
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

    bad(kind > CATEGORICAL_CODE, "unknown node kind")
    leaf = kind == LEAF_CODE
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

    cat_nodes = _check_splits(
        kind, feat, value, aux, split, membership, features, lambda i: f"node {i}"
    )
    # What later stages would scan the records for again, found on the way.
    return np.flatnonzero(leaf), frozenset(feat[cat_nodes].tolist())
