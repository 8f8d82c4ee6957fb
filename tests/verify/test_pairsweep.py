"""The tree descent for relational pairs against the pair matrix and exhaustive enumeration."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.verify import pairsweep, relational
from clefprove.verify.relational import (
    EXTRA_CONFIRM,
    PairChecker,
    box_pairs,
    check_relational,
    matrix_pairs,
    prepare,
)
from tests.verify.gen import models
from tests.verify.test_relational import (
    exhaustive_violating_pairs,
    pair_models,
    relational_invariants,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_as_matrix(model, inv, severity) -> None:
    prep = prepare(model, inv, severity)
    pc = PairChecker(model, prep)
    want = 3 + EXTRA_CONFIRM
    expected = matrix_pairs(pc, want)
    assert box_pairs(pc, want, matrix_cells=0) == expected
    saved = pairsweep.DUAL_BATCH
    try:  # node pairs stepped in tiny pieces, per-row partners flushed on the way
        pairsweep.DUAL_BATCH = 3
        assert box_pairs(PairChecker(model, prep), want, matrix_cells=0) == expected
    finally:
        pairsweep.DUAL_BATCH = saved


@FAST
@given(st.data())
def test_descent_equals_matrix_float(data):
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False)))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix(model, inv, severity)


@FAST
@given(st.data())
def test_descent_equals_matrix_and_enumeration_integer(data):
    model = data.draw(st.one_of(models(all_int=True), pair_models(all_int=True)))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix(model, inv, severity)
    truth = exhaustive_violating_pairs(model, inv, severity)
    prep = prepare(model, inv, severity)
    n_sat, _, undecided = box_pairs(PairChecker(model, prep), 19, matrix_cells=0)
    if not undecided:  # linear 'when' literals left to Z3 are checked in test_relational
        assert n_sat == len(truth)


@FAST
@given(st.data())
def test_check_reports_the_same_through_descent_and_matrix(data):
    """The whole check (counts, confirmed counterexample pairs, warnings) is the same whichever
    finds the pairs."""
    model = data.draw(st.one_of(models(all_int=False), pair_models(all_int=False)))
    inv, severity = data.draw(relational_invariants(model))
    saved = relational.MATRIX_CELLS
    try:
        relational.MATRIX_CELLS = 1 << 62
        by_matrix = check_relational(model, inv, severity)
        relational.MATRIX_CELLS = 0
        by_descent = check_relational(model, inv, severity)
    finally:
        relational.MATRIX_CELLS = saved
    assert dataclasses.replace(by_descent, seconds=0.0) == dataclasses.replace(
        by_matrix, seconds=0.0
    )


def _breadth_first(model):
    """The same tree with its nodes numbered breadth first (valid, not pre-order)."""
    import numpy as np

    from clefprove.model.clef import encode_clef, load_bytes

    nodes = model.nodes
    order = [0]
    for i in order:
        if nodes["kind"][i] != 0:
            order += [int(nodes["left"][i]), int(nodes["right"][i])]
    new_of = np.empty(len(order), dtype=np.int64)
    new_of[order] = np.arange(len(order))
    out = nodes[order].copy()
    leaf = out["kind"] == 0
    out["left"] = np.where(leaf, np.arange(len(order)), new_of[out["left"]])
    out["right"] = np.where(leaf, np.arange(len(order)), new_of[out["right"]])
    data = encode_clef(
        model.name,
        model.version,
        model.features,
        model.actions,
        out,
        model.membership,
        model.max_depth,
    )
    return load_bytes(data)


@FAST
@given(st.data())
def test_descent_without_pre_order_nodes(data):
    """Nodes not in pre-order (rows below a node not one range): the per-leaf descent counts,
    with the same results as the matrix."""
    model = _breadth_first(data.draw(pair_models(all_int=False)))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix(model, inv, severity)
