"""SARIF (validated against the official 2.1.0 schema), JUnit XML and text renderings."""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

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
    log = json.loads(render_sarif(report, root=ROOT))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    run = log["runs"][0]
    results = run["results"]
    failing = [r for r in report.results if r.status != "holds"]
    assert failing and len(failing) < len(report.results)
    # one result per violated or unknown invariant only (code scanning ignores ``kind``)
    assert [res["ruleId"] for res in results] == [r.invariant for r in failing]
    for res, r in zip(results, failing, strict=True):
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == r.line
        assert res["kind"] == "fail"
        assert res["level"] == {"violated": "error", "unknown": "warning"}[r.status]
        assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == r.invariant
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["fullDescription"]["text"] and rule["help"]["text"]
    assert run["automationDetails"]["id"] == "clefprove/edge-allow-block/"


def test_sarif_has_no_result_when_everything_holds(tmp_path):
    inv = tmp_path / "holds.inv"
    inv.write_text(
        "invariant slow_not_allowed:\n  when client_rtt_ms > 300\n  ensure action != allow\n"
    )
    rep = check(ROOT / "examples" / "spec-toy.clef", [inv])
    log = json.loads(render_sarif(rep, root=tmp_path))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    assert log["runs"][0]["results"] == []
    assert [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]] == ["slow_not_allowed"]


def _violating(directory: Path, name: str = "edge 100%.inv") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    inv = directory / name
    inv.write_text("invariant never_block:\n  ensure action != block\n")
    return inv


def _location(log: dict) -> dict:
    return log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]


def test_sarif_uris_are_relative_to_the_repository_root(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inv = _violating(repo / "my invariants")
    (repo / "sub").mkdir()
    logs = []
    for cwd, spelled in [
        (repo, "my invariants/edge 100%.inv"),
        (repo / "sub", "../my invariants/edge 100%.inv"),
        (repo / "sub", str(inv)),
    ]:
        monkeypatch.chdir(cwd)
        rep = check(ROOT / "examples" / "spec-toy.clef", [spelled])
        log = json.loads(render_sarif(rep))
        jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
        logs.append(log)
    for log in logs:
        assert _location(log) == {
            "uri": "my%20invariants/edge%20100%25.inv",
            "uriBaseId": "%SRCROOT%",
        }
        base = log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        assert base.startswith("file:///") and base.endswith("/repo/")
    fps = {json.dumps(log["runs"][0]["results"][0]["partialFingerprints"]) for log in logs}
    assert len(fps) == 1  # however the path was spelled


def test_sarif_file_outside_the_root_is_an_absolute_file_uri(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inv = _violating(tmp_path / "elsewhere")
    monkeypatch.chdir(repo)
    log = json.loads(render_sarif(check(ROOT / "examples" / "spec-toy.clef", [inv])))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    loc = _location(log)
    assert "uriBaseId" not in loc
    assert loc["uri"] == "file://" + quote(inv.as_posix())


def test_sarif_fingerprints_tell_models_apart(tmp_path):
    src = json.loads((ROOT / "examples" / "spec-toy.json").read_text())
    src["name"] = "another-model"
    (tmp_path / "other.json").write_text(json.dumps(src))
    inv = _violating(tmp_path)
    fp = lambda rep: render_sarif(rep, root=tmp_path)  # noqa: E731
    one = json.loads(fp(check(ROOT / "examples" / "spec-toy.clef", [inv])))
    two = json.loads(fp(check(tmp_path / "other.json", [inv])))
    assert (
        one["runs"][0]["results"][0]["partialFingerprints"]
        != two["runs"][0]["results"][0]["partialFingerprints"]
    )


def test_sarif_fingerprints_are_stable(tmp_path):
    inv = _violating(tmp_path)
    fp = lambda model: [  # noqa: E731
        r["partialFingerprints"]
        for r in json.loads(render_sarif(check(ROOT / "examples" / model, [inv]), root=tmp_path))[
            "runs"
        ][0]["results"]
    ]
    one, two = fp("spec-toy.clef"), fp("edge-allow-block.clef")
    # same invariants, another version of the same model: same identities
    assert len(one) == 1 and one == two


def test_junit_one_case_per_invariant(report):
    root = ET.fromstring(render_junit(report, root=ROOT))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == [r.invariant for r in report.results]
    for c, r in zip(cases, report.results, strict=True):
        assert c.get("file") == "invariants/edge.inv" and c.get("line") == str(r.line)
        assert c.get("classname") == "edge"
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {r.invariant for r in report.results if r.status == "violated"}
    assert root.get("failures") == str(len(failed))


def test_text_lists_violations_with_regions(report):
    text = render_text(report)
    for r in report.results:
        assert r.invariant in text
        if r.status == "violated":
            c = r.counterexamples[0]
            # the region (one bound pair per feature); the full chain only when verbose
            assert "region: " + " and ".join(c.region) in text
            assert " and ".join(c.path) not in text
            assert "path:   " + " and ".join(c.path) in render_text(report, verbose=True)
    assert "\x1b[" not in text


def test_text_table_columns_line_up_whatever_the_names(report):
    # wide characters take two cells, an escape sequence in a name is shown, not obeyed
    first = report.results[0]
    odd = [
        dataclasses.replace(first, invariant="\u8def\u5f84_\u5b89\u5168"),
        dataclasses.replace(first, invariant="e\u0301vil\x1b[2J", file="a\u202eb.inv"),
        *report.results,
    ]
    rep = dataclasses.replace(report, results=tuple(odd))
    for color in (False, True):
        text = render_text(rep, color=color)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
        assert "\x1b[2J" not in text and "\\x1b[2J" in plain and "\\u202e" in plain
        assert ("\x1b[" in text) == color
        table = plain.splitlines()[1 : 2 + len(odd)]
        status_at = [
            _cells(line[: line.index(r.status)]) for line, r in zip(table[1:], odd, strict=True)
        ]
        assert (
            len(set(status_at)) == 1
            and _cells(table[0][: table[0].index("status")]) == (status_at[0])
        )


def _cells(text):
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) == "W" else 1
        for c in text
    )


