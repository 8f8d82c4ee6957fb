"""``ast.exact_fraction`` and ``ast.negated`` (the parser's number of a box literal, the
checker's ``-k``) fill a Fraction's slots directly: the Fractions ``Fraction(value)`` and
``-q`` make, equal, with the same hash, repr, numerator, denominator and type, on every
finite float; and the checked box literals of a long ``when`` are the constructors' ones."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from clefprove.dsl import ast
from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source

finite = st.floats(allow_nan=False, allow_infinity=False)
EDGES = [0.0, -0.0, 5e-324, -5e-324, 2.0**-1022, 1.7976931348623157e308, -1.0, 0.1, 2.0**53 + 2]


def _same(got: Fraction, want: Fraction) -> None:
    assert type(got) is Fraction
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert (got.numerator, got.denominator) == (want.numerator, want.denominator)
    assert type(got.numerator) is int and type(got.denominator) is int
    assert got.denominator > 0 and math.gcd(got.numerator, got.denominator) == 1
    assert float(got) == float(want) and str(got) == str(want)


def test_the_slots_are_filled() -> None:
    assert ast.FRACTION_SLOTS  # CPython's fractions: the shortcut is the one in use


@given(finite)
def test_exact_fraction_is_the_constructors(v: float) -> None:
    _same(ast.exact_fraction(v), Fraction(v))
    _same(ast.negated(ast.exact_fraction(v)), -Fraction(v))


def test_edges() -> None:
    for v in EDGES:
        _same(ast.exact_fraction(v), Fraction(v))
        _same(ast.negated(Fraction(v)), -Fraction(v))
        q = ast.exact_fraction(v)
        assert q + 1 == Fraction(v) + 1 and q * 3 == Fraction(v) * 3  # arithmetic works on it


@given(st.fractions())
def test_negated_of_any_fraction(q: Fraction) -> None:
    _same(ast.negated(q), -q)


FEATS = [{"name": f"f{j}", "type": "float", "min": -10.0, "max": 10.0, "default": 0.0}
         for j in range(4)]  # fmt: skip


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["<", "<=", ">", ">="]),
                          st.floats(-20, 20)), min_size=2, max_size=12))  # fmt: skip
def test_box_literals_check_as_constructed(lits: list[tuple[int, str, float]]) -> None:
    """Every checked box literal equals ``Compare(Linear(((f, +-1),), +-k), strict)`` built
    with the Fraction constructors, its Fractions of exact type."""
    model = compile_source(
        {"features": FEATS, "actions": ["a", "b"], "tree": {"action": "a", "confidence": 1.0}}
    )
    cond = " and ".join(f"f{j} {op} {v!r}" for j, op, v in lits)
    inv = parse_text(f"invariant p:\n  when {cond}\n  ensure action == a\n", model).invariants[0]
    when = inv.when
    assert isinstance(when, ck.And)
    for (j, op, v), got in zip(lits, when.args, strict=True):
        k = Fraction(v)
        if op in ("<=", "<"):
            want = ck.Compare(ck.Linear(((j, Fraction(1)),), -k), op == "<")
        else:
            want = ck.Compare(ck.Linear(((j, Fraction(-1)),), k), op == ">")
        assert got == want and repr(got) == repr(want)
        assert type(got.expr.const) is Fraction
