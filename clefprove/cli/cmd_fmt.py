"""``clefprove fmt FILE... [--check]``: rewrite invariant files in the canonical layout."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clefprove.dsl.errors import Diagnostic


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "fmt",
        "format invariant files in the canonical layout",
        description="Rewrite .inv files in the canonical layout (a directory means every .inv "
        "file below it; '-' reads stdin and writes stdout). No model is needed.",
        one="--check: at least one file would change",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help=".inv files or directories, or -")
    p.add_argument(
        "--check",
        action="store_true",
        help="change nothing; list the files that would change and exit 1 if there are any",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.output import write_atomic, write_stdout
    from clefprove.dsl.errors import DslError
    from clefprove.dsl.files import decode, expand_paths, read_text
    from clefprove.dsl.fmt import format_text

    stdin = "-" in args.files
    if stdin and len(args.files) > 1:
        from clefprove.errors import ClefproveError

        raise ClefproveError("fmt: '-' (stdin) cannot be combined with other files")
    if stdin:
        text = decode(sys.stdin.buffer.read(), "<stdin>")
        out = format_text(text, "<stdin>")
        if args.check:
            if out != text:
                write_stdout("<stdin>\n")
                return 1
            return 0
        write_stdout(out)
        return 0

    # Format everything first: a mistake in any file changes no file.
    changes: list[tuple[str, str]] = []
    diagnostics: list[Diagnostic] = []
    for path in expand_paths(args.files):
        name = str(path)
        try:
            text = read_text(path)
            out = format_text(text, name)
        except DslError as exc:
            diagnostics.extend(exc.diagnostics)
            continue
        if out != text:
            changes.append((name, out))
    if diagnostics:
        raise DslError(diagnostics)
    for name, out in changes:
        if args.check:
            write_stdout(f"{name}\n")
        else:
            mode = os.stat(name).st_mode & 0o7777
            write_atomic(name, out)
            os.chmod(name, mode)  # the temporary file was created 0600; keep the file's mode
            write_stdout(f"reformatted {name}\n")
    return 1 if args.check and changes else 0
