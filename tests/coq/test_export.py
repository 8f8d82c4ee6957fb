"""End to end: exports that coqc checks, with closed assumptions; tampered exports fail."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clefprove.cli.main import main
from clefprove.coq_export.export import (
    PROVED,
    REFUTED,
    SKIPPED,
    export_coq,
)
from clefprove.dsl.loader import load_invariants, parse_text
from clefprove.model.source import compile_source

from .coqgen import coqc

pytestmark = pytest.mark.coq

ROOT = Path(__file__).resolve().parents[2]
SPEC_INVARIANTS = ROOT / "invariants"
TOY = ROOT / "examples" / "spec-toy.json"

#: On the SPEC toy model (allow below 300 ms, then block scripts, challenge the rest).
EXPECTED_TOY = {
    "slow_legacy_tls_never_allowed": PROVED,
    "scripted_clients_face_friction": REFUTED,  # curl under 300 ms is allowed
    "blocks_are_confident": PROVED,
    "tor_never_allowed_when_deep": REFUTED,  # tor under 300 ms is allowed
    "weighted_risk_linear": REFUTED,  # 300 ms and depth 64 is allowed
}

EXTRA = """
severity allow < challenge < rate_limit < block
invariant fast_lane_is_shallow_or_fast:
  when client_rtt_ms + 200 * path_depth >= 2000
  ensure action != allow
invariant confident_allow:
  ensure action == allow implies confidence >= 0.9 and confidence <= 1
invariant odd_sum_never:
  when 2 * path_depth + 2 * tls_version >= 1537 and 2 * path_depth + 2 * tls_version <= 1537
  ensure action == block
invariant no_whole_point:
  when 2 * path_depth - 4 * tls_version + 3081 <= 0 and path_depth + 2 * tls_version <= 1541
  ensure action == block
invariant chrome_or_not:
  when ua_family in {"Chrome"} or not ua_family in {"Chrome"}
  ensure action in {allow, challenge, rate_limit, block}
invariant tor_bool:
  when is_tor and tls_version < 770
  ensure not (action == allow)
