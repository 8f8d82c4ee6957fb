"""Kept runs (incremental/runs.py): an unchanged ``check`` answered before the model is loaded.

A hit must print what a run whose every invariant is a whole-result hit prints, in every
format; any change to the model, the invariant files, their paths or a result option is a
miss; a damaged or forged row is a miss, never a crash; and a hit imports no numpy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import runs
from clefprove.incremental.store import DB_NAME, CacheStore
from clefprove.report.formats import render_report
from clefprove.status import Verdict
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import (
    Counterexample,
    InvariantResult,
    ModelInfo,
    RelationalCounterexample,
    Report,
)
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

RELATIONAL = """severity allow < challenge < rate_limit < block

invariant rtt_monotone:
  ensure monotone(client_rtt_ms)

invariant entropy_stable:
  when path_depth <= 3
  ensure stable(referer_entropy, 0.5)
"""


def _report() -> Report:
    """A report with every field away from its default."""
    cx = Counterexample(
        {"x": 1.5, "n": 2, "c": "curl", "b": True},
        "block",
        0.75,
        12,
        ("x <= 3", "n > 1"),
        ("x <= 3 and n > 1",),
    )
    ens = Counterexample({"x": 1.0, "n": 0}, "allow", 1, -1, (), (), (3, 5, 7))
    rel = RelationalCounterexample(
        ({"x": 1, "n": 0}, {"x": 2, "n": 0}),
        ("block", "allow"),
        (0.5, 0.625),
        (3, 4),
        (("a",), ("b", "c")),
        "x",
        (("x <= 1",), ("x > 1",)),
    )
    ens_rel = RelationalCounterexample(
        ({"x": 1, "n": 0}, {"x": 2, "n": 0}),
        ("block", "allow"),
        (0.5, 0.625),
        (-1, -1),
        (("x <= 1",), ("x > 1",)),
        "x",
        (("x <= 1",), ("x > 1",)),
        ((3, 5), (4, 5)),
    )
    violated = InvariantResult(
        "a",
        "inv/a.inv",
        3,
        Verdict.VIOLATED,
        vacuous=False,
        violating_paths=4,
        unknown_paths=0,
        counterexamples=(cx, ens),
        seconds=1.5,
        paths_checked=10,
        paths_reused=5,
        description="what a says",
        column=7,
        solver_paths=2,
        warnings=("a warning",),
        relation=None,
        proved_share=0.5,
    )
    relational = InvariantResult(
        "b",
        "inv/b.inv",
        9,
        Verdict.VIOLATED,
        vacuous=True,
        violating_paths=1,
        counterexamples=(rel, ens_rel),
        paths_checked=3,
        relation="monotone(x)",
    )
    holds = InvariantResult("c", "inv/b.inv", 12, Verdict.HOLDS, paths_reused=8)
    info = ModelInfo("m.clef", "ab" * 32, 9, 5, "name", "1.2", True)
    return Report(info, (violated, relational, holds), 2.0, ("a report warning",))


def _as_hit(report: Report, seconds: float) -> Report:
    share = seconds / len(report.results)
    return dataclasses.replace(
        report,
        seconds=seconds,
        results=tuple(
            dataclasses.replace(
                r,
                seconds=share,
                paths_checked=0,
                paths_reused=r.paths_checked + r.paths_reused,
                solver_paths=0,
            )
            for r in report.results
        ),
    )


def test_round_trip_keeps_every_field() -> None:
    report = _report()
    assert runs.decode(runs.encode(report), 3.0) == _as_hit(report, 3.0)


def test_every_field_is_known() -> None:
    """A new field of a result type must be kept by runs.encode/decode (then add it here)."""
    known = {
        Report: {"model", "results", "seconds", "warnings"},
        ModelInfo: {"path", "sha256", "nodes", "leaves", "name", "version", "from_source"},
        InvariantResult: {
            "invariant",
            "file",
            "line",
            "status",
            "vacuous",
            "violating_paths",
            "unknown_paths",
            "counterexamples",
            "seconds",
            "paths_checked",
            "paths_reused",
            "description",
            "column",
            "solver_paths",
            "warnings",
            "relation",
            "proved_share",
        },
        Counterexample: {"input", "action", "confidence", "leaf", "path", "region", "leaves"},
        RelationalCounterexample: {
            "inputs",
            "actions",
            "confidences",
            "leaves",
            "paths",
            "feature",
            "regions",
            "tree_leaves",
        },
    }
    for cls, names in known.items():
        assert {f.name for f in dataclasses.fields(cls)} == names, cls.__name__


def test_unknown_results_are_not_kept(tmp_path: Path) -> None:
    report = _report()
    unknown = dataclasses.replace(
        report,
        results=(dataclasses.replace(report.results[0], status=Verdict.UNKNOWN),),
    )
    partly = dataclasses.replace(
        report, results=(dataclasses.replace(report.results[2], unknown_paths=1),)
    )
    with CacheStore(tmp_path) as store:
        for i, r in enumerate((unknown, partly)):
            key = bytes([i]) * 32
            runs.keep(store, key, r)
            assert runs.lookup(store, key, 0.0) is None
        runs.keep(store, b"k" * 32, report)
        assert runs.lookup(store, b"k" * 32, 1.0) == _as_hit(report, 1.0)


def test_run_key_names_every_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.clef").write_bytes(b"model")
    Path("a.inv").write_bytes(b"one")
    Path("b.inv").write_bytes(b"two")
    base = CheckOptions(jobs=1)
    key = runs.run_key("m.clef", ["a.inv", "b.inv"], base)
    assert key is not None
    assert runs.run_key("m.clef", ["a.inv", "b.inv"], base) == key
    # nothing a result shows changes: the same run
    assert runs.run_key("m.clef", ["a.inv", "b.inv"], CheckOptions(jobs=1, smtlib_dir="d")) == key
    others = [
        runs.run_key("m.clef", ["b.inv", "a.inv"], base),
        runs.run_key("./m.clef", ["a.inv", "b.inv"], base),
        runs.run_key("m.clef", ["a.inv"], base),
        runs.run_key("m.clef", ["a.inv", "b.inv"], CheckOptions(jobs=2)),
        runs.run_key("m.clef", ["a.inv", "b.inv"], CheckOptions(jobs=1, counterexamples=4)),
        runs.run_key("m.clef", ["a.inv", "b.inv"], CheckOptions(jobs=1, timeout=5)),
    ]
    Path("m.clef").write_bytes(b"model2")
    others.append(runs.run_key("m.clef", ["a.inv", "b.inv"], base))
    Path("m.clef").write_bytes(b"model")
    Path("b.inv").write_bytes(b"two ")
    others.append(runs.run_key("m.clef", ["a.inv", "b.inv"], base))
    assert None not in others
    assert len({key, *others}) == len(others) + 1


def test_run_key_reads_only_regular_files(tmp_path: Path) -> None:
    (tmp_path / "a.inv").write_text("x")
    model = tmp_path / "m.clef"
    assert runs.run_key(str(model), [str(tmp_path / "a.inv")], CheckOptions()) is None
    os.mkfifo(model)  # reading a FIFO here would take what the loader must read
    assert runs.run_key(str(model), [str(tmp_path / "a.inv")], CheckOptions()) is None
    assert runs.run_key(str(tmp_path), [str(tmp_path / "a.inv")], CheckOptions()) is None


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: object, at: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _set(doc: object, at: tuple[object, ...], value: object) -> object:
    if not at:
        return value
    parent = doc
    for k in at[:-1]:
        parent = parent[k]  # type: ignore[index]
    parent[at[-1]] = value  # type: ignore[index]
    return doc


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_forged_rows_are_misses_or_reports(tmp_path: Path, data: st.DataObject) -> None:
    """A row with a good checksum but any JSON (a valid report with one value replaced, or
    anything at all) is a miss or a report every format renders; never an exception."""
    doc = json.loads(runs.encode(_report()))
    if data.draw(st.booleans()):
        at = data.draw(st.sampled_from(_paths(doc)))
        doc = _set(doc, at, data.draw(_json))
    else:
        doc = data.draw(_json)
    with CacheStore(tmp_path / "c") as store:
        store.store((), [(b"k" * 32, json.dumps(doc))])
        got = runs.lookup(store, b"k" * 32, 0.5)
    if got is not None:
        for fmt in ("text", "json", "sarif", "junit", "github", "gitlab"):
            render_report(got, fmt, color=False, verbose=True, quiet=False)


def test_damaged_row_is_set_aside(tmp_path: Path) -> None:
    with CacheStore(tmp_path) as store:
        runs.keep(store, b"k" * 32, _report())
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE result SET value = value || ' '")
    conn.commit()
    conn.close()
    with CacheStore(tmp_path) as store:
        assert runs.lookup(store, b"k" * 32, 0.0) is None
        assert any("corrupt proof cache" in w for w in store.warnings)


# ---------------------------------------------------------------- the command


def _work(tmp_path: Path) -> Path:
    for name in ("edge-allow-block.clef", "edge-allow-block-1.0.0.clef"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "inv").mkdir()
    shutil.copy(ROOT / "invariants" / "edge.inv", tmp_path / "inv" / "edge.inv")
    (tmp_path / "inv" / "rel.inv").write_text(RELATIONAL)
    return tmp_path


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("check", *args, "--jobs", "1", cwd=cwd, unset=["CLEFPROVE_CACHE"])


def _without_times(text: str) -> str:
    text = re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', text)
    text = re.sub(r'time="[0-9.e-]+"', 'time="0"', text)
    return re.sub(r"[0-9]+\.[0-9]+ s\b", "0 s", text)


def _forget_run(cwd: Path, model: str, files: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(cwd)
    key = runs.run_key(model, files, CheckOptions(jobs=1))
    assert key is not None
    conn = sqlite3.connect(cwd / ".clefprove-cache" / DB_NAME)
    assert conn.execute("DELETE FROM result WHERE key = ?", (key,)).rowcount == 1
    conn.commit()
    conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["edge-allow-block.clef", "edge-allow-block-1.0.0.clef"])
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit"])
def test_hit_prints_what_whole_result_hits_print(
    tmp_path: Path, model: str, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _work(tmp_path)
    first = _check(work, model, "inv", "--format", fmt)
    hit = _check(work, model, "inv", "--format", fmt)
    assert first.returncode == hit.returncode == 1, hit.stderr  # the relational ones fail
    _forget_run(work, model, ["inv/edge.inv", "inv/rel.inv"], monkeypatch)
    walked = _check(work, model, "inv", "--format", fmt)
    assert walked.returncode == hit.returncode
    assert _without_times(hit.stdout) == _without_times(walked.stdout)
    assert hit.stderr == walked.stderr
    if fmt == "json":
        doc = json.loads(hit.stdout)
        assert doc["summary"]["paths_checked"] == 0
        fresh = json.loads(first.stdout)
        for a, b in zip(doc["results"], fresh["results"], strict=True):
            assert a["status"] == b["status"]
            assert a["counterexamples"] == b["counterexamples"]
            assert a["paths_reused"] == b["paths_checked"] + b["paths_reused"]


@pytest.mark.slow
def test_hit_loads_no_model_and_edits_are_misses(tmp_path: Path) -> None:
    work = _work(tmp_path)
    probe = (
        "import sys\n"
        "from clefprove.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write(f'numpy={\"numpy\" in sys.modules} rc={rc}\\n')\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "CLEFPROVE_CACHE"}
        env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever the working directory
        return subprocess.run(
            [sys.executable, "-c", probe, "check", *args, "--jobs", "1"],
            cwd=work,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    assert "numpy=True rc=0" in run("edge-allow-block.clef", "inv/edge.inv").stderr
    hit = run("edge-allow-block.clef", "inv/edge.inv")
    assert "numpy=False rc=0" in hit.stderr
    assert "0 paths checked" in hit.stdout
    # an invariant file edited: a miss, decided again
    (work / "inv" / "edge.inv").write_text(
        (work / "inv" / "edge.inv").read_text()
        + "\ninvariant never_blocks:\n  ensure action != block\n"
    )
    edited = run("edge-allow-block.clef", "inv/edge.inv")
    assert "numpy=True rc=1" in edited.stderr
    assert "VIOLATED never_blocks" in edited.stdout
    # the model's bytes replaced under the same name: a miss
    shutil.copy(work / "edge-allow-block-1.0.0.clef", work / "edge-allow-block.clef")
    other = run("edge-allow-block.clef", "inv/edge.inv")
    assert "numpy=True rc=1" in other.stderr
    assert "VIOLATED blocks_are_confident" in other.stdout
    # --no-cache never reads it
    fresh = run("edge-allow-block.clef", "inv/edge.inv", "--no-cache")
    assert "numpy=True rc=1" in fresh.stderr
    assert ", 0 reused" in fresh.stdout


@pytest.mark.slow
def test_forged_run_row_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = _work(tmp_path)
    model = "edge-allow-block-1.0.0.clef"
    first = _check(work, model, "inv", "--format", "json")
    monkeypatch.chdir(work)
    key = runs.run_key(model, ["inv/edge.inv", "inv/rel.inv"], CheckOptions(jobs=1))
    assert key is not None
    with CacheStore(work / ".clefprove-cache") as store:
        store.store((), [(key, json.dumps({"model": [1], "results": "x"}))])
    again = _check(work, model, "inv", "--format", "json")
    assert again.returncode == first.returncode == 1, again.stderr
    assert again.stderr == ""
    doc = json.loads(again.stdout)
    assert [r["status"] for r in doc["results"]] == [
        r["status"] for r in json.loads(first.stdout)["results"]
    ]
    # the forged row was replaced by the run's report
    with CacheStore(work / ".clefprove-cache") as store:
        assert runs.lookup(store, key, 0.0) is not None


def test_bad_input_creates_no_cache(tmp_path: Path) -> None:
    work = _work(tmp_path)
    bad = _check(work, "missing.clef", "inv")
    assert bad.returncode == 2
    assert not (work / ".clefprove-cache").exists()
    (work / "broken.clef").write_bytes(b"CLEF garbage")
    assert _check(work, "broken.clef", "inv").returncode == 2
    assert not (work / ".clefprove-cache").exists()


def test_proof_cache_takes_over_every_attribute(tmp_path: Path) -> None:
    """The cache opened for the lookup is handed on, not reopened: every attribute goes."""
    from clefprove.incremental.cache import open_cache

    store = CacheStore(tmp_path)
    store.warnings.append("seen")
    before = dict(vars(store))
    cache = open_cache(None, opened=store)
    assert cache is not None
    assert vars(cache) == before
    assert cache.conn.execute("SELECT 1").fetchone() == (1,)
    assert store.disabled
    cache.close()


def test_a_model_rewritten_while_checked_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key names the files' bytes before the run; a file replaced between that and the
    load (a deploy writing the model under the check) leaves no report under the old name,
    so that the old bytes, checked again, print their own verdict."""
    from clefprove.cli.main import main
    from clefprove.model import loading

    work = _work(tmp_path)
    monkeypatch.chdir(work)
    monkeypatch.delenv("CLEFPROVE_CACHE", raising=False)
    model = work / "edge-allow-block.clef"
    good = model.read_bytes()
    real = loading.load_any

    def swapped(path, *args, **kwargs):
        model.write_bytes((work / "edge-allow-block-1.0.0.clef").read_bytes())
        return real(path, *args, **kwargs)

    argv = ["check", "edge-allow-block.clef", "inv/edge.inv", "--jobs", "1", "--format", "json"]
    monkeypatch.setattr(loading, "load_any", swapped)
    assert main(argv) == 1  # the 1.0.0 bytes were checked
    monkeypatch.setattr(loading, "load_any", real)
    model.write_bytes(good)
    capsys.readouterr()
    assert main(argv) == 0  # the 1.1.0 bytes again: not the report kept for 1.0.0
    assert json.loads(capsys.readouterr().out)["summary"]["violated"] == 0
    assert main(argv) == 0  # and this run is kept (a hit)
    assert json.loads(capsys.readouterr().out)["summary"]["paths_checked"] == 0


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_ensemble_run_is_kept_and_prints_what_a_fresh_run_prints(
    tmp_path: Path, fmt: str
) -> None:
    """A tree ensemble's run (holding with its proved share, violated with per-tree leaves,
    relational) is kept and answered like a single tree's."""
    from tests.ensembles.test_cli import INVARIANTS, TOY

    r = run_cli("compile", TOY, "-o", tmp_path / "toy.clef")
    assert r.returncode == 0, r.stderr
    (tmp_path / "toy.inv").write_text(INVARIANTS)
    args = ("toy.clef", "toy.inv", "--format", fmt)
    first, kept = _check(tmp_path, *args), _check(tmp_path, *args)
    fresh = _check(tmp_path, *args, "--no-cache")
    assert first.returncode == kept.returncode == fresh.returncode == 1, first.stderr
    if fmt == "json":
        doc = json.loads(kept.stdout)
        assert doc["summary"]["paths_checked"] == 0
        assert any(r.get("proved_share") == 1.0 for r in doc["results"])
    assert _without_counts(kept.stdout) == _without_counts(fresh.stdout)
    assert _without_counts(first.stdout) == _without_counts(fresh.stdout)


