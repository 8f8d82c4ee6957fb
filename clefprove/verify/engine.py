"""The per-path engine: decides ``when and not ensure`` on every leaf box of a (sub)tree.

For one invariant and one subtree, every leaf gets one of three outcomes:

* ``SAFE``: no input that reaches the leaf satisfies ``when`` and breaks ``ensure``;
* ``VIOLATED``: some input does, and a float64/int witness that reaches the leaf is known;
* ``UNKNOWN``: the solver hit a limit, or its rational model could not be turned into a
  float64 input that provably breaks the invariant.

The violation condition ``V = when and not ensure`` is normalized once (see
:mod:`clefprove.verify.normal`), then decided in stages, each exact:

1. three-valued evaluation over all leaf boxes at once (numpy): ``V`` false on the whole box is
   SAFE, ``V`` true on the whole box is VIOLATED (any point of the box is a witness);
2. for the remaining leaves, ``V`` as a short DNF: each conjunction is decided per box by
   intersecting the single-variable literals with the box and, when one multi-variable linear
   literal remains, evaluating its minimum at the box's corner; two or more linear literals
   are decided by :mod:`clefprove.verify.linear` (LP duality, exact witnesses, cases on an
   integral column) unless ``CheckOptions.linear`` is off;
3. whatever is left goes to Z3 (:mod:`clefprove.smt`), only imported when needed.

:func:`check_subtree` is the unit the incremental checker calls with a path context.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.geometry.boxes import Box, LeafBoxes, cat_mask, leaf_boxes
from clefprove.geometry.floats import float_at, float_key, value_count
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Feature, FeatureType, Model
from clefprove.status import Decided, LeafOutcome, SolverAnswer
from clefprove.verify import linear as ln
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions

if TYPE_CHECKING:
    from clefprove.smt.paths import Limits, Query

SAFE, VIOLATED, UNKNOWN = LeafOutcome.SAFE, LeafOutcome.VIOLATED, LeafOutcome.UNKNOWN

#: ``how`` codes: the whole box violates / decided by the solver; >= 0 is a DNF conjunct index.
HOW_BOX = Decided.BOX
HOW_SOLVER = Decided.SOLVER
HOW_NONE = Decided.NONE

# The codes as plain ints for numpy (an IntEnum fill value or operand makes numpy look up
# ``__array_function__`` / ``__array_ufunc__`` on the enum class, which Python 3.11's
# EnumType.__getattr__ answers by raising: a few microseconds per call).
_SAFE_CODE, _VIOLATED_CODE = int(SAFE), int(VIOLATED)
_HOW_BOX_CODE, _HOW_NONE_CODE = int(HOW_BOX), int(HOW_NONE)

#: Fan out to worker processes only when at least this many leaves need the solver: below it
#: process start-up and model transfer cost more than they save (docs/verification.md).
PARALLEL_MIN_SOLVER_PATHS = 200

#: The options of a check when none are given.
DEFAULTS = CheckOptions()


@frozen(eq=False)
class Prepared:
    """One invariant compiled for one model."""

    invariant: ck.CheckedInvariant
    violation: object  # normalized V
    when: object  # normalized when
    conjuncts: list[tuple[object, ...]] | None
    tag: str = "query"  # names SMT-LIB dumps


@frozen
class Domain:
    """What a prepared invariant depends on of its model: the features (types, bounds,
    vocabularies) and the number of actions.  A memo key whose hash is computed once, when the
    model first makes it: a features tuple hashes every field of every feature (~2.5 us on
    the SPEC model), and a memo miss hashes its key three times.  Equal for two models of the
    same domain, so the invariant's memo still serves both."""

    features: tuple[Feature, ...]
    n_actions: int
    digest: int = field(compare=False, repr=False)

    def __hash__(self) -> int:
        return self.digest


def domain(model: Model | Ensemble) -> Domain:
    """The :class:`Domain` of *model* (made once, kept by the model)."""

    def make() -> Domain:
        n_actions = len(model.actions)
        return Domain(model.features, n_actions, hash((model.features, n_actions)))

    return model.derived.get(("verify.domain",), make)


