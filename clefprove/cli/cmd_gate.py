"""``clefprove gate NEW INVARIANTS... [--previous OLD]``: the pre-deploy hook."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "gate",
        "pre-deploy hook: integrity, incremental check, behaviour diff; 0 only if all hold",
        ok="every invariant holds (deploy)",
        verdicts=True,
    )
    op.add_model(p, "the model about to be deployed (a genuine .clef file)", configurable=True)
    op.add_invariants(p)
    op.add_previous(p, "the model currently deployed (for a behaviour diff)")
    op.add_format(
        p,
        op.CHECK_FORMATS,
        None,
        "output format; json is the gate object, sarif/junit/github/gitlab render its check "
        "(default: from -o's extension, else text)",
    )
    op.add_output(p)
    op.add_check_options(p)
    op.add_cache_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.app.gate import run_gate
    from clefprove.cli.options import CHECK_FORMATS, check_limits, output_format, require_targets
    from clefprove.cli.output import emit
    from clefprove.incremental.cache import cache_from_args
    from clefprove.report.gate_text import render_text
    from clefprove.verify.options import default_jobs

    require_targets(args)
    check_limits(args)
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths

    previous = [args.previous] if args.previous else []
    refuse_inputs(args.output, args.model, *previous, *expand_paths(args.invariants))
    cache = cache_from_args(args)
    try:
        res = run_gate(
            args.model,
            args.invariants,
            args.previous,
            cache,
            jobs=args.jobs or default_jobs(),
            timeout=args.timeout,
            counterexamples=args.counterexamples,
        )
    finally:
        if cache is not None:
            cache.close()
    fmt = output_format(args, CHECK_FORMATS, "text")
    if fmt == "json":
        emit(json.dumps(res.to_json_dict(), indent=2, allow_nan=False), args.output)
    elif fmt == "text":
        from clefprove.report.text import summary_line

        emit(
            summary_line(res.report) if args.quiet else render_text(res, args.verbose), args.output
        )
    else:
        from clefprove.report.formats import render_report

        emit(render_report(res.report, fmt), args.output)
    return int(res.exit_code)
