"""Relational results of single trees in the proof cache: whole results by the model's content
digest, the invariant's digest, the severity order and the options that show in a result.

Oracles: a fresh run's report (equal JSON, counterexample pairs and their regions included),
and a spy on the pair search (a stored result is not decided again; another model, severity
order or K is)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from clefprove.dsl.loader import parse_text
from clefprove.incremental import ProofCache
from clefprove.model.clef import load
from clefprove.model.source import compile_source
from clefprove.verify import relational
from clefprove.verify.api import check
from tests.incremental import models as M
from tests.verify.test_relational import SPEC_RELATIONAL

ROOT = Path(__file__).resolve().parents[2]
EDGE = ROOT / "examples" / "edge-allow-block.clef"
#: The same invariants with challenge and rate_limit swapped in the severity order.
SWAPPED = SPEC_RELATIONAL.replace(
    "allow < challenge < rate_limit < block", "allow < rate_limit < challenge < block"
)


def _check(model, text: str, cache=None, k: int = 3):
    prog = parse_text(text, model, "inv/rel.inv")
    return check(model, prog, cache=cache, counterexamples=k)


def test_an_unchanged_model_reuses_every_relational_result(tmp_path, monkeypatch) -> None:
    model = load(EDGE)
    fresh = _check(model, SPEC_RELATIONAL)
    spy = M.CallCounter(monkeypatch, relational, "check_relational")
    with ProofCache(tmp_path) as cache:
        first = _check(load(EDGE), SPEC_RELATIONAL, cache)
        assert spy.calls == 4
        again = _check(load(EDGE), SPEC_RELATIONAL, cache)
    assert spy.calls == 4  # nothing decided again
    assert M.comparable(first) == M.comparable(again) == M.comparable(fresh)
    assert any(r.counterexamples for r in again.results)
    assert all(r.counterexamples[0].regions[0] for r in again.results if r.counterexamples)
    for r in again.results:
        assert (r.paths_checked, r.paths_reused) == (0, model.n_leaves)


def test_another_model_is_recounted_another_severity_decided_again(tmp_path, monkeypatch):
    """One leaf's action changed: the three invariants whose pairs the cell test decides are
    re-counted from the stored counts (no pair search), the one with a linear 'when' is
    decided again; another severity order is another scope (decided again); another K
    re-counts.  Every report equals a fresh run's."""
    model = load(EDGE)
    src = json.loads((ROOT / "examples" / "edge-allow-block.json").read_text())
    changed = copy.deepcopy(src)
    leaf = changed["tree"]
    while "action" not in leaf:  # the leftmost leaf's action
        leaf = leaf["left"]
    leaf["action"] = "block" if leaf["action"] != "block" else "allow"
    other = compile_source(changed)
    with ProofCache(tmp_path) as cache:
        _check(model, SPEC_RELATIONAL, cache)
        spy = M.CallCounter(monkeypatch, relational, "check_relational")
        for mdl, text, k, searched in ((other, SPEC_RELATIONAL, 3, 1), (model, SWAPPED, 3, 4),
                                       (model, SPEC_RELATIONAL, 1, 1)):  # fmt: skip
            before = spy.calls
            got = _check(mdl, text, cache, k)
            assert spy.calls == before + searched
            assert M.comparable(got) == M.comparable(_check(mdl, text, k=k))


def test_mixed_programs_keep_their_order_through_the_cache(tmp_path) -> None:
    spec = (ROOT / "invariants" / "edge.inv").read_text().splitlines()
    text = SPEC_RELATIONAL + "\n".join(line for line in spec if not line.startswith("severity"))
    model = load(EDGE)
    fresh = _check(model, text)
    with ProofCache(tmp_path) as cache:
        first = _check(load(EDGE), text, cache)
        again = _check(load(EDGE), text, cache)
    names = [r.invariant for r in fresh.results]
    assert [r.invariant for r in again.results] == names and len(names) == 9
    assert M.comparable(first) == M.comparable(again) == M.comparable(fresh)
