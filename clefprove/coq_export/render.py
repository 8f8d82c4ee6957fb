"""Coq text for an export: the model as terms, readable statements, proofs by reflection."""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from fractions import Fraction

from clefprove.coq_export.library import LIBRARY, library_text
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
)
from clefprove.frozen import frozen
from clefprove.model.types import FeatureType, Model

#: Names the export must not redefine (Coq keywords, the library, the standard prelude).
RESERVED = frozenset(
    """
    as at cofix else end exists exists2 fix for forall fun if IF in let match mod open
    Prop return Set SProp then Type using where with Definition Theorem Lemma Proof Qed
    input tree Leaf Split CSplit mem_q eval fdom FDom fd_integral fd_min fd_max fd_codes
    domain is_int is_one_of in_fdom in_domain var VF VC formula FConst FCmp FIn FAct FNot
    FAnd FOr var_val lin_val sem evalf holds valid check check_sound readable_sound
    readable_refuted in_domain_b box fbox dnf lit term_infeasible leaf_ok Q Z N nat bool
    list option Some None true false True False and or not In fst snd x a c
    model_tree model_domain action confidence decision Qle Qlt Qeq Qmake inject_Z
    """.split()  # noqa: SIM905
)

_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _library_identifiers() -> frozenset[str]:
    """Every identifier used in the code (not the comments) of the Coq library."""
    names: set[str] = set()
    for lib in LIBRARY:
        text = library_text(lib)
        while "(*" in text:  # drop comments, innermost first (they nest in Coq)
            new = re.sub(r"\(\*(?:(?!\(\*|\*\)).)*\*\)", " ", text, flags=re.S)
            if new == text:
                break
            text = new
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_']*", text))
    return frozenset(names)


class Namer:
    """Gives each feature, action, code and invariant a distinct, valid Coq identifier."""

    def __init__(self) -> None:
        self.used: set[str] = set(RESERVED) | _library_identifiers()

    def name_group(self, raw: str, prefix: str, suffixes: tuple[str, ...]) -> str:
        """A name such that it and every ``name + suffix`` are all free; reserves them all."""
        base = self.name(raw, prefix)
        name, n = base, 2
        while any(name + s in self.used for s in suffixes):
            name, n = f"{base}_{n}", n + 1
        self.used.update(name + s for s in suffixes)
        self.used.add(name)
        return name

    def name(self, raw: str, prefix: str) -> str:
        base = _IDENT.sub("_", raw)
        if not base or not (base[0].isalpha() or base[0] == "_") or base[0] == "_":
            base = f"{prefix}_{base}".rstrip("_")
        if base in self.used or keyword.iskeyword(base):
            base = f"{prefix}_{base}"
        name, n = base, 2
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name


@frozen
class Names:
    features: tuple[str, ...]
    actions: tuple[str, ...]
    codes: dict[tuple[int, int], str]  # (feature, code) -> identifier of that code


def make_names(model: Model, namer: Namer) -> Names:
    features = tuple(namer.name(f.name, "f") for f in model.features)
    actions = tuple(namer.name(a, "act") for a in model.actions)
    codes: dict[tuple[int, int], str] = {}
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            for j, v in enumerate(f.values):
                codes[(i, j)] = namer.name(f"{features[i]}_{v}", features[i])
    return Names(features, actions, codes)


# ---------------------------------------------------------------------------- numbers


def q_term(q: Fraction) -> str:
    """A rational as a Coq ``Q`` term, exact.

    Large power-of-two denominators (every float64 that is not whole has one) are written
    ``2^k``: Coq elaborates each numeral through its number notation, which costs time per
    digit, and a 4,095-node tree has thousands of them; ``2^k`` is computed by the checker.
    """
    q = Fraction(q)
    d = q.denominator
    k = d.bit_length() - 1
    den = f"2^{k}" if d == 1 << k and k >= 16 else str(d)
    return f"({q.numerator} # {den})"


def q_plain(q: Fraction) -> str:
    """A rational as ``(p # q)`` with plain numerals (for statements that tactics read)."""
    q = Fraction(q)
    return f"({q.numerator} # {q.denominator})"


