"""ONNX-ML ``TreeEnsembleClassifier`` with many trees against onnxruntime itself.

Models come from the converters people use (skl2onnx for scikit-learn forests and gradient
boosting, onnxmltools for XGBoost and LightGBM).  Rows are built from every split of the
imported model and every ONNX threshold (the value, its float32 and float64 neighbours, the
float32 rounding boundaries), 0, huge and out-of-float32-range values and the domain bounds,
over rows of the data set (``boundary_rows``).  onnxruntime runs with one intra-op thread:
that is the arithmetic clefprove reproduces bit for bit (labels, and the probability of the
label as the confidence); with several threads onnxruntime changes its summation order
(docs/importers.md), which a separate test measures.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clefprove.errors import ImportModelError
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.clef import load
from clefprove.model.ensemble import Ensemble, Link, Rule
from clefprove.model.importers import import_model
from clefprove.model.importers.onnx import LABEL_RULE_WARNING
from tests.ensembles.test_importers import DATASETS, boundary_rows
from tests.helpers import run_cli

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")
onnxmltools = pytest.importorskip("onnxmltools")

from onnx import TensorProto, helper  # noqa: E402

ort.set_default_logger_severity(3)  # no shape-mismatch chatter on stderr


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    X, y = DATASETS[name](return_X_y=True)
    return X.astype(np.float32).astype(np.float64), y


def _export(kind: str, data: str, params: dict[str, Any], path: Path) -> tuple[Any, np.ndarray]:
    """Train *kind* on *data*, write its ONNX export to *path*; (the fitted model, X)."""
    X, y = _data(data)
    X32 = X.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind in ("rf", "et", "gb"):
            import sklearn.ensemble as se

            cls = {
                "rf": se.RandomForestClassifier,
                "et": se.ExtraTreesClassifier,
                "gb": se.GradientBoostingClassifier,
            }[kind]
            clf = cls(random_state=0, **params).fit(X32, y)
            proto = skl2onnx.to_onnx(
                clf, X32[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3}
            )
        else:
            from onnxmltools.convert.common.data_types import FloatTensorType

            types = [("input", FloatTensorType([None, X.shape[1]]))]
            if kind == "xgb":
                import xgboost

                clf = xgboost.XGBClassifier(random_state=0, **params).fit(X32, y)
                proto = onnxmltools.convert_xgboost(clf, initial_types=types, target_opset=15)
            else:
                import lightgbm

                clf = lightgbm.LGBMClassifier(random_state=0, verbose=-1, **params).fit(X32, y)
                proto = onnxmltools.convert_lightgbm(
                    clf, initial_types=types, target_opset=15, zipmap=False
                )
    path.write_bytes(proto.SerializeToString())
    return clf, X


def _tree_node(proto: Any) -> Any:
    return next(n for n in proto.graph.node if n.op_type == "TreeEnsembleClassifier")


def _thresholds(path: Path) -> dict[int, np.ndarray]:
    """The ONNX file's own thresholds, per input column."""
    node = _tree_node(onnx.load(str(path)))
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    feats = np.array(a["nodes_featureids"])
    vals = np.array(a["nodes_values"], dtype=np.float64)
    return {int(j): vals[feats == j] for j in np.unique(feats)}


