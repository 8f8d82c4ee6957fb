"""Importers (ONNX-ML, XGBoost, LightGBM): decisions equal each library's own predictions on
rows that include every threshold, its float64 neighbours and (for float32 libraries) the
float32 rounding boundaries around it; bad files fail with one line and exit status 2."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.errors import ImportModelError
from clefprove.model.clef import load
from clefprove.model.importers import import_model
from clefprove.model.importers.common import (
    float32_condition,
    float64_condition,
)
from clefprove.model.types import Model, NodeKind
from tests.helpers import categorical_xgboost, run_cli

# --------------------------------------------------------------------------- helpers


def decide(model: Model, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A plain reference walk (SPEC §2, with clipping): (action indices, confidences)."""
    lo = np.array([f.min for f in model.features])
    hi = np.array([f.max for f in model.features])
    X = np.clip(X, lo, hi)
    nodes = model.nodes
    idx = np.zeros(len(X), dtype=np.int64)
    rows = np.arange(len(X))
    member = np.asarray(model.membership)
    for _ in range(model.max_depth):
        rec = nodes[idx]
        x = X[rows, rec["feature"].astype(np.int64)]
        go = x <= rec["value"]
        cat = rec["kind"] == NodeKind.CATEGORICAL
        if cat.any():
            pos = rec["aux"][cat].astype(np.int64) + x[cat].astype(np.int64)
            go[cat] = member[pos] == 1
        nxt = np.where(go, rec["left"], rec["right"])
        idx = np.where(rec["kind"] == NodeKind.LEAF, idx, nxt)
    rec = nodes[idx]
    assert (rec["kind"] == NodeKind.LEAF).all()
    return rec["aux"].astype(np.int64), rec["value"]


def f32_neighbours(t: float) -> list[float]:
    """t, its float64 neighbours, float32(t), its float32 neighbours, and the float64 values at
    and next to the float32 rounding boundaries on both sides of float32(t)."""
    out = [t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf)]
    t32 = np.float32(t)
    up = np.nextafter(t32, np.float32(np.inf))
    down = np.nextafter(t32, np.float32(-np.inf))
    for v in (t32, up, down):
        out.append(float(v))
    for a, b in ((t32, up), (down, t32)):
        m = (float(a) + float(b)) / 2
        out += [m, math.nextafter(m, math.inf), math.nextafter(m, -math.inf)]
    return [v for v in out if math.isfinite(v)]


def f64_neighbours(t: float) -> list[float]:
    out = [t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf)]
    return [v for v in out if math.isfinite(v)]


def boundary_rows(
    rng: np.random.Generator, n: int, n_features: int, values: list[float], scale: float = 1.0
) -> np.ndarray:
    """Random rows where about half of each column is replaced by boundary values."""
    X = rng.normal(scale=scale, size=(n, n_features))
    if values:
        for j in range(n_features):
            pick = rng.random(n) < 0.5
            X[pick, j] = rng.choice(np.array(values), int(pick.sum()))
    return X


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


# --------------------------------------------------------------------------- exact conditions


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
finite64 = st.floats(allow_nan=False, allow_infinity=False)
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
OPS = {
    "BRANCH_LEQ": np.less_equal,
    "BRANCH_LT": np.less,
    "BRANCH_GTE": np.greater_equal,
    "BRANCH_GT": np.greater,
    "BRANCH_EQ": np.equal,
    "BRANCH_NEQ": np.not_equal,
}


def inside(cond, x: float) -> bool:
    hit = (cond.lo == -math.inf or x > cond.lo) and x <= cond.hi and cond.lo < cond.hi
    return hit != cond.negate


@settings(max_examples=300, deadline=None)
@given(t=finite32, mode=st.sampled_from(MODES), extra=finite64)
def test_float32_condition_is_exact(t: float, mode: str, extra: float) -> None:
    cond = float32_condition(mode, t)
    with np.errstate(over="ignore"):
        for x in [*f32_neighbours(t), extra, 0.0, -0.0, 3.5e38, -3.5e38, 1.7e308, -1.7e308]:
            expect = bool(OPS[mode](np.float32(x), np.float32(t)))
            assert inside(cond, x) == expect, (mode, t, x)


@settings(max_examples=300, deadline=None)
@given(t=finite64, mode=st.sampled_from(MODES), extra=finite64)
def test_float64_condition_is_exact(t: float, mode: str, extra: float) -> None:
    cond = float64_condition(mode, t)
    for x in [*f64_neighbours(t), extra, 0.0, -0.0, 1.7e308, -1.7e308]:
        assert inside(cond, x) == bool(OPS[mode](x, t)), (mode, t, x)


def test_nan_threshold_compares_false() -> None:
    assert not inside(float32_condition("BRANCH_LEQ", math.nan), 1.0)
    assert inside(float64_condition("BRANCH_NEQ", math.nan), 1.0)


# --------------------------------------------------------------------------- ONNX

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _ort_run(model_proto, X: np.ndarray):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return sess.run(None, {name: X})


def _ref_run(model_proto, X: np.ndarray):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model_proto).run(None, {"X": X})


