from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def spec_source() -> dict:
    """The SPEC §2 model source, as parsed JSON (a fresh copy per test)."""
    return json.loads((EXAMPLES / "spec-toy.json").read_text())


@pytest.fixture(scope="session")
def spec_model():
    """The SPEC §2 model, compiled (immutable, so shared by every test)."""
    from clefprove.model.source import load_source

    return load_source(EXAMPLES / "spec-toy.json")
