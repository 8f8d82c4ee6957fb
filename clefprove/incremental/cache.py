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
from clefprove.incremental.store import DEFAULT_DIR, CacheStore, warn
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
    ``CLEFPROVE_CACHE`` environment variable, else :data:`DEFAULT_DIR`), or None when disabled
    (or when the default cannot be created: see :func:`cache_directory`)."""
    path = cache_directory(directory, disabled)
    return None if path is None else ProofCache(path)


def cache_directory(directory: str | os.PathLike[str] | None, disabled: bool = False) -> str | None:
    """The proof cache directory that ``--cache DIR`` / ``--no-cache`` select, created; None
    when disabled.

    An explicit DIR must have an existing parent (:func:`require_parent`) and be creatable, or
    it is a :class:`ClefproveError` (exit 2) before any work.  The default (the environment's
    ``CLEFPROVE_CACHE``, else ``.clefprove-cache``) was not asked for on the command line: one
    that cannot be created (a read-only checkout, a file in its place) only costs speed, as a
    cache that cannot be opened or written does (docs/incremental.md): a warning and None,
    never an exit 2 (nor, in ``serve``'s gate worker, a crash)."""
    if disabled:
        return None
    if directory is not None:
        require_parent(directory)
        _make(directory)
        return os.fspath(directory)
    default = os.environ.get("CLEFPROVE_CACHE") or DEFAULT_DIR
    try:
        _make(default, parents=True)
    except ClefproveError as exc:
        warn(f"proof cache unavailable ({exc}); checking without it")
        return None
    return default


def _make(directory: str | os.PathLike[str], parents: bool = False) -> None:
    path = Path(directory)
    try:
        path.mkdir(parents=parents, exist_ok=True)
    except OSError as exc:
        raise ClefproveError(
            f"{directory}: cannot create the cache directory: {exc.strerror or exc}"
        ) from None
    if not path.is_dir():
        raise ClefproveError(f"{directory}: not a directory (--cache)")


def require_parent(directory: str | os.PathLike[str], option: str = "--cache") -> None:
    """``--cache DIR`` (and ``serve --store DIR``) creates DIR if it is missing, never its
    parents: a mistyped path must not silently build a tree of directories (``-o FILE``
    refuses a missing directory too)."""
    parent = Path(os.path.abspath(directory)).parent
    if not Path(directory).exists() and not parent.is_dir():
        raise ClefproveError(f"{option} {directory}: directory {parent} does not exist")


def cache_from_args(args: object) -> ProofCache | None:
    """The cache selected by ``--cache`` / ``--no-cache`` (declared in
    ``clefprove.cli.options.add_cache_options``)."""
    return open_cache(getattr(args, "cache", None), bool(getattr(args, "no_cache", False)))
