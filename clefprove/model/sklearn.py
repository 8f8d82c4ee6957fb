"""Convert a fitted scikit-learn ``DecisionTreeClassifier`` into a clefprove :class:`Model`.

scikit-learn casts its input to float32 before comparing it with a float64 threshold ``t``, so
for a float64 input ``x`` it goes left iff ``float32(x) <= t``.  Each threshold is converted to
the float64 ``t'`` with ``float32(x) <= t  <=>  x <= t'`` for every float64 ``x`` (see
:func:`float32_threshold` and docs/sklearn.md), so the converted model decides exactly as
``predict`` does on every input.  The conversion flattens each fitted tree into the pre-order
node records of a `.clef` file with numpy (thresholds converted all at once) and goes through
:func:`~clefprove.model.source.assemble_tree` / ``assemble_ensemble``, the encoder and loader
that JSON models use, so validation is shared with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clefprove.errors import ClefFormatError, ImportModelError, ModelSourceError
from clefprove.frozen import frozen
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import MAX_TREE_DEPTH, NODE_DTYPE, Feature, FeatureType, Model, NodeKind

_F32_MAX = float(np.finfo(np.float32).max)
#: The float64 at which float32 rounding overflows: FLT_MAX + half an ulp (2**128 - 2**103).
_F32_OVERFLOW = 2.0**128 - 2.0**103


def float32_threshold(t: float) -> float:
    """The float64 ``t'`` such that ``float32(x) <= t  <=>  x <= t'`` for every float64 ``x``.

    Let ``c`` be the largest float32 ``<= t`` and ``m`` the midpoint between ``c`` and the next
    float32 up (exact in float64).  ``float32(x) <= c`` iff ``x < m``, or ``x == m`` and the tie
    rounds down to ``c``, which round-to-nearest-even does when ``c``'s mantissa is even.  So
    ``t' = m`` when ``c`` is even, else the float64 just below ``m``.  Above FLT_MAX the next
    "float32" is infinity (overflow at ``2**128 - 2**103``, ties to infinity since FLT_MAX is
    odd); below -FLT_MAX only -infinity is ``<= t``.
    """
    t = float(t)
    if math.isnan(t):
        raise ValueError("threshold is NaN")
    if t == math.inf:
        return _F64_MAX  # every float32 (even +inf) is <= +inf: every finite x goes left
    if t < -_F32_MAX:
        # Only float32(x) == -inf qualifies: x <= -(2**128 - 2**103), the tie rounding to -inf.
        return -_F32_OVERFLOW
    if t >= _F32_MAX:
        c = np.float32(_F32_MAX)
    else:
        c = np.float32(t)  # nearest float32; step down if it rounded up
        if float(c) > t:
            c = np.nextafter(c, np.float32(-np.inf))
    if c == _F32_MAX:
        m = _F32_OVERFLOW
    else:
        up = np.nextafter(c, np.float32(np.inf))
        m = (float(c) + float(up)) / 2.0  # exact: 25 significant bits
    even = (int(np.abs(c).view(np.uint32)) & 1) == 0
    return m if even else math.nextafter(m, -math.inf)


_F64_MAX = float(np.finfo(np.float64).max)


def whole_threshold(t: float) -> float:
    """A threshold equivalent to ``t`` on whole numbers: ``floor(t) + 0.5`` (when exact)."""
    if abs(t) >= 2.0**52:
        return t
    return math.floor(t) + 0.5


def float32_thresholds(t: np.ndarray) -> np.ndarray:
    """:func:`float32_threshold` of every element of *t* (float64), vectorised."""
    t = np.asarray(t, dtype=np.float64)
    if np.isnan(t).any():
        raise ValueError("threshold is NaN")
    f32 = np.float32
    # -FLT_MAX's and FLT_MAX's neighbours outward are inf: numpy's overflow warning would
    # reach the user's terminal, and at_max below handles that end.
    with np.errstate(over="ignore"):
        c = np.clip(t, -_F32_MAX, _F32_MAX).astype(f32)
        c = np.where(c.astype(np.float64) > t, np.nextafter(c, f32(-np.inf)), c)
        up = np.nextafter(c, f32(np.inf))
    at_max = c == f32(_F32_MAX)
    # c + up is exact in float64 (25 significant bits); FLT_MAX's "next" is the overflow point.
    m = np.where(at_max, _F32_OVERFLOW, (c.astype(np.float64) + up.astype(np.float64)) / 2.0)
    even = (np.abs(c).view(np.uint32) & 1) == 0
    out = np.where(even, m, np.nextafter(m, -np.inf))
    out = np.where(t < -_F32_MAX, -_F32_OVERFLOW, out)
    return np.where(t == np.inf, _F64_MAX, out)


def whole_thresholds(t: np.ndarray) -> np.ndarray:
    """:func:`whole_threshold` of every element of *t*, vectorised."""
    return np.where(np.abs(t) >= 2.0**52, t, np.floor(t) + 0.5)


def from_sklearn(
    model: Any,
    features: Sequence[Mapping[str, Any] | Feature],
    actions: Sequence[str] | Mapping[Any, str] | None = None,
    name: str = "model",
    version: str = "0.0.0",
    description: str | None = None,
) -> Model | Ensemble:
    """Convert a fitted scikit-learn tree classifier into a :class:`Model`, or a forest or
    gradient-boosted classifier into an :class:`Ensemble` (SPEC §5).

    *features* declares the model's inputs in column order, as SPEC §2 JSON dicts or
    :class:`Feature` objects; categorical features must have been ordinal-encoded (the code is
    the index in ``values``), bools as 0/1.  *actions* names the classes: ``None`` when the
    class labels are the action names; a list of action names (string labels must each appear
    in it; integer labels ``k`` map to ``actions[k]``); or a mapping from label to action name.
    """
    kind = _ensemble_kind(model)
    if kind is not None:
        return _from_ensemble(model, kind, features, actions, name, version, description)
    tree = _fitted_tree(model)
    n_in = int(getattr(model, "n_features_in_", tree.n_features))
    parsed = _declared_features(model, features, n_in, "tree")
    action_names, class_to_action = _actions(list(model.classes_), actions)
    meta = {} if description is None else {"description": description}
    return _tree_model(tree, parsed, action_names, class_to_action, name, version, meta, model)


def _tree_model(
    tree: Any,
    parsed: tuple[Feature, ...],
    action_names: list[str],
    class_to_action: list[str],
    name: str,
    version: str,
    meta: dict[str, Any],
    model: Any,
) -> Model:
    """The fitted ``tree_`` of *model* as a clefprove tree: each leaf the action of its
    majority class (class k is ``class_to_action[k]``), its confidence that class's share."""
    from clefprove.model.features import parse_actions
    from clefprove.model.source import assemble_tree

    try:
        acts = parse_actions(action_names)
        index = {a: i for i, a in enumerate(acts)}
        flat, membership = _flatten([tree], parsed)
        _majority(flat, tree, np.array([index[a] for a in class_to_action], dtype=np.uint32))
        return assemble_tree(
            name,
            version,
            parsed,
            acts,
            flat.nodes,
            membership,
            int(flat.depths[0]),
            meta,
            f"<sklearn {type(model).__name__}>",
        )
    except (ModelSourceError, ClefFormatError) as exc:
        raise ImportModelError(f"conversion produced an invalid model: {exc}") from None


