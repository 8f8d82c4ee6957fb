"""The typed, immutable syntax tree of an invariant file.

Built by :mod:`clefprove.dsl.parser` from the Lark parse tree, consumed by the type checker
(:mod:`clefprove.dsl.checker`) and the formatter (:mod:`clefprove.dsl.fmt`).  Every node carries
its source position in :class:`Pos`; positions are excluded from equality, so two trees that
differ only in layout compare equal.  Operator chains (``and``, ``or``, ``implies``, sums,
products, chained comparisons) are flat tuples, as written, so a long chain is not a deep tree.
"""

from __future__ import annotations

from dataclasses import field
from fractions import Fraction

from clefprove.frozen import frozen


def fillable(cls: type, names: tuple[str, ...]) -> bool:
    """Whether *cls* is a frozen dataclass with the fields *names* (in this order), kept in
    the instance dict, without ``__post_init__`` or a ``__new__`` of its own: one whose
    instance dict a hot path may set in one call (``object.__setattr__(obj, "__dict__",
    ...)``) instead of its ``__init__``'s ``object.__setattr__`` per field, for the same
    object."""
    fields = getattr(cls, "__dataclass_fields__", {})
    new: object = cls.__new__
    return (
        tuple(fields) == names
        and not hasattr(cls, "__post_init__")
        and getattr(cls, "__dictoffset__", 0) != 0
        and new is object.__new__
    )


_NEW = object.__new__


def exact_fraction(value: float) -> Fraction:
    """``Fraction(value)`` of a finite float: its integer ratio (already in lowest terms,
    positive denominator) set in the Fraction's two slots, without ``Fraction.__new__``'s
    type tests (~1.1 us of its ~1.5; a 60-literal ``when`` makes 60).  Only while
    :data:`FRACTION_SLOTS` holds; else the constructor."""
    q: Fraction = _NEW(Fraction)
    q._numerator, q._denominator = value.as_integer_ratio()  # type: ignore[attr-defined]
    return q


def negated(q: Fraction) -> Fraction:
    """``-q`` of a Fraction (not a subclass: ``Fraction.__neg__`` keeps the type of neither),
    filled as :func:`exact_fraction` is."""
    out: Fraction = _NEW(Fraction)
    out._numerator, out._denominator = -q.numerator, q.denominator  # type: ignore[attr-defined]
    return out


def _fraction_slots() -> bool:
    """Whether ``Fraction`` keeps its value in the slots ``_numerator`` and ``_denominator``
    (CPython's fractions.py since 3.x) so that :func:`exact_fraction` and :func:`negated` make
    the constructor's Fractions: equal, same hash, repr, numerator and denominator, on a few
    floats (tests/dsl/test_exact_fraction.py checks it on many)."""
    if getattr(Fraction, "__slots__", None) != ("_numerator", "_denominator"):
        return False
    try:
        for v in (0.0, -0.0, 0.1, -2.5, 3.0, 1e-300, 2.0**70, -(2.0**-1074)):
            a, b = exact_fraction(v), Fraction(v)
            c, d = negated(a), -b
            for x, y in ((a, b), (c, d)):
                if not (
                    type(x) is Fraction
                    and x == y
                    and hash(x) == hash(y)
                    and repr(x) == repr(y)
                    and (x.numerator, x.denominator) == (y.numerator, y.denominator)
                ):
                    return False
    except Exception:  # pragma: no cover - another Fraction
        return False
    return True


#: Whether :func:`exact_fraction` and :func:`negated` fill Fractions directly.
FRACTION_SLOTS = _fraction_slots()
if not FRACTION_SLOTS:  # pragma: no cover - Fraction changed shape: its constructor

    def exact_fraction(value: float) -> Fraction:
        return Fraction(value)

    def negated(q: Fraction) -> Fraction:
        return -q


@frozen
class Pos:
    """A span in a source file: 1-based line and column of its start and end."""

    file: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0


NOPOS = Pos("<ast>", 0, 0, 0, 0)


@frozen
class Node:
    """Base of every AST node: a source position (ignored by ``==``)."""

    pos: Pos = field(default=NOPOS, compare=False, kw_only=True, repr=False)

    @property
    def file(self) -> str:
        return self.pos.file

    @property
    def line(self) -> int:
        return self.pos.line

    @property
    def column(self) -> int:
        return self.pos.column


# ---------------------------------------------------------------- expressions


class Expr(Node):
    """Base of expressions (conditions and numeric terms alike; the checker tells them apart)."""


@frozen
class Number(Expr):
    """A number as written; *value* is the float64 nearest to it, as an exact fraction."""

    text: str
    value: Fraction


@frozen
class String(Expr):
    value: str


@frozen
class BoolLit(Expr):
    value: bool


@frozen
class Name(Expr):
    """A feature, ``action``, ``confidence``, an action name or a ``let`` name."""

    id: str


@frozen
class Neg(Expr):
    arg: Expr


@frozen
class Sum(Expr):
    """``first (op term)*`` with op ``+`` or ``-``."""

    first: Expr
    rest: tuple[tuple[str, Expr], ...]


@frozen
class Product(Expr):
    factors: tuple[Expr, ...]  # at least two


@frozen
class Compare(Expr):
    """A comparison chain ``operands[0] ops[0] operands[1] ops[1] ...``."""

    operands: tuple[Expr, ...]  # len(ops) + 1
    ops: tuple[str, ...]  # each one of < <= > >= == !=


@frozen
class InSet(Expr):
    """``subject in {elements}`` (or ``not in`` when *negated*)."""

    subject: Expr
    elements: tuple[Expr, ...]
    negated: bool = False


@frozen
class InInterval(Expr):
    """``subject in [lo, hi]``, the closed interval (or ``not in`` when *negated*)."""

    subject: Expr
    lo: Expr
    hi: Expr
    negated: bool = False


@frozen
class Not(Expr):
    arg: Expr


@frozen
class And(Expr):
    args: tuple[Expr, ...]  # at least two


@frozen
class Or(Expr):
    args: tuple[Expr, ...]  # at least two


@frozen
class Implies(Expr):
    """``a implies b implies c`` = ``a implies (b implies c)``."""

    args: tuple[Expr, ...]  # at least two


@frozen
class Paren(Expr):
    """Parentheses as written (kept so that the formatter reproduces them)."""

    expr: Expr


@frozen
class Call(Expr):
    """``name(args)``: the relational forms ``monotone``, ``stable`` and ``independent``."""

    name: str
    args: tuple[Expr, ...]


# ---------------------------------------------------------------- items


@frozen
class Ident(Node):
    """A name at a definition site (an invariant, a ``let``, an action in ``severity``)."""

    name: str


class Item(Node):
    """Base of top-level items."""


@frozen
class Severity(Item):
    """``severity a < b < c``: actions, lowest severity first."""

    actions: tuple[Ident, ...]


@frozen
class Let(Item):
    name: Ident
    expr: Expr


@frozen
class Invariant(Item):
    name: Ident
    description: String | None
    when: Expr | None
    ensure: Expr
    when_pos: Pos | None = field(default=None, compare=False, repr=False)
    ensure_pos: Pos = field(default=NOPOS, compare=False, repr=False)


@frozen
class Comment(Node):
    """A ``#`` comment (text includes the ``#``), kept for the formatter."""

    text: str


@frozen
class Program:
    """One parsed file."""

    file: str
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = field(default=(), compare=False)
    blank_lines: frozenset[int] = field(default=frozenset(), compare=False, repr=False)
    #: (line, column of the first token on that line), for placing comments when formatting.
    code_starts: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)
