"""Incremental re-verification: subtree hashes, the proof cache, behaviour diff, the gate.

See docs/incremental.md.  ``ProofCache`` is the object ``clefprove.check(..., cache=...)`` takes.
Its names are resolved on first use: :mod:`clefprove.incremental.runs` answers an unchanged
run before numpy is imported, so importing this package must not import the re-check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clefprove.incremental.cache import ProofCache, open_cache
    from clefprove.incremental.store import DEFAULT_DIR

__all__ = ["DEFAULT_DIR", "ProofCache", "open_cache"]


def __getattr__(name: str) -> Any:
    if name in ("ProofCache", "open_cache"):
        from clefprove.incremental import cache

        return getattr(cache, name)
    if name == "DEFAULT_DIR":
        from clefprove.incremental import store

        return store.DEFAULT_DIR
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
