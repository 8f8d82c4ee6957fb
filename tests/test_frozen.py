"""``clefprove.frozen``: the same classes as ``@dataclass(frozen=True)``, their method code
compiled once and kept in a file that can be missing, stale, damaged or unwritable."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clefprove import frozen as fz

PACKAGE = Path(fz.__file__).resolve().parent

SOURCES = {
    "plain": """
        class C:
            '''doc'''
            a: int
            b: str
    """,
    "defaults": """
        class C:
            '''doc'''
            a: int
            b: tuple[int, ...] = ()
            c: list[int] = dataclasses.field(default_factory=list, compare=False)
            d: float = dataclasses.field(default=0.5, repr=False)
    """,
    "post_init": """
        class C:
            a: int
            b: int = 0
            def __post_init__(self) -> None:
                if self.a < 0:
                    raise ValueError("a")
    """,
    "classvar_kw": """
        class C:
            '''doc'''
            K: typing.ClassVar[int] = 3
            a: int
            b: int = dataclasses.field(default=1, kw_only=True)
    """,
}

MODULE = "frozen_test_classes"

ARGS: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
    "plain": ((1, "x"), {}),
    "defaults": ((1,), {}),
    "post_init": ((1,), {}),
    "classvar_kw": ((1,), {"b": 2}),
}


def _class(source: str) -> type:
    namespace: dict[str, object] = {
        "__name__": MODULE,
        "dataclasses": dataclasses,
        "typing": __import__("typing"),
    }
    exec(compile(textwrap.dedent(source), "<test>", "exec", dont_inherit=True), namespace)
    cls = namespace["C"]
    assert isinstance(cls, type)
    return cls


def _pair(source: str, **options: bool) -> tuple[type, type]:
    ours = fz.frozen(**options)(_class(source))  # type: ignore[call-overload]
    theirs = dataclasses.dataclass(frozen=True, **options)(_class(source))
    return ours, theirs


@pytest.fixture()
def methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> fz.CompiledMethods:
    table = fz.CompiledMethods(str(tmp_path / "__pycache__"))
    monkeypatch.setattr(fz, "METHODS", table)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's interpreter runs
    return table


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("options", [{}, {"eq": False}, {"slots": True}])
def test_same_class_as_the_standard_decorator(
    name: str, options: dict[str, bool], methods: fz.CompiledMethods
) -> None:
    for _ in range(2):  # compiled, then served from the table
        ours, theirs = _pair(SOURCES[name], **options)
        assert inspect.signature(ours) == inspect.signature(theirs)
        assert [
            (f.name, f.default, f.repr, f.compare, f.kw_only) for f in dataclasses.fields(ours)
        ] == [(f.name, f.default, f.repr, f.compare, f.kw_only) for f in dataclasses.fields(theirs)]
        assert ours.__dataclass_params__.frozen and ours.__dataclass_params__.eq == options.get(  # type: ignore[attr-defined]
            "eq", True
        )
        assert ("__slots__" in ours.__dict__) == ("__slots__" in theirs.__dict__)
        for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
            mine, std = ours.__dict__.get(method), theirs.__dict__.get(method)
            assert (mine is None) == (std is None), method
            if mine is not None and hasattr(mine, "__code__"):
                assert mine.__code__.co_code == std.__code__.co_code, method
                assert mine.__code__.co_consts == std.__code__.co_consts, method
        args, kwargs = ARGS[name]
        x, y = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert repr(x) == repr(y)
        assert (x == ours(*args, **kwargs)) == (y == theirs(*args, **kwargs))
        with pytest.raises(dataclasses.FrozenInstanceError):
            x.a = 2  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del x.a  # type: ignore[attr-defined]
        assert dataclasses.replace(x, a=5).a == 5  # type: ignore[attr-defined]
        if options.get("eq", True):
            assert hash(x) == hash(ours(*args, **kwargs))
    assert methods.compiled(MODULE) > 0


def test_post_init_and_default_factory_still_run(methods: fz.CompiledMethods) -> None:
    cls = fz.frozen(_class(SOURCES["post_init"]))
    with pytest.raises(ValueError):
        cls(-1)
    defaults = fz.frozen(_class(SOURCES["defaults"]))
    first, second = defaults(1), defaults(1)
    assert first.c == [] and first.c is not second.c


def test_docstring_without_signature_inspection(methods: fz.CompiledMethods) -> None:
    assert fz.frozen(_class(SOURCES["post_init"])).__doc__ == "C(a, b)"
    assert fz.frozen(_class(SOURCES["plain"])).__doc__ == "doc"


def _file(methods: fz.CompiledMethods) -> Path:
    path = methods.path(MODULE)
    assert path is not None
    return Path(path)


def test_saved_table_serves_the_next_process(
    methods: fz.CompiledMethods, monkeypatch: pytest.MonkeyPatch
) -> None:
    fz.frozen(_class(SOURCES["defaults"]))
    used = dict(methods._used[MODULE])
    methods.save()
    assert _file(methods).is_file()
    again = fz.CompiledMethods(methods.directory)
    monkeypatch.setattr(fz, "METHODS", again)
    fz.frozen(_class(SOURCES["defaults"]))
    assert again.compiled(MODULE) == 0
    assert again._stored[MODULE].keys() == used.keys()
    for text, code in again._stored[MODULE].items():
        assert code.co_code == used[text].co_code


@pytest.mark.parametrize(
    "damage",
    [b"", b"not a table", b"\x00" * 64, "header", "not a dict", "not code", "truncated"],
)
def test_damaged_table_is_ignored(
    damage: bytes | str, methods: fz.CompiledMethods, monkeypatch: pytest.MonkeyPatch
) -> None:
    fz.frozen(_class(SOURCES["plain"]))
    methods.save()
    path = _file(methods)
    good = path.read_bytes()
    header = fz._header()
    if damage == "header":  # another interpreter's
        data = b"\x00\x00\r\n" + good[4:]
    elif damage == "not a dict":
        data = header + marshal.dumps([1, 2])
    elif damage == "not code":
        data = header + marshal.dumps({"def f(): pass": "print('x')"})
    elif damage == "truncated":
        data = good[: len(good) // 2]
    else:
        assert isinstance(damage, bytes)
        data = damage
    path.write_bytes(data)
    table = fz.CompiledMethods(methods.directory)
    monkeypatch.setattr(fz, "METHODS", table)
    cls = fz.frozen(_class(SOURCES["plain"]))
    assert repr(cls(1, "x")) == "C(a=1, b='x')"
    assert table.compiled(MODULE) > 0
    table.save()  # a good table over the damaged one
    assert fz._read(str(path)).keys() == table._used[MODULE].keys()


def test_marshal_data_that_breaks_the_code_constructor_is_ignored(tmp_path: Path) -> None:
    # a damaged table need not fail with EOFError, ValueError or TypeError: this one byte makes
    # CPython 3.11's marshal raise SystemError (code object built from bad fields)
    good = marshal.dumps({"x = 1\n": compile("x = 1\n", "<string>", "exec", dont_inherit=True)})
    path = tmp_path / "t.bin"
    path.write_bytes(fz._header() + b"\xfb" + good[1:])
    with pytest.raises(Exception):  # noqa: B017 (which one depends on the version)
        marshal.loads(b"\xfb" + good[1:])
    assert fz._read(str(path)) == {}


def test_unwritable_place_only_costs_the_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    table = fz.CompiledMethods(str(blocker / "sub"))  # a directory under a file
    monkeypatch.setattr(fz, "METHODS", table)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cls = fz.frozen(_class(SOURCES["plain"]))
    table.save()
    assert cls(1, "a") == cls(1, "a")
    assert not list(tmp_path.glob("**/*.tmp")) and not list(tmp_path.glob("**/*.bin"))


def test_a_table_is_written_as_the_import_system_writes_a_pyc(
    methods: fz.CompiledMethods, tmp_path: Path
) -> None:
    """Not more writable than the package's source whatever the umask (it is code this
    package runs), and never through a file or link already at the temporary name."""
    path = _file(methods)
    path.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    Path(f"{path}.{os.getpid()}.tmp").symlink_to(victim)
    fz.frozen(_class(SOURCES["plain"]))
    old = os.umask(0)
    try:
        methods.save()
        methods._compiled.add(MODULE)
        methods.save()
    finally:
        os.umask(old)
    assert victim.read_bytes() == b"keep"
    assert fz._read(str(path)).keys() == methods._used[MODULE].keys()
    source_mode = Path(fz.__file__).stat().st_mode
    assert path.stat().st_mode & 0o777 == (source_mode | 0o200) & 0o666


def test_optimized_and_plain_processes_keep_their_own_tables(
    methods: fz.CompiledMethods, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``.pyc`` files are ``.opt-1``/``.opt-2`` under ``-O``/``-OO``: one shared file had
    the other's header in turn, so each run compiled every text and rewrote it."""
    fz.frozen(_class(SOURCES["plain"]))
    methods.save()
    plain = _file(methods)
    monkeypatch.setattr(sys, "flags", type("Flags", (), {"optimize": 1})())
    optimized = fz.CompiledMethods(methods.directory)
    monkeypatch.setattr(fz, "METHODS", optimized)
    fz.frozen(_class(SOURCES["plain"]))
    optimized.save()
    path = optimized.path(MODULE)
    assert path is not None and path != str(plain) and ".opt-1." in path
    assert fz._read(path).keys() == optimized._used[MODULE].keys()
    monkeypatch.undo()
    assert fz._read(str(plain)).keys() == methods._used[MODULE].keys()


