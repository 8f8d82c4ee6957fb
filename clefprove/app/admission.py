"""Admission of a model: the gate run on the exact bytes a service was handed.

The gate (:func:`clefprove.app.gate.run_gate`) runs in a separate worker process, so
that solver work never holds the serving process's interpreter lock (decisions keep their
latency during a reload) and a crash in the solver cannot take the service down.  The worker
keeps one proof cache open for its lifetime.  What comes back is a small picklable
:class:`Verdict`; the serving process then loads the same bytes itself and admits them only if
their digest is the one the worker checked.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from clefprove.errors import ClefproveError


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


#: The worker process's proof cache, opened once by :func:`worker_init` for its lifetime.
_worker_cache: Any = None


def worker_init(cache_dir: str | None = None) -> None:
    """In the worker: open the proof cache once; SIGHUP and Ctrl-C are the service's to handle
    (a terminal or a process manager may send them to the whole process group)."""
    global _worker_cache
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cache_dir is not None:
        from clefprove.incremental import ProofCache

        _worker_cache = ProofCache(cache_dir)


def _cache(directory: str | None) -> Any:
    """The worker's proof cache (None when the service runs without one)."""
    return _worker_cache if directory is not None else None


def gate_file(path: str, settings: GateSettings) -> Verdict:
    """Run the gate on the ``.clef`` file *path* (in the worker process); never raises for bad
    input: a :class:`ClefproveError` becomes a verdict with exit code 2.

    The behaviour diff against the served model is not part of it (:func:`diff_files` runs
    after the swap): it never changes the verdict, and it costs more than a cached check."""
    from clefprove.app.gate import run_gate
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.clef import load

    try:
        # load(), not load_model(): a genuine .clef file, never a JSON source compiled on the way
        model = load(path)
        program = load_invariants(list(settings.invariants), model)
        res = run_gate(
            path,
            settings.invariants,
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


def diff_files(old: str, new: str) -> dict[str, Any]:
    """The behaviour diff summary from the model file *old* to *new* (as ``clefprove gate
    --previous`` reports it); an unreadable file gives ``{"error": ...}``."""
    from clefprove.incremental.diff import diff
    from clefprove.model.clef import load

    try:
        d = diff(load(old), load(new), old, new, limit=3).to_json_dict()
    except ClefproveError as exc:
        return {"error": exc.one_line()}
    d["semantic"].pop("regions", None)
    return d
