"""The .clef v2 (ensemble) format and JSON ensemble sources: round trips and crafted files."""

from __future__ import annotations

import copy
import hashlib
import json
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.errors import ClefFormatError, ClefproveError, ModelSourceError
from clefprove.model.clef import HEADER, TREE_RECORD, load, load_bytes, write_clef
from clefprove.model.ensemble import Arithmetic, Ensemble, Link, Rule
from clefprove.model.loading import load_any, load_model
from clefprove.model.source import compile_source
from clefprove.model.types import NODE_DTYPE

TOY = Path(__file__).parent.parent / "fixtures" / "ensemble_toy.json"


@pytest.fixture
def toy_source() -> dict:
    return json.loads(TOY.read_text())


@pytest.fixture
def toy(toy_source) -> Ensemble:
    return compile_source(toy_source)


def _resign(body: bytes) -> bytes:
    body = body[:-32]
    return body + hashlib.sha256(body).digest()


def _reason(data: bytes) -> str:
    with pytest.raises(ClefFormatError) as info:
        load_bytes(data, origin="m.clef")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("m.clef: ")
    return msg


def _patch_node(data: bytes, index: int, **fields) -> bytes:
    nodes_offset = HEADER.unpack_from(data, 0)[10]
    buf = bytearray(data)
    at = nodes_offset + 24 * index
    rec = np.frombuffer(buf, dtype=NODE_DTYPE, count=1, offset=at).copy()
    for key, value in fields.items():
        rec[key] = value
    buf[at : at + 24] = rec.tobytes()
    return _resign(bytes(buf))


def _sections(data: bytes) -> tuple[int, int, int]:
    h = HEADER.unpack_from(data, 0)
    table = h[10] + 24 * h[5]
    return table, table + TREE_RECORD.size * h[4], h[11]


def _patch_value(data: bytes, row: int, col: int, value: float, outputs: int = 3) -> bytes:
    _, values, _ = _sections(data)
    buf = bytearray(data)
    struct.pack_into("<d", buf, values + 8 * (row * outputs + col), value)
    return _resign(bytes(buf))


def _patch_table(data: bytes, tree: int, field: int, value: int) -> bytes:
    table, _, _ = _sections(data)
    buf = bytearray(data)
    rec = list(TREE_RECORD.unpack_from(buf, table + 16 * tree))
    rec[field] = value
    TREE_RECORD.pack_into(buf, table + 16 * tree, *rec)
    return _resign(bytes(buf))


def test_source_compiles_into_an_ensemble(toy):
    assert isinstance(toy, Ensemble)
    assert (toy.n_trees, toy.n_nodes, toy.n_leaves) == (3, 13, 8)
    assert toy.combine.arithmetic is Arithmetic.FLOAT32
    assert toy.combine.link is Link.SOFTMAX and toy.combine.rule is Rule.PROBA
    assert toy.values.shape == (8, 3) and toy.combine.base == (0.5, 0.0, 0.0)
    assert list(toy.roots) == [0, 5, 10] and list(toy.depths) == [2, 2, 1]
    # every tree is a valid single-tree node array of its own
    assert toy.tree(1).n_nodes == 5 and toy.tree(2).max_depth == 1


def test_round_trip_is_byte_identical(toy, tmp_path):
    data = write_clef(toy)
    path = tmp_path / "m.clef"
    path.write_bytes(data)
    again = load(path)
    assert isinstance(again, Ensemble)
    assert write_clef(again) == data
    assert again.sha256 == hashlib.sha256(data).hexdigest() == toy.sha256  # sha256sum
    assert HEADER.unpack_from(data, 0)[1] == 2  # format version 2
    assert load_any(path).sha256 == toy.sha256


def test_single_tree_commands_refuse_ensembles_in_one_line(toy, tmp_path):
    path = tmp_path / "m.clef"
    path.write_bytes(write_clef(toy))
    with pytest.raises(ClefproveError) as info:
        load_model(path, what="clefprove diff")
    assert "a tree ensemble (3 trees); clefprove diff supports single trees only" in str(info.value)


