"""Verdicts against independent references on random models and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.eval.evaluator import Evaluator
from clefprove.geometry.boxes import leaf_boxes
from clefprove.model.describe import region_conditions
from clefprove.verify import engine as eg
from clefprove.verify.api import check_invariant
from clefprove.verify.evidence import describe_region
from clefprove.verify.options import CheckOptions
from tests.verify.gen import WholeTreeZ3, exhaustive_violating_leaves, invariants, models

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _leaf_verdicts(model, inv, shortcuts=True):
    prep = eg.prepare(model, inv)
    pv = eg.decide(model, prep, leaf_boxes(model), CheckOptions(shortcuts=shortcuts))
    leaves = pv.boxes.leaves
    return (
        {int(leaves[r]) for r in pv.violating},
        {int(leaves[r]) for r in pv.unknown},
    )


def _check_counterexamples(model, inv, result):
    ev = Evaluator(model)
    assert len(result.counterexamples) == min(3, result.violating_paths)
    assert len({c.leaf for c in result.counterexamples}) == len(result.counterexamples)
    for c in result.counterexamples:
        x = [
            f.values.index(c.input[f.name]) if f.values else float(c.input[f.name])
            for f in model.features
        ]
        d = ev.evaluate_one(x)
        assert d.leaf == c.leaf and model.actions[d.action] == c.action
        assert ck.evaluate(inv.when, x, d.action, d.confidence)
        assert not ck.evaluate(inv.ensure, x, d.action, d.confidence)
        # the region of the leaf (its path by descent) is that of the path the input walks
        assert describe_region(model, c.leaf) == tuple(
            region_conditions(model, ev.path(np.array(x, dtype=np.float64)))
        )


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_exhaustive_all_integer(data):
    model = data.draw(models(all_int=True))
    inv = data.draw(invariants(model))
    truth = exhaustive_violating_leaves(model, inv)
    for shortcuts in (True, False):
        violating, unknown = _leaf_verdicts(model, inv, shortcuts)
        assert not unknown  # integer domains: the solver is exact
        assert violating == truth
    result = check_invariant(model, inv)
    assert result.status == ("violated" if truth else "holds")
    assert result.violating_paths == len(truth)
    assert result.paths_checked == model.n_leaves
    assert not result.warnings or result.vacuous
    _check_counterexamples(model, inv, result)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_whole_tree_z3_mixed(data):
    model = data.draw(models(all_int=False, max_depth=3))
    inv = data.draw(invariants(model))
    ref = WholeTreeZ3(model).violating_leaves(inv)
    if ref is None:
        return
    for shortcuts in (True, False):
        violating, unknown = _leaf_verdicts(model, inv, shortcuts)
        # Sound: never miss a violation; exact: never claim one that is not there.
        assert violating <= ref
        assert ref <= violating | unknown
        if shortcuts:
            assert not unknown
    result = check_invariant(model, inv)
    assert result.status == ("violated" if ref else "holds")
    _check_counterexamples(model, inv, result)
    assert not any(w.startswith("internal") for w in result.warnings)


@pytest.mark.slow
def test_leaf_boxes_cover_every_input_exactly():
    """Every enumerated input lies in the box of exactly the leaf the evaluator picks."""
    from hypothesis import find

    from tests.verify.gen import enumerate_inputs

    model = find(models(all_int=True), lambda m: m.n_leaves >= 6)
    boxes = leaf_boxes(model)
    X = enumerate_inputs(model)
    res = Evaluator(model).evaluate(X)
    for i in range(X.shape[0]):
        inside = np.all(boxes.lo[:, :-1] <= X[i], axis=1) & np.all(X[i] <= boxes.hi[:, :-1], axis=1)
        for f, m in boxes.cats.items():
            inside &= m[:, int(X[i, f])]
        assert set(boxes.leaves[inside].tolist()) == {int(res.leaves[i])}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_through_the_dsl(data):
    from clefprove.dsl.loader import parse_text
    from clefprove.errors import ClefproveError
    from tests.verify.gen import dsl_invariants

    model = data.draw(models(all_int=data.draw(st.booleans()), max_depth=3))
    text = data.draw(dsl_invariants(model))
    try:
        inv = parse_text(text, model, "r.inv").invariants[0]
    except ClefproveError:  # e.g. a comparison the type checker refuses
        return
    if all(f.is_integral for f in model.features):
        truth = exhaustive_violating_leaves(model, inv)
    else:
        truth = WholeTreeZ3(model).violating_leaves(inv)
        if truth is None:
            return
    violating, unknown = _leaf_verdicts(model, inv)
    assert violating == truth and not unknown
    result = check_invariant(model, inv)
    assert result.status == ("violated" if truth else "holds")
    _check_counterexamples(model, inv, result)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_when_landmarks_never_contradict_the_box_probe(data):
    """A landmark input that satisfies ``when`` proves it satisfiable: the box probe (which
    the landmarks only shortcut) never calls such a ``when`` vacuous, and the answer with the
    shortcut is the probe's."""
    from clefprove.verify import evidence as ev

    model = data.draw(models(all_int=data.draw(st.booleans())))
    inv = data.draw(invariants(model))
    prep = eg.prepare(model, inv)
    boxes = leaf_boxes(model)
    settings_ = CheckOptions()
    with_landmarks = ev.when_is_vacuous(model, prep, boxes, settings_)
    met = ev._when_met_at_a_landmark(model, inv)
    original = ev._when_met_at_a_landmark
    try:
        ev._when_met_at_a_landmark = lambda *_: False
        probe = ev.when_is_vacuous(model, prep, boxes, settings_)
    finally:
        ev._when_met_at_a_landmark = original
    assert with_landmarks == probe
    assert not (met and probe)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_aimed_landmark_is_an_input_of_the_domain(data):
    """The landmark aimed at ``when``'s literals is a valid input: inside every feature's
    range, whole where the feature is integral (a point outside the domain that satisfies
    ``when`` would call a vacuous ``when`` satisfiable)."""
    from clefprove.verify import evidence as ev

    model = data.draw(models(all_int=data.draw(st.booleans())))
    inv = data.draw(invariants(model))
    start = ev._landmarks(model)[0]
    x = ev._aimed_landmark(model, inv.when, start)
    if x is None:
        return
    for f, v in zip(model.features, x, strict=True):
        assert f.min <= v <= f.max
        assert not f.is_integral or v == int(v)


