"""Readable conditions for tree nodes, shared by ``eval --explain`` and counterexample paths.

Wording: a numeric split goes left on ``"f <= t"`` and right on ``"f > t"`` (the threshold in
shortest round-trip form, whole numbers without ``.0``: ``300``, ``771.5``); a categorical split
left ``"f in {a, b}"`` and right ``"f not in {a, b}"`` (values in vocabulary order); a bool split
at a threshold in [0, 1) left ``"not f"`` and right ``"f"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from clefprove.model.types import Feature, FeatureType, Model, Node, NodeKind


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
    for node, nxt in zip(model.nodes_at(path[:-1]), path[1:], strict=True):
        if node.kind is NodeKind.LEAF:
            break
        if nxt not in (node.left, node.right):
            raise ValueError(f"node {nxt} is not a child of node {node.index}")
        out.append(condition(model, node, nxt == node.left))
    return out


def region_conditions(model: Model, path: Sequence[int]) -> list[str]:
    """The box a root-to-leaf path of node indices selects, one condition per feature it
    narrows, in declaration order: ``300 < client_rtt_ms <= 5000``, ``tls_version <= 771.5``,
    ``ua_family in {curl}`` (the bounds are the path's own thresholds; a condition the domain
    already implies is still shown, since it is on the path)."""
    return joint_region_conditions([(model, path)])


def joint_region_conditions(routes: Sequence[tuple[Model, Sequence[int]]]) -> list[str]:
    """:func:`region_conditions` of several root-to-leaf paths taken together, each in its
    own tree over the same features (an ensemble's trees): the box where every tree reaches
    the leaf its path ends at, one condition per feature some path narrows."""
    lower: dict[int, float] = {}  # strict: x > t
    upper: dict[int, float] = {}  # x <= t
    sets: dict[int, set[int]] = {}
    for model, path in routes:
        _narrow(model, path, lower, upper, sets)
    return box_conditions(routes[0][0].features if routes else (), lower, upper, sets)


def _narrow(
    model: Model,
    path: Sequence[int],
    lower: dict[int, float],
    upper: dict[int, float],
    sets: dict[int, set[int]],
) -> None:
    """Narrow the bounds *lower*, *upper* and the value sets *sets* by *path*'s splits."""
    for node, nxt in zip(model.nodes_at(path[:-1]), path[1:], strict=True):
        if node.kind is NodeKind.LEAF:
            break
        if nxt not in (node.left, node.right):
            raise ValueError(f"node {nxt} is not a child of node {node.index}")
        left = nxt == node.left
        f = model.features[node.feature]
        if node.kind is NodeKind.CATEGORICAL:
            codes = node.categories if left else frozenset(range(len(f.values))) - node.categories
            sets[node.feature] = sets.get(node.feature, set(range(len(f.values)))) & set(codes)
        elif left:
            upper[node.feature] = min(upper.get(node.feature, node.threshold), node.threshold)
        else:
            lower[node.feature] = max(lower.get(node.feature, node.threshold), node.threshold)


def box_conditions(
    features: Sequence[Feature],
    lower: dict[int, float],
    upper: dict[int, float],
    sets: dict[int, set[int]],
) -> list[str]:
    """The wording of :func:`region_conditions` for the features narrowed: *lower* strict
    (``x > t``) and *upper* (``x <= t``) bounds, and *sets* of the categorical codes kept."""
    out: list[str] = []
    for i, f in enumerate(features):
        if i in sets:
            kept = sorted(sets[i])
            dropped = [c for c in range(len(f.values)) if c not in sets[i]]
            if len(kept) <= len(dropped) or not dropped:
                out.append(f"{f.name} in {{{', '.join(f.values[c] for c in kept)}}}")
            else:
                out.append(f"{f.name} not in {{{', '.join(f.values[c] for c in dropped)}}}")
            continue
        lo, hi = lower.get(i), upper.get(i)
        if (
            f.type is FeatureType.BOOL
            and (lo is None or 0.0 <= lo < 1.0)
            and (hi is None or 0.0 <= hi < 1.0)
        ):
            if lo is not None and hi is None:
                out.append(f.name)
            elif hi is not None and lo is None:
                out.append(f"not {f.name}")
            elif lo is not None:
                out.append(f"{f.name} (unreachable)")
            continue
        if f.type is FeatureType.INT:  # whole bounds read better: x > 3.5 is x >= 4
            a = None if lo is None else math.floor(lo) + 1
            b = None if hi is None else math.floor(hi)
            if a is not None and b is not None:
                out.append(f"{f.name} == {a}" if a == b else f"{a} <= {f.name} <= {b}")
            elif a is not None:
                out.append(f"{f.name} >= {a}")
            elif b is not None:
                out.append(f"{f.name} <= {b}")
            continue
        if lo is not None and hi is not None:
            out.append(f"{format_number(lo)} < {f.name} <= {format_number(hi)}")
        elif lo is not None:
            out.append(f"{f.name} > {format_number(lo)}")
        elif hi is not None:
            out.append(f"{f.name} <= {format_number(hi)}")
    return out