def onnx_tree(
    rng: np.random.Generator,
    depth: int,
    n_features: int,
    n_classes: int,
    pool: list[float],
    modes: list[str],
) -> dict:
    """A random TreeEnsembleClassifier attribute set (pre-order node ids)."""
    nodes: list[dict] = []
    leaves: list[tuple[int, list[float]]] = []

    def build(d: int) -> int:
        i = len(nodes)
        nodes.append({})
        if d == depth or (d >= 2 and rng.random() < 0.2):
            nodes[i] = {"mode": "LEAF", "f": 0, "t": 0.0, "T": 0, "F": 0}
            w = rng.dirichlet(np.ones(n_classes)).tolist()
            leaves.append((i, w))
            return i
        f = int(rng.integers(n_features))
        t = float(rng.choice(pool))
        mode = str(rng.choice(modes))
        a = build(d + 1)
        b = build(d + 1)
        nodes[i] = {"mode": mode, "f": f, "t": t, "T": a, "F": b}
        return i

    build(0)
    return {"nodes": nodes, "leaves": leaves}


def onnx_model(
    spec: dict,
    n_features: int,
    labels: list,
    elem=TensorProto.FLOAT,
    post: str = "NONE",
    binary_id: int | None = None,
    as_tensor: bool = False,
    extra: dict | None = None,
):
    nodes = spec["nodes"]
    n = len(nodes)
    class_ids, class_nodes, weights = [], [], []
    for i, w in spec["leaves"]:
        if binary_id is not None:
            class_ids.append(binary_id)
            class_nodes.append(i)
            weights.append(w[1])
        else:
            for c, v in enumerate(w):
                class_ids.append(c)
                class_nodes.append(i)
                weights.append(v)
    attrs = {
        "nodes_treeids": [0] * n,
        "nodes_nodeids": list(range(n)),
        "nodes_featureids": [nd["f"] for nd in nodes],
        "nodes_modes": [nd["mode"] for nd in nodes],
        "nodes_truenodeids": [nd["T"] for nd in nodes],
        "nodes_falsenodeids": [nd["F"] for nd in nodes],
        "class_treeids": [0] * len(class_ids),
        "class_nodeids": class_nodes,
        "class_ids": class_ids,
        "class_weights": weights,
        "post_transform": post,
    }
    values = [nd["t"] for nd in nodes]
    if as_tensor:
        attrs["nodes_values_as_tensor"] = helper.make_tensor("v", TensorProto.DOUBLE, [n], values)
    else:
        attrs["nodes_values"] = values
    if isinstance(labels[0], str):
        attrs["classlabels_strings"] = labels
    else:
        attrs["classlabels_int64s"] = labels
    attrs.update(extra or {})
    node = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label", "probs"], domain="ai.onnx.ml", **attrs
    )
    label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", elem, [None, n_features])],
        [
            helper.make_tensor_value_info("label", label_type, [None]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, None]),
        ],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
        ir_version=8,
    )


POOL = [0.0, 0.1, 0.5, -0.3, 1.0, 2.0, -1.5, 0.7, 1e-8, 0.33333334]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_onnx_all_modes_match_the_reference_evaluator(tmp_path, seed, elem) -> None:
    rng = np.random.default_rng(seed)
    spec = onnx_tree(rng, 5, 3, 3, POOL, MODES)
    m = onnx_model(spec, 3, [10, 20, 30], elem=elem)
    path = write(tmp_path, "m.onnx", m.SerializeToString())
    model = import_model("onnx", path)
    assert model.actions == ("class_10", "class_20", "class_30")
    values = [v for t in POOL for v in f32_neighbours(t)]
    X = boundary_rows(rng, 1500, 3, values)
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float64
    labels, probs = _ref_run(m, X.astype(dtype))
    actions, conf = decide(model, X)
    assert (np.array([10, 20, 30])[actions] == labels).all()
    np.testing.assert_allclose(conf, probs[np.arange(len(X)), actions], atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_onnx_matches_onnxruntime(tmp_path, seed, elem, as_tensor) -> None:
    rng = np.random.default_rng(100 + seed)
    spec = onnx_tree(rng, 6, 4, 3, POOL, MODES)
    m = onnx_model(spec, 4, ["allow", "challenge", "block"], elem=elem, as_tensor=as_tensor)
    if as_tensor and elem == TensorProto.FLOAT:  # onnxruntime rejects it; so do we
        with pytest.raises(ImportModelError, match="need a double input"):
            import_model("onnx", write(tmp_path, "m.onnx", m.SerializeToString()))
        return
    model = import_model("onnx", write(tmp_path, "m.onnx", m.SerializeToString()))
    assert model.actions == ("allow", "challenge", "block")
    X = boundary_rows(rng, 3000, 4, [v for t in POOL for v in f32_neighbours(t)])
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float64
    labels, probs = _ort_run(m, X.astype(dtype))
    actions, conf = decide(model, X)
    assert (np.array(model.actions)[actions] == labels).all()
    np.testing.assert_allclose(conf, probs[np.arange(len(X)), actions], atol=1e-6)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
@pytest.mark.parametrize("binary_id", [0, 1])
def test_onnx_binary_one_weight_per_leaf_matches_onnxruntime(tmp_path, post, binary_id) -> None:
    rng = np.random.default_rng(7)
    spec = onnx_tree(rng, 5, 2, 2, POOL, ["BRANCH_LEQ", "BRANCH_LT"])
    m = onnx_model(spec, 2, [0, 1], post=post, binary_id=binary_id)
    model = import_model("onnx", write(tmp_path, "m.onnx", m.SerializeToString()))
    X = boundary_rows(rng, 2000, 2, [v for t in POOL for v in f32_neighbours(t)])
    labels, probs = _ort_run(m, X.astype(np.float32))
    actions, conf = decide(model, X)
    assert (actions == labels).all()
    if binary_id == 1:
        # onnxruntime reports [post(0), post(s)] here, so its class-0 column is 0 (NONE) or
        # 0.5 (LOGISTIC); clefprove's class-0 confidence is 1 - p (docs/importers.md).
        probs[:, 0] = 1 - probs[:, 1]
    np.testing.assert_allclose(conf, probs[np.arange(len(X)), actions], atol=1e-6)


def test_onnx_int64_input_compares_as_float32(tmp_path) -> None:
    """onnxruntime converts int64 inputs to float before comparing: 16777217 == 16777216."""
    rng = np.random.default_rng(12)
    pool = [2.5, 3.0, -7.5, 100.0, 16777216.0, 16777217.0, 16777218.0]
    m = onnx_model(onnx_tree(rng, 5, 2, 3, pool, MODES), 2, [0, 1, 2], elem=TensorProto.INT64)
    model = import_model("onnx", write(tmp_path, "i.onnx", m.SerializeToString()))
    assert [f.type.value for f in model.features] == ["int", "int"]
    X = rng.integers(-10, 10, (3000, 2))
    X[:1500, 0] = rng.choice([2, 3, 4, -7, -8, 100, 101, *range(16777214, 16777220)], 1500)
    labels, _ = _ort_run(m, X.astype(np.int64))
    assert (decide(model, X.astype(np.float64))[0] == labels).all()


def test_onnx_from_skl2onnx_matches_onnxruntime(tmp_path) -> None:
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    y = (X[:, 0] > 0.1).astype(int) + (X[:, 1] > 0.5) * (X[:, 2] < 0)
    clf = DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, y)
    m = skl2onnx.to_onnx(
        clf, X[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3}
    )
    model = import_model("onnx", write(tmp_path, "m.onnx", m.SerializeToString()))
    ths = [float(t) for t in clf.tree_.threshold if t != -2]
    Xt = boundary_rows(rng, 5000, 3, [v for t in ths for v in f32_neighbours(t)])
    labels, probs = _ort_run(m, Xt.astype(np.float32))
    actions, conf = decide(model, Xt)
    assert (actions == labels).all()
    np.testing.assert_allclose(conf, probs[np.arange(len(Xt)), actions], atol=1e-6)


