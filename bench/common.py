"""Small helpers shared by the bench/ scripts: timing, plain-text tables, the example trainer."""

from __future__ import annotations

import functools
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@functools.cache
def example_module() -> Any:
    """``examples/make_edge_example.py`` (features, actions, data generator, trainer)."""
    spec = importlib.util.spec_from_file_location(
        "make_edge_example", EXAMPLES / "make_edge_example.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_at(rev: str, dest: Path) -> Path:
    """The ``clefprove`` package as committed at git revision *rev*, extracted under *dest*
    (``git archive``); returns *dest*, the directory to put on ``PYTHONPATH``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "clefprove"], check=True, capture_output=True
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def time_call(fn: Callable[[], Any], repeat: int = 5, number: int = 1) -> list[float]:
    """Wall-clock seconds per call of *fn*, for each of *repeat* rounds of *number* calls."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def fmt_seconds(s: float) -> str:
    """Human units: ns, µs, ms or s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (readable as plain text, pasteable into docs/)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells
    ]
    return "\n".join([line, rule, *body])


def machine() -> str:
    import platform

    import numpy

    return (
        f"Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"{platform.machine()}, {_cpus()} CPUs"
    )


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def progress(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def extra_tree_model(
    rows: int, seed: int = 20261129, cache: Path | None = None, cart: bool = False
) -> Any:
    """A large, deep, unbalanced tree on the example data: scikit-learn's ExtraTreeClassifier
    (random thresholds, grown until pure) on *rows* synthetic requests, converted exactly
    (about 0.4 nodes per row: 300,000 rows give ~120K nodes of depth ~50); with *cart*, a
    DecisionTreeClassifier without depth limit (~0.13 nodes per row, depth ~100 at 400,000
    rows).  Cached as ``.clef`` in *cache* when given."""
    from clefprove.model.clef import write_clef
    from clefprove.model.loading import load_model
    from clefprove.model.sklearn import from_sklearn

    if cache is not None:
        path = cache / f"{'cart' if cart else 'extra'}-{rows}-{seed}.clef"
        if path.exists():
            return load_model(path)
    from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

    mk = example_module()
    X, y = mk.generate(rows, seed)
    kind = DecisionTreeClassifier if cart else ExtraTreeClassifier
    clf = kind(random_state=seed).fit(X, y)
    model = from_sklearn(
        clf, features=mk.FEATURES, actions=mk.ACTIONS, name="edge-extra", version="1.0.0"
    )
    if cache is not None:
        path.write_bytes(write_clef(model))
    return model
