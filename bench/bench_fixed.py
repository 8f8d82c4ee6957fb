"""Fixed costs of a small check, in process: the five SPEC invariants on the depth-12 example.

Each round loads ``examples/edge-allow-block.clef`` from its bytes, parses and type-checks
``invariants/edge.inv`` against it and checks all five invariants (``jobs=1``, no proof cache),
with fresh objects every round (no memo carried over), and records the thread CPU time of each
phase.  This tree and a baseline revision (``git archive``) run in their own processes,
alternating, ``--rounds`` times each; each process warms up, then times ``--repeat`` rounds.
The table gives, per phase, the minimum and the median over all timed rounds of all processes,
and the ratio of the medians (this tree / baseline).  The issue 11 target: the total under
3 ms.

    python bench/bench_fixed.py [--baseline REV] [--rounds 3] [--repeat 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine, package_at, table  # noqa: E402

PHASES = ("load", "parse", "check", "total")

# Runs in a child process with the tree to measure first on sys.path.
CHILD = r"""
import json, sys, time
from pathlib import Path
import clefprove
from clefprove.dsl.loader import parse_text
from clefprove.model.clef import load_bytes
from clefprove.verify.api import check
from clefprove.verify.options import CheckOptions

root = Path(sys.argv[1])
data = (root / "examples/edge-allow-block.clef").read_bytes()
text = (root / "invariants/edge.inv").read_text()
options = CheckOptions()
repeat = int(sys.argv[2])

def once():
    t0 = time.thread_time()
    model = load_bytes(data)
    t1 = time.thread_time()
    program = parse_text(text, model)
    t2 = time.thread_time()
    report = check(model, program, options=options)
    t3 = time.thread_time()
    assert all(r.status == "holds" for r in report.results), report
    return [t1 - t0, t2 - t1, t3 - t2, t3 - t0]

for _ in range(max(20, repeat // 5)):
    once()
print(json.dumps({"package": clefprove.__file__, "rows": [once() for _ in range(repeat)]}))
"""


def _rounds(tree: Path, repeat: int) -> list[list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # In *tree*: ``python -c`` puts the working directory first on sys.path, so run from the
    # repository root every child would import this tree's package, the baseline's too.
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(repeat)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    got = json.loads(out)
    assert Path(got["package"]).resolve().is_relative_to(tree.resolve()), (got["package"], tree)
    rows: list[list[float]] = got["rows"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="4ce7609", help="git revision to compare against")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree, alternating")
    ap.add_argument("--repeat", type=int, default=100, help="timed rounds per process")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = package_at(args.baseline, Path(tmp) / "base")
        got: dict[str, list[list[float]]] = {"baseline": [], "this tree": []}
        for _ in range(args.rounds):
            got["baseline"] += _rounds(base, args.repeat)
            got["this tree"] += _rounds(ROOT, args.repeat)
    rows = []
    for i, phase in enumerate(PHASES):
        cells: list[str] = [phase]
        medians = []
        for name in ("baseline", "this tree"):
            col = [r[i] * 1000 for r in got[name]]
            medians.append(statistics.median(col))
            cells.append(f"{min(col):.2f} / {medians[-1]:.2f}")
        cells.append(f"{medians[1] / medians[0]:.2f}")
        rows.append(cells)
    print(f"Five SPEC invariants, depth-12 example, thread CPU ms — {machine()}")
    print(f"{args.rounds} processes x {args.repeat} rounds per tree; baseline {args.baseline}")
    print(table(["phase", "baseline min / median", "this tree min / median", "ratio"], rows))


if __name__ == "__main__":
    main()
