"""The proof cache on tree ensembles: whole results, and re-checks from a stored partition.

Every cached report must equal a fresh run's (timings and path counts aside); a re-check of a
changed ensemble must find every verdict a fresh run finds (against exhaustive enumeration on
integer domains), and a change of one leaf value in any one tree that flips a verdict must be
seen."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl.loader import parse_text
from clefprove.incremental import ProofCache
from clefprove.incremental.ensemble import (
    PARTITION,
    content_digest,
    partition_key,
    tree_hashes,
)
from clefprove.incremental.merkle import domain_digest
from clefprove.incremental.walk import scope_key
from clefprove.model.source import compile_source
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.ensembles.test_soundness import _confirm, _violating_inputs
from tests.verify.gen import enumerate_inputs, invariants

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"
OPTS = CheckOptions(timeout=30)

HOLDS_TEXT = """
invariant curl_slow_blocked:
  when ua_family == "curl" and client_rtt_ms > 300
  ensure action == block
"""


def _comparable(report) -> list[dict]:
    out = []
    for r in report.to_json_dict()["results"]:
        for k in ("seconds", "paths_checked", "paths_reused", "solver_paths"):
            r.pop(k, None)
        out.append(r)
    return out


def _with_values(model, values: np.ndarray):
    """*model* with other leaf values (a new object: nothing derived is shared)."""
    v = np.array(values, dtype=np.float64)
    v.setflags(write=False)
    return dataclasses.replace(model, values=v, sha256="0" * 64, metadata={})


def _toy():
    return compile_source(json.loads(TOY.read_text()))


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_cached_results_equal_fresh_ones(data):
    model = data.draw(ensembles(all_int=data.draw(st.booleans())))
    inv = data.draw(invariants(model))
    fresh = check(model, [inv], options=OPTS)
    with tempfile.TemporaryDirectory() as d, ProofCache(d) as cache:
        cold = check(model, [inv], options=OPTS, cache=cache)
        warm = check(model, [inv], options=OPTS, cache=cache)
    assert _comparable(cold) == _comparable(fresh) == _comparable(warm)
    r, w = fresh.results[0], warm.results[0]
    if r.unknown_paths == 0:  # stored: everything reused, nothing decided again
        assert w.paths_checked == 0 and w.paths_reused == r.paths_checked + r.paths_reused
    # a reused counterexample is as good as a fresh one: the evaluator confirms it
    _confirm(model, inv, w)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_recheck_of_a_changed_ensemble_against_enumeration(data):
    model = data.draw(ensembles(all_int=True))
    inv = data.draw(invariants(model))
    rows = model.values.shape[0]
    changed = model.values.copy()
    for _ in range(data.draw(st.integers(1, 3))):
        r = data.draw(st.integers(0, rows - 1))
        k = data.draw(st.integers(0, changed.shape[1] - 1))
        changed[r, k] = data.draw(st.sampled_from([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0]))
    new = _with_values(model, changed)
    truth = _violating_inputs(new, inv, enumerate_inputs(new))
    with tempfile.TemporaryDirectory() as d, ProofCache(d) as cache:
        check(model, [inv], options=OPTS, cache=cache)
        got = check(new, [inv], options=OPTS, cache=cache)
    fresh = check(new, [inv], options=OPTS)
    assert got.results[0].status == ("violated" if truth else "holds")
    assert _comparable(got) == _comparable(fresh)


def test_one_leaf_in_any_tree_that_flips_the_verdict_is_seen(tmp_path):
    model = _toy()
    prog = parse_text(HOLDS_TEXT, model)
    with ProofCache(tmp_path / "c") as cache:
        first = check(model, prog, options=OPTS, cache=cache)
    assert first.results[0].status == "holds"
    allow = [10.0, 0.0, 0.0]  # pushes the softmax to 'allow' wherever the leaf is reached
    flipped_trees = set()
    for row in range(model.values.shape[0]):
        values = model.values.copy()
        values[row] = allow
        new = _with_values(model, values)
        fresh = check(new, prog, options=OPTS)
        # a fresh copy of the filled cache for each change: the partition of the first proof
        d = tmp_path / f"c{row}"
        import shutil

        shutil.copytree(tmp_path / "c", d)
        with ProofCache(d) as cache:
            got = check(new, prog, options=OPTS, cache=cache)
        assert _comparable(got) == _comparable(fresh)
        if fresh.results[0].status == "violated":
            flipped_trees.add(int(model.tree_of_leaf()[row]))
            _confirm(new, prog.invariants[0], got.results[0])
    assert flipped_trees == set(range(model.n_trees))  # every tree had a flipping leaf


def test_tail_change_reuses_the_partition_and_counts_paths(tmp_path):
    model = _toy()
    prog = parse_text(HOLDS_TEXT, model)
    values = model.values.copy()
    last = int(np.flatnonzero(model.tree_of_leaf() == model.n_trees - 1)[0])
    values[last] = values[last] + np.array([0.0, 0.0, 0.03125])  # keeps the verdict
    new = _with_values(model, values)
    assert tree_hashes(new)[:-1] == tree_hashes(model)[:-1]
    assert tree_hashes(new)[-1] != tree_hashes(model)[-1]
    assert content_digest(new) != content_digest(model)
    with ProofCache(tmp_path / "c") as cache:
        cold = check(model, prog, options=OPTS, cache=cache).results[0]
        again = check(new, prog, options=OPTS, cache=cache).results[0]
    assert cold.status == again.status == "holds"
    assert again.paths_reused >= 1
    fresh = check(new, prog, options=OPTS).results[0]
    assert again.paths_checked + again.paths_reused >= 1
    assert fresh.paths_reused == 0


def test_a_damaged_partition_row_is_set_aside_and_the_result_is_right(tmp_path, capsys):
    model = _toy()
    prog = parse_text(HOLDS_TEXT, model)
    inv = prog.invariants[0]
    key = partition_key(scope_key(inv, domain_digest(model, prog.severity)), OPTS)
    with ProofCache(tmp_path / "c") as cache:
        cache.store((), (), [(key, PARTITION, b"not a partition")])
        got = check(model, prog, options=OPTS, cache=cache)
    assert got.results[0].status == "holds"
    assert _comparable(got) == _comparable(check(model, prog, options=OPTS))


def test_a_partition_of_another_domain_is_not_used(tmp_path):
    """A stored partition whose regions do not cover the roots is refused (fresh search)."""
    from clefprove.verify.ensemble import Partition

    model = _toy()
    prog = parse_text(HOLDS_TEXT, model)
    inv = prog.invariants[0]
    key = partition_key(scope_key(inv, domain_digest(model, prog.severity)), OPTS)
    # one region covering only part of the root (path_depth <= 3): it must not count as a
    # proof of the rest, where the changed leaves (tree 1, path_depth >= 4) now say 'allow'
    lo = np.array([[float(np.nextafter(300.0, np.inf)), 0.0, 0.0, 0.0]])
    hi = np.array([[1000.0, 3.0, 3.0, 1.0]])
    curl = np.array([[False, False, True, False]])
    part = Partition(np.zeros(1, dtype=np.int64), lo, hi, {2: curl})
    values = model.values.copy()
    tree1 = np.flatnonzero(model.tree_of_leaf() == 1)
    assert tree1.size == 3
    values[tree1[1:]] = [10.0, 0.0, 0.0]
    new = _with_values(model, values)
    with ProofCache(tmp_path / "c") as cache:
        cache.store((), (), [(key, PARTITION, part.to_bytes())])
        got = check(new, prog, options=OPTS, cache=cache)
    assert got.results[0].status == "violated"
    assert _comparable(got) == _comparable(check(new, prog, options=OPTS))


@pytest.mark.slow
def test_cli_check_reuses_ensemble_results(tmp_path):
    from tests.helpers import run_cli

    clef = tmp_path / "toy.clef"
    assert run_cli("compile", TOY, "-o", clef).returncode == 0
    inv = tmp_path / "t.inv"
    inv.write_text(HOLDS_TEXT)
    args = ("check", clef, inv, "--format", "json", "--cache", tmp_path / "cache")
    first = json.loads(run_cli(*args).stdout)["results"][0]
    second = json.loads(run_cli(*args).stdout)["results"][0]
    assert first["status"] == second["status"] == "holds"
    assert second["paths_checked"] == 0 and second["paths_reused"] >= 1


@SETTINGS
@given(st.data())
def test_vectorised_outcomes_equal_the_per_region_ones(data):
    from clefprove.verify.ensemble import _outcome_rows, outcomes

    model = data.draw(ensembles(all_int=False))
    k = model.combine.outputs
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lo = rng.normal(0, 3, (16, k))
    hi = lo + np.abs(rng.normal(0, 2, (16, k))) * (rng.random((16, 1)) < 0.8)
    owner, acts, clo, chi = _outcome_rows(model, lo, hi)
    for r in range(16):
        oc = outcomes(model, lo[r], hi[r])
        mine = owner == r
        assert acts[mine].tolist() == oc.actions.tolist()
        assert clo[mine].tolist() == oc.conf_lo.tolist()
        assert chi[mine].tolist() == oc.conf_hi.tolist()


def test_a_partition_that_does_not_prove_costs_at_most_the_budget(tmp_path, monkeypatch):
    """A stored partition that does not prove the invariant (here: after a change that makes
    it violated) is searched within a share of the budget, and the fresh search that follows
    gets what is left: the two keep to ``--timeout`` together (they once took two budgets).
    The report is still a fresh run's."""
    from clefprove.incremental import ensemble as inc

    model = _toy()
    prog = parse_text(HOLDS_TEXT, model)
    opts = CheckOptions(timeout=8.0)
    for row in range(model.values.shape[0]):  # the first leaf whose change breaks it
        values = model.values.copy()
        values[row] = [10.0, 0.0, 0.0]  # 'allow' wherever the leaf is reached
        new = _with_values(model, values)
        if check(new, prog, options=opts).results[0].status == "violated":
            break
    else:
        raise AssertionError("no leaf change breaks the invariant")
    calls: list[tuple[float | None, bool, float]] = []
    real = inc.decide_ensemble_invariant

    def spy(model, inv, settings, k, start=None):
        got = real(model, inv, settings, k, start)
        calls.append((settings.timeout, start is not None, got[0].seconds))
        return got

    monkeypatch.setattr(inc, "decide_ensemble_invariant", spy)
    with ProofCache(tmp_path / "c") as cache:
        check(model, prog, options=opts, cache=cache)
        calls.clear()
        got = check(new, prog, options=opts, cache=cache)
    assert [seeded for _, seeded, _ in calls] == [True, False]
    (first, _, spent), (second, _, _) = calls
    assert first == 8.0 * inc.SEEDED_SHARE
    assert second == pytest.approx(8.0 - spent)
    assert _comparable(got) == _comparable(check(new, prog, options=opts))
