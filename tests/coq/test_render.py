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


def test_relational_invariants_are_listed_not_exported() -> None:
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


def test_invariant_names_and_their_derived_names_do_not_clash() -> None:
    namer = Namer()
    suffixes = ("_w", "_When")
    first = namer.name_group("foo", "inv", suffixes)
    second = namer.name_group("foo_When", "inv", suffixes)
    third = namer.name_group("foo", "inv", suffixes)
    derived = [n + s for n in (first, second, third) for s in ("", *suffixes)]
    assert len(set(derived)) == len(derived)
