"""The evaluator against a plain recursive reference on hypothesis-generated trees and inputs.

Round trip: JSON source -> compile -> .clef file -> mmap load -> evaluate (batch in both table
layouts and with tiny chunks, and the single-input path) must equal the reference, which reads
the JSON source directly with SPEC §2 semantics (defaults, clipping, float64 ``<=`` left,
categorical membership).  Inputs concentrate on boundaries: exactly at a threshold, the adjacent
float64 values, the clipping edges and values beyond them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.errors import InputError
from clefprove.eval import evaluator as evaluator_module
from clefprove.eval.evaluator import Evaluator, NodeWalker
from clefprove.eval.inputs import encode_records
from clefprove.model.clef import load, write_clef
from clefprove.model.source import compile_source

VOCAB = ["a", "b", "c", "d", "e"]
ACTIONS = ["allow", "challenge", "rate_limit", "block"]


# ---------------------------------------------------------------- reference (reads the JSON)
def reference(source: dict[str, Any], record: dict[str, Any]) -> tuple[str, float]:
    """SPEC §2 semantics, recursively, straight from the JSON source."""
    x: dict[str, Any] = {}
    for f in source["features"]:
        v = record.get(f["name"], f["default"])
        if f["type"] in ("int", "float"):
            v = min(max(float(v), float(f["min"])), float(f["max"]))
        elif f["type"] == "bool":
            v = 1.0 if v else 0.0
        x[f["name"]] = v
    return _walk(source["tree"], x)


def _walk(node: dict[str, Any], x: dict[str, Any]) -> tuple[str, float]:
    if "action" in node:
        return node["action"], float(node["confidence"])
    v = x[node["feature"]]
    go_left = v in node["in"] if "in" in node else v <= float(node.get("threshold", 0.5))
    return _walk(node["left"] if go_left else node["right"], x)


# ---------------------------------------------------------------- strategies
@st.composite
def feature_decls(draw: st.DrawFn) -> list[dict[str, Any]]:
    lo = draw(st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=True))
    width = draw(st.sampled_from([0.0, 1e-300, 1.0, 1000.0, 1e9]))
    ilo = draw(st.integers(-50, 50))
    ihi = ilo + draw(st.integers(0, 20))
    return [
        {"name": "f", "type": "float", "min": lo, "max": lo + width, "default": lo},
        {"name": "i", "type": "int", "min": ilo, "max": ihi, "default": ihi},
        {"name": "b", "type": "bool", "default": draw(st.booleans())},
        {"name": "c", "type": "categorical", "values": VOCAB, "default": "c"},
    ]


def _threshold(draw: st.DrawFn, f: dict[str, Any]) -> float:
    lo, hi = float(f["min"]), float(f["max"])
    base = draw(
        st.sampled_from([lo, hi, (lo + hi) / 2, lo - 1, hi + 1])
        | st.floats(lo - 10, hi + 10, allow_nan=False, allow_infinity=False)
    )
    if f["type"] == "int":
        base = math.floor(base) + draw(st.sampled_from([0.0, 0.5, -0.5]))
    step = draw(st.sampled_from([0, 0, 1, -1]))
    if step:
        base = math.nextafter(base, math.inf * step)
    return base


@st.composite
def trees(draw: st.DrawFn, features: list[dict[str, Any]], depth: int) -> dict[str, Any]:
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return {
            "action": draw(st.sampled_from(ACTIONS)),
            "confidence": draw(st.floats(0, 1)),
        }
    f = draw(st.sampled_from(features))
    node: dict[str, Any] = {"feature": f["name"]}
    if f["type"] == "categorical":
        pattern = draw(st.sampled_from(["prefix", "suffix", "any"]))
        k = draw(st.integers(1, len(VOCAB)))
        if pattern == "prefix":
            node["in"] = VOCAB[:k]
        elif pattern == "suffix":
            node["in"] = VOCAB[-k:]
        else:
            node["in"] = draw(st.lists(st.sampled_from(VOCAB), min_size=1, unique=True))
    elif f["type"] == "bool":
        if draw(st.booleans()):
            node["threshold"] = draw(st.sampled_from([0.5, 0.0, 1.0, -0.5, 1.5, 0.25]))
    else:
        node["threshold"] = _threshold(draw, f)
    node["left"] = draw(trees(features, depth - 1))
    node["right"] = draw(trees(features, depth - 1))
    return node


def _thresholds(tree: dict[str, Any], name: str) -> list[float]:
    out: list[float] = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if "action" in n:
            continue
        if n["feature"] == name and "threshold" in n:
            out.append(float(n["threshold"]))
        stack += [n["left"], n["right"]]
    return out


@st.composite
def models_and_inputs(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    features = draw(feature_decls())
    tree = draw(trees(features, draw(st.integers(0, 7))))
    source = {"name": "t", "version": "1", "features": features, "actions": ACTIONS, "tree": tree}
    fdecl, idecl = features[0], features[1]
    fpool = [float(fdecl["min"]), float(fdecl["max"])]
    for t in _thresholds(tree, "f"):
        fpool += [t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf)]
    fpool += [math.nextafter(v, s) for v in fpool[:2] for s in (math.inf, -math.inf)]
    fpool += [fpool[0] - 1e6, fpool[1] + 1e6]
    ipool = [int(idecl["min"]), int(idecl["max"]), int(idecl["min"]) - 3, int(idecl["max"]) + 3]
    for t in _thresholds(tree, "i"):
        if abs(t) < 1e9:
            ipool += [math.floor(t), math.ceil(t), math.floor(t) + 1]
    record = st.fixed_dictionaries(
        {},
        optional={
            "f": st.sampled_from(fpool) | st.floats(-1e7, 1e7),
            "i": st.sampled_from(ipool) | st.integers(-100, 100),
            "b": st.booleans(),
            "c": st.sampled_from(VOCAB),
        },
    )
    inputs = draw(st.lists(record, min_size=1, max_size=40))
    return source, inputs


# ---------------------------------------------------------------- tests
@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models_and_inputs())
def test_round_trip_matches_reference(tmp_path_factory, case) -> None:
    source, inputs = case
    path = tmp_path_factory.mktemp("rt") / "m.clef"
    path.write_bytes(write_clef(compile_source(source)))
    model = load(path)
    X = encode_records(model, inputs)
    raw = _unclipped(source, inputs)  # the evaluator must clip too (folded into thresholds)
    expected = [reference(source, r) for r in inputs]
    for ev in (
        Evaluator(model),  # heap layout only (depth <= HEAP_LEVELS)
        Evaluator(model, heap_levels=0),  # child tables only
        Evaluator(model, heap_levels=3, chunk_rows=3),  # both, switching at depth 3
        Evaluator(model, heap_levels=1, chunk_rows=2),
    ):
        res = ev.evaluate(X)
        got = [(model.actions[a], c) for a, c in zip(res.actions, res.confidences, strict=True)]
        assert got == expected
        assert ev.evaluate(raw).leaves.tolist() == res.leaves.tolist()
        assert [ev.evaluate_one(x).leaf for x in raw] == res.leaves.tolist()
        walker = NodeWalker(model)
        assert [walker.evaluate_one(x) for x in raw] == [ev.evaluate_one(x) for x in raw]
        for k, x in enumerate(X):
            d = ev.evaluate_one(x)
            assert (model.actions[d.action], d.confidence) == expected[k]
            assert d.leaf == res.leaves[k]
            path_nodes = ev.path(x)
            assert path_nodes[0] == 0 and path_nodes[-1] == d.leaf
            assert walker.path(x) == path_nodes
            assert model.node(d.leaf).is_leaf


def _unclipped(source: dict[str, Any], inputs: list[dict[str, Any]]) -> np.ndarray:
    rows = []
    for r in inputs:
        row = []
        for f in source["features"]:
            v = r.get(f["name"], f["default"])
            row.append(VOCAB.index(v) if f["type"] == "categorical" else float(v))
        rows.append(row)
    return np.array(rows, dtype=np.float64)


def test_spec_toy_examples(spec_model) -> None:
    ev = Evaluator(spec_model)
    rows = [
        {"client_rtt_ms": 300},
        {"client_rtt_ms": math.nextafter(300.0, math.inf), "ua_family": "curl"},
        {"client_rtt_ms": 301, "ua_family": "Chrome"},
        {"client_rtt_ms": -5},
        {"client_rtt_ms": 1e300, "ua_family": "python-requests"},
    ]
    res = ev.evaluate(encode_records(spec_model, rows))
    assert [spec_model.actions[a] for a in res.actions] == [
        "allow",
        "block",
        "challenge",
        "allow",
        "block",
    ]
    assert res.confidences.tolist() == [0.98, 0.91, 0.77, 0.98, 0.91]
    assert res.leaves.tolist() == [1, 3, 4, 1, 3]


def test_clipping_is_folded_into_thresholds() -> None:
    # A threshold above the domain: every input (even a huge one) clips to max and goes left.
    source = {
        "features": [{"name": "x", "type": "float", "min": 0, "max": 10, "default": 0}],
        "actions": ["allow", "block"],
        "tree": {
            "feature": "x",
            "threshold": 20,
            "left": {"feature": "x", "threshold": -1, "left": _leaf("block"), "right": _leaf()},
            "right": _leaf("block"),
        },
    }
    model = compile_source(source)
    X = np.array([[-1e308], [0.0], [15.0], [25.0], [1e308]])
    for ev in (Evaluator(model), Evaluator(model, heap_levels=0)):
        assert ev.evaluate(X).actions.tolist() == [0, 0, 0, 0, 0]
        assert [ev.evaluate_one(x).action for x in X] == [0, 0, 0, 0, 0]


def _leaf(action: str = "allow") -> dict[str, Any]:
    return {"action": action, "confidence": 1.0}


@pytest.mark.slow
def test_exactly_max_depth_steps_on_a_degenerate_chain() -> None:
    depth = 40
    tree: dict[str, Any] = _leaf("block")
    for k in range(depth):
        tree = {"feature": "x", "threshold": float(depth - k), "left": _leaf(), "right": tree}
    source = {
        "features": [{"name": "x", "type": "float", "min": 0, "max": 100, "default": 0}],
        "actions": ["allow", "block"],
        "tree": tree,
    }
    model = compile_source(source)
    assert model.max_depth == depth
    X = np.arange(0, 45, 0.5).reshape(-1, 1)
    expected = [int(x > depth) for x in X[:, 0]]
    for levels in (0, 1, 12, 24):
        ev = Evaluator(model, heap_levels=levels)
        assert ev.heap_levels == min(levels, depth)
        assert ev.evaluate(X).actions.tolist() == expected


def test_non_finite_and_bad_shapes_are_input_errors(spec_model) -> None:
    ev = Evaluator(spec_model)
    X = np.zeros((3, 6))
    X[2, 3] = np.nan
    with pytest.raises(InputError, match="row 2: referer_entropy"):
        ev.evaluate(X)
    with pytest.raises(InputError, match="shape"):
        ev.evaluate(np.zeros((2, 5)))
    with pytest.raises(InputError, match="not finite"):
        ev.evaluate_one([np.inf, 772, 1, 0, 0, 0])
    with pytest.raises(InputError, match="expected 6 values"):
        ev.evaluate_one([1.0])
    assert len(ev.evaluate(np.zeros((0, 6)))) == 0


def test_single_leaf_model() -> None:
    model = compile_source(
        {
            "features": [{"name": "x", "type": "bool", "default": False}],
            "actions": ["allow"],
            "tree": {"action": "allow", "confidence": 0.5},
        }
    )
    ev = Evaluator(model)
    res = ev.evaluate(np.array([[0.0], [1.0]]))
    assert res.leaves.tolist() == [0, 0] and res.confidences.tolist() == [0.5, 0.5]
    assert ev.evaluate_one([1.0]).leaf == 0 and ev.path([1.0]) == [0]


def test_staggered_work_arrays_are_whole_at_any_address():
    """The work arrays are carved from one block; none may come out short, whatever the
    block's address (a short array once failed at random with a broadcast error)."""
    from clefprove.eval.evaluator import _staggered

    types = (np.intp, np.intp, np.intp, np.float64, np.float64, np.bool_, np.bool_, np.intp)
    for m in (1, 7, 511, 4096, 13616, 16384):
        for _ in range(20):
            arrays = _staggered(m, types)
            assert [a.size for a in arrays] == [m] * len(types)