def ort_run(path: Path, X: np.ndarray, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's (label, probabilities) of the TreeEnsembleClassifier outputs."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    with np.errstate(over="ignore"):
        X32 = X.astype(np.float32)  # onnxruntime's float input; beyond float32 it is +-inf
    label, proba = sess.run(None, {sess.get_inputs()[0].name: X32})[:2]
    return np.asarray(label).ravel(), np.asarray(proba)


def mismatches(
    model: Ensemble, path: Path, R: np.ndarray, threads: int = 1
) -> tuple[int, int, np.ndarray]:
    """(label mismatches, probability mismatches, ...) of clefprove against onnxruntime."""
    b = EnsembleEvaluator(model).evaluate(R)
    label, proba = ort_run(path, R, threads)
    rows = np.arange(len(R))
    p = np.clip(proba[rows, label.astype(np.intp)], 0, 1)  # clefprove's confidence is clipped
    bad_label = label.astype(np.intp) != b.actions
    bad_proba = p != b.confidences.astype(np.float32)
    assert np.array_equal(b.confidences.astype(np.float32).astype(np.float64), b.confidences)
    return int(bad_label.sum()), int(bad_proba.sum()), np.flatnonzero(bad_label | bad_proba)


def _check(tmp_path: Path, kind: str, data: str, params: dict[str, Any], n: int) -> Ensemble:
    path = tmp_path / f"{kind}_{data}.onnx"
    _, X = _export(kind, data, params, path)
    model = import_model("onnx", path)
    assert isinstance(model, Ensemble)
    R = boundary_rows(model, X, n, 7, _thresholds(path))
    bad_l, bad_p, where = mismatches(model, path, R)
    assert (bad_l, bad_p) == (0, 0), f"rows {R[where[:3]].tolist()}"
    return model


#: (converter, data set, parameters, trees in the ONNX file)
FAST = [
    ("rf", "breast_cancer", {"n_estimators": 10, "max_depth": 6}, 10),
    ("et", "wine", {"n_estimators": 10, "max_depth": 5}, 10),
    ("gb", "breast_cancer", {"n_estimators": 50, "max_depth": 3}, 50),
    ("gb", "iris", {"n_estimators": 10, "max_depth": 3}, 30),
    ("xgb", "wine", {"n_estimators": 10, "max_depth": 4}, 30),
    ("lgb", "breast_cancer", {"n_estimators": 10, "max_depth": 8}, 10),
    ("lgb", "iris", {"n_estimators": 10, "max_depth": 3}, 30),
]

SLOW = [
    *FAST,
    ("rf", "digits", {"n_estimators": 50, "max_depth": 8}, 50),
    ("xgb", "breast_cancer", {"n_estimators": 50, "max_depth": 6}, 50),
    ("rf", "breast_cancer", {"n_estimators": 200, "max_depth": 8}, 200),
    ("et", "digits", {"n_estimators": 200, "max_depth": 8}, 200),
    ("gb", "digits", {"n_estimators": 20, "max_depth": 3}, 200),
    ("xgb", "breast_cancer", {"n_estimators": 200, "max_depth": 4}, 200),
    ("lgb", "digits", {"n_estimators": 20, "max_depth": 5}, 200),
    ("lgb", "wine", {"n_estimators": 50, "max_depth": 7}, 150),
]


def _id(case: tuple[Any, ...]) -> str:
    return f"{case[0]}-{case[1]}-{case[3]}trees"


@pytest.mark.parametrize("case", FAST, ids=_id)
def test_onnx_ensembles_decide_as_onnxruntime(tmp_path, case):
    kind, data, params, trees = case
    model = _check(tmp_path, kind, data, params, 3000)
    assert model.n_trees in (trees, trees + 1)  # + 1: base_values as a last constant tree


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=_id)
def test_onnx_ensembles_decide_as_onnxruntime_100k(tmp_path, case):
    kind, data, params, trees = case
    model = _check(tmp_path, kind, data, params, 100_000)
    assert model.n_trees in (trees, trees + 1)


