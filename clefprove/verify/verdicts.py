"""What ``check`` returns: counterexamples, per-invariant results and the whole report.

:meth:`Report.to_json_dict` is exactly the JSON object of SPEC §4 (plus a few extra keys);
:attr:`Report.exit_code` is the exit status of SPEC §4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from clefprove.frozen import frozen
from clefprove.status import ExitCode, Verdict

#: A leaf's region text, given the leaf and an input record that reaches it.
RegionOf = Callable[[int, dict[str, Any]], tuple[str, ...]]

HOLDS, VIOLATED, UNKNOWN = Verdict.HOLDS, Verdict.VIOLATED, Verdict.UNKNOWN


def settle(
    where: str,
    name: str,
    n_violating: int,
    n_unknown: int,
    is_vacuous: Callable[[], bool],
    warnings: list[str],
) -> tuple[Verdict, bool]:
    """An invariant's status from its path counts, and whether it holds vacuously (asked only
    of a holding invariant); a vacuous one gets a warning appended to *warnings*."""
    if n_violating:
        return VIOLATED, False
    if n_unknown:
        return UNKNOWN, False
    vacuous = is_vacuous()
    if vacuous:
        warnings.append(
            f"{where}: invariant '{name}' holds vacuously: "
            "no input in the domain satisfies its 'when'"
        )
    return HOLDS, vacuous


class Located(Protocol):
    """Where an invariant was written and what it is called (a checked invariant)."""

    @property
    def name(self) -> str: ...
    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def description(self) -> str | None: ...


def settled_result(
    inv: Located,
    n_violating: int,
    n_unknown: int,
    is_vacuous: Callable[[], bool],
    warnings: list[str],
    counterexamples: Sequence[Counterexample | RelationalCounterexample],
    seconds: float,
    *,
    paths_checked: int,
    paths_reused: int = 0,
    solver_paths: int = 0,
    relation: str | None = None,
    share: float | None = None,
) -> InvariantResult:
    """The result of every check path: :func:`settle` on the counts, then the record.  *share*
    (an ensemble search's proved share of the domain) is reported for an unknown verdict, as
    1.0 for a holding one and not at all for a violated one."""
    verdict, vacuous = settle(
        f"{inv.file}:{inv.line}", inv.name, n_violating, n_unknown, is_vacuous, warnings
    )
    proved_share = None
    if share is not None and verdict != VIOLATED:
        proved_share = 1.0 if verdict == HOLDS else share
    return InvariantResult(
        invariant=inv.name,
        file=inv.file,
        line=inv.line,
        column=inv.column,
        status=verdict,
        vacuous=vacuous,
        violating_paths=n_violating,
        unknown_paths=n_unknown,
        counterexamples=tuple(counterexamples),
        seconds=seconds,
        paths_checked=paths_checked,
        paths_reused=paths_reused,
        description=inv.description,
        solver_paths=solver_paths,
        warnings=tuple(warnings),
        relation=relation,
        proved_share=proved_share,
    )


EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_UNKNOWN = (
    ExitCode.OK,
    ExitCode.VIOLATED,
    ExitCode.USAGE,
    ExitCode.UNKNOWN,
)


def ordered(values: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """*values* with its keys in *order* (the model's declaration order), unknown keys last."""
    out = {k: values[k] for k in order if k in values}
    out.update((k, v) for k, v in values.items() if k not in out)
    return out


def _leaves_text(leaves: Sequence[int]) -> str:
    """``leaves a, b, ... of T trees``: an ensemble decision's leaves, the first 8."""
    shown = ", ".join(map(str, leaves[:8]))
    return f"leaves {shown}{', ...' if len(leaves) > 8 else ''} of {len(leaves)} trees"


@frozen
class Counterexample:
    """A complete in-domain input (JSON values) that the evaluator maps to ``action`` at
    ``leaf``, satisfying ``when`` and breaking ``ensure``; ``path`` is its readable route."""

    input: dict[str, Any]
    action: str
    confidence: float
    leaf: int
    path: tuple[str, ...]
    #: the box the path selects, one condition per feature it narrows (what the text shows)
    region: tuple[str, ...] = ()

    def in_feature_order(self, order: Sequence[str]) -> Counterexample:
        return replace(self, input=ordered(self.input, order))

    def with_regions(self, region_of: RegionOf) -> Counterexample:
        return replace(self, region=region_of(self.leaf, self.input))

    @property
    def described(self) -> bool:
        """Whether its region is filled in (a result kept by the proof cache has it)."""
        return bool(self.region)

    #: For an ensemble: each tree's leaf (tree-local node index); ``leaf`` is then -1, and
    #: ``path`` the box where every tree reaches its leaf (:attr:`region` too).
    leaves: tuple[int, ...] | None = None

    @property
    def where(self) -> str:
        """``leaf N``, or for an ensemble ``leaves a, b, ...`` (one per tree, the first 8)."""
        if self.leaves is None:
            return f"leaf {self.leaf}"
        return _leaves_text(self.leaves)

    def to_json_dict(self) -> dict[str, Any]:
        if self.leaves is not None:  # SPEC's keys, "leaf" one per tree, as "leaves"
            return {
                "input": dict(self.input),
                "action": self.action,
                "confidence": self.confidence,
                "leaf": list(self.leaves),
                "path": list(self.path),
                "leaves": list(self.leaves),
            }
        return {
            "input": dict(self.input),
            "action": self.action,
            "confidence": self.confidence,
            "leaf": self.leaf,
            "path": list(self.path),
        }


@frozen
class RelationalCounterexample:
    """A pair of complete in-domain inputs that differ only in ``feature``, both satisfying
    ``when``, related as the invariant says and whose decisions (each confirmed by the
    evaluator) break it; index 0 is x, index 1 is x' (for monotone: the raised one)."""

    inputs: tuple[dict[str, Any], dict[str, Any]]
    actions: tuple[str, str]
    confidences: tuple[float, float]
    leaves: tuple[int, int]
    paths: tuple[tuple[str, ...], tuple[str, ...]]
    feature: str
    regions: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    #: For an ensemble: each input's leaf in every tree (``leaves`` is then ``(-1, -1)``, and
    #: ``paths`` the boxes where every tree reaches those leaves).
    tree_leaves: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def where(self, k: int) -> str:
        """``leaf N`` of input *k*, or for an ensemble ``leaves a, b, ... of T trees``."""
        if self.tree_leaves is None:
            return f"leaf {self.leaves[k]}"
        return _leaves_text(self.tree_leaves[k])

    def with_regions(self, region_of: RegionOf) -> RelationalCounterexample:
        return replace(
            self,
            regions=(
                region_of(self.leaves[0], self.inputs[0]),
                region_of(self.leaves[1], self.inputs[1]),
            ),
        )

    @property
    def described(self) -> bool:
        """Whether its regions are filled in (a result kept by the proof cache has them)."""
        return any(self.regions)

    def in_feature_order(self, order: Sequence[str]) -> RelationalCounterexample:
        return replace(
            self, inputs=(ordered(self.inputs[0], order), ordered(self.inputs[1], order))
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "inputs": [dict(self.inputs[0]), dict(self.inputs[1])],
            "decisions": [
                {"action": a, "confidence": c, "leaf": leaf}
                for a, c, leaf in zip(
                    self.actions,
                    self.confidences,
                    self.leaves if self.tree_leaves is None else map(list, self.tree_leaves),
                    strict=True,
                )
            ],
            "paths": [list(self.paths[0]), list(self.paths[1])],
            "feature": self.feature,
        }


@frozen
class InvariantResult:
    """The verdict on one invariant."""

    invariant: str
    file: str
    line: int
    status: Verdict
    vacuous: bool = False
    violating_paths: int = 0
    unknown_paths: int = 0
    counterexamples: tuple[Counterexample | RelationalCounterexample, ...] = ()
    seconds: float = 0.0
    paths_checked: int = 0
    paths_reused: int = 0
    description: str | None = None
    column: int = 1
    solver_paths: int = 0
    warnings: tuple[str, ...] = ()
    #: ``monotone(f)`` etc. for a relational invariant: its counts are leaf *pairs* and its
    #: counterexamples :class:`RelationalCounterexample`; None otherwise.
    relation: str | None = None
    #: For an ensemble: the share of the input domain proved (docs/verification.md).
    proved_share: float | None = None

    def finished(self, order: Sequence[str], region_of: RegionOf) -> InvariantResult:
        """This result with every counterexample input listed in *order* and its leaf's region
        (*region_of* a leaf index and an input that reaches it) filled in."""
        if not self.counterexamples:
            return self
        return replace(
            self,
            counterexamples=tuple(
                c.in_feature_order(order)
                if c.described
                else c.in_feature_order(order).with_regions(region_of)
                for c in self.counterexamples
            ),
        )

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "invariant": self.invariant,
            "file": self.file,
            "line": self.line,
            "status": self.status,
            "violating_paths": self.violating_paths,
            "counterexamples": [c.to_json_dict() for c in self.counterexamples],
        }
        out["vacuous"] = self.vacuous
        out["unknown_paths"] = self.unknown_paths
        if self.description:
            out["description"] = self.description
        if self.relation is not None:
            out["relation"] = self.relation
        if self.proved_share is not None:
            out["proved_share"] = round(self.proved_share, 6)
        out["paths_checked"] = self.paths_checked
        out["paths_reused"] = self.paths_reused
        out["seconds"] = round(self.seconds, 6)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@frozen
class ModelInfo:
    path: str
    sha256: str
    nodes: int
    leaves: int
    name: str = ""
    version: str = ""
    #: compiled in memory from a JSON source: no file holds :attr:`sha256`, so it is not shown
    from_source: bool = False

    @property
    def file_sha256(self) -> str | None:
        """The digest of the model file, None for a JSON source (it has no .clef digest)."""
        return None if self.from_source else self.sha256

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "sha256": self.file_sha256,
            "nodes": self.nodes,
            "leaves": self.leaves,
        }
        if self.from_source:
            out["compiled_from"] = "json"
        return out


@frozen
class Report:
    """The result of one ``check`` run; what every output format renders."""

    model: ModelInfo
    results: tuple[InvariantResult, ...]
    seconds: float
    warnings: tuple[str, ...] = ()

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def summary(self) -> dict[str, Any]:
        return {
            "invariants": len(self.results),
            "holds": self.count(HOLDS),
            "violated": self.count(VIOLATED),
            "unknown": self.count(UNKNOWN),
            "paths_checked": sum(r.paths_checked for r in self.results),
            "paths_reused": sum(r.paths_reused for r in self.results),
            "seconds": round(self.seconds, 6),
        }

    @property
    def exit_code(self) -> int:
        """0 every invariant holds, 1 one is violated, 3 none violated but one unknown."""
        if self.count(VIOLATED):
            return EXIT_VIOLATED
        if self.count(UNKNOWN):
            return EXIT_UNKNOWN
        return EXIT_OK

    @property
    def all_warnings(self) -> tuple[str, ...]:
        return self.warnings + tuple(w for r in self.results for w in r.warnings)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_json_dict(),
            "summary": self.summary,
            "results": [r.to_json_dict() for r in self.results],
        }
