"""What the importers share: exact split conditions, the intermediate tree, feature specs.

Every importer reads its library's file into an intermediate tree of :class:`Split` and
:class:`Leaf` nodes whose splits are already in clefprove's form (``x <= cut`` goes left, over
float64 inputs), then :func:`build_model` turns it into a SPEC §2 JSON source and compiles it
with :func:`~clefprove.model.source.compile_source`, so validation is the same as for JSON.

A library's comparison (``float32(x) < t``, ``x == t``, ...) is turned into the set of float64
inputs that take its *true* branch.  For the six comparison modes that set is always an
interval ``(lo, hi]`` of the float64 line or its complement (see :class:`Interval`), which one
or two ``x <= cut`` splits express exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clefprove.errors import ImportModelError, ModelSourceError
from clefprove.frozen import frozen
from clefprove.model.ensemble import Combine, Ensemble
from clefprove.model.sklearn import float32_threshold, whole_threshold
from clefprove.model.types import MAX_TREE_DEPTH, Feature, FeatureType, Model

F64_MAX = float(np.finfo(np.float64).max)
INF = math.inf

#: Bounds of a feature that the model file does not bound: every finite float64.
WIDE_MIN, WIDE_MAX = -F64_MAX, F64_MAX

#: Most nodes an imported tree may expand to (``==`` splits duplicate a subtree).
MAX_IMPORT_NODES = 1_000_000

#: Largest input file an importer reads (model files of single trees are small).
MAX_FILE_BYTES = 256 * 1024 * 1024

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")


# --------------------------------------------------------------------------- conditions


@frozen
class Interval:
    """The float64 inputs that take a split's *true* branch: ``lo < x <= hi``, or the
    complement of that when ``negate``.  ``lo = -inf`` means no lower bound, ``hi = +inf`` no
    upper bound; an empty interval (``hi <= lo``) means no input at all."""

    lo: float
    hi: float
    negate: bool = False


NEVER = Interval(0.0, 0.0)
ALWAYS = Interval(0.0, 0.0, negate=True)


def _norm(cut: float) -> float:
    """A cut ``x <= c``: at or beyond the largest float64 it holds for every finite input."""
    return INF if cut >= F64_MAX else cut


def f32_leq_cut(t: float) -> float:
    """The cut ``c`` with ``float32(x) <= t  <=>  x <= c`` for every finite float64 ``x``."""
    return _norm(float32_threshold(t))


def f32_lt_cut(t32: float) -> float:
    """The cut ``c`` with ``float32(x) < t32  <=>  x <= c``, for a float32 value ``t32``."""
    if t32 == -INF:
        return -INF
    with np.errstate(over="ignore"):
        below = np.nextafter(np.float32(t32), np.float32(-np.inf))
    return _norm(float32_threshold(float(below)))


def f32_lt_cuts(t32: np.ndarray) -> np.ndarray:
    """:func:`f32_lt_cut` of every element of the float32 array *t32* (no NaN), vectorised
    (tests/model check it against the scalar function)."""
    from clefprove.model.sklearn import float32_thresholds

    t32 = np.asarray(t32, dtype=np.float32)
    with np.errstate(over="ignore"):
        below = np.nextafter(t32, np.float32(-np.inf))
        cut = float32_thresholds(below.astype(np.float64))
    cut = np.where(cut >= F64_MAX, INF, cut)
    return np.where(t32 == np.float32(-np.inf), -INF, cut)


def f64_leq_cut(t: float) -> float:
    return _norm(t)


def f64_lt_cut(t: float) -> float:
    return -INF if t == -INF else _norm(math.nextafter(t, -INF))


def condition(
    mode: str, t: float, leq: Callable[[float], float], lt: Callable[[float], float]
) -> Interval:
    """The :class:`Interval` of inputs for which ``cmp(x) MODE t`` is true.

    *leq* and *lt* give the cuts of ``cmp(x) <= t`` and ``cmp(x) < t`` (``cmp`` is how the
    library sees the input: float32 rounding, or none).  A NaN threshold compares false.
    """
    if math.isnan(t):
        return ALWAYS if mode == "BRANCH_NEQ" else NEVER
    if mode == "BRANCH_LEQ":
        return Interval(-INF, leq(t))
    if mode == "BRANCH_LT":
        return Interval(-INF, lt(t))
    if mode == "BRANCH_GT":
        return Interval(-INF, leq(t), negate=True)
    if mode == "BRANCH_GTE":
        return Interval(-INF, lt(t), negate=True)
    if mode == "BRANCH_EQ":
        return Interval(lt(t), leq(t))
    if mode == "BRANCH_NEQ":
        return Interval(lt(t), leq(t), negate=True)
    raise ImportModelError(f"unknown split mode {mode!r}")


def float32_condition(mode: str, t: float) -> Interval:
    """``float32(x) MODE float32(t)`` (ONNX float inputs, XGBoost): exact float64 interval."""
    with np.errstate(over="ignore"):
        t32 = float(np.float32(t))  # round to nearest, overflow to +-inf, NaN stays NaN
    return condition(mode, t32, f32_leq_cut, f32_lt_cut)


def float64_condition(mode: str, t: float) -> Interval:
    """``x MODE t`` compared in float64."""
    return condition(mode, float(t), f64_leq_cut, f64_lt_cut)


# --------------------------------------------------------------------------- the tree


@frozen(eq=False)
class Leaf:
    action: int
    confidence: float


@frozen(eq=False)
class ValueLeaf:
    """An ensemble tree's leaf: one value per output column."""

    values: tuple[float, ...]


