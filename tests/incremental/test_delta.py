"""Re-checking against the last version: the alignment and the assembled leaf boxes are exact."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.geometry.boxes import LeafBoxes, boxes_of, cat_mask, leaf_boxes
from clefprove.incremental import delta
from clefprove.verify import engine as eg
from clefprove.verify.options import CheckOptions
from tests.incremental import models as M


def _same_boxes(a: LeafBoxes, b: LeafBoxes) -> None:
    assert np.array_equal(a.leaves, b.leaves)
    # Bit for bit: -0.0 and 0.0 would print differently in a counterexample.
    assert np.array_equal(a.lo.view(np.int64), b.lo.view(np.int64))
    assert np.array_equal(a.hi.view(np.int64), b.hi.view(np.int64))
    assert sorted(a.cats) == sorted(b.cats)
    for f in a.cats:
        assert np.array_equal(a.cats[f], b.cats[f])
    assert np.array_equal(a.actions, b.actions)
    assert np.array_equal(a.feasible, b.feasible)


def _edit(draw, src: dict) -> dict:
    src = copy.deepcopy(src)
    t = src["tree"]
    kind = draw(st.sampled_from(["leaf", "threshold", "subtree", "none"]))
    if kind == "leaf":
        node = M.at(t, draw(st.sampled_from([p for p in M.paths(t) if "action" in M.at(t, p)])))
        node["action"] = draw(st.sampled_from(M.ACTIONS))
        node["confidence"] = draw(st.sampled_from(M.CONFIDENCES))
    elif kind == "threshold":
        splits = [p for p in M.paths(t) if "threshold" in M.at(t, p)]
        if splits:
            node = M.at(t, draw(st.sampled_from(splits)))
            node["threshold"] = draw(st.sampled_from(M.THRESHOLDS[node["feature"]]))
    elif kind == "subtree":
        path = draw(st.sampled_from(M.paths(t)))
        new = M.tree(draw, 3)
        if path:
            M.at(t, path[:-1])[path[-1]] = new
        else:
            src["tree"] = new
    return src


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_alignment_is_exact(data) -> None:
    """Whatever the edit: every leaf is unchanged or below exactly one changed root; an
    unchanged leaf has the old leaf's record and *box*; the changed leaves' boxes (and any
    leaf's, from its path alone) are the rows of a fresh ``leaf_boxes``."""
    draw = data.draw
    src = draw(M.sources())
    old_model = M.compile_(src)
    snap = delta.decode_tree(delta.encode_tree(old_model))
    assert np.array_equal(snap.nodes, old_model.nodes)
    for _ in range(draw(st.integers(1, 3))):
        src = _edit(draw, src)
    model = M.compile_(src)
    al = delta.align(snap, model)
    fresh = leaf_boxes(model)
    assert np.array_equal(al.leaves, fresh.leaves)
    changed = delta.changed_boxes(model, al)
    covered = np.concatenate([al.clean_new, changed.leaves])
    assert np.array_equal(np.sort(covered), fresh.leaves)  # a partition: no leaf twice
    _same_boxes(changed, fresh.take(np.searchsorted(fresh.leaves, changed.leaves)))
    old_leaves = snap.leaves[al.clean_old_rows]
    assert np.array_equal(old_model.nodes[old_leaves]["aux"], model.nodes[al.clean_new]["aux"])
    assert np.array_equal(
        old_model.nodes[old_leaves]["value"].view(np.int64),
        model.nodes[al.clean_new]["value"].view(np.int64),
    )
    new_rows = boxes_of(model, al.clean_new)
    old_rows = boxes_of(old_model, old_leaves)
    assert np.array_equal(new_rows.lo.view(np.int64), old_rows.lo.view(np.int64))
    assert np.array_equal(new_rows.hi.view(np.int64), old_rows.hi.view(np.int64))
    for f in set(new_rows.cats) | set(old_rows.cats):
        assert np.array_equal(
            cat_mask(new_rows.cats, f, new_rows.size, 3),
            cat_mask(old_rows.cats, f, old_rows.size, 3),
        )
    _same_boxes(new_rows, fresh.take(np.searchsorted(fresh.leaves, al.clean_new)))


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reused_outcomes_equal_fresh_outcomes(data) -> None:
    """Statuses after reuse equal a fresh decision of every leaf, for every pool invariant."""
    draw = data.draw
    src = draw(M.sources())
    old_model = M.compile_(src)
    old_boxes = leaf_boxes(old_model)
    snap = delta.decode_tree(delta.encode_tree(old_model))
    model = M.compile_(_edit(draw, src))
    al = delta.align(snap, model)
    fresh_boxes = leaf_boxes(model)

    def boxes_for(leaves: np.ndarray) -> LeafBoxes:
        return boxes_of(model, leaves)

    for name in sorted(M.POOL):
        old_inv = M.program([name], old_model).invariants[0]
        inv = M.program([name], model).invariants[0]
        before = eg.decide(old_model, eg.prepare(old_model, old_inv), old_boxes)
        old = delta.LeafOutcomes.decode(
            delta.LeafOutcomes(before.status, before.how).encode(), old_boxes.size
        )
        prep = eg.prepare(model, inv)
        pv, decided = delta.reuse(model, prep, al, old, boxes_for, CheckOptions())
        fresh = eg.decide(model, prep, fresh_boxes)
        assert np.array_equal(pv.status, fresh.status), name
        decided_by_boxes = fresh.how != eg.HOW_SOLVER
        assert np.array_equal(pv.how[decided_by_boxes], fresh.how[decided_by_boxes]), name
        assert decided >= al.leaves.size - al.clean_new.size
        # Witnesses of box-decided violations come from the lazily computed boxes.
        for r in np.flatnonzero((pv.status == eg.VIOLATED) & decided_by_boxes)[:3].tolist():
            assert np.array_equal(eg.witness(model, prep, pv, r), eg.witness(model, prep, fresh, r))


def test_unchanged_model_aligns_completely() -> None:
    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": {
            "feature": "c",
            "in": ["a"],
            "left": {"action": "allow", "confidence": 0.5},
            "right": {
                "feature": "x",
                "threshold": 2.5,
                "left": {"action": "block", "confidence": 0.9},
                "right": {"action": "allow", "confidence": 0.5},
            },
        },
    }
    model = M.compile_(src)
    snap = delta.decode_tree(delta.encode_tree(model))
    al = delta.align(snap, model)
    assert al.unchanged and al.clean_new.tolist() == [1, 3, 4]
    src["tree"]["in"] = ["a", "b"]  # the categorical set changed: everything below it
    al = delta.align(snap, M.compile_(src))
    assert al.changed_roots.tolist() == [0] and al.clean_new.size == 0


