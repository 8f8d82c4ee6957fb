"""Everything a security-review report shows, as plain data shared by the HTML and Markdown
renderers.

The numbers (statuses, counts, counterexamples, times) are taken from
:meth:`Report.to_json_dict`, the object ``check --format json`` prints, so the report and
``check`` cannot disagree; the rest (model identity, domain shares, tree windows, plain-word
conditions, commands) is derived from the model and the checked program.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from clefprove.dsl.checked import CheckedProgram
from clefprove.frozen import frozen
from clefprove.geometry.boxes import context_box, path_to
from clefprove.model.describe import format_number
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.report.coverage import action_shares
from clefprove.report.tree import layout, window
from clefprove.report.wording import confidence
from clefprove.verify.verdicts import Report

STATUS_LABEL = {"holds": "PASS", "violated": "FAIL", "unknown": "INCONCLUSIVE"}


@frozen
class Inputs:
    """How the report was asked for: the paths as the user gave them and the check options."""

    model_path: str
    invariant_paths: tuple[str, ...]
    previous_path: str | None = None
    counterexamples: int = 3
    timeout: float | None = None
    jobs: int | None = None
    output_path: str = "report.html"
    format: str = "html"


def generated_at() -> datetime:
    """Now in UTC, or ``SOURCE_DATE_EPOCH`` when set (for reproducible reports)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC)
    return datetime.fromtimestamp(time.time(), UTC)


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n_f = n / 1024
        if n_f < 1024 or unit == "GiB":
            return f"{n_f:.1f} {unit} ({n:,} bytes)"
        n = int(n_f)
    raise AssertionError("unreachable")


def _json_value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, allow_nan=False)


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.1f} ms" if ms < 1000 else f"{seconds:.2f} s"


def pct(share: float) -> str:
    """A domain share as a percentage that never shows a non-zero share as 0."""
    if share <= 0:
        return "0%"
    p = 100 * share
    if p >= 0.01:
        return f"{p:.2f}%"
    return f"{p:.2g}%" if p >= 1e-4 else f"{p:.1e}%"


def anchor(name: str) -> str:
    return "inv-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


# ------------------------------------------------------------------------- plain words


def _join_or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def plain_conditions(model: Model, leaf: int) -> list[str]:
    """The inputs that reach *leaf*, one sentence per feature the path narrows."""
    box = context_box(model, leaf)
    above: dict[int, float] = {}  # float features: strict lower threshold
    at_most: dict[int, float] = {}
    for node, went_left in path_to(model, leaf):
        n = model.node(node)
        if n.kind is not NodeKind.NUMERIC:
            continue
        if went_left:
            at_most[n.feature] = min(at_most.get(n.feature, n.threshold), n.threshold)
        else:
            above[n.feature] = max(above.get(n.feature, n.threshold), n.threshold)
    out: list[str] = []
    for i, f in enumerate(model.features):
        if f.type is FeatureType.CATEGORICAL:
            codes = box.cats.get(i)
            kept = [v for c, v in enumerate(f.values) if codes is None or codes[c]]
            dropped = [v for c, v in enumerate(f.values) if codes is not None and not codes[c]]
            if not dropped:
                continue
            if not kept:
                out.append(f"{f.name} can take no value (unreachable)")
            elif len(kept) == 1:
                out.append(f"{f.name} is {kept[0]}")
            elif len(kept) <= len(dropped):
                out.append(f"{f.name} is {_join_or(kept)}")
            else:
                out.append(f"{f.name} is anything but {_join_or(dropped)}")
        elif f.type is FeatureType.BOOL:
            lo, hi = box.lo[i], box.hi[i]
            if lo > f.min or hi < f.max:
                out.append(f"{f.name} is {'true' if lo >= 1 else 'false'}")
        elif f.type is FeatureType.INT:
            lo, hi = int(box.lo[i]), int(box.hi[i])
            if lo <= f.min and hi >= f.max:
                continue
            if lo == hi:
                out.append(f"{f.name} is {lo}")
            elif lo > f.min and hi < f.max:
                out.append(f"{f.name} is between {lo} and {hi}")
            elif lo > f.min:
                out.append(f"{f.name} is at least {lo}")
            elif hi < f.max:
                out.append(f"{f.name} is at most {hi}")
        else:
            a = above.get(i)
            b = at_most.get(i)
            a = a if a is not None and a >= f.min else None
            b = b if b is not None and b < f.max else None
            if a is not None and b is not None:
                out.append(f"{f.name} is above {format_number(a)} and at most {format_number(b)}")
            elif a is not None:
                out.append(f"{f.name} is above {format_number(a)}")
            elif b is not None:
                out.append(f"{f.name} is at most {format_number(b)}")
    return out or ["every input in the domain reaches this leaf"]


