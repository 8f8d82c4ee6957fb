"""The served model: one immutable object per admitted model, swapped as a single reference.

A request takes the current :class:`ServedModel` once, when it starts, and uses only that
object: a reload that completes meanwhile cannot change the model a request is answered by.
Everything a decision needs (the validated model, its evaluator with its tables built, the
record encoder, the metric children, the answer text per leaf) hangs off this object, so a
request allocates nothing heavy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clefprove.app.admission import Verdict
from clefprove.app.prepared import prepare
from clefprove.errors import InputError
from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import RecordEncoder
from clefprove.model.types import FeatureType, Model

#: From this many inputs on, a batch is decided by the vectorised evaluator.
BATCH_MIN = 32


@dataclass(frozen=True)
class ServedModel:
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
    leaf_actions: list[int]  # action index by node index (meaningful at leaves)
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


def serve_model(
    model: Model,
    verdict: Verdict,
    origin: str,
    admitted_at: str,
    metrics: Any,
    evaluator: Evaluator | None = None,
) -> ServedModel:
    """Build the served form of an admitted *model*, every per-model table included
    (*evaluator*: :func:`prepare`'s result for *model*, built elsewhere)."""
    if not verdict.admitted or verdict.sha256 != model.sha256:
        raise ValueError("only a model whose own bytes passed the gate is served")
    if evaluator is not None and evaluator.model is not model:
        raise ValueError("the evaluator was built for another model")
    if evaluator is None:
        evaluator = prepare(model)
    encoder = RecordEncoder(model)
    numeric = [f for f in model.features if f.type in (FeatureType.INT, FeatureType.FLOAT)]
    counters, oob = metrics.bind_model(model.actions, [f.name for f in numeric])
    identity = json.dumps(
        {"name": model.name, "version": model.version, "sha256": model.sha256}, allow_nan=False
    )
    served = ServedModel(
        model,
        verdict,
        origin,
        admitted_at,
        evaluator,
        encoder,
        counters,
        {f.name: (f.min, f.max, oob[f.name]) for f in numeric},
        identity,
        model.nodes["aux"].astype(np.intp).tolist(),
    )
    # Decide the all-defaults input once: builds the evaluator's scalar tables now, not on the
    # first request after a swap.
    served.decide([encoder.values({})])
    return served


def one_line_input_error(exc: InputError, index: int | None) -> str:
    message = exc.one_line()
    return message if index is None else f"input {index}: {message}"
