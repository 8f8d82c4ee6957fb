"""The decision service under load: ``clefprove serve`` as a real process, a real load generator.

Measured, in one run, against one server on the depth-12 example (examples/edge-allow-block.clef):

* requests/s, P50 and P99 latency of ``POST /decide`` (one input per request) at 1, 64 and
  1,000 connections, each connection sending its next request as soon as it has its answer
  (closed loop: the service's capacity; latency is then mostly queueing), and at 1,000
  connections paced to ``--rate`` requests/s in all (2,600: the Clef runtime's figure);
* the paced load at 1,000 connections for ``--window`` seconds while reloads run back to back
  (alternating between the example and a copy with one leaf's confidence changed, so every
  reload swaps; at least 100 fit in the default 10 s on a quiet machine), and the P99 jitter:
  that window's P99 minus the one of the same window just before, without reloads; beside
  it, the floor any design can reach on this machine: the same jitter of a bare uvicorn app
  while an unrelated CPU-bound process runs bursts as long as one reload, at nice 0 and at
  nice 19 (``--repeat`` times each, interleaved);
* issue 14 as written (``reloads100``): exactly 100 consecutive reloads, safe and unsafe
  alternating (each sent once the previous one answered), back to back and at
  ``--cadence`` per second, over a wrk window exactly as long as they run, against a window
  as long without them; the floor (bare uvicorn beside a nice-19 burner) in the same run,
  for the same length;
* reload time as a deploy pipeline sees it (the round trip of ``POST /reload``): the depth-12
  example cold (a server started with ``--no-cache``) and with the proof cache, and the same for
  a synthetic 131,071-node model (a complete depth-16 tree that never allows).

The load generator is ``wrk`` (Debian package ``wrk``) when it is on PATH, else a Python
asyncio client (HTTP/1.1 keep-alive, one request in flight per connection; it competes with the
server for the CPU, so its figures are lower bounds).

    python bench/bench_serve.py [--seconds 10] [--reloads 100] [--repeat 3]
                                [--client auto|wrk|python]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import machine, table  # noqa: E402

from clefprove.model.clef import write_clef  # noqa: E402
from clefprove.model.source import compile_source  # noqa: E402

EXAMPLE = ROOT / "examples" / "edge-allow-block.clef"
SOURCE = ROOT / "examples" / "edge-allow-block.json"
INVARIANTS = ROOT / "invariants"
TOKEN = "bench-token"
BODY = json.dumps(
    {
        "client_rtt_ms": 420.5,
        "tls_version": 771,
        "path_depth": 3,
        "referer_entropy": 2.5,
        "ua_family": "Chrome",
        "is_tor": False,
    }
)


# ---------------------------------------------------------------------- the server
SERVERS: list[Server] = []


class Server:
    def __init__(self, model: Path, workdir: Path, *extra: str, root: Path = ROOT) -> None:
        """*root*: the source tree whose ``clefprove`` runs (another revision's, to compare)."""
        SERVERS.append(self)
        env = {**os.environ, "PYTHONPATH": str(root), "CLEFPROVE_RELOAD_TOKEN": TOKEN}
        env.pop("CLEFPROVE_CACHE", None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "clefprove",
                "serve",
                str(model),
                str(INVARIANTS),
                "--addr",
                "127.0.0.1:0",
                *extra,
            ],
            cwd=workdir,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._await_listening()

    def _await_listening(self) -> None:
        deadline = time.monotonic() + 300
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise SystemExit("the server did not start")
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # drain

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=60)


BASELINE = """
import socket, sys, uvicorn
ANSWER = sys.argv[1].encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]
async def app(scope, receive, send):
    message = await receive()
    while message.get("more_body"):
        message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(2048)
sys.stderr.write("listening on http://127.0.0.1:%d\\n" % sock.getsockname()[1])
sys.stderr.flush()
uvicorn.Server(uvicorn.Config(app, loop="auto", http="auto", lifespan="off", log_level="warning",
               access_log=False, server_header=False, backlog=2048)).run(sockets=[sock])
"""


class Baseline(Server):
    """The ceiling: uvicorn as configured by serve, answering a fixed decision (no parsing,
    no evaluation, no metrics), measured in the same run."""

    def __init__(self, answer: bytes) -> None:
        SERVERS.append(self)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BASELINE, answer.decode()], stderr=subprocess.PIPE, text=True
        )
        self._await_listening()


_CLIENTS = threading.local()


def reload(server: Server, data: bytes) -> tuple[int, float, dict[str, Any]]:
    """POST /reload with *data*: status, round-trip seconds, JSON answer.

    Like ``curl`` from a deploy pipeline: a new connection each time, over one client per
    thread (``httpx.post`` builds a new client, with its TLS context, for every request:
    about 50 ms of the client's CPU per reload on this machine, at the cores the server
    runs on, for a plain-HTTP upload)."""
    import httpx

    client = getattr(_CLIENTS, "client", None)
    if client is None:
        client = _CLIENTS.client = httpx.Client(timeout=600)
    t0 = time.perf_counter()
    r = client.post(
        server.url + "/reload",
        content=data,
        headers={"Authorization": f"Bearer {TOKEN}", "Connection": "close"},
    )
    return r.status_code, time.perf_counter() - t0, r.json()


# ---------------------------------------------------------------------- load generators
LAG = "clefprove_event_loop_lag_seconds_bucket"


def lag_buckets(server: Server) -> dict[float, float] | None:
    """The server's event-loop lag histogram (cumulative count per bucket bound), or None
    when it has no lag probe (a revision before it, the bare app)."""
    import httpx

    try:
        text = httpx.get(server.url + "/metrics", timeout=60).text
    except httpx.HTTPError:
        return None
    out = {}
    for line in text.splitlines():
        m = re.match(LAG + r'\{le="([^"]+)"\} (\S+)', line)
        if m:
            out[float(m.group(1))] = float(m.group(2))
    return out or None


