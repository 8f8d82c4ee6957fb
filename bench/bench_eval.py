"""Benchmark: model loading (mmap), batch evaluation against scikit-learn, single-input latency.

Prints Markdown tables (copied into docs/performance.md).  Run from the repository root:

    python bench/bench_eval.py            # full run (a couple of minutes)
    python bench/bench_eval.py --quick    # fewer repetitions and depths
    git show 97446e5:clefprove/eval/evaluator.py > /tmp/before.py
    python bench/bench_eval.py --batch-only --baseline /tmp/before.py   # before/after, all shapes
                                                   # (wall-clock and CPU tables, same calls)

Targets (issue 2): batch >= 1.0x scikit-learn's ``predict`` on 1,000,000 rows of the same tree
in the same run; loading the depth-12 example < 5 ms; one input < 20 µs in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    EXAMPLES,
    ROOT,
    example_module,
    fmt_seconds,
    machine,
    median,
    progress,
    table,
    time_call,
)

from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import encode_record
from clefprove.model.clef import encode_clef, load, write_clef
from clefprove.model.features import parse_features
from clefprove.model.types import NODE_DTYPE, NodeKind

EX = example_module()


# ----------------------------------------------------------------------------- loading
def bench_load_example(repeat: int) -> list[list[str]]:
    path = EXAMPLES / "edge-allow-block.clef"
    load(path)  # warm the page cache
    times = time_call(lambda: load(path), repeat=repeat)
    m = load(path)
    return [
        [
            "load depth-12 example (.clef, mmap + validation)",
            f"{m.n_nodes:,} nodes, {path.stat().st_size:,} bytes",
            f"median {fmt_seconds(median(times))}, min {fmt_seconds(min(times))} ({repeat} loads)",
            "< 5 ms",
        ]
    ]


def synthetic_complete_tree(depth: int, seed: int = 3) -> bytes:
    """A complete binary tree (2**(depth+1) - 1 nodes, pre-order) over the example features."""
    rng = np.random.default_rng(seed)
    n = 2 ** (depth + 1) - 1
    nodes = np.zeros(n, dtype=NODE_DTYPE)
    idx = np.zeros(1, dtype=np.int64)
    for d in range(depth + 1):
        size = 2 ** (depth - d + 1) - 1
        if d == depth:
            nodes["left"][idx] = idx
            nodes["right"][idx] = idx
            nodes["kind"][idx] = NodeKind.LEAF
            nodes["aux"][idx] = rng.integers(0, 4, len(idx))
            nodes["value"][idx] = rng.random(len(idx))
        else:
            left, right = idx + 1, idx + 1 + (size - 1) // 2
            f = rng.choice([0, 3], len(idx))  # client_rtt_ms, referer_entropy
            nodes["left"][idx], nodes["right"][idx] = left, right
            nodes["kind"][idx] = NodeKind.NUMERIC
            nodes["feature"][idx] = f
            nodes["value"][idx] = np.where(f == 0, rng.uniform(0, 10000, len(idx)), 0.0)
            nodes["value"][idx] += np.where(f == 3, rng.uniform(0, 8, len(idx)), 0.0)
            idx = np.concatenate((left, right))
    # depths, level by level (pre-order index -> depth)
    level = np.zeros(1, dtype=np.int64)
    for d in range(depth + 1):
        nodes["depth"][level] = d
        if d < depth:
            level = np.concatenate((nodes["left"][level], nodes["right"][level])).astype(np.int64)
    features = parse_features(EX.FEATURES)
    membership = np.zeros(0, dtype=np.uint8)
    return encode_clef("synthetic", "1", features, tuple(EX.ACTIONS), nodes, membership, depth)


_RSS_PROBE = r"""
import json, sys, time
import numpy as np
from clefprove.model.clef import load

def status():
    out = {}
    for line in open("/proc/self/status"):
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(rest.split()[0]) / 1024.0
    return out

