"""A failed run leaves no output of an earlier run at its ``-o`` path (issue 16; SPEC §4: a run
that ends with status 2 leaves no output file behind), and never removes anything else.

Every test runs ``python -m clefprove`` in a subprocess, as a CI step would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EDGE_INV = ROOT / "invariants" / "edge.inv"


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "spec-toy.json", tmp_path / "model.json")
    assert run("compile", "model.json", "-o", "model.clef", cwd=tmp_path).returncode == 0
    shutil.copy(EDGE_INV, tmp_path / "edge.inv")
    (tmp_path / "typo.inv").write_text("invariant t:\n  ensure client_rt_ms > 0\n")
    return tmp_path


# (command that writes OUT, the same command failing with status 2)
COMMANDS = {
    "compile": (["compile", "model.json", "-o", "OUT"], ["compile", "missing.json", "-o", "OUT"]),
    "import": (None, ["import", "xgboost", "missing.json", "-o", "OUT"]),
    "check": (
        ["check", "model.clef", "edge.inv", "--no-cache", "--format", "json", "-o", "OUT"],
        ["check", "model.clef", "typo.inv", "--no-cache", "--format", "json", "-o", "OUT"],
    ),
    "diff": (
        ["diff", "model.clef", "model.clef", "--format", "json", "-o", "OUT"],
        ["diff", "model.clef", "missing.clef", "--format", "json", "-o", "OUT"],
    ),
    "gate": (
        ["gate", "model.clef", "edge.inv", "--no-cache", "--format", "json", "-o", "OUT"],
        ["gate", "model.clef", "typo.inv", "--no-cache", "--format", "json", "-o", "OUT"],
    ),
    "report": (
        ["report", "model.clef", "edge.inv", "-o", "OUT"],
        ["report", "model.clef", "typo.inv", "-o", "OUT"],
    ),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_failed_run_removes_the_previous_output(work: Path, command: str) -> None:
    good, bad = COMMANDS[command]
    out = work / ("out.html" if command == "report" else "out.file")
    if good is None:
        out.write_text("an earlier run's output\n")
    else:
        res = run(*[str(out) if a == "OUT" else a for a in good], cwd=work)
        assert res.returncode in (0, 1), res.stderr
    assert out.exists()
    res = run(*[str(out) if a == "OUT" else a for a in bad], cwd=work)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists(), "the earlier run's output is still there"
    assert not [p.name for p in work.iterdir() if p.name.startswith(".out.")]


def test_an_input_named_as_output_is_never_removed(work: Path) -> None:
    before = (work / "model.json").read_bytes()
    res = run("compile", "model.json", "-o", "model.json", cwd=work)
    assert res.returncode == 2 and "is also an input file" in res.stderr
    assert (work / "model.json").read_bytes() == before
    res = run("check", "model.clef", "typo.inv", "--no-cache", "-o", "typo.inv", cwd=work)
    assert res.returncode == 2 and (work / "typo.inv").exists()


def test_an_inv_file_below_an_input_directory_is_never_removed(work: Path) -> None:
    (work / "invs").mkdir()
    (work / "invs" / "bad.inv").write_text("invariant t:\n  ensure nope > 0\n")
    res = run("check", "model.clef", "invs", "--no-cache", "-o", "invs/bad.inv", cwd=work)
    assert res.returncode == 2
    assert (work / "invs" / "bad.inv").exists()


def test_links_directories_and_devices_are_left_alone(work: Path) -> None:
    target = work / "elsewhere.txt"
    target.write_text("keep\n")
    os.symlink(target, work / "link.json")
    (work / "adir").mkdir()
    for out in ("link.json", "adir", os.devnull):
        res = run("diff", "model.clef", "missing.clef", "-o", out, cwd=work)
        assert res.returncode == 2, res.stderr
    assert (work / "link.json").is_symlink() and target.read_text() == "keep\n"
    assert (work / "adir").is_dir()
    assert os.path.exists(os.devnull)


def test_commands_without_output_touch_nothing(work: Path) -> None:
    out = work / "out.json"
    out.write_text("unrelated\n")
    res = run("info", "missing.clef", cwd=work)
    assert res.returncode == 2
    assert out.read_text() == "unrelated\n"