STEP = re.compile(
    r'clefprove_reload_loop_step_seconds_(bucket|sum)\{(?:le="([^"]+)",)?step="([^"]+)"\} (\S+)'
)


def step_buckets(server: Server) -> dict[str, dict[Any, float]] | None:
    """The server's histogram of the event loop's steps of an admission: per step, the
    cumulative count per bucket bound and the sum ("sum"); None without it (the bare app, a
    revision before it)."""
    import httpx

    try:
        text = httpx.get(server.url + "/metrics", timeout=60).text
    except httpx.HTTPError:
        return None
    out: dict[str, dict[Any, float]] = {}
    for kind, le, step, value in STEP.findall(text):
        out.setdefault(step, {})[float(le) if kind == "bucket" else "sum"] = float(value)
    return out or None


def step_rows(a: dict[str, dict[Any, float]], b: dict[str, dict[Any, float]]) -> list[list[Any]]:
    """Per step between two snapshots: count, mean, the bucket bounds holding 99 % and all
    of them, and how many took over 1 ms."""
    rows = []
    for step, now in b.items():
        was = a.get(step, {})
        bounds = sorted(k for k in now if k != "sum")
        new = {k: now[k] - was.get(k, 0.0) for k in bounds}
        n = new[bounds[-1]]
        if not n:
            continue
        mean = (now["sum"] - was.get("sum", 0.0)) / n
        p99 = next(k for k in bounds if new[k] >= 0.99 * n)
        top = next(k for k in bounds if new[k] >= n)
        rows.append([step, f"{n:.0f}", f"{mean * 1e6:.0f} µs", _bound(p99), _bound(top),
                     f"{n - new.get(0.001, 0.0):.0f}"])  # fmt: skip
    return rows


def _bound(le: float) -> str:
    return "> 100 ms" if le == float("inf") else f"<= {le * 1e3:g} ms"


def preemptions(pid: int) -> int:
    """How often the main thread (the event loop) of *pid* was switched out while it could
    run (``nonvoluntary_ctxt_switches``): another task took its core."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0  # pragma: no cover


def lag_between(a: dict[float, float] | None, b: dict[float, float] | None) -> str:
    """The largest event-loop lag between two snapshots (the bucket it fell in) and how
    many probes ran over 2 ms late: ``<= 3 ms (4 > 2 ms)``."""
    if a is None or b is None:
        return "n/a"
    bounds = sorted(b)
    new = {le: b[le] - a.get(le, 0.0) for le in bounds}
    top = bounds[0]
    for le in bounds:  # the smallest bound that holds every new observation
        if new[le] >= new[bounds[-1]]:
            top = le
            break
    over = new[bounds[-1]] - new.get(0.002, 0.0)
    shown = "> 2.5 s" if top == float("inf") else f"<= {top * 1e3:g} ms"
    return f"{shown} ({over:.0f} > 2 ms)"


def run_wrk(
    server: Server,
    connections: int,
    seconds: float,
    rate: float | None = None,
    until: threading.Event | None = None,
) -> dict[str, float]:
    """wrk on POST /decide; *rate* (requests/s in all) paces every connection (Lua delay()).
    *until*: stop wrk (SIGINT: it prints its figures as at the end of ``-d``) once that
    event is set or *seconds* have passed, so a window need not be whole seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(BODY)}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
        if rate is not None:  # uniform in [0, 2 * mean]: connections never march in step
            mean = connections * 1000.0 / rate
            fh.write(f"function delay() return math.random() * {2 * mean:.3f} end\n")
        script = fh.name
    duration = max(1, round(seconds)) if until is None else max(2, math.ceil(seconds) + 60)
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "--timeout",
               "10s", "-s", script, server.url + "/decide"]  # fmt: skip
    try:
        if until is None:
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        else:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            until.wait(seconds)
            proc.send_signal(signal.SIGINT)
            out = proc.communicate(timeout=120)[0]
    finally:
        os.unlink(script)
    lat = {p: _unit(v) for p, v in re.findall(r"^\s+(50|99)(?:\.0+)?%\s+(\S+)\s*$", out, re.M)}
    if set(lat) != {"50", "99"}:
        raise SystemExit(f"cannot read wrk's latency distribution:\n{out}")
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": lat["50"],
        "p99": lat["99"],
        "failed": errors + (int(non2xx.group(1)) if non2xx else 0),
    }


def _unit(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    assert m, text
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def run_python(
    server: Server, connections: int, seconds: float, rate: float | None = None
) -> dict[str, float]:
    request = (
        f"POST /decide HTTP/1.1\r\nHost: {server.host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n{BODY}"
    ).encode()
    latencies: list[float] = []
    failed = 0

    async def one(deadline: float) -> None:
        nonlocal failed
        reader, writer = await asyncio.open_connection(server.host, server.port)
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - t0)
                if not head.startswith(b"HTTP/1.1 200"):
                    failed += 1
                if rate is not None:  # uniform in [0, 2 * mean], as for wrk
                    await asyncio.sleep(random.random() * 2 * connections / rate)
        finally:
            writer.close()

    async def main() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(t0 + seconds) for _ in range(connections)))
        return time.perf_counter() - t0

    elapsed = asyncio.run(main())
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
        "failed": failed,
    }


# ---------------------------------------------------------------------- models
def variant_of_example() -> bytes:
    """The depth-12 example with one leaf's confidence changed (still safe: an allow leaf)."""
    src = json.loads(SOURCE.read_text())
    t = src["tree"]
    while "action" not in t:
        t = t["left"]
    assert t["action"] == "allow"
    t["confidence"] = round(t["confidence"] - 0.01, 6)
    src["version"] = src["version"] + "+bench"
    return write_clef(compile_source(src, origin="variant"))


