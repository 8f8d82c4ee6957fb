"""The part of the tree around a leaf, as data and as an SVG layout.

A :class:`TreeWindow` holds the last few splits on the path from the root to a leaf (the
splits above them are counted, not drawn); each split's other child is collapsed into a
summary of its subtree (reachable leaves and the actions it decides, weighted by domain share).
:func:`layout` turns a window into boxes and edges with coordinates, which the HTML template
draws as inline SVG; all text stays data, so the template's autoescaping covers it.
"""

from __future__ import annotations

import numpy as np

from clefprove.frozen import frozen
from clefprove.geometry.boxes import context_box, leaf_boxes, path_to
from clefprove.model.describe import condition, format_number
from clefprove.model.types import FeatureType, Model, NodeKind
from clefprove.report.coverage import leaf_shares

#: Splits drawn above the leaf; the rest of the path is summarised as "N splits above".
LEVELS = 6


@frozen
class Subtree:
    """A collapsed subtree: its root node, reachable leaves and the actions it decides."""

    node: int
    leaves: int
    # (action, share of this subtree's part of the domain), largest first
    actions: tuple[tuple[str, float], ...]
    leaf_action: str | None = None  # set when the subtree is a single leaf
    leaf_confidence: float = 0.0

    @property
    def lines(self) -> tuple[str, ...]:
        """Two short lines: what the subtree is, and what it decides."""
        if self.leaf_action is not None:
            return (f"leaf #{self.node}", f"{self.leaf_action} ({_short(self.leaf_confidence)})")
        if self.leaves == 0:
            return (f"subtree #{self.node}", "unreachable here")
        count = f"{self.leaves} leaf" if self.leaves == 1 else f"{self.leaves} leaves"
        parts = ", ".join(f"{a} {_pct(v)}" for a, v in self.actions[:2])
        more = ", …" if len(self.actions) > 2 else ""
        return (f"subtree #{self.node} · {count}", parts + more)

    @property
    def text(self) -> str:
        """The full summary, one line (tooltips and Markdown)."""
        if self.leaf_action is not None:
            conf = format_number(self.leaf_confidence)
            return f"leaf #{self.node}: {self.leaf_action} (confidence {conf})"
        if self.leaves == 0:
            return f"subtree #{self.node}: unreachable here"
        parts = ", ".join(f"{a} {_pct(v)}" for a, v in self.actions)
        return f"subtree #{self.node}: {self.leaves} reachable leaves; {parts}"


@frozen
class Step:
    """One split on the path: the question it asks, which way the path went, the other side."""

    node: int
    question: str
    yes_label: str
    no_label: str
    went_left: bool
    taken: str  # the condition the path satisfies here, in words
    sibling: Subtree


@frozen
class TreeWindow:
    """The last splits above ``leaf`` (``hidden`` more splits above them are not drawn)."""

    leaf: int
    action: str
    confidence: float
    hidden: int
    steps: tuple[Step, ...]
    depth: int


def _short(x: float) -> str:
    """A confidence to at most 4 significant digits (the full value is in the tooltip)."""
    return format_number(x) if len(format_number(x)) <= 6 else f"{x:.4g}"


def _pct(share: float) -> str:
    if share <= 0:
        return "0%"
    if share < 0.0005:
        return "<0.1%"
    return f"{100 * share:.1f}%".replace(".0%", "%")


def subtree_summary(model: Model, node: int) -> Subtree:
    """Summarise the subtree at *node*, counting only leaves reachable through its path."""
    n = model.node(node)
    if n.is_leaf:
        if context_box(model, node).empty:
            return Subtree(node, 0, ())
        action = model.actions[n.action]
        return Subtree(node, 1, ((action, 1.0),), action, n.confidence)
    boxes = leaf_boxes(model, node, context_box(model, node))
    shares = leaf_shares(model, boxes)
    reachable = int(np.count_nonzero(boxes.feasible))
    per_action = np.bincount(boxes.actions, weights=shares, minlength=len(model.actions))
    total = float(per_action.sum())
    ranked: list[tuple[str, float]] = []
    if total > 0:
        ranked = sorted(
            ((model.actions[k], float(v) / total) for k, v in enumerate(per_action) if v > 0),
            key=lambda t: -t[1],
        )
    return Subtree(node, reachable, tuple(ranked))


