"""The ``clefprove`` command: one sub-command module per command, dispatched here.

Each module in :data:`COMMANDS` defines ``register(subparsers)`` (adds its parser and sets
``func`` to a ``run(args) -> int``).  A :class:`~clefprove.errors.ClefproveError` anywhere becomes
one line on stderr and exit status 2; any other exception is a bug in clefprove: one line
``clefprove: internal error: ...`` and exit status 4 (``CLEFPROVE_DEBUG=1`` adds the traceback).
Exit codes are those of SPEC §4.

Only the standard library's ``signal``, ``os`` and ``sys`` are imported at module level, so that
:func:`entry` installs the SIGINT/SIGTERM handlers before anything heavy is imported.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from clefprove.status import ExitCode

if TYPE_CHECKING:
    import argparse
    from types import FrameType

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_UNKNOWN, EXIT_INTERNAL = (
    ExitCode.OK,
    ExitCode.VIOLATED,
    ExitCode.USAGE,
    ExitCode.UNKNOWN,
    ExitCode.INTERNAL,
)
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM

#: Set to 1 to see the traceback of an internal error.
DEBUG_ENV = "CLEFPROVE_DEBUG"
#: Statuses after which no output file of the run may remain (SPEC §4).
FAILED = (ExitCode.USAGE, ExitCode.INTERNAL)

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
    "serve",
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command-line parser; when *argv* names a command first, only that command's
    sub-parser is built (the others cost about 8 ms of every run), else all of them (for
    ``--help``, ``--version`` and a mistyped command's list of choices)."""
    import argparse
    import importlib

    from clefprove.version import __version__

    class _Parser(argparse.ArgumentParser):
        """argparse that reports usage errors as one line and exit status 2."""

        def error(self, message: str) -> NoReturn:
            _say(f"clefprove: error: {message}\n")
            raise SystemExit(EXIT_USAGE)

    parser = _Parser(
        prog="clefprove",
        description="Prove that Clef decision-tree models obey safety invariants for every input.",
        epilog="Defaults for --jobs, --timeout, --counterexamples, --cache and --color can be set "
        "in [tool.clefprove] of the nearest pyproject.toml (docs/ci.md). "
        "Exit status: 0 success, 1 an invariant is violated, 2 bad usage or input, "
        "3 inconclusive (unknown), 4 internal error; 'clefprove COMMAND --help' for each command.",
    )
    parser.add_argument("--version", action="version", version=f"clefprove {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    first = argv[0].replace("-", "_") if argv and "_" not in argv[0] else None
    for name in (first,) if first in COMMANDS else COMMANDS:
        try:
            module = importlib.import_module(f"clefprove.cli.cmd_{name}")
        except ModuleNotFoundError as exc:  # a command not built yet
            if exc.name != f"clefprove.cli.cmd_{name}":
                raise
            continue
        module.register(sub)
    from clefprove.cli.options import apply_config, load_config

    apply_config(parser, load_config())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from clefprove.cli.output import discard_stdout, remove_stale_output
    from clefprove.errors import ClefproveError

    args = None
    try:
        if argv is None:
            argv = sys.argv[1:]
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = int(args.func(args))
        sys.stdout.flush()  # a failing stdout is reported here, not at interpreter exit
        if code in FAILED:
            remove_stale_output(args)
        return code
    except ClefproveError as exc:
        _say(exc.render())
        remove_stale_output(args)
        return EXIT_USAGE
    except (KeyboardInterrupt, Terminated) as exc:
        return _signalled(exc)
    except BrokenPipeError:
        discard_stdout()
        return EXIT_OK
    except OSError as exc:  # stdin or stdout failing: a full disk, a closed stream
        if exc.errno is None and exc.filename is None:  # not an I/O failure: a bug
            return _internal_error(exc)
        discard_stdout()
        reason = exc.strerror or str(exc)
        where = f"{exc.filename}: " if exc.filename else "standard input/output: "
        _say(f"clefprove: error: {where}{reason}\n")
        remove_stale_output(args)
        return EXIT_USAGE
    except Exception as exc:
        signalled = _signal_behind(exc)
        if signalled is not None:
            return signalled
        code = _internal_error(exc)
        remove_stale_output(args)
        return code


def _signal_behind(exc: BaseException) -> int | None:
    """130/143 when *exc* only wraps a signal's exception: a library that re-raises whatever
    interrupted its import as its own error (numpy's ``ImportError`` when SIGTERM lands while
    its C extension loads) reports the signal, never an internal error."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, KeyboardInterrupt | Terminated):
            return _signalled(cur)
        cur = cur.__cause__ or cur.__context__
    if _received:  # the library raised its own error without keeping the signal's
        return _signalled(Terminated() if _received[-1] == signal.SIGTERM else KeyboardInterrupt())
    return None


def _signalled(exc: BaseException) -> int:
    """Say which signal ended the run (Ctrl-C or SIGTERM) and give its exit status."""
    if isinstance(exc, Terminated):
        _say("clefprove: terminated\n")
        return EXIT_SIGTERM
    _say("clefprove: interrupted\n")
    return EXIT_SIGINT


def _internal_error(exc: BaseException) -> int:
    """One line saying clefprove has a bug (the traceback only when ``CLEFPROVE_DEBUG=1``)."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        _say("".join(traceback.format_exception(exc)))
    detail = " ".join(str(exc).split())[:300]
    what = type(exc).__name__ + (f": {detail}" if detail else "")
    _say(
        f"clefprove: internal error: {what} (a bug in clefprove; "
        f"set {DEBUG_ENV}=1 for the traceback)\n"
    )
    return EXIT_INTERNAL


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


#: The signals whose handler has run: an extension module whose import a signal interrupts
#: can fail with an error of its own that keeps no trace of the signal's exception.
_received: list[int] = []

#: A signal's exception that landed where Python could not propagate it, to be raised again.
_deferred: list[type[BaseException]] = []

#: How long after a swallowed signal its exception is raised again (seconds).
RAISE_AGAIN_AFTER = 0.001


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _raise_where_it_propagates(Terminated, frame)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _raise_where_it_propagates(KeyboardInterrupt, frame)


def _raise_where_it_propagates(exc: type[BaseException], frame: FrameType | None) -> None:
    if _inside_the_hook(frame):
        _raise_later(exc)  # raised inside the hook, it would be printed as ignored
        return
    raise exc


def _inside_the_hook(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is _signal_again.__code__:
            return True
        frame = frame.f_back
    return False


def _raise_later(exc: type[BaseException]) -> None:
    """Raise ``exc`` again shortly, from a one-shot timer: a signal is handled at the next
    bytecode boundary, which is usually back in ordinary code."""
    _deferred[:] = [exc]
    signal.signal(signal.SIGALRM, _on_timer)
    signal.setitimer(signal.ITIMER_REAL, RAISE_AGAIN_AFTER)


def _on_timer(signum: int, frame: FrameType | None) -> None:
    if not _deferred:
        return
    _raise_where_it_propagates(_deferred.pop(), frame)


def _signal_again(unraisable: sys.UnraisableHookArgs) -> None:
    """A signal's exception raised where Python cannot propagate it (a weakref callback, a
    ``__del__``) is not printed as ignored but raised again once it can propagate."""
    exc = unraisable.exc_value
    if isinstance(exc, (Terminated, KeyboardInterrupt)):
        _raise_later(type(exc))
    else:
        sys.__unraisablehook__(unraisable)


def _exit_now(signum: int, frame: object) -> None:
    """After the command has finished and flushed its output, a signal just ends the process."""
    os._exit(128 + signum)


def entry() -> None:
    """The console script: handlers first (a signal in the first milliseconds must not print a
    traceback), then the command; status 130/143 for SIGINT/SIGTERM wherever they land."""
    sys.unraisablehook = _signal_again
    signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job keeps ignoring
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        _occupy_closed_streams()
        code = main()
    except KeyboardInterrupt:
        _say("clefprove: interrupted\n")
        code = EXIT_SIGINT
    except Terminated:
        _say("clefprove: terminated\n")
        code = EXIT_SIGTERM
    try:
        signal.signal(signal.SIGTERM, _exit_now)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, _exit_now)
        if _deferred:  # swallowed at the very end: the run still ends with the signal's status
            signal.setitimer(signal.ITIMER_REAL, 0)
            code = _signalled(_deferred[-1]())
    except (KeyboardInterrupt, Terminated) as exc:
        code = _signalled(exc)
    sys.exit(code)


if __name__ == "__main__":
    entry()
