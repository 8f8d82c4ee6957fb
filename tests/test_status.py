"""The one vocabulary: enums that serialise to exactly the words of SPEC §4."""

from __future__ import annotations

import json

import numpy as np

import clefprove
from clefprove.dsl.loader import parse_text
from clefprove.status import ExitCode, LeafOutcome, SolverAnswer, Verdict


def test_verdicts_serialise_to_the_spec_words():
    assert [v.value for v in Verdict] == ["holds", "violated", "unknown"]
    assert json.dumps({"status": Verdict.VIOLATED}) == '{"status": "violated"}'
    assert f"{Verdict.UNKNOWN}" == "unknown"
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4]


def test_outcome_arrays_hold_the_enum_codes():
    status = np.full(3, LeafOutcome.SAFE, dtype=np.int8)
    status[1] = LeafOutcome.VIOLATED
    assert LeafOutcome(int(status[1])) is LeafOutcome.VIOLATED
    assert set(SolverAnswer) == {"sat", "unsat", "unknown"}


def test_cached_results_speak_it_too(spec_model, tmp_path):
    from clefprove.incremental import ProofCache

    program = parse_text("invariant a: ensure action != block\n", spec_model)
    with ProofCache(tmp_path) as cache:
        clefprove.check(spec_model, program, cache=cache)
        again = clefprove.check(spec_model, program, cache=cache)
    assert again.summary["paths_reused"] > 0
    assert isinstance(again.results[0].status, Verdict)


def test_reports_speak_the_vocabulary(spec_model):
    program = parse_text(
        "invariant a: ensure action != block\ninvariant b: ensure true\n", spec_model
    )
    report = clefprove.check(spec_model, program)
    assert [r.status for r in report.results] == [Verdict.VIOLATED, Verdict.HOLDS]
    assert all(isinstance(r.status, Verdict) for r in report.results)
    assert report.exit_code is ExitCode.VIOLATED
    data = json.loads(json.dumps(report.to_json_dict()))
    assert [r["status"] for r in data["results"]] == ["violated", "holds"]
