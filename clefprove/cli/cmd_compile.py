"""``clefprove compile SOURCE.json -o MODEL.clef``."""

from __future__ import annotations

import argparse
import sys

from clefprove.cli.output import refuse_inputs, write_model


def register(sub: argparse._SubParsersAction) -> None:
    from clefprove.cli import options as op

    p = op.command(sub, "compile", "compile a JSON model source into a .clef file")
    p.add_argument("source", help="JSON model source (SPEC §2)")
    op.add_output(
        p, "the .clef file to write ('-': standard output, unless it is a terminal)", True
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.model.clef import write_clef
    from clefprove.model.source import load_source

    refuse_inputs(args.output, args.source)
    model = load_source(args.source)
    write_model(args.output, write_clef(model))
    if not args.quiet:
        sys.stderr.write(
            f"compiled {args.source} -> {args.output}: {model.n_nodes} nodes, depth "
            f"{model.max_depth}, {model.size} bytes, sha256 {model.sha256}\n"
        )
    return 0
