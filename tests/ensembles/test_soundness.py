"""Ensemble verdicts against exhaustive enumeration (integer domains) and dense sampling."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.source import compile_source
from clefprove.verify.ensemble import check_ensemble_invariant
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.verify.gen import enumerate_inputs, invariants

# Examples per test come from the Hypothesis profile (tests/conftest.py: dev or ci).
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _violating_inputs(model, inv, X):
    b = EnsembleEvaluator(model).evaluate(X)
    out = []
    for i in range(X.shape[0]):
        xs = X[i].tolist()
        a, c = int(b.actions[i]), float(b.confidences[i])
        if ck.evaluate(inv.when, xs, a, c) and not ck.evaluate(inv.ensure, xs, a, c):
            out.append(i)
    return out


def _encoded(model, record):
    return [
        f.values.index(record[f.name]) if f.values else float(record[f.name])
        for f in model.features
    ]


def _confirm(model, inv, result):
    ev = EnsembleEvaluator(model)
    for c in result.counterexamples:
        x = _encoded(model, c.input)
        for i, f in enumerate(model.features):
            assert f.min <= x[i] <= f.max
        d = ev.evaluate_one(x)
        assert model.actions[d.action] == c.action and d.confidence == c.confidence
        assert tuple(d.leaves) == tuple(c.leaves)
        assert ck.evaluate(inv.when, x, d.action, d.confidence)
        assert not ck.evaluate(inv.ensure, x, d.action, d.confidence)


@SETTINGS
@given(st.data())
def test_exhaustive_integer_domains(data):
    model = data.draw(ensembles(all_int=True))
    inv = data.draw(invariants(model))
    X = enumerate_inputs(model)
    truth = _violating_inputs(model, inv, X)
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
    assert result.status == ("violated" if truth else "holds"), (truth[:3], result)
    if truth:
        assert 1 <= len(result.counterexamples) <= 3
        _confirm(model, inv, result)
    else:
        assert result.proved_share == 1.0
        assert result.vacuous == (not _when_inputs(model, inv, X)), result


def _when_inputs(model, inv, X):
    """The rows of *X* that satisfy ``when`` on the ensemble's own decisions."""
    b = EnsembleEvaluator(model).evaluate(X)
    return [
        i
        for i in range(X.shape[0])
        if ck.evaluate(inv.when, X[i].tolist(), int(b.actions[i]), float(b.confidences[i]))
    ]


VACUOUS_WHEN = """
severity allow < challenge < block
invariant never_challenge: when action == challenge ensure false
invariant never_unsure: when confidence < 0.4 and k >= 0 ensure action == block
invariant sometimes: when action == allow ensure k <= 1
"""


def test_vacuity_of_a_when_about_the_decision():
    """SPEC §4: an invariant whose ``when`` no input satisfies holds vacuously, also when
    ``when`` is about the decision: this ensemble never decides ``challenge`` (a tie goes to
    ``allow``) and is never less than 0.42 confident."""
    src = {
        "name": "e", "version": "1",
        "features": [{"name": "k", "type": "int", "min": 0, "max": 3, "default": 0}],
        "actions": ["allow", "challenge", "block"],
        "ensemble": {"link": "softmax", "rule": "proba"},
        "trees": [{"feature": "k", "threshold": 1.5,
                   "left": {"value": [1.0, 1.0, 0.0]}, "right": {"value": [0.0, 0.0, 2.0]}}],
    }  # fmt: skip
    model = compile_source(src)
    program = parse_text(VACUOUS_WHEN, model)
    results = [check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
               for inv in program.invariants]  # fmt: skip
    assert [r.status for r in results] == ["holds"] * 3
    assert [r.vacuous for r in results] == [True, True, False]
    assert "holds vacuously" in " ".join(results[0].warnings)


def _dense_rows(model, rng, n=3000):
    """Inputs at every cut, its float64 neighbours, the domain ends and random points."""
    cols = []
    for i, f in enumerate(model.features):
        if f.values:
            cols.append(np.arange(len(f.values), dtype=float))
            continue
        sel = (model.nodes["kind"] == 1) & (model.nodes["feature"] == i)
        t = model.nodes["value"][sel]
        cand = np.concatenate(
            [
                t,
                np.nextafter(t, np.inf),
                np.nextafter(t, -np.inf),
                [f.min, f.max, f.default],
                rng.uniform(f.min, f.max, 8),
            ]
        )
        cand = np.clip(cand, f.min, f.max)
        if f.is_integral:
            cand = np.unique(np.concatenate([np.floor(cand), np.ceil(cand)]))
            cand = cand[(cand >= f.min) & (cand <= f.max)]
        cols.append(np.unique(cand))
    return np.column_stack([rng.choice(c, n) for c in cols])


@SETTINGS
@given(st.data())
def test_float_domains_against_dense_sampling(data):
    model = data.draw(ensembles(all_int=False))
    inv = data.draw(invariants(model))
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
    assert result.status in ("holds", "violated", "unknown")
    assert not any(w.startswith("internal") for w in result.warnings)
    if result.status == "violated":
        _confirm(model, inv, result)
    if result.status == "holds":
        X = _dense_rows(model, np.random.default_rng(0))
        assert not _violating_inputs(model, inv, X)


@SETTINGS
@given(st.data())
def test_region_bounds_contain_every_decision(data):
    """On random sub-boxes, the possible actions and confidence intervals contain the
    evaluator's decision at every input of the box (integer domains, enumerated)."""
    from clefprove.verify.ensemble import ensemble_tables, outcomes, score_bounds

    model = data.draw(ensembles(all_int=True, max_trees=6))
    X = enumerate_inputs(model)
    lo = np.array([data.draw(st.integers(int(f.min), int(f.max))) for f in model.features])
    hi = np.array(
        [
            data.draw(st.integers(int(v), int(f.max)))
            for v, f in zip(lo, model.features, strict=True)
        ]
    )
    inside = np.all((lo <= X) & (hi >= X), axis=1)
    tab = ensemble_tables(model)
    reach = tab.feasible & np.all(tab.lo <= hi, axis=1) & np.all(tab.hi >= lo, axis=1)
    for f in tab.cats:
        mask = (np.arange(tab.cats[f].shape[1]) >= lo[f]) & (
            np.arange(tab.cats[f].shape[1]) <= hi[f]
        )
        reach &= (tab.cats[f] & mask).any(axis=1)
    s_lo, s_hi, _ = score_bounds(model, tab, reach)
    oc = outcomes(model, s_lo, s_hi)
    b = EnsembleEvaluator(model).evaluate(X[inside])
    assert np.all(b.scores >= s_lo) and np.all(b.scores <= s_hi)
    for a, c in zip(b.actions.tolist(), b.confidences.tolist(), strict=True):
        assert a in oc.actions.tolist()
        k = oc.actions.tolist().index(a)
        assert oc.conf_lo[k] <= c <= oc.conf_hi[k]
