"""Incremental ``check``: reuse proved subtrees, decide only the paths that changed.

For the invariants of one run (docs/incremental.md has the whole story):

1. **Whole results.**  Each invariant's result on this exact model (content digest) is looked
   up first; a hit costs one indexed read.
2. **Against the last version.**  Every invariant whose per-leaf outcomes on an earlier
   version are stored (box-, linear- or Z3-decided) is re-checked against it
   (:mod:`clefprove.incremental.delta`): the two trees are aligned record by record, and only
   the leaves whose path or record changed (and those whose old outcome is not a fact about
   the box) are decided again.  A relational invariant whose pair count on an earlier version
   is stored is re-counted from it (:mod:`clefprove.verify.pairdelta`: the pairs of the
   replaced leaves out, those of the new leaves in).  Otherwise:
3. An invariant that has never needed Z3 in this domain is decided as in a fresh run; if Z3
   turns out to be needed, a *hint* is stored, and from then on:
4. **One shared walk** over the tree, level by level from the root, for the hinted invariants:
   every frontier node gets a key, sha256(Merkle hash of its subtree + canonical context box),
   looked up once for all of them (one query per level).  Where an invariant's proof is found,
   the whole subtree is skipped without descending (its leaves count as ``paths_reused``);
   where none is, the walk descends, tightening the context box exactly as
   :func:`clefprove.geometry.boxes.leaf_boxes` does.  A node with an empty context box has no
   input: its leaves are infeasible, safe, and counted as checked.  Single leaves proved by Z3
   are looked up among the leaves that missed.
5. The remaining leaves are decided by the ordinary engine (:func:`~clefprove.verify.engine.
   decide`) and turned into a result by :func:`~clefprove.verify.api.finish`, with the same
   boxes in the same tree order as a fresh run, so verdicts, counts and counterexamples are the
   same as without the cache (printed witnesses found by Z3 come from a solver asked about
   that leaf alone; where vacuity depends on reused leaves, the invariant is decided afresh:
   see :func:`_needs_fresh`).
6. Every Z3-proved leaf is stored as a proof, and every subtree the walk visited whose leaves
   were all found safe (a first run, which does not walk, stores no subtree proofs: the next
   version is re-checked against its outcomes); whole results are stored when no path is
   unknown; every invariant's outcomes (a relational one's pair count) and this version's tree
   are stored for the next version.

Soundness of reuse: a subtree's leaf boxes are a function of its content (the Merkle hash,
which names features and actions), the context box and the domain (which maps names to
indices and bounds); the invariant's checked form is fixed by its digest; the engine by the
clefprove version.  All of them are in the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from clefprove.dsl import checked as ck
from clefprove.frozen import frozen
from clefprove.geometry.boxes import (
    Box,
    LeafBoxes,
    boxes_of,
    categorical_splits,
    complete_boxes,
    empty_rows,
    leaf_boxes,
    step_down,
    tables,
)
from clefprove.incremental import delta, merkle
from clefprove.incremental.store import CacheCorrupt, CacheStore
from clefprove.model.types import Model, NodeKind
from clefprove.status import Verdict
from clefprove.verify import api
from clefprove.verify import engine as eg
from clefprove.verify import evidence as ev
from clefprove.verify import normal as nm
from clefprove.verify.options import CheckOptions, json_safe, verifier_identity
from clefprove.verify.verdicts import (
    HOLDS,
    Counterexample,
    InvariantResult,
    RelationalCounterexample,
)

if TYPE_CHECKING:
    from clefprove.verify.relational import PairCount

#: Proofs are stored for subtrees of at least this many leaves (and the root): smaller ones are
#: re-decided in bulk faster than they are stored and looked up.
MIN_PROOF_LEAVES = 8


def _version() -> str:
    return verifier_identity()


def _digest(invariant: ck.CheckedInvariant) -> str:
    return invariant.digest


def scope_key(invariant: ck.CheckedInvariant, domain: str) -> bytes:
    """What a subtree proof is a proof *of*: the invariant's meaning in this domain."""
    text = f"scope\0{_digest(invariant)}\0{domain}\0{_version()}"
    return hashlib.sha256(text.encode()).digest()


def result_key(
    invariant: ck.CheckedInvariant,
    counterexamples: int,
    content: str,
    settings: CheckOptions | None = None,
) -> bytes:
    """Key of a whole result: also names, positions and every option that can show in a
    result (:attr:`CheckOptions.result_identity`: K, the limits, how queries were grouped)."""
    st = dataclasses.replace(settings or CheckOptions(), counterexamples=counterexamples)
    return _result_key(invariant, st.result_identity, content)


def _result_key(invariant: ck.CheckedInvariant, identity: str, content: str) -> bytes:
    """:func:`result_key` with the options' :attr:`~CheckOptions.result_identity` given."""
    ident = json.dumps(
        [
            invariant.name,
            invariant.description,
            invariant.file,
            invariant.line,
            invariant.column,
            identity,
        ],
        allow_nan=False,
    )
    text = f"result\0{_digest(invariant)}\0{ident}\0{content}\0{_version()}"
    return hashlib.sha256(text.encode()).digest()


def result_keys(
    program: ck.CheckedProgram, counterexamples: int, content: str, settings: CheckOptions
) -> list[bytes]:
    """:func:`result_key` of every invariant of *program* over a model whose content digest
    is *content*; a relational result depends on the severity order too (monotone compares
    decisions by it), so its key has the order as well."""
    rcontent = f"{content}\0severity {json.dumps(program.severity, allow_nan=False)}"
    identity = dataclasses.replace(settings, counterexamples=counterexamples).result_identity
    return [
        _result_key(inv, identity, rcontent if inv.is_relational else content)
        for inv in program.invariants
    ]


# ---------------------------------------------------------------- the walk


@dataclass
class _Walk:
    """What the shared walk found, per invariant (column j of the masks)."""

    n_inv: int
    reused: np.ndarray  # (I,) leaves reused from proofs
    trivial: np.ndarray  # (I,) leaves below empty contexts (infeasible: safe, checked)
    leaf_nodes: list[np.ndarray]
    leaf_lo: list[np.ndarray]
    leaf_hi: list[np.ndarray]
    leaf_cats: list[dict[int, np.ndarray]]
    leaf_active: list[np.ndarray]
    inner_nodes: list[np.ndarray]
    inner_active: list[np.ndarray]
    inner_keys: list[list[bytes]]


class _SubtreeLookup(Protocol):
    """What :func:`_walk` asks of a cache (:class:`CacheStore`)."""

    def lookup_subtrees(self, nodes: list[bytes]) -> dict[tuple[bytes, bytes], int]: ...