def prepare(model: Model | Ensemble, invariant: ck.CheckedInvariant, dnf_cap: int = 64) -> Prepared:
    """Normalize ``when and not ensure`` of a non-relational invariant for *model*.

    The result depends on the model only through its features (types, bounds, vocabularies)
    and its number of actions, so the invariant keeps it per domain: a process that checks
    version after version of a model (a deploy hook, a service) normalises each invariant
    once."""
    if invariant.is_relational:
        raise ValueError("relational invariants are not decided by the path engine")
    key = ("verify.prepare", domain(model), dnf_cap)
    return invariant.derived.get(key, lambda: _prepare(model, invariant, dnf_cap))


def _prepare(model: Model | Ensemble, invariant: ck.CheckedInvariant, dnf_cap: int) -> Prepared:
    norm = nm.normalizer(model)
    # nnf(when and not ensure) is the join of nnf(when) and nnf(not ensure): ``when`` is
    # normalised once for both.
    when = norm.nnf(invariant.when)
    v = nm.join(True, [when, norm.nnf(invariant.ensure_formula, True)])
    return Prepared(invariant, v, when, nm.dnf(v, dnf_cap), tag=invariant.name)


def prepare_when(
    model: Model | Ensemble, when_inv: ck.CheckedInvariant, prep: Prepared, dnf_cap: int = 64
) -> Prepared:
    """:func:`prepare` of *when_inv*, the ``ensure false`` invariant of ``prep.invariant``'s
    ``when`` (``evidence.when_invariant``), from the normal form of ``when`` that *prep*
    already holds: nnf(when and not false) is nnf(when), so it is not normalised again.
    Memoised under the same key as :func:`prepare`."""
    if when_inv.when is not prep.invariant.when or when_inv.ensure_formula != ck.Const(False):
        raise ValueError("not the when-invariant of the prepared invariant")
    key = ("verify.prepare", domain(model), dnf_cap)
    w = prep.when
    return when_inv.derived.get(
        key, lambda: Prepared(when_inv, w, w, nm.dnf(w, dnf_cap), tag=when_inv.name)
    )


@frozen(eq=False)
class PathVerdicts:
    """Per-leaf outcomes of one invariant on the leaves of ``boxes``."""

    boxes: LeafBoxes
    status: np.ndarray  # int8 SAFE / VIOLATED / UNKNOWN per row
    how: np.ndarray  # int16 HOW_* or conjunct index
    witnesses: Mapping[int, np.ndarray] = field(default_factory=dict)  # row -> x (solver rows)
    solver_paths: int = 0
    #: When known: sorted rows outside of which every row is SAFE and decided by nothing
    #: (how NONE), so that a re-check reads its few listed rows, not every leaf's outcome.
    listed: np.ndarray | None = None

    @property
    def violating(self) -> np.ndarray:
        return np.flatnonzero(self.status == VIOLATED)

    @property
    def unknown(self) -> np.ndarray:
        return np.flatnonzero(self.status == UNKNOWN)


def _rows(b: LeafBoxes) -> nm.Rows:
    return nm.Rows(b.lo, b.hi, b.cats, b.actions)


def decide(
    model: Model, prep: Prepared, boxes: LeafBoxes, settings: CheckOptions = DEFAULTS
) -> PathVerdicts:
    """Decide the violation condition on every leaf box (see module docstring)."""
    n = boxes.size
    if n == 0:
        return PathVerdicts(
            boxes, np.full(0, SAFE, dtype=np.int8), np.full(0, HOW_NONE, dtype=np.int16)
        )
    if settings.shortcuts:
        status, how, to_solver = box_stages(prep, boxes, settings.linear)
    else:
        status = np.full(n, SAFE, dtype=np.int8)
        how = np.full(n, HOW_NONE, dtype=np.int16)
        to_solver = boxes.feasible.copy()
    witnesses: dict[int, np.ndarray] = {}
    solver_rows = np.flatnonzero(to_solver)
    if solver_rows.size:
        outcomes = _solve(model, prep, boxes, solver_rows, settings)
        for r, (verdict, x) in zip(solver_rows.tolist(), outcomes, strict=True):
            how[r] = HOW_SOLVER
            if verdict == SolverAnswer.REAL:  # no float64 input near its model: exact search
                verdict, x = on_grid(model, prep, boxes, r, settings)
            if verdict == SolverAnswer.UNSAT:
                status[r] = SAFE
            elif verdict == SolverAnswer.SAT and x is not None:
                status[r] = VIOLATED
                witnesses[r] = x
            else:
                status[r] = UNKNOWN
    return PathVerdicts(boxes, status, how, witnesses, int(solver_rows.size))