@frozen(eq=False)
class Split:
    """``x[feature] <= cut`` goes left (float64); cut may be +-inf (then one side is empty)."""

    feature: int
    cut: float
    left: Tree
    right: Tree


@frozen(eq=False)
class SetSplit:
    """A categorical split: the codes in ``codes`` go left."""

    feature: int
    codes: frozenset[int]
    left: Tree
    right: Tree


Tree = Leaf | ValueLeaf | Split | SetSplit


def interval_split(feature: int, cond: Interval, true: Tree, false: Tree) -> Tree:
    """The tree that sends *cond*'s inputs to *true* and the others to *false*."""
    inside, outside = (false, true) if cond.negate else (true, false)
    lo, hi = cond.lo, cond.hi
    if hi == -INF or lo >= hi:
        return outside
    if lo == -INF and hi == INF:
        return inside
    if lo == -INF:
        return Split(feature, hi, inside, outside)
    if hi == INF:
        return Split(feature, lo, outside, inside)
    return Split(feature, lo, outside, Split(feature, hi, inside, outside))


def walk(
    root: int,
    children: Callable[[int], tuple[int, int] | None],
    make: Callable[[int, Tree | None, Tree | None], Tree],
    what: str = "node",
) -> Tree:
    """Build the tree below node *root* of a library's node table, bottom-up, without recursion.

    *children(i)* gives (first, second) child indices or None for a leaf; *make(i, a, b)* builds
    node *i* from its children's trees (None, None for a leaf).  Cycles and absurd depths in a
    crafted file are errors; a node reached twice is converted once (and counted twice).
    """
    done: dict[int, Tree] = {}
    limit = 4 * MAX_TREE_DEPTH
    stack: list[tuple[int, int]] = [(root, 0)]
    on_path: set[int] = set()
    while stack:
        i, depth = stack[-1]
        if i in done:
            stack.pop()
            continue
        kids = children(i)
        if kids is None:
            done[i] = make(i, None, None)
            stack.pop()
            continue
        pending = [k for k in kids if k not in done]
        if not pending:
            done[i] = make(i, done[kids[0]], done[kids[1]])
            on_path.discard(i)
            stack.pop()
            continue
        if i in on_path:
            raise ImportModelError(f"{what} {i}: the tree has a cycle")
        on_path.add(i)
        if depth >= limit:
            raise ImportModelError(f"{what} {i}: the tree is deeper than {limit}")
        for k in pending:
            if k in on_path:
                raise ImportModelError(f"{what} {i}: the tree has a cycle")
            stack.append((k, depth + 1))
    return done[root]


# --------------------------------------------------------------------------- to JSON

# What a path has learnt about one feature: numeric ``lo < x <= hi``, or the possible codes.
_Range = tuple[float, float] | frozenset[int]


def _initial_range(f: Feature) -> _Range:
    """The inputs of *f* after clipping into its domain (clefprove clips before deciding)."""
    if f.type is FeatureType.CATEGORICAL:
        return frozenset(range(len(f.values)))
    return (math.nextafter(f.min, -INF), f.max)


