"""Hypothesis strategies: random models (JSON sources) and checked invariants, plus two
independent references: exhaustive enumeration and a whole-tree Z3 encoding with float64
features as IEEE floating point (exact float64 semantics, unlike the verifier's Real relaxation).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import z3
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.model.source import compile_source
from clefprove.model.types import FeatureType, Model

ACTIONS = ["allow", "challenge", "rate_limit", "block"]
CAT_VALUES = ["a", "b", "c", "d"]


@st.composite
def feature_specs(draw, all_int: bool) -> list[dict]:
    n = draw(st.integers(1, 3))
    out = []
    for i in range(n):
        kinds = (
            ["int", "bool", "categorical"] if all_int else ["int", "float", "bool", "categorical"]
        )
        kind = draw(st.sampled_from(kinds))
        name = f"f{i}"
        if kind == "int":
            lo = draw(st.integers(-3, 3))
            hi = lo + draw(st.integers(0, 5))
            out.append({"name": name, "type": "int", "min": lo, "max": hi, "default": lo})
        elif kind == "float":
            lo = draw(st.sampled_from([0.0, -1.5, 0.1, 2.0]))
            hi = lo + draw(st.sampled_from([0.0, 1.0, 0.3, 10.0]))
            out.append({"name": name, "type": "float", "min": lo, "max": hi, "default": lo})
        elif kind == "bool":
            out.append({"name": name, "type": "bool", "default": draw(st.booleans())})
        else:
            k = draw(st.integers(1, 4))
            vals = CAT_VALUES[:k]
            out.append({"name": name, "type": "categorical", "values": vals, "default": vals[0]})
    return out


def _threshold(draw, spec: dict) -> float:
    if spec["type"] == "bool":
        return draw(st.sampled_from([0.5, 0.5, 0.0, 1.0, -0.5, 1.5]))
    lo, hi = spec["min"], spec["max"]
    if spec["type"] == "int":
        base = draw(st.integers(int(lo) - 1, int(hi) + 1))
        return base + draw(st.sampled_from([0.0, 0.5, 0.25, -0.5]))
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return float(draw(st.sampled_from([lo, hi])))
    if choice == 1:
        t = draw(st.floats(lo, hi, allow_nan=False))
        return float(np.nextafter(t, draw(st.sampled_from([-np.inf, np.inf]))))
    return draw(st.floats(lo - 1, hi + 1, allow_nan=False, allow_infinity=False))


@st.composite
def trees(draw, features: list[dict], depth: int, thresholds: dict) -> dict:
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return {
            "action": draw(st.sampled_from(ACTIONS)),
            "confidence": draw(st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.8, 0.95, 1.0])),
        }
    spec = draw(st.sampled_from(features))
    node: dict = {"feature": spec["name"]}
    if spec["type"] == "categorical":
        vals = spec["values"]
        node["in"] = draw(st.lists(st.sampled_from(vals), min_size=1, unique=True))
    else:
        # Reuse thresholds across nodes now and then: adjacent/equal splits are the hard cases.
        seen = thresholds.setdefault(spec["name"], [])
        if seen and draw(st.booleans()):
            t = draw(st.sampled_from(seen))
            t = (
                float(np.nextafter(t, draw(st.sampled_from([-np.inf, np.inf]))))
                if draw(st.booleans()) and spec["type"] == "float"
                else t
            )
        else:
            t = _threshold(draw, spec)
        seen.append(t)
        node["threshold"] = t
    node["left"] = draw(trees(features, depth - 1, thresholds))
    node["right"] = draw(trees(features, depth - 1, thresholds))
    return node


@st.composite
def models(draw, all_int: bool, max_depth: int = 4) -> Model:
    features = draw(feature_specs(all_int))
    tree = draw(trees(features, max_depth, {}))
    return compile_source({"features": features, "actions": ACTIONS, "tree": tree})


def _frac(draw, model: Model, i: int) -> Fraction:
    f = model.features[i]
    if f.type is FeatureType.FLOAT:
        v = draw(st.floats(f.min - 1, f.max + 1, allow_nan=False))
        if draw(st.booleans()):
            v = float(np.nextafter(v, np.inf))
        return Fraction(v)
    base = draw(st.integers(int(f.min) - 1, int(f.max) + 1))
    return Fraction(base) + draw(st.sampled_from([Fraction(0), Fraction(1, 2)]))


@st.composite
def atoms(draw, model: Model) -> ck.Formula:
    feats = model.features
    numeric = [i for i, f in enumerate(feats) if f.type is not FeatureType.CATEGORICAL]
    cats = [i for i, f in enumerate(feats) if f.type in (FeatureType.CATEGORICAL, FeatureType.BOOL)]
    kind = draw(st.integers(0, 5))
    if kind == 0 and cats:
        i = draw(st.sampled_from(cats))
        size = 2 if feats[i].type is FeatureType.BOOL else len(feats[i].values)
        codes = draw(st.frozensets(st.integers(0, size - 1)))
        return ck.InSet(i, codes)
    if kind == 1:
        return ck.ActionIn(draw(st.frozensets(st.integers(0, len(ACTIONS) - 1))))
    if kind == 2:  # confidence comparison
        c = Fraction(draw(st.sampled_from([0.0, 0.5, 0.7, 0.8, 0.95, 1.0])))
        sign = draw(st.sampled_from([1, -1]))
        return ck.Compare(
            ck.Linear.make({ck.CONFIDENCE: Fraction(sign)}, -sign * c), draw(st.booleans())
        )
    if numeric and kind in (3, 4):  # single feature
        i = draw(st.sampled_from(numeric))
        sign = draw(st.sampled_from([1, -1, 2, Fraction(-1, 3)]))
        t = _frac(draw, model, i)
        return ck.Compare(
            ck.Linear.make({i: Fraction(sign)}, -Fraction(sign) * t), draw(st.booleans())
        )
    if numeric:  # linear, possibly with the confidence
        vars_ = draw(
            st.lists(
                st.sampled_from([*numeric, ck.CONFIDENCE]), min_size=1, max_size=3, unique=True
            )
        )
        coeffs = {
            v: Fraction(draw(st.sampled_from([1, -1, 2, 3, Fraction(1, 2), -5]))) for v in vars_
        }
        const = Fraction(draw(st.integers(-6, 6))) + draw(
            st.sampled_from([Fraction(0), Fraction(1, 2)])
        )
        return ck.Compare(ck.Linear.make(coeffs, const), draw(st.booleans()))
    return ck.Const(draw(st.booleans()))


@st.composite
def formulas(draw, model: Model, depth: int = 2) -> ck.Formula:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(atoms(model))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return ck.Not(draw(formulas(model, depth - 1)))
    args = tuple(draw(st.lists(formulas(model, depth - 1), min_size=1, max_size=3)))
    return ck.And(args) if kind == 1 else ck.Or(args)


@st.composite
def invariants(draw, model: Model) -> ck.CheckedInvariant:
    when = draw(st.one_of(st.just(ck.Const(True)), formulas(model)))
    ensure = draw(formulas(model))
    return ck.CheckedInvariant("inv", None, "t.inv", 1, 1, when, ensure)


# ---------------------------------------------------------------- references


def enumerate_inputs(model: Model) -> np.ndarray:
    """Every encoded input of an all-integral model."""
    axes = [np.arange(int(f.min), int(f.max) + 1, dtype=np.float64) for f in model.features]
    return np.array(list(itertools.product(*axes)), dtype=np.float64)


def exhaustive_violating_leaves(model: Model, inv: ck.CheckedInvariant) -> set[int]:
    from clefprove.eval.evaluator import Evaluator

    X = enumerate_inputs(model)
    res = Evaluator(model).evaluate(X)
    out = set()
    for i in range(X.shape[0]):
        xs = X[i].tolist()
        a, c = int(res.actions[i]), float(res.confidences[i])
        if ck.evaluate(inv.when, xs, a, c) and not ck.evaluate(inv.ensure, xs, a, c):
            out.add(int(res.leaves[i]))
    return out


class WholeTreeZ3:
    """Per-leaf reference with float features as IEEE float64 (z3 FP) and exact arithmetic."""

    def __init__(self, model: Model) -> None:
        self.model = model
        # The main context: z3's Python FP predicates mis-type Bool sorts in other contexts.
        self.ctx = z3.main_ctx()
        self.fp = z3.Float64(self.ctx)
        self.vars = []
        self.base = []
        for i, f in enumerate(model.features):
            if f.type is FeatureType.FLOAT:
                x = z3.FP(f"x{i}", self.fp)
                self.base += [
                    z3.Not(z3.fpIsNaN(x)),
                    z3.Not(z3.fpIsInf(x)),
                    z3.fpGEQ(x, z3.FPVal(f.min, self.fp)),
                    z3.fpLEQ(x, z3.FPVal(f.max, self.fp)),
                ]
            else:
                x = z3.Int(f"x{i}", self.ctx)
                self.base += [x >= int(f.min), x <= int(f.max)]
            self.vars.append(x)

    def real(self, i: int):
        x = self.vars[i]
        return z3.fpToReal(x) if self.model.features[i].type is FeatureType.FLOAT else z3.ToReal(x)

    def path(self, leaf: int) -> list:
        m = self.model
        parent = {}
        for n in m.iter_nodes():
            if not n.is_leaf:
                parent[n.left] = (n.index, True)
                parent[n.right] = (n.index, False)
        conds = []
        node = leaf
        while node in parent:
            p, left = parent[node]
            n = m.node(p)
            x = self.vars[n.feature]
            if n.categories or m.features[n.feature].type is FeatureType.CATEGORICAL:
                c = z3.Or([x == k for k in sorted(n.categories)] or [z3.BoolVal(False, self.ctx)])
            elif m.features[n.feature].type is FeatureType.FLOAT:
                c = z3.fpLEQ(x, z3.FPVal(n.threshold, self.fp))
            else:
                c = z3.ToReal(x) <= z3.RealVal(Fraction(n.threshold), self.ctx)
            conds.append(c if left else z3.Not(c))
            node = p
        return conds

    def formula(self, f, action: int, conf: float):
        ctx = self.ctx
        match f:
            case ck.Const(v):
                return z3.BoolVal(v, ctx)
            case ck.Compare(expr, strict):
                total = z3.RealVal(expr.const, ctx)
                for v, c in expr.terms:
                    term = z3.RealVal(Fraction(conf), ctx) if v == ck.CONFIDENCE else self.real(v)
                    total = total + z3.RealVal(c, ctx) * term
                return total < 0 if strict else total <= 0
            case ck.InSet(i, codes):
                return z3.Or(
                    [self.real(i) == z3.RealVal(c, ctx) for c in sorted(codes)]
                    or [z3.BoolVal(False, ctx)]
                )
            case ck.ActionIn(acts):
                return z3.BoolVal(action in acts, ctx)
            case ck.Not(a):
                return z3.Not(self.formula(a, action, conf))
            case ck.And(args):
                return z3.And([self.formula(a, action, conf) for a in args])
            case ck.Or(args):
                return z3.Or([self.formula(a, action, conf) for a in args])
        raise TypeError(f)

    def violating_leaves(self, inv: ck.CheckedInvariant) -> set[int] | None:
        out = set()
        for n in self.model.iter_nodes():
            if not n.is_leaf:
                continue
            s = z3.Solver(ctx=self.ctx)
            s.set("timeout", 20000)
            s.add(*self.base, *self.path(n.index))
            v = z3.And(
                self.formula(inv.when, n.action, n.confidence),
                z3.Not(self.formula(inv.ensure, n.action, n.confidence)),
            )
            s.add(v)
            r = s.check()
            if r == z3.unknown:
                return None
            if r == z3.sat:
                out.add(n.index)
        return out


# ---------------------------------------------------------------- DSL text


@st.composite
def dsl_atoms(draw, model: Model) -> str:
    feats = model.features
    numeric = [f for f in feats if f.type in (FeatureType.INT, FeatureType.FLOAT)]
    kind = draw(st.integers(0, 6))
    if kind == 0 and numeric:
        f = draw(st.sampled_from(numeric))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        c = draw(st.sampled_from([f.min, f.max, (f.min + f.max) / 2, f.min + 0.5, f.max - 1]))
        return f"{f.name} {op} {c!r}"
    if kind == 1 and len(numeric) >= 1:
        f = draw(st.sampled_from(numeric))
        g = draw(st.sampled_from(numeric))
        k = draw(st.sampled_from([1, 2, -1, 3]))
        c = draw(st.integers(-5, 10))
        return f"{f.name} + {k} * {g.name} >= {c}"
    if kind == 2:
        cats = [f for f in feats if f.type is FeatureType.CATEGORICAL]
        if cats:
            f = draw(st.sampled_from(cats))
            vals = draw(st.lists(st.sampled_from(f.values), min_size=1, unique=True))
            neg = draw(st.sampled_from(["in", "not in"]))
            return (
                f"{f.name} {neg} {{{', '.join(repr(v).replace(chr(39), chr(34)) for v in vals)}}}"
            )
    if kind == 3:
        bools = [f for f in feats if f.type is FeatureType.BOOL]
        if bools:
            f = draw(st.sampled_from(bools))
            return draw(st.sampled_from([f.name, f"not {f.name}"]))
    if kind == 4:
        op = draw(st.sampled_from(["==", "!=", "<", ">=", "<=", ">"]))
        return f"action {op} {draw(st.sampled_from(ACTIONS))}"
    if kind == 5:
        op = draw(st.sampled_from(["<", ">=", ">", "<="]))
        return f"confidence {op} {draw(st.sampled_from(['0.5', '0.7', '0.8', '0.95']))}"
    return draw(st.sampled_from(["true", "false"]))


@st.composite
def dsl_formulas(draw, model: Model, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(dsl_atoms(model))
    op = draw(st.sampled_from(["and", "or", "implies", "not"]))
    if op == "not":
        return f"not ({draw(dsl_formulas(model, depth - 1))})"
    a = draw(dsl_formulas(model, depth - 1))
    b = draw(dsl_formulas(model, depth - 1))
    return f"({a}) {op} ({b})"


@st.composite
def dsl_invariants(draw, model: Model) -> str:
    when = draw(st.one_of(st.just(""), dsl_formulas(model)))
    ensure = draw(dsl_formulas(model))
    head = "severity " + " < ".join(ACTIONS) + "\ninvariant r:\n"
    return head + (f"  when {when}\n" if when else "") + f"  ensure {ensure}\n"
