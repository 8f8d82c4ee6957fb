"""Engine plumbing: solver limits give unknown (never holds), worker processes change nothing,
SMT-LIB dumps, the domain box, and the float64 rounding helpers."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.dsl.loader import parse_text
from clefprove.geometry.boxes import leaf_boxes
from clefprove.geometry.floats import float_ge, float_le
from clefprove.model.loading import load_model
from clefprove.verify import engine as eg
from clefprove.verify.api import check, check_invariant
from clefprove.verify.options import CheckOptions

ROOT = Path(__file__).resolve().parents[2]
TWO_LINEAR = (
    "when client_rtt_ms + 100 * path_depth >= 250 and client_rtt_ms - 10 * path_depth <= 240 "
    "ensure action != allow"
)
SEV = "severity allow < challenge < rate_limit < block\n"


@pytest.fixture(scope="module")
def edge():
    return load_model(ROOT / "examples" / "edge-allow-block.clef")


def _inv(model, body: str):
    return parse_text(SEV + "invariant t:\n  " + body + "\n", model, "t.inv").invariants[0]


@pytest.mark.parametrize("k", [0, 1, 3])
def test_violated_rests_on_a_confirmed_witness_whatever_k(edge, k, monkeypatch):
    # a witness the evaluator does not confirm (a bug) makes its path unknown; the next
    # violating paths are tried until one is confirmed, also when none is to be printed
    from clefprove.verify import api

    inv = _inv(edge, "when path_depth >= 3 ensure action != challenge")
    fresh = check(edge, [inv], counterexamples=3).results[0]
    assert fresh.status == "violated" and fresh.violating_paths >= 3
    real, calls = api._confirmed, []

    def first_fails(*args):
        calls.append(args[4])
        return None if len(calls) == 1 else real(*args)

    monkeypatch.setattr(api, "_confirmed", first_fails)
    r = check(edge, [inv], counterexamples=k).results[0]
    assert r.status == "violated" and len(calls) == max(1, k) + 1
    assert (r.violating_paths, r.unknown_paths) == (fresh.violating_paths - 1, 1)
    assert len(r.counterexamples) == k and "unconfirmed witness" in r.warnings[0]
    monkeypatch.setattr(api, "_confirmed", lambda *args: None)
    r = check(edge, [inv], counterexamples=k).results[0]
    assert r.status == "unknown" and r.unknown_paths == fresh.violating_paths


def test_resource_limit_gives_unknown_not_holds(edge):
    inv = _inv(edge, "when client_rtt_ms > 300 and tls_version < 772 ensure action != allow")
    r = check_invariant(edge, inv, CheckOptions(shortcuts=False, rlimit=1))
    assert r.status == "unknown" and r.unknown_paths > 0
    rep = check(edge, [inv], rlimit=1)  # the box engine decides it without the solver
    assert rep.results[0].status == "holds"


@pytest.mark.slow
def test_jobs_give_identical_verdicts(edge):
    inv = _inv(edge, "ensure action == block implies confidence >= 0.8")
    prep = eg.prepare(edge, inv)
    boxes = leaf_boxes(edge)
    one = eg.decide(edge, prep, boxes, CheckOptions(shortcuts=False, jobs=1))
    two = eg.decide(edge, prep, boxes, CheckOptions(shortcuts=False, jobs=2))
    fast = eg.decide(edge, prep, boxes, CheckOptions())
    assert one.solver_paths >= eg.PARALLEL_MIN_SOLVER_PATHS
    assert np.array_equal(one.status, two.status)
    assert np.array_equal(one.status, fast.status)


def test_smtlib_dump(tmp_path, edge):
    inv = _inv(edge, TWO_LINEAR)
    out = tmp_path / "smt"
    # linear=False: the two-literal conjunct goes to the solver (verify/linear decides it)
    rep = check(edge, [inv], options=CheckOptions(linear=False, smtlib_dir=str(out)))
    solver_paths = rep.results[0].solver_paths
    assert solver_paths > 0
    assert len(list(out.glob("t-leaf*.smt2"))) == solver_paths
    for f in out.glob("*.smt2"):
        assert "(check-sat)" in f.read_text()


@pytest.mark.slow
def test_two_linear_literals_reach_solver_and_agree(edge):
    inv = _inv(edge, TWO_LINEAR)
    r = check_invariant(edge, inv, CheckOptions(linear=False))
    assert r.solver_paths > 0
    slow = check_invariant(edge, inv, CheckOptions(shortcuts=False))
    assert (r.status, r.violating_paths) == (slow.status, slow.violating_paths)
    fast = check_invariant(edge, inv)  # verify/linear: the same, fewer solver paths
    assert (fast.status, fast.violating_paths) == (slow.status, slow.violating_paths)
    assert fast.solver_paths < r.solver_paths


@pytest.mark.parametrize(
    "q", [Fraction(1, 3), Fraction(300), Fraction(-7, 10), Fraction(10**20 + 1, 7), Fraction(0)]
)
def test_float_rounding_helpers(q):
    lo, hi = float_le(q), float_ge(q)
    assert Fraction(lo) <= q <= Fraction(hi)
    assert Fraction(math.nextafter(lo, math.inf)) > q or lo == hi
    assert Fraction(math.nextafter(hi, -math.inf)) < q or lo == hi


def test_nice_float_in_interval():
    lo = math.nextafter(300.0, math.inf)
    assert eg.nice_float(lo, 10000.0, 50.0) == 301.0
    assert eg.nice_float(0.0, 8.0, 3.0) == 3.0
    v = eg.nice_float(7.839250326156615, 7.850549936294556, 0.0)
    assert 7.839250326156615 <= v <= 7.850549936294556 and len(repr(v)) <= 5


def _nice_float_by_fractions(lo: float, hi: float, target: float) -> float:
    """The shortest-decimal search in Fraction arithmetic (the reference)."""
    if lo <= target <= hi:
        return float(target)
    up = target < lo
    flo, fhi = Fraction(lo), Fraction(hi)
    for digits in range(0, 18):
        scale = 10**digits
        q = (
            Fraction(math.ceil(flo * scale), scale)
            if up
            else Fraction(math.floor(fhi * scale), scale)
        )
        if lo <= float(q) <= hi:
            return float(q)
    return lo if up else hi


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-1e300, 1e300, allow_nan=False),
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 40),
    st.booleans(),
)
def test_nice_float_equals_the_fraction_search(lo, width, ulps, below):
    hi = lo + width
    for _ in range(ulps):  # also intervals a few ulps wide
        hi = math.nextafter(hi, -math.inf) if hi > lo else hi
    target = lo - 1.0 if below else hi + 1.0
    if not math.isfinite(hi) or not lo <= hi:
        return
    assert eg.nice_float(lo, hi, target) == _nice_float_by_fractions(lo, hi, target)


def test_when_vacuous_with_decision_terms(edge):
    inv = _inv(edge, "when confidence > 1 ensure action == block")
    r = check_invariant(edge, inv)
    assert r.status == "holds" and r.vacuous
    inv2 = _inv(edge, "when action == block and confidence < 0.5 ensure false")
    r2 = check_invariant(edge, inv2)
    assert r2.status in ("holds", "violated")
    assert r2.vacuous == (r2.status == "holds")


def test_const_ensure(edge):
    assert check_invariant(edge, _inv(edge, "ensure true")).status == "holds"
    r = check_invariant(edge, _inv(edge, "ensure false"))
    assert r.status == "violated" and r.violating_paths == edge.n_leaves


def test_checked_invariants_directly(edge):
    when = ck.Compare(ck.Linear.make({0: Fraction(-1)}, Fraction(300)), True)  # rtt > 300
    inv = ck.CheckedInvariant("d", None, "x.inv", 1, 1, when, ck.ActionIn(frozenset({1, 2, 3})))
    r = check(edge, inv).results[0]
    assert r.status in ("holds", "violated")


@pytest.mark.slow
def test_unknown_gives_exit_3(edge):
    body = (
        "when client_rtt_ms + 100 * path_depth >= 250 and client_rtt_ms + 100 * path_depth < 250 "
        "ensure action != allow"
    )
    inv = _inv(edge, body)
    fast = check(edge, [inv]).results[0]
    assert fast.status == "holds" and fast.solver_paths == 0  # the exact linear stage
    full = check_invariant(edge, inv, CheckOptions(linear=False))
    assert full.status == "holds" and full.solver_paths > 0
    limited = check_invariant(edge, inv, CheckOptions(shortcuts=False, rlimit=1))
    assert limited.status in ("holds", "unknown")  # never violated
    from clefprove.verify.verdicts import InvariantResult, ModelInfo, Report

    info = ModelInfo("m.clef", "0" * 64, 1, 1)
    res = lambda st: InvariantResult("i", "f.inv", 1, st)  # noqa: E731
    assert Report(info, (res("holds"), res("unknown")), 0.0).exit_code == 3
    assert Report(info, (res("violated"), res("unknown")), 0.0).exit_code == 1
    assert Report(info, (res("holds"),), 0.0).exit_code == 0


@pytest.mark.parametrize(
    "body",
    [
        "when 3 * x - z >= 1 and 3 * x - z <= 1 and 7 * x + z >= 2.2 ensure action == block",
        "when 10 * x - 3 * z > 0.1 and 10 * x - 3 * z < 0.1000000000000001 ensure action == block",
    ],
)
def test_rational_models_become_float64_witnesses(body):
    """Z3's rational solutions are rounded / re-solved into exact float64 counterexamples."""
    from clefprove.model.source import compile_source

    src = {
        "features": [
            {"name": "x", "type": "float", "min": 0, "max": 10, "default": 0},
            {"name": "z", "type": "float", "min": -1, "max": 10, "default": 0},
        ],
        "actions": ["allow", "block"],
        "tree": {
            "feature": "x",
            "threshold": 5,
            "left": {"action": "allow", "confidence": 0.9},
            "right": {"action": "block", "confidence": 0.8},
        },
    }
    model = compile_source(src)
    inv = parse_text("invariant t:\n  " + body + "\n", model, "t.inv").invariants[0]
    r = check_invariant(model, inv)
    assert r.solver_paths >= 1
    assert r.status == "violated" and r.counterexamples and not r.warnings
    c = r.counterexamples[0]
    x = [c.input["x"], c.input["z"]]
    assert ck.evaluate(inv.when, x, 0, 0.9)


