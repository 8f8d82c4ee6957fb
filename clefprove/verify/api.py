"""``clefprove.check``: verify invariants on a model and return a :class:`Report`.

Per invariant: decide every leaf (see :mod:`clefprove.verify.engine`), then

* ``violated`` when some leaf is VIOLATED: up to K counterexamples, one per violating leaf in
  tree order, each decoded to a complete input and confirmed by the evaluator;
* ``unknown`` when no leaf is VIOLATED but some leaf is UNKNOWN;
* ``holds`` otherwise, with ``vacuous`` when no input in the domain satisfies ``when``.

Relational invariants (``monotone``/``stable``/``independent``) are decided the same way on leaf
*pairs* by :mod:`clefprove.verify.relational`.  Every invariant goes through the run strategy;
the proof cache keeps relational results as whole results (an unchanged model costs a lookup),
on a single tree as on an ensemble.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.errors import ClefproveError
from clefprove.frozen import frozen
from clefprove.geometry.boxes import LazyLeafBoxes, LeafBoxes, leaf_boxes
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Model
from clefprove.verify import engine as eg
from clefprove.verify.evidence import (
    confirm,
    evaluator_for,
    region_describer,
    when_is_vacuous,
)
from clefprove.verify.options import CheckOptions
from clefprove.verify.pool import run_pool
from clefprove.verify.verdicts import (
    Counterexample,
    InvariantResult,
    ModelInfo,
    Report,
    settled_result,
)

#: The outcome codes as plain ints for numpy (an IntEnum operand makes numpy look up
#: attributes on the enum class, which Python 3.11 answers slowly).
_VIOLATED = int(eg.VIOLATED)
_UNKNOWN = int(eg.UNKNOWN)


InvariantsArg = (
    ck.CheckedProgram
    | ck.CheckedInvariant
    | Sequence[ck.CheckedInvariant]
    | str
    | os.PathLike[str]
    | Sequence[str | os.PathLike[str]]
)


def _program(model: Model | Ensemble, invariants: InvariantsArg) -> ck.CheckedProgram:
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
    from clefprove.model.loading import load_any

    return load_any(model), str(model)


def check(
    model: Model | Ensemble | str | os.PathLike[str],
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
    the run strategy (a ``clefprove.incremental.ProofCache`` re-checks incrementally); without
    one, every leaf (every leaf pair of a relational invariant) is decided afresh
    (:class:`FreshRun`).
    """
    start = time.perf_counter()
    mdl, path = _model(model)
    program = _program(mdl, invariants)
    if not program.invariants:
        # SPEC §4: an invariant set that defines no invariant is bad input; a report of no
        # invariant would pass every gate (load_invariants refuses such files likewise).
        raise ClefproveError("no invariant to check: the invariant set defines no invariant")
    settings = options or CheckOptions(
        counterexamples=counterexamples,
        timeout=timeout,
        rlimit=rlimit,
        jobs=jobs,
        smtlib_dir=smtlib,
    )
    if settings.smtlib_dir is not None:
        Path(settings.smtlib_dir).mkdir(parents=True, exist_ok=True)
    # One process pool for the whole run (started by the first stage that fans out).
    with run_pool(settings.jobs):
        return _check(mdl, path, program, settings, start, model_path, progress, cache)


def _check(
    mdl: Model | Ensemble,
    path: str,
    program: ck.CheckedProgram,
    settings: CheckOptions,
    start: float,
    model_path: str | None,
    progress: Callable[[int, int], None] | None,
    cache: RunStrategy | None,
) -> Report:
    strategy: RunStrategy = cache if cache is not None else FreshRun()
    # Ensembles: branch and bound per invariant (verify/ensemble.py; relational ones:
    # verify/ensemble_rel.py); the proof cache reuses whole results, and earlier partitions
    # for the non-relational ones.
    decided = (
        strategy.check_ensemble_program(mdl, program, settings)
        if isinstance(mdl, Ensemble)
        else strategy.check_program(mdl, program, settings)
    )
    results: list[InvariantResult] = []
    for res in decided:
        results.append(res)
        if progress is not None:
            progress(len(results), len(program.invariants))
    # An ensemble's leaf is one of many trees': no region.
    region_of = (lambda _leaf, _x: ()) if isinstance(mdl, Ensemble) else region_describer(mdl)

    # The cache stores inputs as sorted JSON objects: restore declaration order, so that every
    # output is the same whether a result was decided now or reused.
    order = tuple(f.name for f in mdl.features)
    return Report(
        _model_info(mdl, model_path or path),
        tuple(r.finished(order, region_of) for r in results),
        time.perf_counter() - start,
    )


def _model_info(model: Model | Ensemble, path: str) -> ModelInfo:
    return ModelInfo(
        path,
        model.sha256,
        model.n_nodes,
        model.n_leaves,
        model.name,
        model.version,
        model.from_source,
    )


