"""The Z3 version that the proof cache's keys name."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

from clefprove.smt.version import solver_version
from clefprove.verify.options import verifier_identity


def test_the_installed_distributions_version() -> None:
    assert solver_version() == importlib.metadata.version("z3-solver")
    assert verifier_identity().endswith("+z3-" + importlib.metadata.version("z3-solver"))


def test_read_without_importing_z3() -> None:
    code = (
        "import sys\n"
        "from clefprove.smt.version import solver_version\n"
        "assert solver_version() != 'unknown'\n"
        "assert 'z3' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_unknown_without_z3(monkeypatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert solver_version() == "unknown"
