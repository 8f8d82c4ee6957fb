"""The verified decision service (SPEC §6): a Starlette app over one :class:`Service`.

The service serves one :class:`~clefprove.app.served.ServedModel` at a time and replaces it
only with a model whose exact bytes passed the gate (:mod:`clefprove.app.admission`) against
the service's invariants.  Admissions (upload, rollback, SIGHUP) are serialised by one lock:
a second reload waits for the first.  Every refusal leaves the served model untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import hashlib
import hmac
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clefprove.app.admission import (
    Admission,
    GateSettings,
    encode_json,
    now,
    received_admission,
    ship_admission,
    ship_diff,
    ship_form,
    worker_init,
)
from clefprove.app.metrics import CONTENT_TYPE, RELOAD_RESULTS, Metrics
from clefprove.app.served import Served, one_line_input_error, serve_model
from clefprove.app.store import ModelStore
from clefprove.app.worker import Worker, WorkerDied
from clefprove.errors import ClefproveError, InputError
from clefprove.frozen import frozen

JSON = "application/json"
#: Default body limits (bytes): one POST /decide, one uploaded model.
MAX_DECIDE_BYTES = 1 << 20
MAX_MODEL_BYTES = 256 << 20
#: Admitted models remembered for /rollback (their bytes are in the store).
HISTORY = 64
#: CPU niceness of the worker that gates models, and of the one that computes behaviour
#: diffs: the lowest priority, so that neither ever delays a decision (docs/serve.md).
GATE_NICENESS = 19
DIFF_NICENESS = 19
#: The interpreter's thread switch interval while serving (seconds; Python's default: 5 ms).
SWITCH_INTERVAL = 0.0002
#: Up to this many bytes, the event loop hashes an uploaded model itself (about 20 µs for
#: 30 KB, 0.2 ms at the limit); above, in a thread (:mod:`hashlib` releases the interpreter
#: lock).
HASH_INLINE = 256 << 10
#: The pause between the loop's steps of a swap (see _breathe).
BREATHE_SECONDS = 0.0005
#: How often the event-loop lag probe asks to run (seconds): how late it runs is the lag.
LAG_INTERVAL = 0.02
#: A behaviour diff starts once no other model was admitted for this long (seconds): during
#: reloads back to back only the last one's diff is computed (each costs the diff worker
#: about 35 ms of CPU for the depth-12 example, on the cores the event loop runs on).
DIFF_SETTLE = 0.25


async def _breathe() -> None:
    """Let the loop answer what arrived meanwhile before the next step of a swap (each step
    takes a few hundred µs on a small model): a short timer, so the loop polls its sockets
    and runs the requests' tasks first (one ``sleep(0)`` would resume this task ahead of them)."""
    await asyncio.sleep(BREATHE_SECONDS)


class ReloadResult(enum.Enum):
    """How an admission ended: the ``result`` label of ``clefprove_reloads_total``."""

    ACCEPTED = "accepted"
    REFUSED = "refused"  # an invariant violated or unknown
    INVALID = "invalid"  # not a valid .clef file
    UNAUTHORIZED = "unauthorized"
    ERROR = "error"  # an internal error in the gate (never counted as a verdict)


_STATUS = {
    ReloadResult.ACCEPTED: 200,
    ReloadResult.REFUSED: 409,
    ReloadResult.INVALID: 400,
    ReloadResult.UNAUTHORIZED: 401,
    ReloadResult.ERROR: 500,
}


@frozen
class Outcome:
    """The answer to one admission: result, HTTP status and JSON body."""

    result: ReloadResult
    body: dict[str, Any]
    exit_code: int  # that of ``clefprove gate`` on the same file (4: internal error)
    response: bytes | None = None  # *body* as JSON, when the worker encoded it already

    @property
    def status(self) -> int:
        return _STATUS[self.result]

    def one_line(self) -> str:
        if "error" in self.body:
            return str(self.body["error"])
        s = self.body.get("summary", {})
        return (
            f"{self.result.value}: {s.get('holds', 0)} hold, {s.get('violated', 0)} violated, "
            f"{s.get('unknown', 0)} unknown"
        )


