"""Pair count rows (walk._Snapshots.old_pairs) that no real count gives are corruption: a
re-signed row that is too deeply nested for the JSON reader, lists more pairs than it counts,
counts more than there are leaf pairs, lists pairs out of print order (unsorted, repeated, a
symmetric form's larger leaf first) or in the wrong shape, or sits under the key of an
invariant that is never counted on boxes.  The cache is then rebuilt and the re-check's
report is a fresh run's, never a count built on the forged row."""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clefprove.incremental import ProofCache, merkle, walk
from clefprove.incremental.store import DB_NAME, _snapshot_chk
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions
from tests.incremental import models as M
from tests.incremental.test_leaf_outcomes import _full, _source

Row = dict[str, Any]


def _pair_rows(path: Path) -> dict[bytes, bytes]:
    with sqlite3.connect(path / DB_NAME) as conn:
        rows = conn.execute("SELECT key, value FROM snapshot WHERE kind = 'pairs'").fetchall()
    return {bytes(k): bytes(v) for k, v in rows}


def _write(path: Path, key: bytes, value: bytes) -> None:
    conn = sqlite3.connect(path / DB_NAME)
    conn.execute(
        "INSERT OR REPLACE INTO snapshot (key, kind, value, chk, stamp) VALUES (?, ?, ?, ?, "
        "(SELECT max(stamp) FROM snapshot))",
        (key, "pairs", value, _snapshot_chk(key, "pairs", value)),
    )
    conn.commit()
    conn.close()


def _edited(src: dict) -> dict:
    """One leaf's action changed (a re-count would start from the stored row)."""
    grown = copy.deepcopy(src)
    leaf = M.at(grown["tree"], ("right",) * 5)
    leaf["action"] = "allow" if leaf["action"] != "allow" else "block"
    return grown


def _forged_recheck(
    tmp_path: Path, name: str, forge: Callable[[Row], Any], raw: bytes | None = None
) -> None:
    src = _source(_full(5, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program([name], model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    ((key, value),) = _pair_rows(tmp_path).items()
    row = json.loads(value[32:])
    assert row["total"] > 0 and row["first"]  # violated: a count with pairs listed
    body = raw if raw is not None else json.dumps(forge(row)).encode()
    _write(tmp_path, key, value[:32] + body)
    model2 = M.compile_(_edited(src))
    with ProofCache(tmp_path) as cache:
        got = check(model2, prog, cache=cache)
        assert any("corrupt proof cache" in w for w in cache.warnings), cache.warnings
    assert M.comparable(got) == M.comparable(check(model2, prog))


def _swap_rows(row: Row) -> Row:
    first = row["first"]
    assert len(first) >= 2
    return {**row, "first": [first[1], first[0], *first[2:]]}


FORGED: dict[str, Callable[[Row], Any]] = {
    "total a bool": lambda r: {**r, "total": True},
    "total a float": lambda r: {**r, "total": float(r["total"])},
    "fewer counted than listed": lambda r: {**r, "total": len(r["first"]) - 1},
    "more counted than leaf pairs": lambda r: {**r, "total": 10**9},
    "rows unsorted": _swap_rows,
    "a row repeated": lambda r: {**r, "first": [r["first"][0], *r["first"]]},
    "a flat list": lambda r: {**r, "first": [x for p in r["first"] for x in p]},
    "three columns": lambda r: {**r, "first": [[*p, p[0]] for p in r["first"]]},
    "a leaf paired with itself": lambda r: {**r, "first": [[p[0], p[0]] for p in r["first"]]},
    "not a leaf": lambda r: {**r, "first": [[0, p[1]] for p in r["first"]]},
    "no total": lambda r: {"first": r["first"]},
    "a list": lambda r: [r["total"], r["first"]],
}


@pytest.mark.parametrize("what", sorted(FORGED))
def test_forged_monotone_count_rows_are_corruption(tmp_path, what) -> None:
    _forged_recheck(tmp_path, "mono_x", FORGED[what])


def test_a_symmetric_form_with_its_larger_leaf_first_is_corruption(tmp_path) -> None:
    def larger_first(row: Row) -> Row:
        return {**row, "first": sorted([b, a] for a, b in row["first"])}

    _forged_recheck(tmp_path, "stable_x_or", larger_first)


def test_a_row_too_deep_for_the_json_reader_is_corruption(tmp_path) -> None:
    deep = b'{"total": 1, "first": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with pytest.raises(RecursionError):
        json.loads(deep)
    _forged_recheck(tmp_path, "mono_x", lambda r: r, raw=deep)


def test_a_count_row_under_an_invariant_never_counted_is_corruption(tmp_path) -> None:
    """A real row of a counted invariant copied under the key of one whose 'when' has a
    linear literal (never counted, so never stored) is not read as its count."""
    src = _source(_full(5, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program(["mono_x", "mono_n_linear"], model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    ((key, value),) = _pair_rows(tmp_path).items()
    domain = merkle.domain_digest(model, prog.severity)
    counted, linear = (
        walk.pairs_key(walk.scope_key(inv, domain), CheckOptions()) for inv in prog.invariants
    )
    assert counted == key  # the keys are computed as the walk does
    _write(tmp_path, linear, value)
    model2 = M.compile_(_edited(src))
    with ProofCache(tmp_path) as cache:
        got = check(model2, prog, cache=cache)
        assert any("corrupt proof cache" in w for w in cache.warnings), cache.warnings
    assert M.comparable(got) == M.comparable(check(model2, prog))


def test_a_real_row_is_read_without_a_warning(tmp_path) -> None:
    """The control: the unforged row re-counts without any warning."""
    src = _source(_full(5, 0.0, 10.0))
    model = M.compile_(src)
    prog = M.program(["mono_x", "stable_x_or"], model)
    with ProofCache(tmp_path) as cache:
        check(model, prog, cache=cache)
    model2 = M.compile_(_edited(src))
    with ProofCache(tmp_path) as cache:
        got = check(model2, prog, cache=cache)
        assert not cache.warnings
    assert all(r.paths_reused for r in got.results)
    assert M.comparable(got) == M.comparable(check(model2, prog))