def q_readable(q: Fraction) -> str:
    """A rational for a statement: ``300``, or ``(7 # 2)``; a float64 that is not whole
    carries its shortest decimal in a comment: ``(3602879701896397 # 4503599627370496)
    (* 0.8 *)``."""
    q = Fraction(q)
    if q.denominator == 1:
        return str(q.numerator) if q >= 0 else f"({q.numerator})"
    note = float_note(q)
    return q_plain(q) + (f" (* {note} *)" if note else "")


def float_note(q: Fraction) -> str:
    """The shortest decimal of *q* when it is a float64 that is not whole, else ``""``."""
    f = float(q)
    if Fraction(f) == q and q.denominator != 1:
        return repr(f)
    return ""


# ---------------------------------------------------------------------------- terms


def tree_term(tree: CTree) -> str:
    """The tree as a Coq term, written without recursion (deep trees are fine)."""
    out: list[str] = []
    stack: list[CTree | str] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, CLeaf):
            out.append(f"(Leaf {item.action}%N {q_term(item.confidence)})")
        elif isinstance(item, CSplitNum):
            out.append(f"(Split {item.feature}%nat {q_term(item.threshold)}\n ")
            stack.extend([")", item.right, "\n ", item.left])
        else:
            codes = "; ".join(f"{z}%Z" for z in item.codes)
            out.append(f"(CSplit {item.feature}%nat [{codes}]\n ")
            stack.extend([")", item.right, "\n ", item.left])
    return "".join(out)


def formula_term(p: CFormula) -> str:
    match p:
        case FConst(b):
            return f"(FConst {'true' if b else 'false'})"
        case FCmp(terms, k, strict):
            ts = "; ".join(
                f"({'VC' if v == CONF else f'VF {v}%nat'}, {q_plain(q)})" for v, q in terms
            )
            return f"(FCmp [{ts}] {q_plain(k)} {'true' if strict else 'false'})"
        case FIn(f, codes):
            return f"(FIn {f}%nat [{'; '.join(f'{z}%Z' for z in codes)}])"
        case FAct(acts):
            return f"(FAct [{'; '.join(f'{a}%N' for a in acts)}])"
        case FNot(arg):
            return f"(FNot {formula_term(arg)})"
        case FAnd(left, right):
            return f"(FAnd {formula_term(left)} {formula_term(right)})"
        case FOr(left, right):
            return f"(FOr {formula_term(left)} {formula_term(right)})"
    raise TypeError(p)


def relation_term(r: CRelation) -> str:
    match r:
        case RMonotone(f, ranks):
            return f"(RMonotone {f}%nat [{'; '.join(f'{k}%N' for k in ranks)}])"
        case RStable(f, delta):
            return f"(RStable {f}%nat {q_plain(delta)})"
        case RIndependent(f):
            return f"(RIndependent {f}%nat)"
    raise TypeError(r)


def domain_term(domain: tuple[FDom, ...], names: Names) -> str:
    rows = []
    for name, d in zip(names.features, domain, strict=True):
        codes = (
            "None" if d.codes is None else ("(Some [" + "; ".join(f"{z}%Z" for z in d.codes) + "])")
        )
        rows.append(
            f"    FDom {'true' if d.integral else 'false'} {q_term(d.lo)} {q_term(d.hi)} "
            f"{codes}   (* {name} *)"
        )
    return "[\n" + ";\n".join(rows) + "\n  ]"


# ---------------------------------------------------------------- readable statements


@frozen
class Ctx:
    """How to spell the decision in a statement: ``a``/``c`` or ``action x``/``confidence x``."""

    action: str
    confidence: str


def _var(v: int, names: Names, ctx: Ctx) -> str:
    return ctx.confidence if v == CONF else f"{names.features[v]} x"


def _sum(terms: list[tuple[int, Fraction]], const: Fraction, names: Names, ctx: Ctx) -> str:
    parts = []
    for v, q in terms:
        t = _var(v, names, ctx)
        parts.append(t if q == 1 else f"{q_readable(q)} * {t}")
    if const != 0 or not parts:
        parts.append(q_readable(const))
    return " + ".join(parts)


