"""Behaviour diff: confirmed regions, exact shares, structural changes, Merkle hashes."""

from __future__ import annotations

import copy
import hashlib
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.eval.evaluator import Evaluator
from clefprove.geometry.boxes import path_to
from clefprove.incremental import merkle
from clefprove.incremental.diff import _intersections, diff, shares
from clefprove.model.describe import condition
from clefprove.verify.evidence import describe_path
from tests.incremental import models as M

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mutate(draw, src: dict) -> dict:
    src = copy.deepcopy(src)
    t = src["tree"]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(M.paths(t)))
        new = M.tree(draw, 2)
        if path:
            M.at(t, path[:-1])[path[-1]] = new
        else:
            src["tree"] = t = new
    return src


def _grid(model) -> np.ndarray:
    """Every input of an all-integral domain (encoded)."""
    axes = []
    for f in model.features:
        axes.append(
            np.arange(f.min, f.max + 1) if f.type != "categorical" else np.arange(len(f.values))
        )
    return np.array(list(itertools.product(*axes)), dtype=np.float64)


def _integral(src: dict) -> dict:
    """The source with the float feature x made an int feature (same thresholds)."""
    src = copy.deepcopy(src)
    src["features"][0] = {"name": "x", "type": "int", "min": 0, "max": 10, "default": 0}
    return src


@pytest.mark.slow
@FAST
@given(st.data())
def test_regions_are_confirmed_and_shares_exact_on_integral_domains(data) -> None:
    a_src = _integral(data.draw(M.sources(4)))
    b_src = _mutate(data.draw, a_src)
    old, new = M.compile_(a_src), M.compile_(b_src)
    rep = diff(old, new)
    assert rep.comparable
    eo, en = Evaluator(old), Evaluator(new)
    for r in rep.regions:
        x = np.array(
            [
                [
                    f.values.index(r.example[f.name]) if f.values else float(r.example[f.name])
                    for f in new.features
                ]
            ]
        )
        do, dn = eo.evaluate(x), en.evaluate(x)
        assert old.actions[int(do.actions[0])] == r.old_action
        assert new.actions[int(dn.actions[0])] == r.new_action
        assert r.old_action != r.new_action
        assert int(dn.leaves[0]) == r.new_leaf and int(do.leaves[0]) == r.old_leaf
    # Exhaustive: the share of inputs whose action changed is exactly share_changed.
    grid = _grid(new)
    ao = np.array(old.actions, dtype=object)[eo.evaluate(grid).actions]
    an = np.array(new.actions, dtype=object)[en.evaluate(grid).actions]
    changed = float(np.mean(ao != an))
    assert abs(changed - rep.share_changed) < 1e-9
    assert (rep.regions_total == 0) == (changed == 0)


@pytest.mark.slow
@FAST
@given(st.data())
def test_intersections_partition_the_domain(data) -> None:
    old = M.compile_(data.draw(M.sources(4)))
    new = M.compile_(_mutate(data.draw, data.draw(M.sources(4))))
    _, _, lo, hi, cats = _intersections(old, new)
    assert abs(float(shares(new, lo, hi, cats).sum()) - 1.0) < 1e-9


@pytest.mark.slow
@FAST
@given(st.data())
def test_identical_models_have_no_difference(data) -> None:
    src = data.draw(M.sources(5))
    a, b = M.compile_(src), M.compile_(src)
    rep = diff(a, b)
    assert rep.changes == ()
    assert rep.identical_behaviour and rep.share_changed == 0.0


def test_equivalent_restructuring_is_structural_only() -> None:
    leaf = {"action": "block", "confidence": 0.9}
    base = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": {
            "feature": "x",
            "threshold": 5.0,
            "left": {"action": "allow", "confidence": 1.0},
            "right": leaf,
        },
    }
    split = copy.deepcopy(base)
    split["tree"]["right"] = {"feature": "n", "threshold": 2.5, "left": leaf, "right": leaf}
    rep = diff(M.compile_(base), M.compile_(split))
    assert [c.kind for c in rep.changes] == ["added"]
    assert rep.changes[0].path == ("x > 5",)
    assert rep.identical_behaviour
    back = diff(M.compile_(split), M.compile_(base))
    assert [c.kind for c in back.changes] == ["removed"]


