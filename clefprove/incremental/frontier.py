"""One exact step down a tree for a batch of (node, box) pairs.

The tightening is the one of :func:`clefprove.geometry.boxes.leaf_boxes` (integral features
round, a float feature's right side starts at the next float64 above the threshold), so boxes
built here are the same arrays the verifier builds for the same path.
"""

from __future__ import annotations

import numpy as np

from clefprove.geometry.boxes import tables
from clefprove.model.types import Model, NodeKind


def expand(
    model: Model, fr: np.ndarray, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """Children of the splits *fr* (all left children, then all right children) and their
    boxes: the rows of *lo*, *hi* (k, F) and *cats* (k, V) tightened by each split."""
    nodes = model.nodes
    kind = nodes["kind"]
    tab = tables(model)
    k = fr.size
    children = np.concatenate([nodes["left"][fr], nodes["right"][fr]]).astype(np.int64)
    lo2 = np.concatenate([lo, lo])
    hi2 = np.concatenate([hi, hi])
    f_idx = nodes["feature"][fr].astype(np.int64)
    num = np.flatnonzero(kind[fr] == NodeKind.NUMERIC)
    if num.size:
        fn = f_idx[num]
        hi2[num, fn] = np.minimum(hi2[num, fn], tab.left_hi[fr[num]])
        lo2[num + k, fn] = np.maximum(lo2[num + k, fn], tab.right_lo[fr[num]])
    cats2 = {}
    for f, m in cats.items():
        m2 = np.concatenate([m, m])
        rows = np.flatnonzero((kind[fr] == NodeKind.CATEGORICAL) & (f_idx == f))
        if rows.size:
            width = m.shape[1]
            member = model.membership[
                nodes["aux"][fr[rows]].astype(np.int64)[:, None] + np.arange(width)
            ].astype(bool)
            m2[rows] &= member
            m2[rows + k] &= ~member
        cats2[f] = m2
    return children, lo2, hi2, cats2


def empty_rows(lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]) -> np.ndarray:
    """(k,) bool: which boxes contain no input."""
    empty = np.any(lo > hi, axis=1)
    for m in cats.values():
        empty |= ~m.any(axis=1)
    return empty
