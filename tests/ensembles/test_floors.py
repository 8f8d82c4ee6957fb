"""Decision floors (verify/ensemble.decision_floors): the least confidence a one-output
ensemble's rule allows for each class, used to prove ``ensure confidence >= 0.5`` on binary
models without splitting the input domain down to the decision boundary.

The claim is checked on the evaluator (bit-exact with the libraries) at every score around the
decision boundary, and end to end on models trained with XGBoost, LightGBM and scikit-learn:
the invariant holds at once, and the libraries' own probabilities agree on boundary rows."""

from __future__ import annotations

import numpy as np
import pytest

from clefprove.eval.ensemble import decide_proba
from clefprove.model.ensemble import Arithmetic
from clefprove.model.source import ensemble_combine
from clefprove.verify.ensemble import decision_floors

#: (link, rule, scale) of one-output ensembles, and whether a floor above 0 is claimed.
COMBOS = [
    ("logistic", "half", 1.0, True),
    ("logistic", "half", 0.5, True),
    ("logistic", "proba", 1.0, True),
    ("logistic", "proba", 2.0, True),
    ("logistic", "margin", 1.0, True),
    ("logistic", "margin", 0.5, True),
    ("complement", "proba", 1.0, True),
    ("complement", "positive", 1.0, False),
    ("complement", "score_half", 1.0, False),
    ("onnx_logistic", "proba", 1.0, False),
    ("onnx_logistic", "positive", 1.0, False),
]


def _scores(dt: type) -> np.ndarray:
    """Scores around every place a one-output decision can flip: each power of two from 2**-80
    to 2**10 (quarter steps) with its three float neighbours on each side, both signs, zeros,
    the extremes, and the [0, 1] range that the complement link reads as a probability."""
    mags = (2.0 ** -np.arange(-10.0, 80.0, 0.25)).astype(dt)
    near = [mags]
    up, down = mags.copy(), mags.copy()
    for _ in range(3):
        up = np.nextafter(up, dt(np.inf))
        down = np.nextafter(down, dt(0))
        near += [up, down]
    half = [dt(0.5)]
    for _ in range(64):
        half.append(np.nextafter(half[-1], dt(1)))
        half.insert(0, np.nextafter(half[0], dt(0)))
    big = np.finfo(dt).max
    s = np.concatenate([*near, np.array(half, dtype=dt), np.array([0.0, big, 1.0], dtype=dt)])
    rng = np.random.default_rng(0)
    s = np.concatenate([s, -s, rng.normal(0, 3, 20_000).astype(dt), rng.random(20_000).astype(dt)])
    return s[:, None]


@pytest.mark.parametrize("arithmetic", ["float32", "float64"])
@pytest.mark.parametrize(("link", "rule", "scale", "claimed"), COMBOS)
def test_every_decided_confidence_is_at_least_its_floor(
    arithmetic: str, link: str, rule: str, scale: float, claimed: bool
) -> None:
    spec: dict[str, object] = {"link": link, "rule": rule, "arithmetic": arithmetic}
    if scale != 1.0:
        spec["scale"] = scale
    combine = ensemble_combine(spec, 2)
    floors = np.array(decision_floors(combine))
    assert (floors.min() > 0) == claimed
    scores = _scores(Arithmetic(arithmetic).dtype)
    actions, conf, _ = decide_proba(combine, scores)
    assert set(actions.tolist()) == {0, 1}
    low = conf < floors[actions]
    assert not low.any(), (scores[low][:5].ravel(), actions[low][:5], conf[low][:5])
    if claimed:  # the floor is reached: no sharper one could be claimed at 0.5
        assert conf.min() <= 0.5 + 2.0**-20


def _breast_cancer() -> tuple[np.ndarray, np.ndarray, list[dict]]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    lo, hi = X.min(axis=0), X.max(axis=0)
    features = [
        {"name": f"f{i}", "type": "float", "min": float(a), "max": float(b), "default": float(a)}
        for i, (a, b) in enumerate(zip(lo, hi, strict=True))
    ]
    return X, y, features


INVARIANTS = """severity class_0 < class_1
invariant half:
  ensure confidence >= 0.5
invariant half_for_class_0:
  when action == class_0
  ensure confidence >= 0.5
invariant more_than_half:
  when action == class_1
  ensure confidence >= 0.75
"""


def _check(model) -> dict[str, str]:
    from clefprove.dsl.loader import parse_text
    from clefprove.verify.api import check
    from clefprove.verify.options import CheckOptions

    prog = parse_text(INVARIANTS, model, "floors.inv")
    report = check(model, prog, options=CheckOptions(timeout=60))
    return {r.invariant: r.status for r in report.results}


@pytest.mark.slow
@pytest.mark.parametrize("library", ["xgboost", "lightgbm", "sklearn"])
def test_binary_models_hold_confidence_at_least_half(library: str, tmp_path) -> None:
    """Trained binary models: ``confidence >= 0.5`` holds (decided by the floors, without a
    search down to the boundary), a higher threshold is still found violated, and the library's
    own probability of its predicted class is at least 0.5 on rows near every cut."""
    import json

    import clefprove
    from clefprove.model.importers import import_model

    X, y, features = _breast_cancer()
    spec = tmp_path / "features.json"
    spec.write_text(json.dumps({"features": features, "actions": ["class_0", "class_1"]}))
    if library == "xgboost":
        xgb = pytest.importorskip("xgboost")
        clf = xgb.XGBClassifier(n_estimators=20, max_depth=3).fit(X, y)
        path = tmp_path / "m.json"
        clf.save_model(path)
        model = import_model("xgboost", path, spec)
    elif library == "lightgbm":
        lgb = pytest.importorskip("lightgbm")
        clf = lgb.LGBMClassifier(n_estimators=20, verbose=-1).fit(X, y)
        path = tmp_path / "m.txt"
        clf.booster_.save_model(str(path))
        model = import_model("lightgbm", path, spec)
    else:
        from sklearn.ensemble import GradientBoostingClassifier

        clf = GradientBoostingClassifier(n_estimators=20, max_depth=2).fit(X, y)
        model = clefprove.from_sklearn(clf, features, ["class_0", "class_1"])
    statuses = _check(model)
    assert statuses == {"half": "holds", "half_for_class_0": "holds", "more_than_half": "violated"}
    from tests.ensembles.test_importers import boundary_rows

    R = np.clip(boundary_rows(model, X, 4000, seed=1), X.min(axis=0), X.max(axis=0))
    proba = clf.predict_proba(R)
    pred = clf.predict(R)
    assert np.all(proba[np.arange(len(R)), pred] >= 0.5)
