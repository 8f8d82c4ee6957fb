"""Issue 11, item 2: re-checks of big models, and the first check into an empty cache.

For each ``.clef`` model given (the ~140K-node tree of ``bench_incremental.py --leafcache`` and
the 947K-node ExtraTree of ``common.extra_tree_model(2_500_000)``) and each invariant set, in
one process: a cold check (no cache, the baseline), a check filling an empty cache, and
re-checks from a copy of that filled cache after (a) one leaf's action changed, (b) one
threshold at depth >= 10 moved, (d) no change (the file reloaded); a run with a cache is timed
from the call of ``check`` to the cache closed (its WAL checkpoint).  Models are loaded from
``.clef`` bytes, as a deploy loads them.  Every re-check's report is asserted equal to a fresh
check's (minus timings and the checked/reused split).

Invariant sets: ``box`` = the five SPEC invariants and the issue's two-literal linear one
(decided without a solver by the box and linear stages); ``z3`` = the five SPEC invariants and
the holding two-literal invariant of ``--leafcache``, checked without the linear stage
(``CheckOptions(linear=False)``), so that its leaves go to Z3 as they did before the linear
stage (the case of the 197% first check of docs/performance.md); ``monotone``, ``stable``,
``independent`` = one relational invariant alone (bench_relational.py's SPEC §3 forms).

With ``--against DIR`` (a checkout of another revision), every model and set is measured with
that code and with this one, one after the other in subprocesses, and one table compares the
two (each ratio against its own cold check of the same run)::

    python bench/bench_snapshots.py --model /tmp/perfcache/big-1450000.clef \\
        --model /tmp/perfcache/extra-2500000-20261129.clef --set box --against /tmp/before
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BOX_INV = """severity allow < challenge < rate_limit < block

invariant issue_two_literal:
  when client_rtt_ms + 100 * path_depth >= 1500 and client_rtt_ms - 300 * referer_entropy <= 900
  ensure action != allow
"""

Z3_INV = """severity allow < challenge < rate_limit < block

invariant slow_but_shallow_blocked:
  when client_rtt_ms - 100 * path_depth >= 2000 and client_rtt_ms + 500 * referer_entropy <= 1500
  ensure action == block
