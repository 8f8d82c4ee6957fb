"""Whole ``check`` runs kept in the proof cache, answered before anything heavy is imported.

A run is named by the bytes of its model file and of its invariant files (with the paths as
given, which the report shows), the options that can show in a result
(:attr:`CheckOptions.result_identity`) and the verifier's identity.  Its value is the finished
:class:`~clefprove.verify.verdicts.Report` as JSON: counts, counterexamples with their paths
and regions, warnings.  A hit is that report with every path reused, as a run whose every
invariant is a whole-result hit (:mod:`clefprove.incremental.walk`) prints it, but without
loading the model or parsing the invariants, and so without numpy: most of what such a run
costs (docs/incremental.md, "Unchanged runs").

Trust is that of the whole results the walk reuses: a row carries a checksum against damage,
its JSON is checked field by field (anything unexpected is a miss, never a crash), and only
runs whose every invariant was decided (none unknown) are kept.  This module imports only the
standard library, the store and the verdict types, so that a hit stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from typing import Any

from clefprove.incremental.store import CacheCorrupt, CacheStore
from clefprove.status import Verdict
from clefprove.verify.options import CheckOptions, verifier_identity
from clefprove.verify.verdicts import (
    Counterexample,
    InvariantResult,
    ModelInfo,
    RelationalCounterexample,
    Report,
)

#: Bumped when the stored JSON changes shape (old rows then simply miss).
RUN_FORMAT = 1

#: Largest file read to name a run (bytes); a larger model goes the usual way.
MAX_BYTES = 1 << 30


class _Bad(Exception):
    """A stored run does not have the expected shape: treated as a miss."""


def run_key(
    model: str,
    invariants: Sequence[str],
    options: CheckOptions,
    *,
    model_digest: str | None = None,
) -> bytes | None:
    """The key of a ``check`` of *model* against the files *invariants* (paths as given) with
    *options*; None when one of them is not a readable regular file (a FIFO must not be read
    twice; the usual path reports what is wrong).  *model_digest*: the model file's sha256,
    known already (it is then not read)."""
    digests = [model_digest or _file_digest(model), *map(_file_digest, invariants)]
    if None in digests:
        return None
    files = [[path, digest] for path, digest in zip((model, *invariants), digests, strict=True)]
    try:
        stamp = _code_stamp()
    except OSError:
        return None
    text = json.dumps(
        ["run", RUN_FORMAT, verifier_identity(), stamp, options.result_identity, files],
        allow_nan=False,
    )
    return hashlib.sha256(text.encode()).digest()


def made_from(
    key: bytes, model: str, invariants: Sequence[str], options: CheckOptions, report: Report
) -> bool:
    """Whether *report*, computed for the run *key*, was made from the bytes that *key* names.

    A ``.clef`` model is named by the digest the loader took over the bytes it mapped (no
    second read, so a file replaced and put back during the run is seen); a JSON source and
    the invariant files are read again (an edit undone during the run is not seen for them:
    reading once for both would need the loaders to take bytes)."""
    digest = None if report.model.from_source else report.model.sha256
    return run_key(model, invariants, options, model_digest=digest) == key


#: The package's files that make a report: its Python modules and the DSL grammar that the
#: Lark route reads at run time (``dsl/lark_route.py``).
SOURCE_SUFFIXES = (".py", ".lark")


def _code_stamp(root: str | None = None) -> str:
    """Names, sizes and modification times of this package's source files (*root*: the
    package directory, by default this one's).

    A kept run is a whole report, made by most of the package (loader checks, wording, the
    regions' text, the grammar), not only by the verifier that :data:`ENGINE_REVISION`
    versions: an edited checkout must not print what its previous code printed.  Listing the
    files costs well under a millisecond; reading them would cost more than a hit saves."""
    if root is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    stack = [root]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as entries:
            for e in sorted(entries, key=lambda e: e.name):
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__" and not e.name.startswith("."):
                        stack.append(e.path)
                elif e.name.endswith(SOURCE_SUFFIXES):
                    st = e.stat()
                    h.update(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _file_digest(path: str) -> str | None:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except (OSError, ValueError):
        return None


def lookup(store: CacheStore, key: bytes, seconds: float) -> Report | None:
    """The report of the run *key* kept in *store*, every path reused and *seconds* its time;
    None when there is none (or what is there is damaged or not a report)."""
    try:
        text = store.lookup_results([key]).get(key)
    except CacheCorrupt as exc:
        store.reset(str(exc))
        return None
    if text is None:
        return None
    try:
        return decode(text, seconds)
    except (_Bad, ValueError, TypeError, KeyError, RecursionError):
        return None


def keep(store: CacheStore, key: bytes, report: Report) -> None:
    """Keep *report* as the run *key*, when every invariant was decided."""
    if any(r.status == Verdict.UNKNOWN or r.unknown_paths for r in report.results):
        return
    try:
        text = encode(report)
    except ValueError:  # a value JSON cannot hold exactly (NaN, infinity): not kept
        return
    try:
        store.store((), [(key, text)])
    except CacheCorrupt as exc:
        store.reset(str(exc))


# ---------------------------------------------------------------- JSON


def encode(report: Report) -> str:
    """*report* as the JSON :func:`decode` reads (its timings left out)."""
    m = report.model
    return json.dumps(
        {
            "model": [m.path, m.sha256, m.nodes, m.leaves, m.name, m.version, m.from_source],
            "warnings": list(report.warnings),
            "results": [_result(r) for r in report.results],
        },
        allow_nan=False,
        separators=(",", ":"),
    )


def _result(r: InvariantResult) -> dict[str, Any]:
    return {
        "invariant": r.invariant,
        "file": r.file,
        "line": r.line,
        "column": r.column,
        "status": r.status.value,
        "vacuous": r.vacuous,
        "violating_paths": r.violating_paths,
        "unknown_paths": r.unknown_paths,
        "paths": r.paths_checked + r.paths_reused,
        "description": r.description,
        "warnings": list(r.warnings),
        "relation": r.relation,
        "proved_share": r.proved_share,
        "counterexamples": [_counterexample(c) for c in r.counterexamples],
    }


def _counterexample(c: Counterexample | RelationalCounterexample) -> dict[str, Any]:
    if isinstance(c, RelationalCounterexample):
        return {
            "inputs": list(c.inputs),
            "actions": list(c.actions),
            "confidences": list(c.confidences),
            "leaves": list(c.leaves),
            "paths": [list(p) for p in c.paths],
            "feature": c.feature,
            "regions": [list(r) for r in c.regions],
            "tree_leaves": None if c.tree_leaves is None else [list(x) for x in c.tree_leaves],
        }
    return {
        "input": c.input,
        "action": c.action,
        "confidence": c.confidence,
        "leaf": c.leaf,
        "path": list(c.path),
        "region": list(c.region),
        "leaves": None if c.leaves is None else list(c.leaves),
    }


def decode(text: str, seconds: float) -> Report:
    """The report that :func:`encode` wrote, every path reused, *seconds* long in all (split
    evenly over the invariants, as a whole-result hit of the walk does)."""
    d = _dict(json.loads(text))
    m = _list(d["model"], 7)
    model = ModelInfo(
        _str(m[0]),
        _str(m[1]),
        _int(m[2]),
        _int(m[3]),
        _str(m[4]),
        _str(m[5]),
        _bool(m[6]),
    )
    rows = _list(d["results"])
    if not rows:
        raise _Bad("no results")
    share = seconds / len(rows)
    results = tuple(_decode_result(_dict(row), share) for row in rows)
    return Report(model, results, seconds, tuple(_str(w) for w in _list(d["warnings"])))


def _decode_result(d: dict[str, Any], seconds: float) -> InvariantResult:
    status = Verdict(_str(d["status"]))
    if status == Verdict.UNKNOWN:
        raise _Bad("an unknown verdict is never kept")
    relation = d["relation"]
    share = d["proved_share"]
    description = d["description"]
    return InvariantResult(
        invariant=_str(d["invariant"]),
        file=_str(d["file"]),
        line=_int(d["line"]),
        status=status,
        vacuous=_bool(d["vacuous"]),
        violating_paths=_int(d["violating_paths"]),
        unknown_paths=_int(d["unknown_paths"]),
        counterexamples=tuple(
            _decode_counterexample(_dict(c)) for c in _list(d["counterexamples"])
        ),
        seconds=seconds,
        paths_checked=0,
        paths_reused=_int(d["paths"]),
        description=None if description is None else _str(description),
        column=_int(d["column"]),
        solver_paths=0,
        warnings=tuple(_str(w) for w in _list(d["warnings"])),
        relation=None if relation is None else _str(relation),
        proved_share=None if share is None else _float(share),
    )


def _decode_counterexample(d: dict[str, Any]) -> Counterexample | RelationalCounterexample:
    if "inputs" in d:
        inputs = _list(d["inputs"], 2)
        actions = _list(d["actions"], 2)
        confidences = _list(d["confidences"], 2)
        leaves = _list(d["leaves"], 2)
        paths = _list(d["paths"], 2)
        regions = _list(d["regions"], 2)
        per_tree = d["tree_leaves"]
        tree_leaves = None
        if per_tree is not None:
            rows = _list(per_tree, 2)
            tree_leaves = (_ints(rows[0]), _ints(rows[1]))
        return RelationalCounterexample(
            (_input(inputs[0]), _input(inputs[1])),
            (_str(actions[0]), _str(actions[1])),
            (_float(confidences[0]), _float(confidences[1])),
            (_int(leaves[0]), _int(leaves[1])),
            (_texts(paths[0]), _texts(paths[1])),
            _str(d["feature"]),
            (_texts(regions[0]), _texts(regions[1])),
            tree_leaves,
        )
    leaves = d["leaves"]
    return Counterexample(
        _input(d["input"]),
        _str(d["action"]),
        _float(d["confidence"]),
        _int(d["leaf"]),
        _texts(d["path"]),
        _texts(d["region"]),
        None if leaves is None else _ints(leaves),
    )


def _dict(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad("not an object")
    return value


def _list(value: object, length: int | None = None) -> list[Any]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise _Bad("not a list of the expected length")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise _Bad("not a string")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad("not a whole number")
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Bad("not true or false")
    return value


def _float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad("not a number")
    return value  # as stored: an int stays an int, as it was printed


def _ints(value: object) -> tuple[int, ...]:
    return tuple(_int(x) for x in _list(value))


def _texts(value: object) -> tuple[str, ...]:
    return tuple(_str(x) for x in _list(value))


def _input(value: object) -> dict[str, Any]:
    d = _dict(value)
    for v in d.values():
        if not isinstance(v, str | int | float):  # bool is an int
            raise _Bad("an input value that is not a JSON scalar")
    return d
