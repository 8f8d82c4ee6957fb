"""verify/linear: conjunctions of linear literals decided on boxes, against Z3 and enumeration."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl.loader import parse_text
from clefprove.geometry.boxes import leaf_boxes
from clefprove.model.source import compile_source
from clefprove.verify import engine as eg
from clefprove.verify import linear as ln
from clefprove.verify import normal as nm
from clefprove.verify.api import check_invariant
from clefprove.verify.options import CheckOptions
from tests.verify.gen import invariants, models

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FLOAT_ENDS = [0.0, -1.5, 0.1, 0.3, 1.0, 2.0, 1e-3, 7.25, 1e6, math.nextafter(1.0, 2.0)]
COEFFS = [1, -1, 2, -3, Fraction(1, 3), Fraction(-1, 10), 100, -300, Fraction(7, 2), 10**6]


@st.composite
def problems(draw, all_int: bool = False, max_lits: int = 3):
    """(lits, lo, hi, integral): a box over 2-4 columns and 2..max_lits linear literals."""
    n = draw(st.integers(2, 4))
    integral = [all_int or draw(st.booleans()) for _ in range(n)]
    lo, hi = [], []
    for i in range(n):
        if integral[i]:
            a = draw(st.integers(-4, 4))
            b = a + draw(st.integers(0, 4))
        else:
            a = draw(st.sampled_from(FLOAT_ENDS))
            b = draw(st.sampled_from([a, a + 0.5, a + 3.0, math.nextafter(a, math.inf), a * 2 + 1]))
            a, b = min(a, b), max(a, b)
        lo.append(float(a))
        hi.append(float(b))
    m = draw(st.integers(2, max_lits))
    lits: list[nm.Lin] = []
    while len(lits) < m:
        cols = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=n, unique=True)))
        coef = [Fraction(draw(st.sampled_from(COEFFS))) for _ in cols]
        kind = draw(st.integers(0, 3))
        if kind == 0:  # the hyperplane through a corner of the box, exactly
            corner = [Fraction(draw(st.sampled_from([lo[c], hi[c]]))) for c in cols]
            const = -sum((c * v for c, v in zip(coef, corner, strict=True)), Fraction(0))
        else:
            const = Fraction(draw(st.integers(-40, 40)), draw(st.sampled_from([1, 2, 10, 3])))
        strict = draw(st.booleans())
        terms = tuple(zip(cols, coef, strict=True))
        flags = tuple(integral[c] for c in cols)
        lits.append(nm.Lin(terms, const, strict, flags))
        if draw(st.integers(0, 4)) == 0 and len(lits) < m:  # ==: the opposite literal too
            neg = tuple((c, -v) for c, v in terms)
            lits.append(nm.Lin(neg, -const, False, flags))
    return tuple(lits), lo, hi, integral


def _rows(lo: list[float], hi: list[float]) -> nm.Rows:
    # one column more (the confidence), as in the engine
    a = np.array([[*lo, 0.5]], dtype=np.float64)
    b = np.array([[*hi, 0.5]], dtype=np.float64)
    return nm.Rows(a, b, {}, np.zeros(1, dtype=np.int64))


def _holds(lits, x) -> bool:
    for lit in lits:
        v = lit.const + sum(c * Fraction(float(x[col])) for col, c in lit.terms)
        if not (v < 0 if lit.strict else v <= 0):
            return False
    return True


def _in_box(x, lo, hi, integral) -> bool:
    return all(
        lo[i] <= x[i] <= hi[i] and (not integral[i] or float(x[i]).is_integer())
        for i in range(len(lo))
    )


def _z3(lits, lo, hi, integral, closed: bool = False, strict: bool = False):
    """Z3 over the reals (Int for integral columns): sat / unsat.  *closed*: every literal
    ``<= 0``; *strict*: every literal ``< 0``."""
    xs = [z3.Int(f"x{i}") if integral[i] else z3.Real(f"x{i}") for i in range(len(lo))]
    s = z3.Solver()
    for i, x in enumerate(xs):
        s.add(x >= z3.RealVal(Fraction(lo[i])), x <= z3.RealVal(Fraction(hi[i])))
    for lit in lits:
        e = z3.Sum([z3.RealVal(c) * xs[col] for col, c in lit.terms]) + z3.RealVal(lit.const)
        s.add(e < 0 if strict or (lit.strict and not closed) else e <= 0)
    return s.check()


def _float_grid_z3(lits, lo, hi, integral):
    """Z3 with the float columns as IEEE float64 values (converted exactly to reals)."""
    s = z3.Solver()
    xs = []
    for i in range(len(lo)):
        if integral[i]:
            x = z3.Int(f"x{i}")
            xs.append(z3.ToReal(x))
        else:
            fp = z3.FP(f"f{i}", z3.Float64())
            s.add(z3.Not(z3.fpIsNaN(fp)), z3.Not(z3.fpIsInf(fp)))
            xs.append(z3.fpToReal(fp))
        s.add(xs[-1] >= z3.RealVal(Fraction(lo[i])), xs[-1] <= z3.RealVal(Fraction(hi[i])))
    for lit in lits:
        e = z3.Sum([z3.RealVal(c) * xs[col] for col, c in lit.terms]) + z3.RealVal(lit.const)
        s.add(e < 0 if lit.strict else e <= 0)
    s.set("timeout", 5000)
    return s.check()


@SETTINGS
@given(problems())
def test_against_z3_on_random_boxes(problem):
    lits, lo, hi, integral = problem
    res, pts = ln.decide(lits, _rows(lo, hi))
    ref = _z3(lits, lo, hi, integral)
    if res[0] == ln.SAT:
        x = pts[0]
        assert _in_box(x, lo, hi, integral) and _holds(lits, x)
        assert ref == z3.sat
    elif res[0] == ln.UNSAT and ref != z3.unsat:
        # UNSAT is claimed over the float64 / integer value sets (docs/verification.md,
        # "Exactness model"): a box split on an integer column pins literals to float64
        # bounds, so a real solution set with no float64 point (an equality such as
        # x + y == 0.1) is UNSAT.  Such a set is thin: no real point satisfies every
        # literal strictly (a strict point would have float64 points around it in the box).
        assert _z3(lits, lo, hi, integral, strict=True) == z3.unsat
    # two literals over the reals: the dual test is complete for the closed system
    if (
        len(lits) == 2
        and not any(integral)
        and _z3(lits, lo, hi, integral, closed=True) == z3.unsat
    ):
        assert res[0] == ln.UNSAT


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_against_z3_in_float64_semantics(problem):
    lits, lo, hi, integral = problem
    res, _ = ln.decide(lits, _rows(lo, hi))
    if res[0] == ln.UNDECIDED:
        return
    ref = _float_grid_z3(lits, lo, hi, integral)
    if ref != z3.unknown:
        assert (ref == z3.sat) == (res[0] == ln.SAT)


@SETTINGS
@given(problems(all_int=True, max_lits=4))
def test_against_enumeration_on_small_integer_boxes(problem):
    lits, lo, hi, integral = problem
    res, pts = ln.decide(lits, _rows(lo, hi))
    axes = [range(int(a), int(b) + 1) for a, b in zip(lo, hi, strict=True)]
    truth = any(_holds(lits, [*p, 0.5]) for p in itertools.product(*axes))
    if res[0] == ln.SAT:
        assert truth and _in_box(pts[0], lo, hi, integral) and _holds(lits, pts[0])
    elif res[0] == ln.UNSAT:
        assert not truth


def test_vectorised_rows_match_rows_alone():
    rng = np.random.default_rng(3)
    lits = (
        nm.Lin(((0, Fraction(-1)), (1, Fraction(-100))), Fraction(1500), False, (False, True)),
        nm.Lin(((0, Fraction(1)), (2, Fraction(-300))), Fraction(-900), False, (False, False)),
    )
    n = 400
    lo = np.zeros((n, 4))
    hi = np.zeros((n, 4))
    lo[:, 0] = rng.uniform(0, 3000, n)
    hi[:, 0] = lo[:, 0] + rng.uniform(0, 800, n)
    lo[:, 1] = rng.integers(0, 20, n)
    hi[:, 1] = lo[:, 1] + rng.integers(0, 5, n)
    lo[:, 2] = rng.uniform(0, 6, n)
    hi[:, 2] = lo[:, 2] + rng.uniform(0, 2, n)
    rows = nm.Rows(lo, hi, {}, np.zeros(n, dtype=np.int64))
    res, pts = ln.decide(lits, rows)
    assert (res == ln.SAT).sum() > 0 and (res == ln.UNSAT).sum() > 0
    assert (res == ln.UNDECIDED).sum() == 0  # slack everywhere: every box decided
    for r in range(n):
        alone = ln.point(lits, rows, r)
        if res[r] == ln.SAT:
            assert alone is not None and np.array_equal(alone, pts[r])
            ints = [False, True, False]
            assert _in_box(pts[r], lo[r, :3], hi[r, :3], ints) and _holds(lits, pts[r])
        else:
            assert alone is None
            ref = _z3(lits, lo[r, :3].tolist(), hi[r, :3].tolist(), [False, True, False])
            assert ref == z3.unsat


def test_equality_without_a_float64_solution_stays_undecided():
    # x + y == 0.1 with x, y in [0.25, 0.5] shifted: real solutions, and the exact check decides
    lits = (
        nm.Lin(((0, Fraction(1)), (1, Fraction(3))), -Fraction(1, 10), False),
        nm.Lin(((0, Fraction(-1)), (1, Fraction(-3))), Fraction(1, 10), False),
    )
    res, pts = ln.decide(lits, _rows([0.0, 0.0], [0.1, 0.1]))
    # 0.1 (the rational 1/10) is not a float64 sum x + 3y of float64 values it could equal
    # exactly in general: whatever is returned must be exact
    if res[0] == ln.SAT:
        assert _holds(lits, pts[0])
    else:
        assert res[0] == ln.UNDECIDED


# ---------------------------------------------------------------- whole checks


EDGE = """
severity allow < challenge < rate_limit < block
invariant two_linear:
  when x + 100 * d >= 1500 and x - 300 * e <= 900
  ensure action != allow
