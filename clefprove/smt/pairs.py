"""Z3 for leaf pairs of relational invariants that boxes cannot decide.

Two-copy encoding: the features other than f are shared by x and x'; f has two variables,
``x_f`` (in leaf A's box) and ``x'_f`` (in leaf B's box).  ``when`` is asserted on both copies,
plus the relation on f (``x_f < x'_f``; ``|x_f - x'_f| <= delta``; nothing for independent,
whose leaf pairs already have different actions).  As for paths, ``float`` features are Reals
(a relaxation that contains every float64 input, so UNSAT proves the pair safe) and the others
bounded Ints; a SAT model is rounded to float64 and accepted only when the rounded pair lies in
the boxes, satisfies ``when`` twice and the relation exactly.  Anything else is ``unknown``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import z3

from clefprove.dsl import checked as ck
from clefprove.dsl.checked import related
from clefprove.frozen import frozen
from clefprove.geometry.boxes import LeafBoxes
from clefprove.model.types import FeatureType, Model
from clefprove.smt.paths import (
    Limits,
    Query,
    _Encoder,
    _nearest,
    _neighbours,
    _q,
    fix_to_floats,
    model_values,
    query_from_boxes,
)
from clefprove.status import SolverAnswer


@frozen
class PairQuery:
    """Leaf A (the box of x) and leaf B (the box of x')."""

    a: Query
    b: Query


def pair_query(boxes: LeafBoxes, ra: int, rb: int) -> PairQuery:
    return PairQuery(query_from_boxes(boxes, ra), query_from_boxes(boxes, rb))


def _in_box(model: Model, q: Query, x: np.ndarray) -> bool:
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            c = int(x[i])
            if not (c == x[i] and 0 <= c < len(f.values) and (i not in q.cats or q.cats[i][c])):
                return False
        elif not (q.lo[i] <= x[i] <= q.hi[i]):
            return False
        if f.is_integral and not float(x[i]).is_integer():
            return False
    return True


def pair_holds(
    model: Model, when: ck.Formula, rel: ck.Relational, pq: PairQuery, x: np.ndarray, x2: np.ndarray
) -> bool:
    """Exact test: x in A's box, x' in B's box, ``when`` on both, and the relation on f."""
    f = rel.feature
    if not (_in_box(model, pq.a, x) and _in_box(model, pq.b, x2)):
        return False
    others = np.arange(x.shape[0]) != f
    if not np.array_equal(x[others], x2[others]):
        return False
    if not related(rel, float(x[f]), float(x2[f])):
        return False
    # 'when' cannot mention the decision (checked by the DSL and the verifier).
    return ck.evaluate(when, x.tolist(), -1, 0.0) and ck.evaluate(when, x2.tolist(), -1, 0.0)


class _PairSession:
    def __init__(self, model: Model, when: ck.Formula, rel: ck.Relational, limits: Limits):
        self.model = model
        self.when = when
        self.rel = rel
        self.enc = _Encoder(model, limits)
        f = rel.feature
        ft = model.features[f]
        ctx = self.enc.ctx
        self.x2f = z3.Real("x2f", ctx) if ft.type is FeatureType.FLOAT else z3.Int("x2f", ctx)
        self.vars1 = list(self.enc.vars)
        self.vars2 = list(self.enc.vars)
        self.vars2[f] = self.x2f
        s = self.enc.solver
        with self._on(self.vars2):
            s.add(self.enc._ge(f, ft.min), self.enc._le(f, ft.max))
        x1f = self.vars1[f]
        match rel:
            case ck.Monotone():
                s.add(x1f < self.x2f)
            case ck.Stable(_, delta):
                d = _q(ctx, delta)
                s.add(x1f - self.x2f <= d, self.x2f - x1f <= d)
            case ck.Independent():
                s.add(x1f != self.x2f)
        # 'when' never mentions the decision: action/confidence are placeholders.
        s.add(self.enc.formula(when, -1, 0.0))
        with self._on(self.vars2):
            s.add(self.enc.formula(when, -1, 0.0))

    class _Swap:
        def __init__(self, enc: _Encoder, vars_: list[z3.ArithRef]) -> None:
            self.enc, self.vars, self.saved = enc, vars_, enc.vars

        def __enter__(self) -> None:
            self.enc.vars = self.vars

        def __exit__(self, *exc: object) -> None:
            self.enc.vars = self.saved

    def _on(self, vars_: list[z3.ArithRef]) -> _PairSession._Swap:
        return _PairSession._Swap(self.enc, vars_)

    def _values(self, m: z3.ModelRef) -> list[Fraction]:
        return model_values(m, [*self.vars1, self.x2f])

    def solve(self, pq: PairQuery) -> tuple[str, tuple[np.ndarray, np.ndarray] | None]:
        s = self.enc.solver
        s.push()
        try:
            s.add(*self.enc.box(pq.a))
            with self._on(self.vars2):
                s.add(*self.enc.box(pq.b))
            r = s.check()
            if r == z3.unsat:
                return SolverAnswer.UNSAT, None
            if r != z3.sat:
                return SolverAnswer.UNKNOWN, None
            w = self._witness(pq, self._values(s.model()))
            return (SolverAnswer.SAT, w) if w is not None else (SolverAnswer.UNKNOWN, None)
        finally:
            s.pop()

    def _ranges(self, pq: PairQuery) -> list[tuple[float, float]]:
        """Per value slot (features, then x'_f): the float64 range a rounded value must keep."""
        f = self.rel.feature
        out = []
        for i in range(len(self.model.features)):
            if i == f:
                out.append((float(pq.a.lo[i]), float(pq.a.hi[i])))
            else:
                out.append(
                    (
                        max(float(pq.a.lo[i]), float(pq.b.lo[i])),
                        min(float(pq.a.hi[i]), float(pq.b.hi[i])),
                    )
                )
        out.append((float(pq.b.lo[f]), float(pq.b.hi[f])))
        return out

    def _split(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = v[:-1].copy()
        x2 = x.copy()
        x2[self.rel.feature] = v[-1]
        return x, x2

    def _ok(self, pq: PairQuery, v: np.ndarray) -> bool:
        x, x2 = self._split(v)
        return pair_holds(self.model, self.when, self.rel, pq, x, x2)

    def _witness(self, pq: PairQuery, vals: list[Fraction]) -> tuple[np.ndarray, np.ndarray] | None:
        feats = self.model.features
        f = self.rel.feature
        floats = [i for i, ft in enumerate(feats) if ft.type is FeatureType.FLOAT]
        if feats[f].type is FeatureType.FLOAT:
            floats.append(len(feats))
        ranges = self._ranges(pq)
        v = np.array([float(q) for q in vals], dtype=np.float64)
        for i in floats:
            v[i] = _nearest(vals[i], *ranges[i])
        if self._ok(pq, v):
            return self._split(v)
        inexact = [i for i in floats if Fraction(float(vals[i])) != vals[i]]
        if 0 < len(inexact) <= 8:
            options = [_neighbours(vals[i], *ranges[i]) for i in inexact]
            for combo in itertools.product(*options):
                y = v.copy()
                y[inexact] = combo
                if self._ok(pq, y):
                    return self._split(y)
        return self._resolve(pq, vals, floats, ranges)

    def _resolve(
        self,
        pq: PairQuery,
        vals: list[Fraction],
        floats: list[int],
        ranges: list[tuple[float, float]],
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Fix the float values one at a time to a float64 neighbour and re-solve."""
        slots = [*self.vars1, self.x2f]
        fixed = fix_to_floats(self.enc.solver, self.enc.ctx, slots, vals, floats, ranges)
        if fixed is None:
            return None
        v = np.array([float(q) for q in fixed], dtype=np.float64)
        return self._split(v) if self._ok(pq, v) else None


def solve_pairs(
    model: Model,
    when: ck.Formula,
    rel: ck.Relational,
    queries: Sequence[PairQuery],
    limits: Limits | None = None,
) -> list[tuple[str, tuple[np.ndarray, np.ndarray] | None]]:
    """Decide each leaf pair: ``("unsat", None)``, ``("sat", (x, x'))`` with exact float64
    inputs (in the boxes, ``when`` on both, related on f), or ``("unknown", None)``."""
    session = _PairSession(model, when, rel, limits or Limits())
    return [session.solve(q) for q in queries]
