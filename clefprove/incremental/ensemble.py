"""The proof cache for tree ensembles (``ProofCache.check_ensemble_program``).

Per non-relational invariant (docs/incremental.md, "Ensembles"):

1. **Whole results.**  The result on this exact ensemble is looked up by
   :func:`walk.result_key` over the ensemble's :func:`content_digest` (the domain with its
   defaults, the combination and every tree's :func:`tree_hashes`, in order), the invariant's
   digest and every option that can show in a result; a hit is the stored result,
   counterexamples included, as a fresh run gives it.  Only results without unknown regions
   are stored (an unknown depends on the time budget).
2. **A partition to start from.**  When an invariant holds, the settled regions of its search
   (:class:`~clefprove.verify.ensemble.Partition`) are stored under the invariant's meaning in
   this domain (:func:`walk.scope_key`) and :attr:`CheckOptions.outcome_identity`, not under
   the trees.  The next version's re-check (e.g. a retrained tail of a boosted model) starts
   its branch and bound from those regions: each is re-proved on the new trees (its bounds,
   split further where they no longer settle it), so nothing is reused but the search's
   descent.  A region re-proved as it was counts as a reused *path*; a region the search had
   to settle anew as a checked one.  If the re-check does not prove the invariant, it is
   decided again from the roots, so that a violated or unknown report (counterexamples, share
   proved) is exactly a fresh run's.

Relational invariants (:mod:`~clefprove.verify.ensemble_rel`) have whole results only: looked
up by the same key over the content digest and the program's severity order (what their
direction depends on), stored when they have no unknown pair.

Per-tree tables are not stored: :func:`~clefprove.verify.ensemble.ensemble_tables` builds
every tree's leaf boxes in one vectorised pass, cheaper than reading them back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from typing import Any

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.incremental import merkle, walk
from clefprove.incremental.store import CacheCorrupt, CacheStore
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import NodeKind
from clefprove.status import Verdict
from clefprove.verify.ensemble import Partition, budget_of, decide_ensemble_invariant
from clefprove.verify.ensemble_rel import check_ensemble_relational
from clefprove.verify.options import CheckOptions
from clefprove.verify.verdicts import InvariantResult

#: Snapshot kind of a stored partition.
PARTITION = "partition"


def tree_hashes(model: Ensemble) -> list[str]:
    """Per tree, the sha256 of its content: its node records (leaf value rows and code-set
    offsets replaced by what they point to: the leaf values, the code sets), independent of
    where the tree sits in the ensemble."""
    out = []
    values = np.asarray(model.values, dtype="<f8")
    membership = np.asarray(model.membership, dtype=np.uint8)
    widths = [len(f.values) for f in model.features]
    for t in range(model.n_trees):
        start, n = int(model.roots[t]), int(model.sizes[t])
        nodes = np.array(model.nodes[start : start + n])  # a copy
        kind = nodes["kind"]
        leaf = kind == NodeKind.LEAF
        cat = kind == NodeKind.CATEGORICAL
        h = hashlib.sha256(b"clefprove tree\0")
        h.update(np.ascontiguousarray(values[nodes["aux"][leaf].astype(np.int64)]).tobytes())
        for off, f in zip(
            nodes["aux"][cat].astype(np.int64).tolist(),
            nodes["feature"][cat].astype(np.int64).tolist(),
            strict=True,
        ):
            h.update(membership[off : off + widths[f]].tobytes())
        nodes["aux"][leaf | cat] = 0
        h.update(np.ascontiguousarray(nodes).tobytes())
        out.append(h.hexdigest())
    return out


def content_digest(model: Ensemble) -> str:
    """Digest of everything a check result on *model* can depend on."""
    h = hashlib.sha256(b"ensemble content\0")
    h.update(merkle._domain_json(model, None, True))
    h.update(json.dumps(model.combine.to_json(), sort_keys=True, allow_nan=False).encode())
    for th in tree_hashes(model):
        h.update(bytes.fromhex(th))
    return "ensemble:" + h.hexdigest()


def partition_key(scope: bytes, settings: CheckOptions) -> bytes:
    """Key of the stored partition of an invariant's proof in a domain."""
    text = f"ensemble partition\0{scope.hex()}\0{settings.outcome_identity}"
    return hashlib.sha256(text.encode()).digest()


