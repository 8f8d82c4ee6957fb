"""``clefprove diff`` and ``clefprove gate`` end to end (exit codes, output, cache reuse)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from clefprove.model.clef import write_clef
from tests.helpers import run_cli
from tests.incremental import models as M

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run clefprove in *cwd* with the default cache location (``cwd/.clefprove-cache``)."""
    return run_cli(*args, cwd=cwd, unset=["CLEFPROVE_CACHE"])


def _models(tmp: Path) -> tuple[Path, Path, Path]:
    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": {
            "feature": "x",
            "threshold": 5.0,
            "left": {"action": "allow", "confidence": 0.9},
            "right": {
                "feature": "n",
                "threshold": 2.5,
                "left": {"action": "challenge", "confidence": 0.9},
                "right": {"action": "block", "confidence": 0.95},
            },
        },
    }
    old = tmp / "old.clef"
    old.write_bytes(write_clef(M.compile_(src)))
    src["tree"]["right"]["left"]["action"] = "allow"
    new = tmp / "new.clef"
    new.write_bytes(write_clef(M.compile_(src)))
    inv = tmp / "inv"
    inv.mkdir()
    (inv / "a.inv").write_text(M.program_text(["slow", "confident"]))
    return old, new, inv


@pytest.mark.slow
def test_gate_passes_fails_and_reuses(tmp_path) -> None:
    old, new, inv = _models(tmp_path)
    ok = run("gate", str(old), str(inv), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "gate       PASS" in ok.stdout
    again = run("gate", str(old), str(inv), "--format", "json", cwd=tmp_path)
    doc = json.loads(again.stdout)
    assert doc["gate"] == "pass" and doc["check"]["summary"]["paths_checked"] == 0
    assert doc["check"]["summary"]["paths_reused"] == 6
    assert (tmp_path / ".clefprove-cache").is_dir()
    bad = run("gate", str(new), str(inv), "--previous", str(old), cwd=tmp_path)
    assert bad.returncode == 1
    assert "FAIL slow" in bad.stdout and "challenge -> allow" in bad.stdout
    nocache = run("gate", str(new), str(inv), "--no-cache", "--format", "json", cwd=tmp_path)
    assert json.loads(nocache.stdout)["check"]["summary"]["paths_reused"] == 0


def test_gate_rejects_a_damaged_model(tmp_path) -> None:
    old, _, inv = _models(tmp_path)
    raw = bytearray(old.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    broken = tmp_path / "broken.clef"
    broken.write_bytes(bytes(raw))
    res = run("gate", str(broken), str(inv), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_gate_with_cache_dir_option(tmp_path) -> None:
    old, _, inv = _models(tmp_path)
    res = run("gate", str(old), str(inv), "--cache", str(tmp_path / "c"), cwd=tmp_path)
    assert res.returncode == 0
    assert (tmp_path / "c").is_dir() and not (tmp_path / ".clefprove-cache").exists()


@pytest.mark.slow
def test_diff_command(tmp_path) -> None:
    old, new, _ = _models(tmp_path)
    text = run("diff", str(old), str(new), cwd=tmp_path)
    assert text.returncode == 0
    assert "changed  at x > 5 and n <= 2.5" in text.stdout
    assert "challenge -> allow" in text.stdout
    js = run("diff", str(old), str(new), "--format", "json", cwd=tmp_path)
    doc = json.loads(js.stdout)
    sem = doc["semantic"]
    assert sem["regions_total"] == 1
    # x in (5, 10], n in [0, 2]: share 0.5 * 3/7
    assert abs(sem["share_changed"] - 0.5 * 3 / 7) < 1e-12
    assert sem["regions"][0]["example"]["x"] > 5
    same = run("diff", str(old), str(old), cwd=tmp_path)
    assert "identical trees" in same.stdout and "same action for every input" in same.stdout
    missing = run("diff", str(old), str(tmp_path / "nope.clef"), cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_pre_commit_hooks_file() -> None:
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {h["id"]: h for h in hooks}
    assert ids["clefprove-gate"]["entry"] == "clefprove gate"
    assert ids["clefprove-gate"]["pass_filenames"] is False


def test_gate_unknown_is_exit_3_and_never_cached(tmp_path) -> None:
    from clefprove.app.gate import run_gate
    from clefprove.incremental import ProofCache
    from clefprove.report.gate_text import render_text
    from clefprove.verify.options import CheckOptions

    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": {
            "feature": "x",
            "threshold": 5.0,
            "left": {"action": "block", "confidence": 0.9},
            "right": {
                "feature": "x",
                "threshold": 7.5,
                "left": {"action": "allow", "confidence": 0.9},  # safe, but only Z3 shows it
                "right": {"action": "block", "confidence": 0.9},
            },
        },
    }
    model = tmp_path / "m.clef"
    model.write_bytes(write_clef(M.compile_(src)))
    inv = tmp_path / "z3.inv"
    inv.write_text(M.program_text(["solver_safe"]))
    with ProofCache(tmp_path / "c") as cache:
        # linear=False: verify/linear would prove it on the box, without Z3
        for _ in range(2):  # a tiny resource limit: Z3 gives up; nothing unknown is stored
            res = run_gate(model, [inv], cache=cache, options=CheckOptions(rlimit=1, linear=False))
            assert res.exit_code == 3 and "FAIL (unknown)" in render_text(res)
        res = run_gate(model, [inv], cache=cache, options=CheckOptions(linear=False))
        assert res.exit_code == 0 and res.report.results[0].status == "holds"


@pytest.mark.slow
def test_check_uses_the_cache_by_default(tmp_path) -> None:
    old, _, inv = _models(tmp_path)
    first = json.loads(run("check", str(old), str(inv), "--format", "json", cwd=tmp_path).stdout)
    again = json.loads(run("check", str(old), str(inv), "--format", "json", cwd=tmp_path).stdout)
    assert (tmp_path / ".clefprove-cache").is_dir()
    assert first["summary"]["paths_reused"] == 0 and first["summary"]["paths_checked"] == 6
    assert again["summary"]["paths_reused"] == 6 and again["summary"]["paths_checked"] == 0
    for a, b in zip(first["results"], again["results"], strict=True):
        assert a["status"] == b["status"] and a["counterexamples"] == b["counterexamples"]
    fresh = run("check", str(old), str(inv), "--no-cache", "--format", "json", cwd=tmp_path)
    assert json.loads(fresh.stdout)["summary"]["paths_reused"] == 0


SOLVER_INV = """severity allow < challenge < rate_limit < block

invariant triangle_is_empty:
  "Three linear terms, no two contradictory on a box: the linear stage leaves it to Z3."
  when client_rtt_ms + 100 * referer_entropy <= 1200
    and client_rtt_ms - 100 * referer_entropy >= 200
    and 100 * referer_entropy - 0.5 * client_rtt_ms >= 160
  ensure action == block
"""


def _without_times(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for part in [doc["summary"], *doc["results"]]:
        for key in ("seconds", "paths_checked", "paths_reused"):
            part.pop(key, None)
    return doc


@pytest.mark.slow
@pytest.mark.parametrize(
    "order",
    [
        ("edge-allow-block-1.0.0", "edge-allow-block"),
        ("edge-allow-block", "edge-allow-block-1.0.0"),
    ],
    ids=["upgrade", "rollback"],
)
def test_release_recheck_decides_only_changed_leaves(tmp_path, order) -> None:
    """The bundled releases differ in some leaf actions (1.1.0's release policy): checking one
    after the other with the cache decides only those leaves again, and prints exactly what
    a check without the cache prints."""
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "edge.inv").write_text((ROOT / "invariants" / "edge.inv").read_text())
    (inv / "risk.inv").write_text(SOLVER_INV)
    first, second = (str(ROOT / "examples" / f"{name}.clef") for name in order)
    res = run("check", first, str(inv), "--format", "json", cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    res = run("check", second, str(inv), "--format", "json", cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    cached = json.loads(res.stdout)
    fresh = run("check", second, str(inv), "--format", "json", "--no-cache", cwd=tmp_path)
    assert fresh.returncode == res.returncode
    assert _without_times(cached) == _without_times(json.loads(fresh.stdout))
    summary = cached["summary"]
    total = summary["paths_checked"] + summary["paths_reused"]
    assert total == json.loads(fresh.stdout)["summary"]["paths_checked"]
    # A few leaves changed action: far fewer than all (invariant, path) pairs are decided.
    assert 0 < summary["paths_checked"] < total // 10, summary


def test_one_leaf_update_of_the_bundled_example_rechecks_only_that_path(tmp_path) -> None:
    """SPEC §1: after a model update only the paths that changed are checked again, and §4:
    ``paths_checked`` + ``paths_reused`` cover every (invariant, path) pair.  The bundled
    1,201-node example with one leaf's confidence changed: one path per invariant is decided,
    the other 600 come from the cache (box-decided invariants included, on a small tree)."""
    src = json.loads((ROOT / "examples" / "edge-allow-block.json").read_text())
    (tmp_path / "old.json").write_text(json.dumps(src))
    leaf = src["tree"]
    while "action" not in leaf:
        leaf = leaf["left"]
    leaf["confidence"] = 0.5 if leaf["confidence"] != 0.5 else 0.25
    (tmp_path / "new.json").write_text(json.dumps(src))
    for name in ("old", "new"):
        done = run("compile", f"{name}.json", "-o", f"{name}.clef", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    inv = str(ROOT / "invariants" / "edge.inv")
    first = run("check", "old.clef", inv, "--format", "json", cwd=tmp_path)
    assert first.returncode in (0, 1), first.stderr
    second = run("check", "new.clef", inv, "--format", "json", cwd=tmp_path)
    assert second.returncode in (0, 1), second.stderr
    doc = json.loads(second.stdout)
    n_inv = doc["summary"]["invariants"]
    leaves = doc["model"]["leaves"]
    assert doc["summary"]["paths_checked"] == n_inv
    assert doc["summary"]["paths_reused"] == n_inv * (leaves - 1)
    fresh = run("check", "new.clef", inv, "--format", "json", "--no-cache", cwd=tmp_path)
    expect = json.loads(fresh.stdout)
    strip = ("seconds", "paths_checked", "paths_reused")
    assert [{k: v for k, v in r.items() if k not in strip} for r in doc["results"]] == [
        {k: v for k, v in r.items() if k not in strip} for r in expect["results"]
    ]