@pytest.mark.parametrize("cut", [0, 5, 30, -1])
def test_damaged_snapshot_is_refused(cut: int) -> None:
    model = M.compile_(
        {
            "name": "t",
            "version": "1",
            "features": copy.deepcopy(M.FEATURES),
            "actions": list(M.ACTIONS),
            "tree": {
                "feature": "x",
                "threshold": 1.0,
                "left": {"action": "allow", "confidence": 0.5},
                "right": {"action": "block", "confidence": 0.5},
            },
        }
    )
    blob = delta.encode_tree(model)
    with pytest.raises(ValueError):
        delta.decode_tree(blob[:cut] if cut >= 0 else blob + b"\0")
    bad_child = bytearray(blob)
    bad_child[24 + 8 : 24 + 12] = (0).to_bytes(4, "little")  # the root's left child: itself
    with pytest.raises(ValueError):
        delta.decode_tree(bytes(bad_child))
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\0" * 5, 2)
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\0\x07\0" + b"\0" * 4, 2)
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\1" + b"\0" * 6, 2)  # says it has 'when' outcomes
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\4" + b"\0" * 6, 2)  # vacuous, but not known
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\x08" + b"\0" * 6, 2)
    ok = delta.LeafOutcomes(np.array([0, 1], np.int8), np.array([-3, -1], np.int16))
    for when in (None, ok):
        for vacuous in (None, False, True):
            back = delta.LeafOutcomes.decode(
                delta.LeafOutcomes(ok.status, ok.how, when, vacuous).encode(), 2
            )
            assert back.how.tolist() == [-3, -1] and back.vacuous is vacuous
            assert (back.when is None) == (when is None)
