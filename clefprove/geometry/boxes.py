"""Paths as boxes: the exact set of encoded inputs that reach each leaf.

A root-to-leaf path is a conjunction of split conditions on single features, so the inputs that
reach a leaf form a *box*: per numeric feature a closed interval of encoded values, per
categorical feature a set of codes.  Bounds are tightened to the feature's value set, which is
what makes every later shortcut exact:

* ``x <= t`` gives ``hi = t`` on a float feature and ``hi = floor(t)`` on an integral one;
* ``x > t`` gives ``lo = nextafter(t, +inf)`` on a float feature (the smallest float64 above
  ``t``) and ``lo = floor(t) + 1`` on an integral one;
* everything is intersected with the feature's domain ``[min, max]`` (inputs are clipped).

A box with ``lo > hi`` somewhere, or an empty code set, is an infeasible path.

Column ``F`` (one past the last feature) holds the leaf's confidence as the degenerate interval
``[c, c]``, so that ``confidence`` is handled like a float feature by the rest of the engine.

The boxes of every leaf below a node are computed level by level with numpy (no Python loop over
nodes), starting from any node with any context box: :func:`leaf_boxes` is the unit the
incremental checker calls per subtree.  A small whole tree is done from each leaf's ancestors
instead, with the same ufuncs in the same order per bound (fewer numpy calls).
"""

from __future__ import annotations

import numpy as np

from clefprove.frozen import frozen
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model, NodeKind

# The node kinds as plain ints for numpy: with an IntEnum operand every comparison looks up
# ``__array_ufunc__`` on the enum class, which Python 3.11's EnumType.__getattr__ answers by
# raising AttributeError (a few microseconds each).
_LEAF, _NUMERIC, _CATEGORICAL = int(NodeKind.LEAF), int(NodeKind.NUMERIC), int(NodeKind.CATEGORICAL)


@frozen(eq=False)
class Box:
    """One box over the features: ``lo``/``hi`` of shape (F,), and a code mask per categorical
    feature.  The confidence column is not part of a context box."""

    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]

    @staticmethod
    def domain(model: Model | Ensemble) -> Box:
        """The whole input domain of *model*."""
        lo = np.array([f.min for f in model.features], dtype=np.float64)
        hi = np.array([f.max for f in model.features], dtype=np.float64)
        cats = {
            i: np.ones(len(f.values), dtype=bool)
            for i, f in enumerate(model.features)
            if f.type is FeatureType.CATEGORICAL
        }
        return Box(lo, hi, cats)

    @property
    def empty(self) -> bool:
        return bool(np.any(self.lo > self.hi)) or any(not m.any() for m in self.cats.values())


@frozen(eq=False)
class LeafBoxes:
    """The boxes of a set of leaves (rows sorted by node index, i.e. tree pre-order)."""

    leaves: np.ndarray  # (L,) int64 node indices
    lo: np.ndarray  # (L, F + 1) float64; column F = confidence
    hi: np.ndarray  # (L, F + 1)
    cats: dict[int, np.ndarray]  # feature -> (L, V) bool; absent: the whole vocabulary
    actions: np.ndarray  # (L,) int64
    feasible: np.ndarray  # (L,) bool

    @property
    def size(self) -> int:
        return int(self.leaves.shape[0])

    def take(self, rows: np.ndarray) -> LeafBoxes:
        """The sub-collection at *rows* (an index or boolean array)."""
        return LeafBoxes(
            self.leaves[rows],
            self.lo[rows],
            self.hi[rows],
            {f: m[rows] for f, m in self.cats.items()},
            self.actions[rows],
            self.feasible[rows],
        )


