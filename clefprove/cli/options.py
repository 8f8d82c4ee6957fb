"""Every option that more than one command takes, declared once, and the conventions they share.

* :func:`command` makes a sub-command parser whose ``--help`` shows each option's default and the
  exit statuses, and adds ``--color``, ``-q`` and ``-v``;
* ``add_*`` declare the shared options (``--format``, ``-o``, ``--jobs``/``--timeout``/
  ``--counterexamples``, ``--cache``/``--no-cache``, ``--previous``);
* :func:`load_config` reads ``[tool.clefprove]`` defaults from the nearest ``pyproject.toml``
  (docs/ci.md lists the keys); a flag on the command line always wins;
* :func:`use_color` applies ``--color``, ``NO_COLOR`` and ``FORCE_COLOR``;
* :func:`output_format` takes ``--format``, else the ``-o`` file's extension, else the default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import IO, Any

from clefprove.errors import ClefproveError
from clefprove.frozen import frozen

#: The keys ``[tool.clefprove]`` may hold, with the Python types each accepts.
CONFIG_KEYS: dict[str, tuple[type[Any], ...]] = {
    "model": (str,),
    "invariants": (str, list),
    "jobs": (int,),
    "timeout": (int, float),
    "counterexamples": (int,),
    "cache": (str, bool),
    "color": (str,),
}
COLORS = ("auto", "always", "never")
CHECK_FORMATS = ("text", "json", "sarif", "junit", "github", "gitlab")
#: Output file extensions that name a format when ``--format`` is not given.
EXTENSIONS = {
    ".sarif": "sarif",
    ".sarif.json": "sarif",
    ".json": "json",
    ".xml": "junit",
    ".txt": "text",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
}

_UNKNOWN = "inconclusive: nothing violated, but an invariant is unknown (solver limits)"


def _exit_status(ok: str, one: str | None, verdicts: bool, signals: bool = True) -> str:
    lines = ["exit status:", f"  0        {ok}"]
    if one is not None:
        lines.append(f"  1        {one}")
    lines.append("  2        bad usage or bad input (no output file written)")
    if verdicts:
        lines.append(f"  3        {_UNKNOWN}")
    lines.append(
        "  4        internal error (a bug in clefprove; CLEFPROVE_DEBUG=1 shows the traceback)"
    )
    if signals:
        lines.append("  130/143  interrupted by SIGINT/SIGTERM")
    return "\n".join(lines)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and ``(default: X)`` after every option that has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "(default:" in text and default not in (None, False, argparse.SUPPRESS):
            # a value from [tool.clefprove] replaces the built-in default the text describes
            return text[: text.index("(default:")] + "(default: %(default)s)"
        if (
            "(default:" not in text
            and "%(default)" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
            and not isinstance(default, bool)
        ):
            text += " (default: %(default)s)"
        return text


def command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    description: str | None = None,
    ok: str = "success",
    one: str | None = None,
    verdicts: bool = False,
    signals: bool = True,
) -> argparse.ArgumentParser:
    """A sub-command parser with the shared conventions (see module docstring)."""
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        formatter_class=_HelpFormatter,
        epilog=_exit_status(
            ok,
            one or ("at least one invariant is violated" if verdicts else None),
            verdicts,
            signals,
        ),
    )
    p.add_argument(
        "--color",
        choices=COLORS,
        default="auto",
        help="colour on a terminal only (auto; NO_COLOR and FORCE_COLOR are honoured), "
        "always or never",
    )
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", help="print only the one-line summary and errors"
    )
    loud.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print more detail (the full chain of split conditions of a counterexample)",
    )
    return p


def add_model(
    p: argparse.ArgumentParser,
    help: str = "a .clef file (or a JSON model source)",
    configurable: bool = False,
) -> None:
    if configurable:  # check, gate, report: [tool.clefprove] model may name it
        p.add_argument("model", nargs="?", help=help + " (default: [tool.clefprove] model)")
    else:
        p.add_argument("model", help=help)


def add_invariants(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "invariants",
        nargs="*",
        help=".inv files or directories (default: [tool.clefprove] invariants)",
    )


def require_targets(args: argparse.Namespace) -> None:
    """The model and invariants, from the command line or ``[tool.clefprove]``; one line if
    neither names them."""
    if not args.model:
        raise ClefproveError(
            "no model given: name one, or set 'model' in [tool.clefprove] of pyproject.toml"
        )
    if not args.invariants:
        raise ClefproveError(
            "no invariant files given: name them, or set 'invariants' in [tool.clefprove] "
            "of pyproject.toml"
        )


def add_format(
    p: argparse.ArgumentParser, choices: Sequence[str], default: str | None, help: str = ""
) -> None:
    p.add_argument(
        "--format",
        choices=tuple(choices),
        default=default,
        help=help or "output format",
    )


def add_output(
    p: argparse.ArgumentParser,
    help: str = "write to FILE (atomically; '-': standard output)",
    required: bool = False,
    metavar: str = "FILE",
) -> None:
    p.add_argument("-o", "--output", metavar=metavar, required=required, help=help)


def add_previous(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--previous", metavar="OLD", help=help)


def add_check_options(p: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--timeout`` and ``--counterexamples`` (check, gate, report)."""
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N", help="worker processes (default: all cores)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="solver limit per path (default: none)",
    )
    p.add_argument(
        "--counterexamples",
        type=int,
        default=3,
        metavar="K",
        help="counterexamples to report per violated invariant",
    )


