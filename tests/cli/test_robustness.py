"""Robustness of every command against bad input, bad output paths and a hostile environment.

SPEC §4: bad input is exit status 2 with one readable line (``file:line:col``, the source line
and a caret for the DSL), never a traceback or a hang; an output file is written whole or not at
all; a run that ends with status 2 leaves no output file behind and does not touch one that was
there before; a report of violations (status 1) is written in full.

Every test runs ``python -m clefprove`` in a subprocess, as a user or a CI job would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
TOY_CLEF = ROOT / "examples" / "spec-toy.clef"
TOY_JSON = ROOT / "examples" / "spec-toy.json"
EDGE_INV = ROOT / "invariants" / "edge.inv"
SENTINEL = b"pre-existing output of an earlier run\n"


def assert_stale_output_gone(out: Path, argv: list[str]) -> None:
    """A failed run removes the file at its own ``-o`` path (an earlier run's output, which a
    CI step must not mistake for this run's); a file it was not asked to write stays."""
    if "-o" in argv and str(out) in argv:
        assert not out.exists(), "stale output left behind"
    else:
        assert out.read_bytes() == SENTINEL


HOLDS = """invariant slow_not_allowed:
  when client_rtt_ms > 300
  ensure action != allow
"""


def clefprove(
    *args: str | os.PathLike[str],
    cwd: Path,
    stdin: bytes | None = None,
    stdout: int | None = subprocess.PIPE,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI in a fresh interpreter; *stdin* is bytes to feed, or nothing (/dev/null)."""
    return run_cli(*args, cwd=cwd, stdin=stdin, stdout=stdout, text=False, timeout=timeout)


def assert_usage_error(res: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    """Exit 2, no traceback, one ``clefprove: error:`` line (or a DSL caret display)."""
    err = res.stderr.decode("utf-8", errors="replace")
    assert res.returncode == 2, (res.returncode, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.splitlines()
    assert lines, "no error message"
    if lines[0].startswith("clefprove: error: "):
        assert len(lines) == 1, err
    else:  # a DSL diagnostic: file:line:col: message / source line / caret
        head = lines[0].split(":")
        assert len(head) >= 4 and head[1].isdigit() and head[2].isdigit(), err
        assert len(lines) >= 3 and lines[2].strip() == "^", err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(TOY_CLEF, tmp_path / "model.clef")
    shutil.copy(TOY_JSON, tmp_path / "model.json")
    shutil.copy(EDGE_INV, tmp_path / "edge.inv")
    (tmp_path / "holds.inv").write_text(HOLDS)
    return tmp_path


# --- bad model files, for every command that reads one -----------------------------------------

BAD_MODELS = {
    "missing": None,
    "directory": "dir",
    "empty": b"",
    "garbage": bytes(range(256)) * 64,
    "not-utf8-json": b'{"name": "caf\xe9"}',
    "truncated-clef": TOY_CLEF.read_bytes()[:-5],
    "flipped-clef": None,  # filled in below: one byte of the body changed
    "json-array": b"[1, 2, 3]",
    "deep-json": b"[" * 100_000 + b"]" * 100_000,
}
_flipped = bytearray(TOY_CLEF.read_bytes())
_flipped[100] ^= 0xFF
BAD_MODELS["flipped-clef"] = bytes(_flipped)


def _crafted_nan_threshold() -> bytes:
    """The toy model with a NaN root threshold and a valid digest: only validation catches it
    (loading such a file through mmap used to end in a BufferError traceback)."""
    import hashlib
    import struct

    data = bytearray(TOY_CLEF.read_bytes()[:-32])
    nodes_offset = struct.unpack_from("<Q", data, 48)[0]
    struct.pack_into("<d", data, nodes_offset, float("nan"))
    return bytes(data) + hashlib.sha256(data).digest()


BAD_MODELS["crafted-nan-threshold"] = _crafted_nan_threshold()


def _bad_model(work: Path, kind: str) -> Path:
    path = work / f"bad-{kind}.clef"
    content = BAD_MODELS[kind]
    if kind == "missing":
        return path
    if kind == "directory":
        path.mkdir()
        return path
    assert isinstance(content, bytes)
    path.write_bytes(content)
    return path


# (command line with MODEL and OUT placeholders, whether OUT is written)
MODEL_COMMANDS = {
    "info": ["info", "MODEL"],
    "eval": ["eval", "MODEL", "--input", "in.jsonl"],
    "check": ["check", "MODEL", "edge.inv", "--no-cache", "-o", "OUT"],
    "diff-old": ["diff", "MODEL", "model.clef", "-o", "OUT"],
    "diff-new": ["diff", "model.clef", "MODEL", "-o", "OUT"],
    "gate": ["gate", "MODEL", "edge.inv", "--no-cache", "-o", "OUT"],
    "gate-previous": ["gate", "model.clef", "edge.inv", "--previous", "MODEL", "--no-cache"],
    "export-coq": ["export-coq", "MODEL", "edge.inv", "-o", "OUT"],
    "report": ["report", "MODEL", "edge.inv", "-o", "OUT"],
    "report-previous": ["report", "model.clef", "edge.inv", "--previous", "MODEL", "-o", "OUT"],
}


def _fill(argv: list[str], **subst: str) -> list[str]:
    return [subst.get(a, a) for a in argv]


@pytest.mark.parametrize("kind", sorted(BAD_MODELS))
@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_bad_model_file(work: Path, command: str, kind: str) -> None:
    if command != "info" and kind not in ("truncated-clef", "crafted-nan-threshold"):
        pytest.skip("every defect is tried on info; the other commands share its loader")
    (work / "in.jsonl").write_text("{}\n")
    model = _bad_model(work, kind)
    out = work / "out.file"
    out.write_bytes(SENTINEL)
    argv = _fill(MODEL_COMMANDS[command], MODEL=str(model), OUT=str(out))
    res = clefprove(*argv, cwd=work)
    assert_usage_error(res, str(model))
    assert_stale_output_gone(out, argv)
    assert not leftovers(work)


def test_compile_output_written_whole(work: Path) -> None:
    res = clefprove("compile", "model.json", "-o", "new.clef", cwd=work)
    assert res.returncode == 0, res.stderr
    assert (work / "new.clef").read_bytes() == TOY_CLEF.read_bytes()


# --- model sources with every SPEC §2 defect ---------------------------------------------------


def _source_defects() -> dict[str, str]:
    """Raw JSON texts of broken sources (text, so that NaN and duplicate keys can be written)."""
    base = json.loads(TOY_JSON.read_text())

    def edit(fn) -> str:
        src = json.loads(json.dumps(base))
        fn(src)
        return json.dumps(src)

    def feature(i: int, **kv):
        return lambda s: s["features"][i].update(kv)

    def deep(s):
        node = {"action": "allow", "confidence": 1.0}
        for _ in range(200):
            leaf = {"action": "block", "confidence": 1.0}
            node = {"feature": "path_depth", "threshold": 3.5, "left": leaf, "right": node}
        s["tree"] = node

    text = json.dumps(base)
    return {
        "duplicate-feature": edit(lambda s: s["features"].append(dict(s["features"][0]))),
        "min-above-max": edit(feature(0, min=5, max=1, default=3)),
        "default-outside": edit(feature(1, default=900)),
        "int-bound-fractional": edit(feature(1, min=767.5)),
        "int-bound-beyond-2**53": edit(feature(2, max=2**53 + 1)),
        "bool-default-number": edit(feature(5, default=0)),
        "unknown-action": edit(lambda s: s["tree"]["left"].update(action="alow")),
        "unknown-feature": edit(lambda s: s["tree"].update(feature="client_rt_ms")),
        "vocab-outside": edit(lambda s: s["tree"]["right"].update({"in": ["curl", "wget"]})),
        "vocab-empty": edit(lambda s: s["tree"]["right"].update({"in": []})),
        "confidence-above-1": edit(lambda s: s["tree"]["left"].update(confidence=1.5)),
        "confidence-null": edit(lambda s: s["tree"]["left"].update(confidence=None)),
        "confidence-string": edit(lambda s: s["tree"]["left"].update(confidence="0.9")),
        "threshold-nan": text.replace('"threshold": 300.0', '"threshold": NaN'),
        "threshold-infinity": text.replace('"threshold": 300.0', '"threshold": -Infinity'),
        "threshold-1e400": text.replace('"threshold": 300.0', '"threshold": 1e400'),
        "threshold-10**400": text.replace('"threshold": 300.0', f'"threshold": {10**400}'),
        "threshold-bool": text.replace('"threshold": 300.0', '"threshold": true'),
        "threshold-object": text.replace('"threshold": 300.0', '"threshold": {"a": 1}'),
        "duplicate-key": text.replace('"threshold": 300.0', '"threshold": 300.0, "threshold": 9'),
        "extra-key": edit(lambda s: s["tree"].update(color="red")),
        "missing-tree": edit(lambda s: s.pop("tree")),
        "tree-not-object": edit(lambda s: s.update(tree=[1])),
        "too-deep": edit(deep),
        "top-level-array": "[" + text + "]",
        "truncated": text[: len(text) // 2],
        "trailing-garbage": text + " }",
        "name-with-terminal-escape": edit(lambda s: s.update(name="x\u001b[2J")),
        "value-with-newline": edit(lambda s: s["features"][4]["values"].append("a\nb")),
        # JSON's "\ud800": not Unicode text; the model compiled, then info, the SARIF and
        # JUnit outputs, report and export-coq failed on it (exit 4, or 2 writing stdout)
        "name-with-lone-surrogate": edit(lambda s: s.update(name="edge\ud800")),
        "version-with-lone-surrogate": edit(lambda s: s.update(version="1.0\udcff")),
        "value-with-lone-surrogate": edit(lambda s: s["features"][4]["values"].append("v\udcff")),
        "int-of-5000-digits": text.replace('"threshold": 300.0', '"threshold": ' + "9" * 5000),
    }


SOURCE_DEFECTS = _source_defects()


@pytest.mark.parametrize("name", sorted(SOURCE_DEFECTS))
def test_compile_rejects_defective_source(work: Path, name: str) -> None:
    src = work / "bad.json"
    src.write_text(SOURCE_DEFECTS[name])
    out = work / "out.clef"
    out.write_bytes(SENTINEL)
    res = clefprove("compile", "bad.json", "-o", "out.clef", cwd=work)
    assert_usage_error(res, "bad.json")
    assert not out.exists()  # the earlier run's model is gone
    assert not leftovers(work)


def test_duplicate_key_names_the_key(work: Path) -> None:
    (work / "bad.json").write_text(SOURCE_DEFECTS["duplicate-key"])
    res = clefprove("compile", "bad.json", "-o", "out.clef", cwd=work)
    assert_usage_error(res, "duplicate key", "threshold")


def test_int_bound_beyond_2_53_is_not_rounded_into_range(work: Path) -> None:
    (work / "bad.json").write_text(SOURCE_DEFECTS["int-bound-beyond-2**53"])
    res = clefprove("compile", "bad.json", "-o", "out.clef", cwd=work)
    assert_usage_error(res, "features[2].max", "2**53")


def test_source_with_bom_and_crlf_compiles(work: Path) -> None:
    text = TOY_JSON.read_text().replace("\n", "\r\n")
    (work / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode())
    res = clefprove("compile", "bom.json", "-o", "out.clef", cwd=work)
    assert res.returncode == 0, res.stderr
    assert (work / "out.clef").read_bytes() == TOY_CLEF.read_bytes()


def test_non_utf8_source_names_the_byte(work: Path) -> None:
    (work / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    res = clefprove("compile", "latin1.json", "-o", "out.clef", cwd=work)
    assert_usage_error(res, "not UTF-8", "0xe9")


# --- invariant files and directories -----------------------------------------------------------


def _bad_invariants(work: Path, kind: str) -> tuple[Path, str]:
    """A bad invariants argument and a word the error must contain."""
    if kind == "missing":
        return work / "nope.inv", "no such file"
    if kind == "empty-dir":
        (work / "empty").mkdir()
        return work / "empty", "no .inv files"
    if kind == "symlink-loop-dir":
        d = work / "loops"
        d.mkdir()
        (d / "self").symlink_to(d, target_is_directory=True)
        (d / "a.inv").symlink_to(d / "b.inv")
        (d / "b.inv").symlink_to(d / "a.inv")
        return d, "no .inv files"
    if kind == "binary":
        (work / "bin.inv").write_bytes(bytes(range(256)) * 16)
        return work / "bin.inv", "invalid UTF-8"
    if kind == "latin1":
        (work / "latin1.inv").write_bytes(b"invariant caf\xe9:\n  ensure true\n")
        return work / "latin1.inv", "invalid UTF-8 byte 0xe9"
    if kind == "typo":
        (work / "typo.inv").write_text(HOLDS.replace("client_rtt_ms", "client_rt_ms"))
        return work / "typo.inv", "did you mean 'client_rtt_ms'"
    if kind == "model-as-invariants":
        return work / "model.clef", "invalid UTF-8"
    raise AssertionError(kind)


BAD_INVARIANTS = (
    "missing",
    "empty-dir",
    "symlink-loop-dir",
    "binary",
    "latin1",
    "typo",
    "model-as-invariants",
)
INV_COMMANDS = {
    "check": ["check", "model.clef", "INV", "--no-cache", "-o", "OUT"],
    "gate": ["gate", "model.clef", "INV", "--no-cache", "-o", "OUT"],
    "export-coq": ["export-coq", "model.clef", "INV", "-o", "OUT"],
    "report": ["report", "model.clef", "INV", "-o", "OUT"],
    "fmt": ["fmt", "INV"],
}


@pytest.mark.parametrize("kind", BAD_INVARIANTS)
@pytest.mark.parametrize("command", sorted(INV_COMMANDS))
def test_bad_invariants(work: Path, command: str, kind: str) -> None:
    if command not in ("check", "fmt") and kind not in ("binary", "typo"):
        pytest.skip("every defect is tried on check and fmt; the rest get a sample")
    if command == "fmt" and kind == "typo":
        pytest.skip("fmt needs no model: a misspelt feature is not its business")
    inv, needle = _bad_invariants(work, kind)
    out = work / "out.file"
    out.write_bytes(SENTINEL)
    argv = _fill(INV_COMMANDS[command], INV=str(inv), OUT=str(out))
    res = clefprove(*argv, cwd=work)
    assert_usage_error(res, needle)
    assert_stale_output_gone(out, argv)
    assert not leftovers(work)


def test_dsl_error_shows_line_and_caret(work: Path) -> None:
    (work / "typo.inv").write_text("\n\n" + HOLDS.replace("client_rtt_ms", "client_rt_ms"))
    res = clefprove("check", "model.clef", "typo.inv", "--no-cache", cwd=work)
    lines = assert_usage_error(res).splitlines()
    assert lines[0].startswith("typo.inv:4:8: unknown feature 'client_rt_ms'")
    assert lines[1].strip() == "when client_rt_ms > 300"
    assert lines[2].index("^") == lines[1].index("client_rt_ms")


def test_dsl_error_display_is_printable_and_short(work: Path) -> None:
    """A binary or minified file cannot drive the terminal or flood it."""
    junk = b"invariant a:\n  ensure action != \x1b[2J\x07allow" + b" " * 100_000 + b"?\n"
    (work / "junk.inv").write_bytes(junk)
    res = clefprove("check", "model.clef", "junk.inv", "--no-cache", cwd=work)
    err = assert_usage_error(res)
    assert "\x1b" not in err and "\x07" not in err
    assert max(len(line) for line in err.splitlines()) < 400


@pytest.mark.parametrize(
    "content", ["", "# only a comment\n", "\n\n  \n", "let slow = client_rtt_ms > 300\n"]
)
@pytest.mark.parametrize("command", ["check", "gate", "report", "export-coq"])
def test_invariant_set_without_invariants_is_bad_input(
    work: Path, content: str, command: str
) -> None:
    """SPEC §4: an invariant set that defines no invariant is exit 2, not a pass."""
    (work / "none.inv").write_text(content)
    out = "out" if command == "export-coq" else "out.html"
    argv = [command, "model.clef", "none.inv", "-o", out]
    argv += ["--no-cache"] if command in ("check", "gate") else []
    res = clefprove(*argv, cwd=work)
    assert_usage_error(res, "none.inv: the invariant files define no invariant")
    assert not (work / out).exists() and res.stdout == b""


def test_bom_and_crlf_invariants(work: Path) -> None:
    (work / "crlf.inv").write_bytes(b"\xef\xbb\xbf" + HOLDS.replace("\n", "\r\n").encode())
    res = clefprove("check", "model.clef", "crlf.inv", "--no-cache", "--format", "json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["status"] == "holds"


def test_symlink_loop_beside_real_invariants(work: Path) -> None:
    d = work / "invs"
    d.mkdir()
    (d / "holds.inv").write_text(HOLDS)
    (d / "loop").symlink_to(d, target_is_directory=True)
    (d / "x.inv").symlink_to(d / "y.inv")
    (d / "y.inv").symlink_to(d / "x.inv")
    res = clefprove("check", "model.clef", "invs", "--no-cache", "--format", "json", cwd=work)
    assert res.returncode == 0, res.stderr
    assert [r["invariant"] for r in json.loads(res.stdout)["results"]] == ["slow_not_allowed"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_invariants(work: Path) -> None:
    d = work / "locked"
    d.mkdir()
    (d / "a.inv").write_text(HOLDS)
    (d / "a.inv").chmod(0)
    try:
        res = clefprove("check", "model.clef", str(d / "a.inv"), "--no-cache", cwd=work)
        assert_usage_error(res, "a.inv")
    finally:
        (d / "a.inv").chmod(0o644)


# --- output paths ------------------------------------------------------------------------------

OUTPUT_COMMANDS = {
    "compile": ["compile", "model.json", "-o", "OUT"],
    "check": ["check", "model.clef", "edge.inv", "--no-cache", "--format", "json", "-o", "OUT"],
    "diff": ["diff", "model.clef", "model.clef", "-o", "OUT"],
    "gate": ["gate", "model.clef", "edge.inv", "--no-cache", "-o", "OUT"],
    "report": ["report", "model.clef", "edge.inv", "-o", "OUT"],
}


@pytest.mark.parametrize("where", ["missing-dir", "is-dir", "under-a-file"])
@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_unwritable_output_path(work: Path, command: str, where: str) -> None:
    (work / "adir").mkdir()
    out = {
        "missing-dir": work / "no" / "such" / "out",
        "is-dir": work / "adir",
        "under-a-file": work / "model.json" / "out",
    }[where]
    res = clefprove(*_fill(OUTPUT_COMMANDS[command], OUT=str(out)), cwd=work)
    assert_usage_error(res, str(out))
    assert list((work / "adir").iterdir()) == []
    assert (work / "model.json").read_bytes() == TOY_JSON.read_bytes()
    assert not leftovers(work)


@pytest.mark.parametrize(
    ("argv", "victim"),
    [
        (["compile", "model.json", "-o", "model.json"], "model.json"),
        (["check", "model.clef", "edge.inv", "--no-cache", "-o", "model.clef"], "model.clef"),
        (["check", "model.clef", "edge.inv", "--no-cache", "-o", "edge.inv"], "edge.inv"),
        (["check", "model.clef", ".", "--no-cache", "-o", "./edge.inv"], "edge.inv"),
        (["report", "model.clef", "edge.inv", "-o", "edge.inv"], "edge.inv"),
        (["report", "model.clef", "edge.inv", "-o", "model.clef"], "model.clef"),
        (["gate", "model.clef", "edge.inv", "--no-cache", "-o", "model.clef"], "model.clef"),
        (["gate", "model.clef", "edge.inv", "--no-cache", "-o", "edge.inv"], "edge.inv"),
        (["diff", "model.clef", "model.clef", "-o", "model.clef"], "model.clef"),
    ],
)
def test_output_that_is_an_input_is_refused(work: Path, argv: list[str], victim: str) -> None:
    before = (work / victim).read_bytes()
    res = clefprove(*argv, cwd=work)
    assert_usage_error(res, "is also an input")
    assert (work / victim).read_bytes() == before


def test_output_through_symlink_keeps_the_link(work: Path) -> None:
    (work / "link.json").symlink_to("real.json")
    res = clefprove("check", "model.clef", "holds.inv", "--no-cache", "--format", "json",
                    "-o", "link.json", cwd=work)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (work / "link.json").is_symlink()
    assert json.loads((work / "real.json").read_text())["summary"]["holds"] == 1


def test_output_to_a_fifo_writes_into_it(work: Path) -> None:
    fifo = work / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    res = clefprove("check", "model.clef", "holds.inv", "--no-cache", "--format", "json",
                    "-o", str(fifo), cwd=work)  # fmt: skip
    data, _ = reader.communicate(timeout=60)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
    assert json.loads(data)["summary"]["holds"] == 1


@pytest.fixture
def full_device(tmp_path: Path) -> Path:
    """A private /dev/full (so that a regression cannot replace the system's device node)."""
    dev = tmp_path / "full"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 7))
        with open(dev, "wb") as fh:
            fh.write(b"x")
            fh.flush()
    except PermissionError:
        pytest.skip("cannot create a device node here")
    except OSError as exc:
        if exc.errno != 28:  # ENOSPC is what /dev/full answers
            pytest.skip(f"no usable full device: {exc}")
    return dev


@pytest.mark.parametrize("command", ["compile", "check", "report"])
def test_output_to_a_full_device(work: Path, full_device: Path, command: str) -> None:
    res = clefprove(*_fill(OUTPUT_COMMANDS[command], OUT=str(full_device)), cwd=work)
    assert_usage_error(res, "No space left on device")
    assert stat.S_ISCHR(os.lstat(full_device).st_mode), "the device node was replaced"
    assert not leftovers(work)


def test_output_to_dev_null_keeps_the_device(work: Path) -> None:
    res = clefprove("compile", "model.json", "-o", os.devnull, cwd=work)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)