def complete_boxes(
    model: Model, leaves: np.ndarray, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]
) -> LeafBoxes:
    """:class:`LeafBoxes` of *leaves* from their feature bounds (*lo*, *hi* of shape
    (L, F + 1), whose confidence column is filled here) and code masks."""
    n_feat = len(model.features)
    conf = model.nodes["value"][leaves].astype(np.float64)
    lo[:, n_feat] = conf
    hi[:, n_feat] = conf
    feasible = np.all(lo <= hi, axis=1)
    for m in cats.values():
        feasible &= m.any(axis=1)
    actions = model.nodes["aux"][leaves].astype(np.int64)
    return LeafBoxes(leaves, lo, hi, cats, actions, feasible)


@frozen(eq=False)
class TreeTables:
    """Per-model arrays derived once: tightened split bounds and parent links."""

    left_hi: np.ndarray  # numeric split: the hi bound of the left child
    right_lo: np.ndarray  # numeric split: the lo bound of the right child
    parent: np.ndarray  # parent node index, -1 for the root (and unreachable nodes)
    integral: np.ndarray  # (F,) bool: feature takes whole values
    cat_split: frozenset[int]  # categorical features that some split tests


def split_bounds(value: np.ndarray, is_int: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For numeric splits at thresholds *value*: the ``hi`` bound of the left child and the
    ``lo`` bound of the right child, on whole-valued features (*is_int*) or float ones."""
    with np.errstate(invalid="ignore", over="ignore"):
        fl = np.floor(value)
        left_hi = np.where(is_int, fl, value)
        # The next whole float64 above floor(t): floor(t) + 1 rounds back to floor(t) from
        # 2**53 on, where the next whole value is the next float64.
        up = fl + 1.0
        up = np.where(up > fl, up, np.nextafter(fl, np.inf))
        right_lo = np.where(is_int, up, np.nextafter(value, np.inf))
    return left_hi, right_lo


@frozen(eq=False)
class TreeLinks:
    """Parent links and the categorical features some split tests (cheaper than tables)."""

    parent: np.ndarray  # parent node index, -1 for the root (and unreachable nodes)
    integral: np.ndarray  # (F,) bool: feature takes whole values
    cat_split: frozenset[int]


def links(model: Model) -> TreeLinks:
    """The :class:`TreeLinks` of *model* (computed once, kept by the model)."""
    return model.derived.get(("geometry.links",), lambda: _links(model))


def _links(model: Model) -> TreeLinks:
    nodes = model.nodes
    kind = nodes["kind"]
    parent = np.full(nodes.shape[0], -1, dtype=np.int64)
    internal = np.flatnonzero(kind != _LEAF)
    parent[nodes["left"][internal].astype(np.int64)] = internal
    parent[nodes["right"][internal].astype(np.int64)] = internal
    return TreeLinks(parent, integral_features(model), categorical_splits(model))


def integral_features(model: Model | Ensemble) -> np.ndarray:
    """(F,) bool: which features take whole values only (kept by the model)."""
    return model.derived.get(
        ("geometry.integral",),
        lambda: np.array([f.is_integral for f in model.features], dtype=bool),
    )


def categorical_splits(model: Model) -> frozenset[int]:
    """The categorical features some split of *model* tests (kept by the model): the code
    masks a :class:`LeafBoxes` of it carries."""
    return model.categorical_split_features


def tables(model: Model) -> TreeTables:
    """The :class:`TreeTables` of *model* (computed once, kept by the model)."""
    return model.derived.get(("geometry.tables",), lambda: _tables(model))


def _tables(model: Model) -> TreeTables:
    nodes = model.nodes
    n = nodes.shape[0]
    lk = links(model)
    value = nodes["value"].astype(np.float64)
    feat = nodes["feature"].astype(np.int64)
    numeric = nodes["kind"] == NodeKind.NUMERIC
    is_int = np.zeros(n, dtype=bool)
    is_int[numeric] = lk.integral[feat[numeric]]
    left_hi, right_lo = split_bounds(value, is_int)
    return TreeTables(left_hi, right_lo, lk.parent, lk.integral, lk.cat_split)


def leaf_boxes(model: Model, root: int = 0, context: Box | None = None) -> LeafBoxes:
    """The boxes of every leaf below *root*, starting from *context* (default: the domain)."""
    ctx = context or Box.domain(model)
    if root == 0:
        is_leaf = model.nodes["kind"] == _LEAF
        pairs = int(model.nodes["depth"][is_leaf].sum())
        if pairs <= ANCESTOR_PAIRS_MAX:
            return ancestor_boxes(model, ctx, np.flatnonzero(is_leaf))
    return stepped_leaf_boxes(model, root, ctx)


def stepped_leaf_boxes(model: Model, root: int, ctx: Box) -> LeafBoxes:
    """:func:`leaf_boxes` by stepping down from *root* level by level (:func:`step_down`);
    for a subtree, and the reference the whole tree's ancestor route is tested against."""
    kind = model.nodes["kind"]
    n_feat = len(model.features)

    frontier = np.array([root], dtype=np.int64)
    lo = np.empty((1, n_feat + 1), dtype=np.float64)
    hi = np.empty((1, n_feat + 1), dtype=np.float64)
    lo[0, :n_feat] = ctx.lo
    hi[0, :n_feat] = ctx.hi
    cats = _masked_cats(ctx, categorical_splits(model), 1)
    out_leaves: list[np.ndarray] = []
    out_lo: list[np.ndarray] = []
    out_hi: list[np.ndarray] = []
    out_cats: dict[int, list[np.ndarray]] = {f: [] for f in cats}
    while frontier.size:
        is_leaf = kind[frontier] == NodeKind.LEAF
        if is_leaf.any():
            out_leaves.append(frontier[is_leaf])
            out_lo.append(lo[is_leaf])
            out_hi.append(hi[is_leaf])
            for f, m in cats.items():
                out_cats[f].append(m[is_leaf])
        if is_leaf.all():
            break
        inner = ~is_leaf
        frontier, lo, hi, cats = step_down(
            model, frontier[inner], lo[inner], hi[inner], {f: m[inner] for f, m in cats.items()}
        )

    leaves = np.concatenate(out_leaves) if out_leaves else np.empty(0, dtype=np.int64)
    order = np.argsort(leaves, kind="stable")
    leaves = leaves[order]
    lo = np.concatenate(out_lo)[order] if out_lo else np.empty((0, n_feat + 1))
    hi = np.concatenate(out_hi)[order] if out_hi else np.empty((0, n_feat + 1))
    cat_arrays = {f: np.concatenate(v)[order] for f, v in out_cats.items()}
    return complete_boxes(model, leaves, lo, hi, cat_arrays)


def _masked_cats(ctx: Box, cat_split: frozenset[int], n: int) -> dict[int, np.ndarray]:
    """*n* copies of the code masks of *ctx* that boxes carry: those of categorical features
    that some split tests or the context narrows; a feature without a mask ranges over its
    whole vocabulary (see ``cat_mask``)."""
    return {
        f: np.repeat(m[None, :], n, axis=0)
        for f, m in ctx.cats.items()
        if f in cat_split or not m.all()
    }


#: Up to this many (leaf, ancestor) pairs (the sum of the leaves' depths), the whole tree's
#: boxes are built from each leaf's ancestors (:func:`ancestor_boxes`: a few dozen numpy calls
#: whatever the depth); above it stepping down level by level is cheaper, since a node's
#: tightening is then shared by every leaf below it (docs/performance.md, "Fixed costs").
ANCESTOR_PAIRS_MAX = 32_768
#: Leaves per block of :func:`ancestor_boxes` (bounds the (leaf, ancestor) pairs it holds).
LEAF_BLOCK = 1 << 14
#: Up to this many leaves, :func:`ancestor_boxes` finds each leaf's path by descent
#: (:func:`path_to`) instead of building the whole tree's parent links.
FEW_PATHS = 64


def ancestor_boxes(model: Model, ctx: Box, leaves: np.ndarray) -> LeafBoxes:
    """The boxes of *leaves* (leaf nodes) from the root, from their ancestors: the (leaf,
    ancestor) pairs are collected by following parent links up from all leaves at once, then
    applied with one ``ufunc.at`` per bound, root first for each leaf, as :func:`step_down`
    tightens level by level (the same split bounds, ufuncs and order per cell, so the same
    bits, signed zeros included).  Needs only the parent links, not the whole tree's tables;
    when the leaves are a good part of the tree (the whole tree's boxes), each node's own
    split bound is computed once instead of once per pair (:func:`incoming`)."""
    nodes = model.nodes
    n_feat = len(model.features)
    width = n_feat + 1
    leaves = np.asarray(leaves, dtype=np.int64)
    n = leaves.size
    lo = np.empty((n, width), dtype=np.float64)
    hi = np.empty((n, width), dtype=np.float64)
    lo[:, :n_feat] = ctx.lo
    hi[:, :n_feat] = ctx.hi
    cats = _masked_cats(ctx, categorical_splits(model), n)
    if n <= FEW_PATHS:
        # Each leaf's path by descent from the root (no whole-tree parent links, which cost
        # 10 ms at 1M nodes: a re-check's changed leaves and printed counterexamples).
        paths = [path_to(model, leaf) for leaf in leaves.tolist()]
        if any(paths):
            rows = np.repeat(np.arange(n, dtype=np.int64), [len(p) for p in paths])
            flat = [step for p in paths for step in p]
            parents = np.array([p for p, _ in flat], dtype=np.int64)
            went_left = np.array([w for _, w in flat], dtype=bool)
            _apply_ancestors(model, [(rows, parents, went_left)], lo, hi, cats)
        return complete_boxes(model, leaves, lo, hi, cats)
    if n and n * INCOMING_SHARE >= nodes.shape[0]:
        inc = incoming(model)
        for start in range(0, n, LEAF_BLOCK):
            stop = min(n, start + LEAF_BLOCK)
            _apply_incoming(model, inc, leaves[start:stop], start, lo, hi, cats)
        return complete_boxes(model, leaves, lo, hi, cats)
    lk = links(model)
    left = nodes["left"]
    for start in range(0, n, LEAF_BLOCK):
        rows = np.arange(start, min(n, start + LEAF_BLOCK), dtype=np.int64)
        child = leaves[rows]
        steps: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        while rows.size:
            parent = lk.parent[child]
            up = parent >= 0
            if not up.all():
                rows, child, parent = rows[up], child[up], parent[up]
                if not rows.size:
                    break
            steps.append((rows, parent, left[parent] == child))
            child = parent
        if steps:
            _apply_ancestors(model, steps[::-1], lo, hi, cats)
    return complete_boxes(model, leaves, lo, hi, cats)


#: :func:`ancestor_boxes` builds the per-node tables of :func:`incoming` when the leaves asked
#: for are at least this fraction (1 / INCOMING_SHARE) of the tree's nodes: a whole tree's
#: leaves are about half of them; the few leaves of an incremental re-check are not.
INCOMING_SHARE = 4


@frozen(eq=False)
class Incoming:
    """Per node, the tightening that its parent's split gives it (a node's box is its
    parent's box so tightened).  Every array has one more slot, at index -1, that stands for
    "no node" (the parent of the root), so that following parent links needs no masks; the
    root, that slot and the children of splits that do not bound a column hold neutral
    values (+inf for ``hi``, -inf for ``lo``, every code for a code set)."""

    parent: np.ndarray  # (N + 1,) int64 parent index, -1 for the root (and the extra slot)
    has_parent: np.ndarray  # (N + 1,) bool
    cell: np.ndarray  # (N + 1,) int64: the numeric split's feature (the column it bounds)
    hi_bound: np.ndarray  # (N + 1,) float64: the left child's hi (left_hi), else +inf
    lo_bound: np.ndarray  # (N + 1,) float64: the right child's lo (right_lo), else -inf
    #: categorical feature -> (N + 1,) uint64: bit c set when code c passes the node's
    #: parent's split (every bit of the vocabulary where that split is not on the feature);
    #: only features of at most :data:`CAT_BITS` values.
    cat_bits: dict[int, np.ndarray]


#: Vocabulary size up to which a categorical feature's code set is held as the bits of one
#: uint64 in :class:`Incoming` (larger vocabularies take the per-pair route).
CAT_BITS = 64


def incoming(model: Model) -> Incoming:
    """The :class:`Incoming` tables of *model* (computed once, kept by the model)."""
    return model.derived.get(("geometry.incoming",), lambda: _incoming(model))


def _incoming(model: Model) -> Incoming:
    nodes = model.nodes
    lk = links(model)
    n = nodes.shape[0]
    kind = nodes["kind"]
    parent = np.empty(n + 1, dtype=np.int64)
    parent[:n] = lk.parent
    parent[n] = -1
    num = np.flatnonzero(kind == _NUMERIC)
    feat = nodes["feature"][num].astype(np.int64)
    # The bounds _apply_ancestors computes per (leaf, ancestor) pair, here once per split:
    # the same elementwise ufuncs on the same operands, so the same bits.
    left_hi, right_lo = split_bounds(nodes["value"][num].astype(np.float64), lk.integral[feat])
    lc = nodes["left"][num]
    rc = nodes["right"][num]
    hi_bound = np.full(n + 1, np.inf)
    lo_bound = np.full(n + 1, -np.inf)
    hi_bound[lc] = left_hi
    lo_bound[rc] = right_lo
    cell = np.zeros(n + 1, dtype=np.int64)
    cell[lc] = feat
    cell[rc] = feat
    cat_bits: dict[int, np.ndarray] = {}
    for g in sorted(lk.cat_split):
        size = len(model.features[g].values)
        if size > CAT_BITS:
            continue
        every = (1 << size) - 1
        bits = np.full(n + 1, every, dtype=np.uint64)
        at = np.flatnonzero((kind == _CATEGORICAL) & (nodes["feature"] == g))
        member = model.membership[nodes["aux"][at].astype(np.int64)[:, None] + np.arange(size)]
        weights = np.left_shift(np.uint64(1), np.arange(size, dtype=np.uint64))
        goes_left = (member.astype(bool) * weights).sum(axis=1, dtype=np.uint64)
        bits[nodes["left"][at]] = goes_left
        bits[nodes["right"][at]] = goes_left ^ np.uint64(every)
        cat_bits[g] = bits
    return Incoming(parent, parent >= 0, cell, hi_bound, lo_bound, cat_bits)


def _apply_incoming(
    model: Model,
    inc: Incoming,
    leaves: np.ndarray,
    first: int,
    lo: np.ndarray,
    hi: np.ndarray,
    cats: dict[int, np.ndarray],
) -> None:
    """Tighten rows ``first ..`` of *lo*, *hi*, *cats* (the boxes of *leaves*) by the splits
    above each leaf, root first.  The nodes from each leaf up are gathered level by level into
    a (levels, leaves) matrix, farthest level first, so that its cells read in order give each
    leaf's nodes root first; then one ``ufunc.at`` per bound applies them all: every cell of
    *lo*/*hi* gets the tightenings of :func:`_apply_ancestors` in the same order (the same
    bits, signed zeros included), with neutral ones (+-inf) between them for nodes whose
    parent's split bounds another column or none.  A code set is the AND of the nodes' bits
    (exact in any order)."""
    k = leaves.size
    levels = model.max_depth
    chain = np.empty((max(levels, 1), k), dtype=np.int64)
    cur = leaves
    for i in range(levels):
        chain[levels - 1 - i] = cur
        cur = inc.parent[cur]
    if levels == 0:
        chain[0] = cur
    if inc.has_parent[cur].any():  # deeper than max_depth says (never for a loaded model)
        up = [cur]
        while inc.has_parent[cur].any():
            cur = inc.parent[cur]
            up.append(cur)
        chain = np.concatenate([np.stack(up[-2::-1]), chain])
    width = lo.shape[1]
    cell = inc.cell[chain]
    cell += np.arange(first * width, (first + k) * width, width, dtype=np.int64)
    cell = cell.reshape(-1)
    np.minimum.at(hi.reshape(-1), cell, inc.hi_bound[chain].reshape(-1))
    np.maximum.at(lo.reshape(-1), cell, inc.lo_bound[chain].reshape(-1))
    if not cats:
        return
    cat_split = links(model).cat_split
    for g, m in cats.items():
        bits = inc.cat_bits.get(g)
        if bits is None:
            if g in cat_split:  # (a feature no split tests keeps its context mask)
                _apply_cats_by_pairs(model, inc, g, m, chain, first)
            continue
        word = np.bitwise_and.reduce(bits[chain], axis=0)
        codes = np.left_shift(np.uint64(1), np.arange(m.shape[1], dtype=np.uint64))
        m[first : first + k] &= (word[:, None] & codes) != 0


def _apply_cats_by_pairs(
    model: Model, inc: Incoming, g: int, m: np.ndarray, chain: np.ndarray, first: int
) -> None:
    """The code masks of categorical feature *g* (of more than :data:`CAT_BITS` values) from
    the nodes of *chain* (as :func:`_apply_incoming` holds them), as :func:`_apply_ancestors`
    does."""
    nodes = model.nodes
    k = chain.shape[1]
    node = chain.reshape(-1)
    p = inc.parent[node]
    split = np.flatnonzero(
        (p >= 0) & (nodes["kind"][p] == NodeKind.CATEGORICAL) & (nodes["feature"][p] == g)
    )
    if not split.size:
        return
    p = p[split]
    went_left = nodes["left"][p] == node[split]
    member = model.membership[
        nodes["aux"][p].astype(np.int64)[:, None] + np.arange(m.shape[1])
    ].astype(bool)
    at = split % k + first
    order = np.argsort(at, kind="stable")
    at = at[order]
    keep = (member == went_left[:, None])[order]
    starts = np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))
    m[at[starts]] &= np.logical_and.reduceat(keep, starts, axis=0)


