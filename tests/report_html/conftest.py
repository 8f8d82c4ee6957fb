from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES


@pytest.fixture(scope="session")
def edge_model():
    from clefprove.model.loading import load_model

    return load_model(EXAMPLES / "edge-allow-block-1.0.0.clef")
