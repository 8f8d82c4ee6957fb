"""``clefprove check MODEL INVARIANTS...``: prove invariants for every input (SPEC §4)."""

from __future__ import annotations

import argparse
import sys

from clefprove.errors import ClefproveError

#: Show a progress bar only on a terminal and only when there is this much work
#: (leaves times invariants); below it the check finishes before a bar would help.
PROGRESS_MIN_WORK = 200_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(sub, "check", "prove invariants for every input of a model", verdicts=True)
    op.add_model(p, configurable=True)
    op.add_invariants(p)
    op.add_format(
        p,
        op.CHECK_FORMATS,
        None,
        "report format (default: from -o's extension: .sarif, .json, .xml for junit; else text)",
    )
    op.add_output(p, "write the report to FILE (atomically; '-': standard output)")
    op.add_check_options(p)
    op.add_cache_options(p)
    p.add_argument("--smtlib", metavar="DIR", help="write every solver query as SMT-LIB here")
    p.set_defaults(func=run)


def _smtlib_directory(path: str, *, create: bool) -> None:
    """Check the ``--smtlib`` directory before any work (an existing file there, or a missing
    parent directory, is an error: as ``--cache`` and ``-o``, a mistyped path is never built
    with all its parents); with *create*, make it.  The command creates it only once the
    model and the invariants are read, so that a run ending with status 2 leaves nothing."""
    import os
    from pathlib import Path

    if Path(path).exists() and not Path(path).is_dir():
        raise ClefproveError(f"--smtlib {path}: exists and is not a directory")
    parent = Path(os.path.abspath(path)).parent
    if not Path(path).exists() and not parent.is_dir():
        raise ClefproveError(f"--smtlib {path}: directory {parent} does not exist")
    if not create:
        return
    try:
        Path(path).mkdir(exist_ok=True)
    except OSError as exc:
        raise ClefproveError(f"--smtlib {path}: cannot create: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.options import (
        CHECK_FORMATS,
        check_limits,
        output_format,
        require_targets,
        use_color,
        warn,
    )
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.loading import load_any
    from clefprove.verify.api import check
    from clefprove.verify.engine import default_jobs

    require_targets(args)
    check_limits(args)
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths

    refuse_inputs(args.output, args.model, *expand_paths(args.invariants))
    if args.smtlib is not None:
        _smtlib_directory(args.smtlib, create=False)
    model = load_any(args.model)
    program = load_invariants(args.invariants, model)
    if args.smtlib is not None:
        _smtlib_directory(args.smtlib, create=True)
    jobs = args.jobs or default_jobs()
    work = model.n_leaves * len(program.invariants)
    progress = None
    bar = None
    if sys.stderr.isatty() and work >= PROGRESS_MIN_WORK and not args.quiet:
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
    fmt = output_format(args, CHECK_FORMATS, "text")
    to_stdout = args.output in (None, "-")
    color = use_color(args) if to_stdout else args.color == "always"
    from clefprove.report.formats import render_report

    text = render_report(report, fmt, color=color, verbose=args.verbose, quiet=args.quiet)
    from clefprove.cli.output import emit

    emit(text, args.output)
    if (fmt != "text" or not to_stdout) and not args.quiet:  # the text report lists them
        for w in report.all_warnings:
            warn(w)
    return int(report.exit_code)