def _apply_ancestors(
    model: Model,
    steps: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    lo: np.ndarray,
    hi: np.ndarray,
    cats: dict[int, np.ndarray],
) -> None:
    """Tighten rows of *lo*, *hi*, *cats* by their (row, ancestor, went left) *steps*, given
    root first."""
    nodes = model.nodes
    r = np.concatenate([s[0] for s in steps])
    p = np.concatenate([s[1] for s in steps])
    went_left = np.concatenate([s[2] for s in steps])
    f = nodes["feature"][p].astype(np.int64)
    numeric = nodes["kind"][p] == NodeKind.NUMERIC
    # The bounds tables() holds, computed for these splits only (same ufuncs, same bits).
    integral = integral_features(model)
    left_hi, right_lo = split_bounds(nodes["value"][p].astype(np.float64), numeric & integral[f])
    cell = r * lo.shape[1] + f
    sel = numeric & went_left
    np.minimum.at(hi.reshape(-1), cell[sel], left_hi[sel])
    sel = numeric & ~went_left
    np.maximum.at(lo.reshape(-1), cell[sel], right_lo[sel])
    categorical = ~numeric
    for g, m in cats.items():
        sel = np.flatnonzero(categorical & (f == g))
        if sel.size:
            member = model.membership[
                nodes["aux"][p[sel]].astype(np.int64)[:, None] + np.arange(m.shape[1])
            ].astype(bool)
            # A leaf's mask is the AND over its splits on g: group the splits by leaf.
            at = r[sel]
            order = np.argsort(at, kind="stable")
            at = at[order]
            keep = (member == went_left[sel][:, None])[order]
            starts = np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))
            m[at[starts]] &= np.logical_and.reduceat(keep, starts, axis=0)


