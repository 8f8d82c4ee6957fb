"""Benchmark: importing ONNX tree ensembles, and clefprove's decisions against onnxruntime.

Models (breast_cancer and digits, bundled with scikit-learn): XGBoost (depth 4) and
scikit-learn random forests (depth 6) with 10, 50 and 200 trees, LightGBM with 20 iterations
on digits (200 trees).  Each is exported to ONNX (onnxmltools / skl2onnx) and also saved in
its library's own route (XGBoost JSON, ``from_sklearn``, LightGBM text), both timed in the same
run: the ratio is ONNX import time / native import time.  Then 100,000 boundary rows
(``tests/ensembles/test_importers.boundary_rows``) are decided by clefprove's evaluator and by
onnxruntime with one intra-op thread (the bit-exact reference); the table gives both times,
their ratio and the label / probability mismatches (must be 0).

Run: ``python bench/bench_onnx.py [--rows 100000] [--trees 10 50 200]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import fmt_seconds, machine, median, table  # noqa: E402


def _best(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return median(times), out


def _models(trees: list[int], tmp: Path) -> list[tuple[str, Path, Any, np.ndarray]]:
    """(name, onnx path, native import thunk, X)."""
    import lightgbm as lgb
    import onnxmltools
    import skl2onnx
    import xgboost as xgb
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.ensemble import RandomForestClassifier

    import clefprove
    from clefprove.model.importers import import_model

    out = []
    X, y = load_breast_cancer(return_X_y=True)
    X32 = X.astype(np.float32)
    types = [("input", FloatTensorType([None, X.shape[1]]))]
    for n in trees:
        clf = xgb.XGBClassifier(n_estimators=n, max_depth=4, random_state=0).fit(X32, y)
        native = tmp / f"xgb{n}.json"
        clf.get_booster().save_model(native)
        path = tmp / f"xgb{n}.onnx"
        proto = onnxmltools.convert_xgboost(clf, initial_types=types, target_opset=15)
        path.write_bytes(proto.SerializeToString())
        out.append((f"XGBoost {n} trees", path, lambda p=native: import_model("xgboost", p), X))
    for n in trees:
        rf = RandomForestClassifier(n_estimators=n, max_depth=6, random_state=0).fit(X32, y)
        path = tmp / f"rf{n}.onnx"
        proto = skl2onnx.to_onnx(
            rf, X32[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3}
        )
        path.write_bytes(proto.SerializeToString())
        feats = [
            {"name": f"f{i}", "type": "float", "min": -3.4e38, "max": 3.4e38, "default": 0.0}
            for i in range(X.shape[1])
        ]
        out.append(
            (
                f"RandomForest {n} trees",
                path,
                lambda rf=rf, feats=feats: clefprove.from_sklearn(rf, feats, actions=["a", "b"]),
                X,
            )
        )
    Xd, yd = load_digits(return_X_y=True)
    Xd32 = Xd.astype(np.float32)
    g = lgb.LGBMClassifier(n_estimators=20, max_depth=5, verbose=-1, random_state=0).fit(Xd32, yd)
    native = tmp / "lgb.txt"
    g.booster_.save_model(native)
    path = tmp / "lgb.onnx"
    proto = onnxmltools.convert_lightgbm(
        g, initial_types=[("input", FloatTensorType([None, 64]))], target_opset=15, zipmap=False
    )
    path.write_bytes(proto.SerializeToString())
    out.append(("LightGBM digits 200 trees", path, lambda: import_model("lightgbm", native), Xd))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--trees", type=int, nargs="+", default=[10, 50, 200])
    args = ap.parse_args()
    import onnxruntime as ort

    from clefprove.eval.ensemble import EnsembleEvaluator
    from clefprove.model.importers import import_model
    from tests.ensembles.test_importers import boundary_rows
    from tests.ensembles.test_onnx_ensembles import _thresholds, mismatches

    ort.set_default_logger_severity(3)
    rows = []
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, path, native, X in _models(args.trees, Path(d)):
            t_onnx, model = _best(lambda p=path: import_model("onnx", p))
            t_native, _ = _best(native)
            R = boundary_rows(model, X, args.rows, 7, _thresholds(path))
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: R.astype(np.float32)}
            t_ort, _ = _best(lambda s=sess, f=feed: s.run(None, f))
            ev = EnsembleEvaluator(model)
            t_eval, _ = _best(lambda e=ev, r=R: e.evaluate(r))
            bad_l, bad_p, _ = mismatches(model, path, R)
            rows.append(
                [
                    name,
                    model.n_trees,
                    fmt_seconds(t_onnx),
                    fmt_seconds(t_native),
                    f"{t_onnx / t_native:.2f}",
                    fmt_seconds(t_eval),
                    fmt_seconds(t_ort),
                    f"{t_eval / t_ort:.1f}",
                    f"{bad_l} / {bad_p}",
                ]
            )
    print(machine())
    print(f"{args.rows:,} boundary rows per model; onnxruntime {ort.__version__}, 1 thread\n")
    print(
        table(
            [
                "model",
                "trees (clef)",
                "ONNX import",
                "native import",
                "ratio",
                "clefprove eval",
                "onnxruntime run",
                "ratio",
                "mismatches label / proba",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
