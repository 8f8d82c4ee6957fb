"""XGBoost ensembles through the vectorised route (``xgboost._flat_trees`` and
``common.direct_numeric_ensemble``) give byte for byte the model of the per-node route
(``_tree_arrays``, ``walk``, ``_direct_ensemble``), and whatever the vectorised route steps
aside for is read, or refused with the same words, by the per-node route.

Differential: trained models (binary, multi-class, forests, narrow domains that prune splits,
JSON and UBJSON), then random crafted trees (random shapes and node numbering, thresholds at
and beyond the domain ends, NaN, infinities, float32 overflow, repeated thresholds on a path
so that splits are decided) and malformed ones (shared nodes, cycles, indices out of range)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clefprove.errors import ImportModelError
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import common, import_model
from clefprove.model.importers import xgboost as xgboost_importer
from tests.helpers import LIGHTGBM_MODES


def _routes(
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    spec: Path | None,
    library: str = "xgboost",
) -> tuple[Any, Any, int]:
    """(the model or error of the default route, of the per-node route, how many times the
    vectorised route produced the model) for an XGBoost or LightGBM file."""
    from clefprove.model.importers import lightgbm as lightgbm_importer

    importer = {"xgboost": xgboost_importer, "lightgbm": lightgbm_importer}[library]
    # The seam that turns the vectorised route off: no flat arrays, so node by node.
    seam = {"xgboost": "_flat_trees", "lightgbm": "_numeric_trees"}[library]
    produced = []
    fast = common.direct_numeric_ensemble

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = fast(*args, **kwargs)
        produced.append(out is not None)
        return out

    def run() -> Any:
        try:
            return import_model(library, path, spec)
        except ImportModelError as exc:
            return str(exc)

    with monkeypatch.context() as m:
        m.setattr(importer, "direct_numeric_ensemble", counting)
        got = run()
    with monkeypatch.context() as m:
        m.setattr(importer, seam, lambda *a, **k: None)
        want = run()
    return got, want, sum(produced)


def _same(got: Any, want: Any) -> None:
    if isinstance(want, str):
        assert got == want
        return
    assert type(got) is type(want)  # (a single binary tree is imported as a Model)
    assert got.sha256 == want.sha256


def _spec(
    tmp_path: Path, lo: list[float], hi: list[float], actions: list[str], prefix: str = "f"
) -> Path:
    """A feature spec of float columns ``{prefix}{j}`` over [lo_j, hi_j]."""
    feats = [
        {"name": f"{prefix}{j}", "type": "float", "min": a, "max": b, "default": a}
        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
    ]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"features": feats, "actions": actions}))
    return path


# --------------------------------------------------------------------------- trained models


@pytest.mark.parametrize(
    ("n_classes", "params"),
    [
        (2, {"max_depth": 4}),
        (2, {"max_depth": 6, "num_parallel_tree": 3, "subsample": 0.7}),
        (3, {"max_depth": 3}),
        (3, {"max_depth": 3, "objective": "multi:softmax"}),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_trained(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    n_classes: int,
    params: dict[str, Any],
    fmt: str,
) -> None:
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 5))
    X[:, 4] = rng.integers(0, 6, 300)
    y = (X[:, 0] + X[:, 1] ** 2 > 0.8).astype(int)
    if n_classes == 3:
        y = y + (X[:, 2] > 0.5)
    clf = xgb.XGBClassifier(n_estimators=8, random_state=0, n_jobs=1, **params).fit(X, y)
    path = tmp_path / f"m.{fmt}"
    clf.get_booster().save_model(path)
    actions = [f"class_{c}" for c in range(n_classes)]
    narrow = X[:60]
    specs = [
        None,
        _spec(tmp_path, X.min(axis=0).tolist(), X.max(axis=0).tolist(), actions),
        _spec(tmp_path, narrow.min(axis=0).tolist(), narrow.max(axis=0).tolist(), actions),
    ]
    models = []
    for spec in specs:
        got, want, fast = _routes(monkeypatch, path, spec)
        assert fast == 1, "the vectorised route was not taken"
        _same(got, want)
        models.append(got)
    # and the model over every float64 decides as the library (exactness: tests/ensembles)
    from clefprove.eval.ensemble import EnsembleEvaluator

    batch = EnsembleEvaluator(models[0]).evaluate(X)
    clf.set_params(n_jobs=1)
    assert np.array_equal(batch.actions, clf.predict(X))
    proba = clf.predict_proba(X)[np.arange(len(X)), batch.actions]
    assert np.allclose(batch.confidences, proba, rtol=0.0, atol=1e-6)


# --------------------------------------------------------------------------- crafted trees


def _doc(trees: list[dict[str, Any]], n_features: int, n_class: int = 0) -> dict[str, Any]:
    objective = "binary:logistic" if n_class == 0 else "multi:softprob"
    k = max(n_class, 1)
    return {
        "version": [3, 2, 0],
        "learner": {
            "feature_names": [],
            "feature_types": [],
            "objective": {"name": objective},
            "learner_model_param": {
                "base_score": "[5E-1]",
                "num_class": str(n_class),
                "num_feature": str(n_features),
                "num_target": "1",
            },
            "gradient_booster": {
                "name": "gbtree",
                "model": {
                    "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(trees))},
                    "tree_info": [t % k for t in range(len(trees))],
                    "trees": trees,
                },
            },
        },
    }


def _tree(
    lefts: list[Any], rights: list[Any], indices: list[Any], conds: list[Any], **extra: Any
) -> dict[str, Any]:
    n = len(lefts)
    tree = {
        "left_children": lefts,
        "right_children": rights,
        "split_indices": indices,
        "split_conditions": conds,
        "split_type": [0] * n,
        "categories": [],
        "categories_nodes": [],
        "categories_segments": [],
        "categories_sizes": [],
        "default_left": [0] * n,
        "tree_param": {"num_nodes": str(n), "size_leaf_vector": "1"},
    }
    tree.update(extra)
    return tree


_SPECIAL = [
    math.nan,
    math.inf,
    -math.inf,
    1e39,  # overflows float32
    -1e39,
    3.4028234663852886e38,  # FLT_MAX
    1e-45,  # a float32 denormal
    0.0,
    -0.0,
]


def _random_tree(rng: np.random.Generator, n_features: int, pool: list[float]) -> dict[str, Any]:
    """A random binary tree, nodes numbered in a random order (the root is node 0)."""
    depth_cap = int(rng.integers(0, 7))
    shape: list[tuple[int, int]] = []  # (depth, parent)
    kids: dict[int, list[int]] = {}
    todo = [(0, -1)]
    while todo:
        d, parent = todo.pop()
        me = len(shape)
        shape.append((d, parent))
        if parent >= 0:
            kids.setdefault(parent, []).append(me)
        if d < depth_cap and rng.random() < 0.8:
            todo.extend([(d + 1, me), (d + 1, me)])
    n = len(shape)
    perm = np.concatenate(([0], 1 + rng.permutation(n - 1))).astype(int)
    lefts, rights = [-1] * n, [-1] * n
    indices, conds = [0] * n, [0.0] * n
    for old in range(n):
        new = int(perm[old])
        if old in kids:
            a, b = kids[old]
            lefts[new], rights[new] = int(perm[a]), int(perm[b])
            indices[new] = int(rng.integers(0, n_features))
            conds[new] = float(rng.choice(pool))
        else:
            conds[new] = float(rng.normal()) if rng.random() < 0.95 else float(rng.choice(pool))
    return _tree(lefts, rights, indices, conds)


@pytest.mark.parametrize("seed", range(40))
def test_random_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_features = int(rng.integers(1, 4))
    n_class = int(rng.choice([0, 0, 3]))
    lo = sorted(rng.normal(size=2).tolist())
    # thresholds drawn from a few values, so that paths repeat them (decided splits), the
    # domain ends and the float32 roundings next to them, and special values
    ends = [lo[0], lo[1], float(np.float32(lo[0])), float(np.float32(lo[1]))]
    pool = ends + rng.normal(size=4).tolist() + (_SPECIAL if seed % 3 == 0 else [])
    trees = [_random_tree(rng, n_features, pool) for _ in range(int(rng.integers(1, 9)))]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_doc(trees, n_features, n_class)))
    actions = [f"class_{c}" for c in range(max(n_class, 2))]
    spec = _spec(tmp_path, [lo[0]] * n_features, [lo[1]] * n_features, actions)
    for s in (None, spec):
        got, want, fast = _routes(monkeypatch, path, s)
        _same(got, want)
        if s is spec and seed % 3 and isinstance(got, Ensemble):
            assert fast == 1  # only finite thresholds and leaves: always vectorised


def _one(tmp_path: Path, *trees: dict[str, Any], n_features: int = 2) -> Path:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_doc(list(trees), n_features)))
    return path


@pytest.mark.parametrize(
    "tree",
    [
        # node 1 below two splits (a shared subtree: the per-node route converts it twice)
        _tree([1, 3, -1, -1], [2, 1, -1, -1], [0, 1, 0, 0], [0.5, 0.2, 0.1, 0.3]),
        # a cycle
        _tree([1, 0, -1], [2, 2, -1], [0, 0, 0], [0.5, 0.2, 0.1]),
        # the root below a split
        _tree([1, 0, -1, -1], [2, 3, -1, -1], [0, 0, 0, 0], [0.5, 0.2, 0.1, 0.3]),
        # a child out of range, a feature out of range, a negative child
        _tree([1, -1, -1], [5, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2]),
        _tree([1, -1, -1], [2, -1, -1], [7, 0, 0], [0.5, 0.1, 0.2]),
        _tree([-2, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2]),
        # whole numbers as strings or floats, booleans, arrays of different lengths
        _tree(["1", -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2]),
        _tree([1.0, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2]),
        _tree([1, -1, -1], [2, -1, -1], [0, 0, 0], ["0.5", 0.1, 0.2]),
        _tree([1, -1, -1], [2, -1, -1], [0, 0], [0.5, 0.1, 0.2]),
        _tree([1, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2], split_type=[0, 0]),
        _tree([1, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2], categories_nodes=[9]),
        _tree([1, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 0.1, 0.2], categories_nodes=0),
        _tree([1, -1, -1], [2, -1, -1], [0, 0, 0], [0.5, 1e39, 0.2]),  # an infinite leaf
        _tree([], [], [], []),
    ],
)
def test_irregular_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: dict[str, Any]
) -> None:
    fine = _tree([1, -1, -1], [2, -1, -1], [1, 0, 0], [0.25, -0.5, 0.5])
    path = _one(tmp_path, fine, tree)
    got, want, fast = _routes(monkeypatch, path, None)
    _same(got, want)
    assert fast == 0


def test_booleans_read_as_whole_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``int(True)`` in the per-node route, a whole-number array in the vectorised one."""
    fine = _tree([1, -1, -1], [2, -1, -1], [1, 0, 0], [0.25, -0.5, 0.5])
    odd = _tree([1, -1, -1], [2, -1, -1], [True, 0, 0], [0.5, 0.1, 0.2])
    got, want, fast = _routes(monkeypatch, _one(tmp_path, fine, odd), None)
    _same(got, want)
    assert fast == 1


