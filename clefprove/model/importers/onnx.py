"""Import an ONNX-ML ``TreeEnsembleClassifier`` (docs/importers.md, docs/ensembles.md).

A single tree becomes a single-tree model; several trees become an
:class:`~clefprove.model.ensemble.Ensemble` (see :func:`_convert_ensemble`).

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
from collections.abc import Callable
from typing import Any

import numpy as np

from clefprove.errors import ImportModelError
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers.common import (
    MODES,
    FeatureSpec,
    Leaf,
    Tree,
    ValueLeaf,
    build_ensemble,
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
from clefprove.model.types import Feature, Model

_ML_DOMAIN = "ai.onnx.ml"

#: The import warning for onnxruntime's binary label rule with non-negative weights
#: (docs/importers.md "The label rule").
LABEL_RULE_WARNING = (
    "onnxruntime labels this binary model (every leaf weight >= 0, post_transform LOGISTIC) "
    "class 1 only when its score exceeds 0.5, but its probability of class 1 exceeds 0.5 as "
    "soon as the score is > 0: on inputs with a score in (0, 0.5] the label contradicts "
    "onnxruntime's own probabilities (and the original library's predict); clefprove "
    "follows onnxruntime's label"
)
# TensorProto element types.
_FLOAT, _DOUBLE, _INT32, _INT64 = 1, 11, 6, 7
_INPUT_TYPES = {_FLOAT: "float", _DOUBLE: "double", _INT32: "int32", _INT64: "int64"}


def import_onnx(path: str | os.PathLike[str], spec: FeatureSpec | None = None) -> Model | Ensemble:
    """Convert the ``TreeEnsembleClassifier`` in the ONNX file *path*."""
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


def _convert(model: Any, spec: FeatureSpec | None, path: Any, data: bytes) -> Model | Ensemble:
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
            "ai.onnx.ml.TreeEnsembleClassifier (a classifier, ai.onnx.ml opset 1 to 4, as "
            "skl2onnx and onnxmltools export classifiers) can be imported"
        )
    inputs = {i.name: i for i in graph.input}
    initialised = {t.name for t in graph.initializer}
    if not node.input or node.input[0] not in inputs or node.input[0] in initialised:
        raise ImportModelError(
            "the tree's input is computed by other graph nodes (a scaler, a cast...); only a "
            "graph input fed straight to the TreeEnsembleClassifier is supported"
        )
    _check_outputs(graph, node)
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
    origin: dict[str, Any] = {
        "format": "onnx",
        "file": os.path.basename(str(path)),
        "sha256": file_digest(data),
        "input": f"{node.input[0]}:{_INPUT_TYPES[elem]}",
        "post_transform": str(a.get("post_transform", "NONE") or "NONE"),
    }
    if len(table.tree_ids) > 1:
        return _convert_ensemble(
            a, table, elem, labels, feats_json, feats, actions, spec, path, origin
        )
    leaves = _Leaves(a, len(labels), table, bool(int_labels), labels)

    f32 = elem != _DOUBLE

    def make(i: int, t: Tree | None, f: Tree | None) -> Tree:
        if t is None or f is None:  # walk() gives a leaf None, None
            return leaves.leaf(i)
        mode, thr, feat = table.modes[i], table.values[i], table.features[i]
        cond = float32_condition(mode, thr) if f32 else float64_condition(mode, thr)
        return interval_split(feat, cond, t, f)

    tree = walk(0, table.children, make)
    if leaves.contradicts:
        origin["warnings"] = [LABEL_RULE_WARNING]
    return build_model(tree, feats_json, feats, actions, spec, model_name(path), origin)


#: Nodes that pass a tree output on unchanged in value (``Mul`` only by a constant 1, which
#: onnxmltools writes after LightGBM's probabilities; ``ZipMap`` on the probabilities only).
_PASS_ON = {"Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "ZipMap", "Mul"}


def _check_outputs(graph: Any, node: Any) -> None:
    """The graph's outputs must be the tree's label and probabilities (in that order), passed
    on by nodes that keep their values: onnxruntime's answer is then the tree's, which is what
    clefprove imports.  onnxmltools' export of a LightGBM random forest, for one, divides the
    tree's scores and takes a new argmax after the tree."""
    from onnx import numpy_helper

    producer = {o: n for n in graph.node for o in n.output}
    constants = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == n.attribute[0].TENSOR:
            constants[n.output[0]] = n.attribute[0].t

    def is_one(name: str) -> bool:
        t = constants.get(name)
        if t is None:
            return False
        v = numpy_helper.to_array(t)
        return bool(v.size == 1 and float(v.reshape(-1)[0]) == 1.0)

    tree_outputs = list(node.output)
    for pos, out in enumerate(graph.output):
        name, seen = out.name, 0
        while name not in tree_outputs:
            n = producer.get(name)
            seen += 1
            if n is None or not n.input or seen > len(graph.node):
                raise ImportModelError(
                    f"the graph output '{out.name}' is not computed from the "
                    "TreeEnsembleClassifier; only its label and probabilities can be outputs"
                )
            kept = n.op_type in _PASS_ON and (
                (n.op_type != "ZipMap" or pos == 1)
                and (n.op_type != "Mul" or (len(n.input) == 2 and is_one(n.input[1])))
            )
            if not kept:
                raise ImportModelError(
                    f"the graph computes its output '{out.name}' from the tree's through a "
                    f"{n.op_type} node, so onnxruntime does not answer what the "
                    "TreeEnsembleClassifier decides; supported: the tree's label and "
                    "probabilities as the graph outputs (or convert the trained model itself: "
                    "clefprove.from_sklearn, clefprove import xgboost|lightgbm)"
                )
            name = n.input[0]
        if tree_outputs.index(name) != pos:
            raise ImportModelError(
                f"the graph output '{out.name}' is the tree's output {tree_outputs.index(name)}"
                f"; the outputs must be the tree's label and probabilities, in that order"
            )


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
        # onnxruntime starts a tree wherever the tree id changes (its roots, in this order).
        self.tree_ids: list[Any] = []
        self.tree_starts: list[int] = []
        for i, t in enumerate(tree_ids):
            if i == 0 or t != tree_ids[i - 1]:
                self.tree_ids.append(t)
                self.tree_starts.append(i)
        if len(set(self.tree_ids)) != len(self.tree_ids):
            raise ImportModelError(
                "the nodes of a tree are not contiguous in nodes_treeids (onnxruntime would "
                "read them as several trees)"
            )
        self.tree_id = tree_ids[0]
        self.node_trees = tree_ids
        self.values = values
        pos: dict[tuple[Any, Any], int] = {}
        for i, nid in enumerate(node_ids):
            if (tree_ids[i], nid) in pos:
                raise ImportModelError(f"node id {nid} appears twice in tree {tree_ids[i]}")
            pos[(tree_ids[i], nid)] = i
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
            t, f = pos.get((tree_ids[i], trues[i])), pos.get((tree_ids[i], falses[i]))
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
            if (t, nid) not in table.position:
                raise ImportModelError(f"class weight for unknown node {t}/{nid}")
            self.by_node.setdefault(table.position[(t, nid)], []).append((c, w))
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
        #: a leaf where onnxruntime's label contradicts its own probability (see LABEL_RULE)
        self.contradicts = False

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
        if self.all_positive and self.post == "LOGISTIC" and 0.0 < s <= 0.5:
            self.contradicts = True
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


