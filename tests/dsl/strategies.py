"""Hypothesis strategies: random syntax trees of invariant files over the SPEC §2 model.

The trees are built directly (not from text) and mostly well typed; tests format them, parse
the text back and compare, and evaluate them with an independent reference interpreter.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache

from hypothesis import strategies as st

from clefprove.dsl import ast

NUMERIC = ["client_rtt_ms", "tls_version", "path_depth", "referer_entropy"]
UA_VALUES = ["Chrome", "Firefox", "Safari", "curl", "python-requests", "other"]
ACTIONS = ["allow", "challenge", "rate_limit", "block"]
LET_NAMES = ["slow", "legacy", "script", "deep", "risky", "a1", "b_2", "tor_ish"]


@st.composite
def numbers(draw) -> ast.Expr:
    """A non-negative literal, in one of several spellings, possibly negated."""
    kind = draw(st.sampled_from(["int", "float", "exp", "dot"]))
    if kind == "int":
        text = str(draw(st.integers(0, 100_000)))
    elif kind == "float":
        text = repr(draw(st.floats(0, 1e6, allow_nan=False, allow_infinity=False)))
    elif kind == "exp":
        mant = draw(st.integers(1, 99))
        exp = draw(st.integers(-30, 30))
        text = f"{mant}e{exp}" if draw(st.booleans()) else f"{mant}.5E{exp:+d}"
    else:
        text = "." + str(draw(st.integers(0, 999)))
    node: ast.Expr = ast.Number(text, Fraction(float(text)))
    if draw(st.booleans()) and draw(st.booleans()):
        node = ast.Neg(node)
    return node


@cache
def num_terms(depth: int) -> st.SearchStrategy[ast.Expr]:
    """Linear numeric terms over the numeric features and constants."""
    leaf = st.one_of(numbers(), st.sampled_from(NUMERIC).map(ast.Name))
    if depth <= 0:
        return leaf
    sub = num_terms(depth - 1)
    return st.one_of(
        leaf,
        sub.map(ast.Neg),
        sub.map(ast.Paren),
        st.builds(
            ast.Sum,
            sub,
            st.lists(st.tuples(st.sampled_from(["+", "-"]), sub), min_size=1, max_size=3).map(
                tuple
            ),
        ),
        # linear products: constants around at most one non-constant factor
        st.builds(
            lambda c, t, front: ast.Product((c, t) if front else (t, c)),
            numbers(),
            sub,
            st.booleans(),
        ),
    )


_CMP = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])


@st.composite
def compare_chain(draw, depth: int) -> ast.Expr:
    n = draw(st.integers(1, 3))
    operands = tuple(draw(num_terms(depth)) for _ in range(n + 1))
    ops = tuple(draw(_CMP) for _ in range(n))
    return ast.Compare(operands, ops)


def _strings(values: list[str]) -> st.SearchStrategy[tuple[ast.Expr, ...]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=4).map(
        lambda vs: tuple(ast.String(v) for v in vs)
    )


@cache
def atoms(lets: tuple[str, ...], decision: bool, depth: int) -> st.SearchStrategy[ast.Expr]:
    ua = ast.Name("ua_family")
    tor = ast.Name("is_tor")
    options = [
        compare_chain(depth),
        st.builds(
            ast.InSet,
            num_terms(depth),
            st.lists(numbers(), min_size=1, max_size=3).map(tuple),
            st.booleans(),
        ),
        st.builds(
            lambda s, a, b, neg: ast.InInterval(s, a, b, neg),
            num_terms(depth),
            numbers(),
            numbers(),
            st.booleans(),
        ),
        st.builds(
            lambda v, op, flip: ast.Compare((v, ua) if flip else (ua, v), (op,)),
            st.sampled_from(UA_VALUES).map(ast.String),
            st.sampled_from(["==", "!="]),
            st.booleans(),
        ),
        st.builds(lambda vs, neg: ast.InSet(ua, vs, neg), _strings(UA_VALUES), st.booleans()),
        st.just(tor),
        st.builds(
            lambda b, op: ast.Compare((tor, ast.BoolLit(b)), (op,)),
            st.booleans(),
            st.sampled_from(["==", "!="]),
        ),
        st.builds(
            lambda bs, neg: ast.InSet(tor, tuple(ast.BoolLit(b) for b in bs), neg),
            st.lists(st.booleans(), min_size=1, max_size=2),
            st.booleans(),
        ),
        st.booleans().map(ast.BoolLit),
    ]
    if lets:
        options.append(st.sampled_from(lets).map(ast.Name))
    if decision:
        act = ast.Name("action")
        options += [
            st.builds(
                lambda a, op, flip: ast.Compare(
                    (ast.Name(a), act) if flip else (act, ast.Name(a)), (op,)
                ),
                st.sampled_from(ACTIONS),
                _CMP,
                st.booleans(),
            ),
            st.builds(
                lambda names, neg: ast.InSet(act, tuple(ast.Name(n) for n in names), neg),
                st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=4),
                st.booleans(),
            ),
            st.builds(
                lambda op, t: ast.Compare((ast.Name("confidence"), t), (op,)),
                _CMP,
                num_terms(0),
            ),
        ]
    return st.one_of(*options)


@cache
def conditions(
    lets: tuple[str, ...], decision: bool, depth: int = 2
) -> st.SearchStrategy[ast.Expr]:
    """Boolean conditions (with the decision's action and confidence when *decision*)."""
    base = atoms(lets, decision, 1)
    if depth <= 0:
        return base
    sub = conditions(lets, decision, depth - 1)
    many = st.lists(sub, min_size=2, max_size=3).map(tuple)
    return st.one_of(
        base,
        sub.map(ast.Not),
        sub.map(ast.Paren),
        many.map(ast.And),
        many.map(ast.Or),
        many.map(ast.Implies),
    )


RELATIONAL = st.one_of(
    st.sampled_from([*NUMERIC, "is_tor"]).map(lambda f: ast.Call("monotone", (ast.Name(f),))),
    st.builds(
        lambda f, d: ast.Call("stable", (ast.Name(f), d)),
        st.sampled_from(NUMERIC),
        st.integers(0, 100).map(lambda i: ast.Number(str(i), Fraction(i))),
    ),
    st.sampled_from([*NUMERIC, "is_tor", "ua_family"]).map(
        lambda f: ast.Call("independent", (ast.Name(f),))
    ),
)

_DESCRIPTIONS = st.one_of(
    st.none(),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20).map(ast.String),
)


@st.composite
def programs(draw) -> ast.Program:
    """A whole file: a severity line, some lets (each using earlier ones) and invariants."""
    items: list[ast.Item] = []
    order = draw(st.one_of(st.just(ACTIONS), st.permutations(ACTIONS)))
    items.append(ast.Severity(tuple(ast.Ident(a) for a in order)))
    lets: list[str] = []
    for name in draw(st.lists(st.sampled_from(LET_NAMES), unique=True, max_size=3)):
        items.append(ast.Let(ast.Ident(name), draw(conditions(tuple(lets), False, 1))))
        lets.append(name)
    n = draw(st.integers(1, 3))
    for i in range(n):
        when = draw(st.one_of(st.none(), conditions(tuple(lets), False, 1)))
        if draw(st.integers(0, 5)) == 0:
            ensure: ast.Expr = draw(RELATIONAL)
        else:
            ensure = draw(conditions(tuple(lets), True, 2))
        items.append(ast.Invariant(ast.Ident(f"inv_{i}"), draw(_DESCRIPTIONS), when, ensure))
    return ast.Program("<gen>", tuple(items))
