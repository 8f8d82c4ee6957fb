"""The subtrees shared between model versions, and structural changes.

Subtrees are compared by their hashes (:mod:`clefprove.incremental.merkle`): equal hashes, equal
subtrees.  Seen as one graph over both versions (a node per distinct subtree hash, an edge from
a split to each child, a subtree present in both versions one node: the shared structure),
:func:`shared_stats` counts the maximal shared subtrees (shared, under no shared parent in
either version) and how many of NEW's nodes they cover.  It is computed with array operations
on the hash rows (sorting 32-byte keys), never a node-by-node graph: a diff of two 1M-node trees
costs what sorting their hashes costs.

:func:`structural_changes` walks OLD and NEW from the root in parallel.  Where the subtree
hashes agree the walk stops (nothing below changed); where both nodes are the same split it
descends into both children; anywhere else it reports one change at that position:

* ``changed``: both leaves with a different action or confidence, or both splits with a
  different condition (the subtree was replaced);
* ``added``: OLD has a leaf where NEW has a split (a subtree was grown);
* ``removed``: OLD has a split where NEW has a leaf (a subtree was pruned).

A replacement subtree that already existed somewhere in OLD is reported with ``moved_from``
(its first occurrence in OLD, in node order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import links, path_to
from clefprove.incremental import merkle
from clefprove.model.describe import condition, format_number
from clefprove.model.types import Model, Node, NodeKind


def _keys(hashes: np.ndarray) -> np.ndarray:
    """One 32-byte key per node (numpy void: compared and sorted as bytes)."""
    rows = np.ascontiguousarray(hashes, dtype=np.uint8)
    return rows.view(np.dtype((np.void, rows.shape[1]))).ravel()


def _under_shared(parent: np.ndarray, shared: np.ndarray) -> np.ndarray:
    """Per node: its parent is a shared subtree."""
    out = np.zeros(len(parent), dtype=bool)
    has = parent >= 0
    out[has] = shared[parent[has]]
    return out


def shared_stats(old: Model, new: Model) -> dict[str, int]:
    """How much of NEW is made of subtrees that also occur in OLD (maximal shared subtrees)."""
    ko, kn = _keys(merkle.subtree_hashes(old)), _keys(merkle.subtree_hashes(new))
    shared_o, shared_n = np.isin(ko, kn), np.isin(kn, ko)
    # a shared subtree is maximal unless one of its occurrences, in either version, hangs
    # under a shared parent
    inner = np.concatenate(
        (
            ko[shared_o & _under_shared(links(old).parent, shared_o)],
            kn[shared_n & _under_shared(links(new).parent, shared_n)],
        )
    )
    maximal = shared_n & ~np.isin(kn, inner)
    new_nodes = len(kn)
    sizes = 2 * merkle.leaf_counts(new)[maximal].astype(np.int64) - 1
    return {
        "new_nodes": new_nodes,
        "shared_subtrees": len(np.unique(kn[maximal])),
        "new_nodes_in_shared_subtrees": min(int(sizes.sum()), new_nodes),
    }


@frozen
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
    return tuple(condition(model, n, left) for n, left in path_to(model, index))


def structural_changes(old: Model, new: Model) -> list[Change]:
    """Changes from *old* to *new* in tree order of NEW (see module docstring)."""
    ho = merkle.subtree_hashes(old)
    hn = merkle.subtree_hashes(new)
    counts_o, counts_n = merkle.leaf_counts(old), merkle.leaf_counts(new)
    first_in_old = _FirstOccurrence(_keys(ho))
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
            k = first_in_old.find(_keys(hn[j : j + 1])[0])
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


class _FirstOccurrence:
    """The first node (in node order) of a subtree hash among *keys*: a stable sort, built on
    the first lookup (most diffs replace no split by an existing subtree)."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys
        self.sorted: tuple[np.ndarray, np.ndarray] | None = None

    def find(self, key: np.ndarray) -> int | None:
        if self.sorted is None:
            order = np.argsort(self.keys, kind="stable")
            self.sorted = order, self.keys[order]
        order, keys = self.sorted
        at = int(np.searchsorted(keys, key, side="left"))
        if at < len(keys) and keys[at] == key:
            return int(order[at])
        return None
