"""Which digest names a model in the proof cache's keys (incremental.merkle.content_digest)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np

from clefprove.incremental.merkle import content_digest
from clefprove.model.clef import parsed_digest
from clefprove.model.loading import load_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "edge-allow-block.clef"


def test_a_loaded_model_is_named_by_its_file_digest() -> None:
    model = load_model(str(EXAMPLE))
    file_sha = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert parsed_digest(model) == model.sha256 == file_sha
    assert content_digest(model) == f"clef {file_sha}"


def test_a_copy_with_other_records_is_named_by_its_records() -> None:
    """A model built outside the loader (here: a copy with one leaf's action changed and a
    stale ``sha256``) has no parsed digest: its key comes from its own records."""
    model = load_model(str(EXAMPLE))
    nodes = model.nodes.copy()
    leaf = int(np.flatnonzero(nodes["kind"] == 0)[0])
    nodes["aux"][leaf] = (int(nodes["aux"][leaf]) + 1) % len(model.actions)
    edited = dataclasses.replace(model, nodes=nodes)
    same = dataclasses.replace(model)
    assert edited.sha256 == model.sha256  # stale: never trusted as the key
    assert parsed_digest(edited) is None and parsed_digest(same) is None
    assert content_digest(edited) != content_digest(same)
    assert not content_digest(edited).startswith("clef ")
