"""``clefprove info MODEL``: features, actions, size and digest of a model."""

from __future__ import annotations

import argparse
import json
from typing import Any

from clefprove.cli.output import emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(sub, "info", "features, actions, nodes, depth and digest of a model")
    op.add_model(p)
    op.add_format(p, ("text", "json"), "text")
    p.set_defaults(func=run)


def model_summary(model: Any, path: str) -> dict[str, Any]:
    """The facts ``info`` prints, as JSON-ready data."""
    from clefprove.model.features import feature_to_json

    return {
        "path": path,
        "name": model.name,
        "version": model.version,
        "sha256": None if model.from_source else model.sha256,
        **({"compiled_from": "json"} if model.from_source else {}),
        "size": model.size,
        "nodes": model.n_nodes,
        "leaves": model.n_leaves,
        "max_depth": model.max_depth,
        "features": [feature_to_json(f) for f in model.features],
        "actions": list(model.actions),
        **(
            {"trees": model.n_trees, "ensemble": model.combine.to_json()}
            if hasattr(model, "combine")
            else {}
        ),
    }


def run(args: argparse.Namespace) -> int:
    from clefprove.model.ensemble import Ensemble
    from clefprove.model.loading import load_any

    model = load_any(args.model)
    info = model_summary(model, args.model)
    if args.format == "json":
        emit(json.dumps(info, indent=2, allow_nan=False), None)
        return 0
    lines = [
        f"model     {model.name} {model.version}",
        *(
            [f"file      {args.model} (JSON source, compiled in memory: no .clef digest)"]
            if model.from_source
            else [f"file      {args.model} ({model.size} bytes)", f"sha256    {model.sha256}"]
        ),
        (
            f"trees     {model.n_trees} trees, {model.n_nodes} nodes, {model.n_leaves} leaves, "
            f"max depth {model.max_depth}"
            if isinstance(model, Ensemble)
            else f"tree      {model.n_nodes} nodes, {model.n_leaves} leaves, "
            f"max depth {model.max_depth}"
        ),
        *([f"combine   {_combine_text(model.combine)}"] if isinstance(model, Ensemble) else []),
        f"actions   {', '.join(model.actions)}",
        "features",
    ]
    width = max(len(f.name) for f in model.features)
    for f in model.features:
        default = f.decode(f.default)
        shown = (
            json.dumps(default, allow_nan=False)
            if not isinstance(default, float)
            else repr(default)
        )
        lines.append(f"  {f.name:<{width}}  {f.type!s:<11}  {f.describe_domain()}  default {shown}")
    emit("\n".join(lines), None)
    return 0


def _combine_text(c: Any) -> str:
    """How an ensemble's leaf values become a decision, in one line."""
    link = {
        "logistic": "sigmoid",
        "softmax": "softmax",
        "softmax_f64_sum": "softmax (sum in float64)",
        "identity": "averaged probabilities",
        "onnx_logistic": "onnxruntime's sigmoid",
        "complement": "score is p1",
    }
    rule = {
        "proba": "first argmax of the probabilities",
        "half": "class 1 iff p > 0.5",
        "margin": "first argmax of the scores" if c.outputs > 1 else "class 1 iff score >= 0",
        "positive": "class 1 iff score > 0",
        "score_half": "class 1 iff score > 0.5",
    }
    parts = [f"{c.arithmetic} sums of {c.outputs} output{'s' if c.outputs > 1 else ''}"]
    if any(c.base):
        parts.append("base " + ", ".join(f"{b:g}" for b in c.base))
    if c.divisor != 1:
        parts.append(f"divided by {c.divisor:g}")
    parts.append(link[str(c.link)] + (f" (scale {c.scale:g})" if c.scale != 1 else ""))
    parts.append(rule[str(c.rule)])
    return "; ".join(parts)
