"""The one memo mechanism: derived values kept by their owner, never by a process-wide table."""

from __future__ import annotations

import ast
import gc
import pickle
import re
import weakref
from pathlib import Path

from clefprove.geometry.boxes import tables
from clefprove.memo import Derived
from clefprove.model.source import load_source
from tests.conftest import EXAMPLES

PACKAGE = Path(__file__).resolve().parent.parent / "clefprove"


def test_a_value_is_computed_once_per_owner():
    calls = []
    memo = Derived()
    assert memo.get(("k",), lambda: calls.append(1) or 41) == 41
    assert memo.get(("k",), lambda: calls.append(1) or 42) == 41
    assert calls == [1]


def test_a_copy_in_another_process_starts_empty():
    memo = Derived(limit=7)
    memo.get("k", lambda: 1)
    copy = pickle.loads(pickle.dumps(memo))
    assert len(copy) == 0 and copy.get("k", lambda: 2) == 2


def test_models_keep_their_own_tables_and_release_them():
    a = load_source(EXAMPLES / "spec-toy.json")
    b = load_source(EXAMPLES / "spec-toy.json")
    assert tables(a) is tables(a)
    assert tables(a) is not tables(b)
    gone = weakref.ref(tables(a))
    del a
    gc.collect()
    assert gone() is None


def test_no_module_keeps_a_memo_table():
    """No module-level dict or WeakKeyDictionary that functions fill (the old memo pattern)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        tables_ = {
            t.id
            for node in tree.body
            if isinstance(node, ast.AnnAssign | ast.Assign)
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
            and isinstance(node.value, ast.Dict | ast.Call)
            and (
                (isinstance(node.value, ast.Dict) and not node.value.keys)
                or (
                    isinstance(node.value, ast.Call)
                    and "WeakKeyDictionary" in ast.unparse(node.value.func)
                )
            )
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in tables_
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}: {node.value.id}")
    assert offenders == []


#: The DSL's direct builders: they make *new* AST / checked nodes by setting a whole instance
#: dict at once (only while ``ast.fillable`` says the class is a plain frozen dataclass, and
#: tested equal to the constructors' objects in tests/dsl). That is construction, not a memo.
DIRECT_BUILDERS = {"dsl/ast.py", "dsl/parser.py", "dsl/checker.py"}


def test_no_memo_hangs_off_an_objects_dict():
    """Derived values live in the owner's ``derived`` memo, not in attributes stuck onto a
    frozen object (``object.__setattr__`` / ``__dict__`` / ``vars(...)``), which no test can
    see or bound; aliases of ``object.__setattr__`` count too."""
    marks = re.compile(r'object\.__setattr__|\.__dict__|"__dict__"|\bvars\([^)]*\)\.update')
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "memo.py"
        and str(path.relative_to(PACKAGE)) not in DIRECT_BUILDERS
        and marks.search(path.read_text())
    ]
    assert offenders == []


def test_a_replaced_model_starts_with_an_empty_memo():
    """``dataclasses.replace`` builds a new owner: it must not inherit the old one's derived
    values (they may describe other content)."""
    import dataclasses

    from clefprove.model.loading import load_model

    model = load_model(PACKAGE.parent / "examples" / "edge-allow-block.clef")
    model.derived.get(("test",), lambda: 1)
    other = dataclasses.replace(model, nodes=model.nodes.copy())
    assert len(other.derived) == 0 and other.derived is not model.derived
