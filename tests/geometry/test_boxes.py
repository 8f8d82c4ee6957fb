"""The whole tree's leaf boxes from each leaf's ancestors against stepping down level by level."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.geometry import boxes as bx
from clefprove.model.clef import load
from clefprove.model.source import compile_source
from tests.helpers import ROOT
from tests.verify.gen import models


@pytest.fixture(scope="module")
def edge():
    return load(ROOT / "examples" / "edge-allow-block.clef")


def _same_bits(a: bx.LeafBoxes, b: bx.LeafBoxes) -> None:
    assert np.array_equal(a.leaves, b.leaves)
    assert a.lo.tobytes() == b.lo.tobytes() and a.hi.tobytes() == b.hi.tobytes()
    assert a.cats.keys() == b.cats.keys()
    for f in a.cats:
        assert np.array_equal(a.cats[f], b.cats[f])
    assert np.array_equal(a.actions, b.actions) and np.array_equal(a.feasible, b.feasible)


def _from_ancestors(model, domain) -> bx.LeafBoxes:
    return bx.ancestor_boxes(model, domain, np.flatnonzero(model.nodes["kind"] == 0))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_ancestor_route_equals_stepping_down(data):
    model = data.draw(models(all_int=data.draw(st.booleans()), max_depth=5))
    domain = bx.Box.domain(model)
    _same_bits(_from_ancestors(model, domain), bx.stepped_leaf_boxes(model, 0, domain))


def test_ancestor_route_on_the_example(edge):
    model = edge
    domain = bx.Box.domain(model)
    _same_bits(_from_ancestors(model, domain), bx.stepped_leaf_boxes(model, 0, domain))
    _same_bits(bx.leaf_boxes(model), bx.stepped_leaf_boxes(model, 0, domain))


def test_signed_zeros_are_applied_in_path_order():
    """min(-0.0, 0.0) keeps its second argument: the order of the tightenings decides the bits
    of a bound, so both routes must apply a leaf's splits root first."""
    feature = {"name": "x", "type": "float", "min": -1.0, "max": 1.0, "default": 0.0}

    def leaf(a: str) -> dict:
        return {"action": a, "confidence": 1.0}

    tree = {
        "feature": "x",
        "threshold": 0.0,
        "left": {"feature": "x", "threshold": -0.0, "left": leaf("allow"), "right": leaf("block")},
        "right": leaf("block"),
    }
    model = compile_source({"features": [feature], "actions": ["allow", "block"], "tree": tree})
    domain = bx.Box.domain(model)
    fast = _from_ancestors(model, domain)
    _same_bits(fast, bx.stepped_leaf_boxes(model, 0, domain))
    assert np.signbit(fast.hi[0, 0])  # the deeper split's -0.0 is the last word


