"""The persistent proof cache: one SQLite file in WAL mode, safe for concurrent processes.

Three tables, every row carrying a checksum of its own key and value:

* ``subtree (node, scope) -> leaves``: "every path below this subtree is safe".  ``node`` is
  sha256(subtree Merkle hash + canonical context box), ``scope`` is sha256(invariant digest +
  domain digest + clefprove version); ``leaves`` is the subtree's leaf count, compared with the
  current model's on every hit.  Only proofs are stored here (violated leaves are kept with
  their witnesses in the ``outcomes`` snapshots below).
* ``result key -> JSON``: a whole invariant's result on a whole model (keyed by the model's
  content digest, the invariant's digest *and* its name/file/line, and ``--counterexamples``),
  stored only when no path is unknown.  It is what makes an unchanged model cost a lookup.
* ``snapshot key -> (kind, bytes)``: what the next version is re-checked against
  (:mod:`clefprove.incremental.delta`): ``tree`` rows hold a model version's node records,
  ``treed`` rows the records of a version that differ from a full ``tree`` row (the newest
  :data:`KEEP_TREES` versions are kept, with the full rows their deltas rest on),
  ``outcomes`` rows one invariant's per-leaf outcomes (and witnesses) on the version it last
  checked.

Integrity: ``PRAGMA quick_check`` when the file is opened, a checksum on every row read, and
``sqlite3.DatabaseError`` on any statement all mean "corrupt": the file (with its -wal/-shm
companions) is renamed aside to ``*.corrupt-<time>-<pid>``, a warning goes to stderr, and a
new empty cache is created.  A cache that cannot be written (locked past the busy timeout, a
read-only directory) only costs speed: a warning, and the run goes on without storing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol, Self

import xxhash

from clefprove.errors import ClefproveError

#: Default cache directory (relative to the working directory).
DEFAULT_DIR = ".clefprove-cache"
#: File name inside the cache directory; bump the suffix when the schema changes.
DB_NAME = "proofs-v3.sqlite"
SCHEMA_VERSION = "3"
#: Most parameters in one ``IN (...)`` list (SQLite's historical limit is 999).
_CHUNK = 900
_BUSY_MS = 10_000
#: Largest cache file that gets a full ``PRAGMA quick_check`` when opened (bytes).
QUICK_CHECK_MAX = 32 * 1024 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS subtree (
    node BLOB NOT NULL, scope BLOB NOT NULL, leaves INTEGER NOT NULL, chk BLOB NOT NULL,
    PRIMARY KEY (node, scope)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS result (
    key BLOB PRIMARY KEY, value TEXT NOT NULL, chk BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshot (
    key BLOB PRIMARY KEY, kind TEXT NOT NULL, stamp INTEGER NOT NULL, chk BLOB NOT NULL,
    value BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS snapshot_kind_stamp ON snapshot (kind, stamp);
"""

#: How much of the cache file SQLite reads through a memory mapping (bytes).
MMAP_BYTES = 1 << 30

#: Page size of a new cache file (bytes).
PAGE_SIZE = 65536

#: Tree snapshots kept (the most recently stored); older ones are deleted when one is stored.
KEEP_TREES = 16


class CacheCorrupt(Exception):
    """The cache file failed an integrity check (handled inside this package)."""


class _Disabled(Exception):
    """The cache could not be opened: behave as an empty, read-only cache."""


def _subtree_chk(node: bytes, scope: bytes, leaves: int) -> bytes:
    return hashlib.sha256(b"subtree\0" + node + scope + leaves.to_bytes(8, "little")).digest()[:8]


def _result_chk(key: bytes, value: str) -> bytes:
    return hashlib.sha256(b"result\0" + key + value.encode()).digest()[:8]


def _snapshot_chk(key: bytes, kind: str, value: bytes) -> bytes:
    return _snapshot_chk_of(key, kind, len(value), xxhash.xxh3_64_intdigest(value))


