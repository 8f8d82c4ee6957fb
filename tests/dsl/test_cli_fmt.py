"""``clefprove fmt`` as a subprocess: exit codes, atomic rewrites, errors without tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
EDGE = ROOT / "invariants" / "edge.inv"
UGLY = "invariant t:when is_tor   ensure action!=allow\n"
PRETTY = "invariant t:\n  when is_tor\n  ensure action != allow\n"


def fmt(*args: str, stdin: bytes | None = None, cwd: Path | None = None):
    return run_cli("fmt", *args, stdin=stdin, cwd=cwd, text=False, timeout=60)


def test_check_passes_on_canonical_files() -> None:
    done = fmt("--check", str(EDGE), str(ROOT / "invariants"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


def test_check_lists_files_that_would_change_and_changes_nothing(tmp_path: Path) -> None:
    ugly = tmp_path / "ugly.inv"
    ugly.write_text(UGLY)
    (tmp_path / "fine.inv").write_text(PRETTY)
    done = fmt("--check", str(tmp_path))
    assert done.returncode == 1
    assert done.stdout.decode().splitlines() == [str(ugly)]
    assert ugly.read_text() == UGLY


def test_fmt_rewrites_in_place_then_check_passes(tmp_path: Path) -> None:
    ugly = tmp_path / "ugly.inv"
    ugly.write_text(UGLY)
    ugly.chmod(0o640)
    done = fmt(str(ugly))
    assert done.returncode == 0, done.stderr
    assert ugly.read_text() == PRETTY
    assert ugly.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ugly.inv"]  # no temporary left
    assert fmt("--check", str(ugly)).returncode == 0


def test_stdin_to_stdout() -> None:
    done = fmt("-", stdin=UGLY.encode())
    assert done.returncode == 0
    assert done.stdout.decode() == PRETTY
    assert fmt("--check", "-", stdin=UGLY.encode()).returncode == 1
    assert fmt("--check", "-", stdin=PRETTY.encode()).returncode == 0


def test_syntax_error_exits_2_with_caret_and_changes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.inv"
    bad.write_text("invariant t:\n  when (is_tor\n  ensure true\n")
    ugly = tmp_path / "ugly.inv"
    ugly.write_text(UGLY)
    done = fmt(str(tmp_path))
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "Traceback" not in err
    assert err.splitlines()[:3] == [
        f"{bad}:2:8: unclosed '('",
        "      when (is_tor",
        "           ^",
    ]
    assert ugly.read_text() == UGLY  # all or nothing


def test_missing_file_and_empty_directory_exit_2(tmp_path: Path) -> None:
    done = fmt(str(tmp_path / "nope.inv"))
    assert done.returncode == 2
    assert (
        done.stderr.decode()
        == f"clefprove: error: {tmp_path / 'nope.inv'}: no such file or directory\n"
    )
    done = fmt(str(tmp_path))
    assert done.returncode == 2
    assert "no .inv files" in done.stderr.decode()


_JUNK = st.sampled_from(["(", ")", "{", "@", '"', "1e", "\xff", "\x00", "ensure", "invariant"])


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(st.integers(0, 600), _JUNK)
def test_mutated_files_exit_0_or_2_without_traceback(tmp_path_factory, at: int, junk: str) -> None:
    raw = EDGE.read_bytes()
    at = min(at, len(raw))
    data = raw[:at] + junk.encode("latin-1") + raw[at:]
    path = tmp_path_factory.mktemp("m") / "m.inv"
    path.write_bytes(data)
    done = fmt("--check", str(path))
    assert done.returncode in (0, 1, 2)
    assert b"Traceback" not in done.stderr
    if done.returncode == 2:
        assert done.stderr.decode().startswith(f"{path}:")
