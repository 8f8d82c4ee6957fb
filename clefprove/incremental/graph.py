"""The graph of subtrees shared between model versions, and structural changes.

:func:`subtree_graph` builds a :class:`networkx.DiGraph` whose nodes are subtree hashes (hex;
see :mod:`clefprove.incremental.merkle`) and whose edges go from a split to its two children.
Each graph node records where it occurs in each model version (``at``: version label -> node
indices), so a subtree present in both versions is one graph node: the shared structure.

:func:`structural_changes` walks OLD and NEW from the root in parallel.  Where the subtree
hashes agree the walk stops (nothing below changed); where both nodes are the same split it
descends into both children; anywhere else it reports one change at that position:

* ``changed``: both leaves with a different action or confidence, or both splits with a
  different condition (the subtree was replaced);
* ``added``: OLD has a leaf where NEW has a split (a subtree was grown);
* ``removed``: OLD has a split where NEW has a leaf (a subtree was pruned).

A replacement subtree that already existed somewhere in OLD is reported with ``moved_from``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from clefprove.incremental import merkle
from clefprove.model.describe import condition, format_number
from clefprove.model.types import Model, Node, NodeKind


def subtree_graph(models: dict[str, Model]) -> nx.DiGraph:
    """A DiGraph of the subtrees of every model in *models* (label -> model), keyed by hash."""
    g = nx.DiGraph()
    for label, model in models.items():
        hexes = merkle.hexes(merkle.subtree_hashes(model))
        counts = merkle.leaf_counts(model)
        nodes = model.nodes
        kind = nodes["kind"]
        for i, h in enumerate(hexes):
            if h not in g:
                g.add_node(h, leaves=int(counts[i]), leaf=bool(kind[i] == NodeKind.LEAF), at={})
            g.nodes[h]["at"].setdefault(label, []).append(i)
        for i, h in enumerate(hexes):
            if kind[i] != NodeKind.LEAF:
                g.add_edge(h, hexes[int(nodes["left"][i])], side="left")
                g.add_edge(h, hexes[int(nodes["right"][i])], side="right")
    return g


def shared_stats(g: nx.DiGraph, old: str, new: str) -> dict[str, int]:
    """How much of NEW is made of subtrees that also occur in OLD (maximal shared subtrees)."""
    shared = [h for h, d in g.nodes(data=True) if old in d["at"] and new in d["at"]]
    shared_set = set(shared)
    maximal = [h for h in shared if not any(p in shared_set for p in g.predecessors(h))]
    new_nodes = sum(len(d["at"].get(new, ())) for _, d in g.nodes(data=True))
    covered = sum(len(g.nodes[h]["at"][new]) * _size(g, h) for h in maximal)
    return {
        "new_nodes": new_nodes,
        "shared_subtrees": len(maximal),
        "new_nodes_in_shared_subtrees": min(covered, new_nodes),
    }


def _size(g: nx.DiGraph, h: str) -> int:
    """Number of tree nodes in the subtree *h* (leaves * 2 - 1 for a binary tree)."""
    return 2 * int(g.nodes[h]["leaves"]) - 1


@dataclass(frozen=True)
class Change:
    """One structural change at a position of the tree."""

    kind: str  # added | removed | changed
    path: tuple[str, ...]  # split conditions from the root to this position
    old: str  # readable summary of the OLD node (subtree)
    new: str  # readable summary of the NEW node (subtree)
    old_node: int
    new_node: int
    old_leaves: int
    new_leaves: int
    moved_from: tuple[str, ...] | None = None  # path in OLD where the new subtree already was

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "path": list(self.path),
            "old": self.old,
            "new": self.new,
            "old_node": self.old_node,
            "new_node": self.new_node,
            "old_leaves": self.old_leaves,
            "new_leaves": self.new_leaves,
        }
        if self.moved_from is not None:
            out["moved_from"] = list(self.moved_from)
        return out


def summary(model: Model, index: int) -> str:
    """``leaf: allow (confidence 0.98)`` or ``split: client_rtt_ms <= 300 (7 leaves)``."""
    n = model.node(index)
    if n.is_leaf:
        return f"leaf: {model.actions[n.action]} (confidence {format_number(n.confidence)})"
    leaves = int(merkle.leaf_counts(model)[index])
    return f"split: {condition(model, n, True)} ({leaves} leaves)"


def _same_split(om: Model, a: Node, nm: Model, b: Node) -> bool:
    if a.kind != b.kind or a.is_leaf:
        return False
    fa, fb = om.features[a.feature], nm.features[b.feature]
    if fa.name != fb.name:
        return False
    if a.kind is NodeKind.NUMERIC:
        return a.threshold == b.threshold
    return {fa.values[c] for c in a.categories} == {fb.values[c] for c in b.categories}


def _path_in(model: Model, index: int) -> tuple[str, ...]:
    from clefprove.geometry.boxes import path_to

    return tuple(condition(model, n, left) for n, left in path_to(model, index))


def structural_changes(old: Model, new: Model, g: nx.DiGraph | None = None) -> list[Change]:
    """Changes from *old* to *new* in tree order of NEW (see module docstring)."""
    ho = merkle.subtree_hashes(old)
    hn = merkle.subtree_hashes(new)
    old_hex = None
    if g is None:
        old_hex = {h: i for i, h in reversed(list(enumerate(merkle.hexes(ho))))}
    counts_o, counts_n = merkle.leaf_counts(old), merkle.leaf_counts(new)
    out: list[Change] = []
    stack: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, ())]
    while stack:
        i, j, path = stack.pop()
        if bytes(ho[i]) == bytes(hn[j]):
            continue
        a, b = old.node(i), new.node(j)
        if _same_split(old, a, new, b):
            # Right pushed first so that the left side is reported first (tree order).
            stack.append((a.right, b.right, (*path, condition(new, b, False))))
            stack.append((a.left, b.left, (*path, condition(new, b, True))))
            continue
        if a.is_leaf and not b.is_leaf:
            kind = "added"
        elif b.is_leaf and not a.is_leaf:
            kind = "removed"
        else:
            kind = "changed"
        moved = None
        if not b.is_leaf:
            h = bytes(hn[j]).hex()
            if g is not None:
                at = g.nodes[h]["at"].get("old") if h in g else None
                k = at[0] if at else None
            else:
                assert old_hex is not None
                k = old_hex.get(h)
            if k is not None:
                moved = _path_in(old, k)
        out.append(
            Change(
                kind,
                path,
                summary(old, i),
                summary(new, j),
                i,
                j,
                int(counts_o[i]),
                int(counts_n[j]),
                moved,
            )
        )
    return out