def test_onnx_features_spec_declares_types(tmp_path) -> None:
    rng = np.random.default_rng(11)
    spec = onnx_tree(rng, 5, 3, 3, [0.5, 1.5, 2.5, 3.0, 0.0, 771.5, 772.0], MODES)
    m = onnx_model(spec, 3, [0, 1, 2])
    path = write(tmp_path, "m.onnx", m.SerializeToString())
    features = {
        "name": "edge",
        "version": "2.0.0",
        "features": [
            {"name": "depth", "type": "int", "min": 0, "max": 800, "default": 1},
            {"name": "ua", "type": "categorical", "values": ["a", "b", "c", "d"], "default": "a"},
            {"name": "tor", "type": "bool", "default": False},
        ],
        "actions": ["allow", "challenge", "block"],
    }
    fpath = write(tmp_path, "f.json", json.dumps(features))
    model = import_model("onnx", path, fpath)
    assert (model.name, model.version) == ("edge", "2.0.0")
    X = np.column_stack(
        [rng.integers(0, 801, 3000), rng.integers(0, 4, 3000), rng.integers(0, 2, 3000)]
    ).astype(np.float64)
    X[:1000, 0] = rng.choice([0, 1, 2, 3, 771, 772, 773, 800], 1000)
    labels, _ = _ref_run(m, X.astype(np.float32))
    actions, _ = decide(model, X)
    assert (actions == labels).all()


def _forest(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    spec = onnx_tree(rng, 2, 2, 3, POOL, ["BRANCH_LEQ"])
    m = onnx_model(spec, 2, [0, 1, 2])
    node = m.graph.node[0]
    for a in node.attribute:
        if a.name == "nodes_treeids":
            a.ints[-1] = 1
    return write(tmp_path, "forest.onnx", m.SerializeToString())


def test_onnx_refuses_what_it_cannot_represent(tmp_path) -> None:
    # a leaf moved to another tree: its parent's child no longer exists in the parent's tree
    # (real forests are ensembles: tests/ensembles/test_onnx_ensembles.py)
    with pytest.raises(ImportModelError, match="child node id does not exist"):
        import_model("onnx", _forest(tmp_path))
    rng = np.random.default_rng(0)
    spec = onnx_tree(rng, 2, 2, 3, POOL, ["BRANCH_LEQ"])
    m = onnx_model(spec, 2, [0, 1, 2], post="PROBIT")
    with pytest.raises(ImportModelError, match="PROBIT"):
        import_model("onnx", write(tmp_path, "p.onnx", m.SerializeToString()))
    reg = helper.make_node(
        "TreeEnsembleRegressor",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        nodes_treeids=[0],
        nodes_nodeids=[0],
        nodes_featureids=[0],
        nodes_modes=["LEAF"],
        nodes_values=[0.0],
        nodes_truenodeids=[0],
        nodes_falsenodeids=[0],
        target_ids=[0],
        target_nodeids=[0],
        target_treeids=[0],
        target_weights=[1.0],
        n_targets=1,
    )
    g = helper.make_graph(
        [reg],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)])
    with pytest.raises(ImportModelError, match="classifier"):
        import_model("onnx", write(tmp_path, "r.onnx", m.SerializeToString()))