def _unbalanced(depth: int, seed: int) -> dict[str, Any]:
    """A random deep, unbalanced tree over f (float), i (int) and c (categorical)."""
    rng = np.random.default_rng(seed)

    def node(d: int) -> dict[str, Any]:
        if d == depth or (d > 2 and rng.random() < 0.12):
            return {"action": ACTIONS[int(rng.integers(4))], "confidence": float(rng.random())}
        k = int(rng.integers(3))
        if k == 0:
            split: dict[str, Any] = {"feature": "f", "threshold": float(rng.uniform(-5, 105))}
        elif k == 1:
            split = {"feature": "i", "threshold": float(rng.integers(-2, 12)) + 0.5}
        else:
            split = {"feature": "c", "in": sorted(rng.choice(VOCAB, 2, replace=False).tolist())}
        deep = rng.random() < 0.5
        return {
            **split,
            "left": node(d + 1) if deep else node(max(d + 1, depth - 1)),
            "right": node(max(d + 1, depth - 1)) if deep else node(d + 1),
        }

    features = [
        {"name": "f", "type": "float", "min": 0, "max": 100, "default": 0},
        {"name": "i", "type": "int", "min": 0, "max": 10, "default": 0},
        {"name": "c", "type": "categorical", "values": VOCAB, "default": "a"},
    ]
    return {"name": "t", "version": "1", "features": features, "actions": ACTIONS, "tree": node(0)}


