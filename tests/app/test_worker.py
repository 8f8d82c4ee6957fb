"""The worker protocol of the service (frames over a socketpair read by the event loop), the
served model rebuilt from the loop's own bytes and the worker's raw tables, and the loop-lag
probe: each against an independent reference (the evaluator built afresh, the node walker,
the full loader)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from clefprove.app.admission import GateSettings, received_admission, ship_admission
from clefprove.app.metrics import Metrics
from clefprove.app.served import serve_model
from clefprove.app.service import LagProbe
from clefprove.app.store import ModelStore
from clefprove.app.worker import Worker, WorkerDied, WorkerError, decode, encode
from clefprove.eval.ensemble import PER_TREE_ROWS, EnsembleEvaluator
from clefprove.eval.evaluator import Evaluator, NodeWalker
from clefprove.eval.inputs import RecordEncoder
from clefprove.model.clef import load_admitted, load_bytes, write_clef
from clefprove.model.source import compile_source
from tests.app.conftest import INVARIANTS, ROOT, SAFE, UNSAFE
from tests.eval.test_evaluator import _unbalanced

SETTINGS = GateSettings((str(INVARIANTS),), None, None, 50_000_000, 1, 3)


# ---------------------------------------------------------------- functions run in a worker
def _init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def echo(meta: Any, *parts: memoryview) -> tuple[Any, list[bytes]]:
    """The metadata back, and each part reversed (so the worker must have read every byte)."""
    return (meta, os.getpid()), [bytes(p)[::-1] for p in parts]


def fail(message: str) -> tuple[Any, list[bytes]]:
    raise ValueError(message)


def die(code: int) -> tuple[Any, list[bytes]]:
    os._exit(code)  # a crash mid-call: no answer, the pipe closes


def _flat(payload: list[Any]) -> tuple[bytearray, int]:
    raw = b"".join(bytes(p) for p in payload)
    total, n = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:12], "little")
    assert len(raw) == 12 + total
    return bytearray(raw[12:]), n


# ---------------------------------------------------------------- frames
def test_frames_carry_metadata_and_raw_parts_aligned() -> None:
    parts = [b"", b"x", bytes(range(256)) * 41, np.arange(7, dtype=np.float64), b"abc"]
    payload, n = _flat(encode({"k": [1, 2]}, parts))
    meta, got = decode(payload, n)
    assert meta == {"k": [1, 2]} and len(got) == len(parts)
    for want, part in zip(parts, got, strict=True):
        assert bytes(part) == bytes(memoryview(want).cast("B"))
        view = np.frombuffer(part, dtype=np.uint8)
        assert view.size == 0 or view.ctypes.data % 8 == 0  # frombuffer views are aligned


def test_a_short_frame_is_refused() -> None:
    payload, n = _flat(encode("m", [b"12345678"]))
    with pytest.raises(WorkerError):
        decode(payload[:-8], n)


# ---------------------------------------------------------------- a real worker process
@pytest.fixture
def worker():
    w = Worker("test-worker", _init, ())
    yield w
    w.close()


def test_blocking_and_loop_calls_answer_and_survive_errors(worker: Worker) -> None:
    big = os.urandom(3 << 20)  # more than a socket buffer: partial reads and writes
    (meta, pid), parts = worker.call(echo, ("hello",), [b"ab", big])
    assert meta == "hello" and pid == worker.pid
    assert [bytes(p) for p in parts] == [b"ba", big[::-1]]

    async def main() -> None:
        for k in range(3):
            (m, _), out = await worker.acall(echo, (k,), [big[: 1000 * k + 1]])
            assert m == k and bytes(out[0]) == big[: 1000 * k + 1][::-1]
        with pytest.raises(WorkerError, match="boom"):
            await worker.acall(fail, ("boom",))
        (m, p), _ = await worker.acall(echo, ("after",))  # the worker lives on
        assert m == "after" and p == pid

    asyncio.run(main())
    with pytest.raises(WorkerError, match="bang"):
        worker.call(fail, ("bang",))
    assert worker.call(echo, ("again",))[0][0] == "again"


@pytest.mark.slow  # three worker processes started (test_serve kills a real server's too)
def test_a_worker_dying_mid_call_is_reported_then_restarted(worker: Worker) -> None:
    async def main() -> None:
        with pytest.raises(WorkerDied):
            await worker.acall(die, (3,))
        worker.restart()
        (m, pid), _ = await worker.acall(echo, ("new",))
        assert m == "new" and pid == worker.pid
        os.kill(pid, signal.SIGKILL)  # killed while idle: the next call finds out
        with pytest.raises(WorkerDied):
            await asyncio.wait_for(worker.acall(echo, ("x",), [os.urandom(1 << 20)]), 60)
        worker.restart()
        assert (await worker.acall(echo, ("back",)))[0][0] == "back"

    asyncio.run(main())
    with pytest.raises(WorkerDied):
        worker.call(die, (4,))
    worker.restart()
    assert worker.call(echo, (1,))[0][0] == 1


def test_the_loop_share_of_a_call_is_timed(worker: Worker) -> None:
    big = os.urandom(1 << 20)

    async def main() -> None:
        await worker.acall(echo, ("x",), [big])

    asyncio.run(main())
    t = worker.timing
    assert t.send > 0 and t.read > 0 and t.decode > 0  # each step of the loop's share


def sleepy(seconds: float) -> tuple[Any, list[bytes]]:
    time.sleep(seconds)
    return os.getpid(), []


def test_a_call_cancelled_midway_never_answers_the_next(worker: Worker) -> None:
    async def main() -> None:
        first = worker.pid
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(worker.acall(sleepy, (30.0,)), 0.5)
        # the late answer of the cancelled call must not be taken for this one's
        pid, _ = await asyncio.wait_for(worker.acall(sleepy, (0.0,)), 120)
        assert pid == worker.pid != first

    asyncio.run(main())
    worker.close()
    with pytest.raises(WorkerDied):
        worker.call(echo, ("closed",))


# ---------------------------------------------------------------- the served model, rebuilt
def _over_the_pipe(ev: Evaluator | EnsembleEvaluator) -> tuple[dict[str, Any], dict[str, Any]]:
    """The evaluator's tables through a frame, as the serving process receives them."""
    scalars, arrays = ev.tables()
    names = list(arrays)
    payload, n = _flat(encode((scalars, [(k, arrays[k].dtype.str, arrays[k].shape) for k in names]),
                              [np.ascontiguousarray(arrays[k]) for k in names]))  # fmt: skip
    (scalars, spec), parts = decode(payload, n)
    out = {}
    for (name, dtype, shape), part in zip(spec, parts, strict=True):
        a = np.frombuffer(part, dtype=np.dtype(dtype)).reshape(shape)
        a.flags.writeable = False
        out[name] = a
    return scalars, out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("heap_levels", [12, 0, 3])