path = sys.argv[1]
before = status()
t0 = time.perf_counter()
model = load(path)
t_load = time.perf_counter() - t0
after_load = status()
checksum = float(np.sum(model.nodes["value"]))  # touch every node record
after_touch = status()
copy = np.array(model.nodes)  # a private copy, for contrast
after_copy = status()
print(json.dumps({"load_s": t_load, "before": before, "after_load": after_load,
                  "after_touch": after_touch, "after_copy": after_copy,
                  "nodes": model.n_nodes, "mapped": not model.nodes.flags.owndata}))
"""


def bench_load_large(depth: int, repeat: int) -> tuple[list[list[str]], list[list[str]]]:
    progress(f"building a synthetic complete tree of depth {depth} ...")
    data = synthetic_complete_tree(depth)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.clef"
        path.write_bytes(data)
        runs = []
        for _ in range(repeat):
            p = subprocess.run(
                [sys.executable, "-c", _RSS_PROBE, str(path)],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            runs.append(json.loads(p.stdout))
        model = load(path)
        t0 = time.perf_counter()
        ev = Evaluator(model)
        t_derive = time.perf_counter() - t0
        X, _ = EX.generate(100_000, seed=5)
        t_eval = median(time_call(lambda: ev.evaluate(X), repeat=3))
    r = runs[len(runs) // 2]
    n = r["nodes"]
    mb = n * NODE_DTYPE.itemsize / 2**20

    def delta(a: str, b: str, key: str) -> str:
        return f"{r[b][key] - r[a][key]:+.1f} MiB"

    load_rows = [
        [
            f"load synthetic model ({n:,} nodes, {len(data) / 2**20:.1f} MiB)",
            "fresh process, page cache warm",
            f"median {fmt_seconds(median([x['load_s'] for x in runs]))} ({repeat} processes)",
            "",
        ],
        [
            "Evaluator(model) on it (derived lookup arrays, once per model)",
            f"heap {ev.heap_levels} + table {depth - ev.heap_levels} levels",
            fmt_seconds(t_derive),
            "",
        ],
        [
            "batch evaluate 100,000 rows on it",
            f"depth {depth}",
            f"{fmt_seconds(t_eval)} ({100_000 / t_eval / 1e6:.1f} M rows/s)",
            "",
        ],
    ]
    rss_rows = [
        ["after load", delta("before", "after_load", "RssAnon"),
         delta("before", "after_load", "RssFile"), f"{r['after_load']['VmHWM']:.0f} MiB"],
        ["after touching every node", delta("before", "after_touch", "RssAnon"),
         delta("before", "after_touch", "RssFile"), f"{r['after_touch']['VmHWM']:.0f} MiB"],
        [f"after np.array(nodes) (a {mb:.0f} MiB copy, for contrast)",
         delta("before", "after_copy", "RssAnon"), delta("before", "after_copy", "RssFile"),
         f"{r['after_copy']['VmHWM']:.0f} MiB"],
    ]  # fmt: skip
    rss_rows.insert(
        0,
        ["before load (imports only)", "0", "0", f"{r['before']['VmHWM']:.0f} MiB"],
    )
    assert r["mapped"], "the node array should be a view over the mapping"
    return load_rows, rss_rows


# ----------------------------------------------------------------------------- batch
def bench_batch(depths: list[int], rows: int, repeat: int) -> list[list[str]]:
    out = []
    X, _ = EX.generate(rows, seed=99)
    for depth in depths:
        progress(f"training depth {depth} ...")
        clf, model = EX.build(depth)
        note = ""
        if depth == 12:
            # The trained tree is the committed 1.0.0 example (1.1.0 adds a release policy).
            same = write_clef(model) == (EXAMPLES / "edge-allow-block-1.0.0.clef").read_bytes()
            note = " (= example 1.0.0)" if same else " (differs from example 1.0.0!)"
        ev = Evaluator(model)
        res = ev.evaluate(X)
        expected = clf.predict(X)
        # the example's labels are action indices (0..3), mapped to EX.ACTIONS in that order
        agree = bool((np.array(model.actions)[res.actions] == np.array(EX.ACTIONS)[expected]).all())
        t_sk, t_ours = [], []
        for _ in range(repeat):  # interleaved, so both see the same machine load
            t_sk += time_call(lambda c=clf: c.predict(X), repeat=1)
            t_ours += time_call(lambda e=ev: e.evaluate(X), repeat=1)
        sk, ours = median(t_sk), median(t_ours)
        best = min(t_sk) / min(t_ours)
        out.append(
            [
                f"{depth}{note}",
                f"{model.n_nodes:,}",
                f"heap {ev.heap_levels}"
                + (f" + table {depth - ev.heap_levels}" if depth > ev.heap_levels else ""),
                f"{sk * 1e3:.1f} ms",
                f"{ours * 1e3:.1f} ms",
                f"{rows / ours / 1e6:.1f} M",
                f"**{sk / ours:.2f}x**",
                f"{best:.2f}x",
                "yes" if agree else "NO",
            ]
        )
    return out


def bench_deep(rows: int, repeat: int) -> list[list[str]]:
    """Deep, unbalanced trees (scikit-learn without depth limit), same run as their predict."""
    from sklearn.tree import DecisionTreeClassifier

    from clefprove.model.sklearn import from_sklearn

    X, _ = EX.generate(rows, seed=99)
    out = []
    for n_train in (125_000, 1_000_000):
        progress(f"training an unlimited-depth tree on {n_train:,} rows ...")
        Xt, yt = EX.generate(n_train)
        clf = DecisionTreeClassifier(random_state=20261129).fit(Xt, yt)
        model = from_sklearn(clf, features=EX.FEATURES, actions=EX.ACTIONS, name="d", version="1")
        ev = Evaluator(model)
        res = ev.evaluate(X)
        agree = bool(
            (np.array(model.actions)[res.actions] == np.array(EX.ACTIONS)[clf.predict(X)]).all()
        )
        mean_depth = float(model.nodes["depth"][res.leaves].mean())
        t_sk, t_ours = [], []
        for _ in range(repeat):
            t_sk += time_call(lambda c=clf: c.predict(X), repeat=1)
            t_ours += time_call(lambda e=ev: e.evaluate(X), repeat=1)
        sk, ours = median(t_sk), median(t_ours)
        out.append(
            [
                f"{model.max_depth} (mean row depth {mean_depth:.0f})",
                f"{model.n_nodes:,}",
                f"{sk * 1e3:.0f} ms",
                f"{ours * 1e3:.0f} ms",
                f"**{sk / ours:.2f}x**",
                f"{min(t_sk) / min(t_ours):.2f}x",
                "yes" if agree else "NO",
            ]
        )
    return out


def _load_evaluator(path: str):
    """The ``Evaluator`` class of another version's ``clefprove/eval/evaluator.py`` (e.g. from
    ``git archive``), loaded next to this one for a same-run before/after comparison."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_evaluator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_evaluator"] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module.Evaluator


