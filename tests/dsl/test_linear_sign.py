"""``Linear.sign`` (one term in integer arithmetic) against the sign of the exact value."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from clefprove.dsl.checked import CONFIDENCE, Linear

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


def _sign(v: Fraction) -> int:
    return int(v > 0) - int(v < 0)


@given(
    st.lists(st.tuples(st.integers(0, 3), _RATIONALS), max_size=3),
    _RATIONALS,
    st.lists(_INPUTS, min_size=4, max_size=4),
    st.floats(0.0, 1.0),
    st.booleans(),
)
def test_sign_is_the_sign_of_the_exact_value(terms, const, x, confidence, conf_term) -> None:
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