def window(model: Model, leaf: int, levels: int = LEVELS) -> TreeWindow:
    """The last *levels* splits above *leaf*, each with its collapsed sibling subtree."""
    path = path_to(model, leaf)
    shown = path[-levels:] if levels > 0 else []
    steps = []
    for node, went_left in shown:
        n = model.node(node)
        f = model.features[n.feature]
        if f.type is FeatureType.BOOL and n.kind is NodeKind.NUMERIC and 0 <= n.threshold < 1:
            question, yes, no = f"{f.name}?", "false", "true"
        else:
            question, yes, no = condition(model, n, True), "yes", "no"
        sibling = n.right if went_left else n.left
        steps.append(
            Step(
                node,
                question,
                yes,
                no,
                went_left,
                condition(model, n, went_left),
                subtree_summary(model, sibling),
            )
        )
    ln = model.node(leaf)
    return TreeWindow(
        leaf,
        model.actions[ln.action],
        ln.confidence,
        len(path) - len(shown),
        tuple(steps),
        len(path),
    )


# ---------------------------------------------------------------------------------- layout


@frozen
class Rect:
    x: float
    y: float
    w: float
    h: float
    kind: str  # split | sibling | leaf | ellipsis
    lines: tuple[str, ...]  # shown (possibly shortened), one per text line
    title: str  # full text (an SVG tooltip)


@frozen
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    kind: str  # path | side
    label: str
    lx: float
    ly: float


@frozen
class Diagram:
    width: float
    height: float
    rects: tuple[Rect, ...]
    edges: tuple[Edge, ...]


WIDTH = 1000.0
SIDE = 340.0  # horizontal offset of a collapsed sibling from the path
CHAR_W = 7.3  # monospace 12px, a little generous
LINE_H = 15.0
PAD_Y = 8.0
ROW = 74.0
MAX_MAIN = 50  # characters in a split box
MAX_SIDE = 34  # characters in a collapsed subtree box


def _fit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _box(cx: float, y: float, lines: tuple[str, ...], kind: str, limit: int, title: str) -> Rect:
    shown = tuple(_fit(t, limit) for t in lines)
    w = max(len(t) for t in shown) * CHAR_W + 24
    h = len(shown) * LINE_H + 2 * PAD_Y
    return Rect(round(cx - w / 2, 1), round(y, 1), round(w, 1), round(h, 1), kind, shown, title)


def layout(win: TreeWindow) -> Diagram:
    """Boxes and edges for *win*: the path down the middle, collapsed siblings to the sides."""
    cx = WIDTH / 2
    rects: list[Rect] = []
    edges: list[Edge] = []
    y = 10.0
    one = LINE_H + 2 * PAD_Y
    if win.hidden:
        s = "s" if win.hidden != 1 else ""
        text = f"root … {win.hidden} split{s} above"
        rects.append(_box(cx, y, (text,), "ellipsis", MAX_MAIN, text))
        edges.append(Edge(cx, y + one, cx, y + ROW, "path", "", cx, y))
        y += ROW
    for step in win.steps:
        rects.append(_box(cx, y, (step.question,), "split", MAX_MAIN, step.question))
        ny = y + ROW
        path_label = step.yes_label if step.went_left else step.no_label
        side_label = step.no_label if step.went_left else step.yes_label
        sx = cx + SIDE if step.went_left else cx - SIDE
        edges.append(Edge(cx, y + one, cx, ny, "path", path_label, cx + 8, y + one + 22))
        rects.append(_box(sx, ny - 8, step.sibling.lines, "sibling", MAX_SIDE, step.sibling.text))
        edges.append(Edge(cx, y + one, sx, ny - 8, "side", side_label, (cx + sx) / 2, y + one + 14))
        y = ny
    conf = _short(win.confidence)
    leaf_text = f"leaf #{win.leaf}: {win.action} (confidence {conf})"
    full = f"leaf #{win.leaf}: {win.action} (confidence {format_number(win.confidence)})"
    rects.append(_box(cx, y, (leaf_text,), "leaf", MAX_MAIN, full))
    bottom = max(r.y + r.h for r in rects)
    return Diagram(WIDTH, bottom + 10, tuple(rects), tuple(edges))
