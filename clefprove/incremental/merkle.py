"""Content addresses for models, domains, subtrees and path contexts (all SHA-256).

* :func:`subtree_hashes` -- a Merkle hash of every subtree.  A node's canonical content is
  independent of feature and action *indices* (names are hashed, not positions) and of the
  features' types and bounds, so a subtree keeps its hash when a model is retrained around it or
  its domain is edited; the domain is a separate part of every cache key.

  * leaf: ``"L" + sha256(action name) + confidence bits``;
  * numeric split: ``"N" + sha256(feature name) + threshold bits + left hash + right hash``;
  * categorical split: ``"C" + sha256(feature name) + sha256(sorted value names of the set)``
    ``+ left hash + right hash``.

  ``-0.0`` is written as ``0.0`` (the two compare equal, so they decide the same).  Hashes are
  computed level by level from the deepest (children before parents) with numpy building the
  fixed-width records; the only per-node Python work is one ``hashlib`` call per split (leaf
  hashes are computed once per distinct (action, confidence)).

* :func:`domain_digest` -- what a cached proof depends on besides the subtree and its context:
  feature names in order, types, bounds and vocabularies; the actions in order; the severity
  order.  Defaults are left out: they do not change the set of inputs.
* :func:`content_digest` -- the whole model's content (domain with defaults, node records and
  membership table), for results that depend on all of it (counterexamples use defaults); for
  a model parsed from ``.clef`` bytes, the sha256 of those bytes (they hold all of it).
* :func:`context_digests` -- canonical digests of path-context boxes (see
  :mod:`clefprove.incremental.walk`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from clefprove.model.clef import parsed_digest
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model, NodeKind

HASH_BYTES = 32

#: Width of one split record: tag, name digest, threshold or set digest, two child hashes.
_SPLIT_WIDTH = 1 + 32 + 32 + 32 + 32


def _h(data: bytes | memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def _bits(values: np.ndarray) -> np.ndarray:
    """float64 values as little-endian bytes (k, 8), with -0.0 written as 0.0."""
    v = np.ascontiguousarray(values, dtype="<f8") + 0.0
    return v.view(np.uint8).reshape(-1, 8)


def _set_tokens(model: Model, idx: np.ndarray) -> np.ndarray:
    """(k, 32): digest of the sorted value names of each categorical split in *idx*."""
    nodes = model.nodes
    out = np.zeros((idx.size, HASH_BYTES), dtype=np.uint8)
    feat = nodes["feature"][idx].astype(np.int64)
    aux = nodes["aux"][idx].astype(np.int64)
    membership = np.asarray(model.membership, dtype=np.uint8)
    for fi in np.unique(feat).tolist():
        f = model.features[fi]
        rows = np.flatnonzero(feat == fi)
        table = membership[aux[rows][:, None] + np.arange(len(f.values))]
        seen: dict[bytes, np.ndarray] = {}
        for r, row in zip(rows.tolist(), table, strict=True):
            raw = row.tobytes()
            tok = seen.get(raw)
            if tok is None:
                names = sorted(v for v, bit in zip(f.values, raw, strict=True) if bit)
                tok = np.frombuffer(_h(b"set\0" + "\0".join(names).encode()), dtype=np.uint8)
                seen[raw] = tok
            out[r] = tok
    return out


def subtree_hashes(model: Model) -> np.ndarray:
    """(N, 32) uint8: the Merkle hash of the subtree rooted at every node (kept by the model)."""
    return model.derived.get(("incremental.hashes",), lambda: _subtree_hashes(model))


def leaf_hashes(model: Model, leaves: np.ndarray) -> np.ndarray:
    """(k, 32) uint8: the Merkle hashes of the given leaf nodes (the rows
    :func:`subtree_hashes` has for them), without hashing the rest of the tree."""
    nodes = model.nodes
    conf = np.ascontiguousarray(_bits(nodes["value"][leaves])).view("<u8").ravel()
    act = nodes["aux"][leaves].astype(np.int64)
    out = np.zeros((leaves.size, HASH_BYTES), dtype=np.uint8)
    seen: dict[tuple[int, int], np.ndarray] = {}
    for r, (a, c) in enumerate(zip(act.tolist(), conf.tolist(), strict=True)):
        h = seen.get((a, c))
        if h is None:
            token = _h(b"action\0" + model.actions[a].encode())
            h = np.frombuffer(_h(b"L" + token + int(c).to_bytes(8, "little")), dtype=np.uint8)
            seen[(a, c)] = h
        out[r] = h
    return out


def _subtree_hashes(model: Model) -> np.ndarray:
    nodes = model.nodes
    n = model.n_nodes
    kind = nodes["kind"]
    depth = nodes["depth"].astype(np.int64)
    out = np.zeros((n, HASH_BYTES), dtype=np.uint8)

    # Leaves: one hash per distinct (action, confidence bits).
    leaf = np.flatnonzero(kind == NodeKind.LEAF)
    conf = _bits(nodes["value"][leaf])
    act = nodes["aux"][leaf].astype(np.uint64)
    cbits = np.ascontiguousarray(conf).view("<u8").ravel()
    order = np.lexsort((cbits, act))
    a_s, c_s = act[order], cbits[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (a_s[1:] != a_s[:-1]) | (c_s[1:] != c_s[:-1])
    group = np.cumsum(first) - 1
    tokens = [_h(b"action\0" + a.encode()) for a in model.actions]
    starts = np.flatnonzero(first)
    leaf_h = np.frombuffer(
        b"".join(
            _h(b"L" + tokens[a] + int(c).to_bytes(8, "little"))
            for a, c in zip(a_s[starts].tolist(), c_s[starts].tolist(), strict=True)
        ),
        dtype=np.uint8,
    ).reshape(-1, HASH_BYTES)
    out[leaf[order]] = leaf_h[group]

    # Splits, deepest level first.
    feat_tok = np.frombuffer(
        b"".join(_h(b"feature\0" + f.name.encode()) for f in model.features), dtype=np.uint8
    ).reshape(-1, HASH_BYTES)
    # The children-independent part of every split record, built once for all splits; each
    # level then only gathers its children's hashes.
    splits = np.flatnonzero(kind != NodeKind.LEAF)
    left = nodes["left"].astype(np.int64)
    right = nodes["right"].astype(np.int64)
    static = np.zeros((splits.size, 65), dtype=np.uint8)
    is_cat = kind[splits] == NodeKind.CATEGORICAL
    static[:, 0] = np.where(is_cat, ord("C"), ord("N"))
    static[:, 1:33] = feat_tok[nodes["feature"][splits].astype(np.int64)]
    static[~is_cat, 33:41] = _bits(nodes["value"][splits[~is_cat]])
    if is_cat.any():
        static[is_cat, 33:65] = _set_tokens(model, splits[is_cat])
    sdepth = depth[splits]
    order = np.argsort(-sdepth, kind="stable")  # deepest level first
    bounds = np.flatnonzero(np.diff(sdepth[order])) + 1
    w = _SPLIT_WIDTH
    for rows in np.split(order, bounds) if splits.size else ():
        idx = splits[rows]
        rec = np.concatenate([static[rows], out[left[idx]], out[right[idx]]], axis=1)
        buf = memoryview(rec.tobytes())
        hashes = b"".join(_h(buf[k * w : (k + 1) * w]) for k in range(idx.size))
        out[idx] = np.frombuffer(hashes, dtype=np.uint8).reshape(-1, HASH_BYTES)
    out.setflags(write=False)
    return out


def hexes(hashes: np.ndarray) -> list[str]:
    """Hex strings of (k, 32) hash rows."""
    return [bytes(r).hex() for r in hashes]


def leaf_counts(model: Model) -> np.ndarray:
    """(N,) int64: the number of leaves below every node (1 for a leaf; kept by the model)."""
    return model.derived.get(("incremental.leaf_counts",), lambda: _leaf_counts(model))


def _leaf_counts(model: Model) -> np.ndarray:
    nodes = model.nodes
    kind = nodes["kind"]
    depth = nodes["depth"].astype(np.int64)
    count: np.ndarray = (kind == NodeKind.LEAF).astype(np.int64)
    split = kind != NodeKind.LEAF
    left = nodes["left"].astype(np.int64)
    right = nodes["right"].astype(np.int64)
    for d in range(int(depth.max()) if model.n_nodes else -1, -1, -1):
        idx = np.flatnonzero(split & (depth == d))
        count[idx] = count[left[idx]] + count[right[idx]]
    count.setflags(write=False)
    return count


def _f(x: float) -> str:
    return float(x).hex()


def _domain_json(model: Model | Ensemble, severity: Sequence[int] | None, defaults: bool) -> bytes:
    feats = []
    for f in model.features:
        item: list[object] = [f.name, str(f.type), _f(f.min), _f(f.max)]
        if f.type is FeatureType.CATEGORICAL:
            item.append(list(f.values))
        if defaults:
            item.append(_f(f.default))
        feats.append(item)
    doc = {
        "features": feats,
        "actions": list(model.actions),
        "severity": None if severity is None else [int(s) for s in severity],
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def domain_digest(model: Model | Ensemble, severity: Sequence[int] | None = None) -> str:
    """Digest of the features (names in order, types, bounds, vocabularies), actions, severity."""
    return hashlib.sha256(b"domain\0" + _domain_json(model, severity, False)).hexdigest()


def content_digest(model: Model) -> str:
    """Digest of everything a check result can depend on: domain with defaults, nodes, sets.

    A model the loader parsed from ``.clef`` bytes is named by the sha256 of those bytes,
    which the loader computed anyway and which determine all of the above (a second pass of
    sha256 over the node records costs 15 ms at 1M nodes, 17% of a one-leaf re-check); any
    other model by the digest of its records."""
    parsed = parsed_digest(model)
    if parsed is not None:
        return f"clef {parsed}"
    return model.derived.get(("incremental.content",), lambda: _content_digest(model))


def _content_digest(model: Model) -> str:
    h = hashlib.sha256(b"content\0")
    h.update(_domain_json(model, None, True))
    h.update(np.ascontiguousarray(model.nodes).data.cast("B"))
    h.update(np.ascontiguousarray(model.membership).data.cast("B"))
    return h.hexdigest()


def context_digests(
    hashes: np.ndarray, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]
) -> list[bytes]:
    """One key per row: sha256(subtree hash + canonical context box).

    The box is canonical because bounds are already tightened to each feature's value set
    (see :mod:`clefprove.geometry.boxes`): equal sets of inputs give equal bounds, whatever path
    reached them.  ``-0.0`` is written as ``0.0``; every empty box is written the same way.
    """
    k = hashes.shape[0]
    if k == 0:
        return []
    empty = np.any(lo > hi, axis=1)
    parts = [hashes, _bits(lo.reshape(-1)).reshape(k, -1), _bits(hi.reshape(-1)).reshape(k, -1)]
    for f in sorted(cats):
        m = cats[f]
        empty |= ~m.any(axis=1)
        parts.append(m.astype(np.uint8))
    rec = np.concatenate(parts, axis=1)
    rec[empty, HASH_BYTES:] = 0
    flag = empty.astype(np.uint8)[:, None]
    rec = np.ascontiguousarray(np.concatenate([flag, rec], axis=1))
    w = rec.shape[1]
    buf = memoryview(rec.tobytes())
    return [_h(buf[r * w : (r + 1) * w]) for r in range(k)]
