"""The checked form of an invariant: what the DSL hands to the verifier.

It is the DSL stage's output and the solver stage's input.  It contains no names, only model
indices; ``let`` is expanded, chained comparisons are split, ``in [lo, hi]`` is desugared, and
``action < challenge`` is resolved through the severity order into an :class:`ActionIn`.

Arithmetic is exact: every number is a :class:`fractions.Fraction` equal to the float64 nearest
to what the user wrote, and a linear term is ``sum(coeff * var) + const`` in exact rationals.
A variable is a feature index (``>= 0``) or :data:`CONFIDENCE`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import field
from fractions import Fraction

from clefprove.frozen import frozen
from clefprove.memo import Derived

#: Variable id of the decision's confidence inside a :class:`Linear` term.
CONFIDENCE = -1


@frozen
class Linear:
    """``sum(coeff * var for var, coeff in terms) + const``; terms sorted by var, no zeros."""

    terms: tuple[tuple[int, Fraction], ...]
    const: Fraction

    @staticmethod
    def make(coeffs: dict[int, Fraction], const: Fraction) -> Linear:
        terms = tuple(sorted((v, Fraction(c)) for v, c in coeffs.items() if c != 0))
        return Linear(terms, Fraction(const))

    @property
    def variables(self) -> tuple[int, ...]:
        return tuple(v for v, _ in self.terms)

    def value(self, x: Sequence[float], confidence: float) -> Fraction:
        """Exact value at the encoded input *x* with the given confidence."""
        total = self.const
        for var, coeff in self.terms:
            total += coeff * Fraction(confidence if var == CONFIDENCE else x[var])
        return total

    def sign(self, x: Sequence[float], confidence: float) -> int:
        """The sign (-1, 0, 1) of :meth:`value`, exactly, in integer arithmetic: the running
        sum is kept as an integer fraction over a positive denominator (every finite float is
        ``a / 2**k``), without building or reducing a Fraction per term."""
        num, den = self.const.numerator, self.const.denominator
        for var, coeff in self.terms:
            v = confidence if var == CONFIDENCE else x[var]
            if isinstance(v, float):
                a, b = v.as_integer_ratio()
            else:  # an int (numpy's too): exactly, as Python ints (float() rounds past 2**53)
                q = Fraction(v)
                a, b = int(q.numerator), int(q.denominator)
            d = coeff.denominator * b
            num = num * d + coeff.numerator * a * den
            den *= d
        return (num > 0) - (num < 0)


class Formula:
    """Base class of checked boolean formulas."""

    __slots__ = ()


@frozen
class Const(Formula):
    value: bool


@frozen
class Compare(Formula):
    """``expr <= 0`` (or ``expr < 0`` when *strict*)."""

    expr: Linear
    strict: bool


@frozen
class InSet(Formula):
    """A categorical or bool feature takes one of *codes* (encoded values)."""

    feature: int
    codes: frozenset[int]


@frozen
class ActionIn(Formula):
    """The decision's action is one of *actions* (indices into the model's actions)."""

    actions: frozenset[int]


@frozen
class Not(Formula):
    arg: Formula


@frozen
class And(Formula):
    args: tuple[Formula, ...]


@frozen
class Or(Formula):
    args: tuple[Formula, ...]


class Relational:
    """Base class of relational ``ensure`` forms (two inputs differing in one feature)."""

    __slots__ = ()
    feature: int  # the one feature in which the two inputs differ (every subclass has it)


@frozen
class Monotone(Relational):
    """Raising only *feature* never lowers the action's severity."""

    feature: int


@frozen
class Stable(Relational):
    """Moving only *feature* by at most *delta* never changes the action."""

    feature: int
    delta: Fraction


@frozen
class Independent(Relational):
    """Changing only *feature* never changes the action."""

    feature: int