def test_junit_counts_in_the_singular(tmp_path):
    inv = tmp_path / "one.inv"
    # only the leaf that blocks violates this: exactly one path
    inv.write_text("invariant never_block:\n  ensure action != block\n")
    rep = check(ROOT / "examples" / "spec-toy.clef", [inv])
    assert rep.results[0].violating_paths == 1
    xml = render_junit(rep, root=tmp_path)
    failure = ET.fromstring(xml).find(".//failure")
    assert failure.get("message") == "violated on 1 path"
    assert "1 paths" not in xml and "1 path" in failure.text


def test_ci_formats_say_which_share_of_an_undecided_ensemble_was_proved(report):
    """SPEC §5: an undecided ensemble invariant is ``unknown`` and the report says which share
    of the input domain was proved; the JSON and text said it, SARIF and JUnit did not."""
    from clefprove.report.formats import render_report
    from clefprove.status import Verdict

    r = dataclasses.replace(
        report.results[0],
        status=Verdict.UNKNOWN,
        violating_paths=0,
        unknown_paths=1,
        counterexamples=(),
        proved_share=0.503247,
    )
    rep = dataclasses.replace(report, results=(r,))
    sarif = json.loads(render_sarif(rep, root=ROOT))
    jsonschema.validate(sarif, SCHEMA, cls=jsonschema.Draft4Validator)
    assert "(50.3% of the input domain proved)" in sarif["runs"][0]["results"][0]["message"]["text"]
    error = ET.fromstring(render_junit(rep, root=ROOT)).find(".//error")
    assert error is not None and "50.3% of the input domain proved" in error.get("message", "")
    assert "50.3% of the input domain proved" in render_report(rep, "gitlab")
    assert "50.3%25 of the input domain proved" in render_report(rep, "github")  # '%' escaped
