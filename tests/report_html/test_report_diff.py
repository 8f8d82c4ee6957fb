"""The behaviour-diff section of `clefprove report --previous`: same numbers as
`clefprove diff --format json`."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET

from clefprove.cli.main import main
from clefprove.report.context import DIFF_LIST_LIMIT, pct
from tests.conftest import EXAMPLES, ROOT
from tests.report_html.dom import parse

INVS = str(ROOT / "invariants")


def models(tmp_path):
    src = json.loads((EXAMPLES / "spec-toy.json").read_text())
    new = copy.deepcopy(src)
    new["version"] = "1.1.0"
    new["tree"]["threshold"] = 250.0  # (250, 300] moves from allow to the right subtree
    new["tree"]["right"]["right"]["action"] = "rate_limit"  # challenge -> rate_limit
    old_p, new_p = tmp_path / "old.json", tmp_path / "new.json"
    old_p.write_text(json.dumps(src))
    new_p.write_text(json.dumps(new))
    return str(old_p), str(new_p)


def diff_json(tmp_path, old, new):
    out = tmp_path / "diff.json"
    assert main(["diff", old, new, "--format", "json", "--limit", "0", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_diff_section_matches_diff_json(tmp_path):
    old, new = models(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", new, INVS, "--previous", old, "-o", str(out)]) == 1
    html = out.read_text()
    root, _ = parse(html)
    data = diff_json(tmp_path, old, new)
    sem = data["semantic"]
    section = root.by_id("diff")
    head = section.by_id("diff-headline").words
    assert "CHANGED" in head and pct(sem["share_changed"]) in head
    assert f"in {sem['regions_total']} region" in head
    rows = section.by_id("diff-regions").find("tbody").find_all("tr")
    assert len(rows) == min(sem["regions_total"], DIFF_LIST_LIMIT) == len(sem["regions"])
    for row, region in zip(rows, sem["regions"], strict=True):
        assert (row.attrs["data-old"], row.attrs["data-new"]) == (
            region["old_action"],
            region["new_action"],
        )
        cells = row.find_all("td")
        assert cells[2].text == pct(region["share"])
        assert [c.text for c in cells[3].find_all("code")] == region["when"]
        cmds = cells[4].find("pre").text.splitlines()
        assert (
            len(cmds) == 2 and cmds[0].endswith(f"eval {old}") and cmds[1].endswith(f"eval {new}")
        )
        shown = json.loads(re.search(r"'(\{.*\})'", cmds[0]).group(1))
        assert shown == region["example"]
    transitions = {f"{r['old_action']} -> {r['new_action']}" for r in sem["regions"]}
    assert (
        transitions
        == set(sem["transitions"])
        == {
            "allow -> block",
            "allow -> rate_limit",
            "challenge -> rate_limit",
        }
    )
    chart = next(
        ET.fromstring(m)
        for m in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
        if 'class="transitions"' in m
    )
    labels = [t.text for t in chart.iter("{http://www.w3.org/2000/svg}text")]
    assert labels == [
        x for k, v in sem["transitions"].items() for x in (k.replace(" -> ", " → "), pct(v))
    ]
    changes = section.by_id("diff-changes").find("tbody").find_all("tr")
    assert len(changes) == len(data["structural"]["changes"])
    assert [r.find("td").text for r in changes] == [
        c["kind"] for c in data["structural"]["changes"]
    ]
    models_table = section.by_id("diff-models").words
    for side in ("old", "new"):  # JSON sources have no digest (diff --format json: null)
        digest = data[side]["sha256"]
        shown = digest[:16] if digest else "compiled from JSON source"
        assert shown in models_table
    assert "1.1.0" in models_table


def test_same_behaviour_and_markdown(tmp_path):
    old, _ = models(tmp_path)
    out = tmp_path / "r.md"
    assert main(["report", old, INVS, "--previous", old, "-o", str(out)]) == 1
    text = out.read_text()
    section = text.split("## Behaviour change since the previous model", 1)[1]
    assert "**SAME**" in section and "The two trees are identical." in section


def test_incomparable_models_say_why(tmp_path):
    old, _ = models(tmp_path)
    other = json.loads((EXAMPLES / "spec-toy.json").read_text())
    other["features"][0]["max"] = 20000
    other_p = tmp_path / "other.json"
    other_p.write_text(json.dumps(other))
    out = tmp_path / "r.html"
    assert main(["report", str(other_p), INVS, "--previous", old, "-o", str(out)]) == 1
    root, _ = parse(out.read_text())
    assert "not compared" in root.by_id("diff-headline").words
    assert "client_rtt_ms" in root.by_id("diff-headline").words


def test_markdown_diff_names_a_json_source_and_a_digest(tmp_path):
    """A JSON source has no digest (``diff --format json``: null); a ``.clef`` file has one."""
    old, new = models(tmp_path)
    clef = tmp_path / "new.clef"
    assert main(["compile", new, "-o", str(clef)]) == 0
    out = tmp_path / "r.md"
    assert main(["report", str(clef), INVS, "--previous", old, "-o", str(out)]) in (0, 1)
    (row,) = [  # the diff's two-model row (the model's own has one value)
        line
        for line in out.read_text().splitlines()
        if line.startswith("| SHA-256 |") and line.count("|") == 4
    ]
    data = diff_json(tmp_path, old, str(clef))
    assert data["old"]["sha256"] is None and data["new"]["sha256"]
    assert row == f"| SHA-256 | compiled from JSON source | `{data['new']['sha256']}` |"
