"""``--jobs N`` on ensembles: the search's items go to the run's worker processes.

The oracles: exhaustive enumeration on integer domains (sound verdicts with workers), an
independent whole-ensemble Z3 encoding with the library's float arithmetic, and the
``--jobs 1`` result itself (same verdict, counts, proved share and counterexamples).  The
slice that keeps quick searches in the calling process is set to zero, so that every search
here with two jobs really goes through the pool (one pool for the whole module, as a run
shares one).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clefprove.verify import ensemble as ve
from clefprove.verify import pool as run_pool
from clefprove.verify.ensemble import check_ensemble_invariant
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.ensembles.test_soundness import _confirm, _violating_inputs
from tests.ensembles.test_z3_reference import _mentions_confidence, z3_violated
from tests.verify.gen import enumerate_inputs, invariants

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def pool():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ve, "PARALLEL_AFTER", 0.0)
        mp.setattr(ve, "ITEMS", 4)  # small ensembles: still several items
        with run_pool.run_pool(2) as p:
            yield p


def _comparable(result):
    return dataclasses.replace(result, seconds=0.0)


def _both(model, inv, k=3):
    one = check_ensemble_invariant(model, inv, CheckOptions(timeout=30, jobs=1), k)
    two = check_ensemble_invariant(model, inv, CheckOptions(timeout=30, jobs=2), k)
    return one, two


@SETTINGS
@given(st.data())
def test_two_jobs_against_enumeration_and_one_job(pool, data):
    model = data.draw(ensembles(all_int=True))
    inv = data.draw(invariants(model))
    truth = _violating_inputs(model, inv, enumerate_inputs(model))
    one, two = _both(model, inv)
    assert two.status == ("violated" if truth else "holds"), (truth[:3], two)
    if truth:
        assert 1 <= len(two.counterexamples) <= 3
        _confirm(model, inv, two)
    else:
        assert two.proved_share == 1.0
    assert _comparable(one) == _comparable(two)


@SETTINGS
@given(st.data())
def test_two_jobs_with_one_counterexample_or_none(pool, data):
    """The cut after enough violations: K = 0 and 1 stop the search earliest."""
    model = data.draw(ensembles(all_int=True, max_trees=5))
    inv = data.draw(invariants(model))
    k = data.draw(st.sampled_from([0, 1]))
    one, two = _both(model, inv, k)
    assert _comparable(one) == _comparable(two)


@pytest.mark.slow  # z3's floating-point theory: several seconds per example
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_two_jobs_against_whole_ensemble_z3_fp(pool, data):
    model = data.draw(ensembles(all_int=False, max_trees=3, max_depth=2, margin=True))
    inv = data.draw(invariants(model))
    assume(not _mentions_confidence(inv.when) and not _mentions_confidence(inv.ensure))
    truth = z3_violated(model, inv)
    assume(truth is not None)
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=30, jobs=2), 3)
    assert result.status == ("violated" if truth else "holds")


def _forest(n_estimators=30, depth=6):
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    import clefprove

    X, y = load_breast_cancer(return_X_y=True)
    clf = RandomForestClassifier(n_estimators=n_estimators, max_depth=depth, random_state=0)
    clf.fit(X, y)
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
    return clefprove.from_sklearn(clf, feats, actions=["a", "b"])


@pytest.mark.slow  # fits a forest, then a search of half a second
def test_a_cut_budget_with_two_jobs_is_unknown_with_a_share(pool):
    from clefprove.dsl.loader import parse_text

    model = _forest(n_estimators=10)
    inv = parse_text("invariant half:\n  ensure confidence >= 0.5\n", model).invariants[0]
    result = check_ensemble_invariant(model, inv, CheckOptions(timeout=0.5, jobs=2), 3)
    assert result.status == "unknown"
    assert 0.0 <= result.proved_share < 1.0
    assert pool.started


def test_a_proof_with_two_jobs_keeps_its_partition(pool):
    """The settled regions of every worker make the proof's partition, as with one job."""
    from clefprove.dsl.loader import parse_text

    model = _forest(n_estimators=3, depth=3)
    inv = parse_text("invariant sure:\n  ensure action in {a, b}\n", model).invariants[0]
    r1, p1 = ve.decide_ensemble_invariant(model, inv, CheckOptions(jobs=1), 3)
    r2, p2 = ve.decide_ensemble_invariant(model, inv, CheckOptions(jobs=2), 3)
    assert r1.status == r2.status == "holds"
    assert p1 is not None and p2 is not None
    assert p1.to_bytes() == p2.to_bytes()


def test_one_job_never_starts_a_process(monkeypatch):
    from clefprove.dsl.loader import parse_text

    def refuse(self):
        raise AssertionError("a process pool was started with --jobs 1")

    monkeypatch.setattr(run_pool.RunPool, "executor", refuse)
    monkeypatch.setattr(ve, "PARALLEL_AFTER", 0.0)
    model = _forest(n_estimators=10, depth=4)
    inv = parse_text("invariant half:\n  ensure confidence >= 0.5\n", model).invariants[0]
    import clefprove

    report = clefprove.check(model, [inv], jobs=1, timeout=0.3)
    assert report.results[0].status in ("holds", "unknown")


def test_a_quick_search_with_two_jobs_starts_no_process(monkeypatch):
    from clefprove.dsl.loader import parse_text

    def refuse(self):
        raise AssertionError("a process pool was started for a quick search")

    monkeypatch.setattr(run_pool.RunPool, "executor", refuse)
    monkeypatch.setattr(ve, "PARALLEL_AFTER", 60.0)
    model = _forest(n_estimators=3, depth=3)
    inv = parse_text("invariant sure:\n  ensure action in {a, b}\n", model).invariants[0]
    import clefprove

    assert clefprove.check(model, [inv], jobs=2).results[0].status == "holds"


def test_the_cancel_word_names_a_group_and_the_items_after_an_index():
    p = run_pool.RunPool(2)
    p._cancel = type("V", (), {"value": -1})()
    run_pool._WORKER.cancel = p._cancel
    try:
        assert not run_pool.cancelled(1, 0)
        p.cancel_after(1, 2)
        assert [run_pool.cancelled(1, i) for i in range(5)] == [False, False, False, True, True]
        assert not run_pool.cancelled(2, 0)  # a later group is not touched
        p.cancel_after(3, -1)
        assert run_pool.cancelled(1, 0) and run_pool.cancelled(2, 7) and run_pool.cancelled(3, 0)
    finally:
        run_pool._WORKER.cancel = None


def _features_and_arg(model, x):
    return len(model.features), x


def test_a_task_that_reaches_a_worker_without_the_model_is_sent_again_with_it():
    import json
    from pathlib import Path

    from clefprove.model.source import compile_source

    toy = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"
    model = compile_source(json.loads(toy.read_text()))
    with run_pool.run_pool(2) as p:
        token, _ = run_pool.shipped(model)
        p._shipments[token] = p.jobs  # as if already sent: no task carries the pickle
        first = [p.submit(_features_and_arg, model, i).result() for i in range(2)]
        assert first == [run_pool.MISSING] * 2  # fresh workers do not have it
        got = p.run_all(_features_and_arg, model, [(i,) for i in range(6)])
        assert got == [(len(model.features), i) for i in range(6)]
