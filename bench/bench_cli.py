"""Start-up cost of the command line: this tree against a baseline revision, in the same run.

The entry point installs its signal handlers and reads ``[tool.clefprove]`` before anything
heavy is imported; this measures what that costs a CI job per invocation.  Byte code is written
and one warm-up run precedes the timed ones, as after ``pip install`` (which compiles every
module): with ``PYTHONDONTWRITEBYTECODE`` set, as in some sandboxes, every run would compile the
whole package from source again (about 0.4 s of CPU).  Two reference rows, ``python -c pass``
and ``python -c "import numpy"``, time the interpreter alone and its one heavy dependency.

    python bench/bench_cli.py [--baseline REF] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import package_at  # noqa: E402

COMMANDS = {
    "--help": ["--help"],
    "info": ["info", "examples/edge-allow-block.clef"],
    "check (cache off)": ["check", "examples/edge-allow-block.clef", "invariants", "--no-cache"],
    "check (default cache)": ["check", "examples/edge-allow-block.clef", "invariants"],
    "check, a violation": [
        "check",
        "examples/edge-allow-block-1.0.0.clef",
        "invariants",
        "--no-cache",
    ],
    "check --format sarif": [
        "check",
        "examples/edge-allow-block.clef",
        "invariants",
        "--no-cache",
        "--format",
        "sarif",
    ],
    "diff": ["diff", "examples/edge-allow-block-1.0.0.clef", "examples/edge-allow-block.clef"],
    "gate --previous": [
        "gate",
        "examples/edge-allow-block.clef",
        "invariants",
        "--previous",
        "examples/edge-allow-block-1.0.0.clef",
        "--no-cache",
    ],
}


REFERENCES = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import numpy'": ["-c", "import numpy"],
}


def _run(tree: Path, argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - t0


def median_seconds(tree: Path, argv: list[str], repeat: int) -> float:
    _run(tree, argv)  # the first run writes the byte code
    return statistics.median(_run(tree, argv) for _ in range(repeat))


def paired(base: Path, tree: Path, argv: list[str], repeat: int) -> tuple[float, float, float]:
    """Medians of the baseline and of this tree, and the median of their ratios, the two run
    in turn (a drift of the machine's speed moves both)."""
    _run(base, argv), _run(tree, argv)  # byte code
    pairs = [(_run(base, argv), _run(tree, argv)) for _ in range(repeat)]
    return (
        statistics.median(b for b, _ in pairs),
        statistics.median(t for _, t in pairs),
        statistics.median(t / b for b, t in pairs),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="a464e3e", help="git revision to compare against")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = package_at(args.baseline, Path(tmp) / "base")
        print(f"CLI start-up, median of {args.repeat} runs (baseline {args.baseline}, run in turn)")
        print(f"{'command':<24} {'baseline':>10} {'this tree':>10} {'ratio':>7}")
        for name, argv in REFERENCES.items():
            t = median_seconds(ROOT, argv, args.repeat)
            print(f"{name:<24} {'':>10} {t * 1000:>8.0f}ms")
        for name, argv in COMMANDS.items():
            # -P: the working directory (this checkout) is not put first on sys.path, so the
            # baseline's run imports the baseline from PYTHONPATH, not this tree's package.
            b, t, r = paired(base, ROOT, ["-P", "-m", "clefprove", *argv], args.repeat)
            print(f"{name:<24} {b * 1000:>8.0f}ms {t * 1000:>8.0f}ms {r:>7.2f}")


if __name__ == "__main__":
    main()
