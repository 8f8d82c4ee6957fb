"""``clefprove diff`` on tree ensembles: what changed, and where the decisions differ.

**Structural**: trees are compared by position and by content hash
(:func:`clefprove.incremental.ensemble.tree_hashes`): a position whose tree has the same hash
is unchanged, one with another hash *changed* (with ``moved_from`` when that content was at
another position of OLD), positions past the shorter ensemble *added* or *removed*; the
combination (base scores, link, rule, divisor, scale, arithmetic) is compared field by field.

**Semantic**: a branch and bound over regions of the input domain, on the joint leaf structure
of both ensembles (the machinery of :mod:`clefprove.verify.ensemble`).  Per region, each
ensemble's reachable leaves give sound bounds on its scores and so the set of decisions it can
make there (:func:`~clefprove.verify.ensemble.outcomes`):

* both can make only one decision, the same one: the region decides the same everywhere;
* both only one, different ones: the region decides differently *everywhere*;
* every tree of both reaches a single leaf: both decisions are constant on the region, read
  at one point by the evaluators;
* otherwise the region is split at a threshold of a tree (of either ensemble) that still
  reaches several leaves, and both halves are searched.

Every reported region comes with an example input at which both evaluators
(:class:`~clefprove.eval.ensemble.EnsembleEvaluator`) give the reported actions; a region that
does not pass that check is left out with a warning.  Shares are measured as for single trees
(:func:`clefprove.geometry.measure.box_shares`).  When the time budget runs out, the report is
*partial*: the regions found so far, and the share of the domain settled (``share_explored``).
Regions where only the confidence differs are not computed for ensembles
(``share_confidence_only`` is null).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.geometry.boxes import Box
from clefprove.geometry.measure import box_shares
from clefprove.incremental import diff as df
from clefprove.incremental import graph as gr
from clefprove.incremental.ensemble import tree_hashes
from clefprove.model.ensemble import Ensemble
from clefprove.verify import ensemble as ve

#: Time budget of the behaviour search when none is given (seconds).
DEFAULT_BUDGET = 60.0


def _describe(model: Ensemble, path: str) -> dict[str, Any]:
    return {**df.describe_model(model, path), "trees": model.n_trees}


def _tree_summary(model: Ensemble, t: int, h: str) -> str:
    leaves = int(np.count_nonzero(model.tree_of_leaf() == t))
    return f"tree {t}: {int(model.sizes[t])} nodes, {leaves} leaves (content {h[:12]})"


def structure(
    old: Ensemble, new: Ensemble
) -> tuple[tuple[gr.Change, ...], dict[str, int], dict[str, Any]]:
    """(changes, shared counts, the ``ensemble`` JSON section) from *old* to *new*."""
    ho, hn = tree_hashes(old), tree_hashes(new)
    where_old: dict[str, int] = {}
    for t, h in enumerate(ho):
        where_old.setdefault(h, t)
    changes: list[gr.Change] = []
    unchanged, changed, added, removed = [], [], [], []
    for t in range(max(len(ho), len(hn))):
        if t < len(ho) and t < len(hn) and ho[t] == hn[t]:
            unchanged.append(t)
            continue
        if t < len(ho) and t < len(hn):
            kind, old_s, new_s = (
                "changed",
                _tree_summary(old, t, ho[t]),
                _tree_summary(new, t, hn[t]),
            )
            changed.append(t)
        elif t < len(hn):
            kind, old_s, new_s = "added", "(none)", _tree_summary(new, t, hn[t])
            added.append(t)
        else:
            kind, old_s, new_s = "removed", _tree_summary(old, t, ho[t]), "(none)"
            removed.append(t)
        moved = None
        if t < len(hn) and hn[t] in where_old and where_old[hn[t]] != t:
            moved = (f"tree {where_old[hn[t]]}",)
        changes.append(
            gr.Change(
                kind,
                (f"tree {t}",),
                old_s,
                new_s,
                int(old.roots[t]) if t < len(ho) else -1,
                int(new.roots[t]) if t < len(hn) else -1,
                int(np.count_nonzero(old.tree_of_leaf() == t)) if t < len(ho) else 0,
                int(np.count_nonzero(new.tree_of_leaf() == t)) if t < len(hn) else 0,
                moved,
            )
        )
    co, cn = old.combine.to_json(), new.combine.to_json()
    combine = {k: {"old": co[k], "new": cn.get(k)} for k in co if co[k] != cn.get(k)}
    if combine:
        changes.append(
            gr.Change(
                "changed",
                ("combination",),
                ", ".join(f"{k} {v['old']}" for k, v in combine.items()),
                ", ".join(f"{k} {v['new']}" for k, v in combine.items()),
                -1,
                -1,
                0,
                0,
            )
        )
    shared_new = [t for t in range(len(hn)) if hn[t] in where_old]
    shared = {
        "shared_subtrees": len(shared_new),
        "new_nodes_in_shared_subtrees": int(sum(int(new.sizes[t]) for t in shared_new)),
        "new_nodes": new.n_nodes,
    }
    section = {
        "trees_old": len(ho),
        "trees_new": len(hn),
        "unchanged": len(unchanged),
        "changed": changed,
        "added": added,
        "removed": removed,
        "combination": combine,
    }
    return tuple(changes), shared, section


@dataclass(eq=False)
class _Joint:
    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]
    reach_old: np.ndarray
    reach_new: np.ndarray

    def view(self, reach: np.ndarray) -> ve.Region:
        return ve.Region(self.lo, self.hi, self.cats, reach, 0.0)


@dataclass
class _Found:
    lo: np.ndarray
    hi: np.ndarray
    cats: dict[int, np.ndarray]
    share: float


def _spread(tab: ve.Tables, reach: np.ndarray) -> np.ndarray:
    hi = np.maximum.reduceat(np.where(reach[:, None], tab.values, -np.inf), tab.starts, axis=0)
    lo = np.minimum.reduceat(np.where(reach[:, None], tab.values, np.inf), tab.starts, axis=0)
    out: np.ndarray = (hi - lo).sum(axis=1)
    return out


def diff_ensembles(
    old: Ensemble,
    new: Ensemble,
    old_path: str = "OLD",
    new_path: str = "NEW",
    limit: int | None = None,
    budget: float | None = None,
) -> df.DiffReport:
    """Structural and behavioural differences from *old* to *new* (see module docstring).

    *limit* caps the regions listed (largest share first); all found are counted."""
    changes, shared, section = structure(old, new)
    head = (_describe(old, old_path), _describe(new, new_path))
    tab_o, tab_n = ve.ensemble_tables(old), ve.ensemble_tables(new)
    reason = df.incompatibility(tab_o.flat, tab_n.flat)
    if reason is not None:
        return df.DiffReport(*head, changes, shared, False, reason, ensemble=section)
    deadline = time.perf_counter() + (DEFAULT_BUDGET if budget is None else budget)
    name_o = [old.actions[a] for a in range(len(old.actions))]
    name_n = [new.actions[a] for a in range(len(new.actions))]
    dom = Box.domain(new)
    cats0 = {i: dom.cats[i] for i in dom.cats}
    stack = [_Joint(dom.lo, dom.hi, cats0, tab_o.feasible.copy(), tab_n.feasible.copy())]
    ev_o, ev_n = EnsembleEvaluator(old), EnsembleEvaluator(new)
    settled = 0.0
    candidates: list[tuple[_Joint, str | None, str | None]] = []  # region, old, new action
    partial = False

    def share_of(g: _Joint) -> float:
        return float(
            box_shares(
                tab_n.flat, g.lo[None, :], g.hi[None, :], {f: m[None, :] for f, m in g.cats.items()}
            )[0]
        )

    while stack:
        if time.perf_counter() > deadline:
            partial = True
            break
        g = stack.pop()
        lo_o, hi_o, n_o = ve.score_bounds(old, tab_o, g.reach_old)
        lo_n, hi_n, n_n = ve.score_bounds(new, tab_n, g.reach_new)
        if np.any(n_o == 0) or np.any(n_n == 0):
            continue  # no input in the region (its share is 0)
        acts_o = {name_o[a] for a in ve.outcomes(old, lo_o, hi_o).actions.tolist()}
        acts_n = {name_n[a] for a in ve.outcomes(new, lo_n, hi_n).actions.tolist()}
        if len(acts_o) == 1 and len(acts_n) == 1:
            a, b = next(iter(acts_o)), next(iter(acts_n))
            if a != b:
                candidates.append((g, a, b))
            else:
                settled += share_of(g)
            continue
        if np.all(n_o == 1) and np.all(n_n == 1):
            candidates.append((g, None, None))  # constant decisions: read at one point
            continue
        s_o = np.where(n_o >= 2, _spread(tab_o, g.reach_old), -np.inf)
        s_n = np.where(n_n >= 2, _spread(tab_n, g.reach_new), -np.inf)
        use_new = float(s_n.max()) >= float(s_o.max())
        first = (
            (new, tab_n, g.reach_new, s_n, n_n) if use_new else (old, tab_o, g.reach_old, s_o, n_o)
        )
        split = ve._split_node(first[0], first[1], g.view(first[2]), first[3], first[4])
        if split is None:  # pragma: no cover - a multi-leaf tree always splits the region
            raise AssertionError("no split inside a region that reaches several leaves")
        kids_o = ve._children(old, tab_o, g.view(g.reach_old), *split)
        kids_n = ve._children(new, tab_n, g.view(g.reach_new), *split)
        for ko, kn in reversed(list(zip(kids_o, kids_n, strict=True))):
            stack.append(_Joint(kn.lo, kn.hi, kn.cats, ko.reach, kn.reach))
    # Confirm every candidate with both evaluators at one readable point of it.
    warnings: list[str] = []
    found: list[tuple[_Found, str, str, np.ndarray, tuple[int, ...], tuple[int, ...]]] = []
    if candidates:
        X = np.stack([ve._point(new, g.view(g.reach_new)) for g, _, _ in candidates])
        bo, bn = ev_o.evaluate(X), ev_n.evaluate(X)
        for r, (g, a, b) in enumerate(candidates):
            got_o = name_o[int(bo.actions[r])]
            got_n = name_n[int(bn.actions[r])]
            share = share_of(g)
            if a is None:  # a cell: the decisions at the point are the region's
                if got_o == got_n:
                    settled += share
                    continue
                a, b = got_o, got_n
            if (got_o, got_n) != (a, b):  # never print an unconfirmed region
                warnings.append(
                    "internal: an ensemble region was not confirmed by the evaluators; left out"
                )
                continue
            settled += share
            found.append(
                (
                    _Found(g.lo, g.hi, g.cats, share),
                    a,
                    b,
                    X[r],
                    tuple(int(v) for v in bo.leaves[r]),
                    tuple(int(v) for v in bn.leaves[r]),
                )
            )
    found.sort(key=lambda x: -x[0].share)
    transitions: dict[str, float] = {}
    regions: list[df.Region] = []
    for box, a, b, x, lo_leaves, ln_leaves in found:
        key = f"{a} -> {b}"
        transitions[key] = transitions.get(key, 0.0) + box.share
        if limit is None or len(regions) < limit:
            cats = {f: m[None, :] for f, m in box.cats.items()}
            regions.append(
                df.Region(
                    df.conditions(tab_n.flat, box.lo[None, :], box.hi[None, :], cats, 0),
                    a,
                    b,
                    -1,
                    -1,
                    box.share,
                    {f.name: f.decode(float(x[i])) for i, f in enumerate(new.features)},
                    lo_leaves,
                    ln_leaves,
                )
            )
    explored = 1.0 if not partial else max(0.0, min(1.0, settled))
    if partial:
        warnings.append(
            f"the behaviour search stopped at its time budget: {explored:.1%} of the input "
            "domain explored; the regions listed are those found so far"
        )
    return df.DiffReport(
        *head,
        changes,
        shared,
        True,
        None,
        tuple(regions),
        len(found),
        float(sum(transitions.values())),
        None,
        dict(sorted(transitions.items(), key=lambda kv: -kv[1])),
        tuple(warnings),
        partial,
        explored,
        section,
    )
