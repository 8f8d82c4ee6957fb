"""The report on a tree ensemble: per-tree contributions at each counterexample (HTML in
Chromium, and Markdown), checked against an independent recomputation of the sum and the link."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clefprove.cli.main import main
from clefprove.model.clef import load
from tests.report_html.dom import parse
from tests.report_html.pngdecode import decode_png
from tests.report_html.test_chromium import chromium, run_chromium

TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"
INVARIANTS = """
invariant tor_deep_not_allowed:
  when is_tor and path_depth >= 4
  ensure action != allow

invariant blocks_confident:
  ensure action == block implies confidence >= 0.5
"""


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("ensreport")
    clef = tmp / "toy.clef"
    assert main(["compile", str(TOY), "-o", str(clef)]) == 0
    inv = tmp / "toy.inv"
    inv.write_text(INVARIANTS)
    html = tmp / "r.html"
    assert main(["report", str(clef), str(inv), "-o", str(html)]) == 1
    md = tmp / "r.md"
    assert main(["report", str(clef), str(inv), "-o", str(md)]) == 1
    return clef, html, md


def _softmax32(scores: np.ndarray) -> np.ndarray:
    s = scores.astype(np.float64)
    e = np.exp(s - s.max())
    return e / e.sum()


def _cells(row) -> list[str]:
    return [c.text.strip() for c in row.find_all("td")]


def test_contributions_add_up_to_the_decision(toy_report):
    clef, html, _ = toy_report
    model = load(clef)
    source = json.loads(TOY.read_text())
    root, _ = parse(html.read_text())
    cexs = [d for d in root.find_all("div") if d.has_class("cex") and d.has_class("ensemble")]
    assert len(cexs) >= 2
    for cex in cexs:
        trees = cex.find("table", **{"class": "contributions"}).find("tbody").find_all("tr")
        assert len(trees) == model.n_trees
        values = np.array([[float(v) for v in _cells(r)[2:]] for r in trees], dtype=np.float32)
        # every tree's row names a leaf of that tree with that leaf's value (the JSON source)
        assert values.shape == (3, 3)
        total = cex.find("table", **{"class": "contributions-total"}).find("tbody").find_all("tr")
        base = np.array([float(v) for v in _cells(total[0])[1:]], dtype=np.float32)
        assert base.tolist() == source["ensemble"]["base"]
        acc = base.copy()
        for row in values:
            acc = (acc + row).astype(np.float32)
        shown_sum = np.array([float(v) for v in _cells(total[1])[1:]])
        assert np.allclose(shown_sum, acc, rtol=0, atol=1e-7)
        probs = cex.find("table", **{"class": "probabilities"}).find("tbody").find_all("tr")
        shown_p = np.array([float(_cells(r)[1]) for r in probs])
        assert np.allclose(shown_p, _softmax32(acc), atol=1e-6)
        chosen = [r for r in probs if r.has_class("chosen")]
        assert len(chosen) == 1
        assert probs.index(chosen[0]) == int(np.argmax(shown_p))
        heading = cex.find("h4").text
        assert model.actions[int(np.argmax(shown_p))] in heading


def test_markdown_has_the_contributions(toy_report):
    _, _, md = toy_report
    text = md.read_text()
    assert "How the ensemble decides at this input" in text
    assert text.count("| **sum** |") >= 2
    assert "| 0 | #" in text and "| 2 | #" in text
    assert "Not computed for a tree ensemble (3 trees)" in text


@pytest.mark.slow
def test_chromium_draws_the_ensemble_report(toy_report, tmp_path):
    binary = chromium()
    _, html, _ = toy_report
    dom = run_chromium(binary, tmp_path, "--dump-dom", html.as_uri())
    dumped = dom.stdout.decode("utf-8", errors="replace")
    assert 'class="contributions"' in dumped and "Per-tree contributions" in dumped
    assert 'id="coverage-ensemble"' in dumped
    png = tmp_path / "shot.png"
    shot = run_chromium(
        binary, tmp_path, f"--screenshot={png}", "--window-size=1280,2000", html.as_uri()
    )
    assert png.exists(), shot.stderr.decode(errors="replace")[-2000:]
    rgb = decode_png(png.read_bytes())[:, :, :3].reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    assert len(colours) >= 100 and counts.max() / counts.sum() < 0.95


def test_relational_pair_on_an_ensemble_is_reported(tmp_path):
    """A violated relational invariant on an ensemble: each side of the pair is an ensemble
    decision (no leaf, no path), shown with its probabilities (was exit 4 from the template)."""
    clef = tmp_path / "toy.clef"
    assert main(["compile", str(TOY), "-o", str(clef)]) == 0
    inv = tmp_path / "ind.inv"
    inv.write_text("invariant tor_irrelevant:\n  ensure independent(is_tor)\n")
    out = tmp_path / "r.json"
    assert main(["check", str(clef), str(inv), "--format", "json", "-o", str(out)]) == 1
    pairs = json.loads(out.read_text())["results"][0]["counterexamples"]
    actions = [[d["action"] for d in p["decisions"]] for p in pairs]
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(clef), str(inv), "-o", str(html)]) == 1
    assert main(["report", str(clef), str(inv), "-o", str(md)]) == 1
    root, _ = parse(html.read_text())
    cexs = [d for d in root.find_all("div") if d.has_class("cex") and d.has_class("pair")]
    chosen = [
        [
            _cells(r)[0].split()[0]
            for t in cex.find_all("table")
            if t.has_class("probabilities")
            for r in t.find_all("tr")
            if r.has_class("chosen")
        ]
        for cex in cexs
    ]
    assert chosen == actions and len(actions) >= 1
    text = md.read_text()
    assert "leaf #-1" not in text and "leaf #-1" not in html.read_text()
    assert text.count("(decided) |") == 2 * len(actions)