def add_cache_options(p: argparse.ArgumentParser) -> None:
    """``--cache DIR`` and ``--no-cache`` (check, gate)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--cache",
        metavar="DIR",
        default=None,
        help="proof cache directory (default: $CLEFPROVE_CACHE, else .clefprove-cache)",
    )
    group.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the proof cache"
    )


def check_limits(args: argparse.Namespace) -> None:
    """Refuse a bad ``--jobs``, ``--timeout`` or ``--counterexamples`` value with one line."""
    if args.jobs is not None and args.jobs < 1:
        raise ClefproveError(f"--jobs must be at least 1, not {args.jobs}")
    if args.timeout is not None and not args.timeout > 0:  # also refuses NaN
        raise ClefproveError(f"--timeout must be positive, not {args.timeout}")
    if args.counterexamples < 0:
        raise ClefproveError(f"--counterexamples must be at least 0, not {args.counterexamples}")


# --- [tool.clefprove] --------------------------------------------------------------------------


@frozen
class Config:
    """Defaults from ``[tool.clefprove]``; *path* is the pyproject.toml they came from."""

    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` at or above *start* (default: the current directory)."""
    here = (start or Path.cwd()).absolute()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None) -> Config:
    """``[tool.clefprove]`` of the nearest pyproject.toml, validated (a mistake is exit 2)."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ClefproveError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if b"clefprove" not in raw:  # another tool's file: none of our business, even if broken
        return Config()
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ClefproveError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("clefprove", {})
    if not isinstance(table, dict):
        raise ClefproveError(f"{path}: [tool.clefprove] must be a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        types = CONFIG_KEYS.get(key)
        where = f"{path}: [tool.clefprove] {key}"
        if types is None:
            known = ", ".join(sorted(CONFIG_KEYS))
            raise ClefproveError(f"{path}: [tool.clefprove] has an unknown key '{key}' ({known})")
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(t.__name__ for t in types)
            raise ClefproveError(f"{where} must be {names}, not {value!r}")
        if key == "color" and value not in COLORS:
            raise ClefproveError(f"{where} must be one of {', '.join(COLORS)}, not {value!r}")
        if key == "cache" and value is True:
            raise ClefproveError(f"{where} must be a directory or false")
        if key == "invariants":
            paths: list[Any] = [value] if isinstance(value, str) else list(value)
            if not paths or not all(isinstance(v, str) for v in paths):
                raise ClefproveError(f"{where} must be a path or a non-empty list of paths")
            value = [_relative(path, v) for v in paths]
        if key in ("cache", "model") and isinstance(value, str):
            value = _relative(path, value)  # relative to the pyproject.toml, not the cwd
        values[key] = value
    return Config(path, values)


def _relative(pyproject: Path, value: str) -> str:
    """*value* (relative to the pyproject.toml's directory) as the commands will name it: relative
    to the current directory when it lies below it, so that outputs show short paths."""
    target = Path(os.path.normpath(pyproject.parent / value))
    try:
        return str(target.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(target)


def apply_config(parser: argparse.ArgumentParser, config: Config) -> None:
    """Make *config*'s values the defaults of every sub-command that has the option."""
    if not config.values:
        return
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for sp in action.choices.values():
            dests = {a.dest for a in sp._actions}
            defaults: dict[str, Any] = {}
            for key, value in config.values.items():
                if key == "cache" and value is False:
                    if "no_cache" in dests:
                        defaults["no_cache"] = True
                elif key in dests:
                    defaults[key] = float(value) if key == "timeout" else value
            sp.set_defaults(**defaults)


# --- colour, verbosity, formats ----------------------------------------------------------------


def use_color(args: argparse.Namespace, stream: IO[str] | None = None) -> bool:
    """Whether to colour output to *stream* (default stdout): ``--color always|never`` wins;
    with ``auto``, a non-empty ``NO_COLOR`` turns colour off, a non-empty ``FORCE_COLOR`` on,
    and otherwise colour goes to a terminal only."""
    choice = getattr(args, "color", "auto")
    if choice != "auto":
        return bool(choice == "always")
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def output_format(args: argparse.Namespace, choices: Sequence[str], default: str) -> str:
    """``--format``, else the format the ``-o`` file's extension names, else *default*."""
    if args.format:
        return str(args.format)
    output = getattr(args, "output", None)
    if output not in (None, "-"):
        name = Path(output).name.lower()
        for ext, fmt in EXTENSIONS.items():
            if name.endswith(ext) and fmt in choices:
                return fmt
    return default


def warn(text: str) -> None:
    """One warning line on stderr, its user-provided parts made printable."""
    from clefprove.report.wording import printable

    sys.stderr.write(f"clefprove: warning: {printable(text)}\n")