def _declared_features(
    model: Any, features: Sequence[Mapping[str, Any] | Feature], n_in: int, what: str
) -> tuple[Feature, ...]:
    """The declared features, checked against what *model* (a tree or an ensemble, named
    *what* in messages) was fitted with."""
    from clefprove.model.features import parse_features

    feats = [_feature_json(f, i) for i, f in enumerate(features)]
    if n_in != len(feats):
        raise ImportModelError(
            f"the {what} was fitted on {n_in} features but {len(feats)} were declared"
        )
    names_in = getattr(model, "feature_names_in_", None)
    if names_in is not None and [str(n) for n in names_in] != [f.get("name") for f in feats]:
        raise ImportModelError(
            f"declared feature names do not match the names the {what} was fitted with: "
            f"{list(map(str, names_in))}"
        )
    try:
        return parse_features(feats)
    except ModelSourceError as exc:
        raise ImportModelError(f"features: {exc}") from None


def _fitted_tree(model: Any) -> Any:
    try:
        from sklearn.base import is_classifier
    except ImportError:  # pragma: no cover - sklearn is an optional dependency
        raise ImportModelError("scikit-learn is not installed") from None
    try:
        classifier = is_classifier(model)
    except (AttributeError, TypeError):  # not an estimator at all: scikit-learn's tag lookup
        classifier = False
    if not classifier:
        raise ImportModelError(
            f"{type(model).__name__} is not a decision-tree classifier "
            "(regressors and other estimators cannot be converted)"
        )
    name = type(model).__name__
    if name == "Pipeline":
        raise ImportModelError(
            "a Pipeline cannot be converted: its other steps change the inputs the tree sees; "
            f"convert its final estimator, on features declared as that step receives them "
            f"({_ROUTES})"
        )
    from sklearn.tree import DecisionTreeClassifier  # ExtraTreeClassifier is one too

    if not isinstance(model, DecisionTreeClassifier):
        raise ImportModelError(f"{name} cannot be converted ({_ROUTES})")
    tree = getattr(model, "tree_", None)
    if tree is None or not hasattr(model, "classes_"):
        raise ImportModelError(f"{name} is not fitted")
    if int(getattr(model, "n_outputs_", 1)) != 1 or isinstance(model.classes_, list):
        raise ImportModelError("multi-output trees cannot be converted (one action per input)")
    return tree