def _snapshot_chk_of(key: bytes, kind: str, size: int, digest: int) -> bytes:
    # The value enters by its length and 64-bit XXH3: a tree snapshot is 24 bytes per node
    # (22 MB at 947K nodes), which XXH3 reads in under 1 ms, zlib's CRC-32 in 6-9 ms (cache
    # schema 2) and sha256 in 13 ms.  Every byte, even of a streamed row: docs/incremental.md
    # says why a cheaper check of an old tree is not sound.  Like every row's checksum (none
    # has a secret), it detects damage, not forgery.
    tail = size.to_bytes(8, "little") + digest.to_bytes(8, "little")
    return hashlib.sha256(b"snapshot\0" + key + kind.encode() + b"\0" + tail).digest()[:8]


class Sink(Protocol):
    """Takes a snapshot row's value piece by piece (see :meth:`CacheStore.lookup_snapshots`)."""

    def wanted(self) -> int:
        """How many bytes to feed next (0: all the rest)."""
        ...

    def feed(self, piece: bytes) -> None:
        """The next bytes of the value, as many as :meth:`wanted` asked for."""
        ...

    def verified(self) -> None:
        """Every byte was fed and the row's checksum matched them."""
        ...


def warn(message: str) -> None:
    sys.stderr.write(f"clefprove: warning: {message}\n")
    sys.stderr.flush()


