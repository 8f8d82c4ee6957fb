"""A real ``clefprove serve`` process on a free loopback port, and models to hand it."""

from __future__ import annotations

import copy
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from clefprove.model.clef import write_clef
from clefprove.model.source import compile_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
INVARIANTS = ROOT / "invariants"
SAFE = EXAMPLES / "edge-allow-block.clef"  # passes invariants/
UNSAFE = EXAMPLES / "edge-allow-block-1.0.0.clef"  # violates blocks_are_confident
TOKEN = "s3cret-reload-token"
START_TIMEOUT = 60.0
#: A bound on one admission's round trip in tests: far above what one takes (well under a
#: second), for a machine loaded by other work, where a gate worker at nice 19 waits its turn.
RELOAD_TIMEOUT = 180.0
LISTENING = re.compile(r"listening on (http://\S+)")


class Server:
    """``clefprove serve`` as a subprocess; stderr is collected line by line."""

    def __init__(self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        # a proof cache of its own: the session's shared one is for the CLI tests' runs
        cache = str(cwd / ".proof-cache")
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), "CLEFPROVE_CACHE": cache, **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clefprove", "serve", *args, "--addr", "127.0.0.1:0"],
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stderr, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stdout, False), daemon=True).start()
        self.url = ""

    def _pump(self, stream, is_err: bool) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            (self.stderr if is_err else self.stdout).append(line)
            if is_err:
                self.lines.put(line)

    def wait_line(self, pattern: str, timeout: float = START_TIMEOUT) -> str:
        """The next stderr line matching *pattern* (fails the test after *timeout* s)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r}; stderr: {self.stderr}")
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"server exited; stderr: {self.stderr}") from None
                continue
            if re.search(pattern, line):
                return line

    def start(self) -> Server:
        m = LISTENING.search(self.wait_line(LISTENING.pattern))
        assert m
        self.url = m.group(1)
        return self

    def client(self, timeout: float = 30.0, **kw: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout, **kw)  # type: ignore[arg-type]

    def sha(self) -> str:
        with self.client() as c:
            return c.get("/model").json()["sha256"]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """``serve(*args, env=...)`` starts a server in *tmp_path*; all are stopped at the end."""
    servers: list[Server] = []

    def start(*args: str, env: dict[str, str] | None = None, wait: bool = True) -> Server:
        s = Server([str(a) for a in args], tmp_path, env)
        servers.append(s)
        return s.start() if wait else s

    yield start
    for s in servers:
        s.stop()


def compiled(tmp_path: Path, name: str, source: dict) -> Path:
    path = tmp_path / name
    path.write_bytes(write_clef(compile_source(copy.deepcopy(source), origin=name)))
    return path


def edge_source() -> dict:
    return json.loads((EXAMPLES / "spec-toy.json").read_text())


def all_block_source(version: str = "2.0.0") -> dict:
    """A model that blocks every input confidently: every invariant of invariants/ holds."""
    src = edge_source()
    src["version"] = version
    src["tree"] = {
        "feature": "client_rtt_ms",
        "threshold": 300.0,
        "left": {"action": "block", "confidence": 0.9},
        "right": {"action": "block", "confidence": 0.95},
    }
    return src


def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}
