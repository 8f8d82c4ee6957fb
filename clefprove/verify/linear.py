"""Exact, vectorised decision of conjunctions of linear literals on leaf boxes (issue 11).

After :func:`clefprove.verify.normal.narrow`, a conjunct that :func:`normal.decide_conjunct`
leaves undecided holds two or more :class:`~clefprove.verify.normal.Lin` literals
``f_l(x) = sum c x + k <= 0`` (``< 0`` when strict) that each still have two or more free
columns on the box.  This module decides them for every box at once, without a solver:

* **UNSAT** (over the reals, so over every float64 / integer input): LP duality on a box.  The
  closed system ``f_l <= 0`` has no solution in the box iff some nonnegative combination
  ``h = sum w_l f_l`` (weights summing to 1) has its box minimum above 0.  For two literals the
  best weight is one of ``0``, ``1`` or a breakpoint ``b_i / (b_i - a_i)`` where a column's two
  coefficients change sign (``min_box h`` is concave and piecewise linear in the weight), so
  checking those candidates is exact; with three or more literals every pair is checked (sound,
  not complete).  ``min_box h`` is a corner value whose sign :func:`normal.lin_extreme` computes
  exactly (float64 with a rigorous error bound, fractions near 0).  A minimum of exactly 0 also
  proves UNSAT when a strict literal has positive weight (every closed solution then has all
  weighted ``f_l = 0``).
* **SAT** with a witness: by the saddle-point theorem, a real solution (when one exists with
  slack) lies on the face of the box where ``h`` is minimal for an optimal weight: the columns
  with a nonzero coefficient in ``h`` at their minimising end, the others free.  For every
  candidate weight the free columns but one are set (to the end that lowers every literal they
  appear in, else the middle of the box), and the last one is solved for: each literal is then a
  bound on it, a value inside the bounds (a whole number first, then the midpoint, then the
  ends) is tried.  A point is accepted only when it is inside the box, whole on integral
  columns, and satisfies every literal *exactly* (:func:`normal.lin_extreme` on the point).
* **by cases** on an integral column: a box still open is split into one box per value of its
  integral literal column with the fewest values (at most :data:`SPLIT_MAX`); each is decided by
  :func:`normal.pin` (exact once every literal has one free column) or by the two tests above.
  All cases UNSAT is UNSAT; the first SAT case (lowest value) gives the witness.  This settles
  integer gaps (a real solution, no integer one) and the integral rounding of the face.  A
  pinned literal is a float64 (or integer) bound, so a case is UNSAT over the *value sets*
  even where a real solution exists: ``x + y == 1/10`` with ``x = 0`` needs ``y = 1/10``, which
  no float64 is (tests/verify/test_linear.py checks such cases against a strict real system).
* anything else stays **UNDECIDED** (equalities with no float64 point on the faces tried, three
  or more literals with no pairwise certificate, ...): the engine sends it to Z3 as before.

Nothing here depends on anything but the literals and the boxes, so a row's answer and witness
are the same whether it is decided alone (:func:`point`, for counterexamples) or in a batch.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from clefprove.frozen import frozen
from clefprove.verify import normal as nm

SAT, UNSAT, UNDECIDED = nm.SAT, nm.UNSAT, nm.UNDECIDED


@frozen
class Combo:
    """A nonnegative combination ``sum w_l f_l`` of the literals (weights sum to 1)."""

    weights: tuple[Fraction, ...]
    terms: tuple[tuple[int, Fraction], ...]  # nonzero coefficients, by column
    const: Fraction
    strict_weight: bool  # some strict literal has a positive weight

    def lin(self) -> nm.Lin:
        return nm.Lin(self.terms, self.const, False)


def combos(lits: tuple[nm.Lin, ...]) -> list[Combo]:
    """The candidate weights: each literal alone, and for every pair the breakpoints."""
    m = len(lits)
    seen: dict[tuple[Fraction, ...], None] = {}
    for i in range(m):
        seen[tuple(Fraction(int(j == i)) for j in range(m))] = None
    for i, j in itertools.combinations(range(m), 2):
        a, b = dict(lits[i].terms), dict(lits[j].terms)
        for col in sorted(set(a) & set(b)):
            if (a[col] > 0) != (b[col] > 0):
                lam = b[col] / (b[col] - a[col])  # lam * a + (1 - lam) * b == 0
                row = [Fraction(0)] * m
                row[i], row[j] = lam, 1 - lam
                seen[tuple(row)] = None
    out = []
    for w in seen:
        coef: dict[int, Fraction] = {}
        const = Fraction(0)
        for wl, lit in zip(w, lits, strict=True):
            if wl:
                const += wl * lit.const
                for col, c in lit.terms:
                    coef[col] = coef.get(col, Fraction(0)) + wl * c
        terms = tuple((col, c) for col, c in sorted(coef.items()) if c != 0)
        strict = any(wl > 0 and lit.strict for wl, lit in zip(w, lits, strict=True))
        out.append(Combo(w, terms, const, strict))
    return out


def _min_sign(combo: Combo, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    if not combo.terms:
        s = (combo.const > 0) - (combo.const < 0)
        return np.full(lo.shape[0], s, dtype=np.int8)
    return nm.lin_extreme(combo.lin(), lo, hi, minimum=True)


def holds_at(lits: tuple[nm.Lin, ...], x: np.ndarray) -> np.ndarray:
    """Per row of points *x* (R, F+1): every literal holds exactly."""
    ok: np.ndarray = np.all(np.isfinite(x), axis=1)
    for lit in lits:
        s = nm.lin_extreme(lit, x, x, minimum=True)
        ok &= (s < 0) if lit.strict else (s <= 0)
    return ok


def _valid(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, integral: np.ndarray) -> np.ndarray:
    """Rows of *x* inside their box, whole on the integral columns."""
    with np.errstate(invalid="ignore"):
        ok: np.ndarray = np.all((lo <= x) & (x <= hi), axis=1)
        if integral.any():
            ok &= np.all(np.floor(x[:, integral]) == x[:, integral], axis=1)
    return ok


def _columns(lits: tuple[nm.Lin, ...]) -> tuple[list[int], dict[int, bool]]:
    cols: dict[int, None] = {}
    integral: dict[int, bool] = {}
    for lit in lits:
        flags = lit.integral or (False,) * len(lit.terms)
        for (col, _), f in zip(lit.terms, flags, strict=True):
            cols[col] = None
            integral[col] = integral.get(col, False) or f
    return sorted(cols), integral


def _mid(a: np.ndarray, b: np.ndarray, whole: bool) -> np.ndarray:
    m = a / 2 + b / 2
    return np.floor(m) if whole else m


def _face_points(
    combo: Combo, lits: tuple[nm.Lin, ...], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, int | None]:
    """Points on the face of *combo*, every literal column set except the one returned
    (None: no column left free)."""
    x = lo.copy()
    cols, integral = _columns(lits)
    coef = dict(combo.terms)
    free = [c for c in cols if c not in coef]
    for col, c in combo.terms:
        x[:, col] = lo[:, col] if c > 0 else hi[:, col]
    if not free:
        return x, None
    uses = {c: sum(1 for lit in lits if c in dict(lit.terms)) for c in free}
    t = max(free, key=lambda c: (uses[c], -c))
    for col in free:
        if col == t:
            continue
        signs = {dict(lit.terms)[col] > 0 for lit in lits if col in dict(lit.terms)}
        if signs == {True}:
            x[:, col] = lo[:, col]
        elif signs == {False}:
            x[:, col] = hi[:, col]
        else:
            x[:, col] = _mid(lo[:, col], hi[:, col], integral[col])
    return x, t


def _solve_column(
    lits: tuple[nm.Lin, ...], x: np.ndarray, t: int, lo: np.ndarray, hi: np.ndarray, whole: bool
) -> list[np.ndarray]:
    """Candidate values of column *t* (each an (R,) array) where every literal, the other
    columns fixed at *x*, holds approximately: to be checked exactly."""
    lower, upper = lo[:, t].copy(), hi[:, t].copy()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for lit in lits:
            cols, coeffs, _, _, kf = lit.arrays
            if t not in cols:
                continue
            j = cols.index(t)
            rest = kf + np.delete(coeffs, j) @ np.delete(x[:, cols], j, axis=1).T
            b = -rest / coeffs[j]
            if coeffs[j] > 0:
                np.minimum(upper, b, out=upper)
            else:
                np.maximum(lower, b, out=lower)
        if whole:
            a, z = np.ceil(lower), np.floor(upper)
            return [np.floor(a / 2 + z / 2), a, z]
        mid = lower / 2 + upper / 2
        return [
            np.round(mid),
            mid,
            np.nextafter(lower, np.inf),
            np.nextafter(upper, -np.inf),
            lower,
            upper,
        ]


#: An undecided box is split on an integral column with at most this many values...
SPLIT_MAX = 64
#: ... while a batch expands to at most this many boxes.
SPLIT_ROWS = 50_000


def decide(
    lits: tuple[nm.Lin, ...], rows: nm.Rows, split: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """SAT / UNSAT / UNDECIDED per box for the conjunction of *lits*, and per row a point
    (valid where SAT): see the module docstring.  With *split*, a box left undecided is split
    into one box per value of its integral literal column with the fewest values (at most
    :data:`SPLIT_MAX`), each decided again (exact: the values cover the column)."""
    n = rows.size
    lo, hi = rows.lo, rows.hi
    out = np.full(n, UNDECIDED, dtype=np.int8)
    points = lo.copy()
    if n == 0 or not lits:
        return np.full(n, SAT, dtype=np.int8), points
    cands = combos(lits)
    for combo in cands:
        s = _min_sign(combo, lo, hi)
        dead = (s > 0) | ((s == 0) & combo.strict_weight)
        out[dead] = UNSAT
    cols, integral = _columns(lits)
    int_mask = np.zeros(lo.shape[1], dtype=bool)
    int_mask[[c for c in cols if integral[c]]] = True
    for combo in cands:
        todo = np.flatnonzero(out == UNDECIDED)
        if todo.size == 0:
            break
        slo, shi = lo[todo], hi[todo]
        x, t = _face_points(combo, lits, slo, shi)
        tries = [x] if t is None else []
        if t is not None:
            for v in _solve_column(lits, x, t, slo, shi, integral[t]):
                y = x.copy()
                y[:, t] = v
                tries.append(y)
        found = np.zeros(todo.size, dtype=bool)
        for y in tries:
            ok = ~found & _valid(y, slo, shi, int_mask)
            idx = np.flatnonzero(ok)
            if idx.size == 0:
                continue
            good = holds_at(lits, y[idx])
            hit = idx[good]
            points[todo[hit]] = y[hit]
            found[hit] = True
        out[todo[found]] = SAT
    todo = np.flatnonzero(out == UNDECIDED)
    if split and todo.size and int_mask.any():
        res, pts = _split(lits, lo[todo], hi[todo], cols, int_mask)
        out[todo] = res
        points[todo] = pts
    return out, points


def _split(
    lits: tuple[nm.Lin, ...], lo: np.ndarray, hi: np.ndarray, cols: list[int], int_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decide` by cases on one integral column per box (see there)."""
    n = lo.shape[0]
    out = np.full(n, UNDECIDED, dtype=np.int8)
    points = lo.copy()
    icols = np.array([c for c in cols if int_mask[c]], dtype=np.int64)
    counts = hi[:, icols] - lo[:, icols] + 1
    counts = np.where(counts > 1, counts, np.inf)
    best = np.argmin(counts, axis=1)
    cnt = counts[np.arange(n), best]
    eligible = np.flatnonzero(cnt <= SPLIT_MAX)
    if eligible.size == 0:
        return out, points
    rep = cnt[eligible].astype(np.int64)
    keep = np.cumsum(rep) <= SPLIT_ROWS
    eligible, rep = eligible[keep], rep[keep]
    if eligible.size == 0:
        return out, points
    parent = np.repeat(np.arange(eligible.size), rep)
    offset = np.arange(parent.size) - np.repeat(np.cumsum(rep) - rep, rep)
    col = icols[best[eligible]][parent]
    at = np.arange(parent.size)
    sub_lo, sub_hi = lo[eligible][parent], hi[eligible][parent]
    sub_lo[at, col] = sub_lo[at, col] + offset
    sub_hi[at, col] = sub_lo[at, col]
    sub = nm.Rows(sub_lo, sub_hi, {}, np.zeros(parent.size, dtype=np.int64))
    prow, ok, still = nm.pin(list(lits), sub, np.ones(parent.size, dtype=bool))
    ans = np.where(ok, np.where(still == 0, SAT, UNDECIDED), UNSAT).astype(np.int8)
    pts = prow.lo.copy()
    sat = np.flatnonzero(ans == SAT)  # every point of the pinned box: check one exactly
    good = _valid(pts[sat], prow.lo[sat], prow.hi[sat], int_mask) & holds_at(lits, pts[sat])
    ans[sat[~good]] = UNDECIDED
    rest = np.flatnonzero(ans == UNDECIDED)
    if rest.size:
        r_ans, r_pts = decide(lits, take(prow, rest), split=False)
        ans[rest] = r_ans
        pts[rest] = r_pts
    unsat = np.bincount(parent, weights=(ans == UNSAT), minlength=eligible.size)
    out[eligible[unsat == rep]] = UNSAT
    sat = np.flatnonzero(ans == SAT)
    first_parent, first = np.unique(parent[sat], return_index=True)  # the lowest value
    out[eligible[first_parent]] = SAT
    points[eligible[first_parent]] = pts[sat[first]]
    return out, points


def decide_conjunct(conj: tuple[object, ...], rows: nm.Rows) -> np.ndarray:
    """:func:`normal.decide_conjunct`, with the rows it leaves undecided decided here."""
    out = nm.decide_conjunct(conj, rows)
    und = np.flatnonzero(out == UNDECIDED)
    if und.size == 0:
        return out
    sub = take(rows, und)
    prow, ok, multi = nm.narrow_exact(conj, sub)
    if len(multi) < 2:
        return out
    res, _ = decide(tuple(multi), prow)
    res[~ok] = UNSAT  # (cannot happen: undecided rows passed narrow and pin)
    out[und] = res
    return out


def point(lits: tuple[nm.Lin, ...], rows: nm.Rows, r: int) -> np.ndarray | None:
    """The witness :func:`decide` finds for row *r* alone, or None."""
    res, pts = decide(lits, take(rows, np.array([r])))
    return pts[0] if res[0] == SAT else None


def take(rows: nm.Rows, idx: np.ndarray) -> nm.Rows:
    return nm.Rows(
        rows.lo[idx], rows.hi[idx], {f: m[idx] for f, m in rows.cats.items()}, rows.actions[idx]
    )