@pytest.mark.slow
@FAST
@given(st.data())
def test_one_changed_leaf_is_one_change_at_its_path(data) -> None:
    src = data.draw(M.sources(5))
    leaves = [p for p in M.paths(src["tree"]) if "action" in M.at(src["tree"], p)]
    path = data.draw(st.sampled_from(leaves))
    new_src = copy.deepcopy(src)
    node = M.at(new_src["tree"], path)
    node["action"] = M.ACTIONS[(M.ACTIONS.index(node["action"]) + 1) % 3]
    old, new = M.compile_(src), M.compile_(new_src)
    rep = diff(old, new)
    assert len(rep.changes) == 1
    c = rep.changes[0]
    assert c.kind == "changed"
    assert c.path == describe_path(new, c.new_node)
    # The leaf is reachable unless its path is infeasible; then no behaviour changed.
    assert rep.regions_total <= 1


def _reference_hash(model, i: int) -> bytes:
    """Recursive Merkle hash, written independently from the node's readable view."""
    n = model.node(i)
    H = lambda b: hashlib.sha256(b).digest()  # noqa: E731
    if n.is_leaf:
        conf = np.float64(n.confidence + 0.0).tobytes()
        return H(b"L" + H(b"action\0" + model.actions[n.action].encode()) + conf)
    f = model.features[n.feature]
    name = H(b"feature\0" + f.name.encode())
    if n.kind == 2:
        names = sorted(f.values[c] for c in n.categories)
        mid = H(b"set\0" + "\0".join(names).encode())
        return H(
            b"C" + name + mid + _reference_hash(model, n.left) + _reference_hash(model, n.right)
        )
    thr = np.float64(n.threshold + 0.0).tobytes() + bytes(24)
    return H(b"N" + name + thr + _reference_hash(model, n.left) + _reference_hash(model, n.right))


@FAST
@given(M.sources(5))
def test_merkle_matches_a_recursive_reference(src) -> None:
    model = M.compile_(src)
    hs = merkle.subtree_hashes(model)
    for i in range(model.n_nodes):
        assert bytes(hs[i]) == _reference_hash(model, i)


@FAST
@given(M.sources(4), st.permutations(range(4)))
def test_merkle_names_features_not_positions(src, perm) -> None:
    shuffled = copy.deepcopy(src)
    shuffled["features"] = [src["features"][k] for k in perm]
    a, b = M.compile_(src), M.compile_(shuffled)
    assert bytes(merkle.subtree_hashes(a)[0]) == bytes(merkle.subtree_hashes(b)[0])
    if list(perm) != sorted(perm):
        assert merkle.domain_digest(a) != merkle.domain_digest(b)


def _graph_reference(old, new) -> tuple[dict[str, int], dict[str, int]]:
    """The shared-subtree graph built node by node (one vertex per distinct subtree hash over
    both versions, an edge from a split to each child): its maximal shared subtrees, and the
    first node of each hash in OLD."""
    graph: dict[bytes, dict] = {}
    first_in_old: dict[bytes, int] = {}
    for label, m in (("old", old), ("new", new)):
        hs = [bytes(h) for h in merkle.subtree_hashes(m)]
        counts = merkle.leaf_counts(m)
        for i, h in enumerate(hs):
            d = graph.setdefault(h, {"at": {}, "leaves": int(counts[i]), "preds": set()})
            d["at"].setdefault(label, []).append(i)
            if label == "old":
                first_in_old.setdefault(h, i)
        for i in range(m.n_nodes):
            node = m.node(i)
            if not node.is_leaf:
                graph[hs[node.left]]["preds"].add(hs[i])
                graph[hs[node.right]]["preds"].add(hs[i])
    shared = {h for h, d in graph.items() if len(d["at"]) == 2}
    maximal = [h for h in shared if not graph[h]["preds"] & shared]
    covered = sum(len(graph[h]["at"]["new"]) * (2 * graph[h]["leaves"] - 1) for h in maximal)
    stats = {
        "new_nodes": new.n_nodes,
        "shared_subtrees": len(maximal),
        "new_nodes_in_shared_subtrees": min(covered, new.n_nodes),
    }
    return stats, first_in_old


