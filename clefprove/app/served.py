"""The served model: one immutable object per admitted model (a tree, :class:`ServedModel`, or
an ensemble, :class:`ServedEnsemble`), swapped as a single reference.

A request takes the current :class:`ServedModel` once, when it starts, and uses only that
object: a reload that completes meanwhile cannot change the model a request is answered by.
Everything a decision needs (the validated model, its evaluator with its tables built, the
record encoder, the metric children, the answer text per leaf) hangs off this object, so a
request allocates nothing heavy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import field
from typing import Any

import numpy as np

from clefprove.app.admission import Verdict
from clefprove.app.prepared import WARM_NODES, prepare
from clefprove.errors import InputError
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import RecordEncoder
from clefprove.frozen import frozen
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model

#: From this many inputs on, a batch is decided by the vectorised evaluator.
BATCH_MIN = 32


class _Inputs:
    """Encoding and clip counting, shared by the served forms (a mixin, no fields)."""

    encoder: RecordEncoder
    bounds: dict[str, tuple[float, float, Any]]

    def encode(self, record: Any) -> list[float]:
        """The encoded input (raises :class:`InputError`); clipped values are not counted yet."""
        return self.encoder.values(record)

    def count_clipped(self, record: dict[str, Any]) -> None:
        """Count the values of a valid *record* that lie outside their feature's domain."""
        bounds = self.bounds
        for name, v in record.items():
            b = bounds.get(name)
            if b is not None and (v < b[0] or v > b[1]):
                b[2].inc()


