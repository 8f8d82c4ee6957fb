"""The costly per-model parts of a served model, built in the gate worker (no import of the
service: the worker needs these and nothing else from it)."""

from __future__ import annotations

import numpy as np

from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import RecordEncoder
from clefprove.model.types import Model


def prepare(model: Model) -> tuple[Evaluator, list[int]]:
    """The evaluator of *model* with every table built (the all-defaults input decided once,
    so its scalar tables exist too) and the action index by node.  The gate worker builds
    them; they travel to the serving process pickled, with the model."""
    evaluator = Evaluator(model)
    evaluator.evaluate_one(RecordEncoder(model).values({}))
    return evaluator, model.nodes["aux"].astype(np.intp).tolist()
