"""``clefprove info MODEL``: features, actions, size and digest of a model."""

from __future__ import annotations

import argparse
import json
from typing import Any

from clefprove.cli.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="features, actions, nodes, depth and digest of a model")
    p.add_argument("model", help="a .clef file (or a JSON model source)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def model_summary(model: Any, path: str) -> dict[str, Any]:
    """The facts ``info`` prints, as JSON-ready data."""
    from clefprove.model.source import feature_to_json

    return {
        "path": path,
        "name": model.name,
        "version": model.version,
        "sha256": model.sha256,
        "size": model.size,
        "nodes": model.n_nodes,
        "leaves": model.n_leaves,
        "max_depth": model.max_depth,
        "features": [feature_to_json(f) for f in model.features],
        "actions": list(model.actions),
    }


def run(args: argparse.Namespace) -> int:
    from clefprove.model.clef import load_any

    model = load_any(args.model)
    info = model_summary(model, args.model)
    if args.format == "json":
        emit(json.dumps(info, indent=2), None)
        return 0
    lines = [
        f"model     {model.name} {model.version}",
        f"file      {args.model} ({model.size} bytes)",
        f"sha256    {model.sha256}",
        f"tree      {model.n_nodes} nodes, {model.n_leaves} leaves, max depth {model.max_depth}",
        f"actions   {', '.join(model.actions)}",
        "features",
    ]
    width = max(len(f.name) for f in model.features)
    for f in model.features:
        default = f.decode(f.default)
        shown = json.dumps(default) if not isinstance(default, float) else repr(default)
        lines.append(f"  {f.name:<{width}}  {f.type!s:<11}  {f.describe_domain()}  default {shown}")
    emit("\n".join(lines), None)
    return 0
