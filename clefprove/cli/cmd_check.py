"""``clefprove check MODEL INVARIANTS...``: prove invariants for every input (SPEC §4)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from clefprove.errors import ClefproveError

if TYPE_CHECKING:
    from pathlib import Path

    from clefprove.incremental.store import CacheStore
    from clefprove.verify.options import CheckOptions
    from clefprove.verify.verdicts import Report

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
    import time

    from clefprove.cli.options import check_limits, require_targets
    from clefprove.cli.output import refuse_inputs
    from clefprove.dsl.files import expand_paths
    from clefprove.verify.options import CheckOptions, default_jobs

    start = time.perf_counter()
    require_targets(args)
    check_limits(args)
    files = expand_paths(args.invariants)
    refuse_inputs(args.output, args.model, *files)
    if args.smtlib is not None:
        _smtlib_directory(args.smtlib, create=False)
    options = CheckOptions(
        counterexamples=args.counterexamples,
        timeout=args.timeout,
        jobs=args.jobs or default_jobs(),
        smtlib_dir=args.smtlib,
    )
    # --smtlib asks for every solver query, so nothing may be answered from the cache.
    if args.smtlib is not None or args.no_cache:
        return _check(args, options, None, None, files)
    # An unchanged model and invariant set is answered before the model is loaded (and numpy
    # imported): incremental/runs.py.
    key, store = _kept_run_key(args, files, options)
    if key is not None and store is not None:
        from clefprove.incremental import runs

        kept = runs.lookup(store, key, time.perf_counter() - start)
        if kept is not None:
            store.close()
            return _emit(args, kept)
    return _check(args, options, key, store, files)


def _kept_run_key(
    args: argparse.Namespace, files: list[Path], options: CheckOptions
) -> tuple[bytes | None, CacheStore | None]:
    """The run's key (None: not kept, see runs.run_key) and the cache, opened if it exists."""
    import os

    from clefprove.incremental import runs
    from clefprove.incremental.store import DB_NAME, CacheStore, default_directory

    key = runs.run_key(args.model, [os.fspath(f) for f in files], options)
    directory = args.cache if args.cache is not None else default_directory()
    # Only an existing cache is opened here: one is created only once the model and the
    # invariants are read, so that a run ending with status 2 leaves nothing behind.
    if key is None or not os.path.isfile(os.path.join(directory, DB_NAME)):
        return key, None
    return key, CacheStore(directory)


def _check(
    args: argparse.Namespace,
    options: CheckOptions,
    key: bytes | None,
    opened: CacheStore | None,
    files: list[Path],
) -> int:
    """Load, check and print; keep the run under *key* in the cache (*opened*, if open) when
    it read what the key names (*files*: the invariant files the key names)."""
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.loading import load_any
    from clefprove.verify.api import check

    try:
        model = load_any(args.model)
        program = load_invariants(args.invariants, model)
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    if args.smtlib is not None:
        _smtlib_directory(args.smtlib, create=True)
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

    cache = None
    if args.smtlib is None and not args.no_cache:  # (the walk's import costs ~5 ms)
        from clefprove.incremental.cache import cache_from_args

        cache = cache_from_args(args, opened)
    try:
        report = check(
            model,
            program,
            options=options,
            model_path=args.model,
            progress=progress,
            cache=cache,
        )
        if cache is not None and key is not None and _unchanged(args, files, key, options, report):
            from clefprove.incremental import runs

            runs.keep(cache, key, report)
    finally:
        if bar is not None:
            bar.stop()
        if cache is not None:
            cache.close()
    return _emit(args, report)


def _unchanged(
    args: argparse.Namespace,
    files: list[Path],
    key: bytes,
    options: CheckOptions,
    report: Report,
) -> bool:
    """Whether the run read what *key* names: the same invariant files (the directories are
    listed again) with the same bytes, and the model bytes the loader read
    (:func:`runs.made_from`).  The key is taken before the model is loaded: a file replaced
    in between (a deploy writing the model under the check) must not leave the new bytes'
    report under the old bytes' name, where a later run of the old bytes would print it."""
    import os

    from clefprove.dsl.files import expand_paths
    from clefprove.incremental import runs

    try:
        if expand_paths(args.invariants) != files:
            return False
    except (ClefproveError, OSError):  # a directory removed or made unreadable meanwhile
        return False
    return runs.made_from(key, args.model, [os.fspath(f) for f in files], options, report)


def _emit(args: argparse.Namespace, report: Report) -> int:
    """Print *report* as asked; the exit status."""
    from clefprove.cli.options import CHECK_FORMATS, output_format, use_color, warn

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
