"""Shared test helpers: running the real ``clefprove`` command in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_cli(
    *args: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    stdin: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    stdout: int | None = subprocess.PIPE,
    text: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[Any]:
    """``python -m clefprove ARGS`` in *cwd* (default: the repository root), with *stdin* fed
    (default: empty, never the terminal), *env* added to the environment and *unset* removed
    from it, bounded by *timeout*; stdout and stderr captured (str, or bytes when not *text*)."""
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    environ.update(env or {})
    if stdin is None:
        stdin = "" if text else b""
    return subprocess.run(
        [sys.executable, "-m", "clefprove", *map(str, args)],
        cwd=cwd if cwd is not None else ROOT,
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=text,
        env=environ,
        timeout=timeout,
        check=False,
    )
