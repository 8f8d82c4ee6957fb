"""The one memo mechanism: values derived from an immutable owner, kept by that owner.

A :class:`Derived` lives inside the object it memoises (a model keeps its box tables, Merkle
hashes, encoder and evaluator; see ``Model.derived``), so what it holds dies with its owner and
no process-global table keyed by ``id()`` can hand a stale value to a new object.  Keys are
(stage, content) tuples, e.g. ``("verify.prepare", invariant.digest, dnf_cap)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Derived:
    """A bounded memo owned by one immutable object; thread-safe (a value may be computed
    twice by racing threads, never half-stored)."""

    __slots__ = ("_limit", "_lock", "_values")

    def __init__(self, limit: int = 1024) -> None:
        self._values: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value under *key*, computed by *compute* on first use."""
        try:
            return self._values[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        value = compute()
        with self._lock:
            if len(self._values) >= self._limit:
                self._values.clear()
            self._values.setdefault(key, value)
            return self._values[key]  # type: ignore[no-any-return]

    def __getstate__(self) -> int:
        return self._limit  # a copy in another process starts empty

    def __setstate__(self, limit: int) -> None:
        self.__init__(limit)  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Derived({len(self._values)} values)"
