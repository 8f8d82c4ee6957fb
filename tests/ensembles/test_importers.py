"""Ensemble importers against each library's own predict / predict_proba.

Rows are built from every split of the imported model: each cut, the float64 values next to
it, the float32 values next to it and next to the float32 rounding boundaries, plus the
library's own thresholds, 0, huge values and the domain bounds, over rows of the data set.
The default tier uses a few thousand rows per model; the slow tier 100,000.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine

import clefprove
from clefprove.errors import ImportModelError
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import import_model
from clefprove.model.types import NodeKind
from tests.helpers import categorical_xgboost

F64_MAX = float(np.finfo(np.float64).max)
DATASETS = {
    "breast_cancer": load_breast_cancer,
    "iris": load_iris,
    "wine": load_wine,
    "digits": load_digits,
}


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    return DATASETS[name](return_X_y=True)


def _wide(n: int, top: float = F64_MAX) -> list[dict]:
    return [
        {"name": f"f{i}", "type": "float", "min": -top, "max": top, "default": 0.0}
        for i in range(n)
    ]


#: scikit-learn refuses inputs beyond float32's range: its domain ends at the largest float32.
F32_MAX = float(np.finfo(np.float32).max)


def _near(values: np.ndarray) -> np.ndarray:
    """Each value, its float64 neighbours, its float32 rounding and that one's neighbours."""
    v = values[np.isfinite(values)]
    with np.errstate(over="ignore"):
        f32 = v.astype(np.float32)
        up32 = np.nextafter(f32, np.float32(np.inf)).astype(np.float64)
        dn32 = np.nextafter(f32, np.float32(-np.inf)).astype(np.float64)
    f = f32.astype(np.float64)
    mids = np.concatenate([(f + up32) / 2, (f + dn32) / 2])
    out = np.concatenate(
        [
            v,
            np.nextafter(v, np.inf),
            np.nextafter(v, -np.inf),
            f,
            up32,
            dn32,
            mids,
            np.nextafter(mids, np.inf),
            np.nextafter(mids, -np.inf),
        ]
    )
    return out[np.isfinite(out)]


def boundary_rows(
    model: Ensemble, X: np.ndarray, n: int, seed: int, extra: dict[int, np.ndarray] | None = None
) -> np.ndarray:
    """*n* data rows with one to three columns moved to a boundary value of that column."""
    rng = np.random.default_rng(seed)
    nodes = model.nodes
    numeric = nodes["kind"] == NodeKind.NUMERIC
    feat, cut = nodes["feature"][numeric], nodes["value"][numeric]
    per: dict[int, np.ndarray] = {}
    for j in range(X.shape[1]):
        vals = [_near(cut[feat == j])]
        if extra and j in extra:
            vals.append(_near(np.asarray(extra[j], dtype=np.float64)))
        vals.append(np.array([0.0, -0.0, 1e-300, -1e30, 1e30, 3.5e38, -F64_MAX, F64_MAX]))
        per[j] = np.concatenate(vals)
    R = X[rng.integers(0, len(X), n)].astype(np.float64)
    for _ in range(3):
        cols = rng.integers(0, X.shape[1], n)
        hit = rng.random(n) < 0.8
        for j in np.unique(cols[hit]).tolist():
            rows = np.flatnonzero(hit & (cols == j))
            R[rows, j] = rng.choice(per[j], size=rows.size)
    return R


def _agree(
    model: Ensemble,
    R: np.ndarray,
    classes: np.ndarray,
    pred: np.ndarray,
    proba: np.ndarray,
    tol: float,
) -> None:
    b = EnsembleEvaluator(model).evaluate(R)
    label = classes[b.actions]
    bad = np.flatnonzero(label != pred)
    assert bad.size == 0, f"{bad.size} of {len(R)} rows decide differently, first {R[bad[0]]}"
    err = np.abs(proba[np.arange(len(R)), b.actions] - b.confidences)
    assert err.max() <= tol, f"probability off by {err.max()}"


# --------------------------------------------------------------------------- scikit-learn

SKLEARN = [
    ("RandomForestClassifier", "breast_cancer", {"n_estimators": 10, "max_depth": 6}),
    ("RandomForestClassifier", "iris", {"n_estimators": 50, "max_depth": 4}),
    ("ExtraTreesClassifier", "wine", {"n_estimators": 10, "max_depth": 5}),
    ("GradientBoostingClassifier", "breast_cancer", {"n_estimators": 50, "max_depth": 3}),
    ("GradientBoostingClassifier", "iris", {"n_estimators": 10, "max_depth": 3}),
    # predict_proba is expit(2 * raw) for the exponential loss (its link is the half logit)
    ("GradientBoostingClassifier", "breast_cancer", {"n_estimators": 20, "loss": "exponential"}),
]


