"""Relational invariants re-counted after an edit (walk._relational, verify/pairdelta.py)
through the proof cache: random trees and random edit sequences (a leaf's action, a
threshold, a subtree replaced by another of another size), every version's cached report
equal to a fresh run's, and the re-count deciding only the changed leaves.

Oracle: a fresh run on the same model (``edit_versions`` asserts the equality, then a reload
from the cache); the pair counts themselves are checked against the pair matrix and
enumeration in tests/verify (test_relational, test_pairsweep, test_pairdelta)."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clefprove.incremental import ProofCache
from clefprove.model.clef import load
from clefprove.model.source import compile_source
from clefprove.verify import relational
from clefprove.verify.api import check
from tests.incremental import models as M
from tests.incremental.test_leaf_outcomes import _clean_leaves, _edit, edit_versions
from tests.verify.test_pairsweep import _breadth_first
from tests.verify.test_relational import SPEC_RELATIONAL

ROOT = Path(__file__).resolve().parents[2]
COUNTED = ["mono_x", "stable_x_or", "stable_n", "indep_c_when", "indep_b"]
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _sequence(data: Any, steps: int) -> None:
    names = data.draw(
        st.lists(st.sampled_from(sorted(M.RELATIONAL)), min_size=1, max_size=3, unique=True)
    )
    if data.draw(st.booleans()):
        names.append(data.draw(st.sampled_from(["slow", "linear", "friction"])))
    counted_on: dict[str, dict] = {}  # the version each invariant's pair count is kept on
    for v in edit_versions(data, names, steps):
        for r, f in zip(v.cached.results, v.fresh.results, strict=True):
            total = r.paths_checked + r.paths_reused
            assert total == f.paths_checked
            if v.seen or r.invariant not in COUNTED:
                continue  # a whole result found: no count written
            if r.invariant in counted_on:
                n, clean = _clean_leaves(counted_on[r.invariant]["tree"], v.src["tree"])
                if r.paths_reused:  # re-counted: only the leaves below the changed roots
                    event("re-counted")
                    assert r.paths_checked == n - clean
                else:
                    event("decided afresh")
            counted_on[r.invariant] = v.src


@SETTINGS
@given(st.data())
def test_relational_rechecks_equal_fresh_runs(data) -> None:
    _sequence(data, 4)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_relational_rechecks_with_short_pair_lists(data) -> None:
    """The same with only the printed pairs listed (no extra ones, no spare): the re-count
    must tell when the first pairs to print went with the replaced leaves."""
    k = data.draw(st.sampled_from([0, 1, 2]))
    with (
        mock.patch.object(relational, "KEEP_PAIRS", k),
        mock.patch.object(relational, "EXTRA_CONFIRM", 0),
    ):
        _sequence(data, 5)


def test_one_leaf_edit_of_the_example_is_recounted(tmp_path, monkeypatch) -> None:
    """SPEC §1 on the bundled example: after one leaf's action changed, the counted
    relational invariants decide that leaf only, with no pair search, and print what a
    fresh run prints."""
    src = json.loads((ROOT / "examples" / "edge-allow-block.json").read_text())
    edited = copy.deepcopy(src)
    leaf = edited["tree"]
    while "action" not in leaf:
        leaf = leaf["right"]
    leaf["action"] = "allow" if leaf["action"] != "allow" else "block"
    old, new = load(ROOT / "examples" / "edge-allow-block.clef"), compile_source(edited)
    spy = M.CallCounter(monkeypatch, relational, "check_relational")
    with ProofCache(tmp_path) as cache:
        check(old, _program(old), cache=cache)
        calls = spy.calls
        got = check(new, _program(new), cache=cache)
    assert spy.calls == calls + 1  # the invariant with a linear 'when' only
    assert M.comparable(got) == M.comparable(check(new, _program(new)))
    counted = [r for r in got.results if r.paths_reused]
    assert len(counted) == 3
    assert all(r.paths_checked == 1 for r in counted)
    assert any(r.status == "violated" for r in counted)


def _program(model):
    from clefprove.dsl.loader import parse_text

    return parse_text(SPEC_RELATIONAL, model, "inv/rel.inv")


@SETTINGS
@given(st.data())
def test_breadth_first_layouts_recount_as_fresh_runs(data) -> None:
    """Trees numbered breadth first (not pre-order): an edit that changes the node count
    renumbers the clean leaves, the general alignment pairs them, and the kept pairs are
    renumbered (or, where their order changed, the invariant is decided afresh)."""
    names = data.draw(st.lists(st.sampled_from(COUNTED), min_size=1, max_size=3, unique=True))
    src = data.draw(M.sources())
    with tempfile.TemporaryDirectory() as tmp, ProofCache(tmp) as cache:
        for _ in range(3):
            model = _breadth_first(M.compile_(src))
            prog = M.program(names, model)
            got = check(model, prog, cache=cache)
            assert M.comparable(got) == M.comparable(check(model, prog))
            event("re-counted" if any(r.paths_reused for r in got.results) else "afresh")
            src = _edit(data.draw, src)
