"""Packaging metadata (issue 12): extras hold what the code imports, every pin is bounded, the
licence is an SPDX string, and the JSON Schemas ship in the package."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clefprove"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: The distribution that provides each third-party module the package imports.
DISTRIBUTION = {
    "numpy": "numpy",
    "z3": "z3-solver",
    "lark": "lark",
    "rich": "rich",
    "jinja2": "jinja2",
    "xxhash": "xxhash",
    "onnx": "onnx",
    "sklearn": "scikit-learn",
    "cvc5": "cvc5",
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "prometheus_client": "prometheus-client",
}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def imported_distributions() -> set[str]:
    """Every third-party distribution some module of the package imports (anywhere)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "clefprove" or top in sys.stdlib_module_names:
                    continue
                assert top in DISTRIBUTION, f"{path}: imports {top}, not in DISTRIBUTION"
                found.add(DISTRIBUTION[top])
    return found


def test_import_extra_holds_only_what_the_importers_import() -> None:
    project = PYPROJECT["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    used = imported_distributions()
    assert "xgboost" not in used and "lightgbm" not in used  # files are read as data
    assert extras["import"] == {"onnx"}
    assert core <= used
    # everything the code imports is a core dependency or in an extra that names it
    optional = used - core
    assert optional <= extras["import"] | extras["sklearn"] | extras["serve"] | extras["test"]
    # the service's stack is in the serve extra, and the tests have it too
    service = {"starlette", "uvicorn", "prometheus-client"}
    assert service <= used and service <= extras["serve"] <= extras["test"]


def test_every_requirement_is_bounded() -> None:
    project = PYPROJECT["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    for group, requirements in groups.items():
        for r in requirements:
            assert ">=" in r and "<" in r.replace("<=", ""), f"[{group}] {r} is not bounded"


def test_test_extra_has_what_the_ci_tests_run() -> None:
    test = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert {"pyyaml", "pre-commit", "junitparser", "sarif-tools", "jsonschema"} <= test


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    requires = PYPROJECT["build-system"]["requires"]
    setuptools = next(r for r in requires if _name(r) == "setuptools")
    major = int(re.search(r">=(\d+)", setuptools).group(1))
    assert major >= 77  # the first setuptools that accepts an SPDX expression


def test_schemas_are_package_data() -> None:
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert "schemas/*.json" in data["clefprove"]
    names = {p.name for p in (PACKAGE / "schemas").glob("*.json")}
    assert {"model-source.schema.json", "check-report.schema.json"} <= names
