"""``Linear.sign`` (integer arithmetic) against the sign of ``Linear.value`` (Fractions), on
coefficients and inputs across the float64 range: subnormals, signed zeros, huge magnitudes,
the confidence variable, and rationals that are not float64 values."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.dsl.checked import CONFIDENCE, Compare, Linear, evaluate

finite = st.floats(allow_nan=False, allow_infinity=False)
rationals = st.one_of(
    finite.map(Fraction),
    st.fractions(max_denominator=10**6),
    st.builds(lambda a, b: Fraction(a) * Fraction(b), finite, finite),
)


@st.composite
def linears(draw):
    n = draw(st.integers(1, 4))
    variables = draw(st.lists(st.integers(0, n - 1) | st.just(CONFIDENCE), max_size=4))
    coeffs = {v: draw(rationals) for v in variables}
    return Linear.make(coeffs, draw(rationals)), n


def _sign(q: Fraction) -> int:
    return (q > 0) - (q < 0)


@settings(max_examples=500)
@given(linears(), st.data())
def test_sign_is_the_sign_of_the_exact_value(case, data):
    linear, n = case
    x = data.draw(st.lists(finite, min_size=n, max_size=n))
    confidence = data.draw(st.floats(0, 1))
    want = _sign(linear.value(x, confidence))
    assert linear.sign(x, confidence) == want
    for strict in (False, True):
        assert evaluate(Compare(linear, strict), x, -1, confidence) == (
            want < 0 if strict else want <= 0
        )


def test_a_sum_that_cancels_exactly_is_zero():
    # 0.1 + 0.2 - 0.30000000000000004 is 0 in exact arithmetic on the float64 values
    lin = Linear.make({0: Fraction(1), 1: Fraction(1)}, -Fraction(0.30000000000000004))
    assert lin.sign([0.1, 0.2], 0.0) == _sign(lin.value([0.1, 0.2], 0.0))
    lin = Linear.make({0: Fraction(1), 1: Fraction(-1)}, Fraction(0))
    assert lin.sign([5e-324, 5e-324], 0.0) == 0
    assert lin.sign([5e-324, 0.0], 0.0) == 1
    assert lin.sign([-1.7976931348623157e308, 1.7976931348623157e308], 0.0) == -1
    # integers, numpy's included, exactly (not through float64)
    big = 2**53 + 1
    lin = Linear.make({0: Fraction(1)}, -Fraction(big))
    for v in (big, np.int64(big)):
        assert lin.sign([v], 0.0) == 0
    assert lin.sign([np.float64(big)], 0.0) == -1  # the float64 value is 2**53
    ident = Linear.make({0: Fraction(1)}, Fraction(0))
    assert ident.sign([0.0], 0.0) == ident.sign([-0.0], 0.0) == 0


_RATIONALS = st.one_of(
    st.fractions(max_denominator=10**12),
    st.floats(allow_nan=False, allow_infinity=False).map(Fraction),
    st.integers(-(10**30), 10**30).map(Fraction),
)
_INPUTS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**30), 10**30),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False).map(np.float64),
)


@given(
    st.lists(st.tuples(st.integers(0, 3), _RATIONALS), max_size=3),
    _RATIONALS,
    st.lists(_INPUTS, min_size=4, max_size=4),
    st.floats(0.0, 1.0),
    st.booleans(),
)
def test_sign_on_ints_bools_and_numpy_floats(terms, const, x, confidence, conf_term) -> None:
    coeffs = {v: c for v, c in terms}
    if conf_term and terms:
        coeffs[CONFIDENCE] = terms[0][1]
    lin = Linear.make(coeffs, const)
    assert lin.sign(x, confidence) == _sign(lin.value(x, confidence))


@given(_RATIONALS.filter(bool), _INPUTS)
def test_one_term_boundary(coeff, x) -> None:
    """At ``c * x + k = 0`` exactly (k = -c * x), and one ulp either side of x."""
    exact = Fraction(x)
    lin = Linear.make({0: coeff}, -coeff * exact)
    assert lin.sign([x], 0.0) == 0
    if isinstance(x, float):
        for y in (np.nextafter(x, np.inf), np.nextafter(x, -np.inf)):
            if np.isfinite(y):
                assert lin.sign([float(y)], 0.0) == _sign(lin.value([float(y)], 0.0))
