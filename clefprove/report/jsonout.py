"""JSON rendering of a check report: SPEC §4's object."""

from __future__ import annotations

import json

from clefprove.verify.verdicts import Report


def render_json(report: Report) -> str:
    data = report.to_json_dict()
    if report.all_warnings:
        data["warnings"] = list(report.all_warnings)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"
