"""Benchmark: clefprove's per-invariant check against three baselines, verdicts cross-checked.

For scikit-learn trees of depth 8, 12, 16 and 20 trained on the example data
(examples/make_edge_example.py), and for the SPEC invariants plus
"when client_rtt_ms > 300 and tls_version < 772 ensure action != allow", times:

* clefprove: ``check_invariant`` in-process (model loaded, invariants parsed; leaf boxes are
  recomputed inside every call);
* naive: one fresh Z3 solver per root-to-leaf path;
* whole: one Z3 formula for the whole tree (action and confidence as if-then-else terms);
* veritas: dtai-veritas max-output search over the tree with leaf value 1 where the leaf's
  decision breaks ``ensure`` and the ``when`` box as the search box.  Boundaries are encoded
  exactly for it: Veritas splits are ``x < v`` in float64, so a clef split ``x <= t`` becomes
  ``x < nextafter(t, +inf)`` on float features, ``x < floor(t) + 1`` on integer and bool
  features, ``code < k + 1`` for a prefix code set; the ``when`` box is half-open in the same way.
  Conversion time is included.  Veritas cannot express a linear ``when`` (n/a).

With ``--fresh``, a column more: clefprove end to end with fresh objects (no memo carried over):
load the ``.clef`` bytes, parse the invariant (with the file's severity and ``let`` lines) and
check it, the issue-11 comparison with Veritas's end-to-end time (conversion plus search).

Run: ``python bench/bench_check.py [--depths 8 12 16 20] [--repeat 5] [--fresh]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from common import example_module

ROOT = Path(__file__).resolve().parent.parent

EXTRA = """
invariant slow_legacy_not_allowed_strict:
  when client_rtt_ms > 300 and tls_version < 772
  ensure action != allow
