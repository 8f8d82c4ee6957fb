"""Every leaf outcome is kept, violated ones with their witness: a re-check decides only the
changed leaves, and its report equals a fresh one (counterexamples and violating paths too)."""

from __future__ import annotations

import copy
import dataclasses
import sqlite3
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import ProofCache, delta, walk
from clefprove.incremental.store import DB_NAME, _snapshot_chk
from clefprove.verify import engine as eg
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import Report
from tests.incremental import models as M

#: The tests about leaves that Z3 decides run without the exact linear stage: with it, the
#: models' two-literal invariants need no solver at all (verify/linear.py).
Z3 = CheckOptions(linear=False)
DEFAULTS = CheckOptions()

#: The pool without the 'when's that mention the decision (their vacuity can make a re-check
#: decide every leaf again, see walk._needs_fresh), so that paths_checked is exact.
NAMES = sorted(n for n in M.POOL if n not in ("by_action", "by_conf"))
#: Violated on many leaves, decided by Z3 (two multi-variable literals).
SOLVER_VIOLATED = ["solver", "solver2"]


def _full(depth: int, lo: float, hi: float, code: int = 1) -> dict:
    """A balanced tree on x; allow leaves for x in [5, 7.5] (Z3 finds 'solver' violated on
    them: x = 7, n = 6), the others block or challenge."""
    if depth == 0:
        action = "allow" if lo >= 5 and hi <= 7.5 else M.ACTIONS[1 + code % 2]
        return {"action": action, "confidence": M.CONFIDENCES[code % 5]}
    mid = (lo + hi) / 2
    return {
        "feature": "x",
        "threshold": mid,
        "left": _full(depth - 1, lo, mid, code * 2),
        "right": _full(depth - 1, mid, hi, code * 2 + 1),
    }


def _source(tree: dict) -> dict:
    return {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": tree,
    }


@pytest.mark.slow
def test_solver_violated_leaves_are_reused(tmp_path) -> None:
    """An invariant that Z3 finds violated on many leaves: after one leaf changed, only that
    leaf is decided again, and the report (counterexamples included) is a fresh run's."""
    src = _source(_full(6, 0.0, 10.0))
    names = ["slow", "solver", "solver_safe"]
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        first = check(model, prog, cache=cache, options=Z3)
        solver = first.results[1]
        assert solver.status == "violated" and solver.solver_paths > 1
        assert solver.violating_paths > 3 and len(solver.counterexamples) == 3
        # The first printed counterexample's leaf changes: the next one moves up.
        leaf = solver.counterexamples[0].leaf
        path = M.paths(src["tree"])
        changed = [p for p in path if "action" in M.at(src["tree"], p)]
        target = next(p for p in changed if M.at(src["tree"], p)["action"] == "allow")
        M.at(src["tree"], target)["action"] = "block"
        model2 = M.compile_(src)
        second = check(model2, prog, cache=cache, options=Z3)
    fresh = check(model2, prog, options=Z3)
    assert M.comparable(second) == M.comparable(fresh)
    assert fresh.results[1].counterexamples[0].leaf != leaf
    assert fresh.results[1].violating_paths == solver.violating_paths - 1
    for r in second.results:
        assert (r.paths_checked, r.paths_reused) == (1, 63), r.invariant


def _clean_leaves(old: dict, new: dict) -> tuple[int, int]:
    """(leaves of *new*, those whose path and record are unchanged from *old*): both trees
    walked by position; a pair of equal records descends, any other pair is a change."""

    def same(a: dict, b: dict) -> bool:
        if "action" in a or "action" in b:
            return a.get("action") == b.get("action") and a.get("confidence") == b.get("confidence")
        if a["feature"] != b["feature"]:
            return False
        if "in" in a or "in" in b:
            return set(a.get("in", ())) == set(b.get("in", ()))
        return bool(a["threshold"] == b["threshold"])

    def count(t: dict) -> int:
        return 1 if "action" in t else count(t["left"]) + count(t["right"])

    def clean(a: dict, b: dict) -> int:
        if not same(a, b):
            return 0
        if "action" in b:
            return 1
        return clean(a["left"], b["left"]) + clean(a["right"], b["right"])

    return count(new), clean(old, new)