def _with_copies(draw, src: dict) -> dict:
    """*src* with subtrees copied elsewhere in it (shared subtrees occurring more than once,
    replacements that already existed: moved subtrees)."""
    src = copy.deepcopy(src)
    for _ in range(draw(st.integers(0, 2))):
        paths = M.paths(src["tree"])
        source = draw(st.sampled_from(paths))
        target = draw(st.sampled_from(paths))
        if target and target[: len(source)] != source:
            M.at(src["tree"], target[:-1])[target[-1]] = copy.deepcopy(M.at(src["tree"], source))
    return src


@FAST
@given(st.data())
def test_shared_subtrees_and_moves_match_the_node_by_node_graph(data) -> None:
    a_src = _with_copies(data.draw, data.draw(M.sources(5)))
    b_src = _with_copies(data.draw, _mutate(data.draw, a_src))
    old, new = M.compile_(a_src), M.compile_(b_src)
    stats, first_in_old = _graph_reference(old, new)
    rep = diff(old, new)
    assert rep.shared == stats
    for change in rep.changes:
        h = bytes(merkle.subtree_hashes(new)[change.new_node])
        moved = first_in_old.get(h) if not new.node(change.new_node).is_leaf else None
        expected = None
        if moved is not None:
            expected = tuple(condition(old, n, left) for n, left in path_to(old, moved))
        assert change.moved_from == expected


def test_incompatible_domains_refuse_the_semantic_part() -> None:
    src = {
        "name": "t",
        "version": "1",
        "features": copy.deepcopy(M.FEATURES),
        "actions": list(M.ACTIONS),
        "tree": {"action": "allow", "confidence": 1.0},
    }
    wide = copy.deepcopy(src)
    wide["features"][1]["max"] = 60
    rep = diff(M.compile_(src), M.compile_(wide))
    assert not rep.comparable and "n" in rep.reason and "[0, 60]" in rep.reason
    assert rep.to_json_dict()["semantic"] == {"comparable": False, "reason": rep.reason}


@pytest.mark.parametrize("ensemble", [False, True])
def test_a_json_source_has_no_digest_in_the_diff(ensemble) -> None:
    """docs/format.md: a model compiled in memory from JSON source has no .clef digest, and
    the outputs say so (``"sha256": null, "compiled_from": "json"``) instead of showing the
    digest of bytes no file holds; a .clef file keeps its digest."""
    import json
    from pathlib import Path

    from clefprove.incremental.compare import diff_models
    from clefprove.model.clef import load_bytes, write_clef
    from clefprove.model.source import compile_source
    from clefprove.report.diff_text import render_text

    root = Path(__file__).parent.parent
    path = root / "fixtures" / ("ensemble_toy.json" if ensemble else "spec_model.json")
    source = compile_source(json.loads(path.read_text()))
    loaded = load_bytes(write_clef(source), origin="m.clef")
    rep = diff_models(source, loaded, "m.json", "m.clef")
    old, new = rep.to_json_dict()["old"], rep.to_json_dict()["new"]
    assert old["sha256"] is None and old["compiled_from"] == "json"
    assert new["sha256"] == loaded.sha256 and "compiled_from" not in new
    head = render_text(rep).splitlines()[:2]
    assert "compiled from JSON source" in head[0] and "sha256" not in head[0]
    assert f"sha256 {loaded.sha256[:12]}" in head[1]
