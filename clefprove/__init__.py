"""clefprove: prove that Clef decision-tree models obey safety invariants for every input.

The public API is imported lazily so that ``clefprove --help`` starts fast; type checkers,
``dir()`` and ``help()`` see it all the same.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from clefprove.version import __version__

if TYPE_CHECKING:
    from clefprove.dsl.loader import load_invariants
    from clefprove.errors import ClefproveError
    from clefprove.eval.evaluator import Evaluator
    from clefprove.model.clef import load, load_bytes, save
    from clefprove.model.importers import import_model
    from clefprove.model.sklearn import from_sklearn
    from clefprove.model.source import compile_source, load_source
    from clefprove.model.types import Model
    from clefprove.verify.api import check
    from clefprove.verify.verdicts import Report

#: Public name -> the module that defines it (imported on first use).
_API = {
    "load": "clefprove.model.clef",
    "load_bytes": "clefprove.model.clef",
    "save": "clefprove.model.clef",
    "compile_source": "clefprove.model.source",
    "load_source": "clefprove.model.source",
    "from_sklearn": "clefprove.model.sklearn",
    "import_model": "clefprove.model.importers",
    "Model": "clefprove.model.types",
    "Evaluator": "clefprove.eval.evaluator",
    "load_invariants": "clefprove.dsl.loader",
    "check": "clefprove.verify.api",
    "Report": "clefprove.verify.verdicts",
    "ClefproveError": "clefprove.errors",
}

__all__ = [
    "ClefproveError",
    "Evaluator",
    "Model",
    "Report",
    "__version__",
    "check",
    "compile_source",
    "from_sklearn",
    "import_model",
    "load",
    "load_bytes",
    "load_invariants",
    "load_source",
    "save",
]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'clefprove' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
