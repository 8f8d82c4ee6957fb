"""Readable conditions for tree nodes, shared by ``eval --explain`` and counterexample paths.

Wording: a numeric split goes left on ``"f <= t"`` and right on ``"f > t"`` (the threshold in
shortest round-trip form, whole numbers without ``.0``: ``300``, ``771.5``); a categorical split
left ``"f in {a, b}"`` and right ``"f not in {a, b}"`` (values in vocabulary order); a bool split
at a threshold in [0, 1) left ``"not f"`` and right ``"f"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from clefprove.model.types import FeatureType, Model, Node, NodeKind


def format_number(x: float) -> str:
    """Shortest round-trip text of a float64; whole numbers without ``.0`` (300, 771.5)."""
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return repr(x)


def condition(model: Model, node: Node | int, left: bool) -> str:
    """The condition an input satisfies when it leaves split *node* to the left (or right)."""
    if isinstance(node, int):
        node = model.node(node)
    if node.kind is NodeKind.LEAF:
        raise ValueError(f"node {node.index} is a leaf, not a split")
    f = model.features[node.feature]
    if node.kind is NodeKind.CATEGORICAL:
        values = ", ".join(f.values[c] for c in sorted(node.categories))
        return f"{f.name} {'in' if left else 'not in'} {{{values}}}"
    if f.type is FeatureType.BOOL and 0.0 <= node.threshold < 1.0:
        return f"not {f.name}" if left else f.name
    return f"{f.name} {'<=' if left else '>'} {format_number(node.threshold)}"


def path_conditions(model: Model, path: Sequence[int]) -> list[str]:
    """Conditions along a root-to-leaf path of node indices (one per split on the path)."""
    out: list[str] = []
    for here, nxt in pairwise(path):
        node = model.node(here)
        if node.kind is NodeKind.LEAF:
            break
        if nxt not in (node.left, node.right):
            raise ValueError(f"node {nxt} is not a child of node {here}")
        out.append(condition(model, node, nxt == node.left))
    return out