def test_the_mapping_of_each_converter(tmp_path):
    """What each export becomes (the semantics docs/importers.md states)."""
    expect = {
        ("rf", "breast_cancer"): (Link.COMPLEMENT, Rule.SCORE_HALF, 1),
        ("rf", "iris"): (Link.IDENTITY, Rule.PROBA, 3),
        ("gb", "breast_cancer"): (Link.ONNX_LOGISTIC, Rule.POSITIVE, 1),
        ("gb", "iris"): (Link.SOFTMAX, Rule.MARGIN, 3),
        ("xgb", "breast_cancer"): (Link.ONNX_LOGISTIC, Rule.POSITIVE, 1),
        ("lgb", "iris"): (Link.SOFTMAX, Rule.MARGIN, 3),
    }
    for (kind, data), (link, rule, outputs) in expect.items():
        path = tmp_path / f"{kind}_{data}.onnx"
        _export(kind, data, {"n_estimators": 3, "max_depth": 3}, path)
        model = import_model("onnx", path)
        assert isinstance(model, Ensemble)
        c = model.combine
        assert (c.link, c.rule, c.outputs, c.arithmetic.value) == (link, rule, outputs, "float32")
        assert c.base == (0.0,) * outputs  # the base values are the last tree, added last
        origin = model.metadata["metadata"]["imported_from"]
        assert origin["format"] == "onnx" and "warnings" not in origin


@pytest.mark.slow
def test_several_onnxruntime_threads_change_the_last_bits_only(tmp_path):
    """With two intra-op threads (and more than 50 rows) onnxruntime adds the trees in
    another order: probabilities may move by float32 rounding, labels do not on these rows."""
    path = tmp_path / "x.onnx"
    _, X = _export("xgb", "breast_cancer", {"n_estimators": 100, "max_depth": 4}, path)
    model = import_model("onnx", path)
    assert isinstance(model, Ensemble)
    R = boundary_rows(model, X, 20_000, 3, _thresholds(path))
    assert mismatches(model, path, R, threads=1)[:2] == (0, 0)
    b = EnsembleEvaluator(model).evaluate(R)
    label, proba = ort_run(path, R, threads=2)
    assert np.array_equal(label, b.actions)
    p = proba[np.arange(len(R)), label]
    ulps = np.abs(
        p.view(np.int32).astype(np.int64) - b.confidences.astype(np.float32).view(np.int32)
    )
    assert ulps.max() <= 64


# --------------------------------------------------------------------------- the label rule


def _positive_binary(tmp_path: Path, trees: int) -> tuple[Path, Any, np.ndarray]:
    """A LightGBM binary model whose every leaf weight is >= 0 (one tree: its leaves hold the
    base score), exported by onnxmltools; *trees* copies of that tree, weights divided."""
    path = tmp_path / f"pos{trees}.onnx"
    clf, X = _export("lgb", "breast_cancer", {"n_estimators": 1}, path)
    proto = onnx.load(str(path))
    node = _tree_node(proto)
    a = {x.name: x for x in node.attribute}
    assert min(a["class_weights"].floats) >= 0
    if trees > 1:
        for key in ("nodes_treeids", "class_treeids"):
            one = list(a[key].ints)
            a[key].ints[:] = [t for k in range(trees) for t in [k] * len(one)]
        for key in (
            "nodes_nodeids",
            "nodes_featureids",
            "nodes_truenodeids",
            "nodes_falsenodeids",
            "nodes_missing_value_tracks_true",
            "class_ids",
            "class_nodeids",
        ):
            a[key].ints[:] = list(a[key].ints) * trees
        for key in ("nodes_values", "nodes_hitrates"):
            if key in a:
                a[key].floats[:] = list(a[key].floats) * trees
        a["class_weights"].floats[:] = [w / trees for w in a["class_weights"].floats] * trees
        a["nodes_modes"].strings[:] = list(a["nodes_modes"].strings) * trees
    path.write_bytes(proto.SerializeToString())
    return path, clf, X


@pytest.mark.parametrize("trees", [1, 3])
def test_onnxruntime_label_rule_is_followed_and_noted(tmp_path, trees):
    path, clf, X = _positive_binary(tmp_path, trees)
    label, proba = ort_run(path, X)
    # onnxruntime's label contradicts its own probabilities (and LightGBM) on many rows ...
    assert (label != np.argmax(proba, axis=1)).sum() > 100
    assert (label != clf.predict(X)).sum() > 100
    # ... clefprove follows onnxruntime's label, and notes why in the model
    model = import_model("onnx", path)
    assert model.metadata["metadata"]["imported_from"]["warnings"] == [LABEL_RULE_WARNING]
    if trees == 1:
        from clefprove.eval.evaluator import Evaluator

        got = Evaluator(model).evaluate(X)  # type: ignore[arg-type]
        assert np.array_equal(got.actions, label)
    else:
        assert isinstance(model, Ensemble)
        assert (model.combine.link, model.combine.rule) == (Link.ONNX_LOGISTIC, Rule.SCORE_HALF)
        R = boundary_rows(model, X, 3000, 5, _thresholds(path))
        assert mismatches(model, path, R)[:2] == (0, 0)