@pytest.mark.parametrize("seed", range(4))
def test_deep_unbalanced_trees_drop_finished_rows_bit_exactly(seed) -> None:
    """Rows that reach a leaf early are written out and dropped (every few levels below the
    heap): every layout, chunking and the single-input walks agree on every row."""
    model = compile_source(_unbalanced(40, seed))
    rng = np.random.default_rng(seed)
    n = 3000
    X = np.column_stack(
        [rng.uniform(-10, 110, n), rng.integers(-2, 13, n).astype(float), rng.integers(0, 5, n)]
    ).astype(np.float64)
    ref = Evaluator(model, heap_levels=0, chunk_rows=n).evaluate(X)
    walker = NodeWalker(model)
    want = [walker.evaluate_one(x).leaf for x in X]
    assert ref.leaves.tolist() == want
    for ev in (
        Evaluator(model),
        Evaluator(model, heap_levels=2, chunk_rows=7),
        Evaluator(model, heap_levels=5, chunk_rows=1000),
    ):
        res = ev.evaluate(X)
        assert res.leaves.tolist() == want
        assert res.actions.tolist() == ref.actions.tolist()
        assert res.confidences.tolist() == ref.confidences.tolist()


def _deep_source(depth: int, n_floats: int, seed: int) -> dict[str, Any]:
    """A random deep, unbalanced tree over *n_floats* float features, an int and a categorical
    (general sets, prefixes and suffixes), long chains on both sides so that rows finish at
    every depth, with thresholds also outside the domains (clipping folded in)."""
    rng = np.random.default_rng(seed)
    names = [f"x{j}" for j in range(n_floats)]

    def node(d: int, spine: bool = True, stop: int = depth) -> dict[str, Any]:
        if d >= stop or (not spine and rng.random() < 0.3):
            return {"action": ACTIONS[int(rng.integers(4))], "confidence": float(rng.random())}
        # the spine goes on (sometimes forking into two spines), a side branch ends within
        # a few levels: rows finish at every depth; most rows stay on the spine
        long_left = rng.random() < 0.5
        k = int(rng.integers(n_floats + 2))
        if k < n_floats:
            t = float(rng.uniform(-8, 8))
            if spine:
                t = float(rng.uniform(3, 8)) if long_left else float(rng.uniform(-8, -3))
            split: dict[str, Any] = {"feature": names[k], "threshold": t}
        elif k == n_floats:
            t = float(rng.integers(-2, 12)) + 0.5
            if spine:
                t = float(rng.integers(8, 12) if long_left else rng.integers(-2, 2)) + 0.5
            split = {"feature": "i", "threshold": t}
        else:
            size = int(rng.integers(1, len(VOCAB)))
            if spine:
                size = 4 if long_left else 1
            kind = int(rng.integers(3))
            if kind == 0:
                cats = sorted(rng.choice(VOCAB, size, replace=False).tolist())  # mostly general
            else:
                cats = VOCAB[:size] if kind == 1 else VOCAB[len(VOCAB) - size :]  # prefix/suffix
            split = {"feature": "c", "in": cats}
        if spine:
            fork = rng.random() < 0.06
            side = node(d + 1, fork, stop if fork else d + 1 + int(rng.integers(1, 5)))
            deep = node(d + 1, True, stop)
        else:
            side, deep = node(d + 1, False, stop), node(d + 1, False, stop)
        return {
            **split,
            "left": deep if long_left else side,
            "right": side if long_left else deep,
        }

    features = [{"name": n, "type": "float", "min": -6, "max": 6, "default": 0} for n in names] + [
        {"name": "i", "type": "int", "min": 0, "max": 10, "default": 0},
        {"name": "c", "type": "categorical", "values": VOCAB, "default": "a"},
    ]
    return {"name": "t", "version": "1", "features": features, "actions": ACTIONS, "tree": node(0)}