# --------------------------------------------------------------------------- XGBoost

xgb = pytest.importorskip("xgboost")


def _xgb_data(rng: np.random.Generator, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    X = rng.normal(size=(n, 3))
    X[:, 2] = rng.integers(0, 10, n)
    y = ((X[:, 0] + 0.5 * X[:, 1] > 0.2) ^ (X[:, 2] > 6)).astype(int)
    return X, y


def _xgb_thresholds(path: Path) -> list[float]:
    tree = json.loads(path.read_text())["learner"]["gradient_booster"]["model"]["trees"][0]
    return [
        float(c)
        for c, left in zip(tree["split_conditions"], tree["left_children"], strict=True)
        if left != -1
    ]


@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost_matches_predict(tmp_path, fmt) -> None:
    rng = np.random.default_rng(5)
    X, y = _xgb_data(rng)
    clf = xgb.XGBClassifier(n_estimators=1, max_depth=5, tree_method="exact", base_score=0.3)
    clf.fit(X, y)
    clf.get_booster().save_model(tmp_path / "m.json")
    clf.get_booster().save_model(tmp_path / f"m.{fmt}")
    model = import_model("xgboost", tmp_path / f"m.{fmt}")
    assert model.actions == ("class_0", "class_1")
    values = [v for t in _xgb_thresholds(tmp_path / "m.json") for v in f32_neighbours(t)]
    Xt = boundary_rows(rng, 8000, 3, values)
    actions, conf = decide(model, Xt)
    assert (actions == clf.predict(Xt)).all()
    proba = clf.predict_proba(Xt)
    np.testing.assert_allclose(conf, proba[np.arange(len(Xt)), actions], atol=1e-6)


def test_xgboost_feature_names_and_spec(tmp_path) -> None:
    rng = np.random.default_rng(6)
    X, y = _xgb_data(rng)
    names = ["rtt", "entropy", "depth"]
    dm = xgb.DMatrix(X, label=y, feature_names=names)
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 4}, dm, 1)
    bst.save_model(tmp_path / "m.json")
    model = import_model("xgboost", tmp_path / "m.json")
    assert [f.name for f in model.features] == names
    spec = {
        "features": [
            {"name": "rtt", "type": "float", "min": -10, "max": 10, "default": 0},
            {"name": "entropy", "type": "float", "min": -10, "max": 10, "default": 0},
            {"name": "depth", "type": "int", "min": 0, "max": 9, "default": 1},
        ],
        "actions": ["allow", "block"],
    }
    typed = import_model(
        "xgboost", tmp_path / "m.json", write(tmp_path, "f.json", json.dumps(spec))
    )
    values = [v for t in _xgb_thresholds(tmp_path / "m.json") for v in f32_neighbours(t)]
    Xt = boundary_rows(rng, 5000, 3, values)
    Xt[:, :2] = np.clip(Xt[:, :2], -10, 10)
    Xt[:, 2] = rng.integers(0, 10, len(Xt))
    expect = bst.predict(xgb.DMatrix(Xt, feature_names=names)) > 0.5
    assert (decide(model, Xt)[0] == expect).all()
    assert (decide(typed, Xt)[0] == expect).all()
    spec["features"][0]["name"] = "latency"
    with pytest.raises(ImportModelError, match="do not match"):
        import_model("xgboost", tmp_path / "m.json", write(tmp_path, "g.json", json.dumps(spec)))


def test_xgboost_categorical_splits(tmp_path) -> None:
    bst, kw, rows = categorical_xgboost(tmp_path / "c.json", 1)
    model = import_model("xgboost", tmp_path / "c.json")
    assert model.features[0].type.value == "categorical"
    Xt = rows(4000)
    expect = bst.predict(xgb.DMatrix(Xt, **kw)) > 0.5
    assert (decide(model, Xt)[0] == expect).all()


def test_xgboost_forests_are_ensembles_and_other_objectives_refused(tmp_path) -> None:
    from clefprove.model.ensemble import Ensemble

    rng = np.random.default_rng(9)
    X, y = _xgb_data(rng, 200)
    xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, y).get_booster().save_model(
        tmp_path / "f.json"
    )
    forest = import_model("xgboost", tmp_path / "f.json")
    assert isinstance(forest, Ensemble) and forest.n_trees == 3
    y3 = rng.integers(0, 3, 200)
    xgb.XGBClassifier(n_estimators=1, max_depth=2).fit(X, y3).get_booster().save_model(
        tmp_path / "mc.json"
    )
    multi = import_model("xgboost", tmp_path / "mc.json")
    assert isinstance(multi, Ensemble) and multi.n_trees == 3 and multi.combine.outputs == 3
    xgb.XGBRegressor(n_estimators=1, max_depth=2).fit(X, y).get_booster().save_model(
        tmp_path / "r.json"
    )
    with pytest.raises(ImportModelError, match="objective 'reg:squarederror' is not supported"):
        import_model("xgboost", tmp_path / "r.json")


# --------------------------------------------------------------------------- LightGBM

lgb = pytest.importorskip("lightgbm")


