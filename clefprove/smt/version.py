"""The installed Z3's version, for the proof cache's keys, without importing Z3."""

from __future__ import annotations

import importlib.util
import os

_DIST = "z3_solver-"
_SUFFIX = ".dist-info"


def solver_version() -> str:
    """The version of the installed ``z3-solver`` distribution, read from the name of its
    metadata directory beside the ``z3`` package (about 1 ms: importing Z3 takes 40 and
    ``importlib.metadata`` 20, on every cached run); ``"unknown"`` when that is not found.

    A proof stored under one Z3 is then not reused under another: a solver fix can change a
    verdict that a cached result would otherwise keep."""
    try:
        spec = importlib.util.find_spec("z3")
    except (ImportError, ValueError):
        return "unknown"
    if spec is None or not spec.origin:
        return "unknown"
    site = os.path.dirname(os.path.dirname(spec.origin))
    try:
        names = os.listdir(site)
    except OSError:
        return "unknown"
    found = sorted(
        n[len(_DIST) : -len(_SUFFIX)] for n in names if n.startswith(_DIST) and n.endswith(_SUFFIX)
    )
    return found[0] if len(found) == 1 else "unknown"