"""


def _tree(seed: int) -> dict:
    rng = np.random.default_rng(seed)

    def node(depth: int, lo: list[float], hi: list[float]) -> dict:
        if depth == 0 or rng.random() < 0.1:
            return {"action": ["allow", "block"][int(rng.integers(0, 2))], "confidence": 1.0}
        f = int(rng.integers(0, 3))
        t = float(rng.uniform(lo[f], hi[f]))
        if f == 1:
            t = math.floor(t) + 0.5
        left_hi, right_lo = list(hi), list(lo)
        left_hi[f], right_lo[f] = t, t
        return {
            "feature": ["x", "d", "e"][f],
            "threshold": t,
            "left": node(depth - 1, lo, left_hi),
            "right": node(depth - 1, right_lo, hi),
        }

    features = [
        {"name": "x", "type": "float", "min": 0, "max": 4000, "default": 0},
        {"name": "d", "type": "int", "min": 0, "max": 30, "default": 0},
        {"name": "e", "type": "float", "min": 0, "max": 8, "default": 0},
    ]
    return {
        "features": features,
        "actions": ["allow", "challenge", "rate_limit", "block"],
        "tree": node(7, [0.0, 0.0, 0.0], [4000.0, 30.0, 8.0]),
    }


@pytest.mark.parametrize("seed", range(4))
def test_whole_check_same_with_and_without_the_linear_stage(seed):
    model = compile_source(_tree(seed))
    inv = parse_text(EDGE, model, "t.inv").invariants[0]
    prep = eg.prepare(model, inv)
    boxes = leaf_boxes(model)
    on = eg.decide(model, prep, boxes, CheckOptions())
    off = eg.decide(model, prep, boxes, CheckOptions(linear=False))
    assert on.solver_paths < off.solver_paths  # the stage does decide boxes here
    assert np.array_equal(on.status, off.status)
    r_on = check_invariant(model, inv, CheckOptions(counterexamples=5))
    r_off = check_invariant(model, inv, CheckOptions(linear=False, counterexamples=5))
    assert (r_on.status, r_on.violating_paths, r_on.unknown_paths) == (
        r_off.status,
        r_off.violating_paths,
        r_off.unknown_paths,
    )
    assert not r_on.warnings
    assert len(r_on.counterexamples) == len(r_off.counterexamples)
    assert [c.leaf for c in r_on.counterexamples] == [c.leaf for c in r_off.counterexamples]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_models_same_leaf_verdicts_with_and_without(data):
    model = data.draw(models(all_int=False))
    inv = data.draw(invariants(model))
    prep = eg.prepare(model, inv)
    boxes = leaf_boxes(model)
    on = eg.decide(model, prep, boxes, CheckOptions())
    off = eg.decide(model, prep, boxes, CheckOptions(linear=False))
    known = (on.status != eg.UNKNOWN) & (off.status != eg.UNKNOWN)
    assert np.array_equal(on.status[known], off.status[known])
    r = check_invariant(model, inv, CheckOptions(counterexamples=100))
    assert not any("internal" in w for w in r.warnings)  # every witness confirmed


def test_integer_gap_is_decided_by_cases():
    # d in {0, 1}, x in [0, 0.2]: 0.5 <= d + x <= 0.7 has real solutions (d = 0.5), no integer d
    lits = (
        nm.Lin(((0, Fraction(-1)), (1, Fraction(-1))), Fraction(1, 2), False, (True, False)),
        nm.Lin(((0, Fraction(1)), (1, Fraction(1))), -Fraction(7, 10), False, (True, False)),
    )
    rows = _rows([0.0, 0.0], [1.0, 0.2])
    assert ln.decide(lits, rows, split=False)[0][0] == ln.UNDECIDED
    assert ln.decide(lits, rows)[0][0] == ln.UNSAT
    assert _z3(lits, [0.0, 0.0], [1.0, 0.2], [True, False]) == z3.unsat
    # widen x: d = 0, x = 0.5 .. 0.7 now; the first value of d that works gives the witness
    res, pts = ln.decide(lits, _rows([0.0, 0.0], [1.0, 0.6]))
    assert res[0] == ln.SAT and _holds(lits, pts[0]) and pts[0][0] in (0.0, 1.0)


def test_an_equality_with_no_float64_point_is_unsat() -> None:
    """x0 + x1 <= 0 (so x0 = 0) and x0 + x2 == 1/10 on x0 in {0, 1}, x1 = 0, x2 in [0, 0.5]:
    over the reals x2 = 1/10 satisfies it, but no float64 equals 1/10, so no input does."""
    one, tenth = Fraction(1), Fraction(1, 10)
    flags = (True, False)
    lits = (
        nm.Lin(((0, one), (1, one)), Fraction(0), False, flags),
        nm.Lin(((0, one), (2, one)), -tenth, False, flags),
        nm.Lin(((0, -one), (2, -one)), tenth, False, flags),
    )
    lo, hi, integral = [0.0, 0.0, 0.0], [1.0, 0.0, 0.5], [True, False, False]
    res, _ = ln.decide(lits, _rows(lo, hi))
    assert res[0] == ln.UNSAT
    assert _z3(lits, lo, hi, integral) == z3.sat
    assert _z3(lits, lo, hi, integral, strict=True) == z3.unsat
    # with 1/8 (a float64) instead, x2 = 0.125 is an input
    eighth = Fraction(1, 8)
    lits = (lits[0], nm.Lin(lits[1].terms, -eighth, False, flags),
            nm.Lin(lits[2].terms, eighth, False, flags))  # fmt: skip
    res, pts = ln.decide(lits, _rows(lo, hi))
    assert res[0] == ln.SAT and _holds(lits, pts[0])
