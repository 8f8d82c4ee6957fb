"""Frozen dataclasses whose generated methods are compiled once per installation.

``@dataclass`` writes each method it adds (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__``, ``__delattr__``) as source text and compiles it, every time a
class is created. On CPython 3.11 that is about 0.6 ms per frozen class: some 45 ms of every
command's start, more than its whole check of a small model. The text depends only on the
class's fields and options, so :func:`frozen` hands the standard ``dataclass`` an ``exec``
that compiles each distinct text once and keeps the code beside the package's bytecode, one
file per defining module under the interpreter's cache tag, as the import system keeps
``.pyc`` files (and reads them even where ``sys.dont_write_bytecode`` forbids writing).

The cache cannot serve stale code: its key is the whole source text, and a text compiles to
the same code whatever the class (``compile(text, "<string>", "exec")`` with no inherited
flags, exactly what ``exec(text)`` does inside ``dataclasses``). A module's file is rewritten
at exit, with exactly the texts its classes used, only when one of them had to be compiled;
any failure to read or write it only costs the compile.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import threading
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


def _header() -> bytes:
    return importlib.util.MAGIC_NUMBER + f"clefprove.frozen 1 O{sys.flags.optimize}\n".encode()


def default_cache_dir() -> str | None:
    """Where this interpreter keeps the package's bytecode (its ``__pycache__``, or under
    ``sys.pycache_prefix``); ``None`` where it keeps none."""
    try:
        pyc = importlib.util.cache_from_source(os.path.abspath(__file__))
    except (NotImplementedError, ValueError):
        return None
    return os.path.dirname(pyc)


def _read(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    header = _header()
    if not data.startswith(header):
        return {}
    try:
        table = marshal.loads(data[len(header) :])
    except Exception:  # EOFError, ValueError, TypeError, or SystemError from a code's fields
        return {}
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, CodeType) for k, v in table.items()
    ):
        return {}
    return table


class CompiledMethods:
    """The compiled code of the methods generated for each module's classes, one file per
    module in *directory* (``None``: kept in memory only)."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.module = ""  # the module whose class is being made
        self._stored: dict[str, dict[str, CodeType]] = {}  # read from the files
        self._used: dict[str, dict[str, CodeType]] = {}  # what each module's classes used
        self._compiled: set[str] = set()  # modules with a text their file lacked
        self._save_registered = False

    def path(self, module: str) -> str | None:
        """The file of *module*'s methods."""
        if self.directory is None:
            return None
        level = sys.flags.optimize  # as a .pyc's name: -O and plain runs keep their own
        opt = f".opt-{level}" if level else ""
        name = f"frozen-{module}.{sys.implementation.cache_tag}{opt}.bin"
        return os.path.join(self.directory, name)

    def compiled(self, module: str) -> int:
        """How many of *module*'s texts this process had to compile."""
        stored = self._stored.get(module, {})
        return sum(text not in stored for text in self._used.get(module, {}))

    def exec(
        self,
        source: str | CodeType,
        globals: dict[str, Any] | None = None,
        locals: Mapping[str, object] | None = None,
        /,
    ) -> None:
        """``exec`` with each source text compiled once."""
        if isinstance(source, str):
            module = self.module
            stored = self._stored.get(module)
            if stored is None:
                path = self.path(module)
                stored = self._stored[module] = _read(path) if path else {}
            used = self._used.setdefault(module, {})
            code = used.get(source) or stored.get(source)
            if code is None:
                code = compile(source, "<string>", "exec", dont_inherit=True)
                self._compiled.add(module)
                if self.directory is not None and not self._save_registered:
                    self._save_registered = True
                    atexit.register(self.save)
            used[source] = code
            source = code
        exec(source, globals, locals)

    def save(self, force: bool = False) -> None:
        """Rewrite the file of each module that had a text compiled, with exactly the texts
        its classes used; skipped where it cannot be written, and under
        ``sys.dont_write_bytecode`` unless *force* (an explicit request, as ``compileall``
        writes bytecode whatever that flag says)."""
        if sys.dont_write_bytecode and not force:
            return
        try:  # as the import system writes a .pyc: no more writable than its source
            mode = (os.stat(__file__).st_mode | 0o200) & 0o666
        except OSError:
            mode = 0o666
        for module in sorted(self._compiled):
            path = self.path(module)
            if path is None:
                continue
            tmp = f"{path}.{os.getpid()}.tmp"
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                # O_EXCL: never through a file or link already there (it is removed below)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
                fd = os.open(tmp, flags, mode)
                with open(fd, "wb") as f:
                    f.write(_header() + marshal.dumps(self._used[module]))
                os.replace(tmp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                continue
            self._stored[module] = dict(self._used[module])
        self._compiled.clear()


# The process's one table of compiled method code (not of results): its key is the code's text.
METHODS = CompiledMethods(default_cache_dir())
# Reentrant: the decorator can run code that makes another frozen class (``slots=True`` makes
# the class again, which runs ``__init_subclass__``, a metaclass, ``__set_name__``).
_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    """A child forked while another thread was inside the decorator: that thread is gone,
    with the lock it held and the ``exec`` it had put in ``dataclasses``."""
    global _LOCK
    _LOCK = threading.RLock()
    METHODS.module = ""
    if isinstance(getattr(vars(dataclasses).get("exec"), "__self__", None), CompiledMethods):
        delattr(dataclasses, "exec")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _process(cls: type[T], eq: bool, slots: bool) -> type[T]:
    if cls.__doc__ is None:  # what dataclass would derive through inspect.signature, cheaply
        cls.__doc__ = f"{cls.__name__}({', '.join(vars(cls).get('__annotations__', ()))})"
    with _LOCK:
        previous = vars(dataclasses).get("exec")
        methods = METHODS
        outer = methods.module  # a class being made around this one (the lock is reentrant)
        methods.module = cls.__module__
        setattr(dataclasses, "exec", methods.exec)  # noqa: B010 (shadows the builtin there)
        try:
            return dataclasses.dataclass(frozen=True, eq=eq, slots=slots)(cls)
        finally:
            methods.module = outer
            if previous is None:
                delattr(dataclasses, "exec")
            else:
                setattr(dataclasses, "exec", previous)  # noqa: B010


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, eq: bool = True, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(
    cls: type[T] | None = None, /, *, eq: bool = True, slots: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass(frozen=True, eq=eq, slots=slots)``, its methods compiled once."""
    if cls is not None:
        return _process(cls, eq, slots)
    return lambda c: _process(c, eq, slots)