def test_an_evaluator_from_tables_decides_like_the_walker(seed: int, heap_levels: int) -> None:
    data = write_clef(compile_source(_unbalanced(30 if seed % 2 else 9, seed)))
    model = load_bytes(data)
    built = Evaluator(model, heap_levels=heap_levels, chunk_rows=257)
    mapped = load_admitted(data, model.sha256)
    ev = Evaluator.from_tables(mapped, *_over_the_pipe(built))
    rng = np.random.default_rng(seed)
    n = 2000
    X = np.column_stack(
        [rng.uniform(-10, 110, n), rng.integers(-2, 13, n).astype(float), rng.integers(0, 5, n)]
    ).astype(np.float64)
    walker = NodeWalker(model)
    want = [walker.evaluate_one(x) for x in X]
    res = ev.evaluate(X)
    assert res.leaves.tolist() == [d.leaf for d in want]
    assert res.actions.tolist() == [d.action for d in want]
    assert res.confidences.tolist() == [d.confidence for d in want]
    assert [ev.evaluate_one(x) for x in X[:300]] == want[:300]
    ev.use_views()  # the walk of a large served model: memoryviews, no lists
    assert [ev.evaluate_one(x) for x in X[:300]] == want[:300]
    assert [ev.path(x)[-1] for x in X[:50]] == [d.leaf for d in want[:50]]


def test_load_admitted_is_the_validated_model_without_the_validation() -> None:
    src = json.loads((ROOT / "tests" / "fixtures" / "ensemble_toy.json").read_text())
    for data in (SAFE.read_bytes(), write_clef(compile_source(src))):
        full = load_bytes(data, "upload")
        fast = load_admitted(data, full.sha256, "upload")
        assert type(fast) is type(full) and fast.sha256 == full.sha256
        assert (fast.name, fast.version, fast.features, fast.actions, fast.metadata) == (
            full.name, full.version, full.features, full.actions, full.metadata,
        )  # fmt: skip
        assert fast.nodes.tobytes() == full.nodes.tobytes()
        assert fast.membership.tobytes() == full.membership.tobytes()
        assert not fast.nodes.flags.writeable and fast.max_depth == full.max_depth


