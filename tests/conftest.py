from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis profiles: "dev" (the default tier: quick) and "ci" (the full suite: thorough).
# Tests that pin their own max_examples keep it in both.
settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.register_profile(
    "dev", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        help="run the full suite: slow tests too, Hypothesis profile 'ci' (what make test runs)",
    )


def pytest_configure(config: pytest.Config) -> None:
    full = config.getoption("--all")
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if full else "dev"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--all"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with --all (make test runs everything)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
