"""Per-path invariants on tree ensembles: branch and bound over input regions.

A *region* is a box of encoded inputs (tightened to the value sets, as leaf boxes are).  For
each tree, the leaves whose boxes meet the region are the ones its inputs can reach; their
values bound every score from below and above.  Per region, cheapest first:

1. **bounds**: the interval sum of every tree's reachable values plus the base, widened by a
   rigorous bound on the rounding of the library's sequential float32/float64 sum, gives the
   possible decisions and, per decision, an interval of confidences (:func:`outcomes`).  If
   ``when and not ensure`` cannot be true for any of them on the region (three-valued
   evaluation, :func:`~clefprove.verify.normal.tri`), the region is SAFE;
2. **one decision**: if only one action is possible and the violation does not mention the
   confidence, the region is decided exactly like a leaf by the per-path engine (box
   shortcuts, then Z3), a violation coming with a witness;
3. **a cell**: if every tree reaches one leaf, the decision is constant on the region; the
   evaluator gives it at one point, and the region is decided exactly like a leaf;
4. otherwise the region is split at a threshold of a tree that still reaches several leaves
   (the widest spread of values first), and both halves are searched (depth first).

``holds`` needs every region settled; ``violated`` an input the evaluator confirms; when the
time budget runs out the result is ``unknown`` with ``proved_share``, the share of the input
domain's *threshold grid* (per feature, the intervals between consecutive cuts of every tree,
and the codes of a categorical feature, each of equal weight) that was settled.

The search's top is split breadth first into *items* searched one by one, in this process or
(``--jobs N``) by the run's worker processes, and merged in item order (:func:`search`).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import io
import itertools
import math
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.eval.ensemble import EnsembleDecision, EnsembleEvaluator, decide_proba
from clefprove.frozen import frozen
from clefprove.geometry.boxes import Box, LeafBoxes, cat_mask, integral_features, split_bounds
from clefprove.geometry.measure import box_shares
from clefprove.model.ensemble import Arithmetic, Combine, Ensemble, Link, Rule
from clefprove.model.types import (
    CATEGORICAL_CODE,
    LEAF_CODE,
    NUMERIC_CODE,
    FeatureType,
    Model,
    NodeKind,
)
from clefprove.status import Verdict
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify import pool as run_pool
from clefprove.verify.options import CheckOptions

#: Time budget per invariant when ``--timeout`` is not given (seconds).
DEFAULT_BUDGET = 60.0


def budget_of(settings: CheckOptions) -> float:
    """An ensemble invariant's time budget in seconds: ``--timeout``, else the default."""
    return settings.timeout if settings.timeout is not None else DEFAULT_BUDGET


#: Regions decided per batch of exact (engine) decisions.
BATCH = 8

#: Work items of a search: its top split breadth first into about this many regions, each
#: searched depth first on its own and merged in order.  Not a function of ``--jobs``, so that
#: every ``--jobs`` searches the same items and reports the same counts.
ITEMS = 16

#: With ``--jobs N > 1``, items are searched in the calling process while they take less than
#: this in all (seconds); the rest go to the run's worker processes (verify/pool.py).
PARALLEL_AFTER = 0.25


@frozen(eq=False)
class Tables:
    """Every leaf of every tree, with its box and values (computed once per ensemble)."""

    lo: np.ndarray  # (L, F)
    hi: np.ndarray  # (L, F)
    cats: dict[int, np.ndarray]  # feature -> (L, V) bool
    values: np.ndarray  # (L, outputs)
    tree: np.ndarray  # (L,) tree of each leaf
    starts: np.ndarray  # (T,) first leaf row of each tree
    feasible: np.ndarray  # (L,)
    cuts: tuple[np.ndarray, ...]  # per feature: sorted distinct cuts (left-child hi bounds)
    flat: Model  # a one-leaf model: the per-path engine's view of a region
    cut_lists: tuple[list[float], ...] = ()  # ``cuts`` as lists (bisect)
    # every node's (numeric split's) tightened bounds, ``geometry.boxes.tables`` of each tree
    # concatenated: the search's splits read them without a view of the tree
    left_hi: np.ndarray = field(default_factory=lambda: np.empty(0))
    right_lo: np.ndarray = field(default_factory=lambda: np.empty(0))


def ensemble_tables(model: Ensemble) -> Tables:
    """The :class:`Tables` of *model* (computed once, kept in ``model.derived``)."""
    return model.derived.get(("verify.ensemble_tables",), lambda: _tables(model))


def walk_arrays(model: Ensemble) -> tuple[np.ndarray, ...]:
    """Per node of the concatenated trees: kind, feature, left and right child (as indices
    into the concatenation), the split bounds of the left and right child, aux (kept in
    ``model.derived``; what the tables and the root descent walk)."""

    def make() -> tuple[np.ndarray, ...]:
        nodes = model.nodes
        kind = nodes["kind"]
        offset = np.repeat(model.roots, model.sizes).astype(np.int64)
        integral = integral_features(model)
        feat = nodes["feature"].astype(np.int64)
        numeric = kind == NUMERIC_CODE
        value = nodes["value"].astype(np.float64)
        left_hi, right_lo = split_bounds(value, numeric & integral[feat])
        return (
            kind,
            feat,
            nodes["left"].astype(np.int64) + offset,
            nodes["right"].astype(np.int64) + offset,
            left_hi,
            right_lo,
            nodes["aux"].astype(np.int64),
        )

    return model.derived.get(("verify.ensemble_walk",), make)


def _tables(model: Ensemble) -> Tables:
    nodes = model.nodes
    kind, feat, left, right, left_hi, right_lo, _ = walk_arrays(model)
    numeric = kind == NUMERIC_CODE
    dom = Box.domain(model)
    cat_feats = sorted(dom.cats)
    # Every tree walked level by level at once (the boxes of leaf_boxes, bit for bit).
    frontier = model.roots.astype(np.int64)
    lo = np.tile(dom.lo, (frontier.size, 1))
    hi = np.tile(dom.hi, (frontier.size, 1))
    cats = {f: np.tile(dom.cats[f], (frontier.size, 1)) for f in cat_feats}
    out_nodes, out_lo, out_hi = [], [], []
    out_cats: dict[int, list[np.ndarray]] = {f: [] for f in cat_feats}
    while frontier.size:
        leaf = kind[frontier] == LEAF_CODE
        out_nodes.append(frontier[leaf])
        out_lo.append(lo[leaf])
        out_hi.append(hi[leaf])
        for f in cat_feats:
            out_cats[f].append(cats[f][leaf])
        fr = frontier[~leaf]
        k = fr.size
        lo_i, hi_i = lo[~leaf], hi[~leaf]
        frontier = np.concatenate([left[fr], right[fr]])
        lo, hi = np.concatenate([lo_i, lo_i]), np.concatenate([hi_i, hi_i])
        num = np.flatnonzero(numeric[fr])
        fn = feat[fr[num]]
        hi[num, fn] = np.minimum(hi[num, fn], left_hi[fr[num]])
        lo[num + k, fn] = np.maximum(lo[num + k, fn], right_lo[fr[num]])
        new = {}
        for f in cat_feats:
            m = cats[f][~leaf]
            m2 = np.concatenate([m, m])
            rows = np.flatnonzero((kind[fr] == CATEGORICAL_CODE) & (feat[fr] == f))
            if rows.size:
                width = m.shape[1]
                member = model.membership[
                    nodes["aux"][fr[rows]].astype(np.int64)[:, None] + np.arange(width)
                ].astype(bool)
                m2[rows] &= member
                m2[rows + k] &= ~member
            new[f] = m2
        cats = new
    leaves = np.concatenate(out_nodes)
    order = np.argsort(leaves, kind="stable")  # global node order = value-row order
    leaves = leaves[order]
    lo_all, hi_all = np.concatenate(out_lo)[order], np.concatenate(out_hi)[order]
    cats_all = {f: np.concatenate(v)[order] for f, v in out_cats.items()}
    feasible = np.all(lo_all <= hi_all, axis=1)
    for m in cats_all.values():
        feasible &= m.any(axis=1)
    rows = nodes["aux"][leaves].astype(np.int64)
    assert np.array_equal(rows, np.arange(rows.size))  # validated by the loader
    tree = np.searchsorted(model.roots + model.sizes, leaves, side="right")
    cuts = ensemble_cuts(model)
    flat = Model(
        name=model.name,
        version=model.version,
        features=model.features,
        actions=model.actions,
        nodes=np.array([(0.0, 0, 0, 0, 0, 0, 0)], dtype=model.nodes.dtype),
        membership=model.membership,
        max_depth=0,
        sha256=model.sha256,
        size=model.size,
    )
    starts = np.searchsorted(tree, np.arange(model.n_trees), side="left").astype(np.int64)
    return Tables(
        lo_all,
        hi_all,
        cats_all,
        np.asarray(model.values, dtype=np.float64),
        tree,
        starts,
        feasible,
        cuts.cuts,
        flat,
        cuts.cut_lists,
        left_hi,
        right_lo,
    )


@frozen(eq=False)
class Cuts:
    """Per feature the sorted distinct cuts of the splits on it (left-child hi bounds) inside
    [min, max): the grid whose cells weigh regions (:func:`_coverage`)."""

    cuts: tuple[np.ndarray, ...]
    cut_lists: tuple[list[float], ...]  # ``cuts`` as lists (bisect)


def ensemble_cuts(model: Ensemble) -> Cuts:
    """The :class:`Cuts` of *model* (computed once, kept in ``model.derived``)."""

    def make() -> Cuts:
        kind, feat, _, _, left_hi, _, _ = walk_arrays(model)
        # per feature the distinct thresholds ``np.unique(left_hi[numeric & (feat == i)])``
        # inside [min, max), from one sort of all (feature, threshold) pairs (thresholds are
        # finite: the loader checks; equal values are one cut, whichever sign a zero has)
        split_nodes = np.flatnonzero(kind == NUMERIC_CODE)
        fs, vs = feat[split_nodes], left_hi[split_nodes]
        order = np.lexsort((vs, fs))
        fs, vs = fs[order], vs[order]
        first = np.ones(fs.size, dtype=bool)
        first[1:] = (fs[1:] != fs[:-1]) | (vs[1:] != vs[:-1])
        fs, vs = fs[first], vs[first]
        f_min = np.array([f.min for f in model.features], dtype=np.float64)
        f_max = np.array([f.max for f in model.features], dtype=np.float64)
        inside = (vs >= f_min[fs]) & (vs < f_max[fs])
        fs, vs = fs[inside], vs[inside]
        bounds = np.searchsorted(fs, np.arange(len(model.features) + 1)).tolist()
        cuts = tuple(vs[bounds[i] : bounds[i + 1]] for i in range(len(model.features)))
        return Cuts(cuts, tuple(c.tolist() for c in cuts))

    return model.derived.get(("verify.ensemble_cuts",), make)


