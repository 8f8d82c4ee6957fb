"""XGBoost, LightGBM and ONNX ensembles straight to node records (``common._direct_ensemble``)
give byte for byte the model of the JSON source route (``to_json`` + ``compile_source``), and
anything that route refuses is still refused with its words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clefprove.errors import ImportModelError
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import common, import_model
from clefprove.model.importers import xgboost as xgboost_importer
from clefprove.model.importers.common import Split, ValueLeaf
from tests.helpers import LIGHTGBM_MODES, categorical_xgboost

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _json_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise common._NotDirect

    monkeypatch.setattr(common, "_direct_ensemble", refuse)


def _both(monkeypatch: pytest.MonkeyPatch, fmt: str, path: Path, spec: Path | None = None):
    calls = []
    direct = common._direct_ensemble

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = direct(*args, **kwargs)
        calls.append(1)
        return out

    with monkeypatch.context() as m:
        # the per-node route (the vectorised one: tests/model/test_import_arrays.py)
        m.setattr(xgboost_importer, "direct_numeric_ensemble", lambda *a, **k: None)
        m.setattr(common, "_direct_ensemble", counting)
        got = import_model(fmt, path, spec)
    assert calls, "the direct route was not taken"
    with monkeypatch.context() as m:
        _json_only(m)
        want = import_model(fmt, path, spec)
    assert isinstance(got, Ensemble)
    assert got.sha256 == want.sha256
    return got


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 2] = rng.integers(0, 10, n)
    X[rng.random(n) < 0.1, 1] = 0.0
    y = ((X[:, 0] + 0.5 * X[:, 1] > 0.2) ^ (X[:, 2] > 6)).astype(int)
    return X, y


def _spec(tmp_path: Path, X: np.ndarray, actions: list[str], int_col: int | None = None) -> Path:
    feats = []
    for j in range(X.shape[1]):
        lo, hi = float(X[:, j].min()), float(X[:, j].max())
        kind = "int" if j == int_col else "float"
        feats.append({"name": f"f{j}", "type": kind, "min": lo, "max": hi, "default": lo})
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"features": feats, "actions": actions}))
    return path


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_classes: int, fmt: str):
    X, y = _data(600, 1)
    if n_classes == 3:
        y = y + (X[:, 3] > 0.7)
    clf = xgb.XGBClassifier(n_estimators=12, max_depth=4, random_state=0).fit(X, y)
    clf.get_booster().save_model(tmp_path / f"m.{fmt}")
    actions = [f"class_{c}" for c in range(n_classes)]
    _both(monkeypatch, "xgboost", tmp_path / f"m.{fmt}")
    # a spec with a narrow domain (pruned splits) and an int feature (whole thresholds)
    _both(monkeypatch, "xgboost", tmp_path / f"m.{fmt}", _spec(tmp_path, X[:300], actions, 2))


def test_xgboost_categorical_and_forest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    categorical_xgboost(tmp_path / "c.json", 6)
    model = _both(monkeypatch, "xgboost", tmp_path / "c.json")
    assert model.features[0].type.value == "categorical"
    forest = {"num_parallel_tree": 4, "subsample": 0.8, "colsample_bynode": 0.8}
    categorical_xgboost(tmp_path / "f.json", 2, **forest)
    _both(monkeypatch, "xgboost", tmp_path / "f.json")


@pytest.mark.parametrize("params", LIGHTGBM_MODES)
def test_lightgbm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]):
    X, y = _data(800, 2)
    if params.get("num_class") == 3:
        y = y + (X[:, 3] > 0.7)
    base = {"verbose": -1, "num_leaves": 15, "min_data_in_leaf": 5}
    ds = lgb.Dataset(X, y, categorical_feature=[2], feature_name=["a", "b", "c", "d"])
    lgb.train({**base, **params}, ds, num_boost_round=8).save_model(tmp_path / "m.txt")
    model = _both(monkeypatch, "lightgbm", tmp_path / "m.txt")
    assert model.features[2].type.value == "categorical"


def test_onnx_forest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data(500, 3)
    clf = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y)
    onx = to_onnx(clf, X[:1].astype(np.float32), options={"zipmap": False})
    (tmp_path / "m.onnx").write_bytes(onx.SerializeToString())
    try:
        _both(monkeypatch, "onnx", tmp_path / "m.onnx")
    except AssertionError as exc:
        if "not taken" not in str(exc):
            raise
        pytest.skip("this ONNX forest converts to a single tree")


def _trees() -> list[Any]:
    leaf = ValueLeaf((0.25,))
    return [Split(0, 0.5, leaf, ValueLeaf((-0.5,)))]


def _build(trees: list[Any], features: list[dict[str, Any]]):
    from clefprove.model.features import parse_features

    combine = {"arithmetic": "float64", "link": "logistic", "rule": "half", "base": [0.0]}
    return common.build_ensemble(
        trees, features, parse_features(features), ["n", "y"], combine, None, "m", {"format": "t"}
    )


FEATS = [{"name": "x", "type": "float", "min": 0.0, "max": 1.0, "default": 0.0}]


@pytest.mark.parametrize(
    "trees",
    [
        [Split(0, 0.5, ValueLeaf((float("inf"),)), ValueLeaf((0.0,)))],
        [Split(0, 0.5, ValueLeaf((0.0, 1.0)), ValueLeaf((0.0,)))],
        [Split(0, 0.5, ValueLeaf((np.float32(0.5),)), ValueLeaf((0.0,)))],
        [Split(0, 0.5, common.Leaf(0, 1.0), ValueLeaf((0.0,)))],
        [],
    ],
)
def test_refusals_are_the_json_routes(monkeypatch: pytest.MonkeyPatch, trees: list[Any]):
    with pytest.raises(ImportModelError) as direct:
        _build(trees, FEATS)
    _json_only(monkeypatch)
    with pytest.raises(ImportModelError) as via_json:
        _build(trees, FEATS)
    assert str(direct.value) == str(via_json.value)


def test_small_ensemble_both_routes(monkeypatch: pytest.MonkeyPatch):
    got = _build(_trees(), FEATS)
    _json_only(monkeypatch)
    assert _build(_trees(), FEATS).sha256 == got.sha256
