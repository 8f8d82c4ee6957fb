"""Fixtures of the Coq export tests: a compiled copy of the Coq library shared by the session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clefprove.coq_export.export import LIBRARY, library_text

from .coqgen import COQC, coqc

needs_coqc = pytest.mark.skipif(COQC is None, reason="coqc is not installed")


@pytest.fixture(scope="session")
def compiled_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the library sources and their .vo files (compiled once)."""
    if COQC is None:
        pytest.skip("coqc is not installed")
    d = tmp_path_factory.mktemp("coqlib")
    for name in LIBRARY:
        (d / name).write_text(library_text(name))
    out = coqc(d, *LIBRARY)
    assert out.returncode == 0, out.stderr
    return d


@pytest.fixture
def coq_dir(tmp_path: Path, compiled_library: Path) -> Path:
    """A fresh directory with the compiled library in it (exports are written here)."""
    for f in compiled_library.iterdir():
        if f.is_file():
            shutil.copy2(f, tmp_path / f.name)
    return tmp_path
