"""``clefprove diff OLD NEW``: what changed in the tree, and where behaviour changed.

**Structural** changes come from :func:`clefprove.incremental.graph.structural_changes`.

**Semantic** changes: the leaf boxes of the two trees each partition the input domain, so
their pairwise intersections partition it too, and on each non-empty intersection both models
decide constantly.  The intersections are found by walking every feasible leaf box of NEW, as a
context, down OLD level by level (numpy over all pairs at once, dropping empty boxes), exactly
as the verifier builds boxes.  A region is reported where the two actions differ; each gets an
example input (a readable point of the box) that is *confirmed* by evaluating both models with
:class:`clefprove.eval.evaluator.Evaluator`.  Regions where only the confidence changed are
counted separately.

**Share of the input domain**: the product over features of the fraction of the feature's
domain that the region covers -- a float feature by length ``(hi - lo) / (max - min)``, an int
or bool feature by count ``(hi - lo + 1) / (max - min + 1)``, a categorical feature by the
number of values (:func:`clefprove.geometry.measure.box_shares`, which cannot overflow on a
domain as wide as float64 allows).  A feature whose domain is one value counts as 1.  It is a
measure, not a probability of traffic: a non-empty region can have share 0 (a single float value).

Both models must have the same features (names, order, types, bounds, vocabularies) and the same
set of action names for the semantic part; otherwise it is refused with the reason, and only the
structural part is reported.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import empty_rows, leaf_boxes, step_down
from clefprove.geometry.measure import box_shares
from clefprove.incremental import graph as gr
from clefprove.model.describe import format_number
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.verify import normal as nm


@frozen
class Region:
    """A box where the two models decide different actions, with a confirmed example."""

    conditions: tuple[str, ...]
    old_action: str
    new_action: str
    old_leaf: int
    new_leaf: int
    share: float
    example: dict[str, Any]
    #: ensembles: each tree's leaf at the example (``old_leaf``/``new_leaf`` are then -1)
    old_leaves: tuple[int, ...] | None = None
    new_leaves: tuple[int, ...] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "when": list(self.conditions),
            "old_action": self.old_action,
            "new_action": self.new_action,
            "old_leaf": self.old_leaf,
            "new_leaf": self.new_leaf,
            "share": self.share,
            "example": self.example,
        }
        if self.old_leaves is not None:
            out["old_leaves"] = list(self.old_leaves)
        if self.new_leaves is not None:
            out["new_leaves"] = list(self.new_leaves)
        return out


@frozen
class DiffReport:
    old: dict[str, Any]
    new: dict[str, Any]
    changes: tuple[gr.Change, ...]
    shared: dict[str, int]
    comparable: bool
    reason: str | None = None
    regions: tuple[Region, ...] = ()
    regions_total: int = 0
    share_changed: float = 0.0
    #: None for ensembles (not computed: see docs/incremental.md)
    share_confidence_only: float | None = 0.0
    transitions: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: ensembles: the search stopped at its time budget (regions found so far are listed)
    partial: bool = False
    #: ensembles: the share of the input domain the search settled (1.0 unless partial)
    share_explored: float | None = None
    #: ensembles: trees unchanged, changed, added, removed; combination changes
    ensemble: dict[str, Any] | None = None

    @property
    def identical_behaviour(self) -> bool:
        return self.comparable and self.regions_total == 0 and not self.partial

    def to_json_dict(self) -> dict[str, Any]:
        sem: dict[str, Any] = {"comparable": self.comparable}
        if not self.comparable:
            sem["reason"] = self.reason
        else:
            sem.update(
                {
                    "regions_total": self.regions_total,
                    "share_changed": self.share_changed,
                    "share_confidence_only": self.share_confidence_only,
                    "transitions": dict(self.transitions),
                    "regions": [r.to_json_dict() for r in self.regions],
                }
            )
            if self.share_explored is not None:
                sem["partial"] = self.partial
                sem["share_explored"] = self.share_explored
        out: dict[str, Any] = {
            "old": self.old,
            "new": self.new,
            "structural": {
                "changes": [c.to_json_dict() for c in self.changes],
                **self.shared,
                **({} if self.ensemble is None else {"ensemble": self.ensemble}),
            },
            "semantic": sem,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def incompatibility(old: Model, new: Model) -> str | None:
    """Why the two models' decisions cannot be compared input by input (None: they can)."""
    if [f.name for f in old.features] != [f.name for f in new.features]:
        return (
            "the models have different features ("
            + ", ".join(f.name for f in old.features)
            + " vs "
            + ", ".join(f.name for f in new.features)
            + ")"
        )
    for a, b in zip(old.features, new.features, strict=True):
        if a.type != b.type:
            return f"feature '{a.name}' is {a.type} in OLD and {b.type} in NEW"
        if (a.min, a.max) != (b.min, b.max):
            return (
                f"feature '{a.name}' has domain {a.describe_domain()} in OLD and "
                f"{b.describe_domain()} in NEW"
            )
        if a.values != b.values:
            return f"feature '{a.name}' has a different vocabulary in OLD and NEW"
    if set(old.actions) != set(new.actions):
        return (
            f"the models have different actions ({', '.join(old.actions)} vs "
            f"{', '.join(new.actions)})"
        )
    return None


