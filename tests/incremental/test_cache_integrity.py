"""A damaged or shared cache never yields a wrong verdict: it is detected and rebuilt."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.incremental import ProofCache
from clefprove.incremental.store import DB_NAME
from clefprove.verify.api import check as _check
from clefprove.verify.options import CheckOptions
from tests.incremental import models as M

#: 'solver' and 'solver_safe' must reach Z3 (runs that need it store snapshots): the linear
#: stage, which decides them on boxes, is off in this file.
NEEDS_Z3 = CheckOptions(linear=False)


def check(*args, **kwargs):
    return _check(*args, options=NEEDS_Z3, **kwargs)


NAMES = ["slow", "friction", "confident", "linear", "solver", "by_action", "solver_safe"]


def _source(variant: int) -> dict:
    """A depth-6 model on x whose allow leaves (x in [5, 7.5]) need Z3 for 'solver_safe';
    *variant* changes one leaf (so variants share most subtrees)."""

    def full(depth: int, lo: float, hi: float, code: int) -> dict:
        if depth == 0:
            action = "allow" if lo >= 5 and hi <= 7.5 else M.ACTIONS[1 + code % 2]
            return {"action": action, "confidence": M.CONFIDENCES[code % 5]}
        mid = (lo + hi) / 2
        return {
            "feature": "x",
            "threshold": mid,
            "left": full(depth - 1, lo, mid, code * 2),
            "right": full(depth - 1, mid, hi, code * 2 + 1),
        }

    src = {
        "name": "t",
        "version": str(variant),
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": full(6, 0.0, 10.0, 1),
    }
    if variant:
        node = src["tree"]
        for k in range(6):
            node = node["left" if (variant >> k) & 1 else "right"]
        node["action"] = M.ACTIONS[(M.ACTIONS.index(node["action"]) + 1) % 3]
    return src


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pristine")
    model = M.compile_(_source(0))
    prog = M.program(NAMES, model)
    with ProofCache(tmp) as cache:
        check(model, prog, cache=cache)
    data = (tmp / DB_NAME).read_bytes()
    want = M.comparable(check(model, prog))
    return model, prog, data, want


def _check_with(tmp: Path, model, prog):
    with ProofCache(tmp) as cache:
        return check(model, prog, cache=cache), list(cache.warnings)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_byte_damage_never_changes_a_verdict(setup, data, tmp_path_factory) -> None:
    model, prog, pristine, want = setup
    raw = bytearray(pristine)
    for _ in range(data.draw(st.integers(1, 20))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    tmp = tmp_path_factory.mktemp("bytes")
    (tmp / DB_NAME).write_bytes(bytes(raw))
    rep, _ = _check_with(tmp, model, prog)
    assert M.comparable(rep) == want
    # Whatever happened, the cache is usable afterwards and still right.
    rep2, _ = _check_with(tmp, model, prog)
    assert M.comparable(rep2) == want


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_cache_is_detected_and_rebuilt(setup, data, tmp_path_factory) -> None:
    model, prog, pristine, want = setup
    cut = data.draw(st.integers(1, len(pristine) - 1))
    tmp = tmp_path_factory.mktemp("trunc")
    (tmp / DB_NAME).write_bytes(pristine[:cut])
    rep, _ = _check_with(tmp, model, prog)
    assert M.comparable(rep) == want
    rep2, warnings2 = _check_with(tmp, model, prog)
    assert M.comparable(rep2) == want
    assert not warnings2  # rebuilt on the first run


def test_garbage_file_is_set_aside_with_a_warning(setup, tmp_path, capsys) -> None:
    model, prog, _, want = setup
    (tmp_path / DB_NAME).write_bytes(os.urandom(5000))
    rep, warnings = _check_with(tmp_path, model, prog)
    assert M.comparable(rep) == want
    assert any("corrupt proof cache" in w for w in warnings)
    assert "corrupt proof cache" in capsys.readouterr().err
    assert list(tmp_path.glob(f"{DB_NAME}.corrupt-*"))


@pytest.mark.parametrize(
    "sql",
    [
        # Without snapshots, a changed model reads the subtree proofs.
        "DELETE FROM snapshot; UPDATE subtree SET leaves = leaves + 1",
        "DELETE FROM snapshot; UPDATE subtree SET chk = zeroblob(8)",
        "UPDATE result SET value = replace(value, 'violated', 'holds')",
        "UPDATE snapshot SET value = zeroblob(length(value)) WHERE kind = 'outcomes'",
        "UPDATE snapshot SET value = substr(value, 1, length(value) - 8) WHERE kind = 'tree'",
        "UPDATE snapshot SET chk = zeroblob(8)",
    ],
)
def test_tampered_rows_fail_their_checksum(setup, tmp_path, sql) -> None:
    model, prog, pristine, want = setup
    (tmp_path / DB_NAME).write_bytes(pristine)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.executescript(sql)
    conn.commit()
    conn.close()
    if "result" not in sql:  # a changed model: whole results miss, the rest is read
        model = M.compile_(_source(3))
        prog = M.program(NAMES, model)
        want = M.comparable(check(model, prog))
    rep, warnings = _check_with(tmp_path, model, prog)
    assert M.comparable(rep) == want
    assert any("checksum" in w for w in warnings)


def test_tampered_model_domain_is_not_reused(setup, tmp_path) -> None:
    """The same tree over a wider domain must not reuse proofs made for the narrower one."""
    pristine = setup[2]
    (tmp_path / DB_NAME).write_bytes(pristine)
    src = _source(0)
    src["features"][0]["max"] = 50
    wide = M.compile_(src)
    prog_w = M.program(NAMES, wide)
    rep, _ = _check_with(tmp_path, wide, prog_w)
    assert M.comparable(rep) == M.comparable(check(wide, prog_w))
    assert rep.summary["paths_reused"] == 0


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from clefprove.incremental import ProofCache
    from tests.incremental import models as M
    from tests.incremental.test_cache_integrity import NAMES, _source, check
    out = []
    cache = ProofCache(sys.argv[1])
    for rnd in range(3):
        for v in json.loads(sys.argv[2]):
            model = M.compile_(_source(v))
            rep = check(model, M.program(NAMES, model), cache=cache)
            out.append([v, M.comparable(rep)])
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_concurrent_processes_share_a_cache(tmp_path) -> None:
    root = Path(__file__).resolve().parents[2]
    variants = [0, 1, 5, 9, 22, 63]
    env = {**os.environ, "PYTHONPATH": str(root)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(tmp_path), json.dumps(order)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
        )
        for order in (variants, variants[::-1])
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    want = {}
    for v in variants:
        model = M.compile_(_source(v))
        want[v] = M.comparable(check(model, M.program(NAMES, model)))
    for out, _ in outs:
        for v, got in json.loads(out):
            assert (got[0], got[1]) == want[v]


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_forged_snapshots_never_crash_or_hang(setup, tmp_path, data) -> None:
    """Snapshot rows changed *and re-signed* (what a person who can write the cache could do:
    the checksums detect damage, not forgery) may change what is reused, but never crash the
    check, hang it, or get past the structural checks of the tree."""
    from clefprove.incremental.store import _snapshot_chk

    pristine = setup[2]
    db = tmp_path / f"forged-{os.urandom(4).hex()}" / DB_NAME
    db.parent.mkdir()
    db.write_bytes(pristine)
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT key, kind, value FROM snapshot ORDER BY kind, key").fetchall()
    assert rows, "the pristine cache has snapshots"
    for _ in range(data.draw(st.integers(1, 4))):
        key, kind, value = data.draw(st.sampled_from(rows))
        value = bytearray(value)
        if value and data.draw(st.booleans()):
            at = data.draw(st.integers(0, len(value) - 1))
            value[at] = data.draw(st.integers(0, 255))
        else:
            value = value[: data.draw(st.integers(0, len(value)))]
        value = bytes(value)
        conn.execute(
            "UPDATE snapshot SET value = ?, chk = ? WHERE key = ?",
            (value, _snapshot_chk(key, kind, value), key),
        )
    conn.commit()
    conn.close()
    model = M.compile_(_source(5))  # another version: the snapshots are read
    with ProofCache(db.parent) as cache:
        report = check(model, M.program(NAMES, model), cache=cache)
    assert len(report.results) == len(NAMES)
