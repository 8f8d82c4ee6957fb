"""JSON model source (SPEC §2): validation with JSON-path error messages, and compilation.

``compile_source`` validates a parsed JSON document and builds the node array in pre-order
(a node's children come after it), then goes through the binary encoder and loader so that a
model compiled in memory is byte-for-byte the model a `.clef` file would give.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from clefprove.errors import ModelSourceError
from clefprove.fileio import read_file_bounded
from clefprove.model.ensemble import Arithmetic, Combine, Ensemble, Link
from clefprove.model.features import (
    _check_keys,
    _fail,
    _finite,
    _json_type,
    _require,
    check_name_clashes,
    parse_actions,
    parse_features,
    unprintable,
)
from clefprove.model.types import (
    MAX_TREE_DEPTH,
    NODE_DTYPE,
    Feature,
    FeatureType,
    Model,
    NodeKind,
)

#: A JSON model source larger than this is refused (a device or a pipe that never ends must
#: not be read until memory runs out; 1 GiB of JSON is several million nodes).
MAX_SOURCE_BYTES = 1 << 30

_TOP_KEYS = {"name", "version", "features", "actions", "tree", "description", "metadata"}
_LEAF_KEYS = {"action", "confidence", "id", "samples"}
_SPLIT_KEYS = {"feature", "threshold", "in", "left", "right", "id", "samples"}


#: One node record, the fields of NODE_DTYPE: (value, left, right, aux, feature, kind, depth).
_Record = tuple[float, int, int, int, int, int, int]


class _TreeBuilder:
    """Flattens the JSON tree into pre-order node records and a membership table."""

    def __init__(self, features: tuple[Feature, ...], actions: tuple[str, ...]) -> None:
        self.features = features
        self.feature_index = {f.name: i for i, f in enumerate(features)}
        self.action_index = {a: i for i, a in enumerate(actions)}
        self.records: list[_Record] = []
        self.membership = bytearray()
        self.rows: dict[bytes, int] = {}
        self.max_depth = 0
        self.prefix = "tree"  # JSON path of the tree being built

    def build(self, tree: Any) -> None:
        # Iterative pre-order walk: (json node, json path, depth, parent slot to patch).
        stack: list[tuple[Any, str, int, tuple[int, int] | None]] = [(tree, self.prefix, 0, None)]
        while stack:
            obj, path, depth, patch = stack.pop()
            if depth > MAX_TREE_DEPTH:
                raise _fail(path, f"tree is deeper than the limit of {MAX_TREE_DEPTH}")
            index = len(self.records)
            if patch is not None:
                parent, slot = patch
                rec = list(self.records[parent])
                rec[slot] = index
                self.records[parent] = tuple(rec)  # type: ignore[assignment]
            self.max_depth = max(self.max_depth, depth)
            if not isinstance(obj, dict):
                raise _fail(path, f"a node must be an object, not {_json_type(obj)}")
            if "action" in obj or "value" in obj or ("feature" not in obj and "left" not in obj):
                self.records.append(self._leaf(obj, path, index, depth))
                continue
            self.records.append(self._split(obj, path, depth))
            for side, slot in (("right", 2), ("left", 1)):
                child = _require(obj, side, path)
                stack.append((child, f"{path}.{side}", depth + 1, (index, slot)))
            if len(self.records) + len(stack) > 2**32 - 1:
                raise _fail(path, "too many nodes")

    def _leaf(self, obj: dict[str, Any], path: str, index: int, depth: int) -> _Record:
        _check_keys(obj, _LEAF_KEYS, path)
        action = _require(obj, "action", path)
        if not isinstance(action, str) or action not in self.action_index:
            known = ", ".join(self.action_index)
            raise _fail(f"{path}", f"unknown action {action!r} (actions: {known})")
        conf = _finite(_require(obj, "confidence", path), f"{path}.confidence", "confidence")
        if not 0.0 <= conf <= 1.0:
            raise _fail(f"{path}.confidence", f"{obj['confidence']} is outside [0, 1]")
        return (conf, index, index, self.action_index[action], 0, NodeKind.LEAF, depth)

    def _split(self, obj: dict[str, Any], path: str, depth: int) -> _Record:
        _check_keys(obj, _SPLIT_KEYS, path)
        name = _require(obj, "feature", path)
        if not isinstance(name, str) or name not in self.feature_index:
            raise _fail(f"{path}.feature", f"unknown feature {name!r}")
        fi = self.feature_index[name]
        feature = self.features[fi]
        if feature.type is FeatureType.CATEGORICAL:
            if "threshold" in obj:
                raise _fail(path, f"categorical feature '{name}' splits with 'in', not 'threshold'")
            members = _require(obj, "in", path)
            if not isinstance(members, list) or not members:
                raise _fail(f"{path}.in", "must be a non-empty list of values")
            row = bytearray(len(feature.values))
            for i, v in enumerate(members):
                if not isinstance(v, str) or v not in feature.values:
                    raise _fail(f"{path}.in[{i}]", f"{v!r} is not a value of feature '{name}'")
                row[feature.values.index(v)] = 1
            key = bytes(row)
            offset = self.rows.get(key)
            if offset is None:
                offset = len(self.membership)
                self.membership.extend(key)
                self.rows[key] = offset
            return (0.0, 0, 0, offset, fi, NodeKind.CATEGORICAL, depth)
        if "in" in obj:
            raise _fail(path, f"'in' splits need a categorical feature; '{name}' is {feature.type}")
        if "threshold" in obj:
            t = _finite(obj["threshold"], f"{path}.threshold", "threshold")
        elif feature.type is FeatureType.BOOL:
            t = 0.5
        else:
            raise _fail(path, "missing 'threshold'")
        return (t, 0, 0, 0, fi, NodeKind.NUMERIC, depth)


class _EnsembleBuilder(_TreeBuilder):
    """Flattens several JSON trees: leaves carry value vectors, rows in node order."""

    def __init__(self, features: tuple[Feature, ...], actions: tuple[str, ...], combine: Combine):
        super().__init__(features, actions)
        self.combine = combine
        self.outputs = combine.outputs
        self.values: list[list[float]] = []
        self.value_paths: list[tuple[str, bool]] = []  # per row: its JSON path, listed or not
        self.all_records: list[tuple[float, int, int, int, int, int, int]] = []
        self.sizes: list[int] = []
        self.depths: list[int] = []

    def build_trees(self, trees: Any) -> None:
        if not isinstance(trees, list) or not trees:
            raise _fail("trees", "must be a non-empty list of trees")
        for t, tree in enumerate(trees):
            self.records, self.max_depth, self.prefix = [], 0, f"trees[{t}]"
            self.build(tree)
            self.all_records.extend(self.records)
            self.sizes.append(len(self.records))
            self.depths.append(self.max_depth)
            if len(self.all_records) > 2**32 - 1:
                raise _fail(self.prefix, "too many nodes")

    def _leaf(self, obj: dict[str, Any], path: str, index: int, depth: int) -> _Record:
        _check_keys(obj, _ENSEMBLE_LEAF_KEYS, path)
        raw = _require(obj, "value", path)
        vec = raw if isinstance(raw, list) else [raw]
        if len(vec) != self.outputs:
            raise _fail(f"{path}.value", f"needs {self.outputs} number(s), one per output")
        row = [_finite(v, f"{path}.value", "a leaf value") for v in vec]
        self.values.append(row)
        self.value_paths.append((f"{path}.value", isinstance(raw, list)))
        return (0.0, index, index, len(self.values) - 1, 0, NodeKind.LEAF, depth)

    def value_table(self) -> np.ndarray:
        """The leaf value rows, after the ``.clef`` loader's value checks that concern one
        leaf, here named by the leaf's JSON path (the loader can only name a table row)."""
        values = np.array(self.values, dtype=np.float64).reshape(-1, self.outputs)
        bad = np.zeros(values.shape, dtype=bool)
        why = ""
        if self.combine.arithmetic is Arithmetic.FLOAT32:
            with np.errstate(over="ignore"):
                bad = values.astype(np.float32).astype(np.float64) != values
            why = "is not a float32 value (float32 arithmetic)"
        if not bad.any() and self.combine.link is Link.IDENTITY:
            bad = (values < 0) | (values > 1)
            why = "is outside [0, 1]: an identity link needs leaf values in [0, 1]"
        if bad.any():
            row, k = (int(i) for i in np.argwhere(bad)[0])
            path, listed = self.value_paths[row]
            raise _fail(f"{path}[{k}]" if listed else path, f"{float(values[row, k])!r} {why}")
        return values