"""


#: One relational invariant per set (bench_relational.py's three SPEC §3 forms), alone.
REL_INV = {
    name: "severity allow < challenge < rate_limit < block\n\ninvariant rel:\n  " + text + "\n"
    for name, text in (
        ("monotone", "ensure monotone(referer_entropy)"),
        ("stable", "ensure stable(client_rtt_ms, 5)"),
        ("independent", "ensure independent(ua_family)"),
    )
}


def _comparable(rep: object) -> str:
    d = rep.to_json_dict()  # type: ignore[attr-defined]
    for k in ("seconds", "paths_checked", "paths_reused"):
        d["summary"].pop(k)
    for r in d["results"]:
        for k in ("seconds", "paths_checked", "paths_reused"):
            r.pop(k)
    return json.dumps(d, sort_keys=True)


def _variants(path: Path, out: Path) -> dict[str, Path]:
    """(a) one leaf's action, (b) one float threshold at depth >= 10, (d) the same file."""
    import numpy as np

    from clefprove.model.clef import write_clef
    from clefprove.model.loading import load_model
    from clefprove.model.types import FeatureType, NodeKind

    model = load_model(path)
    nodes = model.nodes
    kind, depth = nodes["kind"], nodes["depth"]
    res: dict[str, Path] = {}
    leaf = int(np.flatnonzero((kind == NodeKind.LEAF) & (depth >= 10))[0])
    a = nodes.copy()
    a["aux"][leaf] = (int(a["aux"][leaf]) + 1) % len(model.actions)
    floats = [i for i, f in enumerate(model.features) if f.type is FeatureType.FLOAT]
    split = np.flatnonzero(
        (kind == NodeKind.NUMERIC) & (depth >= 10) & np.isin(nodes["feature"], floats)
    )
    b = nodes.copy()
    s = int(split[len(split) // 2])
    f = model.features[int(b["feature"][s])]
    b["value"][s] = min(float(b["value"][s]) * 1.01 + 0.01, f.max)
    for name, arr in (("(a) one leaf action", a), ("(b) threshold at depth>=10", b)):
        p = out / f"{name[1]}.clef"
        p.write_bytes(write_clef(dataclasses.replace(model, nodes=arr)))
        res[name] = p
    res["(d) no change"] = path
    return res


def measure(model_path: str, set_name: str, repeat: int, cold_repeat: int) -> list[dict]:
    from clefprove.dsl.loader import load_invariants
    from clefprove.incremental import ProofCache
    from clefprove.model.loading import load_model
    from clefprove.verify.api import check as _check
    from clefprove.verify.options import CheckOptions

    options = CheckOptions(linear=set_name != "z3")

    def check(*args: object, **kwargs: object) -> object:
        return _check(*args, options=options, **kwargs)  # type: ignore[arg-type]

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        inv = tmp / "inv"
        inv.mkdir()
        if set_name in REL_INV:
            (inv / "rel.inv").write_text(REL_INV[set_name])
        else:
            shutil.copy(ROOT / "invariants" / "edge.inv", inv / "edge.inv")
            (inv / ("z3.inv" if set_name == "z3" else "linear.inv")).write_text(
                Z3_INV if set_name == "z3" else BOX_INV
            )
        base = load_model(model_path)
        prog = load_invariants([str(inv)], base)
        colds, fills = [], []
        fresh = None
        for k in range(cold_repeat):
            m = load_model(model_path)
            t = time.perf_counter()
            fresh = check(m, prog)
            colds.append(time.perf_counter() - t)
            m = load_model(model_path)
            with ProofCache(tmp / f"fill{k}") as cache:
                t = time.perf_counter()
                check(m, prog, cache=cache)
            fills.append(time.perf_counter() - t)  # closing included (a WAL checkpoint)
        assert fresh is not None
        cold = statistics.median(colds)
        common = dict(model=Path(model_path).name, nodes=base.n_nodes, set=set_name)
        n = fresh.summary["paths_checked"]
        rows.append(dict(common, scenario="cold (no cache)", ms=cold * 1e3, checked=n, reused=0))
        rows.append(
            dict(common, scenario="first check, empty cache", ms=statistics.median(fills) * 1e3)
        )
        for name, vpath in _variants(Path(model_path), tmp).items():
            vm = load_model(vpath)
            vprog = load_invariants([str(inv)], vm)
            want = _comparable(check(vm, vprog))
            times, rep = [], None
            for k in range(repeat):
                d = tmp / f"{name[1]}-{k}"
                shutil.copytree(tmp / "fill0", d)
                m = load_model(vpath)
                with ProofCache(d) as cache:
                    t = time.perf_counter()
                    rep = check(m, vprog, cache=cache)
                times.append(time.perf_counter() - t)
                assert _comparable(rep) == want, f"{model_path} {name}: cached != fresh"
                shutil.rmtree(d)
            assert rep is not None
            rows.append(
                dict(
                    common,
                    scenario=name,
                    ms=statistics.median(times) * 1e3,
                    checked=rep.summary["paths_checked"],
                    reused=rep.summary["paths_reused"],
                )
            )
    for r in rows:
        r["of_cold"] = r["ms"] / (cold * 1e3)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", required=True, help=".clef model (repeatable)")
    ap.add_argument(
        "--set", action="append", choices=["box", "z3", *REL_INV], help="invariant set(s)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold-repeat", type=int, default=3)
    ap.add_argument("--against", help="a checkout of the baseline revision")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON (internal)")
    args = ap.parse_args()
    sets = args.set or ["box"]
    if not args.against:
        # clefprove comes from PYTHONPATH (the subprocesses of --against set it to each
        # revision's checkout): no path of this checkout is added here.
        rows = [
            r
            for m in args.model
            for s in sets
            for r in measure(m, s, args.repeat, args.cold_repeat)
        ]
        if args.json:
            print(json.dumps(rows))
            return
        for r in rows:
            print(r)
        return
    table: dict[tuple, dict[str, dict]] = {}
    for m in args.model:
        for s in sets:
            for label, code in (("before", args.against), ("after", str(ROOT))):
                cmd = [sys.executable, __file__, "--json", "--model", m, "--set", s]
                cmd += ["--repeat", str(args.repeat), "--cold-repeat", str(args.cold_repeat)]
                env = dict(os.environ, PYTHONPATH=code)
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                for r in json.loads(out.stdout.strip().splitlines()[-1]):
                    key = (r["model"], r["nodes"], r["set"], r["scenario"])
                    table.setdefault(key, {})[label] = r
    print(
        "| model | invariants | scenario | before ms | before % of cold | after ms "
        "| after % of cold | after checked / reused |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for (_model, nodes, s, scen), d in table.items():
        b, a = d.get("before", {}), d.get("after", {})

        def cell(r: dict) -> str:
            return f"{r['ms']:.0f} | {100 * r['of_cold']:.1f}%" if r else " | "

        cr = f"{a.get('checked', '')} / {a.get('reused', '')}" if "checked" in a else ""
        print(f"| {nodes:,} nodes | {s} | {scen} | {cell(b)} | {cell(a)} | {cr} |")


if __name__ == "__main__":
    main()
