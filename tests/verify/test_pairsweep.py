"""The tree descent for relational pairs against the pair matrix and exhaustive enumeration."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    assert box_pairs(pc, want) == matrix_pairs(pc, want)


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
    res = check_relational(model, inv, severity)
    assert res.unknown_paths == 0
    assert res.violating_paths == len(truth)
