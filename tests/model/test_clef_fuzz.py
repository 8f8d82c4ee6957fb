"""Mutation fuzzing of the .clef loader, with the digest re-signed after every mutation.

A valid digest means only the structural validation stands between a crafted file and the
evaluator, the verifier and the CLI.  Mutations are atheris-style (overwrite with interesting
values, flip, insert, delete, splice) over the whole file, plus structure-aware edits of the
metadata JSON with the header's section table repacked to match.  Every mutant must either be
refused with a one-line :class:`ClefFormatError`/:class:`ClefproveError` or load into a model
that is well formed and that the evaluator runs on.

``CLEF_FUZZ_EXAMPLES=20000 pytest tests/model/test_clef_fuzz.py`` runs a longer campaign.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.errors import ClefproveError
from clefprove.model.clef import HEADER, load, load_bytes
from clefprove.model.types import NODE_DTYPE, FeatureType, NodeKind

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [ROOT / "examples" / "spec-toy.clef", ROOT / "examples" / "edge-allow-block.clef"]
BLOBS = [p.read_bytes() for p in EXAMPLES]
N = int(os.environ.get("CLEF_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=N,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\x7f",
    b"\x00\x00\x00\x80",
    struct.pack("<d", float("nan")),
    struct.pack("<d", float("inf")),
    struct.pack("<d", -0.0),
    struct.pack("<d", 5e-324),
    struct.pack("<Q", 2**63),
]


def resign(body: bytes) -> bytes:
    """*body* (without digest) followed by its SHA-256."""
    return body + hashlib.sha256(body).digest()


def sections(blob: bytes) -> tuple[list, bytes, bytes, bytes]:
    head = list(HEADER.unpack_from(blob, 0))
    meta = blob[head[8] : head[8] + head[9]]
    nodes = blob[head[10] : head[11]]
    member = blob[head[11] : head[11] + head[7]]
    return head, meta, nodes, member


def repack(head: list, meta: bytes, nodes: bytes, member: bytes) -> bytes:
    """A file with the given sections and a section table (and digest) that matches them."""
    head = list(head)
    nodes_offset = (64 + len(meta) + 7) // 8 * 8
    head[7], head[8], head[9] = len(member), 64, len(meta)
    head[10], head[11] = nodes_offset, nodes_offset + len(nodes)
    body = HEADER.pack(*head) + meta + b"\x00" * (nodes_offset - 64 - len(meta)) + nodes + member
    return resign(body)


@st.composite
def byte_mutants(draw: st.DrawFn) -> bytes:
    blob = bytearray(draw(st.sampled_from(BLOBS))[:-32])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "interesting", "insert", "delete", "splice"]))
        pos = draw(st.integers(0, max(len(blob) - 1, 0)))
        if op == "flip":
            blob[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            blob[pos] = draw(st.integers(0, 255))
        elif op == "interesting":
            value = draw(st.sampled_from(INTERESTING))
            blob[pos : pos + len(value)] = value
        elif op == "insert":
            blob[pos:pos] = draw(st.binary(min_size=1, max_size=32))
        elif op == "delete":
            del blob[pos : pos + draw(st.integers(1, 32))]
        else:  # copy a chunk of the file over another place (keeps plausible structure)
            src = draw(st.integers(0, max(len(blob) - 1, 0)))
            chunk = bytes(blob[src : src + draw(st.integers(1, 48))])
            blob[pos : pos + len(chunk)] = chunk
    return resign(bytes(blob))


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def meta_mutants(draw: st.DrawFn) -> bytes:
    """Edit one value of the metadata JSON (a feature's bound, a vocabulary, an action...)."""
    head, meta, nodes, member = sections(draw(st.sampled_from(BLOBS)))
    obj = json.loads(meta)
    paths: list[tuple] = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(obj, ())
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths[1:]))
        parent = obj
        try:
            for key in path[:-1]:
                parent = parent[key]
            key = path[-1]
            if isinstance(parent, dict) != isinstance(key, str):
                continue  # an earlier edit replaced this container
            action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
            if action == "replace":
                parent[path[-1]] = draw(JSON_VALUES)
            elif action == "delete":
                del parent[path[-1]]
            elif isinstance(parent, list):
                parent.append(parent[path[-1]])
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    return repack(head, text, nodes, member)