@frozen
class Limits:
    max_decide_bytes: int = MAX_DECIDE_BYTES
    max_model_bytes: int = MAX_MODEL_BYTES


class BodyTooLarge(Exception):
    pass


class Steps:
    """The event loop's time in the steps of one admission, into
    ``clefprove_reload_loop_step_seconds{step}`` (one ``perf_counter`` and one observation a
    step: a few µs per reload, nothing on the decision path)."""

    __slots__ = ("_children", "_t")

    def __init__(self, children: dict[str, Any]) -> None:
        self._children = children
        self.start()

    def start(self) -> None:
        """A step starts now (after a wait, which no step counts)."""
        self._t = time.perf_counter()

    def done(self, step: str) -> None:
        """*step* took the time since the last :meth:`start` or :meth:`done`."""
        t = time.perf_counter()
        self._children[step].observe(t - self._t)
        self._t = t

    def record(self, step: str, seconds: float) -> None:
        self._children[step].observe(seconds)


_now = now


class Service:
    """The served model, its admissions, and the state every handler reads."""

    def __init__(
        self,
        model_path: str,
        settings: GateSettings,
        store: ModelStore,
        token: str | None,
        limits: Limits = Limits(),
        niceness: int = GATE_NICENESS,
    ) -> None:
        """*niceness*: how much lower than this process's the workers' CPU priority is."""
        self.model_path = model_path
        self.niceness = niceness
        self.settings = settings
        self.store = store
        self._token = token.encode() if token else None
        self.limits = limits
        self.metrics = Metrics()
        self.current: Served | None = None
        self.history: list[str] = []  # sha256 of admitted models, oldest first
        self.diffs: dict[str, dict[str, Any]] = {}  # sha256 -> diff from the model it replaced
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        # the gate: its own process at the lowest CPU priority, its pipe read by the loop
        self._gate = Worker("clefprove-gate", worker_init, (settings.cache_dir, niceness))
        # behaviour diffs: information only, so at the lowest CPU priority, never in the way of
        # decisions or of an admission; started with the first diff
        self._diff: Worker | None = None
        self._diff_lock = asyncio.Lock()
        self._diff_wanted = 0  # the number of the latest diff asked for
        self._diff_timer: asyncio.TimerHandle | None = None  # the next diff, settling

    # ------------------------------------------------------------------ the workers
    def close(self) -> None:
        """Stop the workers now: a check or a diff still running is of no use to anyone, and
        the interpreter would otherwise wait for it at exit."""
        if self._diff_timer is not None:
            self._diff_timer.cancel()
            self._diff_timer = None
        for worker in (self._gate, self._diff):
            if worker is not None:
                worker.close()

    def _diff_worker(self) -> Worker:
        if self._diff is None:
            self._diff = Worker(
                "clefprove-diff", worker_init, (None, max(self.niceness, DIFF_NICENESS))
            )
        return self._diff

    def _schedule_diff(self, old: str, new: str) -> None:
        """After a swap: :meth:`_record_diff` once admissions have settled for
        :data:`DIFF_SETTLE` seconds.  One timer, moved by each swap: reloads back to back
        cost no task and no wake-up of the loop each (the superseded timers never fire)."""
        if self._diff_timer is not None:
            self._diff_timer.cancel()
        self._diff_wanted += 1  # a diff still waiting for the worker is dropped
        self._diff_timer = asyncio.get_running_loop().call_later(
            DIFF_SETTLE, self._start_diff, old, new
        )

    def _start_diff(self, old: str, new: str) -> None:
        self._diff_timer = None
        task = asyncio.get_running_loop().create_task(self._record_diff(old, new, settle=False))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record_diff(self, old: str, new: str, settle: bool = True) -> None:
        """After a swap: the behaviour diff from the model replaced to the new one, kept for
        ``GET /model`` and in the store record (computed in a worker process of its own).
        A diff still waiting for the worker when a newer one is asked for is dropped; none
        starts before admissions have settled for :data:`DIFF_SETTLE` seconds (*settle*:
        wait for that here; :meth:`_schedule_diff` waited already)."""
        self._diff_wanted += 1
        mine = self._diff_wanted
        if settle:
            await asyncio.sleep(DIFF_SETTLE)
        if self._diff_wanted != mine:
            return  # superseded while settling
        async with self._diff_lock:
            if self._diff_wanted != mine:
                return  # superseded before it started
            worker = self._diff_worker()
            try:
                # the diff and the write of the store record, both in the worker
                entry, _ = await worker.acall(ship_diff, (old, new, str(self.store.directory)))
                t = worker.timing
                self.metrics.reload_steps["diff"].observe(t.send + t.read + t.decode)
                self.diffs[new] = entry
                while len(self.diffs) > HISTORY:
                    del self.diffs[next(iter(self.diffs))]
            except asyncio.CancelledError:
                return
            except WorkerDied:
                worker.restart()
                _log(f"behaviour diff {old[:12]} -> {new[:12]} not computed: the worker died")
            except Exception as exc:  # never fatal: the diff is information, not a verdict
                _log(f"behaviour diff {old[:12]} -> {new[:12]} not computed: {exc!r}")

    # ------------------------------------------------------------------ admission
    # The event loop's share of an admission is kept to what cannot move (docs/serve.md):
    # the digest of the bytes, the hand-off to the gate worker over its pipe (read by the loop
    # itself: no helper thread), building the served model from the bytes it holds and the
    # worker's tables (views, nothing validated or derived again), binding the metric children
    # and swapping one reference.  The worker stages, validates, gates, derives the tables,
    # encodes the answer and writes the store.
    def _conclude(
        self, digest: str, adm: Admission, origin: str, steps: Steps | None = None
    ) -> Outcome:
        """Serve the model of *adm* if its verdict admits it and it holds exactly the bytes
        this process was handed (their sha256 is *digest*)."""
        verdict = adm.verdict
        if verdict.exit_code == 4:  # pragma: no cover - the file changed under the gate
            return Outcome(ReloadResult.ERROR, adm.body, 4, adm.response)
        if verdict.exit_code == 2:
            result = ReloadResult.REFUSED if verdict.unfit else ReloadResult.INVALID
            return Outcome(result, adm.body, 2, adm.response)
        if verdict.sha256 != digest or verdict.check is None:  # pragma: no cover - a bug
            return Outcome(
                ReloadResult.ERROR, {"error": "internal error: the gate checked other bytes"}, 4
            )
        if not verdict.admitted:
            return Outcome(ReloadResult.REFUSED, adm.body, verdict.exit_code, adm.response)
        model = adm.model
        if model is None or model.sha256 != digest:  # pragma: no cover
            return Outcome(
                ReloadResult.ERROR, {"error": "internal error: the gate served other bytes"}, 4
            )
        for array in (model.nodes, model.membership):  # read-only, as load() maps them
            array.flags.writeable = False
        served = serve_model(
            model, verdict, origin, adm.when, self.metrics, adm.evaluator, like=self.current
        )
        if steps is not None:
            steps.done("serve")
        old, self.current = self.current, served  # the swap: one reference
        if steps is not None:
            steps.done("swap")
        del old  # the replaced model, unless a request in flight still holds it
        if steps is not None:
            steps.done("release")
        self.metrics.serve(model.name, model.version, model.sha256)
        if not self.history or self.history[-1] != model.sha256:
            self.history.append(model.sha256)
            del self.history[:-HISTORY]
        return Outcome(ReloadResult.ACCEPTED, adm.body, 0, adm.response)

    def _request(self, origin: str, label: str) -> tuple[Any, ...]:
        return (self.settings, str(self.store.directory), origin, label)

    def admit_now(self, data: bytes, path: str) -> Outcome:
        """Blocking admission of the file *path* (start-up, before the event loop runs)."""
        digest = hashlib.sha256(data).hexdigest()
        origin = f"startup {path}"
        try:
            shipped, parts = self._gate.call(ship_admission, self._request(origin, path), [data])
            adm = received_admission(shipped, parts, data, digest, path)
        except Exception as exc:  # the worker died, or a bug in the gate: never a verdict
            return Outcome(ReloadResult.ERROR, {"error": f"internal error: {exc}"}, 4)
        return self._conclude(digest, adm, origin)

    async def admit(
        self,
        data: bytes,
        origin: str,
        label: str,
        rollback: bool = False,
        multipart: str | None = None,
    ) -> Outcome:
        """Gate *data* and serve it if every invariant holds (serialised with every other).

        *origin* is recorded with an admitted model; *label* names the file in messages.
        *multipart*: *data* is a multipart form's body of that content type, parsed by the
        worker, which says where the model's bytes lie in it."""
        async with self._lock:
            if rollback:
                if len(self.history) < 2:
                    return Outcome(
                        ReloadResult.REFUSED, {"error": "no previous model to roll back to"}, 1
                    )
                label = str(self.store.model_path(self.history[-2]))
                try:
                    data = await asyncio.to_thread(
                        read_model_file, label, self.limits.max_model_bytes
                    )
                except ClefproveError as exc:
                    return Outcome(ReloadResult.INVALID, {"error": exc.one_line()}, 2)
            steps = Steps(self.metrics.reload_steps)
            function: Callable[..., Any] = ship_admission
            request = self._request(origin, label)
            digest = ""
            if multipart is not None:  # the model's bytes are known once the worker parsed
                function = ship_form
                request += (multipart, self.limits.max_model_bytes)
            else:
                digest = await _digest(data)
                if len(data) <= HASH_INLINE:
                    steps.done("digest")
                else:
                    steps.start()
            held: bytes | memoryview = data
            try:
                # the worker stages the bytes itself (creating a file can wait for the
                # filesystem's journal while a record is fsynced), then gates them
                shipped, parts = await self._gate.acall(function, request, [data])
                timing = self._gate.timing
                steps.record("send", timing.send)
                steps.record("read", timing.read)
                steps.record("decode", timing.decode)
                await _breathe()
                steps.start()
                if shipped.span is not None:  # this process's own slice, its own digest
                    at, n = shipped.span
                    held = memoryview(data)[at : at + n]
                    digest = await _digest(held)
                    if n <= HASH_INLINE:
                        steps.done("digest")
                    else:
                        steps.start()
                like = self.current.model if self.current is not None else None
                adm = received_admission(shipped, parts, held, digest, label, like)
                steps.done("rebuild")
                await _breathe()
                steps.start()
            except WorkerDied:  # killed, out of memory: start anew
                self._gate.restart()
                return Outcome(
                    ReloadResult.ERROR, {"error": "internal error: the gate worker died"}, 4
                )
            except Exception as exc:  # a bug in the gate (WorkerError): never a verdict
                return Outcome(ReloadResult.ERROR, {"error": f"internal error: {exc}"}, 4)
            before = self.history[:-1] if rollback else None
            replaced = self.current.sha256 if self.current is not None else None
            out = self._conclude(digest, adm, origin, steps)
            del adm, parts, shipped, held
            if out.result is ReloadResult.ACCEPTED:
                if rollback and before is not None:
                    self.history[:] = before
                if replaced is not None and replaced != digest:
                    self._schedule_diff(replaced, digest)
            steps.done("bookkeeping")
            return out

    async def reload_from_path(self) -> Outcome:
        """SIGHUP: admit MODEL again from its path, through the same gate."""
        try:
            data = await asyncio.to_thread(
                read_model_file, self.model_path, self.limits.max_model_bytes, True
            )
        except ClefproveError as exc:
            out = Outcome(ReloadResult.INVALID, {"error": exc.one_line()}, 2)
        else:
            out = await self.admit(data, f"SIGHUP {self.model_path}", self.model_path)
        self.metrics.reloads.labels(_counted(out.result)).inc()
        _log(f"SIGHUP reload of {self.model_path}: {out.one_line()}")
        return out

    # ------------------------------------------------------------------ authentication
    def authorize(self, request: Request) -> Response | None:
        """None when the request carries the reload token, else the refusal to answer."""
        refusal = self.refusal(request.headers.get("authorization", ""))
        if refusal is None:
            return None
        status, body, headers = refusal
        return _json(status, body, headers)

    def refusal(self, header: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """None when the ``Authorization`` header *header* carries the reload token, else the
        refusal: status, JSON body and headers."""
        if self._token is None:
            return (
                403,
                {
                    "error": "reloading over HTTP is disabled: no token configured "
                    "(--token-file or CLEFPROVE_RELOAD_TOKEN)"
                },
                {},
            )
        scheme, _, given = header.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("utf-8", "surrogateescape"), self._token
        )
        if ok:
            return None
        return (
            401,
            {"error": "missing or wrong reload token"},
            {"WWW-Authenticate": 'Bearer realm="clefprove"'},
        )


