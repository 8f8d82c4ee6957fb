"""The tree descent for relational pairs against the pair matrix and exhaustive enumeration."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.model.loading import load_model
from clefprove.model.source import compile_source
from clefprove.verify import pairsweep, pool, relational
from clefprove.verify.options import CheckOptions
from clefprove.verify.relational import (
    EXTRA_CONFIRM,
    PairChecker,
    box_pairs,
    check_relational,
    matrix_pairs,
    prepare,
)
from tests.verify.gen import ACTIONS, feature_specs, models, trees
from tests.verify.test_relational import (
    assert_counterexamples_replay,
    exhaustive_violating_pairs,
    fp_reference_violating_pairs,
    pair_models,
    relational_invariants,
)

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
    # dealt into parts at the first step, each part counted alone (in any order)
    saved_pairs = pairsweep.FAN_OUT_PAIRS
    try:
        pairsweep.FAN_OUT_PAIRS = 1
        pc = PairChecker(model, prep)
        assert box_pairs(pc, want, matrix_cells=0, fan_out=_reversed_map) == expected
    finally:
        pairsweep.FAN_OUT_PAIRS = saved_pairs


def _reversed_map(count, parts):
    return [count(p) for p in reversed(parts)]


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


def _same_as_matrix_every_mode(model, inv, severity) -> None:
    """The descent with the cell blocks off / everywhere and the two-column count on (for
    blocks of every size), against the matrix."""
    saved = (
        pairsweep.CELL_BLOCK,
        pairsweep.LOW_DIM,
        pairsweep.LOW_DIM_DENSITY,
        pairsweep.SPLIT_BOTH,
        pairsweep.COMPRESS,
    )
    modes = (
        (0, 1, 0, 8.0, True),
        (0, 1, 0, 8.0, False),
        (1 << 40, 1, 0, 8.0, True),
        (0, 2, 0, 0.0, True),
        (4, 2, 2, 1e9, False),
        (0, 1, 0, 1e9, True),
        (0, 0, 0, 8.0, True),
    )
    try:
        for mode in modes:
            (
                pairsweep.CELL_BLOCK,
                pairsweep.LOW_DIM,
                pairsweep.LOW_DIM_DENSITY,
                pairsweep.SPLIT_BOTH,
                pairsweep.COMPRESS,
            ) = mode
            _same_as_matrix(model, inv, severity)
    finally:
        (
            pairsweep.CELL_BLOCK,
            pairsweep.LOW_DIM,
            pairsweep.LOW_DIM_DENSITY,
            pairsweep.SPLIT_BOTH,
            pairsweep.COMPRESS,
        ) = saved


@pytest.mark.slow
@SMALL
@given(st.data())
def test_descent_split_rules_equal_matrix(data):
    """One node per step (SPLIT_BOTH = 0), both of every pair of non-leaves (a huge factor) and
    the default, with the cell blocks off so that the descent reaches the leaves: the same
    counts and first pairs as the matrix (int and float columns, categorical ones, 'when')."""
    all_int = data.draw(st.booleans())
    model = data.draw(pair_models(all_int=all_int, max_depth=6))
    inv, severity = data.draw(relational_invariants(model))
    saved = (pairsweep.CELL_BLOCK, pairsweep.SPLIT_BOTH, pairsweep.COMPRESS)
    try:
        for cells, both, chains in (
            (0, 0.0, True),
            (0, 0.0, False),
            (0, 1e9, True),
            (0, 8.0, True),
            (16, 1.0, False),
        ):
            pairsweep.CELL_BLOCK, pairsweep.SPLIT_BOTH, pairsweep.COMPRESS = cells, both, chains
            _same_as_matrix(model, inv, severity)
    finally:
        pairsweep.CELL_BLOCK, pairsweep.SPLIT_BOTH, pairsweep.COMPRESS = saved


@pytest.mark.slow
@FAST
@given(st.data())
def test_cell_test_on_packed_rows_equals_pair_test(data):
    """PairSweep.cell_ok (actions first, numeric columns from one packed row per leaf) gives
    pair_ok(0, 0)'s answer on every pair of leaf rows, and the range cells of node pairs are
    every pair of active rows below them (plus inactive rows only, which the test rejects)."""
    all_int = data.draw(st.booleans())
    model = data.draw(st.one_of(models(all_int=all_int), pair_models(all_int=all_int)))
    inv, severity = data.draw(relational_invariants(model))
    pc = PairChecker(model, prepare(model, inv, severity))
    if not pc.sides:  # 'when' has no conjunction: no pair to test
        return
    sweep = pairsweep.PairSweep(pc)
    n = pc.boxes.size
    pa, pb = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    assert np.array_equal(sweep.cell_ok(pa, pb), sweep.pair_ok(0, 0, pa, pb))
    agg = sweep.aggregates(0)
    if not agg.contiguous:
        return
    nodes = np.flatnonzero(agg.n_live > 0)
    if not nodes.size:
        return
    k = data.draw(st.integers(0, 5))
    us = np.array(data.draw(st.lists(st.sampled_from(nodes.tolist()), min_size=k, max_size=k)))
    vs = np.array(data.draw(st.lists(st.sampled_from(nodes.tolist()), min_size=k, max_size=k)))
    us, vs = us.astype(np.int64), vs.astype(np.int64)
    ra, rb = sweep._range_cells(us, vs)
    ok = pc.sides[0].ok
    keep = ok[ra] & ok[rb]
    want = [
        (a, b)
        for u, v in zip(us.tolist(), vs.tolist(), strict=True)
        for a in range(pc.boxes.size)
        if ok[a] and _below(sweep, u, a)
        for b in range(pc.boxes.size)
        if ok[b] and _below(sweep, v, b)
    ]
    assert sorted(zip(ra[keep].tolist(), rb[keep].tolist(), strict=True)) == sorted(want)


@pytest.mark.slow
@FAST
@given(st.data())
def test_descent_modes_equal_matrix(data):
    """Deeper trees (blocks met on all columns but one or two occur there)."""
    all_int = data.draw(st.booleans())
    model = data.draw(pair_models(all_int=all_int, max_depth=7))
    inv, severity = data.draw(relational_invariants(model))
    _same_as_matrix_every_mode(model, inv, severity)


_ENDS = st.sampled_from([-np.inf, -2.5, -1.0, 0.0, 0.5, 1.0, 1.0000000000000002, 3.0, np.inf])


@st.composite
def _box_sets(draw, k: int):
    """(block, lo, hi) of random closed boxes in k columns, ends drawn from a few values (ties,
    touching ends, infinities; an open end is the next float, as the leaf boxes store it)."""
    n = draw(st.integers(0, 30))
    blocks = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    lo = np.empty((n, k))
    hi = np.empty((n, k))
    for i in range(n):
        for d in range(k):
            a, b = sorted((draw(_ENDS), draw(_ENDS)))
            if draw(st.booleans()) and np.isfinite(a):  # open lower end (a, b]
                a = float(np.nextafter(a, np.inf))
                b = max(a, b)
            lo[i, d], hi[i, d] = a, b
    return blocks, lo, hi


@SMALL
@given(st.data())
def test_meet_counts_equal_brute_force(data):
    """The one- and two-column interval-meeting count against all pairs."""
    k = data.draw(st.sampled_from([1, 2]))
    xb, xlo, xhi = data.draw(_box_sets(k))
    yb, ylo, yhi = data.draw(_box_sets(k))
    if data.draw(st.booleans()):  # integer columns: whole values
        xlo, xhi, ylo, yhi = (np.floor(np.clip(a, -9, 9)) for a in (xlo, xhi, ylo, yhi))
        xhi, yhi = np.maximum(xhi, xlo), np.maximum(yhi, ylo)
    coded = [np.empty(a.shape, dtype=np.int64) for a in (xlo, xhi, ylo, yhi)]
    for d in range(k):  # rank coding per column, as PairSweep._count_low does
        vals = np.concatenate([xlo[:, d], xhi[:, d], ylo[:, d], yhi[:, d]])
        _, inv = np.unique(vals, return_inverse=True)
        parts = np.split(inv.ravel(), np.cumsum([xlo.shape[0]] * 2 + [ylo.shape[0]])[:3])
        for c, part in zip(coded, parts, strict=True):
            c[:, d] = part
    got = pairsweep.meet_counts(xb, coded[0], coded[1], yb, coded[2], coded[3])
    want = np.array(
        [
            sum(
                xb[i] == yb[j]
                and all(ylo[j, d] <= xhi[i, d] and yhi[j, d] >= xlo[i, d] for d in range(k))
                for j in range(yb.size)
            )
            for i in range(xb.size)
        ],
        dtype=np.int64,
    )
    assert np.array_equal(got, want)


@SMALL
@given(st.data())
def test_dominated_equals_brute_force(data):
    n = data.draw(st.integers(0, 40))
    m = data.draw(st.integers(0, 40))
    ints = st.integers(-4, 4)
    qb, qx, qy = (
        np.array(data.draw(st.lists(g, min_size=n, max_size=n)), dtype=np.int64)
        for g in (st.integers(0, 2), ints, ints)
    )
    pb, px, py = (
        np.array(data.draw(st.lists(g, min_size=m, max_size=m)), dtype=np.int64)
        for g in (st.integers(0, 2), ints, ints)
    )
    got = pairsweep.dominated(qb, qx, qy, pb, px, py)
    want = [int(np.sum((pb == qb[i]) & (px < qx[i]) & (py < qy[i]))) for i in range(n)]
    assert got.tolist() == want


@st.composite
def _numeric_models(draw):
    """Three numeric features (int / float / bool), trees up to depth 6."""
    features = []
    for i in range(3):
        kind = draw(st.sampled_from(["int", "float", "bool"]))
        if kind == "int":
            lo = draw(st.integers(-3, 3))
            hi = lo + draw(st.integers(1, 6))
            features.append({"name": f"f{i}", "type": "int", "min": lo, "max": hi, "default": lo})
        elif kind == "float":
            lo = draw(st.sampled_from([0.0, -1.5, 0.1]))
            hi = lo + draw(st.sampled_from([1.0, 0.3, 10.0]))
            spec = {"name": f"f{i}", "type": "float", "min": lo, "max": hi, "default": lo}
            features.append(spec)
        else:
            features.append({"name": f"f{i}", "type": "bool", "default": False})
    tree = draw(trees(features, 6, {}))
    return compile_source({"features": features, "actions": ACTIONS, "tree": tree})


@pytest.mark.slow
@FAST
@given(st.data())
def test_low_column_block_count_equals_brute_force(data):
    """PairSweep._count_low on real leaf boxes (int / float columns, open ends) and random
    node pairs, one or two columns: the same count, per row of x too, as testing every pair
    of rows below the two nodes on those columns and the actions."""
    model = data.draw(_numeric_models())
    inv, severity = data.draw(relational_invariants(model))
    inv = dataclasses.replace(inv, when=ck.Const(True))
    pc = PairChecker(model, prepare(model, inv, severity))
    sweep = pairsweep.PairSweep(pc)
    agg = sweep.aggregates(0)
    assert agg.contiguous
    n_nodes = model.nodes.shape[0]
    others = [g for g in range(len(model.features)) if g != pc.f]
    k = data.draw(st.integers(1, 2))
    n_blocks = data.draw(st.integers(1, 4))
    node = st.integers(0, n_nodes - 1)
    us = np.array(data.draw(st.lists(node, min_size=n_blocks, max_size=n_blocks)))
    vs = np.array(data.draw(st.lists(node, min_size=n_blocks, max_size=n_blocks)))
    cols = np.array(
        [data.draw(st.permutations(others))[:k] for _ in range(n_blocks)], dtype=np.int64
    ).reshape(n_blocks, k)
    out: list = []
    total = sweep._count_low(us, vs, cols, out)
    rows = pc.boxes.size
    got = np.zeros(rows, dtype=np.int64)
    for r, w in out:
        np.add.at(got, r, w)
    side = pc.sides[0]
    lo, hi, ok = side.rows.lo, side.rows.hi, side.ok
    rank = sweep.rank_row
    want_total = 0
    want = np.zeros(rows, dtype=np.int64)
    for p in range(n_blocks):
        below_u = [r for r in range(rows) if ok[r] and _below(sweep, us[p], r)]
        below_v = [r for r in range(rows) if ok[r] and _below(sweep, vs[p], r)]
        for a in below_u:
            for b in below_v:
                brk = rank[b] < rank[a] if sweep.monotone else rank[a] != rank[b]
                meet = all(lo[b, c] <= hi[a, c] and lo[a, c] <= hi[b, c] for c in cols[p])
                if brk and meet:
                    want_total += 1
                    want[a] += 1  # per row of x only (u's rows), for every form
    assert total == want_total
    assert np.array_equal(got, want)


def _below(sweep, node: int, row: int) -> bool:
    """Whether leaf row *row* lies in the subtree of *node*."""
    cur = int(sweep.pc.boxes.leaves[row])
    while cur >= 0:
        if cur == node:
            return True
        cur = int(sweep.parent[cur])
    return False


@st.composite
def _chain_tree(draw, features: list[dict], depth: int, thresholds: dict) -> dict:
    """A deep, unbalanced tree: along a chain of *depth* splits one child is a small subtree
    (at most two levels) and the other goes on, so that node pairs of the dual descent meet
    long runs of splits whose other child cannot meet (what the chain compression skips);
    thresholds are reused now and then (ties at the boundaries)."""
    if depth == 0:
        return draw(trees(features, 2, thresholds))
    node = draw(trees(features, 1, thresholds))
    if "left" not in node:  # drew a leaf: split on something anyway
        spec = draw(st.sampled_from(features))
        node = {"feature": spec["name"]}
        if spec["type"] == "categorical":
            vals = spec["values"]
            node["in"] = draw(st.lists(st.sampled_from(vals), min_size=1, unique=True))
        else:
            seen = thresholds.setdefault(spec["name"], [])
            node["threshold"] = (
                draw(st.sampled_from(seen))
                if seen and draw(st.booleans())
                else draw(st.sampled_from([-0.5, 0.5, 1.0, 1.5, 2.5]))
            )
            seen.append(node["threshold"])
    rest = draw(_chain_tree(features, depth - 1, thresholds))
    side = draw(trees(features, 2, thresholds))
    node["left"], node["right"] = (rest, side) if draw(st.booleans()) else (side, rest)
    return node


@st.composite
def _deep_models(draw, all_int: bool):
    features = draw(feature_specs(all_int).filter(lambda fs: len(fs) >= 2))
    tree = draw(_chain_tree(features, draw(st.integers(6, 14)), {}))
    return compile_source({"features": features, "actions": ACTIONS, "tree": tree})


@pytest.mark.slow
@SMALL
@given(st.data())
def test_deep_chains_compressed_equal_matrix_and_enumeration(data):
    """Deep unbalanced trees (chains of 6-14 splits, ties at boundaries, int / float / bool /
    categorical columns, 'when' on both inputs): the dual descent with and without the chain
    compression gives the matrix's counts, first pairs and undecided pairs, and, on integer
    domains, the number of violating leaf pairs of exhaustive enumeration."""
    all_int = data.draw(st.booleans())
    model = data.draw(_deep_models(all_int))
    inv, severity = data.draw(relational_invariants(model))
    saved = pairsweep.COMPRESS
    try:
        for chains in (True, False):
            pairsweep.COMPRESS = chains
            _same_as_matrix(model, inv, severity)
    finally:
        pairsweep.COMPRESS = saved
    if all_int:
        truth = exhaustive_violating_pairs(model, inv, severity)
        prep = prepare(model, inv, severity)
        n_sat, _, undecided = box_pairs(PairChecker(model, prep), 19, matrix_cells=0)
        if not undecided:
            assert n_sat == len(truth)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_descent_on_float_domains_against_an_ieee_reference(data):
    """The whole check through the descent (the pair matrix switched off), float columns: the
    violating pairs Z3 counts with float64 as IEEE floating point, and every printed pair
    replays through the evaluator."""
    model = data.draw(pair_models(all_int=False, max_depth=3))
    inv, severity = data.draw(relational_invariants(model))
    ref = fp_reference_violating_pairs(model, inv, severity)
    if ref is None:
        return
    saved = relational.MATRIX_CELLS
    try:
        relational.MATRIX_CELLS = 0
        res = check_relational(model, inv, severity)
    finally:
        relational.MATRIX_CELLS = saved
    assert res.unknown_paths == 0
    assert res.violating_paths == ref
    assert res.status == ("violated" if ref else "holds")
    assert_counterexamples_replay(model, inv, severity, res)


@pytest.mark.parametrize(
    "relation",
    ["monotone(referer_entropy)", "stable(client_rtt_ms, 50)", "independent(ua_family)"],
)
def test_jobs_two_share_the_dual_descent_with_a_forked_process(relation, monkeypatch):
    """--jobs 2: the dual descent dealt into parts, some counted by a forked process, gives
    the result of --jobs 1 (counts and counterexamples)."""
    model = load_model(ROOT / "examples" / "edge-allow-block-1.0.0.clef")
    text = (
        "severity allow < challenge < rate_limit < block\n"
        f"invariant r:\n  when path_depth <= 40\n  ensure {relation}\n"
    )
    program = parse_text(text, model, "r.inv")
    inv = program.invariants[0]
    monkeypatch.setattr(relational, "PARALLEL_MIN_LEAVES", 0)
    monkeypatch.setattr(relational, "MATRIX_CELLS", 0)
    monkeypatch.setattr(pairsweep, "FAN_OUT_PAIRS", 8)
    one = check_relational(model, inv, program.severity, CheckOptions(jobs=1))
    calls = []
    real = pool.forked_map
    monkeypatch.setattr(pool, "forked_map", lambda *a: calls.append(len(a[1])) or real(*a))
    two = check_relational(model, inv, program.severity, CheckOptions(jobs=2))
    assert calls and calls[0] > 1
    assert one.violating_paths > 0
    assert dataclasses.replace(two, seconds=0.0) == dataclasses.replace(one, seconds=0.0)


def test_forked_map_takes_every_item_once_in_any_process():
    # (which process takes which item is the scheduler's: only the results are checked)
    assert pool.forked_map(lambda k: k * k, list(range(40)), 3) == [k * k for k in range(40)]


def test_forked_map_computes_what_a_failed_child_did_not_send():
    parent = os.getpid()

    def square(k):
        if os.getpid() != parent:
            raise RuntimeError("a child that fails")
        return k * k

    assert pool.forked_map(square, list(range(12)), 2) == [k * k for k in range(12)]
