"""Type checking: bind the names of parsed files to a :class:`Model` and build the checked form.

The output is :class:`~clefprove.dsl.checked.CheckedProgram`: no names, only feature and action
indices; ``let`` expanded, chained comparisons split, intervals and numeric sets desugared,
``implies`` rewritten, linear terms normalised (``a <= b`` is ``a - b <= 0``) with exact
rational coefficients, and ``action < x`` resolved through the severity order.  Every mistake is
collected as a :class:`~clefprove.dsl.errors.Diagnostic`; see docs/dsl.md for the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from clefprove.dsl import ast
from clefprove.dsl import checked as ck
from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.frozen import frozen
from clefprove.model.types import Feature, FeatureType

#: The relational ``ensure`` forms and their arities.
RELATIONAL = {"monotone": 1, "stable": 2, "independent": 1}

_ONE = Fraction(1)
_MINUS_ONE = Fraction(-1)

_NEW = object.__new__
_SET = object.__setattr__


def _bound_literal(index: int, coeff: Fraction, const: Fraction, strict: bool) -> ck.Formula:
    """``ck.Compare(ck.Linear(((index, coeff),), const), strict)``, both filled without their
    frozen dataclass ``__init__`` (the box literals of a long ``when``): the same objects
    (tests/dsl check it).  Only while both classes are ``ast.fillable``; else their
    constructors."""
    expr: ck.Linear = _NEW(ck.Linear)
    _SET(expr, "__dict__", {"terms": ((index, coeff),), "const": const})
    out: ck.Compare = _NEW(ck.Compare)
    _SET(out, "__dict__", {"expr": expr, "strict": strict})
    return out


def _built_bound_literal(index: int, coeff: Fraction, const: Fraction, strict: bool) -> ck.Formula:
    """:func:`_bound_literal` through the constructors."""
    return ck.Compare(ck.Linear(((index, coeff),), const), strict)


if not (
    ast.fillable(ck.Linear, ("terms", "const")) and ast.fillable(ck.Compare, ("expr", "strict"))
):  # pragma: no cover - the checked forms changed shape: their constructors
    _bound_literal = _built_bound_literal


def _neg(k: Fraction) -> Fraction:
    """``-k`` (:func:`ast.negated` for a plain Fraction, the box literal's number)."""
    return ast.negated(k) if type(k) is Fraction else -k


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_ORDER_OPS = {"<", "<=", ">", ">="}


class Signature(Protocol):
    """What the checker reads from a model: its features and actions (a single-tree
    :class:`~clefprove.model.types.Model` and an ensemble both have them)."""

    @property
    def features(self) -> tuple[Feature, ...]: ...

    @property
    def actions(self) -> tuple[str, ...]: ...


class _Reported(Exception):
    """An error in this expression has been recorded; abandon the expression."""


# Values of sub-expressions while checking.
@frozen
class _Num:
    coeffs: tuple[tuple[int, Fraction], ...]
    const: Fraction

    @staticmethod
    def of(coeffs: Mapping[int, Fraction], const: Fraction) -> _Num:
        return _Num(tuple(sorted((v, c) for v, c in coeffs.items() if c != 0)), const)

    @property
    def is_const(self) -> bool:
        return not self.coeffs

    def scaled(self, k: Fraction) -> _Num:
        return _Num.of({v: c * k for v, c in self.coeffs}, self.const * k)

    def plus(self, other: _Num, sign: int = 1) -> _Num:
        acc = dict(self.coeffs)
        for v, c in other.coeffs:
            acc[v] = acc.get(v, Fraction(0)) + sign * c
        return _Num.of(acc, self.const + sign * other.const)

    def linear(self) -> ck.Linear:
        return ck.Linear.make(dict(self.coeffs), self.const)


@frozen
class _Cond:
    formula: ck.Formula


@frozen
class _Cat:
    feature: int


@frozen
class _BoolFeature:
    feature: int


@frozen
class _Str:
    value: str


@frozen
class _BoolLit:
    value: bool


@frozen
class _ActionVar:
    pass


@frozen
class _ActionName:
    index: int


_Value = _Num | _Cond | _Cat | _BoolFeature | _Str | _BoolLit | _ActionVar | _ActionName


def _and(parts: Iterable[ck.Formula]) -> ck.Formula:
    flat: list[ck.Formula] = []
    for p in parts:
        flat.extend(p.args if isinstance(p, ck.And) else (p,))
    return flat[0] if len(flat) == 1 else ck.And(tuple(flat))


def _or(parts: Iterable[ck.Formula]) -> ck.Formula:
    flat: list[ck.Formula] = []
    for p in parts:
        flat.extend(p.args if isinstance(p, ck.Or) else (p,))
    return flat[0] if len(flat) == 1 else ck.Or(tuple(flat))


def _minus(a: _Num, b: _Num) -> ck.Linear:
    """``a - b`` as a :class:`~clefprove.dsl.checked.Linear` (``a.plus(b, -1).linear()``; a
    constant side, as in every box literal ``x >= 0.25``, costs one rational subtraction)."""
    if not b.coeffs:
        return ck.Linear(a.coeffs, a.const - b.const)
    if not a.coeffs:
        return ck.Linear(tuple((v, -c) for v, c in b.coeffs), a.const - b.const)
    return a.plus(b, -1).linear()


def _compare(left: _Num, op: str, right: _Num) -> ck.Formula:
    """``left op right`` as normalised comparisons of ``expr <= 0`` / ``expr < 0``."""
    if op == "<=":
        return ck.Compare(_minus(left, right), False)
    if op == "<":
        return ck.Compare(_minus(left, right), True)
    if op == ">=":
        return ck.Compare(_minus(right, left), False)
    if op == ">":
        return ck.Compare(_minus(right, left), True)
    eq = ck.And(
        (
            ck.Compare(_minus(left, right), False),
            ck.Compare(_minus(right, left), False),
        )
    )
    return eq if op == "==" else ck.Not(eq)


def _suggest(name: str, candidates: Iterable[str]) -> str | None:
    import difflib  # a suggestion, on an error only

    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _unparen(expr: ast.Expr) -> ast.Expr:
    while isinstance(expr, ast.Paren):
        expr = expr.expr
    return expr


def _mentions_decision(formula: ck.Formula) -> bool:
    match formula:
        case ck.ActionIn():
            return True
        case ck.Compare(expr, _):
            return ck.CONFIDENCE in expr.variables
        case ck.Not(arg):
            return _mentions_decision(arg)
        case ck.And(args) | ck.Or(args):
            return any(_mentions_decision(a) for a in args)
    return False


def _kind(feature: Feature) -> str:
    return {
        FeatureType.INT: "int",
        FeatureType.FLOAT: "float",
        FeatureType.BOOL: "bool",
        FeatureType.CATEGORICAL: "categorical",
    }[feature.type]


class Checker:
    """Checks the parsed files of one run against *model*."""

    def __init__(
        self,
        model: Signature,
        sources: Mapping[str, str] | None = None,
        broken: Mapping[str, frozenset[str]] | None = None,
        broken_severity: bool = False,
    ) -> None:
        self.model = model
        # items that did not parse: their uses are not reported again as unknown names
        self.broken = dict(broken or {})
        self.broken_here: frozenset[str] = frozenset()
        self.severity_declared = broken_severity
        self.features = {f.name: i for i, f in enumerate(model.features)}
        # the names a comparison reads as a numeric feature (``_name``: not the decision's)
        self.numeric = {
            f.name: i
            for i, f in enumerate(model.features)
            if f.type in (FeatureType.INT, FeatureType.FLOAT)
            and f.name not in ("action", "confidence")
        }
        self.actions = {a: i for i, a in enumerate(model.actions)}
        self.sources = {f: t.split("\n") for f, t in (sources or {}).items()}
        self.diagnostics: list[Diagnostic] = []
        self.severity: tuple[int, ...] | None = None
        self.rank: dict[int, int] = {}
        # per-file let scope
        self.lets: dict[str, ast.Let] = {}
        self.let_values: dict[str, ck.Formula | None] = {}
        self.resolving: list[str] = []
        self.elsewhere: dict[str, str] = {}  # let name -> the first file defining it

    # ------------------------------------------------------------------ diagnostics

    def error(self, pos: ast.Pos, message: str) -> _Reported:
        lines = self.sources.get(pos.file, [])
        source = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
        self.diagnostics.append(Diagnostic(pos.file, pos.line, pos.column, message, source))
        return _Reported()

    # ------------------------------------------------------------------ program

    def check(self, programs: Sequence[ast.Program]) -> ck.CheckedProgram:
        """Check every file; the mistakes found are left in :attr:`diagnostics`."""
        self._severity(programs)
        self.elsewhere = {
            item.name.name: program.file
            for program in reversed(programs)
            for item in program.items
            if isinstance(item, ast.Let)
        }
        invariants: list[ck.CheckedInvariant] = []
        seen: dict[str, ast.Pos] = {}
        for program in programs:
            self._enter_file(program)
            starts = sorted({item.pos.line for item in program.items})
            for item in program.items:
                if isinstance(item, ast.Let):
                    self._let_value(item.name.name)
                elif isinstance(item, ast.Invariant):
                    name = item.name.name
                    if name in seen:
                        first = seen[name]
                        self.error(
                            item.name.pos,
                            f"duplicate invariant '{name}' (first defined "
                            f"at {first.file}:{first.line})",
                        )
                    else:
                        seen[name] = item.name.pos
                    text = self._item_text(program.file, item.pos.line, starts)
                    result = self._invariant(item, text)
                    if result is not None:
                        invariants.append(result)
        return ck.CheckedProgram(tuple(invariants), self.severity)

    def _item_text(self, file: str, line: int, starts: Sequence[int]) -> str | None:
        """The text of the item starting on *line*: up to the next item, without the blank and
        comment lines that end it."""
        lines = self.sources.get(file)
        if lines is None or not 1 <= line <= len(lines):
            return None
        end = next((s for s in starts if s > line), len(lines) + 1)
        block = lines[line - 1 : end - 1]
        while block and (not block[-1].strip() or block[-1].lstrip().startswith("#")):
            block.pop()
        return "\n".join(block)

    def _severity(self, programs: Sequence[ast.Program]) -> None:
        first: ast.Severity | None = None
        for program in programs:
            for item in program.items:
                if not isinstance(item, ast.Severity):
                    continue
                self.severity_declared = True
                order = self._severity_order(item)
                if order is None:
                    continue
                if first is None:
                    first = item
                    self.severity = order
                    self.rank = {a: r for r, a in enumerate(order)}
                elif order != self.severity:
                    self.error(
                        item.pos,
                        f"severity order disagrees with the one at {first.file}:{first.line}",
                    )

    def _severity_order(self, item: ast.Severity) -> tuple[int, ...] | None:
        order: list[int] = []
        ok = True
        for ident in item.actions:
            if ident.name not in self.actions:
                self._unknown_action(ident.pos, ident.name)  # recorded; keep checking the line
                ok = False
            elif self.actions[ident.name] in order:
                self.error(ident.pos, f"action '{ident.name}' appears twice in the severity order")
                ok = False
            else:
                order.append(self.actions[ident.name])
        if not ok:
            return None
        missing = [a for a in self.model.actions if self.actions[a] not in order]
        if missing:
            names = ", ".join(f"'{m}'" for m in missing)
            self.error(item.pos, f"severity must order every action; missing {names}")
            return None
        return tuple(order)

    def _enter_file(self, program: ast.Program) -> None:
        self.broken_here = self.broken.get(program.file, frozenset())
        self.lets = {}
        self.let_values = {}
        for item in program.items:
            if not isinstance(item, ast.Let):
                continue
            name = item.name.name
            if name in self.lets:
                first = self.lets[name].name.pos
                self.error(
                    item.name.pos, f"duplicate let '{name}' (first defined at line {first.line})"
                )
                continue
            clash = self._builtin_kind(name)
            if clash:
                self.error(item.name.pos, f"let '{name}' would hide {clash} '{name}'")
                continue
            self.lets[name] = item

    def _builtin_kind(self, name: str) -> str | None:
        if name in ("action", "confidence"):
            return "the decision's"
        if name in self.features:
            return "feature"
        if name in self.actions:
            return "action"
        return None

    def _let_value(self, name: str) -> ck.Formula | None:
        """The checked condition of a ``let`` (None if it has an error, reported once)."""
        if name in self.let_values:
            return self.let_values[name]
        let = self.lets.get(name)
        if let is None:
            return None
        self.resolving.append(name)
        try:
            value: ck.Formula | None = self._cond(let.expr)
        except _Reported:
            value = None
        finally:
            self.resolving.pop()
        self.let_values[name] = value
        return value

    def _invariant(
        self, inv: ast.Invariant, source: str | None = None
    ) -> ck.CheckedInvariant | None:
        ok = True
        when: ck.Formula = ck.Const(True)
        if inv.when is not None:
            try:
                when = self._cond(inv.when)
            except _Reported:
                ok = False
        ensure: ck.Formula | ck.Relational | None = None
        try:
            target = _unparen(inv.ensure)
            if isinstance(target, ast.Call):
                ensure = self._relational(target)
                if ok and _mentions_decision(when):
                    pos = inv.when_pos or inv.when.pos  # type: ignore[union-attr]
                    self.error(
                        pos,
                        "the 'when' of a relational invariant cannot use 'action' or "
                        "'confidence' (it must hold for both inputs)",
                    )
                    ok = False
            else:
                ensure = self._cond(inv.ensure)
        except _Reported:
            ok = False
        if not ok or ensure is None:
            return None
        p = inv.pos
        desc = inv.description.value if inv.description is not None else None
        return ck.CheckedInvariant(
            inv.name.name, desc, p.file, p.line, p.column, when, ensure, source=source
        )

    # ------------------------------------------------------------------ relational forms

    def _relational(self, call: ast.Call) -> ck.Relational:
        if call.name not in RELATIONAL:
            hint = _suggest(call.name, RELATIONAL)
            more = f"; did you mean '{hint}'?" if hint else " (monotone, stable, independent)"
            raise self.error(call.pos, f"unknown relational form '{call.name}'{more}")
        arity = RELATIONAL[call.name]
        if len(call.args) != arity:
            shape = "stable(feature, delta)" if call.name == "stable" else f"{call.name}(feature)"
            raise self.error(
                call.pos, f"{call.name} takes {arity} argument{'s' if arity > 1 else ''}: {shape}"
            )
        target = _unparen(call.args[0])
        if not isinstance(target, ast.Name):
            raise self.error(target.pos, f"{call.name}(...) needs a feature name")
        name = target.id
        if name not in self.features:
            what = self._builtin_kind(name) or ("let" if name in self.lets else None)
            if what:
                raise self.error(
                    target.pos,
                    f"{call.name}(...) needs a feature; '{name}' is "
                    f"{'a let' if what == 'let' else 'not a feature'}",
                )
            hint = _suggest(name, self.features)
            more = f"; did you mean '{hint}'?" if hint else ""
            raise self.error(target.pos, f"unknown feature '{name}'{more}")
        index = self.features[name]
        feature = self.model.features[index]
        if call.name == "monotone":
            if feature.type is FeatureType.CATEGORICAL:
                raise self.error(
                    target.pos,
                    f"monotone(...) needs an ordered feature; '{name}' is "
                    "categorical (use independent(...))",
                )
            if self.severity is None:
                if self.severity_declared:
                    raise _Reported()  # the severity line's own mistake is reported
                raise self.error(
                    call.pos, "monotone(...) needs a severity line that orders every action"
                )
            return ck.Monotone(index)
        if call.name == "stable":
            if not feature.is_numeric:
                raise self.error(
                    target.pos,
                    f"stable(...) needs a numeric feature; '{name}' is "
                    f"{_kind(feature)} (use independent(...))",
                )
            delta = self._num(call.args[1])
            if not delta.is_const:
                raise self.error(call.args[1].pos, "the delta of stable(...) must be a constant")
            if delta.const < 0:
                raise self.error(
                    call.args[1].pos,
                    f"the delta of stable(...) must be >= 0, not {_show(delta.const)}",
                )
            return ck.Stable(index, delta.const)
        return ck.Independent(index)

    # ------------------------------------------------------------------ conditions

    #: Take the shortcut for ``feature OP number`` (tests turn it off to compare the routes).
    fast = True

    def _cond(self, expr: ast.Expr) -> ck.Formula:
        """*expr* as a condition."""
        if type(expr) is ast.Compare and self.fast:
            literal = self._literal(expr)
            if literal is not None:
                return literal
        match expr:
            case ast.Paren(inner):
                return self._cond(inner)
            case ast.Not(arg):
                return ck.Not(self._cond(arg))
            case ast.And(args):
                return _and(self._all(args))
            case ast.Or(args):
                return _or(self._all(args))
            case ast.Implies(args):  # right-associative: a => (b => c) is not a or not b or c
                parts = self._all(args)
                return _or([*(ck.Not(p) for p in parts[:-1]), parts[-1]])
            case ast.Call(name, _) if name in RELATIONAL:
                raise self.error(
                    expr.pos, f"{name}(...) is a relational form: it must be the whole 'ensure'"
                )
        value = self._value(expr)
        match value:
            case _Cond(formula):
                return formula
            case _BoolFeature(f):
                return ck.InSet(f, frozenset({1}))
            case _BoolLit(b):
                return ck.Const(b)
        raise self.error(expr.pos, self._not_condition(expr, value))

    def _literal(self, expr: ast.Compare) -> ck.Formula | None:
        """``x OP k`` for a numeric feature *x* and a number *k* (a box literal) as
        :meth:`_chain` builds it (``_compare`` of ``x`` and ``k``), without the intermediate
        values; None for any other comparison."""
        if len(expr.ops) != 1:
            return None
        left, right = expr.operands
        if type(left) is not ast.Name or type(right) is not ast.Number:
            return None
        index = self.numeric.get(left.id)
        if index is None:
            return None
        op = expr.ops[0]
        k = right.value
        # (``0 - k`` is ``-k`` and ``k - 0`` is ``k``: the same Fractions as ``_minus``'s)
        if op == "<=":
            return _bound_literal(index, _ONE, _neg(k), False)
        if op == ">=":
            return _bound_literal(index, _MINUS_ONE, k, False)
        if op == "<":
            return _bound_literal(index, _ONE, _neg(k), True)
        if op == ">":
            return _bound_literal(index, _MINUS_ONE, k, True)
        return None

    def _all(self, args: Sequence[ast.Expr]) -> list[ck.Formula]:
        """Check every operand, reporting each one's mistakes before giving up."""
        out: list[ck.Formula] = []
        failed = False
        for a in args:
            try:
                out.append(self._cond(a))
            except _Reported:
                failed = True
        if failed:
            raise _Reported()
        return out

    def _not_condition(self, expr: ast.Expr, value: _Value) -> str:
        """The message for a value used where a condition is needed."""
        named = isinstance(_unparen(expr), ast.Name)
        match value:
            case _Num() if named:
                name = _unparen(expr).id  # type: ignore[attr-defined]
                return f"'{name}' is a number, not a condition; compare it, e.g. '{name} > 0'"
            case _Num():
                return "a number is not a condition; compare it with something"
            case _Cat(f):
                feature = self.model.features[f]
                return (
                    f"'{feature.name}' is a categorical feature, not a condition; compare it, "
                    f"e.g. '{feature.name} == \"{feature.values[0]}\"'"
                )
            case _Str():
                return "a string is not a condition"
            case _ActionVar():
                return (
                    "'action' is not a condition; compare it, e.g. "
                    f"'action == {self.model.actions[0]}'"
                )
            case _ActionName(a):
                return (
                    f"'{self.model.actions[a]}' is an action name, not a condition; "
                    f"compare it, e.g. 'action == {self.model.actions[a]}'"
                )
        return "not a condition"  # pragma: no cover

    # ------------------------------------------------------------------ values

    def _value(self, expr: ast.Expr, action_context: bool = False) -> _Value:
        match expr:
            case ast.Paren(inner):
                return self._value(inner, action_context)
            case ast.Number(_, value):
                return _Num((), value)
            case ast.String(s):
                if action_context and s in self.actions:
                    return _ActionName(self.actions[s])
                return _Str(s)
            case ast.BoolLit(b):
                return _BoolLit(b)
            case ast.Name(name):
                return self._name(expr, name, action_context)
            case ast.Neg(arg):
                return self._num(arg).scaled(Fraction(-1))
            case ast.Sum(first, rest):
                total = self._num(first)
                for op, term in rest:
                    total = total.plus(self._num(term), -1 if op == "-" else 1)
                return total
            case ast.Product(factors):
                return self._product(expr, factors)
            case ast.Compare(operands, ops):
                return _Cond(self._chain(operands, ops))
            case ast.InSet(subject, elements, negated):
                formula = self._in_set(expr, subject, elements)
                return _Cond(ck.Not(formula) if negated else formula)
            case ast.InInterval(subject, lo, hi, negated):
                formula = self._in_interval(expr, subject, lo, hi)
                return _Cond(ck.Not(formula) if negated else formula)
            case ast.Call(name, _):
                if name in RELATIONAL:
                    raise self.error(
                        expr.pos, f"{name}(...) is a relational form: it must be the whole 'ensure'"
                    )
                hint = _suggest(name, RELATIONAL)
                more = f"; did you mean '{hint}'?" if hint else ""
                raise self.error(expr.pos, f"unknown function '{name}'{more}")
            case ast.Not() | ast.And() | ast.Or() | ast.Implies():
                return _Cond(self._cond(expr))
        raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover

    def _name(self, expr: ast.Expr, name: str, action_context: bool) -> _Value:
        if action_context and name in self.actions:
            return _ActionName(self.actions[name])
        if name == "action":
            return _ActionVar()
        if name == "confidence":
            return _Num(((ck.CONFIDENCE, Fraction(1)),), Fraction(0))
        if name in self.lets:
            if name in self.resolving:
                cycle = [*self.resolving[self.resolving.index(name) :], name]
                path = " -> ".join(cycle)
                for n in cycle:
                    self.let_values.setdefault(n, None)
                raise self.error(expr.pos, f"let '{name}' refers to itself ({path})")
            value = self._let_value(name)
            if value is None:
                raise _Reported()  # the let's own mistake is reported at the let
            return _Cond(value)
        if name in self.features:
            index = self.features[name]
            ftype = self.model.features[index].type
            if ftype is FeatureType.CATEGORICAL:
                return _Cat(index)
            if ftype is FeatureType.BOOL:
                return _BoolFeature(index)
            return _Num(((index, Fraction(1)),), Fraction(0))
        if name in self.actions:
            return _ActionName(self.actions[name])
        if name in self.broken_here:
            raise _Reported()  # a let that did not parse: its syntax error is reported
        if name in self.elsewhere:
            raise self.error(
                expr.pos,
                f"unknown name '{name}': it is a let of {self.elsewhere[name]}, and a let is "
                "only visible in its own file",
            )
        if action_context:
            raise self._unknown_action(expr.pos, name)
        pools: list[tuple[str, Collection[str]]] = [
            ("feature", self.features),
            ("let", self.lets),
            ("name", [*self.actions, "action", "confidence"]),
        ]
        everything = [n for _, pool in pools for n in pool]
        hint = _suggest(name, everything)
        kind = "feature"
        if hint is not None:
            kind = next(k for k, pool in pools if hint in pool)
        more = f"; did you mean '{hint}'?" if hint else ""
        raise self.error(expr.pos, f"unknown {kind} '{name}'{more}")

    def _unknown_action(self, pos: ast.Pos, name: str) -> _Reported:
        hint = _suggest(name, self.actions)
        more = f"; did you mean '{hint}'?" if hint else ""
        return self.error(pos, f"unknown action '{name}'{more}")

    def _num(self, expr: ast.Expr) -> _Num:
        value = self._value(expr)
        if isinstance(value, _Num):
            return value
        raise self.error(expr.pos, f"expected a number, not {self._what(value)}")

    def _what(self, value: _Value) -> str:
        match value:
            case _Cat(f):
                return f"categorical feature '{self.model.features[f].name}'"
            case _BoolFeature(f):
                return f"bool feature '{self.model.features[f].name}'"
            case _Str(s):
                return f'the string "{s}"'
            case _BoolLit(b):
                return "true" if b else "false"
            case _ActionVar():
                return "'action'"
            case _ActionName(a):
                return f"action name '{self.model.actions[a]}'"
            case _Cond():
                return "a condition"
            case _Num(coeffs, const) if not coeffs:
                return f"the number {_show(const)}"
            case _Num():
                return "a number"
        return "this"  # pragma: no cover

    def _product(self, expr: ast.Expr, factors: Sequence[ast.Expr]) -> _Num:
        result = self._num(factors[0])
        for factor in factors[1:]:
            value = self._num(factor)
            if result.is_const:
                result = value.scaled(result.const)
            elif value.is_const:
                result = result.scaled(value.const)
            else:
                raise self.error(
                    factor.pos, "non-linear arithmetic: a product needs a constant on one side"
                )
        return result

    # ------------------------------------------------------------------ comparisons

    def _chain(self, operands: Sequence[ast.Expr], ops: Sequence[str]) -> ck.Formula:
        decision = any(_is_name(o, "action") for o in operands)
        values = [self._value(o, action_context=decision) for o in operands]
        parts = [
            self._pair(operands[i], values[i], op, operands[i + 1], values[i + 1])
            for i, op in enumerate(ops)
        ]
        return _and(parts)

    def _pair(self, lx: ast.Expr, lv: _Value, op: str, rx: ast.Expr, rv: _Value) -> ck.Formula:
        if isinstance(rv, _ActionVar) and not isinstance(lv, _ActionVar):
            lx, lv, op, rx, rv = rx, rv, _FLIP[op], lx, lv
        if isinstance(lv, _ActionVar):
            return self._action_compare(op, rx, rv)
        if isinstance(rv, _Cat | _BoolFeature) and not isinstance(lv, _Cat | _BoolFeature):
            lx, lv, op, rx, rv = rx, rv, _FLIP[op], lx, lv
        if isinstance(lv, _Num) and isinstance(rv, _Num):
            return _compare(lv, op, rv)
        if isinstance(lv, _Cat):
            name = self.model.features[lv.feature].name
            if isinstance(rv, _Str):
                if op in _ORDER_OPS:
                    raise self.error(
                        lx.pos,
                        f"categorical feature '{name}' has no order; use ==, !=, in or not in",
                    )
                code = self._category(lv.feature, rv.value, rx.pos)
                atom = ck.InSet(lv.feature, frozenset({code}))
                return atom if op == "==" else ck.Not(atom)
            if isinstance(rv, _Num):
                raise self.error(
                    lx.pos,
                    f"categorical feature '{name}' cannot be compared with a "
                    "number; compare it with a string",
                )
            raise self.error(
                rx.pos, f"categorical feature '{name}' compares with a string, not {self._what(rv)}"
            )
        if isinstance(lv, _BoolFeature):
            name = self.model.features[lv.feature].name
            if isinstance(rv, _BoolLit):
                if op in _ORDER_OPS:
                    raise self.error(lx.pos, f"bool feature '{name}' has no order; use == or !=")
                atom = ck.InSet(lv.feature, frozenset({int(rv.value)}))
                return atom if op == "==" else ck.Not(atom)
            raise self.error(
                rx.pos, f"bool feature '{name}' compares with true or false, not {self._what(rv)}"
            )
        bad, where = (lv, lx) if not isinstance(lv, _Num) else (rv, rx)
        raise self.error(where.pos, f"cannot compare {self._what(bad)} with '{op}'")

    def _category(self, feature: int, value: str, pos: ast.Pos) -> int:
        f = self.model.features[feature]
        if value in f.values:
            return f.values.index(value)
        hint = _suggest(value, f.values)
        more = f'; did you mean "{hint}"?' if hint else ""
        raise self.error(pos, f"\"{value}\" is not a value of categorical feature '{f.name}'{more}")

    def _action_operand(self, rx: ast.Expr, rv: _Value) -> int:
        if isinstance(rv, _ActionName):
            return rv.index
        if isinstance(rv, _Str):
            raise self._unknown_action(rx.pos, rv.value)
        raise self.error(rx.pos, f"'action' compares with an action name, not {self._what(rv)}")

    def _action_compare(self, op: str, rx: ast.Expr, rv: _Value) -> ck.Formula:
        target = self._action_operand(rx, rv)
        if op in ("==", "!="):
            atom = ck.ActionIn(frozenset({target}))
            return atom if op == "==" else ck.Not(atom)
        if self.severity is None:
            if self.severity_declared:
                raise _Reported()  # the severity line's own mistake is reported
            raise self.error(
                rx.pos,
                f"'action {op} {self.model.actions[target]}' needs a "
                "severity line that orders every action",
            )
        r = self.rank[target]
        keep: Callable[[int], bool] = {
            "<": lambda k: k < r,
            "<=": lambda k: k <= r,
            ">": lambda k: k > r,
            ">=": lambda k: k >= r,
        }[op]
        return ck.ActionIn(frozenset(a for a, k in self.rank.items() if keep(k)))

    def _in_set(
        self, expr: ast.Expr, subject: ast.Expr, elements: Sequence[ast.Expr]
    ) -> ck.Formula:
        sv = self._value(subject)
        if not elements:
            raise self.error(expr.pos, "empty set: 'in {}' is never true")
        if isinstance(sv, _ActionVar):
            values = [(e, self._value(e, action_context=True)) for e in elements]
            return ck.ActionIn(frozenset(self._action_operand(e, v) for e, v in values))
        if isinstance(sv, _Cat):
            codes = set()
            for e in elements:
                ev = self._value(e)
                if not isinstance(ev, _Str):
                    name = self.model.features[sv.feature].name
                    raise self.error(
                        e.pos,
                        f"categorical feature '{name}' compares with strings, not {self._what(ev)}",
                    )
                codes.add(self._category(sv.feature, ev.value, e.pos))
            return ck.InSet(sv.feature, frozenset(codes))
        if isinstance(sv, _BoolFeature):
            codes = set()
            for e in elements:
                ev = self._value(e)
                if not isinstance(ev, _BoolLit):
                    name = self.model.features[sv.feature].name
                    raise self.error(
                        e.pos,
                        f"bool feature '{name}' compares with true or false, not {self._what(ev)}",
                    )
                codes.add(int(ev.value))
            return ck.InSet(sv.feature, frozenset(codes))
        if isinstance(sv, _Num):
            return _or(_compare(sv, "==", self._num(e)) for e in elements)
        raise self.error(subject.pos, f"{self._what(sv)} cannot be tested with 'in {{...}}'")

    def _in_interval(
        self, expr: ast.Expr, subject: ast.Expr, lo: ast.Expr, hi: ast.Expr
    ) -> ck.Formula:
        sv = self._value(subject)
        if not isinstance(sv, _Num):
            raise self.error(subject.pos, f"'in [lo, hi]' needs a number; {self._what(sv)} is not")
        low, high = self._num(lo), self._num(hi)
        if low.is_const and high.is_const and low.const > high.const:
            raise self.error(
                expr.pos,
                f"empty interval [{_show(low.const)}, {_show(high.const)}]"
                ": the low end is above the high end",
            )
        return ck.And((_compare(low, "<=", sv), _compare(sv, "<=", high)))


def _is_name(expr: ast.Expr, name: str) -> bool:
    expr = _unparen(expr)
    return isinstance(expr, ast.Name) and expr.id == name


def _show(q: Fraction) -> str:
    """A short decimal rendering of an exact value, for messages (never overflows)."""
    if q.denominator == 1 and abs(q) < 2**53:
        return str(q.numerator)
    try:
        return repr(float(q))
    except OverflowError:  # products of constants can exceed the float64 range
        mantissa, exponent = format(Decimal(q.numerator) / Decimal(q.denominator), ".5e").split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent):+d}"


def check_programs(
    programs: Sequence[ast.Program], model: Signature, sources: Mapping[str, str] | None = None
) -> ck.CheckedProgram:
    """Type-check parsed files against *model* (*sources* maps file -> text, for carets).

    Raises :class:`DslError` listing every mistake found.
    """
    checker = Checker(model, sources)
    result = checker.check(programs)
    if checker.diagnostics:
        raise DslError(checker.diagnostics)
    return result
