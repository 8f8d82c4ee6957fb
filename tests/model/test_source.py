"""JSON model source validation: every defect is one line naming the JSON path."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from clefprove.errors import ModelSourceError
from clefprove.model.source import compile_source, load_source
from clefprove.model.types import NodeKind


def _err(obj) -> str:
    with pytest.raises(ModelSourceError) as info:
        compile_source(obj)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_spec_model_compiles(spec_model):
    assert spec_model.name == "edge-allow-block"
    assert spec_model.n_nodes == 5 and spec_model.n_leaves == 3 and spec_model.max_depth == 2
    root = spec_model.node(0)
    assert root.kind is NodeKind.NUMERIC and root.threshold == 300.0
    cat = spec_model.node(root.right)
    assert cat.kind is NodeKind.CATEGORICAL and cat.categories == frozenset({3, 4})
    assert not spec_model.nodes.flags.writeable


def test_children_come_after_parents(spec_model):
    nodes = spec_model.nodes
    split = nodes["kind"] != NodeKind.LEAF
    idx = np.arange(len(nodes))
    assert np.all(nodes["left"][split] > idx[split])
    assert np.all(nodes["right"][split] > idx[split])


def test_compilation_is_deterministic(spec_source):
    a, b = compile_source(spec_source), compile_source(copy.deepcopy(spec_source))
    assert a.sha256 == b.sha256


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s["tree"]["right"]["left"].update(action="alow"),
            "tree.right.left: unknown action 'alow'",
        ),
        (
            lambda s: s["features"].append(dict(s["features"][0])),
            "features[6].name: duplicate feature name 'client_rtt_ms'",
        ),
        (
            lambda s: s["features"][1].update(min=900),
            "features[1]: min 900 is greater than max 772",
        ),
        (lambda s: s["features"][1].update(default=700), "features[1].default: 700 is outside"),
        (lambda s: s["features"][1].update(default=770.5), "features[1].default: an int feature"),
        (
            lambda s: s["tree"].update(feature="client_rt_ms"),
            "tree.feature: unknown feature 'client_rt_ms'",
        ),
        (
            lambda s: s["tree"]["right"].update({"in": ["curl", "wget"]}),
            "tree.right.in[1]: 'wget' is not a value of feature 'ua_family'",
        ),
        (lambda s: s["tree"]["right"].update({"in": []}), "tree.right.in: must be a non-empty"),
        (
            lambda s: s["tree"]["left"].update(confidence=1.5),
            "tree.left.confidence: 1.5 is outside",
        ),
        (
            lambda s: s["tree"].update(threshold=float("nan")),
            "tree.threshold: threshold must be finite",
        ),
        (
            lambda s: s["tree"].update(threshold=float("inf")),
            "tree.threshold: threshold must be finite",
        ),
        (lambda s: s["tree"].update(threshold="300"), "tree.threshold: threshold must be a number"),
        (lambda s: s["features"][5].update(default=0), "features[5].default: a bool default"),
        (lambda s: s["features"][4].update(default="Edge"), "features[4].default: 'Edge' is not"),
        (lambda s: s.update(actions=["allow", "allow"]), "actions[1]: duplicate action 'allow'"),
        (lambda s: s["tree"].pop("left"), "tree: missing 'left'"),
        (lambda s: s["tree"].update(colour="red"), "tree: unknown key 'colour'"),
        (
            lambda s: s["tree"]["right"].update(feature="client_rtt_ms"),
            "tree.right: 'in' splits need a categorical feature",
        ),
    ],
)
def test_validation_errors_name_the_json_path(spec_source, mutate, expected):
    mutate(spec_source)
    assert expected in _err(spec_source)


def test_depth_limit(spec_source):
    node: dict = {"action": "allow", "confidence": 1.0}
    for _ in range(200):
        node = {
            "feature": "path_depth",
            "threshold": 3,
            "left": node,
            "right": {"action": "block", "confidence": 1.0},
        }
    spec_source["tree"] = node
    message = _err(spec_source)
    assert "deeper than the limit of 128" in message
    # The JSON path of the offending node is written with its run collapsed, one short line.
    assert "tree(.left x129)" in message and len(message) < 120


def test_depth_64_is_accepted(spec_source):
    node: dict = {"action": "allow", "confidence": 1.0}
    for i in range(64):
        node = {
            "feature": "client_rtt_ms",
            "threshold": float(i),
            "left": node,
            "right": {"action": "block", "confidence": 1.0},
        }
    spec_source["tree"] = node
    assert compile_source(spec_source).max_depth == 64


def test_bool_split_without_threshold(spec_source):
    spec_source["tree"]["left"] = {
        "feature": "is_tor",
        "left": {"action": "allow", "confidence": 1},
        "right": {"action": "block", "confidence": 1},
    }
    model = compile_source(spec_source)
    assert model.node(1).threshold == 0.5


def test_threshold_outside_domain_is_legal(spec_source):
    spec_source["tree"]["threshold"] = 1e9
    assert compile_source(spec_source).node(0).threshold == 1e9


def test_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n  "features": [,]}')
    with pytest.raises(ModelSourceError, match=r"bad.json:2:16: invalid JSON"):
        load_source(bad)
    with pytest.raises(ModelSourceError, match="cannot read"):
        load_source(tmp_path / "missing.json")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ModelSourceError):
        load_source(deep)


def test_load_source_prefixes_the_file(tmp_path, spec_source):
    spec_source["tree"]["left"]["action"] = "alow"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(spec_source))
    with pytest.raises(ModelSourceError, match=r"m.json: tree.left: unknown action 'alow'"):
        load_source(path)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("action", "'action' is reserved"),
        ("confidence", "'confidence' is reserved"),
        ("block", "'block' is also an action name"),
    ],
)
def test_reserved_feature_names_refused_at_compile(tmp_path, name, needle) -> None:
    """Issue 16: invariants always read `action`/`confidence` as the decision (and an action
    name as the action), so such a feature is refused: exit 2, one line, no output."""
    import json as _json
    import subprocess
    import sys

    src = {
        "features": [{"name": name, "type": "int", "min": 0, "max": 99, "default": 0}],
        "actions": ["allow", "block"],
        "tree": {
            "feature": name,
            "threshold": 50,
            "left": {"action": "allow", "confidence": 1},
            "right": {"action": "block", "confidence": 1},
        },
    }
    (tmp_path / "m.json").write_text(_json.dumps(src))
    proc = subprocess.run(
        [sys.executable, "-m", "clefprove", "compile", "m.json", "-o", "m.clef"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "m.clef").exists()
    # keywords stay legal: backticks refer to them unambiguously (docs/dsl.md)
    src["features"][0]["name"] = "when"
    src["tree"]["feature"] = "when"
    from clefprove.model.source import compile_source

    assert compile_source(src).features[0].name == "when"


def test_a_non_object_source_names_its_file_once(tmp_path) -> None:
    """One readable line (SPEC §4): the file's name is not repeated."""
    path = tmp_path / "m.json"
    path.write_text("[1, 2]")
    with pytest.raises(ModelSourceError) as info:
        load_source(path)
    assert str(info.value) == f"{path}: a model source must be a JSON object"


def test_a_huge_integer_threshold_is_refused_in_a_short_line(spec_source) -> None:
    """One readable line (SPEC §4): the 401-digit integer is not echoed whole."""
    spec_source["tree"]["threshold"] = 10**400
    with pytest.raises(ModelSourceError) as info:
        compile_source(spec_source)
    message = str(info.value)
    assert "too large for float64" in message and "401 digits" in message
    assert len(message) < 120, message
