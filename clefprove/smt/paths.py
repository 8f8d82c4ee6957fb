"""Z3 for the leaves that boxes cannot decide: the only module that imports z3.

Encoding: an ``int``, ``bool`` or ``categorical`` feature is a bounded Int, a ``float`` feature
a Real; every bound and threshold is the exact rational value of a float64.  The Real relaxation
contains every float64 input, so UNSAT proves the path safe.  A SAT model is rational: it is
rounded to float64 (nearest, then the neighbouring float64 values, then re-solving with float
features fixed one by one to float64 values) and accepted only when the rounded input lies in
the leaf's box and satisfies ``when and not ensure`` exactly.  Anything else is ``unknown``.

Leaves are solved in tree order with one solver: each split on the way down is pushed once and
shared by every leaf below it; each leaf pushes its box and its violation condition on top.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import z3

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.geometry.boxes import LeafBoxes, path_to, tables
from clefprove.geometry.floats import float_ge, float_le
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.status import SolverAnswer

_MAX_FLOAT = Fraction(1.7976931348623157e308)

#: Z3's random seed: fixed, so that runs are reproducible.
SEED = 0


@frozen
class Limits:
    timeout_ms: int = 0  # 0: none
    rlimit: int = 50_000_000
    smtlib_dir: str | None = None
    tag: str = "query"


@frozen
class Query:
    """One leaf to decide: its box (F+1 columns, the last is the confidence) and decision."""

    leaf: int
    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]
    action: int
    confidence: float


def query_from_boxes(boxes: LeafBoxes, r: int) -> Query:
    return Query(
        int(boxes.leaves[r]),
        boxes.lo[r],
        boxes.hi[r],
        {f: m[r] for f, m in boxes.cats.items()},
        int(boxes.actions[r]),
        float(boxes.lo[r, -1]),
    )


def _q(ctx: z3.Context, v: Fraction | float | int) -> z3.ArithRef:
    q = Fraction(v)
    return (
        z3.Q(q.numerator, q.denominator, ctx)
        if q.denominator != 1
        else z3.RealVal(q.numerator, ctx)
    )


class _Encoder:
    def __init__(self, model: Model, limits: Limits) -> None:
        self.model = model
        self.ctx = z3.Context()
        self.limits = limits
        self.vars: list[z3.ArithRef] = []
        for i, f in enumerate(model.features):
            if f.type is FeatureType.FLOAT:
                self.vars.append(z3.Real(f"x{i}", self.ctx))
            else:
                self.vars.append(z3.Int(f"x{i}", self.ctx))
        # Bounds recur from leaf to leaf (siblings share all but one): build each once.  Keyed
        # by the variable's Z3 id, not its feature index: smt/pairs.py swaps ``vars`` to encode
        # the second copy x'_f, which must not get the bounds built for x_f (nor the reverse).
        self.bounds: dict[tuple[int, float, bool], z3.BoolRef] = {}
        s = z3.Solver(ctx=self.ctx)
        s.set("random_seed", SEED)
        if limits.timeout_ms:
            s.set("timeout", int(limits.timeout_ms))
        if limits.rlimit:
            s.set("rlimit", int(limits.rlimit))
        for i, f in enumerate(model.features):
            s.add(self._ge(i, f.min), self._le(i, f.max))
        self.solver = s
        self.tab = tables(model)

    def _le(self, i: int, v: float) -> z3.BoolRef:
        key = (self.vars[i].get_id(), v, True)
        got = self.bounds.get(key)
        if got is None:
            got = self.bounds[key] = self._le_new(i, v)
        return got

    def _ge(self, i: int, v: float) -> z3.BoolRef:
        key = (self.vars[i].get_id(), v, False)
        got = self.bounds.get(key)
        if got is None:
            got = self.bounds[key] = self._ge_new(i, v)
        return got

    def _le_new(self, i: int, v: float) -> z3.BoolRef:
        x = self.vars[i]
        if self.model.features[i].type is FeatureType.FLOAT:
            return x <= _q(self.ctx, v)
        return x <= z3.IntVal(math.floor(v), self.ctx)

    def _ge_new(self, i: int, v: float) -> z3.BoolRef:
        x = self.vars[i]
        if self.model.features[i].type is FeatureType.FLOAT:
            return x >= _q(self.ctx, v)
        return x >= z3.IntVal(math.ceil(v), self.ctx)

    def _member(self, i: int, codes: Sequence[int]) -> z3.BoolRef:
        x = self.vars[i]
        return z3.Or(
            [x == z3.IntVal(int(c), self.ctx) for c in codes] or [z3.BoolVal(False, self.ctx)]
        )

    def split(self, node: int, went_left: bool) -> z3.BoolRef:
        rec = self.model.nodes[node]
        f = int(rec["feature"])
        if int(rec["kind"]) == NodeKind.NUMERIC:
            if went_left:
                return self._le(f, float(self.tab.left_hi[node]))
            return self._ge(f, float(self.tab.right_lo[node]))
        size = len(self.model.features[f].values)
        off = int(rec["aux"])
        row = np.asarray(self.model.membership[off : off + size]).astype(bool)
        return self._member(f, np.flatnonzero(row if went_left else ~row).tolist())

    def _float_bound(self, var: int, c: Fraction, k: Fraction, strict: bool) -> z3.BoolRef:
        """``c*x + k (<|<=) 0`` on a float feature as ``x <= b`` / ``x >= b`` with b the float64
        bound: the same float64 solutions, and no real solution between two float64 values
        (which a rational model could not be rounded back from)."""
        x = self.vars[var]
        q = -Fraction(k) / Fraction(c)
        upper = c > 0
        if abs(q) > _MAX_FLOAT:  # beyond every float64: all or nothing
            return z3.BoolVal((q > 0) == upper, self.ctx)
        if upper:
            b = float_le(q)
            if strict and Fraction(b) == q:
                b = math.nextafter(b, -math.inf)
        else:
            b = float_ge(q)
            if strict and Fraction(b) == q:
                b = math.nextafter(b, math.inf)
        if math.isinf(b):  # x <= -inf or x >= +inf: no finite input
            return z3.BoolVal(False, self.ctx)
        return x <= _q(self.ctx, b) if upper else x >= _q(self.ctx, b)

    def box(self, q: Query) -> list[z3.BoolRef]:
        out = []
        for i, f in enumerate(self.model.features):
            if f.type is FeatureType.CATEGORICAL:
                if i not in q.cats:
                    continue  # the whole vocabulary: the domain bounds say it
                codes = np.flatnonzero(q.cats[i])
                if codes.size < len(f.values):
                    out.append(self._member(i, codes.tolist()))
            else:
                out.append(self._ge(i, float(q.lo[i])))
                out.append(self._le(i, float(q.hi[i])))
        return out

    def formula(self, f: object, action: int, conf: float, neg: bool = False) -> z3.BoolRef:
        """*f* (negated when *neg*) at the decision, in negation normal form: a negated
        comparison on a float feature is the float64 bound of its complement, not a strict
        real inequality that real values between two float64 values could satisfy."""
        ctx = self.ctx
        match f:
            case ck.Const(value):
                return z3.BoolVal(value != neg, ctx)
            case ck.Compare(expr, strict):
                if neg:
                    expr = ck.Linear(tuple((v, -c) for v, c in expr.terms), -expr.const)
                    strict = not strict
                k = Fraction(expr.const)
                parts = []
                for var, c in expr.terms:
                    if var == ck.CONFIDENCE:
                        k += Fraction(c) * Fraction(conf)
                    else:
                        parts.append(_q(ctx, c) * self.vars[var])
                if not parts:
                    return z3.BoolVal(k < 0 if strict else k <= 0, ctx)
                single = [
                    (var, c)
                    for var, c in expr.terms
                    if var != ck.CONFIDENCE and self.model.features[var].type is FeatureType.FLOAT
                ]
                if len(parts) == 1 and single:
                    return self._float_bound(single[0][0], single[0][1], k, strict)
                e = z3.Sum(parts) + _q(ctx, k)
                zero = z3.RealVal(0, ctx)
                return e < zero if strict else e <= zero
            case ck.InSet(feature, codes):
                x = self.vars[feature]
                if self.model.features[feature].type is FeatureType.FLOAT:
                    if neg:  # x != c on float64 values: x <= prev(c) or x >= next(c)
                        return z3.And(
                            [
                                z3.Or(
                                    x <= _q(ctx, math.nextafter(float(c), -math.inf)),
                                    x >= _q(ctx, math.nextafter(float(c), math.inf)),
                                )
                                for c in sorted(codes)
                            ]
                            or [z3.BoolVal(True, ctx)]
                        )
                    return z3.Or(
                        [x == _q(ctx, c) for c in sorted(codes)] or [z3.BoolVal(False, ctx)]
                    )
                member = self._member(feature, sorted(codes))
                return z3.Not(member) if neg else member
            case ck.ActionIn(actions):
                return z3.BoolVal((action in actions) != neg, ctx)
            case ck.Not(arg):
                return self.formula(arg, action, conf, not neg)
            case ck.And(args) | ck.Or(args):
                parts = [self.formula(a, action, conf, neg) for a in args]
                if isinstance(f, ck.And) != neg:
                    return z3.And(parts or [z3.BoolVal(True, ctx)])
                return z3.Or(parts or [z3.BoolVal(False, ctx)])
        raise TypeError(f"not a checked formula: {f!r}")


def _violates(model: Model, when: ck.Formula, ensure: ck.Formula, q: Query, x: np.ndarray) -> bool:
    """Exact test: *x* lies in the leaf's box and satisfies ``when and not ensure``."""
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            c = int(x[i])
            if not (0 <= c < len(f.values) and (i not in q.cats or q.cats[i][c])):
                return False
        elif not (q.lo[i] <= x[i] <= q.hi[i]):
            return False
        if f.is_integral and not float(x[i]).is_integer():
            return False
    xs = x.tolist()
    return ck.evaluate(when, xs, q.action, q.confidence) and not ck.evaluate(
        ensure, xs, q.action, q.confidence
    )


