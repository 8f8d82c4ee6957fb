"""Re-checking against the previous version: align node arrays, reuse per-leaf verdicts.

After a check, the cache keeps a *snapshot* of the model version it decided: its node records,
membership table and leaf boxes (:class:`TreeSnapshot`), and per invariant the outcome of every
leaf (status and how it was decided).  The next check of another version of the model:

1. **aligns** the two trees from the root, level by level with numpy (:func:`align`): a pair
   of nodes at the same position whose records are equal (same kind; same feature and
   threshold bits, or the same categorical set; same action and confidence bits) descends into
   both children; the first unequal pair on a path makes the new node a *changed root*.  A new
   leaf reached through equal pairs only has exactly the old leaf's path conditions, hence the
   same box;
2. **assembles** the new model's leaf boxes from the old rows of the unchanged leaves and
   :func:`~clefprove.verify.boxes.leaf_boxes` below each changed root, started from that
   root's context box (:func:`assemble_boxes`): the same arrays a fresh ``leaf_boxes`` gives;
3. **reuses** the outcome of every unchanged leaf that is a fact about its box: proved safe
   (by the box stages or by the solver), or violated as decided by the box stages, whose
   witness is a function of the box and is recomputed.  Everything else -- changed leaves,
   leaves the solver found violated (a solver's witness depends on the queries it answered
   before), unknown ones -- is decided by :func:`clefprove.verify.engine.decide` as in a fresh
   run (:func:`reuse`).

Why that is sound: the verdict on a leaf is a function of its box, its action and confidence,
the invariant and the domain.  The box is a function of the path's split records and the
domain; the alignment compares the records exactly; the snapshot's key holds the invariant's
digest, the domain digest and the clefprove version (see :mod:`clefprove.incremental.walk`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from clefprove.model.types import NODE_DTYPE, Model, NodeKind
from clefprove.verify import engine as eg
from clefprove.verify.boxes import LeafBoxes, context_box, leaf_boxes, tables

_MAGIC = b"CLFSNAP1"
_HEAD = struct.Struct("<8sIIIII")  # magic, nodes, membership bytes, leaves, columns, cats


@dataclass(frozen=True, eq=False)
class TreeSnapshot:
    """What the cache keeps of a model version: node records, membership, leaf boxes."""

    nodes: np.ndarray  # NODE_DTYPE
    membership: np.ndarray  # uint8
    boxes: LeafBoxes


def encode_tree(model: Model, boxes: LeafBoxes) -> bytes:
    """*model*'s snapshot as bytes (see :func:`decode_tree`)."""
    cats = sorted(boxes.cats)
    parts = [
        _HEAD.pack(
            _MAGIC,
            model.n_nodes,
            model.membership.size,
            boxes.size,
            boxes.lo.shape[1],
            len(cats),
        ),
        np.array([(f, boxes.cats[f].shape[1]) for f in cats], dtype="<u4").tobytes(),
        np.ascontiguousarray(model.nodes).tobytes(),
        np.ascontiguousarray(model.membership, dtype=np.uint8).tobytes(),
        np.ascontiguousarray(boxes.leaves, dtype="<i8").tobytes(),
        np.ascontiguousarray(boxes.lo, dtype="<f8").tobytes(),
        np.ascontiguousarray(boxes.hi, dtype="<f8").tobytes(),
    ]
    parts += [np.ascontiguousarray(boxes.cats[f], dtype=np.uint8).tobytes() for f in cats]
    return b"".join(parts)


