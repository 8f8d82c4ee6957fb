"""Text rendering of a check :class:`~clefprove.verify.verdicts.Report` (rich)."""

from __future__ import annotations

import io
import json

from clefprove.verify.verdicts import RelationalCounterexample, Report

_STYLE = {"holds": "green", "violated": "bold red", "unknown": "yellow"}


def render_text(report: Report, color: bool = False, width: int = 100) -> str:
    """The human report: a summary table, then each violation with its path and inputs."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(
        file=buf, force_terminal=color, no_color=not color, width=width, highlight=False
    )
    m = report.model
    console.print(
        f"[bold]{m.path}[/bold]  {m.nodes} nodes, {m.leaves} leaves  sha256 {m.sha256[:16]}"
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("invariant")
    table.add_column("status")
    table.add_column("paths", justify="right")
    table.add_column("where")
    for r in report.results:
        status = r.status + (" (vacuous)" if r.vacuous else "")
        pairs = " pairs" if r.relation is not None else ""
        if r.status == "violated":
            paths = f"{r.violating_paths}{pairs} violating"
        elif r.status == "unknown":
            paths = f"{r.unknown_paths}{pairs} undecided"
        else:
            paths = str(r.paths_checked + r.paths_reused)
        table.add_row(r.invariant, f"[{_STYLE[r.status]}]{status}[/]", paths, f"{r.file}:{r.line}")
    console.print(table)
    for r in report.results:
        if r.status != "violated":
            continue
        console.print()
        console.print(
            f"[bold red]VIOLATED[/] [bold]{r.invariant}[/] ({r.file}:{r.line}): "
            + (
                f"{r.violating_paths} violating leaf pair{'s' if r.violating_paths != 1 else ''}"
                if r.relation is not None
                else f"{r.violating_paths} violating path{'s' if r.violating_paths != 1 else ''}"
            )
        )
        if r.description:
            console.print(f"  {r.description}")
        for i, c in enumerate(r.counterexamples, 1):
            if isinstance(c, RelationalCounterexample):
                console.print(
                    f"  counterexample {i}: a pair differing only in {c.feature}: "
                    f"[bold]{c.actions[0]}[/] -> [bold]{c.actions[1]}[/]"
                )
                for k in range(2):
                    console.print(
                        f"    input {k + 1}: " + json.dumps(c.inputs[k]),
                        soft_wrap=True,
                        markup=False,
                    )
                    console.print(
                        f"      -> {c.actions[k]} (confidence {c.confidences[k]:g}, "
                        f"leaf {c.leaves[k]}); path: "
                        + (" and ".join(c.paths[k]) or "(root leaf)"),
                        soft_wrap=True,
                    )
                continue
            console.print(
                f"  counterexample {i}: action [bold]{c.action}[/] "
                f"(confidence {c.confidence:g}, {c.where})"
            )
            if c.leaves is None:
                console.print(
                    "    path:  " + (" and ".join(c.path) or "(root leaf)"), soft_wrap=True
                )
            console.print("    input: " + json.dumps(c.input), soft_wrap=True, markup=False)
    for w in report.all_warnings:
        console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    s = report.summary
    console.print()
    console.print(
        f"{s['invariants']} invariants: {s['holds']} hold, {s['violated']} violated, "
        f"{s['unknown']} unknown; {s['paths_checked']} paths checked, "
        f"{s['paths_reused']} reused; {s['seconds']:.3f} s"
    )
    return buf.getvalue()
