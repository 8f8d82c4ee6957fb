"""Hypothesis strategies for random ensembles (JSON sources), with ties on purpose."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from clefprove.model.source import compile_source
from tests.verify.gen import ACTIONS, _threshold, feature_specs

#: Dyadic values make exact ties between classes (and between float32 and float64 sums) common.
VALUES = [-1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0, 0.125]


@st.composite
def leaf_values(draw, outputs: int, probabilities: bool) -> list[float]:
    if probabilities:
        k = draw(st.integers(0, outputs - 1))
        share = draw(st.sampled_from([1.0, 0.5, 0.75, 0.625]))
        out = [(1.0 - share) / (outputs - 1)] * outputs
        out[k] = share
        return [float(np.float32(v)) for v in out]  # float32 arithmetic takes float32 values
    return [
        draw(st.one_of(st.sampled_from(VALUES), st.floats(-2, 2, width=32))) for _ in range(outputs)
    ]


@st.composite
def ensemble_trees(draw, features, depth, thresholds, outputs, probabilities) -> dict:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return {"value": draw(leaf_values(outputs, probabilities))}
    spec = draw(st.sampled_from(features))
    node: dict = {"feature": spec["name"]}
    if spec["type"] == "categorical":
        node["in"] = draw(st.lists(st.sampled_from(spec["values"]), min_size=1, unique=True))
    else:
        seen = thresholds.setdefault(spec["name"], [])
        t = draw(st.sampled_from(seen)) if seen and draw(st.booleans()) else _threshold(draw, spec)
        seen.append(t)
        node["threshold"] = t
    for side in ("left", "right"):
        node[side] = draw(ensemble_trees(features, depth - 1, thresholds, outputs, probabilities))
    return node


@st.composite
def ensembles(draw, all_int: bool, max_trees: int = 4, max_depth: int = 3, margin: bool = False):
    """Random ensembles; with *margin*, only the margin rule (decisions without exp)."""
    features = draw(feature_specs(all_int))
    extra = [] if margin else ["identity", "onnx_logistic", "complement"]
    link = draw(st.sampled_from(["logistic", "softmax", "softmax_f64_sum", *extra]))
    single = link in ("logistic", "onnx_logistic", "complement")
    n_actions = 2 if single else draw(st.integers(2, 4))
    outputs = 1 if single else n_actions
    arithmetic = draw(st.sampled_from(["float32", "float64"]))
    rules = {
        "logistic": ["half", "proba", "margin"],
        "softmax": ["proba", "margin"],
        "softmax_f64_sum": ["proba", "margin"],
        "identity": ["proba", "margin"],
        # onnxruntime's binary classifier (ONNX imports)
        "onnx_logistic": ["positive", "score_half", "proba"],
        "complement": ["score_half", "positive", "proba"],
    }[link]
    n_trees = draw(st.integers(1, max_trees))
    thresholds: dict = {}
    trees = [
        draw(ensemble_trees(features, max_depth, thresholds, outputs, link == "identity"))
        for _ in range(n_trees)
    ]
    rule = "margin" if margin else draw(st.sampled_from(rules))
    spec = {"link": link, "arithmetic": arithmetic, "rule": rule}
    if link == "identity":
        spec["divisor"] = n_trees
    else:
        spec["base"] = [float(np.float32(draw(st.sampled_from(VALUES)))) for _ in range(outputs)]
        if link in ("logistic", "onnx_logistic") and draw(st.booleans()):
            spec["scale"] = draw(st.sampled_from([1.0, 0.5, 2.0]))
    return compile_source(
        {"features": features, "actions": ACTIONS[:n_actions], "ensemble": spec, "trees": trees}
    )
