"""``clefprove export-coq MODEL INVARIANTS... -o DIR``: Coq files that coqc checks on its own.

Exit status: 0 every invariant proved; 1 at least one invariant violated (its refutation is
exported); 3 at least one invariant neither proved nor refuted (listed, not exported); 2 bad
usage or input (nothing written).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "export-coq",
        "Coq definitions and proofs of the invariants that coqc checks on its own",
        description="Write Coq files that coqc checks on its own: a proof for every invariant "
        "that holds, a refutation for every violated one.",
        ok="every invariant proved (and exported)",
        verdicts=True,
    )
    op.add_model(p)
    op.add_invariants(p)
    op.add_output(p, "directory to write the Coq development into (created if needed)", True, "DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.output import emit
    from clefprove.coq_export.export import export_coq
    from clefprove.dsl.loader import load_invariants
    from clefprove.model.ensemble import Ensemble
    from clefprove.model.loading import load_any

    model = load_any(args.model)
    program = load_invariants(args.invariants, model)
    if isinstance(model, Ensemble):
        # No certificate format covers ensembles yet: nothing is written, nothing claimed.
        width = max((len(inv.name) for inv in program.invariants), default=0)
        lines = [f"{args.output}: not written: {model.name} is a tree ensemble"]
        lines += [
            f"  {inv.name:<{width}}  not exported  tree ensembles are not exported to Coq yet"
            for inv in program.invariants
        ]
        emit("\n".join(lines), None)
        return 3
    try:
        export = export_coq(model, program)
    except RecursionError:
        from clefprove.errors import ClefproveError

        raise ClefproveError(
            "an invariant is nested too deeply for the Coq export (a chain of hundreds of "
            "'implies', 'and' or 'or'); split it into several invariants"
        ) from None
    export.write(args.output)
    width = max((len(r.name) for r in export.results), default=0)
    lines = [f"{args.output}: Coq development of {model.name} {model.version}"]
    for r in export.results:
        what = f"theorem {r.theorem}" if r.theorem else r.reason
        lines.append(f"  {r.name:<{width}}  {r.status:<12}  {what}")
    lines.append(f"check it with: make -C {args.output}   (and: make -C {args.output} assumptions)")
    emit("\n".join(lines), None)
    return export.exit_code