def decode_tree(blob: bytes) -> TreeSnapshot:
    """The snapshot in *blob*; ValueError when it is not one (sizes are all checked)."""
    if len(blob) < _HEAD.size:
        raise ValueError("short tree snapshot")
    magic, n_nodes, n_member, n_leaves, n_cols, n_cats = _HEAD.unpack_from(blob)
    if magic != _MAGIC:
        raise ValueError("not a tree snapshot")
    pos = _HEAD.size

    def take(dtype: str | np.dtype, count: int) -> np.ndarray:
        nonlocal pos
        dt = np.dtype(dtype)
        end = pos + dt.itemsize * count
        if end > len(blob):
            raise ValueError("truncated tree snapshot")
        arr = np.frombuffer(blob, dtype=dt, count=count, offset=pos)
        pos = end
        return arr

    widths = take("<u4", 2 * n_cats).reshape(n_cats, 2)
    nodes = take(NODE_DTYPE, n_nodes)
    membership = take(np.uint8, n_member)
    leaves = take("<i8", n_leaves)
    lo = take("<f8", n_leaves * n_cols).reshape(n_leaves, n_cols)
    hi = take("<f8", n_leaves * n_cols).reshape(n_leaves, n_cols)
    cats = {
        int(f): take(np.uint8, n_leaves * int(w)).reshape(n_leaves, int(w)).astype(bool)
        for f, w in widths
    }
    if pos != len(blob):
        raise ValueError("trailing bytes in tree snapshot")
    if n_leaves and (leaves.min() < 0 or leaves.max() >= n_nodes):
        raise ValueError("leaf index out of range in tree snapshot")
    if not np.array_equal(leaves, np.flatnonzero(nodes["kind"] == NodeKind.LEAF)):
        raise ValueError("tree snapshot boxes do not cover its leaves")
    feasible = np.all(lo <= hi, axis=1)
    for m in cats.values():
        feasible &= m.any(axis=1)
    actions = nodes["aux"][leaves].astype(np.int64)
    return TreeSnapshot(nodes, membership, LeafBoxes(leaves, lo, hi, cats, actions, feasible))


@dataclass(frozen=True, eq=False)
class Alignment:
    """How a new model's leaves relate to a snapshot's."""

    clean_new: np.ndarray  # new leaf nodes whose path and record are unchanged (sorted)
    clean_old_rows: np.ndarray  # their rows in the snapshot's boxes
    changed_roots: np.ndarray  # topmost new nodes whose subtree differs

    @property
    def unchanged(self) -> bool:
        return self.changed_roots.size == 0


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype="<f8").view(np.int64)


class _Columns:
    """The node fields :func:`align` compares, as plain arrays (value as float64 bits)."""

    def __init__(self, nodes: np.ndarray, membership: np.ndarray) -> None:
        self.kind = nodes["kind"]
        self.feature = nodes["feature"]
        self.aux = nodes["aux"]
        self.left = nodes["left"].astype(np.int64)
        self.right = nodes["right"].astype(np.int64)
        self.bits = _bits(nodes["value"])
        self.membership = membership


def _equal_records(
    a: _Columns, pa: np.ndarray, b: _Columns, pb: np.ndarray, vocab: list[int]
) -> np.ndarray:
    """(k,) bool: node ``pa[i]`` of *a* has the record of node ``pb[i]`` of *b* (children
    aside): same kind; leaves the same action and confidence bits; numeric splits the same
    feature and threshold bits; categorical splits the same feature and set."""
    kind = a.kind[pa]
    leaf = kind == NodeKind.LEAF
    same = (kind == b.kind[pb]) & np.where(
        leaf, a.aux[pa] == b.aux[pb], a.feature[pa] == b.feature[pb]
    )
    same &= (kind == NodeKind.CATEGORICAL) | (a.bits[pa] == b.bits[pb])
    cat = np.flatnonzero(same & (kind == NodeKind.CATEGORICAL))
    if cat.size:
        feats = a.feature[pa[cat]]
        for f in np.unique(feats).tolist():
            rows = cat[feats == f]
            span = np.arange(vocab[f])
            ma = a.membership[a.aux[pa[rows]].astype(np.int64)[:, None] + span]
            mb = b.membership[b.aux[pb[rows]].astype(np.int64)[:, None] + span]
            same[rows] = (ma == mb).all(axis=1)
    return same


