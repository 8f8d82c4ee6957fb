"""``diff`` on ensembles: structure by tree content, behaviour against enumeration."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.incremental.compare import diff_models
from clefprove.incremental.ensemble_diff import diff_ensembles
from clefprove.model.source import compile_source
from clefprove.report.diff_text import render_text
from clefprove.verify.evidence import encode
from tests.ensembles.gen import ensembles
from tests.verify.gen import enumerate_inputs

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"


def _toy_source() -> dict:
    return json.loads(TOY.read_text())


def _with_values(model, values):
    v = np.array(values, dtype=np.float64)
    v.setflags(write=False)
    return dataclasses.replace(model, values=v, sha256="0" * 64, metadata={})


def _check_examples(old, new, rep):
    eo, en = EnsembleEvaluator(old), EnsembleEvaluator(new)
    for r in rep.regions:
        x = encode(new, r.example)
        do, dn = eo.evaluate_one(x), en.evaluate_one(x)
        assert old.actions[do.action] == r.old_action
        assert new.actions[dn.action] == r.new_action
        assert r.old_action != r.new_action
        assert tuple(do.leaves) == r.old_leaves and tuple(dn.leaves) == r.new_leaves


@SETTINGS
@given(st.data())
def test_share_changed_is_the_share_of_enumerated_inputs_that_change(data):
    old = data.draw(ensembles(all_int=True))
    changed = old.values.copy()
    for _ in range(data.draw(st.integers(0, 3))):
        r = data.draw(st.integers(0, changed.shape[0] - 1))
        k = data.draw(st.integers(0, changed.shape[1] - 1))
        changed[r, k] = data.draw(st.sampled_from([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0]))
    new = _with_values(old, changed)
    X = enumerate_inputs(new)
    a_old = np.array(old.actions)[EnsembleEvaluator(old).evaluate(X).actions]
    a_new = np.array(new.actions)[EnsembleEvaluator(new).evaluate(X).actions]
    differs = a_old != a_new
    rep = diff_ensembles(old, new, budget=60)
    assert not rep.partial and rep.share_explored == 1.0
    # integer domains: a box's share is its count of inputs over the domain's
    assert abs(rep.share_changed - differs.mean()) < 1e-9, (rep.share_changed, differs.mean())
    assert (rep.regions_total == 0) == (not differs.any())
    transitions: dict[str, float] = {}
    for o, n in zip(a_old[differs], a_new[differs], strict=True):
        transitions[f"{o} -> {n}"] = transitions.get(f"{o} -> {n}", 0.0) + 1 / X.shape[0]
    assert transitions.keys() == rep.transitions.keys()
    for k, v in transitions.items():
        assert abs(rep.transitions[k] - v) < 1e-9
    _check_examples(old, new, rep)
    assert len(rep.regions) == rep.regions_total


def test_toy_structure_and_regions():
    src = _toy_source()
    old = compile_source(src)
    src["trees"][2]["right"]["value"] = [0, 0.0625, 1.5]
    src["trees"].append({"value": [0, 0, 0]})
    new = compile_source(src)
    rep = diff_models(old, new, "a", "b")
    doc = rep.to_json_dict()
    ens = doc["structural"]["ensemble"]
    assert ens["unchanged"] == 2 and ens["changed"] == [2] and ens["added"] == [3]
    assert [c["kind"] for c in doc["structural"]["changes"]] == ["changed", "added"]
    sem = doc["semantic"]
    assert sem["comparable"] and sem["partial"] is False and sem["share_explored"] == 1.0
    assert sem["share_confidence_only"] is None
    assert sem["regions_total"] == len(sem["regions"]) >= 1
    assert set(sem["transitions"]) <= {f"{a} -> block" for a in ("allow", "challenge")}
    _check_examples(old, new, rep)
    text = render_text(rep)
    assert "changed  at tree 2" in text and "added    at tree 3" in text
    assert "behaviour: actions differ on" in text


def test_combination_change_is_structural_and_behavioural():
    src = _toy_source()
    old = compile_source(src)
    src["ensemble"]["base"] = [0.5, 0, 2.0]
    new = compile_source(src)
    rep = diff_models(old, new)
    assert rep.ensemble is not None and rep.ensemble["unchanged"] == 3
    assert rep.ensemble["combination"] == {"base": {"old": [0.5, 0, 0], "new": [0.5, 0, 2.0]}}
    assert rep.regions_total >= 1 and rep.share_changed > 0
    _check_examples(old, new, rep)


def test_a_budget_cut_search_is_partial_with_the_share_explored():
    src = _toy_source()
    old = compile_source(src)
    src["trees"][1]["right"]["right"]["value"] = [1.0, 0, 0]
    new = compile_source(src)
    rep = diff_ensembles(old, new, budget=0.0)
    assert rep.partial and rep.share_explored is not None and rep.share_explored < 1.0
    assert not rep.identical_behaviour
    assert "stopped at its time budget" in " ".join(rep.warnings)
    assert "partial" in render_text(rep)


def test_identical_ensembles():
    old = compile_source(_toy_source())
    rep = diff_models(old, compile_source(_toy_source()))
    assert rep.identical_behaviour and rep.changes == () and rep.share_explored == 1.0
    assert "identical trees" in render_text(rep)


@SETTINGS
@given(st.data())
def test_explain_is_the_evaluators_decision_tree_by_tree(data):
    model = data.draw(ensembles(all_int=data.draw(st.booleans())))
    X = enumerate_inputs(model)[:50] if all(f.is_integral for f in model.features) else None
    if X is None:
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        lo = np.array([f.min for f in model.features])
        hi = np.array([f.max for f in model.features])
        X = lo + (hi - lo) * rng.random((20, lo.size))
        for i, f in enumerate(model.features):
            if f.is_integral:
                X[:, i] = np.round(X[:, i])
    ev = EnsembleEvaluator(model)
    batch = ev.evaluate(X)
    rows = model.leaf_rows()
    for i in range(X.shape[0]):
        ex = ev.explain(X[i])
        assert ex.action == int(batch.actions[i]) and ex.confidence == float(batch.confidences[i])
        assert ex.leaves == tuple(int(v) for v in batch.leaves[i])
        for t, leaf in enumerate(ex.leaves):
            row = int(np.searchsorted(rows, int(model.roots[t]) + leaf))
            assert ex.values[t] == tuple(float(v) for v in model.values[row])
        assert ex.scores == tuple(float(v) for v in batch.scores[i])
        assert abs(sum(ex.probabilities) - 1.0) < 1e-5 or str(model.combine.link) == "identity"


def test_the_services_reload_diff_of_two_ensembles(tmp_path):
    from clefprove.app.admission import diff_files
    from clefprove.model.clef import write_clef

    src = _toy_source()
    a = tmp_path / "a.clef"
    a.write_bytes(write_clef(compile_source(src)))
    src["trees"][2]["right"]["value"] = [0, 0.0625, 1.5]
    b = tmp_path / "b.clef"
    b.write_bytes(write_clef(compile_source(src)))
    d = diff_files(str(a), str(b))
    assert "error" not in d, d
    assert d["semantic"]["partial"] is False and d["semantic"]["share_changed"] > 0
    assert "regions" not in d["semantic"]  # a summary: regions are in clefprove diff
    tree = Path(__file__).parent.parent / "fixtures" / "spec_model.json"
    from clefprove.cli.main import main

    clef = tmp_path / "tree.clef"
    assert main(["compile", str(tree), "-o", str(clef)]) == 0
    mixed = diff_files(str(clef), str(b))  # as the gate reports it: not compared
    assert "error" not in mixed and mixed["semantic"]["comparable"] is False, mixed
    assert "diff compares two trees or two ensembles" in mixed["semantic"]["reason"]