def _nearest(v: Fraction, lo: float, hi: float) -> float:
    return min(max(float(v), lo), hi)


def _neighbours(v: Fraction, lo: float, hi: float) -> list[float]:
    f = float(v)
    if Fraction(f) == v:
        return [f]
    below = f if Fraction(f) < v else math.nextafter(f, -math.inf)
    above = f if Fraction(f) > v else math.nextafter(f, math.inf)
    return [min(max(c, lo), hi) for c in (below, above)]


class _Session:
    """One solver walking the leaves of one invariant in tree order."""

    def __init__(
        self,
        model: Model,
        when: ck.Formula,
        ensure: ck.Formula,
        limits: Limits,
        along_paths: bool = True,
    ):
        self.model = model
        self.along_paths = along_paths
        self.when = when
        self.ensure = ensure
        self.enc = _Encoder(model, limits)
        self.limits = limits
        self.stack: list[tuple[int, bool]] = []
        # V at one decision (action, confidence): the same for every leaf that makes it.
        self.violation: dict[tuple[int, float], z3.BoolRef] = {}

    def _violation(self, q: Query) -> z3.BoolRef:
        key = (q.action, q.confidence)
        got = self.violation.get(key)
        if got is None:
            v = ck.And((self.when, ck.Not(self.ensure)))
            got = self.violation[key] = self.enc.formula(v, q.action, q.confidence)
        return got

    def _goto(self, path: list[tuple[int, bool]]) -> None:
        s = self.enc.solver
        common = 0
        while common < min(len(path), len(self.stack)) and path[common] == self.stack[common]:
            common += 1
        for _ in range(len(self.stack) - common):
            s.pop()
            self.stack.pop()
        for step in path[common:]:
            s.push()
            s.add(self.enc.split(*step))
            self.stack.append(step)

    def _record(self, q: Query, status: str) -> None:
        """Write this query, with the answer Z3 gave, as a standalone SMT-LIB script."""
        from clefprove.smt.smtlib import path_query, query_name

        if self.model.nodes["kind"][q.leaf] != NodeKind.LEAF:
            return  # a domain-wide query (vacuity of 'when'), not a per-path one
        script = path_query(self.model, self.when, self.ensure, q.leaf, status, self.limits.tag)
        path = os.path.join(self.limits.smtlib_dir or ".", query_name(self.limits.tag, q.leaf))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)

    def _values(self, m: z3.ModelRef) -> list[Fraction]:
        return model_values(m, self.enc.vars)

    def solve(self, q: Query) -> tuple[str, np.ndarray | None]:
        s = self.enc.solver
        if self.along_paths:  # the box says the same; the path's literals share a prefix
            self._goto(path_to(self.model, q.leaf))
        s.push()
        try:
            s.add(*self.enc.box(q))
            s.add(self._violation(q))
            r = s.check()
            if self.limits.smtlib_dir:
                self._record(q, "unsat" if r == z3.unsat else "sat" if r == z3.sat else "unknown")
            if r == z3.unsat:
                return SolverAnswer.UNSAT, None
            if r != z3.sat:
                return SolverAnswer.UNKNOWN, None
            vals = self._values(s.model())
            x = self._witness(q, vals)
            if x is None:  # satisfiable over the reals; the caller searches the float64 grid
                return SolverAnswer.REAL, self._rounded(q, vals)
            return SolverAnswer.SAT, x
        finally:
            s.pop()

    def _rounded(self, q: Query, vals: list[Fraction]) -> np.ndarray:
        """The model with every float coordinate at its nearest float64 inside the box."""
        x = np.array([float(v) for v in vals], dtype=np.float64)
        for i, f in enumerate(self.model.features):
            if f.type is FeatureType.FLOAT:
                x[i] = _nearest(vals[i], float(q.lo[i]), float(q.hi[i]))
        return x

    def _witness(self, q: Query, vals: list[Fraction]) -> np.ndarray | None:
        feats = self.model.features
        floats = [i for i, f in enumerate(feats) if f.type is FeatureType.FLOAT]
        x = np.array([float(v) for v in vals], dtype=np.float64)
        for i in floats:
            x[i] = _nearest(vals[i], float(q.lo[i]), float(q.hi[i]))
        if _violates(self.model, self.when, self.ensure, q, x):
            return x
        inexact = [i for i in floats if Fraction(float(vals[i])) != vals[i]]
        if 0 < len(inexact) <= 8:
            options = [_neighbours(vals[i], float(q.lo[i]), float(q.hi[i])) for i in inexact]
            for combo in itertools.product(*options):
                y = x.copy()
                y[inexact] = combo
                if _violates(self.model, self.when, self.ensure, q, y):
                    return y
        return self._resolve(q, vals, floats)

    def _resolve(self, q: Query, vals: list[Fraction], floats: list[int]) -> np.ndarray | None:
        """Fix the float features one at a time to a float64 neighbour and re-solve."""
        ranges = [(float(q.lo[i]), float(q.hi[i])) for i in range(len(self.enc.vars))]
        fixed = fix_to_floats(self.enc.solver, self.enc.ctx, self.enc.vars, vals, floats, ranges)
        if fixed is None:
            return None
        x = np.array([float(v) for v in fixed], dtype=np.float64)
        return x if _violates(self.model, self.when, self.ensure, q, x) else None