def align(old: TreeSnapshot, model: Model) -> Alignment:
    """Pair the nodes of *model* with the snapshot's from the root (see the module docstring).

    Assumes the same domain (the caller's key guarantees it): feature and action indices mean
    the same in both, and each categorical feature has the same vocabulary."""
    a = _Columns(model.nodes, model.membership)
    b = _Columns(old.nodes, old.membership)
    vocab = [len(f.values) for f in model.features]
    if (
        a.kind.size == b.kind.size
        and np.array_equal(a.kind, b.kind)
        and np.array_equal(a.left, b.left)
        and np.array_equal(a.right, b.right)
    ):
        return _align_same_shape(old, model, a, b, vocab)
    pn = np.zeros(1, dtype=np.int64)
    po = np.zeros(1, dtype=np.int64)
    clean_new: list[np.ndarray] = []
    clean_old: list[np.ndarray] = []
    changed: list[np.ndarray] = []
    while pn.size:
        same = _equal_records(a, pn, b, po, vocab)
        if not same.all():
            changed.append(pn[~same])
        leaf = a.kind[pn] == NodeKind.LEAF
        ok_leaf = same & leaf
        if ok_leaf.any():
            clean_new.append(pn[ok_leaf])
            clean_old.append(po[ok_leaf])
        split = same & ~leaf
        pn, po = pn[split], po[split]
        pn = np.concatenate([a.left[pn], a.right[pn]])
        po = np.concatenate([b.left[po], b.right[po]])
    cn = np.concatenate(clean_new) if clean_new else np.empty(0, np.int64)
    co = np.concatenate(clean_old) if clean_old else np.empty(0, np.int64)
    order = np.argsort(cn, kind="stable")
    roots = np.sort(np.concatenate(changed)) if changed else np.empty(0, np.int64)
    return Alignment(cn[order], _rows_of(old, co[order]), roots)


def _rows_of(old: TreeSnapshot, leaves: np.ndarray) -> np.ndarray:
    rows = np.searchsorted(old.boxes.leaves, leaves)
    if leaves.size and (
        rows.max() >= old.boxes.size or not np.array_equal(old.boxes.leaves[rows], leaves)
    ):
        raise ValueError("tree snapshot boxes do not match its nodes")
    return rows


def _align_same_shape(
    old: TreeSnapshot, model: Model, a: _Columns, b: _Columns, vocab: list[int]
) -> Alignment:
    """Both trees have the same shape (kinds and child links), so node i pairs with node i:
    one vectorised comparison of all records, then a walk below the differing ones only."""
    every = np.arange(a.kind.size)
    differ = np.flatnonzero(~_equal_records(a, every, b, every, vocab))
    if not differ.size:
        return Alignment(old.boxes.leaves, np.arange(old.boxes.size), differ)
    # Topmost differing nodes: those without a differing ancestor.
    marked = set(differ.tolist())
    parent = tables(model).parent
    roots = []
    for n in differ.tolist():
        p = int(parent[n])
        while p >= 0 and p not in marked:
            p = int(parent[p])
        if p < 0:
            roots.append(n)
    below: list[np.ndarray] = []
    fr = np.array(roots, dtype=np.int64)
    while fr.size:
        leaf = a.kind[fr] == NodeKind.LEAF
        below.append(fr[leaf])
        fr = fr[~leaf]
        fr = np.concatenate([a.left[fr], a.right[fr]])
    dirty = np.concatenate(below)
    clean = old.boxes.leaves[~np.isin(old.boxes.leaves, dirty)]
    return Alignment(clean, _rows_of(old, clean), np.array(roots, dtype=np.int64))


