"""The .clef loader: round trips, and every corrupted or crafted file is one clear error."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clefprove.errors import ClefFormatError
from clefprove.model.clef import HEADER, MAGIC, load, load_bytes, write_clef
from clefprove.model.loading import load_model
from clefprove.model.types import NODE_DTYPE


@pytest.fixture
def spec_bytes(spec_model) -> bytes:
    return write_clef(spec_model)


def _resign(body: bytes) -> bytes:
    """Replace the trailing digest so that only the structural checks can catch a defect."""
    body = body[:-32]
    return body + hashlib.sha256(body).digest()


def _patch_node(data: bytes, index: int, **fields) -> bytes:
    nodes_offset = HEADER.unpack_from(data, 0)[10]
    buf = bytearray(data)
    rec = np.frombuffer(buf, dtype=NODE_DTYPE, count=1, offset=nodes_offset + 24 * index).copy()
    for key, value in fields.items():
        rec[key] = value
    buf[nodes_offset + 24 * index : nodes_offset + 24 * (index + 1)] = rec.tobytes()
    return _resign(bytes(buf))


def _zero_membership(data: bytes) -> bytes:
    """Every categorical set emptied (the membership table all zeros)."""
    values = HEADER.unpack_from(data, 0)
    size, offset = values[7], values[11]
    return _resign(data[:offset] + bytes(size) + data[offset + size :])


def _patch_header(data: bytes, field: int, value: int) -> bytes:
    values = list(HEADER.unpack_from(data, 0))
    values[field] = value
    return _resign(HEADER.pack(*values) + data[HEADER.size :])


def _reason(data: bytes) -> str:
    with pytest.raises(ClefFormatError) as info:
        load_bytes(data, origin="m.clef")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("m.clef: ")
    return msg


def test_round_trip_is_byte_identical(spec_model, spec_bytes, tmp_path):
    path = tmp_path / "m.clef"
    path.write_bytes(spec_bytes)
    model = load(path)
    assert write_clef(model) == spec_bytes
    # the model's digest is the whole file's (what sha256sum prints); the trailing 32 bytes are
    # the SHA-256 of everything before them
    assert model.sha256 == hashlib.sha256(spec_bytes).hexdigest() == spec_model.sha256
    assert spec_bytes[-32:] == hashlib.sha256(spec_bytes[:-32]).digest()
    assert model.size == len(spec_bytes)
    assert np.array_equal(model.nodes, spec_model.nodes)
    assert not model.nodes.flags.writeable
    assert model.nodes.base is not None  # a view over the mapping, not a copy


def test_load_model_accepts_json_and_clef(tmp_path, spec_bytes, spec_model):
    (tmp_path / "m.clef").write_bytes(spec_bytes)
    assert load_model(tmp_path / "m.clef").sha256 == spec_model.sha256
    from tests.conftest import EXAMPLES

    assert load_model(EXAMPLES / "spec-toy.json").sha256 == spec_model.sha256


def test_every_truncation_is_rejected(spec_bytes):
    for cut in range(len(spec_bytes)):
        with pytest.raises(ClefFormatError):
            load_bytes(spec_bytes[:cut])


def test_every_truncated_file_is_rejected(spec_bytes, tmp_path):
    path = tmp_path / "t.clef"
    for cut in range(0, len(spec_bytes), 7):
        path.write_bytes(spec_bytes[:cut])
        with pytest.raises(ClefFormatError):
            load(path)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_byte_flips_are_rejected(spec_model, data):
    raw = bytearray(write_clef(spec_model))
    positions = data.draw(st.sets(st.integers(0, len(raw) - 1), min_size=1, max_size=8))
    for pos in positions:
        raw[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(ClefFormatError):
        load_bytes(bytes(raw))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_resigned_random_node_bytes_never_crash(spec_model, data):
    """With a valid digest, any node-array damage is caught by validation or is harmless."""
    raw = bytearray(write_clef(spec_model))
    nodes_offset = HEADER.unpack_from(raw, 0)[10]
    end = nodes_offset + 24 * spec_model.n_nodes + len(spec_model.membership)
    for pos in data.draw(st.sets(st.integers(nodes_offset, end - 1), min_size=1, max_size=6)):
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        model = load_bytes(_resign(bytes(raw)))
    except ClefFormatError:
        return
    # Whatever loads is a well-formed tree: walking from the root reaches every leaf.
    from clefprove.model.types import NodeKind

    seen, stack = set(), [0]
    while stack:
        node = model.node(stack.pop())
        seen.add(node.index)
        if node.kind is not NodeKind.LEAF:
            assert node.left > node.index and node.right > node.index
            stack += [node.left, node.right]
    assert seen == set(range(model.n_nodes))


@pytest.mark.parametrize(
    ("craft", "expected"),
    [
        (lambda d: _patch_node(d, 0, left=0), "child index does not come after its parent"),
        (lambda d: _patch_node(d, 2, right=1), "child index does not come after its parent"),
        (lambda d: _patch_node(d, 0, right=99), "child index out of range"),
        (lambda d: _patch_node(d, 0, right=1), "both children are the same node"),
        (lambda d: _patch_node(d, 2, left=4, right=4), "both children are the same node"),
        (lambda d: _patch_node(d, 0, value=float("nan")), "threshold is NaN"),
        (lambda d: _patch_node(d, 0, feature=17), "feature index out of range"),
        (lambda d: _patch_node(d, 0, feature=4), "numeric split on a categorical feature"),
        (lambda d: _patch_node(d, 2, aux=1000), "categorical set out of range"),
        (_zero_membership, "node 2: empty categorical set"),
        (lambda d: _patch_node(d, 1, aux=9), "action index out of range"),
        (lambda d: _patch_node(d, 1, value=2.0), "confidence is NaN or outside"),
        (lambda d: _patch_node(d, 3, depth=7), "depth exceeds the declared maximum"),
        (lambda d: _patch_node(d, 1, kind=7), "unknown node kind"),
        (lambda d: _patch_node(d, 1, left=0, right=0), "a leaf must point to itself"),
        (lambda d: _patch_header(d, 6, 200), "exceeds the limit of 128"),
        (lambda d: _patch_header(d, 6, 5), "depth"),
        (lambda d: _patch_header(d, 5, 4), "section table does not match"),
        (lambda d: _patch_header(d, 4, 3), "holds 3 trees"),
        (lambda d: _patch_header(d, 1, 3), "format version 3 is newer than this clefprove"),
        (lambda d: _patch_header(d, 1, 2), "section table does not match"),
        (lambda d: _patch_header(d, 3, 1), "corrupted header"),
        (lambda d: b"NOTCLEF!" + d[8:], "wrong magic bytes"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "SHA-256 digest mismatch"),
        (lambda d: b"", "empty file"),
    ],
)
def test_crafted_files_get_one_line_reasons(spec_bytes, craft, expected):
    assert expected in _reason(craft(spec_bytes))


def test_crafted_metadata(spec_bytes):
    head = list(HEADER.unpack_from(spec_bytes, 0))
    meta = spec_bytes[64 : 64 + head[9]]
    broken = meta.replace(b'"max":772', b'"max":700')
    assert len(broken) == len(meta)
    assert "greater than max" in _reason(
        _resign(spec_bytes[:64] + broken + spec_bytes[64 + len(meta) :])
    )
    garbage = b"{" * len(meta)
    assert "metadata" in _reason(_resign(spec_bytes[:64] + garbage + spec_bytes[64 + len(meta) :]))


def test_metadata_with_a_key_twice(spec_bytes):
    """JSON parsers disagree on which of two equal keys wins (Python's last, others the first
    or an error), so a re-signed file whose metadata names a key twice could show another
    tool another model: refused, as the JSON source refuses it."""
    head = list(HEADER.unpack_from(spec_bytes, 0))
    meta = spec_bytes[64 : 64 + head[9]]
    broken = meta.replace(b'"name":"edge-allow-block"', b'"name":"","name":"edge-b"')
    assert len(broken) == len(meta) and broken != meta
    reason = _reason(_resign(spec_bytes[:64] + broken + spec_bytes[64 + len(meta) :]))
    assert 'names the key "name" twice' in reason, reason


def test_metadata_text_that_is_not_unicode(spec_bytes):
    # A lone surrogate escape in the name (or a categorical value) of a re-signed file: every
    # report that printed it failed (exit 4); refused like a control character.
    head = list(HEADER.unpack_from(spec_bytes, 0))
    meta = spec_bytes[64 : 64 + head[9]]
    for old, new in ((b"edge-allow-block", b"\\ud800allowblock"), (b'"Safari"', b'"\\udcff"')):
        broken = meta.replace(old, new)
        assert len(broken) == len(meta) and broken != meta
        reason = _reason(_resign(spec_bytes[:64] + broken + spec_bytes[64 + len(meta) :]))
        assert "lone surrogate" in reason, reason


def test_magic_is_stable():
    assert MAGIC == b"\x89CLEF\r\n\x1a"
    assert struct.calcsize("<8sHHIIIIIQQQQ") == 64


@pytest.mark.parametrize("content", [b"", b"\x89CLEF", b"garbage" * 40, None])
def test_cli_rejects_bad_files_with_exit_2(tmp_path, spec_bytes, content):
    path = tmp_path / "bad.clef"
    path.write_bytes(content if content is not None else spec_bytes[:-5])
    proc = subprocess.run(
        [sys.executable, "-m", "clefprove", "info", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(path) in proc.stderr


def test_cli_compile_and_info(tmp_path):
    from tests.conftest import EXAMPLES

    out = tmp_path / "m.clef"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "clefprove",
            "compile",
            str(EXAMPLES / "spec-toy.json"),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    info = subprocess.run(
        [sys.executable, "-m", "clefprove", "info", str(out), "--format", "json"],
        capture_output=True,
        text=True,
    )
    import json

    data = json.loads(info.stdout)
    assert data["nodes"] == 5 and data["leaves"] == 3 and data["max_depth"] == 2
    assert data["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()  # as sha256sum
    assert data["features"][1] == {
        "name": "tls_version",
        "type": "int",
        "min": 768,
        "max": 772,
        "default": 772,
    }


def test_cli_compile_error_leaves_no_output(tmp_path, spec_source):
    import json

    spec_source["tree"]["left"]["action"] = "alow"
    src = tmp_path / "m.json"
    src.write_text(json.dumps(spec_source))
    out = tmp_path / "m.clef"
    proc = subprocess.run(
        [sys.executable, "-m", "clefprove", "compile", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "tree.left: unknown action 'alow'" in proc.stderr
    assert not out.exists()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_what_the_loader_finds_is_what_a_scan_finds(data) -> None:
    """The leaf nodes and the categorical features some split tests, kept by the loader from
    its validation, equal those scanned from the records of a copy without them."""
    import dataclasses

    from tests.verify.gen import models

    model = load_bytes(write_clef(data.draw(models(all_int=data.draw(st.booleans()), max_depth=5))))
    copy = dataclasses.replace(model)  # an empty derived store: scanned
    assert np.array_equal(model.leaf_nodes, copy.leaf_nodes)
    assert model.categorical_split_features == copy.categorical_split_features
    assert not model.leaf_nodes.flags.writeable
