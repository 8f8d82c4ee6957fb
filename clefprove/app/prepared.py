"""The costly per-model parts of a served model, built in the gate worker (no import of the
service: the worker needs these and nothing else from it)."""

from __future__ import annotations

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.eval.evaluator import Evaluator
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Model

#: Up to this many nodes, the single-input walk of a served model reads Python lists
#: (``tolist()`` in the serving process: about 0.1 ms for the depth-12 example); above, it
#: reads memoryviews of the arrays (``Evaluator.use_views``: the lists of 131,071 nodes took
#: 50-70 ms on the event loop).
WARM_NODES = 32768


def prepare(model: Model | Ensemble) -> Evaluator | EnsembleEvaluator:
    """The evaluator of *model*, its numpy tables derived.  The gate worker builds it; its
    tables travel to the serving process as raw bytes (``tables()``, ``from_tables``)."""
    if isinstance(model, Ensemble):
        return EnsembleEvaluator(model)
    return Evaluator(model)
