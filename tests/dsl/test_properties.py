"""Property tests: format/parse round trips, the checked form against a reference interpreter,
and random token and byte mutations that must raise nothing but DslError."""

from __future__ import annotations

import dataclasses
import os
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clefprove.dsl import ast
from clefprove.dsl.checked import evaluate
from clefprove.dsl.checker import check_programs
from clefprove.dsl.errors import DslError
from clefprove.dsl.fmt import format_program, format_text
from clefprove.dsl.loader import decode, parse_text
from clefprove.dsl.parser import parse_program

from .reference import Reference
from .strategies import ACTIONS, UA_VALUES, programs

ROOT = Path(__file__).resolve().parents[2]
# CLEFPROVE_DSL_EXAMPLES=5000 for a longer fuzzing run by hand.
SETTINGS = settings(
    max_examples=int(os.environ.get("CLEFPROVE_DSL_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _meaning(program) -> tuple:
    return program.severity, tuple(
        (i.name, i.description, i.when, i.ensure, i.digest) for i in program.invariants
    )


@pytest.mark.slow
@SETTINGS
@given(programs())
def test_random_ast_format_parse_gives_same_checked_form(spec_model, prog: ast.Program) -> None:
    text = format_program(prog)
    parsed = parse_program(text, "<gen>")
    assert format_program(parsed) == text  # idempotent
    try:
        expected = check_programs([prog], spec_model)
    except DslError as first:
        with pytest.raises(DslError) as again:
            check_programs([parsed], spec_model)
        assert [d.message for d in again.value.diagnostics] == [
            d.message for d in first.diagnostics
        ]
        return
    assert _meaning(check_programs([parsed], spec_model)) == _meaning(expected)


def _literals(node: object) -> list[Fraction]:
    """Every number written in a tree (used to hit comparisons exactly)."""
    found: list[Fraction] = []
    if isinstance(node, ast.Number):
        found.append(node.value)
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            found.extend(_literals(getattr(node, f.name)))
    elif isinstance(node, tuple):
        for x in node:
            found.extend(_literals(x))
    return found


@pytest.mark.slow
@SETTINGS
@given(programs(), st.data())
def test_checked_form_agrees_with_reference_interpreter(spec_model, prog, data) -> None:
    try:
        checked = check_programs([prog], spec_model)
    except DslError:
        assume(False)
        return
    severity = next(s for s in prog.items if isinstance(s, ast.Severity))
    ref = Reference(spec_model, prog, [a.name for a in severity.actions])
    invariants = {i.name.name: i for i in prog.items if isinstance(i, ast.Invariant)}
    literals = [float(v) for v in _literals(prog)] or [0.0]
    features = spec_model.features

    def value(lo: float, hi: float, integral: bool):
        near = st.sampled_from(literals).map(lambda v: min(max(v, lo), hi))
        if integral:
            return st.one_of(st.integers(int(lo), int(hi)), near.map(round)).map(float)
        return st.one_of(st.floats(lo, hi), near)

    for _ in range(4):
        record = {}
        encoded = []
        for f in features:
            if f.type == "categorical":
                v = data.draw(st.sampled_from(UA_VALUES))
                record[f.name] = v
                encoded.append(float(f.values.index(v)))
            elif f.type == "bool":
                v = data.draw(st.booleans())
                record[f.name] = v
                encoded.append(float(v))
            else:
                v = data.draw(value(f.min, f.max, f.type == "int"))
                record[f.name] = v
                encoded.append(v)
        action = data.draw(st.sampled_from(ACTIONS))
        conf = data.draw(st.one_of(st.floats(0, 1), st.sampled_from(literals)))
        for inv in checked.invariants:
            source = invariants[inv.name]
            when = source.when if source.when is not None else ast.BoolLit(True)
            a = spec_model.actions.index(action)
            assert evaluate(inv.when, encoded, a, conf) == ref.holds(when, record, action, conf)
            if not inv.is_relational:
                got = evaluate(inv.ensure, encoded, a, conf)
                assert got == ref.holds(source.ensure, record, action, conf)


# ---------------------------------------------------------------- mutations

RICH = """\
# every construct at least once
severity allow < challenge < rate_limit < block

let slow   = client_rtt_ms > 300  # trailing
let legacy = tls_version < 772
let script = ua_family in {"curl", "python-requests"}
let calm   = not (is_tor == true) and referer_entropy in [0, 2.5]

invariant a:
  "described"
  when slow and legacy or script implies calm
  ensure action != allow and confidence >= 0.5e0

invariant b:
  when 0 < path_depth <= 10 and path_depth not in {3, 4} and -client_rtt_ms * 2 + 1 < .5
  ensure action in {challenge, block} or action < rate_limit

invariant c:
  when ua_family != "Chrome" and ua_family not in {"other"} and is_tor != false
  ensure monotone(referer_entropy)

invariant d:
  ensure stable(client_rtt_ms, 5)

invariant e:
  when not is_tor
  ensure independent(ua_family)
"""
VALID = [(ROOT / "invariants" / "edge.inv").read_text(), RICH]
_TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\\n]|\\.)*"|[A-Za-z_0-9.]+|<=|>=|==|!=|.', re.S)
POOL = [
    "invariant",
    "let",
    "severity",
    "when",
    "ensure",
    "and",
    "or",
    "not",
    "implies",
    "in",
    "true",
    "false",
    "action",
    "confidence",
    "allow",
    "block",
    "client_rtt_ms",
    "ua_family",
    "is_tor",
    "monotone",
    "stable",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "==",
    "<",
    ">=",
    "+",
    "-",
    "*",
    "1",
    "0.5",
    "1e",
    "1.2.3",
    "1e999",
    "1e308",
    "-3",
    '"curl"',
    '"',
    "'x'",
    "#",
    "\n",
    " ",
    "@",
    "&&",
    "\x00",
    "é",
    "\\",
    '"\\q"',
    '"\\ud800"',
    "\t",
    "\r",
    "\u2028",
]


def _check_only_dsl_errors(text: str, spec_model) -> None:
    try:
        parse_text(text, spec_model, file="m.inv")
    except DslError as exc:
        assert exc.diagnostics
        exc.render()
    try:
        out = format_text(text, "m.inv")
    except DslError:
        return
    assert format_text(out, "m.inv") == out  # whatever formats, formats to a fixed point


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_token_mutations_raise_only_dsl_errors(spec_model, data) -> None:
    tokens = _TOKEN.findall(data.draw(st.sampled_from(VALID)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(tokens) - 1))
        op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete":
            del tokens[i]
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        elif op == "swap" and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == "replace":
            tokens[i] = data.draw(st.sampled_from(POOL))
        else:
            tokens.insert(i, data.draw(st.sampled_from(POOL)))
        if not tokens:
            tokens = [" "]
    _check_only_dsl_errors("".join(tokens), spec_model)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_byte_mutations_raise_only_dsl_errors(spec_model, data) -> None:
    raw = bytearray(data.draw(st.sampled_from(VALID)).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        if op == "flip":
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "delete":
            del raw[i]
        else:
            raw.insert(i, data.draw(st.integers(0, 255)))
    try:
        text = decode(bytes(raw), "m.inv")
    except DslError:
        return
    _check_only_dsl_errors(text, spec_model)


@pytest.mark.parametrize(
    "text",
    ids=["not-chain", "minus-chain", "parens", "and-chain"],
    argvalues=[
        "invariant t:\n  ensure " + "not " * 3000 + "is_tor\n",
        "invariant t:\n  ensure path_depth > " + "-" * 3000 + "1\n",
        "invariant t:\n  ensure " + "(" * 200 + "is_tor" + ")" * 200 + "\n",
        "invariant t:\n  ensure " + " and ".join(["is_tor"] * 5000) + "\n",
    ],
)
def test_deep_or_long_expressions_do_not_crash(spec_model, text: str) -> None:
    try:
        parse_text(text, spec_model)
    except DslError as exc:
        assert "nested" in str(exc)


def _rename(node, names: dict[str, str]):
    """A copy of *node* with every let name (definitions and uses) renamed."""
    if isinstance(node, ast.Name) and node.id in names:
        return ast.Name(names[node.id])
    if isinstance(node, ast.Let):
        return ast.Let(ast.Ident(names[node.name.name]), _rename(node.expr, names))
    if isinstance(node, tuple):
        return tuple(_rename(x, names) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, ast.Pos | type):
        changes = {
            f.name: _rename(getattr(node, f.name), names)
            for f in dataclasses.fields(node)
            if f.name != "pos"
        }
        return dataclasses.replace(node, **changes)
    return node


@pytest.mark.slow
@SETTINGS
@given(programs())
def test_renaming_lets_and_reformatting_keep_digests(spec_model, prog: ast.Program) -> None:
    try:
        before = check_programs([prog], spec_model)
    except DslError:
        assume(False)
        return
    lets = [i.name.name for i in prog.items if isinstance(i, ast.Let)]
    renamed = _rename(prog, {n: f"renamed_{n}" for n in lets})
    text = format_program(renamed)
    assert all(f"renamed_{n}" in text for n in lets)
    after = check_programs([parse_program(text, "<renamed>")], spec_model)
    assert [i.digest for i in after.invariants] == [i.digest for i in before.invariants]
