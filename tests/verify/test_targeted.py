"""Hand-picked boundary cases, each checked against brute force over the critical values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.eval.evaluator import Evaluator
from clefprove.model.source import compile_source
from clefprove.verify import engine as eg
from clefprove.verify.api import check, check_invariant
from clefprove.verify.options import CheckOptions

SEV = "severity allow < challenge < rate_limit < block\n"
FEATURES = [
    {"name": "n", "type": "int", "min": 0, "max": 10, "default": 0},
    {"name": "x", "type": "float", "min": 0, "max": 100, "default": 0},
    {"name": "c", "type": "categorical", "values": ["a", "b", "c"], "default": "a"},
    {"name": "t", "type": "bool", "default": False},
]
ACTIONS = ["allow", "challenge", "rate_limit", "block"]


def leaf(a: str, conf: float = 0.9) -> dict:
    return {"action": a, "confidence": conf}


def split(f: str, t: float, left: dict, right: dict) -> dict:
    return {"feature": f, "threshold": t, "left": left, "right": right}


def model_of(tree: dict):
    return compile_source({"features": FEATURES, "actions": ACTIONS, "tree": tree})


def candidates(model) -> np.ndarray:
    """Every combination of critical values: domain ends, thresholds and their float
    neighbours, whole numbers around them, every code."""
    per = []
    for i, f in enumerate(model.features):
        if f.type.value == "categorical":
            per.append([float(k) for k in range(len(f.values))])
            continue
        vals = {f.min, f.max}
        for n in model.iter_nodes():
            if not n.is_leaf and n.feature == i:
                t = n.threshold
                vals |= {t, math.nextafter(t, -math.inf), math.nextafter(t, math.inf)}
                vals |= {math.floor(t) + d for d in (-1, 0, 1, 2)}
        vals |= {300.0, 299.0, 301.0, 5.0, 50.0, 51.0}
        ok = [v for v in vals if f.min <= v <= f.max]
        if f.is_integral:
            ok = [float(v) for v in range(int(f.min), int(f.max) + 1)]
        per.append(sorted(ok))
    grids = np.meshgrid(*per, indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


def brute(model, inv) -> bool:
    X = candidates(model)
    res = Evaluator(model).evaluate(X)
    for i in range(X.shape[0]):
        xs = X[i].tolist()
        a, c = int(res.actions[i]), float(res.confidences[i])
        if ck.evaluate(inv.when, xs, a, c) and not ck.evaluate(inv.ensure, xs, a, c):
            return True
    return False


CASES = [
    # int threshold at x.5: n <= 3.5 means n <= 3
    (split("n", 3.5, leaf("allow"), leaf("block")), "when n >= 4 ensure action == block", "holds"),
    (
        split("n", 3.5, leaf("allow"), leaf("block")),
        "when n >= 3 ensure action == block",
        "violated",
    ),
    (split("n", 3.0, leaf("allow"), leaf("block")), "when n > 3 ensure action == block", "holds"),
    # adjacent float thresholds: the only float strictly between is none
    (
        split(
            "x",
            50.0,
            leaf("block"),
            split("x", math.nextafter(50.0, math.inf), leaf("allow"), leaf("block")),
        ),
        "ensure action == block",
        "violated",
    ),
    (
        split(
            "x",
            50.0,
            leaf("block"),
            split("x", math.nextafter(50.0, math.inf), leaf("block"), leaf("block")),
        ),
        "ensure action == block",
        "holds",
    ),
    (split("x", 50.0, leaf("allow"), leaf("block")), "when x > 50 ensure action == block", "holds"),
    (
        split("x", 50.0, leaf("allow"), leaf("block")),
        "when x >= 50 ensure action == block",
        "violated",
    ),
    # thresholds at and beyond the domain bounds (clipping)
    (split("x", 100.0, leaf("block"), leaf("allow")), "ensure action == block", "holds"),
    (split("x", 150.0, leaf("block"), leaf("allow")), "ensure action == block", "holds"),
    (split("x", -5.0, leaf("allow"), leaf("block")), "ensure action == block", "holds"),
    (split("n", 10.0, leaf("block"), leaf("allow")), "ensure action == block", "holds"),
    (split("n", 9.5, leaf("block"), leaf("allow")), "ensure action == block", "violated"),
    # categorical sets
    (
        {"feature": "c", "in": ["a", "b"], "left": leaf("allow"), "right": leaf("block")},
        'when c == "c" ensure action == block',
        "holds",
    ),
    (
        {"feature": "c", "in": ["a", "b"], "left": leaf("allow"), "right": leaf("block")},
        'when c not in {"a"} ensure action == block',
        "violated",
    ),
    # bool
    (split("t", 0.5, leaf("allow"), leaf("block")), "when t ensure action == block", "holds"),
    (
        split("t", 0.5, leaf("allow"), leaf("block")),
        "when not t ensure action == block",
        "violated",
    ),
    # confidence (0.7 is the float64 nearest 0.7 in both places)
    (split("n", 5, leaf("block", 0.7), leaf("block", 0.9)), "ensure confidence >= 0.7", "holds"),
    (split("n", 5, leaf("block", 0.7), leaf("block", 0.9)), "ensure confidence > 0.7", "violated"),
    # severity ordering
    (split("n", 5, leaf("challenge"), leaf("rate_limit")), "ensure action >= challenge", "holds"),
    (split("n", 5, leaf("allow"), leaf("rate_limit")), "ensure action >= challenge", "violated"),
    # vacuous when
    (
        split("n", 5, leaf("allow"), leaf("block")),
        "when n > 7 and n < 6 ensure action == block",
        "holds",
    ),
    # linear, several features (and the confidence)
    (
        split("x", 50, leaf("allow"), leaf("block")),
        "when x + 10 * n >= 151 ensure action == block",
        "holds",
    ),
    (
        split("x", 50, leaf("allow"), leaf("block")),
        "when x + 10 * n >= 150 ensure action == block",
        "violated",
    ),
    (
        split("x", 50, leaf("allow", 0.5), leaf("block", 0.9)),
        "when x + n >= 58 and x - n >= 44 ensure action == block",
        "holds",
    ),
    (
        split("x", 50, leaf("allow", 0.5), leaf("block", 0.9)),
        "when x + n >= 58 and x - n >= 42 ensure action == block",
        "violated",
    ),
    (
        split("x", 50, leaf("allow", 0.5), leaf("block", 0.9)),
        "ensure 100 * confidence + n >= 50",
        "holds",
    ),
    (
        split("x", 50, leaf("allow", 0.5), leaf("block", 0.9)),
        "ensure 100 * confidence + n >= 51",
        "violated",
    ),
]


@pytest.mark.parametrize(("tree", "body", "expected"), CASES)
def test_targeted(tree, body, expected):
    model = model_of(tree)
    inv = parse_text(SEV + "invariant t:\n  " + body + "\n", model, "t.inv").invariants[0]
    assert brute(model, inv) == (expected == "violated")
    for shortcuts in (True, False):
        r = check_invariant(model, inv, CheckOptions(shortcuts=shortcuts))
        assert r.status == expected, shortcuts
        assert not any(w.startswith("internal") for w in r.warnings)
        if expected == "violated":
            assert r.counterexamples


def test_vacuous_flag():
    model = model_of(split("n", 5, leaf("allow"), leaf("block")))
    prog = parse_text(
        SEV + "invariant v:\n  when n > 7 and n < 6\n  ensure action == block\n", model, "v.inv"
    )
    r = check(model, prog).results[0]
    assert r.status == "holds" and r.vacuous and r.warnings


def test_subtree_api_matches_whole_tree():
    from clefprove.geometry.boxes import Box, leaf_boxes

    tree = split(
        "n",
        3.5,
        split("x", 50, leaf("allow"), leaf("block")),
        split("x", 20, leaf("block"), leaf("allow")),
    )
    model = model_of(tree)
    inv = parse_text(
        SEV + "invariant t:\n  when x > 30\n  ensure action == block\n", model, "t.inv"
    ).invariants[0]
    whole = eg.check_subtree(model, 0, None, inv)
    right = model.node(0).right
    ctx = Box.domain(model)
    lo = ctx.lo.copy()
    lo[0] = 4.0
    part = eg.check_subtree(model, right, Box(lo, ctx.hi, ctx.cats), inv)
    w = dict(zip(whole.boxes.leaves.tolist(), whole.status.tolist(), strict=True))
    for leaf_idx, s in zip(part.boxes.leaves.tolist(), part.status.tolist(), strict=True):
        assert w[leaf_idx] == s
    assert leaf_boxes(model, right).size == part.boxes.size


def test_merge_subtrees_equals_whole():
    from clefprove.geometry.boxes import Box

    tree = split(
        "n",
        3.5,
        split("x", 50, leaf("allow"), leaf("block")),
        split("x", 20, leaf("block"), leaf("allow")),
    )
    model = model_of(tree)
    inv = parse_text(
        SEV + "invariant t:\n  when x > 30\n  ensure action == block\n", model, "t.inv"
    ).invariants[0]
    prep = eg.prepare(model, inv)
    whole = eg.check_subtree(model, 0, None, prep)
    root = model.node(0)
    d = Box.domain(model)
    left_hi, right_lo = d.hi.copy(), d.lo.copy()
    left_hi[0], right_lo[0] = 3.0, 4.0
    parts = [
        eg.check_subtree(model, root.right, Box(right_lo, d.hi, d.cats), prep),
        eg.check_subtree(model, root.left, Box(d.lo, left_hi, d.cats), prep),
    ]
    merged = eg.merge(parts)
    assert np.array_equal(merged.boxes.leaves, whole.boxes.leaves)
    assert np.array_equal(merged.status, whole.status)
    from clefprove.verify.api import finish

    r = finish(model, prep, merged, CheckOptions(), 3, 0.0)
    assert r.status == "violated" and r.counterexamples