def _feature_json(f: Mapping[str, Any] | Feature, i: int) -> dict[str, Any]:
    if isinstance(f, Feature):
        from clefprove.model.features import feature_to_json

        return feature_to_json(f)
    if not isinstance(f, Mapping):
        raise ImportModelError(f"features[{i}]: expected a dict or a Feature, not {type(f)}")
    return dict(f)


def _actions(
    classes: list[Any], actions: Sequence[str] | Mapping[Any, str] | None
) -> tuple[list[str], list[str]]:
    """(the model's action list, the action name of each entry of ``classes_``)."""

    def label(c: Any) -> Any:
        return c.item() if isinstance(c, np.generic) else c

    labels = [label(c) for c in classes]
    if actions is None:
        if not all(isinstance(c, str) for c in labels):
            raise ImportModelError(
                "class labels are not strings: pass actions=[...] or a mapping label -> action"
            )
        return list(labels), list(labels)
    if isinstance(actions, Mapping):
        mapping = {label(k): v for k, v in actions.items()}
        names = list(dict.fromkeys(mapping.values()))
    else:
        names = list(actions)
        if all(isinstance(c, str) for c in labels):
            mapping = {a: a for a in names}
        else:
            mapping = {k: a for k, a in enumerate(names)}
            for c in labels:
                if isinstance(c, float) and c.is_integer():
                    mapping.setdefault(c, mapping.get(int(c)))  # type: ignore[arg-type]
    out = []
    for c in labels:
        if c not in mapping or mapping[c] is None:
            raise ImportModelError(f"class label {c!r} has no action (actions: {names})")
        out.append(mapping[c])
    return names, out


class _Membership:
    """The membership table of categorical splits, one row per distinct member set, shared by
    every tree of a model and filled in the order the splits are met (as the JSON compiler)."""

    def __init__(self) -> None:
        self.table = bytearray()
        self.rows: dict[bytes, int] = {}

    def offset(self, row: bytes) -> int:
        at = self.rows.get(row)
        if at is None:
            at = self.rows[row] = len(self.table)
            self.table.extend(row)
        return at

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.table), dtype=np.uint8)


@frozen
class _Flat:
    """Fitted trees as pre-order node records, one tree after the other (child indices within
    each tree); leaves still lack their payload (value and aux), which the caller fills in
    from the concatenated ``tree_.value`` arrays at ``source``."""

    nodes: np.ndarray  # NODE_DTYPE
    source: np.ndarray  # the node behind each record, numbered across the concatenated trees
    leaves: np.ndarray  # record indices of the leaves, in order
    sizes: np.ndarray  # records per tree
    depths: np.ndarray  # depth per tree


