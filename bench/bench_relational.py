"""Benchmark: relational invariants (leaf-pair check) on the example trees of several depths.

For scikit-learn trees trained on the example data (examples/make_edge_example.py; depth 12 is
the committed example), times ``check_relational`` in process (model loaded, invariants parsed,
leaf boxes recomputed in every call) for SPEC §3's three relational examples and a few with a
``when`` (single-feature atoms, and linear ones that may need Z3 per leaf pair), then the whole
``clefprove check`` command (interpreter start included) for the three SPEC examples.

Run: ``python bench/bench_relational.py [--depths 12 16 20] [--repeat 5]``.

``--scaling`` instead times the three SPEC §3 forms on large deep trees (scikit-learn without
depth limit, and ExtraTree, on growing data; ``--big`` adds the 947K-node ExtraTree), the tree
descent against the descent before its cell blocks (``CELL_BLOCK = 0``) in the same run (and,
with ``--matrix``, the pair matrix timed on evenly spaced row chunks and extrapolated), with the
growth exponent in leaves between consecutive sizes and the peak RSS so far.

``--scaling --against REV`` (e.g. ``--against 97446e5``) times ``box_pairs`` of this tree
and of the package as committed at REV (``git archive`` into a temporary directory) in the
same run, each in its own process per (tree, invariant), alternating, with the per-phase
timers of the dual descent (``PairSweep.timing``) and each process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if os.environ.get("BENCH_PACKAGE_ROOT"):  # --against: the worker imports that package
    sys.path.insert(0, os.environ["BENCH_PACKAGE_ROOT"])

from bench.common import example_module, machine, package_at, table  # noqa: E402

INVARIANTS = """
severity allow < challenge < rate_limit < block

invariant entropy_monotone:
  ensure monotone(referer_entropy)

invariant rtt_stable:
  ensure stable(client_rtt_ms, 5)

invariant ua_independent:
  ensure independent(ua_family)

invariant stable_when_slow_legacy:
  when client_rtt_ms > 300 and tls_version < 772
  ensure stable(client_rtt_ms, 5)

invariant ua_independent_linear_when:
  when client_rtt_ms + 200 * path_depth >= 2000
  ensure independent(ua_family)

invariant entropy_monotone_linear_when:
  when client_rtt_ms + 100 * referer_entropy <= 400
  ensure monotone(referer_entropy)

invariant rtt_stable_linear_when:
  when client_rtt_ms + 100 * referer_entropy <= 400
  ensure stable(client_rtt_ms, 5)