@pytest.mark.slow
def test_the_label_rule_warning_is_one_stderr_line_and_the_import_succeeds(tmp_path):
    path, _, _ = _positive_binary(tmp_path, 3)
    r = run_cli("import", "onnx", path, "-o", tmp_path / "m.clef")
    assert r.returncode == 0, r.stderr
    warns = [x for x in r.stderr.splitlines() if x.startswith("clefprove: warning:")]
    assert warns == [f"clefprove: warning: {LABEL_RULE_WARNING}"]
    assert isinstance(load(tmp_path / "m.clef"), Ensemble)
    path = tmp_path / "gb.onnx"  # the rule agrees: no warning
    _export("gb", "breast_cancer", {"n_estimators": 5, "max_depth": 2}, path)
    r = run_cli("import", "onnx", path, "-o", tmp_path / "g.clef")
    assert r.returncode == 0 and "clefprove: warning" not in r.stderr, r.stderr


def test_no_warning_when_the_label_rule_agrees(tmp_path):
    for kind in ("gb", "rf", "xgb"):  # rf: weights >= 0, NONE: the argmax of [1 - s, s]
        path = tmp_path / f"{kind}.onnx"
        _export(kind, "breast_cancer", {"n_estimators": 5, "max_depth": 2}, path)
        assert "warnings" not in import_model("onnx", path).metadata["metadata"]["imported_from"]


# --------------------------------------------------------------------------- refusals


def _set(proto: Any, **attrs: Any) -> Any:
    node = _tree_node(proto)
    keep = [x for x in node.attribute if x.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(keep)
    for k, v in attrs.items():
        if v is not None:
            node.attribute.append(helper.make_attribute(k, v))
    return proto


def _refused(tmp_path: Path, proto: Any, pattern: str, cli: bool = False) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ImportModelError, match=pattern) as err:
        import_model("onnx", path)
    assert "\n" not in str(err.value)
    if cli:
        r = run_cli("import", "onnx", path, "-o", tmp_path / "bad.clef")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "Traceback" not in r.stderr and not (tmp_path / "bad.clef").exists()


def test_refusals_name_the_supported_route(tmp_path):
    src = tmp_path / "gb3.onnx"
    _export("gb", "iris", {"n_estimators": 3, "max_depth": 2}, src)
    binary = tmp_path / "gb2.onnx"
    _export("gb", "breast_cancer", {"n_estimators": 3, "max_depth": 2}, binary)
    for post in ("PROBIT", "SOFTMAX_ZERO"):
        proto = _set(onnx.load(str(src)), post_transform=post)
        _refused(tmp_path, proto, r"NONE, LOGISTIC")
    _refused(tmp_path, _set(onnx.load(str(src)), post_transform="LOGISTIC"), "NONE and SOFTMAX are")
    _refused(tmp_path, _set(onnx.load(str(binary)), post_transform="NONE"), "supported: LOGISTIC")
    # NONE on margins (onnxmltools' XGBoost multi:softmax): no probabilities, said so
    _refused(tmp_path, _set(onnx.load(str(src)), post_transform="NONE"), "supported: SOFTMAX")
    p = onnx.load(str(src))
    modes = [
        helper.get_attribute_value(x) for x in _tree_node(p).attribute if x.name == "nodes_modes"
    ]
    bad = [b"BRANCH_FOO" if m != b"LEAF" else m for m in modes[0]]
    _refused(tmp_path, _set(p, nodes_modes=bad), "unknown mode")
    # the regressor: not a classifier
    reg = _set(onnx.load(str(src)))
    _tree_node(reg).op_type = "TreeEnsembleRegressor"
    _refused(tmp_path, reg, "only ai.onnx.ml.TreeEnsembleClassifier")
    # trees whose nodes interleave: onnxruntime would read more trees than there are
    p = onnx.load(str(src))
    a = {x.name: helper.get_attribute_value(x) for x in _tree_node(p).attribute}
    tids = list(a["nodes_treeids"])
    tids[0], tids[-1] = tids[-1], tids[0]
    _refused(tmp_path, _set(p, nodes_treeids=tids), "not contiguous")


