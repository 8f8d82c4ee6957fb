"""The share of the input domain a box covers, without overflow.

The measure is the uniform product measure over the declared domain: the product over
features of the fraction of the feature's domain the box keeps,

* ``float``: interval length, ``(hi - lo) / (max - min)`` (1 when ``min == max``);
* ``int`` and ``bool``: whole values, ``(hi - lo + 1) / (max - min + 1)``;
* ``categorical``: codes, ``|codes| / |vocabulary|``.

``max - min`` overflows to infinity on a float domain wider than the float64 range allows
(``[-1.79e308, 1.79e308]``), which made the share ``inf / inf = nan``.  Such a domain is
measured on halved ends: ``hi/2 - lo/2`` over ``max/2 - min/2``; halving a float64 of
magnitude >= 2**-1021 is exact, so the only error is the rounding of one subtraction and one
division per feature (relative 2**-52 each), and every factor lies in [0, 1]: no NaN, no
infinity, and a split at 0 of ``[-max, max]`` is exactly one half.
"""

from __future__ import annotations

import math

import numpy as np

from clefprove.model.types import FeatureType, Model


def box_shares(
    model: Model,
    lo: np.ndarray,
    hi: np.ndarray,
    cats: dict[int, np.ndarray],
    feasible: np.ndarray | None = None,
) -> np.ndarray:
    """(k,) share in [0, 1] of each box (rows of *lo*/*hi*, code masks in *cats*: a feature
    absent from *cats* keeps its whole vocabulary); rows not *feasible* have share 0."""
    k = lo.shape[0]
    out = np.ones(k) if feasible is None else np.where(feasible, 1.0, 0.0)
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            if i in cats:
                out = out * (np.asarray(cats[i]).sum(axis=1) / len(f.values))
            continue
        a, b = lo[:, i], hi[:, i]
        if f.type is FeatureType.FLOAT:
            if not f.max > f.min:
                frac = np.where(b >= a, 1.0, 0.0)
            elif math.isfinite(f.max - f.min):
                frac = np.clip(b - a, 0.0, None) / (f.max - f.min)
            else:  # the width overflows float64: measure on halved ends (see module doc)
                frac = np.clip(b / 2 - a / 2, 0.0, None) / (f.max / 2 - f.min / 2)
        else:  # int, bool: whole values (int bounds lie within +-2**53: exact)
            count = np.clip(np.floor(b) - np.ceil(a) + 1.0, 0.0, None)
            frac = count / (math.floor(f.max) - math.ceil(f.min) + 1.0)
        out = out * frac
    return np.clip(out, 0.0, 1.0)
