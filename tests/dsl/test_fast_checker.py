"""The checker's shortcut for a comparison with a constant side (``checker._minus``) builds the
linear term of the general route (``_Num.plus(..., -1).linear()``); its shortcut for a whole
box literal ``feature OP number`` (``Checker._literal``) checks as the general route does."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl import checker as ch
from clefprove.dsl.checked import CONFIDENCE

fractions = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(Fraction),
    st.fractions(max_denominator=9),
)
nums = st.builds(
    ch._Num.of,
    st.dictionaries(st.sampled_from([CONFIDENCE, 0, 1, 2, 5]), fractions, max_size=3),
    fractions,
)


@given(nums, nums)
def test_minus_equals_the_general_route(a: ch._Num, b: ch._Num) -> None:
    got = ch._minus(a, b)
    want = a.plus(b, -1).linear()
    assert got == want
    assert all(type(c) is Fraction for _, c in got.terms) and type(got.const) is Fraction


# ---------------------------------------------------------------- the box-literal shortcut

_NAMES = [
    "client_rtt_ms",  # float
    "tls_version",  # int
    "is_tor",  # bool
    "ua_family",  # categorical
    "confidence",
    "action",
    "allow",  # an action name
    "close",  # a let
    "nope",  # unknown
]
_NUMBERS = ["0", "3", "0.25", "1e-300", "179769313486231570000000000000000000000", ".5", "7.0"]
_OPS = ["<", "<=", ">", ">=", "==", "!="]
_literal = st.builds(
    lambda a, op, b, flip: f"{b} {op} {a}" if flip else f"{a} {op} {b}",
    st.sampled_from(_NAMES),
    st.sampled_from(_OPS),
    st.sampled_from(_NUMBERS),
    st.booleans(),
)


class _General(ch.Checker):
    fast = False


def _checked(cls: type[ch.Checker], model: object, text: str) -> tuple[object, ...]:
    from clefprove.dsl.parser import parse_partial

    program = parse_partial(text, "t.inv").program
    checker = cls(model, {"t.inv": text})  # type: ignore[arg-type]
    result = checker.check([program])
    diags = tuple((d.line, d.column, d.message) for d in checker.diagnostics)
    out = []
    for inv in result.invariants:
        out.append((inv.when, inv.ensure, _types(inv.when), inv.digest))
    return tuple(out), diags


def _types(f: object) -> object:
    """The Python types inside a checked formula (``==`` alone would take 1 for Fraction(1))."""
    if isinstance(f, tuple | list):
        return tuple(_types(x) for x in f)
    if hasattr(f, "__dataclass_fields__"):
        return (type(f).__name__, *(_types(getattr(f, n)) for n in f.__dataclass_fields__))
    return type(f).__name__


@given(st.lists(_literal, min_size=1, max_size=6), st.sampled_from([" and ", " or "]))
def test_box_literals_check_as_the_general_route(spec_model, literals, joiner) -> None:
    text = (
        "let close = client_rtt_ms < 5\n"
        f"invariant t:\n  when {joiner.join(literals)}\n  ensure action == block\n"
    )
    assert _checked(ch.Checker, spec_model, text) == _checked(_General, spec_model, text)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 40), st.sampled_from([Fraction(1), Fraction(-1)]), st.fractions(), st.booleans()
)
def test_box_literals_made_directly_are_the_constructors(
    index: int, coeff: Fraction, const: Fraction, strict: bool
) -> None:
    """The checker's box literals (filled without their __init__) equal, hash, print and hold
    what the constructors build."""
    assert ch._bound_literal is not ch._built_bound_literal
    made = ch._bound_literal(index, coeff, const, strict)
    built = ch._built_bound_literal(index, coeff, const, strict)
    assert isinstance(made, ck.Compare) and isinstance(built, ck.Compare)
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert type(made) is type(built) and type(made.expr) is type(built.expr)
    assert list(vars(made)) == list(vars(built)) and made.strict is built.strict
    assert list(vars(made.expr).items()) == list(vars(built.expr).items())
