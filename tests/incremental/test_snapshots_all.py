"""Snapshots for every invariant (issue 11, item 2): invariants that the box and linear stages
decide without a solver are re-checked against the last version too, deciding only the
changed leaves; a first run stores no whole-tree subtree proofs.  Every report equals a fresh
one (counterexamples, violating paths), and paths_checked/paths_reused count what was done."""

from __future__ import annotations

import copy
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import ProofCache
from clefprove.incremental.store import DB_NAME
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from tests.incremental import models as M
from tests.incremental.test_leaf_outcomes import _clean_leaves, _full, _source, edit_versions

#: Decided by the box and linear stages (no solver with the default options), several of them
#: violated on many leaves; no 'when' that mentions the decision (its vacuity can make a
#: re-check decide every leaf, see walk._needs_fresh), so that paths_checked is exact.
BOX = ["slow", "friction", "confident", "flag", "linear", "solver", "solver2", "solver_safe"]


def _edit_sequence(data: Any, steps: int, options: CheckOptions) -> None:
    names = data.draw(st.lists(st.sampled_from(BOX), min_size=1, max_size=5, unique=True))
    last: dict[str, tuple[dict, int]] = {}  # the version its outcomes are kept on, its unknowns
    for v in edit_versions(data, names, steps, options):
        for r, f in zip(v.cached.results, v.fresh.results, strict=True):
            total = r.paths_checked + r.paths_reused
            assert total == f.paths_checked
            if v.seen and r.unknown_paths == 0:
                assert r.paths_checked == 0  # this exact model's result is stored
                continue
            if r.invariant in last:  # against the last version, box-decided or not
                old, unknown = last[r.invariant]
                n, clean = _clean_leaves(old["tree"], v.src["tree"])
                assert n == total
                assert n - clean <= r.paths_checked <= n - clean + unknown, r.invariant
            else:
                assert (r.paths_checked, r.paths_reused) == (total, 0)
            last[r.invariant] = (v.src, f.unknown_paths)


@pytest.mark.slow
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_box_and_linear_invariants_decide_only_changed_leaves(data) -> None:
    """Random trees and edits, every run storing snapshots: the
    incremental report equals the fresh one, and only changed leaves are decided."""
    _edit_sequence(data, 5, CheckOptions())


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_box_stages_alone_decide_only_changed_leaves(data) -> None:
    """The same without the linear stage and without the solver's shortcuts off: the box
    stages' own violated outcomes (conjunct indices) are reused, Z3's too."""
    _edit_sequence(data, 4, CheckOptions(linear=False))


def test_a_big_tree_rechecks_box_invariants_against_the_last_version(tmp_path) -> None:
    """A tree of 4096 leaves: after one leaf changed, each
    box- or linear-decided invariant, violated ones included, decides that leaf only."""
    src = _source(_full(12, 0.0, 10.0))
    names = ["slow", "confident", "linear", "solver", "solver_safe"]
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        first = check(model, prog, cache=cache)
        assert all(r.solver_paths == 0 for r in first.results)
        assert {r.status for r in first.results} == {"holds", "violated"}
        edited = copy.deepcopy(src)
        leaf = M.at(edited["tree"], ("right",) * 12)
        leaf["action"] = "allow"  # x near 10: violates 'slow' there
        model2 = M.compile_(edited)
        second = check(model2, prog, cache=cache)
    assert M.comparable(second) == M.comparable(check(model2, prog))
    for r in second.results:
        assert (r.paths_checked, r.paths_reused) == (1, 4095), r.invariant
    assert second.results[0].violating_paths == first.results[0].violating_paths + 1