def big_model(depth: int = 16, seed: int = 0, update: bool = False) -> bytes:
    """A complete tree of *depth* (2**(depth+1)-1 nodes) on the example's features that never
    allows (so every invariant of invariants/ holds, and each leaf must be shown to); *update*:
    the same with one leaf's confidence changed (a model's next version)."""
    rng = random.Random(seed)
    src = json.loads(SOURCE.read_text())
    features = {f["name"]: f for f in src["features"]}
    numeric = [n for n, f in features.items() if f["type"] in ("int", "float")]

    def node(d: int, box: dict[str, tuple[float, float]]) -> dict[str, Any]:
        if d == depth:
            action = rng.choice(["challenge", "rate_limit", "block"])
            return {"action": action, "confidence": round(rng.uniform(0.8, 1.0), 4)}
        name = numeric[d % len(numeric)]
        lo, hi = box[name]
        t = (lo + hi) / 2
        if features[name]["type"] == "int":
            t = float(int(t)) + 0.5
        left = node(d + 1, {**box, name: (lo, t)})
        right = node(d + 1, {**box, name: (t, hi)})
        return {"feature": name, "threshold": t, "left": left, "right": right}

    box = {n: (float(features[n]["min"]), float(features[n]["max"])) for n in numeric}
    src["name"], src["version"] = "edge-big", f"{depth}.{seed}" + ("+1" if update else "")
    src["tree"] = node(0, copy.deepcopy(box))
    if update:
        t = src["tree"]
        while "action" not in t:
            t = t["right"]
        t["confidence"] = 0.85 if t["confidence"] != 0.85 else 0.86
    return write_clef(compile_source(src, origin="big"))


# ---------------------------------------------------------------------- the run
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reloads", type=int, default=100)
    ap.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    ap.add_argument("--rate", type=float, default=2600.0, help="paced load, requests/s")
    ap.add_argument("--repeat", type=int, default=3, help="jitter comparisons, one after another")
    ap.add_argument("--compare", metavar="REV", help="also the jitter of the server at git REV")
    ap.add_argument("--reloader-nice", type=int, default=0, metavar="N",
                    help="niceness of the benchmark's reloading thread (the client)")  # fmt: skip
    ap.add_argument("--window", type=float, default=10.0,
                    help="seconds of each jitter window (long enough for 100 reloads)")  # fmt: skip
    ap.add_argument("--loop-reloads", type=int, default=100, metavar="N",
                    help="loop-cpu: reloads per measurement")  # fmt: skip
    ap.add_argument("--loop-rounds", type=int, default=1, metavar="K",
                    help="loop-cpu: measurements per server, interleaved")  # fmt: skip
    ap.add_argument(
        "--cadence",
        type=float,
        default=10.0,
        metavar="PER_SECOND",
        help="reloads100: a deploy pipeline's cadence (0: back to back only)",
    )
    ap.add_argument(
        "--parts",
        default="decide,reloads,reloads100,loop-cpu,reload-time,swap,upload",
        help="which sections to run (comma list: decide, reloads, reloads100 (issue 14's 100 "
        "consecutive reloads), loop-cpu, reload-time, swap, upload; and switches, not by "
        "default: who runs when the loop is switched out, from the kernel's sched_switch "
        "trace, as root)",
    )
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    use_wrk = args.client == "wrk" or (args.client == "auto" and shutil.which("wrk"))
    load = run_wrk if use_wrk else run_python
    print(f"# {machine()}; load generator: {'wrk' if use_wrk else 'python asyncio'}; "
          f"load average before: {os.getloadavg()[0]:.2f}")  # fmt: skip

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    parts = set(args.parts.split(","))
    try:
        if parts & {"decide", "reloads", "reloads100", "loop-cpu"}:
            srv = Server(EXAMPLE, work, "--cache", str(work / "cache"), "--store", str(work / "s"))
            load(srv, 16, 2.0)  # warm-up
            old = None
            if args.compare and parts & {"reloads", "reloads100", "loop-cpu"}:
                tree = work / "compare"
                tree.mkdir()
                archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.compare],
                                         check=True, capture_output=True).stdout  # fmt: skip
                subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
                old = Server(EXAMPLE, work, "--cache", str(work / "cache-old"),
                             "--store", str(work / "s-old"), root=tree)  # fmt: skip
                load(old, 16, 2.0)
            if "decide" in parts:
                decide_section(srv, load, args)
            if "reloads" in parts:
                reloads_section(srv, load, args, old)
            if "reloads100" in parts:
                reloads100_section(srv, args, old)
            if "loop-cpu" in parts:
                named = [("this tree", srv)]
                if old is not None:
                    named.append((f"@{args.compare}", old))
                loop_cpu_section(named, args.loop_reloads, args.loop_rounds)
            srv.stop()
        if "switches" in parts:
            switches_section(work, args.reloader_nice)
        if "swap" in parts:
            swap_section(work)
        if "upload" in parts:
            upload_section()
        if "reload-time" in parts:
            reload_time_section(work)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        for server in SERVERS:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def decide_section(srv: Server, load: Any, args: argparse.Namespace) -> None:
    import httpx

    ceiling = Baseline(httpx.post(srv.url + "/decide", content=BODY).content)
    load(ceiling, 16, 2.0)
    rows = []
    for c, rate in ((1, None), (64, None), (1000, None), (1000, args.rate)):
        r = load(srv, c, args.seconds, rate)
        b = load(ceiling, c, args.seconds, rate)
        rows.append([c, "as fast as answered" if rate is None else f"paced at {rate:,.0f}/s",
                     f"{r['rps']:,.0f}", f"{r['p50'] * 1e3:.2f} ms",
                     f"{r['p99'] * 1e3:.2f} ms", int(r["failed"]),
                     f"{b['rps']:,.0f} / {b['p99'] * 1e3:.2f} ms",
                     f"{r['rps'] / b['rps']:.2f}"])  # fmt: skip
    ceiling.stop()
    print("\n## POST /decide, one input per request (depth-12 example)\n")
    print(table(["connections", "load", "requests/s", "P50", "P99", "failed",
                 "bare uvicorn req/s / P99", "ratio req/s"], rows))  # fmt: skip
    sys.stdout.flush()