def test_nothing_written_without_bytecode(
    methods: fz.CompiledMethods, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    fz.frozen(_class(SOURCES["plain"]))
    methods.save()
    assert not _file(methods).exists()


def test_a_rewritten_file_holds_exactly_what_the_module_used(methods: fz.CompiledMethods) -> None:
    path = _file(methods)
    path.parent.mkdir(parents=True)
    stale = {f"x = {i}": compile(f"x = {i}", "<string>", "exec") for i in range(20)}
    path.write_bytes(fz._header() + marshal.dumps(stale))
    fz.frozen(_class(SOURCES["plain"]))
    fz.frozen(_class(SOURCES["post_init"]))
    methods.save()
    kept = fz._read(str(path))
    assert kept.keys() == methods._used[MODULE].keys() and not set(kept) & set(stale)


def test_generated_text_compiles_without_this_modules_future_flags(
    methods: fz.CompiledMethods,
) -> None:
    # frozen.py has ``from __future__ import annotations``; the generated methods must not
    cls = fz.frozen(_class(SOURCES["plain"]))
    assert cls.__init__.__annotations__ == {"a": int, "b": str, "return": None}


def test_the_package_makes_every_frozen_dataclass_through_frozen() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "dataclass"
                and any(k.arg == "frozen" for k in node.keywords)
                and path.name != "frozen.py"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_a_fresh_interpreter_reuses_the_saved_table(tmp_path: Path) -> None:
    """Two real processes: the first writes the table at exit, the second compiles nothing."""
    script = textwrap.dedent(
        f"""
        import sys
        from clefprove import frozen as fz
        fz.METHODS = fz.CompiledMethods({str(tmp_path / "m.bin")!r})
        import dataclasses
        @fz.frozen
        class C:
            '''doc'''
            a: int
            b: str = 'x'
        import atexit
        atexit.register(lambda: print(fz.METHODS.compiled("__main__"), flush=True))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent), env.get("PYTHONPATH", "")])
    env_runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in env_runs] == [0, 0], [r.stderr for r in env_runs]
    assert int(env_runs[0].stdout.split()[-1]) > 0
    assert env_runs[1].stdout.split()[-1] == "0"


def _run_script(script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_a_frozen_class_made_while_one_is_being_made_does_not_deadlock() -> None:
    """``slots=True`` makes the class again, which runs ``__init_subclass__`` (and a
    metaclass, ``__set_name__``) inside the decorator: a frozen class made there re-enters."""
    done = _run_script(
        """
        import signal
        from clefprove import frozen as fz
        fz.METHODS = fz.CompiledMethods(None)
        signal.alarm(20)  # a deadlock ends the process
        class Base:
            def __init_subclass__(cls, **kw):
                super().__init_subclass__(**kw)
                @fz.frozen
                class Inner:
                    a: int
                cls.inner = Inner
        @fz.frozen(slots=True)
        class Outer(Base):
            b: int
        import dataclasses
        assert "exec" not in vars(dataclasses)
        assert fz.METHODS.module == ""
        print(repr(Outer(1)), repr(Outer.inner(2)))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Outer(b=1)", "Base.__init_subclass__.<locals>.Inner(a=2)"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_child_forked_while_another_thread_makes_a_class_can_make_classes() -> None:
    done = _run_script(
        """
        import os, signal, threading, dataclasses
        from clefprove import frozen as fz
        fz.METHODS = fz.CompiledMethods(None)
        held, release = threading.Event(), threading.Event()
        def hold():  # as a thread inside the decorator at the moment of the fork
            with fz._LOCK:
                dataclasses.exec = fz.METHODS.exec
                held.set()
                release.wait()
                del dataclasses.exec
        thread = threading.Thread(target=hold)
        thread.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a deadlock ends the child
            @fz.frozen
            class C:
                a: int
            os._exit(0 if C(1).a == 1 and "exec" not in vars(dataclasses) else 1)
        _, status = os.waitpid(pid, 0)
        release.set()
        thread.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]
