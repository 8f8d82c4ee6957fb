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

Both tools are warmed up once (module imports) before the timings.  The library's own
``predict`` (the class at each row, the confirmation of counterexamples) runs single-threaded
(``_predict``) and outside the timings: the classes of all rows once per model before the
questions, the counterexamples after both tools have answered the question (LightGBM's and
XGBoost's OpenMP threads otherwise spin on after a ``predict`` and compete for the cores
with whichever tool is timed next); ``OMP_WAIT_POLICY=PASSIVE`` (unless set) makes idle
OpenMP threads sleep, after Veritas's conversion too.

Run: ``python bench/bench_ensembles.py [--trees 10 50 200] [--timeout 30]``.

``--relational``: relational invariants instead (``monotone(f)``, ``stable(f, 0.1 sd)``,
``independent(f)`` for f the feature the model splits on most, ``when`` a box x_i +- eps * std
on every *other* feature, f free over its range).  Veritas has no two-input query of this kind,
so the baseline is a whole-model Z3 encoding of the pair in the same run: one copy of every
tree per input (the other features shared, x_f and x'_f separate), leaf values summed over the
reals (no float rounding: it can only be faster than an exact encoding), the class from the
margin / the averaged class shares, and the relation; timed end to end from the trained model
(import, encoding, solving) with ``--z3-timeout`` per query.  Every clefprove counterexample
pair is checked with the library's own ``predict``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

# Veritas's get_addtree leaves XGBoost's OpenMP threads spinning for a while (as a predict
# does): they burned 4-7 ms of CPU in the window where the next question was timed, and made
# Veritas's own 10-tree XGBoost time jump between 5 and 25 ms from run to run. Idle threads
# sleep instead (read when the OpenMP runtime starts, so before xgboost is imported).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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


def _predict(kind: str, clf, X: np.ndarray) -> np.ndarray:
    """The library's own ``predict``, on one thread (no OpenMP team left spinning after it)."""
    if kind == "lightgbm":
        return clf.predict(X, num_threads=1)
    if kind == "xgboost":
        clf.set_params(n_jobs=1)
    return clf.predict(X)


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
    return res, seconds


def _confirmed(kind, clf, res, feats, c) -> bool:
    """Every counterexample of *res* is one for the library's own ``predict`` too."""
    confirmed = True
    for cex in res.counterexamples:
        x = np.array([[cex.input[f"f{j}"] for j in range(len(feats))]])
        confirmed &= int(_predict(kind, clf, x)[0]) != c
    return confirmed


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
    ap.add_argument("--relational", action="store_true")
    ap.add_argument("--z3-timeout", type=float, default=10.0)
    args = ap.parse_args()
    if args.relational:
        relational_main(args)
        return
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
                classes = _predict(kind, clf, X[[i for i, _ in QUERIES]])
                for (i, eps), c in zip(QUERIES, classes.tolist(), strict=True):
                    lo, hi = _box(X, i, eps)
                    res, tc = _clefprove(kind, clf, path, spec_path, feats, lo, hi, c, args.timeout)
                    sc = res.status
                    sv, tv = _veritas(kind, clf, lo, hi, c, args.timeout)
                    confirmed_all &= _confirmed(kind, clf, res, feats, c)
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


# ---------------------------------------------------------------- relational invariants

REL_QUERIES = [(0, 0.05), (0, 0.3), (77, 0.3), (19, 1.0)]
REL_PROPS = ["monotone", "stable", "independent"]


def _rel_model(kind, clf, path, spec_path, feats):
    import clefprove
    from clefprove.model.importers import import_model

    if kind == "forest":
        return clefprove.from_sklearn(clf, feats, actions=["class_0", "class_1"])
    return import_model(kind, path, spec_path)


def _rel_text(prop: str, f: int, delta: float, lo, hi) -> str:
    cond = " and ".join(
        f"f{j} >= {float(a)!r} and f{j} <= {float(b)!r}"
        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
        if j != f
    )
    ensure = {
        "monotone": f"monotone(f{f})",
        "stable": f"stable(f{f}, {delta!r})",
        "independent": f"independent(f{f})",
    }[prop]
    # breast_cancer: larger measurements lean malignant (class 0), the more severe outcome
    return f"severity class_1 < class_0\ninvariant p:\n  when {cond}\n  ensure {ensure}\n"


def _rel_clefprove(kind, clf, path, spec_path, feats, text, timeout):
    from clefprove.dsl.loader import parse_text
    from clefprove.verify.ensemble_rel import check_ensemble_relational
    from clefprove.verify.options import CheckOptions

    t0 = time.perf_counter()
    model = _rel_model(kind, clf, path, spec_path, feats)
    prog = parse_text(text, model)
    res = check_ensemble_relational(
        model, prog.invariants[0], prog.severity, CheckOptions(timeout=timeout), 1
    )
    seconds = time.perf_counter() - t0
    confirmed = True
    for cex in res.counterexamples:
        xs = [np.array([[r[f"f{j}"] for j in range(len(feats))]]) for r in cex.inputs]
        got = [f"class_{int(clf.predict(x)[0])}" for x in xs]
        confirmed &= tuple(got) == tuple(cex.actions)
        confirmed &= cex.actions[0] != cex.actions[1]
    return str(res.status), seconds, confirmed


def _rel_z3(kind, clf, path, spec_path, feats, prop, f, delta, lo, hi, timeout):
    """The pair query on a whole-model Z3 encoding over the reals (see module docstring)."""
    from fractions import Fraction

    import z3

    from clefprove.model.types import NodeKind

    t0 = time.perf_counter()
    model = _rel_model(kind, clf, path, spec_path, feats)
    F = len(feats)
    xs = [z3.Real(f"x{j}") for j in range(F)]
    ys = list(xs)
    ys[f] = z3.Real("y_f")
    cons = []
    for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if j != f:
            cons += [xs[j] >= Fraction(float(a)), xs[j] <= Fraction(float(b))]
    fmin, fmax = Fraction(feats[f]["min"]), Fraction(feats[f]["max"])
    cons += [xs[f] >= fmin, xs[f] <= fmax, ys[f] >= fmin, ys[f] <= fmax]
    c = model.combine

    def score(v, k):
        total = z3.RealVal(Fraction(c.base[k]))
        for t in range(model.n_trees):
            nodes = model.tree(t).nodes
            memo: dict[int, object] = {}

            def build(i, nodes=nodes, memo=memo):
                if i in memo:
                    return memo[i]
                if int(nodes["kind"][i]) == NodeKind.LEAF:
                    value = float(model.values[int(nodes["aux"][i]), k])  # aux: value row
                    out = z3.RealVal(Fraction(value))
                else:
                    test = v[int(nodes["feature"][i])] <= Fraction(float(nodes["value"][i]))
                    out = z3.If(test, build(int(nodes["left"][i])), build(int(nodes["right"][i])))
                memo[i] = out
                return out

            total = total + build(0)
        return total

    if c.outputs == 1:
        cls = [score(v, 0) > 0 for v in (xs, ys)]  # margin > 0: class 1 (p1 > 0.5)
    else:
        cls = [score(v, 1) > score(v, 0) for v in (xs, ys)]  # averaged shares, ties: class 0
    if prop == "monotone":  # severity class_1 < class_0: x_f < y_f, x class 0, y class 1
        cons += [xs[f] < ys[f], z3.Not(cls[0]), cls[1]]
    else:
        if prop == "stable":
            d = Fraction(delta)
            cons += [xs[f] - ys[f] <= d, ys[f] - xs[f] <= d]
        cons += [cls[0] != cls[1]]
    s = z3.Solver()
    s.set("timeout", int(timeout * 1000))
    s.add(*cons)
    r = s.check()
    seconds = time.perf_counter() - t0
    return ("violated" if r == z3.sat else "holds" if r == z3.unsat else "unknown"), seconds


def relational_main(args) -> None:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    feats = _features(X)
    sd = X.std(axis=0)
    rows = []
    totals: dict[str, list[float]] = {}
    warm = False
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
        for kind in args.kinds:
            for n in args.trees:
                clf, path = _train(kind, n, X, y, Path(tmp))
                model = _rel_model(kind, clf, path, spec_path, feats)
                nodes = model.nodes
                used = np.bincount(nodes["feature"][nodes["kind"] != 0], minlength=X.shape[1])
                f = int(np.argmax(used))
                delta = float(0.1 * sd[f])
                for prop in REL_PROPS:
                    if not warm:  # module imports outside the timings
                        lo, hi = _box(X, 0, 0.05)
                        text = _rel_text(prop, f, delta, lo, hi)
                        _rel_clefprove(kind, clf, path, spec_path, feats, text, args.timeout)
                        _rel_z3(kind, clf, path, spec_path, feats, prop, f, delta, lo, hi, 1.0)
                        warm = True
                    t_c, t_z = [], []
                    counts = {"holds": 0, "violated": 0, "unknown": 0}
                    z_unknown = agree = decided = 0
                    confirmed_all = True
                    for i, eps in REL_QUERIES:
                        lo, hi = _box(X, i, eps)
                        text = _rel_text(prop, f, delta, lo, hi)
                        sc, tc, ok = _rel_clefprove(
                            kind, clf, path, spec_path, feats, text, args.timeout
                        )
                        sz, tz = _rel_z3(
                            kind,
                            clf,
                            path,
                            spec_path,
                            feats,
                            prop,
                            f,
                            delta,
                            lo,
                            hi,
                            args.z3_timeout,
                        )
                        confirmed_all &= ok
                        counts[sc] += 1
                        z_unknown += sz == "unknown"
                        t_c.append(tc)
                        t_z.append(tz)
                        if sc != "unknown" and sz != "unknown":
                            decided += 1
                            agree += sc == sz
                    tot_c, tot_z = sum(t_c), sum(t_z)
                    totals.setdefault(prop, []).append(tot_c / tot_z)
                    rows.append(
                        [
                            kind,
                            n,
                            prop,
                            f"{counts['holds']}/{counts['violated']}/{counts['unknown']}",
                            f"{agree}/{decided}",
                            z_unknown,
                            "yes" if confirmed_all else "NO",
                            f"{float(np.median(t_c)) * 1e3:.0f}",
                            f"{max(t_c) * 1e3:.0f}",
                            f"{float(np.median(t_z)) * 1e3:.0f}",
                            f"{max(t_z) * 1e3:.0f}",
                            f"{tot_c / tot_z:.3f}",
                        ]
                    )
                    print(*rows[-1], flush=True)
    print()
    print(machine())
    print(
        f"{len(REL_QUERIES)} queries per model and property (row, eps: {REL_QUERIES}); "
        f"clefprove budget {args.timeout:g} s, Z3 timeout {args.z3_timeout:g} s (a Z3 time-out "
        "counts its full time)"
    )
    print(
        table(
            [
                "model",
                "trees",
                "property",
                "clefprove holds/violated/unknown",
                "same verdict as Z3",
                "Z3 unknown",
                "cex confirmed by predict",
                "clefprove median ms",
                "clefprove max ms",
                "Z3 median ms",
                "Z3 max ms",
                "ratio (total time)",
            ],
            rows,
        )
    )
    for prop, ratios in totals.items():
        print(
            f"{prop}: geometric mean of clefprove/Z3 total-time ratios "
            f"{math.exp(np.mean(np.log(ratios))):.3f}"
        )


if __name__ == "__main__":
    main()
