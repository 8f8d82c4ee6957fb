"""``clefprove report MODEL INVARIANTS... -o REPORT.html``: the security-review report.

Runs the same check as ``clefprove check`` (same options that change numbers, same exit status:
0 every invariant holds, 1 one is violated, 3 inconclusive, 2 bad input with no file written)
and writes one self-contained HTML page, or Markdown with ``--format md`` or an ``.md`` output.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from clefprove.errors import ClefproveError

if TYPE_CHECKING:
    from clefprove.model.ensemble import Ensemble
    from clefprove.model.types import Model


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub, "report", "write a security-review report (HTML or Markdown)", verdicts=True
    )
    op.add_model(p, configurable=True)
    op.add_invariants(p)
    op.add_output(p, "the report file", True)
    op.add_format(
        p, ("html", "md"), None, "html or md (default: md for an .md output file, else html)"
    )
    op.add_previous(p, "the previous model, for a behaviour diff")
    op.add_check_options(p)
    p.set_defaults(func=run)


def behaviour_diff(
    old: Model | Ensemble, new: Model | Ensemble, old_path: str, new_path: str
) -> dict[str, Any]:
    """The behaviour diff from *old* to *new*: the object ``clefprove diff --format json``
    prints (two trees or two ensembles; a tree against an ensemble is reported as not
    compared, never a reason to write no report)."""
    from clefprove.incremental.compare import diff_models

    d = diff_models(old, new, old_path=old_path, new_path=new_path, refuse_mixed=False)
    return d.to_json_dict()


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.options import check_limits, output_format, require_targets, warn
    from clefprove.cli.output import write_atomic
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.loading import load_any
    from clefprove.report.context import Inputs, build
    from clefprove.report.wording import printable
    from clefprove.verify.api import check
    from clefprove.verify.options import default_jobs

    require_targets(args)
    check_limits(args)
    if args.output == "-":
        raise ClefproveError("report needs an output file (-o REPORT.html), not stdout")
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths

    sources = [args.model, *([args.previous] if args.previous else [])]
    refuse_inputs(args.output, *sources, *expand_paths(args.invariants))
    fmt = output_format(args, ("html", "md"), "html")
    model = load_any(args.model)
    previous = load_any(args.previous) if args.previous is not None else None
    program = load_invariants(args.invariants, model)
    report = check(
        model,
        program,
        counterexamples=args.counterexamples,
        timeout=args.timeout,
        jobs=args.jobs or default_jobs(),
        model_path=args.model,
    )
    diff = None
    if previous is not None:
        diff = behaviour_diff(previous, model, args.previous, args.model)
    inputs = Inputs(
        model_path=args.model,
        invariant_paths=tuple(args.invariants),
        previous_path=args.previous,
        counterexamples=args.counterexamples,
        timeout=args.timeout,
        jobs=args.jobs,
        output_path=args.output,
        format=fmt,
    )
    context = build(model, program, report, inputs, diff=diff)
    if fmt == "md":
        from clefprove.report.markdown import render_markdown

        text = render_markdown(context)
    else:
        from clefprove.report.html import render_html

        text = render_html(context)
    write_atomic(args.output, text)
    if not args.quiet:
        for w in report.all_warnings:
            warn(w)
    from clefprove.cli.output import write_stdout
    from clefprove.report.text import summary_line

    # whatever the verdict: a CI log shows what the report says without opening it
    write_stdout(f"{printable(args.output)}: {summary_line(report)}\n")
    return int(report.exit_code)
