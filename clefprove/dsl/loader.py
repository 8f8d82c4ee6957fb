"""Public entry of the DSL: invariant files (or text) -> a type-checked program.

>>> program = load_invariants(["invariants/"], model)      # doctest: +SKIP
>>> program.invariants[0].digest                           # doctest: +SKIP

Every mistake of every file is collected into one :class:`~clefprove.dsl.errors.DslError`
(``render()`` shows each with its source line and a caret).  A file that cannot be read is a
plain :class:`~clefprove.errors.ClefproveError` with one line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from clefprove.dsl.ast import Program
from clefprove.dsl.checked import CheckedProgram
from clefprove.dsl.checker import Checker
from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.dsl.parser import parse_partial
from clefprove.errors import ClefproveError
from clefprove.model.types import Model

#: The suffix of invariant files.
SUFFIX = ".inv"


def expand_paths(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Files named by *paths*: a directory means every ``*.inv`` below it, in sorted order.

    Order is that of the arguments; inside a directory, sorted by relative path (stable across
    machines).  A file named twice is kept once.  A missing path, or a directory without any
    ``.inv`` file, is an error.
    """
    if not paths:
        raise ClefproveError("no invariant files given")
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                (p for p in path.rglob(f"*{SUFFIX}") if p.is_file()),
                key=lambda p: p.relative_to(path).as_posix(),
            )
            if not found:
                raise ClefproveError(f"{path}: no {SUFFIX} files in this directory")
        elif path.exists():
            found = [path]
        else:
            raise ClefproveError(f"{path}: no such file or directory")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of an invariant file; undecodable UTF-8 is a DSL error at its position."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ClefproveError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    return decode(data, name)


def decode(data: bytes, file: str) -> str:
    """UTF-8 bytes -> text (a leading BOM is dropped); a bad byte is a :class:`DslError`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        source = data.split(b"\n")[line - 1].decode("utf-8", errors="replace")
        message = f"invalid UTF-8 byte 0x{data[exc.start]:02x}"
        raise DslError([Diagnostic(file, line, column, message, source)]) from None
    return text.removeprefix("\ufeff")


def parse_files(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Program], dict[str, str]]:
    """Parse every file named by *paths* (syntax only), raising every file's syntax errors."""
    programs, sources, _, _, diagnostics = _parse_all(paths)
    if diagnostics:
        raise DslError(diagnostics)
    return programs, sources


def _parse_all(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[Program], dict[str, str], dict[str, frozenset[str]], bool, list[Diagnostic]]:
    programs: list[Program] = []
    sources: dict[str, str] = {}
    broken: dict[str, frozenset[str]] = {}
    broken_severity = False
    diagnostics: list[Diagnostic] = []
    for path in expand_paths(paths):
        name = str(path)
        try:
            text = read_text(path)
        except DslError as exc:
            diagnostics.extend(exc.diagnostics)
            continue
        sources[name] = text
        result = parse_partial(text, name)
        programs.append(result.program)
        diagnostics.extend(result.diagnostics)
        broken[name] = result.broken
        broken_severity = broken_severity or result.broken_severity
    return programs, sources, broken, broken_severity, diagnostics


def _check(
    programs: list[Program],
    sources: dict[str, str],
    broken: dict[str, frozenset[str]],
    broken_severity: bool,
    syntax: list[Diagnostic],
    model: Model,
) -> CheckedProgram:
    checker = Checker(model, sources, broken, broken_severity)
    result = checker.check(programs)
    if syntax or checker.diagnostics:
        order = {name: i for i, name in enumerate(sources)}
        everything = sorted(
            [*syntax, *checker.diagnostics],
            key=lambda d: (order.get(d.file, len(order)), d.line, d.column),
        )
        raise DslError(everything)
    return result


def load_invariants(paths: Sequence[str | os.PathLike[str]], model: Model) -> CheckedProgram:
    """Parse and type-check the invariant files *paths* (files or directories) against *model*.

    Raises :class:`DslError` with every syntax and type error of every file (the items that
    parse are type-checked even when others do not), or :class:`ClefproveError` for a path
    that does not exist or cannot be read.
    """
    return _check(*_parse_all(paths), model)


def parse_text(text: str, model: Model, file: str = "<string>") -> CheckedProgram:
    """Parse and type-check the text of one invariant file against *model*."""
    result = parse_partial(text, file)
    return _check(
        [result.program],
        {file: text},
        {file: result.broken},
        result.broken_severity,
        list(result.diagnostics),
        model,
    )
