"""One process pool per run, shared by every invariant and stage that fans out (``--jobs N``).

:func:`run_pool` (``clefprove.check``) makes a :class:`RunPool` the run's pool for the duration
of the run; the stages that can use worker processes (the single-tree solver stage,
:mod:`clefprove.verify.engine`; the ensemble search over regions,
:mod:`clefprove.verify.ensemble`) ask :func:`current` for it.  The processes are started on
the first task only, so a run whose stages never fan out (``--jobs 1``, few solver paths, a
quick ensemble search) starts none.  Outside a run (a stage called directly) :func:`current`
gives a pool for that call alone.

A model goes to the workers as one pickle per model (:func:`shipped`, kept in the model's
``derived`` memo with a token naming it), carried by the first *jobs* tasks of that model
only (:meth:`RunPool.submit`); a worker keeps the last model it was sent (:func:`resident`),
so its derived tables are built once per worker, not once per task, and a task that reaches
a worker without it is sent again with the pickle (:meth:`RunPool.resend`).

Tasks of an ensemble search belong to a *group* (one search); the parent can tell the
workers to drop the tasks of a group after a given index (:meth:`RunPool.cancel_after`)
through one shared integer that the tasks poll (:func:`cancelled`).

:func:`forked_map` is the other way to share work: children forked at the moment of the
call, for work whose inputs are large tables this process has just built (the relational
dual descent): they read those tables copy-on-write instead of receiving a model and building
them again.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

#: Room for the task indices of one group in the shared cancel word.
_SPAN = 1 << 24


class RunPool:
    """A process pool of *jobs* workers, started on first use, closed with the run."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, int(jobs))
        self._executor: ProcessPoolExecutor | None = None
        self._cancel: Any = None
        self._groups = 0
        self._shipments: dict[str, int] = {}  # model token -> tasks that carried its pickle

    @property
    def started(self) -> bool:
        return self._executor is not None

    def executor(self) -> ProcessPoolExecutor:
        """The pool's executor (its processes are started here, on first use)."""
        if self._executor is None:
            # imported here: multiprocessing costs a run that starts no pool ~10 ms
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing.sharedctypes import RawValue

            self._cancel = RawValue("q", -1)
            self._executor = ProcessPoolExecutor(
                max_workers=self.jobs, initializer=_init_worker, initargs=(self._cancel,)
            )
        return self._executor

    def submit(self, fn: Callable[..., Any], model: Any, *args: Any) -> Future[Any]:
        """``fn(model, *args)`` in a worker.  The model's pickle goes with the first *jobs*
        tasks of each model only; a worker that has not got it answers :data:`MISSING`, and
        the caller sends the task again with the pickle (:meth:`resend`)."""
        token, blob = shipped(model)
        sent = self._shipments.get(token, 0)
        carry = blob if sent < self.jobs else None
        self._shipments[token] = sent + (carry is not None)
        return self.executor().submit(_task, fn, token, carry, args)

    def resend(self, fn: Callable[..., Any], model: Any, *args: Any) -> Future[Any]:
        """A task of :meth:`submit` that was answered :data:`MISSING`, sent with the pickle."""
        token, blob = shipped(model)
        return self.executor().submit(_task, fn, token, blob, args)

    def run_all(self, fn: Callable[..., Any], model: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        """``[fn(model, *a) for a in args]`` in the workers, in order."""
        futures = [self.submit(fn, model, *a) for a in args]
        got = [f.result() for f in futures]
        again = {i: self.resend(fn, model, *args[i]) for i, g in enumerate(got) if missing(g)}
        for i, f in again.items():
            got[i] = f.result()
        return got

    def group(self) -> int:
        """A new task group (one per ensemble search)."""
        self._groups += 1
        return self._groups

    def cancel_after(self, group: int, index: int) -> None:
        """Tasks of *group* with an index above *index* (and of every earlier group) stop."""
        if self._cancel is not None:
            self._cancel.value = group * _SPAN + index + 1

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


_CURRENT: ContextVar[RunPool | None] = ContextVar("clefprove_run_pool", default=None)


@contextmanager
def run_pool(jobs: int) -> Iterator[RunPool]:
    """The run's pool for the body of the ``with`` (an enclosing run's, if there is one)."""
    outer = _CURRENT.get()
    if outer is not None and outer.jobs == max(1, int(jobs)):
        yield outer
        return
    pool = RunPool(jobs)
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)
        pool.close()


