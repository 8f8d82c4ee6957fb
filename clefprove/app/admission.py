"""Admission of a model: the gate run on the exact bytes a service was handed.

The gate (:func:`clefprove.app.gate.run_gate`) runs in a separate worker process, so
that solver work never holds the serving process's interpreter lock (decisions keep their
latency during a reload) and a crash in the solver cannot take the service down.  The worker
keeps one proof cache open for its lifetime.

:func:`ship_admission` is what the service runs there for every admission (over the pipe
of :mod:`clefprove.app.worker`): everything that costs CPU or waits for the disk happens in
the worker, so the serving process's event loop only hashes its own bytes, sends them and
reads the answer.  The worker stages the bytes, validates and gates them (:func:`admit_file`),
and for an admitted model builds the served model's evaluator, encodes the answer, writes the
store record and renames the file into the store.  What comes back is a small pickled
:class:`Shipped` (verdict, body) and raw parts: the encoded answer and the evaluator's tables.
The serving process builds the model from its own bytes (``load_admitted``: views, no second
validation) and the evaluator from those tables (:func:`received_admission`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clefprove.errors import ClefproveError
from clefprove.frozen import frozen
from clefprove.memo import Derived

#: Time budget (seconds) of the behaviour search of an ensemble diff on reload.
DIFF_BUDGET = 10.0


@frozen
class GateSettings:
    """What every admission of one service is checked against."""

    invariants: tuple[str, ...]
    cache_dir: str | None  # None: no proof cache
    timeout: float | None
    rlimit: int
    jobs: int
    counterexamples: int


@frozen
class Verdict:
    """The gate's answer on one file: ``exit_code`` as ``clefprove gate`` (0/1/2/3).

    ``error`` is the one-line reason of an exit 2 (the file or an invariant cannot be read);
    ``check`` is SPEC §4's check JSON otherwise.  ``unfit`` marks an exit 2 of a valid file
    that the invariants cannot be checked on (they name a feature or action it lacks, or
    cannot be read): the model is refused (409), not invalid (400).
    """

    exit_code: int
    sha256: str = ""
    check: dict[str, Any] | None = None
    digests: tuple[tuple[str, str], ...] = ()  # (invariant name, digest of its checked form)
    seconds: float = 0.0
    error: str = ""
    unfit: bool = False

    @property
    def admitted(self) -> bool:
        return self.exit_code == 0


@frozen
class Admission:
    """What the worker hands back for one admission (:func:`admit_file`).

    ``response`` is the JSON answer to ``POST /reload``, encoded; for an admitted model,
    ``model`` is the model the worker validated and gated (whose digest is
    ``verdict.sha256``), ``evaluator`` its evaluator with every table built, and the file is
    already in the store under its digest, its record beside it (admitted at ``when``)."""

    verdict: Verdict
    body: dict[str, Any]
    response: bytes
    when: str = ""
    model: Any = None
    evaluator: Any = None


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
        from clefprove.incremental.store import warn

        try:
            _worker.cache = ProofCache(cache_dir)
        except ClefproveError as exc:  # removed since the service made it: only costs speed
            warn(f"proof cache unavailable ({exc}); checking without it")


def _cache(directory: str | None) -> Any:
    """The worker's proof cache (None when the service runs without one)."""
    return _worker.cache if directory is not None else None


def gate_file(path: str, settings: GateSettings, label: str | None = None) -> Verdict:
    """Run the gate on the ``.clef`` file *path* (in the worker process); never raises for bad
    input: a :class:`ClefproveError` becomes a verdict with exit code 2 (a defect of the file
    is named after *label* when given, not after *path*).

    The behaviour diff against the served model is not part of it (:func:`diff_files` runs
    after the swap): it never changes the verdict, and it costs more than a cached check."""
    return _gate(path, settings, label)[0]


def _gate(path: str, settings: GateSettings, label: str | None = None) -> tuple[Verdict, Any]:
    """:func:`gate_file`, and the model it gated (validated once, with full validation; None
    when the file is refused as invalid)."""
    from clefprove.app.gate import run_gate
    from clefprove.model.clef import load, load_bytes

    try:
        # load(), not load_model(): a genuine .clef file, never a JSON source compiled on the way
        model = load(path) if label is None else load_bytes(Path(path).read_bytes(), label)
    except ClefproveError as exc:
        return Verdict(2, error=exc.one_line()), None
    try:
        program = _program(settings.invariants, model)
    except ClefproveError as exc:  # a valid model that the invariants do not fit
        return Verdict(2, error=exc.one_line(), unfit=True), None
    try:
        res = run_gate(
            path,
            program,
            None,
            _cache(settings.cache_dir),
            loaded=model,  # validated just now: the gate does not read the file again
            jobs=settings.jobs,
            timeout=settings.timeout,
            rlimit=settings.rlimit,
            counterexamples=settings.counterexamples,
        )
    except ClefproveError as exc:
        return Verdict(2, error=exc.one_line()), None
    if res.sha256 != model.sha256:  # pragma: no cover - the gate checked another model
        return Verdict(4, error="internal error: the gate checked another model"), None
    verdict = Verdict(
        res.exit_code,
        res.sha256,
        res.report.to_json_dict(),
        tuple((inv.name, inv.digest) for inv in program.invariants),
        res.seconds,
    )
    return verdict, model