def _boundary_records(source: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """Records whose floats sit on a threshold of the tree or one ulp either side of it."""
    rng = np.random.default_rng(seed)
    floats = [f["name"] for f in source["features"] if f["type"] == "float"]
    thresholds = sorted({t for name in floats for t in _thresholds(source["tree"], name)})
    pool = np.array([*thresholds, -6.0, 6.0, -7.0, 7.0])
    out = []
    for _ in range(n):
        rec: dict[str, Any] = {}
        for name in floats:
            t = float(pool[rng.integers(pool.size)])
            rec[name] = [np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf)][rng.integers(3)]
        rec["i"] = int(rng.integers(-2, 13))
        rec["c"] = VOCAB[int(rng.integers(len(VOCAB)))]
        out.append(rec)
    return out


@pytest.mark.parametrize(("n_floats", "seed"), [(1, 0), (2, 1), (5, 2), (6, 3), (14, 4)])
def test_packed_tables_breadth_first_positions_and_tail_pool_are_exact(
    n_floats, seed, monkeypatch
) -> None:
    """Every layout path of the batch walk on deep unbalanced trees: heap levels, child tables
    with the feature packed into the state (1 to 16 features: the leaf code needs one more
    bit at a power of two), breadth-first table positions, finished rows written out, and thin
    tails parked in the pool and walked with other chunks' tails (the pool is checked to run).
    Against the recursive reference on the JSON source and the node walker, on rows on and
    one ulp beside every threshold."""
    source = _deep_source(48, n_floats, seed)
    model = compile_source(source)
    assert model.max_depth >= 40
    records = _boundary_records(source, 1500, seed)
    X = encode_records(model, records)
    expected = [reference(source, r) for r in records]
    walker = NodeWalker(model)
    want = [walker.evaluate_one(x).leaf for x in X]
    assert [(model.actions[d.action], d.confidence) for d in map(walker.evaluate_one, X)] == (
        expected
    )

    pools: list[tuple[int, int]] = []  # (first row, last row) of each pool walk
    walk_pool = Evaluator._walk_pool

    def counting(self, X_flat, rows, states, steps, leaves):  # type: ignore[no-untyped-def]
        pools.append((int(rows.min()), int(rows.max())))
        return walk_pool(self, X_flat, rows, states, steps, leaves)

    monkeypatch.setattr(Evaluator, "_walk_pool", counting)
    monkeypatch.setattr(evaluator_module, "TAIL_FRACTION", 2)  # park tails of half a chunk
    for ev in (
        Evaluator(model),
        Evaluator(model, heap_levels=0),  # child tables from the root
        Evaluator(model, heap_levels=4, chunk_rows=256),  # a pool of several chunks' tails
        Evaluator(model, heap_levels=2, chunk_rows=32),  # several pools
        Evaluator(model, heap_levels=12, chunk_rows=999),
    ):
        pools.clear()
        res = ev.evaluate(X)
        assert res.leaves.tolist() == want
        got = [(model.actions[a], c) for a, c in zip(res.actions, res.confidences, strict=True)]
        assert got == expected
        if ev.chunk_rows == 256:  # tails of different chunks parked and walked together
            assert any(last - first >= 256 for first, last in pools)
        if ev.chunk_rows == 32:
            assert len(pools) >= 2
    # the non-finite refusal is unchanged: one readable error naming the cell
    bad = X.copy()
    bad[1234, n_floats] = np.nan
    with pytest.raises(InputError, match=r"row 1234: i: value nan is not finite"):
        Evaluator(model, chunk_rows=256).evaluate(bad)