def test_outputs_computed_after_the_tree_are_refused(tmp_path):
    """onnxmltools exports a LightGBM random forest as a TreeEnsembleClassifier whose scores
    later nodes divide and label again (ArgMax): onnxruntime's answer is not the tree node's,
    so importing the node alone decided otherwise on most rows; such graphs are refused."""
    path = tmp_path / "lgb_rf.onnx"
    params = {"n_estimators": 5, "boosting_type": "rf", "subsample": 0.7, "subsample_freq": 1}
    _export("lgb", "breast_cancer", params, path)
    proto = onnx.load(str(path))
    assert "ArgMax" in {n.op_type for n in proto.graph.node}
    _refused(tmp_path, proto, r"output 'label' from the tree's through a ArrayFeatureExtractor")
    # a Sigmoid after the tree's probabilities: the confidence would not be onnxruntime's
    p = onnx.load(str(path))
    del p.graph.node[:]
    tree = _tree_node(proto)
    p.graph.node.extend([tree, helper.make_node("Sigmoid", [tree.output[1]], ["probs"])])
    del p.graph.output[:]
    p.graph.output.extend(
        [
            helper.make_tensor_value_info(tree.output[0], TensorProto.INT64, [None]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, 2]),
        ]
    )
    _refused(tmp_path, p, r"output 'probs' from the tree's through a Sigmoid node")
    # the outputs swapped
    p.graph.node.pop()
    del p.graph.output[:]
    p.graph.output.extend(
        [
            helper.make_tensor_value_info(tree.output[1], TensorProto.FLOAT, [None, 2]),
            helper.make_tensor_value_info(tree.output[0], TensorProto.INT64, [None]),
        ]
    )
    _refused(tmp_path, p, r"in that order")


def test_value_keeping_nodes_after_the_tree_are_accepted(tmp_path):
    """What the converters write after the tree: Cast and ZipMap (skl2onnx's default), the
    Identity nodes and the Mul by 1 of onnxmltools' LightGBM export."""
    import sklearn.ensemble as se

    X, y = _data("breast_cancer")
    X32 = X.astype(np.float32)
    clf = se.RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X32, y)
    path = tmp_path / "rf_zipmap.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = skl2onnx.to_onnx(clf, X32[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    assert {"Cast", "ZipMap"} <= {n.op_type for n in proto.graph.node}
    path.write_bytes(proto.SerializeToString())
    model = import_model("onnx", path)
    assert isinstance(model, Ensemble)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    label = sess.run(None, {sess.get_inputs()[0].name: X32})[0]
    assert np.array_equal(EnsembleEvaluator(model).evaluate(X).actions, label)
    path = tmp_path / "lgb.onnx"
    _export("lgb", "breast_cancer", {"n_estimators": 3, "max_depth": 3}, path)
    assert "Mul" in {n.op_type for n in onnx.load(str(path)).graph.node}
    assert isinstance(import_model("onnx", path), Ensemble)


@pytest.mark.slow
def test_cli_refusal_exits_2_with_one_line(tmp_path):
    src = tmp_path / "gb3.onnx"
    _export("gb", "iris", {"n_estimators": 3, "max_depth": 2}, src)
    _refused(tmp_path, _set(onnx.load(str(src)), post_transform="PROBIT"), "PROBIT", cli=True)
    reg = _set(onnx.load(str(src)))
    _tree_node(reg).op_type = "TreeEnsembleRegressor"
    _refused(tmp_path, reg, "TreeEnsembleClassifier", cli=True)