class LagProbe:
    """A timer asked for every *interval* seconds on the event loop; how late it runs
    (``perf_counter``, not the loop's millisecond clock) goes into *histogram*: a stall of
    the loop, whatever its cause, shows there."""

    def __init__(self, histogram: Any, interval: float = LAG_INTERVAL) -> None:
        self.histogram = histogram
        self.interval = interval
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._next()

    def _next(self) -> None:
        assert self._loop is not None
        self._due = time.perf_counter() + self.interval
        self._handle = self._loop.call_later(self.interval, self._fire)

    def _fire(self) -> None:
        self.histogram.observe(max(time.perf_counter() - self._due, 0.0))
        self._next()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


async def _digest(data: bytes | memoryview) -> str:
    """The sha256 of *data*: on the loop up to :data:`HASH_INLINE` bytes, else in a thread."""
    if len(data) <= HASH_INLINE:
        return hashlib.sha256(data).hexdigest()
    return await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())


def _counted(result: ReloadResult) -> str:
    return result.value if result is not ReloadResult.ERROR else ReloadResult.INVALID.value


def read_model_file(path: str, limit: int, regular_only: bool = False) -> bytes:
    """The bytes of the file *path*, refused (one line) past *limit* bytes.

    With *regular_only* (a SIGHUP reload of MODEL from its path) anything but a regular file
    is refused, and the open never waits: a named pipe with no writer (or a terminal) in
    MODEL's place blocked the reading thread for good, and the service then never stopped
    on SIGTERM (it waits for that thread).  The start-up read still takes a pipe
    (``serve <(...)``), as every command does."""
    try:
        flags = os.O_RDONLY | (os.O_NONBLOCK if regular_only else 0)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb") as fh:
            if regular_only and not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ClefproveError(f"{path}: not a regular file; a SIGHUP reload reads a file")
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ClefproveError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ClefproveError(f"{path}: larger than the model size limit ({limit} bytes)")
    return data


