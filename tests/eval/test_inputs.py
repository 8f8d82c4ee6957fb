"""Input records -> encoded vectors (SPEC §2): defaults, clipping, type rules, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.errors import InputError
from clefprove.eval.inputs import decode_input, encode_record, encode_records

NAMES = ["client_rtt_ms", "tls_version", "path_depth", "referer_entropy", "ua_family", "is_tor"]


def test_defaults_fill_missing_features(spec_model) -> None:
    assert encode_record(spec_model, {}).tolist() == [50.0, 772.0, 1.0, 0.0, 5.0, 0.0]


def test_values_are_encoded_and_clipped(spec_model) -> None:
    x = encode_record(
        spec_model,
        {
            "client_rtt_ms": 20000.5,
            "tls_version": 700,
            "path_depth": 3.0,
            "referer_entropy": -1,
            "ua_family": "curl",
            "is_tor": True,
        },
    )
    assert x.tolist() == [10000.0, 768.0, 3.0, 0.0, 3.0, 1.0]
    # a huge JSON integer is finite: it clips rather than overflowing
    assert encode_record(spec_model, {"path_depth": 10**400})[2] == 64.0
    assert encode_record(spec_model, {"client_rtt_ms": -(10**400)})[0] == 0.0


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"tls_version": 771.5}, "tls_version: an int feature takes whole numbers, not 771.5"),
        ({"is_tor": 1}, "is_tor: expected true or false, got the number 1"),
        ({"is_tor": "true"}, "is_tor: expected true or false"),
        ({"ua_family": "Edge"}, "ua_family: unknown value 'Edge'"),
        ({"ua_family": 3}, "ua_family: expected one of"),
        ({"client_rtt_ms": math.nan}, "client_rtt_ms: nan is not a finite number"),
        ({"client_rtt_ms": math.inf}, "client_rtt_ms: inf is not a finite number"),
        ({"client_rtt_ms": "300"}, "client_rtt_ms: expected a number, got the string '300'"),
        ({"client_rtt_ms": True}, "client_rtt_ms: expected a number, got a boolean"),
        ({"client_rtt_ms": None}, "client_rtt_ms: expected a number, got null"),
        ({"path_depth": [1]}, "path_depth: expected a number, got a list"),
        ({"client_rt_ms": 1}, "unknown feature 'client_rt_ms'; did you mean 'client_rtt_ms'?"),
        ({"zzz": 1}, "unknown feature 'zzz'"),
    ],
)
def test_bad_values_are_input_errors(spec_model, record, message) -> None:
    with pytest.raises(InputError) as info:
        encode_record(spec_model, record)
    assert message in str(info.value)
    assert "\n" not in info.value.one_line()


def test_not_an_object(spec_model) -> None:
    with pytest.raises(InputError, match="must be a JSON object"):
        encode_record(spec_model, [1, 2])  # type: ignore[arg-type]


def test_encode_records_names_the_record(spec_model) -> None:
    X = encode_records(spec_model, [{}, {"is_tor": True}])
    assert X.shape == (2, 6) and X[1, 5] == 1.0
    with pytest.raises(InputError, match="record 1: is_tor"):
        encode_records(spec_model, [{}, {"is_tor": 0}])


def test_numpy_scalars_are_accepted(spec_model) -> None:
    x = encode_record(spec_model, {"path_depth": np.int64(4), "client_rtt_ms": np.float32(1.5)})
    assert x[2] == 4.0 and x[0] == 1.5


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "client_rtt_ms": st.floats(0, 10000),
            "tls_version": st.integers(768, 772),
            "path_depth": st.integers(0, 64),
            "referer_entropy": st.floats(0, 8),
            "ua_family": st.sampled_from(
                ["Chrome", "Firefox", "Safari", "curl", "python-requests", "other"]
            ),
            "is_tor": st.booleans(),
        },
    )
)
def test_decode_inverts_encode_on_in_domain_records(spec_model, record) -> None:
    decoded = decode_input(spec_model, encode_record(spec_model, record))
    assert list(decoded) == NAMES
    for name, v in record.items():
        assert decoded[name] == v and type(decoded[name]) is type(v)
    assert isinstance(decoded["tls_version"], int) and isinstance(decoded["is_tor"], bool)
    assert isinstance(decoded["client_rtt_ms"], float)