@pytest.mark.parametrize(
    ("craft", "expected"),
    [
        (lambda d: _patch_node(d, 0, left=0), "tree 0: node 0: child index does not come after"),
        (lambda d: _patch_node(d, 5, right=99), "tree 1: node 0: child index out of range"),
        (lambda d: _patch_node(d, 1, aux=5), "tree 0: node 1: leaf value row out of order"),
        (lambda d: _patch_node(d, 1, value=0.5), "an ensemble leaf's value field must be 0"),
        (lambda d: _patch_node(d, 0, value=float("nan")), "threshold is NaN"),
        (lambda d: _patch_node(d, 11, depth=3), "tree 2: node 1: depth exceeds"),
        (lambda d: _patch_node(d, 6, depth=2), "tree 1: node 1: depth does not match"),
        (lambda d: _patch_node(d, 5, right=3), "tree 1: node 3: node has more than one parent"),
        (lambda d: _patch_value(d, 2, 1, float("nan")), "leaf value row 2 is NaN or infinite"),
        (lambda d: _patch_value(d, 2, 1, float("inf")), "leaf value row 2 is NaN or infinite"),
        (lambda d: _patch_value(d, 4, 0, 0.1), "leaf value row 4 is not a float32 value"),
        (lambda d: _patch_value(d, 4, 0, 2.0**110), "could overflow"),
        (lambda d: _patch_table(d, 1, 0, 4), "trees must follow each other"),
        (lambda d: _patch_table(d, 2, 3, 1), "counts 7 leaves but the value table has 8"),
        (lambda d: _patch_table(d, 0, 2, 9), "depths do not match"),
        (lambda d: _resign(HEADER.pack(*_h(d, 4, 0)) + d[64:]), "holds 1 to 100000 trees"),
        (lambda d: _resign(HEADER.pack(*_h(d, 4, 7)) + d[64:]), "section table does not match"),
        (lambda d: _resign(HEADER.pack(*_h(d, 1, 3)) + d[64:]), "version 3 is newer"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "SHA-256 digest mismatch"),
        (lambda d: _resign(d[:200] + d[208:]), "section table does not match"),
    ],
)
def test_crafted_files_get_one_line_reasons(toy, craft, expected):
    assert expected in _reason(craft(write_clef(toy)))


def _h(data: bytes, field: int, value: int) -> list:
    values = list(HEADER.unpack_from(data, 0))
    values[field] = value
    return values


def test_every_truncation_is_one_line(toy):
    data = write_clef(toy)
    for cut in range(0, len(data), 7):
        with pytest.raises(ClefFormatError):
            load_bytes(data[:cut], origin="m.clef")