def step_down(
    model: Model, fr: np.ndarray, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """One exact step down for a batch: the children of the splits *fr* (all left children,
    then all right children) and their boxes, the rows of *lo*, *hi* (k, F) and *cats* (k, V)
    tightened by each split (integral features round, a float feature's right side starts at
    the next float64 above the threshold)."""
    nodes = model.nodes
    kind = nodes["kind"]
    k = fr.size
    children = np.concatenate([nodes["left"][fr], nodes["right"][fr]]).astype(np.int64)
    lo2 = np.concatenate([lo, lo])
    hi2 = np.concatenate([hi, hi])
    f_idx = nodes["feature"][fr].astype(np.int64)
    num = np.flatnonzero(kind[fr] == NodeKind.NUMERIC)
    if num.size:
        fn = f_idx[num]
        # The bounds tables() holds, computed for these splits only (same ufuncs, same bits):
        # a subtree's boxes (a re-check's changed subtree) need no whole-tree table.
        left_hi, right_lo = split_bounds(
            nodes["value"][fr[num]].astype(np.float64), integral_features(model)[fn]
        )
        hi2[num, fn] = np.minimum(hi2[num, fn], left_hi)
        lo2[num + k, fn] = np.maximum(lo2[num + k, fn], right_lo)
    cats2 = {}
    for f, m in cats.items():
        m2 = np.concatenate([m, m])
        rows = np.flatnonzero((kind[fr] == NodeKind.CATEGORICAL) & (f_idx == f))
        if rows.size:
            width = m.shape[1]
            member = model.membership[
                nodes["aux"][fr[rows]].astype(np.int64)[:, None] + np.arange(width)
            ].astype(bool)
            m2[rows] &= member
            m2[rows + k] &= ~member
        cats2[f] = m2
    return children, lo2, hi2, cats2


def empty_rows(lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]) -> np.ndarray:
    """(k,) bool: which boxes contain no input."""
    empty: np.ndarray = np.any(lo > hi, axis=1)
    for m in cats.values():
        empty |= ~m.any(axis=1)
    return empty


