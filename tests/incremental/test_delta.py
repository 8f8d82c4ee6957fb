"""Re-checking against the last version: the alignment and the assembled leaf boxes are exact."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import delta
from clefprove.verify import engine as eg
from clefprove.verify.boxes import LeafBoxes, leaf_boxes
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_assembled_boxes_equal_fresh_ones(data) -> None:
    """Whatever the edit, the boxes built from the snapshot equal ``leaf_boxes`` bit for bit,
    and every leaf called unchanged has the old leaf's box and record."""
    draw = data.draw
    src = draw(M.sources())
    old_model = M.compile_(src)
    snap = delta.decode_tree(delta.encode_tree(old_model, leaf_boxes(old_model)))
    _same_boxes(snap.boxes, leaf_boxes(old_model))
    for _ in range(draw(st.integers(1, 3))):
        src = _edit(draw, src)
    model = M.compile_(src)
    al = delta.align(snap, model)
    boxes = delta.assemble_boxes(model, snap, al)
    _same_boxes(boxes, leaf_boxes(model))
    old_leaves = old_model.nodes[snap.boxes.leaves[al.clean_old_rows]]
    new_leaves = model.nodes[al.clean_new]
    assert np.array_equal(old_leaves["aux"], new_leaves["aux"])
    assert np.array_equal(old_leaves["value"], new_leaves["value"])
    # Every leaf is either unchanged or below exactly one changed root.
    below = [leaf_boxes(model, int(r)).leaves for r in al.changed_roots]
    covered = np.concatenate([al.clean_new, *below])
    assert np.array_equal(np.sort(covered), boxes.leaves)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reused_outcomes_equal_fresh_outcomes(data) -> None:
    """Statuses after reuse equal a fresh decision of every leaf, for every pool invariant."""
    draw = data.draw
    src = draw(M.sources())
    old_model = M.compile_(src)
    old_boxes = leaf_boxes(old_model)
    snap = delta.decode_tree(delta.encode_tree(old_model, old_boxes))
    model = M.compile_(_edit(draw, src))
    al = delta.align(snap, model)
    boxes = delta.assemble_boxes(model, snap, al)
    for name in sorted(M.POOL):
        old_inv = M.program([name], old_model).invariants[0]
        inv = M.program([name], model).invariants[0]
        before = eg.decide(old_model, eg.prepare(old_model, old_inv), old_boxes)
        old = delta.LeafOutcomes.decode(
            delta.LeafOutcomes(before.status, before.how).encode(), old_boxes.size
        )
        prep = eg.prepare(model, inv)
        pv, reused = delta.reuse(model, prep, boxes, al, old, eg.Settings())
        fresh = eg.decide(model, prep, leaf_boxes(model))
        assert np.array_equal(pv.status, fresh.status), name
        decided_by_boxes = fresh.how != eg.HOW_SOLVER
        assert np.array_equal(pv.how[decided_by_boxes], fresh.how[decided_by_boxes]), name
        assert 0 <= reused <= al.clean_new.size


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
    snap = delta.decode_tree(delta.encode_tree(model, leaf_boxes(model)))
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
    blob = delta.encode_tree(model, leaf_boxes(model))
    with pytest.raises(ValueError):
        delta.decode_tree(blob[:cut] if cut >= 0 else blob + b"\0")
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\0" * 5, 2)
    with pytest.raises(ValueError):
        delta.LeafOutcomes.decode(b"\x07\0" + b"\0" * 4, 2)