def _flatten(trees: Sequence[Any], features: tuple[Feature, ...]) -> tuple[_Flat, np.ndarray]:
    """Pre-order records of fitted ``tree_`` objects and their membership table, thresholds
    converted exactly (see :func:`float32_threshold`) all at once; a categorical split whose
    members are all or none of the feature's values is skipped, since one side can never be
    reached."""
    starts = np.cumsum([0] + [int(t.node_count) for t in trees])
    left = np.concatenate([np.asarray(t.children_left, dtype=np.int64) for t in trees])
    right = np.concatenate([np.asarray(t.children_right, dtype=np.int64) for t in trees])
    feature = np.concatenate([np.asarray(t.feature, dtype=np.int64) for t in trees])
    threshold = np.concatenate([np.asarray(t.threshold, dtype=np.float64) for t in trees])
    split = left != -1
    shift = np.repeat(starts[:-1], np.diff(starts))
    left = np.where(split, left + shift, -1)
    right = np.where(split, right + shift, -1)
    cut = np.zeros(left.shape[0], dtype=np.float64)
    cut[split] = float32_thresholds(threshold[split])
    no_feature = len(features)
    fi_all = np.where(split, feature, no_feature)
    is_cat = np.array([f.type is FeatureType.CATEGORICAL for f in features] + [False])
    fast = None if is_cat[fi_all].any() else _preorder(left, right, starts)
    if fast is not None:
        source, depth_a, left_a, right_a, sizes_a, depths_a = fast
        membership = _Membership()
        aux: dict[int, int] = {}
    else:
        source, depth_a, left_a, right_a, sizes_a, depths_a, membership, aux = _preorder_loop(
            left, right, feature, cut, is_cat[fi_all], starts, features
        )
    nodes = np.zeros(source.shape[0], dtype=NODE_DTYPE)
    nodes["left"] = left_a
    nodes["right"] = right_a
    nodes["depth"] = depth_a
    fi = fi_all[source]
    is_split = split[source]
    nodes["feature"] = np.where(is_split, fi, 0)
    kinds = np.array([_KIND[f.type] for f in features] + [NodeKind.LEAF], dtype=np.uint8)
    nodes["kind"] = kinds[fi]
    whole = np.array([f.type in (FeatureType.INT, FeatureType.BOOL) for f in features] + [False])
    t = cut[source]
    values = np.where(whole[fi], whole_thresholds(t), t)
    nodes["value"] = np.where(nodes["kind"] == int(NodeKind.NUMERIC), values, 0.0)
    if aux:
        at = np.fromiter(aux, dtype=np.int64, count=len(aux))
        nodes["aux"][at] = list(aux.values())
    flat = _Flat(nodes, source, np.flatnonzero(~is_split), sizes_a, depths_a)
    return flat, membership.array()


def _preorder(
    left: np.ndarray, right: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, ...] | None:
    """:func:`_preorder_loop` of trees without categorical splits, vectorised over the nodes
    of all trees at once, level by level: the same records (source node, depth, tree-local
    children; a node reached twice is expanded twice, as the loop does) and per-tree sizes and
    depths (tests/model/test_sklearn_direct.py).  None (the caller takes the loop, which also
    words any error) when a tree is deeper than ``MAX_TREE_DEPTH`` or expands beyond a few
    times the nodes given."""
    n = left.shape[0]
    node = starts[:-1].astype(np.int64)
    n_trees = node.shape[0]
    if n_trees == 0:
        return None
    tree = np.arange(n_trees, dtype=np.int64)
    s_node: list[np.ndarray] = []
    s_tree: list[np.ndarray] = []
    s_depth: list[np.ndarray] = []
    s_left: list[np.ndarray] = []
    levels: list[tuple[int, int]] = []
    next_id, d, limit = 0, 0, 8 * n + 64
    while node.size:
        if d > MAX_TREE_DEPTH or next_id + node.size > limit:
            return None
        m = node.size
        levels.append((next_id, next_id + m))
        next_id += m
        sp = (left[node] != -1).nonzero()[0]  # (not np.flatnonzero: its wrapper's cost)
        lc = np.full(m, -1, dtype=np.int64)
        lc[sp] = next_id + np.arange(sp.size)
        s_node.append(node)
        s_tree.append(tree)
        s_depth.append(np.full(m, d, dtype=np.int64))
        s_left.append(lc)
        at = node[sp]
        node = np.concatenate((left[at], right[at]))
        tree = np.concatenate((tree[sp], tree[sp]))
        d += 1
    all_node = np.concatenate(s_node)
    all_tree = np.concatenate(s_tree)
    all_depth = np.concatenate(s_depth)
    all_left = np.concatenate(s_left)
    inner = all_left >= 0
    # a split's right child is emitted right after its left one's level block
    all_right = np.full(next_id, -1, dtype=np.int64)
    spans = []
    for a, b in levels:
        sp = inner[a:b].nonzero()[0] + a
        all_right[sp] = all_left[sp] + sp.size
        spans.append(sp)
    size = np.ones(next_id, dtype=np.int64)
    for sp in reversed(spans):
        size[sp] = 1 + size[all_left[sp]] + size[all_right[sp]]
    pre = np.zeros(next_id, dtype=np.int64)  # tree-local pre-order index
    for sp in spans:
        pre[all_left[sp]] = pre[sp] + 1
        pre[all_right[sp]] = pre[sp] + 1 + size[all_left[sp]]
    sizes = size[:n_trees]
    first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pos = first[all_tree] + pre
    source = np.empty(next_id, dtype=np.int64)
    source[pos] = all_node
    depth = np.empty(next_id, dtype=np.int64)
    depth[pos] = all_depth
    new_left = np.empty(next_id, dtype=np.int64)
    new_left[pos] = np.where(inner, pre + 1, pre)
    new_right = np.empty(next_id, dtype=np.int64)
    new_right[pos] = np.where(inner, pre[np.where(inner, all_right, 0)], pre)
    depths = np.zeros(n_trees, dtype=np.int64)
    np.maximum.at(depths, all_tree, all_depth)
    return source, depth, new_left, new_right, sizes, depths


