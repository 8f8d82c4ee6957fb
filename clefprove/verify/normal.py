"""The violation condition in a form that boxes can decide exactly.

A checked formula is put in negation normal form over four kinds of literal:

* :class:`Bound`: one variable (a feature, or the confidence column) against a closed bound
  that is already tightened to the variable's value set (float64 or whole numbers).  A
  single-variable ``c*x + k <= 0`` becomes ``x <= b`` where ``b`` is the largest float64 (or
  integer) that satisfies it, computed once per literal with exact fractions;
* :class:`Cat`: a categorical feature's code set;
* :class:`Act`: the leaf's action set (a constant per leaf);
* :class:`Lin`: a linear constraint over several variables (exact rational coefficients).

Negation is exact on every kind (the complement of ``x <= b`` in float64 is ``x >= next(b)``).
:func:`tri` evaluates a formula three-valued on a batch of boxes; :func:`dnf` expands it into
a short disjunction of conjunctions, each decided exactly by :func:`decide_conjunct`.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.geometry.boxes import cat_mask
from clefprove.geometry.floats import value_bound
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model
from clefprove.status import BoxAnswer


@frozen
class Bound:
    """``x[col] <= bound`` (upper) or ``x[col] >= bound`` (lower); closed, in the value set."""

    col: int
    upper: bool
    bound: float


@frozen
class Cat:
    feature: int
    codes: frozenset[int]
    size: int  # vocabulary size


@frozen
class Act:
    actions: frozenset[int]


@frozen
class Lin:
    """``sum(c * x[col]) + const <= 0`` (``< 0`` when strict), two or more variables."""

    terms: tuple[tuple[int, Fraction], ...]
    const: Fraction
    strict: bool
    integral: tuple[bool, ...] = ()  # per term: the column takes whole values only

    @functools.cached_property
    def arrays(self) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, float]:
        """Columns, float64 coefficients, exact signs, "tiny" flags and float64 constant
        (computed once per literal: they are read for every batch of boxes)."""
        return _lin_arrays(self)


@frozen
class NAnd:
    args: tuple[object, ...]


@frozen
class NOr:
    args: tuple[object, ...]


TRUE = ck.Const(True)
FALSE = ck.Const(False)


class Normalizer:
    """Turns checked formulas of one model into NNF over exact literals."""

    def __init__(self, model: Model | Ensemble) -> None:
        self.model = model
        self.n_feat = len(model.features)
        self.n_actions = len(model.actions)
        self.integral = [f.is_integral for f in model.features] + [False]
        self.fmin = [float(f.min) for f in model.features] + [0.0]
        self.fmax = [float(f.max) for f in model.features] + [1.0]

    @functools.cached_property
    def dmin(self) -> list[Fraction]:
        """The domain's lower ends as exact rationals (the exact route only: made on first use)."""
        return [Fraction(f.min) for f in self.model.features] + [Fraction(0)]

    @functools.cached_property
    def dmax(self) -> list[Fraction]:
        return [Fraction(f.max) for f in self.model.features] + [Fraction(1)]

    def col(self, var: int) -> int:
        return self.n_feat if var == ck.CONFIDENCE else var

    def nnf(self, f: object, neg: bool = False) -> object:
        """Negation normal form of *f* (negated when *neg*), simplified."""
        if type(f) is ck.Compare:  # the commonest literal first (the case below, unmatched)
            expr, strict = f.expr, f.strict
            if neg:
                expr = ck.Linear(tuple((v, -c) for v, c in expr.terms), -expr.const)
                strict = not strict
            return self._compare(expr, strict)
        match f:
            case ck.Const(value):
                return ck.Const(value != neg)
            case ck.Not(arg):
                return self.nnf(arg, not neg)
            case ck.And(args) | ck.Or(args):
                is_and = isinstance(f, ck.And) != neg
                parts = [self.nnf(a, neg) for a in args]
                return join(is_and, parts)
            case ck.ActionIn(actions):
                acts = frozenset(actions) & frozenset(range(self.n_actions))
                if neg:
                    acts = frozenset(range(self.n_actions)) - acts
                return _const_or(Act(acts), acts, self.n_actions)
            case ck.InSet(feature, codes):
                feat = self.model.features[feature]
                if feat.type is FeatureType.CATEGORICAL:
                    universe = frozenset(range(len(feat.values)))
                    cs = frozenset(codes) & universe
                    if neg:
                        cs = universe - cs
                    return _const_or(Cat(feature, cs, len(universe)), cs, len(universe))
                return self.nnf(self._inset_numeric(feature, codes), neg)
            case ck.Compare(expr, strict):
                if neg:
                    expr = ck.Linear(tuple((v, -c) for v, c in expr.terms), -expr.const)
                    strict = not strict
                return self._compare(expr, strict)
        raise TypeError(f"not a checked formula: {f!r}")

    def _inset_numeric(self, feature: int, codes: frozenset[int]) -> ck.Formula:
        """``x in {..}`` on a numeric/bool feature as a disjunction of closed ranges."""
        values = sorted(Fraction(c) for c in codes)
        runs: list[tuple[Fraction, Fraction]] = []
        for v in values:
            if runs and self.integral[feature] and v == runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], v)
            else:
                runs.append((v, v))
        one = ((feature, Fraction(1)),)
        minus = ((feature, Fraction(-1)),)
        return ck.Or(
            tuple(
                ck.And(
                    (ck.Compare(ck.Linear(minus, a), False), ck.Compare(ck.Linear(one, -b), False))
                )
                for a, b in runs
            )
        )

    def _compare(self, expr: ck.Linear, strict: bool) -> object:
        if len(expr.terms) == 1:
            fast = self._unit_bound(expr, strict)
            if fast is not None:
                return fast
        return self._compare_exact(expr, strict)

    def _compare_exact(self, expr: ck.Linear, strict: bool) -> object:
        """:meth:`_compare` in exact rationals (every literal; the shortcut's reference)."""
        terms = tuple((self.col(v), Fraction(c)) for v, c in expr.terms if c != 0)
        k = Fraction(expr.const)
        if not terms:
            return ck.Const(k < 0 if strict else k <= 0)
        if len(terms) > 1:
            ordered = tuple(sorted(terms))
            return Lin(ordered, k, strict, tuple(self.integral[c] for c, _ in ordered))
        col, c = terms[0]
        q = -k / c
        upper = c > 0
        lo_d, hi_d = self.dmin[col], self.dmax[col]
        q = min(max(q, lo_d - 1), hi_d + 1)  # keeps floats finite; same truth on the domain
        exact = value_bound(q, upper, strict, self.integral[col])
        # (+-inf only arises beyond a domain end at the float64 limit: the checks below settle it)
        if upper and exact >= hi_d:
            return TRUE
        if not upper and exact <= lo_d:
            return TRUE
        if (upper and exact < lo_d) or (not upper and exact > hi_d):
            return FALSE
        return Bound(col, upper, float(exact))

    def _unit_bound(self, expr: ck.Linear, strict: bool) -> object | None:
        """:meth:`_compare` of ``+-x + k <= 0`` (``< 0``) when ``-+k`` is a float64: a box
        literal ``x >= 0.25`` as the checker writes it.  The bound is then that float (its
        neighbour when strict; its floor or ceiling for a whole-valued column), found without
        any rational arithmetic; the same literal as the exact route (tests/verify check it
        against :func:`_compare_exact`).  None when the shortcut does not apply."""
        ((var, c),) = expr.terms
        k = expr.const
        if type(c) not in _EXACT or type(k) not in _EXACT:  # (no ABC instance check)
            return None  # (a subclass: the exact route)
        cn = c.numerator
        if c.denominator != 1 or (cn != 1 and cn != -1):
            return None
        kn, kd = k.numerator, k.denominator
        try:
            q = kn / kd  # float(k): the correctly rounded quotient (Rational.__float__'s)
        except OverflowError:
            return None
        if cn == 1:
            q, kn = -q, -kn
        if not math.isfinite(q) or q.as_integer_ratio() != (kn, kd):
            return None  # -k/c is no float64: the exact route rounds it
        q += 0.0  # -0.0 -> 0.0, as float(Fraction(0))
        col = self.col(var)
        upper = cn == 1
        lo_d, hi_d = self.fmin[col], self.fmax[col]
        b: float | int
        if self.integral[col]:
            if upper:
                b = (math.ceil(q) - 1) if strict else math.floor(q)
            else:
                b = (math.floor(q) + 1) if strict else math.ceil(q)
        else:
            b = math.nextafter(q, -math.inf if upper else math.inf) if strict else q
        if upper and b >= hi_d:
            return TRUE
        if not upper and b <= lo_d:
            return TRUE
        if (upper and b < lo_d) or (not upper and b > hi_d):
            return FALSE
        return Bound(col, upper, float(b))


