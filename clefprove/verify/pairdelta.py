"""A relational invariant's violating pairs after an edit, from those before it.

When every pair is decided by cell tests (:attr:`~clefprove.verify.relational.PairChecker.
on_boxes`: the conjunctions of ``when`` made of single-feature literals), whether two leaves
form a violating pair is a function of the two leaves alone (their boxes and actions).  An edit
replaces some leaves (*gone*, with their old boxes) by others (*added*) and keeps the rest
(*common*: the same path records, so the same box and action).  So

    pairs(new) = pairs(old) - pairs(old) touching gone + pairs(new) touching added,

and the pairs that touch a few leaves are found without looking at the others: each given
box is sent down the tree from the root, and only nodes whose box meets it on every feature
but f are entered (a partner's box lies inside its node's box, and must meet the given one
there).  The leaves reached are tested with the pair matrix's cell test
(:meth:`PairChecker.cells`), on a :class:`PairChecker` built over the given and the reached
boxes only.  Nothing here grows with the tree: it follows the given boxes' neighbourhoods.

Tested against a fresh check of the edited tree (counts, first pairs, printed pairs) in
``tests/verify/test_pairdelta.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import (
    Box,
    LeafBoxes,
    boxes_of,
    categorical_splits,
    complete_boxes,
    empty_rows,
    step_down,
)
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.verify import relational as rl
from clefprove.verify.options import CheckOptions
from clefprove.verify.relational import (
    Candidate,
    PairChecker,
    PairCount,
    Prepared,
    confirmed_result,
)
from clefprove.verify.verdicts import InvariantResult

#: Query entries (given box, tree node) stepped down at once (each holds two boxes' bounds).
STEP_ENTRIES = 1 << 16


@frozen(eq=False)
class Touching:
    """The violating pairs with at least one leaf among some given leaves."""

    count: int
    #: With ``listed``: them as (x leaf, x' leaf) ids (the given leaves' own ids, the tree's
    #: node ids for the others; the symmetric forms' smaller id first), sorted by rows.
    pairs: np.ndarray  # (m, 2) int64


def touching(
    model: Model,
    prep: Prepared,
    given: LeafBoxes,
    ids: np.ndarray,
    exclude: np.ndarray,
    listed: bool = False,
) -> Touching:
    """The violating pairs of *prep* (decided on boxes) with one leaf among *given* (boxes
    with their actions and confidences, named *ids*) and the other among *given* too or among
    *model*'s leaves that are not in *exclude* (sorted node ids)."""
    return touching_groups(model, prep, [(given, ids, listed)], exclude)[0]


