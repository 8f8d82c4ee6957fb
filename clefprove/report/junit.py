"""JUnit XML rendering of a check report: one test case per invariant."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from clefprove.verify.verdicts import InvariantResult, RelationalCounterexample, Report


def _details(r: InvariantResult) -> str:
    lines = [f"{r.file}:{r.line}: {r.violating_paths} violating paths"]
    for c in r.counterexamples:
        if isinstance(c, RelationalCounterexample):
            lines.append(f"pair differing only in {c.feature}:")
            for k in range(2):
                lines.append(
                    f"  input {json.dumps(c.inputs[k])} -> {c.actions[k]} "
                    f"(confidence {c.confidences[k]:g}, leaf {c.leaves[k]})"
                )
                lines.append("    path: " + " and ".join(c.paths[k]))
            continue
        lines.append(
            f"input {json.dumps(c.input)} -> {c.action} "
            f"(confidence {c.confidence:g}, {c.where})"
        )
        if c.leaves is None:
            lines.append("  path: " + " and ".join(c.path))
    return "\n".join(lines)


def render_junit(report: Report) -> str:
    s = report.summary
    suites = ET.Element(
        "testsuites",
        name="clefprove",
        tests=str(s["invariants"]),
        failures=str(s["violated"]),
        errors=str(s["unknown"]),
        time=f"{report.seconds:.6f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=report.model.path,
        tests=str(s["invariants"]),
        failures=str(s["violated"]),
        errors=str(s["unknown"]),
        skipped="0",
        time=f"{report.seconds:.6f}",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="model.sha256", value=report.model.sha256)
    for r in report.results:
        case = ET.SubElement(
            suite, "testcase", classname=r.file, name=r.invariant, time=f"{r.seconds:.6f}"
        )
        if r.status == "violated":
            el = ET.SubElement(
                case, "failure", message=f"violated on {r.violating_paths} paths", type="violated"
            )
            el.text = _details(r)
        elif r.status == "unknown":
            el = ET.SubElement(
                case, "error", message=f"undecided on {r.unknown_paths} paths", type="unknown"
            )
            el.text = f"{r.file}:{r.line}: the solver could not decide {r.unknown_paths} paths"
        elif r.vacuous:
            out = ET.SubElement(case, "system-out")
            out.text = "holds vacuously: no input in the domain satisfies 'when'"
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
