"""``clefprove check MODEL INVARIANTS...``: prove invariants for every input (SPEC §4)."""

from __future__ import annotations

import argparse
import sys

from clefprove.errors import ClefproveError

#: Show a progress bar only on a terminal and only when there is this much work
#: (leaves times invariants); below it the check finishes before a bar would help.
PROGRESS_MIN_WORK = 200_000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="prove invariants for every input of a model")
    p.add_argument("model", help="a .clef file (or a JSON model source)")
    p.add_argument("invariants", nargs="+", help=".inv files or directories")
    p.add_argument("--format", choices=("text", "json", "sarif", "junit"), default="text")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS", help="solver limit per path"
    )
    p.add_argument("--counterexamples", type=int, default=3, metavar="K")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache", metavar="DIR", help="proof cache directory (default .clefprove-cache)"
    )
    cache.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the proof cache"
    )
    p.add_argument("--smtlib", metavar="DIR", help="write every solver query as SMT-LIB here")
    p.set_defaults(func=run)


def render(report, fmt: str, color: bool = False) -> str:
    """The report in one of the output formats."""
    if fmt == "json":
        from clefprove.report.jsonout import render_json

        return render_json(report)
    if fmt == "sarif":
        from clefprove.report.sarif import render_sarif

        return render_sarif(report)
    if fmt == "junit":
        from clefprove.report.junit import render_junit

        return render_junit(report)
    from clefprove.report.text import render_text

    return render_text(report, color=color)


def _smtlib_directory(path: str) -> None:
    """Create the ``--smtlib`` directory (an existing file there is an error)."""
    from pathlib import Path

    if Path(path).exists() and not Path(path).is_dir():
        raise ClefproveError(f"--smtlib {path}: exists and is not a directory")
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClefproveError(f"--smtlib {path}: cannot create: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.options import check_limits
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.clef import load_any
    from clefprove.verify.api import check
    from clefprove.verify.engine import default_jobs

    check_limits(args)
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths

    refuse_inputs(args.output, args.model, *expand_paths(args.invariants))
    if args.smtlib is not None:
        _smtlib_directory(args.smtlib)
    model = load_any(args.model)
    program = load_invariants(args.invariants, model)
    if not program.invariants:
        sys.stderr.write("clefprove: warning: the invariant files define no invariant\n")
    jobs = args.jobs or default_jobs()
    work = model.n_leaves * len(program.invariants)
    progress = None
    bar = None
    if sys.stderr.isatty() and work >= PROGRESS_MIN_WORK:
        from rich.console import Console
        from rich.progress import Progress

        bar = Progress(console=Console(stderr=True), transient=True)
        task = bar.add_task("checking", total=len(program.invariants))
        bar.start()

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done)

    # --smtlib asks for every solver query, so nothing may be answered from the cache.
    cache = None
    if args.smtlib is None:
        from clefprove.incremental.cache import cache_from_args

        cache = cache_from_args(args)
    try:
        report = check(
            model,
            program,
            counterexamples=args.counterexamples,
            timeout=args.timeout,
            jobs=jobs,
            smtlib=args.smtlib,
            model_path=args.model,
            progress=progress,
            cache=cache,
        )
    finally:
        if bar is not None:
            bar.stop()
        if cache is not None:
            cache.close()
    to_terminal = args.output in (None, "-") and sys.stdout.isatty()
    text = render(report, args.format, color=to_terminal)
    from clefprove.cli.output import emit

    emit(text, args.output)
    if args.format != "text" or args.output not in (None, "-"):
        for w in report.all_warnings:
            sys.stderr.write(f"clefprove: warning: {w}\n")
    return report.exit_code
