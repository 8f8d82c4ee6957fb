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


def _same_step(a, b) -> None:
    if a is None or b is None or isinstance(a, tuple):
        assert a == b
        return
    assert isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.lo, y.lo) and np.array_equal(x.hi, y.hi)
        assert np.array_equal(x.reach, y.reach)
        assert set(x.cats) == set(y.cats)
        assert all(np.array_equal(x.cats[f], y.cats[f]) for f in x.cats)
        assert x.weight == y.weight and x.root == y.root


@SETTINGS
@given(st.data())
def test_steps_are_step_region_by_region(data) -> None:
    """The batched bounds of the search's breadth-first top give what ``_step`` gives for each
    region: regions from splitting the domain at random thresholds, formulas from random
    invariants."""
    from clefprove.verify import engine as eg
    from tests.verify.gen import invariants

    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4))
    inv = data.draw(invariants(model))
    if inv.is_relational:
        return
    prep = eg.prepare(model, inv)
    tab = ve._tables(model)
    dom = Box.domain(model)
    root = ve.Region(dom.lo, dom.hi, dict(dom.cats), tab.feasible.copy(), 1.0)
    regions = [root]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for _ in range(data.draw(st.integers(0, 8))):
        g = regions.pop(int(rng.integers(len(regions))))
        f = int(rng.integers(len(model.features)))
        cuts = tab.cuts[f]
        if cuts.size == 0:
            regions.append(g)
            continue
        cut = float(rng.choice(cuts))
        lo, hi = g.lo.copy(), g.hi.copy()
        hi[f] = min(hi[f], cut)
        lo[f] = max(lo[f], np.nextafter(cut, np.inf))
        for a, b in ((g.lo, hi), (lo, g.hi)):
            reach = g.reach & (tab.lo[:, f] <= b[f]) & (tab.hi[:, f] >= a[f])
            regions.append(ve.Region(a, b, g.cats, reach, g.weight / 2))
    from clefprove.dsl import checked as ck
    from clefprove.verify import normal as nm

    conj = [
        nm.NAnd(c) if len(c) > 1 else (c[0] if c else ck.Const(True)) for c in prep.conjuncts or []
    ]
    formulas = [prep.violation, *conj]
    items = [(g, formulas[int(rng.integers(len(formulas)))]) for g in regions]
    for mentions in (False, True):
        batched = ve._steps(model, tab, items, mentions)
        single = [ve._step(model, tab, g, f, mentions) for g, f in items]
        for a, b in zip(batched, single, strict=True):
            _same_step(a, b)


@SETTINGS
@given(st.data())
def test_vacuity_probes_agree_with_the_domain_check(data) -> None:
    """``when_is_vacuous_on_domain`` with the search's root inputs as probes (branch
    ``ensspeed``) gives what the full check gives without them; every probe is an input of
    the domain that lies in its root."""
    from clefprove.verify import engine as eg
    from clefprove.verify import evidence as ev
    from clefprove.verify.options import CheckOptions
    from tests.verify.gen import invariants

    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=3))
    inv = data.draw(invariants(model))
    if inv.is_relational:
        return
    opts = CheckOptions(timeout=5)
    prep = eg.prepare(model, inv)
    res = ve.search(model, prep, opts, 1, 5.0)
    for p in res.probes:
        for i, f in enumerate(model.features):
            assert f.min <= p[i] <= f.max
            assert not f.is_integral or p[i] == np.floor(p[i])
    full = ev.when_is_vacuous_on_domain(model, prep, opts)
    assert ev.when_is_vacuous_on_domain(model, prep, opts, res.probes) == full
    if ev.when_met_at(model, inv.when, res.probes):
        assert not full


@SETTINGS
@given(ensembles(all_int=True, max_trees=1))
def test_when_met_at_skips_inputs_outside_the_domain(model) -> None:
    """A point outside a feature's range, or not whole for an integral feature, is no input."""
    from clefprove.dsl import checked as ck
    from clefprove.verify import evidence as ev

    f = model.features[0]
    true = ck.Const(True)
    inside = np.array([g.min for g in model.features], dtype=np.float64)
    assert ev.when_met_at(model, true, [inside])
    above = inside.copy()
    above[0] = f.max + 1.0
    assert not ev.when_met_at(model, true, [above])
    if f.max > f.min:
        half = inside.copy()
        half[0] = f.min + 0.5
        assert not ev.when_met_at(model, true, [half])


def _split_node_by_views(model, g, spread, n_reach):
    """The search's split choice through each tree's own view and ``geometry.boxes.tables``
    (the route before branch ``ensspeed``)."""
    from clefprove.geometry.boxes import tables

    for t in np.argsort(-spread, kind="stable").tolist():
        if n_reach[t] < 2:
            continue
        tree = model.tree(t)
        tt = tables(tree)
        nodes = tree.nodes
        i = 0
        while int(nodes["kind"][i]) != NodeKind.LEAF:
            f = int(nodes["feature"][i])
            if int(nodes["kind"][i]) == NodeKind.NUMERIC:
                left_hi, right_lo = float(tt.left_hi[i]), float(tt.right_lo[i])
                if g.hi[f] <= left_hi:
                    i = int(nodes["left"][i])
                elif g.lo[f] >= right_lo:
                    i = int(nodes["right"][i])
                else:
                    return f, (left_hi, right_lo)
            else:
                off = int(nodes["aux"][i])
                member = np.asarray(tree.membership[off : off + g.cats[f].size], dtype=bool)
                if not (g.cats[f] & member).any():
                    i = int(nodes["right"][i])
                elif not (g.cats[f] & ~member).any():
                    i = int(nodes["left"][i])
                else:
                    return f, member
    return None


@SETTINGS
@given(st.data())
def test_split_node_reads_the_ensemble_tables(data) -> None:
    """The split the search makes, from the ensemble's concatenated split bounds, is the one
    each tree's own view and tables give (bounds bit for bit), down a random descent of
    regions (int, float, bool and categorical features)."""
    model = data.draw(ensembles(all_int=data.draw(st.booleans()), max_trees=4))
    tab = ve._tables(model)
    dom = Box.domain(model)
    g = ve.Region(dom.lo, dom.hi, dict(dom.cats), tab.feasible.copy(), 1.0)
    for _ in range(12):
        n_reach = np.add.reduceat(g.reach.astype(np.int64), tab.starts)
        if np.any(n_reach == 0) or np.all(n_reach <= 1):
            break
        spread = np.array(data.draw(st.lists(st.floats(0, 4), min_size=len(n_reach),
                                             max_size=len(n_reach))))  # fmt: skip
        got = ve._split_node(model, tab, g, spread, n_reach)
        want = _split_node_by_views(model, g, spread, n_reach)
        assert (got is None) == (want is None)
        if got is None:
            break
        assert got[0] == want[0]
        if isinstance(want[1], tuple):
            assert np.array_equal(np.array(got[1]), np.array(want[1]))
            assert [np.signbit(v) for v in got[1]] == [np.signbit(v) for v in want[1]]
        else:
            assert np.array_equal(got[1], want[1])
        kids = ve._children(model, tab, g, *got)
        g = kids[data.draw(st.integers(0, len(kids) - 1))]