class RunStrategy(Protocol):
    """How :func:`check` decides the invariants of a program: afresh (:class:`FreshRun`) or
    reusing proofs (``clefprove.incremental.ProofCache``).  Results come in program order and
    equal a fresh run's."""

    def check_program(
        self, model: Model, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterable[InvariantResult]: ...

    def check_ensemble_program(
        self, model: Ensemble, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterable[InvariantResult]:
        """The same for a tree ensemble."""
        ...


@frozen
class FreshRun:
    """Every leaf of every invariant decided in this run (over *boxes* when given)."""

    boxes: LeafBoxes | None = None

    def check_program(
        self, model: Model, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterator[InvariantResult]:
        boxes = self.boxes if self.boxes is not None else leaf_boxes(model)
        k = options.counterexamples
        for inv in program.invariants:
            if inv.is_relational:
                from clefprove.verify.relational import check_relational  # only when needed

                yield check_relational(model, inv, program.severity, options, k, boxes)
            else:
                yield check_invariant(model, inv, options, k, boxes)

    def check_ensemble_program(
        self, model: Ensemble, program: ck.CheckedProgram, options: CheckOptions
    ) -> Iterator[InvariantResult]:
        from clefprove.verify.ensemble import check_ensemble_invariant

        k = options.counterexamples
        for inv in program.invariants:
            if inv.is_relational:
                from clefprove.verify.ensemble_rel import check_ensemble_relational

                yield check_ensemble_relational(model, inv, program.severity, options, k)
            else:
                yield check_ensemble_invariant(model, inv, options, k)


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
    alone: Callable[[int], np.ndarray | None] | None = None,
    earlier: Mapping[int, np.ndarray] | None = None,
    shown: Callable[[int, np.ndarray], None] | None = None,
) -> InvariantResult:
    """Turn per-leaf outcomes into an :class:`InvariantResult` (counterexamples, vacuity).

    *vacuity* (the incremental checker's hook) answers "is ``when`` unsatisfiable?" in place of
    :func:`when_is_vacuous`, e.g. from the proof cache.  *alone* (the same checker's) gives
    the witness of a solver asked about solver row *r* alone in place of
    :func:`engine.isolated_witness` (the same answer, kept in the proof cache).  *earlier*
    (the same checker's) holds the input printed for a box-decided row on an unchanged leaf
    before, tried first (a function of the box: what :func:`engine.witness` gives); *shown*
    is told the row and input of every confirmed counterexample of such a row."""
    inv = prep.invariant
    warnings: list[str] = []
    status = pv.status.copy()
    # Rows that may be unsafe: the listed ones of a re-check (a few), else every row.
    listed = pv.listed
    seen = status if listed is None else status[listed]
    violating = np.flatnonzero(seen == _VIOLATED)
    if listed is not None:
        violating = listed[violating]
    cexs: list[Counterexample] = []
    if violating.size:
        evaluator = evaluator_for(model)
        if isinstance(pv.boxes, LazyLeafBoxes):
            first = violating[: max(1, counterexamples)]
            if earlier is not None:
                first = np.array([r for r in first.tolist() if r not in earlier], dtype=np.int64)
            pv.boxes.prefetch(first)
        # At least one witness is confirmed, even with no counterexample to print, so that
        # 'violated' always rests on a checked input.
        confirmed = 0
        for r in violating.tolist():
            if confirmed >= max(1, counterexamples):
                break
            cex = _confirmed(model, evaluator, prep, pv, r, settings, alone, earlier, shown)
            if cex is None:  # a bug: never print it, never claim the path
                status[r] = _UNKNOWN
                warnings.append(
                    f"internal: unconfirmed witness for leaf {int(pv.boxes.leaves[r])}; "
                    "path reported as unknown"
                )
                continue
            confirmed += 1
            if len(cexs) < counterexamples:
                cexs.append(cex)
    seen = status if listed is None else status[listed]
    n_violating = int(np.count_nonzero(seen == _VIOLATED))
    n_unknown = int(np.count_nonzero(seen == _UNKNOWN))
    return settled_result(
        inv,
        n_violating,
        n_unknown,
        vacuity or (lambda: when_is_vacuous(model, prep, pv.boxes, settings)),
        warnings,
        cexs,
        time.perf_counter() - t0,
        paths_checked=pv.boxes.size,
        paths_reused=paths_reused,
        solver_paths=pv.solver_paths,
    )


def _confirmed(
    model: Model,
    evaluator: Any,
    prep: eg.Prepared,
    pv: eg.PathVerdicts,
    r: int,
    settings: CheckOptions,
    alone: Callable[[int], np.ndarray | None] | None = None,
    earlier: Mapping[int, np.ndarray] | None = None,
    shown: Callable[[int, np.ndarray], None] | None = None,
) -> Counterexample | None:
    """The counterexample of violating row *r*, confirmed by the evaluator, or None.  For a
    solver row: the witness of a solver asked about the row alone (the same in every run),
    then the run's own witness should that one not be confirmed.  For a box row: the input
    in *earlier*, else (or if it is not confirmed) :func:`engine.witness`'s."""
    leaf = int(pv.boxes.leaves[r])
    solver_row = r in pv.witnesses
    if not solver_row and earlier is not None and (kept := earlier.get(r)) is not None:
        cex = confirm(model, evaluator, prep.invariant, leaf, np.array(kept, dtype=np.float64))
        if cex is not None:
            if shown is not None:
                shown(r, kept)
            return cex
    x = alone(r) if alone is not None and solver_row else None
    if x is None:
        x = eg.witness(model, prep, pv, r, None if alone is not None else settings)
    cex = confirm(model, evaluator, prep.invariant, leaf, x)
    if cex is None and solver_row:
        cex = confirm(model, evaluator, prep.invariant, leaf, pv.witnesses[r])
    elif cex is not None and not solver_row and shown is not None:
        shown(r, x)
    return cex


def iter_results(report: Report) -> Iterable[InvariantResult]:
    return iter(report.results)