STDOUT_COMMANDS = {
    "info": ["info", "model.clef"],
    "eval": ["eval", "model.clef", "--input", "many.jsonl"],
    "check": ["check", "model.clef", "edge.inv", "--no-cache"],
    "fmt-stdin": ["fmt", "-"],
    "diff": ["diff", "model.clef", "model.clef"],
    "gate": ["gate", "model.clef", "edge.inv", "--no-cache"],
}


def _many_lines(work: Path, n: int = 50_000) -> Path:
    path = work / "many.jsonl"
    path.write_text("".join(f'{{"client_rtt_ms": {i % 997}}}\n' for i in range(n)))
    return path


@pytest.mark.parametrize("command", sorted(STDOUT_COMMANDS))
def test_stdout_full(work: Path, command: str) -> None:
    _many_lines(work, 2000)
    with open("/dev/full", "wb") as full:
        res = clefprove(
            *STDOUT_COMMANDS[command],
            cwd=work,
            stdin=(work / "edge.inv").read_bytes(),
            stdout=full.fileno(),
        )
    assert_usage_error(res, "No space left on device")


@pytest.mark.parametrize("command", sorted(STDOUT_COMMANDS))
def test_stdout_closed(work: Path, command: str) -> None:
    _many_lines(work, 2000)
    argv = [sys.executable, "-m", "clefprove", *STDOUT_COMMANDS[command]]
    res = subprocess.run(
        ["sh", "-c", '"$@" >&-', "sh", *argv],
        cwd=work,
        input=(work / "edge.inv").read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert_usage_error(res, "Bad file descriptor")


@pytest.mark.parametrize("argv", [["eval", "model.clef"], ["fmt", "-"]])
def test_stdin_closed(work: Path, argv: list[str]) -> None:
    res = subprocess.run(
        ["sh", "-c", '"$@" <&-', "sh", sys.executable, "-m", "clefprove", *argv],
        cwd=work,
        capture_output=True,
        timeout=120,
    )
    assert_usage_error(res)


@pytest.mark.parametrize("argv", [["eval", "model.clef"], ["fmt", "-"]])
def test_stdin_empty(work: Path, argv: list[str]) -> None:
    res = clefprove(*argv, cwd=work, stdin=b"")
    assert res.returncode == 0, res.stderr
    assert res.stdout == b"" and res.stderr == b""


@pytest.mark.parametrize("explain", [False, True])
def test_broken_pipe_is_quiet(work: Path, explain: bool) -> None:
    _many_lines(work, 100_000)
    cmd = [sys.executable, "-m", "clefprove", "eval", "model.clef", "--input", "many.jsonl"]
    cmd += ["--explain"] if explain else []
    producer = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert producer.stdout is not None
    first = producer.stdout.readline()
    producer.stdout.close()  # as `| head -1` does
    err = producer.stderr.read() if producer.stderr else b""
    producer.wait(timeout=120)
    assert json.loads(first)["action"] == "allow"
    assert b"Traceback" not in err and b"Exception ignored" not in err, err
    assert producer.returncode in (0, 1, 2, -signal.SIGPIPE), producer.returncode


# --- option values -----------------------------------------------------------------------------

BAD_OPTIONS = [
    ["--jobs", "0"],
    ["--jobs", "-1"],
    ["--jobs", "abc"],
    ["--timeout", "0"],
    ["--timeout", "-1"],
    ["--timeout", "nan"],
    ["--timeout", "-inf"],
    ["--timeout", "abc"],
    ["--counterexamples", "-1"],
    ["--counterexamples", "abc"],
    ["--counterexamples", "1.5"],
    ["--format", "bogus"],
    ["--bogus-option"],
]


@pytest.mark.parametrize("command", ["check", "gate", "report"])
def test_an_infinite_timeout_is_no_limit(work: Path, command: str) -> None:
    """``--timeout inf`` means no limit (it was exit 4: the cache key's JSON has no inf)."""
    argv = [command, "model.clef", "edge.inv", "--timeout", "inf"]
    argv += ["-o", str(work / "r.html")] if command == "report" else ["--cache", str(work / "c")]
    res = clefprove(*argv, cwd=work)
    assert res.returncode == 1, res.stderr.decode()
    assert b"Traceback" not in res.stderr and b"internal error" not in res.stderr


@pytest.mark.parametrize("option", BAD_OPTIONS, ids=" ".join)
@pytest.mark.parametrize("command", ["check", "gate", "report"])
def test_bad_option_values(work: Path, command: str, option: list[str]) -> None:
    if command != "check" and option[0] not in ("--timeout", "--counterexamples"):
        pytest.skip("every value is tried on check; the others share argparse's int/choices")
    out = work / "out.file"
    out.write_bytes(SENTINEL)
    argv = [command, "model.clef", "edge.inv", *option, "-o", str(out)]
    argv += [] if command == "report" else ["--no-cache"]
    res = clefprove(*argv, cwd=work)
    assert_usage_error(res, option[0])
    if option[-1] in ("abc", "1.5", "bogus", "-inf") or option == ["--bogus-option"]:
        # a command line argparse cannot read: which argument is the output is not known
        assert out.read_bytes() == SENTINEL
    else:
        assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "model.clef", "model.clef", "--limit", "-1"],
        ["diff", "model.clef", "model.clef", "--format", "sarif"],
        ["info", "model.clef", "--format", "xml"],
        ["import", "pickle", "model.clef", "-o", "x.clef"],
        ["compile", "model.json"],
        ["check", "model.clef"],
        ["check", "model.clef", "edge.inv", "--cache", "c", "--no-cache"],
        ["fmt", "-", "edge.inv"],
        ["report", "model.clef", "edge.inv", "-o", "-"],
        ["nosuchcommand"],
        [],
    ],
    ids=lambda a: " ".join(a) or "no-arguments",
)
def test_bad_usage(work: Path, argv: list[str]) -> None:
    res = clefprove(*argv, cwd=work)
    err = res.stderr.decode()
    assert res.returncode == 2 and "Traceback" not in err, err