class CacheStore:
    """A proof cache in *directory* (created if missing).  See the module docstring."""

    def __init__(
        self, directory: str | os.PathLike[str] = DEFAULT_DIR, *, opened: CacheStore | None = None
    ) -> None:
        """*opened*: a store of *directory* already open, whose connection, warnings and state
        this one takes over (it is then detached)."""
        if opened is not None:
            self._take_over(opened)
            return
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.warnings: list[str] = []
        self.writable = True
        self.disabled = False
        self.stats = {"lookups": 0, "hits": 0, "stored": 0}
        #: Seconds spent per stage of the re-checks run through this cache (summed over runs;
        #: ``bench/bench_incremental.py`` prints them).
        self.timings: dict[str, float] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ClefproveError(
                f"{self.directory}: cannot create the cache directory: {exc.strerror or exc}"
            ) from exc
        if self.directory.exists() and not self.directory.is_dir():
            raise ClefproveError(f"{self.directory}: not a directory (--cache)")
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            with contextlib.suppress(OSError):
                ignore.write_text("# clefprove proof cache: safe to delete\n*\n")
        self._conn: sqlite3.Connection | None = None
        self._open()

    # ------------------------------------------------------------ lifecycle

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warn(message)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        # A new file gets large pages (ignored for an existing one: its page size is fixed):
        # snapshots are blobs of megabytes, and 4 KB pages make SQLite chain thousands of
        # overflow pages per row (and checkpoint the WAL after every such write).
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        return conn

    def _open(self, retry: bool = True) -> None:
        try:
            conn = self._connect()
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            # A cache needs no durability: a write lost to a power cut is a proof to redo, and
            # damage is detected (quick_check, row checksums) and rebuilt.
            conn.execute("PRAGMA synchronous = OFF")
            # Reads through a mapping of the file: a 22 MB tree snapshot comes out of its
            # overflow pages in 7 ms instead of 35 ms.  Safe here because nothing truncates a
            # live cache file (no VACUUM, no auto_vacuum; a damaged one is renamed aside).
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            # quick_check reads the whole file (about 1 ms per MB); past QUICK_CHECK_MAX the
            # per-row checksums and SQLite's own errors on every read are the integrity check.
            size = self.path.stat().st_size if self.path.exists() else 0
            ok = (
                conn.execute("PRAGMA quick_check").fetchall()
                if size <= QUICK_CHECK_MAX
                else [("ok",)]
            )
            if ok != [("ok",)]:
                conn.close()
                raise CacheCorrupt(f"integrity check failed: {ok[0][0] if ok else '?'}")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)",
                    (SCHEMA_VERSION,),
                )
            elif row[0] != SCHEMA_VERSION:
                conn.close()
                raise CacheCorrupt(f"unknown cache schema {row[0]!r}")
            if mode is None or str(mode[0]).lower() != "wal":
                self._warn(f"{self.path}: WAL mode unavailable; concurrent runs will wait")
            self._conn = conn
        except (sqlite3.DatabaseError, CacheCorrupt, UnicodeDecodeError, ValueError) as exc:
            unusable = isinstance(exc, sqlite3.OperationalError) and (
                _is_locked(exc) or "unable to open" in str(exc)
            )
            if unusable or not retry:
                # The cache only ever saves time: run without it rather than fail the check.
                self.disabled = True
                self._warn(f"{self.path}: proof cache unavailable ({exc}); checking without it")
                return
            self._set_aside(str(exc))
            self._open(retry=False)

    def _set_aside(self, reason: str) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        stamp = f"corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        moved = None
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            try:
                os.replace(src, f"{self.path}.{stamp}{suffix}")
                if not suffix:
                    moved = f"{self.path}.{stamp}"
            except FileNotFoundError:
                pass
            except OSError:
                with contextlib.suppress(OSError):
                    src.unlink()
        where = f"; kept as {moved}" if moved else ""
        self._warn(f"{self.path}: corrupt proof cache ({reason}); rebuilding it{where}")

    def reset(self, reason: str) -> None:
        """Set the current file aside and start an empty cache (after corruption is found)."""
        self._set_aside(reason)
        self._open(retry=False)

    def disable(self, reason: str) -> None:
        """Stop using the cache for the rest of this run (reads miss, writes are skipped)."""
        self.close()
        self.disabled = True
        self._warn(f"{self.path}: proof cache disabled for this run ({reason})")

    def _take_over(self, other: CacheStore) -> None:
        self.directory, self.path = other.directory, other.path
        self.warnings, self.stats, self.timings = other.warnings, other.stats, other.timings
        self.writable, self.disabled = other.writable, other.disabled
        self._conn = other._conn
        other.detach()

    def detach(self) -> None:
        """Forget the connection without closing it (another object took it over)."""
        self._conn = None
        self.disabled = True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None and not self.disabled:
            self._open(retry=False)
        if self._conn is None:
            raise _Disabled
        return self._conn

    # ------------------------------------------------------------ reads

    def lookup_subtrees(self, nodes: Sequence[bytes]) -> dict[tuple[bytes, bytes], int]:
        """``(node, scope) -> leaves`` for every stored proof of any of *nodes*.

        Raises :class:`CacheCorrupt` when a row fails its checksum or SQLite reports damage.
        """
        out: dict[tuple[bytes, bytes], int] = {}
        uniq = list(dict.fromkeys(nodes))
        self.stats["lookups"] += len(uniq)
        try:
            for a in range(0, len(uniq), _CHUNK):
                part = uniq[a : a + _CHUNK]
                q = ",".join("?" * len(part))
                for node, scope, leaves, chk in self.conn.execute(
                    f"SELECT node, scope, leaves, chk FROM subtree WHERE node IN ({q})", part
                ):
                    if chk != _subtree_chk(node, scope, int(leaves)):
                        raise CacheCorrupt("a proof row fails its checksum")
                    out[(bytes(node), bytes(scope))] = int(leaves)
        except _Disabled:
            return {}
        except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError, TypeError) as exc:
            # A damaged page can also change a value's type or make its text undecodable.
            raise CacheCorrupt(f"{type(exc).__name__}: {exc}") from exc
        self.stats["hits"] += len(out)
        return out

    def lookup_results(self, keys: Sequence[bytes]) -> dict[bytes, str]:
        """``key -> JSON`` of every stored whole-model result among *keys*."""
        out: dict[bytes, str] = {}
        try:
            for a in range(0, len(keys), _CHUNK):
                part = list(keys[a : a + _CHUNK])
                q = ",".join("?" * len(part))
                for key, value, chk in self.conn.execute(
                    f"SELECT key, value, chk FROM result WHERE key IN ({q})", part
                ):
                    if chk != _result_chk(key, value):
                        raise CacheCorrupt("a result row fails its checksum")
                    out[bytes(key)] = value
        except _Disabled:
            return {}
        except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError, TypeError) as exc:
            # A damaged page can also change a value's type or make its text undecodable.
            raise CacheCorrupt(f"{type(exc).__name__}: {exc}") from exc
        return out

    def lookup_snapshots(
        self,
        keys: Sequence[bytes],
        referenced: bool = False,
        stream: Callable[[bytes, str, int], Sink | None] | None = None,
    ) -> dict[bytes, tuple[str, bytes]]:
        """``key -> (kind, bytes)`` of every stored snapshot among *keys* (see
        :mod:`clefprove.incremental.delta`); with *referenced*, also the tree rows that the
        ``outcomes`` and ``pairs`` rows among them name (their first 32 bytes), in the same query.

        *stream* ``(key, kind, size)`` may return a :class:`Sink` for a row: its value is then
        fed to the sink piece by piece (never copied whole) and left out of the answer; the
        sink hears :meth:`Sink.verified` once the row's checksum matched every byte fed."""
        out: dict[bytes, tuple[str, bytes]] = {}
        try:
            conn = self.conn
            uniq = list(dict.fromkeys(keys))
            # One read transaction: the rows found and the values read by rowid below are
            # of the same version of the file, whatever other processes write meanwhile.
            began = not conn.in_transaction
            if began:
                conn.execute("BEGIN")
            try:
                for a in range(0, len(uniq), _CHUNK):
                    part = uniq[a : a + _CHUNK]
                    q = ",".join("?" * len(part))
                    sql = f"SELECT key, kind, rowid, chk FROM snapshot WHERE key IN ({q})"
                    if referenced:
                        sql += (
                            " OR key IN (SELECT substr(value, 1, 32) FROM snapshot WHERE kind IN "
                            f"('outcomes', 'pairs') AND key IN ({q}))"
                        )
                    found = conn.execute(sql, part * 2 if referenced else part).fetchall()
                    for key, kind, rowid, chk in found:
                        # Read as a blob: a 22 MB tree comes out of the mapped file in a third
                        # of the time a SELECT of the value takes.
                        with conn.blobopen("snapshot", "value", rowid, readonly=True) as blob:
                            sink = stream(bytes(key), str(kind), len(blob)) if stream else None
                            if sink is not None:
                                _stream(blob, sink, bytes(key), str(kind), chk)
                                continue
                            value = blob.read()
                        if chk != _snapshot_chk(key, kind, value):
                            raise CacheCorrupt("a snapshot row fails its checksum")
                        out[bytes(key)] = (str(kind), value)
            finally:
                if began:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("COMMIT")
        except _Disabled:
            return {}
        except (sqlite3.DatabaseError, UnicodeDecodeError, ValueError, TypeError) as exc:
            raise CacheCorrupt(f"{type(exc).__name__}: {exc}") from exc
        return out

    # ------------------------------------------------------------ writes

    def store(
        self,
        subtrees: Iterable[tuple[bytes, bytes, int]],
        results: Iterable[tuple[bytes, str]] = (),
        snapshots: Iterable[tuple[bytes, str, bytes]] = (),
    ) -> None:
        """Store proofs ``(node, scope, leaves)``, results ``(key, json)`` and snapshots
        ``(key, kind, bytes)`` in one transaction; keeps the newest :data:`KEEP_TREES` tree
        snapshots.

        A locked or read-only cache is a warning, never an error; damage raises CacheCorrupt.
        """
        rows = [(n, s, int(c), _subtree_chk(n, s, int(c))) for n, s, c in subtrees]
        res = [(k, v, _result_chk(k, v)) for k, v in results]
        stamp = time.time_ns()
        snaps = [(k, kind, v, _snapshot_chk(k, kind, v), stamp) for k, kind, v in snapshots]
        if not (rows or res or snaps) or not self.writable or self.disabled:
            return
        try:
            conn = self.conn
        except _Disabled:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO subtree (node, scope, leaves, chk) VALUES (?,?,?,?)",
                    rows,
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO result (key, value, chk) VALUES (?,?,?)", res
                )
                if snaps:
                    conn.executemany(
                        "INSERT OR REPLACE INTO snapshot (key, kind, value, chk, stamp) "
                        "VALUES (?,?,?,?,?)",
                        snaps,
                    )
                if any(row[1] in ("tree", "treed") for row in snaps):
                    # The newest versions, full or deltas, and every full snapshot that a
                    # kept delta rests on (its first 32 bytes name it).
                    conn.execute(
                        "DELETE FROM snapshot WHERE kind IN ('tree', 'treed') AND key NOT IN "
                        "(SELECT key FROM snapshot WHERE kind IN ('tree', 'treed') "
                        "ORDER BY stamp DESC LIMIT ?) AND key NOT IN (SELECT substr(value, 1, "
                        "32) FROM snapshot WHERE kind = 'treed' AND key IN (SELECT key FROM "
                        "snapshot WHERE kind IN ('tree', 'treed') ORDER BY stamp DESC LIMIT ?))",
                        (KEEP_TREES, KEEP_TREES),
                    )
                if any(row[1] == "outb" for row in snaps):
                    # Full outcomes rows that no outcomes row rests on any more (bytes 33-64).
                    conn.execute(
                        "DELETE FROM snapshot WHERE kind = 'outb' AND key NOT IN (SELECT "
                        "substr(value, 33, 32) FROM snapshot WHERE kind = 'outcomes')"
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self.stats["stored"] += len(rows) + len(res) + len(snaps)
        except sqlite3.OperationalError as exc:
            if _is_locked(exc) or "readonly" in str(exc).lower():
                self.writable = False
                self._warn(f"{self.path}: cannot write the proof cache ({exc}); not storing")
                return
            raise CacheCorrupt(str(exc)) from exc
        except sqlite3.DatabaseError as exc:
            raise CacheCorrupt(str(exc)) from exc


def cache_directory(directory: str | os.PathLike[str] | None, disabled: bool = False) -> str | None:
    """The proof cache directory that ``--cache DIR`` / ``--no-cache`` select, created; None
    when disabled.

    An explicit DIR must have an existing parent (:func:`require_parent`) and be creatable, or
    it is a :class:`ClefproveError` (exit 2) before any work.  The default (the environment's
    ``CLEFPROVE_CACHE``, else ``.clefprove-cache``) was not asked for on the command line: one
    that cannot be created (a read-only checkout, a file in its place) only costs speed, as a
    cache that cannot be opened or written does (docs/incremental.md): a warning and None,
    never an exit 2 (nor, in ``serve``'s gate worker, a crash)."""
    if disabled:
        return None
    if directory is not None:
        require_parent(directory)
        _make(directory)
        return os.fspath(directory)
    default = default_directory()
    try:
        _make(default, parents=True)
    except ClefproveError as exc:
        warn(f"proof cache unavailable ({exc}); checking without it")
        return None
    return default


def _make(directory: str | os.PathLike[str], parents: bool = False) -> None:
    path = Path(directory)
    try:
        path.mkdir(parents=parents, exist_ok=True)
    except OSError as exc:
        raise ClefproveError(
            f"{directory}: cannot create the cache directory: {exc.strerror or exc}"
        ) from None
    if not path.is_dir():
        raise ClefproveError(f"{directory}: not a directory (--cache)")


def require_parent(directory: str | os.PathLike[str], option: str = "--cache") -> None:
    """``--cache DIR`` (and ``serve --store DIR``) creates DIR if it is missing, never its
    parents: a mistyped path must not silently build a tree of directories (``-o FILE``
    refuses a missing directory too)."""
    parent = Path(os.path.abspath(directory)).parent
    if not Path(directory).exists() and not parent.is_dir():
        raise ClefproveError(f"{option} {directory}: directory {parent} does not exist")


def default_directory() -> str:
    """The cache directory when ``--cache`` is not given."""
    return os.environ.get("CLEFPROVE_CACHE") or DEFAULT_DIR


def _stream(blob: sqlite3.Blob, sink: Sink, key: bytes, kind: str, chk: bytes) -> None:
    """Feed the value of *blob* to *sink* piece by piece, its digest taken on the way."""
    size = left = len(blob)
    digest = xxhash.xxh3_64()
    while left:
        want = sink.wanted()
        piece = blob.read(want if 0 < want < left else left)
        if not piece:
            raise CacheCorrupt("a snapshot row ends early")
        digest.update(piece)
        left -= len(piece)
        sink.feed(piece)
    if chk != _snapshot_chk_of(key, kind, size, digest.intdigest()):
        raise CacheCorrupt("a snapshot row fails its checksum")
    sink.verified()


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
