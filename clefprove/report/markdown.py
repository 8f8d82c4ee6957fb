"""Render a security-review report as Markdown, for pasting into a review ticket.

Same context as the HTML page (:func:`clefprove.report.context.build`).  Values from models and
invariant files are escaped for Markdown: text cannot open markup, table cells cannot break
out of their row, and code spans and fences are made longer than any backtick run inside.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2

from clefprove.report.tree import TreeWindow

_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")


def md_text(value: Any) -> str:
    """Plain text: Markdown punctuation backslash-escaped, HTML characters as entities."""
    s = _MD_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_code(value: Any, cell: bool = False) -> str:
    """An inline code span that holds *value* verbatim on one line (pipes escaped in a table
    *cell*, where GFM needs it even inside code)."""
    s = " ".join(str(value).split())
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    span = f"{fence}{pad}{s}{pad}{fence}"
    return span.replace("|", "\\|") if cell else span


def md_fence(value: Any, lang: str = "") -> str:
    """A fenced code block holding *value* verbatim."""
    s = str(value).rstrip("\n")
    longest = max((len(m) for m in re.findall(r"`{3,}", s)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


def text_tree(win: TreeWindow) -> str:
    """The tree window as indented text: the path down, each other branch to the side."""
    lines = []
    if win.hidden:
        s = "s" if win.hidden != 1 else ""
        lines.append(f"(root … {win.hidden} split{s} above)")
        lines.append("  ↓")
    for step in win.steps:
        taken = step.yes_label if step.went_left else step.no_label
        other = step.no_label if step.went_left else step.yes_label
        width = max(len(taken), len(other))
        lines.append(f"[{step.question}]")
        lines.append(f"├─ {other:<{width}} → {step.sibling.text}")
        lines.append(f"└─ {taken:<{width}} ↓")
    lines.append(f"leaf #{win.leaf}: {win.action} (confidence {win.confidence!r})  ◀ this input")
    return "\n".join(lines)


def bar(fraction: float, width: int = 24) -> str:
    """A text bar for a share in [0, 1] (at least one block for a non-zero share)."""
    n = round(fraction * width)
    if fraction > 0 and n == 0:
        n = 1
    return "█" * n + "░" * (width - n)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("clefprove.report", "templates"),
        autoescape=False,  # Markdown, escaped explicitly with the filters below
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(md=md_text, code=md_code, fence=md_fence, bar=bar, tree=text_tree)
    return env


def render_markdown(context: dict[str, Any]) -> str:
    """The Markdown report for a context built by :func:`clefprove.report.context.build`."""
    text = environment().get_template("report.md.j2").render(**context)
    return re.sub(r"\n{3,}", "\n\n", text)