def _decide(f: Feature, known: _Range, t: Split | SetSplit) -> tuple[str, _Range, _Range]:
    """('left' | 'right' | 'both', what the left branch knows, what the right one knows)."""
    if isinstance(known, frozenset):
        if isinstance(t, SetSplit):
            go_left = frozenset(c for c in known if c in t.codes)
        else:
            go_left = frozenset(c for c in known if c <= t.cut)
        go_right = known - go_left
        side = "both" if go_left and go_right else ("left" if go_left else "right")
        return side, go_left, go_right
    lo, hi = known
    if isinstance(t, SetSplit):  # pragma: no cover - importers check the feature type
        raise ImportModelError(f"feature '{f.name}' has a categorical split but is {f.type}")
    cut = t.cut
    if cut >= hi:
        return "left", known, known
    if cut <= lo:
        return "right", known, known
    if f.type in (FeatureType.INT, FeatureType.BOOL):
        if math.floor(cut) <= lo:
            return "right", known, known  # no whole number in (lo, cut]
        if math.floor(hi) <= cut:
            return "left", known, known  # no whole number in (cut, hi]
    return "both", (lo, cut), (cut, hi)


def _split_json(f: Feature, t: Split | SetSplit, left_codes: _Range) -> dict[str, Any]:
    if f.type is FeatureType.CATEGORICAL:
        assert isinstance(left_codes, frozenset)
        return {"feature": f.name, "in": [f.values[c] for c in sorted(left_codes)]}
    assert isinstance(t, Split)
    if f.type is FeatureType.FLOAT:
        return {"feature": f.name, "threshold": t.cut}
    if f.type is FeatureType.BOOL:
        return {"feature": f.name, "threshold": 0.5}
    return {"feature": f.name, "threshold": whole_threshold(t.cut)}


def to_json(tree: Tree, features: Sequence[Feature], actions: Sequence[str]) -> dict[str, Any]:
    """The SPEC §2 JSON tree of *tree*.

    Splits that a path has already decided (or that the feature's domain decides) are dropped,
    which is exact because clefprove clips inputs into the domain before deciding.  For a
    categorical split, only the codes still possible on the path are listed in ``in``.
    """
    root: dict[str, Any] = {}
    start = tuple(_initial_range(f) for f in features)
    stack: list[tuple[Tree, dict[str, Any], tuple[_Range, ...]]] = [(tree, root, start)]
    emitted = 0
    while stack:
        t, out, known = stack.pop()
        emitted += 1
        if emitted > MAX_IMPORT_NODES:
            raise ImportModelError(
                f"the converted tree has more than {MAX_IMPORT_NODES} nodes: "
                "too many ==/!= or zero-as-missing splits duplicate their subtrees"
            )
        while not isinstance(t, Leaf | ValueLeaf):
            f = features[t.feature]
            side, k_left, k_right = _decide(f, known[t.feature], t)
            if side == "left":
                t = t.left
                continue
            if side == "right":
                t = t.right
                continue
            out.update(_split_json(f, t, k_left))
            out["left"], out["right"] = {}, {}
            left_known = (*known[: t.feature], k_left, *known[t.feature + 1 :])
            right_known = (*known[: t.feature], k_right, *known[t.feature + 1 :])
            stack.append((t.right, out["right"], right_known))
            stack.append((t.left, out["left"], left_known))
            break
        else:
            if isinstance(t, ValueLeaf):
                out["value"] = list(t.values)
            else:
                out["action"] = actions[t.action]
                out["confidence"] = t.confidence
    return root


# --------------------------------------------------------------------------- features, actions


@frozen
class FeatureSpec:
    """The ``--features`` file: declarations in column order, actions in class order."""

    features: list[dict[str, Any]] | None
    actions: list[str] | None
    name: str | None
    version: str | None
    description: str | None = None


_SPEC_KEYS = {"features", "actions", "name", "version", "description"}


