from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True, scope="session")
def _proof_cache_outside_the_repository(tmp_path_factory):
    """CLI runs in tests keep their default proof cache in a temporary directory."""
    old = os.environ.get("CLEFPROVE_CACHE")
    os.environ["CLEFPROVE_CACHE"] = str(tmp_path_factory.mktemp("proof-cache"))
    yield
    if old is None:
        os.environ.pop("CLEFPROVE_CACHE", None)
    else:
        os.environ["CLEFPROVE_CACHE"] = old


@pytest.fixture
def spec_source() -> dict:
    """The SPEC §2 model source, as parsed JSON (a fresh copy per test)."""
    return json.loads((EXAMPLES / "spec-toy.json").read_text())


@pytest.fixture(scope="session")
def spec_model():
    """The SPEC §2 model, compiled (immutable, so shared by every test)."""
    from clefprove.model.source import load_source

    return load_source(EXAMPLES / "spec-toy.json")
