"""``python -m clefprove.cli.bytecode``: a copy of the package, never byte-compiled, gets its
``.pyc`` files and frozen-dataclass tables under ``PYTHONDONTWRITEBYTECODE``, and a later
process under that flag compiles nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "clefprove"


def _run(code: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, *code], capture_output=True, text=True, timeout=300, env=env, cwd=root
    )


@pytest.fixture(scope="module")
def compiled_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("installed")
    shutil.copytree(PACKAGE, root / "clefprove", ignore=shutil.ignore_patterns("__pycache__"))
    done = _run(["-m", "clefprove.cli.bytecode"], root)
    assert done.returncode == 0, done.stderr
    return root


def test_every_module_gets_its_bytecode(compiled_copy: Path) -> None:
    package = compiled_copy / "clefprove"
    tag = sys.implementation.cache_tag
    missing = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file()
    ]
    assert missing == []


def test_a_later_process_compiles_no_dataclass_method(compiled_copy: Path) -> None:
    probe = (
        "import sys, clefprove.frozen as f, clefprove.verify.api, clefprove.dsl.loader\n"
        "mods = sorted(m for m in sys.modules if m.startswith('clefprove'))\n"
        "print(sum(f.METHODS.compiled(m) for m in mods), len(f.METHODS._used))"
    )
    done = _run(["-c", probe], compiled_copy)
    assert done.returncode == 0, done.stderr
    compiled, modules = map(int, done.stdout.split())
    assert modules > 10 and compiled == 0
    tables = list((compiled_copy / "clefprove" / "__pycache__").glob("frozen-*.bin"))
    assert len(tables) >= modules


def test_an_unwritable_package_is_one_line_and_exit_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    root = tmp_path / "ro"
    shutil.copytree(PACKAGE, root / "clefprove", ignore=shutil.ignore_patterns("__pycache__"))
    for p in sorted((root / "clefprove").rglob("*"), reverse=True):
        if p.is_dir():
            p.chmod(0o555)
    try:
        done = _run(["-m", "clefprove.cli.bytecode"], root)
    finally:
        for p in (root / "clefprove").rglob("*"):
            if p.is_dir():
                p.chmod(0o755)
        (root / "clefprove").chmod(0o755)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_byte_code_goes_where_the_import_system_looks_through_a_symlink(tmp_path: Path) -> None:
    """Under ``PYTHONPYCACHEPREFIX`` the place of a ``.pyc`` is its source's path as imported
    (never resolved), so a package reached through a symlink is compiled by that path."""
    real = tmp_path / "real"
    shutil.copytree(PACKAGE, real / "clefprove", ignore=shutil.ignore_patterns("__pycache__"))
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    prefix = tmp_path / "prefix"
    env = dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(link),
        PYTHONPYCACHEPREFIX=str(prefix),
    )
    done = subprocess.run(
        [sys.executable, "-m", "clefprove.cli.bytecode"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    tag = sys.implementation.cache_tag
    under = prefix / str(link).lstrip(os.sep) / "clefprove"
    assert (under / "cli" / f"bytecode.{tag}.pyc").is_file()
    assert (under / f"frozen.{tag}.pyc").is_file()
    assert list((under / "__pycache__").glob("frozen-*.bin")) or list(under.glob("frozen-*.bin"))


def test_a_module_that_fails_to_import_otherwise_is_skipped_too(tmp_path: Path) -> None:
    """An optional dependency installed but broken fails with whatever its import raises
    (an AttributeError of a version mismatch, an OSError of a missing shared library): the
    rest is compiled all the same."""
    shutil.copytree(PACKAGE, tmp_path / "clefprove", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "clefprove" / "app" / "zz_broken.py").write_text(
        "raise AttributeError('module has no attribute x')\n"
    )
    (tmp_path / "clefprove" / "zz_broken_pkg").mkdir()
    (tmp_path / "clefprove" / "zz_broken_pkg" / "__init__.py").write_text("raise OSError('lib')\n")
    done = _run(["-m", "clefprove.cli.bytecode"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "clefprove.app.zz_broken (module has no attribute x)" in done.stderr
    assert "clefprove.zz_broken_pkg (lib)" in done.stderr
    assert list((tmp_path / "clefprove" / "__pycache__").glob("frozen-clefprove.verify.*.bin"))