# ------------------------------------------------------------------------- invariant text


def invariant_files(program: CheckedProgram) -> list[dict[str, Any]]:
    """Every invariant file of the run with its SHA-256 and the text that was checked."""
    return [{"path": f.path, "sha256": f.sha256, "text": f.text} for f in program.sources]


# ------------------------------------------------------------------------- commands


def _q(parts: Sequence[str]) -> str:
    return " ".join(shlex.quote(p) for p in parts)


def commands(inputs: Inputs, sha256: str, all_hold: bool = True) -> list[dict[str, str]]:
    """The shell commands that reproduce every claim of the report."""
    model, invs = inputs.model_path, list(inputs.invariant_paths)
    opts = ["--counterexamples", str(inputs.counterexamples)]
    if inputs.timeout is not None:
        opts += ["--timeout", format_number(inputs.timeout)]
    if inputs.jobs is not None:
        opts += ["--jobs", str(inputs.jobs)]
    out = []
    if model.endswith(".clef"):
        out.append(
            {
                "label": f"Confirm the model file is the one reviewed (expect {sha256})",
                "command": _q(["sha256sum", model]),
            }
        )
    out.append(
        {
            "label": "Re-run the check (the numbers in this report are its output)",
            "command": _q(
                ["clefprove", "check", model, *invs, "--format", "json", "--no-cache", *opts]
            ),
        }
    )
    export = _q(["clefprove", "export-coq", model, *invs, "-o", "coq-out"])
    if all_hold:
        out.append(
            {
                "label": "Export Coq proofs of the invariants and check them with coqc",
                "command": export + " && make -C coq-out",
            }
        )
    else:  # export-coq then exits 1 (or 3), but still writes the development: run make anyway
        out.append(
            {
                "label": "Export Coq proofs of the holding invariants (and theorems that the "
                "violated ones fail) and check them with coqc; export-coq exits non-zero "
                "because not every invariant holds",
                "command": export + "; make -C coq-out",
            }
        )
    if inputs.previous_path is not None:
        out.append(
            {
                "label": "Show the behaviour diff against the previous model",
                "command": _q(["clefprove", "diff", inputs.previous_path, model]),
            }
        )
    prev = ["--previous", inputs.previous_path] if inputs.previous_path else []
    fmt = ["--format", inputs.format] if inputs.format != "html" else []
    out.append(
        {
            "label": "Rebuild this report",
            "command": _q(
                ["clefprove", "report", model, *invs, *prev, *opts, *fmt, "-o", inputs.output_path]
            ),
        }
    )
    return out


# ------------------------------------------------------------------------- behaviour diff

#: Structural changes and behaviour regions listed in the report (all are counted).
DIFF_LIST_LIMIT = 25


def diff_view(diff: dict[str, Any], model_path: str, previous_path: str) -> dict[str, Any]:
    """What the report shows of a behaviour diff (the ``diff --format json`` object)."""
    sem = diff["semantic"]
    struct = diff["structural"]
    changes = struct["changes"]
    view: dict[str, Any] = {
        "old": diff["old"],
        "new": diff["new"],
        "changes": [
            {**c, "path_tail": c["path"][-3:], "path_hidden": max(0, len(c["path"]) - 3)}
            for c in changes[:DIFF_LIST_LIMIT]
        ],
        "changes_total": len(changes),
        "new_nodes": struct.get("new_nodes", 0),
        "shared_subtrees": struct.get("shared_subtrees", 0),
        "new_nodes_in_shared_subtrees": struct.get("new_nodes_in_shared_subtrees", 0),
        "comparable": sem["comparable"],
        "reason": sem.get("reason"),
        "warnings": list(diff.get("warnings", [])),
        "command": _q(
            ["clefprove", "diff", previous_path, model_path, "--format", "json", "--limit", "0"]
        ),
    }
    if sem["comparable"]:
        transitions = sem["transitions"]
        top = max(transitions.values(), default=0.0) or 1.0
        regions = []
        for r in sem["regions"][:DIFF_LIST_LIMIT]:
            record = json.dumps(
                r["example"], ensure_ascii=False, separators=(", ", ": "), allow_nan=False
            )
            regions.append(
                {
                    **r,
                    "pct": pct(r["share"]),
                    "example_json": record,
                    "example_rows": [
                        {"feature": k, "value": _json_value(v)} for k, v in r["example"].items()
                    ],
                    "eval_command": "\n".join(
                        "echo " + shlex.quote(record) + " | " + _q(["clefprove", "eval", m])
                        for m in (previous_path, model_path)
                    ),
                }
            )
        view.update(
            {
                "regions_total": sem["regions_total"],
                "regions": regions,
                "share_changed": sem["share_changed"],
                "pct_changed": pct(sem["share_changed"]),
                "pct_confidence_only": pct(sem["share_confidence_only"] or 0.0),
                "transitions": [
                    {
                        "from": k.split(" -> ", 1)[0],
                        "to": k.split(" -> ", 1)[-1],
                        "share": v,
                        "pct": pct(v),
                        "bar": v / top,
                    }
                    for k, v in transitions.items()
                ],
            }
        )
    return view


