"""A model assembled in process (``source.assemble_tree`` / ``assemble_ensemble``: the JSON
source, ``from_sklearn``, the direct importers) is loaded by ``clef.load_encoded``, which takes
the features and actions it encoded instead of parsing the metadata's again: the model equals,
field for field, the one ``load_bytes`` gives of the same bytes (the full validation)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clefprove.model.clef import load_bytes, write_clef
from clefprove.model.ensemble import Ensemble
from clefprove.model.source import compile_source

ROOT = Path(__file__).resolve().parents[2]


def _same_as_loaded(model: Any) -> None:
    again = load_bytes(write_clef(model))
    assert type(again) is type(model)
    for f in dataclasses.fields(model):
        if f.name in ("from_source", "derived"):
            continue
        got, want = getattr(model, f.name), getattr(again, f.name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), f.name
            assert got.flags.writeable == want.flags.writeable, f.name
        else:
            assert got == want, f.name
            assert repr(got) == repr(want), f.name  # the same types (1.0 is not 1)


@pytest.mark.parametrize("name", ["spec-toy.json", "edge-allow-block.json"])
def test_single_trees_from_source(name: str) -> None:
    _same_as_loaded(compile_source(json.loads((ROOT / "examples" / name).read_text())))


FEATS = [
    {"name": "x", "type": "float", "min": -1.5, "max": 2.0, "default": 0.0},
    {"name": "n", "type": "int", "min": -3, "max": 9, "default": 2},
    {"name": "b", "type": "bool", "default": True},
    {"name": "c", "type": "categorical", "values": ["p", "q", "r"], "default": "q"},
]


def test_ensemble_from_source() -> None:
    leaf = {"value": [0.5]}
    source = {
        "features": FEATS,
        "actions": ["no", "yes"],
        "ensemble": {"arithmetic": "float64", "link": "logistic", "rule": "half", "base": [0.1]},
        "trees": [
            {"feature": "x", "threshold": 0.25, "left": leaf, "right": {"value": [-1.0]}},
            {"feature": "c", "in": ["p"], "left": {"value": [2.0]}, "right": leaf},
            {"feature": "n", "threshold": 4, "left": leaf, "right": {"value": [3.0]}},
        ],
        "metadata": {"k": [1, 2.5]},
    }
    model = compile_source(source)
    assert isinstance(model, Ensemble)
    _same_as_loaded(model)


def test_sklearn_forest_and_direct_imports(tmp_path: Path) -> None:
    sklearn = pytest.importorskip("sklearn.ensemble")
    import clefprove

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    feats = [
        {"name": f"f{j}", "type": "float", "min": -5.0, "max": 5.0, "default": 0.0}
        for j in range(3)
    ]
    forest = sklearn.RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
    _same_as_loaded(clefprove.from_sklearn(forest.fit(X, y), feats, actions=["no", "yes"]))
    xgb = pytest.importorskip("xgboost")
    from clefprove.model.importers import import_model

    path = tmp_path / "m.json"
    xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y).get_booster().save_model(path)
    _same_as_loaded(import_model("xgboost", path, None))
