"""Incremental re-verification: subtree hashes, the proof cache, behaviour diff, the gate.

See docs/incremental.md.  ``ProofCache`` is the object ``clefprove.check(..., cache=...)`` takes.
"""

from clefprove.incremental.cache import ProofCache, open_cache
from clefprove.incremental.store import DEFAULT_DIR

__all__ = ["DEFAULT_DIR", "ProofCache", "open_cache"]
