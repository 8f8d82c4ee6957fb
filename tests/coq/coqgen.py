"""Helpers for the Coq export tests: random models and invariants, running coqc."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

from clefprove.dsl import checked as ck
from clefprove.model.source import compile_source
from clefprove.model.types import Model

COQC = shutil.which("coqc")

#: A small, all-integral domain that tests can enumerate exhaustively (5*4*5*2*3 = 600).
SMALL_FEATURES = [
    {"name": "a", "type": "int", "min": 0, "max": 4, "default": 0},
    {"name": "b", "type": "int", "min": -2, "max": 1, "default": 0},
    {"name": "d", "type": "int", "min": 0, "max": 4, "default": 0},
    {"name": "t", "type": "bool", "default": False},
    {"name": "u", "type": "categorical", "values": ["x", "y", "z"], "default": "x"},
]
MIXED_FEATURES = [
    {"name": "r", "type": "float", "min": 0, "max": 10, "default": 0},
    {"name": "s", "type": "float", "min": -1, "max": 1, "default": 0},
    *SMALL_FEATURES,
]
ACTIONS = ["allow", "challenge", "block"]


def random_tree(rng: random.Random, features: list[dict], depth: int) -> dict:
    """A random JSON tree (thresholds at, between and beyond integer points)."""
    if depth == 0 or rng.random() < 0.2:
        return {
            "action": rng.choice(ACTIONS),
            "confidence": rng.choice([0.1, 0.5, 0.7, 0.8, 0.9, 1.0]),
        }
    f = rng.choice(features)
    left = random_tree(rng, features, depth - 1)
    right = random_tree(rng, features, depth - 1)
    if f["type"] == "categorical":
        vals = rng.sample(f["values"], rng.randint(1, len(f["values"])))
        return {"feature": f["name"], "in": vals, "left": left, "right": right}
    if f["type"] == "bool":
        return {"feature": f["name"], "left": left, "right": right}
    lo, hi = f["min"], f["max"]
    t = rng.choice(
        [rng.randint(lo, hi) + rng.choice([0, 0.5, -0.5, 0.25]), lo - 1, hi, rng.uniform(lo, hi)]
    )
    return {"feature": f["name"], "threshold": t, "left": left, "right": right}


def random_model(rng: random.Random, features: list[dict], depth: int = 4) -> Model:
    return compile_source(
        {
            "name": "random",
            "version": "0",
            "features": features,
            "actions": ACTIONS,
            "tree": random_tree(rng, features, depth),
        }
    )


def _num(rng: random.Random) -> Fraction:
    return Fraction(rng.choice([0, 1, 2, 3, -1, -2, 0.5, 1.5, 2.5, 0.8, 0.7]))


def random_atom(rng: random.Random, model: Model) -> ck.Formula:
    feats = model.features
    kind = rng.random()
    if kind < 0.2:
        return ck.ActionIn(
            frozenset(rng.sample(range(len(model.actions)), rng.randint(1, len(model.actions) - 1)))
        )
    cat = [i for i, f in enumerate(feats) if f.type in ("categorical", "bool")]
    if kind < 0.4 and cat:
        i = rng.choice(cat)
        n = len(feats[i].values) if feats[i].values else 2
        return ck.InSet(i, frozenset(rng.sample(range(n), rng.randint(1, n - 1))))
    num = [i for i, f in enumerate(feats) if f.type in ("int", "float")]
    nvars = rng.choice([1, 1, 2, 2, 3])
    coeffs: dict[int, Fraction] = {}
    for v in rng.sample(num, min(nvars, len(num))):
        coeffs[v] = Fraction(rng.choice([1, -1, 2, -2, 3, 0.5]))
    if rng.random() < 0.3:
        coeffs[ck.CONFIDENCE] = Fraction(rng.choice([1, -1, 2]))
    return ck.Compare(ck.Linear.make(coeffs, _num(rng) * rng.choice([1, 2, 3])), rng.random() < 0.5)


def random_formula(rng: random.Random, model: Model, depth: int = 2) -> ck.Formula:
    r = rng.random()
    if depth == 0 or r < 0.4:
        return random_atom(rng, model)
    if r < 0.55:
        return ck.Not(random_formula(rng, model, depth - 1))
    args = tuple(random_formula(rng, model, depth - 1) for _ in range(rng.randint(2, 3)))
    return ck.And(args) if r < 0.8 else ck.Or(args)


def invariant(name: str, when: ck.Formula, ensure: ck.Formula) -> ck.CheckedInvariant:
    return ck.CheckedInvariant(name, None, "<test>", 1, 1, when, ensure)


def coqc(directory: Path, *files: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run coqc on *files* in order inside *directory*; stops at the first failure."""
    out = None
    for f in files:
        out = subprocess.run(
            [COQC or "coqc", "-Q", ".", "Clef", f],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            return out
    assert out is not None
    return out


#: The first lines of a Coq file that computes with the library's checkers.
LIBRARY_HEADER = [
    "From Coq Require Import QArith ZArith List.",
    "From Clef Require Import ClefSyntax ClefCheck.",
    "Import ListNotations.",
    "Local Open Scope Q_scope.",
]


def computed_booleans(stdout: str) -> list[bool]:
    """The values of the ``Eval vm_compute in ... : bool`` lines that coqc printed, in order."""
    return [v == "true" for v in re.findall(r"=\s*(true|false)\s*:\s*bool", stdout)]
