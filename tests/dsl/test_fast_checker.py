"""The checker's shortcut for a comparison with a constant side (``checker._minus``) builds the
linear term of the general route (``_Num.plus(..., -1).linear()``)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from clefprove.dsl import checker as ch
from clefprove.dsl.checked import CONFIDENCE

fractions = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(Fraction),
    st.fractions(max_denominator=9),
)
nums = st.builds(
    ch._Num.of,
    st.dictionaries(st.sampled_from([CONFIDENCE, 0, 1, 2, 5]), fractions, max_size=3),
    fractions,
)


@given(nums, nums)
def test_minus_equals_the_general_route(a: ch._Num, b: ch._Num) -> None:
    got = ch._minus(a, b)
    want = a.plus(b, -1).linear()
    assert got == want
    assert all(type(c) is Fraction for _, c in got.terms) and type(got.const) is Fraction
