"""One entry for a behaviour diff of two models, whatever their kind: two single trees
(:func:`clefprove.incremental.diff.diff`), two ensembles
(:func:`clefprove.incremental.ensemble_diff.diff_ensembles`, imported only then: a diff or a
gate of single trees loads no ensemble machinery), or a tree against an ensemble."""

from __future__ import annotations

from clefprove.errors import ClefproveError
from clefprove.incremental import diff as df
from clefprove.incremental import graph as gr
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Model


def diff_models(
    old: Model | Ensemble,
    new: Model | Ensemble,
    old_path: str = "OLD",
    new_path: str = "NEW",
    limit: int | None = None,
    budget: float | None = None,
    refuse_mixed: bool = True,
) -> df.DiffReport:
    """The diff of two single trees (:func:`clefprove.incremental.diff.diff`) or of two
    ensembles (:func:`diff_ensembles`); a tree and an ensemble are refused in one line, or
    without *refuse_mixed* reported as not comparable (:func:`mixed_kinds`: the gate's
    summary, which never changes the gate's status)."""
    if isinstance(old, Model) and isinstance(new, Model):
        return df.diff(old, new, old_path, new_path, limit)
    if isinstance(old, Ensemble) and isinstance(new, Ensemble):
        from clefprove.incremental.ensemble_diff import diff_ensembles

        return diff_ensembles(old, new, old_path, new_path, limit, budget)
    if not refuse_mixed:
        return mixed_kinds(old, new, old_path, new_path)
    which = old_path if isinstance(old, Ensemble) else new_path
    raise ClefproveError(
        f"{which}: a tree ensemble cannot be compared with a single tree "
        "(diff compares two trees or two ensembles)"
    )


def _kind(model: Model | Ensemble) -> str:
    if isinstance(model, Ensemble):
        return f"an ensemble of {model.n_trees} trees, {model.n_nodes} nodes"
    return f"a single tree of {model.n_nodes} nodes"


def mixed_kinds(
    old: Model | Ensemble, new: Model | Ensemble, old_path: str, new_path: str
) -> df.DiffReport:
    """A tree against an ensemble: one structural change (the whole model), behaviour not
    compared."""
    change = gr.Change("changed", (), _kind(old), _kind(new), 0, 0, old.n_leaves, new.n_leaves)
    reason = f"{_kind(old)} against {_kind(new)}: diff compares two trees or two ensembles"
    return df.DiffReport(
        df.describe_model(old, old_path), df.describe_model(new, new_path), (change,), {},
        False, reason,
    )  # fmt: skip
