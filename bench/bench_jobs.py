"""``--jobs 1`` against ``--jobs 2`` in the same run (docs/performance.md, "--jobs").

1. **Ensemble search across regions**: hard questions that stay ``unknown`` at the budget,
   where the share of the domain proved in the budget is what more processes buy: the 500-tree
   depth-6 XGBoost model on breast_cancer (``ensure confidence >= 0.5``) and a 200-tree
   depth-6 random forest's hardest box questions.  Per row: proved share, regions settled,
   wall time and how far the invariant ran past its budget.
2. **Single-tree solver stage**: the example tree with ``shortcuts`` off (every feasible
   leaf to Z3, so the pool is used), every invariant of ``invariants/edge.inv`` in one run:
   ``--jobs 1``, ``--jobs 2`` with the run's one pool, and ``--jobs 2`` with a pool per
   invariant (one ``check`` call per invariant: what every invariant paid before).

Usage: ``python bench/bench_jobs.py [--timeout 60] [--forest-timeout 30] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_ensembles import QUERIES, _box, _features  # noqa: E402
from bench.common import machine, median, table  # noqa: E402
from clefprove.verify import ensemble, pool  # noqa: E402, F401  (the code, loaded once)


def _search(model, text: str, jobs: int, timeout: float):
    from clefprove.dsl.loader import parse_text
    from clefprove.verify.ensemble import check_ensemble_invariant
    from clefprove.verify.options import CheckOptions
    from clefprove.verify.pool import run_pool

    inv = parse_text(text, model).invariants[0]
    c0 = time.process_time() + _children_cpu()
    t0 = time.perf_counter()
    with run_pool(jobs):  # the pool's start-up (and shutdown) is part of the time
        res = check_ensemble_invariant(model, inv, CheckOptions(timeout=timeout, jobs=jobs), 3)
    _CPU.append(time.process_time() + _children_cpu() - c0)
    return res, time.perf_counter() - t0


_CPU: list[float] = []


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _xgb500(X, y, feats, tmp: Path):
    import xgboost as xgb

    from clefprove.model.importers import import_model

    clf = xgb.XGBClassifier(n_estimators=500, max_depth=6, random_state=0).fit(X, y)
    path = tmp / "xgb500.json"
    clf.get_booster().save_model(path)
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
    return import_model("xgboost", path, spec)


def _forest(X, y, feats, n: int):
    from sklearn.ensemble import RandomForestClassifier

    import clefprove

    clf = RandomForestClassifier(n_estimators=n, max_depth=6, random_state=0).fit(X, y)
    return clf, clefprove.from_sklearn(clf, feats, actions=["class_0", "class_1"])


def _box_text(lo, hi, c: int) -> str:
    cond = " and ".join(
        f"f{j} >= {float(a)!r} and f{j} <= {float(b)!r}"
        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
    )
    return f"invariant box:\n  when {cond}\n  ensure action == class_{c}\n"


def ensembles(args) -> list[list[object]]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    feats = _features(X)
    cases: list[tuple[str, object, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = _xgb500(X, y, feats, Path(tmp))
    cases.append(
        ("xgboost 500 d6", model, "invariant half:\n  ensure confidence >= 0.5\n", args.timeout)
    )
    clf, forest = _forest(X, y, feats, 200)
    # The forest's hard questions: the box questions still unknown after a short search.
    for i, eps in QUERIES:
        lo, hi = _box(X, i, eps)
        c = int(clf.predict(X[i : i + 1])[0])
        text = _box_text(lo, hi, c)
        res, _ = _search(forest, text, 1, args.probe)
        print(f"forest 200 row {i} eps {eps}: {res.status} at {args.probe:g} s", flush=True)
        if res.status == "unknown":
            cases.append((f"forest 200 d6, row {i} eps {eps}", forest, text, args.forest_timeout))
    _search(forest, cases[-1][2], 2, 0.5)  # warm-up: imports in both paths
    rows = []
    for name, mdl, text, budget in cases:
        got = {}
        for jobs in (1, 2, 2, 1) if args.repeat > 1 else (1, 2):  # interleaved: fair to load
            res, secs = _search(mdl, text, jobs, budget)
            got.setdefault(jobs, []).append((res, secs, _CPU[-1]))
        r1 = got[1]
        r2 = got[2]
        share1 = median([r.proved_share or 0.0 for r, _, _ in r1])
        share2 = median([r.proved_share or 0.0 for r, _, _ in r2])
        reg1 = median([float(r.paths_checked) for r, _, _ in r1])
        reg2 = median([float(r.paths_checked) for r, _, _ in r2])
        for jobs, runs, share, reg in ((1, r1, share1, reg1), (2, r2, share2, reg2)):
            secs = [s for _, s, _ in runs]
            cpu = [c for _, _, c in runs]
            rows.append(
                [
                    name,
                    f"{budget:g}",
                    jobs,
                    "/".join(sorted({str(r.status) for r, _, _ in runs})),
                    f"{share:.3g}" if share < 0.999 else f"1 - {1 - share:.3g}",
                    f"{share / share1:.2f}x" if share1 else "-",
                    f"{reg:.0f}",
                    f"{reg / reg1:.2f}x" if reg1 else "-",
                    f"{median(secs):.2f}",
                    f"{median(cpu):.1f}",
                    f"{max(secs) - budget:+.2f}",
                ]
            )
            print(*rows[-1], flush=True)
    return rows


def single_tree(args) -> list[list[object]]:
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.loading import load_any
    from clefprove.verify.api import check
    from clefprove.verify.options import CheckOptions

    model = load_any(str(ROOT / "examples" / "edge-allow-block.clef"))
    program = load_invariants([str(ROOT / "invariants" / "edge.inv")], model)
    n = len(program.invariants)

    def run(jobs: int, per_invariant: bool) -> tuple[float, list[str], int]:
        opts = CheckOptions(shortcuts=False, jobs=jobs)
        t0 = time.perf_counter()
        if per_invariant:
            results = [
                r for inv in program.invariants for r in check(model, [inv], options=opts).results
            ]
        else:
            results = list(check(model, program, options=opts).results)
        return (
            time.perf_counter() - t0,
            [str(r.status) for r in results],
            sum(r.solver_paths for r in results),
        )

    run(1, False)  # warm-up (Z3 import, leaf boxes)
    modes = [("--jobs 1", 1, False), ("--jobs 2, one pool per run", 2, False),
             ("--jobs 2, one pool per invariant", 2, True)]  # fmt: skip
    times: dict[str, list[float]] = {m[0]: [] for m in modes}
    verdicts: dict[str, list[str]] = {}
    solver: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, jobs, per in modes:
            secs, v, sp = run(jobs, per)
            times[name].append(secs)
            verdicts[name] = v
            solver[name] = sp
    base = median(times["--jobs 1"])
    rows = []
    for name, _, _ in modes:
        t = median(times[name])
        rows.append(
            [
                name,
                n,
                solver[name],
                f"{t:.2f}",
                f"{base / t:.2f}x",
                "yes" if verdicts[name] == verdicts["--jobs 1"] else "NO",
            ]
        )
        print(*rows[-1], flush=True)
    return rows


def _edge_features(model) -> int:
    return len(model.features)


def pool_startup(args) -> list[list[object]]:
    """What a pool per invariant costs against the run's one pool: five stages that each
    fan out one round of tiny tasks (2 per worker) on the example tree."""
    from clefprove.model.loading import load_any
    from clefprove.verify.pool import run_pool

    model = load_any(str(ROOT / "examples" / "edge-allow-block.clef"))
    stages = 5

    def per_stage() -> float:
        t0 = time.perf_counter()
        for _ in range(stages):
            with run_pool(2) as p:
                p.run_all(_edge_features, model, [()] * 4)
        return time.perf_counter() - t0

    def per_run() -> float:
        t0 = time.perf_counter()
        with run_pool(2) as p:
            for _ in range(stages):
                p.run_all(_edge_features, model, [()] * 4)
        return time.perf_counter() - t0

    a, b = [], []
    for _ in range(max(3, args.repeat)):
        a.append(per_stage())
        b.append(per_run())
    return [
        ["a pool per stage (5 pools)", stages, f"{median(a) * 1e3:.0f}", "1.00x"],
        ["one pool per run", stages, f"{median(b) * 1e3:.0f}", f"{median(a) / median(b):.2f}x"],
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=60.0, help="budget of the 500-tree question")
    ap.add_argument("--forest-timeout", type=float, default=30.0)
    ap.add_argument("--probe", type=float, default=3.0, help="budget that finds hard questions")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-ensembles", action="store_true")
    ap.add_argument("--skip-tree", action="store_true")
    ap.add_argument("--startup-only", action="store_true")
    args = ap.parse_args()
    if args.startup_only:
        print(machine())
        print(table(["pools", "stages", "ms (median)", "speed-up"], pool_startup(args)))
        return
    tree_rows = [] if args.skip_tree else single_tree(args)
    ens_rows = [] if args.skip_ensembles else ensembles(args)
    print()
    print(machine())
    if tree_rows:
        print(
            table(
                ["single tree (shortcuts off)", "invariants", "solver paths", "seconds (median)",
                 "speed-up vs --jobs 1", "same verdicts"],
                tree_rows,
            )
        )  # fmt: skip
    if ens_rows:
        print()
        print(
            table(
                ["question", "budget s", "jobs", "verdict", "proved share",
                 "share vs jobs 1", "regions", "regions vs jobs 1", "seconds", "CPU s",
                 "overrun s"],
                ens_rows,
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
