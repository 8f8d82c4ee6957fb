"""CheckOptions: validated once, and the only source of the options part of cache keys."""

from __future__ import annotations

import dataclasses

import pytest

import clefprove
from clefprove.dsl.loader import parse_text
from clefprove.errors import ClefproveError
from clefprove.incremental.walk import outcomes_key, result_key
from clefprove.verify.options import Affects, CheckOptions

#: A different legal value for every field.
OTHER = {
    "counterexamples": 5,
    "timeout": 2.5,
    "rlimit": 7,
    "jobs": 2,
    "dnf_cap": 8,
    "shortcuts": False,
    "linear": False,
    "smtlib_dir": "/tmp/queries",
}


def test_every_field_declares_what_it_affects():
    names = {f.name for f in dataclasses.fields(CheckOptions)}
    assert names == set(OTHER), "give the new field a value in OTHER and an 'affects'"
    for f in dataclasses.fields(CheckOptions):
        assert isinstance(f.metadata["affects"], Affects)


@pytest.mark.parametrize("name", sorted(OTHER))
def test_keys_change_exactly_when_a_field_can_change_what_is_stored(name, spec_model):
    inv = parse_text("invariant t: ensure action != block\n", spec_model).invariants[0]
    base = CheckOptions()
    changed = dataclasses.replace(base, **{name: OTHER[name]})
    affects = dataclasses.fields(CheckOptions)
    role = next(f.metadata["affects"] for f in affects if f.name == name)
    k = changed.counterexamples
    same_result = result_key(inv, base.counterexamples, "c", base) == result_key(
        inv, k, "c", changed
    )
    same_outcomes = outcomes_key(b"s", base) == outcomes_key(b"s", changed)
    assert same_result == (role is Affects.NOTHING)
    assert same_outcomes == (role is not Affects.OUTCOME)


@pytest.mark.parametrize(
    "bad",
    [
        {"counterexamples": -1},
        {"counterexamples": 1.5},
        {"jobs": 0},
        {"timeout": 0},
        {"timeout": float("nan")},
        {"timeout": True},
        {"rlimit": 0},
        {"shortcuts": "yes"},
        {"linear": 1},
    ],
)
def test_bad_values_are_one_line_errors_that_name_no_cli_flag(bad):
    with pytest.raises(ClefproveError) as info:
        CheckOptions(**bad)
    assert "--" not in str(info.value) and "\n" not in str(info.value)


def test_an_infinite_timeout_means_no_limit():
    assert CheckOptions(timeout=float("inf")).timeout == float("inf")


def test_the_api_validates_like_the_cli(spec_model):
    program = parse_text("invariant t: ensure action != block\n", spec_model)
    with pytest.raises(ClefproveError, match=r"^counterexamples must be"):
        clefprove.check(spec_model, program, counterexamples=-1)
    report = clefprove.check(spec_model, program, options=CheckOptions(counterexamples=0))
    assert report.results[0].status == "violated" and report.results[0].counterexamples == ()


def test_an_infinite_timeout_runs_with_the_cache_and_the_solver(spec_model, tmp_path):
    """``timeout=inf`` (no limit) has a cache key and reaches Z3 as 'no timeout' (it was a
    ValueError from the key's JSON and an OverflowError from the milliseconds)."""
    from clefprove.incremental import ProofCache
    from clefprove.verify.engine import _limits

    inf = CheckOptions(timeout=float("inf"))
    assert inf.result_identity != CheckOptions().result_identity
    assert inf.result_identity != CheckOptions(timeout=1e300).result_identity
    assert _limits(inf, "t").timeout_ms == 0
    assert _limits(CheckOptions(timeout=1e300), "t").timeout_ms == 0  # beyond Z3's uint
    assert _limits(CheckOptions(timeout=2.5), "t").timeout_ms == 2500
    program = parse_text(
        "invariant t: ensure action != block\n"
        "invariant s:\n  when path_depth + 2 * tls_version >= 1540 and path_depth <= 70\n"
        "  ensure stable(path_depth, 1)\n",
        spec_model,
    )
    fresh = clefprove.check(spec_model, program, options=inf)
    cache = ProofCache(tmp_path / "cache")
    cached = clefprove.check(spec_model, program, options=inf, cache=cache)
    again = clefprove.check(spec_model, program, options=inf, cache=cache)
    statuses = [[r.status for r in rep.results] for rep in (fresh, cached, again)]
    assert statuses[0] == statuses[1] == statuses[2]