def _without_counts(text: str) -> str:
    """*text* without timings and the checked/reused split (a kept run reuses every path)."""
    text = re.sub(r'"paths_(checked|reused)": [0-9]+', '"paths": 0', _without_times(text))
    return re.sub(r"[0-9]+ paths checked, [0-9]+ reused", "paths", text)


@pytest.mark.parametrize("edit", ["model", "model source", "invariant", "new file"])
def test_a_file_replaced_during_the_run_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    """The key is taken before the model is loaded: a file replaced in between (a deploy
    writing the model while a check runs) must not leave the report of the new bytes kept
    under the key of the old ones, where a later run of the old bytes would print it."""
    import clefprove.model.loading as loading
    from clefprove.cli.main import main

    work = _work(tmp_path)
    (work / "inv" / "rel.inv").unlink()
    monkeypatch.chdir(work)
    monkeypatch.delenv("CLEFPROVE_CACHE", raising=False)
    suffix = ".json" if edit == "model source" else ".clef"
    for name in ("edge-allow-block-1.0.0", "edge-allow-block"):
        shutil.copy(EXAMPLES / (name + suffix), name + suffix)
    bad, good, model = f"edge-allow-block-1.0.0{suffix}", f"edge-allow-block{suffix}", f"m{suffix}"
    shutil.copy(bad, model)  # violates blocks_are_confident
    edge = (work / "inv" / "edge.inv").read_text()
    load_any = loading.load_any

    def replaced_meanwhile(path: str, *a: object, **k: object) -> object:
        if edit.startswith("model"):
            shutil.copy(good, model)
        elif edit == "invariant":
            cut = edge.index("invariant blocks_are_confident")
            (work / "inv" / "edge.inv").write_text(edge[:cut])
        else:
            (work / "inv" / "more.inv").write_text("invariant more:\n  ensure true\n")
        return load_any(path, *a, **k)

    args = ["check", model, "inv", "--jobs", "1", "--format", "json"]
    monkeypatch.setattr(loading, "load_any", replaced_meanwhile)
    main(args)
    monkeypatch.setattr(loading, "load_any", load_any)
    shutil.copy(bad, model)
    (work / "inv" / "edge.inv").write_text(edge)
    (work / "inv" / "more.inv").unlink(missing_ok=True)
    capsys.readouterr()
    again = main(args)
    kept = json.loads(capsys.readouterr().out)
    fresh = main([*args, "--no-cache"])
    assert again == fresh == 1
    doc = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in kept["results"]] == [r["status"] for r in doc["results"]]
    assert [r["invariant"] for r in kept["results"]] == [r["invariant"] for r in doc["results"]]


