"""Shared test helpers: running the real ``clefprove`` command in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


#: LightGBM training modes the import tests cover: binary (also with ``zero_as_missing``),
#: multi-class, random-forest mode.
LIGHTGBM_MODES: list[dict[str, Any]] = [
    {"objective": "binary"},
    {"objective": "binary", "zero_as_missing": True},
    {"objective": "multiclass", "num_class": 3},
    {"objective": "binary", "boosting": "rf", "bagging_fraction": 0.7, "bagging_freq": 1},
]


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
    # This checkout, whatever the working directory: a relative PYTHONPATH, or none with
    # another checkout installed in editable mode, would run that other checkout's code.
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), environ.get("PYTHONPATH", "")) if p
    )
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


def categorical_xgboost(path: Path, rounds: int, **params: Any) -> tuple[Any, dict[str, Any], Any]:
    """Train an XGBoost ``binary:logistic`` model on a categorical feature ``ua`` (codes 0-6,
    class 1 for codes 1, 3, 5) and a float feature ``x``, with categorical splits
    (``max_cat_to_onehot`` 1), *rounds* rounds and *params* on top; save it to *path*.
    Returns the booster, the ``DMatrix`` keywords that declare the features, and
    ``rows(n)``, which draws *n* test rows from the same generator."""
    import numpy as np
    import xgboost as xgb

    rng = np.random.default_rng(8)
    n = 800
    cats = rng.integers(0, 7, n).astype(float)
    X = np.column_stack([cats, rng.normal(size=n)])
    y = (np.isin(cats, [1, 3, 5]) ^ (X[:, 1] > 0.8)).astype(int)
    kw = {"feature_types": ["c", "q"], "enable_categorical": True, "feature_names": ["ua", "x"]}
    base = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}
    train = xgb.DMatrix(X, label=y, **kw)
    bst = xgb.train({**base, **params, "tree_method": "hist"}, train, rounds)
    bst.save_model(path)

    def rows(count: int) -> Any:
        return np.column_stack([rng.integers(0, 7, count).astype(float), rng.normal(size=count)])

    return bst, kw, rows
