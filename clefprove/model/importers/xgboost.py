"""Import a single-tree XGBoost ``binary:logistic`` model from its JSON or UBJSON file.

Read ``booster.save_model("m.json")`` (or ``"m.ubj"``) output; nothing is unpickled, and the
``xgboost`` package is not needed.  Semantics (docs/importers.md):

* XGBoost stores its input as float32 and goes left ("yes") when ``float32(x) < t`` with a
  float32 ``t``; each such split becomes the exact float64 split ``x <= cut``;
* a categorical split sends the categories in its set to the *right*;
* missing values never occur in clefprove inputs, so ``default_left`` is irrelevant;
* a leaf's margin is ``float32(base_margin + leaf)`` with ``base_margin = logit(base_score)``;
  ``p = 1 / (1 + exp(-margin))`` in float32 and the class is 1 iff ``p > 0.5`` (as
  ``XGBClassifier.predict``); the confidence is ``p`` for class 1 and ``1 - p`` for class 0.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
from typing import Any, ClassVar

import numpy as np

from clefprove.errors import ImportModelError
from clefprove.frozen import frozen
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers.common import (
    INF,
    NEVER,
    FeatureSpec,
    Interval,
    Leaf,
    NumericTrees,
    SetSplit,
    Tree,
    ValueLeaf,
    build_ensemble,
    build_model,
    check_name,
    direct_numeric_ensemble,
    f32_lt_cuts,
    file_digest,
    float32_condition,
    interval_split,
    model_name,
    read_file,
    refuse_pickle,
    require_categorical,
    resolve_actions,
    resolve_features,
    walk,
    wide_float,
)
from clefprove.model.types import MAX_VOCABULARY, Feature, FeatureType, Model

_SUPPORTED = ("binary:logistic",)
_ENSEMBLE_OBJECTIVES = ("binary:logistic", "multi:softprob", "multi:softmax")


def import_xgboost(
    path: str | os.PathLike[str], spec: FeatureSpec | None = None
) -> Model | Ensemble:
    """Convert the single-tree XGBoost model saved as JSON or UBJSON in *path*."""
    data = read_file(path)
    doc = _decode(data, path)
    try:
        return _convert(doc, spec, path, data)
    except ImportModelError as exc:
        raise ImportModelError(f"{path}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise ImportModelError(f"{path}: malformed XGBoost model ({_why(exc)})") from None


def _why(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]!r}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _decode(data: bytes, path: Any) -> Any:
    head = data.lstrip()[:1]
    if head == b"{" and data.lstrip()[1:2] in (b'"', b" ", b"\n", b"\r", b"\t", b"}"):
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # also: > 4300 digits
            raise ImportModelError(f"{path}: not an XGBoost JSON model ({_why(exc)})") from None
    if head == b"{":
        try:
            value, _ = _Ubj(data).value(0)
        except (IndexError, struct.error, ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ImportModelError(f"{path}: not an XGBoost UBJSON model ({_why(exc)})") from None
        return value
    refuse_pickle(path, data, "save the booster with booster.save_model('model.json')")
    raise ImportModelError(
        f"{path}: not an XGBoost JSON or UBJSON model (save it with "
        "booster.save_model('model.json'); the legacy binary format and dump_model output are "
        "not read)"
    )


class _Ubj:
    """A minimal UBJSON reader for XGBoost's ``.ubj`` files (objects, arrays, typed arrays)."""

    _FMT: ClassVar[dict[bytes, str]] = {
        b"i": ">b",
        b"U": ">B",
        b"I": ">h",
        b"l": ">i",
        b"L": ">q",
        b"d": ">f",
        b"D": ">d",
    }

    def __init__(self, data: bytes) -> None:
        self.data = data

    def _marker(self, pos: int) -> tuple[bytes, int]:
        m = self.data[pos : pos + 1]
        if not m:
            raise ValueError("truncated")
        return m, pos + 1

    def _scalar(self, m: bytes, pos: int) -> tuple[Any, int]:
        if m in self._FMT:
            fmt = self._FMT[m]
            size = struct.calcsize(fmt)
            (v,) = struct.unpack_from(fmt, self.data, pos)
            return v, pos + size
        if m == b"S" or m == b"H":
            n, pos = self._length(pos)
            raw = self.data[pos : pos + n]
            if len(raw) != n:
                raise ValueError("truncated string")
            return raw.decode("utf-8"), pos + n
        if m == b"C":
            return self.data[pos : pos + 1].decode("utf-8"), pos + 1
        if m == b"T":
            return True, pos
        if m == b"F":
            return False, pos
        if m == b"Z":
            return None, pos
        raise ValueError(f"unknown UBJSON marker {m!r} at byte {pos - 1}")

    def _length(self, pos: int) -> tuple[int, int]:
        m, pos = self._marker(pos)
        n, pos = self._scalar(m, pos)
        if not isinstance(n, int) or n < 0 or n > len(self.data):
            raise ValueError(f"bad length {n!r}")
        return n, pos

    def value(self, pos: int, depth: int = 0) -> tuple[Any, int]:
        if depth > 64:
            raise ValueError("nesting too deep")
        m, pos = self._marker(pos)
        if m == b"{":
            return self._object(pos, depth)
        if m == b"[":
            return self._array(pos, depth)
        return self._scalar(m, pos)

    def _container_header(self, pos: int) -> tuple[bytes | None, int | None, int]:
        typ = count = None
        if self.data[pos : pos + 1] == b"$":
            typ, pos = self.data[pos + 1 : pos + 2], pos + 2
        if self.data[pos : pos + 1] == b"#":
            count, pos = self._length(pos + 1)
        return typ, count, pos

    def _array(self, pos: int, depth: int) -> tuple[Any, int]:
        typ, count, pos = self._container_header(pos)
        if typ in self._FMT and count is not None:
            fmt = self._FMT[typ]
            size = struct.calcsize(fmt)
            end = pos + size * count
            if end > len(self.data):
                raise ValueError("truncated typed array")
            arr = np.frombuffer(self.data, dtype=np.dtype(fmt), count=count, offset=pos)
            return arr.tolist(), end
        out: list[Any] = []
        while True:
            if count is not None and len(out) == count:
                return out, pos
            if count is None and self.data[pos : pos + 1] == b"]":
                return out, pos + 1
            if typ is not None:
                v, pos = self._scalar(typ, pos)
            else:
                v, pos = self.value(pos, depth + 1)
            out.append(v)

    def _object(self, pos: int, depth: int) -> tuple[Any, int]:
        typ, count, pos = self._container_header(pos)
        out: dict[str, Any] = {}
        while True:
            if count is not None and len(out) == count:
                return out, pos
            if count is None and self.data[pos : pos + 1] == b"}":
                return out, pos + 1
            n, pos = self._length(pos)
            key = self.data[pos : pos + n].decode("utf-8")
            pos += n
            if typ is not None:
                v, pos = self._scalar(typ, pos)
            else:
                v, pos = self.value(pos, depth + 1)
            out[key] = v