def test_double_input_ensembles_are_refused(tmp_path):
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data("iris")
    clf = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    proto = skl2onnx.to_onnx(
        clf, X[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3}
    )
    _refused(tmp_path, proto, "double input")


def test_a_handmade_forest_with_every_mode(tmp_path):
    """Three trees written by hand: all six modes, labels as strings, weights for 3 classes."""
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    rng = np.random.default_rng(3)
    cuts = [0.5, 0.1, -1.5, 2.0, 0.33333334, 1e-8]
    keys = [
        "nodes_treeids",
        "nodes_nodeids",
        "nodes_featureids",
        "nodes_modes",
        "nodes_values",
        "nodes_truenodeids",
        "nodes_falsenodeids",
        "class_treeids",
        "class_nodeids",
        "class_ids",
        "class_weights",
    ]
    attrs: dict[str, list[Any]] = {k: [] for k in keys}
    for t in range(3):
        for i in range(3):  # node 0 splits to 1 (true) and 2 (false)... node 1, 2 leaves
            leaf = i > 0
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(i)
            attrs["nodes_featureids"].append(int(rng.integers(2)))
            attrs["nodes_modes"].append("LEAF" if leaf else modes[2 * t + int(rng.integers(2))])
            attrs["nodes_values"].append(float(rng.choice(cuts)))
            attrs["nodes_truenodeids"].append(0 if leaf else 1)
            attrs["nodes_falsenodeids"].append(0 if leaf else 2)
            if leaf:
                for c, w in enumerate(rng.dirichlet(np.ones(3)) / 3):
                    attrs["class_treeids"].append(t)
                    attrs["class_nodeids"].append(i)
                    attrs["class_ids"].append(c)
                    attrs["class_weights"].append(float(w))
    node = helper.make_node(
        "TreeEnsembleClassifier",
        ["X"],
        ["label", "probs"],
        domain="ai.onnx.ml",
        classlabels_strings=["allow", "challenge", "block"],
        post_transform="NONE",
        **attrs,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
        [
            helper.make_tensor_value_info("label", TensorProto.STRING, [None]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, 3]),
        ],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)]
    )
    path = tmp_path / "hand.onnx"
    path.write_bytes(proto.SerializeToString())
    model = import_model("onnx", path)
    assert isinstance(model, Ensemble) and model.actions == ("allow", "challenge", "block")
    pool = np.array(cuts)
    R = boundary_rows(model, np.zeros((1, 2)), 3000, 1, {0: pool, 1: pool})
    b = EnsembleEvaluator(model).evaluate(R)
    label, proba = ort_run(path, R)
    names = np.array(model.actions)
    assert np.array_equal(names[b.actions], label)
    p = proba[np.arange(len(R)), b.actions]
    assert np.array_equal(p, b.confidences.astype(np.float32))


# --------------------------------------------------------------------------- verification

INVARIANTS = """
invariant big_worst_radius_is_class_0:
  when f20 > 30 and f27 > 0.25 and f22 > 200
  ensure action == class_0

invariant class_1_is_confident:
  ensure action == class_1 implies confidence >= 0.9

invariant small_is_class_1:
  when f20 < 12 and f27 < 0.08 and f23 < 400 and f21 < 20
  ensure action == class_1
"""


