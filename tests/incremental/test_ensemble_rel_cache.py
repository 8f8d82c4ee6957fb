"""Relational results of ensembles in the proof cache: whole results by the ensemble's content
digest, the invariant's digest, the severity order and the options that show in a result.

Oracles: a fresh run's report (equal JSON, counterexample pairs included), the evaluator (a
reused pair is confirmed like a fresh one), and a spy on the relational search (a stored
result is not decided again; another model, severity order or K is)."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import checked as ck
from clefprove.incremental import ProofCache
from clefprove.incremental import ensemble as ie
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from tests.ensembles.gen import ensembles
from tests.ensembles.test_relational import confirm_pairs, rel_invariants
from tests.incremental import models as M
from tests.incremental.test_ensemble_cache import _comparable, _toy, _with_values

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPTS = CheckOptions(timeout=30)


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_cached_relational_results_equal_fresh_ones(data):
    model = data.draw(ensembles(all_int=True))
    inv, severity = data.draw(rel_invariants(model))
    program = ck.CheckedProgram((inv,), severity)
    fresh = check(model, program, options=OPTS)
    with tempfile.TemporaryDirectory() as d, ProofCache(d) as cache:
        cold = check(model, program, options=OPTS, cache=cache)
        warm = check(model, program, options=OPTS, cache=cache)
    assert _comparable(cold) == _comparable(fresh) == _comparable(warm)
    assert (
        warm.to_json_dict()["results"][0]["counterexamples"]
        == (fresh.to_json_dict()["results"][0]["counterexamples"])
    )
    r, w = fresh.results[0], warm.results[0]
    assert w.relation == r.relation is not None
    if r.unknown_paths == 0:  # stored: nothing decided again
        assert w.paths_checked == 0
    confirm_pairs(model, inv, severity, w)


RELATIONAL = """severity {order}

invariant rtt_mono:
  ensure monotone(client_rtt_ms)

invariant ua:
  ensure independent(ua_family)

invariant tor:
  when client_rtt_ms > 100
  ensure independent(is_tor)
"""


def _program(model, order="allow < challenge < block"):
    from clefprove.dsl.loader import parse_text

    return parse_text(RELATIONAL.format(order=order), model)


def test_a_stored_relational_result_is_one_lookup(tmp_path, monkeypatch):
    model = _toy()
    program = _program(model)
    spy = M.CallCounter(monkeypatch, ie, "check_ensemble_relational")
    with ProofCache(tmp_path) as cache:
        cold = check(model, program, options=OPTS, cache=cache)
        assert spy.calls == 3
        assert [r.status for r in cold.results] == ["holds", "violated", "violated"]
        warm = check(model, program, options=OPTS, cache=cache)
        assert spy.calls == 3  # the stored results, pairs included
        assert _comparable(warm) == _comparable(cold) == _comparable(check(model, program))
        assert warm.results[1].counterexamples == cold.results[1].counterexamples
        # other K: other results (the pairs shown depend on it)
        check(model, program, options=CheckOptions(timeout=30, counterexamples=1), cache=cache)
        assert spy.calls == 6
        # another severity order: another question for monotone, decided again
        other = _program(model, "block < challenge < allow")
        again = check(model, other, options=OPTS, cache=cache)
        assert spy.calls == 9
        assert _comparable(again) == _comparable(check(model, other, options=OPTS))
        # another model: decided again, equal to a fresh run on it
        new = _with_values(model, np.asarray(model.values)[::-1].copy())
        got = check(new, program, options=OPTS, cache=cache)
        assert spy.calls == 12
        assert _comparable(got) == _comparable(check(new, program, options=OPTS))
