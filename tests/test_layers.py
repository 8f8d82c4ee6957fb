"""The package is a one-way pipeline: no import runs back up it, no two modules import each other.

Every ``import`` in every module counts, at module level or inside a function, so that a lazy
import cannot hide a back-edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "clefprove"

#: Stages from the bottom up; a module may import its own stage and the stages below it.
#: Stages that share a rank are siblings and do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("frozen",),
    ("errors", "version", "status"),
    ("fileio", "memo"),
    ("model",),
    ("eval",),
    ("geometry",),
    ("dsl",),
    ("smt",),
    ("verify",),
    ("incremental",),
    ("app",),
    ("report", "coq_export"),
    ("cli",),
    ("__init__", "__main__"),
)
RANK = {stage: rank for rank, stages in enumerate(LAYERS) for stage in stages}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py")}


def imports_of(text: str, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """Every clefprove module that the source *text* of module *name* imports."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "clefprove")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "clefprove":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            found.update(subs or {target})
    found.discard(name)
    return found


GRAPH = {
    _module_name(p): imports_of(
        p.read_text(encoding="utf-8"), _module_name(p), p.name == "__init__.py", MODULES
    )
    for p in sorted(PACKAGE.rglob("*.py"))
}


def _stage(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_stage_has_a_rank():
    assert {_stage(m) for m in GRAPH} <= set(RANK), "add the new stage to LAYERS"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_runs_back_up(module):
    here = _stage(module)
    for target in sorted(GRAPH[module]):
        there = _stage(target)
        if here != there:
            assert RANK[there] < RANK[here], (
                f"{module} imports {target}: {there} is not below {here}"
            )


def test_no_cycle_between_modules():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(GRAPH.get(m, ())):
            if state.get(t) == 1:
                pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(t) :], t]))
            if t in GRAPH and t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_resolver_sees_lazy_and_relative_imports():
    text = "def f():\n    from clefprove.verify import api\n    from . import paths\n"
    found = imports_of(text, "clefprove.smt.probe", False, MODULES)
    assert found == {"clefprove.verify.api", "clefprove.smt.paths"}
    assert RANK["verify"] > RANK["smt"]  # so the first edge is one that the test above refuses
