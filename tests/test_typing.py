"""The package type-checks clean under ``mypy --strict`` (settings in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[test]')",
)
def test_mypy_strict_reports_no_errors() -> None:
    # [tool.mypy] in pyproject.toml: strict = true, packages = ["clefprove"]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert not errors, f"mypy --strict found {len(errors)} error(s):\n" + out.stdout
    assert out.returncode == 0, out.stdout + out.stderr
