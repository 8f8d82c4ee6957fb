"""JUnit XML rendering of a check report: one test case per invariant.

Each test case carries ``file`` (relative to the repository root, see
:mod:`clefprove.report.locations`) and ``line`` attributes, which CI services turn into
annotations, and the invariant file's stem as ``classname`` (a dotted path would be read as a
package hierarchy).  A violation is a ``failure``, an unknown result an ``error``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

from clefprove.report.locations import locate, repository_root
from clefprove.report.wording import confidence, plural, proved
from clefprove.verify.verdicts import InvariantResult, RelationalCounterexample, Report


def _unit(r: InvariantResult) -> str:
    return "leaf pair" if r.relation is not None else "path"


def _details(r: InvariantResult, where: str) -> str:
    lines = [f"{where}:{r.line}: violated on {plural(r.violating_paths, _unit(r))}"]
    for c in r.counterexamples:
        if isinstance(c, RelationalCounterexample):
            lines.append(f"pair differing only in {c.feature}:")
            for k in range(2):
                lines.append(
                    f"  input {json.dumps(c.inputs[k], allow_nan=False)} -> {c.actions[k]} "
                    f"(confidence {confidence(c.confidences[k])}, {c.where(k)})"
                )
                lines.append("    path: " + " and ".join(c.paths[k]))
            continue
        lines.append(
            f"input {json.dumps(c.input, allow_nan=False)} -> {c.action} "
            f"(confidence {confidence(c.confidence)}, {c.where})"
        )
        lines.append("  path: " + " and ".join(c.path))
    return "\n".join(lines)


def render_junit(report: Report, root: Path | None = None) -> str:
    root = root if root is not None else repository_root()
    s = report.summary
    m = report.model
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
        name=f"{m.name} {m.version}".strip() or locate(m.path, root).display,
        tests=str(s["invariants"]),
        failures=str(s["violated"]),
        errors=str(s["unknown"]),
        skipped="0",
        time=f"{report.seconds:.6f}",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="model.path", value=locate(m.path, root).display)
    ET.SubElement(props, "property", name="model.sha256", value=m.sha256)
    for r in report.results:
        where = locate(r.file, root).display
        case = ET.SubElement(
            suite,
            "testcase",
            classname=PurePosixPath(where).stem or "invariants",
            name=r.invariant,
            file=where,
            line=str(r.line),
            time=f"{r.seconds:.6f}",
        )
        if r.status == "violated":
            el = ET.SubElement(
                case,
                "failure",
                message=f"violated on {plural(r.violating_paths, _unit(r))}",
                type="violated",
            )
            el.text = _details(r, where)
        elif r.status == "unknown":
            el = ET.SubElement(
                case,
                "error",
                message=f"undecided on {plural(r.unknown_paths, _unit(r))}"
                + proved(r.proved_share),
                type="unknown",
            )
            el.text = (
                f"{where}:{r.line}: the solver could not decide {plural(r.unknown_paths, _unit(r))}"
                + proved(r.proved_share)
            )
        elif r.vacuous:
            out = ET.SubElement(case, "system-out")
            out.text = "holds vacuously: no input in the domain satisfies 'when'"
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
