"""Benchmark: relational invariants (leaf-pair check) on the example trees of several depths.

For scikit-learn trees trained on the example data (examples/make_edge_example.py; depth 12 is
the committed example), times ``check_relational`` in process (model loaded, invariants parsed,
leaf boxes recomputed in every call) for SPEC §3's three relational examples and a few with a
``when`` (single-feature atoms, and linear ones that may need Z3 per leaf pair), then the whole
``clefprove check`` command (interpreter start included) for the three SPEC examples.

Run: ``python bench/bench_relational.py [--depths 12 16 20] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import example_module, machine, table  # noqa: E402

INVARIANTS = """
severity allow < challenge < rate_limit < block

invariant entropy_monotone:
  ensure monotone(referer_entropy)

invariant rtt_stable:
  ensure stable(client_rtt_ms, 5)

invariant ua_independent:
  ensure independent(ua_family)

invariant stable_when_slow_legacy:
  when client_rtt_ms > 300 and tls_version < 772
  ensure stable(client_rtt_ms, 5)

invariant ua_independent_linear_when:
  when client_rtt_ms + 200 * path_depth >= 2000
  ensure independent(ua_family)

invariant entropy_monotone_linear_when:
  when client_rtt_ms + 100 * referer_entropy <= 400
  ensure monotone(referer_entropy)

invariant rtt_stable_linear_when:
  when client_rtt_ms + 100 * referer_entropy <= 400
  ensure stable(client_rtt_ms, 5)
"""

SPEC3 = INVARIANTS.split("invariant stable_when_slow_legacy")[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", type=int, nargs="+", default=[12, 16, 20])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=400_000)
    args = ap.parse_args()

    mk = example_module()

    from clefprove.dsl.loader import parse_text
    from clefprove.model.clef import load_model, write_clef
    from clefprove.verify.relational import check_relational

    rows = []
    cli_rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-relational-"))
    (tmp / "spec3.inv").write_text(SPEC3)
    for depth in args.depths:
        if depth == 12:
            path = ROOT / "examples" / "edge-allow-block.clef"
            model = load_model(path)
        else:
            _, model = mk.build(depth, args.rows)
            path = tmp / f"edge-d{depth}.clef"
            path.write_bytes(write_clef(model))
        program = parse_text(INVARIANTS, model, "bench.inv")
        for inv in program.invariants:
            best = float("inf")
            res = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                res = check_relational(model, inv, program.severity)
                best = min(best, time.perf_counter() - t0)
            assert res is not None
            rows.append(
                (
                    depth,
                    model.n_leaves,
                    inv.name,
                    res.status,
                    res.violating_paths,
                    res.solver_paths,
                    f"{best * 1e3:.1f}",
                )
            )
            print(f"depth {depth:2d} {inv.name:30s} {res.status:9s} {best * 1e3:8.1f} ms")
        walls = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "clefprove", "check", str(path), str(tmp / "spec3.inv")],
                cwd=ROOT,
                capture_output=True,
            )
            walls.append(time.perf_counter() - t0)
            assert proc.returncode in (0, 1), proc.stderr.decode()
        cli_rows.append((depth, model.n_leaves, f"{min(walls) * 1e3:.0f}"))
    print()
    print(machine())
    print()
    print(
        table(
            [
                "depth",
                "leaves",
                "invariant",
                "verdict",
                "violating pairs",
                "Z3 pairs",
                "ms (min)",
            ],
            rows,
        )
    )
    print()
    print(table(["depth", "leaves", "`clefprove check` SPEC §3 three, ms (min wall)"], cli_rows))


if __name__ == "__main__":
    main()