def _received(store: ModelStore, data: bytes, settings: GateSettings = SETTINGS) -> Any:
    digest = __import__("hashlib").sha256(data).hexdigest()
    shipped, parts = ship_admission(settings, str(store.directory), "upload", "upload",
                                    memoryview(data))  # fmt: skip
    payload, n = _flat(encode(shipped, parts))  # through a frame, as over the pipe
    shipped, parts = decode(payload, n)
    return received_admission(shipped, parts, data, digest, "upload"), digest


def test_a_shipped_admission_serves_the_model_it_checked(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    data = SAFE.read_bytes()
    adm, digest = _received(store, data)
    assert adm.verdict.admitted and adm.model.sha256 == digest
    assert store.model_path(digest).read_bytes() == data  # the worker staged and stored it
    assert not list(store.incoming.iterdir())
    assert json.loads(adm.response) == adm.body
    served = serve_model(adm.model, adm.verdict, "upload", adm.when, Metrics(), adm.evaluator)
    fresh = load_bytes(data)
    mine, walker = Evaluator(fresh), NodeWalker(fresh)
    rng = np.random.default_rng(11)
    cols = []
    for f in fresh.features:
        if f.values:
            cols.append(rng.integers(0, len(f.values), 1500).astype(np.float64))
        else:
            cols.append(rng.uniform(f.min - 10, f.max + 10, 1500))
    x = np.stack(cols, axis=1)
    assert np.array_equal(served.evaluator.evaluate(x).leaves, mine.evaluate(x).leaves)
    assert served.decide([list(r) for r in x[:40]]) == mine.evaluate(x[:40]).leaves.tolist()
    assert [served.decide([list(r)])[0] for r in x[:300]] == [
        walker.evaluate_one(r).leaf for r in x[:300]
    ]
    enc = RecordEncoder(fresh)
    assert served.decide([enc.values({})]) == [mine.evaluate_one(enc.values({})).leaf]
    # refused and invalid files: nothing to serve, nothing stored
    adm, _ = _received(store, UNSAFE.read_bytes())
    assert adm.verdict.exit_code == 1 and adm.model is None and adm.evaluator is None
    adm, _ = _received(store, data[:-1])
    assert adm.verdict.exit_code == 2 and adm.body["error"].startswith("upload: ")
    assert adm.model is None and not list(store.incoming.iterdir())


def test_large_tables_come_through_a_mapped_file(tmp_path: Path, monkeypatch) -> None:
    import clefprove.app.admission as admission

    monkeypatch.setattr(admission, "MAP_TABLES", 0)  # every model's tables through a file
    store = ModelStore(tmp_path / "store")
    data = SAFE.read_bytes()
    shipped, parts = ship_admission(SETTINGS, str(store.directory), "upload", "upload",
                                    memoryview(data))  # fmt: skip
    assert shipped.tables_file and len(parts) == 1  # only the encoded answer in the frame
    assert Path(shipped.tables_file).parent == store.incoming
    digest = shipped.verdict.sha256
    adm = received_admission(shipped, parts, data, digest, "upload")
    served = serve_model(adm.model, adm.verdict, "upload", adm.when, Metrics(), adm.evaluator)
    fresh = load_bytes(data)
    walker = NodeWalker(fresh)
    rng = np.random.default_rng(9)
    cols = [
        rng.integers(0, len(f.values), 500).astype(np.float64)
        if f.values
        else rng.uniform(f.min - 10, f.max + 10, 500)
        for f in fresh.features
    ]
    x = np.stack(cols, axis=1)
    want = [walker.evaluate_one(r).leaf for r in x]
    assert served.evaluator.evaluate(x).leaves.tolist() == want
    assert [served.decide([list(r)])[0] for r in x[:200]] == want[:200]
    # the next admission removes the file (the served model keeps its mapping)
    adm2, _ = _received(store, UNSAFE.read_bytes())
    assert adm2.verdict.exit_code == 1 and not Path(shipped.tables_file).exists()
    assert served.evaluator.evaluate(x).leaves.tolist() == want


def test_a_shipped_ensemble_decides_like_one_built_afresh(tmp_path: Path) -> None:
    src = json.loads((ROOT / "tests" / "fixtures" / "ensemble_toy.json").read_text())
    data = write_clef(compile_source(src))
    (tmp_path / "x.inv").write_text("invariant trivially:\n  ensure true\n")
    settings = GateSettings((str(tmp_path / "x.inv"),), None, None, 50_000_000, 1, 3)
    adm, digest = _received(ModelStore(tmp_path / "store"), data, settings)
    assert adm.verdict.admitted and isinstance(adm.evaluator, EnsembleEvaluator)
    assert adm.model.sha256 == digest
    fresh = EnsembleEvaluator(load_bytes(data))
    enc = RecordEncoder(adm.model)
    rng = np.random.default_rng(5)
    rows = np.array(
        [
            enc.values(
                {
                    "client_rtt_ms": float(rng.uniform(-50, 1100)),
                    "path_depth": int(rng.integers(0, 9)),
                    "ua_family": str(rng.choice(["Chrome", "Firefox", "curl", "other"])),
                    "is_tor": bool(rng.integers(0, 2)),
                }
            )
            for _ in range(500)
        ]
    )
    # a batch of 500 rows walks all (row, tree) pairs at once; from PER_TREE_ROWS rows on,
    # each tree is walked by its own batch evaluator, built on first use
    many = np.tile(rows, (PER_TREE_ROWS // len(rows) + 1, 1))
    for batch in (rows, many):
        got, want = adm.evaluator.evaluate(batch), fresh.evaluate(batch)
        assert got.actions.tolist() == want.actions.tolist()
        assert got.confidences.tolist() == want.confidences.tolist()
        assert got.leaves.tolist() == want.leaves.tolist()


# ---------------------------------------------------------------- the lag probe
def test_the_lag_probe_records_a_stall_of_the_loop() -> None:
    metrics = Metrics()

    async def main() -> None:
        probe = LagProbe(metrics.loop_lag, interval=0.005)
        probe.start(asyncio.get_running_loop())
        await asyncio.sleep(0.03)  # the probe runs a few times, unstalled
        time.sleep(0.2)  # a stall: the loop runs nothing for 200 ms
        await asyncio.sleep(0.03)
        probe.stop()

    asyncio.run(main())
    text = metrics.exposition().decode()
    count = float(_sample(text, "clefprove_event_loop_lag_seconds_count"))
    total = float(_sample(text, "clefprove_event_loop_lag_seconds_sum"))
    below = float(_sample(text, 'clefprove_event_loop_lag_seconds_bucket{le="0.1"}'))
    # the timer was due at most 5 ms into the stall, so it ran at least 195 ms late, once
    assert count >= 2 and below <= count - 1 and total >= 0.19


def _sample(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return line.split()[-1]
    raise AssertionError(f"{name} not in the exposition")


def _bisection(depth: int) -> dict[str, Any]:
    """A complete tree of *depth* over one float feature: 2**(depth+1) - 1 nodes."""

    def node(d: int, lo: float, hi: float, k: int) -> dict[str, Any]:
        if d == depth:
            return {"action": ("allow", "block")[k % 2], "confidence": round(lo, 6)}
        mid = (lo + hi) / 2
        return {"feature": "x", "threshold": mid, "left": node(d + 1, lo, mid, 2 * k),
                "right": node(d + 1, mid, hi, 2 * k + 1)}  # fmt: skip

    return {
        "name": "big", "version": "1",
        "features": [{"name": "x", "type": "float", "min": 0, "max": 1, "default": 0.5}],
        "actions": ["allow", "block"], "tree": node(0, 0.0, 1.0, 0),
    }  # fmt: skip


def test_a_large_served_model_walks_views_of_the_received_tables() -> None:
    from clefprove.app.admission import Verdict
    from clefprove.app.prepared import WARM_NODES

    data = write_clef(compile_source(_bisection(15)))
    model = load_bytes(data)
    assert model.n_nodes > WARM_NODES
    ev = Evaluator.from_tables(load_admitted(data, model.sha256), *_over_the_pipe(Evaluator(model)))
    metrics = Metrics()
    served = serve_model(ev.model, Verdict(0, model.sha256), "upload", "", metrics, ev)
    assert isinstance(served.leaf_actions, memoryview) and ev._py is not None
    assert all(isinstance(t, memoryview) for t in ev._py)  # no list of every node built
    walker = NodeWalker(model)
    rng = np.random.default_rng(2)
    xs = [[float(v)] for v in rng.uniform(-0.5, 1.5, 400)]
    want = [walker.evaluate_one(x).leaf for x in xs]
    assert [served.decide([x])[0] for x in xs] == want  # one at a time: the views
    assert served.decide(xs) == want  # a batch: the numpy tables
    served.count_decisions(want)
    blocks = sum(int(model.nodes["aux"][leaf]) for leaf in want)
    text = metrics.exposition().decode()
    assert float(_sample(text, 'clefprove_decisions_total{action="block"}')) == blocks


# ---------------------------------------------------------------- behaviour diffs settle
class _DiffWorker:
    """Stands for the diff worker: records what it is asked (no process)."""

    calls: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, *args: Any) -> None:
        from clefprove.app.worker import Timing

        self.timing = Timing(1e-6, 1e-6, 1e-6)

    async def acall(self, function: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        old, new, _ = args
        self.calls.append((old, new))
        return {"from": old}, []

    def close(self) -> None:
        pass


def test_only_the_last_of_reloads_back_to_back_gets_its_diff(monkeypatch, tmp_path) -> None:
    from clefprove.app import service as service_module

    monkeypatch.setattr(service_module, "Worker", _DiffWorker)  # the gate's and the diff's
    monkeypatch.setattr(service_module, "DIFF_SETTLE", 0.05)
    _DiffWorker.calls = []
    svc = service_module.Service("m.clef", SETTINGS, ModelStore(tmp_path / "s"), None)

    async def main() -> None:
        # three swaps closer together than the settling time: only the last one's diff runs
        tasks = [asyncio.create_task(svc._record_diff(a, b)) for a, b in ("AB", "BC", "CD")]
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert _DiffWorker.calls == [("C", "D")] and svc.diffs == {"D": {"from": "C"}}
        await asyncio.wait_for(svc._record_diff("D", "E"), 60)  # alone: computed
        assert _DiffWorker.calls == [("C", "D"), ("D", "E")] and svc.diffs["E"] == {"from": "D"}

    asyncio.run(main())
    text = svc.metrics.exposition().decode()
    assert float(_sample(text, 'clefprove_reload_loop_step_seconds_count{step="diff"}')) == 2


def test_scheduled_diffs_settle_on_one_timer(monkeypatch, tmp_path) -> None:
    from clefprove.app import service as service_module

    monkeypatch.setattr(service_module, "Worker", _DiffWorker)
    monkeypatch.setattr(service_module, "DIFF_SETTLE", 0.05)
    _DiffWorker.calls = []
    svc = service_module.Service("m.clef", SETTINGS, ModelStore(tmp_path / "s"), None)

    async def main() -> None:
        for a, b in ("AB", "BC", "CD"):  # swaps back to back: the timer moves each time
            svc._schedule_diff(a, b)
        deadline = time.monotonic() + 60
        while "D" not in svc.diffs:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert _DiffWorker.calls == [("C", "D")] and svc.diffs == {"D": {"from": "C"}}
        svc._schedule_diff("D", "E")
        svc.close()  # a diff still settling is dropped with the service
        await asyncio.sleep(0.2)
        assert _DiffWorker.calls == [("C", "D")] and svc._diff_timer is None

    asyncio.run(main())


# ---------------------------------------------------------------- the doorbell
def test_a_frame_larger_than_the_socket_buffer_still_goes_through(worker: Worker) -> None:
    assert worker.sock is not None
    size = worker.sock.getsockopt(__import__("socket").SOL_SOCKET, __import__("socket").SO_SNDBUF)
    huge = os.urandom(size + (1 << 20))  # the rest sent after the doorbell, the worker reading
    (meta, _), parts = worker.call(echo, ("big",), [huge])
    assert meta == "big" and bytes(parts[0]) == huge[::-1]

    async def main() -> None:
        (m, _), out = await worker.acall(echo, ("big2",), [huge])
        assert m == "big2" and bytes(out[0]) == huge[::-1]

    asyncio.run(main())


def test_a_worker_whose_serving_process_hangs_up_exits(worker: Worker) -> None:
    assert worker.call(echo, ("up",))[0][0] == "up"
    process = worker.process
    assert worker.sock is not None
    worker.sock.close()  # as when the serving process is gone: no doorbell will ring again
    process.join(60)
    assert process.exitcode == 0  # it saw the hang-up and returned (no orphan left waiting)
    worker.sock = None


# ---------------------------------------------------------------- the interface shared
def test_a_model_with_the_same_interface_shares_it_and_another_does_not() -> None:
    from clefprove.model.clef import interface_text

    base = json.loads((ROOT / "examples" / "edge-allow-block.json").read_text())
    a = load_bytes(SAFE.read_bytes())
    variant = json.loads(json.dumps(base))
    variant["version"] += "+1"
    moved = json.loads(json.dumps(base))
    moved["version"] += "+2"
    rtt = next(f for f in moved["features"] if f["name"] == "client_rtt_ms")
    rtt["default"] = rtt["default"] + 7.0  # same names, another default
    metrics = Metrics()
    served_a = serve_model(a, _admitted(a), "startup", "", metrics)
    for source, shared in ((variant, True), (moved, False)):
        data = write_clef(compile_source(source))
        full = load_bytes(data)
        fast = load_admitted(data, full.sha256, "upload", like=a)
        assert (fast.features, fast.actions) == (full.features, full.actions)
        assert (fast.features is a.features) is shared
        served = serve_model(fast, _admitted(fast), "upload", "", metrics, like=served_a)
        mine = RecordEncoder(full)
        for record in ({}, {"client_rtt_ms": 1e9}, {"ua_family": "curl", "path_depth": 3}):
            assert served.encode(record) == mine.values(record)
        assert served.encoder.model is fast and (served.bounds is served_a.bounds) is shared
        want = {f.name: (f.min, f.max) for f in full.features if f.min is not None}
        assert {k: v[:2] for k, v in served.bounds.items()} == {
            k: v for k, v in want.items() if k in served.bounds
        }
    # the text compared tells 1, 1.0 and true apart (they parse to different features)
    texts = {interface_text([{"min": v}], ["a"]) for v in (1, 1.0, True)}
    assert len(texts) == 3


def _admitted(model: Any) -> Any:
    from clefprove.app.admission import Verdict

    return Verdict(0, model.sha256, {"summary": {}, "results": []})


def test_the_loop_histogram_exports_what_prometheus_would() -> None:
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from clefprove.app.metrics import STEP_BUCKETS, LoopHistogram

    rng = np.random.default_rng(5)
    values = [*rng.exponential(0.002, 300).tolist(), *STEP_BUCKETS, 0.0, 5.0]
    registry = CollectorRegistry()
    reference = Histogram("x_seconds", "x", ["step"], buckets=STEP_BUCKETS, registry=registry)
    mine = Metrics()
    for v in values:
        reference.labels("send").observe(v)
        mine.reload_steps["send"].observe(v)
    want = [ln.replace("x_seconds", "clefprove_reload_loop_step_seconds")
            for ln in generate_latest(registry).decode().splitlines()
            if ln.startswith("x_seconds_") and "created" not in ln]  # fmt: skip
    name = "clefprove_reload_loop_step_seconds_"
    got = [ln for ln in mine.exposition().decode().splitlines()
           if ln.startswith(name) and 'step="send"' in ln]  # fmt: skip

    def parsed(lines: list[str]) -> dict[str, float]:
        return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in lines}

    p, q = parsed(want), parsed(got)
    assert p.keys() == q.keys() and all(abs(p[k] - q[k]) <= 1e-9 * max(1.0, p[k]) for k in p)
    assert isinstance(mine.reload_steps["send"], LoopHistogram)


def test_the_multipart_form_is_found_in_the_body_the_loop_holds() -> None:
    from clefprove.app.admission import model_from_multipart
    from clefprove.errors import InputError

    data = SAFE.read_bytes()
    boundary = "b0undary"

    def form(*fields: tuple[str, bytes, bool]) -> bytes:
        out = b""
        for name, content, is_file in fields:
            disposition = f'form-data; name="{name}"' + ('; filename="m.clef"' if is_file else "")
            out += (f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
                    "Content-Type: application/octet-stream\r\n\r\n").encode()  # fmt: skip
            out += content + b"\r\n"
        return out + f"--{boundary}--\r\n".encode()

    ctype = f"multipart/form-data; boundary={boundary}"
    for body in (
        form(("model", data, True)),
        form(("note", b"x" * 100, False), ("model", data, True)),
    ):
        at, n = model_from_multipart(body, ctype, 1 << 20)
        assert body[at : at + n] == data
    for body, words in (
        (form(("file", data, True)), "no field named 'model'"),
        (form(("model", b"text", False)), "must be a file"),
        (b"--nothing", "bad multipart body"),
    ):
        with pytest.raises(InputError, match=words):
            model_from_multipart(body, ctype, 1 << 20)
