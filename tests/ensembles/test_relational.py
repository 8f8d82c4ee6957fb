"""Relational invariants on ensembles against exhaustive pair enumeration (integer domains),
targeted float cases, budgets, and the check() / CLI shape."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.checked import related
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.types import FeatureType
from clefprove.verify.ensemble_rel import check_ensemble_relational
from clefprove.verify.options import CheckOptions
from clefprove.verify.relational import broken
from clefprove.verify.verdicts import RelationalCounterexample
from tests.ensembles.gen import ensembles
from tests.ensembles.z3ref import Budget, z3_ensemble
from tests.verify.gen import enumerate_inputs

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bound(draw, model, i: int) -> ck.Formula:
    f = model.features[i]
    if f.type is FeatureType.FLOAT:
        c = Fraction(draw(st.floats(f.min - 0.5, f.max + 0.5, allow_nan=False)))
    else:
        c = Fraction(draw(st.integers(int(f.min) - 1, int(f.max) + 1)))
    sign = draw(st.sampled_from([1, -1]))
    return ck.Compare(ck.Linear.make({i: Fraction(sign)}, -sign * c), draw(st.booleans()))


@st.composite
def box_when(draw, model, depth: int = 2) -> ck.Formula:
    """'when' made of single-feature literals (box-shaped: decided exactly on regions)."""
    feats = model.features
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        i = draw(st.integers(0, len(feats) - 1))
        if feats[i].type is FeatureType.CATEGORICAL:
            codes = draw(st.frozensets(st.integers(0, len(feats[i].values) - 1)))
            return ck.InSet(i, codes)
        return _bound(draw, model, i)
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return ck.Not(draw(box_when(model, depth - 1)))
    args = tuple(draw(st.lists(box_when(model, depth - 1), min_size=2, max_size=3)))
    return ck.And(args) if kind == 1 else ck.Or(args)


@st.composite
def lin_when(draw, model) -> ck.Formula:
    """A multi-feature linear 'when' (not box-shaped), possibly combined with a bound."""
    numeric = [i for i, f in enumerate(model.features) if f.type is not FeatureType.CATEGORICAL]
    if len(numeric) < 2:
        return draw(box_when(model))
    vs = draw(st.lists(st.sampled_from(numeric), min_size=2, max_size=3, unique=True))
    coeffs = {v: Fraction(draw(st.sampled_from([1, -1, 2, -3, Fraction(1, 2)]))) for v in vs}
    const = Fraction(draw(st.integers(-8, 8)), draw(st.sampled_from([1, 2])))
    lin = ck.Compare(ck.Linear.make(coeffs, const), draw(st.booleans()))
    return draw(st.sampled_from([lin, ck.And((lin, draw(box_when(model, 1))))]))


@st.composite
def rel_invariants(draw, model, lin: bool = False):
    feats = model.features
    kind = draw(st.sampled_from(["monotone", "stable", "independent"]))
    ordered = [i for i, f in enumerate(feats) if f.type is not FeatureType.CATEGORICAL]
    if kind != "independent" and not ordered:
        kind = "independent"
    f = draw(st.sampled_from(ordered if kind != "independent" else list(range(len(feats)))))
    if kind == "monotone":
        rel: ck.Relational = ck.Monotone(f)
    elif kind == "stable":
        delta = draw(st.sampled_from([0, 1, 2, 3, Fraction(1, 2), Fraction(5, 2), 100]))
        rel = ck.Stable(f, Fraction(delta))
    else:
        rel = ck.Independent(f)
    when = draw(st.one_of(st.just(ck.Const(True)), lin_when(model) if lin else box_when(model)))
    severity = tuple(draw(st.permutations(range(len(model.actions)))))
    return ck.CheckedInvariant("rel", None, "t.inv", 1, 1, when, rel), severity


def _rank(model, severity):
    rank = np.empty(len(model.actions), dtype=np.int64)
    rank[list(severity)] = np.arange(len(severity))
    return rank


def truth_pairs(model, inv, severity) -> list[tuple[list[float], list[float]]]:
    """Every violating pair of an all-integral model, by enumeration."""
    X = enumerate_inputs(model)
    b = EnsembleEvaluator(model).evaluate(X)
    rel = inv.ensure
    f = rel.feature
    rank = _rank(model, severity)
    ok = [ck.evaluate(inv.when, X[i].tolist(), 0, 0.0) for i in range(X.shape[0])]
    groups: dict[tuple, list[int]] = {}
    others = [j for j in range(X.shape[1]) if j != f]
    for i in range(X.shape[0]):
        if ok[i]:
            groups.setdefault(tuple(X[i, others].tolist()), []).append(i)
    out = []
    for members in groups.values():
        for i in members:
            for j in members:
                if i == j:
                    continue
                if related(rel, float(X[i, f]), float(X[j, f])) and broken(
                    rel, rank, int(b.actions[i]), int(b.actions[j])
                ):
                    out.append((X[i].tolist(), X[j].tolist()))
    return out


def _encoded(model, record):
    return [
        f.values.index(record[f.name]) if f.values else float(record[f.name])
        for f in model.features
    ]


def confirm_pairs(model, inv, severity, result) -> None:
    """Every counterexample pair is confirmed by the evaluator, independently of the verifier."""
    ev = EnsembleEvaluator(model)
    rel = inv.ensure
    rank = _rank(model, severity)
    for c in result.counterexamples:
        assert isinstance(c, RelationalCounterexample)
        x, x2 = (_encoded(model, r) for r in c.inputs)
        for xi in (x, x2):
            for i, f in enumerate(model.features):
                assert f.min <= xi[i] <= f.max
        assert [v for i, v in enumerate(x) if i != rel.feature] == [
            v for i, v in enumerate(x2) if i != rel.feature
        ]
        assert related(rel, x[rel.feature], x2[rel.feature])
        d, d2 = ev.evaluate_one(x), ev.evaluate_one(x2)
        assert (model.actions[d.action], model.actions[d2.action]) == c.actions
        assert ck.evaluate(inv.when, x, d.action, d.confidence)
        assert ck.evaluate(inv.when, x2, d2.action, d2.confidence)
        assert broken(rel, rank, d.action, d2.action)


@SETTINGS
@given(st.data())
def test_exhaustive_pairs_box_when(data):
    """Box-shaped 'when': the verdict is exact (never unknown) and matches enumeration."""
    model = data.draw(ensembles(all_int=True))
    inv, severity = data.draw(rel_invariants(model))
    truth = truth_pairs(model, inv, severity)
    result = check_ensemble_relational(model, inv, severity, CheckOptions(timeout=60), 3)
    assert result.status == ("violated" if truth else "holds"), (truth[:3], result)
    if truth:
        assert 1 <= len(result.counterexamples) <= 3
        assert result.violating_paths >= 1
        confirm_pairs(model, inv, severity, result)
    else:
        assert result.proved_share == 1.0 and not result.counterexamples


@SETTINGS
@given(st.data())
def test_exhaustive_pairs_linear_when_sound(data):
    """Multi-feature linear 'when': never a wrong verdict (unknown is allowed)."""
    model = data.draw(ensembles(all_int=True))
    inv, severity = data.draw(rel_invariants(model, lin=True))
    truth = truth_pairs(model, inv, severity)
    result = check_ensemble_relational(model, inv, severity, CheckOptions(timeout=60), 2)
    if result.status == "holds":
        assert not truth
    elif result.status == "violated":
        assert truth
        confirm_pairs(model, inv, severity, result)
    else:
        assert result.proved_share is not None and 0.0 <= result.proved_share <= 1.0


# ---------------------------------------------------------------- an independent Z3 reference


def z3_pair_violated(model, inv, severity) -> bool | None:
    """Whether some pair breaks the relational *inv*: two copies of the whole ensemble that
    share every feature but f, decided by z3 (None: z3 gave up or the example's budget ran
    out)."""
    import z3

    base, decisions, ref = z3_ensemble(model)
    rel = inv.ensure
    f = rel.feature
    x = ref.vars[f]
    y = z3.FP("y_f", x.sort()) if model.features[f].type is FeatureType.FLOAT else z3.Int("y_f")
    other = [z3.substitute(b, (x, y)) for b in base if _mentions(b, x)]
    xr, yr = ref.real(f), z3.substitute(ref.real(f), (x, y))
    if isinstance(rel, ck.Monotone):
        relc = xr < yr
    elif isinstance(rel, ck.Stable):
        d = z3.RealVal(rel.delta)
        relc = z3.And(xr - yr <= d, yr - xr <= d)
    else:
        relc = xr != yr
    when_x = ref.formula(inv.when, 0, 0.0)
    when_y = z3.substitute(when_x, (x, y))
    rank = _rank(model, severity)
    budget = Budget()
    for a, da in enumerate(decisions):
        for b, db in enumerate(decisions):
            if not broken(rel, rank, a, b):
                continue
            s = z3.Solver()
            s.add(*base, *other, relc, when_x, when_y, da, z3.substitute(db, (x, y)))
            r = budget.check(s)
            if r is None or r:
                return r
    return False


def _mentions(expr, var) -> bool:
    import z3

    if z3.eq(expr, var):
        return True
    return any(_mentions(c, var) for c in expr.children())


@pytest.mark.slow  # z3's floating-point theory: seconds per example
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_against_two_copy_whole_ensemble_z3_fp(data):
    model = data.draw(ensembles(all_int=False, max_trees=3, max_depth=2, margin=True))
    inv, severity = data.draw(rel_invariants(model))
    truth = z3_pair_violated(model, inv, severity)
    assume(truth is not None)
    result = check_ensemble_relational(model, inv, severity, CheckOptions(timeout=30), 3)
    assert result.status == ("violated" if truth else "holds"), result
    confirm_pairs(model, inv, severity, result)
