"""The decision service under load: ``clefprove serve`` as a real process, a real load generator.

Measured, in one run, against one server on the depth-12 example (examples/edge-allow-block.clef):

* requests/s, P50 and P99 latency of ``POST /decide`` (one input per request) at 1, 64 and
  1,000 connections, each connection sending its next request as soon as it has its answer
  (closed loop: the service's capacity; latency is then mostly queueing), and at 1,000
  connections paced to ``--rate`` requests/s in all (2,600: the Clef runtime's figure);
* the paced load at 1,000 connections while 100 reloads run back to back (alternating between
  the example and a copy with one leaf's confidence changed, so every reload swaps), and the
  P99 jitter: P99 during the reloads minus P99 of the run just before;
* reload time as a deploy pipeline sees it (the round trip of ``POST /reload``): the depth-12
  example cold (a server started with ``--no-cache``) and with the proof cache, and the same for
  a synthetic 131,071-node model (a complete depth-16 tree that never allows).

The load generator is ``wrk`` (Debian package ``wrk``) when it is on PATH, else a Python
asyncio client (HTTP/1.1 keep-alive, one request in flight per connection; it competes with the
server for the CPU, so its figures are lower bounds).

    python bench/bench_serve.py [--seconds 10] [--reloads 100] [--client auto|wrk|python]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import re
import resource
import shutil
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
    def __init__(self, model: Path, workdir: Path, *extra: str) -> None:
        SERVERS.append(self)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CLEFPROVE_RELOAD_TOKEN": TOKEN}
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


def reload(server: Server, data: bytes) -> tuple[int, float, dict[str, Any]]:
    """POST /reload with *data*: status, round-trip seconds, JSON answer."""
    import httpx

    t0 = time.perf_counter()
    r = httpx.post(
        server.url + "/reload",
        content=data,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=600,
    )
    return r.status_code, time.perf_counter() - t0, r.json()


# ---------------------------------------------------------------------- load generators
def run_wrk(
    server: Server, connections: int, seconds: float, rate: float | None = None
) -> dict[str, float]:
    """wrk on POST /decide; *rate* (requests/s in all) paces every connection (Lua delay())."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(BODY)}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
        if rate is not None:
            fh.write(f"function delay() return {connections * 1000.0 / rate:.3f} end\n")
        script = fh.name
    try:
        out = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--latency",
                "--timeout",
                "10s",
                "-s",
                script,
                server.url + "/decide",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(script)
    lat = {p: _unit(v) for p, v in re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M)}
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
                if rate is not None:
                    await asyncio.sleep(connections / rate)
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


def big_model(depth: int = 16, seed: int = 0) -> bytes:
    """A complete tree of *depth* (2**(depth+1)-1 nodes) on the example's features that never
    allows (so every invariant of invariants/ holds, and each leaf must be shown to)."""
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
    src["name"], src["version"] = "edge-big", f"{depth}.{seed}"
    src["tree"] = node(0, copy.deepcopy(box))
    return write_clef(compile_source(src, origin="big"))