def shares(model: Model, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray]) -> np.ndarray:
    """(k,) share of the input domain covered by each box (see module docstring)."""
    return box_shares(model, lo, hi, cats)


def _lower(lo: float) -> tuple[str, str]:
    """Readable lower bound: ``(">", t)`` when *lo* is the float64 right after a t no longer."""
    prev = float(np.nextafter(lo, -np.inf))
    if len(format_number(prev)) <= len(format_number(lo)):  # prefer the split threshold
        return ">", format_number(prev)
    return ">=", format_number(lo)


def conditions(
    model: Model, lo: np.ndarray, hi: np.ndarray, cats: dict[int, np.ndarray], r: int
) -> tuple[str, ...]:
    """The box *r* as readable per-feature conditions (features left unconstrained omitted)."""
    out = []
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            codes = np.flatnonzero(cats[i][r])
            if codes.size < len(f.values):
                out.append(f"{f.name} in {{{', '.join(f.values[c] for c in codes)}}}")
            continue
        a, b = float(lo[r, i]), float(hi[r, i])
        if a <= f.min and b >= f.max:
            continue
        if f.type is FeatureType.BOOL:
            out.append(f"{f.name} == {'true' if a >= 1 else 'false'}")
        elif a == b:
            out.append(f"{f.name} == {format_number(a)}")
        elif f.type is FeatureType.INT:
            out.append(f"{f.name} in [{format_number(a)}, {format_number(b)}]")
        elif a <= f.min:
            out.append(f"{f.name} <= {format_number(b)}")
        elif b >= f.max:
            op, t = _lower(a)
            out.append(f"{f.name} {op} {t}")
        else:
            op, t = _lower(a)
            out.append(f"{t} {'<' if op == '>' else '<='} {f.name} <= {format_number(b)}")
    return tuple(out)