def _sklearn(cls: str, data: str, params: dict):
    import sklearn.ensemble as se

    X, y = _data(data)
    clf = getattr(se, cls)(random_state=0, **params).fit(X, y)
    names = [f"c{k}" for k in range(len(clf.classes_))]
    model = clefprove.from_sklearn(clf, _wide(X.shape[1], F32_MAX), actions=names)
    return clf, model, X, sklearn_thresholds(clf, X.shape[1])


def sklearn_thresholds(clf: object, n_features: int) -> dict[int, np.ndarray]:
    """The library's own split thresholds per feature, over every tree of the ensemble."""
    thr: dict[int, list[float]] = {}
    for est in np.ravel(clf.estimators_):  # type: ignore[attr-defined]
        t = est.tree_
        for j in range(n_features):
            thr.setdefault(j, []).extend(t.threshold[t.feature == j].tolist())
    return {j: np.array(v) for j, v in thr.items()}


def _check_sklearn(cls, data, params, n):
    clf, model, X, thr = _sklearn(cls, data, params)
    assert isinstance(model, Ensemble)
    assert model.n_trees == np.ravel(clf.estimators_).size
    R = boundary_rows(model, X, n, 1, thr)
    R = np.clip(R, -F32_MAX, F32_MAX)  # the domain bounds
    _agree(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R), 1e-12)


@pytest.mark.parametrize(("cls", "data", "params"), SKLEARN)
def test_sklearn_ensembles_decide_as_predict(cls, data, params):
    _check_sklearn(cls, data, params, 3000)


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "data", "params"), SKLEARN)
def test_sklearn_ensembles_decide_as_predict_100k(cls, data, params):
    _check_sklearn(cls, data, params, 100_000)


def test_sklearn_refuses_regressors_naming_the_route():
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

    X, y = _data("iris")
    for reg in (RandomForestRegressor(n_estimators=2), GradientBoostingRegressor(n_estimators=2)):
        reg.fit(X, y)
        with pytest.raises(ImportModelError, match=r"cannot be converted .supported: .*Random"):
            clefprove.from_sklearn(reg, _wide(4), actions=["a", "b", "c"])


def test_sklearn_gradient_boosting_init_dummy_strategies():
    """A DummyClassifier init is a constant unless its strategy is 'stratified', which draws
    a class at random for every row: such a model is refused, the others are exact."""
    from sklearn.dummy import DummyClassifier
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = _data("iris")
    for strategy in ("most_frequent", "uniform", "constant", "stratified"):
        init = DummyClassifier(strategy=strategy, constant=1 if strategy == "constant" else None)
        clf = GradientBoostingClassifier(n_estimators=3, random_state=0, init=init).fit(X, y)
        if strategy == "stratified":
            with pytest.raises(ImportModelError, match="strategy 'stratified' predicts at random"):
                clefprove.from_sklearn(clf, _wide(4, F32_MAX), actions=["a", "b", "c"])
            continue
        model = clefprove.from_sklearn(clf, _wide(4, F32_MAX), actions=["a", "b", "c"])
        R = boundary_rows(model, X, 1000, 1, sklearn_thresholds(clf, 4))
        R = np.clip(R, -F32_MAX, F32_MAX)
        _agree(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R), 1e-12)


# --------------------------------------------------------------------------- XGBoost

xgb = pytest.importorskip("xgboost")

XGB = [
    ("breast_cancer", {"objective": "binary:logistic", "n_estimators": 10, "max_depth": 3}),
    ("breast_cancer", {"objective": "binary:logistic", "n_estimators": 50, "max_depth": 6}),
    # an XGBClassifier with reg:logistic decides as binary:logistic (the same sigmoid, p > 0.5)
    ("breast_cancer", {"objective": "reg:logistic", "n_estimators": 10, "max_depth": 3}),
    ("iris", {"objective": "multi:softprob", "n_estimators": 10, "max_depth": 4}),
    ("wine", {"objective": "multi:softmax", "n_estimators": 10, "max_depth": 3}),
    (
        "breast_cancer",
        {
            "objective": "binary:logistic",
            "n_estimators": 2,
            "max_depth": 5,
            "num_parallel_tree": 10,
            "subsample": 0.8,
            "colsample_bynode": 0.8,
            "learning_rate": 1.0,
        },
    ),
]