"""

SPEC3 = INVARIANTS.split("invariant stable_when_slow_legacy")[0]


def _matrix_seconds(pc, budget_chunks: int = 24) -> tuple[float, bool]:
    """CPU seconds of the pair matrix over every row chunk; estimated from *budget_chunks*
    evenly spaced chunks when there are more (second value: estimated)."""
    from clefprove.verify.relational import CHUNK_CELLS

    n = pc.actions.size
    step = max(1, CHUNK_CELLS // max(1, n))
    starts = list(range(0, n, step))
    chosen = starts if len(starts) <= budget_chunks else starts[:: len(starts) // budget_chunks]
    t0 = time.process_time()
    for a0 in chosen:
        pc.chunk(a0, min(n, a0 + step))
    spent = time.process_time() - t0
    return spent * len(starts) / len(chosen), len(chosen) < len(starts)


def _descent_seconds(pc_of, cell_block: int) -> tuple[int, float]:
    """(violating pairs, CPU seconds of box_pairs) with the descent's cell blocks set to
    *cell_block* (0: the descent as before them)."""
    from clefprove.verify import pairsweep
    from clefprove.verify.relational import EXTRA_CONFIRM, box_pairs

    saved = pairsweep.CELL_BLOCK
    try:
        pairsweep.CELL_BLOCK = cell_block
        pc = pc_of()
        t0 = time.process_time()
        n_pairs, _, _ = box_pairs(pc, 3 + EXTRA_CONFIRM)
        return n_pairs, time.process_time() - t0
    finally:
        pairsweep.CELL_BLOCK = saved


def _one(path: str, name: str) -> None:
    """Worker of ``--against``: box_pairs of one invariant on one cached tree, as JSON."""
    import json
    import resource

    import clefprove
    from clefprove.dsl.loader import parse_text
    from clefprove.model.loading import load_model
    from clefprove.verify import pairsweep
    from clefprove.verify.relational import EXTRA_CONFIRM, PairChecker, box_pairs, prepare

    model = load_model(Path(path))
    program = parse_text(SPEC3, model, "bench.inv")
    (inv,) = [i for i in program.invariants if i.name == name]
    timing: dict[str, float] = {}
    if hasattr(pairsweep.PairSweep, "_tick"):  # keep the timers of the sweep box_pairs makes
        original = pairsweep.PairSweep.__init__

        def init(self, pc):  # type: ignore[no-untyped-def]
            original(self, pc)
            self.timing = timing

        pairsweep.PairSweep.__init__ = init
    t0 = time.process_time()
    pc = PairChecker(model, prepare(model, inv, program.severity))
    t1 = time.process_time()
    n_pairs, first, _ = box_pairs(pc, 3 + EXTRA_CONFIRM)
    t2 = time.process_time()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "pairs": n_pairs,
                "first": [list(p) for p in first],
                "checker": t1 - t0,
                "cpu": t2 - t1,
                "rss": rss,
                "nodes": model.n_nodes,
                "leaves": model.n_leaves,
                "depth": model.max_depth,
                "timing": timing,
                "package": clefprove.__file__,
            }
        )
    )


def against(rev: str, big: bool) -> None:
    """New against the package at *rev*, same run, one process per measurement."""
    import json
    import math

    from bench.common import extra_tree_model

    base = package_at(rev, Path(tempfile.mkdtemp(prefix="bench-relational-base-")))
    # This tree's package as it is now (later edits do not reach the run's processes).
    import shutil

    here = Path(tempfile.mkdtemp(prefix="bench-relational-new-"))
    shutil.copytree(ROOT / "clefprove", here / "clefprove")
    cache = Path(tempfile.gettempdir()) / "clefprove-bench-trees"
    cache.mkdir(exist_ok=True)
    runs = [("cart", (125_000, 1_000_000)), ("extra", (40_000, 300_000))]
    if big:
        runs[1] = ("extra", (40_000, 300_000, 2_500_000))
    names = [line.split()[1].rstrip(":") for line in SPEC3.splitlines() if line.startswith("inv")]

    def run(root: Path, path: Path, name: str) -> dict:  # type: ignore[type-arg]
        env = dict(os.environ, BENCH_PACKAGE_ROOT=str(root))
        proc = subprocess.run(
            [sys.executable, str(Path(__file__)), "--one", str(path), name],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        out: dict = json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[type-arg]
        assert Path(out["package"]).is_relative_to(root), (out["package"], root)
        return out

    out = []
    phases = []
    for kind, sizes in runs:
        last: dict[str, tuple[int, float, float]] = {}
        for rows in sizes:
            where = Path("/tmp/perfcache") if rows >= 2_500_000 else cache
            extra_tree_model(rows, cache=where, cart=kind == "cart")
            path = where / f"{'cart' if kind == 'cart' else 'extra'}-{rows}-20261129.clef"
            for name in names:
                new = run(here, path, name)
                old = run(base, path, name)
                assert (new["pairs"], new["first"]) == (old["pairs"], old["first"]), name
                leaves = new["leaves"]
                growth = ""
                if name in last:
                    l0, t_new, t_old = last[name]
                    lr = math.log(leaves / l0)
                    growth = (
                        f"{math.log(new['cpu'] / t_new) / lr:.2f} "
                        f"({math.log(old['cpu'] / t_old) / lr:.2f})"
                    )
                last[name] = (leaves, new["cpu"], old["cpu"])
                row = (
                    kind,
                    f"{new['nodes']:,}",
                    new["depth"],
                    name,
                    f"{new['pairs']:,}",
                    f"{new['cpu']:.2f}",
                    f"{old['cpu']:.2f}",
                    f"{old['cpu'] / new['cpu']:.2f}x",
                    growth,
                    f"{new['rss']:.0f} ({old['rss']:.0f})",
                )
                out.append(row)
                t = new["timing"]
                phases.append(
                    (
                        kind,
                        f"{new['nodes']:,}",
                        name,
                        f"{new['cpu']:.2f}",
                        *(
                            f"{t.get(k, 0.0):.2f}"
                            for k in (
                                "aggregates",
                                "compress",
                                "filter",
                                "blocks counted",
                                "cell blocks",
                                "leaf pairs",
                                "split",
                            )
                        ),
                        f"{t.get('descent n', 0):,.0f}",
                        f"{t.get('cell blocks n', 0) + t.get('leaf pairs n', 0):,.0f}",
                    )
                )
                print(" | ".join(map(str, row)), flush=True)
    print()
    print(machine())
    print()
    print(
        table(
            [
                "tree",
                "nodes",
                "depth",
                "invariant",
                "violating pairs",
                "new s (CPU)",
                f"{rev} s (CPU)",
                "speed-up",
                f"growth exponent in leaves ({rev})",
                f"peak RSS MiB ({rev})",
            ],
            out,
        )
    )
    print()
    print(
        table(
            [
                "tree",
                "nodes",
                "invariant",
                "new s (CPU)",
                "aggregates s",
                "compress s",
                "filter s",
                "blocks counted s",
                "cell blocks s",
                "leaf pairs s",
                "split s",
                "node pairs",
                "cells tested",
            ],
            phases,
        )
    )


def scaling(big: bool, with_matrix: bool) -> None:
    import math
    import resource

    from bench.common import extra_tree_model
    from clefprove.dsl.loader import parse_text
    from clefprove.verify import pairsweep
    from clefprove.verify.relational import PairChecker, prepare

    cache = Path(tempfile.gettempdir()) / "clefprove-bench-trees"
    cache.mkdir(exist_ok=True)
    out = []
    runs = [("cart", (125_000, 1_000_000)), ("extra", (40_000, 300_000))]
    if big:
        runs[1] = ("extra", (40_000, 300_000, 2_500_000))
    for kind, sizes in runs:
        last: dict[str, tuple[int, float, float]] = {}
        for rows in sizes:
            big_cache = Path("/tmp/perfcache")
            model = extra_tree_model(
                rows, cache=big_cache if rows >= 2_500_000 else cache, cart=kind == "cart"
            )
            program = parse_text(SPEC3, model, "bench.inv")
            for inv in program.invariants:

                def pc_of(inv=inv, model=model, program=program):
                    return PairChecker(model, prepare(model, inv, program.severity))

                n_pairs, ours = _descent_seconds(pc_of, pairsweep.CELL_BLOCK)
                n_old, before = _descent_seconds(pc_of, 0)
                assert n_old == n_pairs, (inv.name, n_old, n_pairs)
                matrix = ""
                if with_matrix:
                    m, est = _matrix_seconds(pc_of())
                    matrix = f"{'~' if est else ''}{m:.1f}"
                leaves = model.n_leaves
                growth = ""
                if inv.name in last:
                    l0, t_prev, b_prev = last[inv.name]
                    lr = math.log(leaves / l0)
                    growth = (
                        f"{math.log(ours / t_prev) / lr:.2f} ({math.log(before / b_prev) / lr:.2f})"
                    )
                last[inv.name] = (leaves, ours, before)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                out.append(
                    (
                        kind,
                        f"{model.n_nodes:,}",
                        model.max_depth,
                        inv.name,
                        f"{n_pairs:,}",
                        f"{ours:.2f}",
                        f"{before:.2f}",
                        f"{before / ours:.2f}x",
                        matrix,
                        growth,
                        f"{rss:.0f}",
                    )
                )
                print(" | ".join(map(str, out[-1])), flush=True)
    print()
    print(machine())
    print()
    print(
        table(
            [
                "tree",
                "nodes",
                "depth",
                "invariant",
                "violating pairs",
                "descent s (CPU)",
                "before cell blocks s (CPU)",
                "speed-up",
                "pair matrix s (CPU, ~ = est.)",
                "growth exponent in leaves (before)",
                "peak RSS MiB (so far)",
            ],
            out,
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", type=int, nargs="+", default=[12, 16, 20])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--scaling", action="store_true", help="large deep trees instead")
    ap.add_argument("--big", action="store_true", help="with --scaling: the 947K-node tree too")
    ap.add_argument("--matrix", action="store_true", help="with --scaling: time the matrix too")
    ap.add_argument("--against", metavar="REV", help="with --scaling: against the package at REV")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "INVARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(*args.one)
        return
    if args.scaling and args.against:
        against(args.against, args.big)
        return
    if args.scaling:
        scaling(args.big, args.matrix)
        return

    mk = example_module()

    from clefprove.dsl.loader import parse_text
    from clefprove.model.clef import write_clef
    from clefprove.model.loading import load_model
    from clefprove.verify.relational import check_relational

    rows = []
    cli_rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-relational-"))
    (tmp / "spec3.inv").write_text(SPEC3)
    for depth in args.depths:
        if depth == 12:
            path = ROOT / "examples" / "edge-allow-block.clef"
            model = load_model(path)
        else:
            _, model = mk.build(depth, args.rows)
            path = tmp / f"edge-d{depth}.clef"
            path.write_bytes(write_clef(model))
        program = parse_text(INVARIANTS, model, "bench.inv")
        for inv in program.invariants:
            best = float("inf")
            res = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                res = check_relational(model, inv, program.severity)
                best = min(best, time.perf_counter() - t0)
            assert res is not None
            rows.append(
                (
                    depth,
                    model.n_leaves,
                    inv.name,
                    res.status,
                    res.violating_paths,
                    res.solver_paths,
                    f"{best * 1e3:.1f}",
                )
            )
            print(f"depth {depth:2d} {inv.name:30s} {res.status:9s} {best * 1e3:8.1f} ms")
        walls = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "clefprove", "check", str(path), str(tmp / "spec3.inv")],
                cwd=ROOT,
                capture_output=True,
            )
            walls.append(time.perf_counter() - t0)
            assert proc.returncode in (0, 1), proc.stderr.decode()
        cli_rows.append((depth, model.n_leaves, f"{min(walls) * 1e3:.0f}"))
    print()
    print(machine())
    print()
    print(
        table(
            [
                "depth",
                "leaves",
                "invariant",
                "verdict",
                "violating pairs",
                "Z3 pairs",
                "ms (min)",
            ],
            rows,
        )
    )
    print()
    print(table(["depth", "leaves", "`clefprove check` SPEC §3 three, ms (min wall)"], cli_rows))


if __name__ == "__main__":
    main()
