"""Relational invariants in the Coq export: the mirror of ``rel_check`` against enumeration
(sound always; exact without ``when`` on whole-number domains), against Coq's own
``rel_check`` (one coqc run), refutations at the verifier's pairs, and an export that
``coqc`` checks end to end."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from pathlib import Path

import pytest

from clefprove.coq_export import mirror
from clefprove.coq_export.render import (
    Namer,
    domain_term,
    formula_term,
    make_names,
    relation_term,
    tree_term,
)
from clefprove.coq_export.terms import (
    CRelation,
    CTree,
    FConst,
    FDom,
    RIndependent,
    RMonotone,
    RStable,
    eval_tree,
    evalf,
    from_checked,
    model_domain,
    model_tree,
)
from clefprove.model.types import Model

from .coqgen import (
    ACTIONS,
    LIBRARY_HEADER,
    SMALL_FEATURES,
    computed_booleans,
    coqc,
    random_formula,
    random_model,
)

ACTS = tuple(range(len(ACTIONS)))


def _relation(rng: random.Random, model: Model) -> CRelation:
    numeric = [i for i, f in enumerate(model.features) if f.type != "categorical"]
    kind = rng.random()
    if kind < 0.35:
        ranks = list(ACTS)
        rng.shuffle(ranks)
        return RMonotone(rng.choice(numeric), tuple(ranks))
    if kind < 0.7:
        return RStable(rng.choice(numeric), Fraction(rng.choice([0.5, 1, 2, 3])))
    return RIndependent(rng.randrange(len(model.features)))


def _values(d: FDom) -> list[Fraction]:
    if d.codes is not None:
        return [Fraction(z) for z in d.codes]
    return [Fraction(v) for v in range(int(d.lo), int(d.hi) + 1)]


def _related(r: CRelation, a: Fraction, b: Fraction) -> bool:
    match r:
        case RMonotone():
            return a <= b
        case RStable(_, dl):
            return abs(a - b) <= dl
    return True


def _ok(r: CRelation, a: int, b: int) -> bool:
    return r.ranks[a] <= r.ranks[b] if isinstance(r, RMonotone) else a == b


def _holds(dom: tuple[FDom, ...], tree: CTree, w: object, r: CRelation) -> bool:
    """Every pair of inputs of the (enumerable) domain, by brute force."""
    f = r.feature
    axes = [_values(d) for d in dom]
    for x in itertools.product(*axes):
        xs = list(x)
        a, c, _ = eval_tree(tree, xs)
        if not evalf(w, xs, a, c):  # type: ignore[arg-type]
            continue
        for v in axes[f]:
            if not _related(r, xs[f], v):
                continue
            ys = [*xs[:f], v, *xs[f + 1 :]]
            b, c2, _ = eval_tree(tree, ys)
            if evalf(w, ys, b, c2) and not _ok(r, a, b):  # type: ignore[arg-type]
                return False
    return True


def _cases(seed: int, n: int, with_when: bool) -> list[tuple[Model, object, CRelation]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        model = random_model(rng, SMALL_FEATURES, depth=rng.randint(3, 6))
        w = (
            from_checked(random_formula(rng, model, depth=rng.randint(0, 2)))
            if with_when and rng.random() < 0.5
            else FConst(True)
        )
        out.append((model, w, _relation(rng, model)))
    return out


def test_a_relational_proof_holds_on_every_pair() -> None:
    proved = unproved = 0
    for model, w, r in _cases(20261204, 120, with_when=True):
        dom, tree = model_domain(model), model_tree(model)
        if mirror.rel_check(dom, tree, w, r, ACTS):  # type: ignore[arg-type]
            proved += 1
            assert _holds(dom, tree, w, r), (tree, w, r)
        else:
            unproved += 1
    assert proved >= 20 and unproved >= 10


def test_without_when_the_relational_checker_is_exact_on_whole_numbers() -> None:
    """Without ``when`` the relaxed box is exactly the set of partners of the leaf's box
    (every feature whole, so no open end is approached), and the check decides."""
    for model, w, r in _cases(7, 120, with_when=False):
        dom, tree = model_domain(model), model_tree(model)
        assert mirror.rel_check(dom, tree, w, r, ACTS) == _holds(dom, tree, w, r), (tree, r)


@pytest.mark.coq
@pytest.mark.slow
def test_mirror_equals_coq_rel_check(coq_dir: Path) -> None:
    lines = list(LIBRARY_HEADER)
    expected = []
    for i, (model, w, r) in enumerate(_cases(31, 40, with_when=True)):
        dom, tree = model_domain(model), model_tree(model)
        expected.append(mirror.rel_check(dom, tree, w, r, ACTS))  # type: ignore[arg-type]
        names = make_names(model, Namer())
        acts = "[" + "; ".join(f"{a}%N" for a in ACTS) + "]"
        lines += [
            f"Definition d{i} : domain := {domain_term(dom, names)}.",
            f"Definition t{i} : tree := {tree_term(tree)}.",
            f"Definition w{i} : formula := {formula_term(w)}.",  # type: ignore[arg-type]
            f"Definition r{i} : relation := {relation_term(r)}.",
            f"Eval vm_compute in rel_check d{i} t{i} w{i} r{i} {acts}.",
        ]
    (coq_dir / "AgreeRel.v").write_text("\n".join(lines) + "\n")
    out = coqc(coq_dir, "AgreeRel.v")
    assert out.returncode == 0, out.stderr
    got = computed_booleans(out.stdout)
    assert got == expected
    assert any(expected) and not all(expected)


RELATIONAL = """
severity allow < challenge < rate_limit < block
invariant tor_raises_severity:
  ensure monotone(is_tor)