def _walk(cache: _SubtreeLookup, model: Model, scopes: list[bytes]) -> _Walk:
    hashes = merkle.subtree_hashes(model)
    counts = merkle.leaf_counts(model)
    kind = model.nodes["kind"]
    n_inv = len(scopes)
    dom = Box.domain(model)
    w = _Walk(n_inv, np.zeros(n_inv, np.int64), np.zeros(n_inv, np.int64), *([] for _ in range(8)))

    frontier = np.array([0], dtype=np.int64)
    lo = dom.lo[None, :].copy()
    hi = dom.hi[None, :].copy()
    cats = {f: m[None, :].copy() for f, m in dom.cats.items()}
    active = np.ones((1, n_inv), dtype=bool)
    while frontier.size:
        empty = empty_rows(lo, hi, cats)
        if empty.any():
            w.trivial += (counts[frontier[empty]][:, None] * active[empty]).sum(axis=0)
            keep = ~empty
            frontier, lo, hi, active = frontier[keep], lo[keep], hi[keep], active[keep]
            cats = {f: m[keep] for f, m in cats.items()}
            if not frontier.size:
                break
        cnt = counts[frontier]
        # Only subtrees big enough to be stored are looked up (see MIN_PROOF_LEAVES).
        keyed = np.flatnonzero((cnt >= MIN_PROOF_LEAVES) | (frontier == 0))
        keys: list[bytes | None] = [None] * frontier.size
        if keyed.size:
            sub = merkle.context_digests(
                hashes[frontier[keyed]],
                lo[keyed],
                hi[keyed],
                {f: m[keyed] for f, m in cats.items()},
            )
            for r, key in zip(keyed.tolist(), sub, strict=True):
                keys[r] = key
            found = cache.lookup_subtrees(sub)
            if found:
                hit = np.zeros_like(active)
                for r, key in zip(keyed.tolist(), sub, strict=True):
                    for j, scope in enumerate(scopes):
                        c = found.get((key, scope))
                        if c is not None and c == cnt[r]:
                            hit[r, j] = True
                hit &= active
                w.reused += (cnt[:, None] * hit).sum(axis=0)
                active = active & ~hit
        need = active.any(axis=1)
        is_leaf = kind[frontier] == NodeKind.LEAF
        lf = need & is_leaf
        if lf.any():
            w.leaf_nodes.append(frontier[lf])
            w.leaf_lo.append(lo[lf])
            w.leaf_hi.append(hi[lf])
            w.leaf_cats.append({f: m[lf] for f, m in cats.items()})
            w.leaf_active.append(active[lf])
        inner = need & ~is_leaf
        if not inner.any():
            break
        fr = frontier[inner]
        w.inner_nodes.append(fr)
        w.inner_active.append(active[inner])
        w.inner_keys.append([k for k, t in zip(keys, inner.tolist(), strict=True) if t])  # type: ignore[misc]
        # Children: the same exact tightening as clefprove.geometry.boxes.leaf_boxes.
        act_i = active[inner]
        frontier, lo, hi, cats = step_down(
            model, fr, lo[inner], hi[inner], {f: m[inner] for f, m in cats.items()}
        )
        active = np.concatenate([act_i, act_i])
    return w


def _boxes_for(model: Model, w: _Walk, j: int) -> LeafBoxes:
    """The missed leaves of invariant *j* as LeafBoxes in tree order."""
    n_feat = len(model.features)
    sel = [a[:, j] for a in w.leaf_active]
    nodes = [n[s] for n, s in zip(w.leaf_nodes, sel, strict=True)]
    leaves = np.concatenate(nodes) if nodes else np.empty(0, np.int64)
    order = np.argsort(leaves, kind="stable")
    leaves = leaves[order]
    lo = np.empty((leaves.size, n_feat + 1))
    hi = np.empty((leaves.size, n_feat + 1))
    if leaves.size:
        lo[:, :n_feat] = np.concatenate([a[s] for a, s in zip(w.leaf_lo, sel, strict=True)])[order]
        hi[:, :n_feat] = np.concatenate([a[s] for a, s in zip(w.leaf_hi, sel, strict=True)])[order]
    cats: dict[int, np.ndarray] = {}
    for f, m in Box.domain(model).cats.items():
        parts = [c[f][s] for c, s in zip(w.leaf_cats, sel, strict=True)]
        cats[f] = np.concatenate(parts)[order] if parts else np.empty((0, m.size), dtype=bool)
    return complete_boxes(model, leaves, lo, hi, cats)


def _safe_proofs(
    model: Model, w: _Walk, j: int, boxes: LeafBoxes, status: np.ndarray
) -> list[tuple[bytes, int]]:
    """``(node key, leaves)`` of every keyed visited subtree of invariant *j* found all safe."""
    counts = merkle.leaf_counts(model)
    bad_leaves = boxes.leaves[status != eg.SAFE]
    out: list[tuple[bytes, int]] = []
    if not w.inner_nodes:
        return out
    unsafe = np.zeros(model.n_nodes, dtype=bool)
    parent = tables(model).parent
    cur = bad_leaves.astype(np.int64)
    while cur.size:
        cur = parent[cur]
        cur = cur[cur >= 0]
        cur = cur[~unsafe[cur]]
        unsafe[cur] = True
    for nodes, act, ks in zip(w.inner_nodes, w.inner_active, w.inner_keys, strict=True):
        ok = act[:, j] & ~unsafe[nodes]
        cnt = counts[nodes]
        out.extend((ks[r], int(cnt[r])) for r in np.flatnonzero(ok).tolist() if ks[r] is not None)
    return out


class _LeafKeys:
    """Keys (subtree hash + context box) of single leaves, computed once per leaf and run."""

    def __init__(self) -> None:
        self.known: dict[int, bytes] = {}

    def get(self, model: Model, boxes: LeafBoxes) -> list[bytes]:
        leaves = boxes.leaves.tolist()
        todo = np.array([r for r, leaf in enumerate(leaves) if leaf not in self.known], dtype=int)
        if todo.size:
            n_feat = len(model.features)
            sub = boxes.take(todo)
            cats = {  # every categorical feature, so that keys are canonical
                f: np.asarray(sub.cats[f], dtype=bool)
                if f in sub.cats
                else np.ones((sub.size, m.size), dtype=bool)
                for f, m in Box.domain(model).cats.items()
            }
            keys = merkle.context_digests(
                merkle.leaf_hashes(model, sub.leaves),
                sub.lo[:, :n_feat],
                sub.hi[:, :n_feat],
                cats,
            )
            self.known.update(zip(sub.leaves.tolist(), keys, strict=True))
        return [self.known[leaf] for leaf in leaves]


# ---------------------------------------------------------------- results as JSON


