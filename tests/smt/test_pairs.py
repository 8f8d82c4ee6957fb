"""smt/pairs.py: the two-copy encoding of relational leaf pairs keeps the copies apart."""

from __future__ import annotations

import itertools

from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source
from clefprove.verify.api import check

# i1 <= 2.5 -> allow; i1 <= 5 -> block; else challenge.  The 'when' has two multi-feature
# literals, so the box tests leave the pairs to Z3; the pair (block, challenge) is queried
# after (allow, block), whose bounds on x'_f were once cached and reused for x_f.
SOURCE = {
    "name": "pairs",
    "version": "1",
    "features": [
        {"name": "i0", "type": "int", "min": -1, "max": 2, "default": -1},
        {"name": "i1", "type": "int", "min": 2, "max": 6, "default": 2},
    ],
    "actions": ["allow", "challenge", "block"],
    "tree": {
        "feature": "i1",
        "threshold": 2.5,
        "left": {"action": "allow", "confidence": 0.5},
        "right": {
            "feature": "i1",
            "threshold": 5.0,
            "left": {"action": "block", "confidence": 0.5},
            "right": {"action": "challenge", "confidence": 0.5},
        },
    },
}

WHEN = "i1 + 6 * i0 >= 4 and i1 + 6 * i0 <= 6"


def _decide(x: dict[str, int]) -> str:
    """The tree of SOURCE walked by hand (x <= t goes left)."""
    node = SOURCE["tree"]
    while "action" not in node:
        node = node["left"] if x[node["feature"]] <= node["threshold"] else node["right"]
    return node["action"]


def _brute(ensure_pair) -> bool:
    """True when some pair (x, x') differing in i1 only, both satisfying WHEN, breaks it."""
    for i0, a, b in itertools.product(range(-1, 3), range(2, 7), range(2, 7)):
        if a == b or not all(4 <= v + 6 * i0 <= 6 for v in (a, b)):
            continue
        da = _decide({"i0": i0, "i1": a})
        db = _decide({"i0": i0, "i1": b})
        if ensure_pair(a, b, da, db):
            return True
    return False


def test_pair_copies_do_not_share_cached_bounds():
    model = compile_source(SOURCE)
    rank = {"allow": 0, "challenge": 1, "block": 2}
    cases = {
        "stable(i1, 1)": lambda a, b, da, db: abs(a - b) <= 1 and da != db,
        "independent(i1)": lambda a, b, da, db: da != db,
        "monotone(i1)": lambda a, b, da, db: a < b and rank[db] < rank[da],
    }
    for ensure, broken in cases.items():
        text = (
            f"severity allow < challenge < block\ninvariant r:\n  when {WHEN}\n  ensure {ensure}\n"
        )
        result = check(model, parse_text(text, model)).results[0]
        expected = "violated" if _brute(broken) else "holds"
        assert expected == "violated"  # (0, 5) -> block, (0, 6) -> challenge
        assert result.status == expected, ensure
        for cx in result.counterexamples:
            (x, y) = cx.inputs  # type: ignore[union-attr]
            assert x["i0"] == y["i0"] and 4 <= x["i1"] + 6 * x["i0"] <= 6