# ------------------------------------------------------------------------- the whole context


def _features(model: Model | Ensemble) -> list[dict[str, str]]:
    return [
        {
            "name": f.name,
            "type": str(f.type),
            "domain": f.describe_domain(),
            "default": _json_value(f.decode(f.default)),
        }
        for f in model.features
    ]


def _counterexample(model: Model | Ensemble, inputs: Inputs, cex: dict[str, Any]) -> dict[str, Any]:
    """One counterexample as the templates show it; a relational one (``"inputs"``: a pair)
    has ``pair`` set, a side-by-side table and one side per input."""
    if "inputs" in cex:
        return _pair(model, inputs, cex)
    return {**_single(model, inputs, cex), "pair": False}


def _pair(model: Model | Ensemble, inputs: Inputs, cex: dict[str, Any]) -> dict[str, Any]:
    sides = [
        _single(model, inputs, {"input": record, **decision, "path": path})
        for record, decision, path in zip(
            cex["inputs"], cex["decisions"], cex["paths"], strict=True
        )
    ]
    domains = {f.name: f.describe_domain() for f in model.features}
    first, second = cex["inputs"]
    return {
        "pair": True,
        "feature": cex["feature"],
        "rows": [
            {
                "feature": k,
                "value1": _json_value(v),
                "value2": _json_value(second.get(k)),
                "domain": domains.get(k, ""),
                "differs": v != second.get(k),
            }
            for k, v in first.items()
        ],
        "sides": sides,
        "eval_command": "\n".join(s["eval_command"] for s in sides),
    }


def _contributions(model: Ensemble, cex: dict[str, Any]) -> dict[str, Any]:
    """Per tree at an ensemble counterexample: its leaf and value (per output), then the base,
    the sum, the divisor, the link and the probabilities -- computed by the evaluator
    (:meth:`~clefprove.eval.ensemble.EnsembleEvaluator.explain`)."""
    from clefprove.eval.ensemble import EnsembleEvaluator
    from clefprove.verify.evidence import encode

    ex = EnsembleEvaluator(model).explain(encode(model, cex["input"]))
    c = model.combine
    outputs = (
        [model.actions[1]] if c.outputs == 1 and len(model.actions) == 2 else list(model.actions)
    )

    def num(v: float) -> str:
        return f"{v:.9g}"

    return {
        "outputs": outputs
        if c.outputs == len(outputs)
        else [f"output {k}" for k in range(c.outputs)],
        "trees": [
            {"tree": t, "leaf": leaf, "values": [num(v) for v in ex.values[t]]}
            for t, leaf in enumerate(ex.leaves)
        ],
        "base": [num(v) for v in ex.base],
        "scores": [num(v) for v in ex.scores],
        "divisor": num(c.divisor) if c.divisor != 1.0 else None,
        "divided": [num(v) for v in ex.divided],
        "link": str(c.link),
        "scale": num(c.scale) if c.scale != 1.0 else None,
        "rule": str(c.rule),
        "arithmetic": str(c.arithmetic),
        "probabilities": [
            {"action": a, "p": num(p), "chosen": k == ex.action}
            for k, (a, p) in enumerate(zip(model.actions, ex.probabilities, strict=False))
        ],
        "action": model.actions[ex.action],
        "confidence": confidence(ex.confidence),
        "many": model.n_trees > 20,
    }


