"""The fixed-cost shortcuts of a box question on an ensemble (docs/performance.md, branch
``ensxgb``) against the computations they replace, on random ensembles: the per-feature cuts
from one sort (was one ``np.unique`` per feature), ``decide_proba`` (``decide`` and
``probabilities`` computed once), the grid coverage by ``bisect`` (was ``np.searchsorted``)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.eval.ensemble import decide, decide_proba, probabilities
from clefprove.geometry.boxes import Box
from clefprove.model.types import NodeKind
from clefprove.verify import ensemble as ve
from tests.ensembles.gen import ensembles

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference_cuts(model) -> list[np.ndarray]:
    from clefprove.geometry.boxes import split_bounds

    nodes = model.nodes
    feat = nodes["feature"].astype(np.int64)
    numeric = nodes["kind"] == NodeKind.NUMERIC
    integral = np.array([f.is_integral for f in model.features], dtype=bool)
    left_hi, _ = split_bounds(nodes["value"].astype(np.float64), numeric & integral[feat])
    out = []
    for i, f in enumerate(model.features):
        c = np.unique(left_hi[numeric & (feat == i)])
        out.append(c[(c >= f.min) & (c < f.max)])
    return out


@SETTINGS
@given(st.data())
def test_cuts_and_coverage(data) -> None:
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=5))
    tab = ve._tables(model)
    want = _reference_cuts(model)
    assert len(tab.cuts) == len(want) == len(tab.cut_lists)
    for got, ref, as_list in zip(tab.cuts, want, tab.cut_lists, strict=True):
        assert got.dtype == np.float64
        assert np.array_equal(got, ref)  # (a zero's sign may differ: equal as numbers)
        assert as_list == got.tolist()
    dom = Box.domain(model)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.uniform(dom.lo, dom.hi)
        b = rng.uniform(dom.lo, dom.hi)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        if rng.random() < 0.3:  # at a cut
            for i, c in enumerate(tab.cuts):
                if c.size:
                    lo[i] = min(hi[i], float(rng.choice(c)))
        for i, f in enumerate(model.features):
            if f.type.value == "categorical":
                continue
            cuts = tab.cuts[i]
            ra = int(np.searchsorted(cuts, lo[i], side="left"))
            rb = int(np.searchsorted(cuts, hi[i], side="left"))
            assert ve._coverage(tab, model, i, lo, hi, dom.cats) == (rb - ra + 1) / (cuts.size + 1)


@SETTINGS
@given(st.data())
def test_decide_proba_is_decide_and_probabilities(data) -> None:
    model = data.draw(ensembles(all_int=False, max_trees=3))
    c = model.combine
    dt = c.arithmetic.dtype
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    scores = np.concatenate(
        [
            rng.normal(scale=3.0, size=(40, c.outputs)),
            np.zeros((1, c.outputs)),
            np.full((1, c.outputs), 0.5),
        ]
    ).astype(dt)
    acts, conf, proba = decide_proba(c, scores)
    a2, c2 = decide(c, scores)
    p2 = probabilities(c, scores)
    assert np.array_equal(acts, a2)
    assert np.array_equal(conf, c2)
    assert np.array_equal(proba, p2, equal_nan=True)
    assert proba.dtype == p2.dtype