def cmp_readable(p: FCmp, names: Names, ctx: Ctx) -> str:
    """``sum + k <= 0`` rearranged with positive coefficients on each side."""
    left = [(v, q) for v, q in p.terms if q > 0]
    right = [(v, -q) for v, q in p.terms if q < 0]
    lk = p.k if p.k > 0 else Fraction(0)
    rk = -p.k if p.k < 0 else Fraction(0)
    op = "<" if p.strict else "<="
    if not left and right:
        # constant on the left, features on the right: read as "features > constant"
        gop = ">" if p.strict else ">="
        return f"{_sum(right, rk, names, ctx)} {gop} {_sum(left, lk, names, ctx)}"
    return f"{_sum(left, lk, names, ctx)} {op} {_sum(right, rk, names, ctx)}"


def prop(p: CFormula, names: Names, ctx: Ctx) -> str:
    """The formula as a readable Coq proposition with the same connective structure."""
    match p:
        case FConst(b):
            return "True" if b else "False"
        case FCmp():
            return cmp_readable(p, names, ctx)
        case FIn(f, codes):
            if names.codes.get((f, 0)) is None and len(codes) == 1:  # bool or int feature
                return f"{names.features[f]} x == {q_readable(Fraction(codes[0]))}"
            items = "; ".join(names.codes.get((f, z), f"{z}%Z") for z in codes)
            return f"is_one_of ({names.features[f]} x) [{items}]"
        case FAct(acts):
            if len(acts) == 1:
                return f"{ctx.action} = {names.actions[acts[0]]}"
            who = f"({ctx.action})" if " " in ctx.action else ctx.action
            return f"In {who} [{'; '.join(names.actions[a] for a in acts)}]"
        case FNot(arg):
            inner = prop(arg, names, ctx)
            return f"~ {inner}" if _atomic(arg) else f"~ ({inner})"
        case FAnd(left, right):
            return f"{_wrap(left, names, ctx, FAnd)} /\\ {_wrap(right, names, ctx, FAnd, True)}"
        case FOr(FNot(arg), right):  # "p implies q" in the checked form
            lhs = prop(arg, names, ctx)
            return f"{f'({lhs})' if is_imp(arg) else lhs} -> {prop(right, names, ctx)}"
        case FOr(left, right):
            return f"{_wrap(left, names, ctx, FOr)} \\/ {_wrap(right, names, ctx, FOr, True)}"
    raise TypeError(p)


def is_imp(p: CFormula) -> bool:
    """Whether *p* is rendered as an implication (``FOr (FNot a) b``)."""
    return isinstance(p, FOr) and isinstance(p.left, FNot)


def prop_arg(p: CFormula, names: Names, ctx: Ctx) -> str:
    """:func:`prop`, parenthesized when it is an implication (left of another ``->``)."""
    text = prop(p, names, ctx)
    return f"({text})" if is_imp(p) else text


def _atomic(p: CFormula) -> bool:
    return isinstance(p, FConst | FCmp | FIn | FAct)


def _wrap(p: CFormula, names: Names, ctx: Ctx, parent: type, right: bool = False) -> str:
    text = prop(p, names, ctx)
    if is_imp(p):
        return f"({text})"
    if _atomic(p) or isinstance(p, FNot) or (right and isinstance(p, parent)):
        return text
    return f"({text})"


def used_features(p: CFormula) -> set[int]:
    match p:
        case FCmp(terms, _, _):
            return {v for v, _ in terms if v != CONF}
        case FIn(f, _):
            return {f}
        case FNot(arg):
            return used_features(arg)
        case FAnd(left, right) | FOr(left, right):
            return used_features(left) | used_features(right)
    return set()


def comment(text: str) -> str:
    """Text safe inside a Coq comment: no comment opener or terminator, and its '"' balanced.

    Coq lexes string literals inside comments, and a '*)' inside one does not end the
    comment: a lone '"' (a categorical value 'say "hi', a description) made the comment
    swallow the code after it.  A text with an odd number of quotes has every quote doubled
    (each run of quotes is then even: whole string literals, Coq's escaped quotes inside
    them), so the comment ends where it is written; balanced text (a shown value "curl") is
    kept as it is."""
    safe = text.replace("(*", "( *").replace("*)", "* )")
    if safe.count('"') % 2:
        safe = safe.replace('"', '""')
    return safe


def join_blocks(blocks: Iterable[str]) -> str:
    return "\n\n".join(b.rstrip("\n") for b in blocks) + "\n"