@dataclass(eq=False)
class Region:
    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]
    reach: np.ndarray  # (L,) bool
    weight: float
    root: int = 0  # the DNF conjunct whose root the region lies in (0 without conjuncts)
    seed: bool = False  # taken from a stored partition (see :class:`Partition`)


#: A settled region as a partition keeps it: (root, lo, hi, cats).
Settled = tuple[int, np.ndarray, np.ndarray, dict[int, np.ndarray]]


def _settled(g: Region) -> Settled:
    return (g.root, g.lo, g.hi, g.cats)


@frozen(eq=False)
class Partition:
    """The settled regions of a search that proved an invariant: boxes that together cover
    every root (each root the domain narrowed by one DNF conjunct, :func:`search`).

    A re-check of a changed ensemble (the proof cache) starts from them instead of the roots:
    each region is re-proved on the new trees (bounds first, split further where they no
    longer settle it), so reuse saves the search's descent, never a proof."""

    root: np.ndarray  # (R,) int64
    lo: np.ndarray  # (R, F)
    hi: np.ndarray  # (R, F)
    cats: dict[int, np.ndarray]  # feature -> (R, V) bool

    @property
    def size(self) -> int:
        return int(self.root.shape[0])

    @staticmethod
    def of(
        regions: list[Settled], n_feat: int, cat_feats: list[int], widths: list[int]
    ) -> Partition:
        n = len(regions)
        lo = np.empty((n, n_feat))
        hi = np.empty((n, n_feat))
        for r, g in enumerate(regions):
            lo[r], hi[r] = g[1], g[2]
        cats = {
            f: np.stack([g[3][f] for g in regions]) if n else np.zeros((0, w), dtype=bool)
            for f, w in zip(cat_feats, widths, strict=True)
        }
        return Partition(np.array([g[0] for g in regions], dtype=np.int64), lo, hi, cats)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        arrays = {"root": self.root, "lo": self.lo, "hi": self.hi}
        arrays.update({f"cat{f}": m for f, m in self.cats.items()})
        np.savez(buf, allow_pickle=False, **arrays)
        return buf.getvalue()

    @staticmethod
    def from_bytes(blob: bytes) -> Partition:
        """Raises ValueError on anything that is not a partition."""
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as z:
                root = np.asarray(z["root"], dtype=np.int64)
                lo = np.asarray(z["lo"], dtype=np.float64)
                hi = np.asarray(z["hi"], dtype=np.float64)
                cats = {
                    int(k[3:]): np.asarray(z[k], dtype=bool) for k in z.files if k.startswith("cat")
                }
        except (OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # np.load: not npz
            raise ValueError(f"not a partition: {exc}") from exc
        if lo.shape != hi.shape or lo.ndim != 2 or root.shape != (lo.shape[0],):
            raise ValueError("not a partition: inconsistent shapes")
        if any(m.ndim != 2 or m.shape[0] != root.shape[0] for m in cats.values()):
            raise ValueError("not a partition: inconsistent shapes")
        return Partition(root, lo, hi, cats)


# ---------------------------------------------------------------- sound bounds

_U = {Arithmetic.FLOAT32: 2.0**-24, Arithmetic.FLOAT64: 2.0**-53}
#: A score gap that no rounding of the link can turn around (see docs/verification.md).
_GAP = {Arithmetic.FLOAT32: 2.0**-17, Arithmetic.FLOAT64: 2.0**-44}


@frozen
class Outcomes:
    """Possible decisions on a region: action indices and, per action, confidence bounds."""

    actions: np.ndarray
    conf_lo: np.ndarray
    conf_hi: np.ndarray


def score_bounds(model: Ensemble, tab: Tables, reach: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per output, bounds on the library's score over the region, rounding included; and
    the number of reachable leaves per tree."""
    lo, hi, n, _, _ = _score_bounds(model, tab, reach)
    return lo, hi, n


def _score_bounds(
    model: Ensemble, tab: Tables | _Leaves, reach: np.ndarray
) -> tuple[np.ndarray, ...]:
    """:func:`score_bounds`, and the per-tree least and greatest reachable values (T, K).

    A tree with no reachable leaf (an empty region: every caller tests ``n == 0`` first)
    gives NaN bounds, quietly: numpy's "invalid value" warning went to the user's terminal."""
    n = np.add.reduceat(reach.astype(np.int64), tab.starts)
    big = np.where(reach[:, None], tab.values, np.inf)
    small = np.where(reach[:, None], tab.values, -np.inf)
    mins = np.minimum.reduceat(big, tab.starts, axis=0)  # (T, K)
    maxs = np.maximum.reduceat(small, tab.starts, axis=0)
    lo, hi = _summed(model, mins, maxs, 0)
    return lo, hi, n, mins, maxs


def _summed(
    model: Ensemble, mins: np.ndarray, maxs: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """The base scores plus the sums over the trees (*axis*) of their least and greatest
    values, widened by every rounding of the library's sums and of ours (an empty region's
    NaN passes quietly: its callers test it first)."""
    c = model.combine
    base = np.array(c.base)
    with np.errstate(invalid="ignore"):
        lo = base + mins.sum(axis=axis)
        hi = base + maxs.sum(axis=axis)
        mag = np.abs(base) + np.maximum(np.abs(mins), np.abs(maxs)).sum(axis=axis)
        # Each of the T additions of the library rounds by at most u * |partial sum| <= u * mag;
        # our own float64 sums of T + 1 terms add at most (T + 1) 2**-53 mag.
        terms = model.n_trees + 2
        err = terms * mag * (_U[c.arithmetic] + 2.0**-53) * 1.01 + 1e-300
        return lo - err, hi + err


#: The least float above 0.5 in each precision: the least p1 that the ``half`` rule decides 1.
_ABOVE_HALF = {
    a: float(np.nextafter(a.dtype(0.5), a.dtype(1.0)))
    for a in (Arithmetic.FLOAT32, Arithmetic.FLOAT64)
}


def decision_floors(c: Combine) -> tuple[float, float]:
    """``(f0, f1)``: for one output, an exact least confidence of class 0 and of class 1
    wherever the library decides that class, from its rule alone (0.0 where none is known).
    With ``p0 = 1 - p1`` rounded (the logistic and complement links):

    * ``proba`` (first argmax): class 1 means ``p1 > p0``; were ``p1 < 0.5``, ``1 - p1 > 0.5``
      would round to ``p0 >= 0.5 > p1``.  Class 0 means ``p0 >= p1``; were ``p0 < 0.5``, the
      exact ``1 - p1`` would be below 0.5 (rounding to nearest is monotone and 0.5 is a
      float), so ``p1 > 0.5 > p0``.  Both floors 0.5;
    * ``half``: class 1 means ``p1 > 0.5`` (so at least the next float); class 0 means
      ``p1 <= 0.5``, so ``1 - p1 >= 0.5`` before and after rounding;
    * ``margin`` with the logistic link and a positive scale: class 1 means ``s >= 0``, so
      ``z >= 0``, ``exp(-z) <= 1`` (the C library's exp is faithful: within an ulp, and 1 is a
      float), ``1 + exp(-z) <= 2`` and ``p1 >= 0.5``; class 0 the mirror image.

    The scores must be finite (callers check their bounds): a NaN probability is no class's.
    """
    if c.link not in (Link.LOGISTIC, Link.COMPLEMENT):
        return (0.0, 0.0)
    if c.rule is Rule.PROBA:
        return (0.5, 0.5)
    if c.rule is Rule.HALF and c.link is Link.LOGISTIC:
        return (0.5, _ABOVE_HALF[c.arithmetic])
    if c.rule is Rule.MARGIN and c.link is Link.LOGISTIC and c.scale > 0 and c.divisor > 0:
        return (0.5, 0.5)
    return (0.0, 0.0)


def _single_outcomes(
    floors: tuple[float, float], first: int, last: int, p_lo: float, p_hi: float, finite: bool
) -> Outcomes:
    """Classes *first* to *last* possible, ``p1`` in ``[p_lo, p_hi]``: each class's
    confidence bounds, raised to its decision floor when the scores are finite."""
    lo0, lo1 = 1.0 - p_hi, p_lo
    if finite:  # (max keeps its first argument when that is NaN: an empty region stays NaN)
        lo0, lo1 = max(lo0, floors[0]), max(lo1, floors[1])
    possible = np.arange(first, last + 1)
    conf_lo = np.array([lo0, lo1])[possible]
    conf_hi = np.array([1.0 - p_lo, p_hi])[possible]
    return Outcomes(possible, _clip01(conf_lo), _clip01(conf_hi))


def outcomes(model: Ensemble, lo: np.ndarray, hi: np.ndarray) -> Outcomes:
    """The decisions (and their confidence bounds) possible with scores in [lo, hi]."""
    c = model.combine
    dt = c.arithmetic.dtype
    with np.errstate(over="ignore"):
        slo = np.nextafter(lo.astype(dt), dt(-np.inf))  # outward to the library's precision
        shi = np.nextafter(hi.astype(dt), dt(np.inf))
    u = _U[c.arithmetic]
    if c.link.single:
        # The decision and p1 are monotone in the single score: read them at the ends.
        ends = np.array([[slo[0]], [shi[0]]], dtype=dt)
        acts, _, proba = decide_proba(c, ends)
        p1 = proba[:, 1].astype(np.float64)
        slack = 16 * u
        p_lo, p_hi = max(0.0, float(p1[0]) - slack), min(1.0, float(p1[1]) + slack)
        finite = math.isfinite(float(lo[0])) and math.isfinite(float(hi[0]))
        return _single_outcomes(decision_floors(c), int(acts[0]), int(acts[1]), p_lo, p_hi, finite)
    # Several outputs: x = s / divisor, widened for the library's rounded division.
    d = c.divisor
    x_lo = slo.astype(np.float64) / d
    x_hi = shi.astype(np.float64) / d
    x_lo = x_lo - np.abs(x_lo) * 4 * u - 1e-300
    x_hi = x_hi + np.abs(x_hi) * 4 * u + 1e-300
    k = x_lo.shape[0]
    gap = _GAP[c.arithmetic] * np.maximum(1.0, np.maximum(np.abs(x_lo)[:, None], np.abs(x_hi)))
    # j beats c for sure when x_j > x_c + gap everywhere: then p_j > p_c (and s_j > s_c).
    beats = (x_lo[:, None] - x_hi[None, :]) > gap  # [j, c]
    np.fill_diagonal(beats, False)
    possible = np.flatnonzero(~beats.any(axis=0))
    slack = 4 * (k + 4) * u
    if c.link is Link.IDENTITY:
        conf_lo, conf_hi = x_lo[possible] - slack, x_hi[possible] + slack
    else:
        conf_lo = np.empty(possible.size)
        conf_hi = np.empty(possible.size)
        for r, a in enumerate(possible.tolist()):
            others = np.arange(k) != a
            with np.errstate(over="ignore"):
                worst = np.exp(np.minimum(x_hi[others] - x_lo[a], 700.0)).sum()
                best = np.exp(np.minimum(x_lo[others] - x_hi[a], 700.0)).sum()
            conf_lo[r] = 1.0 / (1.0 + worst) - slack
            conf_hi[r] = 1.0 / (1.0 + best) + slack
    return Outcomes(possible, np.clip(conf_lo, 0, 1), np.clip(conf_hi, 0, 1))


def _clip01(a: np.ndarray) -> np.ndarray:
    """``np.clip(a, 0, 1)`` of a float array (NaN stays NaN), without its wrapper's cost."""
    out: np.ndarray = np.minimum(np.maximum(a, 0.0), 1.0)
    return out


# ---------------------------------------------------------------- the search


@dataclass
class SearchResult:
    """What the search found for one invariant."""

    # (x, action, confidence, the evaluator's decision when x is already confirmed)
    violating: list[tuple[np.ndarray, int, float, EnsembleDecision | None]] = field(
        default_factory=list
    )
    n_violating: int = 0
    n_unknown: int = 0
    regions: int = 0
    unsettled: float = 0.0  # weight not settled (unknown or not reached in time)
    timed_out: bool = False
    solver_paths: int = 0
    settled: list[Settled] = field(default_factory=list)  # with record: the partition
    reused: int = 0  # regions of the starting partition settled as they were
    seeded: bool = False  # the search started from a stored partition
    probes: list[np.ndarray] = field(default_factory=list)  # an input of each root (vacuity)

    def settle(self, g: Region, record: bool) -> None:
        """Count *g* as settled by the bounds alone (reused when it is a stored region), and
        with *record* keep it for the partition."""
        self.regions += 1
        self.reused += int(g.seed)
        if record:
            self.settled.append(_settled(g))


def _rows(
    model: Ensemble,
    regions: list[Region],
    actions: np.ndarray,
    conf_lo: np.ndarray,
    conf_hi: np.ndarray,
) -> LeafBoxes:
    n = len(regions)
    F = len(model.features)
    lo = np.empty((n, F + 1))
    hi = np.empty((n, F + 1))
    for r, g in enumerate(regions):
        lo[r, :F], hi[r, :F] = g.lo, g.hi
    lo[:, F], hi[:, F] = conf_lo, conf_hi
    cats = {f: np.stack([g.cats[f] for g in regions]) for f in (regions[0].cats if n else {})}
    return LeafBoxes(
        np.zeros(n, dtype=np.int64), lo, hi, cats, actions.astype(np.int64), np.ones(n, dtype=bool)
    )


def _coverage(
    tab: Tables | Cuts,
    model: Ensemble,
    i: int,
    lo: np.ndarray,
    hi: np.ndarray,
    cats: dict[int, np.ndarray],
) -> float:
    """The share of feature *i*'s grid cells (or codes) that the box meets."""
    f = model.features[i]
    if f.type is FeatureType.CATEGORICAL:
        return float(cats[i].sum()) / len(f.values)
    cuts = tab.cut_lists[i]  # (np.searchsorted(tab.cuts[i], ., side="left"), as bisect)
    a = bisect.bisect_left(cuts, float(lo[i]))
    b = bisect.bisect_left(cuts, float(hi[i]))
    return (b - a + 1) / (len(cuts) + 1)


def _weight(
    tab: Tables | Cuts,
    model: Ensemble,
    lo: np.ndarray,
    hi: np.ndarray,
    cats: dict[int, np.ndarray],
) -> float:
    return math.prod(_coverage(tab, model, i, lo, hi, cats) for i in range(len(model.features)))


def _split_node(
    model: Ensemble, tab: Tables, g: Region, spread: np.ndarray, n_reach: np.ndarray
) -> tuple[int, Any] | None:
    """(feature, side) of a split that some multi-leaf tree makes inside the region: the
    ``(left_hi, right_lo)`` bounds of a numeric split, or the left code mask of a categorical
    one."""
    order = np.argsort(-spread, kind="stable")
    nodes = model.nodes  # every tree's, child indices within the tree (offset by its root)
    kinds, feats, lefts, rights = nodes["kind"], nodes["feature"], nodes["left"], nodes["right"]
    for t in order.tolist():
        if n_reach[t] < 2:
            continue
        root = int(model.roots[t])
        i = root
        while int(kinds[i]) != NodeKind.LEAF:
            f = int(feats[i])
            if int(kinds[i]) == NodeKind.NUMERIC:
                left_hi, right_lo = float(tab.left_hi[i]), float(tab.right_lo[i])
                if g.hi[f] <= left_hi:
                    i = root + int(lefts[i])
                elif g.lo[f] >= right_lo:
                    i = root + int(rights[i])
                else:
                    return f, (left_hi, right_lo)
            else:
                off = int(nodes["aux"][i])
                member = np.asarray(model.membership[off : off + g.cats[f].size], dtype=bool)
                inside = g.cats[f] & member
                if not inside.any():
                    i = root + int(rights[i])
                elif not (g.cats[f] & ~member).any():
                    i = root + int(lefts[i])
                else:
                    return f, member
    return None


def _children(model: Ensemble, tab: Tables, g: Region, f: int, side: Any) -> list[Region]:
    out = []
    if model.features[f].type is FeatureType.CATEGORICAL:
        for mask in (g.cats[f] & side, g.cats[f] & ~side):
            cats = dict(g.cats)
            cats[f] = mask
            reach = g.reach & (tab.cats[f] & mask).any(axis=1)
            out.append(Region(g.lo, g.hi, cats, reach, 0.0, g.root))
    else:
        left_hi, right_lo = side  # the tree's own tightened bounds (boxes.split_bounds)
        hi = g.hi.copy()
        hi[f] = min(hi[f], left_hi)
        lo = g.lo.copy()
        lo[f] = max(lo[f], right_lo)
        out.append(Region(g.lo, hi, g.cats, g.reach & (tab.lo[:, f] <= hi[f]), 0.0, g.root))
        out.append(Region(lo, g.hi, g.cats, g.reach & (tab.hi[:, f] >= lo[f]), 0.0, g.root))
    return out


#: Regions of a starting partition re-proved per vectorised batch.
SEED_BATCH = 128


def _seeds(
    model: Ensemble,
    tab: Tables,
    roots: list[tuple[Region, object]],
    n_roots: int,
    start: Partition,
    res: SearchResult,
    record: bool,
) -> list[tuple[Region, object]] | None:
    """The regions of *start* that the bounds do not re-prove on this ensemble, as search items
    (with this ensemble's reach and weights); the re-proved ones are settled here, in
    vectorised batches (counted in ``res.regions`` and ``res.reused``).  None when the
    partition does not fit: another feature layout, a region outside the root it names, or
    regions whose measure does not add up to their root's (a partition of each root is what
    makes "every region proved" a proof)."""
    n_feat = len(model.features)
    live = {g.root: (g, formula) for g, formula in roots}
    dom_cats = roots[0][0].cats if roots else {}
    if start.lo.shape[1:] != (n_feat,) or set(start.cats) != set(dom_cats):
        return None
    if any(start.cats[f].shape[1] != m.size for f, m in dom_cats.items()):
        return None
    if start.size and (start.root.min() < 0 or start.root.max() >= n_roots):
        return None
    if not set(start.root.tolist()) <= set(live):
        return None
    shares = box_shares(tab.flat, start.lo, start.hi, start.cats)
    groups: list[tuple[np.ndarray, Region, object]] = []
    for j, (root, formula) in live.items():
        rows = np.flatnonzero(start.root == j)
        lo, hi = start.lo[rows], start.hi[rows]
        if np.any(lo < root.lo) or np.any(hi > root.hi):
            return None
        if any(np.any(start.cats[f][rows] & ~m) for f, m in root.cats.items()):
            return None
        whole = float(
            box_shares(
                tab.flat,
                root.lo[None, :],
                root.hi[None, :],
                {f: m[None, :] for f, m in root.cats.items()},
            )[0]
        )
        got = float(shares[rows].sum())
        if abs(got - whole) > 1e-9 + 1e-15 * rows.size:
            return None
        groups.append((rows, root, formula))
    out: list[tuple[Region, object]] = []
    for rows, root, formula in groups:
        for a in range(0, rows.size, SEED_BATCH):
            part = rows[a : a + SEED_BATCH]
            reach = _reach_many(
                tab, start.lo[part], start.hi[part], {f: start.cats[f][part] for f in root.cats}
            )
            safe = _safe_many(model, tab, reach, formula, start, part)
            for k, r in enumerate(part.tolist()):
                cats = {f: start.cats[f][r] for f in root.cats}
                g = Region(start.lo[r], start.hi[r], cats, reach[k], 0.0, root.root, True)
                if safe[k]:
                    res.settle(g, record)
                    continue
                g.weight = _weight(tab, model, g.lo, g.hi, cats)
                out.append((g, formula))
    return out


def _outcome_rows(
    model: Ensemble, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`outcomes` for c regions' score bounds at once, as rows: (region of each row,
    action, confidence lower and upper bounds); vectorised for the logistic link (the same
    arithmetic, row by row), region by region otherwise."""
    comb = model.combine
    c = lo.shape[0]
    if comb.link is Link.LOGISTIC:
        dt = comb.arithmetic.dtype
        with np.errstate(over="ignore"):
            slo = np.nextafter(lo[:, 0].astype(dt), dt(-np.inf))
            shi = np.nextafter(hi[:, 0].astype(dt), dt(np.inf))
        ends = np.concatenate([slo, shi]).astype(dt)[:, None]
        acts, _, proba = decide_proba(comb, ends)
        p1 = proba[:, 1].astype(np.float64)
        slack = 16 * _U[comb.arithmetic]
        p_lo = np.maximum(0.0, p1[:c] - slack)
        p_hi = np.minimum(1.0, p1[c:] + slack)
        a_lo, a_hi = acts[:c].astype(np.int64), acts[c:].astype(np.int64)
        owner_parts, act_parts = [], []
        for a in (0, 1):
            at = np.flatnonzero((a_lo <= a) & (a <= a_hi))
            owner_parts.append(at)
            act_parts.append(np.full(at.size, a, dtype=np.int64))
        owner = np.concatenate(owner_parts)
        act = np.concatenate(act_parts)
        clo = np.where(act == 0, 1.0 - p_hi[owner], p_lo[owner])
        chi = np.where(act == 0, 1.0 - p_lo[owner], p_hi[owner])
        finite = np.isfinite(lo[owner, 0]) & np.isfinite(hi[owner, 0])
        floors = np.array(decision_floors(comb))[act]
        clo = np.where(finite, np.maximum(clo, floors), clo)
        return owner, act, np.clip(clo, 0, 1), np.clip(chi, 0, 1)
    owners, acts_l, los, his = [], [], [], []
    for k in range(c):
        oc = outcomes(model, lo[k], hi[k])
        owners.append(np.full(oc.actions.size, k, dtype=np.int64))
        acts_l.append(oc.actions.astype(np.int64))
        los.append(oc.conf_lo)
        his.append(oc.conf_hi)
    if not owners:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0), np.zeros(0)
    return (
        np.concatenate(owners),
        np.concatenate(acts_l),
        np.concatenate(los),
        np.concatenate(his),
    )


def _reach_many(
    tab: Tables, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]
) -> np.ndarray:
    """(c, L): the leaves whose boxes meet each of c regions."""
    reach = np.broadcast_to(tab.feasible, (lo.shape[0], tab.feasible.size)).copy()
    for i in range(lo.shape[1]):
        reach &= tab.lo[None, :, i] <= hi[:, i, None]
        reach &= tab.hi[None, :, i] >= lo[:, i, None]
    for f, m in cats.items():
        reach &= (tab.cats[f][None, :, :] & m[:, None, :]).any(axis=2)
    return reach


def _safe_many(
    model: Ensemble,
    tab: Tables,
    reach: np.ndarray,
    formula: object,
    start: Partition,
    part: np.ndarray,
) -> np.ndarray:
    """(c,) whether the bounds alone settle each region (empty, or ``formula`` cannot be true
    for any decision possible on it): :func:`search`'s first two tests, for many regions."""
    n = np.add.reduceat(reach.astype(np.int64), tab.starts, axis=1)  # (c, T)
    big = np.where(reach[:, :, None], tab.values[None, :, :], np.inf)
    small = np.where(reach[:, :, None], tab.values[None, :, :], -np.inf)
    mins = np.minimum.reduceat(big, tab.starts, axis=1)  # (c, T, K)
    maxs = np.maximum.reduceat(small, tab.starts, axis=1)
    empty = np.any(n == 0, axis=1)
    lo, hi = _summed(model, mins, maxs, 1)
    live = np.flatnonzero(~empty)
    owner, acts, conf_lo, conf_hi = _outcome_rows(model, lo[live], hi[live])
    rows = part[live][owner]
    n_feat = len(model.features)
    m = owner.size
    blo = np.empty((m, n_feat + 1))
    bhi = np.empty((m, n_feat + 1))
    blo[:, :n_feat], bhi[:, :n_feat] = start.lo[rows], start.hi[rows]
    blo[:, n_feat], bhi[:, n_feat] = conf_lo, conf_hi
    cats = {f: msk[rows] for f, msk in start.cats.items()}
    can, _ = nm.tri(formula, nm.Rows(blo, bhi, cats, acts))
    possible = np.zeros(live.size, dtype=bool)
    np.logical_or.at(possible, owner[can], True)
    safe: np.ndarray = empty.copy()
    safe[live] = ~possible
    return safe


def _point(model: Ensemble, g: Region) -> np.ndarray:
    rows = nm.Rows(
        np.append(g.lo, 0.0)[None, :],
        np.append(g.hi, 0.0)[None, :],
        {f: m[None, :] for f, m in g.cats.items()},
        np.array([0]),
    )
    return eg.nice_point(model, rows, 0)


def _probe(model: Ensemble, g: Region) -> np.ndarray:
    """An input of region *g* when it is simple to give (the middle, whole numbers rounded
    down, the first code of a categorical set): what ``when`` is tried at first to show it
    is not vacuous (:func:`~clefprove.verify.evidence.when_met_at` checks it is an input)."""
    x = g.lo / 2 + g.hi / 2  # no overflow at the float64 ends
    for i, f in enumerate(model.features):
        if i in g.cats:
            codes = np.flatnonzero(g.cats[i])
            x[i] = float(codes[0]) if codes.size else g.lo[i]
        elif f.is_integral:
            x[i] = math.floor(x[i])
    out: np.ndarray = np.minimum(np.maximum(x, g.lo), g.hi)
    return out


def search(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    budget: float,
    start: Partition | None = None,
    record: bool = False,
) -> SearchResult:
    """Branch and bound for one prepared (non-relational) invariant; see module docstring.

    With *start* (a :class:`Partition` of an earlier version's proof of the same invariant in
    the same domain), the search starts from its regions instead of the roots (when they fit
    this domain and this invariant's roots; otherwise from the roots).  With *record*, the
    settled regions are kept in ``settled`` (meaningful when the search proved the invariant).

    The top of the search tree is split breadth first into about :data:`ITEMS` *items*
    (:func:`_items`), each searched depth first on its own (:func:`_search_items`: in this
    process, or with ``--jobs N`` by the run's worker processes) and merged in item order,
    which is the depth-first order of one sequential search: the same items, counts and
    witnesses for every ``--jobs`` (up to what the time budget cuts).
    """
    deadline = time.monotonic() + budget
    n_feat = len(model.features)
    # Roots: the domain narrowed by each DNF conjunct's single-variable literals (an input
    # satisfying the violation satisfies some conjunct, so lies in that conjunct's root).
    dom = Box.domain(model)
    dom_cats = {i: dom.cats[i] for i in dom.cats}
    conjuncts = prep.conjuncts if prep.conjuncts is not None else None
    boxes = None if conjuncts is None else _root_boxes(model, conjuncts, dom, dom_cats)
    passed: list[_RootBounds | None] = []
    dived = -1  # the root whose dive :func:`_first_dive` tried in vain
    if start is None and boxes is not None and not dom_cats:
        quick, passed = _settled_roots(model, boxes, record)
        if quick is not None:
            return quick
        descended = [p for p in passed if p is not None]
        if max(want, 1) == 1 and passed and len(descended) == len(passed):
            quick, dived = _first_dive(model, prep, boxes, descended, record)
            if quick is not None:
                return quick
    tab = ensemble_tables(model)
    res = SearchResult()
    roots: list[tuple[Region, object]] = []
    root_bounds: dict[int, Bounded] = {}  # id(root) -> its bounds, where the descent found them
    tried: set[int] = set()  # id(root) of the root whose dive was tried
    base_reach = tab.feasible.copy()
    mentions_conf = _mentions_confidence(prep.violation, n_feat)
    if boxes is None:
        roots.append((Region(dom.lo, dom.hi, dom_cats, base_reach, 1.0), prep.violation))
        n_roots = 1
    else:
        n_roots = len(conjuncts or ())
        for k, (j, lo, hi, cats, formula) in enumerate(boxes):
            got = passed[k] if k < len(passed) else None
            if got is not None:
                reach = got[0].reach  # (the reach below, found by the descent)
            else:
                reach = base_reach & np.all(tab.lo <= hi, axis=1) & np.all(tab.hi >= lo, axis=1)
                for f, m in cats.items():
                    reach &= (tab.cats[f] & m).any(axis=1)
            g = Region(lo, hi, cats, reach, 0.0, j)
            g.weight = _weight(tab, model, lo, hi, cats)
            if got is not None:
                root_bounds[id(g)] = got[1]
            if k == dived:
                tried.add(id(g))
            roots.append((g, formula))
            res.probes.append(_probe(model, g))
    seeds = _seeds(model, tab, roots, n_roots, start, res, record) if start is not None else None
    res.seeded = seeds is not None
    known: dict[int, Step] = {}  # the first steps of the regions the items start from
    if seeds is None:
        found = _falsify(
            model,
            tab,
            prep,
            settings,
            want,
            roots,
            root_bounds,
            tried,
            mentions_conf,
            res,
            deadline,
            record,
        )
        if found is None:
            return res  # violated: enough violations found
        roots, known = found
    items = _items(
        model, tab, seeds if seeds is not None else roots, mentions_conf, res, record, known
    )
    parts = _search_items(model, prep, settings, want, items, deadline, record)
    _merge(res, items, parts, want)
    return res


@dataclass
class _Part:
    """What searching one item gave (:func:`_search_stack`)."""

    res: SearchResult
    stopped: bool = False  # told to stop (a time slice, or a cut after an earlier item)


RootBox = tuple[int, np.ndarray, np.ndarray, dict[int, np.ndarray], object]


def _root_boxes(
    model: Ensemble,
    conjuncts: Sequence[tuple[object, ...]],
    dom: Box,
    dom_cats: dict[int, np.ndarray],
) -> list[RootBox]:
    """Per DNF conjunct whose feature literals the domain meets: (its index, the domain
    narrowed by them, lo, hi and cats, and what is left of the conjunct to test)."""
    n_feat = len(model.features)
    dom_rows = None  # (made only for a conjunct that _narrow_bounds does not take)
    dom_lo, dom_hi = dom.lo.tolist(), dom.hi.tolist()
    out: list[RootBox] = []
    for j, conj in enumerate(conjuncts):
        lits = tuple(x for x in conj if _feature_literal(x, n_feat))
        if not dom_cats and all(type(x) is nm.Bound for x in lits):
            box = _narrow_bounds(lits, dom_lo, dom_hi)
            if box is None:
                continue
            lo, hi, cats = box[0], box[1], {}
        else:
            if dom_rows is None:
                dom_rows = nm.Rows(
                    np.append(dom.lo, 0.0)[None, :],
                    np.append(dom.hi, 1.0)[None, :],
                    {f: m[None, :] for f, m in dom_cats.items()},
                    np.array([-1]),
                )
            nrows, ok, _ = nm.narrow(lits, dom_rows)
            if not ok[0]:
                continue
            lo, hi = nrows.lo[0, :n_feat].copy(), nrows.hi[0, :n_feat].copy()
            cats = {
                f: cat_mask(nrows.cats, f, 1, len(model.features[f].values))[0].copy()
                for f in dom_cats
            }
        # The root already satisfies the conjunct's feature literals, and so does every
        # region below it: only the decision literals and linear ones are left to test.
        rest = tuple(x for x in conj if not _feature_literal(x, n_feat))
        formula = nm.NAnd(rest) if len(rest) > 1 else (rest[0] if rest else ck.Const(True))
        out.append((j, lo, hi, cats, formula))
    return out


def _narrow_bounds(
    lits: tuple[object, ...], dom_lo: list[float], dom_hi: list[float]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``nm.narrow`` of feature :class:`~clefprove.verify.normal.Bound` literals on the domain
    box (one row, no categorical feature), in Python floats: (lo, hi) of the narrowed box, or
    None when it is empty.  The same floats as ``narrow``'s ``np.minimum`` / ``np.maximum``,
    whose scalar loops keep the first operand only when it is strictly smaller (larger) or NaN,
    else take the second (so a tie of 0.0 and -0.0 takes the literal's zero), tested bit for
    bit against ``narrow`` (tests/ensembles/test_root_descent.py)."""
    lo, hi = list(dom_lo), list(dom_hi)
    for lit in lits:
        assert isinstance(lit, nm.Bound)
        col, b = lit.col, lit.bound
        if lit.upper:
            h = hi[col]
            hi[col] = h if (h < b or h != h) else b
        else:
            v = lo[col]
            lo[col] = v if (v > b or v != v) else b
    if not all(a <= z for a, z in zip(lo, hi, strict=True)):
        return None
    return np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)


@frozen(eq=False)
class _Leaves:
    """What the bounds read of :class:`Tables`: the leaf values and each tree's first row."""

    values: np.ndarray  # (L, outputs)
    starts: np.ndarray  # (T,)


@frozen(eq=False)
class _Descent:
    """What descending the trees with a box found (:func:`_descend_leaves`)."""

    reach: np.ndarray  # (L,) the leaves whose boxes meet the box
    rows: np.ndarray  # (R,) those leaves' value rows, level by level
    # per level: the boxes of the nodes entered there (cut to the box, as the tables' boxes
    # are cut to it) and which of them are leaves
    levels: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]

    def leaf_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, lo, hi): the reached leaves' value rows, ascending, and their boxes (only
        a dive reads them: gathered here, not on every descent)."""
        order = np.argsort(self.rows, kind="stable")
        lo = np.concatenate([rlo[leaf] for rlo, _, leaf in self.levels])
        hi = np.concatenate([rhi[leaf] for _, rhi, leaf in self.levels])
        return self.rows[order], lo[order], hi[order]


def _leaves_of(model: Ensemble) -> _Leaves:
    """The :class:`_Leaves` of *model* (kept in ``model.derived``)."""

    def make() -> _Leaves:
        leaf = model.nodes["kind"] == LEAF_CODE
        per_tree = np.add.reduceat(leaf.astype(np.int64), model.roots)
        starts = np.concatenate(([0], np.cumsum(per_tree)))
        return _Leaves(np.asarray(model.values, dtype=np.float64), starts[:-1].astype(np.int64))

    return model.derived.get(("verify.ensemble_leaves",), make)


#: What :func:`_bounds` finds of a region: its score bounds, the possible outcomes (None when
#: the region is empty) and per outcome whether the violation can be true for it.
Bounded = tuple[tuple[np.ndarray, ...], Outcomes | None, np.ndarray]


#: A root's reachable leaves and its bounds (:func:`_bounds`), as :func:`_settled_roots`
#: found them.
_RootBounds = tuple[_Descent, Bounded]
#: What a region's step is (:func:`_step`).
Step = tuple[int, float, bool] | list[Region] | None


def _settled_roots(
    model: Ensemble, boxes: list[RootBox], record: bool
) -> tuple[SearchResult | None, list[_RootBounds | None]]:
    """The search's result when the bounds settle every root (a box question that holds,
    typically): each root's reachable leaves found by descending the trees with the root's
    box (:func:`_descend`), without the leaf tables of every tree; the same result as the
    search from the tables (the same reach, bounds and counts: tests/ensembles/
    test_root_descent.py).  Else None, and per root its reach and bounds (None where the
    descent met a large part of the trees), which the search from the tables takes as they
    are (the same arrays it would compute)."""
    nodes = model.nodes
    kind = nodes["kind"]
    if np.any(kind == CATEGORICAL_CODE):
        return None, []
    tab = _leaves_of(model)
    walk = walk_arrays(model)
    res = SearchResult()
    passed: list[_RootBounds | None] = []
    settled = True
    for j, lo, hi, cats, formula in boxes:
        descent = _descend_leaves(model, walk, lo, hi)
        if descent is None:
            passed.append(None)
            settled = False
            continue
        g = Region(lo, hi, cats, descent.reach, 0.0, j)
        bounds = _bounds(model, tab, g, formula)
        passed.append((descent, bounds))
        if settled and (bounds[1] is None or not bounds[2].any()):
            res.settle(g, record)
            res.probes.append(_probe(model, g))
        else:
            settled = False
    return (res if settled else None), passed


def _first_dive(
    model: Ensemble,
    prep: eg.Prepared,
    boxes: list[RootBox],
    passed: list[_RootBounds],
    record: bool,
) -> tuple[SearchResult | None, int]:
    """The falsifier's first step (:func:`_falsify`) when one violation is wanted, from the
    roots' descents, before the leaf tables of every tree are built: the root of greatest
    promise dived into on its descent's leaf boxes (the tables' boxes cut to the root's box:
    the same dive).  (the search's result, -1) when it found a violation: the same result
    as the falsifier's (tests/ensembles/test_root_descent.py); else (None, the root dived
    into, or -1 for none)."""
    cuts = ensemble_cuts(model)
    # the falsifier's queue of the roots, (-promise, path, order, weight, decision): the same
    # order, so the same root first and the same sum of what is left unsettled
    heap: list[tuple[float, tuple[int, ...], int, float, int]] = []
    res = SearchResult()
    for k, ((j, lo, hi, cats, _), (descent, bounded)) in enumerate(zip(boxes, passed, strict=True)):
        g = Region(lo, hi, cats, descent.reach, 0.0, j)
        g.weight = _weight(cuts, model, lo, hi, cats)
        res.probes.append(_probe(model, g))
        oc, can = bounded[1], bounded[2]
        if oc is None or not can.any():
            res.settle(g, record)  # (where the falsifier's first steps settle it)
            continue
        p, a = _promise(oc, can)
        heapq.heappush(heap, (-p, (k,), k, g.weight, a))
    if not heap or heap[0][4] < 0:
        return None, -1
    k, action = heap[0][2], heap[0][4]
    descent = passed[k][0]
    leaves = _leaves_of(model)
    rows, leaf_lo, leaf_hi = descent.leaf_boxes()
    ends = np.append(np.searchsorted(rows, leaves.starts), rows.size)
    score = _leaf_scores(leaves.values[rows], action)
    lo, hi = boxes[k][1], boxes[k][2]
    g = Region(lo, hi, {}, descent.reach, 0.0, boxes[k][0])
    live = np.ones(rows.size, dtype=bool)
    x = _dive_in(model, g, score, leaf_lo, leaf_hi, {}, ends, live)
    d = None if x is None else _violates(model, prep.invariant, x)
    if x is None or d is None:
        return None, k
    popped = heapq.heappop(heap)
    res.n_violating += 1
    res.violating.append((x, d.action, d.confidence, d))
    res.unsettled += popped[3] + sum(e[3] for e in heap)
    return res, -1


def _descend_leaves(
    model: Ensemble, walk: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray
) -> _Descent | None:
    """(L,) the leaves whose boxes meet the box [lo, hi] (inside the domain, not empty), as
    ``Tables``' ``feasible & all(tab.lo <= hi) & all(tab.hi >= lo)`` gives them: every tree
    descended at once with the box tightened by the splits on the way (a child whose
    interval on the split's feature is empty is not entered; the same tightened split bounds
    as the tables').  A leaf is reached iff the box meets every constraint of its path at
    once, i.e. iff its box (the domain under those constraints) meets the box.  Numeric
    splits only; None when the descent enters more than half the nodes (a wide box: the
    tables are then built anyway)."""
    kind, feat, left, right, left_hi, right_lo, aux = walk
    node = model.roots.astype(np.int64)
    # (array methods, not np.tile / np.flatnonzero: their Python wrappers cost more than
    # the work on these small arrays, a few times per level)
    rlo = lo[None, :].repeat(node.size, axis=0)
    rhi = hi[None, :].repeat(node.size, axis=0)
    found: list[np.ndarray] = []
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    limit, seen = max(64, kind.size // 2), 0
    while node.size:
        seen += node.size
        if seen > limit:
            return None
        leaf = kind[node] == LEAF_CODE
        found.append(node[leaf])
        levels.append((rlo, rhi, leaf))
        inner = (~leaf).nonzero()[0]
        if not inner.size:
            break
        nd, blo, bhi = node[inner], rlo[inner], rhi[inner]
        f = feat[nd]
        lh, rl = left_hi[nd], right_lo[nd]
        r = np.arange(nd.size)
        il = (blo[r, f] <= lh).nonzero()[0]  # the left child's [lo_f, min(hi_f, lh)]
        ir = (bhi[r, f] >= rl).nonzero()[0]  # the right child's [max(lo_f, rl), hi_f]
        lhi = bhi[il]
        lhi[np.arange(il.size), f[il]] = np.minimum(lhi[np.arange(il.size), f[il]], lh[il])
        rlo2 = blo[ir]
        rlo2[np.arange(ir.size), f[ir]] = np.maximum(rlo2[np.arange(ir.size), f[ir]], rl[ir])
        node = np.concatenate((left[nd[il]], right[nd[ir]]))
        rlo = np.concatenate((blo[il], rlo2))
        rhi = np.concatenate((lhi, bhi[ir]))
    reach = np.zeros(model.values.shape[0], dtype=bool)
    rows = aux[np.concatenate(found)]  # a leaf's aux is its value row (the loader's)
    reach[rows] = True
    return _Descent(reach, rows, tuple(levels))


def _bounds(model: Ensemble, tab: Tables | _Leaves, g: Region, formula: object) -> Bounded:
    """The bounds of region *g* (:data:`Bounded`)."""
    bounds = _score_bounds(model, tab, g.reach)
    if np.any(bounds[2] == 0):
        # no input reaches some tree's leaves: the region is empty
        return bounds, None, np.zeros(0, dtype=bool)
    oc = outcomes(model, bounds[0], bounds[1])
    box_lo, box_hi, cats = _outcome_boxes(g, oc)
    # (the rows :func:`_rows` makes of ``[g] * k``, without its leaf-box fields)
    can, _ = nm.tri(formula, nm.Rows(box_lo, box_hi, cats, oc.actions.astype(np.int64)))
    return bounds, oc, can


def _step(
    model: Ensemble, tab: Tables, g: Region, formula: object, mentions_conf: bool
) -> tuple[int, float, bool] | list[Region] | None:
    """One region of the search: None when the bounds settle it (empty, or safe on it);
    ``(action, confidence, exact)`` when it is to be decided exactly like a leaf; else its
    two children (with their weights)."""
    return _after(model, tab, g, _bounds(model, tab, g, formula), mentions_conf)


def _after(
    model: Ensemble,
    tab: Tables,
    g: Region,
    bounded: Bounded,
    mentions_conf: bool,
) -> tuple[int, float, bool] | list[Region] | None:
    """:func:`_step` of *g* from its bounds (:func:`_bounds`)."""
    (_, _, n_reach, mins, maxs), oc, can = bounded
    if oc is None:
        return None
    return _after_bounds(model, tab, g, oc, bool(can.any()), n_reach, mins, maxs, mentions_conf)


def _outcome_boxes(g: Region, oc: Outcomes) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """The boxes of region *g* with each possible decision: the region's feature bounds and
    the decision's confidence bounds, one row per possible action."""
    k = oc.actions.size
    n_feat = g.lo.shape[0]
    box_lo = np.empty((k, n_feat + 1))
    box_hi = np.empty((k, n_feat + 1))
    box_lo[:, :n_feat], box_hi[:, :n_feat] = g.lo, g.hi
    box_lo[:, n_feat], box_hi[:, n_feat] = oc.conf_lo, oc.conf_hi
    cats = {f: np.broadcast_to(m, (k, m.size)) for f, m in g.cats.items()}
    return box_lo, box_hi, cats


def _after_bounds(
    model: Ensemble,
    tab: Tables,
    g: Region,
    oc: Outcomes,
    can: bool,
    n_reach: np.ndarray,
    mins: np.ndarray,
    maxs: np.ndarray,
    mentions_conf: bool,
) -> tuple[int, float, bool] | list[Region] | None:
    """:func:`_step` after the bounds: *can* says whether the violation can be true for one
    of the decisions *oc* possible on the non-empty region *g*."""
    if not can:
        return None  # SAFE on the whole region
    if oc.actions.size == 1 and not mentions_conf:
        return int(oc.actions[0]), 0.0, False
    if np.all(n_reach == 1):
        d = _evaluator(model).evaluate_one(_point(model, g))
        return d.action, d.confidence, True
    spread = (maxs - mins).sum(axis=1)  # per tree (every tree reaches a leaf here)
    split = _split_node(model, tab, g, spread, n_reach)
    if split is None:  # pragma: no cover - a multi-leaf tree always splits the region
        raise AssertionError("no split inside a region that reaches several leaves")
    kids = _children(model, tab, g, *split)
    f = split[0]
    before = _coverage(tab, model, f, g.lo, g.hi, g.cats)
    for kid in kids:
        after = _coverage(tab, model, f, kid.lo, kid.hi, kid.cats)
        kid.weight = g.weight * after / before if before else 0.0
    return kids


def _steps(
    model: Ensemble,
    tab: Tables,
    regions: list[tuple[Region, object]],
    mentions_conf: bool,
    promise: list[tuple[float, int]] | None = None,
) -> list[tuple[int, float, bool] | list[Region] | None]:
    """:func:`_step` of every region, the bounds of all at once: the per-tree extremes in
    one pass; each region's sums on its own slice of them (the same arrays, shapes and
    order as :func:`_score_bounds` sums); the logistic link's outcomes for all regions'
    ends in one call (:func:`outcomes`' arithmetic, element by element); the violation's
    three-valued test once per formula.  The same results as :func:`_step` region by region
    (tests/ensembles/test_fixed_costs.py).  With *promise*, it receives per region how
    strongly a decision that can violate is possible there (:func:`_promise`)."""
    c = len(regions)
    if promise is not None and c:
        promise.extend([(-math.inf, -1)] * c)
    elif c < 2:
        return [_step(model, tab, g, formula, mentions_conf) for g, formula in regions]
    reach = np.stack([g.reach for g, _ in regions])
    n_all = np.add.reduceat(reach.astype(np.int64), tab.starts, axis=1)  # (c, T)
    mins_all = np.minimum.reduceat(
        np.where(reach[:, :, None], tab.values[None, :, :], np.inf), tab.starts, axis=1
    )  # (c, T, K)
    maxs_all = np.maximum.reduceat(
        np.where(reach[:, :, None], tab.values[None, :, :], -np.inf), tab.starts, axis=1
    )
    comb = model.combine
    base = np.array(comb.base)
    terms = model.n_trees + 2
    u = _U[comb.arithmetic]
    live = [r for r in range(c) if not np.any(n_all[r] == 0)]
    los, his = {}, {}
    for r in live:
        mins, maxs = mins_all[r], maxs_all[r]
        lo = base + mins.sum(axis=0)
        hi = base + maxs.sum(axis=0)
        mag = np.abs(base) + np.maximum(np.abs(mins), np.abs(maxs)).sum(axis=0)
        err = terms * mag * (u + 2.0**-53) * 1.01 + 1e-300
        los[r], his[r] = lo - err, hi + err
    ocs: dict[int, Outcomes] = {}
    if comb.link is Link.LOGISTIC and live:
        dt = comb.arithmetic.dtype
        lo_v = np.array([los[r][0] for r in live])
        hi_v = np.array([his[r][0] for r in live])
        with np.errstate(over="ignore"):
            slo = np.nextafter(lo_v.astype(dt), dt(-np.inf))
            shi = np.nextafter(hi_v.astype(dt), dt(np.inf))
        m = len(live)
        acts, _, proba = decide_proba(comb, np.concatenate([slo, shi]).astype(dt)[:, None])
        p1 = proba[:, 1].astype(np.float64)
        slack = 16 * u
        below, above = p1[:m] - slack, p1[m:] + slack
        p_lo = np.where(below > 0.0, below, 0.0)  # Python's max(0.0, v), NaN included
        p_hi = np.where(above < 1.0, above, 1.0)  # min(1.0, v)
        floors = decision_floors(comb)
        finite = np.isfinite(lo_v) & np.isfinite(hi_v)
        for j, r in enumerate(live):
            ocs[r] = _single_outcomes(
                floors, int(acts[j]), int(acts[m + j]), p_lo[j], p_hi[j], bool(finite[j])
            )
    else:
        for r in live:
            ocs[r] = outcomes(model, los[r], his[r])
    cans: dict[int, bool] = {}
    groups: dict[int, list[int]] = {}
    for r in live:
        groups.setdefault(id(regions[r][1]), []).append(r)
    for rs in groups.values():
        parts = [_outcome_boxes(regions[r][0], ocs[r]) for r in rs]
        box_lo = np.concatenate([p[0] for p in parts])
        box_hi = np.concatenate([p[1] for p in parts])
        cats = {f: np.concatenate([p[2][f] for p in parts]) for f in parts[0][2]}
        acts_all = np.concatenate([ocs[r].actions for r in rs]).astype(np.int64)
        can, _ = nm.tri(regions[rs[0]][1], nm.Rows(box_lo, box_hi, cats, acts_all))
        at = 0
        for r in rs:
            k = ocs[r].actions.size
            cans[r] = bool(can[at : at + k].any())
            if promise is not None:
                promise[r] = _promise(ocs[r], can[at : at + k])
            at += k
    out: list[tuple[int, float, bool] | list[Region] | None] = [None] * c
    for r in live:
        g = regions[r][0]
        out[r] = _after_bounds(
            model, tab, g, ocs[r], cans[r], n_all[r], mins_all[r], maxs_all[r], mentions_conf
        )
    return out


def _promise(oc: Outcomes, can: np.ndarray) -> tuple[float, int]:
    """How strongly a region can violate, and with which decision: the greatest confidence
    bound of the decisions for which the violation can be true there (-inf for none), the
    best-first order of the falsifier (for ``ensure action == c`` the upper bound of another
    class's probability, Veritas's output heuristic)."""
    hi = np.where(can, oc.conf_hi, -math.inf)
    if not hi.size or not np.any(hi > -math.inf):
        return -math.inf, -1
    r = int(np.nanargmax(hi)) if not np.isnan(hi).all() else 0
    return float(hi[r]) if hi[r] == hi[r] else -math.inf, int(oc.actions[r])


def _leaf_scores(v: np.ndarray, action: int) -> np.ndarray:
    """Per leaf (a row of values *v*), how much its values favour decision *action* (the
    single score's sign for a binary model, else its class's value against the mean of the
    others)."""
    if v.shape[1] == 1:
        out: np.ndarray = v[:, 0] if action == 1 else -v[:, 0]
        return out
    k = v.shape[1]
    out = v[:, action] - (v.sum(axis=1) - v[:, action]) / max(1, k - 1)
    return out


def _dive(model: Ensemble, tab: Tables, g: Region, action: int) -> np.ndarray | None:
    """An input of region *g* in the leaves that favour decision *action* most, tree by tree
    (the trees whose reachable values spread most first), each leaf chosen among those that
    still meet the box narrowed by the leaves before; None when a tree has none left.  A
    candidate only: the evaluator decides whether it violates."""
    ends = np.append(tab.starts, tab.values.shape[0])
    score = _leaf_scores(tab.values, action)
    return _dive_in(model, g, score, tab.lo, tab.hi, tab.cats, ends, g.reach)


def _dive_in(
    model: Ensemble,
    g: Region,
    score: np.ndarray,
    leaf_lo: np.ndarray,
    leaf_hi: np.ndarray,
    leaf_cats: dict[int, np.ndarray],
    ends: np.ndarray,
    live: np.ndarray,
) -> np.ndarray | None:
    """:func:`_dive` on the leaf rows given: their scores, boxes, each tree's first row and
    the end (*ends*, T + 1), and which rows are reachable (*live*; every tree has one)."""
    lo, hi = g.lo.copy(), g.hi.copy()
    cats = {f: m.copy() for f, m in g.cats.items()}
    starts = ends[:-1]
    spread = np.maximum.reduceat(np.where(live, score, -np.inf), starts) - np.minimum.reduceat(
        np.where(live, score, np.inf), starts
    )
    for t in np.argsort(-spread, kind="stable").tolist():
        a, b = int(ends[t]), int(ends[t + 1])
        ok = live[a:b] & np.all(leaf_lo[a:b] <= hi, axis=1) & np.all(leaf_hi[a:b] >= lo, axis=1)
        for f, m in cats.items():
            ok &= (leaf_cats[f][a:b] & m).any(axis=1)
        if not ok.any():
            return None
        j = a + int(np.argmax(np.where(ok, score[a:b], -np.inf)))
        np.maximum(lo, leaf_lo[j], out=lo)
        np.minimum(hi, leaf_hi[j], out=hi)
        for f in cats:
            cats[f] &= leaf_cats[f][j]
    return _probe(model, Region(lo, hi, cats, g.reach, 0.0, g.root))


#: Regions the best-first falsifier takes from its queue before the depth-first search.
FALSIFY_STEPS = 48

#: Greedy dives (:func:`_dive`) the falsifier tries, one per region taken, from the first.
FALSIFY_DIVES = 8


def _violates(model: Ensemble, inv: ck.CheckedInvariant, x: np.ndarray) -> EnsembleDecision | None:
    """The evaluator's decision at the encoded input *x* when *x* is an input (every value
    in its feature's domain, the round trip through a record exact) where that decision
    violates *inv*, else None: the confirmation of every witness."""
    from clefprove.verify.evidence import decode, encode

    xe = encode(model, decode(model, x))
    if not np.array_equal(xe, x) or not all(
        f.min <= xe[i] <= f.max for i, f in enumerate(model.features)
    ):
        return None
    d = _evaluator(model).evaluate_one(xe)
    xs = xe.tolist()
    if ck.evaluate(inv.when, xs, d.action, d.confidence) and not ck.evaluate(
        inv.ensure_formula, xs, d.action, d.confidence
    ):
        return d
    return None


def _falsify(
    model: Ensemble,
    tab: Tables,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    roots: list[tuple[Region, object]],
    root_bounds: dict[int, Bounded],
    tried: set[int],
    mentions_conf: bool,
    res: SearchResult,
    deadline: float,
    record: bool,
) -> tuple[list[tuple[Region, object]], dict[int, Step]] | None:
    """A best-first start of the search (the region where a violating decision is most
    strongly possible first, :func:`_promise`), for at most :data:`FALSIFY_STEPS` regions:
    a violation is usually found in a few steps where the depth-first order would reach it
    late.  Regions settled here count as the search's; None when *want* violations were
    found (the regions left count as unsettled), else the regions left in depth-first order
    (the order of their paths from the roots) with their steps, where the depth-first
    search goes on.  Deterministic, in this process, whatever ``--jobs``: every ``--jobs``
    gives the same items afterwards.  *root_bounds*: the roots' bounds where
    :func:`_settled_roots` found them (the same as :func:`_steps` finds); *tried*: the roots
    whose dive :func:`_first_dive` found no violation with (not tried again)."""
    heap: list[tuple[float, tuple[int, ...], int, Region, object, Step]] = []
    order = itertools.count()
    target: dict[int, int] = {}  # id(region) -> the decision its promise is for
    found: set[bytes] = set()
    dives = 0

    def push(batch: list[tuple[Region, object]], paths: list[tuple[int, ...]]) -> None:
        todo = [(g, formula) for g, formula in batch if id(g) not in root_bounds]
        found_promise: list[tuple[float, int]] = []
        stepped = _steps(model, tab, todo, mentions_conf, found_promise)
        fresh = iter(zip(stepped, found_promise, strict=True))
        steps: list[Step] = []
        promise: list[tuple[float, int]] = []
        for g, _ in batch:
            bounded = root_bounds.get(id(g))
            if bounded is None:
                step, best = next(fresh)
            else:
                step = _after(model, tab, g, bounded, mentions_conf)
                oc = bounded[1]
                best = (-math.inf, -1) if oc is None else _promise(oc, bounded[2])
            steps.append(step)
            promise.append(best)
        for (g, formula), path, step, (p, a) in zip(batch, paths, steps, promise, strict=True):
            if step is None:
                res.settle(g, record)
            else:
                target[id(g)] = a
                heapq.heappush(heap, (-p, path, next(order), g, formula, step))

    push(roots, [(k,) for k in range(len(roots))])
    taken = 0
    while heap and taken < FALSIFY_STEPS and time.monotonic() <= deadline:
        _, path, _, g, formula, step = heapq.heappop(heap)
        taken += 1
        if dives < FALSIFY_DIVES and target[id(g)] >= 0:
            dives += 1
            x = None if id(g) in tried else _dive(model, tab, g, target[id(g)])
            d = None if x is None or x.tobytes() in found else _violates(model, prep.invariant, x)
            if x is not None and d is not None:
                found.add(x.tobytes())
                res.n_violating += 1
                res.violating.append((x, d.action, d.confidence, d))
                if len(res.violating) >= max(want, 1):
                    res.unsettled += g.weight + sum(e[3].weight for e in heap)
                    return None
        if isinstance(step, list):
            push([(kid, formula) for kid in step], [(*path, i) for i in range(len(step))])
            continue
        assert step is not None
        _decide_exact(model, tab, prep, settings, [(g, *step)], res, want, deadline, record)
        if res.n_violating and len(res.violating) >= max(want, 1):
            res.unsettled += sum(e[3].weight for e in heap)
            return None
    left = sorted(heap, key=lambda e: e[1])
    return [(e[3], e[4]) for e in left], {id(e[3]): e[5] for e in left}


def _items(
    model: Ensemble,
    tab: Tables,
    initial: list[tuple[Region, object]],
    mentions_conf: bool,
    res: SearchResult,
    record: bool,
    first: dict[int, Step] | None = None,
) -> list[list[tuple[Region, object]]]:
    """The search's work items, in depth-first order: *initial* split breadth first, level by
    level, until there are :data:`ITEMS` regions or none splits any more (regions the bounds
    settle on the way are settled here, in *res*).  Many starting regions (a stored
    partition's) are cut into :data:`ITEMS` runs of neighbours instead."""
    if len(initial) >= ITEMS:
        bounds = np.linspace(0, len(initial), ITEMS + 1).astype(int)
        return [initial[a:b] for a, b in itertools.pairwise(bounds.tolist()) if b > a]
    frontier = list(initial)
    known: dict[int, Step] = dict(first or {})  # id(region) -> its step (a final exact one;
    # *first*: the initial regions' steps, found before)
    while len(frontier) < ITEMS:
        nxt: list[tuple[Region, object]] = []
        split_any = False
        todo = [(g, formula) for g, formula in frontier if id(g) not in known]
        stepped = iter(_steps(model, tab, todo, mentions_conf))
        for g, formula in frontier:
            step = known.pop(id(g)) if id(g) in known else next(stepped)
            if step is None:
                res.settle(g, record)
            elif isinstance(step, list):
                nxt.extend((kid, formula) for kid in step)
                split_any = True
            else:
                known[id(g)] = step  # decided exactly later, as it is: not stepped again
                nxt.append((g, formula))
        frontier = nxt
        if not split_any:
            break
    return [[item] for item in frontier]


def _decide_exact(
    model: Ensemble,
    tab: Tables,
    prep: eg.Prepared,
    settings: CheckOptions,
    exact: list[tuple[Region, int, float, bool]],
    res: SearchResult,
    want: int,
    deadline: float,
    record: bool,
) -> None:
    """Regions with one possible decision each ``(region, action, conf, conf is exact)``,
    decided exactly like leaves by the per-path engine, into *res*."""
    regions = [e[0] for e in exact]
    acts = np.array([e[1] for e in exact])
    conf = np.array([e[2] for e in exact])
    boxes = _rows(
        model,
        regions,
        acts,
        np.where([e[3] for e in exact], conf, 0.0),
        np.where([e[3] for e in exact], conf, 1.0),
    )
    # The solver's per-query limit is cut to what is left of the budget, so that a batch
    # cannot run the invariant far past it (docs/ensembles.md, "Budget overrun").
    left = max(1e-3, deadline - time.monotonic())
    limited = settings
    if settings.timeout is None or settings.timeout > left:
        limited = dataclasses.replace(settings, timeout=left)
    pv = eg.decide(tab.flat, prep, boxes, limited)
    res.solver_paths += pv.solver_paths
    res.regions += len(regions)
    for r in range(len(regions)):
        if record and pv.status[r] == eg.SAFE:
            res.settled.append(_settled(regions[r]))
        if pv.status[r] == eg.VIOLATED:
            res.n_violating += 1
            if len(res.violating) < want + 2:
                x = eg.witness(tab.flat, prep, pv, r, limited)
                res.violating.append((x, int(acts[r]), float(conf[r]), None))
        elif pv.status[r] == eg.UNKNOWN:
            res.n_unknown += 1
            res.unsettled += regions[r].weight


def _search_stack(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    items: list[tuple[Region, object]],
    deadline: float,
    record: bool,
    stop: Callable[[], bool],
) -> _Part:
    """Depth-first branch and bound from *items* (searched in order) until every region is
    settled, *want* violations are confirmed candidates, the *deadline* passes or *stop*."""
    tab = ensemble_tables(model)
    res = SearchResult()
    part = _Part(res)
    mentions_conf = _mentions_confidence(prep.violation, len(model.features))
    stack: list[tuple[Region, object]] = list(reversed(items))
    exact: list[tuple[Region, int, float, bool]] = []  # (region, action, conf, conf is exact)

    def flush() -> None:
        if exact:
            _decide_exact(model, tab, prep, settings, exact, res, want, deadline, record)
            exact.clear()

    while stack:
        if time.monotonic() > deadline:
            res.timed_out = True
            break
        if stop():
            part.stopped = True
            break
        if res.n_violating and len(res.violating) >= max(want, 1):
            break  # violated for sure: enough confirmed candidates
        g, formula = stack.pop()
        step = _step(model, tab, g, formula, mentions_conf)
        if step is None:
            res.settle(g, record)
        elif isinstance(step, list):
            stack.extend((kid, formula) for kid in reversed(step))
        else:
            exact.append((g, *step))
        if len(exact) >= BATCH:
            flush()
    if not part.stopped:
        flush()
    if stack:
        res.unsettled += sum(g.weight for g, _ in stack)
    return part


def _search_items(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    items: list[list[tuple[Region, object]]],
    deadline: float,
    record: bool,
) -> list[_Part | None]:
    """Each item searched (None: not searched, cut after an item that gave enough
    violations).  With ``jobs == 1`` in order, here.  With more, here too while the items
    take less than :data:`PARALLEL_AFTER` seconds in all (a quick search starts no process);
    then the items left (the one cut by that slice from its start) go to the run's pool."""
    parts: list[_Part | None] = [None] * len(items)
    jobs = settings.jobs
    t0 = time.monotonic()
    j = 0
    while j < len(items):
        sliced = jobs > 1 and len(items) - j >= 2
        until = t0 + PARALLEL_AFTER if sliced else math.inf
        if sliced and time.monotonic() > until:
            break
        part = _search_stack(model, prep, settings, want, items[j], deadline, record, _past(until))
        if part.stopped:
            break  # searched again from its start by a worker
        parts[j] = part
        j += 1
        if _cut(parts, want) is not None:
            return parts
    if j < len(items):
        _in_pool(model, prep, settings, want, items, deadline, record, parts, j)
    return parts


def _past(until: float) -> Callable[[], bool]:
    return lambda: time.monotonic() > until


def _in_pool(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    items: list[list[tuple[Region, object]]],
    deadline: float,
    record: bool,
    parts: list[_Part | None],
    first: int,
) -> None:
    """Items *first*.. searched by the run's worker processes, into *parts*; the ones after
    an item that settles the search (:func:`_cut`) are told to stop and dropped."""
    import concurrent.futures as cf  # only with --jobs: ~5 ms of every start otherwise

    quiet = dataclasses.replace(settings, jobs=1)
    with run_pool.current(settings.jobs) as pool:
        group = pool.group()
        args = {
            i: (prep, quiet, want, items[i], deadline, record, group, i)
            for i in range(first, len(items))
        }
        futures = {pool.submit(_search_task, model, *a): i for i, a in args.items()}
        pending = set(futures)
        late = False
        try:
            while pending:
                wait = None if late else max(0.0, deadline - time.monotonic()) + 0.01
                done, pending = cf.wait(pending, timeout=wait, return_when=cf.FIRST_COMPLETED)
                if not late and time.monotonic() > deadline:
                    # Out of time: the items no worker has started are not searched at all.
                    late = True
                    for fut in [f for f in pending if f.cancel()]:
                        pending.discard(fut)
                        i = futures[fut]
                        w = sum(g.weight for g, _ in items[i])
                        parts[i] = _Part(SearchResult(timed_out=True, unsettled=w))
                for fut in done:
                    if fut.cancelled():
                        continue
                    i = futures[fut]
                    got = fut.result()
                    if run_pool.missing(got):  # reached a worker without the model
                        again = pool.resend(_search_task, model, *args[i])
                        futures[again] = i
                        pending.add(again)
                    else:
                        parts[i] = _unpack(got)
                cut = _cut(parts, want)
                if cut is not None:
                    pool.cancel_after(group, cut)
                    for fut in pending:
                        fut.cancel()
                    cf.wait(pending)
                    for i in range(cut + 1, len(items)):
                        parts[i] = None
                    return
        except BaseException:
            pool.cancel_after(group, -1)
            raise


def _cut(parts: list[_Part | None], want: int) -> int | None:
    """The item after which a sequential search stops for enough violations (every item up
    to it searched), or None."""
    n_violating = found = 0
    for i, part in enumerate(parts):
        if part is None:
            return None
        n_violating += part.res.n_violating
        found += len(part.res.violating)
        if n_violating and found >= max(want, 1):
            return i
    return None


def _merge(
    res: SearchResult,
    items: list[list[tuple[Region, object]]],
    parts: list[_Part | None],
    want: int,
) -> None:
    """Add the items' results to *res* in item order, as one sequential search gives them:
    up to the item that gives enough violations; the weight of items not searched is not
    settled."""
    cut = _cut(parts, want)
    for i, (item, part) in enumerate(zip(items, parts, strict=True)):
        if part is None or (cut is not None and i > cut):
            res.unsettled += sum(g.weight for g, _ in item)
            continue
        r = part.res
        room = want + 2 - len(res.violating)
        res.violating.extend(r.violating[: max(0, room)])
        res.n_violating += r.n_violating
        res.n_unknown += r.n_unknown
        res.regions += r.regions
        res.unsettled += r.unsettled
        res.timed_out |= r.timed_out
        res.solver_paths += r.solver_paths
        res.settled.extend(r.settled)
        res.reused += r.reused


def _search_task(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    want: int,
    item: list[tuple[Region, object]],
    deadline: float,
    record: bool,
    group: int,
    index: int,
) -> tuple[_Part, bytes | None]:
    """One item in a pool worker: its result, the settled regions packed (a partition)."""
    part = _search_stack(
        model, prep, settings, want, item, deadline, record,
        lambda: run_pool.cancelled(group, index),
    )  # fmt: skip
    packed = None
    if record:
        dom = Box.domain(model)
        cat_feats = sorted(dom.cats)
        packed = Partition.of(
            part.res.settled, len(model.features), cat_feats, [dom.cats[f].size for f in cat_feats]
        ).to_bytes()
        part.res.settled = []
    return part, packed


def _unpack(got: tuple[_Part, bytes | None]) -> _Part:
    part, packed = got
    if packed is not None:
        p = Partition.from_bytes(packed)
        part.res.settled = [
            (int(p.root[r]), p.lo[r], p.hi[r], {f: m[r] for f, m in p.cats.items()})
            for r in range(p.size)
        ]
    return part


def _feature_literal(x: object, n_feat: int) -> bool:
    """A single-feature literal (a Bound on a feature, or a Cat): what narrows a root."""
    return isinstance(x, nm.Cat) or (isinstance(x, nm.Bound) and x.col != n_feat)


def _mentions_confidence(f: object, n_feat: int) -> bool:
    match f:
        case nm.Bound(col, _, _):
            return col == n_feat
        case nm.Lin(terms, _, _):
            return any(col == n_feat for col, _ in terms)
        case nm.NAnd(args) | nm.NOr(args):
            return any(_mentions_confidence(a, n_feat) for a in args)
    return False


def _evaluator(model: Ensemble) -> EnsembleEvaluator:
    return model.derived.get(("verify.evaluator",), lambda: EnsembleEvaluator(model))


# ---------------------------------------------------------------- results


def tally(
    inv: ck.CheckedInvariant,
    n_violating: int,
    n_unknown: int,
    unsettled: float,
    timed_out: bool,
    confirmed: int,
    domain: str,
    warnings: list[str],
) -> tuple[int, int, float]:
    """``(violating, unknown, proved share)`` of a search whose *confirmed* witnesses were
    confirmed by the evaluator: without one, violating regions count as unknown, and so does
    a search cut short; the proved share of *domain* is then warned about."""
    if confirmed:
        return n_violating, n_unknown, 0.0
    n_unknown += n_violating
    if timed_out or unsettled > 0:
        n_unknown = max(n_unknown, 1)
    share = max(0.0, min(1.0, 1.0 - unsettled))
    if n_unknown:
        warnings.append(
            f"{inv.file}:{inv.line}: invariant '{inv.name}' on the ensemble: "
            f"{share:.1%} of {domain} proved "
            + ("within the time budget" if timed_out else "(some regions undecided)")
        )
    return 0, n_unknown, share


def when_is_vacuous(
    model: Ensemble,
    prep: eg.Prepared,
    settings: CheckOptions,
    deadline: float,
    probes: Sequence[np.ndarray] = (),
) -> bool:
    """True only when ``when`` of ``prep.invariant`` is proved unsatisfiable on the domain.
    A ``when`` about the domain alone is decided on the domain box (after the inputs
    *probes*, the search's roots, are tried); one that mentions the
    decision by the same search as the invariant's, of ``when => false``, within what is left
    of the invariant's budget (by *deadline*): vacuous when that search settles every region
    with none violating (a region whose decisions may satisfy ``when`` is never settled)."""
    from clefprove.verify.evidence import when_invariant, when_is_vacuous_on_domain, when_met_at

    when = prep.invariant.when
    if not ck.mentions_decision(when):
        # when_is_vacuous_on_domain's own first test, the probes, here: it would walk
        # ``when`` once more to see that it does not mention the decision
        if probes and when_met_at(model, when, probes):  # type: ignore[arg-type]
            return False
        return when_is_vacuous_on_domain(model, prep, settings)  # type: ignore[arg-type]
    wprep = eg.prepare_when(model, when_invariant(prep.invariant), prep, settings.dnf_cap)
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    res = search(model, wprep, settings, 1, left)
    return not (res.n_violating or res.n_unknown or res.timed_out or res.unsettled > 0)


def check_ensemble_invariant(
    model: Ensemble, inv: ck.CheckedInvariant, settings: CheckOptions, counterexamples: int
) -> Any:
    """The verdict on one non-relational invariant of an ensemble (an InvariantResult)."""
    return decide_ensemble_invariant(model, inv, settings, counterexamples)[0]


def decide_ensemble_invariant(
    model: Ensemble,
    inv: ck.CheckedInvariant,
    settings: CheckOptions,
    counterexamples: int,
    start: Partition | None = None,
) -> tuple[Any, Partition | None]:
    """(InvariantResult, the proof's partition when it holds) for one non-relational
    invariant, the search starting from *start* when given (see :func:`search`).

    A *path* of an ensemble is a settled region of the search: ``paths_checked`` counts the
    regions settled in this run, ``paths_reused`` those of *start* that the bounds re-proved
    as they were (no split, no solver)."""
    from clefprove.verify.evidence import decode, describe_ensemble_region
    from clefprove.verify.verdicts import Counterexample, settled_result

    t0 = time.perf_counter()
    prep = eg.prepare(model, inv, settings.dnf_cap)
    budget = budget_of(settings)
    deadline = time.monotonic() + budget
    res = search(model, prep, settings, counterexamples, budget, start, record=True)
    warnings: list[str] = []
    cexs: list[Counterexample] = []
    confirmed = 0
    for x, _, _, known in res.violating:
        if confirmed >= max(counterexamples, 1):
            break
        # (a falsifier's witness was confirmed by the same test when it was found)
        d = known if known is not None else _violates(model, inv, x)
        if d is None:
            warnings.append("internal: an unconfirmed ensemble witness was dropped")
            continue
        confirmed += 1
        if len(cexs) < counterexamples:
            region = describe_ensemble_region(model, d.leaves)
            cexs.append(
                Counterexample(
                    decode(model, x), model.actions[d.action], d.confidence, -1, region,
                    region, leaves=d.leaves,
                )
            )  # fmt: skip
    n_violating, n_unknown, share = tally(
        inv, res.n_violating, res.n_unknown, res.unsettled, res.timed_out, confirmed,
        "the input domain", warnings,
    )  # fmt: skip
    result = settled_result(
        inv,
        n_violating,
        n_unknown,
        lambda: when_is_vacuous(model, prep, settings, deadline, res.probes),
        warnings,
        cexs,
        time.perf_counter() - t0,
        # a witness of the first dives is a region decided too, before any was settled
        paths_checked=max(res.regions - res.reused, n_violating),
        paths_reused=res.reused,
        solver_paths=res.solver_paths,
        share=share,
    )
    partition = None
    if result.status == Verdict.HOLDS and not n_unknown and not n_violating and not res.timed_out:
        dom = Box.domain(model)
        cat_feats = sorted(dom.cats)
        partition = Partition.of(
            res.settled, len(model.features), cat_feats, [dom.cats[f].size for f in cat_feats]
        )
    return result, partition


def _relation(model: Ensemble, inv: ck.CheckedInvariant) -> str:
    e = inv.ensure
    assert isinstance(e, ck.Relational)  # only given relational ones
    name = model.features[e.feature].name
    if isinstance(e, ck.Monotone):
        return f"monotone({name})"
    if isinstance(e, ck.Stable):
        return f"stable({name}, {float(e.delta):g})"
    return f"independent({name})"