"""


def timed(fn, repeat: int) -> tuple[float, object]:
    out = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    # The minimum: the machine is shared, and contention only ever adds time.
    return min(times), out


# ---------------------------------------------------------------- baselines with Z3


def naive(model, inv) -> bool:
    """True when violated: a fresh solver per path."""
    import z3

    from clefprove.dsl import checked as ck
    from clefprove.geometry.boxes import path_to
    from clefprove.smt.paths import Limits, _Encoder

    enc = _Encoder(model, Limits())
    base = enc.solver.assertions()
    found = False
    for n in model.iter_nodes():
        if not n.is_leaf:
            continue
        s = z3.Solver(ctx=enc.ctx)
        s.add(base)
        s.add(*[enc.split(node, left) for node, left in path_to(model, n.index)])
        s.add(enc.formula(ck.And((inv.when, ck.Not(inv.ensure))), n.action, n.confidence))
        if s.check() == z3.sat:
            found = True
    return found


def whole(model, inv) -> bool:
    import z3

    from clefprove.dsl import checked as ck
    from clefprove.smt.paths import Limits, _Encoder, _q

    enc = _Encoder(model, Limits())
    ctx = enc.ctx

    def terms(i: int):
        n = model.node(i)
        if n.is_leaf:
            return z3.IntVal(n.action, ctx), _q(ctx, n.confidence)
        la, lc = terms(n.left)
        ra, rc = terms(n.right)
        # The split condition without rounding tricks: x <= t (Int features compare as reals).
        f = model.features[n.feature]
        x = enc.vars[n.feature]
        if n.categories or f.values:
            c = z3.Or([x == k for k in sorted(n.categories)])
        else:
            c = x <= _q(ctx, n.threshold)
        return z3.If(c, la, ra), z3.If(c, lc, rc)

    act, conf = terms(0)

    def enc_f(f):
        match f:
            case ck.Const(v):
                return z3.BoolVal(v, ctx)
            case ck.Compare(expr, strict):
                e = _q(ctx, expr.const)
                for v, c in expr.terms:
                    e = e + _q(ctx, c) * (conf if v == ck.CONFIDENCE else enc.vars[v])
                return e < 0 if strict else e <= 0
            case ck.InSet(i, codes):
                return z3.Or([enc.vars[i] == c for c in sorted(codes)])
            case ck.ActionIn(acts):
                return z3.Or([act == a for a in sorted(acts)] or [z3.BoolVal(False, ctx)])
            case ck.Not(a):
                return z3.Not(enc_f(a))
            case ck.And(args):
                return z3.And([enc_f(a) for a in args])
            case ck.Or(args):
                return z3.Or([enc_f(a) for a in args])
        raise TypeError(f)

    s = enc.solver
    s.push()
    s.add(enc_f(inv.when), z3.Not(enc_f(inv.ensure)))
    r = s.check() == z3.sat
    s.pop()
    return r


# ---------------------------------------------------------------- Veritas


def when_box(model, when):
    """The ``when`` formula as a box [lo, hi) per feature (Veritas), or None if not a box."""
    from clefprove.verify.normal import Bound, Cat, NAnd, Normalizer

    norm = Normalizer(model).nnf(when)
    lits = norm.args if isinstance(norm, NAnd) else (norm,)
    lo = [f.min for f in model.features]
    hi = [f.max for f in model.features]
    for lit in lits:
        if getattr(lit, "value", None) is True:
            continue
        if isinstance(lit, Bound) and lit.col < len(model.features):
            if lit.upper:
                hi[lit.col] = min(hi[lit.col], lit.bound)
            else:
                lo[lit.col] = max(lo[lit.col], lit.bound)
        elif isinstance(lit, Cat):
            codes = sorted(lit.codes)
            if codes != list(range(codes[0], codes[-1] + 1)):
                return None
            lo[lit.feature] = max(lo[lit.feature], codes[0])
            hi[lit.feature] = min(hi[lit.feature], codes[-1])
        else:
            return None
    return lo, hi


def veritas_check(model, inv):
    import veritas as vt

    from clefprove.dsl import checked as ck

    box = when_box(model, inv.when)
    if box is None:
        return None  # not expressible
    at = vt.AddTree(1, vt.AddTreeType.REGR)
    t = at.add_tree()

    def build(i: int, vn: int) -> None:
        n = model.node(i)
        if n.is_leaf:
            bad = not ck.evaluate(inv.ensure, [0.0] * len(model.features), n.action, n.confidence)
            t.set_leaf_value(vn, 0, 1.0 if bad else 0.0)
            return
        f = model.features[n.feature]
        left, right = n.left, n.right
        if f.values:  # categorical: prefix {0..k} or suffix {j..V-1} code sets only
            cats = sorted(n.categories)
            if cats[0] == 0:
                v = float(cats[-1] + 1)
            else:
                v = float(cats[0])
                left, right = right, left
        elif f.is_integral:
            v = float(math.floor(n.threshold) + 1)
        else:
            v = math.nextafter(n.threshold, math.inf)
        t.split(vn, n.feature, v)
        build(left, t.left(vn))
        build(right, t.right(vn))

    build(0, t.root())
    lo, hi = box
    prune = []
    for i, f in enumerate(model.features):
        top = hi[i] + 1 if f.is_integral else math.nextafter(hi[i], math.inf)
        prune.append(vt.Interval(lo[i], top))
    config = vt.Config(vt.HeuristicType.MAX_OUTPUT)
    config.stop_when_optimal = True
    search = config.get_search(at, prune)
    while search.step_for(10.0, 1000) not in (vt.StopReason.OPTIMAL, vt.StopReason.NO_MORE_OPEN):
        pass
    violated = search.num_solutions() > 0 and search.get_solution(0).output > 0.5
    return violated, (search.get_solution(0).box() if violated else None), lo


def confirm_veritas(model, inv, box, lo) -> bool:
    """Veritas's witness replays on the tree (it does, with exact boundaries)."""
    from clefprove.dsl import checked as ck
    from clefprove.eval.evaluator import Evaluator

    x = []
    for i, f in enumerate(model.features):
        a = max(box[i].lo, lo[i]) if i in box else lo[i]
        x.append(float(math.ceil(a)) if f.is_integral else float(a))
    d = Evaluator(model).evaluate_one(x)
    return ck.evaluate(inv.when, x, d.action, d.confidence) and not ck.evaluate(
        inv.ensure, x, d.action, d.confidence
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", type=int, nargs="+", default=[8, 12, 16, 20])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--fresh", action="store_true", help="also time load + parse + check")
    args = ap.parse_args()

    mk = example_module()

    from clefprove.dsl.loader import load_invariants, parse_text
    from clefprove.model.clef import load_bytes, write_clef
    from clefprove.verify.api import check_invariant

    spec = (ROOT / "invariants" / "edge.inv").read_text()
    preamble = "".join(
        line + "\n" for line in spec.splitlines() if line.startswith(("severity", "let "))
    )

    def fresh(data: bytes, text: str) -> object:
        model = load_bytes(data)
        (inv,) = parse_text(text, model, "one.inv").invariants
        return check_invariant(model, inv)

    rows = []
    for depth in args.depths:
        _, model = mk.build(depth, args.rows)
        program = load_invariants([ROOT / "invariants"], model)
        sev = "severity allow < challenge < rate_limit < block\n"
        extra = parse_text(sev + EXTRA, model, "bench.inv").invariants
        data = write_clef(model)
        for inv in (*program.invariants, *extra):
            t_c, res = timed(lambda inv=inv, model=model: check_invariant(model, inv), args.repeat)
            t_f = None
            if args.fresh:
                text = preamble + inv.source
                t_f, res_f = timed(lambda d=data, t=text: fresh(d, t), args.repeat)
                assert res_f.status == res.status
            reps = max(1, args.repeat // 2)
            t_n, v_n = timed(
                lambda inv=inv, model=model: naive(model, inv), reps if depth < 16 else 1
            )
            t_w, v_w = timed(lambda inv=inv, model=model: whole(model, inv), reps)
            t_v, v_out = timed(lambda inv=inv, model=model: veritas_check(model, inv), args.repeat)
            v_v = None
            if v_out is not None:
                v_v, v_box, v_lo = v_out
                if v_v:
                    assert confirm_veritas(model, inv, v_box, v_lo), "Veritas witness fails"

            mine = res.status == "violated"
            agree = v_n == mine and v_w == mine and (v_v is None or v_v == mine)
            rows.append(
                (
                    depth,
                    model.n_nodes,
                    inv.name,
                    res.status,
                    t_c,
                    t_n,
                    t_w,
                    t_v if v_v is not None else None,
                    agree,
                    t_f,
                )
            )
            print(
                f"depth {depth:2d} {inv.name:32s} {res.status:9s} clefprove {t_c * 1e3:8.2f} ms  "
                f"naive {t_n * 1e3:9.1f} ms  whole {t_w * 1e3:8.1f} ms  "
                f"veritas {'n/a' if v_v is None else f'{t_v * 1e3:7.2f} ms'}  agree={agree}"
                + ("" if t_f is None else f"  fresh {t_f * 1e3:7.2f} ms"),
                flush=True,
            )
    print()
    fresh_head = " clefprove load + parse + check ms | fresh / Veritas |" if args.fresh else ""
    print(
        "| depth | nodes | invariant | verdict | clefprove ms | naive per-path Z3 ms "
        "| whole-tree Z3 ms | Veritas, exact boundaries, ms | verdicts agree |" + fresh_head
    )
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.fresh else ""))
    for d, n, name, st, c, nv, w, v, agree, f in rows:
        vs = "n/a (linear when)" if v is None else f"{v * 1e3:.2f}"
        ok = "yes" if agree else "NO"
        tail = ""
        if f is not None:
            tail = f" {f * 1e3:.2f} | {'n/a' if v is None else f'{f / v:.2f}'} |"
        print(
            f"| {d} | {n} | {name} | {st} | {c * 1e3:.2f} | {nv * 1e3:.1f} | {w * 1e3:.1f} "
            f"| {vs} | {ok} |" + tail
        )
    slower = [
        r for r in rows if not (r[4] < r[5] and r[4] < r[6] and (r[7] is None or r[4] < r[7]))
    ]
    if args.fresh:
        beaten = [r for r in rows if r[7] is not None and r[9] < r[7]]
        compared = [r for r in rows if r[7] is not None]
        print(f"fresh load + parse + check below Veritas on {len(beaten)}/{len(compared)} pairs")
    print()
    print(f"clefprove fastest on {len(rows) - len(slower)}/{len(rows)} (depth, invariant) pairs")
    for r in slower:
        print(f"  not fastest: depth {r[0]} {r[2]}")
    if not all(r[8] for r in rows):
        print("VERDICT MISMATCH")
        sys.exit(1)


if __name__ == "__main__":
    main()