def test_the_aimed_landmark_meets_a_when_no_corner_meets(spec_model):
    """SPEC's scripted-clients 'when' (no default, corner or middle input is a script client
    with path_depth >= 3) is met at the aimed landmark: no box probe needed."""
    from clefprove.dsl.loader import parse_text
    from clefprove.verify import evidence as ev

    text = (
        'invariant s:\n  when ua_family in {"curl", "python-requests"} and path_depth >= 3\n'
        "  ensure action != allow\n"
    )
    inv = parse_text(text, spec_model, "s.inv").invariants[0]
    assert not any(ck.evaluate(inv.when, x, -1, 0.0) for x in ev._landmarks(spec_model))
    x = ev._aimed_landmark(spec_model, inv.when, ev._landmarks(spec_model)[0])
    assert x is not None and ck.evaluate(inv.when, x, -1, 0.0)
    assert ev._when_met_at_a_landmark(spec_model, inv)


def test_a_region_is_the_leafs_own_path_by_descent_or_by_parent_links(spec_model):
    """The path by descent (the pre-order layout) and the one up the parent links agree."""
    from clefprove.geometry import boxes as bx

    for n in spec_model.iter_nodes():
        if n.is_leaf:
            down = bx._descend(spec_model, n.index, 0)
            assert down is not None
            up = []
            node = n.index
            while node != 0:
                parent = int(bx.links(spec_model).parent[node])
                up.append(parent)
                node = parent
            assert [p for p, _ in down] == up[::-1]
            assert describe_region(spec_model, n.index) == tuple(
                region_conditions(spec_model, [*up[::-1], n.index])
            )