# ---------------------------------------------------------------------- the run
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reloads", type=int, default=100)
    ap.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    ap.add_argument("--rate", type=float, default=2600.0, help="paced load, requests/s")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    use_wrk = args.client == "wrk" or (args.client == "auto" and shutil.which("wrk"))
    load = run_wrk if use_wrk else run_python
    print(f"# {machine()}; load generator: {'wrk' if use_wrk else 'python asyncio'}; "
          f"load average before: {os.getloadavg()[0]:.2f}")  # fmt: skip

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    variant = variant_of_example()
    example = EXAMPLE.read_bytes()
    try:
        # --- throughput and latency
        srv = Server(EXAMPLE, work, "--cache", str(work / "cache"), "--store", str(work / "s"))
        rows = []
        load(srv, 16, 2.0)  # warm-up
        for c, rate in ((1, None), (64, None), (1000, None), (1000, args.rate)):
            r = load(srv, c, args.seconds, rate)
            rows.append([c, "as fast as answered" if rate is None else f"paced at {rate:,.0f}/s",
                         f"{r['rps']:,.0f}", f"{r['p50'] * 1e3:.2f} ms",
                         f"{r['p99'] * 1e3:.2f} ms", int(r["failed"])])  # fmt: skip
        # --- during reloads: baseline then the same load while reloading back to back
        conns = 1000
        base = load(srv, conns, args.seconds, args.rate)
        statuses: list[int] = []
        reload_times: list[float] = []
        done = threading.Event()

        def reloader() -> None:
            for i in range(args.reloads):
                status, secs, _ = reload(srv, variant if i % 2 == 0 else example)
                statuses.append(status)
                reload_times.append(secs)
            done.set()

        result: dict[str, Any] = {}
        t = threading.Thread(target=reloader)
        t.start()
        while not done.is_set():  # keep the load on for as long as the reloads take
            part = load(srv, conns, min(args.seconds, 5.0), args.rate)
            result.setdefault("parts", []).append(part)
        t.join()
        srv.stop()
        parts = result["parts"]
        during = {
            "rps": statistics.mean(p["rps"] for p in parts),
            "p50": max(p["p50"] for p in parts),
            "p99": max(p["p99"] for p in parts),
            "failed": sum(p["failed"] for p in parts),
        }
        print("\n## POST /decide, one input per request (depth-12 example)\n")
        print(table(["connections", "load", "requests/s", "P50", "P99", "failed"], rows))
        print(f"\n## {args.reloads} reloads under load ({conns} connections, "
              f"paced at {args.rate:,.0f}/s)\n")  # fmt: skip
        print(table(
            ["run", "requests/s", "P50", "P99", "failed"],
            [["before", f"{base['rps']:,.0f}", f"{base['p50'] * 1e3:.2f} ms",
              f"{base['p99'] * 1e3:.2f} ms", int(base["failed"])],
             ["during reloads (worst part)", f"{during['rps']:,.0f}",
              f"{during['p50'] * 1e3:.2f} ms", f"{during['p99'] * 1e3:.2f} ms",
              int(during["failed"])]],
        ))  # fmt: skip
        print(f"\nP99 jitter: {(during['p99'] - base['p99']) * 1e3:+.2f} ms; reload statuses: "
              f"{sorted(set(statuses))} ({len(statuses)}); reload round trip under load: median "
              f"{statistics.median(reload_times) * 1e3:.1f} ms, max "
              f"{max(reload_times) * 1e3:.1f} ms")  # fmt: skip

        # --- reload times, no other load
        big = big_model()
        big2 = big_model(seed=1)
        rows = []
        for name, first, data, other in (
            ("depth-12 example (1,201 nodes)", EXAMPLE, variant, example),
            ("synthetic complete tree (131,071 nodes)", None, big, big2),
        ):
            if first is None:
                first = work / "big.clef"
                first.write_bytes(big2)
            cold = Server(first, work, "--no-cache", "--store", str(work / "cold"))
            times = [reload(cold, d)[1] for d in (data, other, data)]
            cold.stop()
            cache = work / f"cache-{len(rows)}"
            warm = Server(first, work, "--cache", str(cache), "--store", str(work / "warm"))
            reload(warm, data)  # fills the cache for the second model too
            warm_times = []
            for d in (other, data) * 3:
                status, secs, body = reload(warm, d)
                assert status == 200, body
                warm_times.append(secs)
            warm.stop()
            rows.append([name, f"{statistics.median(times) * 1e3:.1f} ms",
                         f"{statistics.median(warm_times) * 1e3:.1f} ms",
                         f"{len(data):,} bytes"])  # fmt: skip
        print("\n## POST /reload round trip (gate in the worker, diff, store, swap)\n")
        print(table(["model", "cold (--no-cache)", "with the proof cache", "file"], rows))
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        for server in SERVERS:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
