"""Incremental re-verification: cold check against re-checks after small model updates.

For the depth-12 example and a depth-20 model (trained here with
``examples/make_edge_example.py``), and for three invariant sets -- the five SPEC invariants (the
box engine decides every path without Z3), one invariant whose paths need Z3, and both
together -- it measures, in one run and in-process (model loaded, invariants parsed):

* ``cold``: ``clefprove.check`` without a cache (the baseline every ratio divides by);
* ``cold+store``: the same with an empty cache (what filling the cache costs);
* re-checks with the cache filled by the original model, after
  (a) one leaf's action changed, (b) one threshold at depth >= 10 moved,
  (c) a depth-4 subtree retrained (replaced by the same position of a tree trained on other
  data), (d) no change (the file reloaded);
* the time of (a) per changed path (paths_checked counts (invariant, path) pairs).

Every re-check's report is compared with a fresh check of the same model (minus timings).
Each number is the median of several runs, each on a fresh copy of the filled cache.

    python bench/bench_incremental.py [--repeat 7] [--rows 400000]

With ``--leafcache`` (issue 11): the depth-20 model and a ~140K-node one (depth <= 60,
``min_samples_leaf=1``, 1.45M rows; or ``--big-model SOURCE.json``), seven invariants -- the
five SPEC ones, the Z3 one above and a linear one that Z3 finds violated on thousands of
leaves -- cold against (a) one leaf's action changed, (b) one deep threshold moved and
(d) no change, with the re-check's time per stage (``CacheStore.timings``):

    python bench/bench_incremental.py --leafcache [--repeat 3] [--cold-repeat 1]
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import example_module  # noqa: E402

from clefprove.dsl.loader import load_invariants  # noqa: E402
from clefprove.incremental import ProofCache  # noqa: E402
from clefprove.incremental.graph import structural_changes  # noqa: E402
from clefprove.model.source import compile_source  # noqa: E402
from clefprove.verify.api import check  # noqa: E402

SOLVER_INV = """severity allow < challenge < rate_limit < block

invariant slow_but_shallow_blocked:
  "A linear score whose paths the box engine cannot decide alone (needs Z3)."
  when client_rtt_ms - 100 * path_depth >= 2000 and client_rtt_ms + 500 * referer_entropy <= 1500
  ensure action == block
