"""Exact float64 bounds of rationals, and the float64 values in order."""

from __future__ import annotations

import math
import struct
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


def value_bound(q: Fraction, upper: bool, strict: bool, integral: bool) -> Fraction | float:
    """The closed bound in the value set equivalent to ``x <= q`` (``x < q`` when *strict*;
    ``x >= q`` / ``x > q`` when not *upper*): an integer for an integral variable, else a
    float64 (+-inf when no float64 satisfies it; *q* within the float range +- 1)."""
    if integral:
        if upper:
            return Fraction((math.ceil(q) - 1) if strict else math.floor(q))
        return Fraction((math.floor(q) + 1) if strict else math.ceil(q))
    if upper:
        b = float_le(q)
        if strict and math.isfinite(b) and Fraction(b) == q:
            b = math.nextafter(b, -math.inf)
        return b
    b = float_ge(q)
    if strict and math.isfinite(b) and Fraction(b) == q:
        b = math.nextafter(b, math.inf)
    return b


def float_key(v: float) -> int:
    """The position of *v* among the float64 values in order (``-0.0`` and ``0.0`` are one)."""
    bits: int
    (bits,) = struct.unpack("<q", struct.pack("<d", v))
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def float_at(key: int) -> float:
    """The float64 at position *key* (inverse of :func:`float_key`)."""
    bits = key if key >= 0 else (-key) | -0x8000_0000_0000_0000
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def value_count(lo: float, hi: float, integral: bool) -> int:
    """The number of input values in ``[lo, hi]``: whole numbers, or float64 values."""
    if hi < lo:
        return 0
    if integral:
        return math.floor(hi) - math.ceil(lo) + 1
    return float_key(hi) - float_key(lo) + 1
