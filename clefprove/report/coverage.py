"""The share of the input domain that each action covers.

The measure is the uniform product measure over the declared domain: a leaf's share is the
product over features of the fraction of that feature's domain its box keeps
(:func:`clefprove.geometry.measure.box_shares`: length for floats, whole values for ints and
bools, codes for categorical features; no overflow on the widest float64 domain).

Infeasible paths have share 0.  The leaves of a tree partition the domain, so the shares of all
leaves add up to 1 (up to float rounding).  It is a geometric measure of the domain, not a
traffic-weighted one: it says how much of the *space of possible inputs* each action claims.
"""

from __future__ import annotations

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import LeafBoxes, leaf_boxes
from clefprove.geometry.measure import box_shares
from clefprove.model.types import Model


@frozen
class ActionShare:
    """One action's part of the domain: its share in [0, 1] and the number of leaves."""

    action: str
    share: float
    leaves: int


def leaf_shares(model: Model, boxes: LeafBoxes | None = None) -> np.ndarray:
    """The domain share of every leaf box (rows of *boxes*; default: all leaves)."""
    if boxes is None:
        boxes = leaf_boxes(model)
    return box_shares(model, boxes.lo, boxes.hi, boxes.cats, boxes.feasible)


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
