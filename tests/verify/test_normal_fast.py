"""The normal form's float shortcut for one-variable literals (``Normalizer._unit_bound``) gives
the literal of the exact rational route (``_compare_exact``) wherever it applies, and the
prepared forms (violation, when, the vacuity check's when-invariant) are those of the
two-pass construction they replace."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify.evidence import when_invariant

FEATURES = [
    {"name": "i", "type": "int", "min": -3, "max": 4, "default": 0},
    {"name": "x", "type": "float", "min": -1.5, "max": 2.0, "default": 0.0},
    {"name": "t", "type": "float", "min": 0.0, "max": 0.0, "default": 0.0},
    {"name": "b", "type": "bool", "default": False},
    {"name": "big", "type": "float", "min": -1.7e308, "max": 1.7e308, "default": 0.0},
]


def _model():
    return compile_source(
        {
            "features": FEATURES,
            "actions": ["a", "z"],
            "tree": {"action": "a", "confidence": 0.75},
        }
    )


MODEL = _model()
NORM = nm.Normalizer(MODEL)

_SPECIAL = [
    0.0,
    -0.0,
    0.5,
    -1.5,
    2.0,
    4.0,
    -3.0,
    1e-320,
    -5e-324,
    1.7e308,
    -1.7e308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    math.nextafter(2.0, 3.0),
    math.nextafter(-1.5, -2.0),
    3.5,
    -2.5,
]
floats = st.one_of(
    st.sampled_from(_SPECIAL),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-5.0, 5.0, allow_nan=False),
    st.integers(-6, 6).map(float),
)
consts = st.one_of(
    floats.map(Fraction),
    st.fractions(max_denominator=7),  # not always a float64: the shortcut must step aside
    st.integers(-(10**400), 10**400).map(Fraction),
)


@settings(max_examples=600, deadline=None)
@given(
    var=st.sampled_from([0, 1, 2, 3, 4, ck.CONFIDENCE]),
    c=st.sampled_from([Fraction(1), Fraction(-1), Fraction(2), Fraction(1, 2), Fraction(-3)]),
    k=consts,
    strict=st.booleans(),
)
def test_unit_bound_equals_exact_route(var, c, k, strict):
    expr = ck.Linear(((var, c),), k)
    exact = NORM._compare_exact(expr, strict)
    fast = NORM._unit_bound(expr, strict)
    if fast is not None:
        assert fast == exact
        assert type(fast) is type(exact)
        if isinstance(fast, nm.Bound):
            assert math.copysign(1.0, fast.bound) == math.copysign(1.0, exact.bound)
    applies = c in (1, -1) and k.denominator & (k.denominator - 1) == 0 and abs(k) < 2**1024
    if applies and Fraction(float(k)) == k:
        assert fast is not None  # the shortcut is taken on every float64 box literal
    assert NORM._compare(expr, strict) == exact


def test_prepared_forms_equal_the_two_pass_construction():
    text = (
        "invariant p:\n  when x >= 0.25 and x <= 1.75 and i > -2 and (b or not x < 0.5)\n"
        "  ensure action == a or confidence >= 0.5\n"
    )
    inv = parse_text(text, MODEL).invariants[0]
    prep = eg.prepare(MODEL, inv)
    norm = nm.Normalizer(MODEL)
    assert prep.violation == norm.nnf(ck.And((inv.when, ck.Not(inv.ensure_formula))))
    assert prep.when == norm.nnf(inv.when)
    winv = when_invariant(inv)
    wprep = eg.prepare_when(MODEL, winv, prep)
    assert wprep.violation == norm.nnf(ck.And((winv.when, ck.Not(winv.ensure_formula))))
    assert wprep.when == norm.nnf(winv.when)
    assert wprep.conjuncts == nm.dnf(wprep.violation, 64)
    assert eg.prepare(MODEL, winv) is wprep  # one memo key for both routes


_COORD = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-1074, 1.7e308, -1.7e308, math.inf, -math.inf]),
)
_COEFF = st.one_of(
    st.fractions(max_denominator=10**6).filter(lambda q: q != 0),
    st.sampled_from([Fraction(1, 2**1080), Fraction(-3, 2**1100), Fraction(2**1030), Fraction(7)]),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_lin_extremes_are_the_two_lin_extreme_calls(data):
    """The shared-work minimum and maximum signs of a linear literal over boxes equal
    lin_extreme's, on boxes with huge, tiny, infinite and empty ends, coefficients below the
    float64 range and near-zero sums (the exact fallback)."""
    k = data.draw(st.integers(2, 4))
    n = data.draw(st.integers(1, 6))
    terms = tuple((j, data.draw(_COEFF)) for j in range(k))
    const = data.draw(st.one_of(st.fractions(max_denominator=1000), st.just(Fraction(0))))
    lit = nm.Lin(terms, const, data.draw(st.booleans()))
    width = k + 1
    lo = np.array([[data.draw(_COORD) for _ in range(width)] for _ in range(n)])
    hi = np.array([[data.draw(_COORD) for _ in range(width)] for _ in range(n)])
    if data.draw(st.booleans()):  # boxes on which the sum is zero somewhere: exact rows
        lo[:, :k] = 0.0
        hi[:, :k] = 0.0
    smin, smax = nm.lin_extremes(lit, lo, hi)
    assert smin.dtype == np.int8 and smax.dtype == np.int8
    assert smin.tolist() == nm.lin_extreme(lit, lo, hi, minimum=True).tolist()
    assert smax.tolist() == nm.lin_extreme(lit, lo, hi, minimum=False).tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-1, 9), max_size=12),
    st.frozensets(st.integers(0, 9), max_size=5),
)
def test_action_membership_is_isin(actions, allowed):
    """The table lookup of an action set (its table sized by the set, grown when a leaf's
    action is above every member) against np.isin; -1 (no action) is never a member."""
    acts = np.array(actions, dtype=np.int64)
    expected = np.isin(acts, sorted(allowed)) & (acts >= 0)
    assert nm._member(acts, allowed).tolist() == expected.tolist()


def test_prepared_forms_are_kept_per_domain_by_a_hashed_key():
    """The memo key of a prepared invariant is the model's Domain (hash computed once): two
    models of one domain share the invariant's prepared form, a model of another does not."""
    other = compile_source(
        {
            "features": FEATURES[:2],
            "actions": ["a", "z"],
            "tree": {"action": "z", "confidence": 1.0},
        }
    )
    twin = _model()
    inv = parse_text("invariant p:\n  when i >= 1\n  ensure x <= 1.5\n", MODEL).invariants[0]
    d = eg.domain(MODEL)
    assert eg.domain(MODEL) is d and eg.domain(twin) == d and eg.domain(twin) is not d
    assert hash(d) == hash((MODEL.features, len(MODEL.actions)))
    assert eg.domain(other) != d
    assert eg.prepare(MODEL, inv) is eg.prepare(twin, inv)
    assert eg.prepare(other, inv) is not eg.prepare(MODEL, inv)