def test_code_stamp_names_the_grammar(tmp_path: Path) -> None:
    """The DSL grammar is read at run time (the Lark route): an edited grammar.lark must not
    answer with what the earlier grammar parsed, as an edited module does not."""
    package = tmp_path / "clefprove"
    (package / "dsl").mkdir(parents=True)
    (package / "dsl" / "parser.py").write_text("x = 1\n")
    (package / "dsl" / "grammar.lark").write_text("item: NAME\n")
    before = runs._code_stamp(str(package))
    (package / "dsl" / "grammar.lark").write_text("item: NAME NAME\n")
    assert runs._code_stamp(str(package)) != before
    assert (ROOT / "clefprove" / "dsl" / "grammar.lark").is_file()  # where it is read from


def _without_split(text: str) -> str:
    """*text* without timings and without the checked/reused split of the paths."""
    text = _without_times(text)
    text = re.sub(r'"paths_(checked|reused)": [0-9]+', '"paths_split": 0', text)
    return re.sub(r"[0-9]+ paths checked, [0-9]+ reused", "N paths", text)


@pytest.mark.slow
def test_hit_prints_what_a_fresh_run_prints(tmp_path: Path) -> None:
    """The contract itself: a kept run prints what ``--no-cache`` prints (but for timings and
    the checked/reused split), in every format and with every flag that changes the output, for
    a tree (violated, relational, vacuous) and an ensemble compiled from JSON source."""
    work = _work(tmp_path)
    (work / "inv" / "vacuous.inv").write_text(
        "invariant never_there:\n  when client_rtt_ms < 0\n  ensure action == block\n"
    )
    shutil.copy(ROOT / "tests" / "fixtures" / "ensemble_toy.json", work / "ens.json")
    (work / "ens").mkdir()
    (work / "ens" / "e.inv").write_text(
        "severity allow < challenge < block\n"
        "invariant tor_blocked:\n  when is_tor\n  ensure action == block\n"
        "invariant rtt_monotone:\n  ensure monotone(client_rtt_ms)\n"
    )
    runs_ = [
        ("edge-allow-block-1.0.0.clef", "inv", fmt, *flags)
        for fmt in ("text", "json", "sarif", "junit", "github", "gitlab")
        for flags in ((), ("-v",))
    ]
    runs_ += [
        ("edge-allow-block-1.0.0.clef", "inv", "text", "-q"),
        ("edge-allow-block-1.0.0.clef", "inv", "text", "--color", "always"),
        ("ens.json", "ens", "text", "-v"),
        ("ens.json", "ens", "json"),
    ]
    for model, inv, fmt, *flags in runs_:
        args = [model, inv, "--format", fmt, "--counterexamples", "2", *flags]
        shutil.rmtree(work / ".clefprove-cache", ignore_errors=True)
        first = _check(work, *args)
        kept = _check(work, *args)
        fresh = _check(work, *args, "--no-cache")
        assert first.returncode == kept.returncode == fresh.returncode == 1, kept.stderr
        assert _without_split(kept.stdout) == _without_split(fresh.stdout), args
        assert kept.stderr == fresh.stderr, args
        if fmt == "json":
            assert json.loads(kept.stdout)["summary"]["paths_checked"] == 0  # a kept run
