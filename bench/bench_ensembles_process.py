"""Benchmark: box properties on tree ensembles as whole processes, clefprove against
dtai-veritas, same run.

The questions and models of ``bench_ensembles.py`` (breast_cancer; XGBoost, LightGBM and
random forests), each asked the way a user asks it from a shell, one process per question,
from files on disk:

* clefprove: ``python -m clefprove check MODEL.clef BOX.inv --no-cache --counterexamples 1``
  (the model imported once beforehand, as a CI gate has it);
* Veritas, from its own saved model (``AddTree.write`` beforehand, ``AddTree.read`` in the
  process: the counterpart of a ``.clef`` file), then the search of ``bench_ensembles.py``;
* Veritas, from the library's model file (the pickle for the forest, the XGBoost JSON, the
  LightGBM text), converted with ``get_addtree`` in the process, as a user without a saved
  AddTree runs it: this one imports the library.

The three commands run in turn, question by question, ``--reps`` times each after one warm-up
round; the table gives the median wall time per command and the ratios of the medians.  Both
tools answer every question with the same verdict (checked here).  Whole processes include the
interpreter's start and the imports (numpy for all three), so they say what a shell or CI
user waits, not what the search costs: ``bench_ensembles.py`` times that in process.

Run: ``python bench/bench_ensembles_process.py [--trees 10 50] [--reps 5] [--questions 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_ensembles import QUERIES, _box, _features, _predict, _train  # noqa: E402
from bench.common import machine, table  # noqa: E402

_VERITAS = """
import json, sys
import numpy as np
import veritas
kind, source, model_file, q = sys.argv[1], sys.argv[2], sys.argv[3], json.load(open(sys.argv[4]))
if source == "addtree":
    at = veritas.AddTree.read(model_file)
else:
    if kind == "forest":
        import pickle
        with open(model_file, "rb") as fh:
            clf = pickle.load(fh)
    elif kind == "xgboost":
        import xgboost as xgb
        clf = xgb.XGBClassifier()
        clf.load_model(model_file)
    else:
        import lightgbm as lgb
        clf = lgb.Booster(model_file=model_file)
    at = veritas.get_addtree(clf, silent=True)
threshold = 0.5 if kind == "forest" else 0.0
box = [veritas.Interval(float(a), float(np.nextafter(b, np.inf))) for a, b in zip(q["lo"], q["hi"])]
h = veritas.HeuristicType.MAX_OUTPUT if q["c"] == 0 else veritas.HeuristicType.MIN_OUTPUT
cfg = veritas.Config(h)
cfg.ignore_state_when_worse_than = threshold
cfg.stop_when_num_solutions_exceeds = 1
s = cfg.get_search(at, box)
r = s.step_for(30, 100)
while r == veritas.StopReason.NONE and s.time_since_start() < 30:
    r = s.step_for(30 - s.time_since_start(), 100)
out = [s.get_solution(k).output for k in range(s.num_solutions())]
if any((o > threshold) == (q["c"] == 0) for o in out):
    print("violated")
elif r in (veritas.StopReason.NO_MORE_OPEN, veritas.StopReason.OPTIMAL):
    print("holds")
else:
    print("unknown")
"""


def _run(cmd: list[str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    return r.stdout, seconds


def _verdict_of_check(out: str) -> str:
    result = json.loads(out)["results"][0]
    return str(result["status"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--kinds", nargs="+", default=["xgboost", "lightgbm", "forest"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--questions", type=int, default=4)
    args = ap.parse_args()
    import veritas
    from sklearn.datasets import load_breast_cancer

    import clefprove
    from clefprove.model.importers import import_model

    X, y = load_breast_cancer(return_X_y=True)
    feats = _features(X)
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        script = tmp / "veritas_box.py"
        script.write_text(_VERITAS)
        spec_path = tmp / "spec.json"
        spec_path.write_text(json.dumps({"features": feats, "actions": ["class_0", "class_1"]}))
        for kind in args.kinds:
            for n in args.trees:
                clf, path = _train(kind, n, X, y, tmp)
                if kind == "forest":
                    model = clefprove.from_sklearn(clf, feats, actions=["class_0", "class_1"])
                    path = tmp / f"forest{n}.pkl"
                    with path.open("wb") as fh:
                        pickle.dump(clf, fh)
                else:
                    model = import_model(kind, path, spec_path)
                clef = tmp / f"{kind}{n}.clef"
                clefprove.save(model, clef)
                at_file = tmp / f"{kind}{n}.addtree"
                veritas.get_addtree(clf, silent=True).write(str(at_file))
                classes = _predict(kind, clf, X[[i for i, _ in QUERIES]])
                times: dict[str, list[float]] = {"clefprove": [], "addtree": [], "library": []}
                same = 0
                verdicts = {"holds": 0, "violated": 0, "unknown": 0}
                for q, ((i, eps), c) in enumerate(
                    zip(QUERIES[: args.questions], classes.tolist(), strict=False)
                ):
                    lo, hi = _box(X, i, eps)
                    cond = " and ".join(
                        f"f{j} >= {float(a)!r} and f{j} <= {float(b)!r}"
                        for j, (a, b) in enumerate(zip(lo, hi, strict=True))
                    )
                    inv = tmp / f"q{q}.inv"
                    inv.write_text(f"invariant box:\n  when {cond}\n  ensure action == class_{c}\n")
                    qf = tmp / f"q{q}.json"
                    qf.write_text(json.dumps({"lo": lo.tolist(), "hi": hi.tolist(), "c": c}))
                    cmds = {
                        "clefprove": [
                            py, "-m", "clefprove", "check", str(clef), str(inv), "--no-cache",
                            "--counterexamples", "1", "--format", "json",
                        ],
                        "addtree": [py, str(script), kind, "addtree", str(at_file), str(qf)],
                        "library": [py, str(script), kind, "library", str(path), str(qf)],
                    }  # fmt: skip
                    per: dict[str, list[float]] = {k: [] for k in cmds}
                    outs: dict[str, str] = {}
                    for rep in range(args.reps + 1):
                        for name, cmd in cmds.items():
                            out, seconds = _run(cmd)
                            outs[name] = out
                            if rep:  # the first round warms the file cache
                                per[name].append(seconds)
                    mine = _verdict_of_check(outs["clefprove"])
                    verdicts[mine] += 1
                    same += mine == outs["addtree"].strip() == outs["library"].strip()
                    for name in cmds:
                        times[name].append(statistics.median(per[name]))
                    print(kind, n, q, mine, *(f"{times[k][-1]:.3f}" for k in cmds), flush=True)
                med = {k: float(np.median(v)) for k, v in times.items()}
                rows.append(
                    [
                        kind,
                        n,
                        f"{verdicts['holds']}/{verdicts['violated']}/{verdicts['unknown']}",
                        f"{same}/{len(times['clefprove'])}",
                        f"{med['clefprove'] * 1e3:.0f}",
                        f"{med['addtree'] * 1e3:.0f}",
                        f"{med['library'] * 1e3:.0f}",
                        f"{med['clefprove'] / med['addtree']:.2f}",
                        f"{med['clefprove'] / med['library']:.2f}",
                    ]
                )
    print()
    print(machine())
    print(f"whole processes; median over {args.reps} runs per question, then over the questions")
    print(
        table(
            [
                "model",
                "trees",
                "clefprove holds/violated/unknown",
                "same verdicts",
                "clefprove ms",
                "Veritas (saved AddTree) ms",
                "Veritas (library file) ms",
                "ratio to saved AddTree",
                "ratio to library file",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
