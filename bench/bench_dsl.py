"""DSL benchmark: import, parser construction, and parse + type-check time.

Run: ``python bench/bench_dsl.py``.  Prints a table (docs/dsl.md keeps a copy).  Process-level
rows run a fresh interpreter each time (median of several runs), so they include Python's own
start-up; the "python -c pass" row is that baseline.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from importlib import resources

from common import ROOT, fmt_seconds, machine, median, table, time_call

EDGE = ROOT / "invariants" / "edge.inv"
MODEL = ROOT / "examples" / "spec-toy.json"


def _process(code: str, runs: int = 7) -> str:
    """Median wall time and CPU time (user + sys) of a fresh interpreter running *code*.

    CPU time is the steadier number on a loaded machine.
    """
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return f"{fmt_seconds(median(walls))} (CPU {fmt_seconds(median(cpus))})"


def _big_file(n: int) -> str:
    text = (EDGE.read_text()).split("invariant ", 1)[0]
    body = "".join(
        f"invariant inv_{i}:\n  when slow and legacy or path_depth in [{i % 60}, 64]\n"
        f"  ensure action >= challenge implies confidence >= 0.{i % 9 + 1}\n\n"
        for i in range(n)
    )
    return text + body


def _box_case() -> tuple[object, str]:
    """A model with 30 float features and the 60-literal box invariant of
    ``bench/bench_ensembles.py`` (``f_j >= lo and f_j <= hi`` for every feature)."""
    from clefprove.model.source import compile_source

    feats = [
        {"name": f"f{j}", "type": "float", "min": 0.0, "max": 10.0 + j, "default": 1.0}
        for j in range(30)
    ]
    model = compile_source(
        {
            "features": feats,
            "actions": ["class_0", "class_1"],
            "tree": {"action": "class_0", "confidence": 1.0},
        }
    )
    cond = " and ".join(
        f"f{j} >= {0.1 * j + 0.013!r} and f{j} <= {0.37 * j + 1.29!r}" for j in range(30)
    )
    return model, f"invariant box:\n  when {cond}\n  ensure action == class_0\n"


def _thread_cpu(fn, repeat: int, number: int) -> list[float]:
    """CPU seconds of this thread per call of *fn* (steadier than wall time under load)."""
    out = []
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(number):
            fn()
        out.append((time.thread_time() - t0) / number)
    return out


def main() -> None:
    import lark

    from clefprove.dsl.fmt import format_text
    from clefprove.dsl.loader import parse_text
    from clefprove.model.source import load_source

    model = load_source(MODEL)
    edge = EDGE.read_text()
    grammar = resources.files("clefprove.dsl").joinpath("grammar.lark").read_text()
    options = dict(
        parser="lalr",
        lexer="basic",
        start="item",
        propagate_positions=True,
        maybe_placeholders=True,
    )

    rows = []
    rows.append(["python -c pass (baseline)", _process("pass")])
    rows.append(["import clefprove.dsl.loader", _process("import clefprove.dsl.loader")])
    rows.append(
        [
            "import + load SPEC model + parse and check edge.inv",
            _process(
                "from clefprove.model.source import load_source;"
                "from clefprove.dsl.loader import load_invariants;"
                f"load_invariants([{str(EDGE)!r}], load_source({str(MODEL)!r}))"
            ),
        ]
    )
    rows.append(
        [
            "`clefprove fmt --check invariants/edge.inv` (whole command)",
            _process(
                "import sys; from clefprove.cli.main import main;"
                f"sys.exit(main(['fmt', '--check', {str(EDGE)!r}]))"
            ),
        ]
    )
    rows.append(
        [
            "Lark LALR build, no cache",
            fmt_seconds(median(time_call(lambda: lark.Lark(grammar, **options), 5))),
        ]
    )
    lark.Lark(grammar, cache=True, **options)
    rows.append(
        [
            "Lark LALR build, cache=True (warm cache file)",
            fmt_seconds(median(time_call(lambda: lark.Lark(grammar, cache=True, **options), 5))),
        ]
    )
    rows.append(
        [
            "parse + check edge.inv (in process, parser built)",
            fmt_seconds(median(time_call(lambda: parse_text(edge, model), 7, 20))),
        ]
    )
    rows.append(
        [
            "fmt edge.inv (in process)",
            fmt_seconds(median(time_call(lambda: format_text(edge), 7, 20))),
        ]
    )
    box_model, box_text = _box_case()
    from clefprove.verify import engine as eg

    def box_all() -> None:
        eg.prepare(box_model, parse_text(box_text, box_model).invariants[0])

    for what, fn in (
        ("parse + check a 60-literal box `when` (30 float features)", None),
        ("the same + its normal form (`engine.prepare`, fresh invariant)", box_all),
    ):
        call = fn or (lambda: parse_text(box_text, box_model))
        wall = median(time_call(call, 7, 20))
        cpu = median(_thread_cpu(call, 7, 20))
        rows.append([what, f"{fmt_seconds(wall)} (CPU {fmt_seconds(cpu)})"])
    for n in (100, 1000):
        big = _big_file(n)
        t = median(time_call(lambda big=big: parse_text(big, model), 3))
        rows.append(
            [
                f"parse + check {n} invariants ({len(big) // 1024} KiB)",
                f"{fmt_seconds(t)} ({fmt_seconds(t / n)} each)",
            ]
        )
    print(f"DSL benchmark — {machine()}")
    print(table(["what", "time (median; wall, and CPU for whole processes)"], rows))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "bench"))
    main()
