"""``clefprove.check``: verify invariants on a model and return a :class:`Report`.

Per invariant: decide every leaf (see :mod:`clefprove.verify.engine`), then

* ``violated`` when some leaf is VIOLATED: up to K counterexamples, one per violating leaf in
  tree order, each decoded to a complete input and confirmed by the evaluator;
* ``unknown`` when no leaf is VIOLATED but some leaf is UNKNOWN;
* ``holds`` otherwise, with ``vacuous`` when no input in the domain satisfies ``when``.

Relational invariants (``monotone``/``stable``/``independent``) are decided the same way on leaf
*pairs* by :mod:`clefprove.verify.relational`, always afresh (never through the proof cache).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.geometry.boxes import Box, LeafBoxes, leaf_boxes, path_to
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions
from clefprove.verify.relational import check_relational
from clefprove.verify.verdicts import (
    Counterexample,
    InvariantResult,
    ModelInfo,
    Report,
    settle,
)

InvariantsArg = (
    ck.CheckedProgram
    | ck.CheckedInvariant
    | Sequence[ck.CheckedInvariant]
    | str
    | os.PathLike[str]
    | Sequence[str | os.PathLike[str]]
)


def _program(model: Model, invariants: InvariantsArg) -> ck.CheckedProgram:
    if isinstance(invariants, ck.CheckedProgram):
        return invariants
    if isinstance(invariants, ck.CheckedInvariant):
        return ck.CheckedProgram((invariants,))
    if isinstance(invariants, str | os.PathLike):
        invariants = [invariants]
    items = list(invariants)
    if all(isinstance(i, ck.CheckedInvariant) for i in items):
        return ck.CheckedProgram(tuple(items))  # type: ignore[arg-type]
    from clefprove.dsl.loader import load_invariants

    return load_invariants([str(p) for p in items], model)


def _model(model: Model | Ensemble | str | os.PathLike[str]) -> tuple[Model | Ensemble, str]:
    if isinstance(model, Model | Ensemble):
        return model, str(model.metadata.get("path", model.name))
    from clefprove.model.clef import load_any

    return load_any(model), str(model)


def check(
    model: Model | str | os.PathLike[str],
    invariants: InvariantsArg,
    *,
    counterexamples: int = 3,
    timeout: float | None = None,
    jobs: int = 1,
    rlimit: int = 50_000_000,
    smtlib: str | None = None,
    model_path: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache: RunStrategy | None = None,
    options: CheckOptions | None = None,
) -> Report:
    """Check every invariant on *model* (a Model or a .clef/.json path); see module docstring.

    *invariants* is a CheckedProgram, checked invariants, or .inv file/directory paths.
    *options* (a :class:`CheckOptions`) replaces the keyword limits when given.  *cache* is
    the run strategy for the non-relational invariants (a ``clefprove.incremental.ProofCache``
    re-checks incrementally); without one, every leaf is decided afresh (:class:`FreshRun`).
    Relational invariants are decided on leaf pairs (:mod:`clefprove.verify.relational`),
    always afresh: the proof cache only sees the other invariants.
    """
    start = time.perf_counter()
    mdl, path = _model(model)
    program = _program(mdl, invariants)
    settings = options or CheckOptions(
        counterexamples=counterexamples,
        timeout=timeout,
        rlimit=rlimit,
        jobs=jobs,
        smtlib_dir=smtlib,
    )
    counterexamples = settings.counterexamples
    if settings.smtlib_dir is not None:
        Path(settings.smtlib_dir).mkdir(parents=True, exist_ok=True)
    total = len(program.invariants)
    if isinstance(mdl, Ensemble):
        # Ensembles: branch and bound per invariant (verify/ensemble.py), always afresh: the
        # proof cache stores per-subtree outcomes of single trees.
        from clefprove.verify.ensemble import check_ensemble_invariant, relational_unknown

        results: list[InvariantResult] = []
        for i, inv in enumerate(program.invariants):
            results.append(
                relational_unknown(mdl, inv)
                if inv.is_relational
                else check_ensemble_invariant(mdl, inv, settings, counterexamples)
            )
            if progress is not None:
                progress(i + 1, total)
        info = ModelInfo(
            model_path or path,
            mdl.sha256,
            mdl.n_nodes,
            mdl.n_leaves,
            mdl.name,
            mdl.version,
            mdl.from_source,
        )
        return Report(info, tuple(results), time.perf_counter() - start)
    relational = any(inv.is_relational for inv in program.invariants)
    boxes = leaf_boxes(mdl) if cache is None or relational else None
    strategy: RunStrategy = cache if cache is not None else FreshRun(boxes)
    # Relational invariants are decided afresh here, merged back in program order.
    plain = ck.CheckedProgram(
        tuple(inv for inv in program.invariants if not inv.is_relational), program.severity
    )
    decided = iter(strategy.check_program(mdl, plain, settings))
    results: list[InvariantResult] = []
    for i, inv in enumerate(program.invariants):
        if inv.is_relational:
            assert boxes is not None
            results.append(
                check_relational(mdl, inv, program.severity, settings, counterexamples, boxes)
            )
        else:
            results.append(next(decided))
        if progress is not None:
            progress(i + 1, total)
    info = ModelInfo(
        model_path or path,
        mdl.sha256,
        mdl.n_nodes,
        mdl.n_leaves,
        mdl.name,
        mdl.version,
        mdl.from_source,
    )
    # The cache stores inputs as sorted JSON objects: restore declaration order, so that every
    # output is the same whether a result was decided now or reused.
    order = tuple(f.name for f in mdl.features)
    regions: dict[int, tuple[str, ...]] = {}

    def region_of(leaf: int) -> tuple[str, ...]:
        if leaf not in regions:
            regions[leaf] = describe_region(mdl, leaf)
        return regions[leaf]

    return Report(
        info, tuple(r.finished(order, region_of) for r in results), time.perf_counter() - start
    )


class RunStrategy(Protocol):
    """How :func:`check` decides the non-relational invariants of a program: afresh
    (:class:`FreshRun`) or reusing proofs (``clefprove.incremental.ProofCache``).  Results come
    in program order and equal a fresh run's."""

    def check_program(
        self, model: Model, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterable[InvariantResult]: ...


@dataclass(frozen=True)
class FreshRun:
    """Every leaf of every invariant decided in this run (over *boxes* when given)."""

    boxes: LeafBoxes | None = None

    def check_program(
        self, model: Model, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterator[InvariantResult]:
        boxes = self.boxes if self.boxes is not None else leaf_boxes(model)
        for inv in program.invariants:
            yield check_invariant(model, inv, options, options.counterexamples, boxes)


def check_invariant(
    model: Model,
    inv: ck.CheckedInvariant,
    settings: CheckOptions | None = None,
    counterexamples: int = 3,
    boxes: LeafBoxes | None = None,
) -> InvariantResult:
    """The verdict on one non-relational invariant over the whole tree."""
    t0 = time.perf_counter()
    settings = settings or CheckOptions()
    prep = eg.prepare(model, inv, settings.dnf_cap)
    if boxes is None:
        boxes = leaf_boxes(model)
    pv = eg.decide(model, prep, boxes, settings)
    return finish(model, prep, pv, settings, counterexamples, t0)


def finish(
    model: Model,
    prep: eg.Prepared,
    pv: eg.PathVerdicts,
    settings: CheckOptions,
    counterexamples: int,
    t0: float,
    paths_reused: int = 0,
    vacuity: Callable[[], bool] | None = None,
) -> InvariantResult:
    """Turn per-leaf outcomes into an :class:`InvariantResult` (counterexamples, vacuity).

    *vacuity* (the incremental checker's hook) answers "is ``when`` unsatisfiable?" in place of
    :func:`when_is_vacuous`, e.g. from the proof cache."""
    inv = prep.invariant
    warnings: list[str] = []
    status = pv.status.copy()
    violating = np.flatnonzero(status == eg.VIOLATED)
    cexs: list[Counterexample] = []
    if violating.size:
        evaluator = _evaluator(model)
        for r in violating.tolist():
            if len(cexs) >= counterexamples:
                break
            cex = _confirmed(model, evaluator, prep, pv, r, settings)
            if cex is None:  # a bug: never print it, never claim the path
                status[r] = eg.UNKNOWN
                warnings.append(
                    f"internal: unconfirmed witness for leaf {int(pv.boxes.leaves[r])}; "
                    "path reported as unknown"
                )
                continue
            cexs.append(cex)
        if counterexamples == 0:
            # Still confirm one witness, so that 'violated' always rests on a checked input.
            r = int(violating[0])
            if _confirmed(model, evaluator, prep, pv, r, settings) is None:
                status[r] = eg.UNKNOWN
    n_violating = int(np.count_nonzero(status == eg.VIOLATED))
    n_unknown = int(np.count_nonzero(status == eg.UNKNOWN))
    verdict, vacuous = settle(
        f"{inv.file}:{inv.line}",
        inv.name,
        n_violating,
        n_unknown,
        vacuity or (lambda: when_is_vacuous(model, prep, pv.boxes, settings)),
        warnings,
    )
    return InvariantResult(
        invariant=inv.name,
        file=inv.file,
        line=inv.line,
        column=inv.column,
        status=verdict,
        vacuous=vacuous,
        violating_paths=n_violating,
        unknown_paths=n_unknown,
        counterexamples=tuple(cexs),
        seconds=time.perf_counter() - t0,
        paths_checked=pv.boxes.size,
        paths_reused=paths_reused,
        description=inv.description,
        solver_paths=pv.solver_paths,
        warnings=tuple(warnings),
    )


def when_invariant(inv: ck.CheckedInvariant) -> ck.CheckedInvariant:
    """``when`` of *inv* as an invariant of its own (``ensure false``): a leaf "violates" it
    when some input of the leaf satisfies ``when``.  One object per *inv* (kept by *inv*), so
    that its normal form is memoised with it."""
    return inv.derived.get(
        ("verify.when",),
        lambda: ck.CheckedInvariant(
            inv.name + "-when", None, inv.file, inv.line, 1, inv.when, ck.Const(False)
        ),
    )


def _confirmed(
    model: Model,
    evaluator: Any,
    prep: eg.Prepared,
    pv: eg.PathVerdicts,
    r: int,
    settings: CheckOptions,
) -> Counterexample | None:
    """The counterexample of violating row *r*, confirmed by the evaluator, or None.  For a
    solver row: the witness of a solver asked about the row alone (the same in every run),
    then the run's own witness should that one not be confirmed."""
    leaf = int(pv.boxes.leaves[r])
    cex = confirm(model, evaluator, prep.invariant, leaf, eg.witness(model, prep, pv, r, settings))
    if cex is None and r in pv.witnesses:
        cex = confirm(model, evaluator, prep.invariant, leaf, pv.witnesses[r])
    return cex


def when_is_vacuous(
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, settings: CheckOptions
) -> bool:
    """True only when ``when`` is proved unsatisfiable on the whole domain."""
    wprep = eg.prepare(model, when_invariant(prep.invariant), settings.dnf_cap)
    n_feat = len(model.features)
    if nm.uses_decision(wprep.violation, n_feat):
        pv = eg.decide(model, wprep, boxes, settings)
    else:
        pv = eg.decide(model, wprep, domain_boxes(model), settings)
    return bool(np.all(pv.status == eg.SAFE))


def when_is_vacuous_on_domain(model: Model, prep: eg.Prepared, settings: eg.Settings) -> bool:
    """True only when ``when`` (which must not mention the decision) is proved unsatisfiable
    on the domain box; False (not proved) when it mentions the decision."""
    wprep = eg.prepare(model, when_invariant(prep.invariant), settings.dnf_cap)
    if nm.uses_decision(wprep.violation, len(model.features)):
        return False
    pv = eg.decide(model, wprep, domain_boxes(model), settings)
    return bool(np.all(pv.status == eg.SAFE))


def domain_boxes(model: Model) -> LeafBoxes:
    """The whole domain as a single box (confidence column [0, 1], no action)."""
    d = Box.domain(model)
    lo = np.append(d.lo, 0.0)[None, :]
    hi = np.append(d.hi, 1.0)[None, :]
    return LeafBoxes(
        np.array([0]),
        lo,
        hi,
        {f: m[None, :] for f, m in d.cats.items()},
        np.array([-1]),
        np.array([not d.empty]),
    )


# ---------------------------------------------------------------- counterexamples


def _evaluator(model: Model) -> Any:
    """The model's evaluator (built once, kept by the model)."""
    from clefprove.eval.evaluator import Evaluator

    return model.derived.get(("eval.evaluator",), lambda: Evaluator(model))


def decode(model: Model, x: np.ndarray) -> dict[str, Any]:
    """Encoded input -> the JSON record a user writes."""
    return {f.name: f.decode(float(x[i])) for i, f in enumerate(model.features)}


def encode_record(model: Model, record: dict[str, Any]) -> np.ndarray:
    out = np.empty(len(model.features), dtype=np.float64)
    for i, f in enumerate(model.features):
        v = record[f.name]
        out[i] = f.values.index(v) if f.type is FeatureType.CATEGORICAL else float(v)
    return out


def confirm(
    model: Model, evaluator: Any, inv: ck.CheckedInvariant, leaf: int, x: np.ndarray
) -> Counterexample | None:
    """A counterexample for *x* if the evaluator confirms it (else None): the decoded input
    re-encodes to *x*, is in the domain, reaches *leaf*, satisfies ``when``, breaks ``ensure``."""
    record = decode(model, x)
    xe = encode_record(model, record)
    if not np.array_equal(xe, x):
        return None
    for i, f in enumerate(model.features):
        if not (f.min <= xe[i] <= f.max):
            return None
    d = evaluator.evaluate_one(xe)
    if int(d.leaf) != leaf:
        return None
    xs = xe.tolist()
    if not ck.evaluate(inv.when, xs, d.action, d.confidence):
        return None
    if ck.evaluate(inv.ensure, xs, d.action, d.confidence):  # type: ignore[arg-type]
        return None
    return Counterexample(
        record, model.actions[d.action], float(d.confidence), leaf, describe_path(model, leaf)
    )


def describe_region(model: Model, leaf: int) -> tuple[str, ...]:
    """The box of inputs that reach *leaf*, one bound pair per feature its path narrows."""
    from clefprove.model.describe import region_conditions

    return tuple(region_conditions(model, [*(n for n, _ in path_to(model, leaf)), leaf]))


def describe_path(model: Model, leaf: int) -> tuple[str, ...]:
    """Readable split conditions from the root to *leaf*."""
    from clefprove.model.describe import condition

    return tuple(condition(model, node, left) for node, left in path_to(model, leaf))


def iter_results(report: Report) -> Iterable[InvariantResult]:
    return iter(report.results)