@pytest.mark.parametrize("value", ["inf", "1e308", "1e-300"])
def test_extreme_but_valid_timeouts(work: Path, value: str) -> None:
    res = clefprove("check", "model.clef", "edge.inv", "--no-cache", "--timeout", value,
                    "--format", "json", cwd=work)  # fmt: skip
    assert res.returncode in (1, 3), res.stderr
    assert b"Traceback" not in res.stderr
    json.loads(res.stdout)


def test_smtlib_directory_that_is_a_file(work: Path) -> None:
    res = clefprove("check", "model.clef", "edge.inv", "--no-cache", "--smtlib", "model.json",
                    cwd=work)  # fmt: skip
    assert_usage_error(res, "--smtlib", "not a directory")
    assert (work / "model.json").read_bytes() == TOY_JSON.read_bytes()


def test_smtlib_directory_in_a_missing_directory(work: Path) -> None:
    # As --cache and -o: a mistyped path is refused, never built with all its parents.
    res = clefprove("check", "model.clef", "edge.inv", "--smtlib", "nowhere/deeper/smt",
                    cwd=work)  # fmt: skip
    assert_usage_error(res, "--smtlib", "does not exist")
    assert not (work / "nowhere").exists()


def test_serve_store_in_a_missing_directory(work: Path) -> None:
    # As --cache: the store's parents are never built (exit 2 before the service starts).
    pytest.importorskip("starlette")
    res = clefprove("serve", "model.clef", "edge.inv", "--store", "nowhere/deeper/store",
                    "--addr", "127.0.0.1:0", cwd=work)  # fmt: skip
    assert_usage_error(res, "--store", "does not exist")
    assert not (work / "nowhere").exists()