def test_crafted_combine_metadata(toy):
    data = write_clef(toy)
    h = HEADER.unpack_from(data, 0)
    meta = data[64 : 64 + h[9]]
    for old, new, expected in [
        (b'"link":"softmax"', b'"link":"softmix"', "unknown arithmetic, link or rule"),
        (b'"rule":"proba"', b'"rule":"halfx"', "unknown arithmetic, link or rule"),
        (b'"outputs":3', b'"outputs":2', "one number per output"),
        (b'"divisor":1.0', b'"divisor":0.0', "must be positive"),
    ]:
        broken = meta.replace(old, new)
        assert broken != meta
        pad = broken + b" " * (len(meta) - len(broken)) if len(broken) <= len(meta) else None
        if pad is None:
            continue
        assert expected in _reason(_resign(data[:64] + pad + data[64 + len(meta) :]))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: s["trees"][0]["left"].update(value=[1, 2]), "trees[0].left.value: needs 3"),
        (lambda s: s["trees"][1]["right"]["left"].update(value=[0, "x", 0]), "must be a number"),
        (lambda s: s["trees"][2]["left"].update(value=[0, float("nan"), 0]), "must be finite"),
        (lambda s: s.update(trees=[]), "trees: must be a non-empty list"),
        (
            lambda s: s["ensemble"].update(link="logistic"),
            "base must list one number per output (1)",
        ),
        (lambda s: s["ensemble"].update(link="logistic", base=[0]), "logistic link has one output"),
        (lambda s: s["ensemble"].update(rule="half"), "rule 'half' needs a logistic link"),
        (lambda s: s["ensemble"].update(base=[0.1, 0, 0]), "float32 arithmetic needs float32"),
        (lambda s: s["ensemble"].update(link="identity"), "identity link needs leaf values"),
        (
            lambda s: s["trees"][1]["right"]["left"].update(value=[0, 0.1, 0]),
            "trees[1].right.left.value[1]: 0.1 is not a float32 value",
        ),
        (
            lambda s: s.update(
                ensemble={"link": "identity", "divisor": 3},
                trees=[
                    {"value": [0.25, 0.5, 0.25]},
                    {"value": [0.5, 0.5, 0]},
                    {"value": [2, 0, 0]},
                ],
            ),
            "trees[2].value[0]: 2.0 is outside [0, 1]: an identity link needs leaf values",
        ),
        (lambda s: s["ensemble"].update(bogus=1), "unknown key 'bogus'"),
        # a scale on a link that has none would be silently ignored
        (lambda s: s["ensemble"].update(scale=2), "ensemble.scale: the softmax link has no"),
        (lambda s: s["trees"][0].update(feature="nope"), "trees[0].feature: unknown feature"),
        (lambda s: s["trees"][0]["left"].update(action="allow"), "unknown key 'action'"),
    ],
)
def test_bad_sources_name_the_json_path(toy_source, edit, expected):
    src = copy.deepcopy(toy_source)
    edit(src)
    with pytest.raises(ModelSourceError) as info:
        compile_source(src)
    assert expected in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_and_resigned_files_load_or_fail_in_one_line(data):
    """Any byte changed (and the digest recomputed) either loads or is a ClefFormatError."""
    from clefprove.eval.ensemble import EnsembleEvaluator

    raw = bytearray(write_clef(compile_source(json.loads(TOY.read_text()))))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 33))
        raw[at] = data.draw(st.integers(0, 255))
    try:
        model = load_bytes(_resign(bytes(raw)), origin="m.clef")
    except ClefFormatError as exc:
        assert "\n" not in str(exc)
        return
    if isinstance(model, Ensemble):  # what loads also evaluates
        EnsembleEvaluator(model).evaluate(np.zeros((2, len(model.features))))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # Python integers beyond float64 (JSON allows them) are not finite numbers.
        (lambda e: e.update(base=[10**400, 0, 0]), "must be finite"),
        (lambda e: e.update(divisor=10**400), "must be finite"),
        (lambda e: e.update(scale=-(10**400)), "must be finite"),
        # Beyond float32: the error, not an overflow warning on stderr.
        (lambda e: e.update(base=[1e300, 0, 0]), "float32 arithmetic needs float32 values"),
        # A divisor or scale that the arithmetic rounds to 0 or to infinity: 0 / 0 and
        # 0 * inf are NaN, which no verdict may be built on.
        (lambda e: e.update(divisor=1e-320), "divisor and scale must be"),
        (lambda e: e.update(divisor=1e-46), "divisor and scale must be"),
        (lambda e: e.update(link="logistic", base=[0], scale=1e300), "divisor and scale must be"),
        # Sums divided by a small divisor must stay as bounded as the sums themselves.
        (lambda e: e.update(arithmetic="float64", divisor=1e-300), "too large"),
    ],
)
def test_combine_values_that_break_the_arithmetic(toy_source, edit, expected):
    src = copy.deepcopy(toy_source)
    edit(src["ensemble"])
    if src["ensemble"]["link"] == "logistic":
        src["actions"] = ["allow", "block"]
        for tree in src["trees"]:
            _one_output(tree)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ModelSourceError) as info:
            compile_source(src)
    assert expected in str(info.value) and "\n" not in str(info.value)


def _one_output(node: dict) -> None:
    if "value" in node:
        node["value"] = node["value"][0]
        return
    _one_output(node["left"])
    _one_output(node["right"])