BURNER = """
import os, sys, time
seconds, niceness = float(sys.argv[1]), int(sys.argv[2])
os.nice(niceness)
while True:  # CPU-bound bursts, pure Python, like a gate run; a short pause between them
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(i * i for i in range(1000))
    time.sleep(0.001)
"""


def p99_during(
    server: Server, load: Any, args: argparse.Namespace, activity: Any, window: float | None = None
) -> dict:
    """The paced load at 1,000 connections for *window* seconds (default --window), first
    alone, then with *activity* (a callable taking a stop event) running from 0.5 s into the
    window (once wrk's connections are open) to its end: two windows of the same length, one
    P99 each."""
    conns = 1000
    window = args.window if window is None else window
    lag0, pre0 = lag_buckets(server), preemptions(server.proc.pid)
    base = load(server, conns, window, args.rate)
    lag1, pre1 = lag_buckets(server), preemptions(server.proc.pid)
    steps1 = step_buckets(server)
    stop = threading.Event()

    def run() -> None:
        if not stop.wait(0.5):
            activity(stop)

    t = threading.Thread(target=run)
    t.start()
    try:
        during = load(server, conns, window, args.rate)
    finally:
        stop.set()
        t.join()
    lag2, pre2 = lag_buckets(server), preemptions(server.proc.pid)
    steps2 = step_buckets(server)
    return {"before": base, "during": during, "lag before": lag_between(lag0, lag1),
            "lag during": lag_between(lag1, lag2), "preempted": (pre1 - pre0, pre2 - pre1),
            "steps": (steps1, steps2)}  # fmt: skip


def reloads_section(
    srv: Server, load: Any, args: argparse.Namespace, old: Server | None = None
) -> None:
    """P99 jitter: the paced load alone and while reloads run back to back, and the floor of
    any design: the bare uvicorn app while an unrelated CPU-bound process runs bursts as long
    as one reload (nice 0 and nice 19), several times, interleaved, in one run."""
    import httpx

    variant, example = variant_of_example(), EXAMPLE.read_bytes()
    quiet = []
    for i in range(10):  # the length of one reload with nothing else running
        status, secs, _ = reload(srv, variant if i % 2 == 0 else example)
        assert status == 200
        quiet.append(secs)
    burst = statistics.median(quiet)
    ceiling = Baseline(httpx.post(srv.url + "/decide", content=BODY).content)
    load(ceiling, 16, 2.0)
    statuses: list[int] = []
    reload_times: list[float] = []
    counts: list[int] = []
    client_cpu: list[float] = []

    def reloads(server: Server, stop: threading.Event) -> None:
        # the client's CPU priority (this thread only): a deploy pipeline runs elsewhere
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), args.reloader_nice)
        n = 0
        cpu = time.thread_time()
        while not stop.is_set():
            status, secs, _ = reload(server, variant if n % 2 == 0 else example)
            statuses.append(status)
            if server is srv:
                reload_times.append(secs)
            n += 1
        if n:
            client_cpu.append((time.thread_time() - cpu) / n)
        counts.append(n)

    def burner(niceness: int) -> Any:
        def run(stop: threading.Event) -> None:
            proc = subprocess.Popen([sys.executable, "-c", BURNER, str(burst), str(niceness)])
            stop.wait()
            proc.terminate()
            proc.wait()
            counts.append(0)

        return run

    cases = [
        ("clefprove serve", srv, lambda stop: reloads(srv, stop), "reloads back to back"),
        ("bare uvicorn", ceiling, burner(0), f"{burst * 1e3:.0f} ms CPU bursts, nice 0"),
        ("bare uvicorn", ceiling, burner(19), f"{burst * 1e3:.0f} ms CPU bursts, nice 19"),
    ]
    if old is not None:
        cases.append((f"clefprove serve @{args.compare}", old, lambda stop: reloads(old, stop),
                      "reloads back to back"))  # fmt: skip
    rows = []
    jitters: dict[str, list[float]] = {}
    preempted: list[list[Any]] = []
    steps_first: dict[str, dict[Any, float]] | None = None
    steps_last: dict[str, dict[Any, float]] | None = None
    for k in range(args.repeat):
        for server_name, server, activity, what in cases:
            r = p99_during(server, load, args, activity)
            if server is srv and r["steps"][0] is not None:
                # the steps' histogram moves only while reloads run: the windows' sum
                steps_first = steps_first or r["steps"][0]
                steps_last = r["steps"][1]
            alone, during_n = r["preempted"]
            preempted.append(
                [
                    k + 1,
                    server_name,
                    what,
                    alone,
                    during_n,
                    f"{(during_n - alone) / counts[-1]:.2f}" if counts[-1] else "",
                ]
            )
            before, during = r["before"], r["during"]
            jitter = during["p99"] - before["p99"]
            jitters.setdefault(f"{server_name}, {what}", []).append(jitter)
            rows.append([k + 1, server_name, what, counts[-1] or "",
                         f"{before['p99'] * 1e3:.2f} ms", f"{during['p99'] * 1e3:.2f} ms",
                         f"{jitter * 1e3:+.2f} ms", f"{during['rps']:,.0f}",
                         int(before["failed"] + during["failed"]),
                         f"{os.getloadavg()[0]:.2f}", r["lag before"],
                         r["lag during"]])  # fmt: skip
            print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    ceiling.stop()
    print(f"\n## P99 jitter at 1,000 connections paced at {args.rate:,.0f}/s "
          f"(two wrk runs of {args.window:g} s: alone, then with the activity)\n")  # fmt: skip
    print(table(["run", "server", "alongside", "reloads", "P99 alone", "P99 during", "jitter",
                 "requests/s during", "failed", "load avg", "loop lag max alone",
                 "loop lag max during"], rows))  # fmt: skip
    print("\n" + table(["case", "median jitter", "min", "max"],
                       [[name, f"{statistics.median(j) * 1e3:+.2f} ms",
                         f"{min(j) * 1e3:+.2f} ms", f"{max(j) * 1e3:+.2f} ms"]
                        for name, j in jitters.items()]))  # fmt: skip
    print(f"\nreload statuses: {sorted(set(statuses))} ({len(statuses)}); one reload alone: "
          f"median {burst * 1e3:.1f} ms; under load: median "
          f"{statistics.median(reload_times) * 1e3:.1f} ms, max "
          f"{max(reload_times) * 1e3:.1f} ms; the reload client's CPU: median "
          f"{statistics.median(client_cpu) * 1e3:.1f} ms per reload")  # fmt: skip
    print(
        "\n## The event loop switched out while it could run (involuntary context switches "
        "of the serving process's main thread, per window)\n"
    )
    print(table(["run", "server", "alongside", "alone", "during", "more per reload"],
                preempted))  # fmt: skip
    if steps_first is not None and steps_last is not None:
        print(
            "\n## The event loop's steps of an admission during the reload windows "
            "(this tree; clefprove_reload_loop_step_seconds, bucket bounds)\n"
        )
        print(table(["step", "count", "mean", "P99", "max", "over 1 ms"],
                    step_rows(steps_first, steps_last)))  # fmt: skip
    sys.stdout.flush()


