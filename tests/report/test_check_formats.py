"""SARIF (validated against the official 2.1.0 schema), JUnit XML and text renderings."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from clefprove.report.junit import render_junit
from clefprove.report.sarif import render_sarif
from clefprove.report.text import render_text
from clefprove.verify.api import check

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())


@pytest.fixture(scope="module")
def report():
    return check(ROOT / "examples" / "edge-allow-block-1.0.0.clef", [ROOT / "invariants"])


def test_sarif_validates_against_schema(report):
    log = json.loads(render_sarif(report))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    results = log["runs"][0]["results"]
    assert len(results) == len(report.results)
    for res, r in zip(results, report.results, strict=True):
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == r.line
        assert res["kind"] == {"violated": "fail", "holds": "pass", "unknown": "open"}[r.status]
    assert any(res["kind"] == "fail" and res["level"] == "error" for res in results)


def test_sarif_fingerprints_are_stable(report):
    again = check(ROOT / "examples" / "spec-toy.clef", [ROOT / "invariants"])
    fp = lambda rep: {  # noqa: E731
        r["ruleId"]: r["partialFingerprints"]
        for r in json.loads(render_sarif(rep))["runs"][0]["results"]
    }
    assert fp(report) == fp(again)  # same invariants, another model: same identities


def test_junit_one_case_per_invariant(report):
    root = ET.fromstring(render_junit(report))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == [r.invariant for r in report.results]
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {r.invariant for r in report.results if r.status == "violated"}
    assert root.get("failures") == str(len(failed))


def test_text_lists_violations_with_paths(report):
    text = render_text(report)
    for r in report.results:
        assert r.invariant in text
        if r.status == "violated":
            c = r.counterexamples[0]
            assert " and ".join(c.path)[:40] in text.replace("\n", " ") or c.path[0] in text
    assert "\x1b[" not in text
