"""GitLab code-quality report (the Code Climate subset GitLab reads): a JSON array with one
issue per violated (severity ``critical``) or unknown (``major``) invariant, at its file
(relative to the repository root) and line, with a stable fingerprint (the SARIF one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clefprove.report.locations import locate, repository_root
from clefprove.report.sarif import fingerprint
from clefprove.report.wording import plural, proved
from clefprove.verify.verdicts import UNKNOWN, VIOLATED, Report


def render_gitlab(report: Report, root: Path | None = None) -> str:
    root = root if root is not None else repository_root()
    identity = report.model.name or report.model.sha256
    issues: list[dict[str, Any]] = []
    for r in report.results:
        if r.status not in (VIOLATED, UNKNOWN):
            continue
        where = locate(r.file, root)
        unit = "leaf pair" if r.relation is not None else "path"
        if r.status == VIOLATED:
            what = f"violated on {plural(r.violating_paths, unit)}"
        else:
            what = f"undecided on {plural(r.unknown_paths, unit)} (solver limits)"
            what += proved(r.proved_share)
        issues.append(
            {
                "type": "issue",
                "check_name": f"clefprove/{r.invariant}",
                "description": f"Invariant '{r.invariant}' is {what}"
                + (f": {r.description}" if r.description else ""),
                "categories": ["Security"],
                "severity": "critical" if r.status == VIOLATED else "major",
                "fingerprint": fingerprint(identity, where, r),
                "location": {"path": where.display, "lines": {"begin": max(1, r.line)}},
            }
        )
    return json.dumps(issues, indent=2, allow_nan=False) + "\n"
