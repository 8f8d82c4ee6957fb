"""Issue 13's exactness grid: imported ensembles against each library's own predict.

For every library route (scikit-learn RandomForest / ExtraTrees / GradientBoosting through
``from_sklearn``, XGBoost and LightGBM through their saved files), data set (the ones bundled with
scikit-learn and the edge example's), tree count and depth: train, import, build rows from every
threshold of the model and the library (their float64 and float32 neighbours, the float32
rounding boundaries, 0, huge values, the domain bounds; ``tests/ensembles/test_importers.py``'s
generator) and count rows whose class differs from ``predict``, the largest difference from
``predict_proba``, and raw margins that differ from the library's by even one bit.

    python bench/bench_exactness.py                       # the whole grid, 100,000 rows each
    python bench/bench_exactness.py --rows 20000 --trees 10 --depths 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import clefprove
from bench.common import example_module, table
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import import_model
from tests.ensembles.test_importers import (
    boundary_rows,
    lightgbm_thresholds,
    sklearn_thresholds,
    xgboost_thresholds,
)

F32_MAX = float(np.finfo(np.float32).max)
F64_MAX = float(np.finfo(np.float64).max)
LIBS = ("forest", "extra", "gboost", "xgboost", "lightgbm")
DATA = ("breast_cancer", "iris", "wine", "digits", "edge")


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "edge":
        X, y = example_module().generate(20_000, seed=7)
        return np.asarray(X, dtype=np.float64), np.asarray(y)
    from sklearn import datasets

    return getattr(datasets, f"load_{name}")(return_X_y=True)  # type: ignore[no-any-return]


def _wide(n: int, top: float) -> list[dict[str, object]]:
    return [
        {"name": f"f{i}", "type": "float", "min": -top, "max": top, "default": 0.0}
        for i in range(n)
    ]


def _one(lib: str, data: str, trees: int, depth: int, rows: int, tmp: Path) -> list[str]:
    X, y = _data(data)
    t_fit = time.perf_counter()
    margin: np.ndarray | None = None
    if lib in ("forest", "extra", "gboost"):
        import sklearn.ensemble as se

        cls = {
            "forest": se.RandomForestClassifier,
            "extra": se.ExtraTreesClassifier,
            "gboost": se.GradientBoostingClassifier,
        }[lib]
        clf = cls(n_estimators=trees, max_depth=depth, random_state=0).fit(X, y)
        fit_s = time.perf_counter() - t_fit
        names = [f"c{k}" for k in range(len(clf.classes_))]
        t0 = time.perf_counter()
        model = clefprove.from_sklearn(clf, _wide(X.shape[1], F32_MAX), actions=names)
        import_s = time.perf_counter() - t0
        thr = sklearn_thresholds(clf, X.shape[1])
        R = np.clip(boundary_rows(model, X, rows, 1, thr), -F32_MAX, F32_MAX)
        tol = 1e-12
    elif lib == "xgboost":
        import xgboost as xgb

        clf = xgb.XGBClassifier(n_estimators=trees, max_depth=depth, random_state=0).fit(X, y)
        fit_s = time.perf_counter() - t_fit
        path = tmp / "m.json"
        clf.get_booster().save_model(path)
        t0 = time.perf_counter()
        model = import_model("xgboost", path)
        import_s = time.perf_counter() - t0
        assert isinstance(model, Ensemble)
        R = boundary_rows(model, X, rows, 2, xgboost_thresholds(clf.get_booster()))
        R = np.clip(R, -F32_MAX, F32_MAX)  # XGBoost refuses inputs that overflow float32
        margin = clf.get_booster().predict(xgb.DMatrix(R), output_margin=True)
        tol = 1e-6
    else:
        import lightgbm as lgb

        clf = lgb.LGBMClassifier(
            n_estimators=trees, max_depth=depth, num_leaves=min(2**depth, 63), random_state=0,
            verbose=-1,
        ).fit(X, y)  # fmt: skip
        fit_s = time.perf_counter() - t_fit
        path = tmp / "m.txt"
        clf.booster_.save_model(path)
        t0 = time.perf_counter()
        model = import_model("lightgbm", path)
        import_s = time.perf_counter() - t0
        assert isinstance(model, Ensemble)
        R = boundary_rows(model, X, rows, 3, lightgbm_thresholds(path))
        margin = clf.booster_.predict(R, raw_score=True)
        tol = 1e-12
    assert isinstance(model, Ensemble)
    t0 = time.perf_counter()
    b = EnsembleEvaluator(model).evaluate(R)
    eval_s = time.perf_counter() - t0
    pred, proba = clf.predict(R), clf.predict_proba(R)
    bad = int(np.count_nonzero(clf.classes_[b.actions] != pred))
    err = float(np.abs(proba[np.arange(len(R)), b.actions] - b.confidences).max())
    bits = "n/a"
    if margin is not None:
        m = np.asarray(margin).reshape(len(R), -1)
        bits = str(int(np.count_nonzero(np.any(b.scores.reshape(m.shape) != m, axis=1))))
    ok = bad == 0 and err <= tol and bits in ("0", "n/a")
    return [
        lib, data, str(trees), str(depth), str(model.n_trees), f"{model.n_nodes:,}",
        f"{len(R):,}", str(bad), f"{err:.1e}", bits, f"{fit_s:.1f}", f"{import_s * 1e3:.1f}",
        f"{eval_s * 1e3:.0f}", "yes" if ok else "NO",
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    ap.add_argument("--data", nargs="+", default=list(DATA), choices=DATA)
    ap.add_argument("--trees", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--depths", type=int, nargs="+", default=[3, 8])
    args = ap.parse_args()
    out = []
    with tempfile.TemporaryDirectory() as d:
        for lib in args.libs:
            for data in args.data:
                for trees in args.trees:
                    for depth in args.depths:
                        row = _one(lib, data, trees, depth, args.rows, Path(d))
                        print(" | ".join(row), flush=True, file=sys.stderr)
                        out.append(row)
    header = [
        "library", "data", "trees asked", "depth", "trees (clef)", "nodes", "rows",
        "class mismatches", "max proba diff", "margin rows differing", "fit s", "import ms",
        "eval ms", "exact",
    ]  # fmt: skip
    print(table(header, out))
    n_bad = sum(r[-1] != "yes" for r in out)
    total = sum(int(r[6].replace(",", "")) for r in out)
    print(f"\n{len(out)} models, {total:,} rows, {n_bad} models not exact")


if __name__ == "__main__":
    main()
