"""The tree descent for relational pairs against the pair matrix and exhaustive enumeration."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.verify import relational
from clefprove.verify.relational import (
    EXTRA_CONFIRM,
    PairChecker,
    box_pairs,
    check_relational,
    matrix_pairs,
    prepare,
)
from tests.verify.gen import models
from tests.verify.test_relational import (
    exhaustive_violating_pairs,
    pair_models,
    relational_invariants,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_as_matrix(model, inv, severity) -> None:
    prep = prepare(model, inv, severity)
    pc = PairChecker(model, prep)
    want = 3 + EXTRA_CONFIRM
    assert box_pairs(pc, want, matrix_cells=0) == matrix_pairs(pc, want)


@FAST
@given(st.data())
def test_descent_equals_matrix_float(data):
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False)))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix(model, inv, severity)


@FAST
@given(st.data())
def test_descent_equals_matrix_and_enumeration_integer(data):
    model = data.draw(st.one_of(models(all_int=True), pair_models(all_int=True)))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix(model, inv, severity)
    truth = exhaustive_violating_pairs(model, inv, severity)
    prep = prepare(model, inv, severity)
    n_sat, _, undecided = box_pairs(PairChecker(model, prep), 19, matrix_cells=0)
    if not undecided:  # linear 'when' literals left to Z3 are checked in test_relational
        assert n_sat == len(truth)


@FAST
@given(st.data())
def test_check_reports_the_same_through_descent_and_matrix(data):
    """The whole check (counts, confirmed counterexample pairs, warnings) is the same whichever
    finds the pairs."""
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False)))
    inv, severity = data.draw(relational_invariants(model))
    saved = relational.MATRIX_CELLS
    try:
        relational.MATRIX_CELLS = 1 << 62
        by_matrix = check_relational(model, inv, severity)
        relational.MATRIX_CELLS = 0
        by_descent = check_relational(model, inv, severity)
    finally:
        relational.MATRIX_CELLS = saved
    assert dataclasses.replace(by_descent, seconds=0.0) == dataclasses.replace(
        by_matrix, seconds=0.0
    )
