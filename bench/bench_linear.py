"""Benchmark (issue 11): solver-bound linear invariants on deep scikit-learn trees.

Trees: scikit-learn ``DecisionTreeClassifier`` on edge-style synthetic requests (the features
of examples/make_edge_example.py) whose policy has *oblique* boundaries (``rtt + 80 * depth``,
``rtt - 250 * entropy``), so that many leaf boxes straddle the invariants' hyperplanes and the
box stages of the old engine sent them to Z3: a depth-20 tree (100,000 rows) and a large one
(~130K nodes, ``min_samples_leaf=1``).  Invariants: the issue's two-literal one, and a second
with two literals sharing ``path_depth``.

Per (tree, invariant), in the same run:

* ``linear``: ``check_invariant`` with the vectorised linear stage (the default);
* ``per-leaf Z3``: ``check_invariant(linear=False)``: every undecided leaf to the solver session;
* ``whole-tree Z3``: one Z3 query with nested ``If`` terms over the whole tree
  (``bench_check.whole``), the issue's baseline.

Verdicts and violating paths are cross-checked (``linear`` vs ``per-leaf Z3``; the verdict vs
the whole-tree query).  Run: ``python bench/bench_linear.py [--repeat 3] [--big-rows N]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from bench_check import whole
from common import example_module, machine, table

INVARIANTS = """
severity allow < challenge < rate_limit < block
invariant rtt_depth_entropy:
  when client_rtt_ms + 100 * path_depth >= 1500 and client_rtt_ms - 300 * referer_entropy <= 900
  ensure action != allow
invariant deep_low_entropy:
  when client_rtt_ms + 200 * path_depth >= 2000 and 2 * referer_entropy + path_depth <= 12
  ensure not (action == allow)
"""


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    mk = example_module()
    X, _ = mk.generate(n, seed)
    rng = np.random.default_rng(seed + 1)
    rtt = np.round(rng.uniform(0, 4000, n), 3)
    depth = rng.integers(0, 25, n).astype(np.float64)
    entropy = np.round(rng.uniform(0, 8, n), 4)
    X[:, 0], X[:, 2], X[:, 3] = rtt, depth, entropy
    y = np.full(n, mk.ALLOW)
    y[rtt + 80 * depth >= 1700] = mk.CHALLENGE
    y[rtt - 250 * entropy > 1000] = mk.RATE_LIMIT
    y[(X[:, 4] == mk.UA["curl"]) & (entropy > 6.5)] = mk.BLOCK
    noise = rng.random(n) < 0.02
    y[noise] = rng.integers(0, 4, int(noise.sum()))
    return X, y


def tree(depth: int | None, n: int, leaf: int, seed: int = 11):
    from sklearn.tree import DecisionTreeClassifier

    from clefprove.model.sklearn import from_sklearn

    mk = example_module()
    X, y = data(n, seed)
    clf = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=leaf, random_state=seed)
    clf.fit(X, y)
    return from_sklearn(
        clf, features=mk.FEATURES, actions=mk.ACTIONS, name="edge-oblique", version="1.0.0"
    )


def best(fn, repeat: int) -> tuple[float, object]:
    out = None
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out  # the machine is shared: contention only adds time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--big-rows", type=int, default=1_850_000)
    ap.add_argument("--no-big", action="store_true")
    args = ap.parse_args()

    from clefprove.dsl.loader import parse_text
    from clefprove.geometry.boxes import leaf_boxes
    from clefprove.verify import engine as eg
    from clefprove.verify.api import check_invariant
    from clefprove.verify.options import CheckOptions

    print(machine())
    models = [("depth 20", tree(20, args.rows, 5))]
    if not args.no_big:
        models.append(("unbounded", tree(None, args.big_rows, 1)))
    rows = []
    mismatch = False
    for label, model in models:
        invs = parse_text(INVARIANTS, model, "bench.inv").invariants
        for inv in invs:
            prep = eg.prepare(model, inv)
            boxes = leaf_boxes(model)
            _, _, to_solver = eg.box_stages(prep, boxes, linear=False)
            _, _, left = eg.box_stages(prep, boxes, linear=True)
            t_l, r_l = best(lambda m=model, i=inv: check_invariant(m, i), args.repeat)
            t_z, r_z = best(
                lambda m=model, i=inv: check_invariant(m, i, CheckOptions(linear=False)), 1
            )
            t_w, v_w = best(lambda m=model, i=inv: whole(m, i), 1)
            same = (
                r_l.status == r_z.status  # type: ignore[attr-defined]
                and r_l.violating_paths == r_z.violating_paths  # type: ignore[attr-defined]
                and (r_l.status == "violated") == v_w  # type: ignore[attr-defined]
            )
            mismatch |= not same
            rows.append(
                (
                    label,
                    f"{model.n_nodes:,}",
                    inv.name,
                    f"{r_l.status} ({r_l.violating_paths})",  # type: ignore[attr-defined]
                    f"{int(to_solver.sum())} -> {int(left.sum())}",
                    f"{t_l * 1e3:.1f}",
                    f"{t_z * 1e3:.0f}",
                    f"{t_w * 1e3:.0f}",
                    f"{(t_z - t_l) / max(1, int(to_solver.sum())) * 1e3:.1f}",
                    f"{t_w / t_l:.0f}x",
                    "yes" if same else "NO",
                )
            )
            print(*rows[-1], flush=True)
    print()
    print(
        table(
            [
                "tree",
                "nodes",
                "invariant",
                "verdict (violating paths)",
                "leaves to Z3: before -> after",
                "linear ms",
                "per-leaf Z3 ms",
                "whole-tree Z3 ms",
                "Z3 ms per leaf",
                "whole / linear",
                "agree",
            ],
            rows,
        )
    )
    if mismatch:
        print("VERDICT MISMATCH")
        sys.exit(1)


if __name__ == "__main__":
    main()
