"""The costly per-model parts of a served model, built in the gate worker (no import of the
service: the worker needs these and nothing else from it)."""

from __future__ import annotations

from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import RecordEncoder
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Model

#: Up to this many nodes, the worker builds the evaluator's scalar tables too (unpickling
#: them is cheaper than building them: 0.7 ms against 1.1 ms for the depth-12 example, both
#: on the loaded machine); above, the serving process builds them (``tolist()`` there takes
#: 70 ms for 131,071 nodes, unpickling the same lists 150 ms more than the arrays alone).
WARM_NODES = 32768


def prepare(model: Model | Ensemble) -> Evaluator | EnsembleEvaluator:
    """The evaluator of *model*, its numpy tables derived (and, for a model of at most
    :data:`WARM_NODES` nodes, its scalar tables: the Python lists of the single-input walk).
    The gate worker builds it; it travels to the serving process pickled, with the model."""
    if isinstance(model, Ensemble):
        return EnsembleEvaluator(model)  # its tables are numpy arrays, built here
    evaluator = Evaluator(model)
    if model.n_nodes <= WARM_NODES:
        evaluator.evaluate_one(RecordEncoder(model).values({}))
    return evaluator
