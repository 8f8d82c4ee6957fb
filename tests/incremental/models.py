"""Small random models (JSON sources), invariant texts and edits for the incremental tests."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source
from clefprove.verify.verdicts import Report

FEATURES = [
    {"name": "x", "type": "float", "min": 0, "max": 10, "default": 0},
    {"name": "n", "type": "int", "min": 0, "max": 6, "default": 0},
    {"name": "b", "type": "bool", "default": False},
    {"name": "c", "type": "categorical", "values": ["a", "b", "c"], "default": "a"},
]
ACTIONS = ["allow", "challenge", "block"]
THRESHOLDS = {
    "x": [0.0, 2.5, 5.0, 7.5, 9.0, 10.0, 11.0],
    "n": [0.5, 1.5, 3.0, 4.5, 7.0],
    "b": [0.5],
}
CONFIDENCES = [0.5, 0.79, 0.8, 0.9, 1.0]

SEVERITY = "severity allow < challenge < block\n"
#: Invariant pool: box-decided ones, two that need the solver (two multi-variable literals),
#: a vacuous one and decision-dependent 'when's.
POOL = {
    "slow": "when x > 5 ensure action != allow",
    "friction": 'when n >= 3 and c in {"a"} ensure action >= challenge',
    "confident": "ensure action == block implies confidence >= 0.8",
    "flag": "when b ensure action in {challenge, block}",
    "linear": "when x + 2 * n >= 9 ensure not (action == allow)",
    "solver": "when x + n >= 8 and x - n <= 1 ensure action != allow",
    "solver2": "when 2 * x - n >= 3 and x + 3 * n <= 12 ensure action == block",
    "solver_safe": "when x + n >= 9 and x - n >= 6 ensure action != allow",
    "vacuous": "when x > 20 ensure action == block",
    "vacuous_if_narrow": "when x > 11 ensure action == block",
    "by_action": "when action == allow ensure x <= 5",
    "by_conf": "when action == block and confidence < 0.85 ensure false",
}


#: Relational invariants: five whose pairs cell tests decide (re-counted after an edit), one
#: with a linear 'when' (decided afresh).
RELATIONAL = {
    "mono_x": "ensure monotone(x)",
    "stable_x_or": 'when x <= 2.5 or c in {"b"} ensure stable(x, 0.5)',
    "stable_n": "ensure stable(n, 1)",
    "indep_c_when": "when x <= 7.5 and b ensure independent(c)",
    "indep_b": "ensure independent(b)",
    "mono_n_linear": "when x + n >= 6 ensure monotone(n)",
}


def leaf(draw: Any) -> dict:
    return {
        "action": draw(st.sampled_from(ACTIONS)),
        "confidence": draw(st.sampled_from(CONFIDENCES)),
    }


def tree(draw: Any, depth: int) -> dict:
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return leaf(draw)
    f = draw(st.sampled_from(["x", "n", "b", "c"]))
    if f == "c":
        values = draw(
            st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2, unique=True)
        )
        node: dict = {"feature": "c", "in": values}
    else:
        node = {"feature": f, "threshold": draw(st.sampled_from(THRESHOLDS[f]))}
    node["left"] = tree(draw, depth - 1)
    node["right"] = tree(draw, depth - 1)
    return node


@st.composite
def sources(draw: Any, max_depth: int = 5) -> dict:
    return {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(FEATURES),
        "actions": list(ACTIONS),
        "tree": tree(draw, max_depth),
    }


def paths(t: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every node position in *t* (a tuple of 'left'/'right')."""
    out = [prefix]
    if "action" not in t:
        out += paths(t["left"], (*prefix, "left"))
        out += paths(t["right"], (*prefix, "right"))
    return out


def at(t: dict, path: tuple[str, ...]) -> dict:
    for p in path:
        t = t[p]
    return t


def program_text(names: list[str]) -> str:
    body = "".join(f"invariant {n}:\n  {(POOL | RELATIONAL)[n]}\n" for n in names)
    return SEVERITY + body


def compile_(src: dict):
    return compile_source(copy.deepcopy(src))


def program(names: list[str], model: Any):
    return parse_text(program_text(names), model, "inv/test.inv")


def comparable(report: Report) -> tuple[str, list[int]]:
    """The JSON report minus timings and the checked/reused split (and the totals)."""
    d = report.to_json_dict()
    d["summary"].pop("seconds")
    d["summary"].pop("paths_checked")
    d["summary"].pop("paths_reused")
    totals = []
    for r in d["results"]:
        r.pop("seconds")
        totals.append(r.pop("paths_checked") + r.pop("paths_reused"))
    return json.dumps(d, sort_keys=True), totals


class CallCounter:
    """Counts the calls of ``module.name`` (replaced through *monkeypatch*, calling through
    to the real function): a spy on which results a run decides instead of reusing them."""

    def __init__(self, monkeypatch: Any, module: Any, name: str) -> None:
        self.calls = 0
        real = getattr(module, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
