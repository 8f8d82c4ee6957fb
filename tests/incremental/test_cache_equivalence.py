"""Cached verdicts equal fresh verdicts over random sequences of model and invariant edits."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl.loader import parse_text
from clefprove.incremental import ProofCache, walk
from clefprove.model.clef import load
from clefprove.verify import evidence
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import RelationalCounterexample
from tests.incremental import models as M

EDITS = ["leaf_action", "threshold", "replace_subtree", "bounds", "invariants", "none"]


def apply_edit(draw, kind: str, src: dict, names: list[str]) -> tuple[dict, list[str]]:
    src = copy.deepcopy(src)
    t = src["tree"]
    if kind == "leaf_action":
        leaves = [p for p in M.paths(t) if "action" in M.at(t, p)]
        node = M.at(t, draw(st.sampled_from(leaves)))
        node["action"] = draw(st.sampled_from(M.ACTIONS))
        node["confidence"] = draw(st.sampled_from(M.CONFIDENCES))
    elif kind == "threshold":
        splits = [p for p in M.paths(t) if "threshold" in M.at(t, p)]
        if splits:
            node = M.at(t, draw(st.sampled_from(splits)))
            f = node["feature"]
            node["threshold"] = draw(st.sampled_from(M.THRESHOLDS[f]))
    elif kind == "replace_subtree":
        path = draw(st.sampled_from(M.paths(t)))
        new = M.tree(draw, 3)
        if path:
            M.at(t, path[:-1])[path[-1]] = new
        else:
            src["tree"] = new
    elif kind == "bounds":
        feats = {f["name"]: f for f in src["features"]}
        feats["x"]["max"] = draw(st.sampled_from([6, 8, 10, 12]))
        feats["n"]["max"] = draw(st.sampled_from([3, 5, 6, 9]))
    elif kind == "invariants":
        names = draw(st.lists(st.sampled_from(sorted(M.POOL)), min_size=1, max_size=5, unique=True))
    return src, names


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_cached_equals_fresh_over_edit_sequences(data) -> None:
    draw = data.draw
    src = draw(M.sources())
    names = draw(st.lists(st.sampled_from(sorted(M.POOL)), min_size=1, max_size=5, unique=True))
    steps = draw(st.lists(st.sampled_from(EDITS), min_size=1, max_size=6))
    with tempfile.TemporaryDirectory() as tmp:
        cache = ProofCache(tmp)
        for step in ["start", *steps]:
            if step != "start":
                src, names = apply_edit(draw, step, src, names)
            model = M.compile_(src)
            prog = M.program(names, model)
            fresh = check(model, prog)
            cached = check(model, prog, cache=cache)
            again = check(M.compile_(src), prog, cache=cache)
            want, totals = M.comparable(fresh)
            for rep in (cached, again):
                got, got_totals = M.comparable(rep)
                assert got == want, step
                assert got_totals == totals
                assert [r.paths_reused for r in fresh.results] == [0] * len(names)
            # Rechecking an unchanged model reuses every path.
            assert all(r.paths_checked == 0 for r in again.results)
        cache.close()


def test_edit_reuses_unchanged_subtrees(tmp_path) -> None:
    """A changed leaf deep in a big tree: every invariant, whether the box stages or Z3 decide
    it, decides only the changed leaf again (against the last version's outcomes)."""
    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
    }

    def full(depth: int, lo: float, hi: float) -> dict:
        if depth == 0:
            # 'solver_safe' needs Z3 to prove the allow leaves (x in [5, 7.5]) safe.
            action = "allow" if lo >= 5 and hi <= 7.5 else "block"
            return {"action": action, "confidence": 0.9}
        mid = (lo + hi) / 2
        return {
            "feature": "x",
            "threshold": mid,
            "left": full(depth - 1, lo, mid),
            "right": full(depth - 1, mid, hi),
        }

    src["tree"] = full(7, 0.0, 10.0)
    names = ["slow", "confident", "solver_safe"]
    prog = M.program(names, M.compile_(src))
    # linear=False: the solver, not verify/linear, decides 'solver_safe'.  With the linear
    # stage every invariant is decided on boxes; the edit is still rechecked against the
    # stored outcomes of the last version (SPEC §1: only the changed path is decided again).
    for opts in (CheckOptions(linear=False), CheckOptions()):
        cache = ProofCache(tmp_path / str(opts.linear))
        model = M.compile_(src)
        first = check(model, prog, cache=cache, options=opts)
        assert [r.paths_reused for r in first.results] == [0, 0, 0]
        assert first.results[2].status == "holds"
        assert (first.results[2].solver_paths > 0) == (not opts.linear)
        edited = copy.deepcopy(src)
        M.at(edited["tree"], ("right",) * 7)["action"] = "challenge"  # x near 10: not allow
        model2 = M.compile_(edited)
        second = check(model2, prog, cache=cache, options=opts)
        assert M.comparable(second) == M.comparable(check(model2, prog, options=opts))
        for r in second.results:
            want = (1, 127)
            assert (r.paths_checked, r.paths_reused) == want, r.invariant


