"""Exact float64 reasoning for a leaf whose real relaxation is satisfiable but whose rational
solver model does not round to an input (docs/verification.md, "On the float64 grid").

Linear literals over several features are where the real relaxation and the float64 grid part
ways: ``n + 0.1 * x == 0.52...`` has real solutions on ``x in [0, 10]`` for every integer n,
but maybe no float64 one.  Fixing every column of the linear literals but one ("pinning")
turns each literal into an exact float64 (or integer) bound on the column left free
(:func:`clefprove.verify.normal.pin`), which the box stages decide exactly.  So:

* when the pinned columns have few values on the box (at most :data:`ENUMERATION_MAX`
  combinations), every combination is decided that way: the leaf is SAFE when none is
  satisfiable (an exact proof over the float64 grid), VIOLATED with the first witness in
  enumeration order otherwise;
* else a search around the solver's (rounded) model: each pinned column takes its value and
  its float64 / integer neighbours (or all its values when it has few), the free column is
  solved exactly; a witness found is kept, nothing found is ``unknown``.

Every witness is re-checked exactly (box membership, ``when`` and not ``ensure``) before it is
returned; the evaluator confirms it again before it is printed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.geometry.boxes import LeafBoxes
from clefprove.geometry.floats import float_at, float_key, value_count
from clefprove.model.types import FeatureType, Model
from clefprove.status import SolverAnswer
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions

#: At most this many combinations of pinned values are decided per leaf (~0.1 s).
ENUMERATION_MAX = 4096

#: A pinned column with at most this many values takes all of them in the search.
SMALL_COLUMN = 16


def on_grid(
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, r: int, settings: CheckOptions
) -> tuple[SolverAnswer, np.ndarray | None]:
    """``(UNSAT, None)``, ``(SAT, x)`` or ``(UNKNOWN, None)`` for row *r*, exactly over
    the float64 / integer values (see module docstring)."""
    done = _enumerate(model, prep, boxes, r)
    if done is not None:
        x, complete = done
        if x is not None:
            return SolverAnswer.SAT, x
        return (SolverAnswer.UNSAT if complete else SolverAnswer.UNKNOWN), None
    # Too many combinations: search around a model of a solver asked about this row alone
    # (the same start point in every run, whatever else the run decided).
    x = eg.isolated_witness(model, prep, boxes, r, settings)
    return (SolverAnswer.SAT, x) if x is not None else (SolverAnswer.UNKNOWN, None)


def search(
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, r: int, start: np.ndarray | None
) -> np.ndarray | None:
    """A witness for row *r*: by enumeration when it is small, else around *start* (the
    rounded solver model); None when none is found."""
    done = _enumerate(model, prep, boxes, r)
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
    return _decide(model, prep, boxes, r, pinned, values)[0]


def _enumerate(
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, r: int
) -> tuple[np.ndarray | None, bool] | None:
    """:func:`_decide` over every combination of the pinned columns' values, or None when
    there are more than :data:`ENUMERATION_MAX`."""
    counts, pinned = _plan(model, prep, boxes, r)
    if math.prod(counts[c] for c in pinned) > ENUMERATION_MAX:
        return None
    return _decide(model, prep, boxes, r, pinned, [_values(model, boxes, r, c) for c in pinned])


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
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, r: int
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
    prep: eg.Prepared,
    boxes: LeafBoxes,
    r: int,
    pinned: Sequence[int],
    values: Sequence[Sequence[float]],
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
    status, how, undecided = eg.box_stages(prep, grid)
    pv = eg.PathVerdicts(grid, status, how)
    violated = np.flatnonzero(status == eg.VIOLATED).tolist()
    for g in violated:
        x = eg.witness(model, prep, pv, g)
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
