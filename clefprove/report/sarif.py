"""SARIF 2.1.0 rendering of a check report, for code-scanning services.

One rule per invariant (with a full description and help); one result per invariant that is
violated (level ``error``) or unknown (level ``warning``): code-scanning services show every
result as an alert and ignore ``kind``, so an invariant that holds has no result (SPEC §4).
Results are located at the invariant's line, with a percent-encoded URI relative to the
repository root (``uriBaseId`` ``%SRCROOT%``, see :mod:`clefprove.report.locations`), or a
``file://`` URI for a file outside it.  ``partialFingerprints`` hash the model's name (its
sha256 when it has none), the invariant file's path relative to the root and the invariant's
name: a finding keeps its identity across runs, model versions, working directories and edits
elsewhere in the file, while two models checked against the same invariants do not collide.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from clefprove.report.locations import Location, file_uri, locate, repository_root
from clefprove.report.wording import plural, proved
from clefprove.verify.verdicts import (
    UNKNOWN,
    VIOLATED,
    InvariantResult,
    RelationalCounterexample,
    Report,
)

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"


def fingerprint(model_identity: str, where: Location, r: InvariantResult) -> str:
    """Stable identity of a finding: model, invariant file (root-relative), invariant name."""
    key = f"{model_identity}\0{where.display}\0{r.invariant}"
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()  # any path


def _message(r: InvariantResult) -> str:
    unit = "leaf pair" if r.relation is not None else "path"
    if r.status == VIOLATED:
        text = (
            f"Invariant '{r.invariant}' is violated on {plural(r.violating_paths, unit)} "
            "of the model."
        )
        if r.counterexamples:
            c = r.counterexamples[0]
            if isinstance(c, RelationalCounterexample):
                text += (
                    f" Counterexample pair (differing only in {c.feature}): "
                    f"{json.dumps(c.inputs[0], allow_nan=False)} -> {c.actions[0]} "
                    f"({c.where(0)}), "
                    f"{json.dumps(c.inputs[1], allow_nan=False)} -> {c.actions[1]} "
                    f"({c.where(1)})."
                )
            else:
                shown = json.dumps(c.input, allow_nan=False)
                text += f" Counterexample: {shown} -> {c.action} ({c.where})."
        return text
    return (
        f"Invariant '{r.invariant}' is undecided on {plural(r.unknown_paths, unit)} "
        f"(solver limits): it is not proved{proved(r.proved_share)}."
    )


def _rule(r: InvariantResult, where: Location) -> dict[str, Any]:
    short = r.description or f"Invariant {r.invariant}"
    full = (
        f"{short} (invariant '{r.invariant}' at {where.display}:{r.line}; clefprove proves it "
        "for every input of the model's domain, not for a sample)"
    )
    help_text = (
        f"A violation comes with concrete counterexample inputs that `clefprove eval` maps to the "
        f"reported action. Reproduce locally with `clefprove check MODEL {where.display}`; fix "
        "the model (retrain or edit the tree) or, if the policy is wrong, the invariant. An "
        "unknown result means the solver could not decide some paths within --timeout."
    )
    return {
        "id": r.invariant,
        "name": r.invariant,
        "shortDescription": {"text": short},
        "fullDescription": {"text": full},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["security", "clefprove"]},
    }


def render_sarif(report: Report, root: Path | None = None) -> str:
    """The SARIF log; *root* is the repository root (default: found from the cwd)."""
    from clefprove.version import __version__

    root = root if root is not None else repository_root()
    m = report.model
    identity = m.name or m.sha256
    rules: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for i, r in enumerate(report.results):
        where = locate(r.file, root)
        rules.append(_rule(r, where))
        if r.status not in (VIOLATED, UNKNOWN):
            continue
        artifact: dict[str, Any] = {"uri": where.uri}
        if where.relative is not None:
            artifact["uriBaseId"] = SRCROOT
        results.append(
            {
                "ruleId": r.invariant,
                "ruleIndex": i,
                "kind": "fail",
                "level": "error" if r.status == VIOLATED else "warning",
                "message": {"text": _message(r)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": artifact,
                            "region": {
                                "startLine": max(1, r.line),
                                "startColumn": max(1, r.column),
                            },
                        }
                    }
                ],
                "partialFingerprints": {"clefproveInvariant/v2": fingerprint(identity, where, r)},
                "properties": {
                    "status": r.status,
                    "violatingPaths": r.violating_paths,
                    "unknownPaths": r.unknown_paths,
                    "counterexamples": [c.to_json_dict() for c in r.counterexamples],
                },
            }
        )
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
                "automationDetails": {"id": f"clefprove/{identity}/"},
                "originalUriBaseIds": {SRCROOT: {"uri": file_uri(root, directory=True)}},
                "results": results,
                "properties": {
                    "model": {
                        "path": locate(m.path, root).display,
                        "name": m.name,
                        "version": m.version,
                        "sha256": m.sha256,
                        "nodes": m.nodes,
                        "leaves": m.leaves,
                    },
                    "summary": report.summary,
                },
            }
        ],
    }
    return json.dumps(log, indent=2, allow_nan=False) + "\n"
