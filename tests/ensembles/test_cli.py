"""The commands on ensembles, end to end (real subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.clef import load
from tests.helpers import run_cli

TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"

INVARIANTS = """
severity allow < challenge < block

invariant curl_slow_blocked:
  when ua_family == "curl" and client_rtt_ms > 300
  ensure action == block

invariant tor_deep_not_allowed:
  when is_tor and path_depth >= 4
  ensure action != allow

invariant blocks_confident:
  ensure action == block implies confidence >= 0.5

invariant rtt_monotone:
  ensure monotone(client_rtt_ms)
"""


@pytest.fixture
def toy(tmp_path) -> tuple[Path, Path]:
    clef = tmp_path / "toy.clef"
    r = run_cli("compile", TOY, "-o", clef)
    assert r.returncode == 0, r.stderr
    inv = tmp_path / "toy.inv"
    inv.write_text(INVARIANTS)
    return clef, inv


def test_check_json_verdicts_and_confirmed_counterexamples(toy, tmp_path):
    clef, inv = toy
    out = tmp_path / "r.json"
    r = run_cli("check", clef, inv, "--format", "json", "-o", out, "--no-cache")
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    status = {x["invariant"]: x for x in doc["results"]}
    assert status["curl_slow_blocked"]["status"] == "holds"
    assert status["curl_slow_blocked"]["proved_share"] == 1.0
    assert status["tor_deep_not_allowed"]["status"] == "violated"
    assert status["blocks_confident"]["status"] == "violated"
    assert status["rtt_monotone"]["status"] == "holds"  # relational: verify/ensemble_rel.py
    assert status["rtt_monotone"]["relation"] == "monotone(client_rtt_ms)"
    assert status["rtt_monotone"]["proved_share"] == 1.0
    model = load(clef)
    ev = EnsembleEvaluator(model)
    for res in doc["results"]:
        for c in res["counterexamples"]:
            line = run_cli("eval", clef, stdin=json.dumps(c["input"]) + "\n")
            got = json.loads(line.stdout)
            assert got == {
                "action": c["action"],
                "confidence": c["confidence"],
                "leaf": c["leaf"],
                "leaves": c["leaves"],
            }
            x = [
                f.values.index(c["input"][f.name]) if f.values else float(c["input"][f.name])
                for f in model.features
            ]
            assert ev.evaluate_one(np.array(x, dtype=float)).action == model.actions.index(
                c["action"]
            )


def test_check_text_sarif_junit(toy, tmp_path):
    clef, inv = toy
    for fmt in ("text", "sarif", "junit"):
        r = run_cli("check", clef, inv, "--format", fmt, "--no-cache")
        assert r.returncode == 1, r.stderr
        assert "leaves" in r.stdout


def test_holding_invariants_exit_0_and_timeout_gives_unknown_with_share(toy, tmp_path):
    clef, _ = toy
    inv = tmp_path / "ok.inv"
    inv.write_text(
        'invariant curl_slow_blocked:\n  when ua_family == "curl" and client_rtt_ms > 300\n'
        "  ensure action == block\n"
    )
    r = run_cli("check", clef, inv, "--format", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["holds"] == 1


def test_info_and_eval(toy):
    clef, _ = toy
    info = run_cli("info", clef, "--format", "json")
    doc = json.loads(info.stdout)
    assert doc["trees"] == 3 and doc["ensemble"]["link"] == "softmax"
    text = run_cli("info", clef).stdout
    assert "3 trees, 13 nodes" in text and "float32 sums of 3 outputs" in text
    r = run_cli("eval", clef, stdin='{"client_rtt_ms": 400, "ua_family": "curl"}\n{"x": 1}\n')
    assert r.returncode == 1
    first, second = r.stdout.splitlines()
    assert json.loads(first)["action"] == "block" and json.loads(first)["leaves"] == [3, 1, 2]
    assert "unknown feature 'x'" in json.loads(second)["error"]
    r = run_cli("eval", clef, "--explain", stdin="{}\n")
    doc = json.loads(r.stdout)
    assert [c["tree"] for c in doc["contributions"]] == [0, 1, 2]
    assert doc["input"]["ua_family"] == "other"


@pytest.mark.slow
def test_diff_report_gate_previous_work_and_coq_is_not_exported(toy, tmp_path):
    clef, inv = toy
    r = run_cli("diff", clef, clef, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["semantic"]["regions_total"] == 0 and doc["semantic"]["partial"] is False
    assert doc["structural"]["ensemble"]["unchanged"] == 3
    r = run_cli("report", clef, inv, "-o", tmp_path / "r.html")
    assert r.returncode == 1, r.stderr  # a report of violations is written in full
    assert "Per-tree contributions" in (tmp_path / "r.html").read_text()
    r = run_cli("export-coq", clef, inv, "-o", tmp_path / "coq")
    assert r.returncode == 3
    assert r.stdout.count("  not exported  ") == 4 and not (tmp_path / "coq").exists()
    r = run_cli("gate", clef, inv, "--previous", clef, "--format", "json", "--no-cache")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["diff"]["semantic"]["regions_total"] == 0


def test_diff_of_a_tree_and_an_ensemble_is_refused_in_one_line(toy, tmp_path):
    clef, _ = toy
    tree = Path(__file__).parent.parent / "fixtures" / "spec_model.json"
    r = run_cli("diff", tree, clef)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "cannot be compared with a single tree" in r.stderr
    assert "Traceback" not in r.stderr


def test_gate_on_an_ensemble(toy, tmp_path):
    clef, _ = toy
    inv = tmp_path / "ok.inv"
    inv.write_text(
        'invariant a:\n  when ua_family == "curl" and client_rtt_ms > 300\n'
        "  ensure action == block\n"
    )
    r = run_cli("gate", clef, inv)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("order", ["tree_to_ensemble", "ensemble_to_tree"])
def test_gate_previous_of_the_other_kind_is_reported_not_refused(toy, tmp_path, order):
    """docs/incremental.md: the diff never changes the gate's status. A model retrained as a
    forest (or back) was exit 2 ('cannot be compared') with every invariant holding."""
    clef, _ = toy
    tree = tmp_path / "tree.clef"
    assert run_cli("compile", Path(__file__).parent.parent / "fixtures" / "spec_model.json",
                   "-o", tree).returncode == 0  # fmt: skip
    new, old = (clef, tree) if order == "tree_to_ensemble" else (tree, clef)
    inv = tmp_path / "ok.inv"
    inv.write_text("invariant sure:\n  ensure confidence >= 0\n")
    r = run_cli("gate", new, inv, "--previous", old, "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["gate"] == "pass" and out["diff"]["semantic"]["comparable"] is False
    assert "diff compares two trees or two ensembles" in out["diff"]["semantic"]["reason"]
    r = run_cli("gate", new, inv, "--previous", old, "--no-cache")
    assert r.returncode == 0 and "behaviour not compared" in r.stdout, r.stdout + r.stderr
    md = tmp_path / "review.md"  # the report's diff section says so too, and is written
    r = run_cli("report", new, inv, "--previous", old, "-o", md)
    assert r.returncode == 0, r.stderr
    assert "diff compares two trees or two ensembles" in md.read_text()


def test_gate_on_an_ensemble_prints_no_empty_region(toy, tmp_path):
    clef, _ = toy
    inv = tmp_path / "bad.inv"
    inv.write_text("invariant never_block:\n  ensure action != block\n")
    r = run_cli("gate", clef, inv)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "counterexample {" in r.stdout
    assert all(line.strip() != "region" for line in r.stdout.splitlines()), r.stdout


def test_an_empty_region_of_a_relational_search_prints_no_numpy_warning(toy, tmp_path):
    """A region that no input reaches (here: a ``when`` that leaves no ``ua_family``) got NaN
    score bounds, and numpy's RuntimeWarning went to stderr on an exit-0 run."""
    clef, _ = toy
    inv = tmp_path / "empty.inv"
    inv.write_text(
        "invariant e:\n"
        '  when ua_family not in {"curl", "other"} and ua_family not in {"Chrome", "Firefox"}\n'
        "  ensure independent(path_depth)\n"
    )
    r = run_cli("check", clef, inv, "--no-cache")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Warning" not in r.stderr + r.stdout, r.stderr
    assert "holds vacuously" in r.stdout


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_truncated_ensemble_files_exit_2_in_one_line(toy, tmp_path, cut):
    clef, inv = toy
    data = clef.read_bytes()
    bad = tmp_path / "bad.clef"
    bad.write_bytes(data[: int(len(data) * cut)])
    for args in (("info", bad), ("check", bad, inv, "--no-cache"), ("eval", bad)):
        r = run_cli(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_import_writes_an_ensemble(tmp_path):
    xgb = pytest.importorskip("xgboost")
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    clf = xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y)
    clf.get_booster().save_model(tmp_path / "m.json")
    r = run_cli("import", "xgboost", tmp_path / "m.json", "-o", tmp_path / "m.clef")
    assert r.returncode == 0, r.stderr
    model = load(tmp_path / "m.clef")
    assert model.n_trees == 15
    b = EnsembleEvaluator(model).evaluate(X)
    assert np.array_equal(b.actions, clf.predict(X))
