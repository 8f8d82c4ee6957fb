"""The Python mirror of the Coq checker: sound against exhaustive enumeration, and exact
(complete) where it should be; cross-checked against the Z3 verifier on float domains."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.coq_export import mirror
from clefprove.coq_export.terms import (
    eval_tree,
    evalf,
    from_checked,
    in_domain,
    model_domain,
    model_tree,
)
from clefprove.dsl import checked as ck

from .coqgen import MIXED_FEATURES, SMALL_FEATURES, random_formula, random_model


def all_inputs(model) -> list[list[Fraction]]:
    ranges = [range(int(f.min), int(f.max) + 1) for f in model.features]
    return [[Fraction(v) for v in p] for p in itertools.product(*ranges)]


def truth(model, w, e) -> bool:
    tree, dom = model_tree(model), model_domain(model)
    for x in all_inputs(model):
        assert in_domain(dom, x)
        a, c, _ = eval_tree(tree, x)
        if evalf(w, x, a, c) and not evalf(e, x, a, c):
            return False
    return True


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_sound_and_complete_on_enumerable_domains(seed: int) -> None:
    rng = random.Random(seed)
    model = random_model(rng, SMALL_FEATURES, depth=rng.randint(0, 5))
    w = from_checked(random_formula(rng, model))
    e = from_checked(random_formula(rng, model))
    proved = mirror.check(model_domain(model), model_tree(model), w, e)
    holds = truth(model, w, e)
    if proved:
        assert holds, "the checker proved an invariant that enumeration refutes"
    if not mirror.uses_fm(w, e):
        # Interval reasoning with integer rounding and code sets is exact here.
        assert proved == holds


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32))
def test_agrees_with_the_verifier_on_float_domains(seed: int) -> None:
    from clefprove.verify.api import check_invariant

    rng = random.Random(seed)
    model = random_model(rng, MIXED_FEATURES, depth=rng.randint(1, 5))
    inv = ck.CheckedInvariant(
        "r", None, "<t>", 1, 1, random_formula(rng, model), random_formula(rng, model)
    )
    proved = mirror.check(
        model_domain(model), model_tree(model), from_checked(inv.when), from_checked(inv.ensure)
    )
    verdict = check_invariant(model, inv, counterexamples=1).status
    if proved:
        assert verdict == "holds"
    if verdict == "violated":
        assert not proved


def test_failures_name_the_leaf_and_term() -> None:
    rng = random.Random(7)
    model = random_model(rng, SMALL_FEATURES, depth=3)
    w = from_checked(ck.Const(True))
    e = from_checked(ck.ActionIn(frozenset()))  # no action satisfies this
    failures: list[mirror.Failure] = []
    assert not mirror.check(model_domain(model), model_tree(model), w, e, failures)
    assert failures and all(f.term == [] for f in failures)


@pytest.mark.parametrize(
    ("lo", "los", "hi", "his", "empty"),
    [
        (Fraction(1, 2), False, Fraction(1, 2), False, True),  # integral: no whole number
        (Fraction(1), True, Fraction(2), False, False),  # (1, 2] contains 2
        (Fraction(1), True, Fraction(2), True, True),  # (1, 2) has no whole number
        (Fraction(-3, 2), False, Fraction(-1, 2), False, False),  # contains -1
    ],
)
def test_integer_rounding(lo, los, hi, his, empty) -> None:
    box = mirror.FBox(True, lo, los, hi, his, None)
    assert mirror.fbox_empty(box) is empty


def test_fourier_motzkin_refutes_a_sum() -> None:
    # x0 in [0, 1], x1 in [0, 1] (reals): x0 + x1 >= 3 is infeasible; x0 + x1 >= 2 is not.
    bx = [mirror.FBox(False, Fraction(0), False, Fraction(1), False, None)] * 2
    infeasible = [("lin", ((0, Fraction(-1)), (1, Fraction(-1))), Fraction(3), False)]
    feasible = [("lin", ((0, Fraction(-1)), (1, Fraction(-1))), Fraction(2), False)]
    assert mirror.term_infeasible(bx, infeasible)
    assert not mirror.term_infeasible(bx, feasible)
    strict = [("lin", ((0, Fraction(-1)), (1, Fraction(-1))), Fraction(2), True)]
    assert mirror.term_infeasible(bx, strict)  # x0 + x1 > 2 is infeasible