"""


def _paths(t: dict, p: tuple = ()) -> list[tuple]:
    out = [p]
    if "action" not in t:
        out += _paths(t["left"], (*p, "left")) + _paths(t["right"], (*p, "right"))
    return out


def _at(t: dict, p: tuple) -> dict:
    for s in p:
        t = t[s]
    return t


def edits(src: dict, other: dict) -> dict[str, dict]:
    """The four updates of the issue, as JSON sources."""
    t = src["tree"]
    allp = _paths(t)
    out: dict[str, dict] = {}
    # (a) the action of the deepest leaf on the leftmost-deep path
    leaves = sorted((p for p in allp if "action" in _at(t, p)), key=lambda p: (-len(p), p))
    a = copy.deepcopy(src)
    leaf = _at(a["tree"], leaves[len(leaves) // 3])
    leaf["action"] = "block" if leaf["action"] != "block" else "challenge"
    out["(a) one leaf action"] = a
    # (b) a numeric threshold at depth >= 10, moved a little (towards its neighbour values)
    deep = [p for p in allp if len(p) >= 10 and "threshold" in _at(t, p)]
    b = copy.deepcopy(src)
    node = _at(b["tree"], deep[len(deep) // 2])
    node["threshold"] = node["threshold"] + (
        0.5 if node["feature"] in ("tls_version", "path_depth") else 0.01
    )
    out["(b) threshold at depth>=10"] = b
    # (c) a depth-4 subtree retrained: the same position in a tree trained on other data
    ot = other["tree"]
    cands = [p for p in allp if len(p) == 4 and "feature" in _at(t, p)]
    both = [p for p in cands if all("feature" in _at(ot, p[:k]) for k in range(len(p)))]
    c = copy.deepcopy(src)
    p = both[0]
    _at(c["tree"], p[:-1])[p[-1]] = copy.deepcopy(_at(ot, p))
    out["(c) depth-4 subtree retrained"] = c
    out["(d) no change"] = copy.deepcopy(src)
    return out


def _comparable(rep) -> str:
    d = rep.to_json_dict()
    for k in ("seconds", "paths_checked", "paths_reused"):
        d["summary"].pop(k)
    for r in d["results"]:
        for k in ("seconds", "paths_checked", "paths_reused"):
            r.pop(k)
    return json.dumps(d, sort_keys=True)


def _median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_model(label: str, src: dict, other: dict, inv_sets: dict, repeat: int) -> list[dict]:
    rows = []
    base = compile_source(copy.deepcopy(src))
    variants = edits(src, other)
    for set_name, inv_path in inv_sets.items():
        prog = load_invariants([inv_path], base)
        fresh = check(base, prog)  # also warms imports
        colds: list[float] = []

        def cold(prog=prog, colds=colds) -> None:
            # Interleaved with every re-check below, so that both see the same machine load.
            m = compile_source(copy.deepcopy(src))
            t = time.perf_counter()
            check(m, prog)
            colds.append(time.perf_counter() - t)

        with tempfile.TemporaryDirectory() as tmp:
            filled = Path(tmp) / "filled"
            stores = []
            for k in range(repeat):
                cold()
                with ProofCache(Path(tmp) / f"cold{k}") as cache:
                    m = compile_source(copy.deepcopy(src))
                    t = time.perf_counter()
                    check(m, prog, cache=cache)
                    stores.append(time.perf_counter() - t)
            with ProofCache(filled) as cache:
                check(base, prog, cache=cache)
            measured = []
            rep_models = {}
            for name, vsrc in variants.items():
                model = compile_source(copy.deepcopy(vsrc))
                rep_models[name] = model
                vprog = load_invariants([inv_path], model)
                want = _comparable(check(model, vprog))
                times = []
                rep = None
                for k in range(repeat):
                    cold()
                    d = Path(tmp) / f"{name}-{k}"
                    shutil.copytree(filled, d)
                    m = compile_source(copy.deepcopy(vsrc))  # a fresh object: nothing memoised
                    with ProofCache(d) as cache:
                        t = time.perf_counter()
                        rep = check(m, vprog, cache=cache)
                        times.append(time.perf_counter() - t)
                    assert _comparable(rep) == want, f"{label} {name}: cached != fresh"
                measured.append((name, statistics.median(times), rep))
        c = statistics.median(colds)
        n = fresh.summary["paths_checked"]
        rows.append(
            dict(
                model=label,
                set=set_name,
                scenario="cold (no cache)",
                ms=c * 1e3,
                ratio=1.0,
                checked=n,
                reused=0,
            )
        )
        cs = statistics.median(stores)
        rows.append(
            dict(
                model=label,
                set=set_name,
                scenario="cold, filling the cache",
                ms=cs * 1e3,
                ratio=cs / c,
                checked=n,
                reused=0,
            )
        )
        for name, t, rep in measured:
            s = rep.summary
            row = dict(
                model=label,
                set=set_name,
                scenario=name,
                ms=t * 1e3,
                ratio=t / c,
                checked=s["paths_checked"],
                reused=s["paths_reused"],
            )
            changed = sum(c.new_leaves for c in structural_changes(base, rep_models[name]))
            row["changed"] = changed
            if name.startswith("(a)") and changed:
                row["per_path_us"] = t * 1e6 / changed
            rows.append(row)
    return rows


VIOLATED_INV = """severity allow < challenge < rate_limit < block

invariant risky_score_blocked:
  "A linear score that Z3 finds violated on many paths."
  when client_rtt_ms + 500 * referer_entropy >= 3000 and client_rtt_ms - 50 * path_depth <= 2500
  ensure action == block