def model_values(m: z3.ModelRef, slots: Sequence[z3.ArithRef]) -> list[Fraction]:
    """The exact values of *slots* in the solver model *m*."""
    out = []
    for x in slots:
        v = m.eval(x, model_completion=True)
        out.append(Fraction(v.as_long()) if z3.is_int_value(v) else Fraction(v.as_fraction()))
    return out


def fix_to_floats(
    solver: z3.Solver,
    ctx: z3.Context,
    slots: Sequence[z3.ArithRef],
    vals: list[Fraction],
    floats: list[int],
    ranges: Sequence[tuple[float, float]],
) -> list[Fraction] | None:
    """Fix each float slot in turn to a float64 neighbour of its rational value (within its
    range), re-solving after each; the final values, or None.  The solver is left as found."""
    pushed = 0
    try:
        for i in floats:
            for cand in _neighbours(vals[i], *ranges[i]):
                solver.push()
                pushed += 1
                solver.add(slots[i] == _q(ctx, cand))
                if solver.check() == z3.sat:
                    vals = model_values(solver.model(), slots)
                    break
                solver.pop()
                pushed -= 1
            else:
                return None
        return vals
    finally:
        for _ in range(pushed):
            solver.pop()


def solve(
    model: Model,
    when: ck.Formula,
    ensure: ck.Formula,
    queries: Sequence[Query],
    limits: Limits = Limits(),
    along_paths: bool = True,
) -> list[tuple[str, np.ndarray | None]]:
    """Decide each query: ``("unsat", None)``, ``("sat", x)`` with an exact float64 witness,
    ``("real", x)`` when the real relaxation is satisfiable but no float64 witness was found
    near its model (*x*: that model rounded into the box), or ``("unknown", None)``; queries
    are best given in tree order (prefix sharing).  Without *along_paths*, each query's box is
    asserted alone, without the split literals of its path: the solver then sees a function
    of the box only, which two models that reach the same box by different paths share."""
    session = _Session(model, when, ensure, limits, along_paths)
    return [session.solve(q) for q in queries]