def test_a_domain_change_never_reuses_proofs(tmp_path) -> None:
    """Subtree hashes ignore the domain; the key must not: making n a float feature turns
    the allow leaf x in (7.34, 7.5] into a violation of 'solver_safe' (x = 7.5, n = 1.5)."""

    def full(depth: int, lo: float, hi: float) -> dict:
        if depth == 0:
            return {"action": "allow" if lo >= 5 and hi <= 7.5 else "block", "confidence": 0.9}
        mid = (lo + hi) / 2
        return {
            "feature": "x",
            "threshold": mid,
            "left": full(depth - 1, lo, mid),
            "right": full(depth - 1, mid, hi),
        }

    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": full(6, 0.0, 10.0),
    }
    cache = ProofCache(tmp_path)
    model = M.compile_(src)
    assert check(model, M.program(["solver_safe"], model), cache=cache).exit_code == 0
    src["features"][1] = {"name": "n", "type": "float", "min": 0, "max": 6, "default": 0}
    wide = M.compile_(src)
    prog = M.program(["solver_safe"], wide)
    fresh = check(wide, prog)
    assert fresh.results[0].status == "violated"
    assert M.comparable(check(wide, prog, cache=cache)) == M.comparable(fresh)


# ---------------------------------------------------------------- regions kept with results

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPEC_INV = Path(__file__).resolve().parents[2] / "invariants" / "edge.inv"
PAIRS = """
invariant rtt_monotone:
  ensure monotone(client_rtt_ms)
"""


def _regions(report) -> list[tuple]:
    return [
        c.regions if isinstance(c, RelationalCounterexample) else c.region
        for r in report.results
        for c in r.counterexamples
    ]


def _violated_run(cache=None):
    model = load(EXAMPLES / "edge-allow-block-1.0.0.clef")
    text = SPEC_INV.read_text() + PAIRS
    return check(model, parse_text(text, model, "inv/edge.inv"), cache=cache)


def test_a_whole_result_hit_prints_the_regions_kept_with_it(tmp_path, monkeypatch) -> None:
    """Regions are described once, when a result is decided, and kept with it: a hit prints
    them without walking the leaves' paths again, equal to a fresh run's."""
    fresh = _violated_run()
    with ProofCache(tmp_path) as cache:
        first = _violated_run(cache)
    # The report's and the walk's describing both go through evidence.describe_region.
    spy = M.CallCounter(monkeypatch, evidence, "describe_region")
    with ProofCache(tmp_path) as cache:
        again = _violated_run(cache)
    assert spy.calls == 0
    assert all(r.paths_checked == 0 for r in again.results)
    assert _regions(again) == _regions(first) == _regions(fresh)
    assert len(_regions(fresh)) >= 4 and all(any(x) for x in _regions(fresh))
    assert M.comparable(again) == M.comparable(fresh)


def test_a_result_kept_without_regions_is_still_described(tmp_path, monkeypatch) -> None:
    """Rows kept by a clefprove that did not keep regions: the report describes them."""
    fresh = _violated_run()
    real = walk._counterexample_json

    def old_style(c):
        d = real(c)
        d.pop("region", None)
        d.pop("regions", None)
        return d

    monkeypatch.setattr(walk, "_counterexample_json", old_style)
    with ProofCache(tmp_path) as cache:
        _violated_run(cache)
    monkeypatch.setattr(walk, "_counterexample_json", real)
    spy = M.CallCounter(monkeypatch, evidence, "describe_region")
    with ProofCache(tmp_path) as cache:
        again = _violated_run(cache)
    assert spy.calls > 0  # the report describes them, through the same function
    assert all(r.paths_checked == 0 for r in again.results)
    assert _regions(again) == _regions(fresh)
    assert all(any(x) for x in _regions(again))
