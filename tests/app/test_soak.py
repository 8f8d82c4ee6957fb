"""Soak: clients decide continuously while reloads alternate between safe and unsafe models."""

from __future__ import annotations

import threading
from collections import Counter

import httpx
import pytest

from clefprove.model.clef import load
from tests.app.conftest import (
    INVARIANTS,
    SAFE,
    UNSAFE,
    all_block_source,
    auth,
    compiled,
    token_file,
)

RELOADS = 100
CLIENTS = 4


@pytest.mark.slow
def test_no_request_fails_and_no_unsafe_model_answers_during_reloads(serve, tmp_path) -> None:
    other = compiled(tmp_path, "block.clef", all_block_source())
    safe = [SAFE.read_bytes(), other.read_bytes()]
    admitted = {load(SAFE).sha256, load(other).sha256}
    unsafe_sha = load(UNSAFE).sha256
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path))

    stop = threading.Event()
    seen: Counter[str] = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        body = [{"client_rtt_ms": 50 + k}, {"ua_family": "curl", "path_depth": 9}]
        with httpx.Client(base_url=srv.url, timeout=30.0) as c:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    r = c.post("/decide", json=body[n % 2] if n % 3 else body)
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(repr(exc))
                    continue
                with lock:
                    if r.status_code != 200:
                        failures.append(f"{r.status_code} {r.text}")
                        continue
                    got = r.json()
                    for d in got if isinstance(got, list) else [got]:
                        seen[d["model"]["sha256"]] += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    statuses: Counter[int] = Counter()
    try:
        with srv.client() as c:
            for i in range(RELOADS):
                data = safe[(i // 2) % 2] if i % 2 == 0 else UNSAFE.read_bytes()
                r = c.post("/reload", content=data, headers=auth())
                statuses[r.status_code] += 1
                assert r.status_code == (200 if i % 2 == 0 else 409), r.text
                assert c.get("/model").json()["sha256"] in admitted
            # two reloads at once: serialised, both answered in full
            answers: list[int] = []

            def reload_once(data: bytes) -> None:
                with srv.client() as c2:
                    answers.append(c2.post("/reload", content=data, headers=auth()).status_code)

            pair = [threading.Thread(target=reload_once, args=(d,)) for d in safe]
            for t in pair:
                t.start()
            for t in pair:
                t.join(timeout=120)
            assert sorted(answers) == [200, 200]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    assert statuses == {200: RELOADS // 2, 409: RELOADS // 2}
    assert set(seen) <= admitted and unsafe_sha not in seen
    assert sum(seen.values()) > 100