def test_deep_tree_steps_aside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain deeper than MAX_TREE_DEPTH: the per-node route decides (here: refuses)."""
    n = 2 * 140 + 1
    lefts, rights = [-1] * n, [-1] * n
    for d in range(140):
        lefts[2 * d], rights[2 * d] = 2 * d + 1, 2 * d + 2
    conds = [float(d) for d in range(n)]
    path = _one(tmp_path, _tree(lefts, rights, [0] * n, conds), n_features=1)
    got, want, fast = _routes(monkeypatch, path, None)
    _same(got, want)
    assert fast == 0


# --------------------------------------------------------------------------- LightGBM


@pytest.mark.parametrize("params", LIGHTGBM_MODES)
def test_lightgbm_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]
) -> None:
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 4))
    X[rng.random(400) < 0.2, 1] = 0.0  # zeros: thresholds in LightGBM's zero band
    y = ((X[:, 0] + 0.5 * X[:, 1] > 0.2) ^ (X[:, 3] > 0.6)).astype(int)
    if params.get("num_class") == 3:
        y = y + (X[:, 2] > 0.7)
    base = {"verbose": -1, "num_leaves": 15, "min_data_in_leaf": 5, "num_threads": 1}
    lgb.train({**base, **params}, lgb.Dataset(X, y), num_boost_round=8).save_model(
        tmp_path / "m.txt"
    )
    actions = [f"c{i}" for i in range(params.get("num_class", 2))]
    narrow = X[:50]
    specs = [
        None,
        _spec(
            tmp_path, narrow.min(axis=0).tolist(), narrow.max(axis=0).tolist(), actions, "Column_"
        ),
    ]
    for spec in specs:
        got, want, fast = _routes(monkeypatch, tmp_path / "m.txt", spec, "lightgbm")
        assert fast == 1, "the vectorised route was not taken"
        _same(got, want)


_ZT = float(np.float32(1e-35))
_LGB_SPECIAL = [
    _ZT,
    -_ZT,
    math.nextafter(_ZT, 1.0),
    math.nextafter(-_ZT, -1.0),
    0.0,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    1.7976931348623157e308,
]


def _lgb_tree(rng: np.random.Generator, t: int, n_features: int, pool: list[float]) -> str:
    depth_cap = int(rng.integers(0, 6))
    splits: list[list[Any]] = []  # [feature, threshold, decision_type, left, right]
    leaves: list[float] = []

    def grow(d: int) -> int:
        if d >= depth_cap or rng.random() < 0.25:
            leaves.append(float(rng.normal()))
            return ~(len(leaves) - 1)
        me = len(splits)
        dtype = int(rng.choice([0, 2])) | (int(rng.integers(0, 3)) << 2)
        splits.append([int(rng.integers(0, n_features)), float(rng.choice(pool)), dtype, 0, 0])
        splits[me][3] = grow(d + 1)
        splits[me][4] = grow(d + 1)
        return me

    grow(0)
    lines = [f"Tree={t}", f"num_leaves={len(leaves)}", "num_cat=0"]
    if splits:
        lines += [
            "split_feature=" + " ".join(str(s[0]) for s in splits),
            "threshold=" + " ".join(repr(s[1]) for s in splits),
            "decision_type=" + " ".join(str(s[2]) for s in splits),
            "left_child=" + " ".join(str(s[3]) for s in splits),
            "right_child=" + " ".join(str(s[4]) for s in splits),
        ]
    lines += ["leaf_value=" + " ".join(repr(v) for v in leaves), "is_linear=0", "", ""]
    return "\n".join(lines)


def _lgb_text(trees: list[str], n_features: int, n_class: int = 1) -> str:
    objective = "binary sigmoid:1" if n_class == 1 else f"multiclass num_class:{n_class}"
    names = " ".join(f"Column_{j}" for j in range(n_features))
    head = [
        "tree",
        "version=v4",
        f"num_class={n_class}",
        f"num_tree_per_iteration={n_class}",
        "label_index=0",
        f"max_feature_idx={n_features - 1}",
        f"objective={objective}",
        f"feature_names={names}",
        "",
    ]
    return "\n".join(head) + "\n" + "".join(trees) + "end of trees\n"


@pytest.mark.parametrize("seed", range(40))
def test_lightgbm_random_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n_features = int(rng.integers(1, 4))
    n_class = int(rng.choice([1, 1, 3]))
    lo = sorted(rng.normal(size=2).tolist())
    if seed % 2:
        lo = [min(lo[0], -1e-30), max(lo[1], 1e-30)]  # a domain across the zero band
    pool = [lo[0], lo[1], *rng.normal(size=3).tolist(), *_LGB_SPECIAL]
    n_iter = int(rng.integers(1, 5))
    trees = [_lgb_tree(rng, t, n_features, pool) for t in range(n_iter * n_class)]
    path = tmp_path / "m.txt"
    path.write_text(_lgb_text(trees, n_features, n_class))
    actions = [f"c{i}" for i in range(max(n_class, 2))]
    spec = _spec(tmp_path, [lo[0]] * n_features, [lo[1]] * n_features, actions, "Column_")
    for s in (None, spec):
        got, want, _ = _routes(monkeypatch, path, s, "lightgbm")
        _same(got, want)


@pytest.mark.parametrize(
    ("lefts", "rights"),
    [
        ("1 -1", "5 -3"),  # a child out of range
        ("1 0", "-2 -3"),  # a cycle through the root
        ("1 -1", "1 -3"),  # split 1 below both sides of split 0
    ],
)
def test_lightgbm_irregular(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lefts: str, rights: str
) -> None:
    tree = "\n".join(
        [
            "Tree=0",
            "num_leaves=3",
            "num_cat=0",
            "split_feature=0 1",
            "threshold=0.5 0.25",
            "decision_type=2 2",
            f"left_child={lefts}",
            f"right_child={rights}",
            "leaf_value=0.1 -0.2 0.3",
            "",
            "",
        ]
    )
    ok = "\n".join(["Tree=1", "num_leaves=1", "num_cat=0", "leaf_value=0.5", "", ""])
    path = tmp_path / "m.txt"
    path.write_text(_lgb_text([tree, ok], 2))
    got, want, _ = _routes(monkeypatch, path, None, "lightgbm")
    _same(got, want)
