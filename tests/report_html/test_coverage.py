"""The domain share per action, against exhaustive enumeration and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.eval.evaluator import Evaluator
from clefprove.model.source import compile_source
from clefprove.report.coverage import action_shares, leaf_shares

ACTIONS = ["allow", "challenge", "block"]
DISCRETE = [
    {"name": "a", "type": "int", "min": -2, "max": 3, "default": 0},
    {"name": "b", "type": "bool", "default": False},
    {"name": "c", "type": "categorical", "values": ["x", "y", "z", "w"], "default": "x"},
    {"name": "d", "type": "int", "min": 0, "max": 2, "default": 0},
]


@st.composite
def discrete_trees(draw, depth: int = 0) -> dict:
    if depth >= 4 or draw(st.integers(0, 3)) == 0:
        return {"action": draw(st.sampled_from(ACTIONS)), "confidence": 0.5}
    f = draw(st.sampled_from(DISCRETE))
    if f["type"] == "categorical":
        split = {
            "feature": f["name"],
            "in": draw(st.lists(st.sampled_from(f["values"]), min_size=1, unique=True)),
        }
    elif f["type"] == "bool":
        split = {"feature": f["name"]}
    else:  # thresholds inside, between and outside the whole values
        split = {
            "feature": f["name"],
            "threshold": draw(st.sampled_from([-3.0, -2.0, -1.5, 0.0, 0.5, 1.0, 2.5, 3.0, 7.0])),
        }
    split["left"] = draw(discrete_trees(depth + 1))
    split["right"] = draw(discrete_trees(depth + 1))
    return split


def all_inputs() -> np.ndarray:
    axes = []
    for f in DISCRETE:
        if f["type"] == "int":
            axes.append(range(f["min"], f["max"] + 1))
        elif f["type"] == "bool":
            axes.append((0, 1))
        else:
            axes.append(range(len(f["values"])))
    return np.array(list(itertools.product(*axes)), dtype=np.float64)


@settings(max_examples=60, deadline=None)
@given(discrete_trees())
def test_shares_equal_counts_over_every_input(tree):
    model = compile_source({"features": DISCRETE, "actions": ACTIONS, "tree": tree})
    xs = all_inputs()
    decided = Evaluator(model).evaluate(xs).actions
    counts = np.bincount(decided, minlength=len(ACTIONS)) / xs.shape[0]
    shares = action_shares(model)
    assert [s.action for s in shares] == ACTIONS
    assert np.allclose([s.share for s in shares], counts, rtol=0, atol=1e-12)
    # a leaf counts as reachable exactly when some input reaches it
    reached = set(Evaluator(model).evaluate(xs).leaves.tolist())
    for k, s in enumerate(shares):
        leaves = {
            int(i)
            for i in np.flatnonzero(model.nodes["kind"] == 0)
            if int(model.nodes["aux"][i]) == k
        }
        assert s.leaves == len(leaves & reached)


def test_float_share_is_interval_length():
    model = compile_source(
        {
            "features": [
                {"name": "rtt", "type": "float", "min": 0, "max": 1000, "default": 0},
                {"name": "c", "type": "categorical", "values": ["p", "q", "r"], "default": "p"},
            ],
            "actions": ACTIONS,
            "tree": {
                "feature": "rtt",
                "threshold": 250.0,
                "left": {"action": "allow", "confidence": 1},
                "right": {
                    "feature": "c",
                    "in": ["q"],
                    "left": {"action": "block", "confidence": 1},
                    "right": {"action": "challenge", "confidence": 1},
                },
            },
        }
    )
    shares = {s.action: s.share for s in action_shares(model)}
    assert shares["allow"] == pytest.approx(0.25, abs=1e-12)
    assert shares["block"] == pytest.approx(0.75 / 3, abs=1e-12)
    assert shares["challenge"] == pytest.approx(0.75 * 2 / 3, abs=1e-12)


def test_unreachable_leaf_has_no_share_and_degenerate_float_counts_whole():
    model = compile_source(
        {
            "features": [
                {"name": "x", "type": "float", "min": 5, "max": 5, "default": 5},
                {"name": "n", "type": "int", "min": 0, "max": 9, "default": 0},
            ],
            "actions": ACTIONS,
            "tree": {
                "feature": "x",
                "threshold": 100.0,  # right side unreachable
                "left": {
                    "feature": "n",
                    "threshold": 1.5,
                    "left": {"action": "allow", "confidence": 1},
                    "right": {"action": "challenge", "confidence": 1},
                },
                "right": {"action": "block", "confidence": 1},
            },
        }
    )
    shares = {s.action: s for s in action_shares(model)}
    assert shares["allow"].share == pytest.approx(0.2)
    assert shares["challenge"].share == pytest.approx(0.8)
    assert shares["block"].share == 0.0 and shares["block"].leaves == 0
    assert leaf_shares(model).sum() == pytest.approx(1.0)


def test_example_shares_add_up_to_one(edge_model):
    shares = action_shares(edge_model)
    assert sum(s.share for s in shares) == pytest.approx(1.0, abs=1e-9)
    assert sum(s.leaves for s in shares) <= edge_model.n_leaves
