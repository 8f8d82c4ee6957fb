"""fix_to_floats: turning a rational solver answer into float64 values, or giving up."""

from __future__ import annotations

from fractions import Fraction

import z3

from clefprove.smt.paths import fix_to_floats, model_values


def _solver(*constraints):
    ctx = z3.Context()
    x, y = z3.Real("x", ctx), z3.Real("y", ctx)
    s = z3.Solver(ctx=ctx)
    for c in constraints:
        s.add(c(x, y))
    assert s.check() == z3.sat
    return s, ctx, [x, y]


def test_a_rational_answer_is_moved_to_a_float64_neighbour():
    s, ctx, slots = _solver(lambda x, y: x > 0.1, lambda x, y: x < 0.3, lambda x, y: y == 0)
    depth = len(s.assertions())
    vals = [Fraction(1, 5), Fraction(0)]  # 1/5 is not a float64
    fixed = fix_to_floats(s, ctx, slots, vals, [0, 1], [(0.0, 1.0), (0.0, 1.0)])
    assert fixed is not None
    assert Fraction(float(fixed[0])) == fixed[0] and abs(fixed[0] - Fraction(1, 5)) < 1e-16
    assert fixed[1] == 0
    assert len(s.assertions()) == depth  # the solver is left as found


def test_between_adjacent_floats_there_is_no_answer():
    # Only reals strictly between 0.2 and the next float64 satisfy these.
    lo, hi = Fraction(0.2), Fraction(float.fromhex("0x1.999999999999bp-3"))
    s, ctx, slots = _solver(lambda x, y: x > lo, lambda x, y: x < hi, lambda x, y: y == 0)
    vals = model_values(s.model(), slots)
    assert fix_to_floats(s, ctx, slots, vals, [0], [(0.0, 1.0), (0.0, 1.0)]) is None


def test_a_float_answer_is_kept():
    s, ctx, slots = _solver(lambda x, y: x == 0.5, lambda x, y: y == x + 1)
    vals = model_values(s.model(), slots)
    assert fix_to_floats(s, ctx, slots, vals, [0, 1], [(0.0, 1.0), (0.0, 2.0)]) == [
        Fraction(1, 2),
        Fraction(3, 2),
    ]
