"""What a result is made of: counterexamples confirmed by the evaluator and described, and the
vacuity of ``when``.  Shared by the per-path results (:mod:`clefprove.verify.api`) and the
relational ones (:mod:`clefprove.verify.relational`), so neither imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.geometry.boxes import Box, LeafBoxes, path_to
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import LEAF_CODE, NUMERIC_CODE, FeatureType, Model
from clefprove.verify import engine as eg
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import Counterexample, RegionOf


def when_invariant(inv: ck.CheckedInvariant) -> ck.CheckedInvariant:
    """``when`` of *inv* as an invariant of its own (``ensure false``): a leaf "violates" it
    when some input of the leaf satisfies ``when``.  One object per *inv* (kept by *inv*), so
    that its normal form is memoised with it."""
    return inv.derived.get(
        ("verify.when",),
        lambda: ck.CheckedInvariant(
            inv.name + "-when", None, inv.file, inv.line, 1, inv.when, ck.Const(False)
        ),
    )


def when_is_vacuous(
    model: Model, prep: eg.Prepared, boxes: LeafBoxes, settings: CheckOptions
) -> bool:
    """True only when ``when`` is proved unsatisfiable on the whole domain."""
    if prep.invariant.when == ck.Const(True):  # no 'when': satisfiable by every input
        return False
    if _when_met_at_a_landmark(model, prep.invariant):
        return False
    wprep = eg.prepare_when(model, when_invariant(prep.invariant), prep, settings.dnf_cap)
    n_feat = len(model.features)
    if nm.uses_decision(wprep.violation, n_feat):
        pv = eg.decide(model, wprep, boxes, settings)
    else:
        pv = eg.decide(model, wprep, domain_boxes(model), settings)
    return bool(np.all(pv.status == eg.SAFE))


def _when_met_at_a_landmark(model: Model, inv: ck.CheckedInvariant) -> bool:
    """Whether ``when`` holds at one of a few inputs of the domain (one aimed at the literals
    of ``when``, the defaults, the lower and upper corners, the middle): one such input proves
    it satisfiable, for the price of a few exact evaluations instead of the box stages."""
    decided = ck.mentions_decision(inv.when)
    landmarks = model.derived.get(("verify.landmarks",), lambda: _landmarks(model))
    aimed = _aimed_landmark(model, inv.when, landmarks[0])
    for x in landmarks if aimed is None else (aimed, *landmarks):
        action, confidence = -1, 0.0  # read only by a 'when' that mentions the decision
        if decided:
            d = evaluator_for(model).evaluate_one(np.array(x, dtype=np.float64))
            action, confidence = int(d.action), float(d.confidence)
        if ck.evaluate(inv.when, x, action, confidence):
            return True
    return False


def _aimed_landmark(model: Model, when: ck.Formula, start: list[float]) -> list[float] | None:
    """An input of the domain that satisfies as many single-feature literals of ``when``'s
    top-level conjunction as it can: from *start*, each literal that does not hold moves its
    feature to the literal's boundary (rounded onto the feature's values, clipped into its
    range).  None when no literal moved anything.  Only a guess: the caller evaluates
    ``when`` at it exactly."""
    x = list(start)
    moved = False
    for lit in when.args if isinstance(when, ck.And) else (when,):
        negated = isinstance(lit, ck.Not)
        atom = lit.arg if isinstance(lit, ck.Not) else lit
        if isinstance(atom, ck.InSet):
            if (int(x[atom.feature]) in atom.codes) != negated:
                continue
            f = model.features[atom.feature]
            if f.type not in (FeatureType.CATEGORICAL, FeatureType.BOOL):
                continue
            codes = [c for c in range(int(f.min), int(f.max) + 1) if (c in atom.codes) != negated]
            if codes:
                x[atom.feature], moved = float(codes[0]), True
            continue
        if (
            not isinstance(atom, ck.Compare)
            or len(atom.expr.terms) != 1
            or atom.expr.terms[0][0] == ck.CONFIDENCE
            or ck.evaluate(lit, x, -1, 0.0)
        ):
            continue
        ((var, coeff),) = atom.expr.terms
        f = model.features[var]
        # c*x + k <= 0 (< 0 if strict), or its negation: x below (or above) the boundary
        below = (coeff > 0) != negated
        try:  # the boundary in float64: a guess, which the exact evaluations below test
            t = -float(atom.expr.const) / float(coeff)
        except (OverflowError, ZeroDivisionError):
            continue
        if math.isnan(t):
            continue
        t = min(max(t, f.min), f.max)
        if f.is_integral:
            v = float(math.floor(t) if below else math.ceil(t))
            nudged = v - 1.0 if below else v + 1.0
        else:
            v = t
            nudged = math.nextafter(v, -math.inf if below else math.inf)
        if not ck.evaluate(lit, [v if i == var else w for i, w in enumerate(x)], -1, 0.0):
            v = nudged  # the boundary itself is excluded (strict) or rounded the wrong way
        v = min(max(v, f.min), f.max)
        if not f.is_integral or v == math.floor(v):
            x[var], moved = v, True
    return x if moved else None


def _landmarks(model: Model) -> tuple[list[float], ...]:
    """The inputs of :func:`_when_met_at_a_landmark` (kept by the model)."""
    feats = model.features
    mid = [f.min / 2 + f.max / 2 for f in feats]  # no overflow at the float64 ends
    mid = [math.floor(v) if f.is_integral else v for f, v in zip(feats, mid, strict=True)]
    return tuple(
        [min(max(float(v), f.min), f.max) for f, v in zip(feats, point, strict=True)]
        for point in (
            [f.default for f in feats],
            [f.min for f in feats],
            [f.max for f in feats],
            mid,
        )
    )


def when_is_vacuous_on_domain(
    model: Model, prep: eg.Prepared, settings: CheckOptions, probes: Sequence[np.ndarray] = ()
) -> bool:
    """True only when ``when`` (which must not mention the decision) is proved unsatisfiable
    on the domain box; False (not proved) when it mentions the decision (ensembles).  Inputs
    *probes* (an ensemble search's roots) are tried first: ``when`` true at one of them, which
    :func:`when_met_at` checks are inputs of the domain, proves it satisfiable."""
    when = prep.invariant.when
    if probes and not ck.mentions_decision(when) and when_met_at(model, when, probes):
        return False
    wprep = eg.prepare_when(model, when_invariant(prep.invariant), prep, settings.dnf_cap)
    if nm.uses_decision(wprep.violation, len(model.features)):
        return False
    pv = eg.decide(model, wprep, domain_boxes(model), settings)
    return bool(np.all(pv.status == eg.SAFE))


def domain_boxes(model: Model) -> LeafBoxes:
    """The whole domain as a single box (confidence column [0, 1], no action)."""
    d = Box.domain(model)
    lo = np.append(d.lo, 0.0)[None, :]
    hi = np.append(d.hi, 1.0)[None, :]
    return LeafBoxes(
        np.array([0]),
        lo,
        hi,
        {f: m[None, :] for f, m in d.cats.items()},
        np.array([-1]),
        np.array([not d.empty]),
    )


def when_met_at(model: Model, when: ck.Formula, points: Sequence[np.ndarray]) -> bool:
    """Whether *when* (not mentioning the decision) is exactly true at one of *points* that is
    an input of the domain (each value within its feature's range, whole for an integral
    feature; the others are skipped)."""
    feats = model.features
    lo = np.array([f.min for f in feats])
    hi = np.array([f.max for f in feats])
    whole = np.array([f.is_integral for f in feats], dtype=bool)
    for p in points:
        if p.shape != lo.shape or not np.all((lo <= p) & (p <= hi)):
            continue
        if not np.all(p[whole] == np.floor(p[whole])):
            continue
        if ck.evaluate(when, p.tolist(), -1, 0.0):
            return True
    return False


def evaluator_for(model: Model) -> Any:
    """The single-input evaluator that confirms counterexamples (kept by the model): it walks
    the node records directly, so confirming a few witnesses builds nothing that grows with
    the tree."""
    from clefprove.eval.evaluator import NodeWalker

    return model.derived.get(("eval.walker",), lambda: NodeWalker(model))


def decode(model: Model | Ensemble, x: np.ndarray) -> dict[str, Any]:
    """Encoded input -> the JSON record a user writes."""
    return {f.name: f.decode(float(x[i])) for i, f in enumerate(model.features)}


def encode(model: Model | Ensemble, record: dict[str, Any]) -> np.ndarray:
    """The JSON record of an input -> its encoded values (the inverse of :func:`decode`)."""
    out = np.empty(len(model.features), dtype=np.float64)
    for i, f in enumerate(model.features):
        v = record[f.name]
        out[i] = f.values.index(v) if f.type is FeatureType.CATEGORICAL else float(v)
    return out


def confirm(
    model: Model, evaluator: Any, inv: ck.CheckedInvariant, leaf: int, x: np.ndarray
) -> Counterexample | None:
    """A counterexample for *x* if the evaluator confirms it (else None): the decoded input
    re-encodes to *x*, is in the domain, reaches *leaf*, satisfies ``when``, breaks ``ensure``."""
    # in the domain before decoding: a witness kept in a (forged) cache can be any number
    for i, f in enumerate(model.features):
        if not (f.min <= x[i] <= f.max):
            return None
    record = decode(model, x)
    xe = encode(model, record)
    if not np.array_equal(xe, x):
        return None
    d = evaluator.evaluate_one(xe)
    if int(d.leaf) != leaf:
        return None
    xs = xe.tolist()
    if not ck.evaluate(inv.when, xs, d.action, d.confidence):
        return None
    if ck.evaluate(inv.ensure_formula, xs, d.action, d.confidence):
        return None
    return Counterexample(
        record, model.actions[d.action], float(d.confidence), leaf, describe_path(model, leaf)
    )


def describe_region(model: Model, leaf: int) -> tuple[str, ...]:
    """The box of inputs that reach *leaf*, one bound pair per feature its path narrows (the
    path by descent from the root: no whole-tree parent links, which a re-check that reuses
    every result would build for this alone)."""
    from clefprove.model.describe import region_conditions

    return tuple(region_conditions(model, [*(n for n, _ in _printed_path(model, leaf)), leaf]))


def describe_ensemble_region(model: Ensemble, leaves: Sequence[int]) -> tuple[str, ...]:
    """The box of inputs at which tree t of *model* reaches ``leaves[t]`` for every t (each
    tree's route by descent from its root), one bound pair per feature some route narrows:
    what an ensemble's counterexample gives as its ``path``, since every input of that box
    gets the same decision."""
    from clefprove.model.describe import box_conditions, joint_region_conditions

    steps = _routes(model, leaves)
    if steps is None:  # not laid out in pre-order: each tree's own path
        routes = []
        for t, leaf in enumerate(leaves):
            tree = model.tree(t)
            routes.append((tree, [*(n for n, _ in path_to(tree, int(leaf))), int(leaf)]))
        return tuple(joint_region_conditions(routes))
    at, went_left = steps
    nodes = model.nodes[at]
    numeric = nodes["kind"] == NUMERIC_CODE
    lower: dict[int, float] = {}
    upper: dict[int, float] = {}
    for f, t, left in zip(
        nodes["feature"][numeric].tolist(),
        nodes["value"][numeric].tolist(),
        went_left[numeric].tolist(),
        strict=True,
    ):
        if left:
            upper[f] = min(upper.get(f, t), t)
        else:
            lower[f] = max(lower.get(f, t), t)
    sets: dict[int, set[int]] = {}
    for f, offset, left in zip(
        nodes["feature"][~numeric].tolist(),
        nodes["aux"][~numeric].tolist(),
        went_left[~numeric].tolist(),
        strict=True,
    ):
        size = len(model.features[f].values)
        members = model.membership[offset : offset + size]
        codes = {c for c in range(size) if bool(members[c]) == left}
        sets[f] = sets.get(f, set(range(size))) & codes
    return tuple(box_conditions(model.features, lower, upper, sets))


def _routes(model: Ensemble, leaves: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The splits (global record indices, whether the route goes left) on the way from each
    tree's root to its leaf in *leaves*, all trees descending at once by the pre-order rule of
    :func:`path_to` (the leaf is on the right exactly when it is at or after the right
    child); None when some descent does not arrive (another layout)."""
    roots = model.roots.astype(np.intp)
    target = roots + np.asarray(leaves, dtype=np.intp)
    nodes = model.nodes
    s = roots.copy()
    found: list[np.ndarray] = []
    lefts: list[np.ndarray] = []
    for _ in range(model.max_depth + 1):
        moving = np.flatnonzero(s != target)
        if not moving.size:
            return np.concatenate(found or [s[:0]]), np.concatenate(lefts or [s[:0] > 0])
        at = s[moving]
        rec = nodes[at]
        if (rec["kind"] == LEAF_CODE).any():
            return None
        base = roots[moving]
        right = base + rec["right"].astype(np.intp)
        go_left = target[moving] < right
        found.append(at)
        lefts.append(go_left)
        s[moving] = np.where(go_left, base + rec["left"].astype(np.intp), right)
    return None


def region_describer(model: Model) -> RegionOf:
    """:func:`describe_region` of *model* as a ``RegionOf`` (a leaf and an input that reaches
    it), each leaf described once."""
    regions: dict[int, tuple[str, ...]] = {}

    def region_of(leaf: int, _x: dict[str, Any]) -> tuple[str, ...]:
        if leaf not in regions:
            regions[leaf] = describe_region(model, leaf)
        return regions[leaf]

    return region_of


def _printed_path(model: Model, leaf: int) -> tuple[tuple[int, bool], ...]:
    """:func:`path_to` for the leaf of a printed counterexample, kept per model (its path and
    its region both read it; at most K leaves per invariant are printed)."""
    known: dict[int, tuple[tuple[int, bool], ...]] = model.derived.get(
        ("verify.printed_paths",), dict
    )
    got = known.get(leaf)
    if got is None:
        got = known[leaf] = tuple(path_to(model, leaf))
    return got


def describe_path(model: Model, leaf: int) -> tuple[str, ...]:
    """Readable split conditions from the root to *leaf*."""
    from clefprove.model.describe import condition

    steps = _printed_path(model, leaf)
    # Kept per model: the counterexamples of a run share the top of their paths.
    texts: dict[tuple[int, bool], str] = model.derived.get(("verify.path_conditions",), dict)
    todo = [step for step in steps if step not in texts]
    for node, (_, left) in zip(model.nodes_at([n for n, _ in todo]), todo, strict=True):
        texts[node.index, left] = condition(model, node, left)
    return tuple(texts[step] for step in steps)
