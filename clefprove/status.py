"""The project's one vocabulary of outcomes (a base module: every stage speaks it).

String enums are what the JSON outputs carry (``Verdict.HOLDS == "holds"``), so serialising
one is writing its value; integer enums are what numpy outcome arrays hold.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class Verdict(StrEnum):
    """An invariant's status (SPEC §4)."""

    HOLDS = "holds"
    VIOLATED = "violated"
    UNKNOWN = "unknown"


class LeafOutcome(IntEnum):
    """One leaf (or leaf pair) of one invariant, as stored in int8 outcome arrays."""

    SAFE = 0  # no input reaching the leaf satisfies ``when`` and breaks ``ensure``
    VIOLATED = 1  # some input does (a confirmed witness exists or is found on demand)
    UNKNOWN = 2  # undecided within the solver's limits


class Decided(IntEnum):
    """How a leaf was decided, in int16 arrays; a value >= 0 is the index of the ``when`` /
    ``ensure`` conjunct that the box stage found violated on the whole box."""

    BOX = -1  # the box stage (three-valued evaluation, exact shortcuts)
    SOLVER = -2  # a solver query
    NONE = -3  # not decided (yet)


class BoxAnswer(IntEnum):
    """A three-valued answer on a box: no point, every point, or some points satisfy."""

    UNSAT = 0
    SAT = 1
    UNDECIDED = 2


class SolverAnswer(StrEnum):
    """What a solver query answered (the SMT-LIB ``check-sat`` words)."""

    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"
    #: sat over the reals, but no float64 input found near the model (the verifier then
    #: searches the float64 grid exactly: clefprove.verify.engine)
    REAL = "real"


class Certificate(StrEnum):
    """What ``export-coq`` wrote for one invariant."""

    PROVED = "proved"
    REFUTED = "refuted"
    SKIPPED = "not exported"


class ExitCode(IntEnum):
    """Exit statuses of every command (SPEC §4)."""

    OK = 0
    VIOLATED = 1
    USAGE = 2
    UNKNOWN = 3
    INTERNAL = 4
