"""The search's settled-roots shortcut (docs/performance.md, "Issue 13, stop 23"): a root's
reachable leaves by descending the trees with its box (``ensemble._descend``) against the leaf
tables' ``feasible & all(lo <= hi) & all(hi >= lo)``, and whole searches with the shortcut
against searches without it (the same counts, settled regions, probes and witnesses), on random
ensembles, random invariants and box questions that hold; where a root is not settled, the
search from the tables takes the shortcut's reach and root bounds, which these whole searches
compare too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.geometry.boxes import Box
from clefprove.model.types import NodeKind
from clefprove.verify import engine as eg
from clefprove.verify import ensemble as ve
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.verify.gen import invariants

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _random_box(rng: np.random.Generator, model: Any, tab: Any) -> tuple[np.ndarray, np.ndarray]:
    dom = Box.domain(model)
    a = rng.uniform(dom.lo, dom.hi)
    b = rng.uniform(dom.lo, dom.hi)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    for i, f in enumerate(model.features):
        if f.is_integral:
            lo[i], hi[i] = np.ceil(lo[i]), np.floor(hi[i])
            if lo[i] > hi[i]:
                lo[i] = hi[i] = np.floor(a[i])
        cuts = tab.cuts[i]
        if cuts.size and rng.random() < 0.4:  # at a cut, or just past one
            c = float(rng.choice(cuts))
            if rng.random() < 0.5:
                hi[i] = max(lo[i], c)
            else:
                lo[i] = min(hi[i], np.nextafter(c, np.inf) if not f.is_integral else c + 1)
        if rng.random() < 0.2:
            lo[i] = hi[i]  # a point
    return lo, hi


@SETTINGS
@given(st.data())
def test_descent_reach_is_the_tables_reach(data) -> None:
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4))
    if np.any(model.nodes["kind"] == NodeKind.CATEGORICAL):
        return  # (the shortcut is for numeric splits only)
    tab = ve._tables(model)
    walk = ve.walk_arrays(model)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for _ in range(30):
        lo, hi = _random_box(rng, model, tab)
        if np.any(lo > hi):
            continue
        want = tab.feasible & np.all(tab.lo <= hi, axis=1) & np.all(tab.hi >= lo, axis=1)
        got = ve._descend_leaves(model, walk, lo, hi)
        if got is not None:  # (None: the box meets more than half the nodes)
            assert np.array_equal(got.reach, want)
            # the reached leaves' boxes are the tables' boxes cut to the box
            rows, blo, bhi = got.leaf_boxes()
            assert np.array_equal(rows, np.flatnonzero(want))
            assert np.array_equal(blo, np.maximum(tab.lo[rows], lo))
            assert np.array_equal(bhi, np.minimum(tab.hi[rows], hi))


def _search(model: Any, prep: Any, quick: bool) -> ve.SearchResult:
    real = ve._settled_roots
    if not quick:
        ve._settled_roots = lambda *a: (None, [])  # type: ignore[assignment]
    try:
        return ve.search(model, prep, CheckOptions(timeout=5), 1, 5.0, record=True)
    finally:
        ve._settled_roots = real


def _same(a: ve.SearchResult, b: ve.SearchResult) -> None:
    assert (a.regions, a.n_violating, a.n_unknown, a.unsettled, a.timed_out) == (
        b.regions, b.n_violating, b.n_unknown, b.unsettled, b.timed_out,
    )  # fmt: skip
    assert (a.solver_paths, a.reused, a.seeded) == (b.solver_paths, b.reused, b.seeded)
    assert len(a.settled) == len(b.settled)
    for x, y in zip(a.settled, b.settled, strict=True):
        assert x[0] == y[0] and np.array_equal(x[1], y[1]) and np.array_equal(x[2], y[2])
        assert x[3].keys() == y[3].keys()
        assert all(np.array_equal(x[3][f], y[3][f]) for f in x[3])
    assert len(a.probes) == len(b.probes)
    assert all(np.array_equal(p, q) for p, q in zip(a.probes, b.probes, strict=True))
    assert len(a.violating) == len(b.violating)
    for (x, act, conf, _), (y, act2, conf2, _) in zip(a.violating, b.violating, strict=True):
        assert np.array_equal(x, y) and act == act2 and (conf == conf2 or conf != conf)


@SETTINGS
@given(st.data())
def test_search_with_the_shortcut_is_the_search_without(data) -> None:
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4))
    inv = data.draw(invariants(model))
    if inv.is_relational:
        return
    prep = eg.prepare(model, inv)
    _same(_search(model, prep, True), _search(model, prep, False))


def _box_invariant(model: Any, lo: np.ndarray, hi: np.ndarray, action: int) -> Any:
    """``when lo <= x <= hi ensure action == a`` as the checker builds it."""
    from fractions import Fraction

    lits: list[ck.Formula] = []
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        if model.features[i].type.value == "categorical":
            continue
        lits.append(ck.Compare(ck.Linear(((i, Fraction(-1)),), Fraction(a)), False))
        lits.append(ck.Compare(ck.Linear(((i, Fraction(1)),), -Fraction(b)), False))
    when = ck.And(tuple(lits)) if len(lits) > 1 else (lits[0] if lits else ck.Const(True))
    return ck.CheckedInvariant("box", None, "t.inv", 1, 1, when, ck.ActionIn(frozenset({action})))


@SETTINGS
@given(st.data())
def test_box_questions_with_the_shortcut_are_the_search_without(data) -> None:
    """Small boxes around a point, ensured to keep the point's decision: the questions the
    shortcut is for (most hold at the root)."""
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4))
    tab = ve._tables(model)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ev = EnsembleEvaluator(model)
    for _ in range(5):
        lo, hi = _random_box(rng, model, tab)
        if np.any(lo > hi):
            continue
        x = lo.copy()
        for i, f in enumerate(model.features):
            if f.type.value == "categorical":
                x[i] = 0.0
        action = ev.evaluate_one(x).action
        # the point's own decision (holds on small boxes) and another one (violated at x:
        # the search from the tables then takes the shortcut's reach and root bounds)
        for a in (action, (action + 1) % len(model.actions)):
            prep = eg.prepare(model, _box_invariant(model, lo, hi, a))
            _same(_search(model, prep, True), _search(model, prep, False))


def test_bench_style_question_takes_the_shortcut() -> None:
    """A holding box question on an XGBoost-like ensemble settles its root without tables."""
    pytest.importorskip("xgboost")
    import xgboost as xgb

    from clefprove.model.importers import import_model

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (400, 3))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    clf = xgb.XGBClassifier(n_estimators=10, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.json"
        clf.get_booster().save_model(path)
        spec = Path(tmp) / "spec.json"
        feats = [
            {"name": f"f{j}", "type": "float", "min": 0.0, "max": 1.0, "default": 0.0}
            for j in range(3)
        ]
        spec.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
        model = import_model("xgboost", path, spec)
    lo, hi = np.array([0.9, 0.9, 0.4]), np.array([0.95, 0.95, 0.45])
    inv = _box_invariant(model, lo, hi, 1)
    prep = eg.prepare(model, inv)
    boxes = ve._root_boxes(model, prep.conjuncts, Box.domain(model), {})
    quick, _ = ve._settled_roots(model, boxes, True)
    assert quick is not None and quick.regions == 1
    fast = _search(model, prep, True)
    assert ("verify.ensemble_tables",) not in model.derived._values  # no tables were built
    _same(fast, _search(model, prep, False))


_EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 1e300, -1e300, np.inf, -np.inf, 5e-324]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.sampled_from(_EDGE) | st.floats(-3, 3)),
        max_size=12,
    ),
    st.lists(st.sampled_from([0.0, -0.0, -1.0, -2.5, -1e300]), min_size=4, max_size=4),
    st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, 1e300]), min_size=4, max_size=4),
)
def test_narrow_bounds_is_narrow_bit_for_bit(lits, dom_lo, dom_hi) -> None:
    from clefprove.verify import normal as nm

    bounds = tuple(nm.Bound(col, upper, float(b)) for col, upper, b in lits)
    rows = nm.Rows(np.array([[*dom_lo, 0.0]]), np.array([[*dom_hi, 1.0]]), {}, np.array([-1]))
    nrows, ok, _ = nm.narrow(bounds, rows)
    got = ve._narrow_bounds(bounds, list(dom_lo), list(dom_hi))
    assert (got is not None) == bool(ok[0])
    if got is not None:
        assert got[0].tobytes() == nrows.lo[0, :4].tobytes()  # (the sign of a zero too)
        assert got[1].tobytes() == nrows.hi[0, :4].tobytes()
