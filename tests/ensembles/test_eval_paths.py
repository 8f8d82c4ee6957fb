"""The ensemble evaluator's two walks agree bit for bit: from PER_TREE_ROWS rows on, each tree
is walked by the single-tree batch evaluator (heap, packed child tables, tail pool); below it,
all (row, tree) pairs walk together.  Same leaves, hence the same library-order sums."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.eval import ensemble as ensemble_module
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.source import compile_source
from tests.ensembles.gen import ensembles
from tests.ensembles.test_soundness import _dense_rows

TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"


def _same_both_ways(model, X) -> None:
    ev = EnsembleEvaluator(model)
    rows = X.shape[0]
    assert rows >= ensemble_module.PER_TREE_ROWS
    assert np.array_equal(ev._leaves_per_tree(X), ev._leaves_pairs(X))
    big = ev.evaluate(X)  # the per-tree walk
    small = [ev.evaluate(X[i : i + 1000]) for i in range(0, rows, 1000)]  # the pair walk
    assert np.array_equal(big.leaves, np.concatenate([b.leaves for b in small]))
    assert np.array_equal(big.actions, np.concatenate([b.actions for b in small]))
    assert big.confidences.tobytes() == np.concatenate([b.confidences for b in small]).tobytes()
    assert big.scores.tobytes() == np.concatenate([b.scores for b in small]).tobytes()


def test_toy_ensemble_both_walks() -> None:
    """float, int, categorical and bool splits, rows on and beside every threshold."""
    model = compile_source(json.loads(TOY.read_text()))
    _same_both_ways(model, _dense_rows(model, np.random.default_rng(5), 6000))


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_per_tree_walk_equals_the_pair_walk(data) -> None:
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4, max_depth=6))
    rows = ensemble_module.PER_TREE_ROWS + 300
    X = _dense_rows(model, np.random.default_rng(data.draw(st.integers(0, 99))), rows)
    _same_both_ways(model, X)


def test_scores_summed_in_blocks_of_rows_equal_one_block(monkeypatch) -> None:
    """A batch's scores are summed a block of rows at a time (bounded memory for many trees
    and classes): blocks of one row, of seven rows and the whole batch agree bit for bit."""
    model = compile_source(json.loads(TOY.read_text()))
    X = _dense_rows(model, np.random.default_rng(9), 500)
    whole = EnsembleEvaluator(model).evaluate(X)
    T, K = model.n_trees, model.combine.outputs
    for rows in (1, 7):
        monkeypatch.setattr(ensemble_module, "SCORE_CELLS", rows * T * K)
        part = EnsembleEvaluator(model).evaluate(X)
        assert part.scores.tobytes() == whole.scores.tobytes()
        assert np.array_equal(part.actions, whole.actions)
        assert part.confidences.tobytes() == whole.confidences.tobytes()
