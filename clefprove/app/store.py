"""The store of admitted models: ``DIR/<sha256>.clef`` and its check report ``<sha256>.json``.

A file handed to the service is first written to ``DIR/incoming/`` under a unique name and
gated there; only an admitted one is renamed to its sha256 name, after its report is written,
so a name in the store always means "these bytes passed the gate".  Every write is a
temporary file renamed into place.  The gate worker admits, the diff worker annotates and the
serving process stages: writes of a record hold an advisory lock on ``DIR/.lock`` (``flock``),
so a record is never rewritten from a stale copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clefprove.errors import ClefproveError
from clefprove.fileio import write_atomic

DEFAULT_DIR = ".clefprove-store"


class ModelStore:
    """Admitted models and their reports in one directory (created if missing)."""

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_DIR, sweep: bool = True) -> None:
        """*sweep*: delete what a killed process left in ``incoming/`` (the serving process,
        at start-up; never a worker, which would delete the file it is handed)."""
        self.directory = Path(directory)
        self.incoming = self.directory / "incoming"
        if not sweep:
            return
        try:
            self.incoming.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ClefproveError(
                f"{self.directory}: cannot create the model store: {exc.strerror or exc}"
            ) from None
        for stale in self.incoming.iterdir():  # left by a process that was killed mid-reload
            with contextlib.suppress(OSError):
                stale.unlink()

    def model_path(self, sha256: str) -> Path:
        return self.directory / f"{sha256}.clef"

    def report_path(self, sha256: str) -> Path:
        return self.directory / f"{sha256}.json"

    def stage(self, data: bytes | memoryview) -> Path:
        """Write *data* to a new file in ``incoming/`` (to be gated) and return its path."""
        fd, name = tempfile.mkstemp(dir=self.incoming, suffix=".clef")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
        return Path(name)

    def stage_and_hash(self, data: bytes) -> tuple[Path, str]:
        """:meth:`stage` *data*, and its sha256 (what the serving process runs in a thread:
        the write and the hash release the interpreter lock)."""
        return self.stage(data), hashlib.sha256(data).hexdigest()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ClefproveError(
                f"{self.directory}: cannot lock the model store: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def admit(self, staged: Path, sha256: str, record: dict[str, Any]) -> Path:
        """Keep the gated file *staged* as ``<sha256>.clef`` with *record* beside it."""
        text = json.dumps(record, indent=2, allow_nan=False) + "\n"
        target = self.model_path(sha256)
        with self._locked():
            write_atomic(self.report_path(sha256), text)
            os.replace(staged, target)
        return target

    def annotate(self, sha256: str, key: str, value: Any) -> None:
        """Add *key* to the record of the admitted model *sha256*."""
        path = self.report_path(sha256)
        with self._locked():
            record = json.loads(path.read_text(encoding="utf-8"))
            record[key] = value
            write_atomic(path, json.dumps(record, indent=2, allow_nan=False) + "\n")

    def discard(self, staged: Path) -> None:
        with contextlib.suppress(OSError):
            staged.unlink()
