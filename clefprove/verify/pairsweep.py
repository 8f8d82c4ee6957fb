"""Leaf pairs of a relational invariant found by descending the tree, without a pair matrix.

Two leaves whose boxes meet on every feature but f have their lowest common ancestor on a split
on f: a split on any other feature g separates their g-intervals (numeric: ``hi <= t < lo``;
categorical: complementary code sets).  So the partners of a leaf A lie in the sibling subtrees
of A's f-split ancestors, each partner in exactly one of them, and every ordered pair (A, B) is
met exactly once, from A.  All (A, sibling) entries are descended together, one tree level per
numpy step:

* a child that cannot meet A's narrowed box on its split feature (on f: cannot be related to
  A's f-interval) is dropped, and so is a node below which no leaf breaks the property with A's
  action (per-node counts of leaves per severity rank / action);
* **count mode**: a node below which *every* leaf meets A's box and is related on f contributes
  its number of breaking leaves at once.  That is decided on per-node aggregates of the
  narrowed leaf boxes below it (largest ``lo`` and smallest ``hi`` per column, common codes per
  categorical column): every leaf meets ``[l, h]`` iff the largest ``lo`` is ``<= h`` and the
  smallest ``hi`` is ``>= l``.  The work then follows the nodes where A's box boundary cuts
  the other subtree, not the number of pairs;
* a leaf reached is tested exactly as the pair matrix tests a cell (``pair_ok``).

Counts are exact: a covered node counts only leaves that the exact test accepts, everything else
is tested leaf by leaf.  Stable's ``delta`` enters through float64 tests with a rigorous margin
that only ever *declines* to cover or to drop (the leaves then decide exactly).  The pair matrix
(:meth:`clefprove.verify.relational.PairChecker.chunk`) stays the reference in the tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.geometry.boxes import tables
from clefprove.model.types import FeatureType, NodeKind

#: Node pairs the dual descent steps at once (its per-pair temporaries are ~0.5 KB).
DUAL_BATCH = 1 << 18

#: Node pairs with at most this many live leaf pairs below them are decided by testing
#: every leaf pair (the pair matrix's cell test) instead of being descended further.
CELL_BLOCK = 64

#: Most columns on which a block of node pairs may still be unmet and be counted at once by
#: sorting (1: interval counts; 2: plus a two-dimensional dominance count, exact but slower
#: than descending on the benchmark trees: docs/performance.md, "relational"); else descended.
LOW_DIM = 1

#: The two-column count serves a block only when its breaking rank combinations number at
#: least this many per leaf below it (it costs per leaf, descending costs per pair found).
LOW_DIM_DENSITY = 8

#: The dual descent replaces both nodes of a pair by their children at once when neither is a
#: leaf and their active leaves differ by at most this factor (0: never, one node per step).
SPLIT_BOTH = 8.0

#: Before the node-pair filter, each node of a pair moves down its chain of splits whose other
#: child cannot meet the other node's hull (one column per step: ``PairSweep._compress``);
#: False: the descent steps through them pair by pair (the tests hold both to the matrix).
COMPRESS = True

#: A node pair stack of the dual descent: arrays (u, v) of node pairs, in pieces.
Part = list[tuple[np.ndarray, np.ndarray]]
#: (violating pairs, per row its partners): what a descent counted.
Counts = tuple[int, np.ndarray]
#: Counts the parts of the dual descent with the function it is given, in this process and
#: others (``verify.pool.forked_map``): the counts of every part, in any order.
FanOut = Callable[[Callable[[Part], Counts], list[Part]], Iterable[Counts]]
#: Node pairs the dual descent holds before it deals them into parts (``--jobs``).
FAN_OUT_PAIRS = 4096
#: Parts it deals them into: more than processes, so that one that ends early takes another.
FAN_OUT_PARTS = 8


def deal(stack: Part, parts: int) -> list[Part]:
    """The node pairs of *stack* dealt into at most *parts* parts, in turn (neighbouring
    pairs, often of similar work, go to different parts), each in pieces of DUAL_BATCH."""
    if not stack:
        return []
    u = np.concatenate([a for a, _ in stack])
    v = np.concatenate([b for _, b in stack])
    out: list[Part] = []
    for k in range(min(parts, u.size)):
        pu, pv = u[k::parts], v[k::parts]
        out.append(
            [
                (pu[i : i + DUAL_BATCH], pv[i : i + DUAL_BATCH])
                for i in range(0, pu.size, DUAL_BATCH)
            ]
        )
    return out


def stable_ok(
    lo_a: np.ndarray, hi_a: np.ndarray, lo_b: np.ndarray, hi_b: np.ndarray, delta: Fraction
) -> np.ndarray:
    """Exact ``distance([lo_a, hi_a], [lo_b, hi_b]) <= delta`` (broadcast arrays)."""
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.maximum(np.maximum(lo_b - hi_a, lo_a - hi_b), 0.0)
        df = float(delta) if delta < 2**1000 else math.inf
        margin = (np.abs(gap) + abs(df)) * 2.0**-50 + 1e-300
        sure_yes = gap + margin < df
        sure_no = gap - margin > df
        unsure = ~(sure_yes | sure_no) | ~np.isfinite(gap) | (not math.isfinite(df))
    out = np.asarray(sure_yes & ~unsure).copy()
    if unsure.any():
        la, ha, lb, hb = np.broadcast_arrays(lo_a, hi_a, lo_b, hi_b)
        for idx in zip(*np.nonzero(unsure), strict=True):
            g = max(
                Fraction(float(lb[idx])) - Fraction(float(ha[idx])),
                Fraction(float(la[idx])) - Fraction(float(hb[idx])),
                Fraction(0),
            )
            out[idx] = g <= delta
    return out


def _surely(diff: np.ndarray, delta: Fraction | None, below: bool) -> np.ndarray:
    """Where the float64 difference *diff* (one rounding) is surely ``< delta`` (*below*) or
    surely ``> delta``; False wherever rounding could matter (never a wrong True), and
    everywhere without a delta."""
    if delta is None:
        return np.zeros(diff.shape, dtype=bool)
    df = float(delta) if delta < 2**1000 else math.inf
    if not math.isfinite(df):
        return np.zeros(diff.shape, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        margin = (np.abs(diff) + abs(df)) * 2.0**-50 + 1e-300
        out: np.ndarray = (diff + margin < df) if below else (diff - margin > df)
        out &= np.isfinite(diff)
        return out


def _block_count(qb: np.ndarray, pb: np.ndarray) -> np.ndarray:
    """Per query block id in *qb*: how many entries of *pb* have that id."""
    ps = np.sort(pb)
    out: np.ndarray = np.searchsorted(ps, qb, "right") - np.searchsorted(ps, qb, "left")
    return out


def dominated(
    qb: np.ndarray, qx: np.ndarray, qy: np.ndarray, pb: np.ndarray, px: np.ndarray, py: np.ndarray
) -> np.ndarray:
    """Per query q: the points p of its block (``pb == qb``) with ``px < qx`` and ``py < qy``
    (integers; exact).  Offline divide and conquer, vectorised per level: queries and points
    sorted by (block, x, queries first on ties); at level k every block is cut into segments
    of 2^(k+1) positions, and each query in a segment's right half counts, by binary search in
    the sorted keys (segment, y), the points of its left half below it.  Every (point, query)
    pair with the point earlier is met at exactly one level: O(n log^2 n) for n entries."""
    nq = qb.size
    out = np.zeros(nq, dtype=np.int64)
    if not nq or not pb.size:
        return out
    b = np.concatenate([qb, pb])
    x = np.concatenate([qx, px])
    is_p = np.concatenate([np.zeros(nq, dtype=bool), np.ones(pb.size, dtype=bool)])
    order = np.lexsort((is_p, x, b))
    b, is_p = b[order], is_p[order]
    _, ycode = np.unique(np.concatenate([qy, py])[order], return_inverse=True)
    ycode = ycode.astype(np.int64).ravel()
    width = int(ycode.max()) + 2
    m = b.size
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    lengths = np.diff(np.append(starts, m))
    block_start = np.repeat(starts, lengths)
    local = np.arange(m) - block_start
    counts = np.zeros(m, dtype=np.int64)
    longest = int(lengths.max())
    level = 0
    while (1 << level) < longest:
        right = ((local >> level) & 1).astype(bool)
        seg = block_start + (local >> (level + 1))
        pts = ~right & is_p
        qs = right & ~is_p
        if pts.any() and qs.any():
            keys = np.sort(seg[pts] * width + ycode[pts])
            base = seg[qs] * width
            counts[qs] += np.searchsorted(keys, base + ycode[qs], "left") - np.searchsorted(
                keys, base, "left"
            )
        level += 1
    q_pos = np.flatnonzero(~is_p)
    out[order[q_pos]] = counts[q_pos]
    return out


def meet_counts(
    xb: np.ndarray,
    xlo: np.ndarray,
    xhi: np.ndarray,
    yb: np.ndarray,
    ylo: np.ndarray,
    yhi: np.ndarray,
) -> np.ndarray:
    """Per x box: the y boxes of its block (``yb == xb``) that meet it on every column, for
    boxes given by integer end codes ``(n, k)`` with closed ends (``[lo, hi]`` meets
    ``[lo', hi']`` iff ``lo' <= hi`` and ``hi' >= lo``), k = 1 or 2.  One column:
    ``#(lo' <= hi) - #(hi' < lo)`` by binary search (no y box has both).  Two columns:
    inclusion-exclusion, exact because the ways of missing are disjoint events per column
    (y wholly below or wholly above x): meets both = all - misses 1 - misses 2 + misses both,
    and "misses both" is the sum over the four (below/above, below/above) orientations of a
    two-dimensional strict dominance count (:func:`dominated`)."""
    k = xlo.shape[1]
    if k not in (1, 2):
        raise ValueError("meet_counts counts one or two columns")
    n_y = _block_count(xb, yb)
    # Block-major keys so that one binary search per column counts inside the block.
    span = int(max(xhi.max(initial=0), yhi.max(initial=0), xlo.max(initial=0), ylo.max(initial=0)))
    span += 2
    miss = []
    for d in range(k):
        klo = np.sort(yb * span + ylo[:, d])
        khi = np.sort(yb * span + yhi[:, d])
        above = np.searchsorted(klo, xb * span + span, "left") - np.searchsorted(
            klo, xb * span + xhi[:, d], "right"
        )
        below = np.searchsorted(khi, xb * span + xlo[:, d], "left") - np.searchsorted(
            khi, xb * span, "left"
        )
        miss.append(above + below)
    if k == 1:
        out: np.ndarray = n_y - miss[0]
        return out
    both = np.zeros(xb.size, dtype=np.int64)
    for sx in (False, True):  # y above x on column 0 (else below)
        for sy in (False, True):
            qx = -xhi[:, 0] if sx else xlo[:, 0]
            px = -ylo[:, 0] if sx else yhi[:, 0]
            qy = -xhi[:, 1] if sy else xlo[:, 1]
            py = -ylo[:, 1] if sy else yhi[:, 1]
            both += dominated(xb, qx, qy, yb, px, py)
    out = n_y - miss[0] - miss[1] + both
    return out


def _meets_sorted(
    klo: np.ndarray, khi: np.ndarray, g: np.ndarray, lx: np.ndarray, hx: np.ndarray
) -> np.ndarray:
    """Per query: the entries of group key *g* (keys ``g + code``, sorted: *klo* over the
    entries' lower ends, *khi* over their upper ends) whose closed interval meets
    ``[lx, hx]``: those with ``lo <= hx`` minus those with ``hi < lx``.  Codes lie in
    ``[0, span)`` below the next group key, so both arrays hold the same number of keys below
    ``g`` (the entries of the earlier groups), which cancels: two binary searches, not four."""
    out: np.ndarray = np.searchsorted(klo, g + hx, "right") - np.searchsorted(khi, g + lx, "left")
    return out


@frozen(eq=False)
class _Aggregates:
    """Per node, over the active (live, non-empty narrowed) leaf rows of one side below it."""

    packed: np.ndarray  # (N, 4C) float64: max_lo | min_hi | min_lo | max_hi over ``cols``
    max_lo: np.ndarray  # (N, C) views into packed
    min_hi: np.ndarray  # (N, C)
    min_lo: np.ndarray  # (N, C): with max_hi, the hull of the boxes below
    max_hi: np.ndarray  # (N, C)
    common: dict[int, np.ndarray]  # cat column -> (N, V') bool: codes every leaf below has
    union: dict[int, np.ndarray]  # cat column -> (N, V') bool: codes some leaf below has
    ranks: np.ndarray  # (N, R + 1) int64: leaves below with rank < r
    first_row: np.ndarray  # (N,) smallest live row below (n_rows if none)
    n_live: np.ndarray  # (N,) live rows below (active or not)
    contiguous: bool  # the live rows below every node form one range (pre-order nodes)


@dataclass
class _DualSums:
    """What a dual descent counted so far: violating pairs, per-rank difference arrays over
    row ranges, per-row partners from leaf cells (pending, then summed into *extra*)."""

    total: int
    diff: np.ndarray
    one_rows: list[tuple[np.ndarray, np.ndarray]]
    extra: np.ndarray


class PairSweep:
    """The pair search of one relational invariant over *pc* (a ``PairChecker``: its live
    boxes, narrowed sides, columns and collapsed code masks)."""

    def __init__(self, pc: Any) -> None:
        self.pc = pc
        model = pc.model
        nodes = model.nodes
        n = nodes.shape[0]
        self.kind = nodes["kind"]
        self.left = nodes["left"].astype(np.int64)
        self.right = nodes["right"].astype(np.int64)
        self.feat = nodes["feature"].astype(np.int64)
        tab = tables(model)
        self.left_hi = tab.left_hi
        self.right_lo = tab.right_lo
        self.parent = tab.parent
        self.depth = nodes["depth"].astype(np.int64)
        self.n_rows = pc.boxes.size
        self.row_of = np.full(n, -1, dtype=np.int64)
        self.row_of[pc.boxes.leaves] = np.arange(self.n_rows)
        self.f = pc.f
        self.rel = pc.prep.relation
        self.monotone = isinstance(self.rel, ck.Monotone)
        self.delta = self.rel.delta if isinstance(self.rel, ck.Stable) else None
        self.rank_row = pc.rank_row
        self.n_ranks = len(model.actions)
        # Only stable needs f's column: a pair across a split on f at t has x_f <= t < x'_f
        # (monotone holds by itself), and independent relates any two values.
        self.f_col = self.delta is not None
        self.cols = list(pc.num_cols) + ([self.f] if self.f_col else [])
        # Per feature, for the dual descent's choice of the node to split: its column among
        # num_cols, or slot C ("may help": categorical, f for stable) or C + 1 ("cannot":
        # f for monotone / independent, features no box restricts).
        c = len(pc.num_cols)
        self._miss_col = np.full(len(model.features), c + 1, dtype=np.int64)
        self._miss_col[list(pc.num_cols)] = np.arange(c)
        self._miss_col[list(pc.cat_cols)] = c
        if self.delta is not None:
            self._miss_col[self.f] = c
        self._aggs: dict[int, _Aggregates] = {}
        self._levels: list[np.ndarray] | None = None
        self._rowbox: np.ndarray | None = None
        self._hullbox: np.ndarray | None = None
        self._per_rank: np.ndarray | None = None
        self._splitcol: tuple[np.ndarray, np.ndarray] | None = None
        self._codes: tuple[np.ndarray, np.ndarray, int] | None = None
        #: Per phase of :meth:`dual_count`: seconds spent and items handled (bench/profiling).
        self.timing: dict[str, float] = {}

    def _tick(self, name: str, t0: float, items: int = 0) -> float:
        """Add the CPU time since *t0* (and *items*) to phase *name*; the CPU time now."""
        t = time.process_time()
        self.timing[name] = self.timing.get(name, 0.0) + (t - t0)
        self.timing[name + " n"] = self.timing.get(name + " n", 0.0) + items
        return t

    # ------------------------------------------------------------ per-node aggregates

    def _internal_levels(self) -> list[np.ndarray]:
        """Internal nodes grouped by depth, deepest first."""
        if self._levels is None:
            internal = np.flatnonzero(self.kind != NodeKind.LEAF)
            d = self.depth[internal]
            order = np.argsort(-d, kind="stable")
            internal, d = internal[order], d[order]
            cuts = np.flatnonzero(np.diff(d)) + 1
            self._levels = np.split(internal, cuts) if internal.size else []
        return self._levels

    def aggregates(self, j: int) -> _Aggregates:
        """The aggregates of side *j* (computed once per sweep)."""
        if j in self._aggs:
            return self._aggs[j]
        side = self.pc.sides[j]
        n = self.kind.shape[0]
        rows = np.flatnonzero(side.ok)
        nodes_of = self.pc.boxes.leaves[rows]
        cols = self.cols
        nc = len(cols)
        packed = np.empty((n, 4 * nc))
        max_lo, min_hi = packed[:, :nc], packed[:, nc : 2 * nc]
        min_lo, max_hi = packed[:, 2 * nc : 3 * nc], packed[:, 3 * nc :]
        max_lo[:] = -np.inf
        min_hi[:] = np.inf
        min_lo[:] = np.inf
        max_hi[:] = -np.inf
        max_lo[nodes_of] = side.rows.lo[rows][:, cols]
        min_hi[nodes_of] = side.rows.hi[rows][:, cols]
        min_lo[nodes_of] = max_lo[nodes_of]
        max_hi[nodes_of] = min_hi[nodes_of]
        # Live rows (active or not) below each node: first, last and how many.
        live_nodes = self.pc.boxes.leaves
        first_row = np.full(n, self.n_rows, dtype=np.int64)
        last_row = np.full(n, -1, dtype=np.int64)
        n_live = np.zeros(n, dtype=np.int64)
        first_row[live_nodes] = np.arange(self.n_rows)
        last_row[live_nodes] = np.arange(self.n_rows)
        n_live[live_nodes] = 1
        counts = np.zeros((n, self.n_ranks), dtype=np.int64)
        counts[nodes_of, self.rank_row[rows]] = 1
        common: dict[int, np.ndarray] = {}
        union: dict[int, np.ndarray] = {}
        for g, m in self.pc.cat_f32[j].items():
            mb = m > 0
            c = np.ones((n, mb.shape[1]), dtype=bool)
            u = np.zeros((n, mb.shape[1]), dtype=bool)
            c[nodes_of] = mb[rows]
            u[nodes_of] = mb[rows]
            common[g], union[g] = c, u
        for level in self._internal_levels():
            lc, rc = self.left[level], self.right[level]
            pl, pr = packed[lc], packed[rc]
            np.maximum(pl[:, :nc], pr[:, :nc], out=pl[:, :nc])
            np.minimum(pl[:, nc : 3 * nc], pr[:, nc : 3 * nc], out=pl[:, nc : 3 * nc])
            np.maximum(pl[:, 3 * nc :], pr[:, 3 * nc :], out=pl[:, 3 * nc :])
            packed[level] = pl
            first_row[level] = np.minimum(first_row[lc], first_row[rc])
            last_row[level] = np.maximum(last_row[lc], last_row[rc])
            n_live[level] = n_live[lc] + n_live[rc]
            counts[level] = counts[lc] + counts[rc]
            for g in common:
                common[g][level] = common[g][lc] & common[g][rc]
                union[g][level] = union[g][lc] | union[g][rc]
        ranks = np.zeros((n, self.n_ranks + 1), dtype=np.int64)
        np.cumsum(counts, axis=1, out=ranks[:, 1:])
        some = n_live > 0
        contiguous = bool(np.all((last_row - first_row + 1)[some] == n_live[some]))
        out = _Aggregates(
            packed,
            max_lo,
            min_hi,
            min_lo,
            max_hi,
            common,
            union,
            ranks,
            first_row,
            n_live,
            contiguous,
        )
        self._aggs[j] = out
        return out

    # ------------------------------------------------------------ entries

    def entries(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query row, f-split ancestor, sibling child) for every f-split ancestor of each
        query row's leaf."""
        qs: list[np.ndarray] = []
        ss: list[np.ndarray] = []
        cs: list[np.ndarray] = []
        q = queries.astype(np.int64)
        cur = self.pc.boxes.leaves[q].astype(np.int64)
        while q.size:
            p = self.parent[cur]
            keep = p >= 0
            q, cur, p = q[keep], cur[keep], p[keep]
            on_f = self.feat[p] == self.f
            if on_f.any():
                pf, cf = p[on_f], cur[on_f]
                qs.append(q[on_f])
                ss.append(pf)
                cs.append(np.where(self.left[pf] == cf, self.right[pf], self.left[pf]))
            cur = p
        if not qs:
            e = np.empty(0, dtype=np.int64)
            return e, e, e
        return np.concatenate(qs), np.concatenate(ss), np.concatenate(cs)

    # ------------------------------------------------------------ tests

    def _breaking(self, agg: _Aggregates, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Active leaves below node v whose decision breaks the property with query row q's."""
        r = self.rank_row[q]
        out: np.ndarray
        if self.monotone:  # x' (below v) must have a lower severity rank than x (the query)
            out = agg.ranks[v, r]
        else:
            out = agg.ranks[v, self.n_ranks] - (agg.ranks[v, r + 1] - agg.ranks[v, r])
        return out

    def _keep_child(self, i: int, q: np.ndarray, p: np.ndarray, child: np.ndarray) -> np.ndarray:
        """False where child *child* of split *p* cannot hold a partner of query row q."""
        side = self.pc.sides[i]
        keep = np.ones(q.size, dtype=bool)
        numeric = self.kind[p] == NodeKind.NUMERIC
        g = self.feat[p]
        is_left = self.left[p] == child
        not_f = numeric & (g != self.f)
        if not_f.any():
            k = np.flatnonzero(not_f)
            lo = side.rows.lo[q[k], g[k]]
            hi = side.rows.hi[q[k], g[k]]
            lk = is_left[k]
            drop = np.where(lk, lo > self.left_hi[p[k]], hi < self.right_lo[p[k]])
            keep[k[drop]] = False
        on_f = numeric & (g == self.f)
        if on_f.any() and not isinstance(self.rel, ck.Independent):
            k = np.flatnonzero(on_f)
            lo = side.rows.lo[q[k], self.f]
            hi = side.rows.hi[q[k], self.f]
            lk = is_left[k]
            if self.monotone:  # x'_f > x_f: a left child entirely <= lo cannot hold x'
                drop = lk & (self.left_hi[p[k]] <= lo)
            elif self.delta is not None:
                with np.errstate(invalid="ignore", over="ignore"):
                    below = _surely(lo - self.left_hi[p[k]], self.delta, below=False)
                    above = _surely(self.right_lo[p[k]] - hi, self.delta, below=False)
                drop = np.where(lk, below, above)
            keep[k[drop]] = False
        return keep

    def _covered(self, i: int, agg: _Aggregates, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Every active leaf below node v meets query row q's box and is related on f."""
        side = self.pc.sides[i]
        ok = np.ones(q.size, dtype=bool)
        alo, ahi = side.rows.lo, side.rows.hi
        for k, g in enumerate(self.pc.num_cols):
            ok &= agg.max_lo[v, k] <= ahi[q, g]
            ok &= agg.min_hi[v, k] >= alo[q, g]
        for g, c in agg.common.items():
            mq = self.pc.cat_f32[i].get(g)
            if mq is not None:
                ok &= np.any(c[v] & (mq[q] > 0), axis=1)
        if self.f_col:  # stable (monotone: v lies above the query's f-interval already)
            kf = len(self.cols) - 1
            with np.errstate(invalid="ignore", over="ignore"):
                ok &= _surely(agg.max_lo[v, kf] - ahi[q, self.f], self.delta, below=True)
                ok &= _surely(alo[q, self.f] - agg.min_hi[v, kf], self.delta, below=True)
        return ok

    def _cat_meets(self, i: int, agg: _Aggregates, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Some active leaf below v may share codes with query row q (on every cat column)."""
        ok = np.ones(q.size, dtype=bool)
        for g, u in agg.union.items():
            mq = self.pc.cat_f32[i].get(g)
            if mq is not None:
                ok &= np.any(u[v] & (mq[q] > 0), axis=1)
        return ok

    def _row_box(self) -> np.ndarray:
        """(rows, 2C) float64, C-contiguous: side 0's lo | hi on the non-f numeric columns, so
        that a cell gathers one row per leaf instead of 4C scattered elements."""
        if self._rowbox is None:
            rows = self.pc.sides[0].rows
            cols = list(self.pc.num_cols)
            self._rowbox = np.ascontiguousarray(
                np.concatenate([rows.lo[:, cols], rows.hi[:, cols]], axis=1)
            )
        return self._rowbox

    def cell_ok(self, pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
        """``pair_ok(0, 0, pa, pb)`` (the same test, same result), cheaper on many cells: the
        action test first, then the boxes of the surviving pairs compared row-wise (one gather
        of a packed row per leaf, every numeric column at once)."""
        pc = self.pc
        sa = pc.sides[0]
        m: np.ndarray = sa.ok[pa] & sa.ok[pb]
        ra, rb = self.rank_row[pa], self.rank_row[pb]
        m &= (rb < ra) if self.monotone else (ra != rb)
        k = np.flatnonzero(m)
        if not k.size:
            return m
        qa, qb = pa[k], pb[k]
        c = len(pc.num_cols)
        if c:
            box = self._row_box()
            ba, bb = box[qa], box[qb]
            hit = np.all((ba[:, :c] <= bb[:, c:]) & (bb[:, :c] <= ba[:, c:]), axis=1)
        else:
            hit = np.ones(k.size, dtype=bool)
        for g in pc.cat_cols:
            mg = pc.cat_f32[0].get(g)
            if mg is not None:
                sel = np.flatnonzero(hit)
                hit[sel] = np.any((mg[qa[sel]] > 0) & (mg[qb[sel]] > 0), axis=1)
        f = self.f
        la, ha = sa.rows.lo, sa.rows.hi
        if self.monotone:
            hit &= la[qa, f] < ha[qb, f]
        elif self.delta is not None:
            sel = np.flatnonzero(hit)
            xa, xb = qa[sel], qb[sel]
            hit[sel] = stable_ok(la[xa, f], ha[xa, f], la[xb, f], ha[xb, f], self.delta)
        m[k] = hit
        return m

    def pair_ok(self, i: int, j: int, pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
        """The pair matrix's cell test for rows (pa, pb) (``PairChecker.cells``)."""
        ok: np.ndarray = self.pc.cells(i, j, pa, pb)
        return ok

    # ------------------------------------------------------------ the descent

    def _descend(
        self, i: int, j: int, q: np.ndarray, s: np.ndarray, c: np.ndarray, count: bool
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Partners of the entries (query row q, split s, child c).  Count mode: per query row
        the number of partners (covered nodes counted at once).  Else: the (row, row) pairs."""
        agg = self.aggregates(j)
        totals = np.zeros(self.n_rows, dtype=np.int64)
        found: list[tuple[np.ndarray, np.ndarray]] = []
        keep = self._keep_child(i, q, s, c)
        q, v = q[keep], c[keep]
        while q.size:
            leaf = self.kind[v] == NodeKind.LEAF
            if leaf.any():
                lq, lb = q[leaf], self.row_of[v[leaf]]
                has = lb >= 0
                lq, lb = lq[has], lb[has]
                ok = self.pair_ok(i, j, lq, lb)
                if count:
                    totals += np.bincount(lq[ok], minlength=self.n_rows)
                elif ok.any():
                    found.append((lq[ok], lb[ok]))
                q, v = q[~leaf], v[~leaf]
            if not q.size:
                break
            brk = self._breaking(agg, q, v)
            live = brk > 0
            live &= self._cat_meets(i, agg, q, v)
            q, v, brk = q[live], v[live], brk[live]
            if count and q.size:
                cov = self._covered(i, agg, q, v)
                if cov.any():
                    totals += np.bincount(q[cov], weights=brk[cov], minlength=self.n_rows).astype(
                        np.int64
                    )
                    q, v = q[~cov], v[~cov]
            if not q.size:
                break
            q2 = np.concatenate([q, q])
            p2 = np.concatenate([v, v])
            c2 = np.concatenate([self.left[v], self.right[v]])
            keep = self._keep_child(i, q2, p2, c2)
            q, v = q2[keep], c2[keep]
        return totals, found

    # ------------------------------------------------------------ the dual descent

    def dual_count(self, fan_out: FanOut | None = None) -> tuple[int, np.ndarray] | None:
        """(number of violating pairs, per row the number of rows it pairs with as x; for
        the symmetric forms the rows after it) for one conjunction and no linear literal, by
        descending *pairs* of subtrees: (left, right) of every split on f, each pair first
        compressed (:meth:`_compress`: chains of splits whose other child cannot meet the
        other node skipped), then one node of a pair is replaced by its children (both, when
        their sizes are within ``SPLIT_BOTH``) until the pair is decided for all its leaves at
        once
        (disjoint hulls on some column, no breaking actions; or every box below one meets every
        box below the other and is related) or both are leaves (the exact cell test).  None
        when the rows below some node are not one range (nodes not in pre-order):
        :meth:`count` then serves.

        With *fan_out* (``--jobs`` above 1 on a large tree) the descent runs here until it
        holds at least ``FAN_OUT_PAIRS`` node pairs, which are then dealt into parts
        (:func:`deal`), each descended alone (:meth:`dual_part`) by *fan_out*, in this process
        and others; the counts of all parts add up to the whole (every node pair is decided in
        exactly one part)."""
        t = time.process_time()
        agg = self.aggregates(0)
        t = self._tick("aggregates", t)
        if not agg.contiguous:
            return None
        splits = np.flatnonzero((self.kind != NodeKind.LEAF) & (self.feat == self.f))
        u, v = self.left[splits], self.right[splits]
        if not self.monotone:
            # Symmetric forms: x in the child with the earlier rows, so that every pair is
            # met as (a, b) with a < b and the per-row totals need only the x side (the rows
            # of a node are one range, its two children's disjoint ones).
            swap = agg.first_row[v] < agg.first_row[u]
            u, v = np.where(swap, v, u), np.where(swap, u, v)
        stack: Part = [(u, v)]  # node pairs, in pieces of at most DUAL_BATCH (bounded memory)
        sums = self._sums()
        if fan_out is None:
            self._dual_descend(stack, sums)
            return self._totals(sums)
        self._dual_descend(stack, sums, lambda st: sum(p.size for p, _ in st) >= FAN_OUT_PAIRS)
        total, totals = self._totals(sums)
        for part_total, part_totals in fan_out(self.dual_part, deal(stack, FAN_OUT_PARTS)):
            total += part_total
            totals += part_totals
        return total, totals

    def dual_part(self, stack: Part) -> Counts:
        """The counts of :meth:`dual_count` for the node pairs of *stack* alone."""
        agg = self.aggregates(0)
        if not agg.contiguous:  # pragma: no cover - the parent checked the same tree
            raise AssertionError("internal: a part of the dual descent on a non-contiguous tree")
        sums = self._sums()
        self._dual_descend(list(stack), sums)
        return self._totals(sums)

    def _sums(self) -> _DualSums:
        R = self.n_ranks
        n = self.n_rows
        return _DualSums(0, np.zeros(R * (n + 1), dtype=np.int64), [], np.zeros(n, dtype=np.int64))

    def _totals(self, sums: _DualSums) -> Counts:
        """(violating pairs, per row its partners) of what *sums* counted."""
        R, n = self.n_ranks, self.n_rows
        # Per row: partners from ranges (by its own rank) and from leaf cells.
        acc = np.cumsum(sums.diff.reshape(R, n + 1), axis=1)[:, :n]
        totals = acc[self.rank_row, np.arange(n)] * self.pc.sides[0].ok
        self._flush(sums.one_rows, sums.extra)
        return sums.total, totals + sums.extra

    def _dual_descend(
        self,
        stack: Part,
        sums: _DualSums,
        pause: Callable[[Part], bool] | None = None,
    ) -> None:
        """Decide the node pairs of *stack* into *sums*, until it is empty or *pause* says
        so (then *stack* holds what is left)."""
        t = time.process_time()
        agg = self.aggregates(0)
        n = self.n_rows
        R = self.n_ranks
        tot = agg.ranks[:, R]
        if self._per_rank is None:  # once per sweep, before any part is forked
            self._per_rank = np.diff(agg.ranks, axis=1)
        cnt = self._per_rank  # (N, R) active leaves per rank
        kf = len(self.cols) - 1
        while stack:
            if pause is not None and pause(stack):
                return
            u, v = stack.pop()
            if not u.size:
                continue
            t = self._tick("descent", t, u.size)
            if COMPRESS:
                u, v = self._compress(u, v)
                t = self._tick("compress", t, u.size)
                if not u.size:
                    continue
            lu = self.kind[u] == NodeKind.LEAF
            lv = self.kind[v] == NodeKind.LEAF
            both = lu & lv
            if both.any():
                ra, rb = self._range_cells(u[both], v[both])
                ok = self.cell_ok(ra, rb)
                sums.total += int(np.count_nonzero(ok))
                sums.one_rows.append((ra[ok], np.ones(int(ok.sum()), dtype=np.int64)))
                keep = ~both
                u, v, lu, lv = u[keep], v[keep], lu[keep], lv[keep]
                t = self._tick("leaf pairs", t, ra.size)
            if not u.size:
                continue
            cu, cv = cnt[u], cnt[v]
            # Per rank of u's rows: partners in v (monotone: x' in v with a lower rank).
            w_u = agg.ranks[v, :R] if self.monotone else tot[v][:, None] - cv
            brk = np.einsum("pr,pr->p", cu, w_u)
            ok = brk > 0
            u, v, lu, lv, brk, w_u = u[ok], v[ok], lu[ok], lv[ok], brk[ok], w_u[ok]
            nc, n_num = len(self.cols), len(self.pc.num_cols)
            bu, bv = agg.packed[u], agg.packed[v]
            # Hulls meet on every column (else no pair below), per column the cores meet.
            ok = np.all(bu[:, 2 * nc : 2 * nc + n_num] <= bv[:, 3 * nc : 3 * nc + n_num], axis=1)
            ok &= np.all(bv[:, 2 * nc : 2 * nc + n_num] <= bu[:, 3 * nc : 3 * nc + n_num], axis=1)
            miss = (bu[:, :n_num] > bv[:, nc : nc + n_num]) | (
                bv[:, :n_num] > bu[:, nc : nc + n_num]
            )
            for un in agg.union.values():
                ok &= np.any(un[u] & un[v], axis=1)
            if self.f_col:
                with np.errstate(invalid="ignore", over="ignore"):
                    far = _surely(agg.min_lo[v, kf] - agg.max_hi[u, kf], self.delta, False)
                    far |= _surely(agg.min_lo[u, kf] - agg.max_hi[v, kf], self.delta, False)
                ok &= ~far
            rest = ok.copy()  # every other column met as well
            for cm in agg.common.values():
                rest &= np.any(cm[u] & cm[v], axis=1)
            if self.f_col:
                with np.errstate(invalid="ignore", over="ignore"):
                    rest &= _surely(agg.max_lo[v, kf] - agg.min_hi[u, kf], self.delta, True)
                    rest &= _surely(agg.max_lo[u, kf] - agg.min_hi[v, kf], self.delta, True)
            n_miss = miss.sum(axis=1)
            t = self._tick("filter", t)
            cov = rest & (n_miss == 0)
            if cov.any():
                sums.total += int(brk[cov].sum())
                self._add_ranges(sums.diff, agg.first_row[u[cov]], agg.n_live[u[cov]], w_u[cov], n)
            # Met on all columns but one: a one-dimensional interval count by sorting.
            # Only for blocks of comparable sides (or small ones): a large node met by many
            # small ones is cheaper to descend than to list once per small one.
            tu, tv = tot[u], tot[v]
            one = rest & (n_miss >= 1) & (n_miss <= LOW_DIM) & ~(lu & lv)
            one &= ((tu <= 4 * tv) & (tv <= 4 * tu)) | (tu + tv <= 32)
            one &= (n_miss == 1) | (brk >= LOW_DIM_DENSITY * (tu + tv))
            for k in range(1, LOW_DIM + 1):
                sel = one & (n_miss == k)
                if sel.any():
                    _, where = np.nonzero(miss[sel])
                    cols = np.asarray(self.pc.num_cols)[where].reshape(-1, k)
                    sums.total += self._count_low(u[sel], v[sel], cols, sums.one_rows)
            cov |= one
            t = self._tick("blocks counted", t, int(np.count_nonzero(cov)))
            go = ok & ~cov
            # Small undecided blocks: every leaf-row pair below them tested at once (the cell
            # test), cheaper than descending node pair by node pair.
            cells = go & (agg.n_live[u] * agg.n_live[v] <= CELL_BLOCK)
            if cells.any():
                ra, rb = self._range_cells(u[cells], v[cells])
                cell_ok = self.cell_ok(ra, rb)
                sums.total += int(np.count_nonzero(cell_ok))
                sums.one_rows.append((ra[cell_ok], np.ones(int(cell_ok.sum()), dtype=np.int64)))
                go &= ~cells
                t = self._tick("cell blocks", t, ra.size)
            u, v, lu, lv, miss = u[go], v[go], lu[go], lv[go], miss[go]
            # Replace a node whose split is on a column where the pair is not yet met (its
            # children can be), else the one with more active leaves below (a leaf never).
            cut = np.concatenate(
                [miss, np.ones((u.size, 1), dtype=bool), np.zeros((u.size, 1), dtype=bool)], axis=1
            )
            on_u = cut[np.arange(u.size), self._miss_col[self.feat[u]]] & ~lu
            on_v = cut[np.arange(u.size), self._miss_col[self.feat[v]]] & ~lv
            larger = tot[u] >= tot[v]
            split_u = ~lu & (lv | (on_u & ~on_v) | ((on_u == on_v) & larger))
            # Both at once where the sides are comparable: the four grandchild pairs without
            # the two intermediate ones (a quarter to a third of the node pairs on the
            # benchmark trees; docs/performance.md, "relational").
            tu, tv = tot[u], tot[v]
            two = ~lu & ~lv & (tu <= SPLIT_BOTH * tv) & (tv <= SPLIT_BOTH * tu)
            split_u &= ~two
            split_v = ~split_u & ~two
            su, sv, sb = u[split_u], v[split_v], np.flatnonzero(two)
            ub, vb = u[sb], v[sb]
            lb_u, rb_u, lb_v, rb_v = self.left[ub], self.right[ub], self.left[vb], self.right[vb]
            u = np.concatenate(
                [self.left[su], self.right[su], u[split_v], u[split_v], lb_u, lb_u, rb_u, rb_u]
            )
            v = np.concatenate(
                [v[split_u], v[split_u], self.left[sv], self.right[sv], lb_v, rb_v, lb_v, rb_v]
            )
            for k in range(0, u.size, DUAL_BATCH):
                stack.append((u[k : k + DUAL_BATCH], v[k : k + DUAL_BATCH]))
            if sum(r.size for r, _ in sums.one_rows) > 4 * DUAL_BATCH:
                self._flush(sums.one_rows, sums.extra)
            t = self._tick("split", t)
        self._tick("descent done", t)

    @staticmethod
    def _flush(found: list[tuple[np.ndarray, np.ndarray]], into: np.ndarray) -> None:
        """Add the partners of *found* (row, count) to *into* per row, and empty it."""
        if found:
            rows = np.concatenate([r for r, _ in found])
            weights = np.concatenate([w for _, w in found]).astype(np.float64)
            into += np.rint(np.bincount(rows, weights=weights, minlength=into.size)).astype(
                np.int64
            )
            found.clear()

    def _block_rows(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(block index, row) of every active row below each node of *nodes*."""
        agg = self.aggregates(0)
        start, length = agg.first_row[nodes], agg.n_live[nodes]
        block = np.repeat(np.arange(nodes.size), length)
        offs = np.arange(block.size) - np.repeat(np.cumsum(length) - length, length)
        rows = np.repeat(start, length) + offs
        keep = self.pc.sides[0].ok[rows]
        return block[keep], rows[keep]

    def _hull(self) -> np.ndarray:
        """(nodes, 2C) float64, C-contiguous: side 0's hull (smallest lo | largest hi) per node
        on the non-f numeric columns (one gathered row per node)."""
        if self._hullbox is None:
            agg = self.aggregates(0)
            nc, n_num = len(self.cols), len(self.pc.num_cols)
            lo = agg.packed[:, 2 * nc : 2 * nc + n_num]
            hi = agg.packed[:, 3 * nc : 3 * nc + n_num]
            self._hullbox = np.ascontiguousarray(np.concatenate([lo, hi], axis=1))
        return self._hullbox

    def _compress(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The node pairs (u, v) with each node moved down, as long as it splits on a column
        other than f, to its only child whose leaves can meet the other node's hull on that
        column (numeric: the child's side of the threshold against the other's interval hull;
        categorical: the codes of the child's leaves against the other's); a child whose
        leaves all miss the other's hull holds no partner of it, and pairs where neither child
        can are dropped.  Cheap steps (one column per step) instead of the full node-pair
        filter for the chains of a deep tree."""
        agg = self.aggregates(0)
        hull = self._hull()
        n_num = len(self.pc.num_cols)
        flat = hull.ravel()
        width = 2 * n_num
        col_of, cat_of = self._split_col()
        u, v = u.copy(), v.copy()
        alive = np.ones(u.size, dtype=bool)
        todo = np.arange(u.size)
        while todo.size:
            moved = np.zeros(todo.size, dtype=bool)
            for a, b in ((u, v), (v, u)):
                na = a[todo]
                c = col_of[na]
                k = np.flatnonzero(c >= 0)
                parts = []
                if k.size:
                    at = b[todo[k]] * width + c[k]
                    kl = flat[at] <= self.left_hi[na[k]]
                    kr = flat[at + n_num] >= self.right_lo[na[k]]
                    parts.append((k, kl, kr))
                if agg.union:
                    g_of = cat_of[na]
                    kc = np.flatnonzero(g_of >= 0)
                    for g in np.unique(g_of[kc]).tolist():
                        k = kc[g_of[kc] == g]
                        un = agg.union[g]
                        ub = un[b[todo[k]]]
                        kl = np.any(un[self.left[na[k]]] & ub, axis=1)
                        kr = np.any(un[self.right[na[k]]] & ub, axis=1)
                        parts.append((k, kl, kr))
                for k, kl, kr in parts:
                    nk, tk = na[k], todo[k]
                    one = kl != kr
                    a[tk[one]] = np.where(kl[one], self.left[nk[one]], self.right[nk[one]])
                    moved[k[one]] = True
                    gone = ~kl & ~kr
                    alive[tk[gone]] = False
                    moved[k[gone]] = False
            todo = todo[moved & alive[todo]]
        return u[alive], v[alive]

    def _split_col(self) -> tuple[np.ndarray, np.ndarray]:
        """Per node: the index among ``num_cols`` of its split feature, for numeric splits on
        a column other than f that some box restricts, else -1; and the feature of
        categorical splits on a column other than f that some box restricts, else -1."""
        if self._splitcol is None:
            feat = np.maximum(self.feat, 0)
            col = self._miss_col[feat]
            ok = (self.kind == NodeKind.NUMERIC) & (self.feat != self.f)
            ok &= col < len(self.pc.num_cols)
            cats = np.zeros(len(self.pc.model.features), dtype=bool)
            cats[list(self.aggregates(0).union)] = True
            cat = (self.kind == NodeKind.CATEGORICAL) & (self.feat != self.f) & cats[feat]
            self._splitcol = (np.where(ok, col, -1), np.where(cat, self.feat, -1))
        return self._splitcol

    def _range_cells(self, us: np.ndarray, vs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (row below us[p], row below vs[p]) pair of live rows (active or not: the cell
        test checks that), for pre-order nodes, whose live rows below form one range: cell t
        of block p is (first_u + t // n_v, first_v + t % n_v)."""
        agg = self.aggregates(0)
        su, nu = agg.first_row[us], agg.n_live[us]
        sv, nv = agg.first_row[vs], agg.n_live[vs]
        size = nu * nv
        blk = np.repeat(np.arange(us.size), size)
        t = np.arange(blk.size) - np.repeat(np.cumsum(size) - size, size)
        width = nv[blk]
        return su[blk] + t // width, sv[blk] + t % width

    def _count_low(
        self,
        us: np.ndarray,
        vs: np.ndarray,
        cols: np.ndarray,
        out: list[tuple[np.ndarray, np.ndarray]],
    ) -> int:
        """Violating pairs of the blocks (us[p], vs[p]) whose boxes all meet except on the
        columns cols[p] (one or two per block): per row of x, the breaking rows x' of its
        block whose intervals meet its own on those columns, counted per rank by binary search
        in sorted ends (values replaced by their rank among all values of the column slot, so
        exact): see :func:`meet_counts`.  Appends (rows, partners) to *out* for the rows of x
        (below us; for the symmetric forms the earlier rows of each pair)."""
        code_lo, code_hi, span = self._end_codes()
        ba, ra = self._block_rows(us)
        bb, rb = self._block_rows(vs)
        k = cols.shape[1]
        a_lo = np.empty((ra.size, k), dtype=np.int64)
        a_hi = np.empty_like(a_lo)
        b_lo = np.empty((rb.size, k), dtype=np.int64)
        b_hi = np.empty_like(b_lo)
        for d in range(k):
            ca, cb = cols[ba, d], cols[bb, d]
            a_lo[:, d], a_hi[:, d] = code_lo[ra, ca], code_hi[ra, ca]
            b_lo[:, d], b_hi[:, d] = code_lo[rb, cb], code_hi[rb, cb]
        rank_x, rank_y = self.rank_row[ra], self.rank_row[rb]
        if k == 1:
            partners = self._one_column(
                ba, a_lo[:, 0], a_hi[:, 0], rank_x, bb, b_lo[:, 0], b_hi[:, 0], rank_y, span
            )
        else:
            partners = np.zeros(ra.size, dtype=np.int64)
            for r in range(self.n_ranks):
                brk = (r < rank_x) if self.monotone else (r != rank_x)
                sel = np.flatnonzero(rank_y == r)
                if not brk.any() or not sel.size:
                    continue
                x = np.flatnonzero(brk)
                partners[x] += meet_counts(ba[x], a_lo[x], a_hi[x], bb[sel], b_lo[sel], b_hi[sel])
        out.append((ra, partners))
        total = int(partners.sum())
        return total

    def _one_column(
        self,
        bx: np.ndarray,
        lx: np.ndarray,
        hx: np.ndarray,
        rank_x: np.ndarray,
        by: np.ndarray,
        ly: np.ndarray,
        hy: np.ndarray,
        rank_y: np.ndarray,
        span: int,
    ) -> np.ndarray:
        """Per x: the y of its block (``by == bx``) whose decision breaks the property with
        x's and whose interval meets x's on one column, for integer end codes below *span*
        (closed ends): ``#(ly <= hx) - #(hy < lx)`` (no y has both) by binary search in keys
        (group, code) sorted once per side; the groups are (block, rank) for monotone (summed
        over the lower ranks), else the block minus (block, own rank) (a different action)."""
        R = self.n_ranks
        if self.monotone:
            gy = (by * R + rank_y) * span
            klo, khi = np.sort(gy + ly), np.sort(gy + hy)
            out = np.zeros(bx.size, dtype=np.int64)
            for r in range(R):
                x = np.flatnonzero(r < rank_x)
                if x.size:
                    out[x] += _meets_sorted(klo, khi, (bx[x] * R + r) * span, lx[x], hx[x])
            return out
        gy = by * span
        out = _meets_sorted(np.sort(gy + ly), np.sort(gy + hy), bx * span, lx, hx)
        gy = (by * R + rank_y) * span
        out -= _meets_sorted(np.sort(gy + ly), np.sort(gy + hy), (bx * R + rank_x) * span, lx, hx)
        return out

    def _end_codes(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Per row and numeric column of side 0: the rank of its ``lo`` and ``hi``
        among all end values of that column (equal values, equal codes: comparisons between
        codes of one column are those of the values, exactly), and one more than the largest
        code."""
        if self._codes is None:
            rows = self.pc.sides[0].rows
            n = self.n_rows
            code_lo = np.zeros(rows.lo.shape, dtype=np.int64)
            code_hi = np.zeros(rows.hi.shape, dtype=np.int64)
            top = 0
            for g, ft in enumerate(self.pc.model.features):
                if ft.type is FeatureType.CATEGORICAL:
                    continue
                ends = np.concatenate([rows.lo[:, g], rows.hi[:, g]])
                _, inv = np.unique(ends, return_inverse=True)
                inv = inv.astype(np.int64).ravel()
                code_lo[:, g], code_hi[:, g] = inv[:n], inv[n:]
                top = max(top, int(inv.max(initial=0)) + 1)
            self._codes = (code_lo, code_hi, top + 1)
        return self._codes

    @staticmethod
    def _add_ranges(
        diff: np.ndarray, start: np.ndarray, length: np.ndarray, weight: np.ndarray, n: int
    ) -> None:
        """Add weight[p, r] to every row of rank r in rows [start, start + length) of block p
        (rows of another rank or inactive are masked out when reading)."""
        R = weight.shape[1]
        base = np.arange(R) * (n + 1)
        idx0 = (base[None, :] + start[:, None]).ravel()
        idx1 = (base[None, :] + (start + length)[:, None]).ravel()
        w = weight.ravel().astype(np.int64)
        np.add.at(diff, idx0, w)  # O(entries), not O(rows): called once per piece
        np.subtract.at(diff, idx1, w)

    def count(self, i: int = 0, j: int = 0) -> np.ndarray:
        """Per row of x: the number of rows x' it forms a violating pair with (exact)."""
        q = np.flatnonzero(self.pc.sides[i].ok)
        q, s, c = self.entries(q)
        totals, _ = self._descend(i, j, q, s, c, count=True)
        return totals

    def pairs(self, i: int, j: int, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (a, b) box-violating pair under (Ci, Cj) with a in *queries*, sorted."""
        q = queries[self.pc.sides[i].ok[queries]]
        q, s, c = self.entries(q)
        _, found = self._descend(i, j, q, s, c, count=False)
        if not found:
            e = np.empty(0, dtype=np.int64)
            return e, e
        pa = np.concatenate([a for a, _ in found])
        pb = np.concatenate([b for _, b in found])
        order = np.lexsort((pb, pa))
        return pa[order], pb[order]
