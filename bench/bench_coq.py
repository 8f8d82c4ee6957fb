"""Benchmark: coqc time of the Coq export (prints a table; not a timed test).

Rows:
* the depth-12 example (examples/edge-allow-block.clef) with every SPEC invariant that the
  export proves (refuted ones are listed too);
* a complete depth-11 tree (4,095 nodes) over the SPEC features whose leaves are labelled so
  that all five SPEC invariants hold (generated here, seeded).

For each: export time (Python, includes the checker mirror), coqc time of the model file,
coqc time of the proofs file (the reflective checks), and the total including the library.

    python bench/bench_coq.py [--depth 11] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import example_module  # noqa: E402

from clefprove.coq_export.export import LIBRARY, export_coq  # noqa: E402
from clefprove.dsl.loader import load_invariants  # noqa: E402
from clefprove.model.clef import load_model  # noqa: E402
from clefprove.model.source import compile_source  # noqa: E402

FEATURES = example_module().FEATURES
ACTIONS = example_module().ACTIONS
VALUES = FEATURES[4]["values"]


def synthetic_source(depth: int, seed: int) -> dict:
    """A complete tree of the given depth whose leaves respect the SPEC invariants."""
    rng = random.Random(seed)

    def build(d: int, box: dict) -> dict:
        if d == depth:
            return leaf(box)
        f = rng.choice(
            ["client_rtt_ms", "tls_version", "path_depth", "referer_entropy", "ua_family", "is_tor"]
        )
        if f == "ua_family":
            cats = sorted(box["ua"])
            if len(cats) < 2:
                f = "client_rtt_ms"
            else:
                pick = rng.sample(cats, rng.randint(1, len(cats) - 1))
                return {
                    "feature": f,
                    "in": [VALUES[c] for c in sorted(pick)],
                    "left": build(d + 1, {**box, "ua": set(pick)}),
                    "right": build(d + 1, {**box, "ua": set(cats) - set(pick)}),
                }
        lo, hi = box[f]
        if f in ("tls_version", "path_depth", "is_tor"):
            if hi - lo < 1:
                f = "referer_entropy"
                lo, hi = box[f]
            else:
                t = rng.randint(int(lo), int(hi) - 1) + 0.5
                return {
                    "feature": f,
                    "threshold": t,
                    "left": build(d + 1, {**box, f: (lo, int(t))}),
                    "right": build(d + 1, {**box, f: (int(t) + 1, hi)}),
                }
        t = round(rng.uniform(lo, hi), 3)
        return {
            "feature": f,
            "threshold": t,
            "left": build(d + 1, {**box, f: (lo, t)}),
            "right": build(d + 1, {**box, f: (t, hi)}),
        }

    def leaf(box: dict) -> dict:
        rtt, tls, depth_, tor = (
            box["client_rtt_ms"],
            box["tls_version"],
            box["path_depth"],
            box["is_tor"],
        )
        script = bool(box["ua"] & {3, 4})
        allow_ok = (
            (rtt[1] <= 300 or tls[0] >= 772)
            and not (script and depth_[1] >= 3)
            and not (tor[1] >= 1 and depth_[1] >= 4)
            and rtt[1] + 200 * depth_[1] < 2000
        )
        if allow_ok and rng.random() < 0.7:
            return {"action": "allow", "confidence": round(rng.uniform(0.5, 1), 3)}
        action = rng.choice(ACTIONS[1:])
        conf = rng.uniform(0.8, 1) if action == "block" else rng.uniform(0.3, 1)
        return {"action": action, "confidence": round(conf, 3)}

    box = {
        "client_rtt_ms": (0, 10000),
        "tls_version": (768, 772),
        "path_depth": (0, 64),
        "referer_entropy": (0, 8),
        "ua": set(range(6)),
        "is_tor": (0, 1),
    }
    return {
        "name": f"synthetic-depth-{depth}",
        "version": "1.0.0",
        "features": FEATURES,
        "actions": ACTIONS,
        "tree": build(0, box),
    }


def coqc(directory: Path, name: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one coqc run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        ["coqc", "-Q", ".", "Clef", name], cwd=directory, check=True, capture_output=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run(label: str, model, invariants) -> dict:
    t0 = time.perf_counter()
    ex = export_coq(model, invariants)
    t_export = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ex.write(d)
        lib = [coqc(d, f) for f in LIBRARY]
        t_model = coqc(d, "Model.v")
        t_proofs = coqc(d, "Invariants.v")
    statuses = [r.status for r in ex.results]
    return {
        "label": label,
        "nodes": model.n_nodes,
        "proved": statuses.count("proved"),
        "refuted": statuses.count("refuted"),
        "skipped": statuses.count("not exported"),
        "export": t_export,
        "lib": (sum(w for w, _ in lib), sum(c for _, c in lib)),
        "model": t_model,
        "proofs": t_proofs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=11)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if shutil.which("coqc") is None:
        sys.exit("coqc not found")
    inv_dir = ROOT / "invariants"
    rows = []
    example = ROOT / "examples" / "edge-allow-block.clef"
    if example.exists():
        m = load_model(example)
        rows.append(run("depth-12 example", m, load_invariants([inv_dir], m)))
    else:
        print(f"(skipping {example}: not generated)")
    m = compile_source(synthetic_source(args.depth, args.seed))
    rows.append(run(f"complete depth-{args.depth}", m, load_invariants([inv_dir], m)))
    head = (
        "model",
        "nodes",
        "proved",
        "refuted",
        "n/e",
        "export s",
        "library s",
        "Model.v s",
        "Invariants.v s",
        "Model.v + Invariants.v s",
    )
    print("Each coqc cell: wall seconds (CPU seconds of coqc).")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        total = (r["model"][0] + r["proofs"][0], r["model"][1] + r["proofs"][1])
        cells = [_t(r["lib"]), _t(r["model"]), _t(r["proofs"]), _t(total)]
        print(
            f"| {r['label']} | {r['nodes']} | {r['proved']} | {r['refuted']} | {r['skipped']} "
            f"| {r['export']:.2f} | " + " | ".join(cells) + " |"
        )


def _t(t: tuple[float, float]) -> str:
    return f"{t[0]:.2f} ({t[1]:.2f})"


if __name__ == "__main__":
    main()
