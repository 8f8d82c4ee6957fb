"""Re-checking against the previous version: align node arrays, reuse per-leaf outcomes.

After a check, the cache keeps a *snapshot* of the model version it decided (its node records
and membership table, :class:`TreeSnapshot`) and, per invariant, the outcome of every leaf:
its status and how it was decided (:class:`LeafOutcomes`).  The next check of another version
of the model:

1. **aligns** the two trees from the root (:func:`align`): a pair of nodes at the same position
   whose records are equal (same kind; same feature and threshold bits, or the same categorical
   set; same action and confidence bits) descends into both children; the first unequal pair on
   a path makes the new node a *changed root*.  A new leaf reached through equal pairs only has
   exactly the old leaf's path conditions, hence the same box.  When both trees have the same
   shape, node *i* pairs with node *i* and one vectorised comparison finds the changed roots;
2. computes the boxes of the leaves below the changed roots only (:func:`changed_boxes`), with
   the verifier's own tightening started from each root's context box;
3. **reuses** the outcome of every unchanged leaf that is a fact about its box: proved safe
   (by the box stages or by the solver), violated as decided by the box stages (whose witness
   is a function of the box and is recomputed when it is printed), or violated as decided by
   the solver, with the confirmed witness kept in :class:`LeafOutcomes` (the fallback of its
   printed counterexample, which comes from a solver asked about that leaf alone).  Changed
   leaves and unknown ones are decided by :func:`clefprove.verify.engine.decide` as in a fresh
   run (:func:`reuse`).

A version whose records differ little from a full snapshot is stored as a delta of it
(:func:`encode_tree_delta`).

The verdicts come with a :class:`~clefprove.geometry.boxes.LazyLeafBoxes`: every leaf is listed,
and the box of a leaf is only computed when a counterexample is built from it.

Why that is sound: the outcome on a leaf is a function of its box, its action and confidence,
the invariant and the domain.  The box is a function of the path's split records and the
domain; the alignment compares the records exactly; the outcomes' key holds the invariant's
digest, the domain digest, the settings that choose how a leaf is decided and the clefprove
version (see :mod:`clefprove.incremental.walk`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from functools import cached_property

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import (
    LazyLeafBoxes,
    LeafBoxes,
    boxes_of,
    categorical_splits,
    context_box,
    leaf_boxes,
    stepped_leaf_boxes,
)
from clefprove.model.types import NODE_DTYPE, Model, NodeKind
from clefprove.verify import engine as eg
from clefprove.verify.options import CheckOptions

#: The outcome codes as plain ints for numpy (an IntEnum operand makes numpy look up
#: attributes on the enum class, which Python 3.11 answers slowly).
_SAFE = int(eg.SAFE)
_VIOLATED = int(eg.VIOLATED)
_UNKNOWN = int(eg.UNKNOWN)
_HOW_BOX = int(eg.HOW_BOX)
_HOW_SOLVER = int(eg.HOW_SOLVER)
_HOW_NONE = int(eg.HOW_NONE)


_MAGIC = b"CLFTREE3"
#: magic, nodes, membership bytes; padded to 24 bytes so that the node records are aligned.
_HEAD = struct.Struct("<8sII4x")


class TreeSnapshot:
    """What the cache keeps of a model version: its node records and membership table.

    Read from the cache, its structure is validated (:meth:`check`) before anything walks
    it, unless :func:`align` finds it has exactly the shape of the (validated) new model.

    A snapshot read against a model of its node count (:class:`TreeReader`) is kept
    *relative* to that model's records: the indices where its records differ in some bit and
    its records there; its whole node array is only built when something asks for it."""

    def __init__(self, nodes: np.ndarray, membership: np.ndarray, checked: bool = False) -> None:
        self._nodes: np.ndarray | None = nodes  # NODE_DTYPE
        self.membership = membership  # uint8
        self._checked = checked
        self._leaves: np.ndarray | None = None
        self.size = int(nodes.size)
        self._like: np.ndarray | None = None
        self._at = np.empty(0, dtype=np.int64)
        self._recs = nodes[:0]

    @classmethod
    def relative(
        cls, like: np.ndarray, at: np.ndarray, recs: np.ndarray, membership: np.ndarray
    ) -> TreeSnapshot:
        """The snapshot whose records are *like*'s except at the sorted indices *at*, where
        they are *recs* (and differ from *like*'s in some bit)."""
        snap = cls(like[:0], membership)
        snap._nodes, snap.size = None, int(like.size)
        snap._like, snap._at, snap._recs = like, at, recs
        return snap

    @property
    def nodes(self) -> np.ndarray:
        """Its node records (built once from the model it is relative to, if it is)."""
        if self._nodes is None:
            assert self._like is not None
            nodes: np.ndarray = self._like.copy()
            nodes[self._at] = self._recs
            self._nodes = nodes
        return self._nodes

    def differ_from(self, nodes: np.ndarray) -> np.ndarray:
        """The sorted indices of its records that differ in some bit from *nodes*' (same
        node count)."""
        if self._like is nodes:
            return self._at
        return _differ(self.nodes, nodes)

    def records_at(self, idx: np.ndarray) -> np.ndarray:
        """Its records at the sorted indices *idx* (a copy)."""
        if self._nodes is not None:
            got: np.ndarray = self._nodes[idx]
            return got
        assert self._like is not None
        out: np.ndarray = self._like[idx]
        if self._at.size and idx.size:
            pos = np.minimum(np.searchsorted(self._at, idx), self._at.size - 1)
            hit = self._at[pos] == idx
            out[hit] = self._recs[pos[hit]]
        return out

    @property
    def leaves(self) -> np.ndarray:
        """Its leaf nodes, in tree order (the rows of its outcomes)."""
        if self._leaves is None:
            self._leaves = np.flatnonzero(self.nodes["kind"] == NodeKind.LEAF)
        return self._leaves

    def check(self) -> TreeSnapshot:
        """Self, once its structure is validated; ValueError when it is not a tree."""
        if not self._checked:
            _check_structure(self.nodes, self.membership)
            self._checked = True
        return self


def encode_tree(model: Model) -> bytes:
    """*model*'s snapshot as bytes (see :func:`decode_tree`)."""
    return b"".join(
        (
            _HEAD.pack(_MAGIC, model.n_nodes, model.membership.size),
            np.ascontiguousarray(model.nodes).tobytes(),
            np.ascontiguousarray(model.membership, dtype=np.uint8).tobytes(),
        )
    )


def decode_tree(blob: bytes, lazy: bool = False) -> TreeSnapshot:
    """The snapshot in *blob*; ValueError when it is not one (with *lazy*, only its sizes are
    checked here, its structure by :meth:`TreeSnapshot.check`)."""
    if len(blob) < _HEAD.size:
        raise ValueError("short tree snapshot")
    magic, n_nodes, n_member = _HEAD.unpack_from(blob)
    if magic != _MAGIC:
        raise ValueError("not a tree snapshot")
    if len(blob) != _HEAD.size + NODE_DTYPE.itemsize * n_nodes + n_member or n_nodes == 0:
        raise ValueError("tree snapshot has the wrong size")
    nodes = np.frombuffer(blob, dtype=NODE_DTYPE, count=n_nodes, offset=_HEAD.size)
    membership = np.frombuffer(
        blob, dtype=np.uint8, count=n_member, offset=_HEAD.size + NODE_DTYPE.itemsize * n_nodes
    )
    snap = TreeSnapshot(nodes, membership)
    return snap if lazy else snap.check()


#: Node records read from the cache at a time by :class:`TreeReader` (768 KB: the piece and
#: the model's records it is compared with stay in the processor's caches).
READ_RECORDS = 1 << 15


class TreeReader:
    """Reads a ``tree`` row piece by piece (as :meth:`CacheStore.lookup_snapshots` streams
    it) against the records of the model being checked, *like*: when the snapshot has their
    node count, only its records that differ from them are kept (a :meth:`TreeSnapshot.
    relative` snapshot), so a 22 MB old tree is never copied whole.  Any other row is kept
    whole and decoded by :func:`decode_tree`.  :attr:`snapshot` is set only once the store
    has verified the row's checksum over every byte fed (:meth:`verified`)."""

    def __init__(self, like: np.ndarray, size: int) -> None:
        self._like = np.ascontiguousarray(like)
        self._words = _words(self._like).reshape(-1)
        self._size = size
        self._whole: list[bytes] | None = None  # not relative: every piece, for decode_tree
        self._n = -1  # node count (-1 before the head is read)
        self._pos = 0  # records fed so far
        self._at: list[np.ndarray] = []
        self._recs: list[np.ndarray] = []
        self._membership = np.empty(0, dtype=np.uint8)
        self.snapshot: TreeSnapshot | None = None

    def wanted(self) -> int:
        """How many bytes to feed next (0: all the rest)."""
        if self._whole is not None:
            return 0
        if self._n < 0:
            return _HEAD.size
        if self._pos < self._n:
            return NODE_DTYPE.itemsize * min(READ_RECORDS, self._n - self._pos)
        return 0

    def feed(self, piece: bytes) -> None:
        """The next bytes of the row, as many as :meth:`wanted` asked for."""
        if self._whole is not None:
            self._whole.append(piece)
        elif self._n < 0:
            if len(piece) != _HEAD.size:  # shorter than a head: decode_tree refuses it
                self._whole = [piece]
                return
            magic, n_nodes, n_member = _HEAD.unpack(piece)
            expected = _HEAD.size + NODE_DTYPE.itemsize * n_nodes + n_member
            if magic != _MAGIC or n_nodes != self._like.size or self._size != expected:
                self._whole = [piece]  # decode_tree judges it
            self._n = n_nodes
        elif self._pos < self._n:
            k = len(piece) // NODE_DTYPE.itemsize
            a = self._pos
            old = np.frombuffer(piece, dtype=np.uint64)
            words = np.flatnonzero(old != self._words[3 * a : 3 * (a + k)])
            if words.size:
                rows = np.unique(words // 3)
                self._at.append(rows + a)
                self._recs.append(np.frombuffer(piece, dtype=NODE_DTYPE)[rows])
            self._pos += k
        else:
            self._membership = np.frombuffer(piece, dtype=np.uint8)

    def verified(self) -> None:
        """Every byte was fed and the row's checksum matched: build the snapshot
        (ValueError when it is not one)."""
        if self._whole is not None:
            self.snapshot = decode_tree(b"".join(self._whole), lazy=True)
            return
        if self._pos != self._n:
            raise ValueError("tree snapshot has the wrong size")
        at = np.concatenate(self._at) if self._at else np.empty(0, dtype=np.int64)
        recs = np.concatenate(self._recs) if self._recs else self._like[:0]
        self.snapshot = TreeSnapshot.relative(self._like, at, recs, self._membership)


def _check_structure(nodes: np.ndarray, membership: np.ndarray) -> None:
    n_nodes, n_member = nodes.size, membership.size
    kind = nodes["kind"]
    split = kind != NodeKind.LEAF
    # Only what alignment relies on: children after their parent and in range (uint32
    # comparisons: the fields' own type, no int64 copies).
    idx = np.arange(n_nodes, dtype=np.uint32)
    left, right = nodes["left"], nodes["right"]
    bad = (left <= idx) | (right <= idx) | (left >= n_nodes) | (right >= n_nodes)
    if np.any(kind > NodeKind.CATEGORICAL) or np.any(bad & split):
        raise ValueError("tree snapshot has a bad node")
    cat = np.flatnonzero(kind == NodeKind.CATEGORICAL)
    if cat.size and int(nodes["aux"][cat].max()) >= max(n_member, 1):
        raise ValueError("tree snapshot has a bad membership offset")


_DELTA_MAGIC = b"CLFTDLT1"
#: magic, nodes, changed records; then the base tree's key comes first (32 bytes).
_DELTA_HEAD = struct.Struct("<8sII4x")
#: A version is stored as a delta of a full snapshot when at most this share of its node
#: records differ from it (same node count, same membership table); else in full.
DELTA_SHARE = 1 / 16


def _words(nodes: np.ndarray) -> np.ndarray:
    """(n, 3) uint64: each 24-byte node record as three words, so that records compare bit
    for bit in three vectorised comparisons (numpy compares opaque records one by one)."""
    flat = np.ascontiguousarray(nodes)
    return flat.view(np.uint64).reshape(-1, NODE_DTYPE.itemsize // 8)


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted indices of the node records of *a* and *b* that differ in some bit (same
    node count): one comparison of the contiguous words."""
    wa, wb = _words(a), _words(b)
    words = np.flatnonzero(wa.reshape(-1) != wb.reshape(-1))
    return np.unique(words // wa.shape[1])


def encode_tree_delta(
    base_key: bytes, base: TreeSnapshot, model: Model, differ: np.ndarray | None = None
) -> bytes | None:
    """*model*'s snapshot as the records that differ from the full snapshot *base* (stored
    under *base_key*), or None when a delta does not serve (another node count or membership
    table, or too many records changed).  *differ*, when known (the alignment with *base*
    found it), is the sorted indices of the records that differ in some bit."""
    if (
        len(base_key) != 32
        or base.size != model.n_nodes
        or not np.array_equal(base.membership, np.asarray(model.membership, dtype=np.uint8))
    ):
        return None
    if differ is None:
        differ = base.differ_from(model.nodes)
    if differ.size > DELTA_SHARE * model.n_nodes:
        return None
    return b"".join(
        (
            base_key,
            _DELTA_HEAD.pack(_DELTA_MAGIC, model.n_nodes, differ.size),
            np.ascontiguousarray(differ, dtype="<i4").tobytes(),
            np.ascontiguousarray(model.nodes[differ]).tobytes(),
        )
    )


def delta_base(blob: bytes) -> bytes:
    """The key of the full snapshot a delta row is relative to; ValueError when short."""
    if len(blob) < 32 + _DELTA_HEAD.size:
        raise ValueError("short tree delta")
    return blob[:32]


def decode_tree_delta(blob: bytes, base: TreeSnapshot, lazy: bool = False) -> TreeSnapshot:
    """The snapshot a delta row describes, applied to its full *base*; ValueError when it is
    not one (or does not fit the base); *lazy* as for :func:`decode_tree`."""
    delta_base(blob)
    magic, n_nodes, k = _DELTA_HEAD.unpack_from(blob, 32)
    if magic != _DELTA_MAGIC or n_nodes != base.size:
        raise ValueError("not a tree delta of its base")
    at = 32 + _DELTA_HEAD.size
    if len(blob) != at + 4 * k + NODE_DTYPE.itemsize * k:
        raise ValueError("tree delta has the wrong size")
    idx = np.frombuffer(blob, dtype="<i4", count=k, offset=at).astype(np.int64)
    recs = np.frombuffer(blob, dtype=NODE_DTYPE, count=k, offset=at + 4 * k)
    if k and (idx[0] < 0 or idx[-1] >= n_nodes or np.any(idx[1:] <= idx[:-1])):
        raise ValueError("tree delta has bad node indices")
    if base._like is not None:
        # Relative to the same model as its base: only the union of both sets of records.
        rows = _union(base._at, idx)
        own = base.records_at(rows)
        own[np.searchsorted(rows, idx)] = recs
        keep = _differ(own, base._like[rows])
        snap = TreeSnapshot.relative(base._like, rows[keep], own[keep], base.membership)
        return snap if lazy else snap.check()
    nodes = base.nodes.copy()
    nodes[idx] = recs
    snap = TreeSnapshot(nodes, base.membership)
    return snap if lazy else snap.check()


@frozen(eq=False)
class Alignment:
    """How a new model's leaves relate to a snapshot's."""

    leaves: np.ndarray  # every leaf of the new model, in tree order
    changed_roots: np.ndarray  # topmost new nodes whose subtree differs
    #: When both trees have the same shape (a leaf's row is the same in both): the rows of
    #: ``leaves`` at or below a changed root (sorted); every other row is clean.
    dirty: np.ndarray | None = None
    #: The same case: the nodes whose records differ in some bit from the snapshot's.
    records_differ: np.ndarray | None = None
    #: Any other case: ``(clean_new, clean_old_rows, clean_at)``.
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: That case: the snapshot's node paired with each changed root (the same node index
    #: when both trees have the same shape).
    old_roots: np.ndarray | None = None

    @property
    def changed_old_roots(self) -> np.ndarray:
        """The snapshot's nodes paired with :attr:`changed_roots`, in the same order."""
        return self.changed_roots if self.old_roots is None else self.old_roots

    @cached_property
    def _clean(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.pairs is not None:
            return self.pairs
        mask = self.clean_mask
        assert mask is not None
        rows = np.flatnonzero(mask)
        return self.leaves[rows], rows, rows

    @property
    def clean_new(self) -> np.ndarray:
        """New leaf nodes whose path and record are unchanged (sorted)."""
        return self._clean[0]

    @property
    def clean_old_rows(self) -> np.ndarray:
        """Their rows in the snapshot's leaf list."""
        return self._clean[1]

    @property
    def clean_at(self) -> np.ndarray:
        """Their rows in :attr:`leaves`."""
        return self._clean[2]

    @cached_property
    def clean_mask(self) -> np.ndarray | None:
        """With the same shape: which rows of ``leaves`` are clean, as a mask."""
        if self.dirty is None:
            return None
        mask = np.ones(self.leaves.size, dtype=bool)
        mask[self.dirty] = False
        return mask

    def clean_rows(self, rows: np.ndarray) -> np.ndarray:
        """With the same shape: which of *rows* (rows of ``leaves``) are clean (a mask)."""
        assert self.dirty is not None
        if rows.size and int(rows.max()) >= self.leaves.size:
            raise ValueError("leaf rows out of range")
        return ~_among(rows, self.dirty)

    @property
    def old_rows_sorted(self) -> bool:
        """Whether clean_old_rows increase (pre-order is kept by position: always so for
        trees aligned from the root; checked, since the rows come from the cache)."""
        if self.dirty is not None:
            return True
        rows = self.clean_old_rows
        return bool(rows.size < 2 or np.all(rows[1:] > rows[:-1]))

    @property
    def unchanged(self) -> bool:
        return self.changed_roots.size == 0


def _among(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """(len(x),) bool: whether each of *x* is in *sorted_set*."""
    if not sorted_set.size:
        return np.zeros(x.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, x), sorted_set.size - 1)
    found: np.ndarray = sorted_set[at] == x
    return found


class _Columns:
    """The node fields :func:`align` compares (value as float64 bits): views of the records,
    not copies (a copy of a field of 947K nodes costs more than the comparisons)."""

    def __init__(self, nodes: np.ndarray, membership: np.ndarray) -> None:
        self.nodes = nodes
        self.kind = nodes["kind"]
        self.feature = nodes["feature"]
        self.aux = nodes["aux"]
        self.left = nodes["left"]
        self.right = nodes["right"]
        self.bits = nodes["value"].view(np.int64)
        self.membership = membership


def _equal_records(
    a: _Columns, pa: np.ndarray, b: _Columns, pb: np.ndarray, vocab: list[int]
) -> np.ndarray:
    """(k,) bool: node ``pa[i]`` of *a* has the record of node ``pb[i]`` of *b* (children
    aside): same kind; leaves the same action and confidence bits; numeric splits the same
    feature and threshold bits; categorical splits the same feature and set."""
    kind = a.kind[pa]
    leaf = kind == NodeKind.LEAF
    same: np.ndarray = (kind == b.kind[pb]) & np.where(
        leaf, a.aux[pa] == b.aux[pb], a.feature[pa] == b.feature[pb]
    )
    same &= (kind == NodeKind.CATEGORICAL) | (a.bits[pa] == b.bits[pb])
    cat = np.flatnonzero(same & (kind == NodeKind.CATEGORICAL))
    if cat.size and a.membership is b.membership:
        same[cat] = a.aux[pa[cat]] == b.aux[pb[cat]]  # one table: the same offset, the same set
    elif cat.size:
        feats = a.feature[pa[cat]]
        for f in np.unique(feats).tolist():
            if f >= len(vocab):
                raise ValueError("categorical split on an unknown feature")
            rows = cat[feats == f]
            span = np.arange(vocab[f])
            oa = a.aux[pa[rows]].astype(np.int64)[:, None] + span
            ob = b.aux[pb[rows]].astype(np.int64)[:, None] + span
            if ob.max() >= b.membership.size or oa.max() >= a.membership.size:
                raise ValueError("membership offset out of range")
            same[rows] = (a.membership[oa] == b.membership[ob]).all(axis=1)
    return same


def align(old: TreeSnapshot, model: Model) -> Alignment:
    """Pair the nodes of *model* with the snapshot's from the root (see the module docstring).

    Assumes the same domain (the caller's key guarantees it): feature and action indices mean
    the same in both, and each categorical feature has the same vocabulary."""
    a = _Columns(model.nodes, model.membership)
    membership = old.membership
    if np.array_equal(a.membership, membership):
        membership = a.membership  # sets compare by offset (see _equal_records)
    vocab = [len(f.values) for f in model.features]
    leaves = leaf_nodes(model)
    if a.kind.size == old.size:
        # Records equal bit for bit have equal kinds and children: the shape is the same when
        # it is the same at the records that differ.  Then the snapshot has the structure of
        # the (validated) model, and needs no validation of its own.
        raw = old.differ_from(model.nodes)
        b = _Columns(old.records_at(raw), membership)
        if (
            np.array_equal(a.kind[raw], b.kind)
            and np.array_equal(a.left[raw], b.left)
            and np.array_equal(a.right[raw], b.right)
        ):
            old._leaves = leaves
            return _align_same_shape(a, old, membership, vocab, leaves, raw)
    b = _Columns(old.nodes, membership)
    old.check()
    pn = np.zeros(1, dtype=np.int64)
    po = np.zeros(1, dtype=np.int64)
    clean_new: list[np.ndarray] = []
    clean_old: list[np.ndarray] = []
    changed: list[np.ndarray] = []
    changed_old: list[np.ndarray] = []
    while pn.size:
        same = _equal_records(a, pn, b, po, vocab)
        if not same.all():
            changed.append(pn[~same])
            changed_old.append(po[~same])
        leaf = a.kind[pn] == NodeKind.LEAF
        ok_leaf = same & leaf
        if ok_leaf.any():
            clean_new.append(pn[ok_leaf])
            clean_old.append(po[ok_leaf])
        split = same & ~leaf
        pn, po = pn[split], po[split]
        pn = np.concatenate([a.left[pn], a.right[pn]]).astype(np.int64)
        po = np.concatenate([b.left[po], b.right[po]]).astype(np.int64)
    cn = np.concatenate(clean_new) if clean_new else np.empty(0, np.int64)
    co = np.concatenate(clean_old) if clean_old else np.empty(0, np.int64)
    order = np.argsort(cn, kind="stable")
    roots = np.concatenate(changed) if changed else np.empty(0, np.int64)
    old_roots = np.concatenate(changed_old) if changed_old else np.empty(0, np.int64)
    by_root = np.argsort(roots, kind="stable")
    cn = cn[order]
    pairs = (cn, _rows_of(old, co[order]), np.searchsorted(leaves, cn))
    return Alignment(leaves, roots[by_root], pairs=pairs, old_roots=old_roots[by_root])


def leaf_nodes(model: Model) -> np.ndarray:
    """*model*'s leaf nodes in tree order (kept by the model)."""
    return model.leaf_nodes


def _rows_of(old: TreeSnapshot, leaves: np.ndarray) -> np.ndarray:
    rows = np.searchsorted(old.leaves, leaves)
    if leaves.size and (
        rows.max() >= old.leaves.size or not np.array_equal(old.leaves[rows], leaves)
    ):
        raise ValueError("tree snapshot does not match its leaves")
    return rows


def _align_same_shape(
    a: _Columns,
    old: TreeSnapshot,
    membership: np.ndarray,
    vocab: list[int],
    leaves: np.ndarray,
    raw: np.ndarray,
) -> Alignment:
    """Both trees have the same shape (kinds and child links), so node i pairs with node i:
    the records that differ in some bit (*raw*) are compared field by field, then a walk
    below the differing ones finds the changed leaves."""
    # Records equal bit for bit are equal records (a categorical set compares by its offset
    # only when both trees share one membership table).
    cand_at = raw
    if a.membership is not membership:
        cand_at = _union(raw, np.flatnonzero(a.kind == NodeKind.CATEGORICAL))
    b = _Columns(old.records_at(cand_at), membership)
    pos = np.arange(cand_at.size)
    differ = cand_at[~_equal_records(a, cand_at, b, pos, vocab)]
    # Walk down from every differing node: the differing nodes met on the way have a
    # differing ancestor; the others are the changed roots.  Leaves met are the changed ones
    # (found among the nodes walked, not by a pass over every leaf).
    below = np.zeros(a.kind.size, dtype=bool)
    met = [differ]
    fr = differ
    while fr.size:
        split = fr[a.kind[fr] != NodeKind.LEAF]
        fr = np.concatenate([a.left[split], a.right[split]]).astype(np.int64)
        fr = fr[~below[fr]]  # each node once, however many differing ancestors it has
        below[fr] = True
        met.append(fr)
    roots = differ[~below[differ]]
    nodes = np.unique(np.concatenate(met))
    dirty = np.searchsorted(leaves, nodes[a.kind[nodes] == NodeKind.LEAF])
    return Alignment(leaves, roots, dirty=dirty, records_differ=raw)


def changed_boxes(model: Model, al: Alignment) -> LeafBoxes:
    """The boxes of every leaf below the changed roots, in tree order: the rows
    ``leaf_boxes(model)`` has for them."""
    kind = model.nodes["kind"]
    roots = al.changed_roots
    leaf_roots = roots[kind[roots] == NodeKind.LEAF]
    # A changed leaf's row comes from its path alone (no whole-tree tables needed).
    parts = [boxes_of(model, leaf_roots)] if leaf_roots.size else []
    parts += [
        leaf_boxes(model, root, context_box(model, root))
        for root in roots[kind[roots] != NodeKind.LEAF].tolist()
    ]
    keys = sorted(categorical_splits(model))
    if not parts:
        return boxes_of(model, np.empty(0, dtype=np.int64))
    if len(parts) == 1 and sorted(parts[0].cats) == keys:
        return parts[0]
    return concat_boxes(parts, keys)


def gone_boxes(model: Model, old: TreeSnapshot, al: Alignment) -> LeafBoxes:
    """The boxes, in the snapshot's tree, of its leaves below the changed roots (those the
    edit replaced; sorted by their old node ids): each changed root's counterpart stepped
    down from the root's context box, which is the same in both trees (the path to it is
    made of equal records).  With the same shape, only the old subtrees' records are read
    (into a small tree of their own), not the snapshot's whole node array."""
    parts = []
    for r, o in zip(al.changed_roots.tolist(), al.changed_old_roots.tolist(), strict=True):
        ctx = context_box(model, r)
        if al.dirty is not None:
            sub = _subtree(model, r)  # the same nodes in the snapshot (same shape)
            view = _compact(model, old, sub)
            b = stepped_leaf_boxes(view, int(np.searchsorted(sub, r)), ctx)
            parts.append(dataclasses.replace(b, leaves=sub[b.leaves]))
        else:
            view = dataclasses.replace(model, nodes=old.nodes, membership=old.membership)
            parts.append(stepped_leaf_boxes(view, o, ctx))
    if not parts:
        return boxes_of(model, np.empty(0, dtype=np.int64))
    keys = sorted({f for p in parts for f in p.cats} | categorical_splits(model))
    return concat_boxes([_with_masks(p, keys, model) for p in parts], keys)


def _subtree(model: Model, root: int) -> np.ndarray:
    """The nodes of *root*'s subtree, sorted."""
    nodes = model.nodes
    kind, left, right = nodes["kind"], nodes["left"], nodes["right"]
    out = [np.array([root], dtype=np.int64)]
    fr = out[0]
    while fr.size:
        inner = fr[kind[fr] != NodeKind.LEAF]
        fr = np.concatenate([left[inner], right[inner]]).astype(np.int64)
        out.append(fr)
    return np.sort(np.concatenate(out))


def _compact(model: Model, old: TreeSnapshot, sub: np.ndarray) -> Model:
    """The snapshot's records at the nodes *sub* (a subtree, sorted) as a model of their own,
    child links renumbered to positions in *sub*."""
    recs = old.records_at(sub)
    inner = recs["kind"] != NodeKind.LEAF
    for side in ("left", "right"):
        recs[side][inner] = np.searchsorted(sub, recs[side][inner])
    return dataclasses.replace(
        model,
        nodes=recs,
        membership=old.membership,
        max_depth=int(recs["depth"].max()),
    )


def _with_masks(boxes: LeafBoxes, keys: list[int], model: Model) -> LeafBoxes:
    """*boxes* with a code mask for each feature in *keys* (the whole vocabulary where it
    had none: what an absent mask means)."""
    cats = {
        f: boxes.cats[f]
        if f in boxes.cats
        else np.ones((boxes.size, len(model.features[f].values)), dtype=bool)
        for f in keys
    }
    return dataclasses.replace(boxes, cats=cats)


def concat_boxes(parts: list[LeafBoxes], keys: list[int]) -> LeafBoxes:
    """Rows of several :class:`LeafBoxes` as one, sorted by leaf, with a code mask for exactly
    the categorical features in *keys* (each part must have them)."""
    for p in parts:
        if sorted(p.cats) != keys:
            raise ValueError("boxes with different categorical masks")
    leaves = np.concatenate([p.leaves for p in parts])
    order = np.argsort(leaves, kind="stable")
    return LeafBoxes(
        leaves[order],
        np.concatenate([p.lo for p in parts])[order],
        np.concatenate([p.hi for p in parts])[order],
        {f: np.concatenate([p.cats[f] for p in parts])[order] for f in keys},
        np.concatenate([p.actions for p in parts])[order],
        np.concatenate([p.feasible for p in parts])[order],
    )


#: Flags of an encoded :class:`LeafOutcomes`.
_HAS_WHEN, _VACUITY_KNOWN, _VACUOUS = 1, 2, 4
#: Head of the witness section of an encoded block: how many witnesses, values per witness.
_WIT_HEAD = struct.Struct("<II")
#: Head of an encoded block's status and how: every leaf (dense), or the listed rows only, the
#: others safe and decided by nothing (sparse: rows, then their status and how).
_BLOCK_HEAD = struct.Struct("<BI")
_DENSE, _SPARSE = 0, 1


class RowWitnesses(Mapping[int, np.ndarray]):
    """Witnesses of some rows as two arrays (rows sorted, one input per row): the
    ``PathVerdicts.witnesses`` of a re-check, built without a Python step per reused leaf."""

    def __init__(self, rows: np.ndarray, x: np.ndarray) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)
        self.x = np.asarray(x, dtype=np.float64)

    @staticmethod
    def of(witnesses: Mapping[int, np.ndarray], width: int) -> RowWitnesses:
        """The witnesses of *witnesses* (rows to inputs of *width* values) as arrays."""
        if isinstance(witnesses, RowWitnesses):
            return witnesses
        rows = np.array(sorted(witnesses), dtype=np.int64)
        x = np.empty((rows.size, width), dtype=np.float64)
        for j, r in enumerate(rows.tolist()):
            x[j] = witnesses[r]
        return RowWitnesses(rows, x)

    def _at(self, r: object) -> int:
        if not isinstance(r, int | np.integer) or not self.rows.size:
            return -1
        j = int(np.searchsorted(self.rows, r))
        return j if j < self.rows.size and int(self.rows[j]) == int(r) else -1

    def __contains__(self, r: object) -> bool:
        return self._at(r) >= 0

    def __getitem__(self, r: int) -> np.ndarray:
        j = self._at(r)
        if j < 0:
            raise KeyError(r)
        row: np.ndarray = self.x[j]
        return row

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows.tolist())

    def __len__(self) -> int:
        return int(self.rows.size)


_NO_WITNESSES = RowWitnesses(np.empty(0, np.int64), np.empty((0, 0)))


@frozen(eq=False)
class LeafOutcomes:
    """An invariant's per-leaf outcomes on one model version (rows = its leaves in tree
    order), with the confirmed witness of every leaf the solver found violated (the fallback
    of its printed counterexample, see :func:`clefprove.verify.api.finish`); *when*, if known,
    the same for its ``when`` alone (the vacuity of a ``when`` that mentions the decision);
    *vacuous*, if known, whether a ``when`` about the domain alone is unsatisfiable (a fact
    about the domain, which the outcomes' key fixes).  *shown*: the input of every printed
    counterexample of a row the box stages found violated (a function of the leaf's box, so
    the same input a fresh run prints for that leaf while it is unchanged; confirmed again by
    the evaluator when it is printed)."""

    status: np.ndarray  # int8 SAFE / VIOLATED / UNKNOWN
    how: np.ndarray  # int16 engine.HOW_* or conjunct index
    when: LeafOutcomes | None = None
    vacuous: bool | None = None
    witnesses: RowWitnesses = field(default_factory=lambda: _NO_WITNESSES)
    shown: RowWitnesses = field(default_factory=lambda: _NO_WITNESSES)
    #: When known: sorted rows outside of which every row is SAFE with how NONE (a superset
    #: of them is allowed; see :attr:`clefprove.verify.engine.PathVerdicts.listed`).
    listed: np.ndarray | None = None

    def rows_listed(self) -> np.ndarray:
        """:attr:`listed`, or the rows that are not SAFE or were decided by something."""
        if self.listed is not None:
            return self.listed
        return np.flatnonzero((self.status != _SAFE) | (self.how != _HOW_NONE))

    @staticmethod
    def of(
        pv: eg.PathVerdicts,
        when: LeafOutcomes | None = None,
        vacuous: bool | None = None,
        width: int = 0,
        shown: Mapping[int, np.ndarray] | None = None,
    ) -> LeafOutcomes:
        """The outcomes of *pv* (its rows: every leaf), its witnesses included."""
        return LeafOutcomes(
            pv.status,
            pv.how,
            when,
            vacuous,
            RowWitnesses.of(pv.witnesses, width),
            RowWitnesses.of(shown or {}, width),
            pv.listed,
        )

    def encode(self) -> bytes:
        flags = (_HAS_WHEN if self.when is not None else 0) | (
            0 if self.vacuous is None else _VACUITY_KNOWN | (_VACUOUS if self.vacuous else 0)
        )
        parts = [bytes([flags]), self._arrays_bytes()]
        if self.when is not None:
            parts.append(self.when._arrays_bytes())
        parts.append(_rows_bytes(self.shown))
        return b"".join(parts)

    def _arrays_bytes(self) -> bytes:
        w = self.witnesses
        status = np.ascontiguousarray(self.status, dtype=np.int8)
        how = np.ascontiguousarray(self.how, dtype="<i2")
        # Most leaves of most invariants are safe and decided by the box stages (how NONE):
        # list only the others (7 bytes each) when that is shorter than every leaf (3 bytes).
        listed = self.rows_listed()
        if self.listed is not None:  # a superset: exactly the others, as when computed
            listed = listed[(status[listed] != _SAFE) | (how[listed] != _HOW_NONE)]
        rows: tuple[bytes, ...]
        if 7 * listed.size < 3 * status.size:
            rows = (
                _BLOCK_HEAD.pack(_SPARSE, listed.size),
                np.ascontiguousarray(listed, dtype="<i4").tobytes(),
                status[listed].tobytes(),
                how[listed].tobytes(),
            )
        else:
            rows = (_BLOCK_HEAD.pack(_DENSE, 0), status.tobytes(), how.tobytes())
        return b"".join((*rows, _rows_bytes(w)))

    @staticmethod
    def decode(blob: bytes, leaves: int) -> LeafOutcomes:
        if not blob:
            raise ValueError("empty leaf outcomes")
        flags = blob[0]
        if flags & ~(_HAS_WHEN | _VACUITY_KNOWN | _VACUOUS) or (
            flags & _VACUOUS and not flags & _VACUITY_KNOWN
        ):
            raise ValueError("bad leaf outcomes flags")
        own, at = LeafOutcomes._arrays(blob, 1, leaves)
        when = None
        if flags & _HAS_WHEN:
            when, at = LeafOutcomes._arrays(blob, at, leaves)
        shown, at = _read_rows(blob, at, leaves)
        if at != len(blob):
            raise ValueError("leaf outcomes do not match the tree snapshot")
        _check_shown(shown, own.status, own.how)
        vacuous = bool(flags & _VACUOUS) if flags & _VACUITY_KNOWN else None
        return LeafOutcomes(own.status, own.how, when, vacuous, own.witnesses, shown, own.listed)

    @staticmethod
    def _arrays(blob: bytes, offset: int, leaves: int) -> tuple[LeafOutcomes, int]:
        if len(blob) < offset + _BLOCK_HEAD.size:
            raise ValueError("leaf outcomes do not match the tree snapshot")
        mode, listed = _BLOCK_HEAD.unpack_from(blob, offset)
        offset += _BLOCK_HEAD.size
        status: np.ndarray
        how: np.ndarray
        rows: np.ndarray | None = None
        if mode == _DENSE and not listed:
            wit_at = offset + 3 * leaves
            if len(blob) < wit_at + _WIT_HEAD.size:
                raise ValueError("leaf outcomes do not match the tree snapshot")
            status = np.frombuffer(blob, dtype=np.int8, count=leaves, offset=offset)
            how = np.frombuffer(blob, dtype="<i2", count=leaves, offset=offset + leaves)
        elif mode == _SPARSE and listed <= leaves:
            wit_at = offset + 7 * listed
            if len(blob) < wit_at + _WIT_HEAD.size:
                raise ValueError("leaf outcomes do not match the tree snapshot")
            idx = np.frombuffer(blob, dtype="<i4", count=listed, offset=offset).astype(np.int64)
            if listed and (idx[0] < 0 or idx[-1] >= leaves or np.any(idx[1:] <= idx[:-1])):
                raise ValueError("bad leaf rows in the cache")
            at = offset + 4 * listed
            got = np.frombuffer(blob, dtype=np.int8, count=listed, offset=at)
            if listed and (got.min() < _SAFE or got.max() > _UNKNOWN):  # the rest are SAFE
                raise ValueError("bad leaf status in the cache")
            status = np.full(leaves, _SAFE, dtype=np.int8)
            how = np.full(leaves, _HOW_NONE, dtype=np.int16)
            status[idx] = got
            how[idx] = np.frombuffer(blob, dtype="<i2", count=listed, offset=at + listed)
            rows = idx
        else:
            raise ValueError("bad leaf outcomes block")
        if rows is None and leaves and (status.min() < _SAFE or status.max() > _UNKNOWN):
            raise ValueError("bad leaf status in the cache")
        wit, end = _read_rows(blob, wit_at, leaves)
        # Only rows the solver found violated have a witness.
        if wit.rows.size and (
            np.any(status[wit.rows] != _VIOLATED) or np.any(how[wit.rows] != _HOW_SOLVER)
        ):
            raise ValueError("bad witness rows in the cache")
        return LeafOutcomes(status, how, witnesses=wit, listed=rows), end


def _rows_bytes(w: RowWitnesses) -> bytes:
    """*w* as bytes: count and width, rows, inputs (see :func:`_read_rows`)."""
    width = w.x.shape[1] if w.rows.size else 0
    return b"".join(
        (
            _WIT_HEAD.pack(w.rows.size, width),
            np.ascontiguousarray(w.rows, dtype="<i4").tobytes(),
            np.ascontiguousarray(w.x, dtype="<f8").tobytes() if w.rows.size else b"",
        )
    )


def _read_rows(blob: bytes, at: int, leaves: int) -> tuple[RowWitnesses, int]:
    """The :class:`RowWitnesses` written by :func:`_rows_bytes` at *at* (rows in range, once
    each, in order) and where it ends; ValueError when it is not one."""
    end = at + _WIT_HEAD.size
    if len(blob) < end:
        raise ValueError("leaf outcomes do not match the tree snapshot")
    k, width = _WIT_HEAD.unpack_from(blob, at)
    if len(blob) < end + 4 * k + 8 * k * width or (k and not width):
        raise ValueError("leaf outcomes do not match the tree snapshot")
    if not k:
        return _NO_WITNESSES, end
    rows = np.frombuffer(blob, dtype="<i4", count=k, offset=end).astype(np.int64)
    x = np.frombuffer(blob, dtype="<f8", count=k * width, offset=end + 4 * k).reshape(k, width)
    if rows.min() < 0 or rows.max() >= leaves or np.any(np.diff(rows) <= 0):
        raise ValueError("bad witness rows in the cache")
    return RowWitnesses(rows, x), end + 4 * k + 8 * k * width


def _check_shown(shown: RowWitnesses, status: np.ndarray, how: np.ndarray) -> None:
    """A shown input belongs to a row the box stages found violated."""
    if shown.rows.size and (
        np.any(status[shown.rows] != _VIOLATED) or np.any(how[shown.rows] == _HOW_SOLVER)
    ):
        raise ValueError("bad shown rows in the cache")


def reuse(
    model: Model,
    prep: eg.Prepared,
    al: Alignment,
    old: LeafOutcomes,
    boxes_for: Callable[[np.ndarray], LeafBoxes],
    settings: CheckOptions,
) -> tuple[eg.PathVerdicts, int]:
    """Outcomes of *prep* on every leaf of the new model, reusing the old outcome of each
    unchanged leaf (safe, or violated with a witness: by the box stages, or by the solver
    with its stored witness); *boxes_for(leaves)* gives the boxes of the leaves to decide.
    Returns the verdicts (over a :class:`LazyLeafBoxes`, witnesses as a
    :class:`RowWitnesses`) and how many leaves were decided."""
    leaves = al.leaves
    n = leaves.size
    width = len(model.features)
    w_rows: list[np.ndarray] = []
    w_x: list[np.ndarray] = []
    n_conj = len(prep.conjuncts) if prep.conjuncts is not None else 0
    listed: np.ndarray | None = None
    if al.dirty is not None and old.status.size == n:
        # Same shape: leaf row i is row i of the old outcomes.  Only the listed rows (those
        # not safe, or decided by something) and the changed ones are looked at: every other
        # row is a safe leaf, reused as it is (see the general case below for the rules).
        st, hw = old.status, old.how
        seen = old.rows_listed()
        s_l, h_l = st[seen], hw[seen]
        ok = (s_l == _SAFE) | ((s_l == _VIOLATED) & (h_l >= _HOW_BOX) & (h_l < n_conj))
        ow = old.witnesses
        if ow.rows.size:
            if ow.x.shape[1] != width:
                raise ValueError("stored witnesses of the wrong width")
            at = np.searchsorted(seen, ow.rows)  # decode checked: solver-violated, so listed
            if np.any(at >= seen.size) or not np.array_equal(
                seen[np.minimum(at, seen.size - 1)], ow.rows
            ):
                raise ValueError("stored witnesses of unlisted rows")
            ok[at] = True
            kept = al.clean_rows(ow.rows)
            w_rows.append(ow.rows[kept])
            w_x.append(ow.x[kept])
        dirty = al.dirty
        rows = _union(seen[~ok], dirty)
        status = st.copy()
        how = hw.copy()
        status[rows] = _SAFE  # decided below
        how[rows] = _HOW_NONE
        listed = _union(seen, dirty)
    else:
        status, how, todo = _reuse_rows(al, old, n_conj, width, w_rows, w_x)
        rows = np.flatnonzero(todo)
    solver = 0
    if rows.size:
        sub = boxes_for(leaves[rows])
        if not np.array_equal(sub.leaves, leaves[rows]):
            raise ValueError("boxes for the wrong leaves")
        pv = eg.decide(model, prep, sub, settings)
        status[rows] = pv.status
        how[rows] = pv.how
        if pv.witnesses:
            new = RowWitnesses.of(pv.witnesses, width)
            w_rows.append(rows[new.rows])
            w_x.append(new.x)
        solver = pv.solver_paths
    if w_rows and sum(r.size for r in w_rows):
        wr = np.concatenate(w_rows)
        order = np.argsort(wr, kind="stable")
        witnesses = RowWitnesses(wr[order], np.concatenate(w_x)[order])
    else:
        witnesses = _NO_WITNESSES
    lazy = LazyLeafBoxes(model, leaves)
    pv = eg.PathVerdicts(lazy, status, how, witnesses, solver, listed)  # type: ignore[arg-type]
    return pv, int(rows.size)


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two sorted int arrays (np.union1d without its generality)."""
    if not b.size:
        return a
    if not a.size:
        return b
    c = np.concatenate((a, b))
    c.sort(kind="stable")
    keep = np.empty(c.size, dtype=bool)
    keep[0] = True
    np.not_equal(c[1:], c[:-1], out=keep[1:])
    return c[keep]


def carry(al: Alignment, w: RowWitnesses) -> RowWitnesses:
    """The rows of *w* (rows of the snapshot's leaves) whose leaf is unchanged, at their rows
    in the new model, with their inputs."""
    if not w.rows.size:
        return _NO_WITNESSES
    if al.dirty is not None:
        keep = al.clean_rows(w.rows)
        return RowWitnesses(w.rows[keep], w.x[keep])
    co, at = al.clean_old_rows, al.clean_at
    if not al.old_rows_sorted:
        order = np.argsort(co, kind="stable")
        co, at = co[order], at[order]
    p = np.searchsorted(co, w.rows)
    inside = p < co.size
    inside[inside] = co[p[inside]] == w.rows[inside]
    rows, x = at[p[inside]], w.x[inside]
    order = np.argsort(rows, kind="stable")
    return RowWitnesses(rows[order], x[order])


def _reuse_rows(
    al: Alignment,
    old: LeafOutcomes,
    n_conj: int,
    width: int,
    w_rows: list[np.ndarray],
    w_x: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`reuse` for any alignment: ``(status, how, todo)`` over the new leaves, the
    reused witnesses appended to *w_rows* / *w_x*."""
    n = al.leaves.size
    status = np.full(n, _SAFE, dtype=np.int8)
    how = np.full(n, _HOW_NONE, dtype=np.int16)
    todo = np.ones(n, dtype=bool)
    if al.clean_new.size:
        at = al.clean_at
        st = old.status[al.clean_old_rows]
        hw = old.how[al.clean_old_rows]
        # A conjunct index must name one of this invariant's conjuncts (a damaged row could
        # say otherwise; such a leaf is decided again); a solver's violation needs its witness.
        ok = (st == _SAFE) | ((st == _VIOLATED) & (hw >= _HOW_BOX) & (hw < n_conj))
        ow = old.witnesses
        if ow.rows.size:
            if ow.x.shape[1] != width:
                raise ValueError("stored witnesses of the wrong width")
            co = al.clean_old_rows
            if al.old_rows_sorted:  # per witness, not per leaf: where its old row went
                p = np.searchsorted(co, ow.rows)
                inside = p < co.size
                inside[inside] = co[p[inside]] == ow.rows[inside]
                p = p[inside]
                ok[p] = True  # decode checked: each is a solver-violated row
                w_rows.append(at[p])
                w_x.append(ow.x[inside])
            else:
                j = np.searchsorted(ow.rows, co)
                j_ok = j < ow.rows.size
                j_ok[j_ok] = ow.rows[j[j_ok]] == co[j_ok]
                solver_v = (st == _VIOLATED) & (hw == _HOW_SOLVER) & j_ok
                ok |= solver_v
                w_rows.append(at[solver_v])
                w_x.append(ow.x[j[solver_v]])
        status[at[ok]] = st[ok]
        how[at[ok]] = hw[ok]
        todo[at[ok]] = False
    return status, how, todo


#: A delta of outcomes: changed rows, new witnesses, width, flags (vacuity; "same as base").
_OUTD_HEAD = struct.Struct("<IIIB")
_SAME_AS_BASE = 8


def _bitwise(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype="<f8").view(np.int64)


def same_as_base(outcomes: LeafOutcomes) -> bytes:
    """The delta that says "the outcomes of the full row it rests on" (*outcomes* gives the
    vacuity answer, the only part a delta carries itself)."""
    vac = 0
    if outcomes.vacuous is not None:
        vac = _VACUITY_KNOWN | (_VACUOUS if outcomes.vacuous else 0)
    return _OUTD_HEAD.pack(0, 0, 0, vac | _SAME_AS_BASE)


def encode_outcomes_delta(base: LeafOutcomes, new: LeafOutcomes) -> bytes | None:
    """*new* as the rows that differ from *base* (status, how, witness), or None when a delta
    does not serve: another leaf count, outcomes of a ``when`` on either side, or more than
    :data:`DELTA_SHARE` of the rows changed.  *new* equal to *base* is always a delta."""
    n = new.status.size
    vac = 0 if new.vacuous is None else _VACUITY_KNOWN | (_VACUOUS if new.vacuous else 0)
    bw, nw = base.witnesses, new.witnesses
    if base is new:
        return same_as_base(new)
    if base.when is not None or new.when is not None or base.status.size != n:
        return None
    if base.listed is not None and new.listed is not None:
        # Outside both listings both rows are SAFE with how NONE: only listed rows can differ.
        cand = _union(base.listed, new.listed)
        differ = cand[(base.status[cand] != new.status[cand]) | (base.how[cand] != new.how[cand])]
    else:
        differ = np.flatnonzero((base.status != new.status) | (base.how != new.how))
    p = np.searchsorted(bw.rows, nw.rows)
    inb = p < bw.rows.size
    inb[inb] = bw.rows[p[inb]] == nw.rows[inb]
    same = inb.copy()
    if inb.any():
        same[inb] = np.all(_bitwise(bw.x[p[inb]]) == _bitwise(nw.x[inb]), axis=1)
    fresh = np.flatnonzero(~same)
    if differ.size + fresh.size > DELTA_SHARE * max(n, 1):
        return None
    width = nw.x.shape[1] if fresh.size else 0
    return b"".join(
        (
            _OUTD_HEAD.pack(differ.size, fresh.size, width, vac),
            np.ascontiguousarray(differ, dtype="<i4").tobytes(),
            np.ascontiguousarray(new.status[differ], dtype=np.int8).tobytes(),
            np.ascontiguousarray(new.how[differ], dtype="<i2").tobytes(),
            np.ascontiguousarray(nw.rows[fresh], dtype="<i4").tobytes(),
            np.ascontiguousarray(nw.x[fresh], dtype="<f8").tobytes() if fresh.size else b"",
            _rows_bytes(new.shown),  # a few rows: carried whole, not as a delta
        )
    )


def apply_outcomes_delta(base: LeafOutcomes, blob: bytes) -> LeafOutcomes:
    """The outcomes a delta describes, applied to *base*; ValueError when it is not one."""
    if len(blob) < _OUTD_HEAD.size:
        raise ValueError("short outcomes delta")
    k, kw, width, flags = _OUTD_HEAD.unpack_from(blob)
    if flags & ~(_VACUITY_KNOWN | _VACUOUS | _SAME_AS_BASE) or (
        flags & _VACUOUS and not flags & _VACUITY_KNOWN
    ):
        raise ValueError("bad outcomes delta flags")
    vacuous = bool(flags & _VACUOUS) if flags & _VACUITY_KNOWN else None
    at = _OUTD_HEAD.size
    if flags & _SAME_AS_BASE:
        if k or kw or len(blob) != at:
            raise ValueError("bad outcomes delta")
        return LeafOutcomes(
            base.status, base.how, base.when, vacuous, base.witnesses, base.shown, base.listed
        )
    n = base.status.size
    size = at + 7 * k + kw * (4 + 8 * width)
    if base.when is not None or len(blob) < size or (kw and not width):
        raise ValueError("outcomes delta has the wrong size")
    shown, end = _read_rows(blob, size, n)
    if end != len(blob):
        raise ValueError("outcomes delta has the wrong size")
    idx = np.frombuffer(blob, dtype="<i4", count=k, offset=at).astype(np.int64)
    st = np.frombuffer(blob, dtype=np.int8, count=k, offset=at + 4 * k)
    hw = np.frombuffer(blob, dtype="<i2", count=k, offset=at + 5 * k)
    wrows = np.frombuffer(blob, dtype="<i4", count=kw, offset=at + 7 * k).astype(np.int64)
    wx = np.frombuffer(blob, dtype="<f8", count=kw * width, offset=at + 7 * k + 4 * kw)
    if k and (idx[0] < 0 or idx[-1] >= n or np.any(idx[1:] <= idx[:-1])):
        raise ValueError("outcomes delta has bad rows")
    if kw and (wrows[0] < 0 or wrows[-1] >= n or np.any(wrows[1:] <= wrows[:-1])):
        raise ValueError("outcomes delta has bad witness rows")
    status = base.status.copy()
    how = base.how.copy()
    status[idx] = st
    how[idx] = hw
    if k and (st.min() < _SAFE or st.max() > _UNKNOWN):
        raise ValueError("bad leaf status in the cache")
    bw = base.witnesses
    keep = np.ones(bw.rows.size, dtype=bool)
    if bw.rows.size:
        keep = (status[bw.rows] == _VIOLATED) & (how[bw.rows] == _HOW_SOLVER)
        keep &= ~np.isin(bw.rows, wrows)
    _check_shown(shown, status, how)
    listed = None if base.listed is None else _union(base.listed, idx)
    rows = np.concatenate([bw.rows[keep], wrows])
    if not rows.size:
        return LeafOutcomes(status, how, None, vacuous, shown=shown, listed=listed)
    w_width = width if kw else bw.x.shape[1]
    if bw.rows.size and kw and bw.x.shape[1] != width:
        raise ValueError("outcomes delta has witnesses of another width")
    x = np.concatenate([bw.x[keep].reshape(-1, w_width), wx.reshape(kw, w_width)])
    order = np.argsort(rows, kind="stable")
    rows, x = rows[order], x[order]
    if np.any(status[rows] != _VIOLATED) or np.any(how[rows] != _HOW_SOLVER):
        raise ValueError("bad witness rows in the cache")
    return LeafOutcomes(status, how, None, vacuous, RowWitnesses(rows, x), shown, listed)