def _preorder_loop(
    left: np.ndarray,
    right: np.ndarray,
    feature: np.ndarray,
    cut: np.ndarray,
    cat_split: np.ndarray,
    starts: np.ndarray,
    features: tuple[Feature, ...],
) -> tuple[Any, ...]:
    """Pre-order records of the trees, node by node (source node, depth, tree-local children,
    per-tree sizes and depths), with the membership table and the ``aux`` of categorical
    splits; a categorical split whose members are all or none of the feature's values is
    skipped."""
    categorical = cat_split.tolist()
    L, R, F, C = left.tolist(), right.tolist(), feature.tolist(), cut.tolist()
    membership = _Membership()
    order: list[int] = []
    depth: list[int] = []
    new_left: list[int] = []
    new_right: list[int] = []
    aux: dict[int, int] = {}
    sizes: list[int] = []
    depths: list[int] = []
    for root in starts[:-1].tolist():
        first, deepest = len(order), 0
        stack = [(root, 0, -1, 0)]  # (node, depth, parent record, 1 = left child / 2 = right)
        while stack:
            i, d, parent, side = stack.pop()
            offset = -1
            while categorical[i]:
                f = features[F[i]]
                members = bytes(int(code <= C[i]) for code in range(len(f.values)))
                if 0 < sum(members) < len(members):
                    offset = membership.offset(members)
                    break
                i = L[i] if members[0] else R[i]
            if d > MAX_TREE_DEPTH:
                raise ImportModelError(f"tree is deeper than the limit of {MAX_TREE_DEPTH}")
            k = len(order) - first
            order.append(i)
            depth.append(d)
            deepest = max(deepest, d)
            new_left.append(k)
            new_right.append(k)
            if offset >= 0:
                aux[first + k] = offset
            if parent >= 0:
                (new_left if side == 1 else new_right)[first + parent] = k
            if L[i] != -1:
                stack.append((R[i], d + 1, k, 2))
                stack.append((L[i], d + 1, k, 1))
        sizes.append(len(order) - first)
        depths.append(deepest)
    return (
        np.array(order, dtype=np.int64),
        depth,
        new_left,
        new_right,
        np.array(sizes),
        np.array(depths),
        membership,
        aux,
    )


_KIND = {
    FeatureType.FLOAT: NodeKind.NUMERIC,
    FeatureType.INT: NodeKind.NUMERIC,
    FeatureType.BOOL: NodeKind.NUMERIC,
    FeatureType.CATEGORICAL: NodeKind.CATEGORICAL,
}


