"""docs/ci.md's setups, run with the real clients: pre-commit ``try-repo``, sarif-tools,
junitparser; the commands of the GitHub Actions and GitLab CI snippets in a repository laid out
as the snippets assume.  A client that is not installed skips its test with the reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOC = (ROOT / "docs" / "ci.md").read_text()

HOLDS = """invariant slow_not_allowed:
  "Slow clients are never allowed straight through."
  when client_rtt_ms > 300
  ensure action != allow
"""


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository laid out as docs/ci.md assumes: models/edge.clef and invariants/."""
    r = tmp_path / "repo"
    (r / "models").mkdir(parents=True)
    shutil.copy(EXAMPLES / "spec-toy.clef", r / "models" / "edge.clef")
    shutil.copytree(ROOT / "invariants", r / "invariants")
    git("init", "-q", cwd=r)
    return r


def clefprove(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def doc_block(language: str, marker: str) -> str:
    """The fenced *language* block of docs/ci.md that contains *marker*."""
    for block in re.findall(rf"```{language}\n(.*?)```", DOC, re.S):
        if marker in block:
            return block
    raise AssertionError(f"no {language} block with {marker!r} in docs/ci.md")


def doc_commands(block: str) -> list[list[str]]:
    """The ``clefprove ...`` command lines of a snippet, split as a shell would (no globs)."""
    import shlex

    out = []
    for line in block.splitlines():
        line = line.strip().removeprefix("- ").removeprefix("run: ")
        if line.startswith("clefprove "):
            out.append(shlex.split(line.split("||")[0]))
    return out


# --- GitHub Actions ----------------------------------------------------------------------------


def test_github_workflow_commands_run_as_documented(repo: Path) -> None:
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the [test] extra")
    workflow = yaml.safe_load(doc_block("yaml", "upload-sarif"))
    steps = workflow["jobs"]["prove"]["steps"]
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in steps)
    commands = doc_commands("\n".join(s.get("run", "") for s in steps))
    assert len(commands) == 2
    annotations = clefprove(*commands[0][1:], cwd=repo)
    assert annotations.returncode == 1  # the toy model violates three invariants
    lines = annotations.stdout.splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 3 and lines[-1].startswith("::notice ")
    for line in errors:  # ::error file=F,line=L,col=C,title=T::message
        m = re.fullmatch(r"::error file=([^,]+),line=(\d+),col=(\d+),title=([^:]+)::(.+)", line)
        assert m and m.group(1) == "invariants/edge.inv", line
    sarif = clefprove(*commands[1][1:], cwd=repo)
    assert sarif.returncode == 1
    log = json.loads((repo / "clefprove.sarif").read_text())
    assert len(log["runs"][0]["results"]) == 3


def test_github_annotations_cannot_be_injected(repo: Path) -> None:
    (repo / "invariants" / "evil.inv").write_text(
        'invariant evil:\n  "line one\\n::error file=x::forged, 100%"\n  ensure action != block\n'
    )
    res = clefprove(
        "check",
        "models/edge.clef",
        "invariants/evil.inv",
        "--format",
        "github",
        "--no-cache",
        cwd=repo,
    )
    assert res.returncode == 1
    assert [line[:8] for line in res.stdout.splitlines()] == ["::error ", "::notice"]
    assert "%0A::error file=x::forged, 100%25" in res.stdout


# --- sarif-tools (GitHub's view of the SARIF, and its GitLab export) ---------------------------


def _sarif_tools() -> str:
    tool = shutil.which("sarif")
    if tool is None:
        pytest.skip("sarif-tools is not installed (pip install sarif-tools; it is in [test])")
    return tool


