"""One entry for every machine and human format of a check report (``check`` and ``gate``)."""

from __future__ import annotations

from pathlib import Path

from clefprove.verify.verdicts import Report

#: The formats :func:`render_report` writes.
FORMATS = ("text", "json", "sarif", "junit", "github", "gitlab")


def render_report(
    report: Report,
    fmt: str,
    color: bool = False,
    verbose: bool = False,
    quiet: bool = False,
    root: Path | None = None,
) -> str:
    """*report* in *fmt*; *root* is the repository root CI paths are relative to (default: the
    nearest enclosing ``.git``, see :mod:`clefprove.report.locations`)."""
    if fmt == "json":
        from clefprove.report.jsonout import render_json

        return render_json(report)
    if fmt == "sarif":
        from clefprove.report.sarif import render_sarif

        return render_sarif(report, root)
    if fmt == "junit":
        from clefprove.report.junit import render_junit

        return render_junit(report, root)
    if fmt == "github":
        from clefprove.report.github import render_github

        return render_github(report, root)
    if fmt == "gitlab":
        from clefprove.report.gitlab import render_gitlab

        return render_gitlab(report, root)
    from clefprove.report.text import render_text, summary_line

    if quiet:
        return summary_line(report) + "\n"
    return render_text(report, color=color, verbose=verbose)