def touching_groups(
    model: Model,
    prep: Prepared,
    groups: list[tuple[LeafBoxes, np.ndarray, bool]],
    exclude: np.ndarray,
) -> list[Touching]:
    """:func:`touching` of several groups ``(given, ids, listed)`` at once (one descent):
    no pair across two groups is counted."""
    none = np.empty((0, 2), dtype=np.int64)
    sizes = [g.size for g, _, _ in groups]
    n_q = sum(sizes)
    if n_q == 0:
        return [Touching(0, none) for _ in groups]
    group_of = np.repeat(np.arange(len(groups)), sizes)
    given = _concat([g for g, _, _ in groups])
    pcq = PairChecker(model, prep, _named(given, np.arange(n_q)))
    if not pcq.on_boxes:
        raise ValueError("not an invariant whose pairs cell tests decide")
    live_q = np.flatnonzero(np.logical_or.reduce([s.ok for s in pcq.sides]))
    q_of_row = pcq.boxes.leaves[live_q]  # rows of given
    at, cand_leaf, cand = _reached(model, prep.relation.feature, _hull(pcq, live_q), exclude)
    cand_q = q_of_row[at]
    uniq, first_at = np.unique(cand_leaf, return_index=True)
    n_c = uniq.size
    reached = _named(cand.take(first_at), n_q + np.arange(n_c))
    pc = PairChecker(model, prep, _concat([_named(given, np.arange(n_q)), reached]))
    row = np.full(n_q + n_c, -1, dtype=np.int64)
    row[pc.boxes.leaves] = np.arange(pc.boxes.size)
    name = np.concatenate([*(np.asarray(i, dtype=np.int64) for _, i, _ in groups), uniq])
    leaf_of_row = name[pc.boxes.leaves]
    monotone = prep.rank is not None
    # Given x tree: each (given, reached leaf) once, both ways round for monotone.
    ra = row[cand_q]
    rb = row[n_q + np.searchsorted(uniq, cand_leaf)]
    both = (ra >= 0) & (rb >= 0)
    ra, rb, ga = ra[both], rb[both], group_of[cand_q[both]]
    tree_pairs = []
    for a, b in ((ra, rb), (rb, ra)) if monotone else ((ra, rb),):
        ok = pc.first_cell(a, b) >= 0
        tree_pairs.append((a[ok], b[ok], ga[ok]))
    out = []
    for g, (_, _, listed) in enumerate(groups):
        found = [(a[w == g], b[w == g]) for a, b, w in tree_pairs]
        # Given x given: ordered pairs for monotone, each unordered pair once otherwise.
        rg = row[q_of_row[group_of[q_of_row] == g]]
        rg = rg[rg >= 0]
        xa, xb = np.meshgrid(rg, rg, indexing="ij")
        xa, xb = xa.ravel(), xb.ravel()
        keep = xa != xb if monotone else xa < xb
        xa, xb = xa[keep], xb[keep]
        ok = pc.first_cell(xa, xb) >= 0
        found.append((xa[ok], xb[ok]))
        count = sum(int(a.size) for a, _ in found)
        if not listed:
            out.append(Touching(count, none))
            continue
        pa = np.concatenate([leaf_of_row[a] for a, _ in found])
        pb = np.concatenate([leaf_of_row[b] for _, b in found])
        if not monotone:
            pa, pb = np.minimum(pa, pb), np.maximum(pa, pb)
        order = np.lexsort((pb, pa))
        out.append(Touching(count, np.stack([pa[order], pb[order]], axis=1)))
    return out


def recount(
    model: Model,
    prep: Prepared,
    old: PairCount,
    counterexamples: int,
    gone: LeafBoxes,
    added: LeafBoxes,
    to_new: Callable[[np.ndarray], np.ndarray],
) -> PairCount | None:
    """The pair count of *model* after an edit, from *old* (the count before it): *gone* are
    the old leaves the edit replaced (their boxes in the old tree, their old node ids),
    *added* the new leaves below the changed subtrees (sorted node ids), *to_new* maps the
    other old leaves' node ids to the new ones (keeping their order).  None when the first
    pairs to print cannot be told from *old*'s (a prefix of them went), or *old* does not
    add up (a damaged row): then the tree is decided afresh."""
    want = max(counterexamples, 1) + rl.EXTRA_CONFIRM
    exclude = added.leaves
    lost, new = touching_groups(
        model, prep, [(gone, gone.leaves, False), (added, added.leaves, True)], exclude
    )
    total = old.total - lost.count + new.count
    if total < 0:
        return None
    prefix = old.first
    keep = ~np.isin(prefix, gone.leaves).any(axis=1)
    kept = to_new(prefix[keep].ravel()).reshape(-1, 2)
    if kept.size and int(kept.min()) < 0:
        return None
    merged = np.concatenate([kept, new.pairs])
    merged = merged[np.lexsort((merged[:, 1], merged[:, 0]))]
    if old.total <= prefix.shape[0]:  # every old pair was listed: every new one is
        if merged.shape[0] != total:
            return None
        known = total
    else:
        # The old pairs that were not listed come after the last listed one: the merged
        # list is the new one up to the last kept pair.
        if not kept.size:
            return None
        last = kept[-1]
        known = int(
            np.count_nonzero(
                (merged[:, 0] < last[0]) | ((merged[:, 0] == last[0]) & (merged[:, 1] <= last[1]))
            )
        )
        if known < min(want, total):
            return None
    return PairCount(total, merged[: min(known, max(want, rl.KEEP_PAIRS))])


