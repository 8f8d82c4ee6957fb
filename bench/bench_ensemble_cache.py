"""Benchmark: the proof cache on a 200-tree boosted ensemble (cold, cached, tail changed).

Model: XGBoost (binary:logistic, 200 trees of depth 6) on a synthetic task with a diagonal
boundary (6 features in [0, 1], class ``yes`` iff ``x0 + x1 > 1``; axis-aligned trees make a
staircase of it, so proving an invariant near the boundary needs many regions).  The *tail*
model keeps its first 180 trees and retrains the last 20 (``xgb_model=`` continuation on half
of the data, another seed): a retrained tail of a boosted model.  Invariants: ``when x0 + x1
>= t ensure action == yes`` for a few t (all hold), checked together.

Timed in-process (model imported, invariants parsed), median of ``--repeat`` runs, each on a
fresh copy of the cache:

* ``cold``: ``clefprove.check`` without a cache (the baseline every ratio divides by);
* ``cold+store``: with an empty cache (the cost of storing results and partitions);
* ``cached``: the same model again (whole results reused);
* ``tail, fresh``: the tail model without a cache;
* ``tail, cached``: the tail model with the cache filled by the original (each invariant's
  stored partition re-proved on the new trees).

Every cached report is compared with a fresh one (minus timings and path counts).

    python bench/bench_ensemble_cache.py [--repeat 3] [--trees 200] [--depth 6]
        [--library xgboost|lightgbm]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine, table  # noqa: E402

THRESHOLDS = (1.15, 1.1, 1.08, 1.06)


def _models(tmp: Path, trees: int, depth: int, tail: int, library: str = "xgboost"):  # type: ignore[no-untyped-def]
    from clefprove.model.importers import import_model

    rng = np.random.default_rng(0)
    n_feat = 6
    X = rng.random((5000, n_feat))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    feats = [
        {"name": f"x{i}", "type": "float", "min": 0.0, "max": 1.0, "default": 0.5}
        for i in range(n_feat)
    ]
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"features": feats, "actions": ["no", "yes"]}))
    if library == "lightgbm":
        import lightgbm as lgb

        params_l = {
            "objective": "binary",
            "max_depth": depth,
            "num_leaves": 2**depth - 1,
            "verbose": -1,
            "seed": 0,
        }
        full = lgb.train(params_l, lgb.Dataset(X, y), trees)
        full.save_model(str(tmp / "a.txt"))
        head_l = lgb.Booster(model_str=full.model_to_string(num_iteration=trees - tail))
        retrained_l = lgb.train(
            {**params_l, "seed": 1}, lgb.Dataset(X[::2], y[::2]), tail, init_model=head_l
        )
        retrained_l.save_model(str(tmp / "b.txt"))
        return import_model("lightgbm", tmp / "a.txt", spec), import_model(
            "lightgbm", tmp / "b.txt", spec
        )
    import xgboost as xgb

    clf = xgb.XGBClassifier(n_estimators=trees, max_depth=depth, random_state=0).fit(X, y)
    booster = clf.get_booster()
    booster.save_model(tmp / "a.json")
    params = {"max_depth": depth, "objective": "binary:logistic", "seed": 1}
    head = booster[: trees - tail]
    retrained = xgb.train(params, xgb.DMatrix(X[::2], label=y[::2]), tail, xgb_model=head)
    retrained.save_model(tmp / "b.json")
    return import_model("xgboost", tmp / "a.json", spec), import_model(
        "xgboost", tmp / "b.json", spec
    )


def _comparable(report) -> list[dict]:  # type: ignore[no-untyped-def]
    out = []
    for r in report.to_json_dict()["results"]:
        for k in ("seconds", "paths_checked", "paths_reused", "solver_paths"):
            r.pop(k, None)
        out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trees", type=int, default=200)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--tail", type=int, default=20)
    ap.add_argument("--library", choices=("xgboost", "lightgbm"), default="xgboost")
    args = ap.parse_args()

    import clefprove
    from clefprove.dsl.loader import parse_text
    from clefprove.incremental.cache import ProofCache
    from clefprove.incremental.ensemble import tree_hashes
    from clefprove.verify.options import CheckOptions

    tmp = Path(tempfile.mkdtemp())
    a, b = _models(tmp, args.trees, args.depth, args.tail, args.library)
    same = sum(x == y for x, y in zip(tree_hashes(a), tree_hashes(b), strict=True))
    text = "".join(
        f"invariant near_{i}:\n  when x0 + x1 >= {t}\n  ensure action == yes\n"
        for i, t in enumerate(THRESHOLDS)
    )
    prog_a = parse_text(text, a)
    prog_b = parse_text(text, b)
    opts = CheckOptions(timeout=120)
    filled = tmp / "filled"
    with ProofCache(filled) as c:
        clefprove.check(a, prog_a, options=opts, cache=c)

    def run(model, prog, cache_from: Path | None):  # type: ignore[no-untyped-def]
        times, report = [], None
        for k in range(args.repeat):
            if cache_from is None:
                t0 = time.perf_counter()
                report = clefprove.check(model, prog, options=opts)
                times.append(time.perf_counter() - t0)
                continue
            d = tmp / f"run{k}"
            shutil.rmtree(d, ignore_errors=True)
            if cache_from.exists():
                shutil.copytree(cache_from, d)
            with ProofCache(d) as c:
                t0 = time.perf_counter()
                report = clefprove.check(model, prog, options=opts, cache=c)
                times.append(time.perf_counter() - t0)
        return statistics.median(times), report

    empty = tmp / "empty-does-not-exist"
    rows = []
    cold, fresh_a = run(a, prog_a, None)
    fresh_b = run(b, prog_b, None)[1]
    for name, model, prog, src in (
        ("cold", a, prog_a, None),
        ("cold+store", a, prog_a, empty),
        ("cached", a, prog_a, filled),
        ("tail, fresh", b, prog_b, None),
        ("tail, cached", b, prog_b, filled),
    ):
        seconds, report = (cold, fresh_a) if name == "cold" else run(model, prog, src)
        fresh = fresh_a if model is a else fresh_b
        assert _comparable(report) == _comparable(fresh), f"{name}: differs from a fresh run"
        checked = sum(r.paths_checked for r in report.results)
        reused = sum(r.paths_reused for r in report.results)
        statuses = ",".join(sorted({str(r.status) for r in report.results}))
        rows.append([name, f"{seconds:.3f}", f"{cold / seconds:.2f}x", checked, reused, statuses])
    print(machine())
    print(
        f"{args.library} {args.trees} trees, depth {args.depth}; tail model shares {same} trees, "
        f"{args.trees - same} retrained; {len(THRESHOLDS)} invariants; median of {args.repeat}"
    )
    print(
        table(
            ["run", "seconds", "speed-up vs cold", "paths checked", "paths reused", "verdicts"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