@pytest.mark.parametrize(("n_floats", "seed"), [(2, 5), (6, 6)])
def test_pool_walks_its_own_copy_of_the_parked_rows(n_floats, seed, monkeypatch) -> None:
    """Parked tails carry a copy of their rows of X (taken from the chunk): the pool's walk
    reads exactly the parked rows, in its order, from several chunks and pools, and every
    row still gets the node walker's leaf (rows on and one ulp beside every threshold, int
    and categorical features; the non-finite refusal unchanged)."""
    source = _deep_source(44, n_floats, seed)
    model = compile_source(source)
    records = _boundary_records(source, 1200, seed)
    X = encode_records(model, records)
    walker = NodeWalker(model)
    want = [walker.evaluate_one(x).leaf for x in X]
    F = len(model.features)
    seen: list[np.ndarray] = []
    walk_pool = Evaluator._walk_pool

    def checking(self, X_flat, rows, states, steps, leaves):  # type: ignore[no-untyped-def]
        assert X_flat.shape == (rows.size * F,)
        assert np.array_equal(X_flat.reshape(-1, F), X[rows])  # the parked rows, in order
        seen.append(rows.copy())
        return walk_pool(self, X_flat, rows, states, steps, leaves)

    monkeypatch.setattr(Evaluator, "_walk_pool", checking)
    monkeypatch.setattr(evaluator_module, "TAIL_FRACTION", 2)
    for ev in (
        Evaluator(model, heap_levels=3, chunk_rows=128),
        Evaluator(model, heap_levels=0, chunk_rows=50),
        Evaluator(model, heap_levels=7, chunk_rows=1200),
    ):
        seen.clear()
        res = ev.evaluate(X)
        assert res.leaves.tolist() == want
        assert seen, "no tail was parked"
        pooled = np.concatenate(seen)
        assert np.unique(pooled).size == pooled.size  # each row parked at most once
        if ev.chunk_rows < 1200:
            assert any(np.ptp(r) >= ev.chunk_rows for r in seen)  # rows of several chunks
    bad = X.copy()
    bad[777, 0] = np.inf
    with pytest.raises(InputError, match=r"row 777: x0: value inf is not finite"):
        Evaluator(model, chunk_rows=128).evaluate(bad)