def context_box(model: Model, node: int) -> Box:
    """The box of the inputs that reach *node* from the root (the domain for the root), with
    the tightening of :func:`leaf_boxes`, so that ``leaf_boxes(model, node, context_box(model,
    node))`` gives the same rows as the whole tree's ``leaf_boxes`` for those leaves."""
    nodes = model.nodes
    box = Box.domain(model)
    steps = path_to(model, node)
    if not steps:
        return box
    parents = np.array([p for p, _ in steps], dtype=np.int64)
    went_left = np.array([w for _, w in steps], dtype=bool)
    feat = nodes["feature"][parents].astype(np.int64)
    numeric = nodes["kind"][parents] == NodeKind.NUMERIC
    # The bounds tables() holds, computed for the path's splits only (same ufuncs, same bits).
    left_hi, right_lo = split_bounds(
        nodes["value"][parents].astype(np.float64), numeric & integral_features(model)[feat]
    )
    # ufunc.at applies the steps in path order, as leaf_boxes does level by level.
    sel = numeric & went_left
    np.minimum.at(box.hi, feat[sel], left_hi[sel])
    sel = numeric & ~went_left
    np.maximum.at(box.lo, feat[sel], right_lo[sel])
    for k in np.flatnonzero(~numeric).tolist():
        f = int(feat[k])
        offset = int(nodes["aux"][parents[k]])
        member = model.membership[offset : offset + box.cats[f].size].astype(bool)
        box.cats[f] &= member if went_left[k] else ~member
    return box