"""


def guarded_source() -> dict:
    """A model that allows only fast (<= 300 ms), shallow (depth <= 5), non-tor, non-script
    requests on TLS >= 770, with confidence 0.95."""
    src = json.loads(TOY.read_text())
    src["tree"] = {
        "feature": "client_rtt_ms",
        "threshold": 300.0,
        "left": {
            "feature": "ua_family",
            "in": ["curl", "python-requests"],
            "left": {"action": "challenge", "confidence": 0.8},
            "right": {
                "feature": "path_depth",
                "threshold": 5.5,
                "left": {
                    "feature": "is_tor",
                    "left": {
                        "feature": "tls_version",
                        "threshold": 769.5,
                        "left": {"action": "challenge", "confidence": 0.6},
                        "right": {"action": "allow", "confidence": 0.95},
                    },
                    "right": {"action": "rate_limit", "confidence": 0.7},
                },
                "right": {"action": "challenge", "confidence": 0.5},
            },
        },
        "right": {
            "feature": "ua_family",
            "in": ["curl", "python-requests"],
            "left": {"action": "block", "confidence": 0.91},
            "right": {"action": "challenge", "confidence": 0.77},
        },
    }
    return src


def build(coq_dir: Path) -> str:
    """coqc the export in *coq_dir* (library already compiled); stderr on failure."""
    out = coqc(coq_dir, "Model.v", "Invariants.v")
    return "" if out.returncode == 0 else out.stderr


def assumptions(coq_dir: Path) -> list[str]:
    out = coqc(coq_dir, "Assumptions.v")
    assert out.returncode == 0, out.stderr
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


@pytest.mark.slow
def test_spec_toy_exports_and_checks(coq_dir: Path) -> None:
    model = compile_source(json.loads(TOY.read_text()))
    export = export_coq(model, load_invariants([SPEC_INVARIANTS], model))
    assert {r.name: r.status for r in export.results} == EXPECTED_TOY
    assert export.exit_code == 1
    export.write(coq_dir)
    assert build(coq_dir) == ""
    lines = assumptions(coq_dir)
    assert lines == ["Closed under the global context"] * len(EXPECTED_TOY)
    text = (coq_dir / "Invariants.v").read_text()
    # Readable statements over named features, as written in the .inv file.
    assert "client_rtt_ms x > 300 /\\ tls_version x < 772 ->\n    ~ action x = allow." in text
    assert "Admitted" not in text and "Axiom" not in text
    # A refutation is by computation at a concrete input.
    assert re.search(r"Theorem weighted_risk_linear_fails :\n  ~ \(forall x : input", text)


@pytest.mark.slow
def test_multi_feature_linear_and_limits(coq_dir: Path) -> None:
    model = compile_source(guarded_source())
    program = parse_text(EXTRA, model)
    spec = load_invariants([SPEC_INVARIANTS], model)
    export = export_coq(model, (*spec.invariants, *program.invariants))
    status = {r.name: r for r in export.results}
    # Every SPEC invariant holds on this model; the weighted one needs Fourier-Motzkin.
    for name in EXPECTED_TOY:
        assert status[name].status == PROVED, name
    assert status["fast_lane_is_shallow_or_fast"].status == PROVED
    assert status["confident_allow"].status == PROVED
    assert status["chrome_or_not"].status == PROVED
    assert status["tor_bool"].status == PROVED
    # 2d + 2t = 1537 has no whole solution: rounding each sum over integral features (a
    # Chvatal-Gomory cut) proves it, where Fourier-Motzkin over Q alone could not.
    assert status["odd_sum_never"].status == PROVED
    # Here the two constraints must be combined before rounding (d = 0 and 2.5 <= t - 768
    # <= 2.5): the invariant holds, the checker cannot prove it, the export says so and
    # writes no theorem for it.
    hard = status["no_whole_point"]
    assert hard.status == SKIPPED and hard.theorem is None and "integer" in hard.reason
    assert export.exit_code == 3
    export.write(coq_dir)
    assert build(coq_dir) == ""
    assert assumptions(coq_dir) == ["Closed under the global context"] * 10
    assert "Theorem no_whole_point" not in (coq_dir / "Invariants.v").read_text()


def _tamper(coq_dir: Path, old: str, new: str) -> None:
    path = coq_dir / "Model.v"
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _toy_export(coq_dir: Path) -> None:
    model = compile_source(guarded_source())
    export_coq(model, load_invariants([SPEC_INVARIANTS], model)).write(coq_dir)


def test_untampered_guarded_export_checks(coq_dir: Path) -> None:
    _toy_export(coq_dir)
    assert build(coq_dir) == ""


def test_changed_leaf_action_no_longer_checks(coq_dir: Path) -> None:
    _toy_export(coq_dir)
    # The block leaf for scripts on slow connections becomes "allow".
    _tamper(coq_dir, "(Leaf 3%N", "(Leaf 0%N")
    err = build(coq_dir)
    # The first invariant it breaks is slow_legacy_tls_never_allowed (a slow curl client on
    # TLS 1.2 is now allowed); the failure is the reflective check, not a syntax error.
    assert "check model_domain model_tree slow_legacy_tls_never_allowed_w" in err


def test_moved_threshold_no_longer_checks(coq_dir: Path) -> None:
    _toy_export(coq_dir)
    # allow up to 400 ms instead of 300 ms: a 350 ms client on TLS 770 is now allowed,
    # which breaks slow_legacy_tls_never_allowed.
    _tamper(coq_dir, "(Split 0%nat (300 # 1)", "(Split 0%nat (400 # 1)")
    err = build(coq_dir)
    assert "check model_domain model_tree slow_legacy_tls_never_allowed_w" in err


def test_cli_writes_the_export_and_reports(tmp_path: Path, capsys) -> None:
    out = tmp_path / "coq"
    code = main(["export-coq", str(TOY), str(SPEC_INVARIANTS), "-o", str(out)])
    assert code == 1
    stdout = capsys.readouterr().out
    assert "slow_legacy_tls_never_allowed" in stdout and "refuted" in stdout
    names = {p.name for p in out.iterdir()}
    assert {
        "ClefSyntax.v",
        "ClefCheck.v",
        "Model.v",
        "Invariants.v",
        "Assumptions.v",
        "_CoqProject",
        "Makefile",
        "README.md",
    } <= names


def test_cli_bad_input_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "coq"
    bad = tmp_path / "bad.inv"
    bad.write_text("invariant x:\n  ensure action == alow\n")
    assert main(["export-coq", str(TOY), str(bad), "-o", str(out)]) == 2
    assert not out.exists()
    assert main(["export-coq", str(tmp_path / "missing.clef"), str(bad), "-o", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "Traceback" not in err


EXAMPLE = ROOT / "examples" / "edge-allow-block-1.0.0.clef"


@pytest.mark.slow
@pytest.mark.skipif(not EXAMPLE.exists(), reason="the depth-12 example is not generated")
def test_depth12_example_exports_and_checks(coq_dir: Path) -> None:
    from clefprove.model.loading import load_model

    model = load_model(EXAMPLE)
    export = export_coq(model, load_invariants([SPEC_INVARIANTS], model))
    assert all(r.status in (PROVED, REFUTED) for r in export.results)
    export.write(coq_dir)
    assert build(coq_dir) == ""
    assert assumptions(coq_dir) == ["Closed under the global context"] * len(export.results)


@pytest.mark.slow
def test_random_invariants_export_and_check(coq_dir: Path) -> None:
    """Whatever the invariants, every theorem written goes through coqc (one run)."""
    import random

    from .coqgen import MIXED_FEATURES, invariant, random_formula, random_model

    rng = random.Random(11)
    model = random_model(rng, MIXED_FEATURES, depth=4)
    invs = [
        invariant(f"r{i}", random_formula(rng, model), random_formula(rng, model))
        for i in range(16)
    ]
    export = export_coq(model, invs)
    statuses = [r.status for r in export.results]
    assert PROVED in statuses and REFUTED in statuses
    export.write(coq_dir)
    assert build(coq_dir) == ""
    n = sum(1 for r in export.results if r.theorem)
    assert assumptions(coq_dir) == ["Closed under the global context"] * n


@pytest.mark.slow
def test_quotes_in_values_and_descriptions_export_and_check(coq_dir: Path) -> None:
    # A '"' in a categorical value or a description opened a string inside a Coq comment,
    # which then swallowed the definitions after it: coqc failed ('act_block not found').
    src = json.loads(TOY.read_text())
    src["features"][4]["values"] = ['say "hi', "curl", "python-requests", "other"]
    src["features"][4]["default"] = "other"
    model = compile_source(src)
    program = parse_text(
        "severity allow < challenge < rate_limit < block\n"
        'invariant quoted:\n  "it\'s \\"quoted"\n'
        '  when ua_family == "say \\"hi" and client_rtt_ms > 300\n  ensure action >= challenge\n'
        "invariant after:\n  ensure action == block implies confidence >= 0.8\n",
        model,
    )
    export = export_coq(model, program)
    assert [r.status for r in export.results] == [PROVED, PROVED]
    export.write(coq_dir)
    assert build(coq_dir) == ""
    assert assumptions(coq_dir) == ["Closed under the global context"] * 2