def now() -> str:
    """The time of day, ISO 8601 UTC to the millisecond (``2026-12-01T11:24:39.329Z``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_json(body: Any) -> bytes:
    """A JSON answer as the service sends it: one line."""
    return (json.dumps(body, allow_nan=False) + "\n").encode()


def admit_file(
    staged: str, settings: GateSettings, store_dir: str, origin: str, label: str
) -> Admission:
    """In the worker: validate and gate the staged file *staged* (named *label* in messages
    and in the report) and, if every invariant holds, keep it in the store at *store_dir* with
    its record (*origin*: where it came from) and prepare it to be served.  The staged file is
    gone afterwards (renamed into the store, or deleted).  Never raises for bad input."""
    from clefprove.app.prepared import prepare
    from clefprove.app.store import ModelStore

    store = ModelStore(store_dir, sweep=False)
    try:
        verdict, model = _gate(staged, settings, label)
        if verdict.exit_code in (2, 4):
            body: dict[str, Any] = {"error": verdict.error}
            return Admission(verdict, body, encode_json(body))
        assert verdict.check is not None
        body = dict(verdict.check)
        body["model"] = {**body["model"], "path": label}  # not the staging file's name
        if not verdict.admitted:
            return Admission(verdict, body, encode_json(body))
        # The gated model itself builds the evaluator's tables (validated once: the bytes
        # were read once); the file kept in the store must still hold those very bytes.
        if hashlib.sha256(Path(staged).read_bytes()).hexdigest() != verdict.sha256:
            error = {"error": "internal error: the staged file changed while it was gated"}
            return Admission(Verdict(4, error=error["error"]), error, encode_json(error))
        evaluator = prepare(model)
        when = now()
        record = {"admitted_at": when, "origin": origin, **body}
        store.admit(Path(staged), model.sha256, record)
        return Admission(verdict, body, encode_json(body), when, model, evaluator)
    except ClefproveError as exc:  # the store cannot be written
        body = {"error": exc.one_line()}
        return Admission(Verdict(2, error=exc.one_line()), body, encode_json(body))
    finally:
        store.discard(Path(staged))  # still there unless admitted


@frozen
class Shipped:
    """An :class:`Admission` as the gate worker sends it to the serving process (the pickled
    part of the frame: small): the verdict, the answer's body, when it was admitted, and for
    an admitted model which evaluator its tables (the frame's raw parts after the encoded
    answer) belong to, with their scalars and each table's name, dtype and shape."""

    verdict: Verdict
    body: dict[str, Any]
    when: str = ""
    evaluator: str = ""  # "tree", "ensemble", or "" (nothing to serve)
    scalars: dict[str, Any] = field(default_factory=dict)
    tables: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    #: large tables: the file the worker wrote them to (the serving process maps it), and
    #: each table's offset there; else they are the frame's parts
    tables_file: str = ""
    offsets: tuple[int, ...] = ()
    #: a multipart upload: where the model's bytes lie in the body the serving process holds
    #: (offset, length), found by the worker, which parsed the form
    span: tuple[int, int] | None = None


#: From this many bytes of tables on, the worker writes them to a file that the serving
#: process maps (pages fault in as decisions touch them) instead of sending them in the
#: frame (copying 16 MB into fresh memory took 70-110 ms on the loop under load).
MAP_TABLES = 4 << 20
#: The name of such a file, in the store's ``incoming/``.
TABLES_GLOB = "tables-*.bin"


def model_from_multipart(body: bytes, content_type: str, limit: int) -> tuple[int, int]:
    """Where the file of the multipart field ``model`` lies in *body* (offset, length), the
    form parsed as Starlette parses it (in the gate worker; :class:`InputError` for a bad
    form).  Any offset holding the very bytes will do: the serving process builds the model
    from its own slice there, and swaps only if that slice's digest is the one gated."""
    import asyncio

    from starlette.datastructures import Headers
    from starlette.formparsers import MultiPartException, MultiPartParser

    from clefprove.errors import InputError

    async def stream() -> Any:
        yield body

    async def parse() -> bytes:
        headers = Headers({"content-type": content_type, "content-length": str(len(body))})
        parser = MultiPartParser(headers, stream(), max_files=1, max_fields=16,
                                 max_part_size=limit)  # fmt: skip
        try:
            form = await parser.parse()
        except MultiPartException as exc:
            raise InputError(f"bad multipart body: {exc.message}") from None
        try:
            field = form.get("model")
            if field is None:
                raise InputError("the multipart body has no field named 'model'")
            if isinstance(field, str):
                raise InputError("the multipart field 'model' must be a file (curl -F model=@FILE)")
            return await field.read()
        finally:
            await form.close()

    data = asyncio.run(parse())
    at = body.find(data)
    if at < 0:  # pragma: no cover - a file part is a slice of its body
        raise InputError("bad multipart body: the file is not a part of the body")
    return at, len(data)