def _edit(draw: Any, src: dict) -> dict:
    src = copy.deepcopy(src)
    t = src["tree"]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["leaf_action", "threshold", "replace_subtree"]))
        if kind == "leaf_action":
            leaves = [p for p in M.paths(t) if "action" in M.at(t, p)]
            node = M.at(t, draw(st.sampled_from(leaves)))
            node["action"] = draw(st.sampled_from(M.ACTIONS))
            node["confidence"] = draw(st.sampled_from(M.CONFIDENCES))
        elif kind == "threshold":
            splits = [p for p in M.paths(t) if "threshold" in M.at(t, p)]
            if splits:
                node = M.at(t, draw(st.sampled_from(splits)))
                node["threshold"] = draw(st.sampled_from(M.THRESHOLDS[node["feature"]]))
        else:
            path = draw(st.sampled_from(M.paths(t)))
            new = M.tree(draw, 3)
            if path:
                M.at(t, path[:-1])[path[-1]] = new
            else:
                src["tree"] = t = new
    return src


@dataclasses.dataclass(frozen=True)
class Version:
    """One version of a random edit sequence, checked fresh and through the cache."""

    src: dict
    fresh: Report
    cached: Report
    #: This exact model (and invariants) was checked before in the sequence.
    seen: bool


def edit_versions(
    data: Any, names: list[str], steps: int, options: CheckOptions = DEFAULTS
) -> Iterator[Version]:
    """A random tree (full or drawn) and *steps* - 1 random edits of it, each version checked
    fresh, through one cache, and through the cache again from a reloaded model: the cached
    reports equal the fresh one, and the repeat decides nothing that has no unknown path."""
    draw = data.draw
    if draw(st.booleans()):
        src = _source(_full(draw(st.integers(3, 6)), 0.0, 10.0, draw(st.integers(1, 9))))
    else:
        src = draw(M.sources())
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp, ProofCache(tmp) as cache:
        for step in range(steps):
            if step:
                src = _edit(draw, src)
            model = M.compile_(src)
            prog = M.program(names, model)
            fresh = check(model, prog, options=options)
            cached = check(model, prog, cache=cache, options=options)
            again = check(M.compile_(src), prog, cache=cache, options=options)
            want = M.comparable(fresh)
            assert M.comparable(cached) == want
            assert M.comparable(again) == want
            assert all(r.paths_checked == 0 for r in again.results if r.unknown_paths == 0)
            key = want[0] + repr(src)
            yield Version(src, fresh, cached, key in seen)
            seen.add(key)


def _edit_sequence(data: Any, steps: int) -> None:
    names = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    if data.draw(st.booleans()):
        names = sorted({*names, data.draw(st.sampled_from(SOLVER_VIOLATED))})
    hinted: set[str] = set()  # needed Z3 in an earlier run: a hint is stored
    last: dict[str, tuple[dict, int]] = {}  # the version its outcomes are kept on, its unknowns
    for v in edit_versions(data, names, steps):
        hinted_now = bool(hinted & set(names))
        decided = []
        for r, f in zip(v.cached.results, v.fresh.results, strict=True):
            n = r.paths_checked + r.paths_reused
            if v.seen and r.unknown_paths == 0:
                assert r.paths_checked == 0  # this exact model's result is stored
                continue
            decided.append(f)
            if hinted_now and r.invariant in last:  # against the last version
                old, unknown = last[r.invariant]
                total, clean = _clean_leaves(old["tree"], v.src["tree"])
                assert total == n
                # The changed leaves, and the unchanged ones left unknown last time.
                assert total - clean <= r.paths_checked <= total - clean + unknown, r.invariant
            elif r.paths_reused == 0:
                assert r.paths_checked == n
        # Outcomes are written when some invariant of the run needs Z3.
        if hinted_now or any(f.solver_paths for f in decided):
            last.update({f.invariant: (v.src, f.unknown_paths) for f in decided})
        hinted |= {f.invariant for f in decided if f.solver_paths}


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_edits_decide_only_changed_leaves(data) -> None:
    """Random trees, random single and multi-leaf edits (actions, thresholds, subtrees):
    the incremental report equals the fresh one (counterexamples, violating paths), and
    paths_checked counts exactly the leaves that had to be decided."""
    _edit_sequence(data, 5)