def _log(line: str) -> None:
    sys.stderr.write(f"clefprove serve: {line}\n")
    sys.stderr.flush()


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, allow_nan=False) + "\n", status, headers, JSON)


def _answer(out: Outcome) -> Response:
    """The HTTP answer to an admission (its JSON encoded by the worker when it could)."""
    content = out.response if out.response is not None else encode_json(out.body)
    return Response(content, out.status, None, JSON)


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message})


async def _read_body(request: Request, limit: int) -> bytes:
    """The whole request body, or :class:`BodyTooLarge` as soon as it exceeds *limit*."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def build_app(service: Service, access_log: bool = False) -> ASGIApp:
    """The ASGI application of *service* (SIGHUP handled while it runs)."""
    metrics = service.metrics
    limits = service.limits

    decide_body = _decider(service)
    upload = ReloadUpload(service)

    async def decide(request: Request) -> Response:
        """POST /decide through Starlette (the fast path below answers it first)."""
        served = service.current  # this request's model, whatever reloads happen meanwhile
        try:
            body = await _read_body(request, limits.max_decide_bytes)
        except BodyTooLarge:
            body = None
        status, content = decide_body(served, body)
        return Response(content, status, None, JSON)

    async def rollback(request: Request) -> Response:
        refusal = service.authorize(request)
        if refusal is not None:
            metrics.rollbacks.labels("unauthorized").inc()
            return refusal
        out = await service.admit(b"", "rollback", "rollback", rollback=True)
        metrics.rollbacks.labels(_counted(out.result)).inc()
        return _answer(out)

    async def model(request: Request) -> Response:
        served = service.current
        assert served is not None
        described = served.description()
        diff = service.diffs.get(served.sha256)
        if diff is not None:
            described["diff"] = diff
        return _json(200, {**described, "history": list(service.history)})

    async def metrics_page(request: Request) -> Response:
        return Response(metrics.exposition(), 200, None, CONTENT_TYPE)

    async def healthz(request: Request) -> Response:
        return _json(200, {"status": "ok"})

    async def readyz(request: Request) -> Response:
        served = service.current
        if served is None:
            return _json(503, {"status": "no verified model"})
        return _json(200, {"status": "ready", "sha256": served.sha256})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, exc.detail)

    async def lifespan(app: Starlette) -> Any:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(service.reload_from_path()))
        # Everything alive once the server runs (modules, the app, the first model) is never
        # scanned by a collection again: a full collection scans only what came later (a few
        # thousand objects: well under a millisecond) instead of every module's objects (tens
        # of milliseconds on this machine, and a reload's allocations trigger one now and
        # then). Only here: frozen objects are freed by reference counting alone, so freezing
        # after every swap would keep any garbage cycle alive then for good.
        gc.collect()
        gc.freeze()
        # A thread that takes the interpreter lock in turns with the event loop (a rollback's
        # or a SIGHUP's read of the file, the hash of a model above HASH_INLINE bytes): the
        # loop waits for it at most this long instead of the default 5 ms.
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        probe = LagProbe(metrics.loop_lag)
        probe.start(loop)
        try:
            yield
        finally:
            probe.stop()
            sys.setswitchinterval(switch)
            loop.remove_signal_handler(signal.SIGHUP)

    app = Starlette(
        routes=[
            Route("/decide", decide, methods=["POST"]),
            Route("/reload", upload, methods=["POST"]),  # POST: the fast path answers first
            Route("/rollback", rollback, methods=["POST"]),
            Route("/model", model, methods=["GET"]),
            Route("/metrics", metrics_page, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=contextlib.asynccontextmanager(lifespan),
    )
    fast = DecideFastPath(app, service, decide_body, upload)
    return AccessLog(fast) if access_log else fast


def _decider(service: Service) -> Callable[[Served | None, bytes | None], tuple[int, bytes]]:
    """The answer to one POST /decide body (None: it was too large) on *served*: status and
    JSON bytes.  Metrics are counted only for a request answered in full."""
    metrics, limit = service.metrics, service.limits.max_decide_bytes
    errors, histogram = metrics.input_errors, metrics.decision_seconds
    too_large = _error_bytes(f"request body larger than {limit} bytes")

    def decide_body(served: Served | None, body: bytes | None) -> tuple[int, bytes]:
        t0 = time.perf_counter()
        assert served is not None  # the port listens only once a model is admitted
        if body is None:
            errors.inc()
            return 413, too_large
        try:
            obj = _parse(body)
            if type(obj) is list:
                rows = []
                for i, rec in enumerate(obj):
                    try:
                        rows.append(served.encode(rec))
                    except InputError as exc:
                        raise InputError(one_line_input_error(exc, i)) from None
                records = obj
            else:
                rows = [served.encode(obj)]
                records = [obj]
        except InputError as exc:
            errors.inc()
            return 400, _error_bytes(exc.one_line())
        leaves = served.decide(rows)
        for rec in records:
            served.count_clipped(rec)
        served.count_decisions(leaves)
        if type(obj) is list:
            content = b"[" + b", ".join(map(served.answer, leaves)) + b"]\n"
        else:
            content = served.answer(leaves[0]) + b"\n"
        histogram.observe(time.perf_counter() - t0)
        return 200, content

    return decide_body


def _error_bytes(message: str) -> bytes:
    return (json.dumps({"error": message}, allow_nan=False) + "\n").encode()


_JSON_HEADER = (b"content-type", JSON.encode())


class DecideFastPath:
    """ASGI: ``POST /decide`` answered straight from the ASGI messages (no Request, Response
    or routing objects: they cost more than the decision), everything else by Starlette."""

    def __init__(
        self,
        app: ASGIApp,
        service: Service,
        decide_body: Callable[[Served | None, bytes | None], tuple[int, bytes]],
        upload: ASGIApp | None = None,
    ) -> None:
        """*upload*: the ASGI app of ``POST /reload``, answered here too (no routing)."""
        self.app = app
        self.service = service
        self.decide_body = decide_body
        self.limit = service.limits.max_decide_bytes
        self.upload = upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/decide" or scope["method"] != "POST":
            if (
                self.upload is not None
                and scope.get("path") == "/reload"
                and (scope["type"] == "http" and scope["method"] == "POST")
            ):
                await self.upload(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        served = self.service.current  # this request's model, whatever reloads happen meanwhile
        body: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                break
        else:
            try:
                body = await self._body(receive)
            except _Gone:
                return
        status, content = self.decide_body(served, body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [_JSON_HEADER, (b"content-length", str(len(content)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": content})

    async def _body(self, receive: Receive) -> bytes | None:
        """The body, or None once it exceeds the limit."""
        message = await receive()
        body = message.get("body", b"")
        if not message.get("more_body", False):
            return body if len(body) <= self.limit else None
        chunks = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)


class _Gone(Exception):
    """The client disconnected before its request body was complete."""


async def _receive_body(receive: Receive, limit: int) -> bytes:
    """A request body from its ASGI messages (:class:`BodyTooLarge` past *limit* bytes,
    :class:`_Gone` if the client left first)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class ReloadUpload:
    """ASGI: ``POST /reload`` straight from the ASGI messages (no Request, Response, routing
    or middleware objects on the loop): the token, the body (raw bytes, or a multipart form
    handed to the gate worker whole, which parses it), the admission, the answer the worker
    encoded.  Each step of the loop's share timed (``clefprove_reload_loop_step_seconds``)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        metrics = service.metrics
        self.steps = metrics.reload_steps
        self.counted = {r: metrics.reloads.labels(r) for r in RELOAD_RESULTS}
        self.limit = service.limits.max_model_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        auth, ctype, length = "", "", None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value.decode("latin-1")
            elif name == b"content-type":
                ctype = value.decode("latin-1")
            elif name == b"content-length":
                length = value
        refusal = self.service.refusal(auth)
        if refusal is not None:
            self.counted["unauthorized"].inc()
            status, body, headers = refusal
            await _send(send, status, encode_json(body), headers)
            return
        steps = Steps(self.steps)
        try:
            if length is not None and length.isdigit() and int(length) > self.limit:
                raise BodyTooLarge
            data = await _receive_body(receive, self.limit)
            steps.done("receive")  # wall time: the body's chunks may arrive apart
        except BodyTooLarge:
            self.counted["invalid"].inc()
            message = {"error": f"model larger than {self.limit} bytes"}
            await _send(send, 413, encode_json(message))
            return
        except _Gone:
            return
        multipart = ctype if ctype.startswith("multipart/form-data") else None
        out = await self.service.admit(data, "upload", "upload", multipart=multipart)
        steps.start()
        self.counted[_counted(out.result)].inc()
        content = out.response if out.response is not None else encode_json(out.body)
        steps.done("answer")
        await _send(send, out.status, content)
        steps.done("write")


async def _send(
    send: Send, status: int, content: bytes, headers: dict[str, str] | None = None
) -> None:
    """A whole JSON answer through ASGI messages."""
    raw = [_JSON_HEADER, (b"content-length", str(len(content)).encode())]
    if headers:
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": content})


def _parse(body: bytes) -> Any:
    from clefprove.eval.inputs import parse_json_input

    obj = parse_json_input(body)
    if not isinstance(obj, dict | list):
        raise InputError("the body must be a JSON object (one input) or an array of objects")
    return obj


class AccessLog:
    """ASGI middleware: one JSON line per request on stdout (never a header, so no token)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500
        size = 0

        async def sending(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = scope.get("client")
            line = {
                "time": _now(),
                "client": f"{client[0]}:{client[1]}" if client else None,
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "bytes": size,
                "seconds": round(time.perf_counter() - t0, 6),
            }
            sys.stdout.write(json.dumps(line, allow_nan=False) + "\n")
            sys.stdout.flush()