"""


def _big_source(mk, rows: int) -> dict:
    from sklearn.tree import DecisionTreeClassifier

    from clefprove.model.sklearn import from_sklearn

    X, y = mk.generate(rows)
    clf = DecisionTreeClassifier(max_depth=60, min_samples_leaf=1, random_state=20261129)
    clf.fit(X, y)
    model = from_sklearn(clf, features=mk.FEATURES, actions=mk.ACTIONS, name="edge-big")
    return mk.model_source(model)


def bench_leafcache(label: str, src: dict, inv_dir: str, repeat: int, cold_repeat: int) -> None:
    """Cold against re-checks with every leaf outcome cached (issue 11), one table per model."""
    base = compile_source(copy.deepcopy(src))
    variants = {k: v for k, v in edits(src, src).items() if not k.startswith("(c)")}
    prog = load_invariants([inv_dir], base)
    colds, fills = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(cold_repeat):
            m = compile_source(copy.deepcopy(src))
            t = time.perf_counter()
            fresh = check(m, prog)
            colds.append(time.perf_counter() - t)
            with ProofCache(Path(tmp) / f"fill{k}") as cache:
                m = compile_source(copy.deepcopy(src))
                t = time.perf_counter()
                check(m, prog, cache=cache)
                fills.append(time.perf_counter() - t)
        filled = Path(tmp) / "fill0"
        cold = statistics.median(colds)
        print(
            f"\n{label}: {base.n_nodes} nodes, {base.n_leaves} leaves, {len(prog.invariants)} "
            f"invariants; cold median of {cold_repeat}, re-checks median of {repeat}"
        )
        for r in fresh.results:
            print(
                f"  {r.invariant}: {r.status.value}, {r.violating_paths} violating paths, "
                f"{r.solver_paths} solver paths"
            )
        print("| scenario | ms | of cold | paths checked | paths reused |")
        print("|---|---:|---:|---:|---:|")
        n = fresh.summary["paths_checked"]
        print(f"| cold (no cache) | {cold * 1e3:.0f} | 100% | {n} | 0 |")
        fill = statistics.median(fills)
        print(f"| cold, filling the cache | {fill * 1e3:.0f} | {100 * fill / cold:.1f}% | | |")
        stages: dict[str, float] = {}
        for name, vsrc in variants.items():
            model = compile_source(copy.deepcopy(vsrc))
            vprog = load_invariants([inv_dir], model)
            want = _comparable(check(model, vprog)) if name != "(d) no change" else None
            times, rep = [], None
            for k in range(repeat):
                d = Path(tmp) / f"{name}-{k}"
                shutil.copytree(filled, d)
                m = compile_source(copy.deepcopy(vsrc))
                with ProofCache(d) as cache:
                    t = time.perf_counter()
                    rep = check(m, vprog, cache=cache)
                    times.append(time.perf_counter() - t)
                    if name.startswith("(a)") and k == 0:
                        stages = dict(cache.timings)
                if want is not None:
                    assert _comparable(rep) == want, f"{label} {name}: cached != fresh"
            t = statistics.median(times)
            s = rep.summary
            print(
                f"| {name} | {t * 1e3:.1f} | {100 * t / cold:.2f}% | {s['paths_checked']} | "
                f"{s['paths_reused']} |"
            )
        print("\nstages of the (a) re-check (first run):")
        print("| stage | ms |")
        print("|---|---:|")
        for k, v in stages.items():
            print(f"| {k} | {v * 1e3:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rows", type=int, default=400_000, help="training rows for the d20 model")
    ap.add_argument("--leafcache", action="store_true", help="the issue-11 tables (see above)")
    ap.add_argument("--cold-repeat", type=int, default=1)
    ap.add_argument("--big-rows", type=int, default=1_450_000)
    ap.add_argument("--big-model", help="JSON source of the big model (else trained here)")
    args = ap.parse_args()
    mk = example_module()
    if args.leafcache:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(ROOT / "invariants" / "edge.inv", Path(tmp) / "edge.inv")
            (Path(tmp) / "risk.inv").write_text(SOLVER_INV)
            (Path(tmp) / "violated.inv").write_text(VIOLATED_INV)
            print("training the depth-20 model ...", file=sys.stderr)
            d20 = mk.model_source(mk.build(20, args.rows)[1])
            bench_leafcache("depth 20", d20, tmp, args.repeat, max(3, args.cold_repeat))
            if args.big_model:
                big = json.loads(Path(args.big_model).read_text())
            else:
                print("training the big model ...", file=sys.stderr)
                big = _big_source(mk, args.big_rows)
            bench_leafcache("big", big, tmp, args.repeat, args.cold_repeat)
        return
    d12 = json.loads((ROOT / "examples" / "edge-allow-block.json").read_text())
    print("training the depth-20 model and the retrained variants ...", file=sys.stderr)
    d12_other = mk.model_source(mk.build(12, args.rows, seed=7)[1])
    d20 = mk.model_source(mk.build(20, args.rows)[1])
    d20_other = mk.model_source(mk.build(20, args.rows, seed=7)[1])
    with tempfile.TemporaryDirectory() as tmp:
        solver = Path(tmp) / "solver"
        solver.mkdir()
        shutil.copy(ROOT / "invariants" / "edge.inv", solver / "edge.inv")
        (solver / "risk.inv").write_text(SOLVER_INV)
        (Path(tmp) / "risk.inv").write_text(SOLVER_INV)
        sets = {
            "SPEC (5)": str(ROOT / "invariants" / "edge.inv"),
            "Z3 (1)": str(Path(tmp) / "risk.inv"),
            "SPEC + Z3 (6)": str(solver),
        }
        rows = bench_model("depth 12", d12, d12_other, sets, args.repeat)
        rows += bench_model("depth 20", d20, d20_other, sets, args.repeat)
    n12 = compile_source(copy.deepcopy(d12)).n_nodes
    n20 = compile_source(copy.deepcopy(d20)).n_nodes
    print(f"\nmodels: depth 12 = {n12} nodes, depth 20 = {n20} nodes; median of {args.repeat}")
    print(
        "| model | invariants | scenario | changed leaves | ms | of cold | paths checked "
        "| paths reused | per changed leaf |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        extra = f"{r['per_path_us'] / 1e3:.2f} ms" if "per_path_us" in r else ""
        print(
            f"| {r['model']} | {r['set']} | {r['scenario']} | {r.get('changed', '')} | "
            f"{r['ms']:.2f} | {100 * r['ratio']:.1f}% | {r['checked']} | {r['reused']} | "
            f"{extra} |"
        )


if __name__ == "__main__":
    main()