def _settle(run: _Run, i: int, res: InvariantResult) -> None:
    """Invariant *i*'s result, its counterexamples described; kept whole when storable."""
    res = _with_regions(run.model, res)
    run.results[i] = res
    if _storable(res):
        run.out.whole.append((run.rkeys[i], _to_json(res)))


def _with_regions(model: Model, res: InvariantResult) -> InvariantResult:
    """*res* with the region of every counterexample's leaf filled in, as a run's report
    shows it: kept with the whole result, so that a hit does not describe its leaves again
    (a region is a function of the leaf's path, as the path text kept beside it)."""
    if not res.counterexamples:
        return res
    region_of = ev.region_describer(model)
    return dataclasses.replace(
        res, counterexamples=tuple(c.with_regions(region_of) for c in res.counterexamples)
    )


_STORED_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(InvariantResult)
    if f.name not in ("seconds", "solver_paths", "paths_checked", "paths_reused")
)


def _to_json(res: InvariantResult) -> str:
    # Field by field (dataclasses.asdict deep-copies, and costs more than the rest of a
    # re-check's bookkeeping); counterexamples are the only nested dataclasses.
    d: dict[str, Any] = {name: getattr(res, name) for name in _STORED_FIELDS}
    d["counterexamples"] = [_counterexample_json(c) for c in res.counterexamples]
    d["warnings"] = list(res.warnings)
    d["paths_total"] = res.paths_checked + res.paths_reused
    return json.dumps(d, sort_keys=True, allow_nan=False)


def _counterexample_json(c: Counterexample | RelationalCounterexample) -> dict[str, Any]:
    if isinstance(c, RelationalCounterexample):  # an ensemble's relational result
        return {
            "inputs": [c.inputs[0], c.inputs[1]],
            "actions": list(c.actions),
            "confidences": list(c.confidences),
            "leaves": list(c.leaves),
            "paths": [list(c.paths[0]), list(c.paths[1])],
            "feature": c.feature,
            "regions": [list(c.regions[0]), list(c.regions[1])],
            **({} if c.tree_leaves is None else {"tree_leaves": [list(x) for x in c.tree_leaves]}),
        }
    return {
        "input": c.input,
        "action": c.action,
        "confidence": c.confidence,
        "leaf": c.leaf,
        "path": list(c.path),
        "region": list(c.region),
        **({} if c.leaves is None else {"leaves": list(c.leaves)}),  # an ensemble's
    }


def _from_json(text: str, seconds: float) -> InvariantResult:
    d: dict[str, Any] = json.loads(text)
    total = int(d.pop("paths_total"))
    d["counterexamples"] = tuple(_counterexample(c) for c in d["counterexamples"])
    d["warnings"] = tuple(d["warnings"])
    d["status"] = Verdict(d["status"])
    return InvariantResult(
        **d, seconds=seconds, paths_checked=0, paths_reused=total, solver_paths=0
    )


def _counterexample(c: dict[str, Any]) -> Counterexample | RelationalCounterexample:
    if "inputs" in c:
        return RelationalCounterexample(
            (c["inputs"][0], c["inputs"][1]),
            (c["actions"][0], c["actions"][1]),
            (c["confidences"][0], c["confidences"][1]),
            (c["leaves"][0], c["leaves"][1]),
            (tuple(c["paths"][0]), tuple(c["paths"][1])),
            c["feature"],
            _regions(c.get("regions")),
            None if c.get("tree_leaves") is None else _tree_leaves(c["tree_leaves"]),
        )
    return Counterexample(
        c["input"],
        c["action"],
        c["confidence"],
        c["leaf"],
        tuple(c["path"]),
        tuple(c.get("region", ())),
        leaves=None if c.get("leaves") is None else tuple(c["leaves"]),
    )


