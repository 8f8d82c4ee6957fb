"""``clefprove gate NEW INVARIANTS... [--previous OLD]``: the pre-deploy hook."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate",
        help="pre-deploy hook: integrity, incremental check, behaviour diff; 0 only if all hold",
    )
    p.add_argument("model", help="the model about to be deployed (.clef or JSON source)")
    p.add_argument("invariants", nargs="+", help=".inv files or directories")
    p.add_argument("--previous", metavar="OLD", help="the model currently deployed (for a diff)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically)")
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N", help="solver processes (default: all cores)"
    )
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("--counterexamples", type=int, default=3, metavar="K")
    # The same options as clefprove.incremental.cache.add_cache_arguments, without importing
    # sqlite3 on every start of the CLI.
    cache = p.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        metavar="DIR",
        default=None,
        help="proof cache directory (default .clefprove-cache)",
    )
    cache.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the proof cache"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.app.gate import render_text, run_gate
    from clefprove.cli.options import check_limits
    from clefprove.cli.output import emit
    from clefprove.incremental.cache import cache_from_args
    from clefprove.verify.engine import default_jobs

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
    if args.format == "json":
        emit(json.dumps(res.to_json_dict(), indent=2), args.output)
    else:
        emit(render_text(res), args.output)
    return res.exit_code
