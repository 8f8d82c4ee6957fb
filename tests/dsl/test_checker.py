"""The checked form of the SPEC §3 examples and of every construct, written out by hand."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from clefprove.dsl.checked import (
    CONFIDENCE,
    ActionIn,
    And,
    Compare,
    Const,
    Independent,
    InSet,
    Linear,
    Monotone,
    Not,
    Or,
    Stable,
    evaluate,
)
from clefprove.dsl.errors import DslError
from clefprove.dsl.loader import load_invariants, parse_text

ROOT = Path(__file__).resolve().parents[2]
EDGE = ROOT / "invariants" / "edge.inv"

RTT, TLS, DEPTH, ENTROPY, UA, TOR = range(6)
ALLOW, CHALLENGE, RATE_LIMIT, BLOCK = range(4)
SEVERITY = "severity allow < challenge < rate_limit < block\n"


def lin(const: float | Fraction, **coeffs: float | Fraction) -> Linear:
    names = {"rtt": RTT, "tls": TLS, "depth": DEPTH, "entropy": ENTROPY, "conf": CONFIDENCE}
    return Linear.make({names[k]: Fraction(v) for k, v in coeffs.items()}, Fraction(const))


def le(const, **coeffs) -> Compare:
    return Compare(lin(const, **coeffs), False)


def lt(const, **coeffs) -> Compare:
    return Compare(lin(const, **coeffs), True)


def check_one(spec_model, text: str, severity: bool = False):
    program = parse_text((SEVERITY if severity else "") + text, spec_model)
    assert len(program.invariants) == 1
    return program.invariants[0]


def when_of(spec_model, cond: str, severity: bool = False):
    return check_one(spec_model, f"invariant t:\n  when {cond}\n  ensure true\n", severity).when


def ensure_of(spec_model, cond: str, severity: bool = True):
    return check_one(spec_model, f"invariant t:\n  ensure {cond}\n", severity).ensure


def test_spec_edge_file_checks_exactly(spec_model) -> None:
    program = load_invariants([EDGE], spec_model)
    assert program.severity == (ALLOW, CHALLENGE, RATE_LIMIT, BLOCK)
    got = {inv.name: inv for inv in program.invariants}
    assert list(got) == [
        "slow_legacy_tls_never_allowed",
        "scripted_clients_face_friction",
        "blocks_are_confident",
        "tor_never_allowed_when_deep",
        "weighted_risk_linear",
    ]
    first = got["slow_legacy_tls_never_allowed"]
    assert (first.file, first.line, first.column) == (str(EDGE), 8, 1)
    assert first.description == "Slow clients on legacy TLS are never allowed straight through."
    assert first.when == And((lt(300, rtt=-1), lt(-772, tls=1)))
    assert first.ensure == Not(ActionIn(frozenset({ALLOW})))

    second = got["scripted_clients_face_friction"]
    assert second.description is None
    assert second.when == And((InSet(UA, frozenset({3, 4})), le(3, depth=-1)))
    assert second.ensure == ActionIn(frozenset({CHALLENGE, RATE_LIMIT, BLOCK}))

    third = got["blocks_are_confident"]
    assert third.when == Const(True)
    assert third.ensure == Or((Not(ActionIn(frozenset({BLOCK}))), le(Fraction(0.8), conf=-1)))

    fourth = got["tor_never_allowed_when_deep"]
    assert fourth.when == And((InSet(TOR, frozenset({1})), le(4, depth=-1), le(-64, depth=1)))
    assert fourth.ensure == ActionIn(frozenset({CHALLENGE, RATE_LIMIT, BLOCK}))

    fifth = got["weighted_risk_linear"]
    assert fifth.when == le(2000, rtt=-1, depth=-200)
    assert fifth.ensure == Not(ActionIn(frozenset({ALLOW})))


def test_spec_relational_examples(spec_model) -> None:
    text = SEVERITY + (
        "invariant m:\n  ensure monotone(referer_entropy)\n"
        "invariant s:\n  ensure stable(client_rtt_ms, 5)\n"
        "invariant i:\n  ensure independent(ua_family)\n"
        "invariant b:\n  when path_depth > 3\n  ensure monotone(is_tor)\n"
        "invariant z:\n  ensure stable(path_depth, 0.5)\n"
    )
    program = parse_text(text, spec_model)
    ensures = [inv.ensure for inv in program.invariants]
    assert ensures == [
        Monotone(ENTROPY),
        Stable(RTT, Fraction(5)),
        Independent(UA),
        Monotone(TOR),
        Stable(DEPTH, Fraction(1, 2)),
    ]
    assert all(inv.is_relational for inv in program.invariants)


def test_numbers_mean_the_nearest_float64(spec_model) -> None:
    inv = check_one(spec_model, "invariant t:\n  ensure confidence >= 0.7\n")
    assert inv.ensure == le(Fraction(0.7), conf=-1)
    assert Fraction(0.7) != Fraction(7, 10)
    # holds on a leaf whose confidence is the float 0.7, as SPEC says
    assert evaluate(inv.ensure, [0.0] * 6, ALLOW, 0.7)
    assert not evaluate(inv.ensure, [0.0] * 6, ALLOW, 0.6999999999999998)
    assert when_of(spec_model, "referer_entropy < 1e-400") == lt(0, entropy=1)
    assert when_of(spec_model, "client_rtt_ms < 1.5E3") == lt(-1500, rtt=1)
    assert when_of(spec_model, "client_rtt_ms < .5") == lt(Fraction(-1, 2), rtt=1)


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("path_depth <= 3", le(-3, depth=1)),
        ("path_depth < 3", lt(-3, depth=1)),
        ("path_depth >= 3", le(3, depth=-1)),
        ("path_depth > 3", lt(3, depth=-1)),
        ("3 < path_depth", lt(3, depth=-1)),
        ("path_depth == 3", And((le(-3, depth=1), le(3, depth=-1)))),
        ("path_depth != 3", Not(And((le(-3, depth=1), le(3, depth=-1))))),
        ("0 < path_depth <= 10", And((lt(0, depth=-1), le(-10, depth=1)))),
        ("path_depth in [4, 64]", And((le(4, depth=-1), le(-64, depth=1)))),
        ("path_depth not in [4, 64]", Not(And((le(4, depth=-1), le(-64, depth=1))))),
        (
            "path_depth in {1, 2, 5}",
            Or(
                (
                    And((le(-1, depth=1), le(1, depth=-1))),
                    And((le(-2, depth=1), le(2, depth=-1))),
                    And((le(-5, depth=1), le(5, depth=-1))),
                )
            ),
        ),
        ("path_depth in {2}", And((le(-2, depth=1), le(2, depth=-1)))),
        ("2 * (client_rtt_ms - path_depth) + 1 < 0", lt(1, rtt=2, depth=-2)),
        ("-client_rtt_ms * 3 >= -path_depth", le(0, rtt=3, depth=-1)),
        ("client_rtt_ms - client_rtt_ms + path_depth > 0", lt(0, depth=-1)),
        ("0.1 * 3 * client_rtt_ms <= 1", le(-1, rtt=Fraction(0.1) * 3)),
        ('ua_family == "curl"', InSet(UA, frozenset({3}))),
        ('"curl" == ua_family', InSet(UA, frozenset({3}))),
        ('ua_family != "curl"', Not(InSet(UA, frozenset({3})))),
        ('ua_family in {"Chrome", "other"}', InSet(UA, frozenset({0, 5}))),
        ('ua_family not in {"Chrome"}', Not(InSet(UA, frozenset({0})))),
        ("is_tor", InSet(TOR, frozenset({1}))),
        ("is_tor == true", InSet(TOR, frozenset({1}))),
        ("is_tor == false", InSet(TOR, frozenset({0}))),
        ("is_tor != true", Not(InSet(TOR, frozenset({1})))),
        ("not is_tor", Not(InSet(TOR, frozenset({1})))),
        ("is_tor in {true, false}", InSet(TOR, frozenset({0, 1}))),
        ("true", Const(True)),
        ("false or is_tor", Or((Const(False), InSet(TOR, frozenset({1}))))),
        (
            "is_tor and (path_depth > 1 and path_depth < 9) and true",
            And((InSet(TOR, frozenset({1})), lt(1, depth=-1), lt(-9, depth=1), Const(True))),
        ),
        (
            "is_tor implies path_depth > 1 implies path_depth > 2",
            Or((Not(InSet(TOR, frozenset({1}))), Not(lt(1, depth=-1)), lt(2, depth=-1))),
        ),
        (
            "(is_tor implies path_depth > 1) implies path_depth > 2",
            Or((Not(Or((Not(InSet(TOR, frozenset({1}))), lt(1, depth=-1)))), lt(2, depth=-1))),
        ),
        (
            "is_tor or path_depth > 1 and path_depth > 2",
            Or((InSet(TOR, frozenset({1})), And((lt(1, depth=-1), lt(2, depth=-1))))),
        ),
        ("not path_depth > 1", Not(lt(1, depth=-1))),
    ],
)
def test_condition_forms(spec_model, cond: str, expected) -> None:
    assert when_of(spec_model, cond) == expected


def test_a_long_implies_chain_is_one_flat_or_built_once(spec_model, monkeypatch) -> None:
    """``a implies b implies ... z`` is one Or of n terms, built once; it was rebuilt once per
    term, copying the growing tuple (quadratic: about two minutes for a 100,000-term chain)."""
    from clefprove.dsl import checker

    built = []
    real = checker._or
    monkeypatch.setattr(checker, "_or", lambda parts: built.append(1) or real(parts))
    n = 2_000
    f = when_of(spec_model, " implies ".join(["path_depth > 1"] * n))
    assert isinstance(f, Or) and len(f.args) == n
    assert f.args[0] == Not(lt(1, depth=-1)) and f.args[-1] == lt(1, depth=-1)
    assert len(built) == 1


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("action == allow", ActionIn(frozenset({ALLOW}))),
        ("allow == action", ActionIn(frozenset({ALLOW}))),
        ('action == "allow"', ActionIn(frozenset({ALLOW}))),
        ("action != allow", Not(ActionIn(frozenset({ALLOW})))),
        ("action in {allow, block}", ActionIn(frozenset({ALLOW, BLOCK}))),
        ("action not in {allow}", Not(ActionIn(frozenset({ALLOW})))),
        ("action < challenge", ActionIn(frozenset({ALLOW}))),
        ("action <= challenge", ActionIn(frozenset({ALLOW, CHALLENGE}))),
        ("action > challenge", ActionIn(frozenset({RATE_LIMIT, BLOCK}))),
        ("action >= challenge", ActionIn(frozenset({CHALLENGE, RATE_LIMIT, BLOCK}))),
        ("challenge < action", ActionIn(frozenset({RATE_LIMIT, BLOCK}))),
        ("action < allow", ActionIn(frozenset())),
        (
            "allow < action < block",
            And(
                (
                    ActionIn(frozenset({CHALLENGE, RATE_LIMIT, BLOCK})),
                    ActionIn(frozenset({ALLOW, CHALLENGE, RATE_LIMIT})),
                )
            ),
        ),
        ("confidence > 0.5", lt(Fraction(0.5), conf=-1)),
        ("confidence + path_depth <= 1", le(-1, conf=1, depth=1)),
    ],
)
def test_decision_forms(spec_model, cond: str, expected) -> None:
    assert ensure_of(spec_model, cond) == expected


def test_severity_follows_the_declared_order_not_the_model_order(spec_model) -> None:
    text = (
        "severity block < rate_limit < challenge < allow\n"
        "invariant t:\n  ensure action < challenge\n"
    )
    program = parse_text(text, spec_model)
    assert program.severity == (BLOCK, RATE_LIMIT, CHALLENGE, ALLOW)
    assert program.invariants[0].ensure == ActionIn(frozenset({BLOCK, RATE_LIMIT}))


def test_severity_from_another_file_of_the_run(spec_model, tmp_path: Path) -> None:
    (tmp_path / "a_order.inv").write_text(SEVERITY)
    (tmp_path / "b_rules.inv").write_text("invariant t:\n  ensure action >= rate_limit\n")
    (tmp_path / "c_again.inv").write_text(SEVERITY)  # agreeing lines are fine
    program = load_invariants([tmp_path], spec_model)
    assert program.invariants[0].ensure == ActionIn(frozenset({RATE_LIMIT, BLOCK}))


def test_let_is_expanded_and_may_use_other_lets(spec_model) -> None:
    text = (
        "let deep = path_depth > 3\n"
        "let risky = deep and is_tor\n"
        "let later = risky or slow\n"  # a let may refer to one defined further down
        "let slow = client_rtt_ms > 300\n"
        "invariant t:\n  when later\n  ensure true\n"
    )
    inv = parse_text(text, spec_model).invariants[0]
    assert inv.when == Or((And((lt(3, depth=-1), InSet(TOR, frozenset({1})))), lt(300, rtt=-1)))


def test_lets_are_local_to_their_file(spec_model, tmp_path: Path) -> None:
    (tmp_path / "a.inv").write_text("let slow = client_rtt_ms > 300\n")
    (tmp_path / "b.inv").write_text("invariant t:\n  when slow\n  ensure true\n")
    with pytest.raises(DslError, match=r"a let of .*a\.inv"):
        load_invariants([tmp_path], spec_model)


def test_digest_ignores_layout_comments_and_let_names(spec_model) -> None:
    a = parse_text(
        "let slow = client_rtt_ms > 300\n"
        'invariant first:\n  "one"\n  when slow and is_tor\n  ensure action != allow\n',
        spec_model,
        file="a.inv",
    ).invariants[0]
    b = parse_text(
        "# reformatted, renamed\n\n\n"
        "let   sluggish=(client_rtt_ms>300)   # same meaning\n\n"
        'invariant other_name : "two" when sluggish and (is_tor) ensure not action == allow\n',
        spec_model,
        file="b.inv",
    ).invariants[0]
    assert a.digest == b.digest
    assert a.canonical == b.canonical
    c = parse_text(
        "invariant t:\n  when client_rtt_ms > 301 and is_tor\n  ensure action != allow\n",
        spec_model,
    ).invariants[0]
    assert c.digest != a.digest


def test_empty_file_and_comment_only_file(spec_model) -> None:
    assert parse_text("", spec_model).invariants == ()
    assert parse_text("# nothing here\n\n", spec_model).invariants == ()
    assert parse_text(SEVERITY, spec_model).severity == (0, 1, 2, 3)


def test_decision_names_win_over_nothing_else(spec_model) -> None:
    # 'action' and 'confidence' are the decision; action names only mean actions
    assert ensure_of(spec_model, 'action in {"block"}') == ActionIn(frozenset({BLOCK}))


def test_relational_when_may_use_features(spec_model) -> None:
    inv = check_one(spec_model, "invariant t:\n  when is_tor\n  ensure independent(ua_family)\n")
    assert inv.when == InSet(TOR, frozenset({1}))
    assert inv.ensure == Independent(UA)


def test_keyword_and_unicode_names_in_backticks() -> None:
    from clefprove.dsl.fmt import format_text
    from clefprove.model.source import compile_source

    model = compile_source(
        {
            "name": "odd-names",
            "version": "1",
            "features": [
                {"name": "in", "type": "int", "min": 0, "max": 9, "default": 0},
                {"name": "größe", "type": "float", "min": 0, "max": 1, "default": 0},
            ],
            "actions": ["when", "ok"],
            "tree": {"action": "ok", "confidence": 1.0},
        }
    )
    text = (
        "severity `when` < ok\n\n"
        "invariant t:\n  when `in` > 3 and größe < 0.5\n  ensure action > `when`\n"
    )
    inv = parse_text(text, model).invariants[0]
    assert inv.when == And(
        (
            Compare(Linear.make({0: Fraction(-1)}, Fraction(3)), True),
            Compare(Linear.make({1: Fraction(1)}, -Fraction(0.5)), True),
        )
    )
    assert inv.ensure == ActionIn(frozenset({1}))
    assert format_text(text) == text


def test_huge_exact_constants_are_reported_not_crashed(spec_model) -> None:
    with pytest.raises(DslError, match=r"must be >= 0, not -1e\+616"):
        parse_text("invariant t:\n  ensure stable(client_rtt_ms, -1e308 * 1e308)\n", spec_model)
    with pytest.raises(DslError, match=r"empty interval \[1e\+616, 0\]"):
        parse_text(
            "invariant t:\n  when path_depth in [1e308 * 1e308, 0]\n  ensure true\n", spec_model
        )
    # and exact arithmetic beyond float64 is fine where it is meaningful
    inv = check_one(
        spec_model, "invariant t:\n  when 1e308 * 1e308 * path_depth > 1\n  ensure true\n"
    )
    assert inv.when == lt(1, depth=-(Fraction(1e308) ** 2))