@frozen
class CheckedInvariant:
    """One type-checked invariant, ready for the verifier."""

    name: str
    description: str | None
    file: str
    line: int
    column: int
    when: Formula
    ensure: Formula | Relational
    #: The invariant's text exactly as it was parsed (reports quote it; not part of its meaning).
    source: str | None = field(default=None, compare=False, repr=False)
    #: What later stages derive from this invariant (normal forms per domain), kept here.
    derived: Derived = field(default_factory=Derived, init=False, compare=False, repr=False)

    @property
    def is_relational(self) -> bool:
        return isinstance(self.ensure, Relational)

    @property
    def ensure_formula(self) -> Formula:
        """``ensure`` of a non-relational invariant: the formula every per-path stage decides."""
        if isinstance(self.ensure, Relational):
            raise TypeError(f"{self.name}: a relational invariant has no ensure formula")
        return self.ensure

    @property
    def canonical(self) -> str:
        """A canonical text of the checked form (names, positions and layout excluded)."""
        return f"(invariant (when {canonical(self.when)}) (ensure {canonical(self.ensure)}))"

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of :attr:`canonical`: the cache key of this invariant's meaning."""
        return hashlib.sha256(self.canonical.encode()).hexdigest()


@frozen
class CheckedProgram:
    """Every checked invariant of one run, with the severity order (lowest first) if declared."""

    invariants: tuple[CheckedInvariant, ...]
    severity: tuple[int, ...] | None = None  # action indices, lowest severity first
    #: Every file of the run, with the text that was parsed (the source map of the invariants).
    sources: tuple[SourceFile, ...] = field(default=(), compare=False, repr=False)


@frozen
class SourceFile:
    """One invariant file as it was read: its path, its text and the SHA-256 of its bytes."""

    path: str
    text: str
    sha256: str


def _frac(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def canonical(node: Formula | Relational) -> str:
    """Deterministic s-expression of a formula or relational form."""
    match node:
        case Const(value):
            return "true" if value else "false"
        case Compare(expr, strict):
            terms = " ".join(
                f"(* {_frac(c)} {'conf' if v == CONFIDENCE else f'x{v}'})" for v, c in expr.terms
            )
            return f"({'<' if strict else '<='} (+ {terms} {_frac(expr.const)}) 0)"
        case InSet(feature, codes):
            return f"(in x{feature} {' '.join(map(str, sorted(codes)))})"
        case ActionIn(actions):
            return f"(action-in {' '.join(map(str, sorted(actions)))})"
        case Not(arg):
            return f"(not {canonical(arg)})"
        case And(args):
            return f"(and {' '.join(canonical(a) for a in args)})"
        case Or(args):
            return f"(or {' '.join(canonical(a) for a in args)})"
        case Monotone(feature):
            return f"(monotone x{feature})"
        case Stable(feature, delta):
            return f"(stable x{feature} {_frac(delta)})"
        case Independent(feature):
            return f"(independent x{feature})"
    raise TypeError(f"not a checked formula: {node!r}")


def evaluate(formula: Formula, x: Sequence[float], action: int, confidence: float) -> bool:
    """Exact truth of *formula* at encoded input *x* for a decision (action, confidence)."""
    match formula:
        case Const(value):
            return value
        case Compare(expr, strict):
            v = expr.sign(x, confidence)
            return v < 0 if strict else v <= 0
        case InSet(feature, codes):
            return int(x[feature]) in codes
        case ActionIn(actions):
            return action in actions
        case Not(arg):
            return not evaluate(arg, x, action, confidence)
        case And(args):
            for a in args:
                # (a Compare, the box literal, tested here: no match statement per literal)
                if type(a) is Compare:
                    v = a.expr.sign(x, confidence)
                    if not (v < 0 if a.strict else v <= 0):
                        return False
                elif not evaluate(a, x, action, confidence):
                    return False
            return True
        case Or(args):
            return any(evaluate(a, x, action, confidence) for a in args)
    raise TypeError(f"not a checked formula: {formula!r}")


def mentions_decision(formula: Formula) -> bool:
    """Whether *formula* reads the action or the confidence (so its truth needs the tree)."""
    match formula:
        case ActionIn():
            return True
        case Compare(expr, _):
            return CONFIDENCE in expr.variables
        case Not(arg):
            return mentions_decision(arg)
        case And(args) | Or(args):
            for a in args:
                if type(a) is Compare:  # (the box literals: no match statement per literal)
                    if any(v == CONFIDENCE for v, _ in a.expr.terms):
                        return True
                elif mentions_decision(a):
                    return True
            return False
    return False


def related(rel: Relational, a: float, b: float) -> bool:
    """Exact relation between the f-values of x and x' (monotone: a < b)."""
    match rel:
        case Monotone():
            return a < b
        case Stable(_, delta):
            return abs(Fraction(a) - Fraction(b)) <= delta
        case Independent():
            return a != b
    raise TypeError(f"not a relational form: {rel!r}")
