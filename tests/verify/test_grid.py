"""Exact float64 reasoning where the real relaxation does not settle a leaf (issue 15).

References, independent of the verifier: exhaustive enumeration of every input when each
float feature's domain holds few float64 values, and, on wide float domains, the exact
per-integer solution of a linear equation in Fractions.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.eval.evaluator import Evaluator
from clefprove.model.source import compile_source
from clefprove.model.types import Model
from clefprove.verify.api import check_invariant
from clefprove.verify.options import CheckOptions
from tests.verify.test_adversarial import assert_counterexamples_real, inv_of, no_internal

ISSUE_MODEL = {
    "name": "rt",
    "version": "1",
    "features": [
        {"name": "n1", "type": "int", "min": -1, "max": 6, "default": 0},
        {"name": "x0", "type": "float", "min": 0, "max": 10, "default": 0},
    ],
    "actions": ["allow", "block"],
    "tree": {"action": "block", "confidence": 0.5},
}

ISSUE_CASES = [
    ("when 20 != -7 * n1 + 0.25 * x0 ensure x0 + 0.3 * n1 != 0.1", "violated", False),
    ("ensure n1 + 0.1 * x0 != 0.5248341888200244", "holds", False),
    ("when n1 + 0.1 * x0 == 0.5248341888200244 ensure action == block", "holds", True),
    ("when n1 + 0.1 * x0 == 0.5248341888200244 ensure action == allow", "holds", True),
]


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_issue_cases_through_the_cli(tmp_path):
    """The three red-team findings: violated with the witness eval confirms, holds, holds and
    vacuous with the SPEC warning."""
    (tmp_path / "m.json").write_text(json.dumps(ISSUE_MODEL))
    assert _cli("compile", "m.json", "-o", "m.clef", cwd=tmp_path).returncode == 0
    for k, (body, status, vacuous) in enumerate(ISSUE_CASES):
        inv = tmp_path / f"c{k}.inv"
        inv.write_text(f"invariant c{k}:\n  {body}\n")
        res = _cli("check", "m.clef", inv, "--format", "json", cwd=tmp_path)
        out = json.loads(res.stdout)["results"][0]
        assert (out["status"], out["vacuous"]) == (status, vacuous), (body, out)
        assert res.returncode == (1 if status == "violated" else 0)
        if vacuous:
            assert "holds vacuously" in res.stderr
        if status == "violated":
            cex = out["counterexamples"][0]
            ev = subprocess.run(
                [sys.executable, "-m", "clefprove", "eval", "m.clef"],
                cwd=tmp_path,
                input=json.dumps(cex["input"]) + "\n",
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert json.loads(ev.stdout)["action"] == cex["action"]
            x0, n1 = Fraction(cex["input"]["x0"]), Fraction(cex["input"]["n1"])
            assert x0 + Fraction(0.3) * n1 == Fraction(0.1)  # the exact equality breaks ensure
            assert Fraction(-7) * n1 + Fraction(0.25) * x0 != 20


def test_issue_case_two_by_exact_fractions():
    """The 'holds' of case 2 is right: for no n1 is (c - n1) / 0.1 a float64 in [0, 10]."""
    c, tenth = Fraction(0.5248341888200244), Fraction(0.1)
    for n in range(-1, 7):
        q = (c - n) / tenth
        assert not (0 <= q <= 10 and Fraction(float(q)) == q)


# ---------------------------------------------------------------- differential, exhaustive


def _grid_floats(lo: float, n: int) -> list[float]:
    out = [lo]
    for _ in range(n - 1):
        out.append(math.nextafter(out[-1], math.inf))
    return out


@st.composite
def small_cases(draw):
    """An int feature with few values and one or two float features with few float64 values
    (so that every input can be enumerated), a one- or two-leaf tree, and ``a*n + b*x (+ e*y)
    op c`` literals whose constant is often hit exactly by some input."""
    n_lo = draw(st.integers(-3, 3))
    n_hi = n_lo + draw(st.integers(0, 6))
    x_lo = draw(st.sampled_from([0.1, 1.0, -0.3, 3.0, 1e-320]))
    x_n = draw(st.integers(1, 24))
    xs = _grid_floats(x_lo, x_n)
    two = draw(st.booleans())
    ys = _grid_floats(draw(st.sampled_from([0.2, 7.0, -1.0])), draw(st.integers(1, 12)))
    feats = [
        {"name": "n", "type": "int", "min": n_lo, "max": n_hi, "default": n_lo},
        {"name": "x", "type": "float", "min": xs[0], "max": xs[-1], "default": xs[0]},
    ]
    if two:
        feats.append({"name": "y", "type": "float", "min": ys[0], "max": ys[-1], "default": ys[0]})
    split_t = draw(st.sampled_from(xs))
    tree = draw(
        st.sampled_from(
            [
                {"action": "block", "confidence": 0.5},
                {
                    "feature": "x",
                    "threshold": split_t,
                    "left": {"action": "allow", "confidence": 0.9},
                    "right": {"action": "block", "confidence": 0.4},
                },
            ]
        )
    )
    model = compile_source({"features": feats, "actions": ["allow", "block"], "tree": tree})
    coef = st.sampled_from(
        [
            Fraction(0.1),
            Fraction(0.3),
            Fraction(3),
            Fraction(-7),
            Fraction(1, 3),
            Fraction(0.25),
            Fraction(1),
        ]
    )

    def literal():
        a, b, e = draw(coef), draw(coef), draw(coef)
        terms = [(0, a), (1, b)] + ([(2, e)] if two else [])
        point = [draw(st.integers(n_lo, n_hi)), draw(st.sampled_from(xs))] + (
            [draw(st.sampled_from(ys))] if two else []
        )
        c = sum((Fraction(v) * k for v, (_, k) in zip(point, terms, strict=True)), Fraction(0))
        c += draw(st.sampled_from([Fraction(0), Fraction(0), Fraction(1, 10**18), Fraction(0.1)]))
        le = ck.Compare(ck.Linear(tuple(terms), -c), draw(st.booleans()))
        ge = ck.Compare(ck.Linear(tuple((v, -k) for v, k in terms), c), False)
        return draw(st.sampled_from([ck.And((le, ge)), ck.Not(ck.And((le, ge))), le]))

    when = draw(st.sampled_from([ck.Const(True), None]))
    when = literal() if when is None else when
    ensure = ck.Or((literal(), ck.ActionIn(frozenset({draw(st.integers(0, 1))}))))
    inv = ck.CheckedInvariant("g", None, "g.inv", 1, 1, when, ensure)
    return model, inv, [list(map(float, range(n_lo, n_hi + 1))), xs] + ([ys] if two else [])


def _truth(model: Model, inv: ck.CheckedInvariant, grid: list[list[float]]) -> tuple[bool, bool]:
    """(some input violates, some input satisfies 'when') by enumerating every input."""
    X = np.array(list(itertools.product(*grid)), dtype=np.float64)
    res = Evaluator(model).evaluate(X)
    bad = sat_when = False
    for k in range(X.shape[0]):
        xs = X[k].tolist()
        a, c = int(res.actions[k]), float(res.confidences[k])
        w = ck.evaluate(inv.when, xs, a, c)
        sat_when |= w
        bad |= w and not ck.evaluate(inv.ensure, xs, a, c)
    return bad, sat_when


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(small_cases())
def test_exact_linear_against_exhaustive_enumeration(case):
    """Every verdict, and vacuity, equals enumeration of all inputs; never unknown."""
    model, inv, grid = case
    bad, sat_when = _truth(model, inv, grid)
    for shortcuts in (True, False):
        r = check_invariant(model, inv, CheckOptions(shortcuts=shortcuts))
        no_internal(r)
        assert r.status == ("violated" if bad else "holds"), (shortcuts, r)
        assert_counterexamples_real(model, inv, r)
        if r.status == "holds":
            assert r.vacuous == (not sat_when)


@st.composite
def wide_cases(draw):
    """``a*n + b*x == c`` on a wide float domain: the reference solves it per n exactly."""
    a = draw(st.sampled_from([Fraction(1), Fraction(0.3), Fraction(-7), Fraction(3)]))
    b = draw(st.sampled_from([Fraction(0.1), Fraction(0.25), Fraction(3), Fraction(-0.7)]))
    n0 = draw(st.integers(-1, 6))
    x0 = draw(st.floats(0, 10))
    c = draw(
        st.sampled_from(
            [
                a * n0 + b * Fraction(x0),
                Fraction(float(a * n0 + b * Fraction(x0))),
                Fraction(0.5248341888200244),
            ]
        )
    )
    return a, b, c


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(wide_cases())
def test_wide_float_domain_equation_against_exact_fractions(case):
    a, b, c = case
    model = compile_source(ISSUE_MODEL)
    eq = ck.And(
        (
            ck.Compare(ck.Linear(((0, a), (1, b)), -c), False),
            ck.Compare(ck.Linear(((0, -a), (1, -b)), c), False),
        )
    )
    inv = ck.CheckedInvariant("w", None, "w.inv", 1, 1, ck.Const(True), ck.Not(eq))
    truth = False
    for n in range(-1, 7):
        q = (c - a * n) / b
        truth |= 0 <= q <= 10 and Fraction(float(q)) == q
    r = check_invariant(model, inv)
    no_internal(r)
    assert r.status == ("violated" if truth else "holds")
    assert_counterexamples_real(model, inv, r)
    vac = check_invariant(model, ck.CheckedInvariant("v", None, "v.inv", 1, 1, eq, ck.Const(True)))
    assert vac.status == "holds" and vac.vacuous == (not truth)


def test_many_floats_not_enumerable_stay_sound():
    """3x + 3y == 1 on [0, 1]^2: no float64 pair (a sum of float64 values is dyadic), too many
    to enumerate: 'unknown', never 'violated'; x + y == 0.75 with x - y == 0.25 is found."""
    feats = [
        {"name": "x", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "y", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    model = compile_source(
        {
            "features": feats,
            "actions": ["allow", "block"],
            "tree": {"action": "block", "confidence": 0.5},
        }
    )
    r = check_invariant(model, inv_of(model, "when 3 * x + 3 * y == 1 ensure false", sev=False))
    assert r.status in ("holds", "unknown")
    inv = inv_of(model, "when 0.1 * x + 0.3 * y == 0.30000000000000004 ensure false", sev=False)
    r = check_invariant(model, inv)
    no_internal(r)
    assert r.status in ("violated", "unknown")
    assert_counterexamples_real(model, inv, r)
