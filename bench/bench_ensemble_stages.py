"""Benchmark: where one box question's time goes on a tree ensemble, stage by stage.

The questions of ``bench/bench_ensembles.py`` (the 60-literal ``when`` box on breast_cancer),
on a 10-tree and a 200-tree model of each kind, split into: **import** (the saved XGBoost /
LightGBM file, ``from_sklearn`` for the forest), **parse** (lex + parse + type-check of the
invariant text), **normal form** (``when and not ensure`` and the vacuity check's ``when``,
``engine.prepare``), **tables** (the ensemble's leaf tables, once per model) and **search**
(branch and bound, witnesses confirmed, the result).  Median milliseconds over the 10
questions, each question a fresh model and a fresh invariant (as end to end).  Two tables: wall
time, and the main thread's CPU time (``time.thread_time``), the steadier figure on a shared
machine (the wall time of a loaded machine includes waiting for a core).  The classes of the
rows come from one single-threaded ``predict`` per model before the questions (as in
``bench_ensembles.py``: no OpenMP team spinning on during the timings).

``--repeat R`` asks each question R times (each time a fresh model and invariant) and keeps
each stage's least time, which steadies the figures on a loaded machine.

Run: ``python bench/bench_ensemble_stages.py [--trees 10 200] [--kinds xgboost lightgbm forest]
[--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_ensembles import QUERIES, _box, _features, _predict, _train  # noqa: E402
from bench.common import machine, table  # noqa: E402


def _stages(kind, clf, path, spec_path, feats, lo, hi, c, timeout) -> dict[str, float]:
    import clefprove
    from clefprove.dsl.loader import parse_text
    from clefprove.model.importers import import_model
    from clefprove.verify import engine as eg
    from clefprove.verify.ensemble import check_ensemble_invariant, ensemble_tables
    from clefprove.verify.options import CheckOptions

    out: dict[str, float] = {}
    clock = _clock
    t0 = clock()
    if kind == "forest":
        model = clefprove.from_sklearn(clf, feats, actions=["class_0", "class_1"])
    else:
        model = import_model(kind, path, spec_path)
    t1 = clock()
    cond = " and ".join(
        f"f{j} >= {float(a)!r} and f{j} <= {float(b)!r}"
        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
    )
    inv = parse_text(f"invariant box:\n  when {cond}\n  ensure action == class_{c}\n", model)
    t2 = clock()
    opts = CheckOptions(timeout=timeout)
    eg.prepare(model, inv.invariants[0], opts.dnf_cap)
    t3 = clock()
    ensemble_tables(model)
    t4 = clock()
    res = check_ensemble_invariant(model, inv.invariants[0], opts, 1)
    t5 = clock()
    out["import"] = t1 - t0
    out["parse"] = t2 - t1
    out["normal form"] = t3 - t2
    out["tables"] = t4 - t3
    out["search"] = t5 - t4
    out["total"] = t5 - t0
    out["status"] = res.status  # type: ignore[assignment]
    return out


_clock = time.perf_counter

STAGES = ["import", "parse", "normal form", "tables", "search", "total"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, nargs="+", default=[10, 200])
    ap.add_argument("--kinds", nargs="+", default=["xgboost", "lightgbm", "forest"])
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    feats = _features(X)
    global _clock
    rows: dict[str, list[list[object]]] = {"wall": [], "cpu": []}
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
        warm = False
        for kind in args.kinds:
            for n in args.trees:
                clf, path = _train(kind, n, X, y, Path(tmp))
                if not warm:
                    lo, hi = _box(X, 0, 0.05)
                    _stages(kind, clf, path, spec_path, feats, lo, hi, 0, args.timeout)
                    warm = True
                for which, clock in (("wall", time.perf_counter), ("cpu", time.thread_time)):
                    _clock = clock
                    per: dict[str, list[float]] = {s: [] for s in STAGES}
                    classes = _predict(kind, clf, X[[i for i, _ in QUERIES]])
                    for (i, eps), c in zip(QUERIES, classes.tolist(), strict=True):
                        lo, hi = _box(X, i, eps)
                        runs = [
                            _stages(kind, clf, path, spec_path, feats, lo, hi, c, args.timeout)
                            for _ in range(max(1, args.repeat))
                        ]
                        for s in STAGES:
                            per[s].append(min(r[s] for r in runs))
                    row = [kind, n] + [f"{float(np.median(per[s])) * 1e3:.2f}" for s in STAGES]
                    rows[which].append(row)
                    print(which, *row, flush=True)
    print()
    print(machine())
    for which in ("wall", "cpu"):
        print(f"median {which} ms over {len(QUERIES)} box questions per model")
        print(table(["model", "trees", *(f"{s} ms" for s in STAGES)], rows[which]))


if __name__ == "__main__":
    main()