def _four_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Statuses and how of four leaves (safe; violated by the solver; violated by the box
    stages; unknown after the solver) and one input of four features."""
    status = np.array([0, 1, 1, 2], np.int8)
    how = np.array([eg.HOW_NONE, eg.HOW_SOLVER, eg.HOW_BOX, eg.HOW_SOLVER], np.int16)
    return status, how, np.array([[1.5, 2.0, 0.0, 1.0]])


def test_witnesses_round_trip_and_are_checked() -> None:
    status, how, x = _four_rows()
    wit = delta.RowWitnesses(np.array([1]), x)
    out = delta.LeafOutcomes(status, how, witnesses=wit)
    back = delta.LeafOutcomes.decode(out.encode(), 4)
    assert back.witnesses.rows.tolist() == [1] and np.array_equal(back.witnesses[1], x[0])
    assert 1 in back.witnesses and 2 not in back.witnesses and len(back.witnesses) == 1
    with_when = delta.LeafOutcomes(status, how, out, True, wit)
    again = delta.LeafOutcomes.decode(with_when.encode(), 4)
    assert again.when is not None and again.when.witnesses.rows.tolist() == [1]
    for rows in ([2], [0], [3], [4], [1, 1]):  # not a solver-violated row (or twice)
        bad = delta.RowWitnesses(np.array(rows), np.repeat(x, len(rows), axis=0))
        with pytest.raises(ValueError):
            delta.LeafOutcomes.decode(delta.LeafOutcomes(status, how, witnesses=bad).encode(), 4)
    blob = out.encode()
    for cut in (len(blob) - 1, len(blob) - 8, 1 + 12):
        with pytest.raises(ValueError):
            delta.LeafOutcomes.decode(blob[:cut], 4)
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(blob + b"\0", 4)


def test_shown_inputs_round_trip_and_are_checked() -> None:
    """The printed inputs of box-violated rows: kept by full rows and by deltas, refused on a
    row that is not violated or that the solver decided."""
    status, how, x = _four_rows()
    shown = delta.RowWitnesses(np.array([2]), x)
    out = delta.LeafOutcomes(status, how, shown=shown)
    back = delta.LeafOutcomes.decode(out.encode(), 4)
    assert back.shown.rows.tolist() == [2] and np.array_equal(back.shown[2], x[0])
    for rows in ([0], [1], [3], [4]):  # safe, solver-decided, unknown, out of range
        bad = delta.LeafOutcomes(status, how, shown=delta.RowWitnesses(np.array(rows), x))
        with pytest.raises(ValueError):
            delta.LeafOutcomes.decode(bad.encode(), 4)
    # A delta carries the new version's shown inputs whole; "same as base" keeps the base's.
    base = delta.LeafOutcomes(status, how)
    d = delta.encode_outcomes_delta(base, out)
    assert d is not None
    applied = delta.apply_outcomes_delta(base, d)
    assert applied.shown.rows.tolist() == [2] and np.array_equal(applied.shown.x, x)
    same = delta.apply_outcomes_delta(out, delta.same_as_base(out))
    assert same.shown.rows.tolist() == [2]
    safe_2 = delta.LeafOutcomes(np.array([0, 1, 0, 2], np.int8), how)
    with pytest.raises(ValueError):  # row 2 is safe in the outcomes the delta gives
        delta.apply_outcomes_delta(safe_2, d)
    with pytest.raises(ValueError):
        delta.apply_outcomes_delta(base, d[:-1])


def test_unchanged_printed_rows_reuse_their_inputs(tmp_path, monkeypatch) -> None:
    """A re-check prints the counterexamples of unchanged box-violated leaves from the kept
    inputs (no new witness search for them), and its report equals a fresh one."""
    src = _source(_full(6, 0.0, 10.0))
    names = ["slow", "solver"]
    prog = _filled(tmp_path, src, names)
    M.at(src["tree"], ("right",) * 6)["action"] = "allow"
    model = M.compile_(src)
    prog = M.program(names, model)
    fresh = check(model, prog, options=Z3)
    assert fresh.results[0].counterexamples, "the test needs printed counterexamples"
    calls: list[int] = []
    real = eg.witness

    def counted(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(eg, "witness", counted)
    with ProofCache(tmp_path) as cache:
        got = check(model, prog, cache=cache, options=Z3)
    assert M.comparable(got) == M.comparable(fresh)
    # Only rows whose leaf changed (here at most the one edited leaf) need a new witness.
    assert len(set(calls)) <= 1, calls


def test_a_kept_input_that_is_not_confirmed_is_not_printed() -> None:
    """finish's *earlier* inputs are only candidates: one the evaluator does not confirm (a
    damaged row) gives way to the witness a fresh run finds, and is not recorded."""
    from clefprove.geometry.boxes import leaf_boxes
    from clefprove.verify import api

    model = M.compile_(_source(_full(4, 0.0, 10.0)))
    inv = M.program(["slow"], model).invariants[0]
    prep = eg.prepare(model, inv, DEFAULTS.dnf_cap)
    pv = eg.decide(model, prep, leaf_boxes(model), DEFAULTS)
    fresh = api.finish(model, prep, pv, DEFAULTS, 3, 0.0)
    assert fresh.counterexamples
    wrong = np.full(len(model.features), -1.0)  # outside every domain of the model
    earlier = {int(r): wrong for r in pv.violating}
    seen: dict[int, np.ndarray] = {}
    got = api.finish(model, prep, pv, DEFAULTS, 3, 0.0, earlier=earlier, shown=seen.__setitem__)
    assert got.counterexamples == fresh.counterexamples
    assert len(seen) == len(fresh.counterexamples)
    assert not any(np.array_equal(x, wrong) for x in seen.values())


def _filled(tmp_path, src: dict, names: list[str]):
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache, options=Z3)
        check(model, prog, cache=cache, options=Z3)
    return prog


@pytest.mark.slow
def test_forged_witness_rows_fall_back_to_a_fresh_check(tmp_path) -> None:
    """An outcomes row whose witness section does not fit (re-signed, so only the structural
    checks can catch it) is corruption: the cache is rebuilt and the result is a fresh one."""
    src = _source(_full(4, 0.0, 10.0))
    names = ["solver", "slow"]
    _filled(tmp_path, src, names)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    rows = conn.execute("SELECT key, kind, value FROM snapshot WHERE kind LIKE 'out%'").fetchall()
    assert {r[1] for r in rows} == {"outcomes", "outb"}
    for key, kind, value in rows:
        forged = bytes(value) + b"\0" * 8  # a witness section (or delta) that does not match
        conn.execute(
            "UPDATE snapshot SET value = ?, chk = ? WHERE key = ?",
            (forged, _snapshot_chk(key, kind, forged), key),
        )
    conn.commit()
    conn.close()
    M.at(src["tree"], ("left",) * 4)["action"] = "allow"
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        got = check(model, prog, cache=cache, options=Z3)
        assert any("corrupt proof cache" in w for w in cache.warnings)
    assert M.comparable(got) == M.comparable(check(model, prog, options=Z3))


def test_outcomes_of_another_layout_are_not_read(tmp_path, monkeypatch) -> None:
    """Rows written in another outcomes layout (an older clefprove) are never found: the
    re-check is a correct one without them, and no corruption is reported."""
    src = _source(_full(4, 0.0, 10.0))
    names = ["solver", "slow"]
    monkeypatch.setattr(walk, "_OUTCOMES_FORMAT", 1)
    _filled(tmp_path, src, names)
    monkeypatch.undo()
    M.at(src["tree"], ("right",) * 4)["action"] = "allow"
    model = M.compile_(src)
    prog = M.program(names, model)
    with ProofCache(tmp_path) as cache:
        got = check(model, prog, cache=cache, options=Z3)
        assert not cache.warnings
    assert M.comparable(got) == M.comparable(check(model, prog, options=Z3))
    # Without outcomes on the last version, the invariants were decided by the subtree walk
    # (Z3's) or on every leaf (box-decided), not against the last version.
    assert got.results[1].paths_checked == 16


@pytest.mark.slow
def test_versions_are_stored_as_deltas_and_pruned_safely(tmp_path, monkeypatch) -> None:
    """A version that changes a few records is stored as a delta of a full snapshot (not the
    whole tree again); pruning keeps every full snapshot a kept delta rests on; another node
    count is stored in full.  Every re-check equals a fresh check."""
    from clefprove.incremental import store

    monkeypatch.setattr(store, "KEEP_TREES", 2)
    src = _source(_full(6, 0.0, 10.0))
    names = ["solver", "slow"]
    allow = [p for p in M.paths(src["tree"]) if M.at(src["tree"], p).get("action") == "allow"]

    def kinds() -> list[tuple[str, int]]:
        conn = sqlite3.connect(tmp_path / DB_NAME)
        try:
            rows = conn.execute(
                "SELECT kind, length(value) FROM snapshot WHERE kind IN ('tree', 'treed') "
                "ORDER BY stamp"
            ).fetchall()
        finally:
            conn.close()
        return [(str(k), int(n)) for k, n in rows]

    stamp = 0
    with ProofCache(tmp_path) as cache:
        for step in range(5):
            if step:
                M.at(src["tree"], allow[step])["action"] = "block"
            model = M.compile_(src)
            prog = M.program(names, model)
            got = check(model, prog, cache=cache, options=Z3)
            assert M.comparable(got) == M.comparable(check(model, prog, options=Z3))
            if step >= 2:
                assert got.results[0].paths_checked == 1
            stored = kinds()
            full = [n for k, n in stored if k == "tree"]
            assert len(full) == 1, stored  # the first version, which every delta rests on
            assert all(n < full[0] // 4 for k, n in stored if k == "treed"), stored
            assert len(stored) <= 3
            # Outcomes: one full row per invariant, written once; each run writes a delta.
            conn = sqlite3.connect(tmp_path / DB_NAME)
            outs = conn.execute(
                "SELECT kind, length(value), stamp FROM snapshot WHERE kind LIKE 'out%'"
            ).fetchall()
            conn.close()
            assert sorted(k for k, _, _ in outs) == ["outb", "outb", "outcomes", "outcomes"]
            # pointer, delta, and the printed inputs (carried whole: at most K=3 rows)
            shown = 8 + 3 * (4 + 8 * len(model.features))
            assert all(n < 64 + 64 + shown for k, n, _ in outs if k == "outcomes")
            if step:
                assert all(t <= stamp for k, _, t in outs if k == "outb"), (step, outs)
            stamp = max(t for _, _, t in outs)
        # A new node count: stored in full, and from then on deltas rest on it.
        M.at(src["tree"], allow[0])["action"] = "block"
        M.at(src["tree"], allow[0]).update(
            feature="n", threshold=3.0, left=dict(M.at(src["tree"], allow[0]))
        )
        node = M.at(src["tree"], allow[0])
        node.pop("action"), node.pop("confidence")
        node["right"] = {"action": "allow", "confidence": 0.9}
        node["left"] = {"action": "block", "confidence": 0.9}
        for _ in range(2):
            model = M.compile_(src)
            prog = M.program(names, model)
            got = check(model, prog, cache=cache, options=Z3)
            assert M.comparable(got) == M.comparable(check(model, prog, options=Z3))
            M.at(src["tree"], allow[5])["action"] = "block"
        assert [k for k, _ in kinds()][-2:] == ["tree", "treed"]


@settings(max_examples=30, deadline=None)
@given(M.sources())
def test_leaf_hashes_are_the_subtree_hashes_of_leaves(src) -> None:
    """A printed counterexample's leaf key needs its leaf's hash only, not the whole tree's."""
    from clefprove.incremental import merkle
    from clefprove.model.types import NodeKind

    model = M.compile_(src)
    leaves = np.flatnonzero(model.nodes["kind"] == NodeKind.LEAF)
    whole = merkle.subtree_hashes(M.compile_(src))
    assert np.array_equal(merkle.leaf_hashes(model, leaves), whole[leaves])
    assert np.array_equal(merkle.leaf_hashes(model, leaves[::-1]), whole[leaves[::-1]])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_listed_rows_cover_every_row_that_is_not_a_plain_safe_one(data) -> None:
    """What a re-check reads instead of every leaf: the listed rows of decoded outcomes and of
    deltas applied to them hold every row that is not SAFE with how NONE, and outcomes
    encode to the same bytes whether their listing is known or computed."""
    n = data.draw(st.integers(1, 60))
    codes = st.sampled_from([(0, eg.HOW_NONE)] * 6 + [(0, eg.HOW_SOLVER), (1, eg.HOW_BOX), (2, 0)])

    def outcomes() -> delta.LeafOutcomes:
        pairs = data.draw(st.lists(codes, min_size=n, max_size=n))
        return delta.LeafOutcomes(
            np.array([p[0] for p in pairs], np.int8), np.array([p[1] for p in pairs], np.int16)
        )

    def exact(o: delta.LeafOutcomes) -> set[int]:
        return set(np.flatnonzero((o.status != eg.SAFE) | (o.how != eg.HOW_NONE)).tolist())

    base = delta.LeafOutcomes.decode(outcomes().encode(), n)
    assert base.listed is None or set(base.listed.tolist()) == exact(base)
    new = outcomes()
    blob = delta.encode_outcomes_delta(base, new)
    if blob is not None:
        applied = delta.apply_outcomes_delta(base, blob)
        assert np.array_equal(applied.status, new.status) and np.array_equal(applied.how, new.how)
        assert exact(applied) <= set(applied.rows_listed().tolist())
        loose = dataclasses.replace(applied, listed=np.arange(n))  # any superset
        assert loose.encode() == dataclasses.replace(applied, listed=None).encode()
        assert delta.encode_outcomes_delta(base, loose) == delta.encode_outcomes_delta(
            dataclasses.replace(base, listed=None), dataclasses.replace(applied, listed=None)
        )