def _single(model: Model | Ensemble, inputs: Inputs, cex: dict[str, Any]) -> dict[str, Any]:
    if isinstance(model, Ensemble):
        domains = {f.name: f.describe_domain() for f in model.features}
        record = json.dumps(
            cex["input"], ensure_ascii=False, separators=(", ", ": "), allow_nan=False
        )
        return {
            "input": [
                {"feature": k, "value": _json_value(v), "domain": domains.get(k, "")}
                for k, v in cex["input"].items()
            ],
            "action": cex["action"],
            "confidence": confidence(cex["confidence"]),
            "leaf": -1,
            "path": list(cex.get("path", [])),  # the box where every tree reaches its leaf
            "ensemble": _contributions(model, cex),
            "eval_command": "echo "
            + shlex.quote(record)
            + " | "
            + _q(["clefprove", "eval", inputs.model_path]),
        }
    leaf = int(cex["leaf"])
    domains = {f.name: f.describe_domain() for f in model.features}
    record = json.dumps(cex["input"], ensure_ascii=False, separators=(", ", ": "), allow_nan=False)
    win = window(model, leaf)
    return {
        "input": [
            {"feature": k, "value": _json_value(v), "domain": domains.get(k, "")}
            for k, v in cex["input"].items()
        ],
        "action": cex["action"],
        "confidence": confidence(cex["confidence"]),
        "leaf": leaf,
        "path": list(cex["path"]),
        "plain": plain_conditions(model, leaf),
        "eval_command": "echo "
        + shlex.quote(record)
        + " | "
        + _q(["clefprove", "eval", inputs.model_path]),
        "window": win,
        "diagram": layout(win),
        "ensemble": None,
    }


def build(
    model: Model | Ensemble,
    program: CheckedProgram,
    report: Report,
    inputs: Inputs,
    *,
    diff: dict[str, Any] | None = None,
    version: str | None = None,
    when: datetime | None = None,
) -> dict[str, Any]:
    """The template context of a report on *model* (see module docstring)."""
    if version is None:
        from clefprove.version import __version__ as version
    when = when or generated_at()
    data = report.to_json_dict()
    summary = data["summary"]
    overall = "violated" if summary["violated"] else "unknown" if summary["unknown"] else "holds"
    by_name = {inv.name: inv for inv in program.invariants}
    verdicts = []
    violations = []
    for res in data["results"]:
        inv = by_name.get(res["invariant"])
        row = {
            "name": res["invariant"],
            "anchor": anchor(res["invariant"]),
            "description": res.get("description") or "",
            "location": f"{res['file']}:{res['line']}",
            "status": res["status"],
            "label": STATUS_LABEL[res["status"]],
            "vacuous": bool(res.get("vacuous")),
            "violating_paths": res["violating_paths"],
            "unknown_paths": res["unknown_paths"],
            "paths_checked": res["paths_checked"],
            "paths_reused": res["paths_reused"],
            "seconds": res["seconds"],
            "time": _ms(res["seconds"]),
            "warnings": list(res.get("warnings", [])),
            "source": inv.source if inv else None,
            "relation": res.get("relation"),
        }
        verdicts.append(row)
        if res["status"] == "violated":
            cexs = [_counterexample(model, inputs, c) for c in res["counterexamples"]]
            violations.append({**row, "counterexamples": cexs})
    # The domain share per action is computed from a single tree's leaf boxes; an ensemble's
    # would need a search of its own (not shown: the template says so).
    shares = action_shares(model) if isinstance(model, Model) else ()
    top = max((s.share for s in shares), default=0.0) or 1.0
    coverage = [
        {
            "action": s.action,
            "share": s.share,
            "pct": pct(s.share),
            "leaves": s.leaves,
            "bar": s.share / top,
        }
        for s in shares
    ]
    severity = None
    if program.severity is not None:
        severity = " < ".join(model.actions[k] for k in program.severity)
    return {
        "title": f"Security review: {model.name} {model.version}".strip(),
        "tool_version": version,
        "generated": when.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "generated_iso": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "overall": overall,
        "overall_label": STATUS_LABEL[overall],
        "exit_code": report.exit_code,
        "model": {
            "name": model.name,
            "version": model.version,
            "path": inputs.model_path,
            "sha256": model.sha256,
            "size": model.size,
            "size_text": human_size(model.size),
            "nodes": model.n_nodes,
            "leaves": model.n_leaves,
            "max_depth": model.max_depth,
            "trees": model.n_trees if isinstance(model, Ensemble) else None,
            "features": _features(model),
            "actions": list(model.actions),
            "severity": severity,
        },
        "invariant_paths": list(inputs.invariant_paths),
        "options": {
            "counterexamples": inputs.counterexamples,
            "timeout": inputs.timeout,
            "jobs": inputs.jobs,
        },
        "summary": summary,
        "total_time": _ms(summary["seconds"]),
        "verdicts": verdicts,
        "violations": violations,
        "coverage": coverage,
        "previous_path": inputs.previous_path,
        "diff": None
        if diff is None
        else diff_view(diff, inputs.model_path, inputs.previous_path or "OLD"),
        "commands": commands(inputs, model.sha256, report.exit_code == 0),
        "invariant_files": invariant_files(program),
        "check_json": json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False),
    }
