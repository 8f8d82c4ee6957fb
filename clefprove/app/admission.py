"""Admission of a model: the gate run on the exact bytes a service was handed.

The gate (:func:`clefprove.app.gate.run_gate`) runs in a separate worker process, so
that solver work never holds the serving process's interpreter lock (decisions keep their
latency during a reload) and a crash in the solver cannot take the service down.  The worker
keeps one proof cache open for its lifetime.  What comes back is a small picklable
:class:`Verdict`; the serving process then loads the same bytes itself and admits them only if
their digest is the one the worker checked.
"""

from __future__ import annotations

import hashlib
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from clefprove.errors import ClefproveError
from clefprove.memo import Derived

#: Time budget (seconds) of the behaviour search of an ensemble diff on reload.
DIFF_BUDGET = 10.0


@dataclass(frozen=True)
class GateSettings:
    """What every admission of one service is checked against."""

    invariants: tuple[str, ...]
    cache_dir: str | None  # None: no proof cache
    timeout: float | None
    rlimit: int
    jobs: int
    counterexamples: int


@dataclass(frozen=True)
class Verdict:
    """The gate's answer on one file: ``exit_code`` as ``clefprove gate`` (0/1/2/3).

    ``error`` is the one-line reason of an exit 2 (the file or an invariant cannot be read);
    ``check`` is SPEC §4's check JSON otherwise.
    """

    exit_code: int
    sha256: str = ""
    check: dict[str, Any] | None = None
    digests: tuple[tuple[str, str], ...] = ()  # (invariant name, digest of its checked form)
    seconds: float = 0.0
    error: str = ""

    @property
    def admitted(self) -> bool:
        return self.exit_code == 0


@dataclass
class _WorkerState:
    """What the gate worker keeps for its lifetime: the proof cache it opened once, and the
    programs it checked, by the content of their files and the model's interface."""

    cache: Any = None
    programs: Derived = field(default_factory=lambda: Derived(limit=16))


#: The worker process's state (set up by :func:`worker_init`).
_worker = _WorkerState()


def worker_init(cache_dir: str | None = None, niceness: int = 0) -> None:
    """In a worker: open the proof cache once; SIGHUP and Ctrl-C are the service's to handle
    (a terminal or a process manager may send them to the whole process group); *niceness*
    lowers its CPU priority."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if niceness:
        os.nice(niceness)
    if cache_dir is not None:
        from clefprove.incremental import ProofCache

        _worker.cache = ProofCache(cache_dir)


def _cache(directory: str | None) -> Any:
    """The worker's proof cache (None when the service runs without one)."""
    return _worker.cache if directory is not None else None


def gate_file(path: str, settings: GateSettings) -> Verdict:
    """Run the gate on the ``.clef`` file *path* (in the worker process); never raises for bad
    input: a :class:`ClefproveError` becomes a verdict with exit code 2.

    The behaviour diff against the served model is not part of it (:func:`diff_files` runs
    after the swap): it never changes the verdict, and it costs more than a cached check."""
    from clefprove.app.gate import run_gate
    from clefprove.model.clef import load

    try:
        # load(), not load_model(): a genuine .clef file, never a JSON source compiled on the way
        model = load(path)
        program = _program(settings.invariants, model)
        res = run_gate(
            path,
            program,
            None,
            _cache(settings.cache_dir),
            jobs=settings.jobs,
            timeout=settings.timeout,
            rlimit=settings.rlimit,
            counterexamples=settings.counterexamples,
        )
    except ClefproveError as exc:
        return Verdict(2, error=exc.one_line())
    return Verdict(
        res.exit_code,
        res.sha256,
        res.report.to_json_dict(),
        tuple((inv.name, inv.digest) for inv in program.invariants),
        res.seconds,
    )


def _program(invariants: tuple[str, ...], model: Any) -> Any:
    """The invariants checked against *model*'s features and actions, parsed again only when
    an .inv file's content or the model's interface changes (versions of one model share it).
    Keyed by the files' digests, never their timestamps: a reload is always checked against
    exactly the invariants on disk."""
    from clefprove.dsl.files import expand_paths, read_bytes
    from clefprove.dsl.loader import load_invariants

    try:
        digests = tuple(
            (str(p), hashlib.sha256(read_bytes(p)).hexdigest())
            for p in expand_paths(list(invariants))
        )
    except ClefproveError:  # unreadable or vanished meanwhile: load_invariants says so
        return load_invariants(list(invariants), model)
    key = ("app.program", digests, model.features, model.actions)
    program = _worker.programs.get(key, lambda: load_invariants(list(invariants), model))
    if tuple((f.path, f.sha256) for f in program.sources) != digests:
        # a file changed between reading its digest and parsing it: never use that entry
        return load_invariants(list(invariants), model)
    return program


def diff_files(old: str, new: str) -> dict[str, Any]:
    """The behaviour diff summary from the model file *old* to *new* (as ``clefprove gate
    --previous`` reports it), for two single trees or two ensembles (whose behaviour search
    has :data:`DIFF_BUDGET` seconds: past it the summary says ``partial``); an unreadable
    file, or a tree against an ensemble, gives ``{"error": ...}``."""
    from clefprove.incremental.ensemble_diff import diff_models
    from clefprove.model.clef import load

    try:
        d = diff_models(load(old), load(new), old, new, 3, DIFF_BUDGET).to_json_dict()
    except ClefproveError as exc:
        return {"error": exc.one_line()}
    d["semantic"].pop("regions", None)
    return d