def _timed_call(fn) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one call of *fn* (CPU time is less sensitive
    than wall time to other jobs on a loaded machine)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def bench_compare(rows: int, repeat: int, baseline: str) -> tuple[list[list[str]], list[list[str]]]:
    """Every tree shape: scikit-learn's predict, the baseline evaluator and this one (as
    configured by default, and held to one thread), interleaved in one run (1,000,000 rows;
    medians and best runs): a table in wall-clock time and one in process CPU time, from the
    same calls."""
    from sklearn.tree import DecisionTreeClassifier

    from clefprove.model.sklearn import from_sklearn

    Before = _load_evaluator(baseline)
    X, _ = EX.generate(rows, seed=99)
    trees = []
    for depth in (8, 12, 16, 20):
        progress(f"training depth {depth} ...")
        clf, model = EX.build(depth)
        trees.append((f"{depth}", clf, model))
    for n_train in (125_000, 1_000_000):
        progress(f"training an unlimited-depth tree on {n_train:,} rows ...")
        Xt, yt = EX.generate(n_train)
        clf = DecisionTreeClassifier(random_state=20261129).fit(Xt, yt)
        model = from_sklearn(clf, features=EX.FEATURES, actions=EX.ACTIONS, name="d", version="1")
        trees.append((f"{model.max_depth}", clf, model))
    out: tuple[list[list[str]], list[list[str]]] = ([], [])
    for label, clf, model in trees:
        before, after = Before(model), Evaluator(model)
        single = Evaluator(model, threads=1)
        res = after.evaluate(X)
        expected = np.array(EX.ACTIONS)[clf.predict(X)]
        agree = bool((np.array(model.actions)[res.actions] == expected).all())
        agree &= bool((before.evaluate(X).leaves == res.leaves).all())
        agree &= bool((single.evaluate(X).leaves == res.leaves).all())
        mean_depth = float(model.nodes["depth"][res.leaves].mean())
        calls: list[tuple[tuple[float, float], ...]] = []
        threads: list[int] = []
        for _ in range(repeat):  # interleaved, so all of them see the same machine load
            threads.append(after.threads_for(rows))  # what the next call decides
            calls.append(
                (
                    _timed_call(lambda c=clf: c.predict(X)),
                    _timed_call(lambda e=before: e.evaluate(X)),
                    _timed_call(lambda e=after: e.evaluate(X)),
                    _timed_call(lambda e=single: e.evaluate(X)),
                )
            )
        for k, table_rows in enumerate(out):  # 0: wall, 1: CPU
            t_sk, t_b, t_a, t_1 = ([c[j][k] for c in calls] for j in range(4))
            sk, b, a, one = median(t_sk), median(t_b), median(t_a), median(t_1)
            table_rows.append(
                [
                    f"{label} (mean row depth {mean_depth:.0f})",
                    f"{model.n_nodes:,}",
                    f"{sk * 1e3:.0f} ms",
                    f"{b * 1e3:.0f} ms",
                    f"{a * 1e3:.0f} ms ({sum(t > 1 for t in threads)}/{repeat} threaded)",
                    f"{one * 1e3:.0f} ms",
                    f"{sk / b:.2f}x / {min(t_sk) / min(t_b):.2f}x",
                    f"**{sk / a:.2f}x** / {min(t_sk) / min(t_a):.2f}x",
                    f"{sk / one:.2f}x / {min(t_sk) / min(t_1):.2f}x",
                    f"{b / a:.2f}x",
                    "yes" if agree else "NO",
                ]
            )
    return out


