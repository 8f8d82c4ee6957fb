"""A full tree snapshot read piece by piece against the new model (``delta.TreeReader``): it
keeps only the records that differ, aligns as the whole snapshot does, and a damaged row is
corruption, never a changed leaf taken for an unchanged one."""

from __future__ import annotations

import sqlite3
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import ProofCache, delta
from clefprove.incremental.store import DB_NAME
from clefprove.model.types import NodeKind
from clefprove.verify.api import check
from tests.incremental import models as M
from tests.incremental.test_delta import _edit
from tests.incremental.test_leaf_outcomes import _full, _source


def _read(blob: bytes, model: object, records: int) -> delta.TreeSnapshot:
    """*blob* fed to a reader as the store feeds it, *records* node records at a time."""
    with mock.patch.object(delta, "READ_RECORDS", records):
        reader = delta.TreeReader(model.nodes, len(blob))  # type: ignore[attr-defined]
        at = 0
        while at < len(blob):
            want = reader.wanted()
            end = len(blob) if want <= 0 else min(len(blob), at + want)
            reader.feed(blob[at:end])
            at = end
        reader.verified()
    assert reader.snapshot is not None
    return reader.snapshot


def _same_alignment(a: delta.Alignment, b: delta.Alignment) -> None:
    for field in ("leaves", "clean_new", "clean_old_rows", "changed_roots", "clean_at"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_snapshot_read_against_the_model_is_the_whole_snapshot(data) -> None:
    """Read against the next version (a few records at a time), a full snapshot has the old
    records, aligns exactly as the whole snapshot does, carries a delta row to the same
    version and encodes the same delta for the new model."""
    draw = data.draw
    src = draw(M.sources())
    old = M.compile_(src)
    mid_src = _edit(draw, src)
    mid = M.compile_(mid_src)
    new = M.compile_(_edit(draw, mid_src))
    blob = delta.encode_tree(old)
    whole = delta.decode_tree(blob)
    got = _read(blob, new, draw(st.integers(1, 5)))
    assert got.nodes.tobytes() == old.nodes.tobytes()
    got = _read(blob, new, 2)
    _same_alignment(delta.align(got, new), delta.align(whole, new))
    key = bytes(32)
    assert delta.encode_tree_delta(key, got, new) == delta.encode_tree_delta(key, whole, new)
    step = delta.encode_tree_delta(key, whole, mid)
    if step is not None:
        base = _read(blob, new, 3)
        on_whole = delta.decode_tree_delta(step, whole)
        on_read = delta.decode_tree_delta(step, base, lazy=True)
        assert on_read.nodes.tobytes() == on_whole.nodes.tobytes() == mid.nodes.tobytes()
        _same_alignment(delta.align(on_read, new), delta.align(on_whole, new))


def test_a_snapshot_of_another_node_count_is_read_whole() -> None:
    old = M.compile_(_source(_full(3, 0.0, 10.0)))
    new = M.compile_(_source(_full(4, 0.0, 10.0)))
    blob = delta.encode_tree(old)
    got = _read(blob, new, 2)
    assert got.nodes.tobytes() == old.nodes.tobytes()
    for bad in (blob[:-1], blob + b"\0", blob[:10], b""):
        with pytest.raises(ValueError):
            _read(bad, new, 2)
    same = delta.encode_tree(new)
    for bad in (same[:-1], same[:30], same + b"\0"):
        with pytest.raises(ValueError):
            _read(bad, new, 2)


@pytest.mark.parametrize("record", [False, True])
def test_damage_that_makes_a_changed_leaf_look_unchanged_is_corruption(
    tmp_path, record: bool
) -> None:
    """The stored tree of the last version is damaged so that a leaf changed since reads as
    the new model's record (*record*) or only its action field does: the row
    fails its checksum, the cache is rebuilt, and the report is a fresh run's."""
    names = ["slow", "friction", "linear"]
    src = _source(_full(5, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program(names, model)
    changed = _source(_full(5, 0.0, 10.0))
    leaf = M.at(changed["tree"], ("right", "left", "right", "left", "right"))
    leaf["action"] = "allow" if leaf["action"] != "allow" else "block"
    new = M.compile_(changed)
    at = int(np.flatnonzero(model.nodes.view(np.uint64) != new.nodes.view(np.uint64))[0]) // 3
    assert model.nodes["kind"][at] == NodeKind.LEAF
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    ((rowid, value),) = conn.execute("SELECT rowid, value FROM snapshot WHERE kind = 'tree'")
    value = bytearray(value)
    start = delta._HEAD.size + 24 * at
    if record:
        value[start : start + 24] = new.nodes[at : at + 1].tobytes()
    else:
        value[start + 16 : start + 20] = int(new.nodes["aux"][at]).to_bytes(4, "little")
    assert bytes(value[start : start + 24]) == new.nodes[at : at + 1].tobytes()
    conn.execute("UPDATE snapshot SET value = ? WHERE rowid = ?", (bytes(value), rowid))
    conn.commit()
    conn.close()
    with ProofCache(tmp_path) as cache:
        got = check(new, prog, cache=cache)
        assert any("corrupt proof cache" in w for w in cache.warnings)
    assert M.comparable(got) == M.comparable(check(new, prog))
