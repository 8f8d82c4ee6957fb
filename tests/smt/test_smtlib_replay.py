"""`check --smtlib DIR`: every solver query is written with Z3's answer, and cvc5 agrees."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clefprove.smt.smtlib import expected_status, replay
from tests.conftest import EXAMPLES

# Multi-feature linear atoms that the box stages (verify/linear) cannot decide on every leaf, so
# that some reach Z3 and produce queries: an equality over two float features (the solver's
# answer is sat where the box has real solutions, often with no float64 point on the face), and
# three literals over float features no two of which are contradictory on the box (unsat).
INVARIANTS = """
invariant window_equality:
  when client_rtt_ms - 100 * referer_entropy == 0.1 and client_rtt_ms <= 150
  ensure action == block

invariant triangle_is_empty:
  when client_rtt_ms + 100 * referer_entropy <= 1200
    and client_rtt_ms - 100 * referer_entropy >= 200
    and 100 * referer_entropy - 0.5 * client_rtt_ms >= 160
  ensure action == block

invariant two_linear_atoms:
  when client_rtt_ms + 100 * path_depth >= 900 and client_rtt_ms - 50 * referer_entropy <= 250
  ensure action != allow

invariant linear_and_confidence:
  when client_rtt_ms + 10 * referer_entropy > 280 and 3 * path_depth - referer_entropy < 4
  ensure action == block implies confidence >= 0.75

invariant joint_window_is_empty:
  when client_rtt_ms + path_depth >= 5000 and client_rtt_ms + 2 * path_depth <= 4000
  ensure action == block
"""


@pytest.mark.slow
def test_check_writes_replayable_queries(tmp_path):
    inv = tmp_path / "solver.inv"
    inv.write_text(INVARIANTS)
    out = tmp_path / "smt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "clefprove",
            "check",
            str(EXAMPLES / "edge-allow-block.clef"),
            str(inv),
            "--smtlib",
            str(out),
            "--format",
            "json",
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr
    scripts = sorted(out.glob("*.smt2"))
    assert scripts, "no solver query was written"
    statuses = set()
    for path in scripts[:60]:
        text = path.read_text()
        status = expected_status(text)
        assert status in ("sat", "unsat")
        assert replay(text) == status, path.name
        statuses.add(status)
    assert statuses == {"sat", "unsat"}