@contextmanager
def current(jobs: int) -> Iterator[RunPool]:
    """The run's pool, or (outside a run) one for the body of the ``with`` alone."""
    pool = _CURRENT.get()
    if pool is not None and pool.jobs == max(1, int(jobs)):
        yield pool
        return
    with run_pool(jobs) as own:
        yield own


def forked_map(fn: Callable[[T], R], items: Sequence[T], processes: int) -> list[R]:
    """``[fn(x) for x in items]`` by this process and ``processes - 1`` children forked now.

    The children share this process's memory copy-on-write, so *fn* and *items* (a sweep of
    a large tree and its parts) are never pickled nor built again, unlike the run's pool,
    whose workers get a model once and build their own tables.  Each process takes the next
    item not yet taken (a shared counter) until none is left; a child sends its results back
    through a pipe once, and exits without running this process's exit handlers.  An item
    whose child failed is computed here.  In this process alone where ``fork`` does not exist,
    or for one process or item."""
    import multiprocessing as mp

    n = len(items)
    if processes <= 1 or n <= 1 or "fork" not in mp.get_all_start_methods():
        return [fn(x) for x in items]
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)

    def take() -> int | None:
        with counter.get_lock():
            i = int(counter.value)
            if i >= n:
                return None
            counter.value = i + 1
            return i

    def child(conn: Any) -> None:
        try:
            done = []
            while (i := take()) is not None:
                done.append((i, fn(items[i])))
            conn.send(done)
        except BaseException:  # a signal or a bug: the parent computes what is missing
            pass
        finally:
            os._exit(0)

    children = []
    results: dict[int, R] = {}
    try:
        for _ in range(min(processes, n) - 1):
            receive, send = ctx.Pipe(duplex=False)
            process = ctx.Process(target=child, args=(send,), daemon=True)
            process.start()
            send.close()
            children.append((process, receive))
        while (i := take()) is not None:
            results[i] = fn(items[i])
        for process, receive in children:
            with contextlib.suppress(EOFError):  # a child that ended without its results
                results.update(receive.recv())
            process.join()
    finally:
        for process, receive in children:
            receive.close()
            if process.is_alive():
                process.terminate()
                process.join()
    return [results[i] if i in results else fn(items[i]) for i in range(n)]


def shipped(model: Any) -> tuple[str, bytes]:
    """(token, pickle) of *model* for the workers (made once per model)."""
    return model.derived.get(  # type: ignore[no-any-return]
        ("verify.pool.shipped",), lambda: (os.urandom(16).hex(), pickle.dumps(model))
    )


# ---------------------------------------------------------------- in a worker


class _Worker:
    """What a worker process keeps between tasks: the shared cancel word, the last model."""

    def __init__(self) -> None:
        self.cancel: Any = None
        self.token = ""
        self.model: Any = None


_WORKER = _Worker()


#: A worker's answer to a task without the model's pickle when it does not keep that model.
MISSING = "clefprove.pool: model missing"


def _init_worker(cancel: Any) -> None:
    _WORKER.cancel = cancel
    _CURRENT.set(None)  # a forked worker is not part of the parent's run


def missing(got: Any) -> bool:
    """Whether a task's answer is :data:`MISSING`."""
    return isinstance(got, str) and got == MISSING


def _task(fn: Callable[..., Any], token: str, blob: bytes | None, args: tuple[Any, ...]) -> Any:
    if blob is None and _WORKER.token != token:
        return MISSING
    model = resident(token, blob) if blob is not None else _WORKER.model
    return fn(model, *args)


def resident(token: str, blob: bytes) -> Any:
    """The model named *token* (unpickled from *blob* unless it is the one kept)."""
    if _WORKER.token != token:
        _WORKER.model = pickle.loads(blob)
        _WORKER.token = token
    return _WORKER.model


def cancelled(group: int, index: int) -> bool:
    """Whether task *index* of *group* was told to stop (never outside a pool worker)."""
    if _WORKER.cancel is None:
        return False
    v = int(_WORKER.cancel.value)
    return v >= (group + 1) * _SPAN or group * _SPAN <= v <= group * _SPAN + index
