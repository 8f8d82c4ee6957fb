"""The committed example: its JSON source and its .clef file are the same model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from clefprove.eval.evaluator import Evaluator
from clefprove.model.clef import load, write_clef
from clefprove.model.source import compile_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_json_and_clef_are_the_same_model() -> None:
    source = json.loads((EXAMPLES / "edge-allow-block.json").read_text())
    compiled = compile_source(source)
    data = (EXAMPLES / "edge-allow-block.clef").read_bytes()
    assert write_clef(compiled) == data
    model = load(EXAMPLES / "edge-allow-block.clef")
    assert model.max_depth == 12 and model.n_nodes > 500
    assert model.actions == ("allow", "challenge", "rate_limit", "block")
    # random in-domain inputs reach every action
    rng = np.random.default_rng(0)
    X = np.column_stack(
        [
            rng.uniform(0, 10000, 20000),
            rng.integers(768, 773, 20000),
            rng.integers(0, 65, 20000),
            rng.uniform(0, 8, 20000),
            rng.integers(0, 6, 20000),
            rng.integers(0, 2, 20000),
        ]
    ).astype(np.float64)
    res = Evaluator(model).evaluate(X)
    assert set(res.actions.tolist()) == {0, 1, 2, 3}