def xgboost_thresholds(booster: object) -> dict[int, np.ndarray]:
    """The library's own split thresholds per feature, from the booster's JSON."""
    thr: dict[int, list[float]] = {}
    raw = json.loads(booster.save_raw("json"))  # type: ignore[attr-defined]
    for tree in raw["learner"]["gradient_booster"]["model"]["trees"]:
        for i, j in enumerate(tree["split_indices"]):
            if tree["left_children"][i] != -1:
                thr.setdefault(int(j), []).append(float(tree["split_conditions"][i]))
    return {j: np.array(v) for j, v in thr.items()}


def _check_xgb(tmp_path: Path, data: str, params: dict, n: int, ext: str = "json") -> None:
    X, y = _data(data)
    clf = xgb.XGBClassifier(random_state=0, **params).fit(X, y)
    path = tmp_path / f"m.{ext}"
    clf.get_booster().save_model(path)
    model = import_model("xgboost", path)
    assert isinstance(model, Ensemble)
    R = boundary_rows(model, X, n, 2, xgboost_thresholds(clf.get_booster()))
    R = np.clip(R, -F32_MAX, F32_MAX)  # XGBoost refuses inputs that overflow float32
    b = EnsembleEvaluator(model).evaluate(R)
    margin = clf.get_booster().predict(xgb.DMatrix(R), output_margin=True)
    assert np.array_equal(b.scores.reshape(margin.shape), margin)  # bit for bit, float32
    _agree(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R), 1e-6)


@pytest.mark.parametrize(("data", "params"), XGB)
def test_xgboost_ensembles_decide_as_predict(tmp_path, data, params):
    _check_xgb(tmp_path, data, params, 3000)


def test_xgboost_ubj_and_categorical(tmp_path):
    _check_xgb(tmp_path, "iris", {"objective": "multi:softprob", "n_estimators": 5}, 2000, "ubj")
    bst, kw, rows = categorical_xgboost(tmp_path / "c.json", 20)
    model = import_model("xgboost", tmp_path / "c.json")
    assert isinstance(model, Ensemble) and model.features[0].type.value == "categorical"
    Xt = rows(4000)
    b = EnsembleEvaluator(model).evaluate(Xt)
    p1 = bst.predict(xgb.DMatrix(Xt, **kw))
    assert np.array_equal(b.actions, (p1 > 0.5).astype(int))
    assert np.abs(np.where(b.actions == 1, p1, 1 - p1) - b.confidences).max() <= 1e-6


@pytest.mark.parametrize(("data", "rate"), [("breast_cancer", 0.3), ("wine", 0.5)])
def test_xgboost_early_stopping_imports_the_rounds_predict_uses(tmp_path, data, rate):
    """Early stopping keeps every round in the file but records ``best_iteration``, and
    ``XGBClassifier.predict`` (also after ``load_model``) uses only the rounds up to it; the
    import takes those rounds, as predict does, and says so."""
    X, y = _data(data)
    clf = xgb.XGBClassifier(
        n_estimators=200, max_depth=3, learning_rate=rate, early_stopping_rounds=3,
        random_state=0,
    )  # fmt: skip
    clf.fit(X, y, eval_set=[(X[::3], y[::3])], verbose=False)
    booster = clf.get_booster()
    assert clf.best_iteration + 1 < booster.num_boosted_rounds()  # it did stop early
    path = tmp_path / "m.json"
    clf.save_model(path)
    model = import_model("xgboost", path)
    assert isinstance(model, Ensemble)
    per = len(clf.classes_) if len(clf.classes_) > 2 else 1
    assert model.n_trees == (clf.best_iteration + 1) * per
    note = model.metadata["metadata"]["imported_from"]["warnings"][0]
    assert f"best_iteration {clf.best_iteration}" in note and "XGBClassifier.predict" in note
    R = boundary_rows(model, X, 2000, 2, xgboost_thresholds(booster))
    R = np.clip(R, -F32_MAX, F32_MAX)
    loaded = xgb.XGBClassifier()
    loaded.load_model(path)
    _agree(model, R, clf.classes_, loaded.predict(R), loaded.predict_proba(R), 1e-6)


