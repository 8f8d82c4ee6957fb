"""The mirror computes exactly what Coq's ``check`` computes (one coqc run, many cases).

This is what makes "never emit a proof that does not check" hold: the exporter writes a
theorem only when the mirror says ``check`` is ``true``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clefprove.coq_export import mirror
from clefprove.coq_export.render import (
    Namer,
    domain_term,
    formula_term,
    make_names,
    tree_term,
)
from clefprove.coq_export.terms import from_checked, model_domain, model_tree

from .coqgen import (
    LIBRARY_HEADER,
    MIXED_FEATURES,
    SMALL_FEATURES,
    computed_booleans,
    coqc,
    random_formula,
    random_model,
)

pytestmark = pytest.mark.coq

CASES = 80


@pytest.mark.slow
def test_mirror_equals_coq_check(coq_dir: Path) -> None:
    rng = random.Random(20261129)
    lines = list(LIBRARY_HEADER)
    expected = []
    for i in range(CASES):
        features = SMALL_FEATURES if i % 2 else MIXED_FEATURES
        model = random_model(rng, features, depth=rng.randint(0, 5))
        w = from_checked(random_formula(rng, model, depth=rng.randint(0, 3)))
        e = from_checked(random_formula(rng, model, depth=rng.randint(0, 3)))
        dom, tree = model_domain(model), model_tree(model)
        expected.append(mirror.check(dom, tree, w, e))
        names = make_names(model, Namer())
        lines += [
            f"Definition d{i} : domain := {domain_term(dom, names)}.",
            f"Definition t{i} : tree := {tree_term(tree)}.",
            f"Definition w{i} : formula := {formula_term(w)}.",
            f"Definition e{i} : formula := {formula_term(e)}.",
            f"Eval vm_compute in check d{i} t{i} w{i} e{i}.",
        ]
    (coq_dir / "Agree.v").write_text("\n".join(lines) + "\n")
    out = coqc(coq_dir, "Agree.v")
    assert out.returncode == 0, out.stderr
    got = computed_booleans(out.stdout)
    assert len(got) == CASES
    assert got == expected
    # The sample exercises both outcomes.
    assert any(expected) and not all(expected)