def _lgb_model(tmp_path: Path, rng: np.random.Generator, **params) -> tuple[object, Path]:
    n = 800
    X = rng.normal(size=(n, 3))
    X[:, 2] = rng.integers(0, 6, n)
    X[rng.random(n) < 0.15, 1] = 0.0
    y = ((X[:, 0] + 0.3 * X[:, 1] > 0) ^ np.isin(X[:, 2], [1, 4])).astype(int)
    ds = lgb.Dataset(X, y, categorical_feature=[2], feature_name=["a", "b", "c"])
    base = {
        "objective": "binary",
        "num_leaves": 16,
        "verbose": -1,
        "min_data_in_leaf": 5,
        "min_data_per_group": 5,
        "cat_smooth": 1,
        "max_cat_to_onehot": 2,
    }
    booster = lgb.train({**base, **params}, ds, num_boost_round=1)
    path = tmp_path / "m.txt"
    booster.save_model(path)
    return booster, path


def _lgb_thresholds(path: Path) -> list[float]:
    for line in path.read_text().splitlines():
        if line.startswith("threshold="):
            return [float(v) for v in line.split("=", 1)[1].split()]
    return []


ZERO_BAND = [0.0, -0.0, 1e-35, -1e-35, float(np.float32(1e-35)), -float(np.float32(1e-35))]


@pytest.mark.parametrize("zero_as_missing", [False, True])
def test_lightgbm_matches_predict(tmp_path, zero_as_missing) -> None:
    rng = np.random.default_rng(21)
    booster, path = _lgb_model(tmp_path, rng, zero_as_missing=zero_as_missing)
    model = import_model("lightgbm", path)
    assert [f.type.value for f in model.features] == ["float", "float", "categorical"]
    values = [v for t in _lgb_thresholds(path) for v in f64_neighbours(t)]
    values += [w for z in ZERO_BAND for w in f64_neighbours(z)]
    Xt = boundary_rows(rng, 8000, 3, values)
    Xt[:, 2] = rng.integers(0, len(model.features[2].values), len(Xt))
    p = booster.predict(Xt)
    actions, conf = decide(model, Xt)
    assert (actions == (p > 0.5)).all()
    np.testing.assert_allclose(conf, np.where(actions == 1, p, 1 - p), atol=1e-12)


def test_lightgbm_categorical_vocabulary_from_spec(tmp_path) -> None:
    rng = np.random.default_rng(22)
    booster, path = _lgb_model(tmp_path, rng)
    spec = {
        "features": [
            {"name": "a", "type": "float", "min": -5, "max": 5, "default": 0},
            {"name": "b", "type": "float", "min": -5, "max": 5, "default": 0},
            {
                "name": "c",
                "type": "categorical",
                "values": ["chrome", "firefox", "safari", "curl", "python", "other"],
                "default": "other",
            },
        ],
        "actions": ["allow", "block"],
    }
    model = import_model("lightgbm", path, write(tmp_path, "f.json", json.dumps(spec)))
    assert model.actions == ("allow", "block")
    Xt = np.clip(boundary_rows(rng, 4000, 3, _lgb_thresholds(path)), -5, 5)
    Xt[:, 2] = rng.integers(0, 6, len(Xt))
    assert (decide(model, Xt)[0] == (booster.predict(Xt) > 0.5)).all()
    spec["features"][2] = {"name": "c", "type": "int", "min": 0, "max": 5, "default": 0}
    with pytest.raises(ImportModelError, match="declare it categorical"):
        import_model("lightgbm", path, write(tmp_path, "g.json", json.dumps(spec)))


def test_lightgbm_forests_are_ensembles_and_other_objectives_refused(tmp_path) -> None:
    from clefprove.model.ensemble import Ensemble

    rng = np.random.default_rng(23)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    params = {"objective": "binary", "verbose": -1, "num_leaves": 4}
    lgb.train(params, lgb.Dataset(X, y), num_boost_round=3).save_model(tmp_path / "f.txt")
    forest = import_model("lightgbm", tmp_path / "f.txt")
    assert isinstance(forest, Ensemble) and forest.n_trees == 3
    reg = {"objective": "regression", "verbose": -1, "num_leaves": 4}
    lgb.train(reg, lgb.Dataset(X, X[:, 1]), num_boost_round=1).save_model(tmp_path / "r.txt")
    with pytest.raises(ImportModelError, match="objective 'regression' is not supported"):
        import_model("lightgbm", tmp_path / "r.txt")
    multi = {"objective": "multiclass", "num_class": 3, "verbose": -1, "num_leaves": 4}
    y3 = rng.integers(0, 3, 300)
    lgb.train(multi, lgb.Dataset(X, y3), num_boost_round=1).save_model(tmp_path / "m.txt")
    model = import_model("lightgbm", tmp_path / "m.txt")
    assert isinstance(model, Ensemble) and model.combine.outputs == 3
    ova = {"objective": "multiclassova", "num_class": 3, "verbose": -1, "num_leaves": 4}
    lgb.train(ova, lgb.Dataset(X, y3), num_boost_round=1).save_model(tmp_path / "o.txt")
    with pytest.raises(ImportModelError, match="objective 'multiclassova"):
        import_model("lightgbm", tmp_path / "o.txt")


