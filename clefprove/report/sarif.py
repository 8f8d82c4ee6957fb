"""SARIF 2.1.0 rendering of a check report.

One rule per invariant; one result per invariant: ``kind: fail`` (level ``error``) when it is
violated, ``kind: pass`` when it holds, ``kind: open`` when it is unknown, each located at the
invariant's line in its ``.inv`` file.  ``partialFingerprints`` hash the invariant's file and name,
so a finding keeps its identity across runs, model versions and edits elsewhere in the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePath
from typing import Any

from clefprove.verify.verdicts import InvariantResult, RelationalCounterexample, Report

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


def fingerprint(r: InvariantResult) -> str:
    key = f"{PurePath(r.file).as_posix()}\0{r.invariant}"
    return hashlib.sha256(key.encode()).hexdigest()


def _message(r: InvariantResult) -> str:
    if r.status == "violated":
        text = (
            f"Invariant '{r.invariant}' is violated on {r.violating_paths} path"
            f"{'s' if r.violating_paths != 1 else ''} of the model."
        )
        if r.counterexamples:
            c = r.counterexamples[0]
            if isinstance(c, RelationalCounterexample):
                text += (
                    f" Counterexample pair (differing only in {c.feature}): "
                    f"{json.dumps(c.inputs[0])} -> {c.actions[0]} (leaf {c.leaves[0]}), "
                    f"{json.dumps(c.inputs[1])} -> {c.actions[1]} (leaf {c.leaves[1]})."
                )
            else:
                text += f" Counterexample: {json.dumps(c.input)} -> {c.action} ({c.where})."
        return text
    if r.status == "unknown":
        return f"Invariant '{r.invariant}' is undecided on {r.unknown_paths} paths (solver limits)."
    return f"Invariant '{r.invariant}' holds{' vacuously' if r.vacuous else ''}."


def render_sarif(report: Report) -> str:
    from clefprove.version import __version__

    rules: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for i, r in enumerate(report.results):
        rules.append(
            {
                "id": r.invariant,
                "name": r.invariant,
                "shortDescription": {"text": r.description or f"invariant {r.invariant}"},
                "defaultConfiguration": {"level": "error"},
            }
        )
        kind = {"violated": "fail", "holds": "pass", "unknown": "open"}[r.status]
        result: dict[str, Any] = {
            "ruleId": r.invariant,
            "ruleIndex": i,
            "kind": kind,
            "level": "error" if kind == "fail" else "none",
            "message": {"text": _message(r)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": PurePath(r.file).as_posix()},
                        "region": {"startLine": max(1, r.line), "startColumn": max(1, r.column)},
                    }
                }
            ],
            "partialFingerprints": {"clefproveInvariant/v1": fingerprint(r)},
            "properties": {
                "status": r.status,
                "vacuous": r.vacuous,
                "violatingPaths": r.violating_paths,
                "unknownPaths": r.unknown_paths,
                "counterexamples": [c.to_json_dict() for c in r.counterexamples],
            },
        }
        results.append(result)
    m = report.model
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "clefprove",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": {
                    "model": {
                        "path": m.path,
                        "sha256": m.sha256,
                        "nodes": m.nodes,
                        "leaves": m.leaves,
                    },
                    "summary": report.summary,
                },
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
