"""The check command: exit codes, formats, atomic output files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clefprove.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TOY = str(ROOT / "examples" / "spec-toy.clef")
# The example release before its confidence floor: it has one real violation.
EDGE = str(ROOT / "examples" / "edge-allow-block-1.0.0.clef")
INV = str(ROOT / "invariants")

HOLDS = """
invariant slow_not_allowed:
  when client_rtt_ms > 300
  ensure action != allow
"""
VACUOUS = """
invariant impossible:
  when client_rtt_ms > 300 and client_rtt_ms < 200
  ensure action == block
"""


def _inv(tmp_path: Path, text: str, name: str = "t.inv") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_json_shape_and_exit_1(capsys):
    assert main(["check", TOY, INV, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"model", "summary", "results"}
    assert set(data["model"]) == {"path", "sha256", "nodes", "leaves"}
    assert set(data["summary"]) == {
        "invariants",
        "holds",
        "violated",
        "unknown",
        "paths_checked",
        "paths_reused",
        "seconds",
    }
    assert data["summary"]["invariants"] == 5
    assert data["summary"]["paths_checked"] == 5 * data["model"]["leaves"]
    for r in data["results"]:
        assert {"invariant", "file", "line", "status", "violating_paths", "counterexamples"} <= set(
            r
        )
        for c in r["counterexamples"]:
            assert set(c) == {"input", "action", "confidence", "leaf", "path"}
    names = {r["invariant"]: r for r in data["results"]}
    slow = names["slow_legacy_tls_never_allowed"]
    assert slow["status"] == "holds" and slow["line"] == 8


def test_holds_exit_0(tmp_path, capsys):
    assert main(["check", TOY, _inv(tmp_path, HOLDS)]) == 0
    out = capsys.readouterr().out
    assert "slow_not_allowed" in out and "holds" in out


def test_vacuous_warns(tmp_path, capsys):
    assert main(["check", TOY, _inv(tmp_path, VACUOUS), "--format", "json"]) == 0
    cap = capsys.readouterr()
    r = json.loads(cap.out)["results"][0]
    assert r["status"] == "holds" and r["vacuous"] is True
    assert "vacuous" in cap.err


def test_output_file_written_for_violations(tmp_path):
    out = tmp_path / "report.json"
    assert main(["check", TOY, INV, "--format", "json", "-o", str(out)]) == 1
    assert json.loads(out.read_text())["summary"]["violated"] >= 1


def test_exit_2_leaves_no_file(tmp_path, capsys):
    out = tmp_path / "report.json"
    bad = _inv(tmp_path, "invariant x:\n  ensure action == nonsense\n")
    assert main(["check", TOY, bad, "--format", "json", "-o", str(out)]) == 2
    assert not out.exists()
    assert main(["check", str(tmp_path / "missing.clef"), INV, "-o", str(out)]) == 2
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [Path(bad)]


def test_relational_checked(tmp_path, capsys):
    # The toy tree never tests referer_entropy (holds); ua_family decides block vs challenge.
    rel = _inv(
        tmp_path,
        "severity allow < challenge < rate_limit < block\n"
        "invariant m:\n  ensure monotone(referer_entropy)\n"
        "invariant i:\n  ensure independent(ua_family)\n",
    )
    assert main(["check", TOY, rel, "--format", "json"]) == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [(r["relation"], r["status"]) for r in results] == [
        ("monotone(referer_entropy)", "holds"),
        ("independent(ua_family)", "violated"),
    ]
    assert len(results[1]["counterexamples"][0]["inputs"]) == 2


@pytest.mark.parametrize("flag", [["--jobs", "0"], ["--timeout", "0"], ["--counterexamples", "-1"]])
def test_bad_flags(flag, capsys):
    assert main(["check", TOY, INV, *flag]) == 2
    assert capsys.readouterr().err.startswith("clefprove: error:")


def test_counterexample_limit_and_cache_flags(capsys):
    assert (
        main(["check", EDGE, INV, "--format", "json", "--counterexamples", "1", "--no-cache"]) == 1
    )
    data = json.loads(capsys.readouterr().out)
    for r in data["results"]:
        assert len(r["counterexamples"]) <= 1
        if r["status"] == "violated":
            assert len(r["counterexamples"]) == 1


def test_jobs_do_not_change_verdicts(capsys):
    # --no-cache: a shared cache that an earlier test filled would make both runs reuse
    main(["check", EDGE, INV, "--format", "json", "--no-cache", "--jobs", "1"])
    one = json.loads(capsys.readouterr().out)
    main(["check", EDGE, INV, "--format", "json", "--no-cache", "--jobs", "2"])
    two = json.loads(capsys.readouterr().out)
    strip = lambda d: [{k: v for k, v in r.items() if k != "seconds"} for r in d["results"]]  # noqa: E731
    assert strip(one) == strip(two)


def test_counterexamples_replay_through_eval(capsys, tmp_path):
    main(["check", EDGE, INV, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    cexs = [c for r in data["results"] for c in r["counterexamples"]]
    assert cexs
    from clefprove.eval.evaluator import Evaluator
    from clefprove.eval.inputs import encode_record
    from clefprove.model.loading import load_model

    model = load_model(EDGE)
    ev = Evaluator(model)
    for c in cexs:
        d = ev.evaluate_one(encode_record(model, c["input"]))
        assert (model.actions[d.action], d.leaf) == (c["action"], c["leaf"])


@pytest.mark.parametrize("fmt", ["sarif", "junit", "text"])
def test_other_formats(fmt, tmp_path):
    out = tmp_path / f"r.{fmt}"
    assert main(["check", TOY, INV, "--format", fmt, "-o", str(out)]) == 1
    assert out.stat().st_size > 0


def test_progress_bar_goes_to_stderr(monkeypatch, capsys):
    from clefprove.cli import cmd_check

    monkeypatch.setattr(cmd_check, "PROGRESS_MIN_WORK", 0)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert main(["check", TOY, INV, "--format", "json"]) == 1
    json.loads(capsys.readouterr().out)  # stdout is still exactly the JSON report