def boxes_of(model: Model, leaves: np.ndarray) -> LeafBoxes:
    """The rows of ``leaf_boxes(model)`` for the given leaf nodes (sorted), computed from each
    leaf's ancestors alone: bit for bit what the whole tree's ``leaf_boxes`` gives them."""
    leaves = np.asarray(leaves, dtype=np.int64)
    inner = np.flatnonzero(model.nodes["kind"][leaves] != NodeKind.LEAF)
    if inner.size:
        raise ValueError(f"node {int(leaves[inner[0]])} is not a leaf")
    return ancestor_boxes(model, Box.domain(model), leaves)


class LazyLeafBoxes:
    """Every leaf of a model, with boxes computed only for the rows taken.

    Stands in for the whole tree's :class:`LeafBoxes` where only a few rows are looked at
    (the incremental checker's counterexamples): ``leaves``, ``size`` and ``take`` behave the
    same, and ``take`` gives the same arrays (:func:`boxes_of`)."""

    def __init__(self, model: Model, leaves: np.ndarray) -> None:
        self.model = model
        self.leaves = leaves
        self._fetched: dict[int, LeafBoxes] = {}  # row -> its box, from :meth:`prefetch`

    @property
    def size(self) -> int:
        return int(self.leaves.shape[0])

    def take(self, rows: np.ndarray) -> LeafBoxes:
        if rows.size == 1 and (got := self._fetched.get(int(rows[0]))) is not None:
            return got
        return boxes_of(self.model, self.leaves[rows])

    def prefetch(self, rows: np.ndarray) -> None:
        """Compute the boxes of *rows* (sorted) in one go, for later one-row takes
        (one :func:`boxes_of` call costs about as much for a few leaves as for one)."""
        new = [r for r in rows.tolist() if r not in self._fetched]
        if new:
            boxes = boxes_of(self.model, self.leaves[new])
            for j, r in enumerate(new):
                self._fetched[r] = boxes.take(np.array([j]))


