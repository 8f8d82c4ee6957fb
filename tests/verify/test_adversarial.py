"""Adversarial soundness tests for ``clefprove check`` (red team).

Every verdict here is compared with references written independently of the verifier:

* ``naive_leaf``: a tree walk written from SPEC §2 alone (clip into the domain, then compare
  in float64), to check the evaluator as well;
* ``interesting_values``: per feature, the finitely many float64 (or whole) values where a
  single-feature atom or a split can change its truth (domain ends, thresholds, the float64
  bounds of every invariant constant, and their float64 neighbours).  The product grid of those
  values is *complete* when every comparison of the invariant mentions at most one feature;
* the IEEE float64 (Z3 FP) whole-tree encoding of ``tests/verify/gen.py`` for linear atoms.

Regression tests for the bugs found are marked ``# regression``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import encode_record
from clefprove.model.source import compile_source
from clefprove.model.types import FeatureType, Model
from clefprove.verify import engine as eg
from clefprove.verify.api import check, check_invariant
from clefprove.verify.options import CheckOptions
from tests.verify.gen import WholeTreeZ3

ACTIONS = ["allow", "challenge", "rate_limit", "block"]
SEV = "severity allow < challenge < rate_limit < block\n"
MAXF = sys.float_info.max
TINY = 5e-324
UP, DOWN = math.inf, -math.inf


def leaf(a: str, conf: float = 0.9) -> dict:
    return {"action": a, "confidence": conf}


def split(f: str, t: float, left: dict, right: dict) -> dict:
    return {"feature": f, "threshold": t, "left": left, "right": right}


def build(features: list[dict], tree: dict, actions: list[str] | None = None) -> Model:
    return compile_source({"features": features, "actions": actions or ACTIONS, "tree": tree})


def inv_of(model: Model, body: str, sev: bool = True) -> ck.CheckedInvariant:
    text = (SEV if sev else "") + "invariant t:\n  " + body + "\n"
    return parse_text(text, model, "t.inv").invariants[0]


# ---------------------------------------------------------------- independent references


class QuickIEEE(WholeTreeZ3):
    """The IEEE float64 whole-tree reference with a short per-leaf timeout (None: gave up)."""

    TIMEOUT_MS = 3000

    def violating_leaves(self, inv: ck.CheckedInvariant) -> set[int] | None:
        import z3

        out = set()
        for n in self.model.iter_nodes():
            if not n.is_leaf:
                continue
            s = z3.Solver(ctx=self.ctx)
            s.set("timeout", self.TIMEOUT_MS)
            s.add(*self.base, *self.path(n.index))
            s.add(
                z3.And(
                    self.formula(inv.when, n.action, n.confidence),
                    z3.Not(self.formula(inv.ensure, n.action, n.confidence)),
                )
            )
            r = s.check()
            if r == z3.unknown:
                return None
            if r == z3.sat:
                out.add(n.index)
        return out


def naive_leaf(model: Model, x: list[float]) -> int:
    """The leaf SPEC §2 picks for encoded *x*: clip each value into [min, max], then walk."""
    xs = [min(max(v, f.min), f.max) for v, f in zip(x, model.features, strict=True)]
    i = 0
    while True:
        n = model.node(i)
        if n.is_leaf:
            return i
        if model.features[n.feature].type is FeatureType.CATEGORICAL:
            i = n.left if int(xs[n.feature]) in n.categories else n.right
        else:
            i = n.left if xs[n.feature] <= n.threshold else n.right


def _single_constants(f: ck.Formula, out: dict[int, set[Fraction]]) -> bool:
    """Collect, per feature, the exact rational q of every single-feature comparison
    ``c*x + k (<|<=) 0`` (q = -k/c); False if some comparison has two or more features."""
    match f:
        case ck.Compare(expr, _):
            feats = [v for v, _ in expr.terms if v != ck.CONFIDENCE]
            if len(feats) > 1:
                return False
            if len(feats) == 1 and len(expr.terms) == 1:
                v, c = expr.terms[0]
                out.setdefault(v, set()).add(-expr.const / c)
            elif len(feats) == 1:  # the feature with the confidence: q depends on the leaf
                return False
            return True
        case ck.Not(a):
            return _single_constants(a, out)
        case ck.And(args) | ck.Or(args):
            return all(_single_constants(a, out) for a in args)
    return True


def _float_floor(q: Fraction) -> float:
    """Largest float64 <= q, computed by bisection on the float64 ordering (independent of
    the verifier's own float_le)."""
    if q > Fraction(MAXF):
        return MAXF
    if q < -Fraction(MAXF):
        return -math.inf
    f = float(q)
    while Fraction(f) > q:
        f = math.nextafter(f, DOWN)
    while math.nextafter(f, UP) != math.inf and Fraction(math.nextafter(f, UP)) <= q:
        f = math.nextafter(f, UP)
    return f


def interesting_values(model: Model, inv: ck.CheckedInvariant) -> list[list[float]] | None:
    """Per feature, values covering every cell of the splits and single-feature atoms; None
    when some atom mixes features (the grid would not be complete)."""
    consts: dict[int, set[Fraction]] = {}
    parts = [inv.when] + ([inv.ensure] if not inv.is_relational else [])
    if not all(_single_constants(p, consts) for p in parts):
        return None
    per: list[list[float]] = []
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            per.append([float(k) for k in range(len(f.values))])
            continue
        if f.type is FeatureType.BOOL:
            per.append([0.0, 1.0])
            continue
        pts: set[float] = {f.min, f.max, f.default}
        for n in model.iter_nodes():
            if not n.is_leaf and n.feature == i:
                pts.add(n.threshold)
        for q in consts.get(i, ()):
            lo = _float_floor(q)
            if math.isfinite(lo):
                pts.add(lo)
                pts.add(math.nextafter(lo, UP))
        if f.type is FeatureType.INT:
            whole: set[float] = set()
            for p in pts:
                if math.isfinite(p):
                    base = math.floor(p)
                    whole |= {float(base + d) for d in (-1, 0, 1, 2) if abs(base + d) <= 2**53}
            pts = whole
        else:
            pts |= {math.nextafter(p, d) for p in list(pts) for d in (UP, DOWN)}
        vals = sorted({p for p in pts if math.isfinite(p) and f.min <= p <= f.max})
        per.append(vals)
    return per


def grid_violations(
    model: Model, inv: ck.CheckedInvariant, per: list[list[float]], limit: int = 60000
) -> set[int] | None:
    """Leaves where some grid point violates *inv* (None if the grid is too large)."""
    size = math.prod(len(v) for v in per)
    if size > limit:
        return None
    X = np.array(list(itertools.product(*per)), dtype=np.float64).reshape(size, len(per))
    res = Evaluator(model).evaluate(X)
    out = set()
    for k in range(size):
        xs = X[k].tolist()
        a, c = int(res.actions[k]), float(res.confidences[k])
        if ck.evaluate(inv.when, xs, a, c) and not ck.evaluate(inv.ensure, xs, a, c):
            out.add(int(res.leaves[k]))
    return out


def leaf_verdicts(model: Model, inv: ck.CheckedInvariant, shortcuts: bool = True):
    from clefprove.geometry.boxes import leaf_boxes

    prep = eg.prepare(model, inv)
    pv = eg.decide(model, prep, leaf_boxes(model), CheckOptions(shortcuts=shortcuts))
    leaves = pv.boxes.leaves
    return {int(leaves[r]) for r in pv.violating}, {int(leaves[r]) for r in pv.unknown}


def assert_counterexamples_real(model: Model, inv: ck.CheckedInvariant, result) -> None:
    """Every printed counterexample, re-encoded from its JSON values and walked by the naive
    reference, reaches its leaf and breaks the invariant."""
    for c in result.counterexamples:
        record = json.loads(json.dumps(c.input))
        x = encode_record(model, record).tolist()
        for v, f in zip(x, model.features, strict=True):
            assert f.min <= v <= f.max
        leaf_ = naive_leaf(model, x)
        assert leaf_ == c.leaf
        n = model.node(leaf_)
        assert model.actions[n.action] == c.action and n.confidence == c.confidence
        assert ck.evaluate(inv.when, x, n.action, n.confidence)
        assert not ck.evaluate(inv.ensure, x, n.action, n.confidence)


def no_internal(result) -> None:
    assert not any(w.startswith("internal") for w in result.warnings), result.warnings


# ---------------------------------------------------------------- regressions


def test_tiny_coefficient_below_float_range_is_not_dropped():  # regression
    """1e-300 * 1e-300 = 1e-600 is below the float64 range: its float is 0.0, which used to
    pick the wrong corner (and sign) of the linear form, so a violation was called 'holds'."""
    feats = [
        {"name": "x", "type": "float", "min": -1e308, "max": 1e308, "default": 0},
        {"name": "y", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    model = build(feats, leaf("allow", 1.0))
    inv = inv_of(model, "ensure 1e-300 * 1e-300 * x + y >= 0")
    # x = -1e308, y = 0: 1e-600 * -1e308 = -1e-292 < 0.
    assert not ck.evaluate(inv.ensure, [-1e308, 0.0], 0, 1.0)
    for shortcuts in (True, False):
        r = check_invariant(model, inv, CheckOptions(shortcuts=shortcuts))
        assert r.status == "violated", shortcuts
        assert_counterexamples_real(model, inv, r)
        no_internal(r)


def test_subnormal_coefficient_rounding_error_is_bounded():  # regression
    """1.5 * 5e-324 is between two subnormals: its float64 is off by 2**-1075 absolutely,
    which times x = 1e308 is ~2.5e-16, far above the relative error bound used before."""
    feats = [
        {"name": "x", "type": "float", "min": 1e308, "max": 1.5e308, "default": 1e308},
        {"name": "y", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    model = build(feats, leaf("allow", 1.0))
    inv = inv_of(model, "ensure 1.5 * 5e-324 * x + y >= 8.6e-16")
    assert not ck.evaluate(inv.ensure, [1e308, 0.0], 0, 1.0)  # 7.4e-16 < 8.6e-16
    r = check_invariant(model, inv)
    assert r.status == "violated"
    assert_counterexamples_real(model, inv, r)
    holds = inv_of(model, "ensure 1.5 * 5e-324 * x + y >= 7e-16")
    assert check_invariant(model, holds).status == "holds"


@pytest.mark.parametrize(
    "body", ["when x > 1e308 * 10 ensure false", "when x < -1e308 * 10 ensure false"]
)
def test_bound_beyond_float_range_on_a_full_range_feature(body):  # regression
    """A single-feature bound past +-max float on a feature whose domain reaches +-max float
    used to crash (Fraction(inf)); the condition is simply false."""
    feats = [{"name": "x", "type": "float", "min": -MAXF, "max": MAXF, "default": 0}]
    model = build(feats, split("x", 0.0, leaf("allow"), leaf("block")))
    r = check(model, [inv_of(model, body)]).results[0]
    assert r.status == "holds" and r.vacuous


N53 = {"name": "n", "type": "int", "min": 0, "max": 2**53, "default": 0}


@pytest.mark.parametrize(
    ("feature", "body"),
    [
        (N53, "n > 9007199254740992"),
        (
            {"name": "n", "type": "int", "min": -(2**53), "max": 0, "default": 0},
            "n < -9007199254740992",
        ),
        # 9007199254740991.5 means its nearest float64, 2**53
        (N53, "n > 9007199254740991.5"),
    ],
)
def test_int_bound_at_two_to_the_53(feature, body):  # regression
    """floor(q) + 1 = 2**53 + 1 rounds back to 2**53 in float64: the bound must be compared
    with the domain exactly, not after rounding (it used to give an unconfirmed witness)."""
    model = build([feature], leaf("allow"))
    r = check(model, [inv_of(model, f"when {body} ensure false")]).results[0]
    assert r.status == "holds" and r.vacuous
    no_internal(r)


def test_int_split_at_two_to_the_53():  # regression
    """``n <= 2**53`` sends every input left when max = 2**53; the right box used to start at
    floor(t) + 1 = 2**53 (rounded) and so held an input that never reaches it."""
    feats = [{"name": "n", "type": "int", "min": 0, "max": 2**53, "default": 0}]
    model = build(feats, split("n", 2.0**53, leaf("allow"), leaf("block")))
    r = check_invariant(model, inv_of(model, "ensure action == allow"))
    assert r.status == "holds"
    no_internal(r)
    model = build(feats, split("n", 2.0**53 - 1, leaf("allow"), leaf("block")))
    r = check_invariant(model, inv_of(model, "ensure action == allow"))
    assert r.status == "violated"
    assert r.counterexamples[0].input["n"] == 2**53
    assert_counterexamples_real(model, inv_of(model, "ensure action == allow"), r)


@pytest.mark.parametrize(
    ("delta", "shown"),
    [("1e308 * 10 + 0.5", "stable(x, 1.0000000000000000E+309)"), ("1e-300 * 1e-300", None)],
)
def test_stable_delta_outside_float_range(delta, shown):  # regression
    """A stable() delta that is a product of constants beyond the float64 range used to crash
    when the relation was described (float(delta) overflowed)."""
    feats = [{"name": "x", "type": "float", "min": 0, "max": 10, "default": 0}]
    model = build(feats, split("x", 5.0, leaf("allow"), leaf("block")))
    r = check(model, [inv_of(model, f"ensure stable(x, {delta})")]).results[0]
    if shown is not None:
        assert r.relation == shown
        assert r.status == "violated"
    else:  # 1e-600 is below the gap between any two float64 values near 5
        assert r.status == "holds"
        assert r.relation.startswith("stable(x, 1.0000000000000001E-600")


# ---------------------------------------------------------------- targeted edges


def _float_model(tree: dict, lo: float = 0.0, hi: float = 100.0) -> Model:
    feats = [
        {"name": "x", "type": "float", "min": lo, "max": hi, "default": lo},
        {"name": "n", "type": "int", "min": 0, "max": 7, "default": 0},
    ]
    return build(feats, tree)


def _judge(model: Model, body: str) -> None:
    """The verdict equals the grid reference (complete for single-feature atoms)."""
    inv = inv_of(model, body)
    per = interesting_values(model, inv)
    assert per is not None
    truth = grid_violations(model, inv, per)
    assert truth is not None
    for shortcuts in (True, False):
        violating, unknown = leaf_verdicts(model, inv, shortcuts)
        assert violating == truth, (body, shortcuts)
        assert not unknown
    r = check_invariant(model, inv)
    assert r.status == ("violated" if truth else "holds"), body
    no_internal(r)
    assert_counterexamples_real(model, inv, r)


def _nx(t: float, d: float) -> str:
    return repr(math.nextafter(t, d))


THRESH = [0.1, 50.0, 1e-320, 0.0, -0.0, 99.99999999999999]


@pytest.mark.parametrize("t", THRESH)
@pytest.mark.parametrize(
    "shape",
    [
        "when x > {t} ensure action == block",
        "when x >= {t} ensure action == block",
        "when x <= {t} ensure action == allow",
        "when x < {t} ensure action == allow",
        "when x == {t} ensure action == allow",
        "when x != {t} ensure action == block",
        "when x > {up} ensure action == block",
        "when x >= {up} ensure action == block",
        "when x < {up} ensure action == allow",
        "when x <= {down} ensure action == allow",
        "when x > {down} ensure action == block",
        "when x in [{down}, {t}] ensure action == allow",
        "when x in [{t}, {up}] ensure action == allow",
        "when x not in [{down}, {t}] ensure action == block",
        "when x in {{{t}, {up}}} ensure action == allow",
        "when {down} < x <= {t} ensure action == allow",
        "when 3 * x > 3 * {t} ensure action == block",
        "when -x < -{t} ensure action == block",
        "when x - {t} > 0 ensure action == block",
        "when 0.1 * x <= 0.1 * {t} ensure action == allow",
    ],
)
def test_float_threshold_neighbours(t, shape):
    """Thresholds and invariant constants adjacent in float64, both ways (the brute-force
    grid includes every neighbour, so it is complete here)."""
    model = _float_model(split("x", t, leaf("allow"), leaf("block")), lo=-1.0)
    body = shape.format(t=repr(t), up=_nx(t, UP), down=_nx(t, DOWN))
    body = body.replace("--", "")  # -{t} with a negative zero
    _judge(model, body)


@pytest.mark.parametrize(
    ("lo", "hi", "t"),
    [
        (0.0, 100.0, 0.0),
        (0.0, 100.0, 100.0),
        (0.0, 100.0, -1.0),
        (0.0, 100.0, 1e300),
        (0.0, 100.0, -5e-324),
        (-0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (0.0, 5e-324, 0.0),
        (0.0, 1e-320, 5e-324),
        (1e308, MAXF, 1.5e308),
        (-MAXF, MAXF, MAXF),
        (-MAXF, MAXF, -MAXF),
        (-MAXF, MAXF, 0.0),
        (0.1, 0.1, 0.1),
        (0.1, 0.30000000000000004, 0.2),
    ],
)
@pytest.mark.parametrize(
    "body",
    [
        "ensure action == allow",
        "ensure action == block",
        "when x > 0.1 ensure action == block",
        "when x <= 0.1 ensure action == allow",
        "when x > 0 ensure action == block",
        "when x >= 0 ensure action == allow",
        "when x == -0.0 ensure action == allow",
        "when x != 0 ensure action == block",
        "when x > 1e308 ensure action == block",
        "when x < 1e-320 ensure action == allow",
        "when x >= 1.7976931348623157e308 ensure action == block",
        "when x <= -1.7976931348623157e308 ensure action == allow",
    ],
)
def test_domain_edges_and_clipping(lo, hi, t, body):
    """Thresholds at, beyond and between domain ends, tiny and huge domains, -0.0."""
    model = _float_model(split("x", t, leaf("allow"), leaf("block")), lo=lo, hi=hi)
    _judge(model, body)


@pytest.mark.parametrize("t", [-1.0, -0.5, 0.0, 0.25, 0.5, 0.99, 1.0, 1.5, 2.0, -0.0])
@pytest.mark.parametrize(
    "body",
    [
        "when b ensure action == block",
        "when not b ensure action == allow",
        "when b == false ensure action == allow",
        "when b != true ensure action == block",
        "when b in {true, false} ensure action == allow",
        "ensure action == allow",
        "ensure action == block",
    ],
)
def test_bool_split_at_any_threshold(t, body):
    feats = [{"name": "b", "type": "bool", "default": False}]
    model = build(feats, split("b", t, leaf("allow"), leaf("block")))
    _judge(model, body)


@pytest.mark.parametrize(
    "members",
    [["a"], ["d"], ["a", "b", "c", "d"], ["b", "c"], ["a", "d"], ["b"], ["a", "b", "c"]],
)
@pytest.mark.parametrize(
    "body",
    [
        'when c == "a" ensure action == allow',
        'when c != "a" ensure action == block',
        'when c in {"a", "b", "c", "d"} ensure action == allow',
        'when c not in {"a", "b", "c", "d"} ensure false',
        'when c not in {"d"} ensure action == allow',
        'when c in {"d"} ensure action == block',
    ],
)
def test_categorical_sets(members, body):
    feats = [{"name": "c", "type": "categorical", "values": ["a", "b", "c", "d"], "default": "a"}]
    model = build(
        feats, {"feature": "c", "in": members, "left": leaf("allow"), "right": leaf("block")}
    )
    _judge(model, body)


BIG = 2**53


@pytest.mark.parametrize(
    "t", [BIG - 0.5, BIG - 1.5, BIG - 1, float(BIG), -BIG + 0.5, -float(BIG), 2.0**52 + 0.5]
)
@pytest.mark.parametrize(
    "body",
    [
        "ensure action == allow",
        "ensure action == block",
        "when n >= 9007199254740991 ensure action == block",
        "when n > 9007199254740991 ensure action == block",
        "when n == 9007199254740992 ensure action == block",
        "when n <= -9007199254740991 ensure action == allow",
        "when n < -9007199254740991 ensure action == allow",
        "when 2 * n == 9007199254740991 ensure false",
        "when n in [4503599627370496, 4503599627370497] ensure action == allow",
    ],
)
def test_int_features_near_two_to_the_53(t, body):
    feats = [{"name": "n", "type": "int", "min": -BIG, "max": BIG, "default": 0}]
    model = build(feats, split("n", t, leaf("allow"), leaf("block")))
    inv = inv_of(model, body)
    per = interesting_values(model, inv)
    truth = grid_violations(model, inv, per)
    r = check_invariant(model, inv)
    assert r.status == ("violated" if truth else "holds")
    no_internal(r)
    assert_counterexamples_real(model, inv, r)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("ensure confidence == 0.7", "violated"),  # leaf 0.9
        ("when action == allow ensure confidence == 0.7", "holds"),
        ("when action == allow ensure confidence != 0.7", "violated"),
        ("when action == allow ensure confidence >= 0.7 and confidence <= 0.7", "holds"),
        ("when action == allow ensure confidence > 0.7", "violated"),
        ("when action == allow ensure confidence < 0.69999999999999999", "violated"),  # == 0.7
        ("when action == allow ensure confidence < 0.7000000000000001", "holds"),
        ("ensure confidence + 0.1 * n >= 1", "violated"),  # n = 0 or 1 on the 0.7 leaf
        ("when n >= 3 ensure confidence + 0.1 * n >= 1", "holds"),  # 0.7 + 0.3 exactly? no
        ("ensure action >= challenge implies confidence >= 0.9", "holds"),
        ("ensure action > allow implies confidence > 0.9", "violated"),
        ("ensure action <= challenge or action >= block", "holds"),  # no rate_limit leaf
        ("ensure action <= challenge or action > rate_limit", "holds"),
        ("ensure action < challenge or action >= block", "violated"),
        ("ensure not (action in {allow, challenge}) implies confidence == 0.9", "holds"),
        ("ensure allow < action < block implies false", "violated"),
        ("ensure allow <= action <= block", "holds"),
        ("ensure action == allow implies action == allow implies confidence <= 0.7", "holds"),
    ],
)
def test_confidence_and_severity(body, expected):
    feats = [{"name": "n", "type": "int", "min": 0, "max": 7, "default": 0}]
    tree = split("n", 1.5, leaf("allow", 0.7), split("n", 4.5, leaf("challenge"), leaf("block")))
    model = build(feats, tree)
    inv = inv_of(model, body)
    X = np.arange(8, dtype=np.float64)[:, None]
    res = Evaluator(model).evaluate(X)
    truth = any(
        ck.evaluate(inv.when, [float(k)], int(res.actions[k]), float(res.confidences[k]))
        and not ck.evaluate(inv.ensure, [float(k)], int(res.actions[k]), float(res.confidences[k]))
        for k in range(8)
    )
    # The expected column is written by hand; the enumeration is the judge.
    if body.startswith("when n >= 3"):
        expected = "violated" if truth else "holds"
    assert truth == (expected == "violated"), body
    r = check_invariant(model, inv)
    assert r.status == expected
    no_internal(r)
    assert_counterexamples_real(model, inv, r)


@pytest.mark.parametrize(
    ("body", "vacuous"),
    [
        ("when 2 * n == 7 ensure false", True),
        ("when 2 * n == 6 ensure action == allow", False),
        ("when 3 * x == 1 ensure false", True),  # 1/3 is no float64
        ("when 10 * x == 1 ensure false", True),  # nor is 1/10 exactly
        ("when x > 0.1 and x < 0.10000000000000002 ensure false", True),
        ("when x >= 0.1 and x < 0.10000000000000002 ensure action == allow", False),
        ("when n > 3 and n < 4 ensure false", True),
        ("when n + 0.5 == 3 ensure false", True),
        ("when x + n == -1 ensure false", True),
        ("when false ensure false", True),
        ("when x > 100 ensure false", True),
        ("when x < 0 ensure false", True),
    ],
)
def test_vacuity_on_the_value_sets(body, vacuous):
    """Unsatisfiable only because of integrality or only over float64: vacuous, never a
    violation, never unknown when the boxes decide it."""
    model = _float_model(split("x", 0.1, leaf("allow"), leaf("block")))
    inv = inv_of(model, body)
    r = check(model, [inv]).results[0]
    if vacuous:
        assert r.status == "holds" and r.vacuous, r
    else:
        assert not r.vacuous
    no_internal(r)


def test_float_only_unsatisfiable_linear_when_is_never_violated():
    """3x + 3y == 1 has real solutions but no float64 one (a sum of two float64 values is a
    dyadic rational): the verifier may answer unknown, never violated, never holds on a
    rounded witness."""
    feats = [
        {"name": "x", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "y", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    model = build(feats, split("x", 0.5, leaf("allow"), leaf("block")))
    inv = inv_of(model, "when 3 * x + 3 * y == 1 ensure false")
    r = check_invariant(model, inv)
    assert r.status in ("holds", "unknown")
    no_internal(r)


@pytest.mark.slow
def test_violation_needs_a_float_that_is_not_nearest_to_the_real_solution():
    """x + y == 0.30000000000000004 (the float64 nearest 0.1 + 0.2 as a *float* sum) with
    x, y each pinned near 0.1 / 0.2: the exact rational solution set contains float pairs,
    and the witness must satisfy the equality exactly."""
    feats = [
        {"name": "x", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "y", "type": "float", "min": 0, "max": 1, "default": 0},
    ]
    model = build(feats, split("x", 0.5, leaf("allow"), leaf("block")))
    for body in (
        "when x + y == 0.30000000000000004 and x - y == -0.1 ensure action == block",
        "when x + y == 0.75 and x - y == 0.25 ensure action == allow",
        "when x + y == 0.75 and x - y == 0.25 ensure action == block",
        "when 2 * x + y == 1 and x - y == 0.5 ensure false",
    ):
        inv = inv_of(model, body)
        r = check_invariant(model, inv)
        no_internal(r)
        assert_counterexamples_real(model, inv, r)
        ref = QuickIEEE(model).violating_leaves(inv)
        if ref is None:  # the FP reference timed out: the witnesses above are still checked
            continue
        violating, unknown = leaf_verdicts(model, inv)
        assert violating <= ref and ref <= violating | unknown, body
        if not ref:
            assert r.status in ("holds", "unknown")


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        "when 1e300 * x - 1e300 * y > 0 ensure action == block",
        "when 1e-300 * x - 1e-300 * y > 0 ensure action == block",
        "when 5e-324 * x + 5e-324 * y > 0 ensure action == block",
        "when 1e-300 * 1e-300 * x + y <= 0 ensure action == allow",
        "when 1e300 * 1e300 * x + y >= 1e300 * 1e300 * 0.5 ensure action == block",
        "when x - y != 0 ensure action == block",
        "when x + 0.1 * y >= 0.5 ensure action == block",
        "when x + 0.1 * y > 0.5 ensure action == block",
        "when 0.1 * x + 0.2 * y == 0.30000000000000004 ensure action == allow",
        "when x + y == 1 and x - y == 0 ensure action == allow",
        "ensure 1e-320 * x + y >= 0",
    ],
)
def test_linear_extreme_coefficients(body):
    feats = [
        {"name": "x", "type": "float", "min": 0, "max": 1, "default": 0},
        {"name": "y", "type": "float", "min": -1, "max": 1, "default": 0},
    ]
    tree = split("x", 0.5, leaf("allow"), split("y", 0.0, leaf("block"), leaf("allow")))
    model = build(feats, tree)
    inv = inv_of(model, body)
    ref = QuickIEEE(model).violating_leaves(inv)
    if ref is None:  # the FP reference timed out; fall back to the witnesses' own check
        r = check_invariant(model, inv)
        no_internal(r)
        assert_counterexamples_real(model, inv, r)
        return
    for shortcuts in (True, False):
        violating, unknown = leaf_verdicts(model, inv, shortcuts)
        assert violating <= ref, (body, shortcuts)
        assert ref <= violating | unknown, (body, shortcuts)
    r = check_invariant(model, inv)
    no_internal(r)
    assert_counterexamples_real(model, inv, r)
    if r.status == "holds":
        assert not ref


# ---------------------------------------------------------------- hypothesis: adversarial grids

FLOAT_DOMAINS = [
    (0.0, 100.0),
    (-1.0, 1.0),
    (-0.0, 0.0),
    (0.0, 1e-320),
    (1e308, MAXF),
    (-MAXF, MAXF),
    (0.1, 0.30000000000000004),
]
INT_DOMAINS = [(0, 7), (-3, 3), (BIG - 4, BIG), (-BIG, -BIG + 3), (0, 0)]
SPECIAL = [0.0, -0.0, 0.1, 0.2, 0.3, 1e-320, 5e-324, 1e308, MAXF, 0.5, 1.0, 2.0**53 - 0.5, 7.0]


@st.composite
def adv_features(draw) -> list[dict]:
    out = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["int", "float", "float", "bool", "categorical"]))
        name = f"f{i}"
        if kind == "float":
            lo, hi = draw(st.sampled_from(FLOAT_DOMAINS))
            out.append({"name": name, "type": "float", "min": lo, "max": hi, "default": lo})
        elif kind == "int":
            lo, hi = draw(st.sampled_from(INT_DOMAINS))
            out.append({"name": name, "type": "int", "min": lo, "max": hi, "default": hi})
        elif kind == "bool":
            out.append({"name": name, "type": "bool", "default": draw(st.booleans())})
        else:
            k = draw(st.integers(1, 4))
            vals = ["a", "b", "c", "d"][:k]
            out.append({"name": name, "type": "categorical", "values": vals, "default": vals[-1]})
    return out


def _adv_number(draw, spec: dict) -> float:
    if spec["type"] == "bool":
        return draw(st.sampled_from([-1.0, 0.0, 0.5, 0.99, 1.0, 2.0]))
    lo, hi = float(spec["min"]), float(spec["max"])
    base = draw(st.sampled_from([lo, hi, *SPECIAL, -hi, (lo + hi) / 2]))
    if spec["type"] == "int" and draw(st.booleans()):
        base = math.floor(base) + draw(st.sampled_from([0.5, -0.5, 0.0, 1.0]))
    for _ in range(draw(st.integers(0, 2))):
        base = math.nextafter(base, draw(st.sampled_from([UP, DOWN])))
    return base if math.isfinite(base) else hi


@st.composite
def adv_trees(draw, feats: list[dict], depth: int) -> dict:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return leaf(
            draw(st.sampled_from(ACTIONS)), draw(st.sampled_from([0.0, 0.7, 0.9, 1.0, 0.5]))
        )
    spec = draw(st.sampled_from(feats))
    node: dict = {"feature": spec["name"]}
    if spec["type"] == "categorical":
        node["in"] = draw(st.lists(st.sampled_from(spec["values"]), min_size=1, unique=True))
    else:
        node["threshold"] = _adv_number(draw, spec)
    node["left"] = draw(adv_trees(feats, depth - 1))
    node["right"] = draw(adv_trees(feats, depth - 1))
    return node


def _num_text(v: float) -> str:
    r = repr(float(v))
    return f"({r})" if r.startswith("-") else r


@st.composite
def adv_atom(draw, feats: list[dict], linear: bool) -> str:
    spec = draw(st.sampled_from(feats))
    name = spec["name"]
    kind = draw(st.integers(0, 9))
    if kind == 0:
        op = draw(st.sampled_from(["==", "!=", "<", ">="]))
        return f"action {op} {draw(st.sampled_from(ACTIONS))}"
    if kind == 1:
        op = draw(st.sampled_from(["==", "!=", "<", ">=", ">", "<="]))
        return f"confidence {op} {draw(st.sampled_from(['0.7', '0.9', '0.5', '1', '0']))}"
    if spec["type"] == "categorical":
        vals = draw(st.lists(st.sampled_from(spec["values"]), min_size=1, unique=True))
        neg = draw(st.sampled_from(["in", "not in"]))
        return f"{name} {neg} {{{', '.join(json.dumps(v) for v in vals)}}}"
    if spec["type"] == "bool":
        return draw(st.sampled_from([name, f"not {name}", f"{name} == false", f"{name} != true"]))
    c = _num_text(_adv_number(draw, spec))
    if linear and kind >= 7:
        other = draw(st.sampled_from([f for f in feats if f["type"] in ("int", "float")]))
        k1 = draw(st.sampled_from(["1", "2", "0.1", "1e-300 * 1e-300", "1e300", "3", "-1"]))
        k2 = draw(st.sampled_from(["1", "-1", "0.5", "5e-324", "1e-10"]))
        what = draw(st.sampled_from([other["name"], "confidence"]))
        op = draw(st.sampled_from([">=", "<", "==", "!="]))
        return f"{k1} * {name} + {k2} * {what} {op} {c}"
    if kind == 3:
        c2 = _num_text(_adv_number(draw, spec))
        return f"{name} {draw(st.sampled_from(['in', 'not in']))} [{c}, {c2}]"
    if kind == 4:
        c2 = _num_text(_adv_number(draw, spec))
        return f"{c} < {name} <= {c2}"
    if kind == 5:
        k = draw(st.sampled_from(["3", "0.1", "-1", "1e-320", "1e300", "0.5"]))
        return f"{k} * {name} {draw(st.sampled_from(['<=', '>', '==']))} {c}"
    if kind == 6:
        c2 = _num_text(_adv_number(draw, spec))
        return f"{name} in {{{c}, {c2}}}"
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    return f"{name} {op} {c}"


@st.composite
def adv_formula(draw, feats: list[dict], linear: bool, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(adv_atom(feats, linear))
    op = draw(st.sampled_from(["and", "or", "implies", "not"]))
    if op == "not":
        return f"not ({draw(adv_formula(feats, linear, depth - 1))})"
    a = draw(adv_formula(feats, linear, depth - 1))
    b = draw(adv_formula(feats, linear, depth - 1))
    return f"({a}) {op} ({b})"


def _draw_case(data, linear: bool):
    from clefprove.errors import ClefproveError

    feats = data.draw(adv_features())
    model = build(feats, data.draw(adv_trees(feats, 3)))
    when = data.draw(st.one_of(st.just(""), adv_formula(feats, linear)))
    ensure = data.draw(adv_formula(feats, linear))
    body = (f"when {when}\n  " if when else "") + f"ensure {ensure}"
    try:
        inv = inv_of(model, body)
    except ClefproveError:  # e.g. a numeric comparison on a categorical feature
        return model, None
    return model, inv


ADV = settings(
    max_examples=int(os.environ.get("CLEFPROVE_ADV_EXAMPLES", 300)),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.slow
@ADV
@given(st.data())
def test_adversarial_single_feature_grid(data):
    """Random trees with adversarial thresholds and domains, invariants with adversarial
    constants: per-leaf verdicts equal the complete grid reference; evaluator == naive walk."""
    model, inv = _draw_case(data, linear=False)
    if inv is None:
        return
    per = interesting_values(model, inv)
    assert per is not None
    truth = grid_violations(model, inv, per)
    if truth is None:
        return
    ev = Evaluator(model)
    X = np.array(list(itertools.product(*per)), dtype=np.float64).reshape(-1, len(per))
    batch = ev.evaluate(X)
    for k in range(0, X.shape[0], max(1, X.shape[0] // 200)):
        xs = X[k].tolist()
        assert int(batch.leaves[k]) == naive_leaf(model, xs) == ev.evaluate_one(xs).leaf
    for shortcuts in (True, False):
        violating, unknown = leaf_verdicts(model, inv, shortcuts)
        assert violating == truth, shortcuts
        assert not unknown
    r = check_invariant(model, inv)
    assert r.status == ("violated" if truth else "holds")
    no_internal(r)
    assert_counterexamples_real(model, inv, r)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_adversarial_linear_against_ieee_reference(data):
    """Linear atoms with extreme coefficients and confidence terms against the IEEE float64
    (Z3 FP) whole-tree reference: never miss a violation, never invent one."""
    model, inv = _draw_case(data, linear=True)
    if inv is None:
        return
    ref = QuickIEEE(model).violating_leaves(inv)
    if ref is None:
        return
    violating, unknown = leaf_verdicts(model, inv)
    assert violating <= ref
    assert ref <= violating | unknown
    r = check_invariant(model, inv, CheckOptions(rlimit=5_000_000))
    no_internal(r)
    assert_counterexamples_real(model, inv, r)
    if r.status == "holds":
        assert not ref


@pytest.mark.parametrize(
    "body",
    [
        "when 3 * x == 100 ensure false",
        "ensure not (3 * x == 100)",
        "when 10 * x == 1 ensure action == block",
        "when x != 0.1 and x > 0.1 and x < 0.10000000000000002 ensure false",
        "when 3 * x == 100 and x + n > 1 and x - n < 50 ensure false",
        # negated: not (x < 100) is x >= 100 on float64 values, not the real x > prev(100)
        "ensure (x < 100) or (x >= 100)",
        "ensure not (x > 0.1 and x < 0.10000000000000002)",
        "when not (x <= 50) ensure x >= 50.00000000000001",
    ],
)
def test_solver_states_single_feature_bounds_on_float64(body, tmp_path):  # regression
    """Sent to Z3, ``3 * x == 100`` on a float feature used to be the real equation, whose only
    solution 100/3 is no float64: Z3 said sat, rounding failed, and the path was 'unknown'.
    Stated as float64 bounds it is unsat.  The SMT-LIB dump states it the same way (cvc5
    replays the recorded answer)."""
    from clefprove.smt.smtlib import expected_status, replay

    model = _float_model(split("x", 50.0, leaf("allow"), leaf("block")))
    inv = inv_of(model, body)
    smt = tmp_path / "smt"
    smt.mkdir()
    r = check_invariant(model, inv, CheckOptions(shortcuts=False, smtlib_dir=str(smt)))
    assert r.status == "holds"
    files = sorted(smt.glob("*.smt2"))
    assert files
    for path in files:
        text = path.read_text()
        assert expected_status(text) == "unsat"
        assert replay(text) == "unsat", path.name


# ---------------------------------------------------------------- relational invariants


def relational_truth(model: Model, inv: ck.CheckedInvariant, severity) -> bool | None:
    """Brute force over the grid: some pair (x, x') differing only in f, both satisfying
    ``when``, related on f, whose decisions break the property.  Complete for single-feature
    ``when`` atoms: every cell end point of every feature is in the grid, and the distance
    between two cells is attained at end points."""
    rel = inv.ensure
    per = interesting_values(model, inv)
    if per is None:
        return None
    f = rel.feature
    ft = model.features[f]
    if isinstance(rel, ck.Stable) and ft.type is FeatureType.FLOAT:
        # the points at distance delta from every grid value, on both sides
        extra = set()
        for v in per[f]:
            for s in (1, -1):
                q = Fraction(v) + s * rel.delta
                if abs(q) <= Fraction(MAXF):
                    b = _float_floor(q)
                    extra |= {b, math.nextafter(b, UP)}
        per[f] = sorted({v for v in set(per[f]) | extra if ft.min <= v <= ft.max})
    if math.prod(len(v) for v in per) > 20000:
        return None
    X = np.array(list(itertools.product(*per)), dtype=np.float64).reshape(-1, len(per))
    res = Evaluator(model).evaluate(X)
    rank = {a: k for k, a in enumerate(severity)} if severity else None
    groups: dict[tuple, list[int]] = {}
    for k in range(X.shape[0]):
        xs = X[k].tolist()
        if ck.evaluate(inv.when, xs, -1, 0.0):
            key = tuple(v for j, v in enumerate(xs) if j != f)
            groups.setdefault(key, []).append(k)
    for rows in groups.values():
        for i in rows:
            for j in rows:
                a, b = X[i, f], X[j, f]
                ai, aj = int(res.actions[i]), int(res.actions[j])
                match rel:
                    case ck.Monotone():
                        if a < b and rank[aj] < rank[ai]:
                            return True
                    case ck.Stable(_, delta):
                        if abs(Fraction(a) - Fraction(b)) <= delta and ai != aj:
                            return True
                    case ck.Independent():
                        if a != b and ai != aj:
                            return True
    return False


@st.composite
def relational_case(draw):
    from clefprove.errors import ClefproveError

    feats = draw(adv_features())
    model = build(feats, draw(adv_trees(feats, 3)))
    spec = draw(st.sampled_from(feats))
    name = spec["name"]
    forms = [f"independent({name})"]
    if spec["type"] != "categorical":
        forms.append(f"monotone({name})")
    if spec["type"] in ("int", "float"):
        delta = draw(
            st.sampled_from(
                ["0", "0.5", "1", "5e-324", "1e-320", "1e308", "2", "1e-300 * 1e-300", "0.1"]
            )
        )
        forms.append(f"stable({name}, {delta})")
    form = draw(st.sampled_from(forms))
    plain = [f for f in feats]
    when = draw(st.one_of(st.just(""), adv_formula(plain, False, 1)))
    if "action" in when or "confidence" in when:
        when = ""
    body = (f"when {when}\n  " if when else "") + f"ensure {form}"
    try:
        prog = parse_text(SEV + "invariant t:\n  " + body + "\n", model, "t.inv")
    except ClefproveError:
        return model, None, None
    return model, prog.invariants[0], prog.severity


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("CLEFPROVE_ADV_EXAMPLES", 300)),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(relational_case())
def test_relational_against_grid_brute_force(case):
    from clefprove.verify.relational import check_relational, confirm_pair, prepare

    model, inv, severity = case
    if inv is None:
        return
    truth = relational_truth(model, inv, severity)
    if truth is None:
        return
    r = check_relational(model, inv, severity)
    no_internal(r)
    assert r.status == ("violated" if truth else "holds"), (r.status, truth)
    prep = prepare(model, inv, severity)
    ev = Evaluator(model)
    for c in r.counterexamples:
        xs = [encode_record(model, json.loads(json.dumps(rec))) for rec in c.inputs]
        leaves = tuple(naive_leaf(model, x.tolist()) for x in xs)
        assert leaves == c.leaves
        assert confirm_pair(model, ev, prep, leaves, xs[0], xs[1]) is not None


@st.composite
def int_relational_case(draw):
    from clefprove.errors import ClefproveError

    feats = [
        {
            "name": f"f{i}",
            "type": "int",
            "min": lo,
            "max": lo + draw(st.integers(0, 4)),
            "default": lo,
        }
        for i, lo in enumerate(draw(st.lists(st.integers(-2, 2), min_size=2, max_size=3)))
    ]
    model = build(feats, draw(adv_trees(feats, 3)))
    name = draw(st.sampled_from([f["name"] for f in feats]))
    delta = draw(st.sampled_from(["0", "0.5", "1", "1.5", "2", "10"]))
    form = draw(
        st.sampled_from([f"independent({name})", f"monotone({name})", f"stable({name}, {delta})"])
    )
    atoms = []
    for _ in range(draw(st.integers(1, 3))):
        a, b = draw(st.sampled_from(feats))["name"], draw(st.sampled_from(feats))["name"]
        k = draw(st.sampled_from(["1", "2", "-1", "0.5"]))
        op = draw(st.sampled_from([">=", "<", "==", "!="]))
        atoms.append(f"{a} + {k} * {b} {op} {draw(st.integers(-3, 6))}")
    when = f" {draw(st.sampled_from(['and', 'or']))} ".join(f"({a})" for a in atoms)
    try:
        prog = parse_text(SEV + f"invariant t:\n  when {when}\n  ensure {form}\n", model, "t.inv")
    except ClefproveError:
        return model, None, None
    return model, prog.invariants[0], prog.severity


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("CLEFPROVE_ADV_EXAMPLES", 300)) // 3,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(int_relational_case())
def test_relational_linear_when_exhaustive_on_ints(case):
    """Linear ``when`` literals (the pair solver's ground) on small int domains, against
    exhaustive enumeration of every input pair."""
    from clefprove.verify.relational import check_relational

    model, inv, severity = case
    if inv is None:
        return
    axes = [range(int(f.min), int(f.max) + 1) for f in model.features]
    per = [[float(v) for v in ax] for ax in axes]
    X = np.array(list(itertools.product(*per)), dtype=np.float64).reshape(-1, len(per))
    res = Evaluator(model).evaluate(X)
    rel = inv.ensure
    f = rel.feature
    rank = {a: k for k, a in enumerate(severity)}
    ok = [ck.evaluate(inv.when, X[k].tolist(), -1, 0.0) for k in range(X.shape[0])]
    truth = False
    for i in range(X.shape[0]):
        for j in range(X.shape[0]):
            if not (ok[i] and ok[j]):
                continue
            if np.any(np.delete(X[i], f) != np.delete(X[j], f)):
                continue
            a, b = X[i, f], X[j, f]
            ai, aj = int(res.actions[i]), int(res.actions[j])
            if isinstance(rel, ck.Monotone):
                truth |= bool(a < b and rank[aj] < rank[ai])
            elif isinstance(rel, ck.Stable):
                truth |= bool(abs(Fraction(a) - Fraction(b)) <= rel.delta and ai != aj)
            else:
                truth |= bool(a != b and ai != aj)
    r = check_relational(model, inv, severity)
    no_internal(r)
    assert r.status == ("violated" if truth else "holds")


@pytest.mark.parametrize("kind", ["int", "float"])
def test_split_at_max_float_with_a_linear_when(kind):  # regression
    """A split at max float64 gives its right child the lower end +inf (an empty box); the
    exact fallback of the linear bound used to turn it into a Fraction and crash."""
    feats = [
        {"name": "a", "type": kind, "min": 0, "max": 3, "default": 0},
        {"name": "b", "type": kind, "min": 0, "max": 3, "default": 0},
    ]
    model = build(feats, split("a", MAXF, leaf("allow"), leaf("block")))
    for body in ("when a + b >= 0 ensure action == allow", "when a - b >= 6 ensure false"):
        r = check(model, [inv_of(model, body)]).results[0]
        assert r.status == "holds"
    r = check(model, [inv_of(model, "when a + b >= 1 ensure independent(a)")]).results[0]
    assert r.status == "holds"