def _majority(flat: _Flat, tree: Any, class_action: np.ndarray) -> None:
    """Leaves of a single classifier tree: the first majority class of ``value`` (as
    ``predict``) and its share as confidence."""
    value = np.asarray(tree.value[:, 0, :], dtype=np.float64)[flat.source[flat.leaves]]
    total = value.sum(axis=1)
    if not (total > 0).all():
        bad = int(flat.source[flat.leaves][np.flatnonzero(~(total > 0))[0]])
        raise ImportModelError(f"node {bad}: leaf holds no samples")
    k = np.argmax(value, axis=1)
    flat.nodes["value"][flat.leaves] = value[np.arange(k.shape[0]), k] / total
    flat.nodes["aux"][flat.leaves] = class_action[k]


# --------------------------------------------------------------------------- ensembles

_FORESTS = ("RandomForestClassifier", "ExtraTreesClassifier")
_BOOSTED = ("GradientBoostingClassifier",)
_ROUTES = (
    "supported: DecisionTreeClassifier, ExtraTreeClassifier, RandomForestClassifier, "
    "ExtraTreesClassifier, GradientBoostingClassifier; XGBoost and LightGBM classifiers "
    "through `clefprove import`"
)


def _one_class_forest(
    model: Any,
    parsed: tuple[Feature, ...],
    actions: list[str],
    name: str,
    version: str,
    description: str | None,
) -> Model:
    """A forest fitted on labels of one value: ``predict`` is that class and
    ``predict_proba`` 1.0 for every input.  An ensemble of the format needs two outputs, so
    it becomes the tree of that one decision (its first estimator, whose leaves all hold the
    one class: confidence 1.0), the same decision function (SPEC §5)."""
    meta: dict[str, Any] = {
        "metadata": {"imported_from": {"format": "sklearn", "estimator": type(model).__name__}}
    }
    if description is not None:
        meta["description"] = description
    tree = model.estimators_[0].tree_
    return _tree_model(tree, parsed, actions, actions, name, version, meta, model)


def _ensemble_kind(model: Any) -> str | None:
    """'forest', 'boosted', or None for a single tree; other ensembles are refused."""
    name = type(model).__name__
    library = type(model).__module__.partition(".")[0]
    if library in ("xgboost", "lightgbm"):
        raise ImportModelError(
            f"{name} is a {library} model: save it with its library and run "
            f"`clefprove import {library} FILE -o MODEL.clef`"
        )
    if name in _FORESTS:
        return "forest"
    if name in _BOOSTED:
        return "boosted"
    if hasattr(model, "estimators_") or name.startswith(("HistGradientBoosting", "Bagging")):
        raise ImportModelError(f"{name} cannot be converted ({_ROUTES})")
    return None


