"""The best-first falsifier at the start of the ensemble search (verify/ensemble.py,
``_falsify`` and ``_dive``): the same verdicts as the search without it, every witness
confirmed, greedy dives that stay in their region, and a violation that the depth-first
order reaches last found in a few regions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl.loader import parse_text
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.geometry.boxes import Box
from clefprove.model.source import compile_source
from clefprove.verify import ensemble as ve
from clefprove.verify.ensemble import check_ensemble_invariant
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.ensembles.test_soundness import _confirm
from tests.verify.gen import invariants

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _without_falsifier(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(ve, "FALSIFY_STEPS", 0)
    mp.setattr(ve, "FALSIFY_DIVES", 0)


@SETTINGS
@given(st.data())
def test_verdicts_equal_the_search_without_the_falsifier(data) -> None:
    model = data.draw(ensembles(all_int=data.draw(st.booleans())))
    inv = data.draw(invariants(model))
    got = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
    with pytest.MonkeyPatch.context() as mp:
        _without_falsifier(mp)
        plain = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
    assert got.status == plain.status
    assert got.vacuous == plain.vacuous
    if got.status == "holds":
        assert got.proved_share == plain.proved_share == 1.0
    _confirm(model, inv, got)


@SETTINGS
@given(st.data())
def test_dives_stay_in_their_region(data) -> None:
    """A dive's point is an input of its region (bounds, whole numbers, codes) or None, and
    whatever the evaluator decides there is what ``_violates`` reads."""
    model = data.draw(ensembles(all_int=data.draw(st.booleans())))
    tab = ve.ensemble_tables(model)
    dom = Box.domain(model)
    lo, hi = dom.lo.copy(), dom.hi.copy()
    for i, f in enumerate(model.features):
        if i in dom.cats:
            continue
        a, b = sorted(
            data.draw(st.floats(float(f.min), float(f.max), allow_nan=False)) for _ in range(2)
        )
        lo[i], hi[i] = (np.ceil(a), np.floor(b)) if f.is_integral else (a, b)
        if lo[i] > hi[i]:
            lo[i] = hi[i] = float(np.floor(b)) if f.is_integral else b
    cats = {f: m.copy() for f, m in dom.cats.items()}
    reach = tab.feasible & np.all(tab.lo <= hi, axis=1) & np.all(tab.hi >= lo, axis=1)
    for f, m in cats.items():
        reach &= (tab.cats[f] & m).any(axis=1)
    g = ve.Region(lo, hi, cats, reach, 1.0)
    for action in range(len(model.actions)):
        x = ve._dive(model, tab, g, action)
        if x is None:
            continue
        assert np.all(lo <= x) and np.all(x <= hi)
        for i, f in enumerate(model.features):
            if f.is_integral or i in cats:
                assert x[i] == np.floor(x[i])
            if i in cats:
                assert cats[i][int(x[i])]


def _staircase(n_trees: int, steps: int) -> dict:
    """A margin model on x in [0, 100]: every tree adds 0.25 per step up a staircase of
    thresholds, and class 1 (``block``) needs more than all but the last step of every
    tree: only the rightmost cell of the depth-first order violates ``action == allow``."""

    def stairs(a: int, b: int) -> dict:
        if b - a == 1:
            return {"value": [0.25 * a]}
        mid = (a + b) // 2
        return {
            "feature": "x",
            "threshold": float(mid * 100 // steps) - 0.5,
            "left": stairs(a, mid),
            "right": stairs(mid, b),
        }

    need = n_trees * 0.25 * (steps - 1)
    return {
        "features": [
            {"name": "x", "type": "int", "min": 0, "max": 100, "default": 0},
            {"name": "y", "type": "float", "min": 0.0, "max": 1.0, "default": 0.0},
        ],
        "actions": ["allow", "block"],
        "ensemble": {
            "link": "logistic",
            "arithmetic": "float64",
            "rule": "margin",
            "base": [-(need - 0.125)],
        },
        "trees": [stairs(0, steps) for _ in range(n_trees)],
    }


def test_a_violation_last_in_depth_first_order_is_found_first() -> None:
    model = compile_source(_staircase(4, 16))
    inv = parse_text("invariant a:\n  ensure action == allow\n", model).invariants[0]
    got = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 1)
    with pytest.MonkeyPatch.context() as mp:
        _without_falsifier(mp)
        plain = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 1)
    assert got.status == plain.status == "violated"
    _confirm(model, inv, got)
    _confirm(model, inv, plain)
    x = got.counterexamples[0].input["x"]
    assert EnsembleEvaluator(model).evaluate_one([x, 0.0]).action == 1
    assert got.paths_checked < plain.paths_checked


def test_several_counterexamples_from_distinct_regions() -> None:
    """Asked for three, the witnesses are different inputs, and no fewer than the search
    without the falsifier gives (a dive's region is still searched)."""
    model = compile_source(_staircase(2, 8))
    for when in ("x <= 40", "x <= 70 or y >= 0.5"):
        text = f"invariant a:\n  when {when}\n  ensure action == block\n"
        inv = parse_text(text, model).invariants[0]
        got = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
        with pytest.MonkeyPatch.context() as mp:
            _without_falsifier(mp)
            plain = check_ensemble_invariant(model, inv, CheckOptions(timeout=30), 3)
        assert got.status == plain.status == "violated"
        _confirm(model, inv, got)
        inputs = [tuple(sorted(c.input.items())) for c in got.counterexamples]
        assert len(inputs) == len(set(inputs)) >= len(plain.counterexamples)