@pytest.mark.parametrize(("n_floats", "seed"), [(2, 7), (6, 8)])
def test_threaded_shares_equal_one_thread(n_floats, seed, monkeypatch) -> None:
    """A batch split between threads (contiguous shares of whole chunks, each with its own
    work arrays and tail pool) decides every row as one thread does and as the node walker
    does: deep unbalanced trees (heap, child tables, compaction, pools in every share), rows on
    and one ulp beside every threshold, int and categorical features.  The non-finite refusal
    names the first bad row whichever share holds it."""
    source = _deep_source(44, n_floats, seed)
    model = compile_source(source)
    records = _boundary_records(source, 1500, seed)
    X = encode_records(model, records)
    walker = NodeWalker(model)
    want = [walker.evaluate_one(x) for x in X]
    monkeypatch.setattr(evaluator_module, "TAIL_FRACTION", 2)
    shares: list[tuple[int, int]] = []
    rows = Evaluator._evaluate_rows

    def recording(self, X_, lo, hi, out, chunk):  # type: ignore[no-untyped-def]
        shares.append((lo, hi))
        assert chunk == self.chunk_rows * (1 if self.threads == 1 else factor)
        return rows(self, X_, lo, hi, out, chunk)

    factor = evaluator_module.THREAD_CHUNK_FACTOR
    monkeypatch.setattr(Evaluator, "_evaluate_rows", recording)
    one = Evaluator(model, chunk_rows=64, threads=1).evaluate(X)
    assert shares == [(0, len(X))]
    for threads, rows_, heap in ((2, 16, 3), (3, 25, 0), (2, 250, 12), (4, 2, 2)):
        shares.clear()
        ev = Evaluator(model, chunk_rows=rows_, heap_levels=heap, threads=threads)
        chunk = rows_ * factor
        res = ev.evaluate(X)
        bounds = sorted(shares)  # contiguous shares of whole chunks covering every row
        assert [lo for lo, _ in bounds] == [0] + [hi for _, hi in bounds[:-1]]
        assert bounds[-1][1] == len(X) and all(lo % chunk == 0 for lo, _ in bounds)
        assert len(bounds) == min(threads, -(-len(X) // chunk))
        assert res.leaves.tolist() == [d.leaf for d in want] == one.leaves.tolist()
        assert res.actions.tolist() == [d.action for d in want]
        assert res.confidences.tolist() == [d.confidence for d in want]
    for bad_rows, first in (([1400], 1400), ([1400, 5], 5), ([700, 1499], 700)):
        bad = X.copy()
        bad[bad_rows, 0] = np.nan
        with pytest.raises(InputError, match=rf"row {first}: x0: value nan is not finite"):
            Evaluator(model, chunk_rows=16, threads=3).evaluate(bad)


def test_threads_only_for_large_batches(monkeypatch) -> None:
    """Without an explicit count, a batch below THREAD_MIN_ROWS is walked by the calling
    thread alone, and a large one by 2 threads only while a second CPU is free; an explicit
    count is capped by the batch's chunks; the setting travels with the tables."""
    model = compile_source(_deep_source(10, 2, 9))
    ev = Evaluator(model)
    assert ev.threads is None
    running = [1]  # runnable tasks, the caller among them
    monkeypatch.setattr(evaluator_module, "_runnable_tasks", lambda: running[0])
    monkeypatch.setattr(evaluator_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert ev.threads_for(1) == ev.threads_for(evaluator_module.THREAD_MIN_ROWS - 1) == 1
    assert ev.threads_for(evaluator_module.THREAD_MIN_ROWS) == 2
    running[0] = 2
    assert ev.threads_for(10**7) == 1  # the second CPU is busy
    monkeypatch.setattr(evaluator_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert ev.threads_for(10**7) == 2  # 2 of 4 busy
    running[0] = None  # no /proc/loadavg: the 1-minute load average decides
    monkeypatch.setattr(evaluator_module.os, "getloadavg", lambda: (3.4, 0.0, 0.0))
    assert ev.threads_for(10**7) == 2
    monkeypatch.setattr(evaluator_module.os, "getloadavg", lambda: (3.6, 0.0, 0.0))
    assert ev.threads_for(10**7) == 1
    running[0] = 0
    monkeypatch.setattr(evaluator_module.os, "sched_getaffinity", lambda pid: {0})
    assert ev.threads_for(10**7) == 1  # one CPU
    monkeypatch.undo()
    count = evaluator_module._runnable_tasks()
    assert count is None or count >= 1  # this test's own thread is running
    fixed = Evaluator(model, chunk_rows=25, threads=4)
    chunk = 25 * evaluator_module.THREAD_CHUNK_FACTOR  # a threaded walk's chunks
    assert fixed.threads_for(3 * chunk) == 3 and fixed.threads_for(chunk) == 1
    scalars, arrays = fixed.tables()
    assert Evaluator.from_tables(model, scalars, arrays).threads == 4
    del scalars["threads"]  # tables from before the setting existed
    assert Evaluator.from_tables(model, scalars, arrays).threads is None
    with pytest.raises(ValueError, match="threads"):
        Evaluator(model, threads=0)