def read_feature_spec(path: str | os.PathLike[str]) -> FeatureSpec:
    """Read and check a ``--features`` JSON file: its shape, then its feature and action
    declarations (a mistake names the file and the JSON path in it); whether they fit the
    model (columns, names, classes) is checked by :func:`resolve_features` and the importers."""
    from clefprove.model.source import read_json

    try:
        obj = read_json(path)
    except ModelSourceError as exc:
        raise ImportModelError(str(exc)) from None
    if not isinstance(obj, dict):
        raise ImportModelError(f"{path}: a features spec must be a JSON object")
    unknown = sorted(set(obj) - _SPEC_KEYS)
    if unknown:
        raise ImportModelError(
            f"{path}: unknown key '{unknown[0]}' (expected features, actions, name, version)"
        )
    feats, actions = obj.get("features"), obj.get("actions")
    if feats is not None and (not isinstance(feats, list) or not feats):
        raise ImportModelError(f"{path}: 'features' must be a non-empty list of declarations")
    if actions is not None and (
        not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions)
    ):
        raise ImportModelError(f"{path}: 'actions' must be a non-empty list of action names")
    for key in ("name", "version", "description"):
        if key in obj and not isinstance(obj[key], str):
            raise ImportModelError(f"{path}: '{key}' must be a string")
    # The declarations themselves, here, so that a mistake names this file (not the model's,
    # which holds no declaration) and its JSON path.
    from clefprove.model.features import parse_actions, parse_features

    try:
        if feats is not None:
            parse_features(feats)
        if actions is not None:
            parse_actions(actions)
    except ModelSourceError as exc:
        raise ImportModelError(f"{path}: {exc}") from None
    return FeatureSpec(feats, actions, obj.get("name"), obj.get("version"), obj.get("description"))


def wide_float(name: str) -> dict[str, Any]:
    """A float feature over every finite float64 (no bounds known)."""
    return {"name": name, "type": "float", "min": WIDE_MIN, "max": WIDE_MAX, "default": 0.0}


def resolve_features(
    spec: FeatureSpec | None,
    n_columns: int,
    derived: Callable[[], list[dict[str, Any]]],
    model_names: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], tuple[Feature, ...]]:
    """Declarations for the model's *n_columns* inputs: the spec's, else *derived()*.

    Declared names must equal the names the file gives its columns (a guard against a wrong
    column order), unless some of those are not valid (or reserved) feature names, which the
    spec renames.
    """
    from clefprove.model.features import RESERVED_FEATURE_NAMES, parse_features

    if spec is not None and spec.features is not None:
        feats = [dict(f) if isinstance(f, dict) else f for f in spec.features]
        if len(feats) != n_columns:
            raise ImportModelError(
                f"the model reads {n_columns} input columns but the features spec declares "
                f"{len(feats)}"
            )
        if model_names and all(
            n.isidentifier() and n not in RESERVED_FEATURE_NAMES for n in model_names
        ):
            declared = [f.get("name") if isinstance(f, dict) else None for f in feats]
            if list(model_names) != declared:
                raise ImportModelError(
                    "declared feature names do not match the model's feature names "
                    f"{list(model_names)}"
                )
    else:
        feats = derived()
    try:
        parsed = parse_features(feats)
    except ModelSourceError as exc:
        hint = "" if spec is not None and spec.features else " (declare them with --features)"
        raise ImportModelError(f"{exc}{hint}") from None
    return feats, parsed


def check_name(name: str, what: str) -> str:
    if not name.isidentifier():
        raise ImportModelError(
            f"{what} {name!r} is not a valid feature name (letters, digits, _): "
            "declare the features with --features"
        )
    return name


def label_action(label: Any, index: int) -> str:
    """The default action name of a class label: itself when it is an identifier."""
    if isinstance(label, str) and label.isidentifier():
        return label
    if isinstance(label, int | np.integer):
        return f"class_{int(label)}" if label >= 0 else f"class_m{-int(label)}"
    return f"class_{index}"


def resolve_actions(spec: FeatureSpec | None, labels: Sequence[Any]) -> list[str]:
    """Action names in class order: the spec's, else derived from the class labels."""
    if spec is not None and spec.actions is not None:
        if len(spec.actions) != len(labels):
            raise ImportModelError(
                f"the model has {len(labels)} classes but the features spec names "
                f"{len(spec.actions)} actions"
            )
        return list(spec.actions)
    names = [label_action(lab, i) for i, lab in enumerate(labels)]
    if len(set(names)) != len(names):
        names = [f"class_{i}" for i in range(len(labels))]
    return names


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def refuse_pickle(path: str | os.PathLike[str], data: bytes, how_to_save: str) -> None:
    """Refuse a pickle (clefprove never unpickles files), saying how to save the model instead."""
    if data[:1] == b"\x80":
        raise ImportModelError(
            f"{path}: looks like a pickle; clefprove never unpickles files: {how_to_save}"
        )