def _from_ensemble(
    model: Any,
    kind: str,
    features: Sequence[Mapping[str, Any] | Feature],
    actions: Sequence[str] | Mapping[Any, str] | None,
    name: str,
    version: str,
    description: str | None,
) -> Model | Ensemble:
    """A fitted forest or gradient-boosted classifier as a clefprove ensemble.

    * forests: ``predict_proba`` adds every tree's ``tree_.value`` row (class shares, float64)
      in estimator order from zeros and divides by the number of trees; ``predict`` is its
      first argmax (exact for ``n_jobs=None``; with several jobs scikit-learn adds the trees
      in whatever order the threads finish);
    * gradient boosting: raw scores start at the constant ``_raw_predict_init`` and add
      ``learning_rate * value`` stage after stage; binary: class 1 iff the score is ``>= 0``,
      probability ``expit`` (``expit(2 * score)`` for the exponential loss); multi-class:
      argmax of the scores, probabilities softmax.
    """
    if not hasattr(model, "estimators_") or not hasattr(model, "classes_"):
        raise ImportModelError(f"{type(model).__name__} is not fitted")
    if int(getattr(model, "n_outputs_", 1)) != 1 or isinstance(model.classes_, list):
        raise ImportModelError("multi-output ensembles cannot be converted (one action per input)")
    if len(model.classes_) < 2 and kind != "forest":  # a forest: the tree of its decision
        only = np.asarray(model.classes_).tolist()[0]
        raise ImportModelError(
            f"this {type(model).__name__} was fitted on one class ({only!r}) and always "
            "predicts it; an ensemble needs two classes or more (supported: fit it on two or "
            "more classes)"
        )
    n_in = int(model.n_features_in_)
    parsed = _declared_features(model, features, n_in, "model")
    action_names, class_to_action = _actions(list(model.classes_), actions)
    if len(set(class_to_action)) != len(class_to_action):
        raise ImportModelError("two classes map to the same action: an ensemble needs one each")
    # Output column k is class k of classes_; the actions are listed in that order.
    ordered = list(class_to_action)
    if action_names != ordered and set(action_names) != set(ordered):
        raise ImportModelError(f"actions {action_names} do not name every class once")
    n_classes = len(ordered)
    if kind == "forest" and n_classes == 1:
        return _one_class_forest(model, parsed, ordered, name, version, description)
    if kind == "forest":
        estimators = [est.tree_ for est in model.estimators_]
        flat, membership = _flatten(estimators, parsed)
        value = np.concatenate([np.asarray(t.value[:, 0, :n_classes]) for t in estimators])
        rows = np.asarray(value, dtype=np.float64)[flat.source[flat.leaves]]
        ensemble: dict[str, Any] = {
            "arithmetic": "float64",
            "link": "identity",
            "rule": "proba",
            "divisor": len(model.estimators_),
        }
    else:
        init = getattr(model, "init_", None)
        if not (init == "zero" or type(init).__name__ == "DummyClassifier"):
            raise ImportModelError(
                "a GradientBoostingClassifier with a custom init estimator cannot be converted"
            )
        strategy = getattr(init, "strategy", None)
        if init != "zero" and strategy not in ("prior", "most_frequent", "uniform", "constant"):
            # 'stratified' draws a class per row: predict is not a function of the input
            raise ImportModelError(
                f"a GradientBoostingClassifier whose init DummyClassifier has strategy "
                f"{strategy!r} predicts at random, so it cannot be converted (supported: init "
                "None, 'zero', or a DummyClassifier with strategy 'prior', 'most_frequent', "
                "'uniform' or 'constant')"
            )
        probe = np.zeros((1, n_in), dtype=np.float32)
        base = np.asarray(model._raw_predict_init(probe), dtype=np.float64)[0]
        lr = float(model.learning_rate)
        stages = model.estimators_  # (n_stages, K) regressors, added stage by stage
        K = stages.shape[1]
        estimators = [est.tree_ for stage in stages for est in stage]
        flat, membership = _flatten(estimators, parsed)
        value = np.concatenate([np.asarray(t.value[:, 0, 0], dtype=np.float64) for t in estimators])
        column = np.repeat(np.tile(np.arange(K), stages.shape[0]), flat.sizes)[flat.leaves]
        rows = np.zeros((flat.leaves.shape[0], K), dtype=np.float64)
        # the product predict_stages adds
        rows[np.arange(rows.shape[0]), column] = lr * value[flat.source[flat.leaves]]
        ensemble = {
            "arithmetic": "float64",
            "link": "logistic" if K == 1 else "softmax",
            "rule": "margin",
            "base": [float(b) for b in base],
        }
        if K == 1 and getattr(model, "loss", "log_loss") == "exponential":
            # ExponentialLoss's link is the half logit: predict_proba is expit(2 * raw)
            ensemble["scale"] = 2.0
    meta: dict[str, Any] = {
        "metadata": {"imported_from": {"format": "sklearn", "estimator": type(model).__name__}}
    }
    if description is not None:
        meta["description"] = description
    from clefprove.model.features import parse_actions
    from clefprove.model.source import assemble_ensemble, ensemble_combine

    try:
        acts = parse_actions(ordered)
        combine = ensemble_combine(ensemble, len(acts))
        flat.nodes["aux"][flat.leaves] = np.arange(flat.leaves.shape[0])
        return assemble_ensemble(
            name,
            version,
            parsed,
            acts,
            combine,
            flat.nodes,
            membership,
            flat.sizes,
            flat.depths,
            rows.reshape(-1, combine.outputs),
            meta,
            f"<sklearn {type(model).__name__}>",
        )
    except (ModelSourceError, ClefFormatError) as exc:
        raise ImportModelError(f"conversion produced an invalid model: {exc}") from None
