"""Text rendering of a check :class:`~clefprove.verify.verdicts.Report` (rich).

Every user-provided string (paths, descriptions, names, values) goes in as a rich ``Text``, never
as markup, after :func:`~clefprove.report.wording.printable` has made its control characters
visible: a description holding ``[/]`` or an escape sequence prints as written.  A
counterexample shows the region its leaf selects (one bound pair per feature); ``verbose`` adds
the full chain of split conditions from the root.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from clefprove.report.wording import confidence, plural, printable
from clefprove.verify.verdicts import (
    HOLDS,
    UNKNOWN,
    VIOLATED,
    Counterexample,
    RelationalCounterexample,
    Report,
)

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {HOLDS: "green", VIOLATED: "bold red", UNKNOWN: "yellow"}


def _t(*parts: str | tuple[str, str]) -> Text:
    """A Text from plain strings and (string, style) pairs, every string made printable."""
    return Text.assemble(
        *((printable(p[0]), p[1]) if isinstance(p, tuple) else printable(p) for p in parts)
    )


def _conditions(items: Sequence[str]) -> str:
    return " and ".join(items) if items else "(every input: the root is a leaf)"


def render_text(
    report: Report, color: bool = False, width: int = 100, verbose: bool = False
) -> str:
    """The human report: a summary table, then each violation with its region and inputs."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        width=width,
        highlight=False,
        markup=False,
        emoji=False,
    )
    m = report.model
    digest = "compiled from JSON source" if m.from_source else f"sha256 {m.sha256[:16]}"
    console.print(_t((m.path, "bold"), f"  {m.nodes} nodes, {m.leaves} leaves  {digest}"))
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("invariant")
    table.add_column("status")
    table.add_column("paths", justify="right")
    table.add_column("where")
    for r in report.results:
        status = r.status + (" (vacuous)" if r.vacuous else "")
        pairs = " pairs" if r.relation is not None else ""
        if r.status == VIOLATED:
            paths = f"{r.violating_paths}{pairs} violating"
        elif r.status == UNKNOWN:
            paths = f"{r.unknown_paths}{pairs} undecided"
        else:
            paths = str(r.paths_checked + r.paths_reused)
        table.add_row(
            _t(r.invariant), _t((status, _STYLE[r.status])), paths, _t(f"{r.file}:{r.line}")
        )
    console.print(table)
    for r in report.results:
        if r.status != VIOLATED:
            continue
        console.print()
        unit = "violating leaf pair" if r.relation is not None else "violating path"
        console.print(
            _t(
                ("VIOLATED", "bold red"),
                " ",
                (r.invariant, "bold"),
                f" ({r.file}:{r.line}): {plural(r.violating_paths, unit)}",
            )
        )
        if r.description:
            console.print(_t(f"  {r.description}"))
        for i, c in enumerate(r.counterexamples, 1):
            if isinstance(c, RelationalCounterexample):
                _pair(console, i, c, verbose)
            else:
                _single(console, i, c, verbose)
    for w in report.all_warnings:
        console.print(_t(("warning:", "yellow"), f" {w}"), soft_wrap=True)
    console.print()
    console.print(summary_line(report))
    return buf.getvalue()


def summary_line(report: Report) -> str:
    """The one-line total (also what ``-q`` keeps)."""
    s = report.summary
    return (
        f"{plural(s['invariants'], 'invariant')}: {s['holds']} hold, {s['violated']} violated, "
        f"{s['unknown']} unknown; {plural(s['paths_checked'], 'path')} checked, "
        f"{s['paths_reused']} reused; {s['seconds']:.3f} s"
    )


def _single(console: Console, i: int, c: Counterexample, verbose: bool) -> None:
    console.print(
        _t(
            f"  counterexample {i}: action ",
            (c.action, "bold"),
            f" (confidence {confidence(c.confidence)}, {c.where})",
        )
    )
    if c.leaves is None:  # an ensemble's counterexample has no single path or region
        console.print(_t("    region: " + _conditions(c.region or c.path)), soft_wrap=True)
    if verbose and c.leaves is None:
        console.print(_t("    path:   " + _conditions(c.path)), soft_wrap=True)
    console.print(_t("    input:  " + json.dumps(c.input, allow_nan=False)), soft_wrap=True)


def _pair(console: Console, i: int, c: RelationalCounterexample, verbose: bool) -> None:
    console.print(
        _t(
            f"  counterexample {i}: a pair differing only in {c.feature}: ",
            (c.actions[0], "bold"),
            " -> ",
            (c.actions[1], "bold"),
        )
    )
    for k in range(2):
        console.print(
            _t(f"    input {k + 1}: " + json.dumps(c.inputs[k], allow_nan=False)), soft_wrap=True
        )
        console.print(
            _t(
                f"      -> {c.actions[k]} (confidence {confidence(c.confidences[k])}, "
                f"leaf {c.leaves[k]}); region: " + _conditions(c.regions[k] or c.paths[k])
            ),
            soft_wrap=True,
        )
        if verbose:
            console.print(_t("      path: " + _conditions(c.paths[k])), soft_wrap=True)