_EXACT = (Fraction, int)


def normalizer(model: Model | Ensemble) -> Normalizer:
    """The :class:`Normalizer` of *model*, made once and kept by the model (it reads only the
    model's features and actions, and its one state is its lazily made exact domain ends)."""
    return model.derived.get(("verify.normalizer",), lambda: Normalizer(model))


def _const_or(lit: object, members: frozenset[int], size: int) -> object:
    if not members:
        return FALSE
    if len(members) == size:
        return TRUE
    return lit


def join(is_and: bool, parts: list[object]) -> object:
    """The conjunction (*is_and*) or disjunction of normalized *parts*, flattened and
    simplified (what :meth:`Normalizer.nnf` builds for ``and`` / ``or``)."""
    out: list[object] = []
    for p in parts:
        if isinstance(p, ck.Const):
            if p.value != is_and:  # False in an And, True in an Or
                return ck.Const(not is_and)
            continue
        if isinstance(p, NAnd if is_and else NOr):
            out.extend(p.args)
        else:
            out.append(p)
    if not out:
        return ck.Const(is_and)
    if len(out) == 1:
        return out[0]
    return NAnd(tuple(out)) if is_and else NOr(tuple(out))


def uses_decision(f: object, n_feat: int) -> bool:
    """Whether a normalized formula mentions the action or the confidence (column n_feat)."""
    match f:
        case Act():
            return True
        case Bound(col, _, _):
            return col == n_feat
        case Lin(terms, _, _):
            return any(col == n_feat for col, _ in terms)
        case NAnd(args) | NOr(args):
            return any(uses_decision(a, n_feat) for a in args)
    return False


