"""A reference interpreter of the surface syntax, independent of the checker.

It evaluates an AST directly on a decoded input (feature name -> value as a user writes it),
with exact rationals for numbers, so that tests can compare it with the checked form.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from clefprove.dsl import ast
from clefprove.model.types import FeatureType, Model


class _Action:
    def __init__(self, name: str) -> None:
        self.name = name


class Reference:
    def __init__(self, model: Model, program: ast.Program, severity: list[str]) -> None:
        self.model = model
        self.types = {f.name: f.type for f in model.features}
        self.lets = {i.name.name: i.expr for i in program.items if isinstance(i, ast.Let)}
        self.rank = {a: r for r, a in enumerate(severity)}

    def holds(self, expr: ast.Expr, x: dict[str, Any], action: str, conf: float) -> bool:
        self.x, self.action, self.conf = x, action, conf
        return self._cond(expr)

    def _cond(self, e: ast.Expr) -> bool:
        v = self._val(e)
        assert isinstance(v, bool), (e, v)
        return v

    def _val(self, e: ast.Expr) -> Any:
        match e:
            case ast.Paren(inner):
                return self._val(inner)
            case ast.Number(_, value):
                return value
            case ast.String(s):
                return s
            case ast.BoolLit(b):
                return b
            case ast.Name("action"):
                return _Action(self.action)
            case ast.Name("confidence"):
                return Fraction(self.conf)
            case ast.Name(n) if n in self.lets:
                return self._cond(self.lets[n])
            case ast.Name(n) if n in self.types:
                t = self.types[n]
                v = self.x[n]
                return Fraction(v) if t in (FeatureType.INT, FeatureType.FLOAT) else v
            case ast.Name(n):
                assert n in self.model.actions, n
                return n
            case ast.Neg(a):
                return -self._val(a)
            case ast.Sum(first, rest):
                total = self._val(first)
                for op, t in rest:
                    total = total + self._val(t) if op == "+" else total - self._val(t)
                return total
            case ast.Product(factors):
                out = Fraction(1)
                for f in factors:
                    out *= self._val(f)
                return out
            case ast.Compare(operands, ops):
                vals = [self._val(o) for o in operands]
                return all(self._cmp(vals[i], op, vals[i + 1]) for i, op in enumerate(ops))
            case ast.InSet(subject, elements, negated):
                s = self._val(subject)
                inside = any(self._cmp(s, "==", self._val(el)) for el in elements)
                return inside != negated
            case ast.InInterval(subject, lo, hi, negated):
                s = self._val(subject)
                inside = self._val(lo) <= s <= self._val(hi)
                return inside != negated
            case ast.Not(a):
                return not self._cond(a)
            case ast.And(args):
                return all([self._cond(a) for a in args])
            case ast.Or(args):
                return any([self._cond(a) for a in args])
            case ast.Implies(args):
                result = self._cond(args[-1])
                for a in reversed(args[:-1]):
                    result = (not self._cond(a)) or result
                return result
        raise AssertionError(e)

    def _cmp(self, a: Any, op: str, b: Any) -> bool:
        if isinstance(a, _Action) or isinstance(b, _Action):
            left = a.name if isinstance(a, _Action) else a
            right = b.name if isinstance(b, _Action) else b
            if op in ("==", "!="):
                return (left == right) == (op == "==")
            a, b = self.rank[left], self.rank[right]
        return {
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
            "==": lambda: a == b,
            "!=": lambda: a != b,
        }[op]()
