"""The package type-checks clean under ``mypy --strict`` (configured in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[test]')",
)
def test_mypy_strict_reports_no_errors() -> None:
    # the settings ([tool.mypy]: strict, packages = ["clefprove"]) come from pyproject.toml
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert not errors, f"mypy --strict found {len(errors)} error(s):\n" + out.stdout
    assert out.returncode == 0, out.stdout + out.stderr