def _float(v: Any) -> float:
    if isinstance(v, list):
        if len(v) != 1:
            raise ImportModelError(f"expected one base_score, got {v}")
        v = v[0]
    if isinstance(v, str):
        v = v.strip().strip("[]")
    return float(v)


def _convert(doc: Any, spec: FeatureSpec | None, path: Any, data: bytes) -> Model | Ensemble:
    if not isinstance(doc, dict) or "learner" not in doc:
        raise ImportModelError("not an XGBoost model (no 'learner' object)")
    learner = doc["learner"]
    objective = _objective(learner)
    booster = learner["gradient_booster"]
    if booster.get("name") != "gbtree":
        kind = booster.get("name")
        why = {
            "dart": "its trees are reweighted by dropout at prediction",
            "gblinear": "a linear model, not trees",
        }.get(str(kind), "not a tree booster clefprove reads")
        raise ImportModelError(
            f"booster '{kind}' is not supported ({why}); supported: booster 'gbtree' "
            "(train with booster='gbtree')"
        )
    doc, note = _at_best_iteration(doc)
    learner = doc["learner"]
    booster = learner["gradient_booster"]
    trees = booster["model"]["trees"]
    if len(trees) != 1 or objective != "binary:logistic":
        return _convert_ensemble(doc, spec, path, data, note)
    if objective not in _SUPPORTED:
        raise ImportModelError(
            f"objective '{objective}' is not supported (only binary:logistic classifiers)"
        )
    params = learner["learner_model_param"]
    if int(params.get("num_target", "1")) != 1:
        raise ImportModelError("multi-target models are not supported")
    n_columns = int(params["num_feature"])
    tree = trees[0]
    if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise ImportModelError("vector-leaf trees (multi_output_tree) are not supported")
    base = np.float32(_float(params["base_score"]))
    base_margin = _base_margin(base)

    lefts = [int(v) for v in tree["left_children"]]
    rights = [int(v) for v in tree["right_children"]]
    indices = [int(v) for v in tree["split_indices"]]
    conds = [float(v) for v in tree["split_conditions"]]
    n = len(lefts)
    if n == 0 or not len(rights) == len(indices) == len(conds) == n:
        raise ImportModelError("tree arrays have different lengths")
    types = [int(v) for v in tree.get("split_type", [0] * n)]
    cat_sets = _categories(tree, n)
    for i in range(n):
        if lefts[i] == -1:
            continue
        if not (0 <= lefts[i] < n and 0 <= rights[i] < n):
            raise ImportModelError(f"node {i}: child index out of range")
        if not 0 <= indices[i] < n_columns:
            raise ImportModelError(f"node {i}: split on feature {indices[i]} of {n_columns}")

    tops: dict[int, int] = {}
    for i, s in cat_sets.items():
        tops[indices[i]] = max(tops.get(indices[i], 0), max(s, default=0))
    cat_features = {indices[i] for i in range(n) if lefts[i] != -1 and types[i] == 1}
    feats_json, feats = _features(learner, booster["model"], n_columns, cat_features, tops, spec)
    actions = resolve_actions(spec, [0, 1])

    def leaf(i: int) -> Leaf:
        value = np.float32(conds[i])
        margin = np.float32(base_margin + value)
        if not math.isfinite(float(margin)):
            raise ImportModelError(f"leaf {i}: margin {float(margin)} is not finite")
        with np.errstate(over="ignore"):
            p = np.float32(1.0) / (np.float32(1.0) + np.exp(-margin))
        k = 1 if p > np.float32(0.5) else 0
        conf = float(p) if k == 1 else 1.0 - float(p)
        return Leaf(k, min(1.0, max(0.0, conf)))

    def make(i: int, left: Tree | None, right: Tree | None) -> Tree:
        if left is None or right is None:
            return leaf(i)
        if types[i] == 1:
            return SetSplit(indices[i], frozenset(cat_sets.get(i, ())), right, left)
        return interval_split(indices[i], float32_condition("BRANCH_LT", conds[i]), left, right)

    def children(i: int) -> tuple[int, int] | None:
        return None if lefts[i] == -1 else (lefts[i], rights[i])

    root = walk(0, children, make)
    origin = {
        "format": "xgboost",
        "file": os.path.basename(str(path)),
        "sha256": file_digest(data),
        "objective": learner["objective"]["name"],
        "base_score": float(base),
        "xgboost_version": ".".join(str(v) for v in doc.get("version", [])),
    }
    if note:
        origin["warnings"] = [note]
    return build_model(root, feats_json, feats, actions, spec, model_name(path), origin)