def test_smtlib_directory_not_left_behind_by_a_bad_run(work: Path) -> None:
    # A run that ends with status 2 leaves no output behind: the directory of SMT-LIB
    # queries was created before the invariants were read.
    (work / "bad.inv").write_text("invariant a: ensure zzz\n")
    res = clefprove("check", "model.clef", "bad.inv", "--smtlib", "smt", cwd=work)
    assert_usage_error(res, "zzz")
    assert not (work / "smt").exists()
    res = clefprove("check", "model.clef", "holds.inv", "--smtlib", "smt", cwd=work)
    assert res.returncode == 0, res.stderr
    assert (work / "smt").is_dir()


def test_cache_directory_that_is_a_file(work: Path) -> None:
    res = clefprove("check", "model.clef", "edge.inv", "--cache", "model.json", cwd=work)
    assert_usage_error(res, "model.json")


# --- eval input lines --------------------------------------------------------------------------

EVAL_LINES: list[tuple[bytes, str]] = [
    # (line, expected: an action name, or "error:<words in the message>")
    (b'\xef\xbb\xbf{"client_rtt_ms": 400, "ua_family": "curl"}', "block"),
    (b'{"client_rtt_ms": 400}\r', "challenge"),
    (b'{"ua_family": "\\u0063url", "client_rtt_ms": 301}', "block"),
    (b'{"client_rtt_ms": 1e400}', "error:not a finite number"),
    (b'{"client_rtt_ms": NaN}', "error:not a finite number"),
    (b'{"client_rtt_ms": -Infinity}', "error:not a finite number"),
    (b'{"client_rtt_ms": ' + str(10**400).encode() + b"}", "challenge"),  # clipped to max
    (b'{"client_rtt_ms": -' + str(10**400).encode() + b"}", "allow"),  # clipped to min
    (b'{"client_rtt_ms": -0.0}', "allow"),
    (b'{"client_rtt_ms": 300}', "allow"),  # exactly at the threshold goes left
    (b'{"client_rtt_ms": 300.00000000000006}', "challenge"),  # the next float64
    (b'{"client_rtt_ms": 400, "client_rtt_ms": 1}', "error:duplicate key"),
    (b'{"is_tor": 1}', "error:expected true or false"),
    (b'{"is_tor": "true"}', "error:expected true or false"),
    (b'{"tls_version": true}', "error:expected a number"),
    (b'{"tls_version": "771"}', "error:expected a number"),
    (b'{"tls_version": 771.0}', "allow"),
    (b'{"tls_version": 771.5}', "error:whole numbers"),
    (b'{"tls_version": 9007199254740993}', "allow"),  # beyond 2**53: clipped exactly
    (b'{"tls_version": -9007199254740993}', "allow"),
    (b'{"client_rtt_ms": null}', "error:got null"),
    (b'{"client_rtt_ms": {"a": 1}}', "error:got an object"),
    (b'{"client_rtt_ms": [1]}', "error:got a list"),
    (b'{"ua_family": "wget"}', "error:unknown value"),
    (b'{"ua_family": 3}', "error:expected one of"),
    (b'{"extra": 1}', "error:unknown feature"),
    (b'{"client_rt_ms": 1}', "error:did you mean"),
    (b"[1]", "error:got an array"),
    (b'"x"', "error:got a string"),
    (b"17", "error:got a number"),
    (b"null", "error:got null"),
    (b"\xff\xfe{}", "error:not valid UTF-8"),
    (b'{"client_rtt_ms": 400', "error:invalid JSON"),
    (b"[" * 50_000, "error:nesting is too deep"),
    (b'{"ua_family": "' + b"x" * 5_000_000 + b'"}', "error:unknown value"),
    (b'{"client_rtt_ms": ' + b"9" * 5000 + b"}", "error:4300 digits"),
    (b"{}", "allow"),
]


