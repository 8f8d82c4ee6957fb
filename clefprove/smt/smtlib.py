"""Standalone SMT-LIB 2 scripts for the verifier's per-path queries, for replay elsewhere.

One script per (invariant, leaf) query: the model's domain, the path to the leaf, and
``when and not ensure`` at the leaf's decision.  ``sat`` means an input on that path breaks the
invariant; ``unsat`` means none does.  The answer the verifier got is recorded with
``(set-info :status sat|unsat|unknown)`` so that any SMT-LIB solver can replay the script and
be compared with it (:func:`replay` does it with cvc5).

The encoding is written here, independently of the Z3 encoding in ``clefprove/smt``: int, bool
and categorical features are ``Int`` (bool 0/1, categorical the vocabulary index), float
features ``Real`` (every rational in the box: the same over-approximation of float64 inputs as
the verifier's), and every number is the exact rational of its float64 value.

``check --smtlib DIR`` writes one such script for every query the verifier sends to Z3
(``clefprove.smt.paths``), with Z3's answer recorded.  Paths decided without the solver (by
box reasoning) have no solver query and are not written.
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction
from pathlib import Path

from clefprove.dsl import checked as ck
from clefprove.errors import ClefproveError
from clefprove.fileio import write_atomic
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.status import SolverAnswer

STATUSES = tuple(SolverAnswer)


def query_name(invariant: str, leaf: int) -> str:
    """A file name for the query of *invariant* at *leaf* (safe on every file system)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", invariant)
    return f"{safe}-leaf{leaf}.smt2"


def _real(q: Fraction) -> str:
    q = Fraction(q)
    num = f"{abs(q.numerator)}.0"
    text = num if q.denominator == 1 else f"(/ {num} {q.denominator}.0)"
    return f"(- {text})" if q < 0 else text


def _int(z: int) -> str:
    return f"(- {abs(z)})" if z < 0 else str(z)


def _var(model: Model, i: int) -> str:
    return f"x{i}" if model.features[i].type is FeatureType.FLOAT else f"(to_real x{i})"


def _and(parts: list[str]) -> str:
    return "true" if not parts else parts[0] if len(parts) == 1 else f"(and {' '.join(parts)})"


def _or(parts: list[str]) -> str:
    return "false" if not parts else parts[0] if len(parts) == 1 else f"(or {' '.join(parts)})"


def formula(model: Model, f: ck.Formula, action: int, confidence: float, neg: bool = False) -> str:
    """*f* (negated when *neg*) at the decision (action, confidence) as an SMT-LIB term over
    x0, x1, ...; negations are pushed down to the comparisons, so that a negated comparison on
    a float feature is stated on float64 values too (see :func:`_float_compare`)."""
    match f:
        case ck.Const(value):
            return "true" if value != neg else "false"
        case ck.Compare(expr, strict):
            if neg:
                expr = ck.Linear(tuple((v, -c) for v, c in expr.terms), -expr.const)
                strict = not strict
            terms = []
            const = Fraction(expr.const)
            for var, coeff in expr.terms:
                if var == ck.CONFIDENCE:
                    const += Fraction(coeff) * Fraction(confidence)
                else:
                    terms.append(f"(* {_real(coeff)} {_var(model, var)})")
            features = [(v, c) for v, c in expr.terms if v != ck.CONFIDENCE]
            if len(features) == 1 and model.features[features[0][0]].type is FeatureType.FLOAT:
                return _float_compare(features[0][0], Fraction(features[0][1]), const, strict)
            lhs = " ".join([*terms, _real(const)])
            return f"({'<' if strict else '<='} (+ {lhs} 0.0) 0.0)"
        case ck.InSet(feature, codes):
            v = _var(model, feature)
            if neg and model.features[feature].type is FeatureType.FLOAT:
                return _and(
                    [
                        f"(or (<= {v} {_real(Fraction(math.nextafter(float(c), -math.inf)))}) "
                        f"(>= {v} {_real(Fraction(math.nextafter(float(c), math.inf)))}))"
                        for c in sorted(codes)
                    ]
                )
            member = _or([f"(= {v} {_real(Fraction(c))})" for c in sorted(codes)])
            return f"(not {member})" if neg else member
        case ck.ActionIn(actions):
            return "true" if (action in actions) != neg else "false"
        case ck.Not(arg):
            return formula(model, arg, action, confidence, not neg)
        case ck.And(args) | ck.Or(args):
            parts = [formula(model, a, action, confidence, neg) for a in args]
            return _and(parts) if isinstance(f, ck.And) != neg else _or(parts)
    raise TypeError(f"not a checked formula: {f!r}")


_MAX = Fraction(1.7976931348623157e308)


def _float_compare(var: int, coeff: Fraction, const: Fraction, strict: bool) -> str:
    """``coeff*x + const (<|<=) 0`` on a float feature, stated on the float64 values: as
    ``x <= b`` or ``x >= b`` with b the last float64 that satisfies it (the same float64
    solutions, none of the reals in between), as the verifier asks it."""
    q = -const / coeff
    upper = coeff > 0
    if abs(q) > _MAX:
        return "true" if (q > 0) == upper else "false"
    b = float(q)
    step = -math.inf if upper else math.inf
    # Move to the float64 side of q that satisfies the comparison (strictly when asked).
    while (Fraction(b) > q if upper else Fraction(b) < q) or (strict and Fraction(b) == q):
        b = math.nextafter(b, step)
        if math.isinf(b):
            return "false"
    return f"({'<=' if upper else '>='} x{var} {_real(Fraction(b))})"