def _features(
    learner: dict[str, Any],
    booster_model: dict[str, Any],
    n_columns: int,
    cat_features: set[int],
    tops: dict[int, int],
    spec: FeatureSpec | None,
) -> tuple[list[dict[str, Any]], tuple[Feature, ...]]:
    """The declarations of the model's columns: the spec's, else derived from the file's
    names and types (*tops*: per column the largest category code its splits use), checked
    against the columns with categorical splits (*cat_features*) and recorded categories."""
    names = [str(v) for v in learner.get("feature_names") or []]
    ftypes = [str(v) for v in learner.get("feature_types") or []]
    if names and len(names) != n_columns:
        raise ImportModelError(f"{len(names)} feature names for {n_columns} features")
    recorded = _recorded_categories(booster_model, n_columns)

    def derived() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for j in range(n_columns):
            name = check_name(names[j], "feature name") if names else f"f{j}"
            ftype = ftypes[j] if j < len(ftypes) else "q"
            if ftype == "c" or j in cat_features:
                out.append(_categorical(name, tops.get(j, 0), recorded.get(j)))
            elif ftype == "int":
                lim = 2**53
                out.append({"name": name, "type": "int", "min": -lim, "max": lim, "default": 0})
            elif ftype == "i":
                out.append({"name": name, "type": "bool", "default": False})
            else:
                out.append(wide_float(name))
        return out

    feats_json, feats = resolve_features(spec, n_columns, derived, names or None)
    require_categorical(feats, cat_features, "XGBoost")
    _require_recorded_order(feats, recorded)
    return feats_json, feats


