"""Text rendering of a gate verdict (:class:`~clefprove.app.gate.GateResult`)."""

from __future__ import annotations

import json

from clefprove.app.gate import GateResult
from clefprove.report.diff_text import pct
from clefprove.report.wording import printable
from clefprove.verify.verdicts import HOLDS, VIOLATED, RelationalCounterexample


def render_text(res: GateResult, verbose: bool = False) -> str:
    """The gate's human-readable output (every line printable; ``verbose``: full paths)."""
    rep = res.report
    s = rep.summary
    lines = [f"integrity  ok  {res.model_path}  sha256 {res.sha256}"]
    reuse = (
        f"{s['paths_reused']} reused from the cache"
        if res.cache_dir is not None
        else "cache disabled"
    )
    lines.append(
        f"check      {s['holds']} hold, {s['violated']} violated, {s['unknown']} unknown  "
        f"({s['paths_checked']} paths checked, {reuse})"
    )
    for r in rep.results:
        mark = {HOLDS: "ok  ", VIOLATED: "FAIL"}.get(r.status, "??  ")
        lines.append(f"  {mark} {r.invariant}  [{r.status}]  {r.file}:{r.line}")
        for c in r.counterexamples[:1]:
            if isinstance(c, RelationalCounterexample):  # a pair differing only in c.feature
                for k in range(2):
                    lines.append(
                        f"         counterexample {k + 1}/2 "
                        f"{json.dumps(c.inputs[k], allow_nan=False)} -> {c.actions[k]}"
                    )
                continue
            lines.append(
                f"         counterexample {json.dumps(c.input, allow_nan=False)} -> {c.action}"
            )
            if c.region or c.path:  # an ensemble's counterexample has neither
                lines.append(f"         region {' and '.join(c.region or c.path)}")
            if verbose:
                lines.append(f"         path {' and '.join(c.path)}")
    if res.diff is not None:
        d = res.diff
        lines.append(f"diff       {len(d.changes)} structural change(s) from {d.old['path']}")
        if not d.comparable:
            lines.append(f"           behaviour not compared: {d.reason}")
        elif d.regions_total == 0:
            lines.append("           same action for every input")
        else:
            lines.append(
                f"           actions differ on {d.regions_total} region(s), "
                f"{pct(d.share_changed)} of the input domain"
            )
            for t, v in list(d.transitions.items())[:5]:
                lines.append(f"             {t:<26} {pct(v)}")
    for w in rep.all_warnings:
        lines.append(f"warning: {w}")
    verdict = {0: "PASS", 1: "FAIL (violated)", 3: "FAIL (unknown)"}[res.exit_code]
    lines.append(f"gate       {verdict}  ({res.seconds:.3f} s)")
    return "\n".join(printable(line) for line in lines) + "\n"
