"""The Coq-level view of a model and of checked invariants.

These are the exact objects the Coq library (``coq/ClefSyntax.v``) defines: a tree with exact
rational thresholds and confidences, a domain, and formulas with binary ``And``/``Or``.  Both
the renderer (Coq text) and the mirror of the Coq checker work on them, so what is checked in
Python is what is written for ``coqc``.
"""

from __future__ import annotations

from fractions import Fraction

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.model.types import FeatureType, Model, NodeKind

# ---------------------------------------------------------------------------------- trees


@frozen
class CLeaf:
    action: int
    confidence: Fraction


@frozen
class CSplitNum:
    feature: int
    threshold: Fraction
    left: CTree
    right: CTree


@frozen
class CSplitCat:
    feature: int
    codes: tuple[int, ...]
    left: CTree
    right: CTree


CTree = CLeaf | CSplitNum | CSplitCat


@frozen
class FDom:
    """One feature's domain: integral?, closed bounds, codes (categorical and bool)."""

    integral: bool
    lo: Fraction
    hi: Fraction
    codes: tuple[int, ...] | None


def model_tree(model: Model) -> CTree:
    """The model's tree as Coq-level terms (built bottom-up, no recursion limit issues)."""
    built: dict[int, CTree] = {}
    # Children are stored after their parents: build from the last node backwards.
    for i in range(model.n_nodes - 1, -1, -1):
        node = model.node(i)
        if node.kind is NodeKind.LEAF:
            built[i] = CLeaf(node.action, Fraction(node.confidence))
        elif node.kind is NodeKind.NUMERIC:
            built[i] = CSplitNum(
                node.feature, Fraction(node.threshold), built[node.left], built[node.right]
            )
        else:
            built[i] = CSplitCat(
                node.feature, tuple(sorted(node.categories)), built[node.left], built[node.right]
            )
    return built[0]


def model_domain(model: Model) -> tuple[FDom, ...]:
    out = []
    for f in model.features:
        codes: tuple[int, ...] | None = None
        if f.type is FeatureType.CATEGORICAL:
            codes = tuple(range(len(f.values)))
        elif f.type is FeatureType.BOOL:
            codes = (0, 1)
        out.append(FDom(f.is_integral, Fraction(f.min), Fraction(f.max), codes))
    return tuple(out)


# ------------------------------------------------------------------------------- formulas

#: Variable of a linear term: a feature index, or CONF for the confidence.
CONF = ck.CONFIDENCE


@frozen
class FConst:
    value: bool


@frozen
class FCmp:
    """``sum(q * v) + k <= 0`` (``< 0`` when strict)."""

    terms: tuple[tuple[int, Fraction], ...]
    k: Fraction
    strict: bool


@frozen
class FIn:
    feature: int
    codes: tuple[int, ...]


@frozen
class FAct:
    actions: tuple[int, ...]


@frozen
class FNot:
    arg: CFormula


@frozen
class FAnd:
    left: CFormula
    right: CFormula


@frozen
class FOr:
    left: CFormula
    right: CFormula


CFormula = FConst | FCmp | FIn | FAct | FNot | FAnd | FOr


# ----------------------------------------------------------------------------- relations


@frozen
class RMonotone:
    feature: int
    ranks: tuple[int, ...]  # the severity rank of each action index


@frozen
class RStable:
    feature: int
    delta: Fraction


@frozen
class RIndependent:
    feature: int


CRelation = RMonotone | RStable | RIndependent


def relation_of(rel: ck.Relational, severity: tuple[int, ...] | None) -> CRelation | None:
    """The Coq relation of a relational ``ensure``; None for ``monotone`` without a severity
    order (*severity*: action indices, lowest first)."""
    match rel:
        case ck.Monotone(f):
            if severity is None:
                return None
            ranks = [0] * len(severity)
            for position, action in enumerate(severity):
                ranks[action] = position
            return RMonotone(f, tuple(ranks))
        case ck.Stable(f, delta):
            return RStable(f, Fraction(delta))
        case ck.Independent(f):
            return RIndependent(f)
    raise TypeError(f"not a relational form: {rel!r}")


def from_checked(f: ck.Formula) -> CFormula:
    """A checked formula as a Coq-level formula (n-ary And/Or folded to the right)."""
    match f:
        case ck.Const(value):
            return FConst(bool(value))
        case ck.Compare(expr, strict):
            return FCmp(
                tuple((v, Fraction(c)) for v, c in expr.terms), Fraction(expr.const), bool(strict)
            )
        case ck.InSet(feature, codes):
            return FIn(feature, tuple(sorted(codes)))
        case ck.ActionIn(actions):
            return FAct(tuple(sorted(actions)))
        case ck.Not(arg):
            return FNot(from_checked(arg))
        case ck.And(args):
            return _fold([from_checked(a) for a in args], FAnd, True)
        case ck.Or(args):
            return _fold([from_checked(a) for a in args], FOr, False)
    raise TypeError(f"not a checked formula: {f!r}")


def _fold(parts: list[CFormula], cons: type, unit: bool) -> CFormula:
    if not parts:
        return FConst(unit)
    out = parts[-1]
    for p in reversed(parts[:-1]):
        out = cons(p, out)
    return out


def eval_tree(tree: CTree, x: list[Fraction]) -> tuple[int, Fraction, CLeaf]:
    """Exactly ``eval`` of ClefSyntax.v on rational inputs."""
    node = tree
    while not isinstance(node, CLeaf):
        if isinstance(node, CSplitNum):
            node = node.left if x[node.feature] <= node.threshold else node.right
        else:
            v = x[node.feature]
            node = node.left if any(v == z for z in node.codes) else node.right
    return node.action, node.confidence, node


def evalf(p: CFormula, x: list[Fraction], a: int, c: Fraction) -> bool:
    """Exactly ``evalf`` of ClefSyntax.v."""
    match p:
        case FConst(b):
            return b
        case FCmp(terms, k, strict):
            v = sum((q * (c if var == CONF else x[var]) for var, q in terms), Fraction(0)) + k
            return v < 0 if strict else v <= 0
        case FIn(f, codes):
            return any(x[f] == z for z in codes)
        case FAct(acts):
            return a in acts
        case FNot(arg):
            return not evalf(arg, x, a, c)
        case FAnd(left, right):
            return evalf(left, x, a, c) and evalf(right, x, a, c)
        case FOr(left, right):
            return evalf(left, x, a, c) or evalf(right, x, a, c)
    raise TypeError(p)


def in_domain(domain: tuple[FDom, ...], x: list[Fraction]) -> bool:
    """Exactly ``in_domain_b`` of ClefCheck.v."""
    for d, v in zip(domain, x, strict=True):
        if not d.lo <= v <= d.hi:
            return False
        if d.integral and v.denominator != 1:
            return False
        if d.codes is not None and v not in d.codes:
            return False
    return True