def assemble_boxes(model: Model, old: TreeSnapshot, al: Alignment) -> LeafBoxes:
    """The leaf boxes of *model*: old rows where the leaf is unchanged, fresh ones below every
    changed root; equal to ``leaf_boxes(model)``."""
    keys = sorted(tables(model).cat_split)
    leaves = np.flatnonzero(model.nodes["kind"] == NodeKind.LEAF)
    n, width = leaves.size, old.boxes.lo.shape[1]
    lo = np.empty((n, width))
    hi = np.empty((n, width))
    cats = {f: np.empty((n, len(model.features[f].values)), dtype=bool) for f in keys}
    filled = np.zeros(n, dtype=bool)

    def put(rows_of: np.ndarray, b_lo, b_hi, b_cats) -> None:  # type: ignore[no-untyped-def]
        at = np.searchsorted(leaves, rows_of)
        if rows_of.size and (at.max() >= n or not np.array_equal(leaves[at], rows_of)):
            raise ValueError("changed subtree leaves do not match the model")
        if np.any(filled[at]):
            raise ValueError("a leaf is both changed and unchanged")
        filled[at] = True
        lo[at], hi[at] = b_lo, b_hi
        for f in keys:
            m = b_cats.get(f)
            # Absent mask: the path never tests f (the old tree did not split on it).
            cats[f][at] = True if m is None else m

    r = al.clean_old_rows
    put(
        al.clean_new, old.boxes.lo[r], old.boxes.hi[r], {f: m[r] for f, m in old.boxes.cats.items()}
    )
    for root in al.changed_roots.tolist():
        sub = leaf_boxes(model, root, context_box(model, root))
        missing = set(keys) - set(sub.cats)
        if missing:
            raise ValueError(f"no code mask for categorical features {sorted(missing)}")
        put(sub.leaves, sub.lo, sub.hi, sub.cats)
    if not filled.all():
        raise ValueError("leaves neither changed nor unchanged")
    feasible = np.all(lo <= hi, axis=1)
    for m in cats.values():
        feasible &= m.any(axis=1)
    actions = model.nodes["aux"][leaves].astype(np.int64)
    return LeafBoxes(leaves, lo, hi, cats, actions, feasible)


@dataclass(frozen=True, eq=False)
class LeafOutcomes:
    """An invariant's per-leaf outcomes on one model version (rows = its snapshot's leaves)."""

    status: np.ndarray  # int8 SAFE / VIOLATED / UNKNOWN
    how: np.ndarray  # int16 engine.HOW_* or conjunct index

    def encode(self) -> bytes:
        return (
            np.ascontiguousarray(self.status, dtype=np.int8).tobytes()
            + np.ascontiguousarray(self.how, dtype="<i2").tobytes()
        )

    @staticmethod
    def decode(blob: bytes, leaves: int) -> LeafOutcomes:
        if len(blob) != 3 * leaves:
            raise ValueError("leaf outcomes do not match the tree snapshot")
        status = np.frombuffer(blob, dtype=np.int8, count=leaves)
        how = np.frombuffer(blob, dtype="<i2", count=leaves, offset=leaves)
        if leaves and (status.min() < eg.SAFE or status.max() > eg.UNKNOWN):
            raise ValueError("bad leaf status in the cache")
        return LeafOutcomes(status, how)


def reuse(
    model: Model,
    prep: eg.Prepared,
    boxes: LeafBoxes,
    al: Alignment,
    old: LeafOutcomes,
    settings: eg.Settings,
) -> tuple[eg.PathVerdicts, int]:
    """Outcomes of *prep* on every row of *boxes* (the new model's leaves), reusing the old
    outcome of each unchanged leaf where it is a fact about the box; returns them and the
    number of leaves reused."""
    n = boxes.size
    status = np.full(n, eg.SAFE, dtype=np.int8)
    how = np.full(n, eg.HOW_NONE, dtype=np.int16)
    todo = np.ones(n, dtype=bool)
    if al.clean_new.size:
        at = np.searchsorted(boxes.leaves, al.clean_new)
        st = old.status[al.clean_old_rows]
        hw = old.how[al.clean_old_rows]
        ok = (st == eg.SAFE) | ((st == eg.VIOLATED) & (hw >= eg.HOW_BOX))
        status[at[ok]] = st[ok]
        how[at[ok]] = hw[ok]
        todo[at[ok]] = False
    rows = np.flatnonzero(todo)
    witnesses: dict[int, np.ndarray] = {}
    solver = 0
    if rows.size:
        sub = eg.decide(model, prep, boxes.take(rows), settings)
        status[rows] = sub.status
        how[rows] = sub.how
        witnesses = {int(rows[r]): x for r, x in sub.witnesses.items()}
        solver = sub.solver_paths
    return eg.PathVerdicts(boxes, status, how, witnesses, solver), n - int(rows.size)