# ---------------------------------------------------------------- dnf of a flat conjunction

_LITS = [nm.Bound(0, True, 1.0), nm.Bound(1, False, -2.0), nm.Cat(3, frozenset({1}), 2),
         nm.Act(frozenset({0}))]  # fmt: skip


def _dnf_loop(f: object, cap: int = 64) -> list[tuple[object, ...]] | None:
    """:func:`nm.dnf` as it was, without the flat-conjunction shortcut (the reference)."""
    match f:
        case ck.Const(value):
            return [()] if value else []
        case nm.NOr(args):
            out: list[tuple[object, ...]] = []
            for a in args:
                sub = _dnf_loop(a, cap)
                if sub is None:
                    return None
                out.extend(sub)
                if len(out) > cap:
                    return None
            return out
        case nm.NAnd(args):
            acc: list[tuple[object, ...]] = [()]
            for a in args:
                sub = _dnf_loop(a, cap)
                if sub is None:
                    return None
                acc = [x + y for x in acc for y in sub]
                if len(acc) > cap:
                    return None
            return acc
    return [(f,)]


_formulas = st.recursive(
    st.sampled_from([*_LITS, ck.Const(True), ck.Const(False)]),
    lambda sub: st.one_of(
        st.lists(sub, max_size=5).map(lambda a: nm.NAnd(tuple(a))),
        st.lists(sub, max_size=5).map(lambda a: nm.NOr(tuple(a))),
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(_formulas, st.integers(0, 8))
def test_dnf_equals_the_loop(f: object, cap: int) -> None:
    assert nm.dnf(f, cap) == _dnf_loop(f, cap)


def test_dnf_of_sixty_box_literals() -> None:
    lits = tuple(nm.Bound(j % 30, j % 2 == 0, float(j)) for j in range(60))
    assert nm.dnf(nm.NAnd(lits)) == _dnf_loop(nm.NAnd(lits)) == [lits]
    assert nm.dnf(nm.NAnd(lits), 0) is None
