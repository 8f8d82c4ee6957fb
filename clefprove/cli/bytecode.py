"""Compile the installed package's bytecode ahead of its first run.

``pip install .`` byte-compiles what it installs; an editable install (``pip install -e .``)
does not, and where ``PYTHONDONTWRITEBYTECODE`` is set (as in many container images) nothing
is ever written afterwards either: every command then compiles clefprove from source again,
about twice its start-up time. This writes what a regular install would, plus the compiled
methods of the frozen dataclasses (``clefprove.frozen``), whatever that variable says, as
``compileall`` does::

    python -m clefprove.cli.bytecode
"""

from __future__ import annotations

import compileall
import importlib
import os
import pkgutil
import sys
from pathlib import Path

from clefprove import frozen


def compile_package() -> list[str]:
    """Write the package's ``.pyc`` files and the frozen dataclasses' method tables; the
    modules that could not be imported (an optional dependency missing or broken) are
    returned."""
    # the package, by the path it is imported from: a .pyc's place under sys.pycache_prefix
    # is its source's path unresolved (a symlink followed would compile where nothing looks)
    root = Path(os.path.abspath(__file__)).parent.parent
    if not compileall.compile_dir(str(root), quiet=2):
        raise OSError(f"{root}: byte-compiling failed")
    skipped: list[str] = []
    # a package that fails is reported by the loop below (walk_packages imports it after)
    for info in pkgutil.walk_packages([str(root)], "clefprove.", onerror=lambda name: None):
        if info.name.rpartition(".")[2] == "__main__":
            continue
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # an optional dependency missing, or installed but broken
            skipped.append(f"{info.name} ({exc})")
    frozen.METHODS.save(force=True)
    return skipped


def main() -> int:
    """Compile, report what was skipped; exit status 0, or 2 if nothing could be written."""
    try:
        skipped = compile_package()
    except OSError as exc:
        print(f"clefprove: {exc}", file=sys.stderr)
        return 2
    for name in skipped:
        print(f"clefprove: not imported, compiled when first used: {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
