"""A step-for-step Python mirror of the Coq checker ``check`` (coq/ClefCheck.v).

The exporter runs this before writing a theorem: a theorem is emitted only when the mirror
says ``check`` computes to ``true``, so every emitted proof goes through ``coqc``.  Every
function here has the Coq definition of the same name as its reference; all arithmetic is
exact (``Fraction``), like ``Q`` in Coq, and every decision compares values, so ``Qred`` (which
only changes representations) has no counterpart.  Keep the two in lock step: the tests run
both on the same inputs and compare.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Literal

from clefprove.coq_export.terms import (
    CONF,
    CFormula,
    CLeaf,
    CRelation,
    CSplitNum,
    CTree,
    FAct,
    FAnd,
    FCmp,
    FConst,
    FDom,
    FIn,
    FNot,
    FOr,
    RIndependent,
    RMonotone,
    RStable,
    eval_tree,
    evalf,
    in_domain,
)
from clefprove.frozen import frozen

#: ``fm_cap`` of ClefCheck.v.
FM_CAP = 4096

ZERO = Fraction(0)


@frozen
class FBox:
    integral: bool
    lo: Fraction
    los: bool
    hi: Fraction
    his: bool
    codes: tuple[int, ...] | None


Bnds = tuple[Fraction, bool, Fraction, bool]


def dom_box(domain: tuple[FDom, ...]) -> list[FBox]:
    return [FBox(d.integral, d.lo, False, d.hi, False, d.codes) for d in domain]


def tight(b: FBox) -> Bnds:
    if b.integral:
        lo = math.floor(b.lo) + 1 if b.los else math.ceil(b.lo)
        hi = math.ceil(b.hi) - 1 if b.his else math.floor(b.hi)
        return Fraction(lo), False, Fraction(hi), False
    return b.lo, b.los, b.hi, b.his


def in_bnds_b(bd: Bnds, q: Fraction) -> bool:
    lo, los, hi, his = bd
    return (lo < q if los else lo <= q) and (q < hi if his else q <= hi)


def bnds_empty(bd: Bnds) -> bool:
    lo, los, hi, his = bd
    return hi <= lo if (los or his) else hi < lo


def fbox_empty(b: FBox) -> bool:
    bd = tight(b)
    if bnds_empty(bd):
        return True
    if b.codes is not None:
        return not any(in_bnds_b(bd, Fraction(z)) for z in b.codes)
    return False


def box_empty(bx: list[FBox]) -> bool:
    return any(fbox_empty(b) for b in bx)


def upd(bx: list[FBox], i: int, g: Callable[..., FBox]) -> list[FBox]:
    if i >= len(bx):
        return bx
    out = list(bx)
    out[i] = g(bx[i])
    return out


def cut_hi(t: Fraction, s: bool, b: FBox) -> FBox:
    if t < b.hi or (t == b.hi and s):
        return replace(b, hi=t, his=s)
    return b


def cut_lo(t: Fraction, s: bool, b: FBox) -> FBox:
    if b.lo < t or (t == b.lo and s):
        return replace(b, lo=t, los=s)
    return b


def keep_codes(cs: tuple[int, ...], b: FBox) -> FBox:
    codes = cs if b.codes is None else tuple(z for z in b.codes if z in cs)
    return replace(b, codes=codes)


def drop_codes(cs: tuple[int, ...], b: FBox) -> FBox:
    if b.codes is None:
        return b
    return replace(b, codes=tuple(z for z in b.codes if z not in cs))


# ------------------------------------------------------------------- literals and DNF

# A literal: ("lin", terms, k, strict) with terms ((feature, q), ...), or ("in", f, codes, pos).
LinLit = tuple[Literal["lin"], tuple[tuple[int, Fraction], ...], Fraction, bool]
InLit = tuple[Literal["in"], int, tuple[int, ...], bool]
Lit = LinLit | InLit


def cmp_lit(
    pos: bool, terms: tuple[tuple[int, Fraction], ...], k: Fraction, s: bool, c: Fraction
) -> LinLit:
    feat = tuple((v, q) for v, q in terms if v != CONF)
    conf = sum((q for v, q in terms if v == CONF), ZERO)
    k2 = k + conf * c
    if pos:
        return ("lin", feat, k2, s)
    return ("lin", tuple((i, -q) for i, q in feat), -k2, not s)


def product(l1: list[list[Lit]], l2: list[list[Lit]]) -> list[list[Lit]]:
    return [t1 + t2 for t1 in l1 for t2 in l2]


def dnf(pos: bool, p: CFormula, a: int, c: Fraction) -> list[list[Lit]]:
    match p:
        case FConst(b):
            return [[]] if b == pos else []
        case FCmp(terms, k, strict):
            return [[cmp_lit(pos, terms, k, strict, c)]]
        case FIn(f, codes):
            return [[("in", f, codes, pos)]]
        case FAct(acts):
            return [[]] if (a in acts) == pos else []
        case FNot(arg):
            return dnf(not pos, arg, a, c)
        case FAnd(left, right):
            if pos:
                return product(dnf(True, left, a, c), dnf(True, right, a, c))
            return dnf(False, left, a, c) + dnf(False, right, a, c)
        case FOr(left, right):
            if pos:
                return dnf(True, left, a, c) + dnf(True, right, a, c)
            return product(dnf(False, left, a, c), dnf(False, right, a, c))
    raise TypeError(p)


# -------------------------------------------------------------------- Fourier-Motzkin

# A constraint: (v, k, strict) meaning dot(v, x) + k <= 0 (< 0); v is a dense list.
Cstr = tuple[list[Fraction], Fraction, bool]


def vadd(u: list[Fraction], v: list[Fraction]) -> list[Fraction]:
    n = max(len(u), len(v))
    return [(u[i] if i < len(u) else ZERO) + (v[i] if i < len(v) else ZERO) for i in range(n)]


def unitv(i: int, a: Fraction) -> list[Fraction]:
    return [ZERO] * i + [a]


def dense(terms: tuple[tuple[int, Fraction], ...]) -> list[Fraction]:
    out: list[Fraction] = []
    for i, q in reversed(terms):  # fold_right
        out = vadd(unitv(i, q), out)
    return out


def coef(k: int, c: Cstr) -> Fraction:
    return c[0][k] if k < len(c[0]) else ZERO


def comb(lam: Fraction, c1: Cstr, mu: Fraction, c2: Cstr) -> Cstr:
    v = vadd([lam * a for a in c1[0]], [mu * b for b in c2[0]])
    return v, lam * c1[1] + mu * c2[1], c1[2] or c2[2]


def elim(k: int, cs: list[Cstr]) -> list[Cstr] | None:
    ps = [c for c in cs if coef(k, c) > 0]
    ns = [c for c in cs if coef(k, c) < 0]
    zs = [c for c in cs if coef(k, c) == 0]
    if len(zs) + len(ps) * len(ns) > FM_CAP:
        return None
    return zs + [comb(-coef(k, n), p, coef(k, p), n) for p in ps for n in ns]


def triv(c: Cstr) -> bool:
    v, k, s = c
    return all(a == 0 for a in v) and (k >= 0 if s else k > 0)


def fm_loop(fuel: int, k: int, cs: list[Cstr]) -> bool:
    while True:
        if any(triv(c) for c in cs):
            return True
        if fuel == 0:
            return False
        nxt = elim(k, cs)
        if nxt is None:
            return False
        cs, k, fuel = nxt, k + 1, fuel - 1


def fm_check(cs: list[Cstr]) -> bool:
    return fm_loop(max((len(c[0]) for c in cs), default=0), 0, cs)


def ms_vars(ms: list[LinLit]) -> list[int]:
    acc: list[int] = []
    for m in ms:
        for i, _ in m[1]:
            if i not in acc:
                acc.insert(0, i)
    return acc


def bound_cs(bx: list[FBox], i: int) -> list[Cstr]:
    if i >= len(bx):
        return []
    lo, los, hi, his = tight(bx[i])
    return [(unitv(i, Fraction(-1)), lo, los), (unitv(i, Fraction(1)), -hi, his)]


# ------------------------------------------------------------------- one conjunction


def int_round(bx: list[FBox], lit: LinLit) -> LinLit:
    """``int_round``: a Chvatal-Gomory rounding of one literal over integral features."""
    _, terms, k, s = lit
    lcm = 1
    for _, q in terms:
        lcm = math.lcm(q.denominator, lcm)
    g = 0
    for _, q in terms:
        g = math.gcd(q.numerator * (lcm // q.denominator), g)
    if not (g > 0 and all(i < len(bx) and bx[i].integral for i, _ in terms)):
        return lit
    mul = Fraction(lcm, g)
    scaled = tuple((i, mul * q) for i, q in terms)
    # Whole coefficients and mul > 0 hold by construction (Coq checks them at run time).
    r = -(mul * k)
    bound = math.ceil(r) - 1 if s else math.floor(r)
    return ("lin", scaled, Fraction(-bound), False)


def apply_lits(bx: list[FBox], t: list[Lit]) -> tuple[list[FBox], list[LinLit]]:
    ms: list[LinLit] = []
    for lit in t:
        if lit[0] == "in":
            _, f, cs, pos = lit
            bx = upd(
                bx,
                f,
                (lambda b, cs=cs: keep_codes(cs, b))
                if pos
                else (lambda b, cs=cs: drop_codes(cs, b)),
            )
            continue
        _, terms, k, s = lit
        if not terms:
            if (k < 0) if s else (k <= 0):
                continue  # a true constant adds nothing
            ms.insert(0, lit)
            continue
        if len(terms) == 1:
            i, q = terms[0]
            if q > 0:
                bx = upd(bx, i, lambda b, t=-k / q, s=s: cut_hi(t, s, b))
                continue
            if q < 0:
                bx = upd(bx, i, lambda b, t=k / -q, s=s: cut_lo(t, s, b))
                continue
        ms.insert(0, int_round(bx, lit))
    return bx, ms


def term_infeasible(bx: list[FBox], t: list[Lit]) -> bool:
    bx2, ms = apply_lits(bx, t)
    if box_empty(bx2):
        return True
    if not ms:
        return False
    bounds = [c for i in ms_vars(ms) for c in bound_cs(bx2, i)]
    return fm_check(bounds + [(dense(m[1]), m[2], m[3]) for m in ms])


def leaf_terms(w: CFormula, e: CFormula, a: int, c: Fraction) -> list[list[Lit]]:
    return dnf(True, FAnd(w, FNot(e)), a, c)


def leaf_ok(bx: list[FBox], w: CFormula, e: CFormula, a: int, c: Fraction) -> bool:
    return all(term_infeasible(bx, t) for t in leaf_terms(w, e, a, c))


@frozen
class Failure:
    """A leaf where the checker cannot refute ``w /\\ ~e``: its box and the failing term."""

    leaf: CLeaf
    box: list[FBox]
    term: list[Lit]


def check(
    domain: tuple[FDom, ...],
    tree: CTree,
    w: CFormula,
    e: CFormula,
    failures: list[Failure] | None = None,
    max_failures: int = 8,
) -> bool:
    """``check`` of ClefCheck.v.  Failing leaves are appended to *failures* when given."""
    ok = True
    stack: list[tuple[CTree, list[FBox]]] = [(tree, dom_box(domain))]
    while stack:
        node, bx = stack.pop()
        if isinstance(node, CLeaf):
            for t in leaf_terms(w, e, node.action, node.confidence):
                if not term_infeasible(bx, t):
                    ok = False
                    if failures is None:
                        return False
                    failures.append(Failure(node, bx, t))
                    if len(failures) >= max_failures:
                        return False
                    break
            continue
        stack.extend(_children(node, bx, prune=False))
    return ok


def _children(node: CTree, bx: list[FBox], prune: bool = True) -> list[tuple[CTree, list[FBox]]]:
    """The two children of a split with their boxes, right first (a stack pops left first);
    with *prune*, without those whose box is empty on the split's feature (``feat_empty``:
    the pruned walks), else both (``check_tree``)."""
    if isinstance(node, CSplitNum):
        th = node.threshold
        kids = [
            (node.right, upd(bx, node.feature, lambda b: cut_lo(th, True, b))),
            (node.left, upd(bx, node.feature, lambda b: cut_hi(th, False, b))),
        ]
    else:
        assert not isinstance(node, CLeaf)
        cs = node.codes
        kids = [
            (node.right, upd(bx, node.feature, lambda b: drop_codes(cs, b))),
            (node.left, upd(bx, node.feature, lambda b: keep_codes(cs, b))),
        ]
    return [(kid, b) for kid, b in kids if not (prune and feat_empty(b, node.feature))]


def feat_empty(bx: list[FBox], f: int) -> bool:
    """``feat_empty`` of ClefCheck.v."""
    return fbox_empty(bx[f]) if f < len(bx) else False


def check_pruned(tree: CTree, bx: list[FBox], w: CFormula, e: CFormula) -> bool:
    """``check_pruned`` of ClefCheck.v: the walk of ``check`` from box *bx*, a child whose
    box is empty on its split's feature skipped."""
    stack: list[tuple[CTree, list[FBox]]] = [(tree, bx)]
    while stack:
        node, b = stack.pop()
        if isinstance(node, CLeaf):
            if not leaf_ok(b, w, e, node.action, node.confidence):
                return False
            continue
        stack.extend(_children(node, b))
    return True