def test_eval_lines(work: Path) -> None:
    data = b"\n".join(line for line, _ in EVAL_LINES) + b"\n"
    res = clefprove("eval", "model.clef", cwd=work, stdin=data)
    assert res.returncode == 1, res.stderr
    assert b"Traceback" not in res.stderr
    out = res.stdout.decode().splitlines()
    assert len(out) == len(EVAL_LINES)
    for lineno, ((line, expected), got) in enumerate(zip(EVAL_LINES, out, strict=True), 1):
        obj = json.loads(got)
        assert len(got) < 2000, "an error line must not echo a huge input"
        if expected.startswith("error:"):
            assert set(obj) == {"error"}, (line[:80], obj)
            assert obj["error"].startswith(f"line {lineno}: "), obj
            assert expected[6:] in obj["error"], (line[:80], obj)
        else:
            assert obj.get("action") == expected, (line[:80], obj)


def test_eval_all_good_lines_exit_0_and_blank_lines_skipped(work: Path) -> None:
    data = b'\n  \n{"client_rtt_ms": 1}\r\n\n{"client_rtt_ms": 1000, "ua_family": "curl"}'
    res = clefprove("eval", "model.clef", cwd=work, stdin=data)
    assert res.returncode == 0, res.stderr
    assert [json.loads(x)["action"] for x in res.stdout.splitlines()] == ["allow", "block"]


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_eval_bad_input_file(work: Path, what: str) -> None:
    (work / "adir").mkdir()
    name = {"missing": "nope.jsonl", "directory": "adir"}[what]
    res = clefprove("eval", "model.clef", "--input", name, cwd=work)
    assert_usage_error(res, name)
    assert res.stdout == b""


