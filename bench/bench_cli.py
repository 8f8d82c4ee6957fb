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
    "check --format sarif": [
        "check",
        "examples/edge-allow-block.clef",
        "invariants",
        "--no-cache",
        "--format",
        "sarif",
    ],
}


REFERENCES = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import numpy'": ["-c", "import numpy"],
}


def median_seconds(tree: Path, argv: list[str], repeat: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if i:  # the first run writes the byte code
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="f997aaf", help="git revision to compare against")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = package_at(args.baseline, Path(tmp) / "base")
        print(f"CLI start-up, median of {args.repeat} runs (baseline {args.baseline})")
        print(f"{'command':<24} {'baseline':>10} {'this tree':>10} {'ratio':>7}")
        for name, argv in REFERENCES.items():
            t = median_seconds(ROOT, argv, args.repeat)
            print(f"{name:<24} {'':>10} {t * 1000:>8.0f}ms")
        for name, argv in COMMANDS.items():
            # -P: the working directory (this checkout) is not put first on sys.path, so the
            # baseline's run imports the baseline from PYTHONPATH, not this tree's package.
            b = median_seconds(base, ["-P", "-m", "clefprove", *argv], args.repeat)
            t = median_seconds(ROOT, ["-P", "-m", "clefprove", *argv], args.repeat)
            print(f"{name:<24} {b * 1000:>8.0f}ms {t * 1000:>8.0f}ms {t / b:>7.2f}")


if __name__ == "__main__":
    main()
