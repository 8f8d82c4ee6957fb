"""``clefprove gate``: the pre-deploy hook run before a decision service reloads a model.

1. **Integrity**: the new file must be a genuine ``.clef`` file (a JSON source, even renamed,
   is refused: the gate vouches for the exact bytes the runtime maps) and is loaded with full
   validation (magic, version, structure and the trailing SHA-256); any defect is exit 2.  The
   digest shown is the SHA-256 of the whole file, what ``sha256sum`` prints.
2. **Incremental check** of every invariant, reusing the proof cache (see
   :mod:`clefprove.incremental.walk`); verdicts are those of a fresh ``check``.
3. **Behaviour diff** against ``--previous`` when given: how much changed, a summary only
   (``clefprove diff`` has the detail).

Exit status: 0 only when every invariant holds; 1 one is violated; 3 none violated but one is
unknown; 2 bad input.  The diff never changes the exit status.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from clefprove.dsl.checked import CheckedProgram
from clefprove.frozen import frozen
from clefprove.incremental import diff as df
from clefprove.incremental.cache import ProofCache
from clefprove.verify.verdicts import Report


@frozen
class GateResult:
    model_path: str
    sha256: str
    report: Report
    diff: df.DiffReport | None
    seconds: float
    cache_dir: str | None

    @property
    def exit_code(self) -> int:
        return self.report.exit_code

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gate": "pass" if self.passed else "fail",
            "exit_code": self.exit_code,
            "integrity": {"path": self.model_path, "sha256": self.sha256, "ok": True},
            "check": self.report.to_json_dict(),
            "cache": self.cache_dir,
            "seconds": round(self.seconds, 6),
        }
        if self.diff is not None:
            d = self.diff.to_json_dict()
            d["semantic"].pop("regions", None)
            out["diff"] = d
        return out


def run_gate(
    new: str | os.PathLike[str],
    invariants: Sequence[str | os.PathLike[str]] | CheckedProgram,
    previous: str | os.PathLike[str] | None = None,
    cache: ProofCache | None = None,
    loaded: Any = None,
    **check_options: Any,
) -> GateResult:
    """Run the gate (see module docstring); raises ClefproveError on bad input.

    *invariants* are .inv paths, or a program already checked against *new*'s features and
    actions (a caller that gates many versions of one model parses the files once).
    *loaded*: the model of the file *new*, loaded by the caller with full validation
    (``load_bytes`` of the bytes it wrote there: the service's gate worker), not read again."""
    from clefprove.dsl.loader import load_invariants
    from clefprove.incremental.compare import diff_models
    from clefprove.model.loading import load_any
    from clefprove.verify.api import check

    t0 = time.perf_counter()
    model = loaded if loaded is not None else load_any(new, clef_only=True)  # full validation
    old = load_any(previous) if previous is not None else None
    if isinstance(invariants, CheckedProgram):
        program = invariants
    else:
        program = load_invariants(list(invariants), model)
    report = check(model, program, cache=cache, model_path=str(new), **check_options)
    d = None
    if old is not None:
        # a tree against an ensemble (a model retrained as a forest) is reported, not refused
        d = diff_models(old, model, str(previous), str(new), limit=3, refuse_mixed=False)
    return GateResult(
        str(new),
        model.sha256,
        report,
        d,
        time.perf_counter() - t0,
        str(cache.directory) if cache is not None else None,
    )