def _two_paths_model(root_threshold: float):
    """n <= t at the root, then n <= 1.5 again below: with t = 0.5 or 1.5 the leaf under
    ``n > t, n > 1.5, x <= 7.5`` has the same box, reached through different split literals."""
    from clefprove.model.source import compile_source

    def leaf() -> dict:
        return {"action": "allow", "confidence": 0.5}

    def node(feature: str, t: float, left: dict, right: dict) -> dict:
        return {"feature": feature, "threshold": t, "left": left, "right": right}

    right = node("n", 1.5, leaf(), node("x", 7.5, leaf(), leaf()))
    return compile_source(
        {
            "name": "t",
            "version": "1",
            "features": [
                {"name": "x", "type": "float", "min": 0, "max": 10, "default": 0},
                {"name": "n", "type": "int", "min": 0, "max": 6, "default": 0},
            ],
            "actions": ["allow", "challenge", "rate_limit", "block"],
            "tree": node("n", root_threshold, node("x", 5.0, leaf(), leaf()), right),
        }
    )


def test_isolated_witness_depends_on_the_box_not_on_the_path() -> None:
    """Found at stop 23: a cached report printed the witness found for the previous version
    of a leaf whose box an edit above it had kept, a fresh one the witness found along the
    new path.  The lone solver sees the box only, so both versions print the same input."""
    body = "when x + n >= 8 and x - n <= 1 ensure action != allow"
    found = []
    for t in (0.5, 1.5):
        model = _two_paths_model(t)
        prep = eg.prepare(model, _inv(model, body))
        boxes = leaf_boxes(model)
        r = int(np.flatnonzero(boxes.hi[:, 0] == 7.5)[0])
        assert boxes.lo[r, 1] == 2 and boxes.hi[r, 1] == 6
        x = eg.isolated_witness(model, prep, boxes, r, CheckOptions(linear=False))
        assert x is not None
        found.append(x.tolist())
    assert found[0] == found[1]


@pytest.mark.parametrize("empty", [[], (), "program"])
def test_checking_no_invariant_at_all_is_refused(spec_model, empty) -> None:
    """SPEC §4: an invariant set that defines no invariant is bad input (the CLI's exit 2).
    ``clefprove.check(model, [])`` returned a passing report (exit_code 0, no invariant), so a
    caller whose list of invariants came out empty passed every gate."""
    from clefprove.errors import ClefproveError

    invariants = ck.CheckedProgram(()) if empty == "program" else empty
    with pytest.raises(ClefproveError, match="no invariant"):
        check(spec_model, invariants)