_ENSEMBLE_LEAF_KEYS = {"value", "id", "samples"}
_ENSEMBLE_TOP_KEYS = {"name", "version", "features", "actions", "ensemble", "trees"}
_ENSEMBLE_DEFAULTS: dict[str, Any] = {
    "arithmetic": "float64",
    "rule": "proba",
    "divisor": 1,
    "scale": 1,
}
_ENSEMBLE_KEYS = {"arithmetic", "link", "rule", "base", "divisor", "scale"}


def _check_names(name: Any, version: Any) -> None:
    for key, v in (("name", name), ("version", version)):
        if not isinstance(v, str):
            raise _fail(key, "must be a string")
        problem = unprintable(v)
        if problem is not None:
            raise _fail(key, f"{v!r} holds {problem}")


def ensemble_combine(spec: Any, n_actions: int) -> Combine:
    """How the leaf values of an ensemble combine, from the source's ``ensemble`` object
    (defaults filled in; the logistic link has one output, every other link one per action)."""
    from clefprove.errors import ClefFormatError
    from clefprove.model.clef import parse_combine

    if not isinstance(spec, dict):
        raise _fail("ensemble", "must be an object")
    _check_keys(spec, _ENSEMBLE_KEYS, "ensemble")
    link = _require(spec, "link", "ensemble")
    outputs = 1 if link in {str(v) for v in Link if v.single} else n_actions
    raw = {**_ENSEMBLE_DEFAULTS, "base": [0.0] * outputs, **spec, "outputs": outputs}
    try:
        return parse_combine(raw, n_actions, "ensemble")
    except ClefFormatError as exc:
        raise ModelSourceError(str(exc)) from None


