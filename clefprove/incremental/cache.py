"""The proof cache that ``clefprove.check(..., cache=...)`` takes: storage plus the re-check.

:class:`~clefprove.incremental.store.CacheStore` keeps proofs in SQLite;
:mod:`clefprove.incremental.walk` decides what a new model version can reuse.  This module joins
the two, so that neither imports the other's caller.
"""

from __future__ import annotations

import os
from pathlib import Path

from clefprove.dsl import checked as ck
from clefprove.errors import ClefproveError
from clefprove.incremental import walk
from clefprove.incremental.store import DEFAULT_DIR, CacheStore
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Model
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import InvariantResult


class ProofCache(CacheStore):
    """A proof cache in *directory*; ``check`` calls :meth:`check_program` when given one."""

    def check_program(
        self, model: Model, program: ck.CheckedProgram, options: CheckOptions
    ) -> list[InvariantResult]:
        """The results of every invariant of *program*, reusing proofs (equal to a fresh run):
        the incremental :class:`~clefprove.verify.api.RunStrategy`."""
        return walk.check_program(self, model, program, options, options.counterexamples)

    def check_ensemble_program(
        self, model: Ensemble, program: ck.CheckedProgram, options: CheckOptions
    ) -> list[InvariantResult]:
        """The same for a tree ensemble (:mod:`clefprove.incremental.ensemble`)."""
        # Imported here: the ensemble search modules cost a single-tree run ~0.1 s to import.
        from clefprove.incremental import ensemble

        return ensemble.check_program(self, model, program, options)


def open_cache(
    directory: str | os.PathLike[str] | None, disabled: bool = False
) -> ProofCache | None:
    """The CLI's ``--cache DIR`` / ``--no-cache``: a cache in *directory* (default: the
    ``CLEFPROVE_CACHE`` environment variable, else :data:`DEFAULT_DIR`), or None when disabled."""
    if disabled:
        return None
    if directory is not None:
        require_parent(directory)
    return ProofCache(directory or os.environ.get("CLEFPROVE_CACHE") or DEFAULT_DIR)


def require_parent(directory: str | os.PathLike[str]) -> None:
    """``--cache DIR`` creates DIR if it is missing, never its parents: a mistyped path must
    not silently build a tree of directories (``-o FILE`` refuses a missing directory too)."""
    parent = Path(os.path.abspath(directory)).parent
    if not Path(directory).exists() and not parent.is_dir():
        raise ClefproveError(f"--cache {directory}: directory {parent} does not exist")


def cache_from_args(args: object) -> ProofCache | None:
    """The cache selected by ``--cache`` / ``--no-cache`` (declared in
    ``clefprove.cli.options.add_cache_options``)."""
    return open_cache(getattr(args, "cache", None), bool(getattr(args, "no_cache", False)))
