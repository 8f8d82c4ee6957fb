"""Convert a fitted scikit-learn ``DecisionTreeClassifier`` into a clefprove :class:`Model`.

scikit-learn casts its input to float32 before comparing it with a float64 threshold ``t``, so
for a float64 input ``x`` it goes left iff ``float32(x) <= t``.  Each threshold is converted to
the float64 ``t'`` with ``float32(x) <= t  <=>  x <= t'`` for every float64 ``x`` (see
:func:`float32_threshold` and docs/sklearn.md), so the converted model decides exactly as
``predict`` does on every input.  The conversion builds the JSON source form and goes through
:func:`~clefprove.model.source.compile_source`, so validation is shared with JSON models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from clefprove.errors import ImportModelError, ModelSourceError
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Feature, FeatureType, Model

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


def from_sklearn(
    model: Any,
    features: Sequence[Mapping[str, Any] | Feature],
    actions: Sequence[str] | Mapping[Any, str] | None = None,
    name: str = "model",
    version: str = "0.0.0",
    description: str | None = None,
) -> Model | Ensemble:
    """Convert a fitted ``DecisionTreeClassifier`` into a :class:`Model`.

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
    feats = [_feature_json(f, i) for i, f in enumerate(features)]
    n_in = int(getattr(model, "n_features_in_", tree.n_features))
    if n_in != len(feats):
        raise ImportModelError(
            f"the tree was fitted on {n_in} features but {len(feats)} were declared"
        )
    names_in = getattr(model, "feature_names_in_", None)
    if names_in is not None and [str(n) for n in names_in] != [f["name"] for f in feats]:
        raise ImportModelError(
            "declared feature names do not match the names the tree was fitted with: "
            f"{list(map(str, names_in))}"
        )
    action_names, class_to_action = _actions(list(model.classes_), actions)
    try:
        from clefprove.model.features import parse_features

        parsed = parse_features(feats)
    except ModelSourceError as exc:
        raise ImportModelError(f"features: {exc}") from None

    source: dict[str, Any] = {
        "name": name,
        "version": version,
        "features": feats,
        "actions": action_names,
        "tree": _convert_tree(tree, parsed, class_to_action),
    }
    if description is not None:
        source["description"] = description
    from clefprove.model.source import compile_source

    try:
        return compile_source(source, origin=f"<sklearn {type(model).__name__}>")
    except ModelSourceError as exc:
        raise ImportModelError(f"conversion produced an invalid model: {exc}") from None


def _fitted_tree(model: Any) -> Any:
    try:
        from sklearn.base import is_classifier
    except ImportError:  # pragma: no cover - sklearn is an optional dependency
        raise ImportModelError("scikit-learn is not installed") from None
    if not is_classifier(model):
        raise ImportModelError(
            f"{type(model).__name__} is not a decision-tree classifier "
            "(regressors and other estimators cannot be converted)"
        )
    tree = getattr(model, "tree_", None)
    if tree is None or not hasattr(model, "classes_"):
        raise ImportModelError(f"{type(model).__name__} is not fitted, or is not a single tree")
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