def _intersections(
    old: Model, new: Model
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """(new_leaf, old_leaf, lo, hi, cats) of every non-empty intersection of leaf boxes."""
    n_feat = len(new.features)
    nb = leaf_boxes(new)
    keep = np.flatnonzero(nb.feasible)
    new_leaf = nb.leaves[keep]
    lo = nb.lo[keep, :n_feat]
    hi = nb.hi[keep, :n_feat]
    # Every categorical feature gets an explicit code mask (leaf_boxes may leave out the ones
    # NEW never splits on, but OLD may split on them).
    cats = {
        i: (
            np.array(nb.cats[i][keep], dtype=bool)
            if i in nb.cats
            else np.ones((keep.size, len(f.values)), dtype=bool)
        )
        for i, f in enumerate(new.features)
        if f.type is FeatureType.CATEGORICAL
    }
    node = np.zeros(keep.size, dtype=np.int64)
    kind = old.nodes["kind"]
    out_new, out_old, out_lo, out_hi = [], [], [], []
    out_cats: dict[int, list[np.ndarray]] = {f: [] for f in cats}
    while node.size:
        at_leaf = kind[node] == NodeKind.LEAF
        if at_leaf.any():
            out_new.append(new_leaf[at_leaf])
            out_old.append(node[at_leaf])
            out_lo.append(lo[at_leaf])
            out_hi.append(hi[at_leaf])
            for f, m in cats.items():
                out_cats[f].append(m[at_leaf])
        inner = ~at_leaf
        if not inner.any():
            break
        src = new_leaf[inner]
        node, lo, hi, cats = step_down(
            old, node[inner], lo[inner], hi[inner], {f: m[inner] for f, m in cats.items()}
        )
        new_leaf = np.concatenate([src, src])
        ok = ~empty_rows(lo, hi, cats)
        node, new_leaf, lo, hi = node[ok], new_leaf[ok], lo[ok], hi[ok]
        cats = {f: m[ok] for f, m in cats.items()}

    def cat(parts: list[np.ndarray], shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(shape, dtype=dtype)

    return (
        cat(out_new, (0,), np.int64),
        cat(out_old, (0,), np.int64),
        cat(out_lo, (0, n_feat), np.float64),
        cat(out_hi, (0, n_feat), np.float64),
        {f: cat(v, (0, len(new.features[f].values)), bool) for f, v in out_cats.items()},
    )


def describe_model(model: Model | Ensemble, path: str) -> dict[str, Any]:
    """The ``old``/``new`` header of a diff report.  A model compiled in memory from JSON
    source has no .clef digest: ``"sha256": null, "compiled_from": "json"``, as in ``info``
    and ``check`` (docs/format.md)."""
    return {
        "path": path,
        "name": model.name,
        "version": model.version,
        "sha256": None if model.from_source else model.sha256,
        "nodes": model.n_nodes,
        "leaves": model.n_leaves,
        **({"compiled_from": "json"} if model.from_source else {}),
    }


def diff(
    old: Model, new: Model, old_path: str = "OLD", new_path: str = "NEW", limit: int | None = None
) -> DiffReport:
    """Structural and semantic differences from *old* to *new* (see module docstring).

    *limit* caps the number of regions listed (largest share first); all are counted."""
    changes = tuple(gr.structural_changes(old, new))
    shared = gr.shared_stats(old, new)
    head = (describe_model(old, old_path), describe_model(new, new_path))
    reason = incompatibility(old, new)
    if reason is not None:
        return DiffReport(*head, changes, shared, False, reason)

    new_leaf, old_leaf, lo, hi, cats = _intersections(old, new)
    a_new = np.array([new.actions[a] for a in new.nodes["aux"][new_leaf]], dtype=object)
    a_old = np.array([old.actions[a] for a in old.nodes["aux"][old_leaf]], dtype=object)
    differs = a_new != a_old if new_leaf.size else np.zeros(0, dtype=bool)
    share = shares(new, lo, hi, cats)
    conf_only = (~differs) & (new.nodes["value"][new_leaf] != old.nodes["value"][old_leaf])
    rows = np.flatnonzero(differs)
    warnings: list[str] = []
    regions: list[Region] = []
    transitions: dict[str, float] = {}
    if rows.size:
        from clefprove.eval.evaluator import Evaluator
        from clefprove.verify.engine import nice_point

        sub = nm.Rows(
            lo[rows], hi[rows], {f: m[rows] for f, m in cats.items()}, np.zeros(rows.size)
        )
        X = np.stack([nice_point(new, sub, r) for r in range(rows.size)])
        got_new = Evaluator(new).evaluate(X)
        got_old = Evaluator(old).evaluate(X)
        order = sorted(range(rows.size), key=lambda r: (-share[rows[r]], int(new_leaf[rows[r]])))
        for r in order:
            row = int(rows[r])
            ok = (
                int(got_new.leaves[r]) == int(new_leaf[row])
                and int(got_old.leaves[r]) == int(old_leaf[row])
                and new.actions[int(got_new.actions[r])] != old.actions[int(got_old.actions[r])]
            )
            if not ok:  # never print an unconfirmed region
                warnings.append(
                    f"internal: region of NEW leaf {int(new_leaf[row])} / OLD leaf "
                    f"{int(old_leaf[row])} not confirmed by the evaluator; left out"
                )
                continue
            key = f"{a_old[row]} -> {a_new[row]}"
            transitions[key] = transitions.get(key, 0.0) + float(share[row])
            if limit is None or len(regions) < limit:
                regions.append(
                    Region(
                        conditions(new, lo[rows], hi[rows], sub.cats, r),
                        str(a_old[row]),
                        str(a_new[row]),
                        int(old_leaf[row]),
                        int(new_leaf[row]),
                        float(share[row]),
                        {f.name: f.decode(float(X[r, i])) for i, f in enumerate(new.features)},
                    )
                )
    total = int(rows.size) - len(warnings)
    return DiffReport(
        *head,
        changes,
        shared,
        True,
        None,
        tuple(regions),
        total,
        float(sum(transitions.values())),
        float(share[conf_only].sum()),
        dict(sorted(transitions.items(), key=lambda kv: -kv[1])),
        tuple(warnings),
    )
