"""One resolved options object for a check, which knows what each of its fields can change.

Every field says what it *affects*: how a leaf is decided (so its stored outcome), what a
result shows (counterexamples, what stays unknown within the limits), or nothing a cache could
hold.  Cache keys are derived from those declarations (:meth:`CheckOptions.identity`), so a
new field cannot be forgotten in a key: a field without a declaration is an error at import.
"""

from __future__ import annotations

import json
import os
from dataclasses import field, fields
from enum import Enum
from typing import Any

from clefprove.errors import ClefproveError
from clefprove.frozen import frozen


class Affects(Enum):
    """What an option can change."""

    OUTCOME = "outcome"  # how a leaf is decided, so every stored per-leaf outcome
    RESULT = "result"  # what a finished result shows (witnesses, unknowns within the limits)
    NOTHING = "nothing"  # where things are written, never what they say


_AFFECTS = "affects"


def _option(default: Any, affects: Affects) -> Any:
    return field(default=default, metadata={_AFFECTS: affects})


def json_safe(value: object) -> object:
    """*value* for a cache key's JSON: an infinite timeout ("no limit") as the string "inf"
    (JSON has no infinity; NaN is refused by the options themselves)."""
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    return value


#: Bumped whenever a change to the verifier could change a verdict; part of every proof-cache
#: key, so that proofs stored by an older verifier are never reused.  5: ensemble confidences
#: computed with the C library's exp and XGBoost's float64 softmax sum; 6: an ensemble's
#: counterexamples carry their region as ``path`` (a stored one would print none).
ENGINE_REVISION = 6


def verifier_identity() -> str:
    """The clefprove version, :data:`ENGINE_REVISION` and the installed Z3's version: what
    every cache key names."""
    from clefprove.smt.version import solver_version
    from clefprove.version import __version__

    return f"{__version__}+engine{ENGINE_REVISION}+z3-{solver_version()}"


def default_jobs() -> int:
    """``--jobs`` when not given: the CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


@frozen
class CheckOptions:
    """Limits and switches of one check (validated on construction)."""

    counterexamples: int = _option(3, Affects.RESULT)  # printed per violated invariant
    timeout: float | None = _option(None, Affects.RESULT)  # seconds per solver query
    rlimit: int = _option(50_000_000, Affects.RESULT)  # Z3 resource limit per query
    jobs: int = _option(1, Affects.RESULT)  # worker processes (grouping can change a witness)
    dnf_cap: int = _option(64, Affects.OUTCOME)  # longest DNF decided on boxes
    shortcuts: bool = _option(True, Affects.OUTCOME)  # False: every feasible leaf to the solver
    linear: bool = _option(True, Affects.OUTCOME)  # conjuncts of linear literals on boxes
    smtlib_dir: str | None = _option(None, Affects.NOTHING)  # write every query here

    def __post_init__(self) -> None:
        def whole(name: str, value: object, least: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ClefproveError(f"{name} must be a whole number >= {least}, not {value!r}")

        whole("counterexamples", self.counterexamples, 0)
        whole("jobs", self.jobs, 1)
        whole("rlimit", self.rlimit, 1)
        whole("dnf_cap", self.dnf_cap, 1)
        t = self.timeout
        number = isinstance(t, int | float) and not isinstance(t, bool)
        if t is not None and not (number and t > 0):  # inf means no limit; NaN is refused
            raise ClefproveError(f"timeout must be a positive number of seconds, not {t!r}")
        if not isinstance(self.shortcuts, bool):
            raise ClefproveError(f"shortcuts must be true or false, not {self.shortcuts!r}")
        if not isinstance(self.linear, bool):
            raise ClefproveError(f"linear must be true or false, not {self.linear!r}")

    def identity(self, *affects: Affects) -> str:
        """A canonical text of every field that affects one of *affects* (for cache keys)."""
        wanted = set(affects)
        return json.dumps(
            [
                [f.name, json_safe(getattr(self, f.name))]
                for f in fields(self)
                if f.metadata[_AFFECTS] in wanted
            ],
            allow_nan=False,
        )

    @property
    def outcome_identity(self) -> str:
        """What a stored per-leaf outcome depends on."""
        return self.identity(Affects.OUTCOME)

    @property
    def result_identity(self) -> str:
        """What a stored whole result depends on."""
        return self.identity(Affects.OUTCOME, Affects.RESULT)


def _declared() -> None:
    missing = [f.name for f in fields(CheckOptions) if _AFFECTS not in f.metadata]
    if missing:
        raise TypeError(f"CheckOptions fields without an 'affects' declaration: {missing}")


_declared()