@st.composite
def node_mutants(draw: st.DrawFn) -> bytes:
    """Set fields of random node records to edge values (the section table stays valid)."""
    head, meta, nodes, member = sections(draw(st.sampled_from(BLOBS)))
    arr = np.frombuffer(nodes, dtype=NODE_DTYPE).copy()
    n = len(arr)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, n - 1))
        field = draw(st.sampled_from(["value", "left", "right", "aux", "feature", "kind", "depth"]))
        if field == "value":
            arr[i]["value"] = draw(st.floats(allow_nan=True, allow_infinity=True))
        elif field in ("left", "right", "aux"):
            arr[i][field] = draw(
                st.sampled_from([0, i, i + 1, n - 1, n, 2**31, 2**32 - 1]) | st.integers(0, n + 8)
            )
        elif field == "feature":
            arr[i]["feature"] = draw(st.integers(0, 2**16 - 1))
        elif field == "kind":
            arr[i]["kind"] = draw(st.integers(0, 255))
        else:
            arr[i]["depth"] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        head[6] = draw(st.integers(0, 300))  # declared maximum depth
    return repack(head, meta, arr.tobytes(), member)


def check_mutant(data: bytes) -> None:
    try:
        model = load_bytes(data, origin="m.clef")
    except ClefproveError as exc:
        assert "\n" not in str(exc)
        return
    assert_well_formed(model)


def assert_well_formed(model) -> None:
    """What validation promises the evaluator and the verifier."""
    from clefprove.eval.evaluator import Evaluator

    nodes = model.nodes
    n = len(nodes)
    kind = nodes["kind"]
    leaf = kind == NodeKind.LEAF
    idx = np.arange(n)
    assert np.all(nodes["left"][leaf] == idx[leaf]) and np.all(nodes["right"][leaf] == idx[leaf])
    inner = ~leaf
    assert np.all(nodes["left"][inner] > idx[inner]) and np.all(nodes["right"][inner] > idx[inner])
    assert np.all(nodes["left"] < n) and np.all(nodes["right"] < n)
    assert np.all(nodes["depth"] <= model.max_depth)
    assert np.all(nodes["aux"][leaf] < len(model.actions))
    conf = nodes["value"][leaf]
    assert np.all((conf >= 0) & (conf <= 1))
    assert not np.any(np.isnan(nodes["value"]))
    for f in model.features:
        assert f.min <= f.default <= f.max
        if f.type is FeatureType.INT:
            assert float(f.min).is_integer() and float(f.max).is_integer()
    # The evaluator runs on the domain's corners and defaults without error.
    lo = np.array([f.min for f in model.features])
    hi = np.array([f.max for f in model.features])
    default = np.array([f.default for f in model.features])
    result = Evaluator(model).evaluate(np.stack([lo, hi, default]))
    assert np.all(result.actions < len(model.actions))
    assert np.all(model.nodes["kind"][result.leaves] == NodeKind.LEAF)


@pytest.mark.slow
@FUZZ
@given(byte_mutants())
def test_byte_mutations(data: bytes) -> None:
    check_mutant(data)


@FUZZ
@given(meta_mutants())
def test_metadata_mutations(data: bytes) -> None:
    check_mutant(data)


@FUZZ
@given(node_mutants())
def test_node_field_mutations(data: bytes) -> None:
    check_mutant(data)


@settings(max_examples=max(N // 5, 20), deadline=None)
@given(st.one_of(byte_mutants(), meta_mutants(), node_mutants()))
def test_mapped_file_agrees_with_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes):
    """The mmap path refuses or accepts exactly what the in-memory path does."""
    path = tmp_path_factory.mktemp("fuzz") / "m.clef"
    path.write_bytes(data)
    try:
        from_bytes = load_bytes(data, origin=str(path))
    except ClefproveError as exc:
        with pytest.raises(ClefproveError) as info:
            load(path)
        assert str(info.value) == str(exc)
        return
    model = load(path)
    assert model.sha256 == from_bytes.sha256
    assert np.array_equal(model.nodes, from_bytes.nodes)


def test_repack_round_trips() -> None:
    """The fuzzer's repacking is faithful: unmutated sections give back the original file."""
    for blob in BLOBS:
        assert repack(*sections(blob)) == blob


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1.5, 5e-324])
def test_a_categorical_split_value_field_other_than_zero_is_refused(value: float) -> None:
    """docs/format.md: a categorical split's value field is 0.  Nothing reads it, but a NaN
    there was the one NaN a validated model could hold (found by test_node_field_mutations)."""
    head, meta, nodes, member = sections(BLOBS[1])
    arr = np.frombuffer(nodes, dtype=NODE_DTYPE).copy()
    cat = int(np.flatnonzero(arr["kind"] == NodeKind.CATEGORICAL)[0])
    arr[cat]["value"] = value
    with pytest.raises(ClefproveError, match=f"node {cat}: categorical split with a value"):
        load_bytes(repack(head, meta, arr.tobytes(), member), origin="m.clef")
    arr[cat]["value"] = 0.0
    assert load_bytes(repack(head, meta, arr.tobytes(), member), origin="m.clef").n_nodes