def test_xgboost_best_iteration_zero_is_one_tree(tmp_path):
    X, y = _data("breast_cancer")
    clf = xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, y)
    clf.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["learner"]["attributes"]["best_iteration"] = "0"
    (tmp_path / "m.json").write_text(json.dumps(doc))
    model = import_model("xgboost", tmp_path / "m.json")
    assert not isinstance(model, Ensemble)  # one binary:logistic tree: a v1 model
    (note,) = model.metadata["metadata"]["imported_from"]["warnings"]
    assert "best_iteration 0 of 3 rounds" in note
    R = X[:200]
    pred = clf.predict(R, iteration_range=(0, 1))
    from clefprove.eval.evaluator import Evaluator

    assert np.array_equal(Evaluator(model).evaluate(R).actions, pred)


@pytest.mark.slow
@pytest.mark.parametrize(("data", "params"), XGB)
def test_xgboost_ensembles_decide_as_predict_100k(tmp_path, data, params):
    _check_xgb(tmp_path, data, params, 100_000)


# --------------------------------------------------------------------------- LightGBM

lgb = pytest.importorskip("lightgbm")


def test_from_sklearn_names_the_import_route_for_xgboost_and_lightgbm():
    X, y = _data("breast_cancer")
    models = [
        ("xgboost", xgb.XGBClassifier(n_estimators=2, max_depth=2)),
        ("lightgbm", lgb.LGBMClassifier(n_estimators=2, max_depth=2, verbose=-1)),
    ]
    for library, clf in models:
        clf.fit(X, y)
        with pytest.raises(ImportModelError, match=f"clefprove import {library} FILE"):
            clefprove.from_sklearn(clf, _wide(X.shape[1]), actions=["a", "b"])


LGB = [
    ("breast_cancer", {"objective": "binary", "n_estimators": 10}),
    ("breast_cancer", {"objective": "binary", "n_estimators": 50, "max_depth": 6}),
    ("breast_cancer", {"objective": "cross_entropy", "n_estimators": 10}),  # sigmoid scale 1
    ("wine", {"objective": "multiclass", "n_estimators": 10}),
    (
        "breast_cancer",
        {
            "objective": "binary",
            "boosting_type": "rf",
            "n_estimators": 10,
            "subsample": 0.7,
            "subsample_freq": 1,
            "colsample_bytree": 0.7,
        },
    ),
    (
        "iris",
        {
            "objective": "multiclass",
            "boosting_type": "rf",
            "n_estimators": 10,
            "subsample": 0.7,
            "subsample_freq": 1,
        },
    ),
]


def lightgbm_thresholds(path: Path) -> dict[int, np.ndarray]:
    """The library's own split thresholds per feature, from the saved text model."""
    thr: dict[int, list[float]] = {}
    for block in path.read_text().split("Tree=")[1:]:
        f = re.search(r"^split_feature=(.*)$", block, re.M)
        t = re.search(r"^threshold=(.*)$", block, re.M)
        if f and t:
            for j, v in zip(f.group(1).split(), t.group(1).split(), strict=True):
                thr.setdefault(int(j), []).append(float(v))
    return {j: np.array(v) for j, v in thr.items()}


def _check_lgb(tmp_path: Path, data: str, params: dict, n: int) -> None:
    X, y = _data(data)
    clf = lgb.LGBMClassifier(random_state=0, verbose=-1, num_leaves=15, **params).fit(X, y)
    path = tmp_path / "m.txt"
    clf.booster_.save_model(path)
    model = import_model("lightgbm", path)
    assert isinstance(model, Ensemble)
    R = boundary_rows(model, X, n, 3, lightgbm_thresholds(path))
    b = EnsembleEvaluator(model).evaluate(R)
    raw = clf.booster_.predict(R, raw_score=True).reshape(len(R), -1)
    assert np.array_equal(b.scores, raw)  # bit for bit, float64
    _agree(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R), 1e-12)


@pytest.mark.parametrize(("data", "params"), LGB)
def test_lightgbm_ensembles_decide_as_predict(tmp_path, data, params):
    _check_lgb(tmp_path, data, params, 3000)


def _synthetic_categorical() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    n = 1500
    cat = rng.integers(0, 12, n).astype(float)
    z = np.where(rng.random(n) < 0.3, 0.0, rng.normal(size=n))
    X = np.column_stack([cat, z, rng.normal(size=n) * 100])
    y = ((np.isin(cat, [1, 4, 7, 9]) ^ (z > 0.2)) | (X[:, 2] > 60)).astype(int)
    return X, y


