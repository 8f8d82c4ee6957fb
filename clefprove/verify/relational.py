"""Relational invariants: ``monotone(f)``, ``stable(f, delta)``, ``independent(f)``.

A violation is a pair of leaves (A, B) and a pair of inputs x in box A, x' in box B that are
equal on every feature except f, both satisfy ``when``, are related on f (``x_f < x'_f`` for
monotone, ``|x_f - x'_f| <= delta`` for stable, anything for independent) and whose decisions
break the property (severity drops from A to B for monotone; the actions differ otherwise).

Decided exactly on boxes.  The pairs are found by descending the tree
(:mod:`clefprove.verify.pairsweep`: only pairs across a split on f can meet, and with one
conjunction they are counted in blocks, not listed); the leaf-pair matrix in row chunks
(:func:`matrix_pairs`) is the reference it is tested against.  What a pair must satisfy:

1. pairs are filtered by action (only pairs whose actions differ, or drop in severity, matter),
   by feasibility and by a per-leaf three-valued test of ``when``;
2. ``when`` is expanded into a short DNF; for each pair of conjunctions (Ci for x, Cj for x')
   the leaves are narrowed by the single-feature literals (Ci on A, Cj on B), the non-f
   coordinates of the two narrowed boxes must intersect (intervals / code sets) and the two
   f-intervals must be related, which is decided exactly at their end points (float64 or whole
   values: the closest distance between two intervals is attained at end points);
3. multi-feature linear ``when`` literals are first evaluated three-valued on the pair's boxes;
   pairs that stay undecided (and every pair when the DNF is too long) go to Z3
   (:mod:`clefprove.smt.pairs`: two copies of f, Real relaxation, rounded and confirmed).

Every printed counterexample is confirmed by the evaluator (both decisions), see
:func:`confirm_pair`.  See docs/verification.md, "Relational invariants".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.dsl.checked import related
from clefprove.errors import ClefproveError
from clefprove.frozen import frozen
from clefprove.geometry.boxes import LeafBoxes, cat_mask, leaf_boxes
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model
from clefprove.status import BoxAnswer
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions
from clefprove.verify.pairsweep import Counts, FanOut, PairSweep, Part, stable_ok
from clefprove.verify.verdicts import (
    InvariantResult,
    RelationalCounterexample,
    settled_result,
)

#: Most DNF conjunctions of ``when`` decided on boxes (their pairs: at most this squared).
PAIR_DNF_CAP = 16

#: Pair-matrix cells per chunk (rows x leaves): bounds the memory of the boolean matrices.
CHUNK_CELLS = 1 << 19

#: Violating pairs tried for confirmation beyond K, so that one failed witness (a bug) does
#: not leave the verdict resting on unconfirmed pairs.
EXTRA_CONFIRM = 16

_UNSAT, _SAT, _UND = BoxAnswer.UNSAT, BoxAnswer.SAT, BoxAnswer.UNDECIDED


def describe(model: Model, rel: ck.Relational) -> str:
    """``monotone(name)`` etc., as written in the DSL."""
    name = model.features[rel.feature].name
    match rel:
        case ck.Monotone():
            return f"monotone({name})"
        case ck.Stable(_, delta):
            return f"stable({name}, {_show_delta(delta)})"
        case ck.Independent():
            return f"independent({name})"
    raise TypeError(f"not a relational form: {rel!r}")


def _show_delta(delta: Fraction) -> str:
    """The delta as written: a whole number, the float64 it equals, or 17 significant digits
    (a product of constants can lie outside the float64 range, or between two float64s)."""
    if delta.denominator == 1:
        return str(delta.numerator)
    if delta < 2**1023 and Fraction(float(delta)) == delta:
        return repr(float(delta))
    with localcontext() as ctx:
        ctx.prec = 17
        return str(Decimal(delta.numerator) / Decimal(delta.denominator))


def broken(rel: ck.Relational, rank: np.ndarray | None, action_a: int, action_b: int) -> bool:
    """Whether the decisions (x -> action_a, x' -> action_b) break the property."""
    if isinstance(rel, ck.Monotone):
        assert rank is not None
        return bool(rank[action_b] < rank[action_a])
    return action_a != action_b


# ---------------------------------------------------------------- preparation


@frozen(eq=False)
class _Side:
    """All leaf boxes narrowed by one conjunction of ``when``."""

    rows: nm.Rows
    ok: np.ndarray  # (L,) bool: non-empty after narrowing
    lins: tuple[nm.Lin, ...]


@frozen(eq=False)
class Prepared:
    invariant: ck.CheckedInvariant
    relation: ck.Relational
    when: object  # normalized
    conjuncts: list[tuple[object, ...]] | None
    rank: np.ndarray | None  # severity rank per action (monotone)

    @property
    def on_boxes(self) -> bool:
        """Whether every conjunction of ``when`` is made of single-feature literals, so that
        cell tests alone decide every pair (:attr:`PairChecker.on_boxes`)."""
        return self.conjuncts is not None and not any(
            isinstance(lit, nm.Lin) for conj in self.conjuncts for lit in conj
        )


def prepare(
    model: Model | Ensemble, inv: ck.CheckedInvariant, severity: tuple[int, ...] | None
) -> Prepared:
    """Normalize ``when`` of a relational invariant for *model*."""
    rel = inv.ensure
    if not isinstance(rel, ck.Relational):
        raise ValueError("not a relational invariant")
    norm = nm.Normalizer(model)
    when = norm.nnf(inv.when)
    if nm.uses_decision(when, len(model.features)):
        raise ClefproveError(
            f"{inv.file}:{inv.line}: the 'when' of relational invariant '{inv.name}' cannot use "
            "'action' or 'confidence'"
        )
    ft = model.features[rel.feature]
    if not isinstance(rel, ck.Independent) and ft.type is FeatureType.CATEGORICAL:
        raise ClefproveError(
            f"{inv.file}:{inv.line}: invariant '{inv.name}': {type(rel).__name__.lower()}(...) "
            f"needs an ordered feature; '{ft.name}' is categorical (use independent(...))"
        )
    rank = None
    if isinstance(rel, ck.Monotone):
        if severity is None or sorted(severity) != list(range(len(model.actions))):
            raise ClefproveError(
                f"{inv.file}:{inv.line}: monotone(...) needs a severity line that orders every "
                "action"
            )
        rank = np.empty(len(model.actions), dtype=np.int64)
        rank[list(severity)] = np.arange(len(severity))
    return Prepared(inv, rel, when, nm.dnf(when, PAIR_DNF_CAP), rank)


# ---------------------------------------------------------------- the pair matrix


def _distinct_columns(masks: list[np.ndarray]) -> np.ndarray:
    """Indices of one column per distinct column pattern of the stacked masks."""
    packed = np.packbits(np.concatenate(masks, axis=0), axis=0)
    cols = np.ascontiguousarray(packed.T)
    _, idx = np.unique(cols.view(np.dtype((np.void, cols.shape[1]))), return_index=True)
    return np.sort(idx)


@dataclass
class _Outcome:
    status: np.ndarray  # (rows, L) int8 _UNSAT / _SAT / _UND
    conj: np.ndarray  # (rows, L) int32: index i*k+j of the conjunction pair that made it SAT


class PairChecker:
    """Decides every leaf pair of one relational invariant (see module docstring)."""

    def __init__(self, model: Model, prep: Prepared, boxes: LeafBoxes | None = None) -> None:
        self.model = model
        self.prep = prep
        b = boxes if boxes is not None else leaf_boxes(model)
        self.n_leaves = b.size
        self.f = prep.relation.feature
        self.n_feat = len(model.features)
        self.symmetric = not isinstance(prep.relation, ck.Monotone)
        rows = nm.Rows(b.lo, b.hi, b.cats, b.actions)
        can, _ = nm.tri(prep.when, rows)
        live = b.feasible & can
        if not live.all():  # only leaves that some input satisfying 'when' reaches take part
            b = b.take(np.flatnonzero(live))
            rows = nm.Rows(b.lo, b.hi, b.cats, b.actions)
        self.boxes = b
        self.live = np.ones(b.size, dtype=bool)
        conjs = prep.conjuncts if prep.conjuncts is not None else [()]
        self.exact = prep.conjuncts is not None
        self.sides: list[_Side] = []
        for conj in conjs:
            nrows, ok, multi = nm.narrow(conj, rows)
            self.sides.append(_Side(nrows, ok & self.live, tuple(multi)))
        feats = model.features
        dom_lo = np.array([f.min for f in feats])
        dom_hi = np.array([f.max for f in feats])
        # Non-f numeric columns that some narrowed box restricts (others always intersect).
        self.num_cols = [
            g
            for g, ft in enumerate(feats)
            if g != self.f
            and ft.type is not FeatureType.CATEGORICAL
            and any(
                bool(np.any(s.rows.lo[:, g] > dom_lo[g]) or np.any(s.rows.hi[:, g] < dom_hi[g]))
                for s in self.sides
            )
        ]
        self.cat_cols = [
            g
            for g, ft in enumerate(feats)
            if g != self.f
            and ft.type is FeatureType.CATEGORICAL
            and any(g in s.rows.cats for s in self.sides)
        ]
        # Code masks as float32 for a matrix product (overlap = some common code), keeping one
        # code per class of codes that every mask treats alike (large vocabularies collapse
        # to a few classes).
        keep = {
            g: _distinct_columns([s.rows.cats[g] for s in self.sides if g in s.rows.cats])
            for g in self.cat_cols
        }
        self.cat_f32 = [
            {
                g: s.rows.cats[g][:, keep[g]].astype(np.float32)
                for g in self.cat_cols
                if g in s.rows.cats
            }
            for s in self.sides
        ]
        self.actions = b.actions
        # Severity rank per row (monotone), or the action itself (symmetric forms: "breaks"
        # means a different action, i.e. all leaves minus those of the same rank).
        if prep.rank is not None:
            self.rank_row = prep.rank[b.actions].astype(np.int64)
        else:
            self.rank_row = b.actions.astype(np.int64)

    @property
    def counted(self) -> bool:
        """Whether every pair is decided by one cell test (one conjunction of single-feature
        literals): the case the descent counts without listing pairs."""
        return self.exact and len(self.sides) == 1 and not self.sides[0].lins

    @property
    def on_boxes(self) -> bool:
        """Whether every pair is decided by cell tests alone (each conjunction of ``when``
        made of single-feature literals; a pair violates when some (Ci, Cj) cell test says
        so): what a re-check after an edit re-counts (:mod:`clefprove.verify.pairdelta`)."""
        return self.prep.on_boxes

    def first_cell(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per pair of rows (a, b): the index i * k + j of the first conjunction pair (Ci for
        x, Cj for x') whose cell test says it violates, -1 for none (:attr:`on_boxes`)."""
        k = len(self.sides)
        out = np.full(a.size, -1, dtype=np.int64)
        for i in range(k):
            for j in range(k):
                todo = np.flatnonzero(out < 0)
                if not todo.size:
                    return out
                hit = self.cells(i, j, a[todo], b[todo])
                out[todo[hit]] = i * k + j
        return out

    def cells(self, i: int, j: int, pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
        """The pair matrix's cell test for rows (pa, pb), x in pa narrowed by side i and x' in
        pb narrowed by side j (without the symmetric forms' a < b; multi-feature literals
        are not looked at)."""
        sa, sb = self.sides[i], self.sides[j]
        m: np.ndarray = sa.ok[pa] & sb.ok[pb]
        ra, rb = self.rank_row[pa], self.rank_row[pb]
        m &= (rb < ra) if self.prep.rank is not None else (ra != rb)
        la, ha, lb, hb = sa.rows.lo, sa.rows.hi, sb.rows.lo, sb.rows.hi
        for g in self.num_cols:
            m &= la[pa, g] <= hb[pb, g]
            m &= lb[pb, g] <= ha[pa, g]
        for g in self.cat_cols:
            ma, mb = self.cat_f32[i].get(g), self.cat_f32[j].get(g)
            if ma is not None and mb is not None:
                m &= np.any((ma[pa] > 0) & (mb[pb] > 0), axis=1)
        f = self.f
        rel = self.prep.relation
        if isinstance(rel, ck.Monotone):
            m &= la[pa, f] < hb[pb, f]
        elif isinstance(rel, ck.Stable):
            k = np.flatnonzero(m)
            m[k] = stable_ok(la[pa[k], f], ha[pa[k], f], lb[pb[k], f], hb[pb[k], f], rel.delta)
        return m

    # ------------------------------------------------------------ per chunk

    def _action_filter(self, a0: int, a1: int) -> np.ndarray:
        act = self.actions
        if self.prep.rank is not None:
            r = self.prep.rank[act]
            m: np.ndarray = r[None, :] < r[a0:a1, None]
        else:
            m = act[None, :] != act[a0:a1, None]
        m &= self.live[a0:a1, None] & self.live[None, :]
        if self.symmetric:
            m &= np.arange(act.size)[None, :] > np.arange(a0, a1)[:, None]
        return m

    def _pair_mask(self, i: int, j: int, a0: int, a1: int, base: np.ndarray) -> np.ndarray:
        """Pairs (A in chunk, B) whose narrowed boxes meet on non-f features and are related
        on f (Ci narrows A, Cj narrows B); *base* already filtered."""
        sa, sb = self.sides[i], self.sides[j]
        m: np.ndarray = base & sa.ok[a0:a1, None] & sb.ok[None, :]
        if not m.any():
            return m
        la, ha = sa.rows.lo[a0:a1], sa.rows.hi[a0:a1]
        lb, hb = sb.rows.lo, sb.rows.hi
        for g in self.num_cols:
            m &= la[:, g, None] <= hb[None, :, g]
            m &= lb[None, :, g] <= ha[:, g, None]
        for g in self.cat_cols:
            ma = self.cat_f32[i].get(g)
            mb = self.cat_f32[j].get(g)
            if ma is not None and mb is not None:
                m &= (ma[a0:a1] @ mb.T) > 0
        f = self.f
        rel = self.prep.relation
        if isinstance(rel, ck.Monotone):
            m &= la[:, f, None] < hb[None, :, f]
        elif isinstance(rel, ck.Stable):
            pa, pb = np.nonzero(m)  # only the surviving pairs
            m[pa, pb] = stable_ok(la[pa, f], ha[pa, f], lb[pb, f], hb[pb, f], rel.delta)
        return m

    def _lin_status(self, i: int, j: int, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
        """_SAT / _UNSAT / _UND per candidate pair for the multi-feature literals of (Ci, Cj),
        evaluated on the pair's boxes (common non-f part, each side's own f-interval)."""
        sa, sb = self.sides[i], self.sides[j]
        lo = np.maximum(sa.rows.lo[ra], sb.rows.lo[rb])
        hi = np.minimum(sa.rows.hi[ra], sb.rows.hi[rb])
        can = np.ones(ra.size, dtype=bool)
        must = np.ones(ra.size, dtype=bool)
        for side, r in ((sa, ra), (sb, rb)):
            slo, shi = lo.copy(), hi.copy()
            slo[:, self.f] = side.rows.lo[r, self.f]
            shi[:, self.f] = side.rows.hi[r, self.f]
            for lit in side.lins:
                smin = nm.lin_extreme(lit, slo, shi, minimum=True)
                smax = nm.lin_extreme(lit, slo, shi, minimum=False)
                if lit.strict:
                    ct, cf = smin < 0, smax >= 0
                else:
                    ct, cf = smin <= 0, smax > 0
                can &= ct
                must &= ~cf
        out = np.full(ra.size, _UND, dtype=np.int8)
        out[~can] = _UNSAT
        out[can & must] = _SAT
        if self._single_lin(i, j) is not None:
            # One linear literal over one box: its minimum is at a corner made of box ends
            # (float64 / whole values), so 'can be true' is exact (see witness()).
            out[can] = _SAT
        return out

    def _single_lin(self, i: int, j: int) -> nm.Lin | None:
        """The only multi-feature literal of (Ci, Cj) when deciding it on the boxes is exact:
        it does not mention f (both copies then coincide on the shared coordinates), or the
        relation is 'independent' (x_f and x'_f are unrelated box coordinates, and the shared
        coordinates' minimizing corner is the same for both copies); else None."""
        lits = set(self.sides[i].lins) | set(self.sides[j].lins)
        if len(lits) != 1:
            return None
        (lit,) = lits
        if isinstance(self.prep.relation, ck.Independent):
            return lit
        return lit if all(col != self.f for col, _ in lit.terms) else None

    def chunk(self, a0: int, a1: int) -> _Outcome | None:
        """Decide the pairs whose first leaf row is in [a0, a1) (None: no candidate pair)."""
        base = self._action_filter(a0, a1)
        if not base.any():
            return None
        n_b = self.actions.size
        status = np.zeros((a1 - a0, n_b), dtype=np.int8)
        conj = np.full((a1 - a0, n_b), -1, dtype=np.int32)
        k = len(self.sides)
        for i in range(k):
            for j in range(k):
                m = self._pair_mask(i, j, a0, a1, base & (status != _SAT))
                if not m.any():
                    continue
                lins = self.sides[i].lins or self.sides[j].lins
                if self.exact and not lins:
                    status[m] = _SAT
                    conj[m] = i * k + j
                    continue
                pa, pb = np.nonzero(m)
                if self.exact:
                    st = self._lin_status(i, j, pa + a0, pb)
                else:
                    st = np.full(pa.size, _UND, dtype=np.int8)
                sat = st == _SAT
                status[pa[sat], pb[sat]] = _SAT
                conj[pa[sat], pb[sat]] = i * k + j
                und = st == _UND
                cur = status[pa[und], pb[und]]
                status[pa[und], pb[und]] = np.where(cur == _SAT, _SAT, _UND)
        return _Outcome(status, conj)

    # ------------------------------------------------------------ witnesses

    def witness(self, a: int, b: int, conj: int) -> tuple[np.ndarray, np.ndarray]:
        """Encoded (x, x') for a box-decided pair of leaf rows (a, b)."""
        k = len(self.sides)
        sa, sb = self.sides[conj // k], self.sides[conj % k]
        x = np.empty(self.n_feat, dtype=np.float64)
        for g, ft in enumerate(self.model.features):
            if g == self.f:
                continue
            if ft.type is FeatureType.CATEGORICAL:
                size = len(ft.values)
                m = (
                    cat_mask(sa.rows.cats, g, sa.rows.size, size)[a]
                    & cat_mask(sb.rows.cats, g, sb.rows.size, size)[b]
                )
                codes = np.flatnonzero(m)
                x[g] = ft.default if int(ft.default) in codes else float(codes[0])
                continue
            lo = max(float(sa.rows.lo[a, g]), float(sb.rows.lo[b, g]))
            hi = min(float(sa.rows.hi[a, g]), float(sb.rows.hi[b, g]))
            if ft.type is FeatureType.FLOAT:
                x[g] = eg.nice_float(lo, hi, ft.default)
            else:
                x[g] = min(max(ft.default, lo), hi)
        x2 = x.copy()
        x[self.f], x2[self.f] = self._f_values(sa, a, sb, b)
        lit = self._single_lin(conj // k, conj % k)
        if lit is not None:
            self._corner(lit, sa, a, sb, b, x, x2)
        return x, x2

    def _corner(
        self, lit: nm.Lin, sa: _Side, a: int, sb: _Side, b: int, x: np.ndarray, x2: np.ndarray
    ) -> None:
        """Move (x, x') to the corner minimizing *lit* on each side where the readable point
        misses it (the shared coordinates' minimizer is the same for both sides)."""
        for side, r, point, on in ((sa, a, x, lit in sa.lins), (sb, b, x2, lit in sb.lins)):
            if not on:
                continue
            v = lit.const + sum(c * Fraction(float(point[col])) for col, c in lit.terms)
            if (v < 0) if lit.strict else (v <= 0):
                continue
            for col, c in lit.terms:
                if col == self.f:
                    point[col] = side.rows.lo[r, col] if c > 0 else side.rows.hi[r, col]
                else:
                    lo = max(sa.rows.lo[a, col], sb.rows.lo[b, col])
                    hi = min(sa.rows.hi[a, col], sb.rows.hi[b, col])
                    x[col] = x2[col] = lo if c > 0 else hi

    def _f_values(self, sa: _Side, a: int, sb: _Side, b: int) -> tuple[float, float]:
        f = self.f
        ft = self.model.features[f]
        rel = self.prep.relation
        if ft.type is FeatureType.CATEGORICAL:
            size = len(ft.values)
            ca = np.flatnonzero(cat_mask(sa.rows.cats, f, sa.rows.size, size)[a])
            cb = np.flatnonzero(cat_mask(sb.rows.cats, f, sb.rows.size, size)[b])
            pick_a = ft.default if int(ft.default) in ca else float(ca[0])
            pick_b = ft.default if int(ft.default) in cb else float(cb[0])
            return float(pick_a), float(pick_b)
        la, ha = float(sa.rows.lo[a, f]), float(sa.rows.hi[a, f])
        lb, hb = float(sb.rows.lo[b, f]), float(sb.rows.hi[b, f])

        def nice(lo: float, hi: float) -> float:
            if ft.type is FeatureType.FLOAT:
                return eg.nice_float(lo, hi, ft.default)
            return min(max(ft.default, lo), hi)

        if isinstance(rel, ck.Stable):  # the closest end points (the intervals are disjoint)
            return (ha, lb) if ha <= lb else (la, hb)
        # Monotone: the boxes of two leaves that share the other coordinates are disjoint on
        # f, and la < hb puts A's interval wholly below B's, so any two points are ordered.
        return nice(la, ha), nice(lb, hb)


# ---------------------------------------------------------------- all pairs

#: Query rows per enumeration chunk (pairs found in one chunk are combined across (Ci, Cj)).
ENUM_ROWS = 1 << 13

_Pairs = tuple[int, list[tuple[int, int, int]], list[tuple[int, int]]]


#: Up to this many leaf pairs the pair matrix is cheaper than the descent's per-level steps.
MATRIX_CELLS = 1 << 20
#: Live leaves from which ``--jobs`` above 1 shares the dual descent with forked processes
#: (below it the descent takes well under a second: forking and the pipe cost more).
PARALLEL_MIN_LEAVES = 1 << 16


def box_pairs(
    pc: PairChecker, want: int, matrix_cells: int | None = None, fan_out: FanOut | None = None
) -> _Pairs:
    """(number of box-violating pairs, the first *want* of them in (row a, row b) order with
    their conjunction pair, the undecided pairs in that order) -- what the pair matrix gives
    (:func:`matrix_pairs`, used up to *matrix_cells* pairs), found by the tree descent of
    :mod:`clefprove.verify.pairsweep` (its dual count shared out by *fan_out*, if given)."""
    k = len(pc.sides)
    if k == 0:
        return 0, [], []
    if pc.boxes.size**2 <= (MATRIX_CELLS if matrix_cells is None else matrix_cells):
        return matrix_pairs(pc, want)
    sweep = PairSweep(pc)
    if pc.counted:
        dual = sweep.dual_count(fan_out)
        if dual is not None:
            total, totals = dual
        else:
            totals = sweep.count()
            total = int(totals.sum())
            if pc.symmetric:  # every unordered pair was met from both of its leaves
                if total % 2:
                    raise AssertionError("internal: odd count of symmetric leaf pairs")
                total //= 2
        first: list[tuple[int, int, int]] = []
        with_pairs = np.flatnonzero(totals > 0)
        # Rows listed per descent: enough for the pairs still wanted by the rows' partner
        # counts (exact for monotone; symmetric forms list a row's partners above it only).
        reach = np.cumsum(totals[with_pairs])
        pos = 0
        while len(first) < want and pos < with_pairs.size:
            base = int(reach[pos - 1]) if pos else 0
            end = int(np.searchsorted(reach, base + want - len(first))) + 1
            end = max(end, pos + 8)
            batch = with_pairs[pos:end]
            pos = end
            pa, pb = sweep.pairs(0, 0, batch)
            if pc.symmetric:
                keep = pa < pb
                pa, pb = pa[keep], pb[keep]
            for a, b in zip(pa[: want - len(first)].tolist(), pb.tolist(), strict=False):
                first.append((a, b, 0))
        return total, first, []
    return _enumerated_pairs(pc, sweep, want)


def _enumerated_pairs(pc: PairChecker, sweep: PairSweep, want: int) -> _Pairs:
    """Several conjunctions, linear literals or no DNF: the candidate pairs of every (Ci, Cj)
    are listed (output-sensitive) per chunk of rows and combined as the matrix combines them:
    SAT if some (Ci, Cj) decides it (conjunction index: the first such), else undecided if
    some (Ci, Cj) leaves it open."""
    k = len(pc.sides)
    n = pc.boxes.size
    n_sat = 0
    first: list[tuple[int, int, int]] = []
    undecided: list[tuple[int, int]] = []
    for r0 in range(0, n, ENUM_ROWS):
        rows = np.arange(r0, min(n, r0 + ENUM_ROWS))
        keys, stat, conj = [], [], []
        for i in range(k):
            for j in range(k):
                pa, pb = sweep.pairs(i, j, rows)
                if pc.symmetric:
                    keep = pa < pb
                    pa, pb = pa[keep], pb[keep]
                if not pa.size:
                    continue
                if not pc.exact:
                    st = np.full(pa.size, _UND, dtype=np.int8)
                elif pc.sides[i].lins or pc.sides[j].lins:
                    st = pc._lin_status(i, j, pa, pb)
                else:
                    st = np.full(pa.size, _SAT, dtype=np.int8)
                keys.append(pa * n + pb)
                stat.append(st)
                conj.append(np.full(pa.size, i * k + j, dtype=np.int64))
        if not keys:
            continue
        key = np.concatenate(keys)
        st = np.concatenate(stat)
        cj = np.concatenate(conj)
        live = st != _UNSAT
        key, st, cj = key[live], st[live], cj[live]
        order = np.lexsort((cj, st != _SAT, key))  # per key: SAT first, lowest (i, j) first
        key, st, cj = key[order], st[order], cj[order]
        head = np.ones(key.size, dtype=bool)
        head[1:] = key[1:] != key[:-1]
        key, st, cj = key[head], st[head], cj[head]
        sat = st == _SAT
        n_sat += int(np.count_nonzero(sat))
        if len(first) < want:
            ks, cs = key[sat][: want - len(first)], cj[sat][: want - len(first)]
            first.extend(zip((ks // n).tolist(), (ks % n).tolist(), cs.tolist(), strict=True))
        ku = key[~sat]
        undecided.extend(zip((ku // n).tolist(), (ku % n).tolist(), strict=True))
    return n_sat, first, undecided


def matrix_pairs(pc: PairChecker, want: int) -> _Pairs:
    """:func:`box_pairs` by the leaf-pair matrix in row chunks (quadratic): the reference."""
    n = pc.actions.size
    n_sat = 0
    first: list[tuple[int, int, int]] = []
    undecided: list[tuple[int, int]] = []
    step = max(1, CHUNK_CELLS // max(1, n))
    for a0 in range(0, n, step):
        a1 = min(n, a0 + step)
        out = pc.chunk(a0, a1)
        if out is None:
            continue
        sat = out.status == _SAT
        n_sat += int(np.count_nonzero(sat))
        if len(first) < want:
            pa, pb = np.nonzero(sat)
            for ra, rb in zip(pa[: want - len(first)].tolist(), pb.tolist(), strict=False):
                first.append((ra + a0, rb, int(out.conj[ra, rb])))
        ua, ub = np.nonzero(out.status == _UND)
        undecided.extend(zip((ua + a0).tolist(), ub.tolist(), strict=True))
    return n_sat, first, undecided


# ---------------------------------------------------------------- confirmation


def _encode(model: Model, record: dict[str, Any]) -> np.ndarray:
    out = np.empty(len(model.features), dtype=np.float64)
    for i, f in enumerate(model.features):
        v = record[f.name]
        out[i] = f.values.index(v) if f.type is FeatureType.CATEGORICAL else float(v)
    return out


def confirm_pair(
    model: Model,
    evaluator: Any,
    prep: Prepared,
    leaves: tuple[int, int],
    x: np.ndarray,
    x2: np.ndarray,
) -> RelationalCounterexample | None:
    """A counterexample for (x, x') if the evaluator confirms it, else None: both decode and
    re-encode exactly, lie in the domain, differ only in f, are related on f, reach *leaves*,
    satisfy ``when``, and their decisions break the property."""
    from clefprove.verify.evidence import decode, describe_path

    inv, rel = prep.invariant, prep.relation
    records = []
    encoded = []
    decisions = []
    for xi, leaf in zip((x, x2), leaves, strict=True):
        rec = decode(model, xi)
        xe = _encode(model, rec)
        if not np.array_equal(xe, xi):
            return None
        for i, feature in enumerate(model.features):
            if not (feature.min <= xe[i] <= feature.max):
                return None
        d = evaluator.evaluate_one(xe)
        if int(d.leaf) != leaf:
            return None
        if not ck.evaluate(inv.when, xe.tolist(), d.action, d.confidence):
            return None
        records.append(rec)
        encoded.append(xe)
        decisions.append(d)
    f = rel.feature
    others = np.arange(len(model.features)) != f
    if not np.array_equal(encoded[0][others], encoded[1][others]):
        return None
    if not related(rel, float(encoded[0][f]), float(encoded[1][f])):
        return None
    if not broken(rel, prep.rank, int(decisions[0].action), int(decisions[1].action)):
        return None
    return RelationalCounterexample(
        inputs=(records[0], records[1]),
        actions=(model.actions[decisions[0].action], model.actions[decisions[1].action]),
        confidences=(float(decisions[0].confidence), float(decisions[1].confidence)),
        leaves=(int(leaves[0]), int(leaves[1])),
        paths=(describe_path(model, leaves[0]), describe_path(model, leaves[1])),
        feature=model.features[f].name,
    )


# ---------------------------------------------------------------- the whole check


#: Violating pairs a pair count keeps beyond those printed: a re-count after an edit drops
#: the pairs of the replaced leaves from the list, and can tell the first ones to print only
#: while enough are left.
KEEP_PAIRS = 1024


@frozen(eq=False)
class PairCount:
    """What the cell test found on a whole tree: the number of violating pairs, and a prefix
    of them in print order ((x leaf, x' leaf) node ids, rows sorted; the symmetric forms'
    smaller leaf first): every pair when there are no more than it holds."""

    total: int
    first: np.ndarray  # (m, 2) int64


def check_relational(
    model: Model,
    inv: ck.CheckedInvariant,
    severity: tuple[int, ...] | None,
    settings: CheckOptions | None = None,
    counterexamples: int = 3,
    boxes: LeafBoxes | None = None,
    keep: Callable[[PairCount], None] | None = None,
) -> InvariantResult:
    """The verdict on one relational invariant (see module docstring); *keep* hears the
    pair count when every pair was decided by cell tests (:attr:`PairChecker.on_boxes`),
    what a re-check after an edit starts from (:mod:`clefprove.verify.pairdelta`)."""
    t0 = time.perf_counter()
    settings = settings or CheckOptions()
    prep = prepare(model, inv, severity)
    pc = PairChecker(model, prep, boxes)
    want = max(counterexamples, 1) + EXTRA_CONFIRM
    jobs = max(1, int(settings.jobs))
    fan_out: FanOut | None = None
    if jobs > 1 and pc.boxes.size >= PARALLEL_MIN_LEAVES:
        from clefprove.verify.pool import forked_map

        def fan_out(count: Callable[[Part], Counts], parts: list[Part]) -> list[Counts]:
            return forked_map(count, parts, jobs)

    listed = max(want, KEEP_PAIRS) if keep is not None and pc.on_boxes else want
    n_sat, first, undecided = box_pairs(pc, listed, fan_out=fan_out)
    leaves = pc.boxes.leaves
    if keep is not None and pc.on_boxes:
        pairs = np.array([(leaves[a], leaves[b]) for a, b, _ in first], dtype=np.int64)
        keep(PairCount(n_sat, pairs.reshape(-1, 2)))
    first = first[:want]

    solver: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    n_unknown = 0
    if undecided:
        from clefprove.smt import pairs as smt_pairs

        limits = eg._limits(settings, inv.name)
        queries = [smt_pairs.pair_query(pc.boxes, a, b) for a, b in undecided]
        outcomes = smt_pairs.solve_pairs(model, inv.when, prep.relation, queries, limits)
        for (a, b), (verdict, w) in zip(undecided, outcomes, strict=True):
            if verdict == "sat" and w is not None:
                solver[(a, b)] = w
            elif verdict != "unsat":
                n_unknown += 1
    n_violating = n_sat + len(solver)
    candidates = sorted(
        [(a, b, ("box", c)) for a, b, c in first] + [(a, b, ("smt", 0)) for a, b in solver]
    )

    def witness(a: int, b: int, source: tuple[str, int]) -> tuple[np.ndarray, np.ndarray]:
        return pc.witness(a, b, source[1]) if source[0] == "box" else solver[(a, b)]

    return confirmed_result(
        model,
        prep,
        settings,
        counterexamples,
        t0,
        n_violating,
        n_unknown,
        [(int(leaves[a]), int(leaves[b]), witness, (a, b, src)) for a, b, src in candidates],
        paths_checked=pc.n_leaves,
        solver_paths=len(undecided),
    )


#: A candidate pair as :func:`confirmed_result` takes it: the two leaves, and what gives
#: its witness (called with the rest) when it is tried.
Candidate = tuple[int, int, Callable[..., tuple[np.ndarray, np.ndarray]], tuple[Any, ...]]


def confirmed_result(
    model: Model,
    prep: Prepared,
    settings: CheckOptions,
    counterexamples: int,
    t0: float,
    n_violating: int,
    n_unknown: int,
    candidates: list[Candidate],
    *,
    paths_checked: int,
    paths_reused: int = 0,
    solver_paths: int = 0,
) -> InvariantResult:
    """The result from the pair counts and the candidate pairs in print order: each tried in
    turn (its witness confirmed by the evaluator) until K are confirmed and at least one."""
    from clefprove.verify.evidence import evaluator_for as _evaluator

    inv = prep.invariant
    warnings: list[str] = []
    cexs: list[RelationalCounterexample] = []
    confirmed_any = False
    if n_violating:
        evaluator = _evaluator(model)
        for leaf_a, leaf_b, witness, args in candidates:
            if len(cexs) >= counterexamples and confirmed_any:
                break
            x, x2 = witness(*args)
            pair = (leaf_a, leaf_b)
            cex = confirm_pair(model, evaluator, prep, pair, x, x2)
            if cex is None:  # a bug: never print it, never claim the pair
                n_violating -= 1
                n_unknown += 1
                warnings.append(
                    f"internal: unconfirmed witness for leaf pair {pair}; pair reported as unknown"
                )
                continue
            confirmed_any = True
            if len(cexs) < counterexamples:
                cexs.append(cex)
        if not confirmed_any:  # 'violated' must rest on a confirmed pair
            n_unknown += n_violating
            n_violating = 0
    return settled_result(
        inv,
        n_violating,
        n_unknown,
        lambda: _when_vacuous(model, inv, settings),
        warnings,
        cexs,
        time.perf_counter() - t0,
        paths_checked=paths_checked,
        paths_reused=paths_reused,
        solver_paths=solver_paths,
        relation=describe(model, prep.relation),
    )


def _when_vacuous(model: Model, inv: ck.CheckedInvariant, settings: CheckOptions) -> bool:
    """True only when ``when`` is proved unsatisfiable on the whole domain (a relational
    ``when`` does not mention the decision: a question about the domain alone)."""
    from clefprove.verify.evidence import domain_boxes, when_is_vacuous

    probe = ck.CheckedInvariant(inv.name, None, inv.file, inv.line, 1, inv.when, ck.Const(False))
    prep = eg.prepare(model, probe, settings.dnf_cap)
    return when_is_vacuous(model, prep, domain_boxes(model), settings)
