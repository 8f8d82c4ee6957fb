"""Names and statements of the Coq text (no coqc needed)."""

from __future__ import annotations

import re

from clefprove.coq_export.export import SKIPPED, export_coq
from clefprove.coq_export.render import Namer
from clefprove.dsl import checked as ck
from clefprove.model.source import compile_source

from .coqgen import invariant

IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def test_names_are_valid_distinct_and_clear_of_the_library() -> None:
    namer = Namer()
    raw = ["client-rtt", "client_rtt", "9lives", "_x", "check", "sem", "lo", "fun", "ok", "ok"]
    names = [namer.name(r, "f") for r in raw]
    assert len(set(names)) == len(names)
    assert all(IDENT.match(n) for n in names)
    for reserved in ("check", "sem", "lo", "fun"):
        assert reserved not in names
    assert names[0] == "client_rtt" and names[1] == "f_client_rtt"


def test_monotone_needs_the_severity_order() -> None:
    src = {
        "name": "m",
        "version": "1",
        "features": [{"name": "a", "type": "int", "min": 0, "max": 3, "default": 0}],
        "actions": ["allow", "block"],
        "tree": {"action": "allow", "confidence": 1.0},
    }
    model = compile_source(src)
    rel = ck.CheckedInvariant("mono", None, "<t>", 1, 1, ck.Const(True), ck.Monotone(0))
    plain = invariant("always", ck.Const(True), ck.ActionIn(frozenset({0})))
    export = export_coq(model, [rel, plain], verify=False)
    statuses = {r.name: r.status for r in export.results}
    assert statuses == {"mono": SKIPPED, "always": "proved"}
    assert "Theorem mono" not in export.files["Invariants.v"]
    assert "Theorem always" in export.files["Invariants.v"]
    assert export.exit_code == 3
    # With the severity order (what a checked program carries) the same monotone is proved:
    # one leaf, one action.
    ordered = export_coq(model, [rel, plain], verify=False, severity=(0, 1))
    assert {r.name: r.status for r in ordered.results} == {"mono": "proved", "always": "proved"}
    assert "Theorem mono : rel_valid model_domain model_tree" in ordered.files["Invariants.v"]


def test_invariant_names_and_their_derived_names_do_not_clash() -> None:
    namer = Namer()
    suffixes = ("_w", "_When")
    first = namer.name_group("foo", "inv", suffixes)
    second = namer.name_group("foo_When", "inv", suffixes)
    third = namer.name_group("foo", "inv", suffixes)
    derived = [n + s for n in (first, second, third) for s in ("", *suffixes)]
    assert len(set(derived)) == len(derived)


def test_comment_text_keeps_coq_strings_balanced() -> None:
    # Coq lexes string literals inside comments: a lone '"' opens a string in which '*)'
    # does not end the comment, so the comment swallowed the code after it (a categorical
    # value 'say "hi' hid the definitions that followed; coqc failed).
    from clefprove.coq_export.render import comment

    for text in ['é"', 'say "hi', 'a"b"c"', '"(*"', '*)"', "'it\\'s \"'"]:
        out = comment(text)
        assert out.count('"') % 2 == 0, out
        assert "(*" not in out and "*)" not in out, out


def test_quotes_in_model_text_and_descriptions_stay_inside_comments() -> None:
    src = {
        "name": 'm"odel',
        "version": '1"',
        "features": [
            {"name": "k", "type": "categorical", "values": ['a"', "b", 'c"'], "default": "b"}
        ],
        "actions": ["allow", "block"],
        "tree": {
            "feature": "k",
            "in": ['a"'],
            "left": {"action": "block", "confidence": 1.0},
            "right": {"action": "allow", "confidence": 1.0},
        },
    }
    model = compile_source(src)
    plain = invariant("always", ck.Const(True), ck.ActionIn(frozenset({0, 1})))
    described = ck.CheckedInvariant(
        "described", "it's \"quoted", "<t>", 1, 1, ck.Const(True), ck.ActionIn(frozenset({0, 1}))
    )
    export = export_coq(model, [described, plain], verify=False)
    for name in ("Model.v", "Invariants.v"):
        text = export.files[name]
        # Outside the comments (which nest), the text has no string literal at all.
        depth, i, code = 0, 0, []
        while i < len(text):
            two = text[i : i + 2]
            if two == "(*":
                depth, i = depth + 1, i + 2
            elif two == "*)" and depth:
                depth, i = depth - 1, i + 2
            elif text[i] == '"' and depth:
                end = text.index('"', i + 1)  # a string inside a comment must close
                assert "*)" not in text[i:end], (name, text[i : end + 1])
                i = end + 1
            else:
                if not depth:
                    code.append(text[i])
                i += 1
        assert depth == 0, name
        assert '"' not in "".join(code), name
    assert "Theorem described" in export.files["Invariants.v"]
