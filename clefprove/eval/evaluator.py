"""The bounded evaluator: the runtime oracle shared by ``clefprove eval`` and the verifier.

Semantics are exactly SPEC §2: an encoded input (see :mod:`clefprove.model.types`) is clipped
into each feature's ``[min, max]``; a numeric split goes left when ``x <= threshold`` in float64;
a categorical split goes left when the code is in the split's set.

Batch evaluation walks all rows down the tree together, at most ``model.max_depth``
vectorised steps (leaves point to themselves, so rows that reach a leaf early stay there; below
the heap levels the rows standing on a leaf are written out and the others walk on alone, so a
deep unbalanced tree costs about its mean row depth).  Rows
are processed in cache-sized chunks, and every step is a handful of ``np.take`` gathers into
preallocated buffers.  Per-model lookup arrays are derived once from the node records:

* clipping is folded into the thresholds: for a feature with domain ``[lo, hi]``, a threshold
  ``t < lo`` sends every input right (derived threshold ``-inf``), ``t >= hi`` sends every input
  left (``+inf``), and for ``lo <= t < hi`` ``clip(x) <= t`` iff ``x <= t``.  So no row is
  ever clipped, and the result equals the clip-then-compare semantics for every finite input;
* a categorical split whose set is a prefix ``{0..k}`` of the vocabulary is the numeric split
  ``code <= k + 0.5``; one whose set is a suffix ``{j..V-1}`` is ``code <= j - 0.5`` with the
  children swapped.  Other sets are resolved by a membership-table lookup, only on the steps
  (depths) where such a node exists and only for the rows standing on one;
* the top :data:`HEAP_LEVELS` levels are laid out as an implicit heap (root = slot 1, slot
  ``k``'s children ``2k`` and ``2k + 1``, a shallow leaf copied into the slots below it), so a
  step there is ``state = 2 * state + went_right`` with no child gather: gather the split
  feature, add the row offsets, gather ``x``, gather the threshold, compare, advance;
* deeper levels use child tables with the split feature packed into the state:
  ``state = (2 * position) << fbits | feature`` (a leaf carries the spare feature code
  ``n_features``), so ``x``'s index is ``row offset + (state & mask)`` with no feature gather,
  ``k = state >> fbits`` indexes the threshold table and the next state is
  ``child2[k + went_right]``, already packed: 3 gathers per level, like the heap.  Positions
  are breadth-first (by depth, then node index), so the rows of a chunk, which all stand at
  one depth, gather from one contiguous band of the tables;
* below the heap, every :data:`COMPACT_EVERY` levels the finished rows (feature code
  ``n_features``) are written out; a chunk whose walking rows fall to 1/:data:`TAIL_FRACTION`
  parks them (with a copy of their rows of X) in a pool, walked once it holds a chunk's worth
  of rows from several chunks, so the per-call overhead of the thin last levels of a deep tree
  is paid once for all of them.

A batch of at least :data:`THREAD_MIN_ROWS` rows is split into contiguous shares of whole
chunks walked by 2 threads while a second CPU is free (numpy releases the GIL inside every
take and ufunc of the walk); each share has its own work arrays and pool and writes only its
own rows, so the decisions are those of one thread (``Evaluator(model, threads=1)``).

The node records themselves are never copied: the derived arrays above are computed once per
model.

:class:`NodeWalker` evaluates one input straight on the node records (nothing derived), for
callers that evaluate a few inputs of a large model (counterexample confirmation).

See docs/performance.md for measurements.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from clefprove.errors import InputError
from clefprove.frozen import frozen
from clefprove.model.types import Model, NodeKind

#: Rows per chunk: large enough to amortise numpy's per-call overhead, small enough that the
#: per-chunk work arrays stay in the CPU caches (best of 2k..128k measured, docs/performance.md).
DEFAULT_CHUNK_ROWS = 16384

#: Tree levels evaluated in the heap layout (2**(levels+1) slots of derived tables).
HEAP_LEVELS = 12

#: Below the heap levels, every this many levels the rows standing on a leaf are written out
#: and dropped, when at least 1/COMPACT_FRACTION of the walking rows are done.
COMPACT_EVERY = 4
COMPACT_FRACTION = 4

#: A chunk whose walking rows fall to 1/TAIL_FRACTION of the chunk parks them in a pool that
#: is walked once it holds a chunk's worth (thin tails of deep trees share the call overhead).
TAIL_FRACTION = 8

#: Batches of at least this many rows are split between 2 threads when a second CPU is free
#: (:meth:`Evaluator.threads_for`); smaller ones are walked by the calling thread alone.
THREAD_MIN_ROWS = 1 << 18

#: Chunks of a threaded walk are this many times ``chunk_rows`` (each numpy call works
#: longer between two hand-overs of the GIL; longer chunks spill the caches: 65,536 rows
#: cost 11-24 % more CPU time than 16,384 in one thread).
THREAD_CHUNK_FACTOR = 2

#: Where the runnable-task count is not available, a CPU counts as free while the 1-minute
#: load average is at most ``cpus - 1`` plus this (the calling process itself counts about 1).
THREAD_MAX_LOAD = 0.5

_LEAF, _NUMERIC, _CATEGORICAL = int(NodeKind.LEAF), int(NodeKind.NUMERIC), 2


@frozen(slots=True)
class Decision:
    """The decision for one input: action index, leaf confidence, and leaf node index."""

    action: int
    confidence: float
    leaf: int


@frozen
class BatchResult:
    """Decisions for a batch of inputs, one entry per row."""

    actions: np.ndarray  # intp action indices
    confidences: np.ndarray  # float64
    leaves: np.ndarray  # intp leaf node indices

    def __len__(self) -> int:
        return int(self.leaves.shape[0])

    def decision(self, i: int) -> Decision:
        return Decision(int(self.actions[i]), float(self.confidences[i]), int(self.leaves[i]))


class Evaluator:
    """Evaluates encoded inputs on one model (batch and single-input fast path)."""

    def __init__(
        self,
        model: Model,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        heap_levels: int = HEAP_LEVELS,
        threads: int | None = None,
    ) -> None:
        """*heap_levels*: tree levels walked in heap layout (the rest in child-table layout);
        0 means child tables only; the heap's derived tables hold 2**(heap_levels+1) slots.
        *threads*: threads a batch is split between (None: decided per batch,
        :meth:`threads_for`)."""
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be positive")
        if not 0 <= heap_levels <= 24:
            raise ValueError("heap_levels must be in [0, 24]")
        if threads is not None and threads < 1:
            raise ValueError("threads must be positive")
        self.threads = threads
        self.requested_heap_levels = heap_levels
        self.model = model
        self.chunk_rows = int(chunk_rows)
        self.n_features = len(model.features)
        self.depth = int(model.max_depth)
        self._derive()

    # ------------------------------------------------------------------ derived lookup arrays
    def _derive(self) -> None:
        model = self.model
        nodes = model.nodes  # structured, read-only; fields are read as views
        n = model.n_nodes
        kind = nodes["kind"]
        feat = nodes["feature"].astype(np.intp)
        left = nodes["left"].astype(np.intp)
        right = nodes["right"].astype(np.intp)
        value = nodes["value"]
        aux = nodes["aux"]
        lo = np.array([f.min for f in model.features], dtype=np.float64)
        hi = np.array([f.max for f in model.features], dtype=np.float64)

        leaf = kind == _LEAF
        numeric = kind == _NUMERIC
        categorical = kind == _CATEGORICAL
        feat = np.where(leaf, 0, feat)

        # Numeric thresholds with clipping folded in (see module docstring).
        thr = np.full(n, np.inf)
        t = value[numeric]
        f_lo, f_hi = lo[feat[numeric]], hi[feat[numeric]]
        thr[numeric] = np.where(t < f_lo, -np.inf, np.where(t >= f_hi, np.inf, t))

        # Categorical splits: prefix / suffix sets become numeric splits on the code.
        swap = np.zeros(n, dtype=bool)
        general = np.zeros(n, dtype=bool)
        membership = model.membership
        for fi in np.unique(feat[categorical]).tolist():
            at = np.flatnonzero(categorical & (feat == fi))
            size = len(model.features[fi].values)
            rows = membership[aux[at].astype(np.intp)[:, None] + np.arange(size)]  # (k, size)
            count = rows.sum(axis=1, dtype=np.intp)
            first_in = rows.argmax(axis=1)
            last_in = size - 1 - rows[:, ::-1].argmax(axis=1)
            prefix = (first_in == 0) & (last_in == count - 1)  # {0..count-1}
            suffix = ~prefix & (last_in == size - 1) & (first_in == size - count)
            # prefix: left iff code <= count - 0.5 (the full set: always left)
            thr[at] = np.where(
                prefix, np.where(count == size, np.inf, count - 0.5), size - count - 0.5
            )
            swap[at] = suffix  # suffix {j..}: code <= j - 0.5 goes right, so swap children
            general[at] = ~prefix & ~suffix
        thr[general] = np.nan  # never used: the membership lookup decides these splits

        first = np.where(swap, right, left)
        second = np.where(swap, left, right)
        self._aux = aux.astype(np.intp)
        self._conf = np.ascontiguousarray(value)
        self._membership = np.ascontiguousarray(membership, dtype=np.uint8)
        vmax = np.array([max(len(f.values) - 1, 0) for f in model.features], dtype=np.float64)
        self._catoff = np.where(general, aux, 0).astype(np.intp)
        self._catmax = np.where(general, vmax[feat], 0.0)
        depth = nodes["depth"]
        self._general_at_depth = np.zeros(self.depth + 1, dtype=bool)
        if general.any():
            self._general_at_depth[np.unique(depth[general])] = True

        # Top levels in heap layout: slot k's children are slots 2k and 2k+1 (root = slot 1);
        # a leaf above the last heap level fills the slots below it.  The next state is
        # 2k + went_right: no child gather.  2**(levels+1) slots, so only the top levels.
        self.heap_levels = h = min(self.depth, self.requested_heap_levels)
        slot_levels = [np.zeros(1, dtype=np.intp)]
        for _ in range(h):
            up = slot_levels[-1]
            slot_levels.append(np.stack((first[up], second[up]), axis=1).ravel())
        slot_node = np.concatenate([np.zeros(1, dtype=np.intp), *slot_levels])
        self._h_node = slot_node
        self._h_feat, self._h_thr = feat[slot_node], thr[slot_node]
        self._h_general = general[slot_node]
        # Deeper levels in child-table layout, the split feature packed into the state:
        # state = (2 * node) << fbits | feature(node), so the feature is a bit mask of the
        # state (no gather); k = state >> fbits indexes the threshold table, and the next
        # state is child2[k + went_right] (already packed).
        self._root_ft = (int(feat[0]), float(thr[0]))
        self._root_packed = (0, 0)
        self._root_state = 0
        # A leaf's state carries the feature code n_features (no feature: its threshold is
        # +inf, whatever x is read), so "done" is a mask and a comparison of the state.
        self._fbits = fbits = max(1, self.n_features.bit_length())
        self._fmask = (1 << fbits) - 1
        if self.depth > h:
            if (2 * n) << fbits > np.iinfo(np.intp).max:  # pragma: no cover (64-bit: never)
                raise ValueError("model too large for the batch evaluator on this platform")
            # Table positions in breadth-first order (by depth, then node index): the rows of
            # a chunk stand at one depth, so each step's gathers touch one contiguous band.
            order = np.argsort(nodes["depth"], kind="stable").astype(np.intp)  # position -> node
            position = np.empty(n, dtype=np.intp)
            position[order] = np.arange(n, dtype=np.intp)
            packed = ((2 * position) << fbits) | np.where(leaf, self.n_features, feat)
            child2 = np.empty(2 * n, dtype=np.intp)
            child2[0::2] = packed[first[order]]
            child2[1::2] = packed[second[order]]
            self._child2 = child2
            self._t_node = order
            self._t_thr = np.repeat(thr[order], 2)
            self._t_general = np.repeat(general[order], 2)
            self._h_to_t = packed[slot_node]
            self._root_packed = (int(packed[first[0]]), int(packed[second[0]]))
            self._root_state = int(packed[0])
        self._root_simple = bool(n > 1 and not general[0] and not leaf[0])
        self._root_children = (2, 3) if h else self._root_packed

        # For the single-input walk (turned into Python lists on first use).
        self._walk_arrays = (
            np.where(leaf, _LEAF, np.where(general, _CATEGORICAL, _NUMERIC)),
            feat,
            thr,
            first,
            second,
        )
        self._general_nodes = np.flatnonzero(general)
        self._cat_sets: dict[int, frozenset[int]] = {}
        self._py: tuple[Sequence[Any], ...] | None = None

    # ------------------------------------------------------------------ tables elsewhere
    #: The derived arrays, by attribute name (:meth:`tables`, :meth:`from_tables`).
    _TABLES = (
        "_aux", "_conf", "_catoff", "_catmax", "_general_at_depth",
        "_h_node", "_h_feat", "_h_thr", "_h_general", "_general_nodes",
    )  # fmt: skip
    _DEEP_TABLES = ("_child2", "_t_node", "_t_thr", "_t_general", "_h_to_t")

    def tables(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """What :meth:`from_tables` needs to rebuild this evaluator without deriving anything:
        scalars, and the derived arrays by name (to be sent elsewhere as raw bytes)."""
        scalars = {
            "chunk_rows": self.chunk_rows,
            "threads": self.threads,
            "requested_heap_levels": self.requested_heap_levels,
            "heap_levels": self.heap_levels,
            "root_simple": self._root_simple,
            "root_children": tuple(self._root_children),
            "root_ft": tuple(self._root_ft),
            "root_packed": tuple(self._root_packed),
            "root_state": self._root_state,
            "fbits": self._fbits,
        }
        names = self._TABLES + (self._DEEP_TABLES if self.depth > self.heap_levels else ())
        arrays = {name: getattr(self, name) for name in names}
        for k, a in enumerate(self._walk_arrays):
            arrays[f"_walk{k}"] = a
        return scalars, arrays

    @classmethod
    def from_tables(
        cls, model: Model, scalars: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> Evaluator:
        """The evaluator of *model* from :meth:`tables` of an evaluator built for the same
        model (its bytes, in another process): nothing is derived again."""
        self = cls.__new__(cls)
        self.model = model
        self.n_features = len(model.features)
        self.depth = int(model.max_depth)
        self.chunk_rows = int(scalars["chunk_rows"])
        threads = scalars.get("threads")
        self.threads = None if threads is None else int(threads)
        self.requested_heap_levels = int(scalars["requested_heap_levels"])
        self.heap_levels = int(scalars["heap_levels"])
        self._root_simple = bool(scalars["root_simple"])
        a, b = scalars["root_children"]
        self._root_children = (int(a), int(b))
        f0, t0 = scalars["root_ft"]
        self._root_ft = (int(f0), float(t0))
        a, b = scalars["root_packed"]
        self._root_packed = (int(a), int(b))
        self._root_state = int(scalars["root_state"])
        self._fbits = int(scalars["fbits"])
        self._fmask = (1 << self._fbits) - 1
        names = cls._TABLES + (cls._DEEP_TABLES if self.depth > self.heap_levels else ())
        for name in names:
            setattr(self, name, arrays[name])
        w = [arrays[f"_walk{k}"] for k in range(5)]
        self._walk_arrays = (w[0], w[1], w[2], w[3], w[4])
        self._membership = np.ascontiguousarray(model.membership, dtype=np.uint8)  # no copy
        self._cat_sets = {}
        self._py = None
        return self

    def _lists(self) -> tuple[Sequence[Any], ...]:
        """Node tables as Python lists (fast scalar indexing), built once on first use."""
        if self._py is None:
            kind, feat, thr, first, second = self._walk_arrays
            catmax = [0] * len(kind)
            for i in self._general_nodes.tolist():
                node = self.model.node(i)
                self._cat_sets[i] = node.categories
                catmax[i] = len(self.model.features[node.feature].values) - 1
            self._py = (
                kind.tolist(),
                feat.tolist(),
                thr.tolist(),
                first.tolist(),
                second.tolist(),
                self._aux.tolist(),
                self._conf.tolist(),
                catmax,
            )
        return self._py

    def node_actions(self) -> Sequence[int]:
        """Each node's action index (meaningful at leaves) as the single-input walk reads it:
        its Python list, or a memoryview after :meth:`use_views`."""
        actions: Sequence[int] = (self._py or self._lists())[5]
        return actions

    def use_views(self) -> None:
        """Make the single-input walk read the derived arrays through memoryviews instead of
        Python lists: nothing is built (a 131,071-node model's lists take 50-70 ms), each
        step indexes a little slower.  Same decisions (tested against the lists)."""
        kind, feat, thr, first, second = self._walk_arrays
        for i in self._general_nodes.tolist():
            self._cat_sets[i] = self.model.node(i).categories

        def ints(a: np.ndarray) -> memoryview[int]:
            raw = memoryview(np.ascontiguousarray(a, dtype=np.int64).data).cast("B")
            return raw.cast("q")

        def floats(a: np.ndarray) -> memoryview[float]:
            raw = memoryview(np.ascontiguousarray(a, dtype=np.float64).data).cast("B")
            return raw.cast("d")

        self._py = (
            ints(kind), ints(feat), floats(thr), ints(first), ints(second), ints(self._aux),
            floats(self._conf), floats(self._catmax),
        )  # fmt: skip

    # ------------------------------------------------------------------ batch
    def evaluate(self, X: np.ndarray) -> BatchResult:
        """Evaluate an encoded float64 matrix of shape (n, n_features), row by row in batch.

        Every value must be finite (an :class:`InputError` names the first that is not);
        int features must be whole and categorical codes whole, as :mod:`.inputs` makes them.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise InputError(
                f"expected an array of shape (n, {self.n_features}), got {tuple(X.shape)}"
            )
        n = X.shape[0]
        leaves, actions, confidences = _staggered(n, (np.intp, np.intp, np.float64))
        if n == 0:
            return BatchResult(actions, confidences, leaves)
        out = (leaves, actions, confidences)
        threads = self.threads_for(n)
        if threads == 1:
            self._evaluate_rows(X, 0, n, out, self.chunk_rows)
            return BatchResult(actions, confidences, leaves)
        # Contiguous shares of whole chunks, one per thread (numpy releases the GIL inside
        # each take and ufunc, so the threads' walks overlap); each share has its own work
        # arrays and tail pool and writes only its own rows of the outputs.  Chunks are
        # THREAD_CHUNK_FACTOR times longer: fewer, longer calls, so fewer GIL hand-overs.
        C = self.chunk_rows * THREAD_CHUNK_FACTOR
        chunks = -(-n // C)
        bounds = [min(n, (chunks * k // threads) * C) for k in range(threads + 1)]
        errors: list[BaseException | None] = [None] * threads

        def share(k: int) -> None:
            try:
                self._evaluate_rows(X, bounds[k], bounds[k + 1], out, C)
            except BaseException as exc:  # re-raised by the caller's thread, below
                errors[k] = exc

        workers = [threading.Thread(target=share, args=(k,)) for k in range(1, threads)]
        for w in workers:
            w.start()
        share(0)
        for w in workers:
            w.join()
        for exc in errors:  # the lowest share's error first: it names the first bad row
            if exc is not None:
                raise exc
        return BatchResult(actions, confidences, leaves)

    def threads_for(self, n: int) -> int:
        """Threads :meth:`evaluate` uses for *n* rows: :attr:`threads` if set, else 2 for a
        batch of at least :data:`THREAD_MIN_ROWS` rows while a second CPU is free (this
        process may run on 2 or more, and fewer tasks than CPUs are runnable right now,
        the calling thread among them; where that count is not available, the 1-minute
        load average leaves a CPU idle), else 1.  Results never depend on it (each row's
        walk is the same)."""
        if self.threads is not None:
            return max(1, min(self.threads, -(-n // (self.chunk_rows * THREAD_CHUNK_FACTOR))))
        if n < THREAD_MIN_ROWS:
            return 1
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        if cpus < 2:
            return 1
        runnable = _runnable_tasks()
        if runnable is not None:
            return 2 if runnable < cpus else 1
        return 2 if os.getloadavg()[0] <= cpus - 1 + THREAD_MAX_LOAD else 1

    def _evaluate_rows(
        self,
        X: np.ndarray,
        lo: int,
        hi: int,
        out: tuple[np.ndarray, np.ndarray, np.ndarray],
        chunk_rows: int,
    ) -> None:
        """Evaluate rows ``lo:hi`` of *X* (contiguous float64) into their slots of *out*
        (leaves, actions, confidences), in chunks of *chunk_rows* rows."""
        leaves, actions, confidences = out
        F = self.n_features
        C = min(chunk_rows, hi - lo)
        bufs = _Buffers(C, F)
        h, depth = self.heap_levels, self.depth
        first_step = 1 if self._root_simple and depth > 0 else 0
        if first_step:
            root_f, root_t = self._root_ft
            root_l, root_r = self._root_children
        fbits, fmask = self._fbits, self._fmask
        general_at = self._general_at_depth.tolist()
        h_feat_take, h_thr_take = self._h_feat.take, self._h_thr.take
        deep = depth > h
        t_thr_take = self._t_thr.take if deep else h_thr_take
        child2_take = self._child2.take if deep else h_thr_take

        # Thin tails of deep chunks, walked together (see _walk_pool).
        pool_rows: list[np.ndarray] = []
        pool_states: list[np.ndarray] = []
        pool_X: list[np.ndarray] = []
        pool_n, pool_from = 0, depth

        for start in range(lo, hi, C):
            m = min(C, hi - start)
            b = bufs if m == C else _Buffers(m, F)
            rowoff = b.rowoff
            block = X[start : start + m]
            flat = block.reshape(-1)
            if not np.isfinite(flat, out=b.finite).all():
                self._raise_non_finite(block, start)
            s, s_next, fi, xv, go = b.s, b.s_next, b.fi, b.xv, b.go
            tv = fi.view(np.float64)  # the x index is dead once x is read: one array less

            if first_step:  # the root's comparison straight on the column, no gathers
                np.greater(block[:, root_f], root_t, out=go)
                np.multiply(go, root_r - root_l, out=s)
                np.add(s, root_l, out=s)
            else:
                s.fill(1 if h else self._root_state)  # heap slot 1, or the packed root
            out_leaves = leaves[start : start + m]
            live = m  # rows still walking: s[:live], rows idx[:live] of the chunk
            idx = None
            views: tuple[np.ndarray, ...] | None = None  # the work arrays' first live items
            for d in range(first_step, depth):
                heap = d < h
                if d == h and h:
                    self._h_to_t.take(s, out=s_next, mode="clip")
                    s, s_next = s_next, s
                    views = None
                if not heap and (d - h) % COMPACT_EVERY == 0 and d > h:
                    # Rows standing on a leaf are done: write them out and walk on with the
                    # others only (deep unbalanced trees end most rows far above max_depth).
                    kv = s_next[:live]
                    np.bitwise_and(s[:live], fmask, out=kv)
                    done = np.equal(kv, F, out=b.flag[:live])
                    n_done = int(np.count_nonzero(done))
                    if n_done * COMPACT_FRACTION >= live:
                        if idx is None:
                            idx = np.arange(m, dtype=np.intp)
                        at_leaf = np.flatnonzero(done)
                        walking = np.flatnonzero(~done)
                        sl, il = s[:live], idx[:live]
                        at = sl.take(at_leaf) >> (fbits + 1)
                        out_leaves[il.take(at_leaf)] = self._t_node.take(at, mode="clip")
                        live -= n_done
                        sl.take(walking, out=s_next[:live])
                        s, s_next = s_next, s
                        views = None
                        il.take(walking, out=fi[:live])
                        idx[:live] = fi[:live]
                        np.multiply(idx[:live], F, out=rowoff[:live])
                        if live == 0:
                            break
                    if live * TAIL_FRACTION <= C and d + COMPACT_EVERY < depth:
                        # A thin tail: park its rows in the pool (walked with other chunks'
                        # tails, so the per-call overhead is paid once for all of them), and
                        # a copy of their rows of X, taken while the chunk is in the caches:
                        # the pool's gathers then read one small dense block instead of rows
                        # scattered over the whole batch (3x cheaper per row and level).
                        if idx is None:
                            idx = np.arange(m, dtype=np.intp)
                        pool_rows.append(idx[:live] + start)
                        pool_states.append(s[:live].copy())
                        pool_X.append(block.take(idx[:live], axis=0))
                        pool_n += live
                        pool_from = min(pool_from, d)
                        live = 0
                        break
                if views is None:  # sliced again only when the live rows or arrays change
                    views = (s[:live], fi[:live], xv[:live], tv[:live], go[:live])
                    views += (rowoff[:live], s_next[:live])
                sv, fv, xvv, tvv, gv, ro, kv = views
                # Positional arguments (indices, axis, out, mode) and bound methods: a step is
                # 7-8 calls, and keyword parsing is a tenth of a small call's overhead.
                if heap:
                    h_feat_take(sv, None, fv, "clip")
                    np.add(fv, ro, fv)
                    flat.take(fv, None, xvv, "clip")
                    h_thr_take(sv, None, tvv, "clip")
                    np.greater(xvv, tvv, gv)
                    if general_at[d]:
                        self._categorical_lookup(sv, xvv, gv, b.flag[:live], heap)
                    np.left_shift(sv, 1, sv)
                    np.add(sv, gv, sv)
                else:
                    np.bitwise_and(sv, fmask, fv)
                    np.add(fv, ro, fv)
                    flat.take(fv, None, xvv, "clip")
                    np.right_shift(sv, fbits, kv)
                    t_thr_take(kv, None, tvv, "clip")
                    np.greater(xvv, tvv, gv)
                    if general_at[d]:
                        self._categorical_lookup(kv, xvv, gv, b.flag[:live], heap)
                    np.add(kv, gv, kv)
                    child2_take(kv, None, sv, "clip")

            if idx is not None:
                out_leaves[idx[:live]] = self._t_node.take(s[:live] >> (fbits + 1))
                np.multiply(np.arange(m, dtype=np.intp), F, out=rowoff)  # reused by the next chunk
            elif depth <= h:
                self._h_node.take(s, out=out_leaves, mode="clip")
            else:
                np.right_shift(s, fbits + 1, out=s_next)
                self._t_node.take(s_next, out=out_leaves, mode="clip")
            if pool_n >= C or (pool_n and start + m == hi):
                pooled = np.concatenate(pool_rows)
                pooled_X = np.concatenate(pool_X).reshape(-1)
                self._walk_pool(pooled_X, pooled, pool_states, depth - pool_from, leaves)
                pooled_leaves = leaves.take(pooled)
                actions[pooled] = self._aux.take(pooled_leaves)
                confidences[pooled] = self._conf.take(pooled_leaves)
                pool_rows, pool_states, pool_X, pool_n, pool_from = [], [], [], 0, depth
            self._aux.take(out_leaves, out=actions[start : start + m], mode="clip")
            self._conf.take(out_leaves, out=confidences[start : start + m], mode="clip")

    def _walk_pool(
        self,
        X_flat: np.ndarray,
        rows: np.ndarray,
        pool_states: list[np.ndarray],
        steps: int,
        leaves: np.ndarray,
    ) -> None:
        """Walk the parked rows (their rows of X copied into *X_flat*, one after the other;
        global row indices; packed child-table states) to their leaves and write
        ``leaves[rows]``.  The rows come from different chunks and may stand at different
        depths: a leaf points to itself, so walking a row past its leaf changes nothing, and
        *steps* (max_depth minus the shallowest parking depth) reaches every leaf."""
        s = np.concatenate(pool_states)
        live = int(s.shape[0])
        F, fbits, fmask = self.n_features, self._fbits, self._fmask
        general = bool(self._general_at_depth[self.heap_levels :].any())
        rowoff = np.arange(live, dtype=np.intp) * F  # into the pool's own rows of X
        kv, fi = np.empty_like(s), np.empty_like(s)
        xv, tv = np.empty(live), np.empty(live)
        go, flag = np.empty(live, dtype=np.bool_), np.empty(live, dtype=np.bool_)
        for step in range(steps + 1):
            if step % COMPACT_EVERY == 0 or step == steps:
                k = kv[:live]
                np.bitwise_and(s, fmask, out=k)
                done = np.equal(k, F, out=flag[:live])
                n_done = int(np.count_nonzero(done))
                if n_done == live:
                    leaves[rows] = self._t_node.take(s >> (fbits + 1))
                    return
                if step == steps:  # pragma: no cover (a leaf within max_depth, always)
                    raise AssertionError("pool walk did not reach a leaf within max_depth")
                if n_done * COMPACT_FRACTION >= live:
                    at_leaf = np.flatnonzero(done)
                    walking = np.flatnonzero(~done)
                    at = s.take(at_leaf) >> (fbits + 1)
                    leaves[rows.take(at_leaf)] = self._t_node.take(at)
                    live -= n_done
                    rows = rows.take(walking)
                    s = s.take(walking)
                    rowoff = rowoff.take(walking)
            sv, fv, kl, xvv, tvv, gv = s, fi[:live], kv[:live], xv[:live], tv[:live], go[:live]
            np.bitwise_and(sv, fmask, out=fv)
            np.add(fv, rowoff, out=fv)
            X_flat.take(fv, out=xvv, mode="clip")
            np.right_shift(sv, fbits, out=kl)
            self._t_thr.take(kl, out=tvv, mode="clip")
            np.greater(xvv, tvv, out=gv)
            if general:
                self._categorical_lookup(kl, xvv, gv, flag[:live], False)
            np.add(kl, gv, out=kl)
            self._child2.take(kl, out=sv, mode="clip")

    def _categorical_lookup(
        self, s: np.ndarray, xv: np.ndarray, go: np.ndarray, flag: np.ndarray, heap: bool
    ) -> None:
        """Overwrite ``go`` for the rows standing on a general categorical split."""
        (self._h_general if heap else self._t_general).take(s, out=flag, mode="clip")
        rows = np.flatnonzero(flag)
        if rows.size == 0:
            return
        at = self._h_node[s[rows]] if heap else self._t_node[s[rows] >> 1]
        codes = np.clip(xv[rows], 0.0, self._catmax[at])
        index = self._catoff[at] + codes.astype(np.intp)
        go[rows] = self._membership[index] == 0

    def _raise_non_finite(self, block: np.ndarray, start: int) -> None:
        bad = np.argwhere(~np.isfinite(block))[0]
        row, col = int(bad[0]), int(bad[1])
        name = self.model.features[col].name
        raise InputError(f"row {start + row}: {name}: value {block[row, col]} is not finite")

    # ------------------------------------------------------------------ single input
    def evaluate_one(self, x: Sequence[float] | np.ndarray) -> Decision:
        """Evaluate one encoded input (a sequence of n_features floats)."""
        leaf = self._walk(x, None)
        py = self._py or self._lists()
        return Decision(py[5][leaf], py[6][leaf], leaf)

    def path(self, x: Sequence[float] | np.ndarray) -> list[int]:
        """Node indices from the root to the leaf that decides the encoded input *x*."""
        visited: list[int] = []
        self._walk(x, visited)
        return visited

    def _walk(self, x: Sequence[float] | np.ndarray, visited: list[int] | None) -> int:
        xs = x.tolist() if isinstance(x, np.ndarray) else list(x)
        if len(xs) != self.n_features:
            raise InputError(f"expected {self.n_features} values, got {len(xs)}")
        try:
            finite = all(map(math.isfinite, xs))
        except TypeError:
            raise InputError("an encoded input holds numbers only") from None
        if not finite:
            j = next(j for j, v in enumerate(xs) if not math.isfinite(v))
            raise InputError(f"{self.model.features[j].name}: value {xs[j]} is not finite")
        kinds, feats, thrs, lefts, rights, _, _, catmax = self._py or self._lists()
        i = 0
        for _ in range(self.depth + 1):
            if visited is not None:
                visited.append(i)
            k = kinds[i]
            if k == _NUMERIC:
                i = rights[i] if xs[feats[i]] > thrs[i] else lefts[i]
            elif k == _LEAF:
                return i
            else:
                code = min(max(xs[feats[i]], 0.0), catmax[i])
                i = lefts[i] if int(code) in self._cat_sets[i] else rights[i]
        raise AssertionError("walk did not reach a leaf within max_depth steps")  # pragma: no cover


class NodeWalker:
    """One input at a time, straight on the node records: no derived tables, nothing that
    grows with the tree is built (counterexample confirmation on a large model).  Same
    semantics as :class:`Evaluator` (clip into the domain, ``x <= t`` goes left, a code in
    the split's set goes left), checked against it in the tests."""

    def __init__(self, model: Model) -> None:
        self.model = model
        nodes = model.nodes
        self._fields = (nodes["kind"], nodes["feature"], nodes["value"], nodes["left"])
        self._right, self._aux = nodes["right"], nodes["aux"]
        self._lo = [f.min for f in model.features]
        self._hi = [f.max for f in model.features]
        self._size = [len(f.values) for f in model.features]

    def evaluate_one(self, x: Sequence[float] | np.ndarray) -> Decision:
        """The decision for one encoded input (a sequence of n_features floats)."""
        return self._walk(x, None)

    def path(self, x: Sequence[float] | np.ndarray) -> list[int]:
        """Node indices from the root to the leaf that decides the encoded input *x* (as
        :meth:`Evaluator.path`)."""
        visited: list[int] = []
        self._walk(x, visited)
        return visited

    def _walk(self, x: Sequence[float] | np.ndarray, visited: list[int] | None) -> Decision:
        xs = x.tolist() if isinstance(x, np.ndarray) else list(x)
        if len(xs) != len(self._lo):
            raise InputError(f"expected {len(self._lo)} values, got {len(xs)}")
        if not all(math.isfinite(v) for v in xs):
            j = next(j for j, v in enumerate(xs) if not math.isfinite(v))
            raise InputError(f"{self.model.features[j].name}: value {xs[j]} is not finite")
        kind, feat, value, left = self._fields
        i = 0
        for _ in range(self.model.max_depth + 1):
            k = int(kind[i])
            if visited is not None:
                visited.append(i)
            if k == _LEAF:
                return Decision(int(self._aux[i]), float(value[i]), i)
            f = int(feat[i])
            v = min(max(xs[f], self._lo[f]), self._hi[f])
            if k == _NUMERIC:
                go_left = v <= float(value[i])
            else:
                code = int(min(max(v, 0.0), self._size[f] - 1))
                go_left = bool(self.model.membership[int(self._aux[i]) + code])
            i = int(left[i]) if go_left else int(self._right[i])
        raise AssertionError("walk did not reach a leaf within max_depth steps")  # pragma: no cover


def _runnable_tasks() -> int | None:
    """Tasks runnable on the machine right now (the 4th field of Linux's /proc/loadavg,
    the reader among them), or None where it cannot be read.  An instantaneous count: the
    load averages lag by a minute and count this process's own threads of the last calls."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _staggered(m: int, dtypes: tuple[Any, ...], stagger: int = 576) -> list[np.ndarray]:
    """Arrays of *m* items carved from one block, each starting at a different offset within
    a 4 KiB page: separately allocated large arrays are page-aligned, and streaming over
    several of them at equal page offsets makes loads and stores alias (up to 15 % slower)."""
    sizes = [m * np.dtype(t).itemsize for t in dtypes]
    # Each array may need up to 4095 bytes to reach a page start plus up to 4095 of stagger.
    block = np.empty(sum(sizes) + len(dtypes) * 8192, dtype=np.uint8)
    address = block.ctypes.data
    out, end = [], 0
    for k, (dtype, size) in enumerate(zip(dtypes, sizes, strict=True)):
        start = end + (-(address + end)) % 4096 + k * stagger % 4096
        out.append(block[start : start + size].view(dtype))
        assert out[-1].size == m
        end = start + size
    return out


class _Buffers:
    """Per-chunk work arrays, reused across chunks and steps."""

    __slots__ = ("fi", "finite", "flag", "go", "rowoff", "s", "s_next", "xv")
    s: npt.NDArray[np.intp]
    s_next: npt.NDArray[np.intp]
    fi: npt.NDArray[np.intp]
    xv: npt.NDArray[np.float64]
    go: npt.NDArray[np.bool_]
    flag: npt.NDArray[np.bool_]
    rowoff: npt.NDArray[np.intp]
    finite: npt.NDArray[np.bool_]

    def __init__(self, m: int, n_features: int) -> None:
        names = ("s", "s_next", "fi", "xv", "go", "flag", "rowoff", "finite")
        types = (np.intp, np.intp, np.intp, np.float64, np.bool_, np.bool_, np.intp)
        arrays = _staggered(m, types)
        arrays.append(np.empty(m * n_features, dtype=np.bool_))
        for name, a in zip(names, arrays, strict=True):
            setattr(self, name, a)
        np.multiply(np.arange(m, dtype=np.intp), n_features, out=self.rowoff)
