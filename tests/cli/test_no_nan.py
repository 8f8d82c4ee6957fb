"""No output of clefprove contains NaN or Infinity, and shares are right on domains as wide as
float64 allows (issue 15, finding 4).

Every command with JSON output runs in a subprocess on models whose float domain is
``[-1.7976931348623157e308, 1.7976931348623157e308]``; each output is parsed with a strict
decoder that refuses ``NaN``/``Infinity``.  The hypothesis tests compare shares on domains near
the float64 limits with exact Fractions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.geometry.boxes import leaf_boxes
from clefprove.geometry.measure import box_shares
from clefprove.incremental.diff import diff
from clefprove.model.source import compile_source
from clefprove.report.coverage import action_shares, leaf_shares
from clefprove.report.diff_text import render_text

MAXF = sys.float_info.max
BIG = 2.0**53


def _refuse(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def strict(text: str) -> object:
    return json.loads(text, parse_constant=_refuse)


def _source(threshold: float, left: str, right: str) -> dict:
    return {
        "name": "wide",
        "version": "1",
        "features": [
            {"name": "x", "type": "float", "min": -MAXF, "max": MAXF, "default": 0},
            {"name": "n", "type": "int", "min": -BIG, "max": BIG, "default": 0},
        ],
        "actions": ["allow", "block"],
        "tree": {
            "feature": "x",
            "threshold": threshold,
            "left": {"action": left, "confidence": 0.9},
            "right": {"action": right, "confidence": 0.8},
        },
    }


def _run(*args: str | Path, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_every_json_output_is_strict_json_on_the_widest_domain(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps(_source(0.0, "allow", "block")))
    (tmp_path / "new.json").write_text(json.dumps(_source(0.0, "block", "block")))
    (tmp_path / "t.inv").write_text(
        "invariant wide:\n  when x > 1e308 ensure action == block\n"
        "invariant lin:\n  when x + 0.5 * n >= 1e308 ensure action == allow\n"
    )
    for m in ("old", "new"):
        assert _run("compile", f"{m}.json", "-o", f"{m}.clef", cwd=tmp_path).returncode == 0
    outputs = {
        "check": _run("check", "new.clef", "t.inv", "--format", "json", cwd=tmp_path),
        "diff": _run("diff", "old.clef", "new.clef", "--format", "json", cwd=tmp_path),
        "gate": _run(
            "gate",
            "new.clef",
            "t.inv",
            "--previous",
            "old.clef",
            "--format",
            "json",
            cwd=tmp_path,
        ),
        "info": _run("info", "new.clef", "--format", "json", cwd=tmp_path),
    }
    for name, res in outputs.items():
        assert res.returncode in (0, 1), (name, res.stderr)
        strict(res.stdout)
        assert "nan" not in res.stdout.lower() and "infinity" not in res.stdout.lower(), name
    ev = _run(
        "eval",
        "new.clef",
        cwd=tmp_path,
        stdin='{"x": 1.7976931348623157e308, "n": -9007199254740992}\n{"x": -1e999}\n',
    )
    for line in ev.stdout.splitlines():
        strict(line)
    sem = strict(outputs["diff"].stdout)["semantic"]  # type: ignore[index]
    assert sem["share_changed"] == 0.5  # x <= 0 changed: exactly half of the domain
    assert "50% of the input domain" in _run("diff", "old.clef", "new.clef", cwd=tmp_path).stdout
    for out in ("rep.md", "rep.html"):
        res = _run("report", "new.clef", "t.inv", "--previous", "old.clef", "-o", out, cwd=tmp_path)
        assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr
        text = (tmp_path / out).read_text()
        assert "nan" not in text.lower().replace("nano", ""), out
        assert "inf%" not in text.lower()


# ---------------------------------------------------------------- hypothesis, near the limits

EDGES = [MAXF, -MAXF, 1e308, -1e308, MAXF / 2, 0.0, 5e-324, -5e-324, 1e-300, 1.0, -1.0]


@st.composite
def wide_models(draw):
    lo, hi = sorted(draw(st.lists(st.sampled_from(EDGES), min_size=2, max_size=2, unique=True)))
    cuts = sorted(draw(st.lists(st.floats(lo, hi), min_size=1, max_size=3)))
    ilo = draw(st.sampled_from([-BIG, -3.0, 0.0]))
    ihi = ilo + draw(st.sampled_from([0.0, 5.0, BIG]))
    tree: dict = {"action": "allow", "confidence": 0.5}
    acts = ["allow", "block"]
    for k, t in enumerate(cuts):
        tree = {
            "feature": "x",
            "threshold": t,
            "left": tree,
            "right": {"action": acts[(k + 1) % 2], "confidence": 0.5},
        }
    tree = {"feature": "n", "threshold": ilo, "left": tree, "right": tree}
    feats = [
        {"name": "x", "type": "float", "min": lo, "max": hi, "default": lo},
        {"name": "n", "type": "int", "min": ilo, "max": ihi, "default": ilo},
    ]
    return compile_source({"features": feats, "actions": acts, "tree": tree})


def _exact_share(model, lo, hi) -> Fraction:
    out = Fraction(1)
    for i, f in enumerate(model.features):
        if f.type.value == "float":
            if f.max > f.min:
                out *= max(Fraction(hi[i]) - Fraction(lo[i]), Fraction(0)) / (
                    Fraction(f.max) - Fraction(f.min)
                )
        else:
            out *= Fraction(max(int(hi[i]) - int(lo[i]) + 1, 0), int(f.max) - int(f.min) + 1)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(wide_models())
def test_leaf_shares_match_fractions_near_the_float64_limits(model):
    boxes = leaf_boxes(model)
    got = leaf_shares(model, boxes)
    assert np.all(np.isfinite(got)) and np.all((got >= 0) & (got <= 1))
    exact_total = Fraction(0)
    for r in range(boxes.size):
        want = _exact_share(model, boxes.lo[r], boxes.hi[r]) if boxes.feasible[r] else 0
        assert abs(Fraction(float(got[r])) - want) <= Fraction(2, 10**15) * max(want, 2**-1000)
        exact_total += want
    # (1 unless the float domain holds only single points, whose length is 0)
    total = sum(s.share for s in action_shares(model))
    assert abs(total - float(exact_total)) < 1e-12
    assert np.array_equal(got, box_shares(model, boxes.lo, boxes.hi, boxes.cats, boxes.feasible))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(wide_models(), wide_models())
def test_diff_near_the_float64_limits_is_strict_json(old, new):
    rep = diff(old, new)
    text = json.dumps(rep.to_json_dict(), allow_nan=False)
    strict(text)
    assert "nan" not in render_text(rep).lower()
    if rep.comparable:
        assert 0 <= rep.share_changed <= 1 + 1e-12
        assert all(0 <= r.share <= 1 for r in rep.regions)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(wide_models(), wide_models())
def test_report_near_the_float64_limits_has_no_nan(old, new):
    """The report (coverage bars, tree windows, the behaviour diff, its embedded check JSON) on
    domains near the float64 limits: finite shares everywhere, strict JSON inside."""
    from clefprove.dsl.loader import parse_text
    from clefprove.report.context import Inputs, build
    from clefprove.report.html import render_html
    from clefprove.report.markdown import render_markdown
    from clefprove.verify.api import check

    program = parse_text("invariant t:\n  when x > 0 ensure action == block\n", new, "t.inv")
    rep = check(new, program)
    d = diff(old, new).to_json_dict() if diff(old, new).comparable else None
    ctx = build(new, program, rep, Inputs("new.clef", ("t.inv",)), diff=d)
    strict(ctx["check_json"])
    for text in (render_markdown(ctx), render_html(ctx)):
        low = text.lower()
        assert "nan%" not in low and 'width="nan' not in low and "inf%" not in low


def test_every_json_dump_in_the_package_refuses_nan():
    """Every json.dumps/json.dump call in clefprove passes allow_nan=False (no NaN/Infinity)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "clefprove"
    missing = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) in ("json.dumps", "json.dump")
                and not any(k.arg == "allow_nan" for k in node.keywords)
            ):
                missing.append(f"{path.relative_to(package)}:{node.lineno}")
    assert missing == []