invariant slow_ignores_depth:
  when client_rtt_ms > 300
  ensure independent(path_depth)
invariant slow_ignores_tls:
  when client_rtt_ms > 300
  ensure stable(tls_version, 2)
invariant rtt_raises_severity:
  ensure monotone(client_rtt_ms)
invariant depth_shift:
  ensure stable(path_depth, 0.5)
"""

#: On the guarded model of test_export: tor turns allow/challenge into rate_limit; above
#: 300 ms only the user agent matters; a non-script tor client under 300 ms is rate-limited,
#: above it challenged (severity drops); depth 5 and 6 decide differently, 5.5 apart.
EXPECTED = {
    "tor_raises_severity": "proved",
    "slow_ignores_depth": "proved",
    "slow_ignores_tls": "proved",
    "rtt_raises_severity": "refuted",
    "depth_shift": "proved",
}


def _guarded() -> tuple[Model, object]:
    from clefprove.dsl.loader import parse_text
    from clefprove.model.source import compile_source

    from .test_export import guarded_source

    model = compile_source(guarded_source())
    return model, parse_text(RELATIONAL, model)


def test_relational_export_agrees_with_the_verifier() -> None:
    from clefprove.coq_export.export import export_coq
    from clefprove.verify.api import check

    model, program = _guarded()
    export = export_coq(model, program)  # type: ignore[arg-type]
    assert {r.name: str(r.status) for r in export.results} == EXPECTED
    report = check(model, program)  # type: ignore[arg-type]
    verdicts = {r.invariant: r.status for r in report.results}
    for name, status in EXPECTED.items():
        assert (verdicts[name] == "holds") == (status == "proved"), name
    assert export.exit_code == 1
    # The refuting pair differs in the relation's feature only, and the evaluator agrees.
    (refuted,) = [r for r in export.results if r.status == "refuted"]
    assert refuted.counterexample is not None


@pytest.mark.coq
def test_relational_export_checks_and_a_changed_leaf_does_not(coq_dir: Path) -> None:
    from clefprove.coq_export.export import export_coq

    from .test_export import assumptions, build

    model, program = _guarded()
    export = export_coq(model, program)  # type: ignore[arg-type]
    export.write(coq_dir)
    assert build(coq_dir) == ""
    assert assumptions(coq_dir) == ["Closed under the global context"] * len(EXPECTED)
    text = (coq_dir / "Invariants.v").read_text()
    assert "Theorem tor_raises_severity : rel_valid model_domain model_tree" in text
    assert "Theorem rtt_raises_severity_fails : ~ rel_valid model_domain model_tree" in text
    # The tor leaf (rate_limit) becomes allow: raising is_tor now lowers the severity, and
    # the kernel's computation of rel_check fails (the proof was computed, not trusted).
    model_v = (coq_dir / "Model.v").read_text()
    assert model_v.count("(Leaf 2%N") == 1
    (coq_dir / "Model.v").write_text(model_v.replace("(Leaf 2%N", "(Leaf 0%N"))
    assert "rel_check model_domain model_tree tor_raises_severity_w" in build(coq_dir)


def test_a_refuting_pair_breaks_the_invariant_on_every_check() -> None:
    """Every pair the mirror of ``rel_refute`` accepts is a violation by enumeration's own
    reading (in the domain, related, both meeting when, actions the relation does not
    allow); and a pair that is not related is never accepted."""
    accepted = 0
    rng = random.Random(5)
    for model, w, r in _cases(99, 120, with_when=True):
        dom, tree = model_domain(model), model_tree(model)
        axes = [_values(d) for d in dom]
        for _ in range(30):
            x = [rng.choice(a) for a in axes]
            y = list(x)
            y[r.feature] = rng.choice(axes[r.feature])
            if rng.random() < 0.2:  # another feature differs too
                g = (r.feature + 1) % len(axes)
                y[g] = rng.choice(axes[g])
            got = mirror.rel_refute(dom, tree, w, r, x, y)  # type: ignore[arg-type]
            a, c, _ = eval_tree(tree, x)
            b, c2, _ = eval_tree(tree, y)
            want = (
                all(i == r.feature or p == q for i, (p, q) in enumerate(zip(x, y, strict=True)))
                and _related(r, x[r.feature], y[r.feature])
                and evalf(w, x, a, c)  # type: ignore[arg-type]
                and evalf(w, y, b, c2)  # type: ignore[arg-type]
                and not _ok(r, a, b)
            )
            assert got == want
            accepted += got
    assert accepted >= 20
