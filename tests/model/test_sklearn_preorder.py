"""The vectorised pre-order of scikit-learn trees (``sklearn._preorder``, every tree of a forest
at once, level by level) against the node-by-node loop (``sklearn._preorder_loop``, still the
route of trees with categorical splits): the same records, byte for byte."""

from __future__ import annotations

from types import SimpleNamespace
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

from clefprove.model import sklearn as sk
from clefprove.model.features import parse_features
from clefprove.model.types import MAX_TREE_DEPTH, Feature

FEATS = parse_features(
    [
        {"name": f"f{j}", "type": "float", "min": -10.0, "max": 10.0, "default": 0.0}
        for j in range(4)
    ]
)


def _both(trees: list[Any], features: tuple[Feature, ...]) -> None:
    fast, m_fast = sk._flatten(trees, features)
    real = sk._preorder
    sk._preorder = lambda *a: None  # type: ignore[assignment]
    try:
        ref, m_ref = sk._flatten(trees, features)
    finally:
        sk._preorder = real
    assert fast.nodes.tobytes() == ref.nodes.tobytes()
    for a, b in ((fast.source, ref.source), (fast.leaves, ref.leaves), (fast.sizes, ref.sizes),
                 (fast.depths, ref.depths), (m_fast, m_ref)):  # fmt: skip
        assert np.array_equal(a, b)


def _tree(left: list[int], right: list[int], rng: np.random.Generator) -> SimpleNamespace:
    n = len(left)
    return SimpleNamespace(
        node_count=n,
        children_left=np.array(left),
        children_right=np.array(right),
        feature=np.where(np.array(left) != -1, rng.integers(0, 4, n), -2),
        threshold=np.where(np.array(left) != -1, rng.uniform(-12, 12, n), -2.0),
    )


@st.composite
def _shapes(draw: Any) -> tuple[list[int], list[int]]:
    """A random binary tree, its nodes numbered in a random order (not only pre-order, as
    scikit-learn's best-first builder numbers them)."""
    n_splits = draw(st.integers(0, 12))
    left, right = [-1], [-1]
    leaves = [0]
    for _ in range(n_splits):
        at = leaves.pop(draw(st.integers(0, len(leaves) - 1)))
        left[at], right[at] = len(left), len(left) + 1
        left += [-1, -1]
        right += [-1, -1]
        leaves += [len(left) - 2, len(left) - 1]
    n = len(left)
    perm = [0, *draw(st.permutations(list(range(1, n))))]  # the root stays node 0
    new = {old: k for k, old in enumerate(perm)}
    L = [-1] * n
    R = [-1] * n
    for old in range(n):
        if left[old] != -1:
            L[new[old]], R[new[old]] = new[left[old]], new[right[old]]
    return L, R


@settings(max_examples=200, deadline=None)
@given(st.lists(_shapes(), min_size=1, max_size=5), st.integers(0, 2**32 - 1))
def test_random_trees_preorder_equals_the_loop(shapes: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed)
    _both([_tree(L, R, rng) for L, R in shapes], FEATS)


def test_shared_subtree_is_expanded_on_each_path_as_the_loop_does() -> None:
    rng = np.random.default_rng(0)
    # node 2 is below both 0 and 1 (not a tree, but the loop expands it twice: so must we)
    _both([_tree([1, 2, -1, -1], [3, 2, -1, -1], rng)], FEATS)


def test_too_deep_falls_back_to_the_loop_and_its_error() -> None:
    rng = np.random.default_rng(0)
    n = MAX_TREE_DEPTH + 2
    left = [k + 1 for k in range(n)] + [-1]
    right = [n + 1 + k for k in range(n)] + [-1]
    left += [-1] * n
    right += [-1] * n
    assert sk._preorder(np.array(left), np.array(right), np.array([0, len(left)])) is None
    with pytest.raises(sk.ImportModelError, match="deeper than the limit"):
        sk._flatten([_tree(left, right, rng)], FEATS)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0),
        lambda: RandomForestClassifier(n_estimators=6, max_leaf_nodes=14, random_state=1),
        lambda: ExtraTreesClassifier(n_estimators=6, random_state=2),
        lambda: GradientBoostingClassifier(n_estimators=8, max_leaf_nodes=6, random_state=0),
    ],
)
def test_fitted_ensembles_preorder_equals_the_loop(make: Any) -> None:
    rng = np.random.default_rng(5)
    X = rng.uniform(-10, 10, (300, 4))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    model = make().fit(X, y)
    _both([e.tree_ for e in np.ravel(model.estimators_)], FEATS)
