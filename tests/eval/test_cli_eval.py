"""``clefprove eval`` end to end (subprocess): outputs, bad lines, exit codes, --explain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "spec-toy.clef"
EDGE = ROOT / "examples" / "edge-allow-block.clef"


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_cli("eval", *args, stdin=stdin, cwd=ROOT)


def test_spec_example_lines() -> None:
    lines = "\n".join(
        [
            '{"client_rtt_ms": 400, "ua_family": "curl"}',
            "",
            '{"client_rtt_ms": 400}',
            "{}",
        ]
    )
    p = run(str(TOY), stdin=lines + "\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        '{"action": "block", "confidence": 0.91, "leaf": 3}',
        '{"action": "challenge", "confidence": 0.77, "leaf": 4}',
        '{"action": "allow", "confidence": 0.98, "leaf": 1}',
    ]
    assert p.stderr == ""


def test_bad_lines_are_reported_and_the_rest_go_on(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"client_rtt_ms": 400, "ua_family": "curl"}\n'
        b"{not json\n"
        b"[1, 2]\n"
        b'{"tls_version": 771.5}\n'
        b'{"ua_family": "Edge"}\n'
        b"\xff\xfe\n"
        b'{"client_rtt_ms": NaN}\n'
        b'{"is_tor": true}\n'
    )
    p = run(str(TOY), "--input", str(src))
    assert p.returncode == 1
    out = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(out) == 8
    assert out[0]["action"] == "block" and out[7]["action"] == "allow"
    errors = [o["error"] for o in out[1:7]]
    assert errors[0].startswith("line 2: invalid JSON")
    assert errors[1] == "line 3: an input must be a JSON object, got an array"
    assert errors[2] == "line 4: tls_version: an int feature takes whole numbers, not 771.5"
    assert errors[3].startswith("line 5: ua_family: unknown value 'Edge'")
    assert errors[4] == "line 6: not valid UTF-8"
    assert errors[5] == "line 7: client_rtt_ms: nan is not a finite number"
    assert "Traceback" not in p.stderr


def test_explain_paths() -> None:
    p = run(str(TOY), "--explain", stdin='{"client_rtt_ms": 400}\n')
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["path"] == ["client_rtt_ms > 300", "ua_family not in {curl, python-requests}"]
    assert out["action"] == "challenge" and out["leaf"] == 4
    assert out["input"]["client_rtt_ms"] == 400.0 and out["input"]["is_tor"] is False


def test_json_source_model_and_large_batches(tmp_path: Path) -> None:
    from clefprove.eval.evaluator import Evaluator
    from clefprove.eval.inputs import encode_records
    from clefprove.model.clef import load

    records = [
        {"client_rtt_ms": 10.0 * k, "tls_version": 768 + k % 5, "path_depth": k % 9,
         "ua_family": ["Chrome", "curl", "other"][k % 3], "is_tor": k % 7 == 0}
        for k in range(10_000)
    ]  # fmt: skip
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    p = run(str(EDGE.with_suffix(".json")), "--input", str(src))
    assert p.returncode == 0, p.stderr
    model = load(EDGE)
    res = Evaluator(model).evaluate(encode_records(model, records))
    out = [json.loads(line) for line in p.stdout.splitlines()]
    assert [o["leaf"] for o in out] == res.leaves.tolist()
    assert [o["action"] for o in out] == [model.actions[a] for a in res.actions]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.clef"], "missing.clef: cannot read"),
        ([str(TOY), "--input", "missing.jsonl"], "missing.jsonl: cannot read"),
        ([str(ROOT / "examples")], "is a directory"),
    ],
)
def test_unreadable_files_exit_2(args: list[str], message: str) -> None:
    p = run(*args)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1


def test_corrupted_model_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.clef"
    data = bytearray(TOY.read_bytes())
    data[100] ^= 0xFF
    bad.write_bytes(bytes(data))
    p = run(str(bad), stdin="{}\n")
    assert p.returncode == 2 and "digest" in p.stderr and p.stdout == ""
