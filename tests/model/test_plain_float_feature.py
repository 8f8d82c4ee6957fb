"""``features._plain_float`` (the plainest float feature read in one step) against the full
route of ``parse_feature``: the same Feature, or the same error, on generated declarations
near every check's edge."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.errors import ModelSourceError
from clefprove.model import features as fs

_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**53, -(2.0**53), math.inf, math.nan]),
    st.integers(-(2**60), 2**60),
    st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1, 10**400, True, False]),
    st.sampled_from(["1", None, [1.0]]),
)
_NAMES = st.one_of(
    st.sampled_from(["x", "f0", "action", "confidence", "", "1x", "a b", "_", "é"]),
    st.text(max_size=4),
    st.sampled_from([1, None]),
)
_EXTRA = st.sampled_from([{}, {"description": "d"}, {"values": ["a"]}, {"bogus": 1}])


def _outcome(obj: object, fast: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(fs, "_plain_float", lambda obj: None)
        try:
            f = fs.parse_feature(obj, "features[0]")
        except ModelSourceError as exc:
            return ("error", str(exc))
    return ("ok", f, [math.copysign(1.0, v) for v in (f.min, f.max, f.default)])


@settings(max_examples=400, deadline=None)
@given(
    name=_NAMES,
    kind=st.sampled_from(["float", "float", "int", "bool", "Float"]),
    lo=_NUMBERS,
    hi=_NUMBERS,
    default=_NUMBERS,
    extra=_EXTRA,
    drop=st.sampled_from([None, None, "min", "name", "default"]),
)
def test_plain_float_is_the_full_route(
    name: object, kind: str, lo: object, hi: object, default: object, extra: dict, drop: object
) -> None:
    obj = {"name": name, "type": kind, "min": lo, "max": hi, "default": default, **extra}
    if drop is not None:
        del obj[drop]
    with pytest.MonkeyPatch.context() as mp:
        assert _outcome(obj, True, mp) == _outcome(obj, False, mp)


def test_the_plain_route_is_taken() -> None:
    obj = {"name": "x", "type": "float", "min": -1, "max": 2.5, "default": 0.0}
    f = fs._plain_float(obj)
    assert f == fs.Feature("x", fs.FeatureType.FLOAT, -1.0, 2.5, 0.0)
    assert type(f.min) is float