def ship_admission(
    settings: GateSettings,
    store_dir: str,
    origin: str,
    label: str,
    data: memoryview,
    multipart: tuple[str, int] | None = None,
) -> tuple[Shipped, list[Any]]:
    """In the gate worker: stage *data* (the bytes the serving process was handed, the raw
    part of its request), admit it (:func:`admit_file`) and answer as a frame's metadata
    and raw parts: the encoded answer, then the evaluator's tables, never a pickled model.

    *multipart*: *data* is a multipart form's body (its content type and the model size
    limit): the model is its file field ``model`` (``Shipped.span`` says where)."""
    import numpy as np

    from clefprove.app.store import ModelStore
    from clefprove.errors import InputError
    from clefprove.eval.ensemble import EnsembleEvaluator

    span: tuple[int, int] | None = None
    if multipart is not None:
        try:
            span = model_from_multipart(bytes(data), *multipart)
        except InputError as exc:
            error = {"error": exc.one_line()}
            return Shipped(Verdict(2, error=error["error"]), error), [encode_json(error)]
        data = data[span[0] : span[0] + span[1]]
    store = ModelStore(store_dir, sweep=False)
    for stale in store.incoming.glob(TABLES_GLOB):  # mapped already, or never to be
        store.discard(stale)
    try:
        staged = store.stage(data)
    except OSError as exc:
        error = {"error": f"cannot stage the model: {exc}"}
        return Shipped(Verdict(4, error=error["error"]), error), [encode_json(error)]
    adm = admit_file(str(staged), settings, store_dir, origin, label)
    parts: list[Any] = [adm.response]
    if adm.evaluator is None:
        return Shipped(adm.verdict, adm.body, adm.when, span=span), parts
    scalars, arrays = adm.evaluator.tables()
    spec = []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        spec.append((name, a.dtype.str, tuple(a.shape)))
        parts.append(a.reshape(-1).view(np.uint8))
    kind = "ensemble" if isinstance(adm.evaluator, EnsembleEvaluator) else "tree"
    shipped = Shipped(adm.verdict, adm.body, adm.when, kind, scalars, tuple(spec), span=span)
    if sum(p.nbytes for p in parts[1:]) < MAP_TABLES:
        return shipped, parts
    import dataclasses
    import tempfile

    offsets, at = [], 0
    fd, name = tempfile.mkstemp(dir=store.incoming, prefix="tables-", suffix=".bin")
    try:
        with os.fdopen(fd, "wb") as fh:
            for p in parts[1:]:
                offsets.append(at)
                fh.write(p)
                pad = -p.nbytes % 64
                fh.write(bytes(pad))
                at += p.nbytes + pad
    except OSError as exc:
        store.discard(Path(name))
        error = {"error": f"internal error: cannot write the evaluator's tables: {exc}"}
        return Shipped(Verdict(4, error=error["error"]), error), [encode_json(error)]
    return dataclasses.replace(shipped, tables_file=name, offsets=tuple(offsets)), parts[:1]


def ship_form(
    settings: GateSettings,
    store_dir: str,
    origin: str,
    label: str,
    content_type: str,
    limit: int,
    data: memoryview,
) -> tuple[Shipped, list[Any]]:
    """In the gate worker: :func:`ship_admission` of a multipart upload's body *data*."""
    return ship_admission(settings, store_dir, origin, label, data, (content_type, limit))