def _recorded_categories(booster_model: dict[str, Any], n_columns: int) -> dict[int, list[str]]:
    """Category names per column, as XGBoost 3.1+ records them for a model trained on pandas
    ``category`` columns (``cats.enc``: a column's code c is its c-th category; numbers are
    written as numbers, strings as UTF-8 bytes between offsets); {} when none are recorded."""
    enc = (booster_model.get("cats") or {}).get("enc") or []
    if not isinstance(enc, list) or not enc:
        return {}
    if len(enc) != n_columns:
        raise ImportModelError(f"categories recorded for {len(enc)} of {n_columns} features")
    out: dict[int, list[str]] = {}
    for j, column in enumerate(enc):
        if not isinstance(column, dict):
            raise ImportModelError(f"feature {j}: malformed recorded categories")
        values = column.get("values") or []
        offsets = column.get("offsets")
        if offsets:  # strings
            raw = bytes(int(v) for v in values)
            bounds = [int(v) for v in offsets]
            if bounds[0] != 0 or bounds[-1] != len(raw) or bounds != sorted(bounds):
                raise ImportModelError(f"feature {j}: recorded category offsets out of range")
            names = [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
        elif values:  # numbers
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                raise ImportModelError(f"feature {j}: recorded categories are not numbers")
            names = [str(v) for v in values]
        else:
            continue
        if len(set(names)) != len(names):
            raise ImportModelError(f"feature {j}: recorded categories are not distinct")
        out[j] = names
    return out


def _categorical(name: str, top: int, recorded: list[str] | None) -> dict[str, Any]:
    """The declaration of a categorical column whose splits use codes up to *top*: the
    categories the file records, code c the c-th (nothing else: ``predict`` on a DataFrame
    sends a category it did not record where no code of the file's goes); else the codes
    themselves, ``"0"`` to ``"top + 1"``, the last for every larger code."""
    if recorded is None:
        if top + 2 > MAX_VOCABULARY:
            raise ImportModelError(f"feature {name}: category code {top} is too large")
        return {
            "name": name,
            "type": "categorical",
            "values": [str(c) for c in range(top + 2)],
            "default": "0",
        }
    if top >= len(recorded):
        raise ImportModelError(
            f"feature {name}: a split uses category code {top}, beyond the {len(recorded)} "
            "categories the file records"
        )
    if len(recorded) > MAX_VOCABULARY:
        raise ImportModelError(f"feature {name}: {len(recorded)} categories are too many")
    return {"name": name, "type": "categorical", "values": recorded, "default": recorded[0]}


def _require_recorded_order(features: tuple[Feature, ...], recorded: dict[int, list[str]]) -> None:
    """A categorical column whose categories the file records must have them as its values,
    in their order (a spec's declaration too): XGBoost's code c is the c-th recorded category,
    the vocabulary's c-th value is what clefprove calls code c, and a category the file did
    not record decides otherwise in ``predict`` on a DataFrame than any code does."""
    for j, names in recorded.items():
        f = features[j]
        if f.type is FeatureType.CATEGORICAL and list(f.values) != names:
            raise ImportModelError(
                f"feature '{f.name}': the spec's values must be the categories the model "
                f"records, in their order: {names} (XGBoost's code c is the c-th of them)"
            )


def _objective(learner: dict[str, Any]) -> str:
    """The objective the model decides by: ``reg:logistic`` is ``binary:logistic`` (the same
    sigmoid of the same margin, and ``XGBClassifier.predict`` labels it ``p > 0.5`` as
    well; a Booster's predict gives ``p`` for both), unless the file says an
    ``XGBRegressor`` saved it (its ``scikit_learn`` attribute): that predict is a number,
    not a class, and stays unsupported."""
    name = str(learner["objective"]["name"])
    if name != "reg:logistic":
        return name
    attrs = learner.get("attributes") or {}
    try:
        meta = json.loads(attrs.get("scikit_learn", "{}")) if isinstance(attrs, dict) else {}
    except (ValueError, TypeError):
        meta = {}
    if isinstance(meta, dict) and meta.get("_estimator_type") == "regressor":
        return name
    return "binary:logistic"


def _at_best_iteration(doc: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """*doc* cut to the boosting rounds up to ``best_iteration`` (what early stopping
    records), with a note saying so; *doc* itself and no note when it has no such attribute
    or the attribute is its last round.

    ``XGBClassifier.predict`` (also of a model loaded with ``load_model``) uses only the
    rounds up to ``best_iteration`` (``iteration_range``); the trees after it are in the file
    but never decide."""
    learner = doc["learner"]
    attrs = learner.get("attributes") or {}
    raw = attrs.get("best_iteration") if isinstance(attrs, dict) else None
    if raw is None:
        return doc, None
    best = int(raw)
    booster = learner["gradient_booster"]
    model = booster["model"]
    trees = model["trees"]
    indptr = model.get("iteration_indptr")
    if best < 0:
        raise ImportModelError(f"best_iteration {best} is negative")
    if isinstance(indptr, list) and len(indptr) >= 2:
        rounds = len(indptr) - 1
        keep = int(indptr[best + 1]) if best + 1 < len(indptr) else len(trees)
    else:
        per = int(booster.get("gbtree_model_param", {}).get("num_parallel_tree", "1")) * max(
            1, int(learner["learner_model_param"].get("num_class", "0"))
        )
        rounds = -(-len(trees) // per)
        keep = (best + 1) * per
    if keep >= len(trees):
        return doc, None
    if keep <= 0:
        raise ImportModelError(f"best_iteration {best} keeps no tree")
    cut = dict(model, trees=trees[:keep])
    if "tree_info" in model:
        cut["tree_info"] = model["tree_info"][:keep]
    if isinstance(indptr, list):
        cut["iteration_indptr"] = indptr[: best + 2]
    new_booster = dict(booster, model=cut)
    new_learner = dict(learner, gradient_booster=new_booster)
    note = (
        f"the model stopped early (best_iteration {best} of {rounds} rounds): imported the "
        f"first {best + 1} rounds ({keep} of {len(trees)} trees), which XGBClassifier.predict "
        "uses; Booster.predict without iteration_range would use all of them"
    )
    return dict(doc, learner=new_learner), note


#: XGBoost's ``kRtEps``: a logistic model's base_score is clamped into [eps, 1 - eps] (float32)
#: before its logit is taken, 0 and 1 included (checked against ``Booster.predict`` margins).
_BASE_EPS = np.float32(1e-6)


def _base_margin(base_score: np.float32) -> np.float32:
    """The base margin XGBoost starts a logistic model's sums from: the logit of its
    base_score clamped into [1e-6f, 1 - 1e-6f] (a base_score of 1e-30 starts at -13.8, not
    -69.1); a base_score outside [0, 1] (which XGBoost refuses to load) is refused."""
    if not 0.0 <= float(base_score) <= 1.0:
        raise ImportModelError(f"base_score {float(base_score)} is not a probability in [0, 1]")
    low, high = _BASE_EPS, np.float32(1.0) - _BASE_EPS
    return _logit32(min(max(base_score, low), high))


def _logit32(p: np.float32) -> np.float32:
    """XGBoost's base margin ``-logf(1.0f / p - 1.0f)``: C's ``logf`` is (nearly) correctly
    rounded, which the float64 log rounded to float32 reproduces and numpy's float32 log does
    not (it is an ulp off for breast_cancer's base score)."""
    q = np.float32(1.0) / p - np.float32(1.0)
    return np.float32(-math.log(float(q)))


def _categories(tree: dict[str, Any], n: int) -> dict[int, list[int]]:
    nodes = [int(v) for v in tree.get("categories_nodes", [])]
    segs = [int(v) for v in tree.get("categories_segments", [])]
    sizes = [int(v) for v in tree.get("categories_sizes", [])]
    cats = [int(v) for v in tree.get("categories", [])]
    if not len(nodes) == len(segs) == len(sizes):
        raise ImportModelError("categorical split arrays have different lengths")
    out: dict[int, list[int]] = {}
    for node, seg, size in zip(nodes, segs, sizes, strict=True):
        if not 0 <= node < n or seg < 0 or size < 0 or seg + size > len(cats):
            raise ImportModelError(f"node {node}: categorical split out of range")
        out[node] = cats[seg : seg + size]
    return out


def _tree_arrays(tree: dict[str, Any], t: int, n_columns: int) -> dict[str, Any]:
    """One tree's node arrays, checked (indices in range, same lengths)."""
    lefts = [int(v) for v in tree["left_children"]]
    rights = [int(v) for v in tree["right_children"]]
    indices = [int(v) for v in tree["split_indices"]]
    conds = [float(v) for v in tree["split_conditions"]]
    n = len(lefts)
    if n == 0 or not len(rights) == len(indices) == len(conds) == n:
        raise ImportModelError(f"tree {t}: tree arrays have different lengths")
    if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise ImportModelError("vector-leaf trees (multi_output_tree) are not supported")
    types = [int(v) for v in tree.get("split_type", [0] * n)]
    if len(types) != n:
        raise ImportModelError(f"tree {t}: split_type has {len(types)} entries, expected {n}")
    for i in range(n):
        if lefts[i] == -1:
            continue
        if not (0 <= lefts[i] < n and 0 <= rights[i] < n):
            raise ImportModelError(f"tree {t}: node {i}: child index out of range")
        if not 0 <= indices[i] < n_columns:
            raise ImportModelError(f"tree {t}: node {i}: split on feature {indices[i]}")
    return {
        "lefts": lefts,
        "rights": rights,
        "indices": indices,
        "conds": conds,
        "types": types,
        "cats": _categories(tree, n),
    }


def _all_tree_arrays(trees: list[Any], n_columns: int) -> list[dict[str, Any]]:
    return [_tree_arrays(tree, t, n_columns) for t, tree in enumerate(trees)]


#: The categorical-split arrays of a tree; the vectorised route takes trees without any.
_CATEGORY_KEYS = ("categories", "categories_nodes", "categories_segments", "categories_sizes")
_NONE: list[Any] = []
_NO_CATEGORIES = (_NONE, _NONE, _NONE, _NONE)  # (only compared with, never changed)


@frozen
class _Flat:
    """The node arrays of every tree, concatenated (child indices within each tree)."""

    lefts: np.ndarray  # int64
    rights: np.ndarray  # int64
    indices: np.ndarray  # int64
    conds: np.ndarray  # float64
    sizes: np.ndarray  # int64, nodes per tree


def _flat_trees(trees: list[Any], n_columns: int) -> _Flat | None:
    """The trees' node arrays in a few numpy calls, when every tree is a plain numeric one
    that :func:`_tree_arrays` accepts as it is (lists of whole numbers for the children and
    features, numbers for the conditions, children and features in range, no categorical
    split, scalar leaves); None for anything else, which :func:`_tree_arrays` then reads
    node by node (and words any error of)."""
    lefts: list[Any] = []
    rights: list[Any] = []
    indices: list[Any] = []
    conds: list[Any] = []
    sizes: list[int] = []
    c0, c1, c2, c3 = _CATEGORY_KEYS
    try:
        for tree in trees:
            lt, rt = tree["left_children"], tree["right_children"]
            it, ct = tree["split_indices"], tree["split_conditions"]
            n = len(lt)
            if not (type(lt) is type(rt) is type(it) is type(ct) is list):
                return None
            if n == 0 or not len(rt) == len(it) == len(ct) == n:
                return None
            if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
                return None
            types = tree.get("split_type", _NONE)
            if type(types) is not list or (types and (len(types) != n or any(types))):
                return None
            get = tree.get
            if (get(c0, _NONE), get(c1, _NONE), get(c2, _NONE), get(c3, _NONE)) != _NO_CATEGORIES:
                return None
            lefts.extend(lt)
            rights.extend(rt)
            indices.extend(it)
            conds.extend(ct)
            sizes.append(n)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        return None
    if not sizes:
        return None
    left, right, index = np.array(lefts), np.array(rights), np.array(indices)
    cond = np.array(conds)
    if not (left.dtype.kind == right.dtype.kind == index.dtype.kind == "i"):
        return None
    if cond.dtype.kind not in "if" or left.ndim != 1 or cond.ndim != 1:
        return None
    size = np.array(sizes, dtype=np.int64)
    local_n = np.repeat(size, size)
    split = left != -1
    if split.any():
        ls, rs, fs, ns = left[split], right[split], index[split], local_n[split]
        if ls.min() < 0 or rs.min() < 0 or (ls >= ns).any() or (rs >= ns).any():
            return None
        if fs.min() < 0 or fs.max() >= n_columns:
            return None
    return _Flat(
        left.astype(np.int64),
        right.astype(np.int64),
        index.astype(np.int64),
        cond.astype(np.float64),
        size,
    )


def _numeric_trees(flat: _Flat, info: list[int]) -> NumericTrees:
    """The cuts and leaf values of :func:`_convert_ensemble`'s per-node route, for all nodes
    at once: a leaf's value ``float32(condition)``, a split's cut ``float32(x) < float32(t)``
    as ``x <= cut`` (:func:`f32_lt_cuts`; a NaN threshold never goes left: ``-inf``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        c32 = flat.conds.astype(np.float32)
    nan = np.isnan(c32)
    cuts = np.where(nan, -INF, f32_lt_cuts(np.where(nan, np.float32(0), c32)))
    starts = np.concatenate(([0], np.cumsum(flat.sizes)[:-1])).astype(np.int64)
    shift = np.repeat(starts, flat.sizes)
    split = flat.lefts != -1
    return NumericTrees(
        left=np.where(split, flat.lefts + shift, -1),
        right=np.where(split, flat.rights + shift, -1),
        feature=flat.indices,
        cut=cuts,
        value=c32.astype(np.float64),
        roots=starts,
        group=np.array(info, dtype=np.int64),
    )


def _base_scores(raw: Any, k: int) -> list[float]:
    if isinstance(raw, str):
        raw = [v for v in raw.strip().strip("[]").split(",") if v.strip()]
    if not isinstance(raw, list):
        raw = [raw]
    vals = [float(v) for v in raw]
    if len(vals) == 1:
        vals = vals * k
    if len(vals) != k:
        raise ImportModelError(f"{len(vals)} base scores for {k} classes")
    return vals


def _convert_ensemble(
    doc: dict[str, Any], spec: FeatureSpec | None, path: Any, data: bytes, note: str | None = None
) -> Model | Ensemble:
    """Several trees (boosting rounds, num_parallel_tree, one tree per class) as an ensemble.

    XGBoost adds the trees' leaf values to the base margin in float32, tree after tree in
    model order (each into its class's score: ``tree_info``); ``binary:logistic``:
    ``p = sigmoid(margin)`` in float32 and class 1 iff ``p > 0.5``; ``multi:softprob``:
    float32 softmax and the first argmax of the probabilities; ``multi:softmax``: the first
    argmax of the margins (the probabilities shown are the softmax of the margins)."""
    learner = doc["learner"]
    objective = _objective(learner)
    if objective == "reg:logistic":
        raise ImportModelError(
            "objective 'reg:logistic' saved by an XGBRegressor is not supported (its predict "
            "is a number, not a class); supported: an XGBClassifier or Booster with it, or the "
            "classifiers binary:logistic, multi:softprob, multi:softmax"
        )
    if objective not in _ENSEMBLE_OBJECTIVES:
        raise ImportModelError(
            f"objective '{objective}' is not supported (classifiers: "
            f"{', '.join(_ENSEMBLE_OBJECTIVES)}; regressors and rankers are not imported)"
        )
    model = learner["gradient_booster"]["model"]
    trees = model["trees"]
    params = learner["learner_model_param"]
    if int(params.get("num_target", "1")) != 1:
        raise ImportModelError("multi-target models are not supported")
    n_class = int(params.get("num_class", "0"))
    k = 1 if objective == "binary:logistic" else n_class
    if objective != "binary:logistic" and n_class < 2:
        raise ImportModelError(f"num_class {n_class} for a multi-class objective")
    if not trees:
        raise ImportModelError("the model holds no trees")
    info = [int(v) for v in model.get("tree_info", [0] * len(trees))]
    if len(info) != len(trees) or any(not 0 <= g < k for g in info):
        raise ImportModelError("tree_info does not give every tree a class")
    n_columns = int(params["num_feature"])
    flat = _flat_trees(trees, n_columns)
    arrays = [] if flat is not None else _all_tree_arrays(trees, n_columns)
    base = _base_scores(params["base_score"], k)
    if objective == "binary:logistic":
        margins = [float(_base_margin(np.float32(base[0])))]
    else:  # multi-class base scores are margins already
        margins = [float(np.float32(b)) for b in base]

    tops: dict[int, int] = {}
    for a in arrays:
        for i, c in a["cats"].items():
            j = a["indices"][i]
            tops[j] = max(tops.get(j, 0), max(c, default=0))
    cat_features = {
        a["indices"][i]
        for a in arrays
        for i in range(len(a["lefts"]))
        if a["lefts"][i] != -1 and a["types"][i] == 1
    }
    feats_json, feats = _features(learner, model, n_columns, cat_features, tops, spec)
    actions = resolve_actions(spec, list(range(max(k, 2))))
    combine = {
        "arithmetic": "float32",
        "link": "logistic" if k == 1 else "softmax_f64_sum",
        "rule": {"binary:logistic": "half", "multi:softprob": "proba"}.get(objective, "margin"),
        "base": margins,
    }
    booster = learner["gradient_booster"]
    origin = {
        "format": "xgboost",
        "file": os.path.basename(str(path)),
        "sha256": file_digest(data),
        "objective": learner["objective"]["name"],
        "base_score": base if k > 1 else base[0],
        "num_parallel_tree": int(
            booster.get("gbtree_model_param", {}).get("num_parallel_tree", "1")
        ),
        "xgboost_version": ".".join(str(v) for v in doc.get("version", [])),
    }
    if note:
        origin["warnings"] = [note]
    if flat is not None:
        numeric = _numeric_trees(flat, info)
        direct = direct_numeric_ensemble(
            numeric, feats, actions, combine, spec, model_name(path), origin
        )
        if direct is not None:
            return direct
        arrays = _all_tree_arrays(trees, n_columns)
    # float32(condition) of every node of every tree at once: a leaf's value, a split's
    # threshold, whose cut (``float32_condition("BRANCH_LT", .)``, NaN: never true) comes
    # vectorised too (tests/model check f32_lt_cuts against the scalar cut)
    with np.errstate(over="ignore", invalid="ignore"):
        c32 = np.array([c for a in arrays for c in a["conds"]], dtype=np.float64).astype(np.float32)
    nan = np.isnan(c32)
    all_values: list[float] = c32.astype(np.float64).tolist()
    all_cuts: list[float] = f32_lt_cuts(np.where(nan, np.float32(0), c32)).tolist()
    all_nans: list[bool] = nan.tolist()
    converted = []
    offset = 0
    for t, a in enumerate(arrays):
        group = info[t]
        end = offset + len(a["conds"])
        leaf_values = all_values[offset:end]
        cuts = all_cuts[offset:end]
        nans = all_nans[offset:end]
        offset = end

        def make(
            i: int,
            left: Tree | None,
            right: Tree | None,
            a: dict[str, Any] = a,
            g: int = group,
            leaf_values: list[float] = leaf_values,
            cuts: list[float] = cuts,
            nans: list[bool] = nans,
        ) -> Tree:
            if left is None or right is None:
                out = [0.0] * k
                out[g] = leaf_values[i]
                return ValueLeaf(tuple(out))
            if a["types"][i] == 1:
                codes = frozenset(a["cats"].get(i, ()))
                return SetSplit(a["indices"][i], codes, right, left)
            cond = NEVER if nans[i] else Interval(-INF, cuts[i])
            return interval_split(a["indices"][i], cond, left, right)

        def children(i: int, a: dict[str, Any] = a) -> tuple[int, int] | None:
            return None if a["lefts"][i] == -1 else (a["lefts"][i], a["rights"][i])

        converted.append(walk(0, children, make))
    return build_ensemble(
        converted, feats_json, feats, actions, combine, spec, model_name(path), origin
    )
