"""The re-count of a relational invariant after an edit (verify/pairdelta.py) against a fresh
check of the edited tree: the same count, the same first pairs, the same printed result.

Edits keep the tree's shape (one node's record changed: a leaf's action or confidence, a
split's threshold), so that node ids are the same before and after; edits that change the
shape go through the proof cache's alignment (tests/incremental/test_relational_recheck.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from clefprove.geometry.boxes import leaf_boxes
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.verify import pairdelta
from clefprove.verify.options import CheckOptions
from clefprove.verify.relational import (
    EXTRA_CONFIRM,
    PairChecker,
    PairCount,
    check_relational,
    prepare,
)
from tests.verify.gen import models
from tests.verify.test_relational import pair_models, relational_invariants

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _below(model: Model, root: int) -> np.ndarray:
    """The leaves at or below *root*, sorted."""
    nodes = model.nodes
    out, todo = [], [root]
    while todo:
        n = todo.pop()
        if nodes["kind"][n] == NodeKind.LEAF:
            out.append(n)
        else:
            todo += [int(nodes["left"][n]), int(nodes["right"][n])]
    return np.array(sorted(out), dtype=np.int64)


@st.composite
def edits(draw, model: Model) -> tuple[Model, int]:
    """*model* with one node's record changed (same shape), and that node."""
    nodes = model.nodes.copy()
    kind = nodes["kind"]
    choices = np.flatnonzero(kind != NodeKind.CATEGORICAL)
    r = int(draw(st.sampled_from(choices.tolist())))
    if kind[r] == NodeKind.LEAF:
        if draw(st.booleans()):
            nodes["aux"][r] = draw(st.integers(0, len(model.actions) - 1))
        else:
            nodes["value"][r] = draw(st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]))
    else:
        f = model.features[int(nodes["feature"][r])]
        lo, hi = float(f.min), float(f.max)
        if f.type is FeatureType.FLOAT:
            t = draw(st.floats(lo - 1, hi + 1, allow_nan=False))
        else:
            t = draw(st.integers(int(lo) - 1, int(hi) + 1)) + draw(st.sampled_from([0.0, 0.5]))
        nodes["value"][r] = t
    nodes.flags.writeable = False
    return dataclasses.replace(model, nodes=nodes), r


def _count(model: Model, inv, severity, k: int) -> tuple[object, PairCount | None]:
    kept: list[PairCount] = []
    res = check_relational(model, inv, severity, CheckOptions(), k, keep=kept.append)
    return res, (kept[0] if kept else None)


def _comparable(res) -> dict:
    d = dataclasses.asdict(res)
    for key in ("seconds", "paths_checked", "paths_reused"):
        d.pop(key)
    return d


@SETTINGS
@given(st.data())
def test_recount_after_an_edit_equals_a_fresh_count(data):
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False, max_depth=6)))
    inv, severity = data.draw(relational_invariants(model))
    prep = prepare(model, inv, severity)
    pc = PairChecker(model, prep)
    assume(pc.on_boxes)
    event("one conjunction" if len(pc.sides) == 1 else "several conjunctions")
    k = data.draw(st.sampled_from([0, 1, 3]))
    _, old = _count(model, inv, severity, data.draw(st.sampled_from([0, 1, 3, 10])))
    assert old is not None
    new_model, r = data.draw(edits(model))
    fresh, truth = _count(new_model, inv, severity, k)
    assert truth is not None
    gone_leaves = _below(model, r)
    old_boxes = leaf_boxes(model)
    gone = old_boxes.take(np.searchsorted(old_boxes.leaves, gone_leaves))
    new_boxes = leaf_boxes(new_model)
    added = new_boxes.take(np.searchsorted(new_boxes.leaves, _below(new_model, r)))
    nprep = prepare(new_model, inv, severity)
    got = pairdelta.recount(new_model, nprep, old, k, gone, added, lambda ids: ids)
    event("recounted" if got is not None else "left to a fresh check")
    if got is None:
        return
    assert got.total == truth.total
    n = got.first.shape[0]
    assert n >= min(max(k, 1) + EXTRA_CONFIRM, truth.total)
    assert np.array_equal(got.first, truth.first[:n])
    res = pairdelta.counted_result(
        new_model, nprep, CheckOptions(), k, 0.0, got, paths_checked=0, paths_reused=0
    )
    assert res is not None
    assert _comparable(res) == _comparable(fresh)


@SETTINGS
@given(st.data())
def test_touching_counts_the_pairs_of_given_leaves(data):
    """Every leaf given: the pairs touching them are all pairs (given x given only)."""
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False, max_depth=6)))
    inv, severity = data.draw(relational_invariants(model))
    prep = prepare(model, inv, severity)
    assume(PairChecker(model, prep).on_boxes)
    _, truth = _count(model, inv, severity, 10**6)
    assert truth is not None
    boxes = leaf_boxes(model)
    some = np.array(sorted(set(data.draw(st.lists(st.sampled_from(boxes.leaves.tolist()))))))
    some = some.astype(np.int64)
    every = pairdelta.touching(model, prep, boxes, boxes.leaves, boxes.leaves, listed=True)
    assert every.count == truth.total
    assert np.array_equal(every.pairs, truth.first)
    # Some leaves given, the others in the tree: exactly the pairs with one of them.
    given_boxes = boxes.take(np.searchsorted(boxes.leaves, some))
    part = pairdelta.touching(model, prep, given_boxes, some, some, listed=True)
    expect = [p for p in truth.first.tolist() if p[0] in some or p[1] in some]
    assert part.count == len(expect)
    assert part.pairs.tolist() == expect