def test_refusals_name_what_is_unsupported_and_the_route(tmp_path) -> None:
    """Models people train that clefprove does not import: one line naming what is not
    supported and how to save or train the model so that it is."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    cases: list[tuple[str, Path, str]] = []
    for booster in ("dart", "gblinear"):
        path = tmp_path / f"{booster}.json"
        xgb.XGBClassifier(n_estimators=2, booster=booster).fit(X, y).save_model(path)
        cases.append(("xgboost", path, rf"booster '{booster}' is not supported .*booster='gbtree'"))
    xgb.XGBRegressor(n_estimators=2, objective="reg:logistic").fit(X, y).save_model(
        tmp_path / "reg.json"
    )
    cases.append(("xgboost", tmp_path / "reg.json", r"'reg:logistic' saved by an XGBRegressor"))
    bst = xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, y).get_booster()
    bst.dump_model(str(tmp_path / "dump.txt"))
    cases.append(("xgboost", tmp_path / "dump.txt", r"save_model\('model.json'\); the legacy"))
    params = {"objective": "binary", "verbose": -1, "num_leaves": 4}
    linear = lgb.train({**params, "linear_tree": True}, lgb.Dataset(X, y), num_boost_round=2)
    linear.save_model(tmp_path / "linear.txt")
    cases.append(("lightgbm", tmp_path / "linear.txt", r"linear trees .*linear_tree=False"))
    (tmp_path / "other.json").write_text(json.dumps({"learner": {}}))
    cases.append(("lightgbm", tmp_path / "other.json", r"JSON that is not a LightGBM model"))
    for fmt, path, pattern in cases:
        with pytest.raises(ImportModelError, match=pattern) as err:
            import_model(fmt, path)
        assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- CLI


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("trained")
    rng = np.random.default_rng(31)
    X, y = _xgb_data(rng, 300)
    clf = xgb.XGBClassifier(n_estimators=1, max_depth=3).fit(X, y)
    clf.get_booster().save_model(d / "x.json")
    _, lpath = _lgb_model(d, rng)
    lpath.rename(d / "l.txt")
    spec = onnx_tree(rng, 4, 3, 3, POOL, MODES)
    (d / "o.onnx").write_bytes(onnx_model(spec, 3, [0, 1, 2]).SerializeToString())
    return {"xgboost": d / "x.json", "lightgbm": d / "l.txt", "onnx": d / "o.onnx"}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "xgboost", "lightgbm"])
def test_cli_import_end_to_end(tmp_path, trained, fmt) -> None:
    out = tmp_path / "m.clef"
    proc = cli("import", fmt, trained[fmt], "-o", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "imported" in proc.stderr
    on_disk = load(out)
    in_process = import_model(fmt, trained[fmt])
    assert on_disk.sha256 == in_process.sha256
    assert on_disk.metadata["metadata"]["imported_from"]["format"] == fmt
    info = cli("info", out, cwd=tmp_path)
    assert info.returncode == 0, info.stderr


def _assert_clean_failure(proc: subprocess.CompletedProcess, directory: Path) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clefprove: error: "), proc.stderr
    assert not (directory / "out.clef").exists()
    assert not list(directory.glob(".out.clef.*")), "temporary file left behind"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "xgboost", "lightgbm"])
def test_cli_bad_files_exit_2_with_one_line(tmp_path, trained, fmt) -> None:
    good = trained[fmt].read_bytes()
    other = next(p for f, p in trained.items() if f != fmt).read_bytes()
    rng = np.random.default_rng(41)
    cases = {
        "empty": b"",
        "garbage": rng.bytes(300),
        "wrong_type": other,
        "text": b"hello world\n",
        "pickle": b"\x80\x04\x95" + rng.bytes(40),
    }
    for frac in (0.1, 0.5, 0.9):
        cases[f"truncated_{frac}"] = good[: int(len(good) * frac)]
    for name, data in cases.items():
        src = write(tmp_path, f"{name}.bin", data)
        proc = cli("import", fmt, src, "-o", tmp_path / "out.clef", cwd=tmp_path)
        _assert_clean_failure(proc, tmp_path)
    proc = cli("import", fmt, tmp_path / "missing.bin", "-o", tmp_path / "out.clef", cwd=tmp_path)
    _assert_clean_failure(proc, tmp_path)


@pytest.mark.slow
def test_cli_bad_features_spec_exit_2(tmp_path, trained) -> None:
    bad_specs = {
        "count.json": json.dumps({"features": [{"name": "a", "type": "bool", "default": False}]}),
        "syntax.json": "{not json",
        "key.json": json.dumps({"feature": []}),
        "actions.json": json.dumps({"actions": ["a", "b", "c", "d", "e"]}),
        "type.json": json.dumps(
            {
                "features": [
                    {"name": f"f{i}", "type": "float", "min": 1, "max": 0, "default": 0}
                    for i in range(3)
                ]
            }
        ),
    }
    formats = ["onnx", "xgboost", "lightgbm"]
    for k, (name, text) in enumerate(bad_specs.items()):
        spec = write(tmp_path, name, text)
        for fmt in (formats[k % 3], formats[(k + 1) % 3]):
            proc = cli(
                "import",
                fmt,
                trained[fmt],
                "-o",
                tmp_path / "out.clef",
                "--features",
                spec,
                cwd=tmp_path,
            )
            _assert_clean_failure(proc, tmp_path)


def test_truncations_never_escape_as_other_errors(tmp_path, trained) -> None:
    """Every prefix of each file either imports or raises ImportModelError (in process)."""
    for fmt, path in trained.items():
        data = path.read_bytes()
        step = max(1, len(data) // 60)
        for cut in range(0, len(data), step):
            p = write(tmp_path, f"cut.{fmt}", data[:cut])
            with contextlib.suppress(ImportModelError):
                import_model(fmt, p)


def test_lightgbm_dump_json_prefixes_and_mutations_raise_import_errors_only(tmp_path) -> None:
    """``dump_model()`` JSON: every prefix, and values replaced or keys dropped anywhere in
    the document, either import or raise ImportModelError (in process)."""
    import random

    rng = np.random.default_rng(4)
    X = np.column_stack([rng.integers(0, 9, 400), rng.normal(size=400)])
    y = (np.isin(X[:, 0], [1, 4, 6]) ^ (X[:, 1] > 0.3)).astype(int)
    params = {"objective": "binary", "verbose": -1, "num_leaves": 5, "zero_as_missing": True}
    bst = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[0]), num_boost_round=3)
    doc = bst.dump_model()
    text = json.dumps(doc)
    for cut in range(0, len(text), max(1, len(text) // 60)):
        with contextlib.suppress(ImportModelError):
            import_model("lightgbm", write(tmp_path, "cut.json", text[:cut]))

    def places(o: object, at: tuple = ()) -> list[tuple]:
        out = [at]
        items: object = []
        if isinstance(o, dict):
            items = o.items()
        elif isinstance(o, list):
            items = enumerate(o[:4])
        for k, v in items:
            out += places(v, (*at, k))
        return out

    where = places(doc)[1:]
    odd = [None, 0, -1, 1e308, float("nan"), "x", "0||1||99999999", [], {}, True, 2**70, "=="]
    pick = random.Random(0)
    for _ in range(150):
        d = json.loads(text)
        at = pick.choice(where)
        parent = d
        for k in at[:-1]:
            parent = parent[k]
        if isinstance(parent, dict) and pick.random() < 0.2:
            del parent[at[-1]]
        else:
            parent[at[-1]] = pick.choice(odd)
        with contextlib.suppress(ImportModelError):
            import_model("lightgbm", write(tmp_path, "m.json", json.dumps(d)))


@pytest.mark.parametrize("fmt", ["onnx", "xgboost", "lightgbm"])
def test_pickles_are_refused_with_a_hint(tmp_path, fmt) -> None:
    import pickle

    path = write(tmp_path, "model.pkl", pickle.dumps({"not": "a model"}))
    with pytest.raises(ImportModelError, match="never unpickles"):
        import_model(fmt, path)


def test_lightgbm_default_column_names_accept_any_declared_names(tmp_path) -> None:
    rng = np.random.default_rng(24)
    X = rng.normal(size=(300, 2))
    params = {"objective": "binary", "verbose": -1, "num_leaves": 6, "min_data_in_leaf": 5}
    booster = lgb.train(params, lgb.Dataset(X, (X[:, 0] > X[:, 1]).astype(int)), 1)
    booster.save_model(tmp_path / "m.txt")
    assert [f.name for f in import_model("lightgbm", tmp_path / "m.txt").features] == [
        "Column_0",
        "Column_1",
    ]
    spec = {
        "features": [
            {"name": n, "type": "float", "min": -9, "max": 9, "default": 0}
            for n in ("rtt", "entropy")
        ]
    }
    model = import_model(
        "lightgbm", tmp_path / "m.txt", write(tmp_path, "f.json", json.dumps(spec))
    )
    Xt = np.clip(boundary_rows(rng, 3000, 2, _lgb_thresholds(tmp_path / "m.txt")), -9, 9)
    assert [f.name for f in model.features] == ["rtt", "entropy"]
    assert (decide(model, Xt)[0] == (booster.predict(Xt) > 0.5)).all()


def test_xgboost_names_that_are_not_identifiers_need_a_spec(tmp_path) -> None:
    rng = np.random.default_rng(25)
    X, y = _xgb_data(rng, 300)
    names = ["client-rtt", "entropy", "path depth"]
    bst = xgb.train(
        {"objective": "binary:logistic", "max_depth": 3},
        xgb.DMatrix(X, label=y, feature_names=names),
        1,
    )
    bst.save_model(tmp_path / "m.json")
    with pytest.raises(ImportModelError, match="--features"):
        import_model("xgboost", tmp_path / "m.json")
    renamed = ("client_rtt", "entropy", "path_depth")
    spec = {
        "features": [
            {"name": n, "type": "float", "min": -50, "max": 50, "default": 0} for n in renamed
        ]
    }
    model = import_model(
        "xgboost", tmp_path / "m.json", write(tmp_path, "f.json", json.dumps(spec))
    )
    Xt = boundary_rows(
        rng, 2000, 3, [v for t in _xgb_thresholds(tmp_path / "m.json") for v in f32_neighbours(t)]
    )
    expect = bst.predict(xgb.DMatrix(Xt, feature_names=names)) > 0.5
    assert (decide(model, Xt)[0] == expect).all()


def test_the_evaluator_agrees_on_imported_models(trained) -> None:
    """The runtime oracle decides imported models (wide float64 domains) like the walk."""
    from clefprove.eval.evaluator import Evaluator

    rng = np.random.default_rng(26)
    for fmt, path in trained.items():
        model = import_model(fmt, path)
        X = rng.normal(size=(2000, len(model.features)))
        for j, f in enumerate(model.features):
            if f.values:
                X[:, j] = rng.integers(0, len(f.values), len(X))
        X[:4, 0] = [1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308]
        result = Evaluator(model).evaluate(X)
        actions, conf = decide(model, X)
        assert (result.actions == actions).all(), fmt
        assert (result.confidences == conf).all(), fmt


def test_mutated_files_fail_cleanly(tmp_path, trained) -> None:
    """Byte and token mutations of each file import or raise ImportModelError, nothing else."""
    rng = np.random.default_rng(27)
    for fmt, path in trained.items():
        data = bytearray(path.read_bytes())
        for k in range(80):
            mutated = bytearray(data)
            if fmt != "onnx" and k % 2:
                # Text formats: replace a digit run or a word with something else.
                text = mutated.decode()
                pos = int(rng.integers(len(text)))
                junk = str(rng.choice(["-1", "1e999", "nan", "x", "[]", "{}", '"', "99999999999"]))
                mutated = bytearray((text[:pos] + junk + text[pos + 2 :]).encode())
            else:
                for _ in range(int(rng.integers(1, 4))):
                    mutated[int(rng.integers(len(mutated)))] = int(rng.integers(256))
            p = write(tmp_path, f"mut.{fmt}", bytes(mutated))
            with contextlib.suppress(ImportModelError):
                import_model(fmt, p)


@pytest.mark.parametrize("word", ["action", "confidence", "allow"])
def test_cli_reserved_feature_names_refused_on_every_import_route(tmp_path, trained, word):
    """Issue 16: a feature that invariants could never refer to is refused at import, with one
    line naming the word (``allow`` is one of the spec's action names)."""
    spec = {
        "features": [
            {"name": word, "type": "float", "min": -10, "max": 10, "default": 0},
            {"name": "b", "type": "float", "min": -10, "max": 10, "default": 0},
            {"name": "c", "type": "float", "min": -10, "max": 10, "default": 0},
        ],
        "actions": ["allow", "block", "challenge"],
    }
    for fmt in ("onnx", "xgboost", "lightgbm"):
        actions = spec["actions"][: 2 if fmt != "onnx" else 3]
        feats = spec["features"]
        if fmt == "lightgbm":  # its file names the columns a, b, c: the clash is with an action
            feats = [{**f, "name": n} for f, n in zip(feats[:2], "ab", strict=True)]
            feats.append(
                {"name": "c", "type": "categorical", "values": list("0123456789"), "default": "0"}
            )
            actions = ["a", "block"]
        path = write(tmp_path, "f.json", json.dumps({"features": feats, "actions": actions}))
        proc = cli(
            "import",
            fmt,
            trained[fmt],
            "-o",
            tmp_path / "out.clef",
            "--features",
            path,
            cwd=tmp_path,
        )
        _assert_clean_failure(proc, tmp_path)
        assert f"'{word if fmt != 'lightgbm' else 'a'}'" in proc.stderr, (fmt, proc.stderr)


def test_reserved_feature_name_from_the_trained_model_itself(tmp_path) -> None:
    """XGBoost keeps its own feature names; one named ``confidence`` is refused; so is a
    scikit-learn feature named ``action``."""
    from sklearn.tree import DecisionTreeClassifier

    from clefprove.errors import ClefproveError
    from clefprove.model.sklearn import from_sklearn

    rng = np.random.default_rng(3)
    X, y = _xgb_data(rng, 200)
    dm = xgb.DMatrix(X, label=y, feature_names=["rtt", "confidence", "depth"])
    xgb.train({"objective": "binary:logistic", "max_depth": 2}, dm, 1).save_model(
        tmp_path / "m.json"
    )
    with pytest.raises(ClefproveError, match="'confidence' is reserved"):
        import_model("xgboost", tmp_path / "m.json")
    clf = DecisionTreeClassifier(max_depth=2).fit(X, y)
    feats = [
        {"name": n, "type": "float", "min": -10, "max": 10, "default": 0}
        for n in ("action", "b", "c")
    ]
    with pytest.raises(ClefproveError, match="'action' is reserved"):
        from_sklearn(clf, feats, actions=["allow", "block"])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: s["features"][1].update(name="f0"), "features[1].name: duplicate feature name"),
        (lambda s: s["features"][0].update(min=9), "features[0]: min 9 is greater than max 5"),
        (lambda s: s.update(actions=["p", "p"]), "actions[1]: duplicate action 'p'"),
        (lambda s: s.update(actions=["p", "not valid"]), "actions[1]: 'not valid' is not a valid"),
    ],
)
def test_errors_in_the_features_spec_name_the_spec_file(tmp_path, edit, expected) -> None:
    """A mistake in a declaration of ``--features`` is an import error that names the spec
    file and the JSON path in it, for a single tree and for an ensemble alike (it named the
    model file, which holds no declaration, or no file at all for a duplicate action, and
    escaped as another error class in process)."""
    rng = np.random.default_rng(5)
    X, y = _xgb_data(rng, 300)
    models = {}
    for rounds in (1, 3):
        clf = xgb.XGBClassifier(n_estimators=rounds, max_depth=2).fit(X, y)
        clf.get_booster().save_model(tmp_path / f"x{rounds}.json")
        models[rounds] = tmp_path / f"x{rounds}.json"
    spec = {
        "features": [
            {"name": f"f{i}", "type": "float", "min": -5, "max": 5, "default": 0} for i in range(3)
        ],
        "actions": ["p", "q"],
    }
    edit(spec)
    path = write(tmp_path, "spec.json", json.dumps(spec))
    for model in models.values():
        with pytest.raises(ImportModelError) as info:
            import_model("xgboost", model, path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and expected in message, message