def counted_result(
    model: Model,
    prep: Prepared,
    settings: CheckOptions,
    counterexamples: int,
    t0: float,
    count: PairCount,
    *,
    paths_checked: int,
    paths_reused: int,
) -> InvariantResult | None:
    """The result a fresh check prints for the pair count *count* of *model*: the first pairs
    tried in order, each witness built from the two leaves' boxes as the fresh check builds
    it (None if a listed pair is not a live pair of *model*: a damaged count)."""
    want = max(counterexamples, 1) + rl.EXTRA_CONFIRM
    nodes = np.unique(count.first[:want].ravel())
    if nodes.size and (int(nodes[-1]) >= model.n_nodes or int(nodes[0]) < 0):
        return None
    if nodes.size and np.any(model.nodes["kind"][nodes] != NodeKind.LEAF):
        return None
    pc = PairChecker(model, prep, boxes_of(model, nodes))
    row = {int(leaf): r for r, leaf in enumerate(pc.boxes.leaves.tolist())}
    pairs = count.first[:want].tolist()
    if any(a not in row or b not in row for a, b in pairs):
        return None
    ra = np.array([row[a] for a, _ in pairs], dtype=np.int64)
    rb = np.array([row[b] for _, b in pairs], dtype=np.int64)
    # The conjunction pair a fresh run builds the witness from: the first that violates.
    cells = pc.first_cell(ra, rb)
    if np.any(cells < 0):
        return None
    candidates: list[Candidate] = [
        (a, b, pc.witness, (int(x), int(y), int(c)))
        for (a, b), x, y, c in zip(pairs, ra, rb, cells, strict=True)
    ]
    return confirmed_result(
        model,
        prep,
        settings,
        counterexamples,
        t0,
        count.total,
        0,
        candidates,
        paths_checked=paths_checked,
        paths_reused=paths_reused,
    )


#: Per given row: ``lo``, ``hi`` (rows, F + 1) and code masks of a box.
Hull = tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]


def _hull(pc: PairChecker, live: np.ndarray) -> Hull:
    """Per row in *live*: the smallest box holding its narrowed boxes of every side where
    it is not empty (``lo``, ``hi`` and code masks; a partner must meet one of them)."""
    n_feat = len(pc.model.features)
    lo = np.full((live.size, n_feat + 1), np.inf)
    hi = np.full((live.size, n_feat + 1), -np.inf)
    cats: dict[int, np.ndarray] = {}
    for side in pc.sides:
        ok = side.ok[live]
        r = live[ok]
        lo[ok] = np.minimum(lo[ok], side.rows.lo[r])
        hi[ok] = np.maximum(hi[ok], side.rows.hi[r])
        for g, m in side.rows.cats.items():
            c = cats.setdefault(g, np.zeros((live.size, m.shape[1]), dtype=bool))
            c[ok] |= m[r]
    for side in pc.sides:  # a side without a mask for g allows every code
        for g, c in cats.items():
            if g not in side.rows.cats:
                c[side.ok[live]] = True
    return lo, hi, cats


