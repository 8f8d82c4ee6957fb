"""SMT-LIB replay: standalone per-path scripts with their recorded answer, replayed by cvc5."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from pathlib import Path

import pytest

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import load_invariants
from clefprove.model.loading import load_model
from clefprove.model.types import NodeKind
from clefprove.smt.smtlib import (
    expected_status,
    query_name,
    query_script,
    replay,
    write_query,
)

from .coqgen import SMALL_FEATURES, invariant, random_formula, random_model

pytest.importorskip("cvc5")

ROOT = Path(__file__).resolve().parents[2]


def leaf_of(model, x: list[Fraction]) -> int:
    i = 0
    while True:
        node = model.node(i)
        if node.kind is NodeKind.LEAF:
            return i
        if node.kind is NodeKind.NUMERIC:
            i = node.left if x[node.feature] <= Fraction(node.threshold) else node.right
        else:
            i = node.left if int(x[node.feature]) in node.categories else node.right


def enumerated_status(model, inv: ck.CheckedInvariant, leaf: int) -> str:
    """sat iff some input of the (small, all-integral) domain reaches *leaf* and breaks *inv*."""
    ranges = [range(int(f.min), int(f.max) + 1) for f in model.features]
    node = model.node(leaf)
    for p in itertools.product(*ranges):
        x = [Fraction(v) for v in p]
        if leaf_of(model, x) != leaf:
            continue
        if ck.evaluate(inv.when, x, node.action, node.confidence) and not ck.evaluate(
            inv.ensure, x, node.action, node.confidence
        ):
            return "sat"
    return "unsat"


@pytest.mark.slow
def test_replay_matches_enumeration(tmp_path: Path) -> None:
    rng = random.Random(6)
    seen = set()
    count = 0
    while count < 60:
        model = random_model(rng, SMALL_FEATURES, depth=rng.randint(1, 4))
        inv = invariant("r", random_formula(rng, model), random_formula(rng, model))
        for leaf in (n.index for n in model.iter_nodes() if n.is_leaf):
            status = enumerated_status(model, inv, leaf)
            path = write_query(
                tmp_path, query_name(f"q{count}", leaf), query_script(model, inv, leaf, status)
            )
            script = path.read_text()
            assert expected_status(script) == status
            assert replay(script) == status, script
            seen.add(status)
            count += 1
    assert seen == {"sat", "unsat"}


def test_replay_matches_z3_on_the_spec_invariants() -> None:
    """The answers Z3 gives on the scripts (as check --smtlib records them) are cvc5's."""
    z3 = pytest.importorskip("z3")
    example = ROOT / "examples" / "edge-allow-block.clef"
    model = load_model(example if example.exists() else ROOT / "examples" / "spec-toy.json")
    program = load_invariants([ROOT / "invariants"], model)
    leaves = [n.index for n in model.iter_nodes() if n.is_leaf]
    rng = random.Random(3)
    answers = set()
    for inv in program.invariants:
        for leaf in rng.sample(leaves, min(8, len(leaves))):
            solver = z3.Solver()
            solver.from_string(query_script(model, inv, leaf))
            status = str(solver.check())
            script = query_script(model, inv, leaf, status)
            assert replay(script) == status
            answers.add(status)
    assert "unsat" in answers


def test_relational_and_non_leaf_queries_are_refused(spec_model) -> None:
    from clefprove.errors import ClefproveError

    inv = invariant("m", ck.Const(True), ck.Const(True))
    with pytest.raises(ClefproveError):
        query_script(spec_model, inv, 0)  # the root is a split
    rel = ck.CheckedInvariant("m", None, "<t>", 1, 1, ck.Const(True), ck.Monotone(0))
    with pytest.raises(ClefproveError):
        query_script(spec_model, rel, 1)