def test_a_small_tree_of_box_invariants_is_rechecked_against_its_snapshot(tmp_path) -> None:
    """SPEC §1: after a model update only the paths that changed are checked again, on a
    small tree of box-decided invariants too (it once decided every leaf again, a cost
    trade-off the contract does not allow: ``paths_reused`` was 0 after a one-leaf edit)."""
    src = _source(_full(5, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program(["slow", "linear"], model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    try:
        assert conn.execute("SELECT count(*) FROM snapshot").fetchone() != (0,)
    finally:
        conn.close()
    edited = copy.deepcopy(src)
    M.at(edited["tree"], ("right",) * 5)["action"] = "allow"
    model2 = M.compile_(edited)
    with ProofCache(tmp_path) as cache:
        second = check(model2, prog, cache=cache)
    assert M.comparable(second) == M.comparable(check(model2, prog))
    for r in second.results:
        assert (r.paths_checked, r.paths_reused) == (1, 31), r.invariant


def _proof_rows(path) -> list[int]:
    conn = sqlite3.connect(path / DB_NAME)
    try:
        return sorted(int(n) for (n,) in conn.execute("SELECT leaves FROM subtree"))
    finally:
        conn.close()


def test_first_run_stores_solver_leaves_and_the_walk_the_subtrees(tmp_path) -> None:
    """A first run that needs Z3 stores the leaves Z3 proved safe, not whole subtrees (keying
    them walks the whole tree); a later run without outcomes takes the subtree walk, reuses
    those leaves and stores the subtree proofs."""
    z3 = CheckOptions(linear=False)
    src = _source(_full(6, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program(["solver_safe", "slow"], model)
    fresh = check(model, prog, options=z3)
    assert fresh.results[0].solver_paths > 0 and fresh.results[0].status == "holds"
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache, options=z3)
    rows = _proof_rows(tmp_path)
    assert rows and set(rows) == {1}
    solved = len(rows)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("DELETE FROM snapshot")
    conn.execute("DELETE FROM result WHERE value NOT LIKE '%solver_paths%'")
    conn.commit()
    conn.close()
    with ProofCache(tmp_path) as cache:
        got = check(model, prog, cache=cache, options=z3)
    assert M.comparable(got) == M.comparable(fresh)
    assert got.results[0].paths_reused == solved
    assert got.results[0].solver_paths == fresh.results[0].solver_paths - solved
    assert max(_proof_rows(tmp_path)) == 64  # the root's subtree, stored by the walk


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 300),
    st.lists(st.tuples(st.integers(0, 299), st.sampled_from([1, 2]), st.integers(-1, 3))),
)
def test_outcome_blocks_round_trip_dense_or_sparse(n, marks) -> None:
    """Outcomes are stored sparse (only the rows not safe-and-undecided) or dense, whichever
    is shorter; both decode to the same arrays, and a cut or padded blob is refused."""
    import numpy as np

    from clefprove.incremental import delta
    from clefprove.verify import engine as eg

    status = np.full(n, eg.SAFE, np.int8)
    how = np.full(n, eg.HOW_NONE, np.int16)
    for r, s, h in marks:
        if r < n:
            status[r], how[r] = s, h
    out = delta.LeafOutcomes(status, how, delta.LeafOutcomes(status, how), True)
    blob = out.encode()
    back = delta.LeafOutcomes.decode(blob, n)
    assert np.array_equal(back.status, status) and np.array_equal(back.how, how)
    assert back.when is not None and np.array_equal(back.when.how, how) and back.vacuous
    for bad in (blob[:-1], blob + b"\0"):
        with pytest.raises(ValueError):
            delta.LeafOutcomes.decode(bad, n)


def test_a_forged_tree_snapshot_of_another_shape_is_corruption(tmp_path) -> None:
    """Tree snapshots are validated when they are read for a model of another shape (one of
    the same shape is the model's own structure): a re-signed row with a child link pointing
    backwards is corruption, the cache is rebuilt and the result is a fresh one."""
    import numpy as np

    from clefprove.incremental import delta
    from clefprove.incremental.store import _snapshot_chk

    src = _source(_full(5, 0.0, 10.0))
    names = ["slow", "linear"]
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    ((key, value),) = conn.execute("SELECT key, value FROM snapshot WHERE kind = 'tree'")
    snap = delta.decode_tree(bytes(value))
    nodes = snap.nodes.copy()
    split = int(np.flatnonzero(nodes["kind"] != 0)[1])
    nodes["right"][split] = 0  # backwards: a cycle for the alignment's walk
    forged = bytes(value)[: delta._HEAD.size] + nodes.tobytes() + snap.membership.tobytes()
    with pytest.raises(ValueError):
        delta.decode_tree(forged)
    conn.execute(
        "UPDATE snapshot SET value = ?, chk = ? WHERE key = ?",
        (forged, _snapshot_chk(bytes(key), "tree", forged), key),
    )
    conn.commit()
    conn.close()
    grown = copy.deepcopy(src)
    leaf = M.at(grown["tree"], ("left",) * 5)
    leaf.update(feature="n", threshold=3.0, left=dict(leaf), right=dict(leaf))
    leaf.pop("action"), leaf.pop("confidence")
    model2 = M.compile_(grown)
    with ProofCache(tmp_path) as cache:
        got = check(model2, prog, cache=cache)
        assert any("corrupt proof cache" in w for w in cache.warnings)
    assert M.comparable(got) == M.comparable(check(model2, prog))