def received_admission(
    shipped: Shipped,
    parts: list[memoryview],
    data: bytes | memoryview,
    digest: str,
    label: str,
    like: Any = None,
) -> Admission:
    """In the serving process: the :class:`Admission` of a frame from
    :func:`ship_admission`, for the bytes *data* this process holds (their sha256, computed
    here, is *digest*).  An admitted model is built from *data* itself (:func:`load_admitted`:
    ``frombuffer`` views, no validation again: the worker validated these bytes, their digest
    says so), its evaluator from the tables as they came (read-only views of the frame).
    *like*: the model served until now (its parsed features and actions are taken when the
    new metadata's are the same text)."""
    import numpy as np

    from clefprove.eval.ensemble import EnsembleEvaluator
    from clefprove.eval.evaluator import Evaluator
    from clefprove.model.clef import load_admitted
    from clefprove.model.ensemble import Ensemble

    response = bytes(parts[0])
    v = shipped.verdict
    if not shipped.evaluator or not v.admitted or v.sha256 != digest:
        return Admission(v, shipped.body, response, shipped.when)
    model = load_admitted(data, digest, label, like)
    tables: list[memoryview] = parts[1:]
    if shipped.tables_file:  # mapped: nothing copied, pages fault in as they are used
        import mmap

        with open(shipped.tables_file, "rb") as fh:
            view = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
        tables = []
        for (_, dtype, shape), at in zip(shipped.tables, shipped.offsets, strict=True):
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            tables.append(view[at : at + n])
    arrays = {}
    for (name, dtype, shape), part in zip(shipped.tables, tables, strict=True):
        a = np.frombuffer(part, dtype=np.dtype(dtype)).reshape(shape)
        a.flags.writeable = False
        arrays[name] = a
    evaluator: Any
    if shipped.evaluator == "ensemble" and isinstance(model, Ensemble):
        evaluator = EnsembleEvaluator.from_tables(model, shipped.scalars, arrays)
    elif shipped.evaluator == "tree" and not isinstance(model, Ensemble):
        evaluator = Evaluator.from_tables(model, shipped.scalars, arrays)
    else:  # pragma: no cover - a bug: the tables of another kind of model
        raise ClefproveError("internal error: the gate worker sent another model's tables")
    return Admission(v, shipped.body, response, shipped.when, model, evaluator)


def ship_diff(old: str, new: str, store_dir: str) -> tuple[dict[str, Any], list[Any]]:
    """In the diff worker: :func:`diff_and_record`, as a frame's metadata."""
    return diff_and_record(old, new, store_dir), []


def _program(invariants: tuple[str, ...], model: Any) -> Any:
    """The invariants checked against *model*'s features and actions, parsed again only when
    an .inv file's content or the model's interface changes (versions of one model share it).
    Keyed by the files' digests, never their timestamps: a reload is always checked against
    exactly the invariants on disk."""
    from clefprove.dsl.files import expand_paths, read_bytes
    from clefprove.dsl.loader import load_invariants

    try:
        paths = expand_paths(list(invariants))
    except ClefproveError:  # vanished meanwhile: load_invariants says so
        return load_invariants(list(invariants), model)
    for p in paths:
        # The service reads its invariants again at every reload: a named pipe (or a device)
        # in a file's place made that read wait for a writer for good, every later reload
        # queued behind it and SIGTERM never ended the service.  stat() does not wait.
        try:
            mode = os.stat(p).st_mode
        except OSError:
            continue  # unreadable or vanished meanwhile: load_invariants says so below
        if not stat.S_ISREG(mode):
            raise ClefproveError(
                f"{p}: not a regular file; the service reads its invariant files again at "
                "every reload"
            )
    try:
        digests = tuple((str(p), hashlib.sha256(read_bytes(p)).hexdigest()) for p in paths)
    except ClefproveError:  # unreadable or vanished meanwhile: load_invariants says so
        return load_invariants(list(invariants), model)
    key = ("app.program", digests, model.features, model.actions)
    program = _worker.programs.get(key, lambda: load_invariants(list(invariants), model))
    if tuple((f.path, f.sha256) for f in program.sources) != digests:
        # a file changed between reading its digest and parsing it: never use that entry
        return load_invariants(list(invariants), model)
    return program


def diff_and_record(old: str, new: str, store_dir: str) -> dict[str, Any]:
    """In the diff worker: the behaviour diff from the admitted model *old* to *new* (their
    sha256), added to *new*'s store record; returns that entry (``{"from": old, ...}``)."""
    from clefprove.app.store import ModelStore

    store = ModelStore(store_dir, sweep=False)
    entry = {"from": old, **diff_files(str(store.model_path(old)), str(store.model_path(new)))}
    store.annotate(new, "diff", entry)
    return entry


def diff_files(old: str, new: str) -> dict[str, Any]:
    """The behaviour diff summary from the model file *old* to *new* (as ``clefprove gate
    --previous`` reports it), for two single trees or two ensembles (whose behaviour search
    has :data:`DIFF_BUDGET` seconds: past it the summary says ``partial``; a tree against
    an ensemble: not compared); an unreadable file gives ``{"error": ...}``."""
    from clefprove.incremental.compare import diff_models
    from clefprove.model.clef import load

    try:
        d = diff_models(
            load(old), load(new), old, new, 3, DIFF_BUDGET, refuse_mixed=False
        ).to_json_dict()
    except ClefproveError as exc:
        return {"error": exc.one_line()}
    d["semantic"].pop("regions", None)
    return d