@pytest.mark.parametrize(
    "case",
    ["binary_categorical_zero_as_missing", "multiclass", "random_forest", "one_leaf"],
)
def test_lightgbm_dump_model_json_imports_as_the_text_model(tmp_path, case):
    """``json.dump(booster.dump_model(), f)`` holds the same trees as ``save_model``'s text:
    the import of either decides alike, node for node, and as predict does."""
    fit: dict = {}
    if case == "binary_categorical_zero_as_missing":
        X, y = _synthetic_categorical()
        params: dict = {"n_estimators": 8, "zero_as_missing": True}
        fit = {"categorical_feature": [0]}
    elif case == "multiclass":
        (X, y), params = _data("wine"), {"n_estimators": 5}
    elif case == "random_forest":
        X, y = _data("breast_cancer")
        params = {"boosting_type": "rf", "n_estimators": 5, "subsample": 0.7, "subsample_freq": 1}
    else:
        X, y = _data("breast_cancer")
        params = {"n_estimators": 2, "min_child_samples": 10_000}  # no split: one leaf
    clf = lgb.LGBMClassifier(random_state=0, verbose=-1, num_leaves=15, **params)
    clf.fit(X, y, **fit)
    clf.booster_.save_model(tmp_path / "m.txt")
    (tmp_path / "m.json").write_text(json.dumps(clf.booster_.dump_model()))
    text = import_model("lightgbm", tmp_path / "m.txt")
    dump = import_model("lightgbm", tmp_path / "m.json")
    assert np.array_equal(text.nodes, dump.nodes)
    assert text.features == dump.features and text.actions == dump.actions
    if isinstance(text, Ensemble):
        assert isinstance(dump, Ensemble) and text.combine == dump.combine
        assert np.array_equal(np.asarray(text.values), np.asarray(dump.values))
        R = boundary_rows(dump, X, 2000, 3, lightgbm_thresholds(tmp_path / "m.txt"))
        _agree(dump, R, clf.classes_, clf.predict(R), clf.predict_proba(R), 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(("data", "params"), LGB)
def test_lightgbm_ensembles_decide_as_predict_100k(tmp_path, data, params):
    _check_lgb(tmp_path, data, params, 100_000)


@pytest.mark.parametrize("rounds", [1, 3])
def test_xgboost_base_score_is_clamped_as_xgboost_clamps_it(tmp_path: Path, rounds: int) -> None:
    """XGBoost computes the base margin of a logistic model from its base_score clamped into
    [1e-6f, 1 - 1e-6f] (float32), 0 and 1 included: a base_score of 1e-30 starts the sums
    at -13.8, not -69.1.  The import computed the unclamped logit (or refused 0 and 1), so
    its margins, probabilities and, for large enough leaf values, classes were not the
    library's.  One tree (a v1 single tree) and several (an ensemble) alike."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    clf = xgb.XGBClassifier(n_estimators=rounds, max_depth=2).fit(X, y)
    doc = json.loads(clf.get_booster().save_raw("json"))
    for tree in doc["learner"]["gradient_booster"]["model"]["trees"]:
        for i, left in enumerate(tree["left_children"]):
            if left == -1:  # leaves that move the margin by +-40 in all: classes flip
                value = 40.0 / rounds if tree["split_indices"][0] == 0 else -40.0 / rounds
                tree["split_conditions"][i] = tree["base_weights"][i] = value
    rows = np.vstack([rng.normal(size=(200, 2)), [[3.0, 0.0], [-3.0, 0.0]]])
    for base in ("0", "1E-30", "1E-7", "9.9999994E-1", "1"):
        doc["learner"]["learner_model_param"]["base_score"] = f"[{base}]"
        path = tmp_path / f"m{rounds}.json"
        path.write_text(json.dumps(doc))
        booster = xgb.Booster(model_file=str(path))
        proba = booster.predict(xgb.DMatrix(rows))
        model = import_model("xgboost", path)
        if isinstance(model, Ensemble):
            got = EnsembleEvaluator(model).evaluate(rows)
            margins = booster.predict(xgb.DMatrix(rows), output_margin=True)
            assert np.array_equal(got.scores[:, 0].astype(np.float32), margins), base
        else:
            from clefprove.eval.evaluator import Evaluator

            got = Evaluator(model).evaluate(rows)
        want = (proba > 0.5).astype(int)
        assert got.actions.tolist() == want.tolist(), base
        conf = np.where(want == 1, proba, 1 - proba)
        assert np.abs(got.confidences - conf).max() < 1e-6, base
