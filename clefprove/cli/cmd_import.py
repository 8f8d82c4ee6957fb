"""``clefprove import {onnx,xgboost,lightgbm} FILE -o MODEL.clef [--features SPEC.json]``."""

from __future__ import annotations

import argparse
import sys

from clefprove.cli.output import refuse_inputs, write_model

FORMATS = ("onnx", "xgboost", "lightgbm")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "import",
        "convert a trained tree or tree ensemble (ONNX-ML, XGBoost, LightGBM) into a .clef file",
        description=(
            "Convert a trained tree classifier or tree ensemble (forest, boosted trees) into a "
            ".clef model with the same decisions. "
            "Files are parsed, never unpickled. See docs/importers.md for the exact semantics. "
            "ONNX needs the 'onnx' package: pip install 'clefprove[import]'."
        ),
    )
    p.add_argument("format", choices=FORMATS, help="the file's format")
    p.add_argument(
        "file",
        help="ONNX model (.onnx), XGBoost booster.save_model JSON/UBJSON, or LightGBM text model",
    )
    op.add_output(
        p, "the .clef file to write ('-': standard output, unless it is a terminal)", True
    )
    p.add_argument(
        "--features",
        metavar="SPEC.json",
        help=(
            'JSON object: "features" (SPEC §2 declarations in input-column order), "actions" '
            '(action names in class order), optional "name", "version", "description"'
        ),
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.cli import options as op
    from clefprove.model.clef import write_clef
    from clefprove.model.importers import import_model

    refuse_inputs(args.output, args.file, *([args.features] if args.features else []))
    model = import_model(args.format, args.file, args.features)
    write_model(args.output, write_clef(model))
    origin = model.metadata.get("metadata", {}).get("imported_from", {})
    for note in origin.get("warnings", []) if isinstance(origin, dict) else []:
        op.warn(str(note))
    if not args.quiet:
        sys.stderr.write(
            f"imported {args.format} {args.file} -> {args.output}: {len(model.features)} features, "
            f"{len(model.actions)} actions, {model.n_nodes} nodes, depth {model.max_depth}, "
            f"sha256 {model.sha256}\n"
        )
    return 0
