"""`clefprove report`: golden structure of the HTML, numbers equal to `check --format json`,
self-containment, valid SVG, escaping, exit statuses, the Markdown variant."""

from __future__ import annotations

import json
import os
import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clefprove.cli.main import main
from clefprove.report.context import Inputs, build
from clefprove.report.html import render_html
from clefprove.verify.verdicts import InvariantResult, ModelInfo, Report
from tests.conftest import EXAMPLES, ROOT
from tests.report_html.dom import parse

EDGE = str(EXAMPLES / "edge-allow-block-1.0.0.clef")
TOY = str(EXAMPLES / "spec-toy.clef")
INVS = str(ROOT / "invariants")
SVG_NS = "{http://www.w3.org/2000/svg}"
SECTIONS = ["summary", "model", "verdicts", "violations", "coverage", "diff", "reproduce"]


def run_report(tmp_path: Path, *args: str, name: str = "report.html") -> tuple[int, Path]:
    out = tmp_path / name
    code = main(["report", *args, "-o", str(out)])
    return code, out


def check_json(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "check.json"
    # The report checks afresh; so must the check it is compared with.
    code = main(["check", *args, "--format", "json", "--no-cache", "-o", str(out)])
    return code, json.loads(out.read_text())


def without_times(obj):
    """The JSON object with every 'seconds' value removed (times differ between runs)."""
    if isinstance(obj, dict):
        return {k: without_times(v) for k, v in obj.items() if k != "seconds"}
    if isinstance(obj, list):
        return [without_times(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def edge_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edge")
    code, out = run_report(tmp, EDGE, INVS)
    _, data = check_json(tmp, EDGE, INVS)
    html = out.read_text(encoding="utf-8")
    root, doctype = parse(html)
    return code, html, root, doctype, data


def test_structure_and_identity(edge_report):
    code, _html, root, doctype, data = edge_report
    assert code == 1  # a violation: the report is written in full all the same
    assert doctype.lower() == "doctype html"
    assert root.find("title").text == "Security review: edge-allow-block 1.0.0"
    assert root.find("html").attrs["lang"] == "en"
    assert [s.attrs["id"] for s in root.find_all("section")] == SECTIONS
    for s in root.find_all("section"):
        assert s.find("h2").words
    assert root.by_id("model-sha256").text == data["model"]["sha256"]
    ident = root.by_id("model").words
    for needle in [
        "edge-allow-block",
        "1.0.0",
        "29,670 bytes",
        "1201 nodes",
        "601 leaves",
        "allow < challenge < rate_limit < block",
    ]:
        assert needle in ident
    feats = root.by_id("features").find("tbody").find_all("tr")
    assert [r.find("td").words for r in feats] == [
        "client_rtt_ms",
        "tls_version",
        "path_depth",
        "referer_entropy",
        "ua_family",
        "is_tor",
    ]
    assert "[768, 772]" in feats[1].words and "python-requests" in feats[4].words
    footer = root.find("footer").words
    assert "clefprove 0.1.0" in footer and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", footer)


def test_invariant_files_are_shown_in_full(edge_report):
    import hashlib

    _, _, root, _, _ = edge_report
    files = root.by_id("reproduce").find_all("details", class_="inv-file")
    inv = ROOT / "invariants" / "edge.inv"
    assert len(files) == 1
    assert hashlib.sha256(inv.read_bytes()).hexdigest() in files[0].find("summary").words
    assert files[0].find("pre").text == inv.read_text()
    # each verdict row folds the invariant as written
    rows = root.by_id("verdict-table").find("tbody").find_all("tr")
    assert all(r.find("details").find("pre").text.startswith("invariant ") for r in rows)


def test_numbers_equal_check_json(edge_report):
    _, _, root, _, data = edge_report
    embedded = json.loads(root.by_id("check-json").text)
    assert without_times(embedded) == without_times(data)
    s = data["summary"]
    for key in ("invariants", "holds", "violated", "unknown"):
        assert int(root.by_id(f"n-{key}").text) == s[key]
    assert int(root.by_id("n-paths").text) == s["paths_checked"]
    rows = root.by_id("verdict-table").find("tbody").find_all("tr")
    assert len(rows) == len(data["results"])
    for row, res in zip(rows, data["results"], strict=True):
        assert row.attrs["data-invariant"] == res["invariant"]
        assert row.attrs["data-status"] == res["status"]
        cells = row.find_all("td")
        assert [int(c.text) for c in cells[2:5]] == [
            res["violating_paths"],
            res["unknown_paths"],
            res["paths_checked"],
        ]
        assert f"{res['file']}:{res['line']}" in cells[0].words
        if res.get("description"):
            assert res["description"] in cells[0].words
    violated = [r for r in data["results"] if r["status"] == "violated"]
    blocks = root.by_id("violations").find_all("div", class_="violation")
    assert [b.attrs["id"] for b in blocks] == ["inv-" + r["invariant"] for r in violated]
    for block, res in zip(blocks, violated, strict=True):
        cexs = [d for d in block.find_all("div") if d.has_class("cex")]
        assert len(cexs) == len(res["counterexamples"]) > 0
        assert f"{res['violating_paths']} violating path" in block.words
        for div, cex in zip(cexs, res["counterexamples"], strict=True):
            table = div.find("table", class_="cex-input").find("tbody")
            shown = {
                r.find_all("td")[0].text: json.loads(r.find_all("td")[1].text)
                for r in table.find_all("tr")
            }
            assert shown == cex["input"]
            head = div.find("h4").words
            assert f"decided {cex['action']}" in head and f"leaf #{cex['leaf']}" in head
            assert [li.text for li in div.find("ol", class_="path").find_all("li")] == cex["path"]
            assert (
                json.loads(re.search(r"'(\{.*\})'", div.find("pre").text).group(1)) == cex["input"]
            )


def test_self_contained_no_scripts_no_external_resources(edge_report):
    _, html, root, _, _ = edge_report
    for tag in ("script", "link", "iframe", "img", "object", "embed", "base", "form"):
        assert not root.find_all(tag), tag
    for el in root.iter():
        for attr in ("src", "href", "action", "srcset", "xlink:href", "poster", "data"):
            value = el.attrs.get(attr)
            if value is not None:
                assert value.startswith("#"), (el.tag, attr, value)
        assert not any(a.startswith("on") for a in el.attrs), el.tag
    assert not re.search(r"url\(|@import", html)
    assert set(re.findall(r"https?://[^\s\"'<>]*", html)) <= {"http://www.w3.org/2000/svg"}
    csp = [
        m for m in root.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in csp[0].attrs["content"]


def test_svg_is_valid_and_complete(edge_report):
    _, html, root, _, data = edge_report
    svgs = [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]
    assert len(svgs) == len(root.find_all("svg"))
    n_cex = sum(len(r["counterexamples"]) for r in data["results"])
    trees = [s for s in svgs if s.get("class") == "tree"]
    charts = [s for s in svgs if s.get("class") == "coverage"]
    assert len(trees) == n_cex and len(charts) == 1
    for svg in svgs:
        assert svg.tag == f"{SVG_NS}svg"
        w, h = float(svg.get("width")), float(svg.get("height"))
        assert svg.get("viewBox") == f"0 0 {int(w)} {int(h)}"
        assert svg.find(f"{SVG_NS}title") is not None
        for rect in svg.iter(f"{SVG_NS}rect"):
            x, y = float(rect.get("x")), float(rect.get("y"))
            rw, rh = float(rect.get("width")), float(rect.get("height"))
            assert x >= 0 and x + rw <= w + 4 and y >= 0 and y + rh <= h + 4
    # one red leaf per tree, labelled with the counterexample's leaf
    leaves = [r for r in data["results"] for _ in r["counterexamples"]]
    cexs = [c for r in data["results"] for c in r["counterexamples"]]
    assert len(leaves) == len(cexs)
    for svg, cex in zip(trees, cexs, strict=True):
        groups = [g for g in svg.iter(f"{SVG_NS}g") if "leaf" in g.get("class", "").split()]
        assert len(groups) == 1
        assert (
            groups[0]
            .find(f"{SVG_NS}title")
            .text.startswith(f"leaf #{cex['leaf']}: {cex['action']}")
        )
    # the bar chart has one bar and one label per action, in model order
    labels = [t.text for t in charts[0].iter(f"{SVG_NS}text")]
    assert labels[0::2] == ["allow", "challenge", "rate_limit", "block"]


def test_domain_share_table_adds_up(edge_report):
    _, _, root, _, _ = edge_report
    rows = root.by_id("coverage-table").find("tbody").find_all("tr")
    assert [r.attrs["data-action"] for r in rows] == ["allow", "challenge", "rate_limit", "block"]
    assert sum(float(r.attrs["data-share"]) for r in rows) == pytest.approx(1.0, abs=1e-9)
    assert "interval length" in root.by_id("coverage").words


def test_reproduce_commands_give_the_same_numbers(edge_report, tmp_path, monkeypatch):
    _, _, root, _, data = edge_report
    commands = [p.text for p in root.by_id("reproduce").find_all("pre", class_="command")]
    check = next(c for c in commands if c.startswith("clefprove check "))
    assert any(
        c.startswith("clefprove export-coq ") and c.endswith("-o coq-out; make -C coq-out")
        for c in commands
    )
    assert any(c == f"sha256sum {shlex.quote(EDGE)}" for c in commands)
    argv = shlex.split(check)[1:]
    out = tmp_path / "again.json"
    assert main([*argv, "-o", str(out)]) == 1
    assert without_times(json.loads(out.read_text())) == without_times(data)


def test_all_holding_exits_0_and_says_pass(tmp_path):
    inv = tmp_path / "ok.inv"
    inv.write_text(
        'invariant slow_blocked_scripts:\n  "Scripts on slow links are blocked."\n'
        '  when client_rtt_ms > 300 and ua_family in {"curl"}\n  ensure action == block\n'
    )
    code, out = run_report(tmp_path, TOY, str(inv))
    assert code == 0
    root, _ = parse(out.read_text())
    assert root.find("div", class_="big").text == "PASS"
    commands = [p.text for p in root.by_id("reproduce").find_all("pre", class_="command")]
    assert f"clefprove export-coq {TOY} {inv} -o coq-out && make -C coq-out" in commands
    assert "No invariant is violated." in root.by_id("violations").words
    assert not root.find_all("svg", class_="tree")


def test_vacuous_invariant_is_flagged(tmp_path):
    inv = tmp_path / "v.inv"
    inv.write_text("invariant never:\n  when path_depth > 64\n  ensure action == block\n")
    code, out = run_report(tmp_path, TOY, str(inv))
    assert code == 0
    root, _ = parse(out.read_text())
    row = root.by_id("verdict-table").find("tbody").find("tr")
    assert row.attrs["data-status"] == "holds"
    assert "VACUOUS" in row.words and "hides a mistake" in row.words


def test_unknown_verdict_renders_inconclusive(spec_model, tmp_path):
    from clefprove.dsl.loader import load_invariants

    inv = tmp_path / "u.inv"
    inv.write_text("invariant u:\n  ensure action != block\n")
    program = load_invariants([inv], spec_model)
    res = InvariantResult("u", str(inv), 1, "unknown", unknown_paths=2, paths_checked=3)
    report = Report(ModelInfo("m.clef", spec_model.sha256, 5, 3), (res,), 0.5)
    ctx = build(spec_model, program, report, Inputs("m.clef", (str(inv),)))
    assert ctx["exit_code"] == 3
    root, _ = parse(render_html(ctx))
    assert root.find("div", class_="big").text == "INCONCLUSIVE"
    row = root.by_id("verdict-table").find("tbody").find("tr")
    assert row.attrs["data-status"] == "unknown" and "INCONCLUSIVE" in row.words
    assert int(row.find_all("td")[3].text) == 2


HOSTILE_MODEL = {
    "name": "<img src=x onerror=alert(1)>",
    "version": '1"><script>alert(2)</script>',
    "features": [
        {
            "name": "ua",
            "type": "categorical",
            "values": ["</svg><script>alert(3)</script>", "a&b", "ok`|x"],
            "default": "a&b",
        },
        {"name": "n", "type": "int", "min": 0, "max": 9, "default": 0},
    ],
    "actions": ["allow", "block"],
    "tree": {
        "feature": "ua",
        "in": ["</svg><script>alert(3)</script>"],
        "left": {
            "feature": "n",
            "threshold": 4.5,
            "left": {"action": "allow", "confidence": 0.5},
            "right": {"action": "block", "confidence": 0.9},
        },
        "right": {"action": "block", "confidence": 0.9},
    },
}
HOSTILE_INV = (
    'invariant hostile:\n  "<script>alert(4)</script> & <b>bold</b>"\n'
    '  when ua in {"</svg><script>alert(3)</script>"}\n  ensure action == block\n'
)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_values_from_files_are_escaped(tmp_path, fmt):
    model = tmp_path / "hostile.json"
    model.write_text(json.dumps(HOSTILE_MODEL))
    inv = tmp_path / "hostile.inv"
    inv.write_text(HOSTILE_INV)
    code, out = run_report(tmp_path, str(model), str(inv), "--format", fmt)
    assert code == 1
    text = out.read_text()
    if fmt == "md":  # Markdown shows code spans and fences verbatim: only check the rest
        text = re.sub(r"^(`{3,})[^\n]*\n.*?\n\1$", "", text, flags=re.S | re.M)
        text = re.sub(r"(`+)(.+?)\1", "", text)
    assert "<script" not in text and "<img" not in text and "<b>" not in text
    if fmt == "html":
        root, _ = parse(text)
        assert not root.find_all("script") and not root.find_all("img")
        assert root.find("title").text.startswith("Security review: <img src=x")
        for m in re.findall(r"<svg\b.*?</svg>", text, flags=re.S):
            ET.fromstring(m)
        assert "</svg><script>alert(3)</script>" in root.by_id("violations").text
    else:
        assert "&lt;script&gt;alert(4)&lt;/script&gt;" in text


@pytest.mark.parametrize(
    "args",
    [
        [TOY, str(ROOT / "no-such.inv")],
        [str(ROOT / "no-such.clef"), INVS],
        [TOY, INVS, "--jobs", "0"],
        [TOY, INVS, "--timeout", "-1"],
        [TOY, INVS, "--counterexamples", "-2"],
        [TOY, INVS, "--previous", str(ROOT / "missing-old.clef")],
    ],
)
def test_bad_input_exits_2_and_leaves_no_file(tmp_path, capsys, args):
    code, out = run_report(tmp_path, *args)
    assert code == 2
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []
    err = capsys.readouterr().err
    assert err.startswith("clefprove: error: ") and "Traceback" not in err


def test_dsl_error_exits_2_and_leaves_no_file(tmp_path, capsys):
    inv = tmp_path / "bad.inv"
    inv.write_text("invariant x:\n  ensure client_rt_ms > 3\n")
    code, out = run_report(tmp_path, TOY, str(inv))
    assert code == 2 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.inv"]
    assert "client_rtt_ms" in capsys.readouterr().err


def test_options_change_the_numbers_as_in_check(tmp_path):
    code, out = run_report(
        tmp_path, EDGE, INVS, "--counterexamples", "1", "--jobs", "1", "--timeout", "30"
    )
    assert code == 1
    root, _ = parse(out.read_text())
    _, data = check_json(tmp_path, EDGE, INVS, "--counterexamples", "1")
    assert without_times(json.loads(root.by_id("check-json").text)) == without_times(data)
    assert (
        len(root.find_all("svg", class_="tree"))
        == sum(len(r["counterexamples"]) for r in data["results"])
        == 1
    )
    # Match the command word, not a substring: the checkout path may contain "check".
    check = next(
        p.text
        for p in root.find_all("pre", class_="command")
        if p.text.startswith("clefprove check")
    )
    assert "--counterexamples 1" in check and "--timeout 30" in check and "--jobs 1" in check


def test_timestamp_and_version(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    _, out = run_report(tmp_path, TOY, INVS)
    root, _ = parse(out.read_text())
    assert root.find("time").attrs["datetime"] == "1970-01-02T00:00:00Z"
    assert "1970-01-02 00:00:00 UTC" in root.find("footer").words
    gen = next(m for m in root.find_all("meta") if m.attrs.get("name") == "generator")
    from clefprove import __version__

    assert gen.attrs["content"] == f"clefprove {__version__}"


def test_markdown_variant(tmp_path):
    code, out = run_report(tmp_path, EDGE, INVS, name="review.md")
    assert code == 1
    text = out.read_text()
    _, data = check_json(tmp_path, EDGE, INVS)
    assert text.startswith("# Security review: edge-allow-block 1.0.0\n")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings == [
        "Model",
        "Verdicts",
        "Violations",
        "Domain share per action",
        "Behaviour change since the previous model",
        "Reproduce",
    ]
    verdict_rows = re.findall(
        r"^\| `(\w+)` \(.*\) \| .* \| \*\*(\w+)\*\* \| (\d+) \| (\d+) \| (\d+)", text, flags=re.M
    )
    label = {"holds": "PASS", "violated": "FAIL", "unknown": "INCONCLUSIVE"}
    assert verdict_rows == [
        (
            r["invariant"],
            label[r["status"]],
            str(r["violating_paths"]),
            str(r["unknown_paths"]),
            str(r["paths_checked"]),
        )
        for r in data["results"]
    ]
    embedded = re.search(r"````?json\n(.*?)\n````?", text, flags=re.S).group(1)
    assert without_times(json.loads(embedded)) == without_times(data)
    n_cex = sum(len(r["counterexamples"]) for r in data["results"])
    assert len(re.findall(r"^#### Counterexample \d+", text, flags=re.M)) == n_cex
    assert "<svg" not in text
    # --format md wins over the suffix
    code, out2 = run_report(tmp_path, EDGE, INVS, "--format", "md", name="review.html")
    assert code == 1 and out2.read_text().startswith("# Security review")


@pytest.mark.slow
@pytest.mark.coq
def test_the_coq_reproduce_command_checks(tmp_path):
    """Run the report's export-coq command as a reviewer would, in a shell, and expect coqc
    to accept the development."""
    import shutil
    import subprocess

    if shutil.which("coqc") is None or shutil.which("clefprove") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("coqc or the clefprove command is missing")
        pytest.skip("coqc or the clefprove command is missing")
    inv = tmp_path / "ok.inv"
    inv.write_text(
        'invariant slow_blocked_scripts:\n  when client_rtt_ms > 300 and ua_family in {"curl"}\n'
        "  ensure action == block\n"
    )
    code, out = run_report(tmp_path, TOY, str(inv))
    assert code == 0
    root, _ = parse(out.read_text())
    command = next(
        p.text
        for p in root.by_id("reproduce").find_all("pre", class_="command")
        if "export-coq" in p.text
    )
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert (tmp_path / "coq-out" / "Makefile").exists()
