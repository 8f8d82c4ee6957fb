"""Text rendering of a behaviour diff (:class:`~clefprove.incremental.diff.DiffReport`)."""

from __future__ import annotations

import json
from typing import Any

from clefprove.incremental.diff import DiffReport
from clefprove.report.wording import printable


def _json(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False)


def pct(x: float) -> str:
    if x == 0:
        return "0%"
    p = 100 * x
    return f"{p:.4g}%" if p >= 0.0001 else f"{p:.2e}%"


def render_text(rep: DiffReport, max_changes: int = 50) -> str:
    """The human-readable diff."""
    o, n = rep.old, rep.new
    lines = [
        f"{tag}  {m['path']}  {m['name']} {m['version']}  ({m['nodes']} nodes, "
        + ("compiled from JSON source)" if m["sha256"] is None else f"sha256 {m['sha256'][:12]})")
        for tag, m in (("OLD", o), ("NEW", n))
    ]
    lines.append("")
    s = rep.shared
    if not rep.changes:
        lines.append("structure: identical trees")
    else:
        lines.append(
            f"structure: {len(rep.changes)} change(s); {s['new_nodes_in_shared_subtrees']} of "
            f"{s['new_nodes']} NEW nodes lie in {s['shared_subtrees']} subtree(s) shared with OLD"
        )
        for c in rep.changes[:max_changes]:
            where = " and ".join(c.path) if c.path else "(root)"
            lines.append(f"  {c.kind:<8} at {where}")
            lines.append(f"           old  {c.old}")
            lines.append(f"           new  {c.new}")
            if c.moved_from is not None:
                was = " and ".join(c.moved_from) or "the root"
                lines.append(f"           (this subtree was in OLD at {was})")
        if len(rep.changes) > max_changes:
            lines.append(f"  ... and {len(rep.changes) - max_changes} more (see --format json)")
    lines.append("")
    if not rep.comparable:
        lines.append(f"behaviour: not compared: {rep.reason}")
    elif rep.partial and rep.regions_total == 0:
        lines.append(
            "behaviour: partial: no input found where the actions differ in the "
            f"{pct(rep.share_explored or 0.0)} of the input domain explored within the time budget"
        )
    elif rep.regions_total == 0:
        extra = (
            f" (confidence differs on {pct(rep.share_confidence_only)} of the domain)"
            if rep.share_confidence_only
            else ""
        )
        lines.append(f"behaviour: the two models choose the same action for every input{extra}")
    else:
        lines.append(
            f"behaviour: actions differ on {rep.regions_total} region(s) covering "
            f"{pct(rep.share_changed)} of the input domain"
            + (
                f" (partial: {pct(rep.share_explored or 0.0)} of the domain explored within "
                "the time budget)"
                if rep.partial
                else ""
            )
        )
        for t, v in rep.transitions.items():
            lines.append(f"  {t:<28} {pct(v)}")
        for k, r in enumerate(rep.regions, 1):
            lines.append(
                f"  region {k}: {r.old_action} -> {r.new_action}, {pct(r.share)} of the domain"
            )
            lines.append(f"    when     {' and '.join(r.conditions) or '(everywhere)'}")
            lines.append(f"    example  {_json(r.example)}")
        if len(rep.regions) < rep.regions_total:
            rest = rep.regions_total - len(rep.regions)
            lines.append(f"  ... {rest} smaller region(s) not listed (--limit)")
    for w in rep.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(printable(line) for line in lines) + "\n"