@frozen
class ServedModel(_Inputs):
    """An admitted model, ready to decide (build it with :func:`serve_model`)."""

    model: Model
    verdict: Verdict
    origin: str  # where it came from: "startup PATH", "upload", "SIGHUP PATH", "rollback"
    admitted_at: str  # ISO 8601 UTC
    evaluator: Evaluator
    encoder: RecordEncoder
    action_counters: Sequence[Any]  # prometheus Counter children, by action index
    bounds: dict[str, tuple[float, float, Any]]  # numeric feature -> (min, max, counter)
    identity: str  # the answer's "model" object, as JSON text
    leaf_actions: Sequence[int]  # action index by node index (meaningful at leaves)
    _answers: dict[int, bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def sha256(self) -> str:
        return self.model.sha256

    def answer(self, leaf: int) -> bytes:
        """The JSON answer for a decision at *leaf* (built once per leaf, then reused)."""
        text = self._answers.get(leaf)
        if text is None:
            m = self.model
            action = m.actions[int(m.nodes["aux"][leaf])]
            confidence = float(m.nodes["value"][leaf])
            text = self._answers[leaf] = (
                f'{{"action": {json.dumps(action, allow_nan=False)}, "confidence": {confidence!r}, '
                f'"leaf": {leaf}, "model": {self.identity}}}'
            ).encode()
        return text

    def decide(self, rows: list[list[float]]) -> list[int]:
        """The leaf of every encoded input."""
        if len(rows) >= BATCH_MIN:
            batch = self.evaluator.evaluate(np.array(rows, dtype=np.float64))
            leaves: list[int] = batch.leaves.tolist()
            return leaves
        one = self.evaluator.evaluate_one
        return [one(x).leaf for x in rows]

    def count_decisions(self, leaves: list[int]) -> None:
        aux = self.leaf_actions
        counters = self.action_counters
        for leaf in leaves:
            counters[aux[leaf]].inc()

    def description(self) -> dict[str, Any]:
        """What ``GET /model`` answers: identity, digests and the verdicts of admission."""
        m, v = self.model, self.verdict
        check = v.check or {}
        digests = dict(v.digests)
        return {
            "name": m.name,
            "version": m.version,
            "sha256": m.sha256,
            "nodes": m.n_nodes,
            "leaves": m.n_leaves,
            "depth": int(m.max_depth),
            "origin": self.origin,
            "admitted_at": self.admitted_at,
            "summary": check.get("summary"),
            "invariants": [
                {
                    "invariant": r["invariant"],
                    "digest": digests.get(r["invariant"]),
                    "file": r.get("file"),
                    "line": r.get("line"),
                    "status": r["status"],
                    **({"vacuous": True} if r.get("vacuous") else {}),
                }
                for r in check.get("results", [])
            ],
        }


#: Distinct ensemble decisions whose answer text a served ensemble keeps (then starts over).
ANSWERS_MAX = 65536


@frozen
class ServedEnsemble(_Inputs):
    """An admitted tree ensemble, ready to decide: the interface of :class:`ServedModel`,
    with decision keys that stand for (action, confidence, each tree's leaf) instead of a
    leaf.  ``decide`` hands out the keys and ``answer``/``count_decisions`` read them in the
    same request (the event loop runs the three without a pause in between)."""

    model: Ensemble
    verdict: Verdict
    origin: str
    admitted_at: str
    evaluator: EnsembleEvaluator
    encoder: RecordEncoder
    action_counters: Sequence[Any]
    bounds: dict[str, tuple[float, float, Any]]
    identity: str
    _keys: dict[tuple[int, float, tuple[int, ...]], int] = field(
        default_factory=dict, repr=False, compare=False
    )
    _answers: list[bytes] = field(default_factory=list, repr=False, compare=False)
    _actions: list[int] = field(default_factory=list, repr=False, compare=False)

    @property
    def sha256(self) -> str:
        return self.model.sha256

    def decide(self, rows: list[list[float]]) -> list[int]:
        """A decision key for every encoded input."""
        if not rows:  # a /decide body of [] (numpy makes it shape (0,), not (0, n))
            return []
        batch = self.evaluator.evaluate(np.array(rows, dtype=np.float64))
        if len(self._keys) + len(rows) > ANSWERS_MAX:
            self._keys.clear()
            self._answers.clear()
            self._actions.clear()
        out = []
        for a, c, leaves in zip(
            batch.actions.tolist(), batch.confidences.tolist(), batch.leaves.tolist(), strict=True
        ):
            key = (a, c, tuple(leaves))
            k = self._keys.get(key)
            if k is None:
                k = self._keys[key] = len(self._answers)
                per_tree = json.dumps(leaves, allow_nan=False)  # SPEC's "leaf", one per tree
                self._answers.append(
                    (
                        f'{{"action": {json.dumps(self.model.actions[a], allow_nan=False)}, '
                        f'"confidence": {c!r}, "leaf": {per_tree}, "leaves": {per_tree}, '
                        f'"model": {self.identity}}}'
                    ).encode()
                )
                self._actions.append(a)
            out.append(k)
        return out

    def answer(self, key: int) -> bytes:
        """The JSON answer for decision *key* (from :meth:`decide` in this request)."""
        return self._answers[key]

    def count_decisions(self, keys: list[int]) -> None:
        actions, counters = self._actions, self.action_counters
        for k in keys:
            counters[actions[k]].inc()

    def description(self) -> dict[str, Any]:
        """What ``GET /model`` answers (as for a single tree, plus the number of trees)."""
        return {**ServedModel.description(self), "trees": self.model.n_trees}  # type: ignore[arg-type]


#: What the service serves: a single tree or an ensemble.
Served = ServedModel | ServedEnsemble


def serve_model(
    model: Model | Ensemble,
    verdict: Verdict,
    origin: str,
    admitted_at: str,
    metrics: Any,
    evaluator: Evaluator | EnsembleEvaluator | None = None,
    like: Served | None = None,
) -> Served:
    """Build the served form of an admitted *model*, every per-model table included
    (*evaluator*: :func:`prepare`'s result for *model*, built elsewhere).  *like*: the model
    served until now, whose encoder and metric children are shared when *model* has the very
    same parsed features and actions (``load_admitted(..., like=...)``)."""
    if not verdict.admitted or verdict.sha256 != model.sha256:
        raise ValueError("only a model whose own bytes passed the gate is served")
    if evaluator is not None and evaluator.model is not model:
        raise ValueError("the evaluator was built for another model")
    if evaluator is None:
        evaluator = prepare(model)
    counters: Sequence[Any]
    if (
        like is not None
        and like.model.features is model.features
        and like.model.actions is model.actions
    ):
        # the same parsed interface (load_admitted took it from *like*): the same encoder
        # tables, metric children and bounds; only the encoder's model is this one
        encoder = copy.copy(like.encoder)
        encoder.model = model
        counters, bounds = like.action_counters, like.bounds
    else:
        encoder = RecordEncoder(model)
        numeric = [f for f in model.features if f.type in (FeatureType.INT, FeatureType.FLOAT)]
        counters, oob = metrics.bind_model(model.actions, [f.name for f in numeric])
        bounds = {f.name: (f.min, f.max, oob[f.name]) for f in numeric}
    identity = json.dumps(
        {"name": model.name, "version": model.version, "sha256": model.sha256}, allow_nan=False
    )
    served: Served
    if isinstance(model, Ensemble):
        assert isinstance(evaluator, EnsembleEvaluator)
        served = ServedEnsemble(
            model, verdict, origin, admitted_at, evaluator, encoder, counters, bounds, identity
        )
    else:
        assert isinstance(evaluator, Evaluator)
        if model.n_nodes > WARM_NODES:
            evaluator.use_views()  # no Python lists for a large model: tens of ms on the loop
        served = ServedModel(
            model,
            verdict,
            origin,
            admitted_at,
            evaluator,
            encoder,
            counters,
            bounds,
            identity,
            evaluator.node_actions(),  # the walk's own table (no second tolist())
        )
    # Decide the all-defaults input once: builds the evaluator's scalar tables now, not on the
    # first request after a swap.
    served.decide([encoder.values({})])
    return served


def one_line_input_error(exc: InputError, index: int | None) -> str:
    message = exc.one_line()
    return message if index is None else f"input {index}: {message}"
