"""Validation of the options that check, report and gate share."""

from __future__ import annotations

import argparse

from clefprove.errors import ClefproveError


def check_limits(args: argparse.Namespace) -> None:
    """Refuse a bad ``--jobs``, ``--timeout`` or ``--counterexamples`` value with one line."""
    if args.jobs is not None and args.jobs < 1:
        raise ClefproveError(f"--jobs must be at least 1, not {args.jobs}")
    if args.timeout is not None and not args.timeout > 0:  # also refuses NaN
        raise ClefproveError(f"--timeout must be positive, not {args.timeout}")
    if args.counterexamples < 0:
        raise ClefproveError(f"--counterexamples must be at least 0, not {args.counterexamples}")