@pytest.mark.slow
def test_check_on_an_onnx_ensemble_counterexamples_replay_in_onnxruntime(tmp_path):
    path = tmp_path / "gb.onnx"
    _export("gb", "breast_cancer", {"n_estimators": 10, "max_depth": 3}, path)
    clef = tmp_path / "gb.clef"
    r = run_cli("import", "onnx", path, "-o", clef)
    assert r.returncode == 0, r.stderr
    inv = tmp_path / "gb.inv"
    inv.write_text(INVARIANTS)
    out = tmp_path / "r.json"
    r = run_cli("check", clef, inv, "--format", "json", "-o", out, "--no-cache", timeout=600)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(out.read_text())
    model = load(clef)
    assert isinstance(model, Ensemble)
    names = [f.name for f in model.features]
    statuses = {}
    for res in doc["results"]:
        statuses[res["invariant"]] = res["status"]
        for c in res["counterexamples"]:
            x = np.array([[float(c["input"][n]) for n in names]])
            label, proba = ort_run(path, x)
            assert model.actions[int(label[0])] == c["action"]
            assert float(np.clip(proba[0, label[0]], 0, 1)) == pytest.approx(
                c["confidence"], abs=1e-6
            )
    assert "violated" in statuses.values(), statuses
    assert statuses["class_1_is_confident"] == "violated"
    # what holds, holds in onnxruntime on boundary rows inside the 'when'
    X, _ = _data("breast_cancer")
    R = boundary_rows(model, X, 50_000, 11, _thresholds(path))
    label, _ = ort_run(path, R)
    for name, when, want in (
        (
            "big_worst_radius_is_class_0",
            (R[:, 20] > 30) & (R[:, 27] > 0.25) & (R[:, 22] > 200),
            0,
        ),
        (
            "small_is_class_1",
            (R[:, 20] < 12) & (R[:, 27] < 0.08) & (R[:, 23] < 400) & (R[:, 21] < 20),
            1,
        ),
    ):
        if statuses[name] == "holds":
            assert (label[when] == want).all(), name


# --------------------------------------------------------------------------- the format


def test_identity_with_divided_shares_and_the_one_output_links_in_json():
    from clefprove.errors import ModelSourceError
    from clefprove.model.source import compile_source

    feats = [{"name": "x", "type": "float", "min": -10, "max": 10, "default": 0}]

    def tree(a: list[float], b: list[float]) -> dict:
        return {"feature": "x", "threshold": 0.5, "left": {"value": a}, "right": {"value": b}}

    def src(ensemble: dict, trees: list[dict], actions: int = 2) -> dict:
        names = ["a", "b", "c"][:actions]
        return {"features": feats, "actions": names, "ensemble": ensemble, "trees": trees}

    shares = [tree([0.5, 0.0], [0.0, 0.5]), tree([0.25, 0.25], [0.25, 0.25])]
    m = compile_source(src({"link": "identity", "arithmetic": "float32"}, shares))
    assert isinstance(m, Ensemble) and m.combine.divisor == 1
    b = EnsembleEvaluator(m).evaluate(np.array([[0.0], [1.0]]))
    assert b.actions.tolist() == [0, 1] and b.confidences.tolist() == [0.75, 0.75]
    too_much = [tree([0.75, 0.0], [0.0, 0.5]), tree([0.5, 0.25], [0.5, 0.0])]
    with pytest.raises(ModelSourceError, match="summing to at most 1"):
        compile_source(src({"link": "identity"}, too_much))
    with pytest.raises(ModelSourceError, match="divisor is the number of trees"):
        compile_source(src({"link": "identity", "divisor": 3}, shares))
    one = [tree([0.25], [0.75]), tree([0.25], [-0.5])]
    for link, rule in (("onnx_logistic", "positive"), ("complement", "score_half")):
        m = compile_source(src({"link": link, "rule": rule, "arithmetic": "float32"}, one))
        assert isinstance(m, Ensemble) and m.combine.outputs == 1
        b = EnsembleEvaluator(m).evaluate(np.array([[0.0], [1.0]]))
        # s = 0.5 on the left (class 1 iff s > 0, or iff s > 0.5), 0.25 on the right
        assert b.actions.tolist() == ([1, 1] if rule == "positive" else [0, 0])
    with pytest.raises(ModelSourceError, match="needs a one-output link"):
        compile_source(src({"link": "softmax", "rule": "positive"}, shares))
