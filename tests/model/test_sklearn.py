"""scikit-learn import: exact float32 threshold conversion and agreement with ``predict``."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sklearn_tree = pytest.importorskip("sklearn.tree")

from clefprove.errors import ImportModelError  # noqa: E402
from clefprove.eval.evaluator import Evaluator  # noqa: E402
from clefprove.model.sklearn import float32_threshold, from_sklearn  # noqa: E402
from clefprove.model.types import NodeKind  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _example_module():
    spec = importlib.util.spec_from_file_location(
        "make_edge_example", ROOT / "examples" / "make_edge_example.py"
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


EX = _example_module()


def _f32_le(x: float, t: float) -> bool:
    with np.errstate(over="ignore"):
        return bool(float(np.float32(x)) <= t)


def _f32_neighbours(t: float) -> list[float]:
    with np.errstate(over="ignore"):
        c = np.float32(t)
        out = [float(c)]
        for _ in range(2):
            out.append(float(np.nextafter(np.float32(out[-1]), np.float32(np.inf))))
        out.append(float(np.nextafter(c, np.float32(-np.inf))))
    mids = [(a + b) / 2 for a, b in zip(sorted(out), sorted(out)[1:], strict=False)]
    return [v for v in out + mids if math.isfinite(v)]


@settings(max_examples=500, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(-1e6, 1e6, allow_nan=False, width=32).map(float)
    | st.floats(-1e-38, 1e-38, allow_nan=False)
)
def test_float32_threshold_is_exact(t: float) -> None:
    tp = float32_threshold(t)
    candidates = [tp, math.nextafter(tp, math.inf), math.nextafter(tp, -math.inf), t]
    candidates += [math.nextafter(t, math.inf), math.nextafter(t, -math.inf)]
    candidates += _f32_neighbours(t)
    for x in candidates:
        assert _f32_le(x, t) == (x <= tp), (t, tp, x)


def test_float32_threshold_edges() -> None:
    f32max = float(np.finfo(np.float32).max)
    overflow = 2.0**128 - 2.0**103
    assert float32_threshold(f32max) == math.nextafter(overflow, -math.inf)
    assert float32_threshold(1e300) == math.nextafter(overflow, -math.inf)
    assert float32_threshold(-1e300) == -overflow
    assert float32_threshold(0.0) == 2.0**-150  # 0 is even: the tie rounds down to 0
    assert float32_threshold(771.5) > 771.5


@pytest.fixture(scope="module")
def fitted():
    X, y = EX.generate(30_000, seed=7)
    labels = np.array(EX.ACTIONS)[y]
    clf = sklearn_tree.DecisionTreeClassifier(max_depth=10, random_state=0).fit(X, labels)
    model = from_sklearn(clf, features=EX.FEATURES, actions=EX.ACTIONS, name="t")
    return clf, model


def _boundary_rows(clf, n_total: int, seed: int = 1) -> np.ndarray:
    """Rows at and next to every threshold (float64 and float32 neighbours), then random."""
    rng = np.random.default_rng(seed)
    tree = clf.tree_
    lo = np.array([0, 768, 0, 0, 0, 0], dtype=np.float64)
    hi = np.array([10000, 772, 64, 8, 5, 1], dtype=np.float64)
    base, _ = EX.generate(n_total, seed=seed + 1)
    rows = []
    for node in np.flatnonzero(tree.children_left != -1):
        f, t = int(tree.feature[node]), float(tree.threshold[node])
        tp = float32_threshold(t)
        values = [t, math.nextafter(t, math.inf), math.nextafter(t, -math.inf), tp]
        values += [math.nextafter(tp, math.inf), math.nextafter(tp, -math.inf)]
        values += _f32_neighbours(t)
        if f in (1, 2, 4, 5):  # whole-valued features
            values = [math.floor(t), math.ceil(t), math.floor(t) + 1]
        for v in values:
            row = base[rng.integers(len(base))].copy()
            row[f] = v
            rows.append(row)
    X = np.vstack([np.array(rows), base])[:n_total]
    return np.clip(X, lo, hi)  # in-domain inputs: the model clips, predict does not


def test_agrees_with_predict_on_boundary_rows(fitted) -> None:
    clf, model = fitted
    X = _boundary_rows(clf, 100_000)
    assert len(X) == 100_000
    res = Evaluator(model).evaluate(X)
    expected = clf.predict(X)
    got = np.array(model.actions)[res.actions]
    assert (got == expected).all()
    proba = clf.predict_proba(X).max(axis=1)
    np.testing.assert_allclose(res.confidences, proba, rtol=1e-12, atol=0)
    # the single-input path agrees too (on a sample)
    ev = Evaluator(model)
    for i in range(0, 100_000, 997):
        assert ev.evaluate_one(X[i]).leaf == res.leaves[i]


def test_splits_keep_their_feature_types(fitted) -> None:
    _, model = fitted
    kinds = {(model.features[n.feature].type.value, n.kind) for n in model.iter_nodes()}
    assert ("categorical", NodeKind.CATEGORICAL) in kinds
    for n in model.iter_nodes():
        if n.kind is NodeKind.NUMERIC and model.features[n.feature].is_integral:
            assert n.threshold - math.floor(n.threshold) == 0.5  # whole-number form, e.g. 771.5


def test_label_forms() -> None:
    X = np.array([[0.0], [1.0], [2.0], [3.0]] * 5)
    feats = [{"name": "x", "type": "float", "min": 0, "max": 3, "default": 0}]
    y_int = np.array([0, 0, 2, 2] * 5)
    clf = sklearn_tree.DecisionTreeClassifier().fit(X, y_int)
    m = from_sklearn(clf, feats, actions=["allow", "challenge", "block"])
    assert m.actions == ("allow", "challenge", "block")
    assert Evaluator(m).evaluate(X[:4]).actions.tolist() == [0, 0, 2, 2]
    m = from_sklearn(clf, feats, actions={0: "ok", 2: "no"})
    assert m.actions == ("ok", "no")
    y_str = np.array(["allow", "allow", "block", "block"] * 5)
    clf = sklearn_tree.DecisionTreeClassifier().fit(X, y_str)
    assert from_sklearn(clf, feats).actions == ("allow", "block")
    m = from_sklearn(clf, feats, actions=["allow", "challenge", "block"])
    assert Evaluator(m).evaluate(X[:4]).actions.tolist() == [0, 0, 2, 2]
    with pytest.raises(ImportModelError, match="class label 'block' has no action"):
        from_sklearn(clf, feats, actions=["allow", "challenge"])


def test_refusals() -> None:
    from sklearn.ensemble import RandomForestClassifier

    X = np.array([[0.0, 1.0], [1.0, 0.0]] * 5)
    feats = [
        {"name": "f0", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "f1", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    reg = sklearn_tree.DecisionTreeRegressor().fit(X, [0.0, 1.0] * 5)
    with pytest.raises(ImportModelError, match="not a decision-tree classifier"):
        from_sklearn(reg, feats, actions=["a"])
    multi = sklearn_tree.DecisionTreeClassifier().fit(X, np.array([[0, 1], [1, 0]] * 5))
    with pytest.raises(ImportModelError, match="multi-output"):
        from_sklearn(multi, feats, actions=["a", "b"])
    with pytest.raises(ImportModelError, match=r"^DecisionTreeClassifier is not fitted$"):
        from_sklearn(sklearn_tree.DecisionTreeClassifier(), feats, actions=["a"])
    # not an estimator at all (scikit-learn's own tag lookup raised AttributeError)
    for thing in ("model.pkl", None, {"tree_": 1}):
        with pytest.raises(ImportModelError, match="is not a decision-tree classifier"):
            from_sklearn(thing, feats, actions=["a"])
    # fitted classifiers that are not trees: refused by name, with the supported routes
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    linear = LogisticRegression().fit(X, [0, 1] * 5)
    with pytest.raises(
        ImportModelError, match=r"LogisticRegression cannot be converted \(supported"
    ):
        from_sklearn(linear, feats, actions=["a", "b"])
    piped = make_pipeline(StandardScaler(), sklearn_tree.DecisionTreeClassifier()).fit(
        X, [0, 1] * 5
    )
    with pytest.raises(ImportModelError, match=r"Pipeline cannot be converted.*final estimator"):
        from_sklearn(piped, feats, actions=["a", "b"])
    forest = RandomForestClassifier(n_estimators=2).fit(X, [0, 1] * 5)
    assert from_sklearn(forest, feats, actions=["a", "b"]).n_trees == 2  # an ensemble
    with pytest.raises(ImportModelError, match="RandomForestClassifier is not fitted"):
        from_sklearn(RandomForestClassifier(), feats, actions=["a", "b"])
    clf = sklearn_tree.DecisionTreeClassifier().fit(X, [0, 1] * 5)
    with pytest.raises(ImportModelError, match="fitted on 2 features but 1"):
        from_sklearn(clf, feats[:1], actions=["a", "b"])
    with pytest.raises(ImportModelError, match="class label 1 has no action"):
        from_sklearn(clf, feats, actions=["a"])
    with pytest.raises(ImportModelError, match="not strings"):
        from_sklearn(clf, feats)
    with pytest.raises(ImportModelError, match="features"):
        from_sklearn(clf, [{"name": "f0", "type": "float"}, feats[1]], actions=["a", "b"])


def test_extra_tree_with_sample_weights() -> None:
    # ExtraTree thresholds are random draws, not float32 midpoints: the rule must hold for any t.
    X, y = EX.generate(20_000, seed=3)
    weights = np.random.default_rng(3).uniform(0.1, 5.0, len(y))
    clf = sklearn_tree.ExtraTreeClassifier(max_depth=12, random_state=3)
    clf.fit(X, y, sample_weight=weights)
    model = from_sklearn(clf, features=EX.FEATURES, actions=EX.ACTIONS)
    X = _boundary_rows(clf, 30_000, seed=4)
    res = Evaluator(model).evaluate(X)
    assert (res.actions == clf.predict(X)).all()
    np.testing.assert_allclose(res.confidences, clf.predict_proba(X).max(axis=1), rtol=1e-12)


@pytest.mark.parametrize("kind", ["RandomForestClassifier", "ExtraTreesClassifier"])
def test_forest_fitted_on_one_class(kind: str) -> None:
    # scikit-learn fits a forest on labels of one value (predict: that label, predict_proba:
    # 1.0); it was refused with 'conversion produced an invalid model: ensemble: a identity
    # link has one output per action (>= 2)', though the one-class tree converts.
    import sklearn.ensemble

    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.25]] * 4)
    feats = [
        {"name": "f0", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "f1", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    forest = getattr(sklearn.ensemble, kind)(n_estimators=3, random_state=0)
    forest.fit(X, np.array(["allow"] * len(X)))
    model = from_sklearn(forest, feats)
    assert model.actions == ("allow",)
    rows = np.random.default_rng(0).uniform(0, 1, (50, 2))
    res = Evaluator(model).evaluate(rows)
    assert [model.actions[a] for a in res.actions] == forest.predict(rows).tolist()
    assert res.confidences.tolist() == forest.predict_proba(rows).max(axis=1).tolist()
