"""Import a single-tree LightGBM ``binary`` model from its text format.

Read ``booster.save_model("m.txt")`` output (the ``lightgbm`` package is not needed).
Semantics, following LightGBM's ``Tree::NumericalDecision``/``CategoricalDecision``
(docs/importers.md):

* inputs are float64 and a numerical split goes left when ``x <= threshold`` (a float64);
* LightGBM's C API reads every input with ``|x| <= 1e-35f`` as 0.0 (it stores rows sparsely),
  so that band decides as 0.0 does, except that a split whose missing type is *Zero*
  (``zero_as_missing``) sends it to its default side; *NaN* and *None* missing types only
  matter for NaN, which clefprove inputs never are;
* a categorical split sends the integer codes in its bitset to the left; the feature must be
  categorical in clefprove, with vocabulary position = LightGBM category code;
* a leaf's raw score ``r`` gives ``p = 1 / (1 + exp(-sigmoid * r))`` (float64); the class is
  the argmax of ``[1 - p, p]`` (as ``LGBMClassifier.predict``), the confidence its probability.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from clefprove.errors import ImportModelError
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers.common import (
    F64_MAX,
    INF,
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
    file_digest,
    float64_condition,
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
from clefprove.model.types import MAX_VOCABULARY, Model

#: LightGBM's kZeroThreshold (1e-35f), as the float64 it is widened to.
ZERO_THRESHOLD = float(np.float32(1e-35))
_CATEGORICAL, _DEFAULT_LEFT = 1, 2
_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2


def import_lightgbm(
    path: str | os.PathLike[str], spec: FeatureSpec | None = None
) -> Model | Ensemble:
    """Convert the LightGBM model in *path*: its text format (``booster.save_model``) or the
    JSON of ``booster.dump_model()``."""
    data = read_file(path)
    refuse_pickle(path, data, "save the booster with booster.save_model('model.txt')")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportModelError(f"{path}: not a LightGBM text model (not UTF-8 text)") from None
    try:
        header, trees = _parse_dump(text) if text.lstrip().startswith("{") else _parse(text)
        return _convert(header, trees, spec, path, data)
    except ImportModelError as exc:
        raise ImportModelError(f"{path}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
        why = f"missing '{exc.args[0]}'" if isinstance(exc, KeyError) else str(exc).split("\n")[0]
        raise ImportModelError(f"{path}: malformed LightGBM model ({why})") from None


def _parse(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "tree":
        raise ImportModelError(
            "not a LightGBM text model (it must start with 'tree'; save the model with "
            "booster.save_model('model.txt'))"
        )
    header: dict[str, str] = {}
    trees: list[dict[str, str]] = []
    current = header
    for raw in lines[1:]:
        line = raw.strip()
        if line == "end of trees":
            break
        if not line or "=" not in line:
            if line and current is header:
                header[line] = ""  # a flag such as 'average_output' (random-forest mode)
            continue
        key, _, value = line.partition("=")
        if key == "Tree":
            current = {"Tree": value}
            trees.append(current)
            continue
        current[key] = value
    else:
        raise ImportModelError("truncated LightGBM model (no 'end of trees')")
    # LightGBM writes feature importances and its parameters after the trees; a file cut
    # inside them is truncated even though its trees are whole.
    tail = {raw.strip() for raw in lines}
    if ("feature_importances:" in tail or "parameters:" in tail) and (
        "end of parameters" not in tail
    ):
        raise ImportModelError("truncated LightGBM model (no 'end of parameters')")
    return header, trees


_NOT_A_DUMP = (
    "JSON that is not a LightGBM model (save the booster with booster.save_model('model.txt'), "
    "or json.dump(booster.dump_model(), file))"
)
_MISSING_TYPES = {"None": _MISSING_NONE, "Zero": _MISSING_ZERO, "NaN": _MISSING_NAN}


def _parse_dump(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """``booster.dump_model()`` JSON as the header and tree fields :func:`_parse` reads from
    the text format (the same numbers: the dump writes each threshold and leaf value with 17
    significant digits, and ``repr`` writes them back exactly)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ImportModelError(f"{_NOT_A_DUMP}: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("name") != "tree":
        raise ImportModelError(_NOT_A_DUMP)
    names = [str(v) for v in doc.get("feature_names") or []]
    infos_doc = doc.get("feature_infos") or {}
    infos = []
    for name in names:
        info = infos_doc.get(name) if isinstance(infos_doc, dict) else None
        values = info.get("values") if isinstance(info, dict) else None
        infos.append(":".join(str(int(v)) for v in values) if values else "none")
    header = {
        "objective": str(doc["objective"]),
        "num_class": str(int(doc.get("num_class", 1))),
        "num_tree_per_iteration": str(int(doc.get("num_tree_per_iteration", 1))),
        "max_feature_idx": str(int(doc["max_feature_idx"])),
        "feature_names": " ".join(names),
        "feature_infos": " ".join(infos),
        "version": str(doc.get("version", "")),
    }
    if doc.get("average_output") is True:
        header["average_output"] = ""
    info = doc["tree_info"]
    if not isinstance(info, list):
        raise ImportModelError("tree_info is not a list")
    return header, [_dump_tree(tree, t) for t, tree in enumerate(info)]


def _dump_tree(tree: dict[str, Any], t: int) -> dict[str, str]:
    """One ``tree_info`` entry of a dump as the text format's tree fields."""
    if not isinstance(tree, dict):
        raise ImportModelError(f"tree {t} is not an object")
    root = tree["tree_structure"]
    splits: dict[int, dict[str, Any]] = {}
    leaves: dict[int, float] = {}
    linear = False
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            raise ImportModelError(f"tree {t}: a node is not an object")
        linear = linear or "leaf_coeff" in node
        if "split_index" in node:
            i = int(node["split_index"])
            if i in splits:
                raise ImportModelError(f"tree {t}: split {i} appears twice")
            splits[i] = node
            stack += [node["left_child"], node["right_child"]]
        else:
            j = int(node.get("leaf_index", 0))
            if j in leaves:
                raise ImportModelError(f"tree {t}: leaf {j} appears twice")
            leaves[j] = float(node["leaf_value"])
    n_splits = len(splits)
    if sorted(splits) != list(range(n_splits)) or sorted(leaves) != list(range(n_splits + 1)):
        raise ImportModelError(f"tree {t}: split and leaf indices are not 0, 1, ...")

    def ref(child: dict[str, Any]) -> int:
        if "split_index" in child:
            return int(child["split_index"])
        return ~int(child.get("leaf_index", 0))

    thresholds: list[float] = []
    dtypes: list[int] = []
    words: list[int] = []
    bounds = [0]
    for i in range(n_splits):
        node = splits[i]
        missing = _MISSING_TYPES[str(node.get("missing_type", "None"))]
        dtype = (missing << 2) | (_DEFAULT_LEFT if node.get("default_left") else 0)
        if node["decision_type"] == "==":
            codes = [int(c) for c in str(node["threshold"]).split("||")]
            if min(codes) < 0 or max(codes) + 2 > MAX_VOCABULARY:
                raise ImportModelError(f"tree {t}: split {i}: category code out of range")
            bits = [0] * (max(codes) // 32 + 1)
            for c in codes:
                bits[c // 32] |= 1 << (c % 32)
            thresholds.append(float(len(bounds) - 1))
            words += bits
            bounds.append(len(words))
            dtype |= _CATEGORICAL
        elif node["decision_type"] == "<=":
            thresholds.append(float(node["threshold"]))
        else:
            raise ImportModelError(f"tree {t}: split {i}: decision type {node['decision_type']!r}")
        dtypes.append(dtype)
    out = {
        "num_leaves": str(int(tree.get("num_leaves", n_splits + 1))),
        "leaf_value": " ".join(repr(leaves[j]) for j in range(n_splits + 1)),
        "num_cat": str(len(bounds) - 1),
        "is_linear": "1" if linear else "0",
    }
    if n_splits:
        out.update(
            split_feature=" ".join(str(int(splits[i]["split_feature"])) for i in range(n_splits)),
            threshold=" ".join(repr(v) for v in thresholds),
            decision_type=" ".join(str(d) for d in dtypes),
            left_child=" ".join(str(ref(splits[i]["left_child"])) for i in range(n_splits)),
            right_child=" ".join(str(ref(splits[i]["right_child"])) for i in range(n_splits)),
        )
    if len(bounds) > 1:
        out.update(
            cat_boundaries=" ".join(str(b) for b in bounds),
            cat_threshold=" ".join(str(w) for w in words),
        )
    return out


def _numbers(tree: dict[str, str], key: str, n: int, kind: type = float) -> list[Any]:
    raw = tree.get(key, "").split()
    if len(raw) != n:
        raise ImportModelError(f"tree field '{key}' has {len(raw)} entries, expected {n}")
    return list(map(kind, raw))


def _tree_arrays(tree: dict[str, str], n_columns: int, t: int) -> dict[str, Any]:
    """One tree's fields, checked; categorical sets decoded."""
    if tree.get("is_linear", "0").strip() not in ("0", ""):
        raise ImportModelError(
            "linear trees (linear_tree=True: a linear model in every leaf) are not supported; "
            "supported: trees with constant leaves (train with linear_tree=False)"
        )
    n_leaves = int(tree["num_leaves"])
    if n_leaves < 1:
        raise ImportModelError(f"tree {t}: num_leaves must be at least 1")
    leaf_values = _numbers(tree, "leaf_value", n_leaves)
    for j, r in enumerate(leaf_values):
        if not math.isfinite(r):
            raise ImportModelError(f"tree {t}: leaf {j}: value {r} is not finite")
    n_splits = n_leaves - 1
    if n_splits:
        feat = _numbers(tree, "split_feature", n_splits, int)
        thresholds = _numbers(tree, "threshold", n_splits)
        dtypes = _numbers(tree, "decision_type", n_splits, int)
        lefts = _numbers(tree, "left_child", n_splits, int)
        rights = _numbers(tree, "right_child", n_splits, int)
    else:
        feat, thresholds, dtypes, lefts, rights = [], [], [], [], []
    num_cat = int(tree.get("num_cat", "0"))
    if num_cat:
        bounds = _numbers(tree, "cat_boundaries", num_cat + 1, int)
        words = [int(w) for w in tree.get("cat_threshold", "").split()]
        if bounds[0] != 0 or bounds[-1] != len(words) or bounds != sorted(bounds):
            raise ImportModelError("cat_boundaries do not match cat_threshold")
    else:
        bounds, words = [0], []
    cat_codes: dict[int, frozenset[int]] = {}
    for i in range(n_splits):
        if not 0 <= feat[i] < n_columns:
            raise ImportModelError(f"split {i} reads feature {feat[i]} of {n_columns}")
        if dtypes[i] & _CATEGORICAL:
            k = thresholds[i]
            if not (k.is_integer() and 0 <= k < num_cat):
                raise ImportModelError(f"split {i}: categorical set {k} does not exist")
            cat_codes[i] = _bitset(words[bounds[int(k)] : bounds[int(k) + 1]])
    return {
        "n_splits": n_splits,
        "leaf_values": leaf_values,
        "feat": feat,
        "thresholds": thresholds,
        "dtypes": dtypes,
        "lefts": lefts,
        "rights": rights,
        "cat_codes": cat_codes,
    }


_ZERO_BAND = Interval(math.nextafter(-ZERO_THRESHOLD, -INF), ZERO_THRESHOLD)


def _tree(a: dict[str, Any], leaf: Callable[[int], Tree]) -> Tree:
    """The intermediate tree of one LightGBM tree; leaf *j* becomes ``leaf(j)``."""
    n_splits = a["n_splits"]
    feat, thresholds, dtypes = a["feat"], a["thresholds"], a["dtypes"]
    cat_codes = a["cat_codes"]

    # Node ids: internal node i -> i; leaf j -> n_splits + j (LightGBM writes leaves as ~j).
    def child(c: int) -> int:
        node = c if c >= 0 else n_splits + ~c
        if not 0 <= node < n_splits + len(a["leaf_values"]):
            raise ImportModelError(f"child {c} is out of range")
        return node

    def make(i: int, left: Tree | None, right: Tree | None) -> Tree:
        if i >= n_splits or left is None or right is None:
            return leaf(i - n_splits)
        if i in cat_codes:
            return SetSplit(feat[i], cat_codes[i], left, right)
        t = thresholds[i]
        split = interval_split(feat[i], float64_condition("BRANCH_LEQ", t), left, right)
        if (dtypes[i] >> 2) & 3 == _MISSING_ZERO:
            band_side = left if dtypes[i] & _DEFAULT_LEFT else right
        elif -ZERO_THRESHOLD <= t < ZERO_THRESHOLD:
            band_side = left if t >= 0.0 else right  # the band is read as 0.0
        else:
            return split  # every value of the band is on 0.0's side anyway
        return interval_split(feat[i], _ZERO_BAND, band_side, split)

    def children(i: int) -> tuple[int, int] | None:
        if i >= n_splits:
            return None
        return child(a["lefts"][i]), child(a["rights"][i])

    return walk(0 if n_splits else n_splits, children, make, what="split")


def _convert(
    header: dict[str, str],
    trees: list[dict[str, str]],
    spec: FeatureSpec | None,
    path: Any,
    data: bytes,
) -> Model | Ensemble:
    objective = header.get("objective", "").split()
    kind = objective[0] if objective else ""
    if kind == "cross_entropy":
        # LightGBM's CrossEntropy output is 1 / (1 + exp(-r)): the binary sigmoid with scale
        # 1, and LGBMClassifier labels it as a binary model (argmax of [1 - p, p])
        kind = "binary"
    elif kind not in ("binary", "multiclass"):
        raise ImportModelError(
            f"objective '{' '.join(objective) or '?'}' is not supported (classifiers: binary, "
            "cross_entropy, multiclass; multiclassova, regressors and rankers are not imported)"
        )
    sigmoid = 1.0
    for part in objective[1:]:
        if part.startswith("sigmoid:"):
            sigmoid = float(part.split(":", 1)[1])
    if not (math.isfinite(sigmoid) and sigmoid > 0):
        raise ImportModelError(f"sigmoid {sigmoid} is not a positive number")
    n_class = int(header.get("num_class", "1"))
    per_iteration = int(header.get("num_tree_per_iteration", "1"))
    k = 1 if kind == "binary" else n_class
    if per_iteration != k or (kind == "multiclass" and n_class < 2):
        raise ImportModelError(
            f"num_class {n_class} with {per_iteration} trees per iteration is not supported"
        )
    if not trees or len(trees) % k:
        raise ImportModelError(f"{len(trees)} trees do not make whole iterations of {k}")
    average = "average_output" in header
    n_columns = int(header["max_feature_idx"]) + 1
    if n_columns <= 0:
        raise ImportModelError("the model has no features")
    names = header.get("feature_names", "").split()
    if names and len(names) != n_columns:
        raise ImportModelError(f"{len(names)} feature names for {n_columns} features")
    infos = header.get("feature_infos", "").split()
    arrays = [_tree_arrays(tree, n_columns, t) for t, tree in enumerate(trees)]
    cat_features = {a["feat"][i] for a in arrays for i in a["cat_codes"]}

    def derived() -> list[dict[str, Any]]:
        out = []
        for j in range(n_columns):
            name = check_name(names[j], "feature name") if names else f"Column_{j}"
            info = infos[j] if j < len(infos) else "none"
            listed = info != "none" and not info.startswith("[")
            if j in cat_features or listed:
                codes = [int(c) for c in info.split(":")] if listed else []
                codes += [
                    c
                    for a in arrays
                    for i, s in a["cat_codes"].items()
                    if a["feat"][i] == j
                    for c in s
                ]
                top = max([c for c in codes if c >= 0], default=0)
                if top + 2 > MAX_VOCABULARY:
                    raise ImportModelError(f"feature {name}: category code {top} is too large")
                out.append(
                    {
                        "name": name,
                        "type": "categorical",
                        "values": [str(c) for c in range(top + 2)],
                        "default": "0",
                    }
                )
            else:
                out.append(wide_float(name))
        return out

    # LightGBM names unnamed columns Column_0, Column_1, ...: nothing to check a spec against.
    auto = names == [f"Column_{j}" for j in range(n_columns)]
    feats_json, feats = resolve_features(spec, n_columns, derived, None if auto else names)
    require_categorical(feats, cat_features, "LightGBM")
    actions = resolve_actions(spec, list(range(max(k, 2))))
    origin = {
        "format": "lightgbm",
        "file": os.path.basename(str(path)),
        "sha256": file_digest(data),
        "objective": " ".join(objective),
        "lightgbm_version": header.get("version", ""),
    }
    if len(trees) == 1 and kind == "binary" and not average:
        a = arrays[0]

        def leaf(j: int) -> Leaf:
            r = a["leaf_values"][j]
            z = -sigmoid * r
            p = 1.0 / (1.0 + math.exp(z)) if z < 700 else 0.0
            c = 1 if p > 1.0 - p else 0
            return Leaf(c, p if c == 1 else 1.0 - p)

        root = _tree(a, leaf)
        return build_model(root, feats_json, feats, actions, spec, model_name(path), origin)
    # Ensembles: LightGBM adds the trees' raw scores in float64, iteration after iteration
    # (tree t feeds class t % k), divides by the number of iterations in random-forest mode
    # (average_output), then applies the sigmoid (binary) or softmax; predict is the first
    # argmax of the probabilities ([1 - p, p] for binary).
    combine = {
        "arithmetic": "float64",
        "link": "logistic" if k == 1 else "softmax",
        "rule": "proba",
        "divisor": len(trees) // k if average else 1,
        "scale": sigmoid,
    }
    if not cat_features:
        numeric = _numeric_trees(arrays, k)
        if numeric is not None:
            direct = direct_numeric_ensemble(
                numeric, feats, actions, combine, spec, model_name(path), origin, proper=False
            )
            if direct is not None:
                return direct
    converted = []
    for t, a in enumerate(arrays):

        def value_leaf(j: int, a: dict[str, Any] = a, g: int = t % k) -> Tree:
            out = [0.0] * k
            out[g] = a["leaf_values"][j]
            return ValueLeaf(tuple(out))

        converted.append(_tree(a, value_leaf))
    return build_ensemble(
        converted, feats_json, feats, actions, combine, spec, model_name(path), origin
    )


def _numeric_trees(arrays: list[dict[str, Any]], k: int) -> NumericTrees | None:
    """The intermediate trees of :func:`_tree` (numeric splits only) as flat node arrays for
    all trees at once: split i of a tree is node ``x <= t`` (``f64_leq_cut``; a NaN
    threshold never goes left), and a split with a zero band (``zero_as_missing``, or a
    threshold inside the band) is entered through the two band splits ``_tree`` puts above
    it (the band to its side, the rest to the split itself, which is then below both); leaf j
    is a value leaf of output ``t % k``.  None when a child index is out of range (``walk``
    words that)."""
    n_split = np.array([a["n_splits"] for a in arrays], dtype=np.int64)
    n_leaf = np.array([len(a["leaf_values"]) for a in arrays], dtype=np.int64)
    n_s, n_l = int(n_split.sum()), int(n_leaf.sum())
    s_off = np.concatenate(([0], np.cumsum(n_split)[:-1]))
    l_off = np.concatenate(([0], np.cumsum(n_leaf)[:-1]))
    tree_of = np.repeat(np.arange(len(arrays)), n_split)  # per split
    feat = np.array([f for a in arrays for f in a["feat"]], dtype=np.int64)
    thr = np.array([t for a in arrays for t in a["thresholds"]], dtype=np.float64)
    dtype = np.array([d for a in arrays for d in a["dtypes"]], dtype=np.int64)
    lefts = np.array([c for a in arrays for c in a["lefts"]], dtype=np.int64)
    rights = np.array([c for a in arrays for c in a["rights"]], dtype=np.int64)
    values = np.array([v for a in arrays for v in a["leaf_values"]], dtype=np.float64)
    ns_of, nl_of = n_split[tree_of], n_leaf[tree_of]

    def node_of(c: np.ndarray) -> np.ndarray | None:
        local = np.where(c >= 0, c, ns_of + ~c)  # as ``_tree``'s child()
        if local.size and (local.min() < 0 or (local >= ns_of + nl_of).any()):
            return None
        split = local < ns_of
        return np.where(split, s_off[tree_of] + local, n_s + l_off[tree_of] + local - ns_of)

    left, right = node_of(lefts), node_of(rights)
    if left is None or right is None:
        return None
    with np.errstate(invalid="ignore"):
        zero_missing = ((dtype >> 2) & 3) == _MISSING_ZERO
        band = zero_missing | ((thr >= -ZERO_THRESHOLD) & (thr < ZERO_THRESHOLD))
        band_left = np.where(zero_missing, (dtype & _DEFAULT_LEFT) != 0, thr >= 0.0)
    bands = np.flatnonzero(band)
    n_b = bands.size
    b1 = n_s + n_l + np.arange(n_b)  # x <= nextafter(-band): the split; else b2
    b2 = b1 + n_b  # x <= band: the band's side; else the split
    entry = np.arange(n_s + n_l + 2 * n_b)
    entry[bands] = b1
    s_left, s_right = entry[left], entry[right]
    n = n_s + n_l + 2 * n_b
    out_left = np.full(n, -1, dtype=np.int64)
    out_right = np.full(n, -1, dtype=np.int64)
    out_feat = np.zeros(n, dtype=np.int64)
    out_cut = np.zeros(n, dtype=np.float64)
    out_value = np.zeros(n, dtype=np.float64)
    out_left[:n_s], out_right[:n_s], out_feat[:n_s] = s_left, s_right, feat
    out_cut[:n_s] = np.where(np.isnan(thr), -INF, np.where(thr >= F64_MAX, INF, thr))
    out_value[n_s : n_s + n_l] = values
    out_left[b1], out_right[b1] = bands, b2
    out_left[b2] = np.where(band_left[bands], s_left[bands], s_right[bands])
    out_right[b2] = bands
    out_feat[b1] = out_feat[b2] = feat[bands]
    out_cut[b1], out_cut[b2] = _ZERO_BAND.lo, _ZERO_BAND.hi
    roots = np.where(n_split > 0, entry[s_off], n_s + l_off)
    return NumericTrees(
        left=out_left,
        right=out_right,
        feature=out_feat,
        cut=out_cut,
        value=out_value,
        roots=roots.astype(np.int64),
        group=np.arange(len(arrays), dtype=np.int64) % k,
    )


def _bitset(words: list[int]) -> frozenset[int]:
    codes = set()
    for w, word in enumerate(words):
        if not 0 <= word < 2**32:
            raise ImportModelError(f"categorical bitset word {word} is not a uint32")
        for b in range(32):
            if word >> b & 1:
                codes.add(32 * w + b)
    return frozenset(codes)