# --------------------------------------------------------------------------- ensembles

#: What each supported ``post_transform`` becomes (see _convert_ensemble).
_ENSEMBLE_POST = ("NONE", "LOGISTIC", "SOFTMAX")


def _convert_ensemble(
    a: dict[str, Any],
    table: _NodeTable,
    elem: int,
    labels: list[Any],
    feats_json: list[dict[str, Any]],
    feats: tuple[Feature, ...],
    actions: list[str],
    spec: FeatureSpec | None,
    path: Any,
    origin: dict[str, Any],
) -> Ensemble:
    """Several trees, as onnxruntime (CPU, ``TreeEnsembleClassifier``) computes them.

    onnxruntime adds every reached leaf's class weights into one float32 score per class,
    starting from 0, tree after tree in the order of ``nodes_treeids``, then adds
    ``base_values``; this is the ensemble's sum with the base as a last, constant tree.  Then:

    * three or more classes: the label is the first class with the largest score; the
      probabilities are the scores (``NONE``) or their softmax (``SOFTMAX``);
    * two classes with weights for one class only (every converter's binary export): with
      ``s`` the score, the label is class 1 iff ``s > 0.5`` when every weight is ``>= 0``,
      else iff ``s > 0``; the probabilities are ``[L(-s), L(s)]`` under ``LOGISTIC``
      (onnxruntime's ``ComputeLogistic``) and ``[1 - s, s]`` under ``NONE`` (all weights
      ``>= 0`` only).
    """
    n = len(labels)
    post = origin["post_transform"]
    if elem == _DOUBLE:
        raise ImportModelError(
            "a double input to a tree ensemble is not supported (onnxruntime's double "
            "aggregation is not modelled); export the model with a float input"
        )
    if post not in _ENSEMBLE_POST:
        raise ImportModelError(
            f"post_transform {post} is not supported for tree ensembles (NONE, LOGISTIC, SOFTMAX)"
        )
    if "class_weights" not in a:
        raise ImportModelError(
            "class_weights is missing (class_weights_as_tensor needs a double input, "
            "which is not supported for tree ensembles)"
        )
    weights = [float(np.float32(float(w))) for w in _list(a, "class_weights")]
    ids = [int(c) for c in _list(a, "class_ids")]
    tids = _list(a, "class_treeids")
    nids = _list(a, "class_nodeids")
    if not len(ids) == len(tids) == len(nids) == len(weights):
        raise ImportModelError("class_ids, class_treeids, class_nodeids, class_weights differ")
    if any(math.isnan(w) or math.isinf(w) for w in weights):
        raise ImportModelError("a class weight is NaN or infinite")
    if "base_values" in a:
        base = [float(np.float32(float(b))) for b in _list(a, "base_values")]
    elif "base_values_as_tensor" in a:
        raise ImportModelError("base_values_as_tensor needs a double input (not supported)")
    else:
        base = []
    if any(not math.isfinite(b) for b in base):
        raise ImportModelError("a base value is NaN or infinite")
    by_leaf: dict[int, dict[int, float]] = {}
    for c, t, nid, w in zip(ids, tids, nids, weights, strict=True):
        if not 0 <= c < n:
            raise ImportModelError(f"class id {c} is out of range for {n} classes")
        i = table.position.get((t, nid))
        if i is None:
            raise ImportModelError(f"class weight for unknown node {t}/{nid}")
        if table.children(i) is not None:
            raise ImportModelError(f"class weight on branch node {t}/{nid}")
        votes = by_leaf.setdefault(i, {})
        if c in votes:
            # onnxruntime adds the two weights into the running sum one after the other.
            raise ImportModelError(f"leaf {t}/{nid} has two weights for class {c}")
        votes[c] = w
    used = sorted(set(ids))
    binary = n == 2 and len(used) == 1
    trees, classes_per_tree = _ensemble_trees(table, by_leaf)
    if n == 2 and not binary:
        raise ImportModelError(
            "a two-class ensemble with weights for both classes is not supported (onnxruntime "
            "labels it by the class-1 score's sign); export one weight per leaf (what "
            "skl2onnx and onnxmltools write for binary classifiers)"
        )
    notes: list[str] = []
    if binary:
        col = used[0]
        if base and len(base) != 1:
            raise ImportModelError(
                f"base_values has {len(base)} entries; a binary ensemble needs one or none"
            )
        if base and col != 0:
            raise ImportModelError(
                "base_values with weights for class 1 are not supported (onnxruntime adds the "
                "base to class 0's score); export weights for class 0"
            )
        values = [[ValueLeaf((v.get(col, 0.0),)) for v in tr] for tr in trees]
        all_positive = all(w >= 0 for w in weights)
        if all_positive and post in ("NONE", "LOGISTIC"):
            link = "complement" if post == "NONE" else "onnx_logistic"
            rule = "score_half"
            lo, hi = _score_range(values, base)
            if post != "NONE" and lo <= 0.5 and hi > 0.0:
                notes.append(LABEL_RULE_WARNING)
        elif post == "LOGISTIC":
            link, rule = "onnx_logistic", "positive"
        else:
            sign = "every weight >= 0" if all_positive else "some weight < 0"
            raise ImportModelError(
                f"a binary ensemble with post_transform {post} ({sign}) has no probabilities "
                "clefprove can model; supported: LOGISTIC, or NONE with every weight >= 0"
            )
        outputs = 1
    else:
        if base and len(base) != n:
            raise ImportModelError(f"base_values has {len(base)} entries for {n} classes")
        for c in range(n):
            if not base and not any(c in cs for cs in classes_per_tree):
                raise ImportModelError(
                    f"class {c} has a weight on some paths only and no base value (onnxruntime "
                    "then leaves it out of the argmax on the other paths): not supported"
                )
        values = [[ValueLeaf(tuple(v.get(c, 0.0) for c in range(n))) for v in tr] for tr in trees]
        if post == "NONE":
            off = [w for w in weights + base if not 0.0 <= w <= 1.0]
            if off:
                raise ImportModelError(
                    f"a {n}-class ensemble with post_transform NONE and a weight {off[0]} "
                    "outside [0, 1]: its scores are not probabilities (onnxmltools writes this "
                    "for XGBoost multi:softmax; import the XGBoost model with `clefprove import "
                    "xgboost`); supported: SOFTMAX, or NONE with class shares in [0, 1]"
                )
            link, rule = "identity", "proba"
        elif post == "SOFTMAX":
            link, rule = "softmax", "margin"
        else:
            raise ImportModelError(
                "post_transform LOGISTIC on three or more classes is not supported "
                "(onnxruntime applies it per class); NONE and SOFTMAX are"
            )
        outputs = n
    converted: list[Tree] = [
        walk(0, _children_of(table, start), _maker(table, start, vals))
        for start, vals in zip(table.tree_starts, values, strict=True)
    ]
    if base and any(b != 0 for b in base):
        # onnxruntime adds the base values after every tree: a last, constant tree.
        converted.append(ValueLeaf(tuple(base) if not binary else (base[0],)))
    combine = {"arithmetic": "float32", "link": link, "rule": rule, "base": [0.0] * outputs}
    origin = {
        **origin,
        "trees": len(table.tree_ids),
        "label_rule": {
            "score_half": "class 1 iff score > 0.5 (onnxruntime, all weights >= 0)",
            "positive": "class 1 iff score > 0 (onnxruntime)",
            "proba": "first largest score (onnxruntime)",
            "margin": "first largest score (onnxruntime)",
        }[rule],
    }
    if base and any(b != 0 for b in base):
        origin["base_values"] = "added after the trees, as the last constant tree"
    if notes:
        origin["warnings"] = notes
    model = build_ensemble(
        converted, feats_json, feats, actions, combine, spec, model_name(path), origin
    )
    assert isinstance(model, Ensemble)
    return model


