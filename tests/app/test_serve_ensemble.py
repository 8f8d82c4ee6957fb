"""``clefprove serve`` on a tree ensemble: a real server decides as ``clefprove eval`` does
(action, confidence, each tree's leaf), refuses an ensemble that breaks an invariant, and a
bad upload leaves the served ensemble in place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.app.conftest import ROOT, TOKEN, compiled

TOY = json.loads((ROOT / "tests" / "fixtures" / "ensemble_toy.json").read_text())
HOLDS = (
    "severity allow < challenge < block\n\n"
    "invariant rtt_monotone:\n  ensure monotone(client_rtt_ms)\n"
)
BROKEN = (
    "invariant tor_deep_not_allowed:\n  when is_tor and path_depth >= 4\n  ensure action != allow\n"
)
INPUTS = [
    {},
    {"client_rtt_ms": 400, "ua_family": "curl", "path_depth": 5},
    {"client_rtt_ms": 1e9, "path_depth": -3},  # both clipped
    {"is_tor": True, "path_depth": 4},
    {"ua_family": "Firefox", "client_rtt_ms": 299.99, "is_tor": False},
]


def _eval(model: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "clefprove", "eval", str(model)],
        input="\n".join(json.dumps(r) for r in INPUTS) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_an_ensemble_is_served_as_eval_decides(serve, tmp_path: Path) -> None:
    model = compiled(tmp_path, "toy.clef", TOY)
    inv = tmp_path / "toy.inv"
    inv.write_text(HOLDS)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    want = _eval(model)
    assert all("leaves" in w for w in want)
    srv = serve(model, inv, "--token-file", token)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with srv.client() as c:
        described = c.get("/model").json()
        assert described["trees"] == 3 and described["sha256"] == srv.sha()
        for rec, w in zip(INPUTS, want, strict=True):
            got = c.post("/decide", json=rec).json()
            assert got.pop("model")["sha256"] == described["sha256"]
            assert got == w
        for batch in (INPUTS, INPUTS * 10):  # one by one and through the vectorised path
            got = c.post("/decide", json=batch).json()
            assert [{k: v for k, v in d.items() if k != "model"} for d in got] == want * (
                len(batch) // len(INPUTS)
            )
        assert c.post("/decide", json={"ua_family": "lynx"}).status_code == 400
        # an empty array is a batch of no inputs, as for a single tree (not a 500)
        empty = c.post("/decide", json=[])
        assert (empty.status_code, empty.json()) == (200, [])
        metrics = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(c.get("/metrics").text)
            for s in fam.samples
        }
        sent = len(INPUTS) * 12
        assert (
            sum(v for (name, _), v in metrics.items() if name == "clefprove_decisions_total")
            == sent
        )
        assert (
            metrics[("clefprove_feature_out_of_bounds_total", (("feature", "client_rtt_ms"),))]
            == 12
        )
        # the same ensemble again is admitted; a truncated file is not, and changes nothing
        data = model.read_bytes()
        assert c.post("/reload", content=data, headers=auth).status_code == 200
        assert c.post("/reload", content=data[:-9], headers=auth).status_code == 400
        assert srv.sha() == described["sha256"]


def test_an_ensemble_that_breaks_an_invariant_is_not_served(serve, tmp_path: Path) -> None:
    model = compiled(tmp_path, "toy.clef", TOY)
    inv = tmp_path / "broken.inv"
    inv.write_text(BROKEN)
    srv = serve(model, inv, wait=False)
    assert srv.proc.wait(timeout=120) == 1
    line = srv.wait_line("not serving")
    assert "1 violated" in line and "\n" not in line.rstrip("\n")