def require_categorical(features: Sequence[Feature], columns: Iterable[int], library: str) -> None:
    """Every column that the tree splits on categorically must be declared categorical."""
    for j in columns:
        if features[j].type is not FeatureType.CATEGORICAL:
            raise ImportModelError(
                f"feature '{features[j].name}' has categorical splits: declare it categorical "
                f"(vocabulary position = {library} category code)"
            )


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a model file; every failure is a one-line :class:`ImportModelError`."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ImportModelError(f"{path}: is a directory, not a model file")
        with open(p, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ImportModelError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ImportModelError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    if not data:
        raise ImportModelError(f"{path}: the file is empty")
    return data


def build_model(
    tree: Tree,
    features_json: list[dict[str, Any]],
    features: tuple[Feature, ...],
    actions: list[str],
    spec: FeatureSpec | None,
    default_name: str,
    origin: dict[str, Any],
) -> Model:
    """Compile the imported tree through :func:`compile_source` (shared validation)."""
    from clefprove.model.source import compile_source

    source: dict[str, Any] = {
        "name": (spec.name if spec and spec.name else default_name),
        "version": (spec.version if spec and spec.version else "0.0.0"),
        "features": features_json,
        "actions": actions,
        "tree": to_json(tree, features, actions),
        "metadata": {"imported_from": origin},
    }
    if spec is not None and spec.description:
        source["description"] = spec.description
    try:
        model = compile_source(source, origin=f"<{origin.get('format', 'import')}>")
    except ModelSourceError as exc:
        raise ImportModelError(f"the converted model is invalid: {exc}") from None
    assert isinstance(model, Model)  # a source with one "tree" compiles to a single tree
    return model


def build_ensemble(
    trees: Sequence[Tree],
    features_json: list[dict[str, Any]],
    features: tuple[Feature, ...],
    actions: list[str],
    combine: dict[str, Any],
    spec: FeatureSpec | None,
    default_name: str,
    origin: dict[str, Any],
) -> Model | Ensemble:
    """Compile imported ensemble trees: straight to node records (:func:`_direct_ensemble`),
    or, when that route steps aside, through the JSON source and :func:`compile_source`, which
    then words the error.  Both give the same model, byte for byte
    (tests/model/test_import_direct.py)."""
    from clefprove.model.source import compile_source

    try:
        return _direct_ensemble(
            trees, features_json, features, actions, combine, spec, default_name, origin
        )
    except (_NotDirect, ModelSourceError):
        pass
    source: dict[str, Any] = {
        "name": (spec.name if spec and spec.name else default_name),
        "version": (spec.version if spec and spec.version else "0.0.0"),
        "features": features_json,
        "actions": actions,
        "ensemble": combine,
        "trees": [to_json(t, features, actions) for t in trees],
        "metadata": {"imported_from": origin},
    }
    if spec is not None and spec.description:
        source["description"] = spec.description
    try:
        return compile_source(source, origin=f"<{origin.get('format', 'import')}>")
    except ModelSourceError as exc:
        raise ImportModelError(f"the converted ensemble is invalid: {exc}") from None


def model_name(path: str | os.PathLike[str]) -> str:
    return Path(path).stem or "model"


def dumps_compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


# --------------------------------------------------------------------------- to node records


class _NotDirect(Exception):
    """Something the JSON route would refuse or word: let it."""


def _direct_ensemble(
    trees: Sequence[Tree],
    features_json: list[dict[str, Any]],
    features: tuple[Feature, ...],
    actions: list[str],
    combine: dict[str, Any],
    spec: FeatureSpec | None,
    default_name: str,
    origin: dict[str, Any],
) -> Model | Ensemble:
    """The ensemble :func:`build_ensemble`'s JSON source compiles to, from the trees directly:
    the same pruning as :func:`to_json` (decided splits dropped, categorical ``in`` sets cut to
    the codes still possible), emitted as the pre-order node records, membership rows and
    value rows that ``source._EnsembleBuilder`` makes of that JSON, then the same
    ``assemble_ensemble`` (encoder, loader and their validation).  Raises :class:`_NotDirect`
    on anything the JSON builder would reject (a non-finite number, a value row of the wrong
    width, an action leaf, a too deep or too large tree): that route then reports it.
    *features* are ``parse_features(features_json)`` (the caller's: not parsed again)."""
    from clefprove.model.features import parse_actions
    from clefprove.model.source import ensemble_combine
    from clefprove.model.types import NODE_DTYPE, NodeKind

    if not trees:
        raise _NotDirect
    acts = parse_actions(actions)
    comb = ensemble_combine(combine, len(acts))
    outputs = comb.outputs
    start = tuple(_initial_range(f) for f in features)
    kinds = [f.type for f in features]
    all_records: list[tuple[float, int, int, int, int, int, int]] = []
    membership = bytearray()
    rows: dict[bytes, int] = {}
    values: list[float] = []
    sizes: list[int] = []
    depths: list[int] = []
    leaf_kind, num_kind = int(NodeKind.LEAF), int(NodeKind.NUMERIC)
    cat_kind = int(NodeKind.CATEGORICAL)
    for tree in trees:
        records: list[list[Any]] = []
        max_depth = 0
        # (tree, what the path knows beyond *start*: feature -> range, depth in the emitted
        # tree, parent whose right to patch)
        stack: list[tuple[Tree, dict[int, _Range], int, int]] = [(tree, {}, 0, -1)]
        emitted = 0
        while stack:
            t, known, depth, parent = stack.pop()
            emitted += 1
            if emitted > MAX_IMPORT_NODES or depth > MAX_TREE_DEPTH:
                raise _NotDirect
            index = len(records)
            if parent >= 0:
                records[parent][2] = index
            if depth > max_depth:
                max_depth = depth
            while not isinstance(t, Leaf | ValueLeaf):
                f = features[t.feature]
                range_ = known.get(t.feature)
                side, k_left, k_right = _decide(
                    f, start[t.feature] if range_ is None else range_, t
                )
                if side == "left":
                    t = t.left
                elif side == "right":
                    t = t.right
                else:
                    break
            if isinstance(t, Leaf):
                raise _NotDirect  # an action leaf in an ensemble: the JSON builder says so
            if isinstance(t, ValueLeaf):
                if len(t.values) != outputs:
                    raise _NotDirect
                for v in t.values:
                    if not (isinstance(v, float) or type(v) is int):
                        raise _NotDirect
                    x = float(v)
                    if not math.isfinite(x):
                        raise _NotDirect
                    values.append(x)
                row = len(values) // outputs - 1
                records.append([0.0, index, index, row, 0, leaf_kind, depth])
                continue
            kind = kinds[t.feature]
            if kind is FeatureType.CATEGORICAL:
                assert isinstance(k_left, frozenset)
                bits = bytearray(len(f.values))
                for c in k_left:
                    bits[c] = 1
                key = bytes(bits)
                offset = rows.get(key)
                if offset is None:
                    offset = len(membership)
                    membership.extend(key)
                    rows[key] = offset
                records.append([0.0, index + 1, 0, offset, t.feature, cat_kind, depth])
            else:
                assert isinstance(t, Split)
                if kind is FeatureType.FLOAT:
                    cut: Any = t.cut
                elif kind is FeatureType.BOOL:
                    cut = 0.5
                else:
                    cut = whole_threshold(t.cut)
                if not (isinstance(cut, float) or type(cut) is int):
                    raise _NotDirect
                thr = float(cut)
                if not math.isfinite(thr):
                    raise _NotDirect
                records.append([thr, index + 1, 0, 0, t.feature, num_kind, depth])
            left_known = {**known, t.feature: k_left}
            right_known = {**known, t.feature: k_right}
            stack.append((t.right, right_known, depth + 1, index))
            stack.append((t.left, left_known, depth + 1, -1))
        all_records.extend(tuple(r) for r in records)
        sizes.append(len(records))
        depths.append(max_depth)
        if len(all_records) > 2**32 - 1:
            raise _NotDirect
    return _assemble(
        spec,
        default_name,
        origin,
        features,
        acts,
        comb,
        np.array(all_records, dtype=NODE_DTYPE),
        np.frombuffer(bytes(membership), dtype=np.uint8),
        np.array(sizes),
        np.array(depths),
        np.array(values, dtype=np.float64).reshape(-1, outputs),
    )


def _assemble(
    spec: FeatureSpec | None,
    default_name: str,
    origin: dict[str, Any],
    feats: tuple[Feature, ...],
    acts: tuple[str, ...],
    comb: Combine,
    nodes: np.ndarray,
    membership: np.ndarray,
    sizes: np.ndarray,
    depths: np.ndarray,
    values: np.ndarray,
) -> Model | Ensemble:
    """``assemble_ensemble`` of the records of :func:`_direct_ensemble` or
    :func:`direct_numeric_ensemble`, named and described as the JSON source would be."""
    from clefprove.model.source import assemble_ensemble

    name = spec.name if spec and spec.name else default_name
    version = spec.version if spec and spec.version else "0.0.0"
    meta: dict[str, Any] = {}
    if spec is not None and spec.description:
        meta["description"] = spec.description
    meta["metadata"] = {"imported_from": origin}
    return assemble_ensemble(
        name,
        version,
        feats,
        acts,
        comb,
        nodes,
        membership,
        sizes,
        depths,
        values,
        meta,
        f"<{origin.get('format', 'import')}>",
    )


@frozen
class NumericTrees:
    """Every tree of an ensemble as flat node arrays, numbered across the concatenated trees
    (an importer's vectorised reading of its file): ``left[i] < 0`` marks a leaf; a split
    sends ``x[feature[i]] <= cut[i]`` left (float64; ``-inf``: never, ``+inf``: always; no
    NaN); a leaf's value goes to output column ``group[t]`` of its tree ``t``, the others 0."""

    left: np.ndarray  # int64, global child indices (a split's)
    right: np.ndarray  # int64
    feature: np.ndarray  # int64 (a split's)
    cut: np.ndarray  # float64 (a split's)
    value: np.ndarray  # float64 (a leaf's)
    roots: np.ndarray  # int64, one per tree
    group: np.ndarray  # int64, one per tree


def direct_numeric_ensemble(
    trees: NumericTrees,
    features: tuple[Feature, ...],
    actions: list[str],
    combine: dict[str, Any],
    spec: FeatureSpec | None,
    default_name: str,
    origin: dict[str, Any],
    proper: bool = True,
) -> Model | Ensemble | None:
    """:func:`_direct_ensemble` of the trees behind *trees* (what ``walk`` builds of them,
    ``interval_split`` conditions ``x <= cut``), vectorised over the nodes of all trees at
    once, level by level: the same pruning (a split the path's knowledge ``lo < x <= hi``
    decides is dropped), the same pre-order records, value rows and per-tree sizes and depths,
    byte for byte (tests/model/test_import_arrays.py).  Only for float features and, with
    *proper*, proper trees (every node below at most one split, no root below one); without
    it a node below several splits is expanded on each path, as ``walk``'s shared subtree is
    (LightGBM's zero band), and a cycle ends in the depth limit.  None on anything else
    (another feature type, a non-finite leaf value, a tree deeper than ``MAX_TREE_DEPTH``, an
    expansion beyond a few times the nodes given): the caller then takes the per-node route,
    which also words any error."""
    from clefprove.model.features import parse_actions
    from clefprove.model.source import ensemble_combine
    from clefprove.model.types import NODE_DTYPE, NodeKind

    if any(f.type is not FeatureType.FLOAT for f in features):
        return None
    acts = parse_actions(actions)
    comb = ensemble_combine(combine, len(acts))
    outputs = comb.outputs
    left, right, feature, cut = trees.left, trees.right, trees.feature, trees.cut
    roots, group = trees.roots, trees.group
    n, n_trees = left.shape[0], roots.shape[0]
    if n_trees == 0 or n == 0 or group.shape[0] != n_trees:
        return None
    if group.min() < 0 or group.max() >= outputs:
        return None
    split = left >= 0
    kids = np.concatenate((left[split], right[split]))
    if kids.size:
        if kids.min() < 0 or kids.max() >= n:
            return None
        below = np.bincount(kids, minlength=n)
        if proper and (below.max() > 1 or below[roots].any()):
            return None
        fs = feature[split]
        if fs.min() < 0 or fs.max() >= len(features) or np.isnan(cut[split]).any():
            return None
    feat0 = np.where(split, feature, 0)
    lo0 = np.array([math.nextafter(f.min, -INF) for f in features], dtype=np.float64)
    hi0 = np.array([f.max for f in features], dtype=np.float64)
    # the frontier: one emitted node per entry (original node, its tree, emitted depth,
    # original depth, what its path knows of every feature)
    node = roots.astype(np.int64)
    tree = np.arange(n_trees, dtype=np.int64)
    depth = np.zeros(n_trees, dtype=np.int64)
    odepth = np.zeros(n_trees, dtype=np.int64)
    # (array methods, not np.tile / np.flatnonzero: their Python wrappers cost more than
    # the work on these small arrays, a few times per level)
    lo = lo0[None, :].repeat(n_trees, axis=0)
    hi = hi0[None, :].repeat(n_trees, axis=0)
    s_node: list[np.ndarray] = []
    s_tree: list[np.ndarray] = []
    s_depth: list[np.ndarray] = []
    s_left: list[np.ndarray] = []  # emitted left child, -1 for a leaf
    levels: list[tuple[int, int]] = []
    next_id = 0
    limit = 8 * n + 64  # emitted nodes (a proper tree emits at most n)
    while node.size:
        if next_id + node.size > limit:
            return None
        rows = np.arange(node.size)
        for _ in range(n + 1):  # follow the splits the path decides
            inner = split[node]
            f = feat0[node]
            c = cut[node]
            go_left = inner & (c >= hi[rows, f])
            go_right = inner & ~go_left & (c <= lo[rows, f])
            move = go_left | go_right
            if not move.any():
                break
            node = np.where(go_left, left[node], np.where(go_right, right[node], node))
            odepth = odepth + move
        else:  # pragma: no cover - a proper tree has no cycle
            return None
        if int(odepth.max()) > MAX_TREE_DEPTH:
            return None
        m = node.size
        levels.append((next_id, next_id + m))
        next_id += m
        sp = inner.nonzero()[0]
        lc = np.full(m, -1, dtype=np.int64)
        lc[sp] = next_id + np.arange(sp.size)
        s_node.append(node)
        s_tree.append(tree)
        s_depth.append(depth)
        s_left.append(lc)
        if not sp.size:
            break
        at = node[sp]
        f, c, k = feat0[at], cut[at], np.arange(sp.size)
        lo_s, hi_s = lo[sp], hi[sp]
        hi_left = hi_s.copy()
        hi_left[k, f] = c
        lo_right = lo_s.copy()
        lo_right[k, f] = c
        node = np.concatenate((left[at], right[at]))
        tree = np.concatenate((tree[sp], tree[sp]))
        depth = depth[sp] + 1
        depth = np.concatenate((depth, depth))
        odepth = odepth[sp] + 1
        odepth = np.concatenate((odepth, odepth))
        lo = np.concatenate((lo_s, lo_right))
        hi = np.concatenate((hi_left, hi_s))
    all_node = np.concatenate(s_node)
    all_tree = np.concatenate(s_tree)
    all_depth = np.concatenate(s_depth)
    all_left = np.concatenate(s_left)
    if int(all_depth.max()) > MAX_TREE_DEPTH:
        return None
    inner = all_left >= 0
    # a split's right child is emitted right after its left one's level block: left + count
    # of the splits of its level
    all_right = np.full(next_id, -1, dtype=np.int64)
    for a, b in levels:
        sp = inner[a:b].nonzero()[0] + a
        all_right[sp] = all_left[sp] + sp.size
    size = np.ones(next_id, dtype=np.int64)
    for a, b in reversed(levels):
        sp = inner[a:b].nonzero()[0] + a
        size[sp] = 1 + size[all_left[sp]] + size[all_right[sp]]
    pre = np.zeros(next_id, dtype=np.int64)
    for a, b in levels:
        sp = inner[a:b].nonzero()[0] + a
        pre[all_left[sp]] = pre[sp] + 1
        pre[all_right[sp]] = pre[sp] + 1 + size[all_left[sp]]
    sizes = size[:n_trees]
    if int(sizes.max()) > MAX_IMPORT_NODES or next_id > 2**32 - 1:
        return None
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pos = starts[all_tree] + pre
    leaf = ~inner
    leaf_values = trees.value[all_node[leaf]]
    thresholds = cut[all_node[inner]]
    if not (np.isfinite(leaf_values).all() and np.isfinite(thresholds).all()):
        return None
    leaf_pos = pos[leaf]
    order = np.argsort(leaf_pos, kind="stable")
    row = np.empty(order.size, dtype=np.int64)
    row[order] = np.arange(order.size)
    values = np.zeros((order.size, outputs), dtype=np.float64)
    values[row, group[all_tree[leaf]]] = leaf_values
    nodes = np.zeros(next_id, dtype=NODE_DTYPE)
    nodes["value"][pos[inner]] = thresholds
    nodes["left"][pos] = np.where(inner, pre + 1, pre)
    nodes["right"][pos] = np.where(inner, pre[np.where(inner, all_right, 0)], pre)
    nodes["aux"][leaf_pos] = row
    nodes["feature"][pos[inner]] = feature[all_node[inner]]
    nodes["kind"][pos] = np.where(inner, int(NodeKind.NUMERIC), int(NodeKind.LEAF))
    nodes["depth"][pos] = all_depth
    depths = np.zeros(n_trees, dtype=np.int64)
    np.maximum.at(depths, all_tree, all_depth)
    return _assemble(
        spec,
        default_name,
        origin,
        features,
        acts,
        comb,
        nodes,
        np.zeros(0, dtype=np.uint8),
        sizes,
        depths,
        values,
    )
