"""Golden files: the exact Coq text exported for small models (no coqc needed).

Regenerate after an intended change with ``CLEFPROVE_UPDATE_GOLDEN=1 pytest tests/coq``, then
review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clefprove.coq_export.export import LIBRARY, export_coq, library_text
from clefprove.dsl.loader import parse_text
from clefprove.model.source import compile_source

from .test_export import guarded_source

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[2]
UPDATE = os.environ.get("CLEFPROVE_UPDATE_GOLDEN") == "1"


def _compare(directory: Path, files: dict[str, str]) -> None:
    for name in ("Model.v", "Invariants.v", "Assumptions.v", "README.md"):
        path = directory / name
        if UPDATE:
            path.write_text(files[name])
        assert path.exists(), f"missing golden file {path}"
        assert files[name] == path.read_text(), f"{path} differs from the export"


@pytest.mark.parametrize("case", ["toy", "guarded"])
def test_golden(case: str) -> None:
    d = GOLDEN / case
    d.mkdir(exist_ok=True)
    if case == "toy":
        model = compile_source(json.loads((d / "model.json").read_text()))
    else:
        model = compile_source(guarded_source())
    text = (GOLDEN / "toy" / "edge.inv").read_text()
    program = parse_text(text, model, file="edge.inv")  # a path that is the same everywhere
    # Counterexamples are given, so the text does not depend on the verifier's choices.
    known = {
        "scripted_clients_face_friction": [50, 772, 3, 0, 3, 0],
        "tor_never_allowed_when_deep": [50, 772, 4, 0, 5, 1],
        "weighted_risk_linear": [300, 772, 64, 0, 5, 0],
    }
    export = export_coq(model, program, verify=False, counterexamples=known)
    _compare(d, export.files)


def test_library_is_the_coq_directory() -> None:
    """The package data the exporter copies is the hand-written library in coq/."""
    for name in LIBRARY:
        assert library_text(name) == (ROOT / "coq" / name).read_text()