@pytest.mark.parametrize("how", ["pipe", "process-substitution"])
def test_model_from_a_pipe(work: Path, how: str) -> None:
    if how == "pipe":
        res = clefprove("info", "/dev/stdin", cwd=work, stdin=TOY_CLEF.read_bytes())
    else:
        res = subprocess.run(
            [
                "bash",
                "-c",
                f'"$@" <(cat {TOY_JSON})',
                "bash",
                sys.executable,
                "-m",
                "clefprove",
                "info",
                "--format",
                "json",
            ],
            cwd=work,
            capture_output=True,
            timeout=120,
        )
    assert res.returncode == 0, res.stderr
    assert b"edge-allow-block" in res.stdout


def test_endless_stream_is_not_read_whole(work: Path) -> None:
    res = clefprove("info", "/dev/zero", cwd=work, timeout=60)
    assert_usage_error(res, "not a .clef file")


def _capped(*argv: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The CLI with its address space capped at 3 GiB: reading an endless stream whole then
    ends in MemoryError (exit 4, the bug this guards against) instead of the OOM killer."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        preexec_fn=cap,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check", "model.clef", "/dev/zero"], "/dev/zero"),
        (["compile", "/dev/zero", "-o", "out.clef"], "/dev/zero"),
        (["check", "/dev/zero", "edge.inv"], "/dev/zero"),
        (["serve", "model.clef", "edge.inv", "--token-file", "/dev/zero"], "/dev/zero"),
    ],
    ids=["invariants", "json-source", "model", "token-file"],
)
def test_endless_input_file_is_bad_input_not_a_crash(
    work: Path, argv: list[str], needle: str
) -> None:
    """SPEC §4: a file that cannot be read is bad input (exit 2, one line), never an internal
    error: an invariant file or a JSON source that never ends (a device, a pipe) was read
    whole, until MemoryError (exit 4) or the OOM killer."""
    if argv[0] == "compile":
        (work / "zero.json").symlink_to("/dev/zero")
        argv = ["compile", "zero.json", "-o", "out.clef"]
        needle = "zero.json"
    res = _capped(*argv, cwd=work)
    assert_usage_error(res, needle)
    assert not (work / "out.clef").exists()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_endless_eval_line_is_an_error_line(work: Path) -> None:
    """SPEC §4: a bad line of ``eval`` gets its own error line; one that never ends is bad
    (it was read whole: MemoryError, exit 4)."""
    res = _capped("eval", "model.clef", "--input", "/dev/zero", cwd=work)
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert "Traceback" not in err
    (line,) = res.stdout.decode().splitlines()
    assert json.loads(line)["error"].startswith("line 1: ")


