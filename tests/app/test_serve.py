"""``clefprove serve`` end to end: a real server process, real HTTP (SPEC §6)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clefprove.model.clef import load
from tests.app.conftest import (
    INVARIANTS,
    RELOAD_TIMEOUT,
    ROOT,
    SAFE,
    TOKEN,
    UNSAFE,
    all_block_source,
    auth,
    compiled,
    token_file,
)

INPUTS = [
    {},  # every default
    {"client_rtt_ms": 400, "ua_family": "curl", "path_depth": 5},
    {"client_rtt_ms": 1e9, "path_depth": -3},  # both clipped
    {"tls_version": 771.0, "is_tor": True, "referer_entropy": 7.5},
    {"ua_family": "Safari", "client_rtt_ms": 299.99},
]
BAD = [
    {"client_rt_ms": 3},  # unknown feature
    {"tls_version": 771.5},  # not a whole number
    {"ua_family": "lynx"},  # not in the vocabulary
    {"is_tor": 1},  # not a boolean
]


def _eval_lines(lines: list[str]) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "clefprove", "eval", str(SAFE)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def _metrics(client) -> dict[tuple[str, tuple], float]:  # type: ignore[no-untyped-def]
    text = client.get("/metrics").text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_decisions_equal_clefprove_eval(serve, tmp_path) -> None:
    srv = serve(SAFE, INVARIANTS)
    lines = [json.dumps(r) for r in INPUTS + BAD] + ['{"is_tor": true, "is_tor": false}', "[1"]
    expected = _eval_lines(lines)
    assert len(expected) == len(lines)
    with srv.client() as c:
        model = c.get("/model").json()
        for line, want in zip(lines, expected, strict=True):
            r = c.post("/decide", content=line)
            if "error" in want:
                assert r.status_code == 400, line
                # eval says "line N: <reason>"; the service the reason alone, on one line
                assert r.json() == {"error": want["error"].split(": ", 1)[1]}
                assert "\n" not in r.text.rstrip("\n")
            else:
                assert r.status_code == 200, line
                got = r.json()
                assert got.pop("model") == {
                    "name": model["name"], "version": model["version"], "sha256": model["sha256"]
                }  # fmt: skip
                assert got == want
        # a batch answers one element per input, in order; also through the vectorised path
        for batch in (INPUTS, INPUTS * 10):
            r = c.post("/decide", json=batch)
            assert r.status_code == 200
            good = [e for e in expected if "error" not in e]
            assert [{k: v for k, v in d.items() if k != "model"} for d in r.json()] == good * (
                len(batch) // len(INPUTS)
            )
        r = c.post("/decide", json=[INPUTS[0], BAD[0]])
        assert r.status_code == 400 and r.json()["error"].startswith("input 1: unknown feature")
        assert c.post("/decide", content=b"3").status_code == 400
        assert c.post("/decide", content=b"\xff").json() == {"error": "not valid UTF-8"}


def test_metrics_count_what_was_sent(serve) -> None:
    srv = serve(SAFE, INVARIANTS)
    with srv.client() as c:
        sent = INPUTS * 3
        for rec in sent:
            assert c.post("/decide", json=rec).status_code == 200
        assert c.post("/decide", json=INPUTS).status_code == 200
        for rec in BAD:
            assert c.post("/decide", json=rec).status_code == 400
        actions = [c.post("/decide", json=r).json()["action"] for r in INPUTS]  # 5 more
        m = _metrics(c)
    n = len(sent) + 2 * len(INPUTS)
    by_action = {a: actions.count(a) * (n // len(INPUTS)) for a in set(actions)}
    for action in ("allow", "challenge", "rate_limit", "block"):
        assert m[("clefprove_decisions_total", (("action", action),))] == by_action.get(action, 0)
    assert m[("clefprove_input_errors_total", ())] == len(BAD)
    # INPUTS[2] clips client_rtt_ms and path_depth; it was sent 5 times in all
    oob = {f: m[("clefprove_feature_out_of_bounds_total", (("feature", f),))]
           for f in ("client_rtt_ms", "path_depth", "tls_version", "referer_entropy")}  # fmt: skip
    assert oob == {"client_rtt_ms": 5, "path_depth": 5, "tls_version": 0, "referer_entropy": 0}
    assert m[("clefprove_decision_seconds_count", ())] == len(sent) + 1 + len(INPUTS)
    info = [k for k in m if k[0] == "clefprove_model_info"]
    assert len(info) == 1 and dict(info[0][1])["sha256"] == srv.sha()
    for result in ("accepted", "refused", "invalid", "unauthorized"):
        assert m[("clefprove_reloads_total", (("result", result),))] == 0


def test_every_refused_reload_keeps_the_served_model(serve, tmp_path) -> None:
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path))
    served = srv.sha()
    good = SAFE.read_bytes()
    corrupted = bytearray(good)
    corrupted[len(good) // 2] ^= 0x40
    json_source = (ROOT / "examples" / "edge-allow-block.json").read_bytes()  # "renamed .clef"
    cases = [
        ({"Authorization": "Bearer wrong"}, good, 401, "unauthorized"),
        ({}, good, 401, "unauthorized"),
        (
            {"Authorization": "Basic " + base64.b64encode(f"u:{TOKEN}".encode()).decode()},
            good,
            401,
            "unauthorized",
        ),
        (auth(), bytes(corrupted), 400, "invalid"),
        (auth(), good[:100], 400, "invalid"),
        (auth(), b"", 400, "invalid"),
        (auth(), json_source, 400, "invalid"),
        (auth(), UNSAFE.read_bytes(), 409, "refused"),
        (auth(), _renamed_feature(tmp_path).read_bytes(), 409, "refused"),
    ]
    with srv.client() as c:
        for headers, body, status, _ in cases:
            r = c.post("/reload", content=body, headers=headers)
            assert r.status_code == status, (status, r.text)
            assert srv.sha() == served
            assert c.post("/decide", json={}).json()["model"]["sha256"] == served
        r = c.post("/reload", content=UNSAFE.read_bytes(), headers=auth())
        report = r.json()
        assert report["summary"]["violated"] == 1
        bad = [x for x in report["results"] if x["status"] == "violated"]
        assert [x["invariant"] for x in bad] == ["blocks_are_confident"]
        assert bad[0]["counterexamples"]  # the input that shows it
        # multipart with the wrong field name, or the model as a text field
        r = c.post("/reload", files={"file": ("m.clef", good)}, headers=auth())
        assert r.status_code == 400 and "'model'" in r.json()["error"]
        m = _metrics(c)
        assert not (tmp_path / ".clefprove-store" / f"{report['model']['sha256']}.clef").exists()
    want = {"unauthorized": 3, "invalid": 5, "refused": 3, "accepted": 0}
    for result, n in want.items():
        assert m[("clefprove_reloads_total", (("result", result),))] == n, result
    assert TOKEN not in "".join(srv.stderr) + "".join(srv.stdout)


def _renamed_feature(tmp_path: Path) -> Path:
    """A valid .clef whose features the invariants do not fit (``client_rtt_ms`` renamed)."""
    src = all_block_source()
    src["features"][0]["name"] = "rtt_ms"
    src["tree"]["feature"] = "rtt_ms"
    return compiled(tmp_path, "renamed.clef", src)


def test_a_valid_model_the_invariants_do_not_fit_is_refused_409(serve, tmp_path) -> None:
    """Not a bad file (400): a valid .clef the gate cannot prove the invariants on, because
    they name a feature it lacks, is refused like an unproved one, with the reason."""
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path))
    served = srv.sha()
    with srv.client() as c:
        r = c.post("/reload", content=_renamed_feature(tmp_path).read_bytes(), headers=auth())
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert "unknown feature 'client_rtt_ms'" in error and "\n" not in error
        assert c.post("/decide", json={}).json()["model"]["sha256"] == served


def test_accepted_reload_swaps_stores_and_rolls_back(serve, tmp_path) -> None:
    other = compiled(tmp_path, "block.clef", all_block_source())
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path), "--access-log")
    first = srv.sha()
    with srv.client(timeout=RELOAD_TIMEOUT) as c:  # bounded, for a machine under load
        assert c.post("/rollback", headers=auth()).status_code == 409  # nothing to go back to
        r = c.post("/reload", files={"model": ("block.clef", other.read_bytes())}, headers=auth())
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["summary"]["holds"] == 5 and report["model"]["path"] == "upload"
        new = report["model"]["sha256"]
        diff = _wait_for_diff(c)  # the behaviour diff from the model replaced, after the swap
        assert srv.sha() == new != first
        assert c.post("/decide", json={}).json()["action"] == "block"
        store = tmp_path / ".clefprove-store"
        assert (store / f"{new}.clef").read_bytes() == other.read_bytes()
        kept = json.loads((store / f"{new}.json").read_text())
        assert kept["summary"] == report["summary"] and kept["origin"] == "upload"
        assert diff["from"] == first and diff["semantic"]["share_changed"] > 0
        assert kept["diff"] == diff
        assert (store / f"{first}.clef").read_bytes() == SAFE.read_bytes()
        described = c.get("/model").json()
        assert described["history"] == [first, new]
        assert {i["invariant"] for i in described["invariants"]} == {
            "slow_legacy_tls_never_allowed", "scripted_clients_face_friction",
            "blocks_are_confident", "tor_never_allowed_when_deep", "weighted_risk_linear",
        }  # fmt: skip
        assert all(len(i["digest"]) == 64 and i["status"] == "holds"
                   for i in described["invariants"])  # fmt: skip
        r = c.post("/rollback", headers=auth())
        assert r.status_code == 200 and srv.sha() == first
        assert c.get("/model").json()["history"] == [first]
        # the loop's steps of each admission: the upload's and the rollback's (a swap each;
        # only the upload has a body to receive and an answer timed as it is written)
        steps = {
            dict(k[1])["step"]: v
            for k, v in _metrics(c).items()
            if k[0] == "clefprove_reload_loop_step_seconds_count"
        }
        assert steps["swap"] == steps["release"] == steps["rebuild"] == steps["send"] == 2
        assert steps["receive"] == steps["write"] == steps["answer"] == 1
        assert steps["diff"] >= 1  # the first reload's diff; the rollback's may still run
        assert c.post("/rollback", headers={"Authorization": "Bearer x"}).status_code == 401
    want = {"method": "POST", "path": "/rollback", "status": 401}.items()
    deadline = time.monotonic() + 30  # the line is written after the answer: wait for it
    while not any(want <= json.loads(line).items() for line in list(srv.stdout)):
        assert time.monotonic() < deadline, srv.stdout[-3:]
        time.sleep(0.05)
    log = [json.loads(line) for line in list(srv.stdout)]
    assert want <= log[-1].items()
    assert all(TOKEN not in line for line in srv.stdout)


def _wait_for_diff(c) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + RELOAD_TIMEOUT
    while time.monotonic() < deadline:
        described = c.get("/model").json()
        if "diff" in described:
            return described["diff"]
        time.sleep(0.05)
    raise AssertionError("no behaviour diff on GET /model")


def test_reload_without_a_token_is_disabled(serve, tmp_path) -> None:
    env = {"CLEFPROVE_RELOAD_TOKEN": ""}
    srv = serve(SAFE, INVARIANTS, env=env)
    served = srv.sha()
    with srv.client() as c:
        r = c.post("/reload", content=SAFE.read_bytes(), headers=auth())
        assert r.status_code == 403 and "disabled" in r.json()["error"]
        assert c.post("/rollback", headers=auth()).status_code == 403
    assert srv.sha() == served


def test_token_from_the_environment(serve, tmp_path) -> None:
    other = compiled(tmp_path, "block.clef", all_block_source())
    srv = serve(SAFE, INVARIANTS, env={"CLEFPROVE_RELOAD_TOKEN": "from-env"})
    with srv.client() as c:
        headers = {"Authorization": "Bearer from-env"}
        r = c.post("/reload", content=other.read_bytes(), headers=headers)
        assert r.status_code == 200
    assert srv.sha() == r.json()["model"]["sha256"] == load(other).sha256


def test_unknown_within_the_limits_is_refused(serve, tmp_path) -> None:
    features = [{"name": "x", "type": "float", "min": 0, "max": 10, "default": 0},
                {"name": "n", "type": "float", "min": 0, "max": 6, "default": 0}]  # fmt: skip
    base = {"name": "t", "version": "1", "features": features, "actions": ["allow", "block"]}
    blocks = compiled(tmp_path, "b.clef", {**base, "tree": {"action": "block", "confidence": 1}})
    needs_z3 = compiled(
        tmp_path,
        "z.clef",
        {
            **base,
            "version": "2",
            "tree": {
                "feature": "x", "threshold": 5.0,
                "left": {"action": "block", "confidence": 0.9},
                "right": {"feature": "x", "threshold": 7.5,
                          "left": {"action": "allow", "confidence": 0.9},  # safe: only Z3 knows
                          "right": {"action": "block", "confidence": 0.9}},
            },
        },
    )  # fmt: skip
    inv = tmp_path / "z3.inv"
    inv.write_text(
        # Three literals, no two of which are contradictory on the allow box: verify/linear
        # leaves it to Z3 (two would be decided on the box).
        "invariant solver_safe:\n  when x + n <= 12 and x - n >= 2 and n - 0.5 * x >= 1.6\n"
        "  ensure action != allow\n"
    )
    srv = serve(blocks, inv, "--token-file", token_file(tmp_path), "--rlimit", "1")
    served = srv.sha()
    with srv.client() as c:
        r = c.post("/reload", content=needs_z3.read_bytes(), headers=auth())
        assert r.status_code == 409
        assert r.json()["results"][0]["status"] == "unknown"
    assert srv.sha() == served


def test_sighup_reloads_through_the_gate(serve, tmp_path) -> None:
    model = tmp_path / "served.clef"
    model.write_bytes(SAFE.read_bytes())
    srv = serve(model, INVARIANTS)
    served = srv.sha()
    for broken in (b"garbage", SAFE.read_bytes()[:-1], UNSAFE.read_bytes()):
        model.write_bytes(broken)
        srv.proc.send_signal(signal.SIGHUP)
        line = srv.wait_line("SIGHUP reload")
        assert "accepted" not in line
        assert srv.sha() == served
        with srv.client() as c:
            assert c.post("/decide", json={}).status_code == 200
    model.write_bytes(compiled(tmp_path, "block.clef", all_block_source()).read_bytes())
    srv.proc.send_signal(signal.SIGHUP)
    assert "accepted" in srv.wait_line("SIGHUP reload")
    assert srv.sha() != served
    with srv.client() as c:
        m = _metrics(c)
    assert m[("clefprove_reloads_total", (("result", "accepted"),))] == 1
    assert m[("clefprove_reloads_total", (("result", "refused"),))] == 1
    assert m[("clefprove_reloads_total", (("result", "invalid"),))] == 2


def test_sighup_on_a_path_that_is_not_a_regular_file(serve, tmp_path) -> None:
    # MODEL replaced by a named pipe with no writer: the SIGHUP reload's open() blocked a
    # thread of the default executor for good, and SIGTERM then never ended the service (it
    # waited for that thread). It is refused at once, and the service stops as always.
    model = tmp_path / "served.clef"
    model.write_bytes(SAFE.read_bytes())
    srv = serve(model, INVARIANTS)
    served = srv.sha()
    model.unlink()
    os.mkfifo(model)
    srv.proc.send_signal(signal.SIGHUP)
    line = srv.wait_line("SIGHUP reload")
    assert "not a regular file" in line and "accepted" not in line, line
    assert srv.sha() == served
    assert srv.stop() == 0, srv.stderr


def test_an_invariant_file_replaced_by_a_pipe_is_refused_not_waited_for(serve, tmp_path) -> None:
    # The gate reads the invariant files again at every reload: a named pipe with no writer
    # in a file's place made that read wait for good (the reload never answered, every later
    # one queued behind it, SIGTERM never ended the service).  It is a 409 at once.
    inv = tmp_path / "edge.inv"
    inv.write_bytes((INVARIANTS / "edge.inv").read_bytes())
    srv = serve(SAFE, inv, "--token-file", token_file(tmp_path))
    served = srv.sha()
    inv.unlink()
    os.mkfifo(inv)
    with srv.client() as c:
        r = c.post("/reload", content=SAFE.read_bytes(), headers=auth())
        assert r.status_code == 409, r.text
        assert "not a regular file" in r.json()["error"]
    assert srv.sha() == served
    assert srv.stop() == 0, srv.stderr


def test_body_limit_is_413(serve) -> None:
    srv = serve(SAFE, INVARIANTS, "--max-body", "200")
    with srv.client() as c:
        r = c.post("/decide", json=[{}] * 100)
        assert r.status_code == 413 and "error" in r.json()
        chunked = c.post("/decide", content=iter([b"[", b"{}, " * 100, b"{}]"]))  # no length
        assert chunked.status_code == 413
        assert c.post("/decide", content=iter([b"[{}, ", b"{}]"])).status_code == 200
        assert c.post("/decide", json={}).status_code == 200
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json()["status"] == "ready"
        assert c.get("/nowhere").status_code == 404
        assert c.get("/decide").status_code == 405
    assert srv.stop() == 0  # SIGTERM: a graceful stop


def test_reload_limit_is_413_and_only_post_reloads(serve, tmp_path) -> None:
    limit = len(SAFE.read_bytes()) + 100  # the start-up model is held to it too
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path), "--max-model", str(limit))
    served = srv.sha()
    with srv.client() as c:
        data = SAFE.read_bytes() + bytes(20000)  # above the limit
        r = c.post("/reload", content=data, headers=auth())
        assert r.status_code == 413 and f"{limit} bytes" in r.json()["error"]
        chunked = c.post("/reload", content=iter([data[:500], data[500:]]), headers=auth())
        assert chunked.status_code == 413  # no length given: counted as it arrives
        assert c.post("/reload", content=data, headers={}).status_code == 401  # before the body
        assert c.get("/reload", headers=auth()).status_code == 405
        assert srv.sha() == served
        m = _metrics(c)
    assert m[("clefprove_reloads_total", (("result", "invalid"),))] == 2
    assert m[("clefprove_reloads_total", (("result", "unauthorized"),))] == 1


def _serve_cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "clefprove", "serve", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CLEFPROVE_CACHE": str(cwd / ".proof-cache")},
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ((str(UNSAFE), str(INVARIANTS), "--addr", "127.0.0.1:0"), 1, "1 violated"),
        (
            (
                str(ROOT / "examples" / "edge-allow-block.json"),
                str(INVARIANTS),
                "--addr",
                "127.0.0.1:0",
            ),
            2,
            "wrong magic",
        ),
        ((str(SAFE), str(INVARIANTS), "--addr", "0.0.0.0:8080"), 2, "--allow-remote"),
        ((str(SAFE), str(INVARIANTS), "--addr", "nowhere"), 2, "HOST:PORT"),
        ((str(SAFE), "missing.inv", "--addr", "127.0.0.1:0"), 2, "missing.inv"),
        ((str(SAFE), str(INVARIANTS), "--token-file", "absent"), 2, "token file"),
        ((str(SAFE), str(INVARIANTS), "--gate-nice", "20"), 2, "--gate-nice 20"),
        ((str(SAFE), str(INVARIANTS), "--cache", "no/such/dir"), 2, "does not exist"),
    ],
)
def test_start_up_refusals(tmp_path, args, code, words) -> None:
    r = _serve_cli(*args, cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "listening" not in r.stderr
    assert not (tmp_path / "no").exists()


def test_cache_directory_that_cannot_be_made(serve, tmp_path) -> None:
    # --cache naming a file: the gate worker crashed on it (a traceback, then exit 4 'internal
    # error: ConnectionResetError'); it is one line and exit 2 before the port listens.
    (tmp_path / "cachefile").write_text("not a directory")
    r = _serve_cli(str(SAFE), str(INVARIANTS), "--addr", "127.0.0.1:0", "--cache", "cachefile",
                   cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "clefprove: error: cachefile: cannot create the cache directory: File exists"
    ]
    # The default cache (not asked for) that cannot be made only costs speed: it serves.
    server = serve(SAFE, INVARIANTS, env={"CLEFPROVE_CACHE": str(tmp_path / "cachefile")})
    with server.client() as c:
        assert c.post("/decide", json={}).status_code == 200
    assert "Traceback" not in "".join(server.stderr)
    assert any("proof cache unavailable" in line for line in server.stderr), server.stderr


def test_missing_serve_extra_names_the_install_command(tmp_path) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "from clefprove.cli.main import main\n"
        f"sys.exit(main(['serve', {str(SAFE)!r}, {str(INVARIANTS)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "clefprove: error: clefprove serve needs starlette: pip install 'clefprove[serve]'"
    )


def test_the_verifier_alone_never_imports_the_service_stack(tmp_path) -> None:
    code = (
        "import sys\nfrom clefprove.cli.main import main\n"
        f"code = main(['check', {str(SAFE)!r}, {str(INVARIANTS)!r}, '--no-cache'])\n"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'prometheus_client', 'clefprove.app')"
        " if m in sys.modules), code)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)  # fmt: skip
    assert r.stdout.splitlines()[-1] == "[] 0"


def _children(pid: int) -> dict[int, str]:
    """Child processes of *pid*: pid -> command line."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            out[int(entry)] = cmdline
    return out


def test_a_dead_gate_worker_is_an_internal_error_then_replaced(serve, tmp_path) -> None:
    other = compiled(tmp_path, "block.clef", all_block_source())
    srv = serve(SAFE, INVARIANTS, "--token-file", token_file(tmp_path))
    served = srv.sha()
    workers = [p for p, cmd in _children(srv.proc.pid).items() if "spawn_main" in cmd]
    assert len(workers) == 1  # the gate's worker (the diff's starts with the first diff)
    # at the lowest CPU priority: never in the way of a decision (field 19 of stat: nice)
    assert int(Path(f"/proc/{workers[0]}/stat").read_text().rpartition(")")[2].split()[16]) == 19
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, srv.proc.pid) == mine  # the serving process is not
    os.kill(workers[0], signal.SIGKILL)
    with srv.client() as c:
        r = c.post("/reload", content=other.read_bytes(), headers=auth())
        assert r.status_code == 500 and r.json()["error"].startswith("internal error")
        assert srv.sha() == served
        r = c.post("/reload", content=other.read_bytes(), headers=auth())
        assert r.status_code == 200 and srv.sha() == r.json()["model"]["sha256"] != served
