"""Render a security-review report as one self-contained HTML page.

The page is built from ``templates/report.html.j2`` with jinja2 and autoescaping on, so every
value from a model or an invariant file (names, categorical values, descriptions) is text,
never markup.  It has inline CSS and inline SVG only: no scripts, no external resources, and a
Content-Security-Policy that forbids loading anything.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2


@cache
def environment() -> jinja2.Environment:
    """The jinja2 environment for the report templates (autoescape on, strict undefined)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("clefprove.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
    )


def render_html(context: dict[str, Any]) -> str:
    """The HTML page for a context built by :func:`clefprove.report.context.build`."""
    return environment().get_template("report.html.j2").render(**context)