def _ensemble_trees(
    table: _NodeTable, by_leaf: dict[int, dict[int, float]]
) -> tuple[list[list[dict[int, float]]], list[set[int]]]:
    """Per tree, its leaves' weights (in node order) and the classes every leaf has."""
    trees: list[list[dict[int, float]]] = []
    always: list[set[int]] = []
    ends = [*table.tree_starts[1:], len(table.node_ids)]
    for start, end in zip(table.tree_starts, ends, strict=True):
        leaves = [by_leaf.get(i, {}) for i in range(start, end) if table.children(i) is None]
        trees.append(leaves)
        common = set(leaves[0]) if leaves else set()
        for v in leaves[1:]:
            common &= set(v)
        always.append(common)
    return trees, always


def _children_of(table: _NodeTable, start: int) -> Callable[[int], tuple[int, int] | None]:
    """Child lookup local to the tree whose first node is *start*."""

    def children(i: int) -> tuple[int, int] | None:
        kids = table.children(start + i)
        return None if kids is None else (kids[0] - start, kids[1] - start)

    return children


def _maker(
    table: _NodeTable, start: int, leaves: list[ValueLeaf]
) -> Callable[[int, Tree | None, Tree | None], Tree]:
    """Node *i* (local to the tree starting at *start*) in clefprove's form; float32 splits."""
    ranks: dict[int, int] = {}
    for i in range(start, len(table.node_ids)):
        if table.children(i) is None:
            ranks[i] = len(ranks)
        if len(ranks) == len(leaves):
            break

    def make(i: int, t: Tree | None, f: Tree | None) -> Tree:
        g = start + i
        if t is None or f is None:
            return leaves[ranks[g]]
        cond = float32_condition(table.modes[g], table.values[g])
        return interval_split(table.features[g], cond, t, f)

    return make


def _score_range(trees: list[list[ValueLeaf]], base: list[float]) -> tuple[float, float]:
    """Bounds on a binary ensemble's score over every combination of leaves."""
    lo = sum(min(v.values[0] for v in tr) for tr in trees) + sum(base)
    hi = sum(max(v.values[0] for v in tr) for tr in trees) + sum(base)
    return lo, hi
