"""Benchmark: box properties on tree ensembles, clefprove against dtai-veritas, same run.

Models: XGBoost (binary:logistic, depth 4), LightGBM (binary, 15 leaves) and scikit-learn
random forests (depth 6) with 10, 50 and 200 trees, trained on breast_cancer (bundled with
scikit-learn).  Questions: for data rows i and radii eps, "on the box x_i +- eps * std (cut to
the data range), is the class always the one predicted at x_i?" (``when <box> ensure action ==
c``).  Both tools are timed **end to end** from the trained model: clefprove imports the saved
model (its library file; ``from_sklearn`` for the forest), parses the invariant and checks it;
Veritas converts the model (``get_addtree``) and searches the box (``MAX_OUTPUT`` for class 0,
``MIN_OUTPUT`` for class 1, pruning states that cannot cross the decision threshold, stopping
at the first solution across it).  Veritas is given the box as half-open intervals
``[lo, nextafter(hi))`` so that it decides the same closed box.

Verdicts are compared where both decide; every clefprove counterexample is also checked with
the library's own ``predict``.

Both tools are warmed up once (module imports) before the timings.

Run: ``python bench/bench_ensembles.py [--trees 10 50 200] [--timeout 30]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine, table  # noqa: E402

QUERIES = [(i, eps) for i in (0, 5, 19, 40, 77) for eps in (0.05, 0.3)]


def _train(kind: str, n: int, X: np.ndarray, y: np.ndarray, tmp: Path):
    if kind == "xgboost":
        import xgboost as xgb

        clf = xgb.XGBClassifier(n_estimators=n, max_depth=4, random_state=0).fit(X, y)
        path = tmp / f"xgb{n}.json"
        clf.get_booster().save_model(path)
    elif kind == "lightgbm":
        import lightgbm as lgb

        clf = lgb.LGBMClassifier(
            n_estimators=n, num_leaves=15, max_depth=4, verbose=-1, random_state=0
        ).fit(X, y)
        path = tmp / f"lgb{n}.txt"
        clf.booster_.save_model(path)
    else:
        from sklearn.ensemble import RandomForestClassifier

        clf = RandomForestClassifier(n_estimators=n, max_depth=6, random_state=0).fit(X, y)
        path = None
    return clf, path


def _features(X: np.ndarray) -> list[dict]:
    return [
        {
            "name": f"f{i}",
            "type": "float",
            "min": float(X[:, i].min()),
            "max": float(X[:, i].max()),
            "default": float(np.median(X[:, i])),
        }
        for i in range(X.shape[1])
    ]


def _box(X: np.ndarray, i: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    sd = X.std(axis=0)
    lo = np.maximum(X[i] - eps * sd, X.min(axis=0))
    hi = np.minimum(X[i] + eps * sd, X.max(axis=0))
    return lo, hi


def _clefprove(kind, clf, path, spec_path, feats, lo, hi, c, timeout):
    import clefprove
    from clefprove.dsl.loader import parse_text
    from clefprove.model.importers import import_model
    from clefprove.verify.ensemble import check_ensemble_invariant
    from clefprove.verify.options import CheckOptions

    t0 = time.perf_counter()
    if kind == "forest":
        model = clefprove.from_sklearn(clf, feats, actions=["class_0", "class_1"])
    else:
        model = import_model(kind, path, spec_path)
    cond = " and ".join(
        f"f{j} >= {float(a)!r} and f{j} <= {float(b)!r}"
        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
    )
    inv = parse_text(f"invariant box:\n  when {cond}\n  ensure action == class_{c}\n", model)
    res = check_ensemble_invariant(model, inv.invariants[0], CheckOptions(timeout=timeout), 1)
    seconds = time.perf_counter() - t0
    confirmed = True
    for cex in res.counterexamples:
        x = np.array([[cex.input[f"f{j}"] for j in range(len(feats))]])
        confirmed &= int(clf.predict(x)[0]) != c
    return res.status, seconds, confirmed, res.paths_checked


def _veritas(kind, clf, lo, hi, c, timeout):
    import veritas

    t0 = time.perf_counter()
    at = veritas.get_addtree(clf, silent=True)
    threshold = 0.5 if kind == "forest" else 0.0
    box = [
        veritas.Interval(float(a), float(np.nextafter(b, np.inf)))
        for a, b in zip(lo, hi, strict=True)
    ]
    heuristic = veritas.HeuristicType.MAX_OUTPUT if c == 0 else veritas.HeuristicType.MIN_OUTPUT
    cfg = veritas.Config(heuristic)
    cfg.ignore_state_when_worse_than = threshold
    cfg.stop_when_num_solutions_exceeds = 1  # (0 stops before storing the solution)
    search = cfg.get_search(at, box)
    reason = search.step_for(timeout, 100)
    while reason == veritas.StopReason.NONE and search.time_since_start() < timeout:
        reason = search.step_for(timeout - search.time_since_start(), 100)
    seconds = time.perf_counter() - t0
    crossing = [
        search.get_solution(k).output
        for k in range(search.num_solutions())
        if (search.get_solution(k).output > threshold) == (c == 0)
    ]
    if crossing:
        status = "violated"
    elif reason in (veritas.StopReason.NO_MORE_OPEN, veritas.StopReason.OPTIMAL):  # none found
        status = "holds"
    else:
        status = "unknown"
    return status, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--kinds", nargs="+", default=["xgboost", "lightgbm", "forest"])
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    feats = _features(X)
    rows = []
    totals: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
        for kind in args.kinds:
            for n in args.trees:
                clf, path = _train(kind, n, X, y, Path(tmp))
                if not rows:  # warm up both tools (module imports) outside the timings
                    lo, hi = _box(X, 0, 0.05)
                    _clefprove(kind, clf, path, spec_path, feats, lo, hi, 0, args.timeout)
                    _veritas(kind, clf, lo, hi, 0, args.timeout)
                agree = decided = 0
                t_c, t_v, holds, violated, unknown = [], [], 0, 0, 0
                confirmed_all = True
                for i, eps in QUERIES:
                    lo, hi = _box(X, i, eps)
                    c = int(clf.predict(X[i : i + 1])[0])
                    sc, tc, ok, _ = _clefprove(
                        kind, clf, path, spec_path, feats, lo, hi, c, args.timeout
                    )
                    sv, tv = _veritas(kind, clf, lo, hi, c, args.timeout)
                    confirmed_all &= ok
                    t_c.append(tc)
                    t_v.append(tv)
                    holds += sc == "holds"
                    violated += sc == "violated"
                    unknown += sc == "unknown"
                    if sc != "unknown" and sv != "unknown":
                        decided += 1
                        agree += sc == sv
                mc, mv = float(np.median(t_c)), float(np.median(t_v))
                totals.setdefault(kind, []).append(mc / mv)
                rows.append(
                    [
                        kind,
                        n,
                        f"{holds}/{violated}/{unknown}",
                        f"{agree}/{decided}",
                        "yes" if confirmed_all else "NO",
                        f"{mc * 1e3:.1f}",
                        f"{max(t_c) * 1e3:.1f}",
                        f"{mv * 1e3:.1f}",
                        f"{max(t_v) * 1e3:.1f}",
                        f"{mc / mv:.2f}",
                    ]
                )
                print(*rows[-1], flush=True)
    print()
    print(machine())
    print(
        f"{len(QUERIES)} box queries per model (rows {sorted({i for i, _ in QUERIES})}, "
        f"eps {sorted({e for _, e in QUERIES})}), timeout {args.timeout:g} s each"
    )
    print(
        table(
            [
                "model",
                "trees",
                "clefprove holds/violated/unknown",
                "same verdict as Veritas",
                "cex confirmed by predict",
                "clefprove median ms",
                "clefprove max ms",
                "Veritas median ms",
                "Veritas max ms",
                "ratio (median)",
            ],
            rows,
        )
    )
    for kind, ratios in totals.items():
        print(
            f"{kind}: geometric mean of clefprove/Veritas median ratios "
            f"{math.exp(np.mean(np.log(ratios))):.2f}"
        )


if __name__ == "__main__":
    main()
