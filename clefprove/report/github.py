"""GitHub Actions workflow commands: one ``::error`` (violated) or ``::warning`` (unknown)
annotation per failing invariant, at its file and line, then a ``::notice`` with the totals.

The file path is relative to the repository root (the workspace GitHub checks out), and the
message and properties are escaped as the runner expects (``%``, CR, LF; also ``:`` and ``,`` in
properties), so a description cannot inject a second command.
"""

from __future__ import annotations

import json
from pathlib import Path

from clefprove.report.locations import locate, repository_root
from clefprove.report.wording import plural, proved
from clefprove.verify.verdicts import UNKNOWN, VIOLATED, RelationalCounterexample, Report


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, root: Path | None = None) -> str:
    root = root if root is not None else repository_root()
    lines: list[str] = []
    for r in report.results:
        if r.status not in (VIOLATED, UNKNOWN):
            continue
        where = locate(r.file, root).display
        unit = "leaf pair" if r.relation is not None else "path"
        if r.status == VIOLATED:
            command = "error"
            message = f"violated on {plural(r.violating_paths, unit)}"
            if r.counterexamples:
                c = r.counterexamples[0]
                if isinstance(c, RelationalCounterexample):
                    message += (
                        f"; counterexample pair differing only in {c.feature}: "
                        f"{json.dumps(c.inputs[0], allow_nan=False)} -> {c.actions[0]}, "
                        f"{json.dumps(c.inputs[1], allow_nan=False)} -> {c.actions[1]}"
                    )
                else:
                    message += (
                        f"; counterexample {json.dumps(c.input, allow_nan=False)} -> {c.action}"
                    )
        else:
            command = "warning"
            message = (
                f"undecided on {plural(r.unknown_paths, unit)} (solver limits): not proved"
                + proved(r.proved_share)
            )
        if r.description:
            message = f"{r.description}\n{message}"
        props = ",".join(
            [
                f"file={_prop(where)}",
                f"line={max(1, r.line)}",
                f"col={max(1, r.column)}",
                f"title={_prop('clefprove: ' + r.invariant)}",
            ]
        )
        lines.append(f"::{command} {props}::{_data(message)}")
    s = report.summary
    lines.append(
        f"::notice title=clefprove::{_data(report.model.path)}: "
        f"{plural(s['invariants'], 'invariant')}: {s['holds']} hold, {s['violated']} violated, "
        f"{s['unknown']} unknown"
    )
    return "\n".join(lines) + "\n"
