"""The share of the input domain that each action covers.

The measure is the uniform product measure over the declared domain: a leaf's share is the
product over features of the fraction of that feature's domain its box keeps,

* ``float``: interval length, ``(hi - lo) / (max - min)`` (1 when ``min == max``);
* ``int`` and ``bool``: count of whole values, ``(hi - lo + 1) / (max - min + 1)``;
* ``categorical``: count of codes, ``|codes| / |vocabulary|``.

Infeasible paths have share 0.  The leaves of a tree partition the domain, so the shares of all
leaves add up to 1 (up to float rounding).  It is a geometric measure of the domain, not a
traffic-weighted one: it says how much of the *space of possible inputs* each action claims.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clefprove.geometry.boxes import LeafBoxes, cat_mask, leaf_boxes
from clefprove.model.types import FeatureType, Model


@dataclass(frozen=True)
class ActionShare:
    """One action's part of the domain: its share in [0, 1] and the number of leaves."""

    action: str
    share: float
    leaves: int


def leaf_shares(model: Model, boxes: LeafBoxes | None = None) -> np.ndarray:
    """The domain share of every leaf box (rows of *boxes*; default: all leaves)."""
    if boxes is None:
        boxes = leaf_boxes(model)
    share = np.where(boxes.feasible, 1.0, 0.0)
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            frac = cat_mask(boxes.cats, i, boxes.size, len(f.values)).sum(axis=1) / len(f.values)
        else:
            lo, hi = boxes.lo[:, i], boxes.hi[:, i]
            if f.type is FeatureType.FLOAT:
                width = f.max - f.min
                kept = np.clip(hi - lo, 0.0, None)
                frac = kept / width if width > 0 else np.where(hi >= lo, 1.0, 0.0)
            else:  # int, bool: count whole values
                count = np.clip(np.floor(hi) - np.ceil(lo) + 1.0, 0.0, None)
                frac = count / (np.floor(f.max) - np.ceil(f.min) + 1.0)
        share = share * frac
    return share


def action_shares(model: Model, boxes: LeafBoxes | None = None) -> tuple[ActionShare, ...]:
    """Per action (in model order): the domain share it covers and its number of leaves."""
    if boxes is None:
        boxes = leaf_boxes(model)
    shares = leaf_shares(model, boxes)
    n = len(model.actions)
    total = np.bincount(boxes.actions, weights=shares, minlength=n)
    counts = np.bincount(boxes.actions[boxes.feasible], minlength=n)
    return tuple(
        ActionShare(a, float(total[k]), int(counts[k])) for k, a in enumerate(model.actions)
    )
