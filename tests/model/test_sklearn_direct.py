"""The vectorised scikit-learn conversion gives byte for byte the model that the JSON source
route gives (built here independently, one node at a time, with the scalar threshold rule)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("sklearn.ensemble")

from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

from clefprove.model.features import parse_features
from clefprove.model.sklearn import (
    float32_threshold,
    float32_thresholds,
    from_sklearn,
    whole_threshold,
    whole_thresholds,
)
from clefprove.model.source import compile_source
from clefprove.model.types import FeatureType

F32_MAX = float(np.finfo(np.float32).max)
EDGES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    771.5,
    1e-45,
    -1e-45,
    2.0**-150,
    1e-38,
    F32_MAX,
    -F32_MAX,
    math.nextafter(F32_MAX, 0.0),
    math.nextafter(F32_MAX, math.inf),
    -math.nextafter(F32_MAX, math.inf),
    1e300,
    -1e300,
    math.inf,
    -math.inf,
    2.0**52,
    -(2.0**52) - 0.5,
    4503599627370495.5,
]
#: Lists of thresholds: any float, float32 values, and the edges above.
THRESHOLD_LISTS = st.lists(
    st.floats(allow_nan=False) | st.floats(-1e6, 1e6, width=32).map(float) | st.sampled_from(EDGES),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(THRESHOLD_LISTS)
def test_vectorised_thresholds_equal_the_scalar_rule(ts: list[float]) -> None:
    got = float32_thresholds(np.array(ts))
    want = [float32_threshold(t) for t in ts]
    assert [float(g).hex() for g in got] == [w.hex() for w in want]
    whole = whole_thresholds(got)
    assert [float(g).hex() for g in whole] == [whole_threshold(w).hex() for w in want]


def test_vectorised_thresholds_refuse_nan() -> None:
    with pytest.raises(ValueError):
        float32_thresholds(np.array([0.0, math.nan]))


# --------------------------------------------------------------- the JSON-source reference

FEATURES: list[dict[str, Any]] = [
    {"name": "rtt", "type": "float", "min": 0.0, "max": 10000.0, "default": 50.0},
    {"name": "tls", "type": "int", "min": 768, "max": 772, "default": 772},
    {"name": "ua", "type": "categorical", "values": ["a", "b", "c", "d"], "default": "a"},
    {"name": "tor", "type": "bool", "default": False},
    {"name": "ent", "type": "float", "min": -5.0, "max": 5.0, "default": 0.0},
]


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.uniform(0, 10000, n),
            rng.integers(768, 773, n),
            rng.integers(0, 4, n),
            rng.integers(0, 2, n),
            rng.normal(0, 2, n).clip(-5, 5),
        ]
    )
    y = (X[:, 0] > 3000).astype(int) + (X[:, 2] == 3) + (X[:, 3] * (X[:, 4] > 0))
    y = np.where(rng.random(n) < 0.1, rng.integers(0, 3, n), y).clip(0, 2)
    return X, y


def _reference_tree(tree: Any, leaf: Any) -> dict[str, Any]:
    feats = parse_features(FEATURES)

    def node(i: int) -> dict[str, Any]:
        while tree.children_left[i] != -1:
            f = feats[int(tree.feature[i])]
            t = float32_threshold(float(tree.threshold[i]))
            if f.type is FeatureType.CATEGORICAL:
                members = [v for code, v in enumerate(f.values) if code <= t]
                if len(members) == len(f.values):
                    i = int(tree.children_left[i])
                    continue
                if not members:
                    i = int(tree.children_right[i])
                    continue
                split: dict[str, Any] = {"feature": f.name, "in": members}
            elif f.type is FeatureType.FLOAT:
                split = {"feature": f.name, "threshold": t}
            else:
                split = {"feature": f.name, "threshold": whole_threshold(t)}
            split["left"] = node(int(tree.children_left[i]))
            split["right"] = node(int(tree.children_right[i]))
            return split
        return dict(leaf(i))

    return node(0)


ACTIONS = ["allow", "challenge", "block"]


@pytest.mark.parametrize("kind", [DecisionTreeClassifier, ExtraTreeClassifier])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_single_trees_match_the_json_route(kind: Any, seed: int) -> None:
    X, y = _data(3000, seed)
    clf = kind(random_state=seed, max_leaf_nodes=None if seed != 3 else 40).fit(X, y)
    value = clf.tree_.value[:, 0, :].astype(np.float64)

    def majority(i: int) -> dict[str, Any]:
        v = value[i]
        k = int(np.argmax(v))
        return {"action": ACTIONS[k], "confidence": float(v[k] / float(v.sum()))}

    source = {
        "name": "t",
        "version": "1.0.0",
        "features": FEATURES,
        "actions": ACTIONS,
        "tree": _reference_tree(clf.tree_, majority),
    }
    want = compile_source(source)
    got = from_sklearn(clf, FEATURES, actions=ACTIONS, name="t", version="1.0.0")
    assert got.sha256 == want.sha256


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=7, max_depth=6, random_state=0),
        lambda: ExtraTreesClassifier(n_estimators=5, random_state=1, max_depth=9),
        lambda: GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0),
    ],
)
@pytest.mark.parametrize("binary", [False, True])
def test_ensembles_match_the_json_route(make: Any, binary: bool) -> None:
    X, y = _data(2000, 7)
    if binary:
        y = (y > 0).astype(int)
    clf = make().fit(X, y)
    actions = ACTIONS[: len(clf.classes_)]
    trees = []
    if isinstance(clf, GradientBoostingClassifier):
        K = clf.estimators_.shape[1]
        for stage in clf.estimators_:
            for k, est in enumerate(stage):
                v = est.tree_.value[:, 0, 0]

                def scaled(i: int, v: np.ndarray = v, k: int = k) -> dict[str, Any]:
                    out = [0.0] * K
                    out[k] = float(float(clf.learning_rate) * v[i])
                    return {"value": out}

                trees.append(_reference_tree(est.tree_, scaled))
        base = np.asarray(clf._raw_predict_init(np.zeros((1, 5), np.float32)))[0]
        ensemble: dict[str, Any] = {
            "arithmetic": "float64",
            "link": "logistic" if K == 1 else "softmax",
            "rule": "margin",
            "base": [float(b) for b in base],
        }
    else:
        for est in clf.estimators_:
            v = est.tree_.value[:, 0, :]
            trees.append(
                _reference_tree(est.tree_, lambda i, v=v: {"value": [float(a) for a in v[i]]})
            )
        ensemble = {
            "arithmetic": "float64",
            "link": "identity",
            "rule": "proba",
            "divisor": len(clf.estimators_),
        }
    source = {
        "name": "e",
        "version": "2.0.0",
        "features": FEATURES,
        "actions": actions,
        "ensemble": ensemble,
        "trees": trees,
        "metadata": {"imported_from": {"format": "sklearn", "estimator": type(clf).__name__}},
    }
    want = compile_source(source)
    got = from_sklearn(clf, FEATURES, actions=actions, name="e", version="2.0.0")
    assert got.sha256 == want.sha256


@settings(max_examples=300, deadline=None)
@given(THRESHOLD_LISTS)
def test_vectorised_float32_lt_cuts_equal_the_scalar_condition(ts: list[float]) -> None:
    """The XGBoost importer's vectorised cuts (``common.f32_lt_cuts`` of float32(t)) are the
    scalar ``float32_condition("BRANCH_LT", t)``'s, bit for bit."""
    from clefprove.model.importers.common import INF, f32_lt_cuts, float32_condition

    with np.errstate(over="ignore"):
        t32 = np.array(ts, dtype=np.float64).astype(np.float32)
    got = f32_lt_cuts(t32)
    for t, g in zip(ts, got, strict=True):
        want = float32_condition("BRANCH_LT", t)
        assert want.lo == -INF and not want.negate
        assert float(g).hex() == want.hi.hex()
