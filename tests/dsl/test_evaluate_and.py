"""``checked.evaluate`` and ``mentions_decision`` (an ``And``'s ``Compare`` operands tested in
the loop) against a plain recursive reference, on random formulas of every kind nested in
``And``, ``Or`` and ``Not``."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck

N = 3


def _reference(f: ck.Formula, x: list[float], action: int, confidence: float) -> bool:
    if isinstance(f, ck.Const):
        return f.value
    if isinstance(f, ck.Compare):
        v = f.expr.value(x, confidence)
        return v < 0 if f.strict else v <= 0
    if isinstance(f, ck.InSet):
        return int(x[f.feature]) in f.codes
    if isinstance(f, ck.ActionIn):
        return action in f.actions
    if isinstance(f, ck.Not):
        return not _reference(f.arg, x, action, confidence)
    if isinstance(f, ck.And):
        return all(_reference(a, x, action, confidence) for a in f.args)
    assert isinstance(f, ck.Or)
    return any(_reference(a, x, action, confidence) for a in f.args)


def _mentions(f: ck.Formula) -> bool:
    if isinstance(f, ck.ActionIn):
        return True
    if isinstance(f, ck.Compare):
        return ck.CONFIDENCE in f.expr.variables
    if isinstance(f, ck.Not):
        return _mentions(f.arg)
    if isinstance(f, ck.And | ck.Or):
        return any(_mentions(a) for a in f.args)
    return False


_small = st.fractions(min_value=-4, max_value=4, max_denominator=4)
_compares = st.builds(
    lambda coeffs, k, strict: ck.Compare(ck.Linear.make(coeffs, k), strict),
    st.dictionaries(st.integers(0, N - 1) | st.just(ck.CONFIDENCE), _small, max_size=2),
    _small,
    st.booleans(),
)
_leaves = st.one_of(
    _compares,
    _compares,
    st.builds(ck.Const, st.booleans()),
    st.builds(ck.InSet, st.integers(0, N - 1), st.frozensets(st.integers(-2, 2), max_size=3)),
    st.builds(ck.ActionIn, st.frozensets(st.integers(0, 2), max_size=2)),
)
formulas = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.builds(ck.Not, inner),
        st.builds(ck.And, st.lists(inner, min_size=2, max_size=5).map(tuple)),
        st.builds(ck.Or, st.lists(inner, min_size=2, max_size=5).map(tuple)),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    formulas,
    st.lists(st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0]), min_size=N, max_size=N),
    st.integers(0, 2),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_evaluate_and_mentions_are_the_reference(
    f: ck.Formula, x: list[float], action: int, confidence: float
) -> None:
    assert ck.evaluate(f, x, action, confidence) is _reference(f, x, action, confidence)
    assert ck.mentions_decision(f) is _mentions(f)


def test_a_box_literal_and() -> None:
    box = ck.And(
        (
            ck.Compare(ck.Linear(((0, Fraction(-1)),), Fraction(1)), False),  # x0 >= 1
            ck.Compare(ck.Linear(((0, Fraction(1)),), Fraction(-2)), True),  # x0 < 2
        )
    )
    assert ck.evaluate(box, [1.0], -1, 0.0) and not ck.evaluate(box, [2.0], -1, 0.0)
    assert not ck.mentions_decision(box)
