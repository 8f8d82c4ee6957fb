"""SPEC §5: an ensemble's confidence is the probability exactly as the library computes it.

The probabilities go through ``exp``; the libraries call the C library's (LightGBM's
``std::exp``, scipy's ``expit``, scikit-learn's Cython loss), so the evaluator must return the
C library's float64 ``exp`` bit for bit: numpy's own float64 ``exp`` differs from it in the
last bit for a few percent of arguments.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.ensemble import GradientBoostingClassifier

from clefprove.eval.ensemble import EnsembleEvaluator, _exp
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import import_model
from clefprove.model.sklearn import from_sklearn


def _c_exp(v: float) -> float:
    try:
        return math.exp(v)  # the C library's exp
    except OverflowError:
        return math.inf


def test_float64_exp_is_the_c_librarys():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-5, 5, 100_000),
            rng.uniform(-745, 709, 20_000),
            np.array([0.0, -0.0, 1e-300, -1e-17, 709.78, 709.79, -745.2, -746.0, 1e-16]),
        ]
    )
    got = _exp(x)
    want = np.array([_c_exp(v) for v in x.tolist()])
    assert np.array_equal(got, want)
    assert np.isnan(_exp(np.array([np.nan]))[0])
    assert _exp(np.array([1000.0]))[0] == math.inf and _exp(np.array([-1000.0]))[0] == 0.0


def _rows(X: np.ndarray, n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    lo, hi = X.min(axis=0), X.max(axis=0)
    return np.vstack([rng.uniform(lo, hi, size=(n, X.shape[1])), X])


def _features(X: np.ndarray) -> list[dict]:
    return [
        {"name": f"f{i}", "type": "float", "min": float(np.floor(X[:, i].min())),
         "max": float(np.ceil(X[:, i].max())), "default": float(np.floor(X[:, i].min()))}
        for i in range(X.shape[1])
    ]  # fmt: skip


def _assert_exact(model: Ensemble, R, classes, pred, proba) -> None:
    b = EnsembleEvaluator(model).evaluate(R)
    assert np.array_equal(classes[b.actions], pred)
    want = proba[np.arange(len(R)), b.actions].astype(np.float64)
    off = np.flatnonzero(want != b.confidences)
    assert off.size == 0, f"{off.size} of {len(R)} confidences differ, first {R[off[0]]}"


def test_sklearn_gradient_boosting_binary_probabilities_bit_for_bit():
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :5]
    clf = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0).fit(X, y)
    model = from_sklearn(clf, _features(X), actions=["malignant", "benign"])
    assert isinstance(model, Ensemble)
    R = _rows(X, 5000)
    _assert_exact(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R))


lgb = pytest.importorskip("lightgbm")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("data", "objective"),
    [("iris", "multiclass"), ("breast_cancer", "binary"), ("wine", "multiclass")],
)
def test_lightgbm_probabilities_bit_for_bit(tmp_path: Path, data: str, objective: str):
    X, y = {"iris": load_iris, "breast_cancer": load_breast_cancer, "wine": load_wine}[data](
        return_X_y=True
    )
    X = X[:, :5]
    clf = lgb.LGBMClassifier(
        objective=objective, n_estimators=10, num_leaves=5, random_state=0, verbose=-1
    ).fit(X, y)
    path = tmp_path / "m.txt"
    clf.booster_.save_model(path)
    model = import_model("lightgbm", path)
    assert isinstance(model, Ensemble)
    R = _rows(X, 5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "X does not have valid feature names"
        pred, proba = clf.predict(R), clf.predict_proba(R)
    _assert_exact(model, R, clf.classes_, pred, proba)


xgb = pytest.importorskip("xgboost")


@pytest.mark.slow
def test_xgboost_multiclass_probabilities_bit_for_bit(tmp_path: Path):
    X, y = load_iris(return_X_y=True)
    clf = xgb.XGBClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    path = tmp_path / "m.json"
    clf.get_booster().save_model(path)
    model = import_model("xgboost", path)
    assert isinstance(model, Ensemble)
    R = _rows(X, 5000).astype(np.float32).astype(np.float64)
    _assert_exact(model, R, clf.classes_, clf.predict(R), clf.predict_proba(R))
