"""float_le / float_ge: the float64 neighbours of an exact rational."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from clefprove.geometry.floats import float_ge, float_le

FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(FINITE, st.fractions(min_value=-1, max_value=1, max_denominator=10**6))
def test_bounds_are_the_nearest_floats_on_each_side(x: float, nudge: Fraction) -> None:
    q = Fraction(x) + nudge * Fraction(math.ulp(x))
    lo, hi = float_le(q), float_ge(q)
    assert Fraction(lo) <= q <= Fraction(hi)
    assert Fraction(math.nextafter(lo, math.inf)) > q or lo == hi == q
    assert Fraction(math.nextafter(hi, -math.inf)) < q or lo == hi == q


@given(FINITE)
def test_a_float_is_its_own_bound(x: float) -> None:
    assert float_le(Fraction(x)) == x == float_ge(Fraction(x))


def test_a_rational_between_two_floats():
    q = Fraction(1, 10)  # 0.1 is not a float64
    assert float_le(q) < q < float_ge(q)
    assert math.nextafter(float_le(q), 1.0) == float_ge(q)