def check_program(
    cache: CacheStore, model: Ensemble, program: ck.CheckedProgram, settings: CheckOptions
) -> list[InvariantResult]:
    """Results of every invariant of *program*, equal to a fresh run's."""
    try:
        return _check_program(cache, model, program, settings)
    except CacheCorrupt as exc:
        cache.reset(str(exc))
    try:
        return _check_program(cache, model, program, settings)
    except CacheCorrupt as exc:  # damaged again (another process?): go on without it
        cache.disable(str(exc))
        return _check_program(cache, model, program, settings)


def _check_program(
    cache: CacheStore, model: Ensemble, program: ck.CheckedProgram, settings: CheckOptions
) -> list[InvariantResult]:
    t_start = time.perf_counter()
    invs = program.invariants
    k = settings.counterexamples
    content = content_digest(model)
    rkeys = walk.result_keys(program, k, content, settings)
    stored = cache.lookup_results(rkeys)
    domain = merkle.domain_digest(model, program.severity)
    pkeys = {
        i: partition_key(walk.scope_key(inv, domain), settings)
        for i, inv in enumerate(invs)
        if rkeys[i] not in stored and not inv.is_relational
    }
    snaps = cache.lookup_snapshots(list(pkeys.values())) if pkeys else {}
    order = tuple(f.name for f in model.features)
    share = (time.perf_counter() - t_start) / max(1, len(invs))
    results: list[InvariantResult] = []
    whole: list[tuple[bytes, str]] = []
    partitions: list[tuple[bytes, str, bytes]] = []
    for i, inv in enumerate(invs):
        if rkeys[i] in stored:
            results.append(walk._from_json(stored[rkeys[i]], share).finished(order, _no_region))
            continue
        if inv.is_relational:
            res = check_ensemble_relational(model, inv, program.severity, settings, k)
            results.append(res.finished(order, _no_region))
            if walk._storable(res):
                whole.append((rkeys[i], walk._to_json(res)))
            continue
        start = None
        hit = snaps.get(pkeys[i])
        if hit is not None:
            kind, blob = hit
            if kind != PARTITION:
                raise CacheCorrupt("a partition row has the wrong kind")
            try:
                start = Partition.from_bytes(blob)
            except (ValueError, TypeError) as exc:
                raise CacheCorrupt(str(exc)) from exc
        if start is None:
            res, part = decide_ensemble_invariant(model, inv, settings, k, None)
        else:
            res, part = _from_partition(model, inv, settings, k, start)
        results.append(res.finished(order, _no_region))
        if walk._storable(res):
            whole.append((rkeys[i], walk._to_json(res)))
        if part is not None:
            partitions.append((pkeys[i], PARTITION, part.to_bytes()))
    cache.store((), whole, partitions)
    return results


#: The share of an invariant's time budget that a search seeded with a stored partition may
#: take before the invariant is decided afresh with what is left.
SEEDED_SHARE = 0.25


def _from_partition(
    model: Ensemble, inv: ck.CheckedInvariant, settings: CheckOptions, k: int, start: Partition
) -> tuple[InvariantResult, Partition | None]:
    """*inv* decided from *start* (a partition proved for this invariant in this domain, by
    this model's last version or by another model with the same domain), within
    :data:`SEEDED_SHARE` of the budget; when that does not prove it, the report of a fresh
    run, decided as one within the rest of the budget, so that the two together keep to
    ``--timeout`` (a partition that does not fit, another model's, once cost a whole second
    budget)."""
    budget = budget_of(settings)
    seeded = dataclasses.replace(settings, timeout=budget * SEEDED_SHARE)
    res, part = decide_ensemble_invariant(model, inv, seeded, k, start)
    if res.status == Verdict.HOLDS:
        return res, part
    spent = res.seconds
    rest = dataclasses.replace(settings, timeout=max(budget - spent, 1e-3))
    res, part = decide_ensemble_invariant(model, inv, rest, k, None)
    return dataclasses.replace(res, seconds=res.seconds + spent), part


def _no_region(_leaf: int, _record: dict[str, Any]) -> tuple[str, ...]:
    return ()