def bench_ablation(rows: int, repeat: int) -> list[list[str]]:
    """The depth-12 example under variations of the evaluator's knobs (same run)."""
    X, _ = EX.generate(rows, seed=99)
    model = load(EXAMPLES / "edge-allow-block.clef")
    variants = {
        "default: chunks of 16,384 rows, heap layout for 12 levels": Evaluator(model),
        "child tables only (heap_levels=0)": Evaluator(model, heap_levels=0),
        "chunks of 2,048 rows": Evaluator(model, chunk_rows=2048),
        "chunks of 8,192 rows": Evaluator(model, chunk_rows=8192),
        "chunks of 65,536 rows": Evaluator(model, chunk_rows=65536),
        "one chunk of 1,000,000 rows": Evaluator(model, chunk_rows=rows),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, ev in variants.items():
            times[name] += time_call(lambda e=ev: e.evaluate(X), repeat=1)
    base = median(times[next(iter(variants))])
    return [[k, f"{median(v) * 1e3:.1f} ms", f"{median(v) / base:.2f}"] for k, v in times.items()]


# ----------------------------------------------------------------------------- single input
def bench_single(repeat: int) -> list[list[str]]:
    model = load(EXAMPLES / "edge-allow-block.clef")
    ev = Evaluator(model)
    X, _ = EX.generate(1000, seed=11)
    rows_list = X.tolist()
    from clefprove.eval.inputs import decode_input

    records = [decode_input(model, x) for x in X]
    out = []

    def per_call(fn, items) -> float:
        def loop():
            for it in items:
                fn(it)

        return median(time_call(loop, repeat=repeat)) / len(items)

    out.append(
        ["evaluate_one(list of 6 floats)", fmt_seconds(per_call(ev.evaluate_one, rows_list))]
    )
    out.append(["evaluate_one(numpy row)", fmt_seconds(per_call(ev.evaluate_one, list(X)))])
    out.append(
        [
            "encode_record(dict) + evaluate_one",
            fmt_seconds(per_call(lambda r: ev.evaluate_one(encode_record(model, r)), records)),
        ]
    )
    return out


def bench_cli(lines: int) -> list[list[str]]:
    X, _ = EX.generate(lines, seed=13)
    model = load(EXAMPLES / "edge-allow-block.clef")
    from clefprove.eval.inputs import decode_input

    text = "\n".join(json.dumps(decode_input(model, x)) for x in X) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text(text)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "clefprove", "eval", str(EXAMPLES / "edge-allow-block.clef"),
             "--input", str(src)],
            check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
        )  # fmt: skip
        t = time.perf_counter() - t0
    return [[f"clefprove eval, {lines:,} JSON lines (process start included)", fmt_seconds(t),
             f"{lines / t / 1e3:.0f} k lines/s"]]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and depths")
    ap.add_argument(
        "--batch-only", action="store_true", help="only the batch tables (depth 12 and deep trees)"
    )
    ap.add_argument(
        "--baseline",
        metavar="EVALUATOR_PY",
        help="with --batch-only: every tree shape, sklearn vs this evaluator vs the one in "
        "this file (another version's clefprove/eval/evaluator.py), interleaved",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per timing (default 5)")
    args = ap.parse_args()
    quick = args.quick
    print(f"## bench_eval ({machine()})\n")
    if args.batch_only and args.baseline:
        load_before = os.getloadavg()
        header = ["max depth", "nodes", "sklearn predict", "before", "after", "after, 1 thread"]
        header += ["before: ratio (medians / best)", "after: ratio (medians / best)"]
        header += ["after, 1 thread: ratio", "after vs before (medians)", "agree"]
        wall, cpu = bench_compare(1_000_000, args.repeat, args.baseline)
        load_after = os.getloadavg()
        print("Wall-clock time:\n")
        print(table(header, wall))
        print("\nProcess CPU time (the same calls):\n")
        print(table(header, cpu))
        print(f"\nload average (1 min) before {load_before[0]:.1f}, after {load_after[0]:.1f}")
        return
    if args.batch_only:
        header = ["max depth", "nodes", "sklearn predict", "clefprove", "ratio (medians)"]
        header += ["ratio (best runs)", "agree"]
        rows = [r[:1] + r[1:2] + r[3:5] + r[6:9] for r in bench_batch([12], 1_000_000, 5)]
        print(table(header, rows + bench_deep(1_000_000, 5)))
        return

    print("### Loading\n")
    load_rows = bench_load_example(50 if quick else 500)
    big_rows, rss_rows = bench_load_large(19, 3 if quick else 5)
    print(table(["what", "size", "time", "target"], load_rows + big_rows))
    print()
    print("Memory of one process loading the synthetic model (deltas from before the load):\n")
    print(table(["moment", "RssAnon", "RssFile", "peak RSS (VmHWM)"], rss_rows))
    print()

    print("### Batch evaluation, 1,000,000 rows, same tree, same run\n")
    depths = [12] if quick else [8, 12, 16, 20]
    print(
        table(
            [
                "depth",
                "nodes",
                "layout",
                "sklearn predict",
                "clefprove",
                "rows/s",
                "ratio (medians)",
                "ratio (best runs)",
                "agree",
            ],
            bench_batch(depths, 1_000_000, 3 if quick else 7),
        )
    )
    print()
    print("### Deep, unbalanced trees, 1,000,000 rows, same tree, same run\n")
    print(
        table(
            [
                "max depth",
                "nodes",
                "sklearn predict",
                "clefprove",
                "ratio (medians)",
                "ratio (best runs)",
                "agree",
            ],
            bench_deep(1_000_000, 3 if quick else 5),
        )
    )
    print()
    if not quick:
        print("Evaluator variants on the depth-12 example, 1,000,000 rows (same run):\n")
        print(table(["variant", "median", "relative"], bench_ablation(1_000_000, 5)))
        print()
    print("### Single input (depth-12 example)\n")
    print(table(["call", "median per call"], bench_single(3 if quick else 7)))
    print()
    print(table(["command", "time", "throughput"], bench_cli(20_000 if quick else 100_000)))


if __name__ == "__main__":
    main()