def cat_mask(cats: dict[int, np.ndarray], feature: int, rows: int, size: int) -> np.ndarray:
    """The (rows, size) code mask of *feature*: stored, or all-true (read-only) when absent."""
    m = cats.get(feature)
    if m is not None:
        return m
    return np.broadcast_to(np.ones(size, dtype=bool), (rows, size))


def path_to(model: Model, leaf: int, root: int = 0) -> list[tuple[int, bool]]:
    """The splits from *root* down to *leaf*: ``(node, went_left)`` pairs, top first."""
    steps = _descend(model, leaf, root)
    if steps is not None:
        return steps
    parents = links(model).parent
    up: list[tuple[int, bool]] = []
    node = leaf
    left = model.nodes["left"]
    while node != root:
        parent = int(parents[node])
        if parent < 0:
            raise ValueError(f"node {leaf} is not below node {root}")
        up.append((parent, int(left[parent]) == node))
        node = parent
    up.reverse()
    return up


def _descend(model: Model, node: int, root: int) -> list[tuple[int, bool]] | None:
    """:func:`path_to` without parent links, for trees laid out in pre-order (what the
    compiler and the importers write: a split's right subtree starts at its right child, so
    *node* is on the right exactly when it is at or after it): go down from *root* by that
    rule and check that the walk arrives at *node*.  Arriving is proof enough on any layout,
    since a tree has one path of child links to each node; None when the walk does not."""
    nodes = model.nodes
    steps: list[tuple[int, bool]] = []
    here = root
    for _ in range(model.max_depth + 1):
        if here == node:
            return steps
        # one read of the record as Python numbers: (value, left, right, aux, feature, kind, ..)
        rec = nodes[here].item()
        if rec[5] == _LEAF:
            return None
        went_left = node < rec[2]
        steps.append((here, went_left))
        here = rec[1] if went_left else rec[2]
    return steps if here == node else None