def _reached(
    model: Model,
    f: int,
    hull: Hull,
    exclude: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, LeafBoxes]:
    """Every (given box, leaf) such that the leaf's box meets the given box (a row of
    *hull*) on every feature but *f*, the leaf not in *exclude*: the given rows, the
    leaves and the leaves' boxes (as ``leaf_boxes`` computes them)."""
    h_lo, h_hi, h_cats = hull
    feats = model.features
    n_feat = len(feats)
    num = np.array(
        [g for g, ft in enumerate(feats) if g != f and ft.type is not FeatureType.CATEGORICAL],
        dtype=np.int64,
    )
    q_lo, q_hi = h_lo[:, num], h_hi[:, num]
    q_cats = {g: m for g, m in h_cats.items() if g != f}
    kind = model.nodes["kind"]
    dom = Box.domain(model)
    split_cats = sorted(categorical_splits(model))
    n = h_lo.shape[0]
    q = np.arange(n, dtype=np.int64)
    fr = np.zeros(n, dtype=np.int64)
    lo = np.empty((n, n_feat + 1))
    hi = np.empty((n, n_feat + 1))
    lo[:, :n_feat] = dom.lo
    hi[:, :n_feat] = dom.hi
    cats = {g: np.ones((n, dom.cats[g].size), dtype=bool) for g in split_cats}
    out_q: list[np.ndarray] = []
    out_leaf: list[np.ndarray] = []
    out_lo: list[np.ndarray] = []
    out_hi: list[np.ndarray] = []
    out_cats: dict[int, list[np.ndarray]] = {g: [] for g in split_cats}
    pending = [(q, fr, lo, hi, cats)]
    while pending:
        q, fr, lo, hi, cats = pending.pop()
        meet = ~empty_rows(lo[:, :n_feat], hi[:, :n_feat], cats)
        if num.size:
            meet &= np.all(lo[:, num] <= q_hi[q], axis=1) & np.all(q_lo[q] <= hi[:, num], axis=1)
        for g, m in q_cats.items():
            if g in cats:
                meet &= np.any(cats[g] & m[q], axis=1)
        leaf = meet & (kind[fr] == NodeKind.LEAF)
        if leaf.any():
            keep = leaf.copy()
            keep[leaf] = ~np.isin(fr[leaf], exclude)
            out_q.append(q[keep])
            out_leaf.append(fr[keep])
            out_lo.append(lo[keep])
            out_hi.append(hi[keep])
            for g in split_cats:
                out_cats[g].append(cats[g][keep])
        inner = np.flatnonzero(meet & (kind[fr] != NodeKind.LEAF))
        for s in range(0, inner.size, STEP_ENTRIES):
            part = inner[s : s + STEP_ENTRIES]
            children, lo2, hi2, cats2 = step_down(
                model, fr[part], lo[part], hi[part], {g: m[part] for g, m in cats.items()}
            )
            pending.append((np.concatenate([q[part], q[part]]), children, lo2, hi2, cats2))
    if out_leaf:
        leaves = np.concatenate(out_leaf)
        boxes = complete_boxes(
            model,
            leaves,
            np.concatenate(out_lo),
            np.concatenate(out_hi),
            {g: np.concatenate(v) for g, v in out_cats.items()},
        )
        return np.concatenate(out_q), leaves, boxes
    e = np.empty(0, dtype=np.int64)
    return (
        e,
        e,
        complete_boxes(
            model,
            e,
            np.empty((0, n_feat + 1)),
            np.empty((0, n_feat + 1)),
            {g: np.empty((0, dom.cats[g].size), dtype=bool) for g in split_cats},
        ),
    )


def _named(boxes: LeafBoxes, ids: np.ndarray) -> LeafBoxes:
    """*boxes* with *ids* in place of their leaf nodes (rows keep their order)."""
    return LeafBoxes(ids, boxes.lo, boxes.hi, boxes.cats, boxes.actions, boxes.feasible)


def _concat(parts: list[LeafBoxes]) -> LeafBoxes:
    """Rows of several :class:`LeafBoxes` in turn; a code mask absent from a part (its whole
    vocabulary) is filled in where another part has one."""
    keys = sorted({g for p in parts for g in p.cats})
    cats = {}
    for g in keys:
        width = next(p.cats[g].shape[1] for p in parts if g in p.cats)
        cats[g] = np.concatenate(
            [p.cats[g] if g in p.cats else np.ones((p.size, width), dtype=bool) for p in parts]
        )
    return LeafBoxes(
        np.concatenate([p.leaves for p in parts]),
        np.concatenate([p.lo for p in parts]),
        np.concatenate([p.hi for p in parts]),
        cats,
        np.concatenate([p.actions for p in parts]),
        np.concatenate([p.feasible for p in parts]),
    )
