"""Benchmark: the C library's float64 ``exp`` (``math.exp``, bit-exact with LightGBM and
scikit-learn) against numpy's SIMD ``exp`` (the baseline, off in the last bit for a few percent
of arguments), measured in the same run: the ``exp`` alone, batch evaluation of LightGBM and
GradientBoosting ensembles, and ``check`` of a confidence invariant on a LightGBM model.

Run: ``python bench/bench_exp.py [--rows 200000]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_seconds, machine, median, table, time_call

import clefprove.eval.ensemble as ens
from clefprove.dsl.loader import parse_text
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.importers import import_model
from clefprove.model.sklearn import from_sklearn
from clefprove.verify.api import check


def _numpy_exp(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.exp(x)
    return out


def _both(fn) -> tuple[float, float]:
    """Median seconds of *fn* with numpy's exp (baseline) and with the C library's."""
    exact = ens._exp64
    try:
        ens._exp64 = _numpy_exp  # type: ignore[assignment]
        fn()  # warm up
        base = median(time_call(fn, repeat=5))
    finally:
        ens._exp64 = exact  # type: ignore[assignment]
    fn()
    new = median(time_call(fn, repeat=5))
    return base, new


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import lightgbm as lgb
    from sklearn.datasets import load_breast_cancer, load_wine
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    rows = []
    x = rng.uniform(-20, 20, args.rows * 3)
    b, n = _both(lambda: ens._exp64(x))
    rows.append((f"exp of {x.size:,} float64", fmt_seconds(b), fmt_seconds(n), f"{n / b:.1f}x"))

    tmp = Path(tempfile.mkdtemp())
    Xw, yw = load_wine(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    models = []
    for name, X, y, obj in (("wine", Xw, yw, "multiclass"), ("breast_cancer", Xb, yb, "binary")):
        clf = lgb.LGBMClassifier(objective=obj, n_estimators=50, num_leaves=15, verbose=-1)
        clf.fit(X, y)
        path = tmp / f"{name}.txt"
        clf.booster_.save_model(path)
        models.append((f"LightGBM {obj} 50 trees ({name})", import_model("lightgbm", path), X))
    gb = GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0).fit(Xb, yb)
    feats = [
        {"name": f"f{i}", "type": "float", "min": float(Xb[:, i].min()),
         "max": float(Xb[:, i].max()), "default": float(Xb[:, i].min())}
        for i in range(Xb.shape[1])
    ]  # fmt: skip
    gbm = from_sklearn(gb, feats, actions=["malignant", "benign"])
    models.append(("GradientBoosting binary 50 trees", gbm, Xb))
    for label, model, X in models:
        R = rng.uniform(X.min(axis=0), X.max(axis=0), size=(args.rows, X.shape[1]))
        ev = EnsembleEvaluator(model)
        b, n = _both(lambda ev=ev, R=R: ev.evaluate(R))
        rows.append((f"evaluate {args.rows:,} rows, {label}", fmt_seconds(b), fmt_seconds(n),
                     f"{n / b:.2f}x"))  # fmt: skip

    model = models[1][1]
    f0 = model.features[0].name
    text = f"invariant c:\n  when {f0} <= 15\n  ensure confidence >= 0.6\n"
    prog = parse_text(text, model)
    b, n = _both(lambda: check(model, prog, counterexamples=1))
    rows.append(("check 'confidence >= 0.6', LightGBM binary", fmt_seconds(b), fmt_seconds(n),
                 f"{n / b:.2f}x"))  # fmt: skip
    print(machine())
    print()
    print(table(("what", "numpy exp (baseline)", "C library exp", "ratio"), rows))


if __name__ == "__main__":
    main()