def relax_fbox(r: CRelation, df: FBox, b: FBox) -> FBox:
    """``relax_fbox`` of ClefCheck.v: the box of the related inputs on the relation's feature."""
    match r:
        case RMonotone():
            return FBox(df.integral, b.lo, b.los, df.hi, df.his, df.codes)
        case RStable(_, dl):
            lo, los, hi, his = tight(b)
            wide = FBox(df.integral, lo - dl, los, hi + dl, his, df.codes)
            return cut_lo(df.lo, df.los, cut_hi(df.hi, df.his, wide))
        case RIndependent():
            return df
    raise TypeError(r)


def rel_okb(r: CRelation, a: int, a2: int) -> bool:
    if isinstance(r, RMonotone):
        return _rank(r.ranks, a) <= _rank(r.ranks, a2)
    return a == a2


def _rank(ranks: tuple[int, ...], a: int) -> int:
    """``rank`` of ClefSyntax.v (``nth`` with default 0)."""
    return ranks[a] if a < len(ranks) else 0


def rel_check(
    domain: tuple[FDom, ...], tree: CTree, w: CFormula, r: CRelation, acts: tuple[int, ...]
) -> bool:
    """``rel_check`` of ClefCheck.v: for the box of every leaf an input can reach, the second
    walk from the box relaxed on the relation's feature."""
    f = r.feature
    if not f < len(domain):
        return False
    df = dom_box(domain)[f]
    stack: list[tuple[CTree, list[FBox]]] = [(tree, dom_box(domain))]
    while stack:
        node, bx = stack.pop()
        if isinstance(node, CLeaf):
            relaxed = upd(bx, f, lambda b: relax_fbox(r, df, b))
            if feat_empty(relaxed, f):
                continue
            if leaf_ok(bx, w, FConst(False), node.action, node.confidence):
                continue  # ``when`` cannot hold at x here
            allowed = FAct(tuple(b for b in acts if rel_okb(r, node.action, b)))
            if not check_pruned(tree, relaxed, w, allowed):
                return False
            continue
        stack.extend(_children(node, bx))
    return True


