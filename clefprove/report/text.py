"""Text rendering of a check :class:`~clefprove.verify.verdicts.Report`.

Every user-provided string (paths, descriptions, names, values) goes through
:func:`~clefprove.report.wording.printable` first, so a description holding an escape sequence
prints as written and cannot drive the terminal; colour is the only escape sequence this module
writes, and only when asked.  A counterexample shows the region its leaf selects (one bound pair
per feature); ``verbose`` adds the full chain of split conditions from the root.

The table is laid out here rather than by a terminal library: importing one cost about a third
of the whole ``check`` command on a small model (docs/performance.md), and a report read in CI
logs is better with long cells kept whole than wrapped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from clefprove.dsl.errors import cells
from clefprove.report.wording import confidence, plural, printable
from clefprove.verify.verdicts import (
    HOLDS,
    UNKNOWN,
    VIOLATED,
    Counterexample,
    InvariantResult,
    RelationalCounterexample,
    Report,
)

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_STYLE = {HOLDS: "\x1b[32m", VIOLATED: "\x1b[1;31m", UNKNOWN: "\x1b[33m"}


class _Painter:
    """Styles a printable string with ANSI colour, or leaves it plain."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.color and text else text


def _width(text: str) -> int:
    """Terminal cells *text* takes (:func:`~clefprove.dsl.errors.cells` per character)."""
    return len(text) if text.isascii() else sum(map(cells, text))


def _conditions(items: Sequence[str]) -> str:
    return " and ".join(items) if items else "(every input: the root is a leaf)"


def render_text(report: Report, color: bool = False, verbose: bool = False) -> str:
    """The human report: a summary table, then each violation with its region and inputs."""
    paint = _Painter(color)
    out: list[str] = []
    m = report.model
    digest = "compiled from JSON source" if m.from_source else f"sha256 {m.sha256[:16]}"
    out.append(
        paint(printable(m.path), _BOLD)
        + printable(f"  {m.nodes} nodes, {m.leaves} leaves  {digest}")
    )
    rows: list[tuple[str, str, str, str]] = [("invariant", "status", "paths", "where")]
    for r in report.results:
        status = r.status + (" (vacuous)" if r.vacuous else "")
        if r.status == VIOLATED:
            paths = f"{_counted(r, r.violating_paths)} violating"
        elif r.status == UNKNOWN:
            paths = f"{_counted(r, r.unknown_paths)} undecided"
        else:
            paths = str(r.paths_checked + r.paths_reused)
        rows.append((printable(r.invariant), status, paths, printable(f"{r.file}:{r.line}")))
    widths = [max(_width(row[i]) for row in rows) for i in range(4)]
    for k, row in enumerate(rows):
        shown = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - _width(cell))
            if k == 0:
                cell = paint(cell, _BOLD)
            elif i == 1:
                cell = paint(cell, _STYLE[report.results[k - 1].status])
            shown.append(pad + cell if i == 2 else cell + pad)
        out.append("  ".join(shown).rstrip())
    for r in report.results:
        if r.status != VIOLATED:
            continue
        out.append("")
        unit = "violating leaf pair" if r.relation is not None else "violating path"
        out.append(
            paint("VIOLATED", _STYLE[VIOLATED])
            + " "
            + paint(printable(r.invariant), _BOLD)
            + printable(f" ({r.file}:{r.line}): {plural(r.violating_paths, unit)}")
        )
        if r.description:
            out.append(printable(f"  {r.description}"))
        for i, c in enumerate(r.counterexamples, 1):
            if isinstance(c, RelationalCounterexample):
                _pair(out, paint, i, c, verbose)
            else:
                _single(out, paint, i, c, verbose)
    for w in report.all_warnings:
        out.append(paint("warning:", _STYLE[UNKNOWN]) + printable(f" {w}"))
    out.append("")
    out.append(summary_line(report))
    return "\n".join(out) + "\n"


def _counted(r: InvariantResult, n: int) -> str:
    """*n* in the summary table: a relational invariant's counts are leaf pairs."""
    if r.relation is None:
        return str(n)
    return f"{n} pair" if n == 1 else f"{n} pairs"


def summary_line(report: Report) -> str:
    """The one-line total (also what ``-q`` keeps)."""
    s = report.summary
    return (
        f"{plural(s['invariants'], 'invariant')}: {s['holds']} hold, {s['violated']} violated, "
        f"{s['unknown']} unknown; {plural(s['paths_checked'], 'path')} checked, "
        f"{s['paths_reused']} reused; {s['seconds']:.3f} s"
    )


def _single(out: list[str], paint: _Painter, i: int, c: Counterexample, verbose: bool) -> None:
    out.append(
        printable(f"  counterexample {i}: action ")
        + paint(printable(c.action), _BOLD)
        + printable(f" (confidence {confidence(c.confidence)}, {c.where})")
    )
    out.append(printable("    region: " + _conditions(c.region or c.path)))
    if verbose and c.leaves is None:  # an ensemble's path is its region
        out.append(printable("    path:   " + _conditions(c.path)))
    out.append(printable("    input:  " + json.dumps(c.input, allow_nan=False)))


def _pair(
    out: list[str], paint: _Painter, i: int, c: RelationalCounterexample, verbose: bool
) -> None:
    out.append(
        printable(f"  counterexample {i}: a pair differing only in {c.feature}: ")
        + paint(printable(c.actions[0]), _BOLD)
        + " -> "
        + paint(printable(c.actions[1]), _BOLD)
    )
    for k in range(2):
        out.append(printable(f"    input {k + 1}: " + json.dumps(c.inputs[k], allow_nan=False)))
        out.append(
            printable(
                f"      -> {c.actions[k]} (confidence {confidence(c.confidences[k])}, "
                f"{c.where(k)}); region: " + _conditions(c.regions[k] or c.paths[k])
            )
        )
        if verbose:
            out.append(printable("      path: " + _conditions(c.paths[k])))
