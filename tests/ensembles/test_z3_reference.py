"""Ensemble verdicts against an independent whole-ensemble Z3 encoding with the library's
float arithmetic: float64 inputs, every tree's leaf selected by its path, the leaf values
added tree after tree in float32 or float64 (IEEE, round to nearest even, z3's FP theory),
and the margin decision rule (which needs no exp).  Also: a budget too small to settle an
ensemble gives unknown with a proved share below 1, never holds."""

from __future__ import annotations

import pytest
import z3
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.verify.ensemble import check_ensemble_invariant
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.ensembles.z3ref import Budget, z3_ensemble
from tests.verify.gen import invariants


def _mentions_confidence(f) -> bool:
    match f:
        case ck.Compare(expr, _):
            return any(v == ck.CONFIDENCE for v, _ in expr.terms)
        case ck.Not(a):
            return _mentions_confidence(a)
        case ck.And(args) | ck.Or(args):
            return any(_mentions_confidence(a) for a in args)
    return False


def z3_violated(model, inv) -> bool | None:
    """Whether some input breaks *inv*, decided by z3 on the whole ensemble (None: z3 gave up
    or the example's budget ran out)."""
    base, decisions, ref = z3_ensemble(model)
    budget = Budget()
    for a, decided in enumerate(decisions):
        s = z3.Solver()
        s.add(
            *base, decided, ref.formula(inv.when, a, 0.0), z3.Not(ref.formula(inv.ensure, a, 0.0))
        )
        r = budget.check(s)
        if r is None or r:
            return r
    return False


@pytest.mark.slow  # z3's floating-point theory: several seconds per example
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_against_whole_ensemble_z3_fp(data):
    model = data.draw(ensembles(all_int=False, max_trees=3, max_depth=2, margin=True))
    inv = data.draw(invariants(model))
    assume(not _mentions_confidence(inv.when) and not _mentions_confidence(inv.ensure))
    truth = z3_violated(model, inv)
    assume(truth is not None)
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
    assert result.status == ("violated" if truth else "holds")


def test_a_small_budget_gives_unknown_with_the_share_proved():
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    import clefprove
    from clefprove.dsl.loader import parse_text

    X, y = load_breast_cancer(return_X_y=True)
    clf = RandomForestClassifier(n_estimators=30, max_depth=6, random_state=0).fit(X, y)
    feats = [
        {
            "name": f"f{i}",
            "type": "float",
            "min": float(X[:, i].min()),
            "max": float(X[:, i].max()),
            "default": float(X[:, i].min()),
        }
        for i in range(X.shape[1])
    ]
    model = clefprove.from_sklearn(clf, feats, actions=["a", "b"])
    # True (the winner of two averaged shares has at least half), but only cells show it.
    inv = parse_text("invariant half:\n  ensure confidence >= 0.5\n", model).invariants[0]
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=0.5), 3)
    assert result.status == "unknown"
    assert 0.0 <= result.proved_share < 1.0
    assert any("of the input domain proved" in w for w in result.warnings)
