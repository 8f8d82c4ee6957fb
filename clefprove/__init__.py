"""clefprove: prove that Clef decision-tree models obey safety invariants for every input.

The public API is imported lazily so that ``clefprove --help`` starts fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {
    "load": "clefprove.model.clef",
    "load_bytes": "clefprove.model.clef",
    "compile_source": "clefprove.model.source",
    "load_source": "clefprove.model.source",
    "from_sklearn": "clefprove.model.sklearn",
    "import_model": "clefprove.model.importers",
    "Evaluator": "clefprove.eval.evaluator",
    "load_invariants": "clefprove.dsl.loader",
    "check": "clefprove.verify.api",
    "Report": "clefprove.verify.verdicts",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'clefprove' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