def assemble_tree(
    name: Any,
    version: Any,
    features: tuple[Feature, ...],
    actions: tuple[str, ...],
    nodes: np.ndarray,
    membership: np.ndarray,
    max_depth: int,
    meta: dict[str, Any],
    origin: str,
) -> Model:
    """A single-tree model from its pre-order node records (built from JSON source or by an
    importer), through the binary encoder and loader and their validation."""
    from clefprove.model.clef import encode_clef, load_encoded

    _check_names(name, version)
    check_name_clashes(features, actions)
    data = encode_clef(name, version, features, actions, nodes, membership, max_depth, meta)
    model = load_encoded(data, features, actions, origin=origin)
    assert isinstance(model, Model)
    return dataclasses.replace(model, from_source=True)


def assemble_ensemble(
    name: Any,
    version: Any,
    features: tuple[Feature, ...],
    actions: tuple[str, ...],
    combine: Combine,
    nodes: np.ndarray,
    membership: np.ndarray,
    sizes: np.ndarray,
    depths: np.ndarray,
    values: np.ndarray,
    meta: dict[str, Any],
    origin: str,
) -> Model | Ensemble:
    """An ensemble from its trees' pre-order node records and leaf value rows (built from JSON
    source or by an importer), through the binary encoder and loader and their validation."""
    from clefprove.errors import ClefFormatError
    from clefprove.model.clef import encode_ensemble, load_encoded

    _check_names(name, version)
    data = encode_ensemble(
        name, version, features, actions, nodes, membership, sizes, depths, values, combine, meta
    )
    try:
        model = load_encoded(data, features, actions, origin=origin)
        return dataclasses.replace(model, from_source=True)
    except ClefFormatError as exc:  # value checks that depend on the whole ensemble
        raise ModelSourceError(str(exc).removeprefix(f"{origin}: ")) from None


