"""``clefprove eval MODEL [--input FILE|-] [--explain]``: JSON lines in, one decision per line out.

Each non-blank input line is a JSON object (a record, SPEC §2); each gets one output line,
``{"action": ..., "confidence": ..., "leaf": ...}`` or ``{"error": "line N: ..."}``.  Lines are
encoded one by one (so every bad line is reported on its own) and evaluated in batches.  Exit
status 1 at the end if any line was bad, 2 if the model or the input file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from clefprove.errors import ClefproveError, InputError

if TYPE_CHECKING:
    import numpy as np

#: Lines encoded before one batch evaluation.
BATCH_LINES = 4096

#: An input line longer than this is a bad line (its own error line), read no further: a
#: stream that never ends a line (``/dev/zero``) must not be read until memory runs out.
MAX_LINE_BYTES = 64 << 20

#: How much of an over-long line is skipped, at most, before the input is taken to end there.
MAX_SKIP_BYTES = 1 << 30


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "eval",
        "evaluate JSON-lines inputs on a model, one decision per line",
        one="at least one input line was bad (it got an error line)",
    )
    op.add_model(p)
    p.add_argument(
        "--input", default="-", metavar="FILE", help="JSON lines to evaluate ('-': stdin)"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="add the decision path as readable conditions and the input as evaluated",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.model.loading import load_any

    model = load_any(args.model)
    if args.input == "-":
        return evaluate_stream(model, sys.stdin.buffer, sys.stdout, explain=args.explain)
    try:
        fh = open(args.input, "rb")  # noqa: SIM115 - closed below
    except IsADirectoryError:
        raise ClefproveError(f"{args.input}: is a directory, not a JSON-lines file") from None
    except OSError as exc:
        raise ClefproveError(f"{args.input}: cannot read: {exc.strerror or exc}") from None
    with fh:
        return evaluate_stream(model, fh, sys.stdout, explain=args.explain)


def evaluate_stream(model: Any, lines: IO[bytes], out: IO[str], explain: bool = False) -> int:
    """Evaluate every JSON line of *lines*, writing one output line each; returns the exit code."""
    import numpy as np

    from clefprove.eval.evaluator import Evaluator
    from clefprove.eval.inputs import RecordEncoder

    ensemble = hasattr(model, "combine")
    if ensemble:
        from clefprove.eval.ensemble import EnsembleEvaluator

        evaluator: Any = EnsembleEvaluator(model)
    else:
        evaluator = Evaluator(model)
    encoder = RecordEncoder(model)
    quoted = [json.dumps(a, allow_nan=False) for a in model.actions]
    bad = 0
    for batch in _batches(lines):
        X = np.empty((len(batch), len(model.features)), dtype=np.float64)
        errors: dict[int, str] = {}
        for i, (lineno, raw) in enumerate(batch):
            try:
                encoder.encode_into(_parse_line(raw), X[i])
            except InputError as exc:
                errors[i] = f"line {lineno}: {exc.one_line()}"
        good = [i for i in range(len(batch)) if i not in errors]
        result = evaluator.evaluate(X[good]) if good else None
        acts = result.actions.tolist() if result else []
        confs = result.confidences.tolist() if result else []
        leaves = result.leaves.tolist() if result else []
        text: list[str] = []
        k = 0
        for i in range(len(batch)):
            if i in errors:
                bad += 1
                text.append(json.dumps({"error": errors[i]}, allow_nan=False))
                continue
            if ensemble:
                text.append(
                    _ensemble_line(model, evaluator, X[i], acts[k], confs[k], leaves[k], explain)
                )
            elif explain:
                text.append(_explained(model, evaluator, X[i], acts[k], confs[k], leaves[k]))
            else:
                text.append(
                    f'{{"action": {quoted[acts[k]]}, "confidence": {confs[k]!r}, '
                    f'"leaf": {leaves[k]}}}'
                )
            k += 1
        out.write("\n".join(text) + "\n")
        out.flush()
    return 1 if bad else 0


def _lines(lines: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of *lines*; None for a line longer than :data:`MAX_LINE_BYTES`, whose rest is
    skipped a chunk at a time, never held whole.  A line that goes on for
    :data:`MAX_SKIP_BYTES` more (a stream that never ends one, ``/dev/zero``) ends the input."""
    while True:
        raw = lines.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
            yield raw
            continue
        skipped = 0
        while raw and not raw.endswith(b"\n") and skipped < MAX_SKIP_BYTES:
            raw = lines.readline(MAX_LINE_BYTES)
            skipped += len(raw)
        yield None
        if raw and not raw.endswith(b"\n"):
            return


def _batches(lines: IO[bytes]) -> Iterator[list[tuple[int, bytes | None]]]:
    batch: list[tuple[int, bytes | None]] = []
    for lineno, raw in enumerate(_lines(lines), start=1):
        if raw is not None and not raw.strip():
            continue
        batch.append((lineno, raw))
        if len(batch) >= BATCH_LINES:
            yield batch
            batch = []
    if batch:
        yield batch


def _parse_line(raw: bytes | None) -> Any:
    from clefprove.eval.inputs import parse_json_input

    if raw is None:
        raise InputError(f"longer than {MAX_LINE_BYTES} bytes")
    obj = parse_json_input(raw)
    if not isinstance(obj, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        raise InputError(f"an input must be a JSON object, got {kinds.get(type(obj), 'a number')}")
    return obj


def _explained(
    model: Any, evaluator: Any, x: np.ndarray, action: int, conf: float, leaf: int
) -> str:
    from clefprove.eval.inputs import decode_input
    from clefprove.model.describe import path_conditions

    path = evaluator.path(x)
    if path[-1] != leaf:  # the batch and single-input walks must agree
        raise AssertionError(f"evaluator disagreement at leaf {leaf} vs {path[-1]}")
    return json.dumps(
        {
            "action": model.actions[action],
            "confidence": conf,
            "leaf": leaf,
            "path": path_conditions(model, path),
            "input": decode_input(model, x),
        },
        allow_nan=False,
    )


def _ensemble_line(
    model: Any,
    evaluator: Any,
    x: np.ndarray,
    action: int,
    conf: float,
    leaves: list[int],
    explain: bool,
) -> str:
    """An ensemble's decision: each tree's leaf (tree-local node index); with *explain*, each
    tree's leaf values and the input as evaluated."""
    out: dict[str, Any] = {
        "action": model.actions[action],
        "confidence": conf,
        "leaf": leaves,  # SPEC's key; one leaf per tree, as "leaves"
        "leaves": leaves,
    }
    if explain:
        from clefprove.eval.inputs import decode_input

        out["contributions"] = evaluator.contributions(x)
        out["input"] = decode_input(model, x)
    return json.dumps(out, allow_nan=False)