# --- Ctrl-C ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree large enough that checking it takes a noticeable fraction of a second."""
    work = tmp_path_factory.mktemp("big")
    src = json.loads(TOY_JSON.read_text())

    def build(depth: int, lo: float, hi: float) -> dict:
        if depth == 15:
            return {"action": ("allow", "block", "challenge")[depth % 3], "confidence": 0.9}
        mid = (lo + hi) / 2
        return {
            "feature": "client_rtt_ms" if depth % 2 else "referer_entropy",
            "threshold": mid if depth % 2 else mid / 1250,
            "left": build(depth + 1, lo, mid),
            "right": build(depth + 1, mid, hi),
        }

    src["tree"] = build(0, 0.0, 10_000.0)
    (work / "big.json").write_text(json.dumps(src))
    res = clefprove("compile", "big.json", "-o", "big.clef", cwd=work)
    assert res.returncode == 0, res.stderr
    return work / "big.clef"


LINEAR = """invariant w:
  when client_rtt_ms + 200 * path_depth - 300 * referer_entropy >= 2000
  ensure action != allow
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["check", "report", "export-coq"])
def test_interrupt_leaves_no_partial_output(
    work: Path, big_model: Path, command: str, sig: int
) -> None:
    big = big_model
    (work / "lin.inv").write_text(LINEAR)
    outputs = {"check": "out.json", "report": "out.html", "export-coq": "coq"}
    argv = [command, str(big), "lin.inv", "-o", outputs[command]]
    argv += ["--no-cache", "--format", "json", "--jobs", "2"] if command == "check" else []
    for delay in (0.5, 1.2):
        out = work / outputs[command]
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "clefprove", *argv],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert b"Traceback" not in err, err
        assert not leftovers(work) and not [p for p in work.iterdir() if p.name.startswith(".")]
        if proc.returncode in (128 + sig, -sig):
            # interrupted: either nothing, or (signal after the rename) the whole file
            if out.is_file() and command == "check":
                json.loads(out.read_text())
        else:
            assert proc.returncode in (0, 1, 3), (proc.returncode, err)
            assert out.exists()


# --- deeply nested invariants ------------------------------------------------------------------

CHAIN = "invariant chain:\n  ensure " + " implies ".join(["is_tor"] * 3000) + "\n"


@pytest.mark.parametrize(
    ("argv", "codes"),
    [
        (["check", "model.clef", "chain.inv", "--no-cache", "--format", "json", "-o", "OUT"], {0}),
        (["report", "model.clef", "chain.inv", "-o", "OUT"], {0}),
        (["fmt", "--check", "chain.inv"], {0, 1}),
        # The Coq export recurses over the formula: too deep is exit 2 with nothing written.
        (["export-coq", "model.clef", "chain.inv", "-o", "OUT"], {0, 2}),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_long_implies_chain(work: Path, argv: list[str], codes: set[int]) -> None:
    (work / "chain.inv").write_text(CHAIN)
    out = work / "out"
    res = clefprove(*_fill(argv, OUT=str(out)), cwd=work)
    assert res.returncode in codes, res.stderr
    if res.returncode == 2:
        assert_usage_error(res)
        assert not out.exists()
    elif "OUT" in argv:
        assert out.exists()


def test_fmt_keeps_a_symlinked_invariant_file_a_symlink(work: Path) -> None:
    (work / "real.inv").write_text("invariant   a :  ensure   true\n")
    (work / "link.inv").symlink_to("real.inv")
    res = clefprove("fmt", "link.inv", cwd=work)
    assert res.returncode == 0, res.stderr
    assert (work / "link.inv").is_symlink()
    assert (work / "real.inv").read_text() == "invariant a:\n  ensure true\n"


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["info", "nope.clef"], 2),
        (["info"], 2),
        (["check", "model.clef", "edge.inv", "--no-cache", "--jobs", "0"], 2),
        (["check", "model.clef", "holds.inv", "--no-cache"], 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else f"exit{v}",
)
def test_stderr_closed_keeps_the_exit_status(work: Path, argv: list[str], code: int) -> None:
    res = subprocess.run(
        ["sh", "-c", '"$@" 2>&-', "sh", sys.executable, "-m", "clefprove", *argv],
        cwd=work,
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == code


@pytest.mark.parametrize("command", ["check", "gate"])
def test_cache_in_a_missing_directory_is_refused(work: Path, command: str) -> None:
    """``--cache DIR`` creates DIR, never its missing parents (a mistyped path must not
    build a tree of directories); the run stops before any check, like ``-o`` does."""
    cache = work / "no" / "such" / "cache"
    res = clefprove(command, "model.clef", "edge.inv", "--cache", str(cache), cwd=work)
    assert_usage_error(res, f"directory {work / 'no' / 'such'} does not exist")
    assert not (work / "no").exists()
    res = clefprove(command, "model.clef", "edge.inv", "--cache", str(work / "new"), cwd=work)
    assert res.returncode in (0, 1), res.stderr
    assert (work / "new").is_dir()


@pytest.mark.parametrize("command", ["check", "gate"])
def test_default_cache_that_cannot_be_made_only_costs_speed(work: Path, command: str) -> None:
    """docs/incremental.md: a cache that cannot be opened or written only costs speed.  The
    default cache directory (no --cache) that cannot be created (a read-only checkout; here a
    file in its place) was exit 2, so a CI gate failed as 'bad usage' with every invariant
    holding; it is a warning and a run without the cache (an explicit --cache DIR that cannot
    be made is still exit 2: test_cache_directory_that_is_a_file)."""
    (work / ".clefprove-cache").write_bytes(b"not a directory")
    res = run_cli(command, "model.clef", "holds.inv", cwd=work, unset=["CLEFPROVE_CACHE"],
                  text=False)  # fmt: skip
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert "warning" in err and ".clefprove-cache" in err and "Traceback" not in err, err
    assert (work / ".clefprove-cache").read_bytes() == b"not a directory"
    res = run_cli(command, "model.clef", "holds.inv", cwd=work, text=False,
                  env={"CLEFPROVE_CACHE": str(work / "model.json")})  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (work / "model.json").read_bytes() == TOY_JSON.read_bytes()


@pytest.mark.parametrize("fmt", ["sarif", "junit", "gitlab", "github", "json", "html"])
def test_invariant_file_name_that_is_not_utf8(work: Path, fmt: str) -> None:
    """A file name in another encoding (Latin-1 'é' is the byte 0xe9): Python keeps its bytes
    as lone surrogates, which the SARIF URI, the finding fingerprints and the UTF-8 writing of
    the JUnit and HTML files could not encode (exit 4, 'internal error').  The URI names the
    bytes (%E9); the other outputs show U+FFFD where they cannot be text."""
    name = os.fsdecode(b"caf\xe9.inv")
    (work / name).write_text("invariant a:\n  ensure action == allow\n")
    out = work / ("report.html" if fmt == "html" else f"out.{fmt}")
    if fmt == "html":
        res = clefprove("report", "model.clef", name, "-o", out, cwd=work)
    else:
        res = clefprove("check", "model.clef", name, "--no-cache", "--format", fmt, "-o", out,
                        cwd=work)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert b"internal error" not in res.stderr
    text = out.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    if fmt == "sarif":
        uris = [
            loc["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(text)["runs"][0]["results"]
            for loc in r["locations"]
        ]
        assert uris == ["caf%E9.inv"]


@pytest.mark.parametrize("fmt", ["junit", "github", "text"])
def test_invariant_file_name_that_is_not_utf8_on_a_strict_stdout(work: Path, fmt: str) -> None:
    # A UTF-8 locale gives Python a strict stdout: the name's lone surrogates made the write
    # fail ('cannot write to standard output', exit 2) where the report belongs.
    name = os.fsdecode(b"caf\xe9.inv")
    (work / name).write_text("invariant a:\n  ensure action == allow\n")
    res = run_cli("check", "model.clef", name, "--no-cache", "--format", fmt, cwd=work,
                  env={"PYTHONIOENCODING": "utf-8:strict"}, text=False)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert b"caf" in res.stdout
    res.stdout.decode("utf-8")


def test_export_coq_and_fmt_with_a_file_name_that_is_not_utf8(work: Path) -> None:
    # export-coq names the invariant file in its Coq comments (written with the locale's
    # encoding: exit 4), fmt --check lists it on stdout (exit 4 on a strict stdout).
    name = os.fsdecode(b"caf\xe9.inv")
    (work / name).write_text("invariant a:   ensure confidence >= 0\n")
    res = run_cli("export-coq", "model.clef", name, "-o", "coq", cwd=work, text=False,
                  env={"PYTHONIOENCODING": "utf-8:strict"})  # fmt: skip
    assert res.returncode == 0, res.stderr
    (work / "coq" / "Invariants.v").read_bytes().decode("utf-8")
    res = run_cli("fmt", "--check", name, cwd=work, text=False,
                  env={"PYTHONIOENCODING": "utf-8:strict"})  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert res.stdout.decode("utf-8") == "caf\ufffd.inv\n"


def test_a_terminal_escape_in_a_path_is_never_printed_raw(work: Path) -> None:
    # docs/ci.md: user-provided strings, paths included, are printed as text; the one-line
    # error and a DSL diagnostic's file:line:col sent a file name's escape to the terminal.
    res = clefprove("check", "model.clef", "\x1b[2Jgone.inv", cwd=work)
    err = assert_usage_error(res, "\\x1b[2Jgone.inv: no such file")
    assert "\x1b" not in err
    (work / "\x1b[31mred.inv").write_text("invariant a:\n  ensure zzz\n")
    res = clefprove("check", "model.clef", "\x1b[31mred.inv", "--no-cache", cwd=work)
    err = assert_usage_error(res, "\\x1b[31mred.inv:2:10: unknown feature 'zzz'")
    assert "\x1b" not in err
