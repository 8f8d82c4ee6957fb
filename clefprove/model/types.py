"""The typed model: features, actions and the node array shared by every stage.

Values are *encoded* as float64 everywhere after input validation:

* ``float`` features: the float64 value itself;
* ``int`` features: the whole value as float64;
* ``bool`` features: 0.0 (false) or 1.0 (true);
* ``categorical`` features: the index of the value in the feature's vocabulary.

The node array is a numpy structured array with :data:`NODE_DTYPE`; for a loaded `.clef` file it
is a read-only view over the mapped file (no copy).  Leaves point to themselves (``left ==
right == own index``) so that the evaluator can take exactly ``max_depth`` steps without masks.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import field
from typing import Any

import numpy as np

from clefprove.frozen import frozen
from clefprove.memo import Derived

#: Deepest tree a model may hold (root has depth 0).  SPEC requires at least 64.
MAX_TREE_DEPTH = 128

#: Most features, actions and categorical values a model may declare.
MAX_FEATURES = 65535
MAX_ACTIONS = 65535
MAX_VOCABULARY = 65535


class FeatureType(enum.StrEnum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    CATEGORICAL = "categorical"


class NodeKind(enum.IntEnum):
    LEAF = 0
    NUMERIC = 1  # go left when x[feature] <= value (also bool splits, at 0.5)
    CATEGORICAL = 2  # go left when membership[aux + code] == 1


_KINDS = tuple(NodeKind)  # by code (cheaper than the enum's own lookup)

#: The kinds' codes as plain ints, for comparisons with node arrays: numpy compares an
#: array with an ``IntEnum`` member through a slow path (~25,000 instructions against
#: ~4,000 for an int, every comparison).
LEAF_CODE, NUMERIC_CODE, CATEGORICAL_CODE = (int(k) for k in NodeKind)

#: ``Model.derived`` keys of what the loader finds while validating the records.
LEAF_NODES = ("model.leaf_nodes",)
CATEGORICAL_SPLITS = ("model.categorical_split_features",)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


#: One node record: 24 bytes, little-endian, 8-byte aligned.
NODE_DTYPE = np.dtype(
    [
        ("value", "<f8"),  # numeric split: threshold; leaf: confidence; categorical: 0.0
        ("left", "<u4"),  # left child index (leaf: own index)
        ("right", "<u4"),  # right child index (leaf: own index)
        ("aux", "<u4"),  # leaf: action index; categorical split: offset in membership table
        ("feature", "<u2"),  # split feature index (leaf: 0)
        ("kind", "u1"),  # NodeKind
        ("depth", "u1"),  # depth of this node, root = 0
    ],
    align=True,
)
assert NODE_DTYPE.itemsize == 24


@frozen
class Feature:
    """A typed input feature with its domain, in encoded form (see module docstring)."""

    name: str
    type: FeatureType
    min: float
    max: float
    default: float
    values: tuple[str, ...] = ()  # vocabulary of a categorical feature

    @property
    def is_numeric(self) -> bool:
        return self.type in (FeatureType.INT, FeatureType.FLOAT)

    @property
    def is_integral(self) -> bool:
        """Whether the encoded values are whole numbers (int, bool, categorical)."""
        return self.type is not FeatureType.FLOAT

    def decode(self, value: float) -> Any:
        """Encoded float64 -> the JSON value a user writes (int, float, bool or string)."""
        if self.type is FeatureType.FLOAT:
            return float(value)
        if self.type is FeatureType.INT:
            return int(value)
        if self.type is FeatureType.BOOL:
            return bool(value)
        return self.values[int(value)]

    def describe_domain(self) -> str:
        if self.type is FeatureType.CATEGORICAL:
            return "{" + ", ".join(self.values) + "}"
        if self.type is FeatureType.BOOL:
            return "{false, true}"
        return f"[{_num(self.min)}, {_num(self.max)}]"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))


@frozen
class Node:
    """A readable view of one node record (for walks, explanations and exports)."""

    index: int
    kind: NodeKind
    depth: int
    feature: int = 0
    threshold: float = 0.0
    categories: frozenset[int] = frozenset()  # codes that go left (categorical split)
    left: int = 0
    right: int = 0
    action: int = 0
    confidence: float = 0.0

    @property
    def is_leaf(self) -> bool:
        return self.kind is NodeKind.LEAF


class Vocabulary:
    """What a single tree and an ensemble both answer about their features, actions and node
    records (a base of both dataclasses; it holds no fields of its own)."""

    features: tuple[Feature, ...]
    actions: tuple[str, ...]
    nodes: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.nodes.shape[0])

    def feature_index(self, name: str) -> int:
        """Index of the feature called *name*; KeyError if there is none."""
        for i, f in enumerate(self.features):
            if f.name == name:
                return i
        raise KeyError(name)

    def action_index(self, name: str) -> int:
        return self.actions.index(name)


@frozen(eq=False)
class Model(Vocabulary):
    """A loaded model.  Immutable; ``nodes`` and ``membership`` are read-only arrays."""

    name: str
    version: str
    features: tuple[Feature, ...]
    actions: tuple[str, ...]
    nodes: np.ndarray  # NODE_DTYPE, read-only
    membership: np.ndarray  # uint8 0/1 table for categorical splits, read-only
    max_depth: int  # deepest node depth actually present
    sha256: str  # SHA-256 of the whole .clef file (what sha256sum prints on it)
    size: int  # size in bytes of those .clef bytes
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    #: True when the model was compiled in memory from a JSON source: ``sha256`` is then the
    #: digest of bytes no file holds, and is never shown as the input file's digest.
    from_source: bool = field(default=False, compare=False)
    #: What later stages derive from this model (box tables, hashes, encoders), kept here.
    derived: Derived = field(
        default_factory=Derived, init=False, repr=False, hash=False, compare=False
    )

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_nodes.size)

    @property
    def leaf_nodes(self) -> np.ndarray:
        """The leaf nodes' indices in tree order (computed once, kept)."""
        return self.derived.get(
            LEAF_NODES,
            lambda: _read_only(np.flatnonzero(self.nodes["kind"] == LEAF_CODE)),
        )

    @property
    def categorical_split_features(self) -> frozenset[int]:
        """The categorical features some split tests (computed once, kept)."""

        def scan() -> frozenset[int]:
            if all(f.type is not FeatureType.CATEGORICAL for f in self.features):
                return frozenset()
            cat = self.nodes["kind"] == CATEGORICAL_CODE
            # (a set, not np.unique: that imports numpy.ma, ~10 ms of a small check's start-up)
            return frozenset(self.nodes["feature"][cat].tolist())

        return self.derived.get(CATEGORICAL_SPLITS, scan)

    def node(self, index: int) -> Node:
        """The node at *index* as a :class:`Node`."""
        # one read of the record as Python numbers (field reads of a numpy record cost ~1 µs each)
        return self._node(index, self.nodes[index].item())

    def nodes_at(self, indices: Sequence[int]) -> list[Node]:
        """The nodes at *indices* (e.g. a path), their records read in one go; the nodes are
        kept (paths share their top, and a printed counterexample reads its path twice)."""
        made: dict[int, Node] = self.derived.get(("model.nodes_at",), dict)
        missing = [i for i in indices if i not in made]
        if missing:
            records = self.nodes[np.asarray(missing, dtype=np.int64)].tolist()
            for i, rec in zip(missing, records, strict=True):
                made[i] = self._node(i, rec)
        return [made[i] for i in indices]

    def _node(self, index: int, record: tuple[Any, ...]) -> Node:
        value, left, right, aux, feature, kind_code, depth = record
        kind = _KINDS[kind_code] if kind_code < len(_KINDS) else NodeKind(kind_code)
        if kind is NodeKind.LEAF:
            return Node(index, kind, depth, action=aux, confidence=value)
        if kind is NodeKind.NUMERIC:
            return Node(index, kind, depth, feature, value, left=left, right=right)
        offset = aux
        size = len(self.features[feature].values)
        row = self.membership[offset : offset + size]
        cats = frozenset(int(c) for c in np.flatnonzero(row))
        return Node(index, kind, depth, feature, categories=cats, left=left, right=right)

    def iter_nodes(self) -> Iterator[Node]:
        for i in range(self.n_nodes):
            yield self.node(i)
