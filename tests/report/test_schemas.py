"""The JSON Schemas shipped in the package (clefprove/schemas/) against real outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def schema(name: str) -> dict:
    return json.loads(resources.files("clefprove").joinpath("schemas", name).read_text())


SOURCE = schema("model-source.schema.json")
REPORT = schema("check-report.schema.json")


def validate(instance: object, against: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(against)
    jsonschema.Draft202012Validator(against).validate(instance)


@pytest.mark.parametrize("source", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_example_sources_validate(source: Path) -> None:
    validate(json.loads(source.read_text()), SOURCE)


@pytest.mark.parametrize(
    "defect",
    [
        lambda s: s["tree"]["left"].pop("confidence"),
        lambda s: s["tree"].update({"in": ["curl"]}),  # threshold and in at once
        lambda s: s["features"][0].update({"values": ["a"]}),
        lambda s: s.update({"trees": []}),
        lambda s: s["tree"]["left"].update({"confidence": 1.5}),
    ],
)
def test_schema_rejects_defective_sources(defect) -> None:
    src = json.loads((EXAMPLES / "spec-toy.json").read_text())
    defect(src)
    with pytest.raises(jsonschema.ValidationError):
        validate(src, SOURCE)


RELATIONAL = """severity allow < challenge < rate_limit < block
invariant mono:
  ensure monotone(referer_entropy)
invariant vac:
  when client_rtt_ms > 20000
  ensure action == block
"""


def _check(*args: str | Path, cwd: Path) -> dict:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "clefprove",
            "check",
            *map(str, args),
            "--format",
            "json",
            "--no-cache",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode in (0, 1, 3), res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("model", ["edge-allow-block-1.0.0.clef", "spec-toy.clef", "spec-toy.json"])
def test_check_reports_validate(model: str, tmp_path: Path) -> None:
    (tmp_path / "more.inv").write_text(RELATIONAL)
    data = _check(EXAMPLES / model, ROOT / "invariants", tmp_path / "more.inv", cwd=tmp_path)
    validate(data, REPORT)
    statuses = {r["status"] for r in data["results"]}
    assert "violated" in statuses and "holds" in statuses


def test_report_schema_rejects_a_wrong_status(tmp_path: Path) -> None:
    data = _check(EXAMPLES / "spec-toy.clef", ROOT / "invariants", cwd=tmp_path)
    data["results"][0]["status"] = "passed"
    with pytest.raises(jsonschema.ValidationError):
        validate(data, REPORT)


def test_gate_json_holds_a_valid_check_report(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "clefprove",
            "gate",
            str(EXAMPLES / "spec-toy.clef"),
            str(ROOT / "invariants"),
            "--format",
            "json",
            "--no-cache",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, res.stderr
    validate(json.loads(res.stdout)["check"], REPORT)