def _tree_leaves(got: list[list[int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (tuple(got[0]), tuple(got[1]))


def _regions(got: list[list[str]] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A relational counterexample's two regions as kept (none in a row kept before they
    were: the report then describes them)."""
    if got is None:
        return ((), ())
    return (tuple(got[0]), tuple(got[1]))


def _mentions_decision(f: ck.Formula) -> bool:
    match f:
        case ck.ActionIn():
            return True
        case ck.Compare(expr, _):
            return ck.CONFIDENCE in expr.variables
        case ck.Not(arg):
            return _mentions_decision(arg)
        case ck.And(args) | ck.Or(args):
            return any(_mentions_decision(a) for a in args)
    return False


def _needs_fresh(inv: ck.CheckedInvariant, res: InvariantResult) -> bool:
    """Whether this invariant must be decided afresh on the whole tree to give exactly a fresh
    run's result, because some of it depends on the leaves that were reused:

    * a vacuity verdict for a 'when' that mentions the decision (it is decided on every leaf);
    * an internal warning (a witness the evaluator did not confirm).

    Printed counterexamples found by Z3 need nothing of the kind: their witnesses come from a
    solver asked about that leaf alone (:func:`clefprove.verify.engine.isolated_witness`),
    the same in a fresh run and here.
    """
    if res.status == HOLDS and res.vacuous and _mentions_decision(inv.when):
        return True
    return any(w.startswith("internal:") for w in res.warnings)


# ---------------------------------------------------------------- two ways to decide


def hint_key(scope: bytes) -> bytes:
    """Key of the note "this invariant needed Z3 in this domain" (stored as a result row)."""
    return hashlib.sha256(b"hint\0" + scope).digest()


@dataclass
class _Out:
    proofs: list[tuple[bytes, bytes, int]] = dataclasses.field(default_factory=list)
    whole: list[tuple[bytes, str]] = dataclasses.field(default_factory=list)


def _storable(res: InvariantResult) -> bool:
    return res.unknown_paths == 0 and not any(w.startswith("internal:") for w in res.warnings)


def _vacuity(
    cache: CacheStore,
    model: Model,
    prep: eg.Prepared,
    settings: CheckOptions,
    domain: str,
    out: _Out,
    per_leaf: Callable[[eg.Prepared], eg.PathVerdicts] | None = None,
    record: Callable[[delta.LeafOutcomes], None] | None = None,
    known: bool | None = None,
    remember: Callable[[bool], None] | None = None,
) -> Callable[[], bool] | None:
    """An answer to "is ``when`` unsatisfiable on the domain?" for :func:`api.finish`, equal
    to :func:`api.when_is_vacuous`'s.

    * A ``when`` that does not mention the decision is a question about the domain alone
      (decided on the single domain box), cached by the canonical ``when``, the domain digest
      and the version; definite answers are stored.  *known* is such an answer kept with the
      invariant's outcomes (same domain), and *remember* receives every definite answer.
    * One that does is decided on every leaf: *per_leaf(prepared when)* gives the outcomes
      (decided on all leaf boxes, or reused against the last version), and *record* keeps them
      for the next version.  Without *per_leaf*, None (finish decides it itself)."""
    inv = prep.invariant
    if _mentions_decision(inv.when):
        if per_leaf is None:
            return None

        def vacuous_per_leaf() -> bool:
            wprep = eg.prepare(model, ev.when_invariant(inv), settings.dnf_cap)
            if not nm.uses_decision(wprep.violation, len(model.features)):
                return ev.when_is_vacuous(model, prep, ev.domain_boxes(model), settings)
            pvw = per_leaf(wprep)
            if record is not None:
                record(delta.LeafOutcomes.of(pvw, width=len(model.features)))
            return bool(np.all(pvw.status == eg.SAFE))

        return vacuous_per_leaf

    def vacuous() -> bool:
        if known is not None:
            return known
        key = hashlib.sha256(
            f"vacuity\0{ck.canonical(inv.when)}\0{domain}\0{_version()}".encode()
        ).digest()
        hit = cache.lookup_results([key]).get(key)
        if hit is not None:
            answer = bool(json.loads(hit)["vacuous"])
            if remember is not None:
                remember(answer)
            return answer
        wprep = eg.prepare(model, ev.when_invariant(inv), settings.dnf_cap)
        if nm.uses_decision(wprep.violation, len(model.features)):  # not reached: see above
            return ev.when_is_vacuous(model, prep, leaf_boxes(model), settings)
        pv = eg.decide(model, wprep, ev.domain_boxes(model), settings)
        answer = bool(np.all(pv.status == eg.SAFE))
        if not np.any(pv.status == eg.UNKNOWN):
            out.whole.append((key, json.dumps({"vacuous": answer}, allow_nan=False)))
            if remember is not None:
                remember(answer)
        return answer

    return vacuous


@frozen
class _Run:
    """What one incremental check shares between its stages (against the last version, the
    subtree walk, the fresh decision): the inputs, the keys, and where results go."""

    cache: CacheStore
    domain: str
    model: Model
    invs: tuple[ck.CheckedInvariant, ...]
    scopes: dict[int, bytes]
    hkeys: dict[int, bytes]
    rkeys: list[bytes]
    settings: CheckOptions
    results: list[InvariantResult | None]  # filled in place, one slot per invariant
    out: _Out  # rows to store at the end
    leaf_keys: _LeafKeys
    snap: _Snapshots

    @property
    def counterexamples(self) -> int:
        return self.settings.counterexamples


def alone_key(leaf_key: bytes, scope: bytes, settings: CheckOptions) -> bytes:
    """Key of the witness a solver of its own gives for one leaf (:func:`engine.
    isolated_witness`): the leaf's key (its record and box), the invariant in its domain, and
    the solver limits that witness is found within."""
    limits = json.dumps([json_safe(settings.timeout), settings.rlimit], allow_nan=False)
    return hashlib.sha256(b"alone\0" + leaf_key + scope + limits.encode()).digest()


def _alone(run: _Run, prep: eg.Prepared, pv: eg.PathVerdicts) -> Callable[[int], np.ndarray | None]:
    """:func:`api.finish`'s *alone* hook: the witness of a solver asked about solver row *r*
    alone, from the cache when a run found it before (it is a function of the leaf's box and
    record, the invariant and the limits: the key), else found now and stored.  Only the
    printed counterexamples ask, so at most K per invariant."""
    model, settings = run.model, run.settings
    scope = scope_key(prep.invariant, run.domain)

    def get(r: int) -> np.ndarray | None:
        leaf_key = run.leaf_keys.get(model, pv.boxes.take(np.array([r])))[0]
        key = alone_key(leaf_key, scope, settings)
        hit = run.cache.lookup_results([key]).get(key)
        if hit is not None:
            try:
                kept = np.array([float.fromhex(v) for v in json.loads(hit)["x"]], dtype=np.float64)
            except (ValueError, TypeError, KeyError) as exc:
                raise CacheCorrupt(f"a witness row is damaged ({exc})") from exc
            if kept.shape != (len(model.features),):
                raise CacheCorrupt("a witness row has the wrong width")
            return kept
        x = eg.isolated_witness(model, prep, pv.boxes, r, settings)
        if x is not None:
            text = json.dumps({"x": [float(v).hex() for v in x]}, allow_nan=False)
            run.out.whole.append((key, text))
        return x

    return get


def _decide_every_leaf(
    run: _Run,
    prep: eg.Prepared,
    boxes: LeafBoxes,
    t0: float,
    known: bool | None = None,
) -> tuple[InvariantResult, eg.PathVerdicts, delta.LeafOutcomes]:
    """*prep* decided on *boxes* (every leaf of the model) as in a fresh run: the result, the
    verdicts, and the outcomes to keep for the next version (with the vacuity of ``when``
    where it was decided; *known* is an answer kept from before)."""
    cache, domain, model, settings, out = run.cache, run.domain, run.model, run.settings, run.out
    counterexamples = run.counterexamples
    pv = eg.decide(model, prep, boxes, settings)
    when: list[delta.LeafOutcomes] = []
    answers: list[bool] = []
    vac = _vacuity(
        cache,
        model,
        prep,
        settings,
        domain,
        out,
        per_leaf=lambda wprep: eg.decide(model, wprep, boxes, settings),
        record=when.append,
        known=known,
        remember=answers.append,
    )
    shown: dict[int, np.ndarray] = {}
    res = api.finish(
        model,
        prep,
        pv,
        settings,
        counterexamples,
        t0,
        vacuity=vac,
        alone=_alone(run, prep, pv),
        shown=shown.__setitem__,
    )
    kept = delta.LeafOutcomes.of(
        pv,
        when[0] if when else None,
        answers[0] if answers else known,
        len(model.features),
        shown,
    )
    return res, pv, kept


def _fresh(
    run: _Run,
    todo: list[int],
) -> None:
    """Invariants that never needed Z3, or whose outcomes on an earlier version are not in
    the cache: the vectorised box stages decide every leaf faster than subtree hashes and
    lookups could skip them, so they are decided as in a fresh run.  When one turns out to
    need Z3, a hint is stored, the run stores every invariant's outcomes (the next version is
    re-checked against them) and the proofs of the leaves Z3 proved safe.  Proofs of whole
    subtrees are not stored here (keying them walks the whole tree, as costly as the box
    stages): the subtree walk stores them, in a later run whose outcomes are not in the
    cache, the only one that can use them."""
    full = run.snap.full_boxes()
    for i in todo:
        t0 = time.perf_counter()
        prep = eg.prepare(run.model, run.invs[i], run.settings.dnf_cap)
        res, pv, run.snap.outcomes[i] = _decide_every_leaf(run, prep, full, t0)
        _settle(run, i, res)
        if pv.solver_paths:
            run.out.whole.append(
                (run.hkeys[i], json.dumps({"solver_paths": pv.solver_paths}, allow_nan=False))
            )
            solved = np.flatnonzero((pv.how == eg.HOW_SOLVER) & (pv.status == eg.SAFE))
            if solved.size:
                keys = run.leaf_keys.get(run.model, pv.boxes.take(solved))
                run.out.proofs.extend((k, run.scopes[i], 1) for k in keys)


def _walked(
    run: _Run,
    todo: list[int],
) -> None:
    """Invariants that needed Z3: one shared walk skips every subtree already proved."""
    sc = [run.scopes[i] for i in todo]
    walk = _walk(run.cache, run.model, sc)
    for j, i in enumerate(todo):
        t0 = time.perf_counter()
        inv = run.invs[i]
        prep = eg.prepare(run.model, inv, run.settings.dnf_cap)
        boxes = _boxes_for(run.model, walk, j)
        reused = int(walk.reused[j])
        if boxes.size:
            # Single leaves proved by Z3 earlier (only those are stored: see below; a first
            # run stores them without any subtree proof, see _fresh).
            keys = run.leaf_keys.get(run.model, boxes)
            found = run.cache.lookup_subtrees(keys)
            if found:
                hit = np.array([found.get((k, sc[j])) == 1 for k in keys], dtype=bool)
                reused += int(hit.sum())
                boxes = boxes.take(~hit)
        pv = eg.decide(run.model, prep, boxes, run.settings)
        vac = _vacuity(run.cache, run.model, prep, run.settings, run.domain, run.out)
        shown: dict[int, np.ndarray] = {}
        res = api.finish(
            run.model,
            prep,
            pv,
            run.settings,
            run.counterexamples,
            t0,
            paths_reused=reused,
            vacuity=vac,
            alone=_alone(run, prep, pv),
            shown=shown.__setitem__,
        )
        if reused and _needs_fresh(inv, res):
            res, _, run.snap.outcomes[i] = _decide_every_leaf(run, prep, run.snap.full_boxes(), t0)
        else:
            res = dataclasses.replace(
                res, paths_checked=boxes.size + int(walk.trivial[j]), paths_reused=reused
            )
            run.snap.outcomes[i] = run.snap.spread(pv, shown)
        _settle(run, i, res)
        run.out.proofs.extend(
            (k, sc[j], c) for k, c in _safe_proofs(run.model, walk, j, boxes, pv.status)
        )
        solved = np.flatnonzero((pv.how == eg.HOW_SOLVER) & (pv.status == eg.SAFE))
        if solved.size:  # a solver proof is worth storing even for a single leaf
            keys = run.leaf_keys.get(run.model, boxes.take(solved))
            run.out.proofs.extend((k, sc[j], 1) for k in keys)


# ---------------------------------------------------------------- against the last version


#: The layout of an outcomes row (:class:`delta.LeafOutcomes`); part of its key, so that a row
#: written in another layout is never read (it is simply not found).
_OUTCOMES_FORMAT = 5


def outcomes_key(scope: bytes, settings: CheckOptions) -> bytes:
    """Key of an invariant's per-leaf outcomes on the last version it checked.  The options
    that can change *how* a leaf is decided (:attr:`CheckOptions.outcome_identity`) are in it."""
    text = f"outcomes\0{_OUTCOMES_FORMAT}\0{settings.outcome_identity}\0".encode()
    return hashlib.sha256(text + scope).digest()


def tree_key(content: str) -> bytes:
    """Key of a model version's tree snapshot (node records and leaf boxes)."""
    return hashlib.sha256(f"tree\0{content}\0{_version()}".encode()).digest()


class _Snapshots:
    """This run's side of :mod:`clefprove.incremental.delta`: the earlier versions' trees
    found in the cache, the alignments with them, this model's leaf boxes where needed, and
    the outcomes to store for the next run."""

    def __init__(self, model: Model, content: str) -> None:
        self.model = model
        self.key = tree_key(content)
        self.old: dict[bytes, delta.TreeSnapshot] = {}
        self.full: dict[bytes, bytes] = {}  # snapshot key -> the full snapshot it rests on
        self._deltas: dict[bytes, bytes] = {}  # delta rows whose base is not read yet
        self.aligned: dict[bytes, tuple[delta.Alignment, LeafBoxes]] = {}
        self.boxes: LeafBoxes | None = None
        self.stored = False  # this version's tree snapshot is already in the cache
        self.outcomes: dict[int, delta.LeafOutcomes] = {}
        self.out_blobs: dict[bytes, bytes] = {}  # full outcomes rows ('outb') read
        self.out_base: dict[int, tuple[bytes, delta.LeafOutcomes]] = {}  # what i's rests on
        self.pairs: dict[int, PairCount] = {}  # relational invariants' pair counts
        self._leaves: np.ndarray | None = None
        self._readers: dict[bytes, delta.TreeReader] = {}

    def reader(self, key: bytes, kind: str, size: int) -> delta.TreeReader | None:
        """A full tree row is read against this model's records (only those that differ are
        kept), as the store streams it; :meth:`load` takes the snapshots read so."""
        if kind != "tree":
            return None
        reader = self._readers[key] = delta.TreeReader(self.model.nodes, size)
        return reader

    def load(self, rows: dict[bytes, tuple[str, bytes]]) -> None:
        """Decode the tree rows found (this version's own, if present, is only noted): full
        snapshots (``tree``) and deltas of one (``treed``, resolved by :meth:`resolve`)."""
        for key, reader in self._readers.items():
            if reader.snapshot is None:  # its row failed its checksum: CacheCorrupt was raised
                continue
            self.stored |= key == self.key
            self.old[key] = reader.snapshot
            self.full[key] = key
        self._readers = {}
        for key, (kind, blob) in rows.items():
            if kind == "outb":
                self.out_blobs[key] = blob
                continue
            if kind not in ("tree", "treed"):
                raise CacheCorrupt("a snapshot row has the wrong kind")
            if key == self.key:
                self.stored = True
            try:
                if kind == "tree":
                    self.old[key] = delta.decode_tree(blob, lazy=True)
                    self.full[key] = key
                else:
                    delta.delta_base(blob)
                    self._deltas[key] = blob
            except ValueError as exc:
                raise CacheCorrupt(str(exc)) from exc

    def old_pairs(self, pointer: bytes, symmetric: bool) -> PairCount:
        """A relational invariant's pair count from its row (the version's tree key, then
        the count as JSON), checked to be one that a count gives on that version's tree
        (which :meth:`against` found in the cache): no more pairs listed than counted nor
        counted than there are leaf pairs, the listed ones distinct leaves in print order
        (rows sorted, unique; a symmetric form's smaller leaf first)."""
        try:
            row = json.loads(pointer[32:])
            total = row["total"]
            first = np.array(row["first"], dtype=np.int64)
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
            raise CacheCorrupt(f"a pair count row is damaged ({exc})") from exc
        from clefprove.verify.relational import PairCount  # only for such a program

        leaves = self.old[pointer[:32]].leaves
        if first.size == 0:
            first = first.reshape(0, 2)
        if (
            type(total) is not int
            or first.ndim != 2
            or first.shape[1] != 2
            or not first.shape[0] <= total <= leaves.size * leaves.size
        ):
            raise CacheCorrupt("a pair count row does not add up")
        a, b = first[:, 0], first[:, 1]
        ordered = bool(np.all((a < b) if symmetric else (a != b)))
        da, db = np.diff(a), np.diff(b)
        at = np.searchsorted(leaves, first.ravel())
        if first.size and (
            not ordered
            or bool(np.any((da < 0) | ((da == 0) & (db <= 0))))
            or int(at.max()) >= leaves.size
            or not np.array_equal(leaves[at], first.ravel())
        ):
            raise CacheCorrupt("a pair count row names pairs that no count lists")
        return PairCount(total, first)

    def bases_wanted(self, found: dict[int, bytes]) -> list[bytes]:
        """The full snapshots that the delta rows read rest on and that are not read yet,
        and the full outcomes rows that the outcomes rows *found* rest on."""
        trees = {b[:32] for b in self._deltas.values()} - set(self.old)
        return sorted(trees | {b[32:64] for b in found.values()})

    def old_outcomes(self, i: int, pointer: bytes) -> delta.LeafOutcomes | None:
        """Invariant *i*'s outcomes from its row (*pointer*: the version's tree key, the key
        of the full outcomes row it rests on, a delta of that), or None when that full row is
        gone (pruned by another process: not in the cache)."""
        base_blob = self.out_blobs.get(pointer[32:64])
        if base_blob is None:
            return None
        leaves = self.old[pointer[:32]].leaves.size
        try:
            base = delta.LeafOutcomes.decode(base_blob, leaves)
            out = delta.apply_outcomes_delta(base, pointer[64:])
        except ValueError as exc:
            raise CacheCorrupt(str(exc)) from exc
        self.out_base[i] = (pointer[32:64], base)
        return out

    def resolve(self) -> None:
        """Apply every delta row read to its full snapshot (a delta whose base is gone, e.g.
        pruned by another process, is left out: that version is simply not in the cache)."""
        for key, blob in self._deltas.items():
            base = blob[:32]
            if self.full.get(base) != base:
                continue
            try:
                self.old[key] = delta.decode_tree_delta(blob, self.old[base], lazy=True)
            except ValueError as exc:
                raise CacheCorrupt(str(exc)) from exc
            self.full[key] = base
        self._deltas = {}

    def against(self, key: bytes) -> tuple[delta.Alignment, LeafBoxes] | None:
        """The alignment with the old version *key* and the boxes of the leaves below its
        changed roots, or None when that version is not in the cache."""
        if key not in self.old:
            return None
        hit = self.aligned.get(key)
        if hit is None:
            try:
                al = delta.align(self.old[key], self.model)
                hit = (al, delta.changed_boxes(self.model, al))
            except ValueError as exc:
                raise CacheCorrupt(str(exc)) from exc
            self.aligned[key] = hit
        return hit

    @property
    def leaves(self) -> np.ndarray:
        if self._leaves is None:
            self._leaves = delta.leaf_nodes(self.model)
        return self._leaves

    def full_boxes(self) -> LeafBoxes:
        if self.boxes is None:
            self.boxes = leaf_boxes(self.model)
        return self.boxes

    def boxes_for(self, changed: LeafBoxes) -> Callable[[np.ndarray], LeafBoxes]:
        """Boxes of given leaves (sorted): rows of *changed* where it has them, each other
        leaf from its own context, or the whole tree's boxes when many are needed."""

        def get(leaves: np.ndarray) -> LeafBoxes:
            at = np.searchsorted(changed.leaves, leaves)
            have = at < changed.size
            have[have] = changed.leaves[at[have]] == leaves[have]
            if have.all():
                return changed.take(at)
            missing = leaves[~have]
            if self.boxes is not None or missing.size > _FEW_LEAVES:
                full = self.full_boxes()
                return full.take(np.searchsorted(full.leaves, leaves))
            keys = sorted(categorical_splits(self.model))
            parts = [changed.take(at[have]), boxes_of(self.model, missing)]
            return delta.concat_boxes(parts, keys)

        return get

    def spread(
        self, pv: eg.PathVerdicts, shown: dict[int, np.ndarray] | None = None
    ) -> delta.LeafOutcomes:
        """Outcomes over every leaf from those of the rows *pv* decided (the rest were
        reused proofs or infeasible: safe); *shown*: printed inputs by row of *pv*."""
        leaves = self.leaves
        status = np.full(leaves.size, eg.SAFE, dtype=np.int8)
        how = np.full(leaves.size, eg.HOW_NONE, dtype=np.int16)
        at = np.searchsorted(leaves, pv.boxes.leaves)
        status[at] = pv.status
        how[at] = pv.how
        width = len(self.model.features)
        w = delta.RowWitnesses.of(pv.witnesses, width)
        s = delta.RowWitnesses.of(shown or {}, width)
        return delta.LeafOutcomes(
            status,
            how,
            witnesses=delta.RowWitnesses(at[w.rows], w.x),
            shown=delta.RowWitnesses(at[s.rows], s.x),
        )

    def rows(
        self, okeys: dict[int, bytes], pkeys: dict[int, bytes]
    ) -> list[tuple[bytes, str, bytes]]:
        """The snapshot rows to store: this version's tree (unless present), outcomes and
        pair counts.  The tree is stored as a delta of the full snapshot the version it was
        aligned with rests on, when one serves (:func:`delta.encode_tree_delta`), else in
        full."""
        if not self.outcomes and not self.pairs:
            return []
        out: list[tuple[bytes, str, bytes]] = []
        for i, c in self.pairs.items():
            row = {"total": c.total, "first": c.first.tolist()}
            out.append((pkeys[i], "pairs", self.key + json.dumps(row, allow_nan=False).encode()))
        for i, o in self.outcomes.items():
            # A delta of the full outcomes row the last version's rest on, when one serves;
            # else a new full row ('outb', written once) and a pointer to it.
            blob = None
            if i in self.out_base:
                bkey, base = self.out_base[i]
                d = delta.encode_outcomes_delta(base, o)
                if d is not None:
                    blob = self.key + bkey + d
            if blob is None:
                bkey = hashlib.sha256(b"outb\0" + okeys[i] + self.key).digest()
                out.append((bkey, "outb", o.encode()))
                blob = self.key + bkey + delta.same_as_base(o)
            out.append((okeys[i], "outcomes", blob))
        if not self.stored:
            tree = None
            for full in dict.fromkeys(self.full[k] for k in (*self.aligned, *self.old)):
                if full != self.key:
                    # Aligned with that full snapshot itself: the differing records are known.
                    al = self.aligned.get(full)
                    differ = al[0].records_differ if al is not None else None
                    tree = delta.encode_tree_delta(full, self.old[full], self.model, differ)
                if tree is not None:
                    break
            if tree is not None:
                out.append((self.key, "treed", tree))
            else:
                out.append((self.key, "tree", delta.encode_tree(self.model)))
        return out


#: Up to this many leaves outside the changed subtrees get their boxes one by one (from their
#: path); more, and the whole tree's boxes are computed at once.
_FEW_LEAVES = 24


def _against_last(
    run: _Run,
    todo: list[int],
    found: dict[int, bytes],
    lap: Callable[[str], None] = lambda stage: None,
) -> list[int]:
    """Invariants whose outcomes on an earlier version are in the cache: only the leaves that
    changed since (and those whose old outcome is not a fact about the box) are decided;
    returns the invariants that could not be done this way."""
    cache, domain, model, invs = run.cache, run.domain, run.model, run.invs
    rest: list[int] = []
    for i in todo:
        blob = found.get(i)
        hit = run.snap.against(blob[:32]) if blob is not None else None
        if hit is None:
            rest.append(i)
            continue
        assert blob is not None
        lap("alignment")
        al, changed = hit
        got = run.snap.old_outcomes(i, blob)
        if got is None:
            rest.append(i)
            continue
        old = got
        for o in (old, old.when):
            w = o.witnesses if o is not None else None
            if w is not None and w.rows.size and w.x.shape[1] != len(model.features):
                raise CacheCorrupt("stored witnesses of the wrong width")
        t0 = time.perf_counter()
        inv = invs[i]
        prep = eg.prepare(model, inv, run.settings.dnf_cap)
        boxes_for = run.snap.boxes_for(changed)
        try:
            pv, decided = delta.reuse(model, prep, al, old, boxes_for, run.settings)
            carried = delta.carry(al, old.shown)
        except ValueError as exc:  # outcomes that do not fit the snapshot they name
            raise CacheCorrupt(str(exc)) from exc
        earlier = dict(zip(carried.rows.tolist(), carried.x, strict=True))
        lap("outcomes reused, changed leaves decided")
        when: list[delta.LeafOutcomes] = []

        def per_leaf(
            wprep: eg.Prepared,
            old_when: delta.LeafOutcomes | None = old.when,
            al: delta.Alignment = al,
            boxes_for: Callable[[np.ndarray], LeafBoxes] = boxes_for,
        ) -> eg.PathVerdicts:
            if old_when is None:  # not kept last time: decided on every leaf
                return eg.decide(model, wprep, run.snap.full_boxes(), run.settings)
            return delta.reuse(model, wprep, al, old_when, boxes_for, run.settings)[0]

        answers: list[bool] = []
        vac = _vacuity(
            cache,
            model,
            prep,
            run.settings,
            domain,
            run.out,
            per_leaf=per_leaf,
            record=when.append,
            known=old.vacuous,
            remember=answers.append,
        )
        shown: dict[int, np.ndarray] = {}
        res = api.finish(
            model,
            prep,
            pv,
            run.settings,
            run.counterexamples,
            t0,
            paths_reused=0,
            vacuity=vac,
            alone=_alone(run, prep, pv),
            earlier=earlier,
            shown=shown.__setitem__,
        )
        reused = al.leaves.size - decided
        if reused and _needs_fresh(inv, res):
            res, _, run.snap.outcomes[i] = _decide_every_leaf(
                run, prep, run.snap.full_boxes(), t0, known=old.vacuous
            )
        else:
            res = dataclasses.replace(res, paths_checked=decided, paths_reused=reused)
            run.snap.outcomes[i] = delta.LeafOutcomes.of(
                pv,
                when[0] if when else None,
                answers[0] if answers else old.vacuous,  # a fact about the domain: kept
                len(model.features),
                shown,
            )
        _settle(run, i, res)
        lap("results and counterexamples")
    return rest


# ---------------------------------------------------------------- entry


class _Lap:
    """Adds the seconds since the last call to *timings[stage]*."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
        self.last = now


def check_program(
    cache: CacheStore,
    model: Model,
    program: ck.CheckedProgram,
    settings: CheckOptions,
    counterexamples: int,
) -> list[InvariantResult]:
    """Results of every invariant of *program* on *model*, equal to a fresh run's."""
    try:
        return _check_program(cache, model, program, settings, counterexamples)
    except CacheCorrupt as exc:
        cache.reset(str(exc))
    try:
        return _check_program(cache, model, program, settings, counterexamples)
    except CacheCorrupt as exc:  # damaged again (another process?): go on without it
        cache.disable(str(exc))
        return _check_program(cache, model, program, settings, counterexamples)


#: The layout of a pair count row; part of its key (a row of another layout is not found).
_PAIRS_FORMAT = 1

#: A relational invariant is re-counted after an edit when the leaves replaced and added are
#: at most this many, or this share (1 / RECOUNT_SHARE) of the tree's leaves; else (an edit
#: near the root) it is decided afresh, which costs about as much.
RECOUNT_LEAVES = 256
RECOUNT_SHARE = 8


def pairs_key(scope: bytes, settings: CheckOptions) -> bytes:
    """Key of a relational invariant's pair count on the last version it checked."""
    text = f"pairs\0{_PAIRS_FORMAT}\0{settings.outcome_identity}\0".encode()
    return hashlib.sha256(text + scope).digest()


def _relational(
    run: _Run,
    todo: list[int],
    found: dict[int, bytes],
    severity: tuple[int, ...] | None,
    lap: Callable[[str], None],
) -> None:
    """The relational invariants *todo*: re-counted from their pair count on an earlier
    version where one is in the cache and the edit is small, else decided on leaf pairs as a
    fresh run does; their pair counts kept for the next version (docs/incremental.md,
    "Relational invariants")."""
    from clefprove.verify.relational import check_relational  # only for such a program

    for i in todo:
        t0 = time.perf_counter()
        inv = run.invs[i]
        kept: list[PairCount] = []
        blob = found.get(i)
        res = _recounted(run, inv, severity, blob, kept, t0) if blob is not None else None
        if res is None:
            boxes = run.snap.full_boxes()
            res = check_relational(
                run.model, inv, severity, run.settings, run.counterexamples, boxes, kept.append
            )
        lap("relational")
        _settle(run, i, res)
        if kept and _storable(res):
            run.snap.pairs[i] = kept[0]


def _recounted(
    run: _Run,
    inv: ck.CheckedInvariant,
    severity: tuple[int, ...] | None,
    blob: bytes,
    kept: list[PairCount],
    t0: float,
) -> InvariantResult | None:
    """The result of relational invariant *inv* re-counted from its pair count on the
    version its row names (*kept* receives the new count), or None when that version is not
    in the cache, the edit is large, or the first pairs to print cannot be told."""
    from clefprove.verify import pairdelta
    from clefprove.verify.relational import prepare

    model = run.model
    hit = run.snap.against(blob[:32])
    if hit is None:
        return None
    al, added = hit
    old_tree = run.snap.old[blob[:32]]
    prep = prepare(model, inv, severity)
    if not prep.on_boxes:
        raise CacheCorrupt("a pair count row for an invariant that is not counted on boxes")
    old = run.snap.old_pairs(blob, not isinstance(prep.relation, ck.Monotone))
    limit = max(RECOUNT_LEAVES, model.n_leaves // RECOUNT_SHARE)
    same_shape = al.dirty is not None
    n_gone = al.dirty.size if al.dirty is not None else old_tree.leaves.size - al.clean_new.size
    if added.size > limit or n_gone > limit:
        return None
    if not same_shape and not al.old_rows_sorted:
        return None  # the clean leaves changed order: the kept pairs' order does not carry
    old_ids = np.empty(0, np.int64) if same_shape else old_tree.leaves[al.clean_old_rows]
    new_ids = np.empty(0, np.int64) if same_shape else al.clean_new

    def to_new(ids: np.ndarray) -> np.ndarray:
        """The new node ids of clean old leaves (the same with the same shape), -1 else."""
        if same_shape:
            return ids
        if not old_ids.size:
            return np.full(ids.size, -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(old_ids, ids), old_ids.size - 1)
        out: np.ndarray = np.where(old_ids[at] == ids, new_ids[at], -1)
        return out

    try:
        gone = delta.gone_boxes(model, old_tree, al)
    except ValueError as exc:  # a snapshot that does not fit the alignment
        raise CacheCorrupt(str(exc)) from exc
    count = pairdelta.recount(model, prep, old, run.counterexamples, gone, added, to_new)
    if count is None:
        return None
    res = pairdelta.counted_result(
        model,
        prep,
        run.settings,
        run.counterexamples,
        t0,
        count,
        paths_checked=added.size,
        paths_reused=model.n_leaves - added.size,
    )
    if res is not None:
        kept.append(count)
    return res


def _rows_of_kind(
    rows: dict[bytes, tuple[str, bytes]], keys: dict[int, bytes], kind: str, least: int
) -> dict[int, bytes]:
    """Per invariant, its row among *rows* (by *keys*), which must be of *kind* and at least
    *least* bytes long."""
    out: dict[int, bytes] = {}
    for i, key in keys.items():
        if key in rows:
            got, blob = rows[key]
            if got != kind or len(blob) < least:
                raise CacheCorrupt("a snapshot row has the wrong kind")
            out[i] = blob
    return out


def _check_program(
    cache: CacheStore,
    model: Model,
    program: ck.CheckedProgram,
    settings: CheckOptions,
    counterexamples: int,
) -> list[InvariantResult]:
    invs = program.invariants
    t_start = time.perf_counter()
    lap = _Lap(cache.timings)
    content = merkle.content_digest(model)
    lap("content digest")
    rkeys = result_keys(program, counterexamples, content, settings)
    stored = cache.lookup_results(rkeys)
    lap("whole results lookup")
    results: list[InvariantResult | None] = [None] * len(invs)
    todo = [i for i, k in enumerate(rkeys) if k not in stored and not invs[i].is_relational]
    share = (time.perf_counter() - t_start) / max(1, len(invs))
    for i, k in enumerate(rkeys):
        if k in stored:
            results[i] = _from_json(stored[k], share)
    pairs = [i for i, k in enumerate(rkeys) if k not in stored and invs[i].is_relational]
    if todo or pairs:
        domain = merkle.domain_digest(model, program.severity)
        scopes = {i: scope_key(invs[i], domain) for i in (*todo, *pairs)}
        okeys = {i: outcomes_key(scopes[i], settings) for i in todo}
        pkeys = {i: pairs_key(scopes[i], settings) for i in pairs}
        hkeys = {i: hint_key(scopes[i]) for i in todo}
        hints = cache.lookup_results(list(hkeys.values())) if hkeys else {}
        out = _Out()
        snap = _Snapshots(model, content)
        run = _Run(
            cache,
            domain,
            model,
            invs,
            scopes,
            hkeys,
            rkeys,
            settings,
            results,
            out,
            _LeafKeys(),
            snap,
        )
        # One query: the outcomes and pair count rows, the trees they name, and this
        # version's tree (SPEC §1: only the paths that changed are checked again, whatever
        # the tree's size, so every run reads and writes them).
        rows = cache.lookup_snapshots(
            [*okeys.values(), *pkeys.values(), snap.key], referenced=True, stream=snap.reader
        )
        found = _rows_of_kind(rows, okeys, "outcomes", 64)
        found_pairs = _rows_of_kind(rows, pkeys, "pairs", 32)
        own = {*okeys.values(), *pkeys.values()}
        snap.load({k: v for k, v in rows.items() if k not in own})
        wanted = snap.bases_wanted(found)
        if wanted:
            snap.load(cache.lookup_snapshots(wanted, stream=snap.reader))
        snap.resolve()
        lap("snapshots read")
        if pairs:
            _relational(run, pairs, found_pairs, program.severity, lap)
        todo = _against_last(run, todo, found, lap)
        # The rest: those that needed Z3 take the subtree walk, the others are decided on
        # every leaf, as in a fresh run.
        walkers = [i for i in todo if hkeys[i] in hints]
        fresh = [i for i in todo if hkeys[i] not in hints]
        if walkers:
            _walked(run, walkers)
            lap("subtree walk")
        if fresh:
            _fresh(run, fresh)
            lap("decided on every leaf")
        snapshot_rows = snap.rows(okeys, pkeys)
        lap("snapshots encoded")
        cache.store(out.proofs, out.whole, snapshot_rows)
        lap("stored")
    return [r for r in results if r is not None]