def rel_refute(
    domain: tuple[FDom, ...],
    tree: CTree,
    w: CFormula,
    r: CRelation,
    x: list[Fraction],
    y: list[Fraction],
) -> bool:
    """``rel_refute`` of ClefCheck.v on the inputs given as lists: both in the domain,
    related, meeting *w* with their own decisions, and actions that break *r*."""
    if len(x) != len(y) or not (in_domain(domain, x) and in_domain(domain, y)):
        return False
    f = r.feature
    if any(i != f and a != b for i, (a, b) in enumerate(zip(x, y, strict=True))):
        return False
    xf = x[f] if f < len(x) else ZERO
    yf = y[f] if f < len(y) else ZERO
    match r:
        case RMonotone():
            related = xf <= yf
        case RStable(_, dl):
            related = xf - dl <= yf <= xf + dl
        case _:
            related = True
    a, c, _ = eval_tree(tree, x)
    b, c2, _ = eval_tree(tree, y)
    return related and evalf(w, x, a, c) and evalf(w, y, b, c2) and not rel_okb(r, a, b)


def uses_fm(w: CFormula, e: CFormula) -> bool:
    """Whether some comparison has two or more feature terms (FM may be needed)."""

    def walk(p: CFormula) -> bool:
        match p:
            case FCmp(terms, _, _):
                return sum(1 for v, _ in terms if v != CONF) >= 2
            case FNot(arg):
                return walk(arg)
            case FAnd(left, right) | FOr(left, right):
                return walk(left) or walk(right)
        return False

    return walk(w) or walk(e)
