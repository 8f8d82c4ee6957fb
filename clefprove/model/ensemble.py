"""Tree ensembles: several trees over the same features and how their leaves combine.

An :class:`Ensemble` holds every tree's node records in one array (tree after tree, each tree
in pre-order with *tree-local* child indices, so that each tree is a valid single-tree node
array on its own), and a table of leaf values: leaf ``k`` of the ensemble (in node order) has
``aux == k`` and row ``k`` of ``values``, one value per output column.

How a decision is made (:class:`Combine`, docs/format.md "Ensembles"):

1. ``s = base``, then ``s += values[leaf of tree t]`` for t = 0, 1, ... in order, in float32
   (XGBoost) or float64 (everything else): the order matters for float32 sums;
2. ``s = s / divisor`` (random-forest averaging; 1 means none);
3. probabilities by the link: ``logistic`` (one column: ``p1 = 1 / (1 + exp(-scale * s))``,
   ``[1 - p1, p1]``), ``softmax`` (``exp(s - max) / sum``; ``softmax_f64_sum``: the sum taken
   in float64 and rounded back, XGBoost's), ``identity`` (``s`` are already probabilities,
   e.g. averaged per-tree class shares), and for ONNX models (one column)
   ``onnx_logistic`` (onnxruntime's ``[L(-s), L(s)]``) or ``complement`` (``[1 - s, s]``);
4. the class by the decision rule: ``proba`` (argmax of the probabilities, first index on
   ties, as numpy's argmax), ``half`` (class 1 iff ``p1 > 0.5``: ``XGBClassifier.predict``),
   ``margin`` (one column: class 1 iff ``s >= 0``; several: argmax of ``s``), or, one column,
   ``positive`` (class 1 iff ``s > 0``) and ``score_half`` (class 1 iff ``s > 0.5``), the
   rules of onnxruntime's binary classifier;
5. the confidence is that class's probability.
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

import numpy as np

from clefprove.frozen import frozen
from clefprove.memo import Derived
from clefprove.model.types import LEAF_CODE, Feature, Model, Vocabulary


class Arithmetic(enum.StrEnum):
    FLOAT32 = "float32"
    FLOAT64 = "float64"

    @property
    def dtype(self) -> type[np.floating[Any]]:
        return np.float32 if self is Arithmetic.FLOAT32 else np.float64


class Link(enum.StrEnum):
    LOGISTIC = "logistic"
    SOFTMAX = "softmax"
    #: XGBoost's softmax (``common::Softmax``): the exponentials in the arithmetic's precision,
    #: summed in float64, the sum rounded to that precision, then each divided by it
    SOFTMAX_F64_SUM = "softmax_f64_sum"
    IDENTITY = "identity"
    #: onnxruntime's logistic: ``p1 = L(s)``, ``p0 = L(-s)`` with ``L(v) = 1 / (1 + exp(-|v|))``
    #: for ``v >= 0`` and ``1 - L(-v)`` below (``ComputeLogistic``), one output
    ONNX_LOGISTIC = "onnx_logistic"
    #: the single score is the class-1 probability: ``[1 - s, s]`` (onnxruntime's binary
    #: classifier with non-negative weights), one output
    COMPLEMENT = "complement"

    @property
    def single(self) -> bool:
        """One output column (a binary classifier's single score)."""
        return self in (Link.LOGISTIC, Link.ONNX_LOGISTIC, Link.COMPLEMENT)


class Rule(enum.StrEnum):
    PROBA = "proba"
    HALF = "half"
    MARGIN = "margin"
    #: one output: class 1 iff ``s > 0`` (onnxruntime, binary, some weight negative)
    POSITIVE = "positive"
    #: one output: class 1 iff ``s > 0.5`` (onnxruntime, binary, every weight ``>= 0``)
    SCORE_HALF = "score_half"


@frozen
class Combine:
    """How leaf values become a decision (see the module docstring)."""

    outputs: int
    base: tuple[float, ...]
    arithmetic: Arithmetic
    link: Link
    rule: Rule
    divisor: float = 1.0
    scale: float = 1.0

    @property
    def n_classes(self) -> int:
        return 2 if self.link.single else self.outputs

    def to_json(self) -> dict[str, Any]:
        return {
            "outputs": self.outputs,
            "base": list(self.base),
            "arithmetic": str(self.arithmetic),
            "link": str(self.link),
            "rule": str(self.rule),
            "divisor": self.divisor,
            "scale": self.scale,
        }


@frozen(eq=False)
class Ensemble(Vocabulary):
    """A loaded ensemble.  Immutable; the arrays are read-only."""

    name: str
    version: str
    features: tuple[Feature, ...]
    actions: tuple[str, ...]
    nodes: np.ndarray  # NODE_DTYPE, every tree's records, tree-local child indices
    membership: np.ndarray
    roots: np.ndarray  # (T,) int64 first record of each tree
    sizes: np.ndarray  # (T,) int64 number of records of each tree
    depths: np.ndarray  # (T,) int64 deepest node of each tree
    values: np.ndarray  # (leaves, outputs) float64, read-only
    combine: Combine
    sha256: str
    size: int
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    #: compiled in memory from a JSON source (its sha256 is then not a file's digest)
    from_source: bool = field(default=False, compare=False)
    #: values derived from this ensemble (tables, evaluators, tree views): see clefprove.memo
    derived: Derived = field(
        default_factory=Derived, init=False, repr=False, hash=False, compare=False
    )

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.values.shape[0])

    @property
    def max_depth(self) -> int:
        return int(self.depths.max())

    def tree(self, t: int) -> Model:
        """Tree *t* as a single-tree :class:`Model` view (no copy).  Its leaves' ``aux`` are
        rows of :attr:`values`, not actions, and their ``value`` is 0: use it for structure
        (boxes, paths, wording), never for decisions."""
        views: list[Model | None] = self.derived.get(("model.trees",), self._no_trees)
        view = views[t]
        if view is None:  # built on first use, tree by tree (racing threads: equal views)
            view = views[t] = self._tree(t)
        return view

    def _no_trees(self) -> list[Model | None]:
        return [None] * self.n_trees

    def _tree(self, t: int) -> Model:
        start, n = int(self.roots[t]), int(self.sizes[t])
        return Model(
            name=f"{self.name}[tree {t}]",
            version=self.version,
            features=self.features,
            actions=self.actions,
            nodes=self.nodes[start : start + n],
            membership=self.membership,
            max_depth=int(self.depths[t]),
            sha256=self.sha256,
            size=self.size,
        )

    def leaf_rows(self) -> np.ndarray:
        """(leaves,) global node index of each leaf, in value-row order."""
        return np.flatnonzero(self.nodes["kind"] == LEAF_CODE)

    def tree_of_leaf(self) -> np.ndarray:
        """(leaves,) the tree each value row belongs to."""
        ends = self.roots + self.sizes
        return np.searchsorted(ends, self.leaf_rows(), side="right")


AnyModel = Model | Ensemble


def is_ensemble(model: object) -> bool:
    return isinstance(model, Ensemble)
