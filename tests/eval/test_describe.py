"""Readable path conditions (shared wording of ``eval --explain`` and counterexample paths)."""

from __future__ import annotations

from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import encode_record
from clefprove.model.describe import condition, format_number, path_conditions
from clefprove.model.source import compile_source


def test_format_number() -> None:
    assert format_number(300.0) == "300"
    assert format_number(771.5) == "771.5"
    assert format_number(-0.0) == "0"
    assert format_number(0.1) == "0.1"
    assert format_number(300.00001525878906) == "300.00001525878906"
    assert format_number(1e300) == "1e+300"


def test_spec_toy_paths(spec_model) -> None:
    ev = Evaluator(spec_model)
    x = encode_record(spec_model, {"client_rtt_ms": 400, "ua_family": "Chrome"})
    assert path_conditions(spec_model, ev.path(x)) == [
        "client_rtt_ms > 300",
        "ua_family not in {curl, python-requests}",
    ]
    x = encode_record(spec_model, {"client_rtt_ms": 400, "ua_family": "curl"})
    assert path_conditions(spec_model, ev.path(x))[-1] == "ua_family in {curl, python-requests}"
    assert path_conditions(spec_model, ev.path(encode_record(spec_model, {}))) == [
        "client_rtt_ms <= 300"
    ]


def test_bool_and_int_conditions() -> None:
    model = compile_source(
        {
            "features": [
                {"name": "tls_version", "type": "int", "min": 768, "max": 772, "default": 772},
                {"name": "is_tor", "type": "bool", "default": False},
            ],
            "actions": ["allow", "block"],
            "tree": {
                "feature": "is_tor",
                "left": {
                    "feature": "tls_version",
                    "threshold": 771.5,
                    "left": {"action": "block", "confidence": 1},
                    "right": {"action": "allow", "confidence": 1},
                },
                "right": {
                    "feature": "is_tor",
                    "threshold": 1.5,
                    "left": {"action": "block", "confidence": 1},
                    "right": {"action": "allow", "confidence": 1},
                },
            },
        }
    )
    assert condition(model, 0, True) == "not is_tor"
    assert condition(model, 0, False) == "is_tor"
    assert condition(model, 1, True) == "tls_version <= 771.5"
    assert condition(model, 1, False) == "tls_version > 771.5"
    # a bool threshold outside [0, 1) is shown as the comparison it is
    assert condition(model, 4, True) == "is_tor <= 1.5"