def _compile_ensemble(obj: dict[str, Any], origin: str) -> Model | Ensemble:
    _check_keys(obj, _ENSEMBLE_TOP_KEYS | {"description", "metadata"}, "")
    name = obj.get("name", Path(origin).stem if origin != "<json>" else "model")
    version = obj.get("version", "0.0.0")
    _check_names(name, version)
    features = parse_features(_require(obj, "features", ""))
    actions = parse_actions(_require(obj, "actions", ""))
    combine = ensemble_combine(_require(obj, "ensemble", ""), len(actions))
    if combine.scale != 1 and combine.link not in (Link.LOGISTIC, Link.ONNX_LOGISTIC):
        # Only the logistic links scale the score: another link would silently ignore it.
        raise _fail(
            "ensemble.scale",
            f"the {combine.link} link has no scale (only logistic and onnx_logistic have one)",
        )
    builder = _EnsembleBuilder(features, actions, combine)
    builder.build_trees(_require(obj, "trees", ""))
    meta: dict[str, Any] = {k: obj[k] for k in ("description", "metadata") if k in obj}
    return assemble_ensemble(
        name,
        version,
        features,
        actions,
        combine,
        np.array(builder.all_records, dtype=NODE_DTYPE),
        np.frombuffer(bytes(builder.membership), dtype=np.uint8),
        np.array(builder.sizes),
        np.array(builder.depths),
        builder.value_table(),
        meta,
        origin,
    )


def compile_source(obj: Any, origin: str = "<json>") -> Model | Ensemble:
    """Validate a parsed JSON model source and compile it into a :class:`Model` (or, for a
    source with ``trees``, an :class:`~clefprove.model.ensemble.Ensemble`)."""
    if not isinstance(obj, dict):
        raise _fail("", "a model source must be a JSON object")
    if "trees" in obj or "ensemble" in obj:
        return _compile_ensemble(obj, origin)
    _check_keys(obj, _TOP_KEYS, "")
    name = obj.get("name", Path(origin).stem if origin != "<json>" else "model")
    version = obj.get("version", "0.0.0")
    _check_names(name, version)
    features = parse_features(_require(obj, "features", ""))
    actions = parse_actions(_require(obj, "actions", ""))
    check_name_clashes(features, actions)
    builder = _TreeBuilder(features, actions)
    builder.build(_require(obj, "tree", ""))
    nodes = np.array(builder.records, dtype=NODE_DTYPE)
    membership = np.frombuffer(bytes(builder.membership), dtype=np.uint8)
    meta = {k: obj[k] for k in ("description", "metadata") if k in obj}
    return assemble_tree(
        name, version, features, actions, nodes, membership, builder.max_depth, meta, origin
    )


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (parsers disagree on which one wins)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` that refuses duplicate keys."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {json.dumps(key, allow_nan=False)}")
            seen.add(key)
    return out


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file; every failure is a one-line :class:`ModelSourceError`."""
    try:
        data = read_file_bounded(path, MAX_SOURCE_BYTES)
    except OSError as exc:
        raise ModelSourceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data is None:
        raise ModelSourceError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes")
    return parse_json_text(data, str(path))


def parse_json_text(data: bytes, origin: str) -> Any:
    """Parse JSON bytes (UTF-8, a leading BOM dropped, duplicate keys refused)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelSourceError(
            f"{origin}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise ModelSourceError(
            f"{origin}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except DuplicateKeyError as exc:
        raise ModelSourceError(f"{origin}: invalid JSON: {exc}") from None
    except ValueError as exc:  # an integer of more than 4300 digits (Python's conversion limit)
        raise ModelSourceError(f"{origin}: invalid JSON: {str(exc).split(':')[0]}") from None
    except RecursionError:
        raise ModelSourceError(f"{origin}: JSON nesting is too deep") from None


def load_source(path: str | os.PathLike[str]) -> Model | Ensemble:
    """Read, validate and compile a JSON model source file."""
    obj = read_json(path)
    try:
        return compile_source(obj, origin=str(path))
    except ModelSourceError as exc:
        raise ModelSourceError(f"{path}: {exc}") from None
