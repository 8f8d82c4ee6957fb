"""``clefprove.save``: what ``from_sklearn`` (or any route) returns written as a `.clef` file
that loads back to the same model, and that the commands read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import clefprove
from clefprove.errors import ClefproveError
from clefprove.model.clef import write_clef
from tests.helpers import run_cli

pytest.importorskip("sklearn.ensemble")

from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

FEATURES = [
    {"name": "rtt", "type": "float", "min": 0.0, "max": 100.0, "default": 0.0},
    {"name": "depth", "type": "int", "min": 0, "max": 9, "default": 0},
]


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = np.column_stack([rng.uniform(0, 100, 300), rng.integers(0, 10, 300)])
    y = (X[:, 0] > 40 + 4 * X[:, 1]).astype(int)
    return X, y


@pytest.mark.parametrize("estimator", ["tree", "forest"])
def test_saved_model_loads_back_the_same(tmp_path: Path, estimator: str) -> None:
    X, y = _data()
    clf = (
        DecisionTreeClassifier(max_depth=4, random_state=0)
        if estimator == "tree"
        else RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
    ).fit(X, y)
    model = clefprove.from_sklearn(clf, FEATURES, actions=["allow", "block"])
    path = tmp_path / "m.clef"
    clefprove.save(model, path)
    assert path.read_bytes() == write_clef(model)
    back = clefprove.load(path)
    assert back.sha256 == model.sha256
    assert type(back) is type(model)
    if estimator == "forest":
        from clefprove.eval.ensemble import EnsembleEvaluator

        a, b = EnsembleEvaluator(model).evaluate(X), EnsembleEvaluator(back).evaluate(X)
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.confidences, b.confidences)
        assert np.array_equal(a.actions, clf.predict(X))
    else:
        a, b = clefprove.Evaluator(model).evaluate(X), clefprove.Evaluator(back).evaluate(X)
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.leaves, b.leaves)


def test_saved_model_is_checked_by_the_command(tmp_path: Path) -> None:
    X, y = _data()
    clf = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    path = tmp_path / "forest.clef"
    clefprove.save(clefprove.from_sklearn(clf, FEATURES, actions=["allow", "block"]), path)
    inv = tmp_path / "fast.inv"
    inv.write_text(
        "invariant slow_blocked:\n  when rtt >= 99.5 and depth == 0\n  ensure action == block\n"
    )
    got = run_cli("check", path, inv, "--format", "json", "--no-cache", cwd=tmp_path)
    assert got.returncode in (0, 1), got.stderr
    report = json.loads(got.stdout)
    assert report["model"]["sha256"] == clefprove.load(path).sha256
    assert report["results"][0]["status"] in ("holds", "violated")


def test_a_directory_is_not_overwritten(tmp_path: Path) -> None:
    X, y = _data()
    model = clefprove.from_sklearn(
        DecisionTreeClassifier(max_depth=2).fit(X, y), FEATURES, ["allow", "block"]
    )
    with pytest.raises(ClefproveError, match="is a directory"):
        clefprove.save(model, tmp_path)
    assert list(tmp_path.iterdir()) == []