# ---------------------------------------------------------------- three-valued evaluation


@frozen(eq=False)
class Rows:
    """A batch of boxes: lo/hi (R, F+1), categorical masks, leaf actions."""

    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]
    actions: np.ndarray

    @property
    def size(self) -> int:
        return int(self.lo.shape[0])


def _member(actions: np.ndarray, allowed: frozenset[int]) -> np.ndarray:
    """``np.isin(actions, allowed)`` by table lookup (isin costs ~20 µs on small arrays).
    *actions* holds action indices, or -1 for "no action" (the domain box), never a member."""
    top = max(allowed, default=-1)
    member: np.ndarray
    try:
        member = _action_table(top, allowed)[actions]
    except IndexError:  # an action above every allowed one: a table that covers it
        member = _action_table(max(top, int(actions.max(initial=-1))), allowed)[actions]
    return member


def _action_table(top: int, allowed: frozenset[int]) -> np.ndarray:
    """Membership of 0 .. top + 1 in *allowed*; the last slot (index -1) is never set."""
    table = np.zeros(top + 2, dtype=bool)
    if allowed:
        table[list(allowed)] = True
    return table


def tri(f: object, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    """``(can_be_true, can_be_false)`` of *f* on each box (each an over-approximation)."""
    n = rows.size
    match f:
        case ck.Const(value):
            return np.full(n, value), np.full(n, not value)
        case Bound(col, upper, b):
            if upper:
                return rows.lo[:, col] <= b, rows.hi[:, col] > b
            return rows.hi[:, col] >= b, rows.lo[:, col] < b
        case Cat(feature, codes, size):
            m = cat_mask(rows.cats, feature, n, size)
            sel: np.ndarray = np.zeros(size, dtype=bool)
            sel[list(codes)] = True
            return (m & sel).any(axis=1), (m & ~sel).any(axis=1)
        case Act(actions):
            t = _member(rows.actions, actions)
            return t, ~t
        case Lin():
            return _lin_tri(f, rows.lo, rows.hi)
        # (every case returns two new arrays of its own, so a junction starts from its first
        # argument's instead of all-true / all-false ones)
        case NAnd(args) if args:
            ct, cf = tri(args[0], rows)
            for a in args[1:]:
                t, fl = tri(a, rows)
                ct &= t
                cf |= fl
            return ct, cf
        case NOr(args) if args:
            ct, cf = tri(args[0], rows)
            for a in args[1:]:
                t, fl = tri(a, rows)
                ct |= t
                cf &= fl
            return ct, cf
        case NAnd():
            return np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
        case NOr():
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    raise TypeError(f"not a normalized formula: {f!r}")


_TINY = Fraction(2) ** -1022  # the smallest normal float64


def _f(q: Fraction) -> float:
    """float(q), or inf when it would overflow (the exact fallback then handles the rows)."""
    if abs(q) < 2**1000:
        return float(q)
    return math.inf if q > 0 else -math.inf  # (math.copysign would convert q: overflow)


def _lin_arrays(lit: Lin) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, float]:
    return (
        [c for c, _ in lit.terms],
        np.array([_f(c) for _, c in lit.terms]),
        # Signs from the exact coefficients: one below the float64 range rounds to 0.
        np.array([c > 0 for _, c in lit.terms], dtype=bool),
        # A coefficient under the normal range (< 2**-1022) is rounded with an *absolute*
        # error of up to 2**-1075, which the relative bound in lin_extreme does not cover
        # once multiplied by a large coordinate: account for it per such coefficient.
        np.array([abs(c) < _TINY for _, c in lit.terms], dtype=bool),
        _f(lit.const),
    )


