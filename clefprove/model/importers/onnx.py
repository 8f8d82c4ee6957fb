"""Import an ONNX-ML ``TreeEnsembleClassifier`` holding a single tree (docs/importers.md).

The graph is read with the ``onnx`` package (protobuf; nothing in the file is executed).  The
semantics follow onnxruntime, the reference runtime for these models:

* a ``float`` (or ``int32``/``int64``) input is compared as ``float32(x) MODE t`` with the
  threshold as float32; a ``double`` input as ``x MODE t`` in float64 (the threshold taken from
  ``nodes_values_as_tensor`` when present, else the float32 ``nodes_values`` widened);
* the six modes become exact ``x <= cut`` splits (``==``/``!=`` need two);
* a leaf's label is onnxruntime's: for two classes with one weight column, class 1 when the
  weight is ``> 0.5`` (all weights ``>= 0``) or ``> 0`` (otherwise); for three or more classes
  the first class with the largest score; its confidence is the probability the runtime reports
  for that label (``NONE``: the normalised weight; ``SOFTMAX``; ``LOGISTIC``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from clefprove.errors import ImportModelError
from clefprove.model.importers.common import (
    MODES,
    FeatureSpec,
    Leaf,
    Tree,
    build_model,
    file_digest,
    float32_condition,
    float64_condition,
    interval_split,
    model_name,
    read_file,
    refuse_pickle,
    resolve_actions,
    resolve_features,
    walk,
    wide_float,
)
from clefprove.model.types import Model

_ML_DOMAIN = "ai.onnx.ml"
# TensorProto element types.
_FLOAT, _DOUBLE, _INT32, _INT64 = 1, 11, 6, 7
_INPUT_TYPES = {_FLOAT: "float", _DOUBLE: "double", _INT32: "int32", _INT64: "int64"}


def import_onnx(path: str | os.PathLike[str], spec: FeatureSpec | None = None) -> Model:
    """Convert the single-tree ``TreeEnsembleClassifier`` in the ONNX file *path*."""
    data = read_file(path)
    refuse_pickle(
        path,
        data,
        "export the model to ONNX (for example with skl2onnx) and import the .onnx file",
    )
    try:
        import onnx
    except ImportError:  # onnx is the 'import' extra, the one library an importer uses
        raise ImportModelError(
            "the 'onnx' package is needed to import ONNX models; "
            "install it with: pip install 'clefprove[import]'"
        ) from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf raises several types on garbage
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ImportModelError(f"{path}: not an ONNX model ({reason})") from None
    try:
        return _convert(model, spec, path, data)
    except ImportModelError as exc:
        raise ImportModelError(f"{path}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ImportModelError(f"{path}: malformed TreeEnsembleClassifier ({reason})") from None


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper, numpy_helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == a.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
            continue
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


def _convert(model: Any, spec: FeatureSpec | None, path: Any, data: bytes) -> Model:
    graph = model.graph
    trees = [n for n in graph.node if n.op_type.startswith("TreeEnsemble")]
    if not trees:
        raise ImportModelError("the graph holds no TreeEnsembleClassifier node")
    if len(trees) > 1:
        raise ImportModelError(f"the graph holds {len(trees)} tree-ensemble nodes; expected one")
    node = trees[0]
    if node.op_type != "TreeEnsembleClassifier" or node.domain != _ML_DOMAIN:
        raise ImportModelError(
            f"the graph's tree node is {node.domain or 'ai.onnx'}.{node.op_type}; only "
            "ai.onnx.ml.TreeEnsembleClassifier (a classifier) can be imported"
        )
    inputs = {i.name: i for i in graph.input}
    initialised = {t.name for t in graph.initializer}
    if not node.input or node.input[0] not in inputs or node.input[0] in initialised:
        raise ImportModelError(
            "the tree's input is computed by other graph nodes (a scaler, a cast...); only a "
            "graph input fed straight to the TreeEnsembleClassifier is supported"
        )
    tensor = inputs[node.input[0]].type.tensor_type
    elem = tensor.elem_type
    if elem not in _INPUT_TYPES:
        raise ImportModelError(f"input element type {elem} is not float, double, int32 or int64")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    n_static = dims[-1] if len(dims) == 2 else None

    a = _attrs(node)
    table = _NodeTable(a, elem)
    n_columns = n_static or (
        len(spec.features) if spec and spec.features else table.max_feature + 1
    )
    if table.max_feature >= n_columns:
        raise ImportModelError(
            f"a split reads input column {table.max_feature} but the input has {n_columns}"
        )
    labels: list[Any] = list(a.get("classlabels_int64s") or a.get("classlabels_strings") or [])
    if len(labels) < 2:
        raise ImportModelError("the classifier needs at least two class labels")
    int_labels = "classlabels_int64s" in a and a["classlabels_int64s"]

    def derived() -> list[dict[str, Any]]:
        if elem in (_INT32, _INT64):
            lim = 2**53
            return [
                {"name": f"f{i}", "type": "int", "min": -lim, "max": lim, "default": 0}
                for i in range(n_columns)
            ]
        return [wide_float(f"f{i}") for i in range(n_columns)]

    feats_json, feats = resolve_features(spec, n_columns, derived)
    actions = resolve_actions(spec, labels)
    leaves = _Leaves(a, len(labels), table, bool(int_labels), labels)

    f32 = elem != _DOUBLE

    def make(i: int, t: Tree | None, f: Tree | None) -> Tree:
        if t is None or f is None:  # walk() gives a leaf None, None
            return leaves.leaf(i)
        mode, thr, feat = table.modes[i], table.values[i], table.features[i]
        cond = float32_condition(mode, thr) if f32 else float64_condition(mode, thr)
        return interval_split(feat, cond, t, f)

    tree = walk(0, table.children, make)
    origin = {
        "format": "onnx",
        "file": os.path.basename(str(path)),
        "sha256": file_digest(data),
        "input": f"{node.input[0]}:{_INPUT_TYPES[elem]}",
        "post_transform": leaves.post,
    }
    return build_model(tree, feats_json, feats, actions, spec, model_name(path), origin)


def _list(a: dict[str, Any], key: str, required: bool = True) -> list[Any]:
    v = a.get(key)
    if v is None:
        if required:
            raise ImportModelError(f"attribute '{key}' is missing")
        return []
    return list(np.asarray(v).ravel().tolist()) if isinstance(v, np.ndarray) else list(v)


class _NodeTable:
    """The ``nodes_*`` attributes, indexed by position, with children resolved to positions."""

    def __init__(self, a: dict[str, Any], elem: int) -> None:
        tree_ids = _list(a, "nodes_treeids")
        node_ids = _list(a, "nodes_nodeids")
        self.features = [int(f) for f in _list(a, "nodes_featureids")]
        self.modes = [str(m) for m in _list(a, "nodes_modes")]
        trues = _list(a, "nodes_truenodeids")
        falses = _list(a, "nodes_falsenodeids")
        if elem == _DOUBLE and "nodes_values_as_tensor" in a:
            values = [float(v) for v in _list(a, "nodes_values_as_tensor")]
        elif "nodes_values" in a:
            values = [float(v) for v in _list(a, "nodes_values")]
        elif "nodes_values_as_tensor" in a:
            raise ImportModelError(
                "double thresholds (nodes_values_as_tensor) need a double input; onnxruntime "
                f"rejects them on a {_INPUT_TYPES.get(elem, '?')} input"
            )
        else:
            raise ImportModelError("attribute 'nodes_values' is missing")
        n = len(node_ids)
        if n == 0:
            raise ImportModelError("the tree has no nodes")
        for key, arr in (
            ("nodes_treeids", tree_ids),
            ("nodes_featureids", self.features),
            ("nodes_modes", self.modes),
            ("nodes_truenodeids", trues),
            ("nodes_falsenodeids", falses),
            ("nodes_values", values),
        ):
            if len(arr) != n:
                raise ImportModelError(f"attribute '{key}' has {len(arr)} entries, not {n}")
        if len(set(tree_ids)) != 1:
            raise ImportModelError(
                f"the ensemble holds {len(set(tree_ids))} trees; only a single tree can be "
                "imported (forests are for a later format version)"
            )
        self.tree_id = tree_ids[0]
        self.values = values
        pos = {}
        for i, nid in enumerate(node_ids):
            if nid in pos:
                raise ImportModelError(f"node id {nid} appears twice")
            pos[nid] = i
        self.position = pos
        self.node_ids = node_ids
        self._kids: list[tuple[int, int] | None] = []
        for i in range(n):
            mode = self.modes[i]
            if mode == "LEAF":
                self._kids.append(None)
                continue
            if mode not in MODES:
                raise ImportModelError(f"node {node_ids[i]}: unknown mode {mode!r}")
            if self.features[i] < 0:
                raise ImportModelError(f"node {node_ids[i]}: negative feature id")
            t, f = pos.get(trues[i]), pos.get(falses[i])
            if t is None or f is None:
                raise ImportModelError(f"node {node_ids[i]}: child node id does not exist")
            self._kids.append((t, f))
        splits = [self.features[i] for i in range(n) if self._kids[i] is not None]
        self.max_feature = max(splits, default=0)

    def children(self, i: int) -> tuple[int, int] | None:
        return self._kids[i]


class _Leaves:
    """Leaf decisions (action index, confidence) under onnxruntime's label rule."""

    def __init__(
        self, a: dict[str, Any], n: int, table: _NodeTable, int_labels: bool, labels: list[Any]
    ) -> None:
        self.n = n
        self.table = table
        self.post = str(a.get("post_transform", "NONE") or "NONE")
        if self.post not in ("NONE", "SOFTMAX", "LOGISTIC"):
            raise ImportModelError(
                f"post_transform {self.post} is not supported (NONE, SOFTMAX, LOGISTIC)"
            )
        dtype: type[np.floating[Any]] = np.float32  # onnxruntime sums weights in the threshold type
        if "class_weights_as_tensor" in a and "class_weights" not in a:
            weights = [float(w) for w in _list(a, "class_weights_as_tensor")]
            dtype = np.float64
        else:
            weights = [float(w) for w in _list(a, "class_weights")]
        self.dtype = dtype
        ids = [int(c) for c in _list(a, "class_ids")]
        tids = _list(a, "class_treeids")
        nids = _list(a, "class_nodeids")
        if not len(ids) == len(tids) == len(nids) == len(weights):
            raise ImportModelError("class_ids, class_treeids, class_nodeids, class_weights differ")
        base_raw = a.get("base_values_as_tensor") if "base_values" not in a else a["base_values"]
        base = [float(b) for b in np.asarray(base_raw).ravel()] if base_raw is not None else []
        if base and len(base) != n:
            raise ImportModelError(f"base_values has {len(base)} entries for {n} classes")
        for c in ids:
            if not 0 <= c < n:
                raise ImportModelError(f"class id {c} is out of range for {n} classes")
        if any(math.isnan(w) for w in weights) or any(math.isnan(b) for b in base):
            raise ImportModelError("a class weight or base value is NaN")
        self.by_node: dict[int, list[tuple[int, float]]] = {}
        for c, t, nid, w in zip(ids, tids, nids, weights, strict=True):
            if t != table.tree_id or nid not in table.position:
                raise ImportModelError(f"class weight for unknown node {t}/{nid}")
            self.by_node.setdefault(table.position[nid], []).append((c, w))
        self.binary = n == 2 and len(set(ids)) == 1
        self.all_positive = all(w >= 0 for w in weights)
        if n == 2 and any(b != 0 for b in base):
            raise ImportModelError(
                "base_values on a two-class model are not supported (onnxruntime's handling "
                "of them is ambiguous)"
            )
        if n == 2 and not self.binary and int_labels and labels != [0, 1]:
            raise ImportModelError(
                "a two-class model with weights for both classes needs labels [0, 1] "
                "(onnxruntime reports 0/1 whatever the labels are)"
            )
        self.base = np.array(base or [0.0] * n, dtype=dtype)
        self.has_base = bool(base)

    def leaf(self, i: int) -> Leaf:
        nid = self.table.node_ids[i]
        votes = self.by_node.get(i, [])
        scores = np.zeros(self.n, dtype=self.dtype)
        has = np.zeros(self.n, dtype=bool)
        for c, w in votes:
            scores[c] = self.dtype(scores[c] + self.dtype(w))
            has[c] = True
        if self.binary:
            return self._binary(nid, scores, has)
        if self.n > 2 and self.has_base:
            scores = (scores + self.base).astype(self.dtype)
            has[:] = True
        if not has.any():
            raise ImportModelError(f"leaf {nid} has no class weights")
        cand = np.flatnonzero(has)
        k = int(cand[int(np.argmax(scores[cand]))])  # first largest, as onnxruntime
        if self.n == 2:
            # onnxruntime: class 1 when the second class's score (else the first's) is > 0.
            pos = scores[1] if has[1] else scores[0]
            ort = 1 if pos > 0 else 0
            if ort != k:
                raise ImportModelError(
                    f"leaf {nid}: onnxruntime's two-class rule (score > 0) and the argmax "
                    "disagree; re-export with one weight per leaf"
                )
        return Leaf(k, self._confidence(nid, scores.astype(np.float64), k))

    def _confidence(self, nid: int, s: np.ndarray, k: int) -> float:
        if self.post == "SOFTMAX":
            e = np.exp(s - s.max())
            return float(min(1.0, e[k] / e.sum()))
        if self.post == "LOGISTIC":
            return _sigmoid(float(s[k]))
        if (s < 0).any() or not s.sum() > 0:
            raise ImportModelError(
                f"leaf {nid}: scores {s.tolist()} are not probabilities (negative or all zero) "
                "and post_transform is NONE"
            )
        return float(min(1.0, s[k] / s.sum()))

    def _binary(self, nid: int, scores: np.ndarray, has: np.ndarray) -> Leaf:
        s = float(scores[1] if has[1] else scores[0])
        k = 1 if s > (0.5 if self.all_positive else 0.0) else 0
        if self.post == "LOGISTIC":
            p1 = _sigmoid(s)
        elif self.post == "NONE" and 0.0 <= s <= 1.0:
            p1 = s
        else:
            raise ImportModelError(
                f"leaf {nid}: weight {s} is not a probability under post_transform {self.post}"
            )
        return Leaf(k, p1 if k == 1 else 1.0 - p1)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)