def box_stages(
    prep: Prepared, boxes: LeafBoxes, linear: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stages 1 and 2 on every row: ``(status, how, to_solver)``, the rows left undecided
    marked in ``to_solver`` (their status is SAFE until the solver says otherwise).  With
    *linear*, conjuncts of several linear literals are decided on the boxes too
    (:mod:`clefprove.verify.linear`)."""
    n = boxes.size
    status = np.full(n, _SAFE_CODE, dtype=np.int8)
    how = np.full(n, _HOW_NONE_CODE, dtype=np.int16)
    to_solver = np.zeros(n, dtype=bool)
    rows = _rows(boxes)
    ct, cf = nm.tri(prep.violation, rows)
    live = boxes.feasible & ct
    whole = live & ~cf
    status[whole] = _VIOLATED_CODE
    how[whole] = _HOW_BOX_CODE
    mixed = np.flatnonzero(live & cf)
    if mixed.size:
        if prep.conjuncts is None:
            to_solver[mixed] = True
        else:
            sub = _rows(boxes.take(mixed))
            done = np.zeros(mixed.size, dtype=bool)
            undecided = np.zeros(mixed.size, dtype=bool)
            decide_conj = ln.decide_conjunct if linear else nm.decide_conjunct
            for k, conj in enumerate(prep.conjuncts):
                res = decide_conj(conj, sub)
                hit = (res == nm.SAT) & ~done
                status[mixed[hit]] = VIOLATED
                how[mixed[hit]] = k
                done |= hit
                undecided |= res == nm.UNDECIDED
            to_solver[mixed[undecided & ~done]] = True
    return status, how, to_solver


def _solve(
    model: Model, prep: Prepared, boxes: LeafBoxes, rows: np.ndarray, settings: CheckOptions
) -> list[tuple[str, np.ndarray | None]]:
    from clefprove.smt import paths as smt_paths

    inv = prep.invariant
    queries = [smt_paths.query_from_boxes(boxes, int(r)) for r in rows]
    jobs = max(1, int(settings.jobs))
    if jobs == 1 or len(queries) < PARALLEL_MIN_SOLVER_PATHS:
        return smt_paths.solve(
            model, inv.when, inv.ensure_formula, queries, _limits(settings, prep.tag)
        )
    # Contiguous chunks in pre-order are subtrees (or runs of neighbouring subtrees), so the
    # workers keep the solver's prefix sharing; results come back in order.  The run's pool
    # (verify/pool.py) is shared by every invariant; the model goes to each worker once.
    from clefprove.verify import pool as run_pool

    n_chunks = min(len(queries), jobs * 4)
    bounds = np.linspace(0, len(queries), n_chunks + 1).astype(int)
    chunks = [queries[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    limits = _limits(settings, prep.tag)
    args = [(inv.when, inv.ensure_formula, limits, c) for c in chunks]
    out: list[tuple[str, np.ndarray | None]] = []
    with run_pool.current(jobs) as pool:
        for part in pool.run_all(_solve_chunk, model, args):
            out.extend(part)
    return out


def _solve_chunk(
    model: Model,
    when: ck.Formula,
    ensure: ck.Formula,
    limits: Limits,
    queries: Sequence[Query],
) -> list[tuple[str, np.ndarray | None]]:
    """One chunk of :func:`_solve` in a pool worker (the model kept between chunks)."""
    from clefprove.smt import paths as smt_paths

    return smt_paths.solve(model, when, ensure, queries, limits)


#: Z3's largest timeout (an unsigned int of milliseconds).
_Z3_MAX_MS = 2**32 - 1


def _limits(settings: CheckOptions, tag: str) -> Limits:
    from clefprove.smt.paths import Limits

    t = settings.timeout
    # Z3's timeout is an unsigned 32-bit count of ms; beyond it (an infinite timeout
    # included) there is no limit, which 0 says.
    ms = 0 if t is None or t * 1000 >= _Z3_MAX_MS else max(1, int(t * 1000))
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in tag)
    return Limits(timeout_ms=ms, rlimit=settings.rlimit, smtlib_dir=settings.smtlib_dir, tag=safe)


def isolated_witness(
    model: Model, prep: Prepared, boxes: LeafBoxes, r: int, settings: CheckOptions
) -> np.ndarray | None:
    """A witness for solver row *r* from a solver of its own (or None if that one does not
    find one).  A solver's model depends on the queries it answered before and on how they
    were put; asked alone, about the leaf's box without its path's literals, the same box
    always gets the same witness, whichever other leaves a run decided (a fresh check, or an
    incremental one that reused most of them) and whichever path leads to it (two versions
    of a model whose edit changed a split above the leaf but not its box)."""
    from clefprove.smt import paths as smt_paths

    inv = prep.invariant
    limits = _limits(CheckOptions(timeout=settings.timeout, rlimit=settings.rlimit), prep.tag)
    query = smt_paths.query_from_boxes(boxes.take(np.array([r])), 0)
    verdict, x = smt_paths.solve(
        model, inv.when, inv.ensure_formula, [query], limits, along_paths=False
    )[0]
    if verdict == SolverAnswer.REAL:
        return search(model, prep, boxes, r, x, settings.linear)
    return x if verdict == SolverAnswer.SAT else None


def check_subtree(
    model: Model,
    node: int,
    context: Box | None,
    invariant: ck.CheckedInvariant | Prepared,
    settings: CheckOptions = DEFAULTS,
) -> PathVerdicts:
    """Decide *invariant* on every leaf below *node*, whose inputs are limited to *context*
    (the box of the path from the root to *node*; None: the whole domain)."""
    prep = invariant if isinstance(invariant, Prepared) else prepare(model, invariant)
    return decide(model, prep, leaf_boxes(model, node, context), settings)


def merge(parts: list[PathVerdicts]) -> PathVerdicts:
    """Concatenate per-subtree outcomes into one, rows sorted by leaf index (tree order)."""
    if len(parts) == 1:
        return parts[0]
    leaves = np.concatenate([p.boxes.leaves for p in parts])
    order = np.argsort(leaves, kind="stable")
    cat_keys = sorted({f for p in parts for f in p.boxes.cats})

    def cats_of(p: PathVerdicts, f: int) -> np.ndarray:
        size = next(q.boxes.cats[f].shape[1] for q in parts if f in q.boxes.cats)
        return np.asarray(cat_mask(p.boxes.cats, f, p.boxes.size, size))

    boxes = LeafBoxes(
        leaves[order],
        np.concatenate([p.boxes.lo for p in parts])[order],
        np.concatenate([p.boxes.hi for p in parts])[order],
        {f: np.concatenate([cats_of(p, f) for p in parts])[order] for f in cat_keys},
        np.concatenate([p.boxes.actions for p in parts])[order],
        np.concatenate([p.boxes.feasible for p in parts])[order],
    )
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    witnesses: dict[int, np.ndarray] = {}
    offset = 0
    for p in parts:
        for r, x in p.witnesses.items():
            witnesses[int(inverse[offset + r])] = x
        offset += p.boxes.size
    return PathVerdicts(
        boxes,
        np.concatenate([p.status for p in parts])[order],
        np.concatenate([p.how for p in parts])[order],
        witnesses,
        sum(p.solver_paths for p in parts),
    )


# ---------------------------------------------------------------- witnesses


def nice_float(lo: float, hi: float, target: float) -> float:
    """A float64 in [lo, hi]: *target* if inside, else the shortest decimal near the closer end."""
    if lo <= target <= hi:
        return float(target)
    up = target < lo
    # The end as an exact ratio n / d of integers: ceil / floor of (n * 10**k) / d in integer
    # arithmetic, and int / int is correctly rounded (as float(Fraction) is, by the same
    # division), several times faster than Fraction arithmetic per digit.
    n, d = (lo if up else hi).as_integer_ratio()
    for digits in range(0, 18):
        scale: int = 10**digits
        q = -((-n * scale) // d) if up else (n * scale) // d
        f = q / scale
        if lo <= f <= hi:
            return f
    return lo if up else hi


def nice_point(model: Model | Ensemble, rows: nm.Rows, r: int) -> np.ndarray:
    """A readable point of box *r*: each feature's default, or the value nearest to it."""
    x = np.empty(len(model.features), dtype=np.float64)
    for i, f in enumerate(model.features):
        lo, hi = float(rows.lo[r, i]), float(rows.hi[r, i])
        if f.type is FeatureType.CATEGORICAL:
            codes = np.flatnonzero(cat_mask(rows.cats, i, rows.size, len(f.values))[r])
            x[i] = f.default if int(f.default) in codes else float(codes[0])
        elif f.type is FeatureType.FLOAT:
            x[i] = nice_float(lo, hi, f.default)
        else:
            x[i] = min(max(f.default, lo), hi)
    return x


def _lin_value(lit: nm.Lin, x: np.ndarray, conf: float) -> Fraction:
    total = lit.const
    n = x.shape[0]
    for col, c in lit.terms:
        total += c * Fraction(conf if col == n else float(x[col]))
    return total


def witness(
    model: Model, prep: Prepared, pv: PathVerdicts, r: int, settings: CheckOptions | None = None
) -> np.ndarray:
    """An encoded input that reaches leaf row *r* and breaks the invariant (row VIOLATED).

    For a row the solver decided, with *settings*: the witness of a solver asked about this
    row alone (:func:`isolated_witness`), so that a printed counterexample does not depend on
    which other rows were decided in the same run; the run's own witness if that fails."""
    if r in pv.witnesses:
        if settings is not None:
            alone = isolated_witness(model, prep, pv.boxes, r, settings)
            if alone is not None:
                return alone
        return pv.witnesses[r]
    rows = _rows(pv.boxes.take(np.array([r])))
    conf = float(rows.lo[0, -1])
    k = int(pv.how[r])
    if k < 0:
        return nice_point(model, rows, 0)
    assert prep.conjuncts is not None
    nrows, ok, multi = nm.narrow_exact(prep.conjuncts[k], rows)
    assert ok[0]
    x = nice_point(model, nrows, 0)
    if len(multi) == 1:
        lit = multi[0]
        v = _lin_value(lit, x, conf)
        if not (v < 0 if lit.strict else v <= 0):
            for col, c in lit.terms:  # the minimizing corner
                if col < x.shape[0]:
                    x[col] = nrows.lo[0, col] if c > 0 else nrows.hi[0, col]
    elif len(multi) >= 2:
        lits = tuple(multi)
        if not ln.holds_at(lits, np.append(x, conf)[None, :])[0]:
            p = ln.point(lits, nrows, 0)  # decided by verify.linear: its witness
            if p is not None:
                for col in {c for lit in lits for c, _ in lit.terms}:
                    if col < x.shape[0]:
                        x[col] = p[col]
    return x


# ---------------------------------------------------------------- on the float64 grid
#
# Exact float64 reasoning for a leaf whose real relaxation is satisfiable but whose rational
# solver model does not round to an input (docs/verification.md, "On the float64 grid").
#
# Linear literals over several features are where the real relaxation and the float64 grid part
# ways: ``n + 0.1 * x == 0.52...`` has real solutions on ``x in [0, 10]`` for every integer n,
# but maybe no float64 one.  Fixing every column of the linear literals but one ("pinning")
# turns each literal into an exact float64 (or integer) bound on the column left free
# (:func:`clefprove.verify.normal.pin`), which the box stages decide exactly.  So:
#
# * when the pinned columns have few values on the box (at most :data:`ENUMERATION_MAX`
#   combinations), every combination is decided that way: the leaf is SAFE when none is
#   satisfiable (an exact proof over the float64 grid), VIOLATED with the first witness in
#   enumeration order otherwise;
# * else a search around the solver's (rounded) model: each pinned column takes its value and
#   its float64 / integer neighbours (or all its values when it has few), the free column is
#   solved exactly; a witness found is kept, nothing found is ``unknown``.
#
# Every witness is re-checked exactly (box membership, ``when`` and not ``ensure``) before it is
# returned; the evaluator confirms it again before it is printed.


#: At most this many combinations of pinned values are decided per leaf (~0.1 s).
ENUMERATION_MAX = 4096

#: A pinned column with at most this many values takes all of them in the search.
SMALL_COLUMN = 16


def on_grid(
    model: Model, prep: Prepared, boxes: LeafBoxes, r: int, settings: CheckOptions
) -> tuple[SolverAnswer, np.ndarray | None]:
    """``(UNSAT, None)``, ``(SAT, x)`` or ``(UNKNOWN, None)`` for row *r*, exactly over
    the float64 / integer values (see module docstring)."""
    done = _enumerate(model, prep, boxes, r, settings.linear)
    if done is not None:
        x, complete = done
        if x is not None:
            return SolverAnswer.SAT, x
        return (SolverAnswer.UNSAT if complete else SolverAnswer.UNKNOWN), None
    # Too many combinations: search around a model of a solver asked about this row alone
    # (the same start point in every run, whatever else the run decided).
    x = isolated_witness(model, prep, boxes, r, settings)
    return (SolverAnswer.SAT, x) if x is not None else (SolverAnswer.UNKNOWN, None)


def search(
    model: Model,
    prep: Prepared,
    boxes: LeafBoxes,
    r: int,
    start: np.ndarray | None,
    linear: bool = True,
) -> np.ndarray | None:
    """A witness for row *r*: by enumeration when it is small, else around *start* (the
    rounded solver model); None when none is found."""
    done = _enumerate(model, prep, boxes, r, linear)
    if done is not None:
        return done[0]
    if start is None:
        return None
    counts, pinned = _plan(model, prep, boxes, r)
    begin = [float(start[c]) if c < start.shape[0] else float(boxes.lo[r, c]) for c in pinned]
    values = [
        _values(model, boxes, r, c)
        if counts[c] <= SMALL_COLUMN
        else _around(model, boxes, r, c, begin[j])
        for j, c in enumerate(pinned)
    ]
    while math.prod(len(v) for v in values) > ENUMERATION_MAX:
        big = max(range(len(values)), key=lambda j: len(values[j]))
        if len(values[big]) == 1:
            break
        values[big] = _around(model, boxes, r, pinned[big], begin[big])[:1]
    return _decide(model, prep, boxes, r, pinned, values, linear)[0]


def _enumerate(
    model: Model, prep: Prepared, boxes: LeafBoxes, r: int, linear: bool = True
) -> tuple[np.ndarray | None, bool] | None:
    """:func:`_decide` over every combination of the pinned columns' values, or None when
    there are more than :data:`ENUMERATION_MAX`."""
    counts, pinned = _plan(model, prep, boxes, r)
    if math.prod(counts[c] for c in pinned) > ENUMERATION_MAX:
        return None
    values = [_values(model, boxes, r, c) for c in pinned]
    return _decide(model, prep, boxes, r, pinned, values, linear)


def _integral(model: Model, c: int) -> bool:
    """Whether column *c* takes whole values (the confidence column does not)."""
    return c < len(model.features) and model.features[c].is_integral


def _ends(boxes: LeafBoxes, r: int, c: int) -> tuple[float, float]:
    return float(boxes.lo[r, c]), float(boxes.hi[r, c])


def _lin_columns(f: object, out: list[tuple[int, ...]]) -> None:
    match f:
        case nm.Lin(terms, _, _):
            out.append(tuple(c for c, _ in terms))
        case nm.NAnd(args) | nm.NOr(args):
            for a in args:
                _lin_columns(a, out)


def _plan(
    model: Model, prep: Prepared, boxes: LeafBoxes, r: int
) -> tuple[dict[int, int], list[int]]:
    """(value counts of the free columns of the linear literals, the columns to pin): the
    set to pin with the fewest combinations that leaves each literal one free column."""
    lits: list[tuple[int, ...]] = []
    _lin_columns(prep.violation, lits)
    lo, hi = boxes.lo[r], boxes.hi[r]
    free = [tuple(c for c in lit if lo[c] != hi[c]) for lit in lits]
    cols = sorted({c for lit in free for c in lit})
    counts = {c: value_count(float(lo[c]), float(hi[c]), _integral(model, c)) for c in cols}
    # Pinning all but the column with the most values always works; look for cheaper sets.
    top = max(cols, key=lambda c: counts[c], default=-1)
    best = [c for c in cols if c != top]
    if len(cols) <= 10:
        best_cost = math.prod(counts[c] for c in best)
        for size in range(len(cols)):
            for sub in itertools.combinations(cols, size):
                keep = set(sub)
                if all(sum(1 for c in lit if c not in keep) <= 1 for lit in free):
                    cost = math.prod(counts[c] for c in sub)
                    if cost < best_cost:
                        best, best_cost = list(sub), cost
    return counts, best


def _values(model: Model, boxes: LeafBoxes, r: int, c: int) -> list[float]:
    """Every input value of column *c* in row *r*'s box, in increasing order."""
    a, b = _ends(boxes, r, c)
    if _integral(model, c):
        return [float(v) for v in range(math.ceil(a), math.floor(b) + 1)]
    return [float_at(k) for k in range(float_key(a), float_key(b) + 1)]


def _around(model: Model, boxes: LeafBoxes, r: int, c: int, v: float) -> list[float]:
    """*v* (clipped into row *r*'s box) first, then its neighbouring values (float64 or
    whole) within the box."""
    a, b = _ends(boxes, r, c)
    if _integral(model, c):
        mid = float(min(max(round(v), math.ceil(a)), math.floor(b)))
        near = [mid - 1, mid + 1]
    else:
        mid = min(max(v, a), b)
        near = [math.nextafter(mid, -math.inf), math.nextafter(mid, math.inf)]
    return [mid] + [x for x in near if a <= x <= b]


def _decide(
    model: Model,
    prep: Prepared,
    boxes: LeafBoxes,
    r: int,
    pinned: Sequence[int],
    values: Sequence[Sequence[float]],
    linear: bool = True,
) -> tuple[np.ndarray | None, bool]:
    """(the first exact witness among the combinations, whether every combination was
    decided): each combination is row *r*'s box with the pinned columns fixed."""
    rows = list(itertools.product(*values))
    if not rows:
        return None, True
    combos = np.array(rows, dtype=np.float64).reshape(len(rows), len(pinned))
    grid = boxes.take(np.full(combos.shape[0], r))
    lo, hi = grid.lo.copy(), grid.hi.copy()
    for j, c in enumerate(pinned):
        lo[:, c] = combos[:, j]
        hi[:, c] = combos[:, j]
    grid = LeafBoxes(grid.leaves, lo, hi, grid.cats, grid.actions, grid.feasible)
    status, how, undecided = box_stages(prep, grid, linear)
    pv = PathVerdicts(grid, status, how)
    violated = np.flatnonzero(status == VIOLATED).tolist()
    for g in violated:
        x = witness(model, prep, pv, g)
        if _violates(model, prep.invariant, boxes, r, x):
            return x, True
    # A violated combination without a checked witness would be a bug: never a proof then.
    return None, not violated and not bool(undecided.any())


def _violates(
    model: Model, inv: ck.CheckedInvariant, boxes: LeafBoxes, r: int, x: np.ndarray
) -> bool:
    """Exact test: *x* is an input of row *r*'s box that satisfies ``when`` and not ``ensure``
    at the row's decision."""
    for i, f in enumerate(model.features):
        v = float(x[i])
        if f.type is FeatureType.CATEGORICAL:
            c = int(v)
            if c != v or not 0 <= c < len(f.values):
                return False
            if i in boxes.cats and not boxes.cats[i][r, c]:
                return False
        elif not (boxes.lo[r, i] <= v <= boxes.hi[r, i]) or (f.is_integral and not v.is_integer()):
            return False
    xs = x.tolist()
    action, conf = int(boxes.actions[r]), float(boxes.lo[r, -1])
    if not ck.evaluate(inv.when, xs, action, conf):
        return False
    return not ck.evaluate(inv.ensure, xs, action, conf)  # type: ignore[arg-type]
