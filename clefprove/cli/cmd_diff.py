"""``clefprove diff OLD NEW``: structural changes and the input regions whose action changed."""

from __future__ import annotations

import argparse
import json

from clefprove.cli.output import emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(sub, "diff", "what changed between two models, and where behaviour differs")
    p.add_argument("old", help="the previous model (.clef or JSON source)")
    p.add_argument("new", help="the new model (.clef or JSON source)")
    op.add_format(p, ("text", "json"), "text")
    p.add_argument(
        "--limit",
        type=int,
        default=20,
        metavar="N",
        help="list at most N regions, largest first (0: all); all are counted",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time budget of the behaviour search on tree ensembles (default 60); when it "
        "runs out the diff is partial and says which share of the domain was explored",
    )
    op.add_output(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.output import refuse_inputs
    from clefprove.errors import ClefproveError
    from clefprove.incremental.compare import diff_models
    from clefprove.model.loading import load_any
    from clefprove.report.diff_text import render_text

    if args.limit < 0:
        raise ClefproveError("--limit must be >= 0")
    if args.timeout is not None and not args.timeout > 0:
        raise ClefproveError(f"--timeout must be positive, not {args.timeout}")
    refuse_inputs(args.output, args.old, args.new)
    old = load_any(args.old)
    new = load_any(args.new)
    rep = diff_models(old, new, args.old, args.new, args.limit or None, args.timeout)
    if args.format == "json":
        emit(json.dumps(rep.to_json_dict(), indent=2, allow_nan=False), args.output)
    else:
        emit(render_text(rep), args.output)
    return 0