def path_conditions(model: Model, leaf: int) -> list[str]:
    """The split conditions from the root to node *leaf*, as SMT-LIB terms."""
    parent: dict[int, tuple[int, bool]] = {}
    for node in model.iter_nodes():
        if not node.is_leaf:
            parent[node.left] = (node.index, True)
            parent[node.right] = (node.index, False)
    steps = []
    i = leaf
    while i in parent:
        p, left = parent[i]
        steps.append((p, left))
        i = p
    if i != 0:
        raise ClefproveError(f"node {leaf} is not reachable from the root")
    out = []
    for p, left in reversed(steps):
        node = model.node(p)
        v = _var(model, node.feature)
        if node.kind is NodeKind.NUMERIC:
            t = _real(Fraction(node.threshold))
            if left:
                out.append(f"(<= {v} {t})")
            elif model.features[node.feature].type is FeatureType.FLOAT:
                # On float64 inputs, x > t is exactly x >= the next float64 above t; saying so
                # keeps the real-valued query equal to the float64 question the verifier asks.
                out.append(f"(>= {v} {_real(Fraction(math.nextafter(node.threshold, math.inf)))})")
            else:
                out.append(f"(> {v} {t})")
        else:
            member = _or([f"(= {v} {_real(Fraction(c))})" for c in sorted(node.categories)])
            out.append(member if left else f"(not {member})")
    return out


def query_script(
    model: Model, invariant: ck.CheckedInvariant, leaf: int, status: str = "unknown"
) -> str:
    """The standalone script of the query of *invariant* (non-relational) at *leaf*."""
    if invariant.is_relational:
        raise ClefproveError(f"{invariant.name}: relational invariants have no per-path query")
    return path_query(model, invariant.when, invariant.ensure_formula, leaf, status, invariant.name)


def path_query(
    model: Model,
    when: ck.Formula,
    ensure: ck.Formula,
    leaf: int,
    status: str = "unknown",
    label: str = "",
) -> str:
    """The standalone script of ``when and not ensure`` on the path to *leaf*."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}")
    node = model.node(leaf)
    if not node.is_leaf:
        raise ClefproveError(f"node {leaf} is not a leaf")
    lines = [
        "(set-info :smt-lib-version 2.6)",
        f"(set-info :source |clefprove query: model {_clean(model.name)} "
        f"{_clean(model.version)} sha256 {model.sha256}; invariant {_clean(label)}; "
        f"leaf {leaf} (action {_clean(model.actions[node.action])}, confidence "
        f"{node.confidence!r}). sat: an input on this path breaks the invariant.|)",
        "(set-logic QF_LIRA)",
        f"(set-info :status {status})",
    ]
    for i, f in enumerate(model.features):
        sort = "Real" if f.type is FeatureType.FLOAT else "Int"
        lines.append(f"(declare-const x{i} {sort}) ; {_clean(f.name)} ({f.type.value})")
    lines.append("; the domain")
    for i, f in enumerate(model.features):
        if f.type is FeatureType.FLOAT:
            lo, hi = _real(Fraction(f.min)), _real(Fraction(f.max))
        else:
            lo, hi = _int(int(f.min)), _int(int(f.max))
        lines.append(f"(assert (and (<= {lo} x{i}) (<= x{i} {hi})))")
    lines.append(f"; the path to leaf {leaf}")
    lines += [f"(assert {c})" for c in path_conditions(model, leaf)]
    lines.append("; when and not ensure, at the leaf's decision")
    w = formula(model, when, node.action, node.confidence)
    e = formula(model, ensure, node.action, node.confidence, neg=True)
    lines.append(f"(assert (and {w} {e}))")
    lines += ["(check-sat)", "(exit)"]
    return "\n".join(lines) + "\n"


def _clean(text: str) -> str:
    """Text safe inside ``|...|`` and comments."""
    return re.sub(r"[|\\\n\r]", "_", text)


def write_query(directory: str | os.PathLike[str], name: str, script: str) -> Path:
    """Write *script* as *directory*/*name* (atomically); returns the path."""
    path = Path(directory) / name
    write_atomic(path, script)
    return path


def expected_status(script: str) -> str | None:
    """The answer recorded in *script* (``sat``, ``unsat``, ``unknown``), if any."""
    m = re.search(r"\(set-info :status (sat|unsat|unknown)\)", script)
    return m.group(1) if m else None


def replay(script: str, timeout_ms: int = 10_000) -> str:
    """Run *script* through cvc5 (its Python API); returns ``sat``, ``unsat`` or ``unknown``."""
    try:
        import cvc5
    except ImportError as exc:  # cvc5 is a test dependency only
        raise ClefproveError("replaying SMT-LIB needs the cvc5 Python package") from exc
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("tlimit-per", str(timeout_ms))
    sm = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, sm)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, "query")
    answer = "unknown"
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        out = cmd.invoke(solver, sm).strip()
        if out in STATUSES:
            answer = out
    return answer
