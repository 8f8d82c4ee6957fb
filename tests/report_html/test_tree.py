"""Tree windows around a leaf, the boxes behind them, and conditions in plain words."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from clefprove.eval.evaluator import Evaluator
from clefprove.geometry.boxes import context_box
from clefprove.model.source import compile_source
from clefprove.report.context import plain_conditions
from clefprove.report.tree import layout, subtree_summary, window
from tests.report_html.test_coverage import ACTIONS, DISCRETE, all_inputs, discrete_trees

FEATURES = [
    {"name": "rtt", "type": "float", "min": 0, "max": 1000, "default": 0},
    {"name": "tls", "type": "int", "min": 768, "max": 772, "default": 772},
    {"name": "tor", "type": "bool", "default": False},
    {
        "name": "ua",
        "type": "categorical",
        "values": ["Chrome", "Firefox", "curl", "wget"],
        "default": "Chrome",
    },
]


def leaf(action: str, conf: float = 0.9) -> dict:
    return {"action": action, "confidence": conf}


# path to the deepest leaf: rtt > 300, rtt <= 800, tls <= 770.5, tor, ua in {curl, wget},
# then ua not in {wget}  ->  ua is curl
DEEP = {
    "feature": "rtt",
    "threshold": 300.0,
    "left": leaf("allow"),
    "right": {
        "feature": "rtt",
        "threshold": 800.0,
        "left": {
            "feature": "tls",
            "threshold": 770.5,
            "left": {
                "feature": "tor",
                "left": leaf("challenge"),
                "right": {
                    "feature": "ua",
                    "in": ["curl", "wget"],
                    "left": {
                        "feature": "ua",
                        "in": ["wget"],
                        "left": leaf("block", 0.7),
                        "right": leaf("allow", 0.6),
                    },
                    "right": {
                        "feature": "rtt",
                        "threshold": 2000.0,
                        "left": leaf("challenge"),
                        "right": leaf("block"),
                    },
                },
            },
            "right": leaf("challenge"),
        },
        "right": leaf("block"),
    },
}


def deep_model():
    return compile_source({"name": "deep", "features": FEATURES, "actions": ACTIONS, "tree": DEEP})


def target_leaf(model) -> int:
    """The leaf deciding 'allow' with confidence 0.6."""
    for n in model.iter_nodes():
        if n.is_leaf and n.confidence == 0.6:
            return n.index
    raise AssertionError


def test_plain_words_merge_each_feature_into_one_sentence():
    model = deep_model()
    assert plain_conditions(model, target_leaf(model)) == [
        "rtt is above 300 and at most 800",
        "tls is at most 770",
        "tor is true",
        "ua is curl",
    ]
    first = model.node(0).left
    assert plain_conditions(model, first) == ["rtt is at most 300"]


def test_window_shows_last_levels_and_collapses_siblings():
    model = deep_model()
    t = target_leaf(model)
    win = window(model, t, levels=3)
    assert win.depth == 6 and win.hidden == 3 and len(win.steps) == 3
    assert [s.question for s in win.steps] == ["tor?", "ua in {curl, wget}", "ua in {wget}"]
    assert [s.went_left for s in win.steps] == [False, True, False]
    tor, ua, inner = win.steps
    assert (tor.yes_label, tor.no_label) == ("false", "true")
    assert tor.sibling.leaf_action == "challenge"
    # the other side of "ua in {curl, wget}": rtt <= 800 here, so its rtt > 2000 leaf is
    # unreachable and only one leaf remains
    assert ua.sibling.leaves == 1 and ua.sibling.actions == (("challenge", 1.0),)
    assert inner.sibling.leaf_action == "block" and inner.sibling.text.startswith("leaf #")
    assert win.action == "allow" and win.confidence == 0.6
    full = window(model, t)
    assert full.hidden == 0 and len(full.steps) == 6


def test_unreachable_sibling_is_said_to_be_unreachable():
    model = compile_source(
        {
            "features": FEATURES,
            "actions": ACTIONS,
            "tree": {
                "feature": "tls",
                "threshold": 770.5,
                "left": {
                    "feature": "tls",
                    "threshold": 771.0,
                    "left": leaf("allow"),
                    "right": leaf("block"),
                },
                "right": leaf("challenge"),
            },
        }
    )
    only = model.node(model.node(0).left).left
    win = window(model, only)
    assert win.steps[-1].sibling.leaves == 0
    assert "unreachable" in win.steps[-1].sibling.text
    assert subtree_summary(model, 0).leaves == 2  # 3 leaves, one unreachable


def test_layout_keeps_boxes_apart_and_inside_the_canvas():
    model = deep_model()
    d = layout(window(model, target_leaf(model)))
    for r in d.rects:
        assert r.x >= 0 and r.x + r.w <= d.width and r.y + r.h <= d.height
    for a in d.rects:
        for b in d.rects:
            if a is not b:
                apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
                assert apart, (a, b)
    assert sum(r.kind == "leaf" for r in d.rects) == 1
    assert sum(e.kind == "path" for e in d.edges) == 6


@settings(max_examples=40, deadline=None)
@given(discrete_trees())
def test_box_at_is_exactly_the_inputs_that_reach_the_node(tree):
    model = compile_source({"features": DISCRETE, "actions": ACTIONS, "tree": tree})
    xs = all_inputs()
    reached = Evaluator(model).evaluate(xs).leaves
    for n in model.iter_nodes():
        if not n.is_leaf:
            continue
        box = context_box(model, n.index)
        inside = np.all((xs >= box.lo) & (xs <= box.hi), axis=1)
        for f, mask in box.cats.items():
            inside &= mask[xs[:, f].astype(int)]
        assert np.array_equal(inside, reached == n.index)
