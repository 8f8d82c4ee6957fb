"""Exact float64 bounds of rationals."""

from __future__ import annotations

import math
from fractions import Fraction


def float_le(q: Fraction) -> float:
    """The largest float64 that is <= q (q within float range)."""
    f = float(q)
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_ge(q: Fraction) -> float:
    """The smallest float64 that is >= q (q within float range)."""
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f