def _convert_tree(
    tree: Any,
    features: tuple[Feature, ...],
    class_to_action: list[str] | None = None,
    leaf: Callable[[int], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON tree of a fitted ``tree_``; leaves by *leaf(i)*, or the majority class of
    ``value`` with its share (a single classifier tree) when *leaf* is None."""
    left, right = tree.children_left, tree.children_right
    feature, threshold = tree.feature, tree.threshold
    value = tree.value[:, 0, :]

    def majority(i: int) -> dict[str, Any]:
        assert class_to_action is not None
        v = value[i].astype(np.float64)
        total = float(v.sum())
        if not total > 0:
            raise ImportModelError(f"node {i}: leaf holds no samples")
        k = int(np.argmax(v))  # first maximum, as predict does
        return {"action": class_to_action[k], "confidence": float(v[k] / total)}

    leaf = leaf or majority

    # Iterative pre-order construction: JSON dicts are filled in place.
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(0, root)]
    while stack:
        i, out = stack.pop()
        while left[i] != -1:  # skip splits that one side can never reach
            f = features[int(feature[i])]
            split = _split(f, float32_threshold(float(threshold[i])))
            if split is None:
                break
            if split == "left":
                i = int(left[i])
            elif split == "right":
                i = int(right[i])
            else:
                break
        if left[i] == -1:
            out.update(leaf(i))
            continue
        f = features[int(feature[i])]
        out.update(_split(f, float32_threshold(float(threshold[i]))))  # type: ignore[arg-type]
        out["left"], out["right"] = {}, {}
        stack.append((int(right[i]), out["right"]))
        stack.append((int(left[i]), out["left"]))
    return root


def _split(f: Feature, t: float) -> dict[str, Any] | str:
    """The JSON split for ``x <= t`` on feature *f*, or 'left'/'right' if one side is empty."""
    if f.type is FeatureType.FLOAT:
        return {"feature": f.name, "threshold": t}
    if f.type is FeatureType.CATEGORICAL:
        members = [v for code, v in enumerate(f.values) if code <= t]
        if not members:
            return "right"
        if len(members) == len(f.values):
            return "left"
        return {"feature": f.name, "in": members}
    # int and bool: inputs are whole, so any threshold in [floor(t), floor(t) + 1) is the same.
    return {"feature": f.name, "threshold": whole_threshold(t)}


# --------------------------------------------------------------------------- ensembles

_FORESTS = ("RandomForestClassifier", "ExtraTreesClassifier")
_BOOSTED = ("GradientBoostingClassifier",)
_ROUTES = (
    "supported: DecisionTreeClassifier, ExtraTreeClassifier, RandomForestClassifier, "
    "ExtraTreesClassifier, GradientBoostingClassifier; XGBoost and LightGBM classifiers "
    "through `clefprove import`"
)


def _ensemble_kind(model: Any) -> str | None:
    """'forest', 'boosted', or None for a single tree; other ensembles are refused."""
    name = type(model).__name__
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
      probability ``expit``; multi-class: argmax of the scores, probabilities softmax.
    """
    if not hasattr(model, "estimators_") or not hasattr(model, "classes_"):
        raise ImportModelError(f"{type(model).__name__} is not fitted")
    if int(getattr(model, "n_outputs_", 1)) != 1 or isinstance(model.classes_, list):
        raise ImportModelError("multi-output ensembles cannot be converted (one action per input)")
    feats = [_feature_json(f, i) for i, f in enumerate(features)]
    n_in = int(model.n_features_in_)
    if n_in != len(feats):
        raise ImportModelError(
            f"the model was fitted on {n_in} features but {len(feats)} were declared"
        )
    names_in = getattr(model, "feature_names_in_", None)
    if names_in is not None and [str(n) for n in names_in] != [f["name"] for f in feats]:
        raise ImportModelError(
            "declared feature names do not match the names the model was fitted with: "
            f"{list(map(str, names_in))}"
        )
    action_names, class_to_action = _actions(list(model.classes_), actions)
    if len(set(class_to_action)) != len(class_to_action):
        raise ImportModelError("two classes map to the same action: an ensemble needs one each")
    from clefprove.model.features import parse_features
    from clefprove.model.source import compile_source

    try:
        parsed = parse_features(feats)
    except ModelSourceError as exc:
        raise ImportModelError(f"features: {exc}") from None
    # Output column k is class k of classes_; the actions are listed in that order.
    ordered = list(class_to_action)
    n_classes = len(ordered)
    trees: list[dict[str, Any]] = []
    if kind == "forest":
        for est in model.estimators_:
            value = est.tree_.value[:, 0, :n_classes]

            def share(i: int, value: np.ndarray = value) -> dict[str, Any]:
                return {"value": [float(v) for v in value[i]]}

            trees.append(_convert_tree(est.tree_, parsed, leaf=share))
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
        probe = np.zeros((1, n_in), dtype=np.float32)
        base = np.asarray(model._raw_predict_init(probe), dtype=np.float64)[0]
        lr = float(model.learning_rate)
        stages = model.estimators_  # (n_stages, K) regressors
        K = stages.shape[1]
        for stage in stages:
            for k, est in enumerate(stage):
                value = est.tree_.value[:, 0, 0]

                def scaled(i: int, value: np.ndarray = value, k: int = k) -> dict[str, Any]:
                    out = [0.0] * K
                    out[k] = float(lr * value[i])  # the product predict_stages adds
                    return {"value": out}

                trees.append(_convert_tree(est.tree_, parsed, leaf=scaled))
        ensemble = {
            "arithmetic": "float64",
            "link": "logistic" if K == 1 else "softmax",
            "rule": "margin",
            "base": [float(b) for b in base],
        }
    source: dict[str, Any] = {
        "name": name,
        "version": version,
        "features": feats,
        "actions": ordered,
        "ensemble": ensemble,
        "trees": trees,
        "metadata": {"imported_from": {"format": "sklearn", "estimator": type(model).__name__}},
    }
    if description is not None:
        source["description"] = description
    if action_names != ordered and set(action_names) != set(ordered):
        raise ImportModelError(f"actions {action_names} do not name every class once")
    try:
        return compile_source(source, origin=f"<sklearn {type(model).__name__}>")
    except ModelSourceError as exc:
        raise ImportModelError(f"conversion produced an invalid model: {exc}") from None