def test_leaf_boxes_takes_either_route_with_the_same_result(edge, monkeypatch):
    domain = bx.Box.domain(edge)
    fast = bx.leaf_boxes(edge)
    monkeypatch.setattr(bx, "ANCESTOR_PAIRS_MAX", 0)  # every tree is past the pair budget
    _same_bits(bx.leaf_boxes(edge), fast)
    _same_bits(bx.stepped_leaf_boxes(edge, 0, domain), fast)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_boxes_of_some_leaves_are_their_rows(data):
    model = data.draw(models(all_int=data.draw(st.booleans()), max_depth=5))
    whole = bx.stepped_leaf_boxes(model, 0, bx.Box.domain(model))
    rows = sorted(data.draw(st.sets(st.integers(0, whole.size - 1))))
    _same_bits(bx.boxes_of(model, whole.leaves[rows]), whole.take(np.array(rows, dtype=np.int64)))
    inner = int(np.flatnonzero(model.nodes["kind"] != 0)[0]) if model.n_nodes > 1 else None
    if inner is not None:
        with pytest.raises(ValueError, match=f"node {inner} is not a leaf"):
            bx.boxes_of(model, np.array([inner]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_both_routes_of_ancestor_boxes_agree(data):
    """Few leaves take their paths by descent, many the whole tree's parent links."""
    model = data.draw(models(all_int=data.draw(st.booleans()), max_depth=5))
    domain = bx.Box.domain(model)
    leaves = np.flatnonzero(model.nodes["kind"] == 0)
    by_descent = bx.ancestor_boxes(model, domain, leaves)
    assert leaves.size <= bx.FEW_PATHS
    saved = bx.FEW_PATHS
    try:
        bx.FEW_PATHS = -1
        _same_bits(bx.ancestor_boxes(model, domain, leaves), by_descent)
    finally:
        bx.FEW_PATHS = saved


def _breadth_first(model):
    """*model* with its nodes renumbered breadth first (children still after parents, but a
    right subtree no longer starts where the left one ends): not the pre-order layout."""
    import dataclasses

    nodes = model.nodes
    order, at = [0], 0
    while at < len(order):
        n = order[at]
        at += 1
        if nodes["kind"][n] != 0:
            order += [int(nodes["left"][n]), int(nodes["right"][n])]
    new_of = np.empty(len(order), dtype=np.int64)
    new_of[order] = np.arange(len(order))
    out = nodes[order].copy()
    split = out["kind"] != 0
    out["left"][split] = new_of[out["left"][split]]
    out["right"][split] = new_of[out["right"][split]]
    return dataclasses.replace(model, nodes=out), new_of


def test_paths_on_a_layout_that_is_not_pre_order(edge):
    """The descent rule assumes pre-order; on another layout it must not give a wrong path
    (it falls back to parent links), and boxes stay those of the same leaves."""
    bfs, new_of = _breadth_first(edge)
    leaves = np.flatnonzero(edge.nodes["kind"] == 0)
    for leaf in leaves.tolist():
        want = [(int(new_of[n]), left) for n, left in bx.path_to(edge, leaf)]
        assert bx.path_to(bfs, int(new_of[leaf])) == want
    some = leaves[:: max(1, leaves.size // 20)]
    mine = bx.boxes_of(edge, some)
    theirs = bx.boxes_of(bfs, np.sort(new_of[some]))
    order = np.argsort(new_of[some])
    assert mine.lo[order].tobytes() == theirs.lo.tobytes()
    assert mine.hi[order].tobytes() == theirs.hi.tobytes()
    assert np.array_equal(mine.actions[order], theirs.actions)


def test_lazy_boxes_prefetched_rows_are_the_rows_of_the_whole_tree(edge):
    whole = bx.leaf_boxes(edge)
    lazy = bx.LazyLeafBoxes(edge, whole.leaves)
    rows = np.array([0, 3, whole.size - 1], dtype=np.int64)
    lazy.prefetch(rows)
    for r in [*rows.tolist(), 5]:  # prefetched rows and one that is not
        _same_bits(lazy.take(np.array([r])), whole.take(np.array([r])))


def _route(model, domain, leaves, per_node: bool) -> bx.LeafBoxes:
    """ancestor_boxes by its per-node route (:func:`incoming` tables) or its per-pair route
    (each pair's split bound computed for the pair), whatever the share of leaves."""
    share, few = bx.INCOMING_SHARE, bx.FEW_PATHS
    bx.INCOMING_SHARE = 10**9 if per_node else 0
    bx.FEW_PATHS = -1  # not the descent route of a few leaves
    try:
        return bx.ancestor_boxes(model, domain, leaves)
    finally:
        bx.INCOMING_SHARE, bx.FEW_PATHS = share, few


def _per_pair(model, domain, leaves) -> bx.LeafBoxes:
    return _route(model, domain, leaves, per_node=False)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_per_node_tables_equal_the_per_pair_route(data):
    """The whole tree's route (each node's bound once, neutral +-inf steps, code sets as
    bits) against the per-pair route and stepping down, bit for bit; with code sets as bits
    and by pairs (CAT_BITS lowered), and with a max_depth that understates the tree."""
    model = data.draw(models(all_int=data.draw(st.booleans()), max_depth=5))
    domain = bx.Box.domain(model)
    leaves = np.flatnonzero(model.nodes["kind"] == 0)
    rows = sorted(data.draw(st.sets(st.integers(0, leaves.size - 1), min_size=1)))
    some = leaves[rows]
    reference = _per_pair(model, domain, some)
    _same_bits(_route(model, domain, some, per_node=True), reference)
    _same_bits(_from_ancestors(model, domain), bx.stepped_leaf_boxes(model, 0, domain))
    cat_bits = bx.CAT_BITS
    bx.CAT_BITS = data.draw(st.sampled_from([0, 2, 3]))
    try:
        fresh = dataclasses.replace(model)  # empty memo: the tables are built again
        _same_bits(_route(fresh, domain, some, per_node=True), reference)
    finally:
        bx.CAT_BITS = cat_bits
    shallow = dataclasses.replace(model, max_depth=data.draw(st.integers(0, model.max_depth)))
    _same_bits(_route(shallow, domain, some, per_node=True), reference)


def test_per_node_tables_on_the_example(edge):
    domain = bx.Box.domain(edge)
    leaves = np.flatnonzero(edge.nodes["kind"] == 0)
    _same_bits(bx.ancestor_boxes(edge, domain, leaves), _per_pair(edge, domain, leaves))