def lin_extreme(lit: Lin, lo: np.ndarray, hi: np.ndarray, minimum: bool) -> np.ndarray:
    """The sign of the min (or max) of ``sum(c*x) + const`` over each box, exactly.

    Returns an int8 array of -1/0/+1.  float64 arithmetic decides the rows whose value is far
    from zero compared with a rigorous rounding-error bound; the rest are summed in fractions.
    """
    cols, coeffs, pos, tiny, kf = lit.arrays
    a, b = lo[:, cols], hi[:, cols]
    pick_lo = pos if minimum else ~pos
    corner = np.where(pick_lo, a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        total = (coeffs * corner).sum(axis=1) + kf
        mag = (np.abs(coeffs) * np.abs(corner)).sum(axis=1) + abs(kf)
        err = mag * ((len(cols) + 4) * 2.0**-50) + 1e-300 * (len(cols) + 2)
        if tiny.any():
            err = err + np.abs(corner[:, tiny]).sum(axis=1) * 2.0**-1074
        sign = np.where(total > err, 1, np.where(total < -err, -1, 0)).astype(np.int8)
        unsure = ~((total > err) | (total < -err)) | ~np.isfinite(total)
    _exact_signs(lit, corner, np.flatnonzero(unsure), sign)
    return sign


def _exact_signs(lit: Lin, corner: np.ndarray, rows: np.ndarray, sign: np.ndarray) -> None:
    """``sign[r]`` for each of *rows*: the sign of the literal at ``corner[r]``, summed in
    fractions (the rows the float bound leaves open)."""
    for r in rows.tolist():
        if not np.isfinite(corner[r]).all():
            # Only an empty box has an infinite end (x > max float64 gives lo = +inf): its
            # answer is never used, but it must not reach Fraction.
            sign[r] = 0
            continue
        v = lit.const
        for j, (_, c) in enumerate(lit.terms):
            v += c * Fraction(float(corner[r, j]))
        sign[r] = (v > 0) - (v < 0)


def lin_extremes(lit: Lin, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lin_extreme(lit, lo, hi, True), lin_extreme(lit, lo, hi, False))``, the work they
    share done once: both read the same columns, and their corners' terms are the same
    products (``c * lo`` where ``c > 0`` and ``c * hi`` elsewhere for the minimum, the others
    for the maximum), so each product is computed once; ``|c| * |x|`` is ``|c * x|`` exactly.
    The same float64 sums and error bounds as :func:`lin_extreme`, so the same signs
    (tests/verify check it)."""
    cols, coeffs, pos, _, _ = lit.arrays
    a, b = lo[:, cols], hi[:, cols]
    with np.errstate(over="ignore", invalid="ignore"):
        ca = coeffs * a
        cb = coeffs * b
        smin = _corner_sign(lit, np.where(pos, ca, cb), a, b, pos)
        smax = _corner_sign(lit, np.where(pos, cb, ca), a, b, ~pos)
    return smin, smax


def _corner_sign(
    lit: Lin, terms: np.ndarray, a: np.ndarray, b: np.ndarray, pick_lo: np.ndarray
) -> np.ndarray:
    """:func:`lin_extreme`'s signs from the corner's *terms* (``c * corner``), the corner being
    *a* where *pick_lo* and *b* elsewhere (made only for the rows the floats leave open)."""
    _, _, _, tiny, kf = lit.arrays
    k = len(lit.terms)
    total = terms.sum(axis=1) + kf
    mag = np.abs(terms).sum(axis=1) + abs(kf)
    err = mag * ((k + 4) * 2.0**-50) + 1e-300 * (k + 2)
    corner = None
    if tiny.any():
        corner = np.where(pick_lo, a, b)
        err = err + np.abs(corner[:, tiny]).sum(axis=1) * 2.0**-1074
    above = total > err
    below = total < -err
    sign: np.ndarray = above.astype(np.int8)
    sign -= below
    unsure = ~(above | below)
    unsure |= ~np.isfinite(total)
    open_rows = np.flatnonzero(unsure)
    if open_rows.size:
        if corner is None:
            corner = np.where(pick_lo, a, b)
        _exact_signs(lit, corner, open_rows, sign)
    return sign


def _lin_tri(lit: Lin, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    smin, smax = lin_extremes(lit, lo, hi)
    if lit.strict:
        return smin < 0, smax >= 0
    return smin <= 0, smax > 0


# ---------------------------------------------------------------- DNF and exact conjuncts


def dnf(f: object, cap: int = 64) -> list[tuple[object, ...]] | None:
    """*f* as a list of conjunctions of literals, or None when that exceeds *cap* terms."""
    match f:
        case ck.Const(value):
            return [()] if value else []
        case NOr(args):
            out: list[tuple[object, ...]] = []
            for a in args:
                sub = dnf(a, cap)
                if sub is None:
                    return None
                out.extend(sub)
                if len(out) > cap:
                    return None
            return out
        case NAnd(args):
            if cap >= 1 and not any(isinstance(a, _NESTED) for a in args):
                # every operand a literal (the box literals of a long ``when``): the one
                # conjunction the loop below would build, without its quadratic tuple copies
                return [tuple(args)]
            acc: list[tuple[object, ...]] = [()]
            for a in args:
                sub = dnf(a, cap)
                if sub is None:
                    return None
                acc = [x + y for x in acc for y in sub]
                if len(acc) > cap:
                    return None
            return acc
    return [(f,)]


#: What :func:`dnf` looks into (anything else is one literal).
_NESTED = (ck.Const, NOr, NAnd)

SAT, UNSAT, UNDECIDED = BoxAnswer.SAT, BoxAnswer.UNSAT, BoxAnswer.UNDECIDED


def narrow(conj: tuple[object, ...], rows: Rows) -> tuple[Rows, np.ndarray, list[Lin]]:
    """Apply the single-variable literals of *conj* to the boxes: (narrowed rows, ok, multi)."""
    lo, hi = rows.lo.copy(), rows.hi.copy()
    cats = {f: m.copy() for f, m in rows.cats.items()}
    ok = np.ones(rows.size, dtype=bool)
    multi: list[Lin] = []
    for lit in conj:
        match lit:
            case Bound(col, upper, b):
                if upper:
                    np.minimum(hi[:, col], b, out=hi[:, col])
                else:
                    np.maximum(lo[:, col], b, out=lo[:, col])
            case Cat(feature, codes, size):
                sel = np.zeros(size, dtype=bool)
                sel[list(codes)] = True
                if feature in cats:
                    cats[feature] &= sel
                else:
                    cats[feature] = np.broadcast_to(sel, (rows.size, size)).copy()
            case Act(actions):
                ok &= _member(rows.actions, actions)
            case Lin():
                multi.append(lit)
            case _:
                raise TypeError(f"not a literal: {lit!r}")
    ok &= np.all(lo <= hi, axis=1)
    for m in cats.values():
        ok &= m.any(axis=1)
    return Rows(lo, hi, cats, rows.actions), ok, multi


def pin(lits: list[Lin], rows: Rows, ok: np.ndarray) -> tuple[Rows, np.ndarray, np.ndarray]:
    """Decide, per box, the linear literals that have at most one free column there (every
    other column pinned, ``lo == hi``) as exact bounds on that column: ``(rows, ok, open)``
    with the tightened boxes, feasibility, and per box the number of literals still over two
    or more free columns.  Exact: with the other columns fixed, ``c*x + k <= 0`` is
    ``x <= b`` for the float64 (or integer) bound b of ``-k/c`` (:func:`value_bound`)."""
    lo, hi = rows.lo.copy(), rows.hi.copy()
    ok = ok.copy()
    still = np.zeros(rows.size, dtype=np.int64)
    for lit in lits:
        cols = [c for c, _ in lit.terms]
        integral = lit.integral or (False,) * len(cols)
        free = lo[:, cols] != hi[:, cols]
        nfree = free.sum(axis=1)
        still += nfree >= 2
        for r in np.flatnonzero(ok & (nfree <= 1)).tolist():
            k = lit.const
            at = -1
            for j, (col, c) in enumerate(lit.terms):
                if free[r, j]:
                    at = j
                else:
                    k += c * Fraction(float(lo[r, col]))
            if at < 0:
                ok[r] = k < 0 if lit.strict else k <= 0
                continue
            col, c = lit.terms[at]
            a, b = Fraction(float(lo[r, col])), Fraction(float(hi[r, col]))
            q = min(max(-k / c, a - 1), b + 1)
            v = float(value_bound(q, c > 0, lit.strict, integral[at]))
            if c > 0:
                hi[r, col] = min(float(hi[r, col]), v)
            else:
                lo[r, col] = max(float(lo[r, col]), v)
            ok[r] = lo[r, col] <= hi[r, col]
    return Rows(lo, hi, rows.cats, rows.actions), ok, still


def narrow_exact(conj: tuple[object, ...], rows: Rows) -> tuple[Rows, np.ndarray, list[Lin]]:
    """:func:`narrow`, and when two or more linear literals remain, also the ones that
    :func:`pin` turns into bounds; ``multi`` is then empty on the boxes where that decided all
    of them (rows with ``ok`` and no literal left open)."""
    nrows, ok, multi = narrow(conj, rows)
    if len(multi) < 2:
        return nrows, ok, multi
    prow, pok, still = pin(multi, nrows, ok)
    return prow, pok, multi if bool(np.any(still[pok] > 0)) else []


def decide_conjunct(conj: tuple[object, ...], rows: Rows) -> np.ndarray:
    """SAT / UNSAT / UNDECIDED per box for a conjunction of literals; exact when it has at most
    one multi-variable literal (a linear constraint's minimum over a box is at a corner), or
    when all its linear literals but one have at most one free column on the box (:func:`pin`)."""
    nrows, ok, multi = narrow(conj, rows)
    out = np.where(ok, SAT, UNSAT).astype(np.int8)
    if not multi or not ok.any():
        return out
    if len(multi) == 1:
        can, _ = _lin_tri(multi[0], nrows.lo, nrows.hi)
        out[ok & ~can] = UNSAT
        return out
    can_all = np.ones(rows.size, dtype=bool)
    must_all = np.ones(rows.size, dtype=bool)
    for lit in multi:
        ct, cf = _lin_tri(lit, nrows.lo, nrows.hi)
        can_all &= ct
        must_all &= ~cf
    out[ok & ~can_all] = UNSAT
    out[ok & can_all & ~must_all] = UNDECIDED
    pinned = np.flatnonzero(out == UNDECIDED)
    if pinned.size:
        sub = Rows(
            nrows.lo[pinned],
            nrows.hi[pinned],
            {f: m[pinned] for f, m in nrows.cats.items()},
            nrows.actions[pinned],
        )
        _, pok, still = pin(multi, sub, np.ones(pinned.size, dtype=bool))
        out[pinned[~pok]] = UNSAT
        out[pinned[pok & (still == 0)]] = SAT
    return out
