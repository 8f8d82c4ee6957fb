"""An ensemble's counterexamples in SPEC section 4's shape: ``leaf`` (one per tree) and
``path`` (the box where every tree reaches that leaf), in reports that the shipped schema
accepts; and every input of that box decides with the same leaves."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.geometry.boxes import path_to
from clefprove.model.clef import load
from clefprove.model.describe import joint_region_conditions
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType
from clefprove.verify.evidence import describe_ensemble_region
from tests.ensembles.gen import ensembles
from tests.helpers import run_cli

TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"
REPORT = json.loads(
    resources.files("clefprove").joinpath("schemas", "check-report.schema.json").read_text()
)

INVARIANTS = """
severity allow < challenge < block

invariant tor_deep_not_allowed:
  when is_tor and path_depth >= 4
  ensure action != allow

invariant blocks_confident:
  ensure action == block implies confidence >= 0.5

invariant never_allow:
  ensure action != allow

invariant rtt_stable:
  ensure stable(client_rtt_ms, 50)

invariant ua_independent:
  ensure independent(ua_family)

invariant undecided:
  when client_rtt_ms > 100
  ensure action == block
"""

_NUM = r"(-?[0-9.e+-]+|-?inf)"


def _box(model: Ensemble, conditions: list[str]) -> tuple[np.ndarray, np.ndarray, dict]:
    """Bounds (lo exclusive for floats, as the wording says) and value sets of *conditions*,
    read back from the wording of ``clefprove.model.describe``."""
    names = [f.name for f in model.features]
    lo = np.array([f.min for f in model.features], dtype=float)
    hi = np.array([f.max for f in model.features], dtype=float)
    strict = np.zeros(len(names), dtype=bool)
    sets: dict[int, set[int]] = {}
    for text in conditions:
        if m := re.fullmatch(_NUM + r" < (\w+) <= " + _NUM, text):
            i = names.index(m[2])
            lo[i], strict[i], hi[i] = float(m[1]), True, min(hi[i], float(m[3]))
        elif m := re.fullmatch(_NUM + r" <= (\w+) <= " + _NUM, text):
            i = names.index(m[2])
            lo[i], hi[i] = float(m[1]), float(m[3])
        elif m := re.fullmatch(r"(\w+) (>|>=|<=|==) " + _NUM, text):
            i, op, v = names.index(m[1]), m[2], float(m[3])
            if op in (">", ">=", "=="):
                lo[i], strict[i] = v, op == ">"
            if op in ("<=", "=="):
                hi[i] = v
        elif m := re.fullmatch(r"(\w+) (in|not in) \{(.*)\}", text):
            i = names.index(m[1])
            vocab = list(model.features[i].values)
            named = {vocab.index(v) for v in m[3].split(", ")}
            sets[i] = named if m[2] == "in" else set(range(len(vocab))) - named
        elif m := re.fullmatch(r"(not )?(\w+)", text):
            i = names.index(m[2])
            lo[i] = hi[i] = 0.0 if m[1] else 1.0
        else:
            raise AssertionError(f"unexpected condition wording: {text!r}")
    return lo, hi, {"strict": strict, "sets": sets}


def _inside(model: Ensemble, x: np.ndarray, box: tuple) -> bool:
    lo, hi, extra = box
    for i in range(len(x)):
        if i in extra["sets"]:
            if int(x[i]) not in extra["sets"][i]:
                return False
        elif not (lo[i] < x[i] if extra["strict"][i] else lo[i] <= x[i]) or x[i] > hi[i]:
            return False
    return True


def _samples(model: Ensemble, box: tuple, rng: np.random.Generator, n: int) -> np.ndarray:
    lo, hi, extra = box
    rows = np.empty((n, len(model.features)))
    for i, f in enumerate(model.features):
        if i in extra["sets"]:
            rows[:, i] = rng.choice(sorted(extra["sets"][i]), size=n)
        elif f.type is FeatureType.FLOAT:
            a = np.nextafter(lo[i], np.inf) if extra["strict"][i] else lo[i]
            rows[:, i] = rng.uniform(a, hi[i], size=n)
            rows[: n // 4, i] = a  # its ends too
            rows[n // 4 : n // 2, i] = hi[i]
        else:
            a = np.floor(lo[i]) + 1 if extra["strict"][i] else np.ceil(lo[i])
            rows[:, i] = rng.integers(int(a), int(np.floor(hi[i])) + 1, size=n)
    return rows


def _record(model: Ensemble, rec: dict) -> np.ndarray:
    return np.array(
        [f.values.index(rec[f.name]) if f.values else float(rec[f.name]) for f in model.features],
        dtype=float,
    )


@pytest.fixture
def report(tmp_path) -> tuple[Ensemble, Path, dict]:
    clef = tmp_path / "toy.clef"
    assert run_cli("compile", TOY, "-o", clef).returncode == 0
    inv = tmp_path / "toy.inv"
    inv.write_text(INVARIANTS)
    out = tmp_path / "r.json"
    r = run_cli(
        "check", clef, inv, "--format", "json", "-o", out, "--no-cache",
        "--counterexamples", "3",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    model = load(clef)
    assert isinstance(model, Ensemble)
    return model, clef, json.loads(out.read_text())


def test_report_validates_against_the_shipped_schema(report) -> None:
    _, _, doc = report
    jsonschema.Draft202012Validator(REPORT).validate(doc)
    assert any(r["counterexamples"] for r in doc["results"])


def test_a_counterexample_names_each_trees_leaf_and_its_box(report) -> None:
    model, _, doc = report
    ev = EnsembleEvaluator(model)
    rng = np.random.default_rng(0)
    seen = 0
    for res in doc["results"]:
        for c in res["counterexamples"]:
            pairs = (
                [(c["input"], c["leaf"], c["path"])]
                if "input" in c
                else [(c["inputs"][k], c["decisions"][k]["leaf"], c["paths"][k]) for k in range(2)]
            )
            for rec, leaf, path in pairs:
                seen += 1
                x = _record(model, rec)
                got = ev.evaluate_one(x)
                assert list(got.leaves) == leaf
                box = _box(model, path)
                assert _inside(model, x, box)
                rows = _samples(model, box, rng, 64)
                for row in rows:
                    assert _inside(model, row, box)
                    assert list(ev.evaluate_one(row).leaves) == leaf, (path, row)
    assert seen >= 5


def test_eval_answers_leaf_as_spec_names_it(report) -> None:
    _, clef, doc = report
    for res in doc["results"]:
        for c in res["counterexamples"]:
            if "input" not in c:
                continue
            got = json.loads(run_cli("eval", clef, stdin=json.dumps(c["input"]) + "\n").stdout)
            assert got["leaf"] == got["leaves"] == c["leaf"]
            assert (got["action"], got["confidence"]) == (c["action"], c["confidence"])
            return
    raise AssertionError("no single-input counterexample")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_region_is_the_trees_routes_taken_together(data) -> None:
    """The all-trees descent of ``describe_ensemble_region`` words the same box as each
    tree's own path (``path_to``), on random ensembles with every feature kind; each input
    drawn from the box reaches the same leaves."""
    model = data.draw(ensembles(all_int=False))
    ev = EnsembleEvaluator(model)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(4):
        x = np.array(
            [
                rng.integers(0, len(f.values)) if f.values else rng.uniform(f.min, f.max)
                for f in model.features
            ],
            dtype=float,
        )
        x = np.array(
            [np.floor(v) if f.is_integral else v for v, f in zip(x, model.features, strict=True)]
        )
        leaves = ev.evaluate_one(x).leaves
        region = describe_ensemble_region(model, leaves)
        routes = []
        for t, leaf in enumerate(leaves):
            tree = model.tree(t)
            routes.append((tree, [*(n for n, _ in path_to(tree, leaf)), leaf]))
        assert list(region) == joint_region_conditions(routes)
        box = _box(model, list(region))
        assert _inside(model, x, box)
        for row in _samples(model, box, rng, 16):
            assert ev.evaluate_one(row).leaves == leaves
