"""``clefprove report MODEL INVARIANTS... -o REPORT.html``: the security-review report.

Runs the same check as ``clefprove check`` (same options that change numbers, same exit status:
0 every invariant holds, 1 one is violated, 3 inconclusive, 2 bad input with no file written)
and writes one self-contained HTML page, or Markdown with ``--format md`` or an ``.md`` output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clefprove.errors import ClefproveError

if TYPE_CHECKING:
    from clefprove.model.types import Model


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="write a security-review report (HTML or Markdown)")
    p.add_argument("model", help="a .clef file (or a JSON model source)")
    p.add_argument("invariants", nargs="+", help=".inv files or directories")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the report file")
    p.add_argument(
        "--format",
        choices=("html", "md"),
        default=None,
        help="html (default) or md; an .md output file means md",
    )
    p.add_argument("--previous", metavar="OLD", help="the previous model, for a behaviour diff")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS", help="solver limit per path"
    )
    p.add_argument("--counterexamples", type=int, default=3, metavar="K")
    p.set_defaults(func=run)


def output_format(args: argparse.Namespace) -> str:
    """``--format`` if given, else md for a ``.md``/``.markdown`` output file, else html."""
    if args.format:
        return str(args.format)
    suffix = Path(args.output).suffix.lower()
    return "md" if suffix in (".md", ".markdown") else "html"


def behaviour_diff(old: Model, new: Model, old_path: str, new_path: str) -> dict[str, Any]:
    """The behaviour diff from *old* to *new*: the object ``clefprove diff --format json``
    prints."""
    from clefprove.incremental.diff import diff

    return diff(old, new, old_path=old_path, new_path=new_path).to_json_dict()


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.options import check_limits
    from clefprove.cli.output import write_atomic
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.clef import load_model
    from clefprove.report.context import Inputs, build
    from clefprove.verify.api import check
    from clefprove.verify.engine import default_jobs

    check_limits(args)
    if args.output == "-":
        raise ClefproveError("report needs an output file (-o REPORT.html), not stdout")
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths

    sources = [args.model, *([args.previous] if args.previous else [])]
    refuse_inputs(args.output, *sources, *expand_paths(args.invariants))
    fmt = output_format(args)
    model = load_model(args.model)
    previous = load_model(args.previous) if args.previous is not None else None
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
    for w in report.all_warnings:
        sys.stderr.write(f"clefprove: warning: {w}\n")
    return report.exit_code
