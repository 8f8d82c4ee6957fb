"""The top-level API: lazy, yet visible to dir(), help() and type checkers."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import clefprove

INIT = Path(clefprove.__file__)


def test_every_public_name_resolves_and_is_listed():
    for name in clefprove.__all__:
        assert name in dir(clefprove)
        assert getattr(clefprove, name) is not None


def test_type_checkers_see_the_same_names_as_the_lazy_loader():
    tree = ast.parse(INIT.read_text())
    guarded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                guarded.update(a.name for a in imp.names)
                for a in imp.names:
                    assert clefprove._API[a.name] == imp.module
    assert guarded == set(clefprove._API)
    assert set(clefprove.__all__) == {*clefprove._API, "__version__"}


def test_the_package_is_marked_typed():
    assert (INIT.parent / "py.typed").is_file()


def test_importing_the_package_loads_no_stage():
    code = "import sys, clefprove; print(sorted(m for m in sys.modules if m[:9] == 'clefprove'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['clefprove', 'clefprove.version']"
    assert "z3" not in out.stdout


def test_a_single_tree_check_imports_no_ensemble_stage(tmp_path):
    # with the default proof cache, as `clefprove check model.clef invariants/` runs
    root = INIT.parent.parent
    code = (
        "import sys\nfrom clefprove.cli.main import main\n"
        f"code = main(['check', {str(root / 'examples/edge-allow-block.clef')!r},"
        f" {str(root / 'invariants')!r}])\n"
        "print(sorted(m for m in sys.modules if 'ensemble' in m or 'relational' in m), code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=120)  # fmt: skip
    assert r.stdout.splitlines()[-1] == "['clefprove.model.ensemble'] 0", r.stderr


@pytest.mark.parametrize("command", ["gate", "diff"])
def test_a_single_tree_gate_or_diff_imports_no_ensemble_stage_or_graph_library(tmp_path, command):
    root = INIT.parent.parent
    old = root / "examples/edge-allow-block-1.0.0.clef"
    new = root / "examples/edge-allow-block.clef"
    args = [str(old), str(new)]
    if command == "gate":
        args = [str(new), str(root / "invariants"), "--previous", str(old), "--no-cache"]
    code = (
        "import sys\nfrom clefprove.cli.main import main\n"
        f"code = main({[command, *args]!r})\n"
        "print(sorted(m for m in sys.modules if 'ensemble' in m or 'relational' in m"
        " or m == 'networkx'), code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=120)  # fmt: skip
    assert r.stdout.splitlines()[-1] == "['clefprove.model.ensemble'] 0", r.stderr


def test_a_small_check_imports_no_pool_masked_arrays_sockets_rich_or_lark(tmp_path):
    # start-up cost of every CI invocation: these are imported only by what needs them (rich
    # only for a progress bar on a terminal, lark only for a file the descent leaves to it)
    root = INIT.parent.parent
    unwanted = [
        "numpy.ma",
        "multiprocessing",
        "concurrent.futures",
        "socket",
        "rich",
        "lark",
    ]
    code = (
        "import sys\nfrom clefprove.cli.main import main\n"
        f"code = main(['check', {str(root / 'examples/edge-allow-block.clef')!r},"
        f" {str(root / 'invariants')!r}, '--no-cache'])\n"
        f"print([m for m in {unwanted!r} if m in sys.modules], code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=120)  # fmt: skip
    assert r.stdout.splitlines()[-1] == "[] 0", r.stderr
