"""The ensemble evaluator: the runtime oracle for tree ensembles.

Every (row, tree) pair walks down its tree in one vectorised step per level (the trees' node
records are read through global lookup tables; leaves point to themselves, so pairs that reach
a leaf early stay there).  Clipping into the domain is folded into the thresholds as in
:mod:`clefprove.eval.evaluator`.  Then, per :class:`~clefprove.model.ensemble.Combine`:

* the leaf values are added **tree after tree, in order**, starting from the base scores, in
  the library's precision (float32 for XGBoost): ``acc = acc + v_t`` as numpy arrays of that
  dtype, never ``sum()`` (numpy sums pairwise, which rounds differently);
* the divisor, the link and the decision rule follow, in the same precision.

The result is the library's predict class and its predict_proba for that class.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from clefprove.errors import InputError
from clefprove.eval.evaluator import HEAP_LEVELS, Evaluator
from clefprove.frozen import frozen
from clefprove.model.ensemble import Combine, Ensemble, Link, Rule
from clefprove.model.types import CATEGORICAL_CODE, LEAF_CODE, NUMERIC_CODE

#: (row, tree) pairs walked per chunk.
CHUNK_PAIRS = 1 << 16

#: From this many rows on, each tree is walked by the single-tree batch evaluator (heap and
#: packed child tables, a chunk of rows per tree); below it, the per-call overhead of one
#: walk per tree outweighs that, and all (row, tree) pairs walk together.
PER_TREE_ROWS = 4096

#: Leaf values (row x tree x output cells) gathered at once when summing a batch's scores.
SCORE_CELLS = 1 << 21


@frozen(slots=True)
class EnsembleDecision:
    """One input's decision: action index, its probability, and each tree's leaf (local)."""

    action: int
    confidence: float
    leaves: tuple[int, ...]


@frozen
class Explanation:
    """How one input's decision is made, tree by tree (what a report shows at a
    counterexample): every number as the evaluator computes it."""

    leaves: tuple[int, ...]  # per tree: its leaf (tree-local node index)
    values: tuple[tuple[float, ...], ...]  # per tree: the leaf's value per output
    base: tuple[float, ...]  # the base scores
    scores: tuple[float, ...]  # base + every tree, in order, in the combine's precision
    divided: tuple[float, ...]  # scores / divisor (the scores again when the divisor is 1)
    probabilities: tuple[float, ...]  # per class, after the link
    action: int
    confidence: float


@frozen
class EnsembleBatch:
    actions: np.ndarray  # (n,) intp
    confidences: np.ndarray  # (n,) float64
    leaves: np.ndarray  # (n, T) tree-local leaf node indices
    scores: np.ndarray  # (n, outputs) in the combine's precision, before the link

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def decision(self, i: int) -> EnsembleDecision:
        return EnsembleDecision(
            int(self.actions[i]), float(self.confidences[i]), tuple(self.leaves[i].tolist())
        )


def accumulate(combine: Combine, leaf_values: np.ndarray) -> np.ndarray:
    """Scores from per-tree leaf values of shape (n, T, outputs): base, then tree by tree."""
    dt = combine.arithmetic.dtype
    vals = leaf_values.astype(dt)
    acc = np.broadcast_to(np.array(combine.base, dtype=dt), (vals.shape[0], combine.outputs))
    acc = acc.copy()
    for t in range(vals.shape[1]):
        np.add(acc, vals[:, t, :], out=acc)
    return acc


@functools.cache
def _c_expf() -> Callable[[float], float] | None:
    """The C library's ``expf`` (what ``std::exp`` on a float calls in onnxruntime and
    XGBoost), or None where it cannot be loaded."""
    import ctypes
    import ctypes.util

    for name in ("libm.so.6", ctypes.util.find_library("m")):
        if not name:
            continue
        try:
            fn = ctypes.CDLL(name).expf
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_float
        fn.argtypes = [ctypes.c_float]
        return fn
    return None


#: How close (in float32 ulps) to a rounding midpoint ``exp`` must be for ``expf`` to be
#: asked: glibc's ``expf`` is within 0.502 ulp, so elsewhere it is the correctly rounded value.
_NEAR_MIDPOINT = 0.01


def _exp(x: np.ndarray) -> np.ndarray:
    """exp in the dtype of *x*; float32 as C's ``expf``: the float64 exp rounded to float32
    (numpy's own float32 exp is not always correctly rounded), except within
    :data:`_NEAR_MIDPOINT` ulp of a rounding midpoint, where ``expf`` may round the other way
    and is called itself (a few elements in a hundred)."""
    if x.dtype == np.float64:
        return _exp64(x)
    if x.dtype != np.float32:
        out: np.ndarray = np.exp(x)
        return out
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        e64 = np.exp(x.astype(np.float64))
        e32 = e64.astype(np.float32)
        frac = np.abs(e64 - e32.astype(np.float64)) / np.spacing(np.abs(e32)).astype(np.float64)
        hard = np.flatnonzero(np.abs(frac - 0.5) < _NEAR_MIDPOINT)
    fn = _c_expf() if hard.size else None
    if fn is not None:
        flat_x, flat_e = x.reshape(-1), e32.reshape(-1)
        for i in hard.tolist():
            flat_e[i] = fn(float(flat_x[i]))
    return e32


#: ``log(DBL_MAX)``: above it ``exp`` overflows (``math.exp`` raises instead of returning inf).
_LOG_MAX = 709.782712893384


def _exp64(x: np.ndarray) -> np.ndarray:
    """float64 exp exactly as the C library's ``exp`` returns it, which is what LightGBM's
    ``std::exp``, scipy's ``expit`` and scikit-learn's loss functions call: numpy's own float64
    ``exp`` (a SIMD implementation) differs from it in the last bit for a few percent of
    arguments, and the probabilities would inherit that.  ``math.exp`` is the C library's."""
    flat = x.reshape(-1)
    big = flat > _LOG_MAX
    safe = np.where(big, 0.0, flat)
    out = np.fromiter(map(math.exp, safe.tolist()), dtype=np.float64, count=flat.size)
    out[big] = math.inf
    return out.reshape(x.shape)


def onnx_logistic(v: np.ndarray) -> np.ndarray:
    """onnxruntime's ``ComputeLogistic`` in the dtype of *v*: ``a = 1 / (1 + exp(-|v|))``,
    then ``1 - a`` for ``v < 0`` and ``a`` otherwise."""
    one = v.dtype.type(1.0)
    a = one / (one + _exp(-np.abs(v)))
    out: np.ndarray = np.where(v < 0, one - a, a)
    return out


def divide(combine: Combine, s: np.ndarray) -> np.ndarray:
    """``s / divisor`` in the combine's precision."""
    if combine.divisor != 1.0:
        s = s / combine.arithmetic.dtype(combine.divisor)
    return s


def probabilities(combine: Combine, scores: np.ndarray) -> np.ndarray:
    """(n, classes) probabilities from (n, outputs) scores, in the combine's precision."""
    dt = combine.arithmetic.dtype
    one = dt(1.0)
    s = scores.astype(dt)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        s = divide(combine, s)
        if combine.link is Link.LOGISTIC:
            z = s[:, 0] * dt(combine.scale) if combine.scale != 1.0 else s[:, 0]
            p1 = one / (one + _exp(-z))
            out = np.empty((p1.shape[0], 2), dtype=p1.dtype)
            out[:, 0] = one - p1
            out[:, 1] = p1
            return out
        if combine.link is Link.ONNX_LOGISTIC:
            z = s[:, 0] * dt(combine.scale) if combine.scale != 1.0 else s[:, 0]
            return np.stack((onnx_logistic(-z), onnx_logistic(z)), axis=1)
        if combine.link is Link.COMPLEMENT:
            return np.stack((one - s[:, 0], s[:, 0]), axis=1)
        if combine.link in (Link.SOFTMAX, Link.SOFTMAX_F64_SUM):
            e = _exp(s - s.max(axis=1, keepdims=True))
            wide = combine.link is Link.SOFTMAX_F64_SUM
            total = e[:, 0].astype(np.float64) if wide else e[:, 0].copy()
            for k in range(1, e.shape[1]):
                total += e[:, k]  # in class order, as the libraries add them
            p: np.ndarray = e / total.astype(dt)[:, None]
            return p
    return s


def decide(combine: Combine, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(actions, confidences) from (n, outputs) scores."""
    actions, conf, _ = decide_proba(combine, scores)
    return actions, conf


def decide_proba(combine: Combine, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(actions, confidences, probabilities) from (n, outputs) scores: :func:`decide` and
    the :func:`probabilities` it decides from, computed once."""
    proba = probabilities(combine, scores)
    if combine.rule is Rule.HALF:
        actions = (proba[:, 1] > combine.arithmetic.dtype(0.5)).astype(np.intp)
    elif combine.rule in (Rule.POSITIVE, Rule.SCORE_HALF):
        s1 = divide(combine, scores.astype(combine.arithmetic.dtype))[:, 0]
        cut = 0.0 if combine.rule is Rule.POSITIVE else 0.5
        actions = (s1 > combine.arithmetic.dtype(cut)).astype(np.intp)
    elif combine.rule is Rule.MARGIN:
        s = divide(combine, scores.astype(combine.arithmetic.dtype))
        if combine.outputs == 1:
            actions = (s[:, 0] >= 0).astype(np.intp)
        else:
            actions = np.argmax(s, axis=1).astype(np.intp)
    else:
        actions = np.argmax(proba, axis=1).astype(np.intp)
    conf = proba[np.arange(proba.shape[0]), actions].astype(np.float64)
    return actions, np.clip(conf, 0.0, 1.0), proba


class EnsembleEvaluator:
    """Evaluates encoded inputs on an :class:`Ensemble`."""

    def __init__(self, model: Ensemble) -> None:
        self.model = model
        self.n_features = len(model.features)
        self._tree_evaluators: tuple[Evaluator, ...] | None = None
        self._derive()

    def _derive(self) -> None:
        m = self.model
        nodes = m.nodes
        n = m.n_nodes
        offset = np.repeat(m.roots, m.sizes)  # each record's tree start
        kind = nodes["kind"]
        leaf = kind == LEAF_CODE
        feat = np.where(leaf, 0, nodes["feature"]).astype(np.intp)
        self._left = (nodes["left"].astype(np.intp) + offset).astype(np.intp)
        self._right = (nodes["right"].astype(np.intp) + offset).astype(np.intp)
        lo = np.array([f.min for f in m.features])
        hi = np.array([f.max for f in m.features])
        value = nodes["value"].astype(np.float64)
        numeric = kind == NUMERIC_CODE
        thr = np.full(n, np.inf)
        t, f_lo, f_hi = value[numeric], lo[feat[numeric]], hi[feat[numeric]]
        thr[numeric] = np.where(t < f_lo, -np.inf, np.where(t >= f_hi, np.inf, t))
        self._cat = kind == CATEGORICAL_CODE
        thr[self._cat] = np.inf
        vmax = np.array([max(len(f.values) - 1, 0) for f in m.features], dtype=np.float64)
        self._catmax = np.where(self._cat, vmax[feat], 0.0)
        self._catoff = np.where(self._cat, nodes["aux"], 0).astype(np.intp)
        self._any_cat = bool(self._cat.any())
        self._feat, self._thr = feat, thr
        self._row = np.where(leaf, nodes["aux"], 0).astype(np.intp)  # value row of a leaf
        self._offset = offset
        self._membership = np.asarray(m.membership, dtype=np.uint8)
        self._values = np.asarray(m.values, dtype=np.float64)

    #: The derived arrays, by attribute name (:meth:`tables`, :meth:`from_tables`).
    _TABLES = (
        "_left", "_right", "_cat", "_catmax", "_catoff", "_feat", "_thr", "_row", "_offset",
    )  # fmt: skip

    def tables(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and derived arrays from which :meth:`from_tables` rebuilds this evaluator
        (elsewhere, for the same model) without deriving anything."""
        return {"any_cat": self._any_cat}, {n: getattr(self, n) for n in self._TABLES}

    @classmethod
    def from_tables(
        cls, model: Ensemble, scalars: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> EnsembleEvaluator:
        """The evaluator of *model* from :meth:`tables` of one built for the same model."""
        self = cls.__new__(cls)
        self.model = model
        self.n_features = len(model.features)
        self._any_cat = bool(scalars["any_cat"])
        for name in cls._TABLES:
            setattr(self, name, arrays[name])
        self._membership = np.asarray(model.membership, dtype=np.uint8)  # views: no copy
        self._values = np.asarray(model.values, dtype=np.float64)
        self._tree_evaluators = None
        return self

    def evaluate(self, X: np.ndarray) -> EnsembleBatch:
        """Evaluate an encoded float64 matrix of shape (n, n_features)."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise InputError(
                f"expected an array of shape (n, {self.n_features}), got {tuple(X.shape)}"
            )
        if not np.isfinite(X).all():
            row, col = (int(v) for v in np.argwhere(~np.isfinite(X))[0])
            name = self.model.features[col].name
            raise InputError(f"row {row}: {name}: value {X[row, col]} is not finite")
        m = self.model
        big = X.shape[0] >= PER_TREE_ROWS
        leaves = self._leaves_per_tree(X) if big else self._leaves_pairs(X)
        roots = m.roots.astype(np.intp)[None, :]
        n, T, K = X.shape[0], m.n_trees, m.combine.outputs
        scores = np.empty((n, K), dtype=m.combine.arithmetic.dtype)
        # the (rows, T, outputs) leaf values of a block of rows at a time: rows are summed
        # independently, so blocks give the same scores bit for bit in bounded memory
        step = max(1, SCORE_CELLS // max(1, T * K))
        for a in range(0, n, step):
            vals = self._values[self._row[leaves[a : a + step] + roots]]
            scores[a : a + step] = accumulate(m.combine, vals)
        actions, conf = decide(m.combine, scores)
        return EnsembleBatch(actions, conf, leaves, scores)

    def _leaves_per_tree(self, X: np.ndarray) -> np.ndarray:
        """(n, T) tree-local leaf of every row in every tree, one batch walk per tree: the
        same leaves as :meth:`_leaves_pairs` (same folded thresholds, same membership test)."""
        if self._tree_evaluators is None:
            m = self.model
            # the heap of each tree's top levels at most about four slots per node
            trees = [m.tree(t) for t in range(m.n_trees)]
            self._tree_evaluators = tuple(
                Evaluator(
                    tree, heap_levels=min(HEAP_LEVELS, max(0, (4 * tree.n_nodes).bit_length() - 2))
                )
                for tree in trees
            )
        leaves = np.empty((X.shape[0], len(self._tree_evaluators)), dtype=np.intp)
        for t, ev in enumerate(self._tree_evaluators):
            leaves[:, t] = ev.evaluate(X).leaves
        return leaves

    def _leaves_pairs(self, X: np.ndarray) -> np.ndarray:
        """(n, T) tree-local leaf of every row in every tree, all (row, tree) pairs at once."""
        m = self.model
        n, T, F = X.shape[0], m.n_trees, self.n_features
        leaves = np.empty((n, T), dtype=np.intp)
        step = max(1, CHUNK_PAIRS // T)
        roots = m.roots.astype(np.intp)
        for start in range(0, n, step):
            block = X[start : start + step]
            rows = block.shape[0]
            flat = block.reshape(-1)
            s = np.tile(roots, rows)
            rowoff = np.repeat(np.arange(rows, dtype=np.intp) * F, T)
            for _ in range(m.max_depth):
                fi = self._feat.take(s) + rowoff
                xv = flat.take(fi)
                go = xv > self._thr.take(s)
                if self._any_cat:
                    at = np.flatnonzero(self._cat.take(s))
                    if at.size:
                        node = s[at]
                        code = np.clip(xv[at], 0.0, self._catmax[node]).astype(np.intp)
                        go[at] = self._membership[self._catoff[node] + code] == 0
                s = np.where(go, self._right.take(s), self._left.take(s))
            leaves[start : start + rows] = (s - self._offset.take(s)).reshape(rows, T)
        return leaves

    def evaluate_one(self, x: Sequence[float] | np.ndarray) -> EnsembleDecision:
        xs = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=np.float64)
        if xs.shape != (self.n_features,):
            raise InputError(f"expected {self.n_features} values, got {xs.size}")
        if not all(map(math.isfinite, xs.tolist())):
            j = next(j for j, v in enumerate(xs.tolist()) if not math.isfinite(v))
            raise InputError(f"{self.model.features[j].name}: value {xs[j]} is not finite")
        return self.evaluate(xs[None, :]).decision(0)

    def contributions(self, x: Sequence[float] | np.ndarray) -> list[dict[str, Any]]:
        """Per tree: its leaf (local index) and leaf values at the encoded input *x*."""
        d = self.evaluate_one(x)
        out = []
        for t, leaf in enumerate(d.leaves):
            row = int(self._row[int(self.model.roots[t]) + leaf])
            out.append({"tree": t, "leaf": leaf, "value": self._values[row].tolist()})
        return out

    def explain(self, x: Sequence[float] | np.ndarray) -> Explanation:
        """Per tree, its leaf and values at the encoded input *x*, then the sum, the divisor,
        the link and the decision: the same arithmetic as :meth:`evaluate`."""
        xs = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=np.float64)
        d = self.evaluate_one(xs)
        m = self.model
        rows = [int(self._row[int(m.roots[t]) + leaf]) for t, leaf in enumerate(d.leaves)]
        vals = self._values[rows]  # (T, outputs)
        scores = accumulate(m.combine, vals[None, :, :])
        dt = m.combine.arithmetic.dtype
        divided = divide(m.combine, scores.astype(dt))
        proba = probabilities(m.combine, scores)
        actions, conf = decide(m.combine, scores)
        if int(actions[0]) != d.action or float(conf[0]) != d.confidence:  # pragma: no cover
            raise AssertionError("explain disagrees with evaluate")
        return Explanation(
            tuple(d.leaves),
            tuple(tuple(float(v) for v in row) for row in vals.tolist()),
            tuple(float(v) for v in m.combine.base),
            tuple(float(v) for v in scores[0].tolist()),
            tuple(float(v) for v in divided[0].tolist()),
            tuple(float(v) for v in proba[0].tolist()),
            d.action,
            d.confidence,
        )
