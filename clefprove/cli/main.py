"""The ``clefprove`` command: one sub-command module per command, dispatched here.

Each module in :data:`COMMANDS` defines ``register(subparsers)`` (adds its parser and sets
``func`` to a ``run(args) -> int``).  A :class:`~clefprove.errors.ClefproveError` anywhere becomes
one line on stderr and exit status 2; exit codes are those of SPEC §4.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from clefprove.cli.output import discard_stdout
from clefprove.errors import ClefproveError
from clefprove.status import ExitCode

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_UNKNOWN = (
    ExitCode.OK,
    ExitCode.VIOLATED,
    ExitCode.USAGE,
    ExitCode.UNKNOWN,
)

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
        _say(f"clefprove: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from clefprove.version import __version__

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
        code = int(args.func(args))
        sys.stdout.flush()  # a failing stdout is reported here, not at interpreter exit
        return code
    except ClefproveError as exc:
        _say(exc.render())
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("clefprove: interrupted\n")
        return 130
    except Terminated:
        _say("clefprove: terminated\n")
        return 128 + signal.SIGTERM
    except BrokenPipeError:
        discard_stdout()
        return EXIT_OK
    except OSError as exc:  # stdin or stdout failing: a full disk, a closed stream
        discard_stdout()
        reason = exc.strerror or str(exc)
        where = f"{exc.filename}: " if exc.filename else "standard input/output: "
        _say(f"clefprove: error: {where}{reason}\n")
        return EXIT_USAGE


def _say(text: str) -> None:
    """Write to stderr; a closed or failing stderr must not change the exit status."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _occupy_closed_streams() -> None:
    """Give a closed stdin/stdout/stderr a placeholder descriptor.

    Otherwise the next file opened would get descriptor 0, 1 or 2, and ``sys.stdin`` would be
    None.  stdin and stdout get a descriptor opened the wrong way round, so that reading or
    writing them fails with a clear error instead of succeeding silently.
    """
    for fd, name, flags, mode in (
        (0, "stdin", os.O_WRONLY, "r"),
        (1, "stdout", os.O_RDONLY, "w"),
        (2, "stderr", os.O_WRONLY, "w"),
    ):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, flags)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 - lives as long as sys


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C, so that temporary files and open cache
    transactions are cleaned up on the way out (a BaseException, so nothing swallows it)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def entry() -> None:
    _occupy_closed_streams()
    signal.signal(signal.SIGTERM, _on_sigterm)
    sys.exit(main())


if __name__ == "__main__":
    entry()