def test_sarif_tools_sees_only_findings(repo: Path) -> None:
    tool = _sarif_tools()
    sub = repo / "models"
    # from a subdirectory: locations are still relative to the repository root
    res = clefprove("check", "edge.clef", "../invariants", "--no-cache", "-o", "v.sarif", cwd=sub)
    assert res.returncode == 1
    failing = subprocess.run(
        [tool, "--check", "error", "summary", "v.sarif"],
        cwd=sub,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failing.returncode != 0 and "error: 3" in failing.stdout
    cc = subprocess.run(
        [tool, "codeclimate", "v.sarif", "-o", "cc.json"],
        cwd=sub,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cc.returncode == 0, cc.stderr
    issues = json.loads((sub / "cc.json").read_text())
    assert len(issues) == 3
    assert {i["location"]["path"] for i in issues} == {"invariants/edge.inv"}
    # everything holds: no alert at all (each holding invariant used to be one)
    shutil.copy(EXAMPLES / "edge-allow-block.clef", sub / "new.clef")
    ok = clefprove("check", "new.clef", "../invariants", "--no-cache", "-o", "ok.sarif", cwd=sub)
    assert ok.returncode == 0, ok.stderr
    clean = subprocess.run(
        [tool, "--check", "note", "summary", "ok.sarif"],
        cwd=sub,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert clean.returncode == 0, clean.stdout
    subprocess.run(
        [tool, "codeclimate", "ok.sarif", "-o", "cc-ok.json"],
        cwd=sub,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert json.loads((sub / "cc-ok.json").read_text()) == []


# --- GitLab CI (JUnit via junitparser, code quality) -------------------------------------------


def test_gitlab_ci_snippet(repo: Path) -> None:
    junitparser = pytest.importorskip(
        "junitparser", reason="junitparser is not installed (it is in the [test] extra)"
    )
    yaml = pytest.importorskip("yaml", reason="pyyaml is in the [test] extra")
    job = yaml.safe_load(doc_block("yaml", "codequality"))["clefprove"]
    commands = doc_commands("\n".join(job["script"]))
    assert len(commands) == 3
    codes = [clefprove(*c[1:], cwd=repo).returncode for c in commands]
    assert codes == [1, 1, 1]
    reports = job["artifacts"]["reports"]
    xml = junitparser.JUnitXml.fromfile(str(repo / reports["junit"]))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == 5
    failed = [c for c in cases if not c.is_passed]
    assert len(failed) == 3
    for c in cases:
        assert c.classname == "edge"
        assert c._elem.get("file") == "invariants/edge.inv" and int(c._elem.get("line")) > 0
    assert all(c.result[0].message.startswith("violated on 1 path") for c in failed)
    quality = json.loads((repo / reports["codequality"]).read_text())
    assert len(quality) == 3
    for issue in quality:  # the fields GitLab's code-quality report requires
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
        assert issue["severity"] == "critical"
        assert issue["location"] == {
            "path": "invariants/edge.inv",
            "lines": issue["location"]["lines"],
        }
    assert len({i["fingerprint"] for i in quality}) == 3


# --- pre-commit try-repo -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as one commit (tracked and new files), so try-repo installs it once."""
    if shutil.which("pre-commit") is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit; it is in [test])")
    snap = tmp_path_factory.mktemp("hooks") / "clefprove"
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (snap / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / name, follow_symlinks=False)
    git("init", "-q", cwd=snap)
    git("add", "-A", cwd=snap)
    git("commit", "-q", "-m", "snapshot", cwd=snap)
    return snap


def try_repo(hook_repo: Path, target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(hook_repo.parent / "pre-commit-home")}
    env.pop("PYTHONPATH", None)  # the hook runs the installed copy, as for a user
    return subprocess.run(
        ["pre-commit", "try-repo", str(hook_repo), "clefprove-gate", *args],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_pre_commit_hook_as_documented(hook_repo: Path, repo: Path) -> None:
    config = doc_block("toml", "[tool.clefprove]")
    (repo / "pyproject.toml").write_text(config)
    (repo / "package.json").write_text("{}\n")
    (repo / "invariants" / "edge.inv").unlink()
    (repo / "invariants" / "holds.inv").write_text(HOLDS)
    git("add", "-A", cwd=repo)
    ok = try_repo(hook_repo, repo, "--all-files")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout
    skipped = try_repo(hook_repo, repo, "--files", "package.json")
    assert skipped.returncode == 0 and "Skipped" in skipped.stdout, skipped.stdout
    (repo / "invariants" / "never_block.inv").write_text(
        "invariant never_block:\n  ensure action != block\n"
    )
    git("add", "-A", cwd=repo)
    bad = try_repo(hook_repo, repo, "--files", "invariants/never_block.inv")
    assert bad.returncode == 1 and "Failed" in bad.stdout, bad.stdout
    assert "1 violated" in bad.stdout