UNSAFE = ROOT / "examples" / "edge-allow-block-1.0.0.clef"  # violates blocks_are_confident


def soak_sequence(n: int) -> list[tuple[bytes, int]]:
    """The issue's soak: *n* reloads alternating safe and unsafe models (the expected status
    of each: 200, 409); the safe ones alternate between the example and its variant, so that
    each of them swaps."""
    safe, unsafe = [EXAMPLE.read_bytes(), variant_of_example()], UNSAFE.read_bytes()
    return [(safe[(i // 2) % 2], 200) if i % 2 == 0 else (unsafe, 409) for i in range(n)]


def p99_span(server: Server, args: argparse.Namespace, activity: Any, limit: float) -> dict:
    """The paced load at 1,000 connections while *activity* (a callable taking a stop event,
    returning when it is done) runs from 0.5 s into the window (once wrk's connections are
    open): wrk is stopped as soon as it returns (at most *limit* seconds), so the window
    lasts exactly as long as the activity; then the same load for the same length alone."""
    conns, pid = 1000, server.proc.pid
    stop, done = threading.Event(), threading.Event()
    ran: list[float] = []

    def run() -> None:
        try:
            if not stop.wait(0.5):
                t = time.perf_counter()
                activity(stop)
                ran.append(time.perf_counter() - t)
        finally:
            done.set()

    pre0 = preemptions(pid)
    thread = threading.Thread(target=run)
    t0 = time.perf_counter()
    thread.start()
    try:
        during = run_wrk(server, conns, limit, args.rate, until=done)
    finally:
        stop.set()
        thread.join()
    window = time.perf_counter() - t0
    pre1 = preemptions(pid)
    alone = run_wrk(server, conns, window, args.rate, until=threading.Event())
    pre2 = preemptions(pid)
    return {"before": alone, "during": during, "window": window,
            "ran": ran[0] if ran else float("nan"),
            "preempted": (pre2 - pre1, pre1 - pre0)}  # fmt: skip


def reloads100_section(
    srv: Server, args: argparse.Namespace, old: Server | None = None, n: int = 100
) -> None:
    """Issue 14 as written: P99 jitter during exactly *n* consecutive reloads (each sent once
    the previous one answered; safe and unsafe alternating), back to back and at a deploy
    pipeline's cadence (``--cadence`` per second), over a wrk window exactly as long as the
    reloads (wrk stopped with SIGINT when the last one answered), against a window of the
    same length without reloads; the floor beside it, same run, same window length (this
    tree's): the bare uvicorn app beside a nice-19 CPU-bound process running bursts as long
    as one reload."""
    import httpx

    if not shutil.which("wrk"):
        print("\n(reloads100: needs wrk; skipped)")
        return
    sequence = soak_sequence(n)
    quiet = []
    for i in range(12):  # one reload alone
        data, want = sequence[i]
        status, secs, _ = reload(srv, data)
        assert status == want, status
        quiet.append(secs)
    one = statistics.median(quiet)
    cadences: list[tuple[str, float | None]] = [("back to back", None)]
    if args.cadence > 0:
        cadences.append((f"paced at {args.cadence:g}/s", 1.0 / args.cadence))
    ceiling = Baseline(httpx.post(srv.url + "/decide", content=BODY).content)
    run_wrk(ceiling, 16, 2.0)
    servers = [("clefprove serve", srv)]
    if old is not None:
        servers.append((f"clefprove serve @{args.compare}", old))
    rows: list[list[Any]] = []
    summary: dict[str, list[tuple[float, float]]] = {}
    limit = 600.0  # a window's bound: 100 reloads take seconds, minutes on a loaded machine
    for k in range(args.repeat):
        for cadence, period in cadences:
            floor_jitter = 0.0
            for name, server in servers:
                done: list[tuple[int, float]] = []  # (1 if the status was the expected one, s)

                def reloads(
                    stop: threading.Event,
                    server: Server = server,
                    done: list[tuple[int, float]] = done,
                    period: float | None = period,
                ) -> None:
                    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), args.reloader_nice)
                    t0 = time.perf_counter()
                    for i, (data, want) in enumerate(sequence):
                        if period is not None:  # a deploy pipeline's cadence
                            wait = t0 + i * period - time.perf_counter()
                            if wait > 0 and stop.wait(wait):
                                break
                        if stop.is_set():
                            break
                        status, secs, _ = reload(server, data)
                        done.append((int(status == want), secs))

                r = p99_span(server, args, reloads, limit)
                if server is srv:  # the floor: the same window length, right after

                    def burner(stop: threading.Event, seconds: float = r["ran"]) -> None:
                        proc = subprocess.Popen([sys.executable, "-c", BURNER, str(one), "19"])
                        stop.wait(seconds)
                        proc.terminate()
                        proc.wait()

                    f = p99_span(ceiling, args, burner, limit)
                    floor_jitter = f["during"]["p99"] - f["before"]["p99"]
                before, during = r["before"], r["during"]
                jitter = during["p99"] - before["p99"]
                alone_sw, during_sw = r["preempted"]
                ok = sum(g for g, _ in done)
                case = f"{name}, {cadence}"
                summary.setdefault(case, []).append((jitter, jitter - floor_jitter))
                rows.append([k + 1, name, cadence, f"{ok}/{len(done)}",
                             f"{r['ran']:.2f} s / {r['window']:.2f} s",
                             f"{before['p99'] * 1e3:.2f} ms", f"{during['p99'] * 1e3:.2f} ms",
                             f"{jitter * 1e3:+.2f} ms", f"{floor_jitter * 1e3:+.2f} ms",
                             f"{(jitter - floor_jitter) * 1e3:+.2f} ms",
                             int(before["failed"] + during["failed"]),
                             f"{(during_sw - alone_sw) / max(len(done), 1):.2f}",
                             f"{os.getloadavg()[0]:.2f}"])  # fmt: skip
                print(" | ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    ceiling.stop()
    print(f"\n## P99 jitter during {n} consecutive reloads (issue 14: safe and unsafe "
          f"alternating, each sent once the previous one answered; 1,000 connections paced "
          f"at {args.rate:,.0f}/s; a window as long as the reloads, against one as long "
          f"without; the floor: bare uvicorn beside a nice-19 burner, {one * 1e3:.0f} ms "
          f"bursts, same length, same run)\n")  # fmt: skip
    print(table(["run", "server", "reloads", "answered as expected", "reloads ran / window",
                 "P99 alone", "P99 during", "jitter", "floor jitter", "jitter - floor",
                 "failed", "loop switched out more per reload", "load avg"], rows))  # fmt: skip
    print("\n" + table(["case", "median jitter", "median jitter - floor", "min - floor",
                        "max - floor"],
                       [[case, f"{statistics.median(j for j, _ in v) * 1e3:+.2f} ms",
                         f"{statistics.median(f for _, f in v) * 1e3:+.2f} ms",
                         f"{min(f for _, f in v) * 1e3:+.2f} ms",
                         f"{max(f for _, f in v) * 1e3:+.2f} ms"]
                        for case, v in summary.items()]))  # fmt: skip
    sys.stdout.flush()


def _thread_ticks(pid: int) -> dict[int, int]:
    """CPU time (clock ticks, user + system) of every thread of process *pid*."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            f = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
            out[int(tid)] = int(f[11]) + int(f[12])
    return out


def loop_cpu_section(servers: list[tuple[str, Server]], n: int, rounds: int = 1) -> None:
    """The serving process's CPU time per reload (no other load from the benchmark): its
    main thread (the event loop: whatever it spends there, decisions wait for) and its other
    threads (executor helpers), from /proc; independent of how busy the machine is, unlike
    latency.  The loop's CPU while idle (its timers) is measured right after, for as long
    (at most 30 s), and taken off: under load 100 reloads take minutes."""
    variant, example = variant_of_example(), EXAMPLE.read_bytes()
    hz = os.sysconf("SC_CLK_TCK")
    rows = []
    extra = []
    steps: list[list[Any]] = []
    runs = [(f"{name}, round {r + 1}" if rounds > 1 else name, server)
            for r in range(rounds) for name, server in servers]  # fmt: skip
    for name, server in runs:  # interleaved: each round measures every server once
        pid = server.proc.pid
        for i in range(4):
            reload(server, variant if i % 2 == 0 else example)
        time.sleep(1.0)
        lag0, steps0, pre0 = lag_buckets(server), step_buckets(server), preemptions(pid)
        a = _thread_ticks(pid)
        t0 = time.perf_counter()
        for i in range(n):
            status, _, _ = reload(server, variant if i % 2 == 0 else example)
            assert status == 200
        time.sleep(2.0)  # the behaviour diffs after the last swaps
        b = _thread_ticks(pid)
        wall = time.perf_counter() - t0
        lag1, steps1, pre1 = lag_buckets(server), step_buckets(server), preemptions(pid)
        if steps0 is not None and steps1 is not None and not steps:
            steps = step_rows(steps0, steps1)
        # the same process idle (its timers: uvicorn's, the lag probe's), for as long, capped
        idle = min(wall, 30.0)
        time.sleep(idle)
        c = _thread_ticks(pid)
        idle_rate = (c[pid] - b[pid]) / hz / idle  # loop CPU seconds per second, idle
        main = (b[pid] - a.get(pid, 0)) / hz / n
        rest = sum(v - a.get(t, 0) for t, v in b.items() if t != pid) / hz / n
        net = main - idle_rate * wall / n
        rows.append([name, f"{main * 1e3:.2f} ms", f"{idle_rate * 1e3:.1f} ms/s",
                     f"{net * 1e3:.2f} ms", f"{rest * 1e3:.2f} ms", len(b) - 1,
                     lag_between(lag0, lag1)])  # fmt: skip
        extra.append([name, f"{(pre1 - pre0) / n:.2f}"])
    print(f"\n## CPU time of the serving process per reload ({n} reloads, clock tick "
          f"{1e3 / hz:.0f} ms, so +-{1e3 / hz / n:.2f} ms)\n")  # fmt: skip
    print(table(["server", "event-loop thread", "idle loop", "event-loop thread less idle",
                 "other threads", "threads besides the loop", "loop lag max"], rows))  # fmt: skip
    print("\n" + table(["server", "event loop switched out while it could run, per reload"],
                       extra))  # fmt: skip
    if steps:
        print(
            f"\n## The event loop's steps of an admission ({servers[0][0]}, these {n} "
            "reloads; clefprove_reload_loop_step_seconds, bucket bounds)\n"
        )
        print(table(["step", "count", "mean", "P99", "max", "over 1 ms"], steps))
    sys.stdout.flush()


TRACEFS = Path("/sys/kernel/tracing")


def switches_section(work: Path, niceness: int, n: int = 200) -> None:
    """Who runs when the event loop is switched out while it could run, during *n* reloads
    back to back (no other load from the benchmark): the kernel's ``sched_switch`` events of
    the loop thread (tracefs, so root only), the next task named: the gate worker, the diff
    worker, the reload client (a thread of this process at *niceness*), or another."""
    switch = TRACEFS / "events" / "sched" / "sched_switch"
    if not os.access(switch / "enable", os.W_OK):
        print(f"\n(switches: needs root and tracefs at {TRACEFS}; skipped)")
        return
    srv = Server(EXAMPLE, work, "--cache", str(work / "cache-sw"), "--store", str(work / "s-sw"))
    variant, example = variant_of_example(), EXAMPLE.read_bytes()
    for i in range(4):  # the diff worker starts with the first diff
        reload(srv, variant if i % 2 == 0 else example)
    time.sleep(1.0)
    pid = srv.proc.pid
    workers = sorted(
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and _parent(int(entry)) == pid and b"spawn_main" in _cmdline(entry)
    )
    names: dict[int, str] = {}
    for k, w in enumerate(workers[:2]):  # started in this order
        names[w] = ("gate worker", "diff worker")[k]

    def put(name: str, value: str) -> None:
        (TRACEFS / name).write_text(value)

    put("tracing_on", "0")
    put("trace", "")
    put("buffer_size_kb", "8192")
    (switch / "filter").write_text(f"prev_pid == {pid}")
    (switch / "enable").write_text("1")
    statuses: list[int] = []

    def reloads() -> None:
        names[threading.get_native_id()] = "reload client"
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
        for i in range(n):
            statuses.append(reload(srv, variant if i % 2 == 0 else example)[0])

    put("tracing_on", "1")
    try:
        t = threading.Thread(target=reloads)
        t.start()
        t.join()
        time.sleep(0.5)
    finally:
        put("tracing_on", "0")
        (switch / "enable").write_text("0")
        (switch / "filter").write_text("0")
    counts: dict[str, int] = {}
    total = 0
    with open(TRACEFS / "trace") as fh:
        for line in fh:
            m = re.search(r"prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)", line)
            if m and m.group(1).startswith("R"):  # switched out while runnable
                total += 1
                name = names.get(int(m.group(3)), f"other: {m.group(2)}")
                counts[name] = counts.get(name, 0) + 1
    put("trace", "")
    srv.stop()
    assert statuses == [200] * n, sorted(set(statuses))
    print(f"\n## Who ran when the event loop was switched out while it could run ({n} reloads "
          f"back to back, the client at nice {niceness}, sched_switch; {total} "
          "switches)\n")  # fmt: skip
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:8]
    print(table(["next task", "switches", "per reload"],
                [[k, v, f"{v / n:.2f}"] for k, v in top]))  # fmt: skip
    sys.stdout.flush()


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def swap_section(work: Path, repeat: int = 200) -> None:
    """The event loop's share of one admitted reload, in process (no server, no load): what
    the serving process runs on its loop once the gate worker has answered.  This tree:
    copy the worker's frame into a fresh buffer (as ``recv_into`` does), hash its own bytes
    (up to 256 KiB: above, a thread does), decode the frame, build the model from those bytes
    (``load_admitted``: views) and the evaluator from the frame's raw tables (or, from 4 MiB
    of tables, from the file the worker wrote them to, mapped), then the served model (metric
    children, the walk's lists, or memoryviews above 32,768 nodes); before (ef8581b's path,
    emulated with this tree's objects): the worker's pickle copied into a fresh buffer,
    unpickled (the model and its evaluator, with the walk's lists of a small model), a large
    model's lists built, and
    the served model; and, for scale, everything on the loop (validate, derive, serve)."""
    import hashlib
    import pickle

    from clefprove.app.admission import (
        GateSettings,
        admit_file,
        received_admission,
        ship_admission,
    )  # fmt: skip
    from clefprove.app.metrics import Metrics
    from clefprove.app.prepared import prepare
    from clefprove.app.served import serve_model
    from clefprove.app.service import HASH_INLINE
    from clefprove.app.store import ModelStore
    from clefprove.app.worker import decode, encode
    from clefprove.model.clef import load_bytes

    inv = work / "true.inv"
    inv.write_text("invariant trivially:\n  ensure true\n")
    settings = GateSettings((str(inv),), None, None, 50_000_000, 1, 3)
    metrics = Metrics()
    rows = []
    for name, data in (("depth-12 example (1,201 nodes)", EXAMPLE.read_bytes()),
                       ("synthetic complete tree (131,071 nodes)", big_model())):  # fmt: skip
        store = ModelStore(work / "swap-store")
        shipped, parts = ship_admission(settings, str(store.directory), "bench", "upload",
                                        memoryview(data))  # fmt: skip
        frame = b"".join(bytes(p) for p in encode(shipped, parts))
        staged = store.stage(data)
        before = admit_file(str(staged), settings, str(store.directory), "bench", "upload")
        small = before.model.n_nodes <= 32768
        if small:  # ef8581b's worker built the walk's lists of a small model, pickled them
            before.evaluator._lists()
        pickled = pickle.dumps(before)
        n = repeat if len(data) < 1 << 20 else max(repeat // 20, 5)

        inline = len(data) <= HASH_INLINE  # above, the service hashes in a thread
        digest0 = hashlib.sha256(data).hexdigest()

        def new_path(data: bytes = data, frame: bytes = frame, inline: bool = inline,
                     digest0: str = digest0) -> None:  # fmt: skip
            digest = hashlib.sha256(data).hexdigest() if inline else digest0
            payload = bytearray(len(frame) - 12)  # as the loop receives it (recv_into)
            payload[:] = memoryview(frame)[12:]
            meta, raw = decode(payload, int.from_bytes(frame[8:12], "little"))
            adm = received_admission(meta, raw, data, digest, "upload")
            serve_model(adm.model, adm.verdict, "upload", adm.when, metrics, adm.evaluator)

        def old_path(pickled: bytes = pickled, small: bool = small) -> None:
            received = bytearray(len(pickled))  # as its helper thread received it
            received[:] = pickled
            adm = pickle.loads(received)
            if not small:  # ef8581b built a large model's lists on the loop
                adm.evaluator._lists()
            serve_model(adm.model, adm.verdict, "upload", adm.when, metrics, adm.evaluator)

        def all_on_loop(data: bytes = data, shipped: Any = shipped) -> None:
            model = load_bytes(data, "upload")
            serve_model(model, shipped.verdict, "upload", "", metrics, prepare(model))

        times = {}
        for label, fn in (("new", new_path), ("old", old_path), ("all", all_on_loop)):
            fn()
            runs = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                runs.append(time.perf_counter() - t0)
            times[label] = statistics.median(runs)
        rows.append([name, f"{len(frame):,} bytes", f"{times['new'] * 1e6:,.0f} µs",
                     f"{len(pickled):,} bytes", f"{times['old'] * 1e6:,.0f} µs",
                     f"{times['new'] / times['old']:.3g}",
                     f"{times['all'] * 1e6:,.0f} µs"])  # fmt: skip
    print("\n## The event loop's share of one admitted reload, in process (medians)\n")
    print(table(["model", "frame", "this tree: frame to served", "pickle",
                 "before: unpickle to served", "ratio", "all on the loop"], rows))  # fmt: skip
    sys.stdout.flush()


def upload_section(repeat: int = 200) -> None:
    """Receiving an upload in the serving process (Python side only; httptools parses in C):
    the body as uvicorn hands it over (64 KiB messages), read by this tree's ``_read_body``,
    by Starlette's ``request.body()``, and into one bytearray; and the multipart parse (in
    the gate worker since jitter4: ``model_from_multipart``, not on the loop)."""
    from starlette.requests import Request

    from clefprove.app.admission import model_from_multipart
    from clefprove.app.service import _read_body

    async def measure(data: bytes, how: str, multipart: bool) -> float:
        boundary = "bench-boundary-1234"
        body = data
        headers = [(b"content-length", str(len(data)).encode())]
        if multipart:
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"; "
                    f"filename=\"m.clef\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()  # fmt: skip
            headers = [(b"content-type", f"multipart/form-data; boundary={boundary}".encode()),
                       (b"content-length", str(len(body)).encode())]  # fmt: skip
        step = 65536
        chunks = [body[i : i + step] for i in range(0, len(body), step)]
        runs = []
        for _ in range(repeat if len(data) < 1 << 20 else max(repeat // 10, 5)):
            queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
                     for i, c in enumerate(chunks)]  # fmt: skip

            async def receive(q: list = queue) -> dict:
                return q.pop(0)

            scope = {"type": "http", "method": "POST", "path": "/reload", "headers": headers,
                     "query_string": b""}  # fmt: skip
            request = Request(scope, receive)
            t0 = time.perf_counter()
            if how == "stream":
                got = await _read_body(request, 256 << 20)
            elif how == "body":
                got = await request.body()
            else:
                buf = bytearray()
                async for c in request.stream():
                    buf += c
                got = bytes(buf)
            if multipart:
                ctype = dict(headers)[b"content-type"].decode()  # the gate worker parses it now
                at, size = await asyncio.to_thread(model_from_multipart, got, ctype, 256 << 20)
                got = got[at : at + size]
            runs.append(time.perf_counter() - t0)
            assert got == data
        return statistics.median(runs)

    rows = []
    for name, data in (("30 KB (depth-12 example)", EXAMPLE.read_bytes()),
                       ("3 MB (131,071 nodes)", big_model())):  # fmt: skip
        row = [name]
        for how in ("stream", "body", "bytearray"):
            row.append(f"{asyncio.run(measure(data, how, False)) * 1e6:,.0f} µs")
        row.append(f"{asyncio.run(measure(data, 'stream', True)) * 1e6:,.0f} µs")
        rows.append(row)
    print("\n## Receiving an upload, Python side (medians)\n")
    print(table(["body", "this tree (_read_body)", "request.body()", "into a bytearray",
                 "multipart form (_read_body + parse)"], rows))  # fmt: skip
    sys.stdout.flush()


def reload_time_section(work: Path) -> None:
    """Reload round trips with no other load: cold (no cache) and with the proof cache."""
    rows = []
    models = (
        ("depth-12 example (1,201 nodes)", EXAMPLE.read_bytes(), variant_of_example()),
        ("synthetic complete tree (131,071 nodes)", big_model(), big_model(update=True)),
    )
    for k, (name, first_bytes, update) in enumerate(models):
        first = work / f"first-{k}.clef"
        first.write_bytes(first_bytes)
        cold = Server(first, work, "--no-cache", "--store", str(work / f"cold-{k}"))
        cold_times, cold_checks = [], []
        for d in (update, first_bytes, update):
            status, secs, body = reload(cold, d)
            assert status == 200, body
            cold_times.append(secs)
            cold_checks.append(body["summary"]["seconds"])
        cold.stop()
        warm = Server(first, work, "--cache", str(work / f"cache-{k}"),
                      "--store", str(work / f"warm-{k}"))  # fmt: skip
        reload(warm, update)  # the first reload of the update fills the cache for it
        warm_times, warm_checks = [], []
        for d in (first_bytes, update) * 3:
            status, secs, body = reload(warm, d)
            assert status == 200, body
            warm_times.append(secs)
            warm_checks.append(body["summary"]["seconds"])
        warm.stop()
        rows.append([name, f"{statistics.median(cold_times) * 1e3:.1f} ms",
                     f"{statistics.median(cold_checks) * 1e3:.1f} ms",
                     f"{statistics.median(warm_times) * 1e3:.1f} ms",
                     f"{statistics.median(warm_checks) * 1e3:.1f} ms",
                     f"{len(update):,} bytes"])  # fmt: skip
    print("\n## POST /reload round trip, no other load (medians)\n")
    print(table(["model", "cold (--no-cache)", "its check", "with the proof cache",
                 "its check", "file"], rows))  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
