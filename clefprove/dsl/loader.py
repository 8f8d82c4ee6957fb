"""Public entry of the DSL: invariant files (or text) -> a type-checked program.

>>> program = load_invariants(["invariants/"], model)      # doctest: +SKIP
>>> program.invariants[0].digest                           # doctest: +SKIP

Every mistake of every file is collected into one :class:`~clefprove.dsl.errors.DslError`
(``render()`` shows each with its source line and a caret).  A file that cannot be read is a
plain :class:`~clefprove.errors.ClefproveError` with one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence

from clefprove.dsl.ast import Program
from clefprove.dsl.checked import CheckedProgram, SourceFile
from clefprove.dsl.checker import Checker, Signature
from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.dsl.files import SUFFIX, decode, expand_paths, read_bytes, read_text
from clefprove.dsl.parser import parse_partial
from clefprove.errors import ClefproveError

__all__ = [
    "SUFFIX",
    "decode",
    "expand_paths",
    "load_invariants",
    "parse_files",
    "parse_text",
    "read_text",
]


def parse_files(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Program], dict[str, str]]:
    """Parse every file named by *paths* (syntax only), raising every file's syntax errors."""
    programs, sources, _, _, diagnostics = _parse_all(paths)
    if diagnostics:
        raise DslError(diagnostics)
    return programs, {f: s.text for f, s in sources.items()}


def _parse_all(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[Program], dict[str, SourceFile], dict[str, frozenset[str]], bool, list[Diagnostic]]:
    programs: list[Program] = []
    sources: dict[str, SourceFile] = {}
    broken: dict[str, frozenset[str]] = {}
    broken_severity = False
    diagnostics: list[Diagnostic] = []
    for path in expand_paths(paths):
        name = str(path)
        try:
            data = read_bytes(path)
            text = decode(data, name)
        except DslError as exc:
            diagnostics.extend(exc.diagnostics)
            continue
        sources[name] = SourceFile(name, text, hashlib.sha256(data).hexdigest())
        result = parse_partial(text, name)
        programs.append(result.program)
        diagnostics.extend(result.diagnostics)
        broken[name] = result.broken
        broken_severity = broken_severity or result.broken_severity
    return programs, sources, broken, broken_severity, diagnostics


def _check(
    programs: list[Program],
    sources: dict[str, SourceFile],
    broken: dict[str, frozenset[str]],
    broken_severity: bool,
    syntax: list[Diagnostic],
    model: Signature,
) -> CheckedProgram:
    checker = Checker(model, {f: s.text for f, s in sources.items()}, broken, broken_severity)
    result = checker.check(programs)
    if syntax or checker.diagnostics:
        order = {name: i for i, name in enumerate(sources)}
        everything = sorted(
            [*syntax, *checker.diagnostics],
            key=lambda d: (order.get(d.file, len(order)), d.line, d.column),
        )
        raise DslError(everything)
    return dataclasses.replace(result, sources=tuple(sources.values()))


def load_invariants(paths: Sequence[str | os.PathLike[str]], model: Signature) -> CheckedProgram:
    """Parse and type-check the invariant files *paths* (files or directories) against *model*.

    Raises :class:`DslError` with every syntax and type error of every file (the items that
    parse are type-checked even when others do not), or :class:`ClefproveError` for a path
    that does not exist or cannot be read, or for files that define no invariant at all (an
    empty set would otherwise "pass" every gate, SPEC §4).
    """
    program = _check(*_parse_all(paths), model)
    if not program.invariants:
        names = ", ".join(str(p) for p in paths)
        raise ClefproveError(f"{names}: the invariant files define no invariant")
    return program


def parse_text(text: str, model: Signature, file: str = "<string>") -> CheckedProgram:
    """Parse and type-check the text of one invariant file against *model*."""
    result = parse_partial(text, file)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return _check(
        [result.program],
        {file: SourceFile(file, text, digest)},
        {file: result.broken},
        result.broken_severity,
        list(result.diagnostics),
        model,
    )
