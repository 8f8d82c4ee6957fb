"""Benchmark: the exact float64 search (clefprove/verify/engine.py) against the real relaxation.

On the issue-15 model (int ``n1`` in [-1, N], float ``x0`` in [0, 10], one leaf) every
invariant below reaches Z3, whose rational model does not round to a float64 input; the
exact search then pins ``n1`` to each of its values and solves ``x0`` exactly.  The baseline
is the same check with the exact search switched off (what the verifier answered before:
``unknown``), measured in the same run.  N grows to show the cost per pinned combination.

Run: ``python bench/bench_grid.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source
from clefprove.status import SolverAnswer
from clefprove.verify import engine as grid
from clefprove.verify.api import check_invariant

BODIES = {
    "violated": "when 20 != -7 * n1 + 0.25 * x0 ensure x0 + 0.3 * n1 != 0.1",
    "holds": "ensure n1 + 0.1 * x0 != 0.5248341888200244",
    "vacuous": "when n1 + 0.1 * x0 == 0.5248341888200244 ensure action == block",
}


def model(n_max: int):
    return compile_source(
        {
            "features": [
                {"name": "n1", "type": "int", "min": -1, "max": n_max, "default": 0},
                {"name": "x0", "type": "float", "min": 0, "max": 10, "default": 0},
            ],
            "actions": ["allow", "block"],
            "tree": {"action": "block", "confidence": 0.5},
        }
    )


def run(m, body: str, exact: bool, repeat: int) -> tuple[float, str]:
    inv = parse_text(f"invariant b:\n  {body}\n", m, "b.inv").invariants[0]
    best, status = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        if exact:
            r = check_invariant(m, inv)
        else:  # no search: the verifier's answer before issue 15
            with mock.patch.object(grid, "on_grid", lambda *a, **k: (SolverAnswer.UNKNOWN, None)):
                r = check_invariant(m, inv)
        best = min(best, time.perf_counter() - t0)
        status = r.status + (" (vacuous)" if r.vacuous else "")
    return best, status


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'case':<9} {'n1 values':>9} {'relaxation only':>24} {'exact search':>26} {'ratio':>6}")
    for n_max in (6, 254, 4094):
        m = model(n_max)
        for name, body in BODIES.items():
            t_base, s_base = run(m, body, False, args.repeat)
            t_exact, s_exact = run(m, body, True, args.repeat)
            print(
                f"{name:<9} {n_max + 2:>9} {t_base * 1e3:>9.1f} ms {s_base:<12} "
                f"{t_exact * 1e3:>9.1f} ms {s_exact:<14} {t_exact / t_base:>5.1f}x"
            )


if __name__ == "__main__":
    main()
