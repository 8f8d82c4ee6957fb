"""The ``clefprove`` command: one sub-command module per command, dispatched here.

Each module in :data:`COMMANDS` defines ``register(subparsers)`` (adds its parser and sets
``func`` to a ``run(args) -> int``).  A :class:`~clefprove.errors.ClefproveError` anywhere becomes
one line on stderr and exit status 2; exit codes are those of SPEC §4.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from clefprove.errors import ClefproveError

EXIT_OK = 0
EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = (
    "compile",
    "import",
    "info",
    "eval",
    "check",
    "fmt",
    "diff",
    "gate",
    "export_coq",
    "report",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"clefprove: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from clefprove import __version__

    parser = _Parser(
        prog="clefprove",
        description="Prove that Clef decision-tree models obey safety invariants for every input.",
    )
    parser.add_argument("--version", action="version", version=f"clefprove {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"clefprove.cli.cmd_{name}")
        except ModuleNotFoundError as exc:  # a command not built yet
            if exc.name != f"clefprove.cli.cmd_{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except ClefproveError as exc:
        sys.stderr.write(exc.render())
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("clefprove: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
