"""The canonical layout of invariant files (``clefprove fmt``).

Works on the AST alone (no model, no type checking).  Layout rules (docs/dsl.md):

* one blank line between items, except that consecutive ``let`` (or ``severity``) lines stay
  together unless the source separated them by a blank line; ``=`` of a run of lets is aligned;
* an invariant is ``invariant NAME:`` followed by its description, ``when`` and ``ensure``, each
  on its own line indented by two spaces; a clause longer than 100 columns whose top operator
  is ``and``, ``or`` or ``implies`` is broken before each operator;
* single spaces around binary operators, ``{a, b}``, ``[lo, hi]``, ``f(x, y)``; parentheses as
  written, plus those that the precedence requires;
* comments stay with the item or clause they precede, or at the end of the line they ended;
* numbers keep their spelling; strings are re-quoted as JSON.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from clefprove.dsl import ast
from clefprove.dsl.parser import KEYWORDS

LINE_LENGTH = 100
INDENT = "  "
CONTINUATION = "    "

# Precedence levels, loosest first.
_IMPLIES, _OR, _AND, _NOT, _CMP, _SUM, _PROD, _UNARY, _ATOM = range(1, 10)


def format_expr(expr: ast.Expr) -> str:
    """The canonical one-line text of an expression."""
    return _show(expr, _IMPLIES)


def _show(expr: ast.Expr, need: int) -> str:
    text, level = _render(expr)
    return f"({text})" if level < need else text


def _render(expr: ast.Expr) -> tuple[str, int]:
    match expr:
        case ast.Number(text, _):
            return text, _ATOM
        case ast.String(value):
            return _quote(value), _ATOM
        case ast.BoolLit(value):
            return ("true" if value else "false"), _ATOM
        case ast.Name(name):
            return _name(name), _ATOM
        case ast.Paren(inner):
            return f"({_show(inner, _IMPLIES)})", _ATOM
        case ast.Call(name, args):
            return f"{name}({', '.join(_show(a, _IMPLIES) for a in args)})", _ATOM
        case ast.Neg(arg):
            return f"-{_show(arg, _UNARY)}", _UNARY
        case ast.Product(factors):
            return " * ".join(_show(f, _UNARY) for f in factors), _PROD
        case ast.Sum(first, rest):
            parts = [_show(first, _PROD)]
            parts.extend(f"{op} {_show(term, _PROD)}" for op, term in rest)
            return " ".join(parts), _SUM
        case ast.Compare(operands, ops):
            parts = [_show(operands[0], _SUM)]
            for op, operand in zip(ops, operands[1:], strict=True):
                parts.append(f"{op} {_show(operand, _SUM)}")
            return " ".join(parts), _CMP
        case ast.InSet(subject, elements, negated):
            inside = ", ".join(_show(e, _SUM) for e in elements)
            keyword = "not in" if negated else "in"
            return f"{_show(subject, _SUM)} {keyword} {{{inside}}}", _CMP
        case ast.InInterval(subject, lo, hi, negated):
            keyword = "not in" if negated else "in"
            return (
                f"{_show(subject, _SUM)} {keyword} [{_show(lo, _SUM)}, {_show(hi, _SUM)}]",
                _CMP,
            )
        case ast.Not(arg):
            return f"not {_show(arg, _NOT)}", _NOT
        case ast.And(args):
            return " and ".join(_show(a, _NOT) for a in args), _AND
        case ast.Or(args):
            return " or ".join(_show(a, _AND) for a in args), _OR
        case ast.Implies(args):
            return " implies ".join(_show(a, _OR) for a in args), _IMPLIES
    raise TypeError(f"not an expression: {expr!r}")


_IDENTIFIER = re.compile(r"[^\W\d]\w*\Z")


def _name(name: str) -> str:
    """A reference to a feature or action: bare, or in backticks when it is a keyword."""
    if _IDENTIFIER.match(name) and name not in KEYWORDS:
        return name
    return f"`{name}`"


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _clause(prefix: str, expr: ast.Expr, indent: str) -> list[str]:
    """``prefix expr``, broken before top-level and/or/implies when it is too long."""
    line = f"{indent}{prefix}{format_expr(expr)}"
    if len(line) <= LINE_LENGTH:
        return [line]
    match expr:
        case ast.And(args):
            op, level = "and", _NOT
        case ast.Or(args):
            op, level = "or", _AND
        case ast.Implies(args):
            op, level = "implies", _OR
        case _:
            return [line]
    lines = [f"{indent}{prefix}{_show(args[0], level)}"]
    lines.extend(f"{indent}{CONTINUATION}{op} {_show(a, level)}" for a in args[1:])
    return lines


# ---------------------------------------------------------------- comments


@dataclass
class _Slot:
    """Where comments attach: an item's head or one clause of an invariant."""

    item: int
    clause: str  # "head", "desc", "when", "ensure"
    line: int
    column: int
    leading: list[ast.Comment] = field(default_factory=list)
    trailing: list[ast.Comment] = field(default_factory=list)


def _slots(program: ast.Program) -> list[_Slot]:
    slots: list[_Slot] = []
    for i, item in enumerate(program.items):
        slots.append(_Slot(i, "head", item.line, item.column))
        if isinstance(item, ast.Invariant):
            if item.description is not None:
                slots.append(_Slot(i, "desc", item.description.line, item.description.column))
            if item.when_pos is not None:
                slots.append(_Slot(i, "when", item.when_pos.line, item.when_pos.column))
            slots.append(_Slot(i, "ensure", item.ensure_pos.line, item.ensure_pos.column))
    return slots


def _attach(program: ast.Program, slots: list[_Slot]) -> list[ast.Comment]:
    """Distribute comments over *slots*; returns those after the last item."""
    starts = dict(program.code_starts)
    keys = [(s.line, s.column) for s in slots]
    tail: list[ast.Comment] = []
    for c in program.comments:
        key = (c.line, c.column)
        first_code = starts.get(c.line)
        if first_code is not None and first_code < c.column:
            k = bisect.bisect_right(keys, key) - 1
            if k >= 0:
                slots[k].trailing.append(c)
                continue
        k = bisect.bisect_right(keys, key)
        if k > 0 and (k == len(slots) or slots[k].item != slots[k - 1].item):
            item = program.items[slots[k - 1].item]
            if key < (item.pos.end_line, item.pos.end_column):
                # on its own line inside an item, after its last clause starts: keep it with
                # that clause (above it) rather than moving it to the next item
                slots[k - 1].leading.append(c)
                continue
        if k < len(slots):
            slots[k].leading.append(c)
        else:
            tail.append(c)
    for s in slots:
        if len(s.trailing) > 1:  # several end-of-line comments of one clause: own lines
            s.leading.extend(s.trailing)
            s.trailing = []
    return tail


# ---------------------------------------------------------------- layout


def _blank_between(program: ast.Program, after_line: int, before_line: int) -> bool:
    return any(after_line < b < before_line for b in program.blank_lines)


def format_program(program: ast.Program) -> str:
    """The canonical text of a parsed file (empty string for an empty file)."""
    slots = _slots(program)
    tail = _attach(program, slots)
    by_item: dict[int, dict[str, _Slot]] = {}
    for s in slots:
        by_item.setdefault(s.item, {})[s.clause] = s
    out: list[str] = []
    items = program.items
    let_width = _let_widths(program, by_item)
    prev_end = 0
    for i, item in enumerate(items):
        head = by_item[i]["head"]
        first_line = head.leading[0].line if head.leading else item.line
        if i > 0:
            same_kind = type(item) is type(items[i - 1]) and not isinstance(item, ast.Invariant)
            if not same_kind or _blank_between(program, prev_end, first_line):
                out.append("")
        _comments(out, program, head.leading, item.line)
        if isinstance(item, ast.Severity):
            lines = ["severity " + " < ".join(_name(a.name) for a in item.actions)]
        elif isinstance(item, ast.Let):
            name = item.name.name.ljust(let_width.get(i, 0))
            lines = _clause(f"let {name} = ", item.expr, "")
        else:
            assert isinstance(item, ast.Invariant)  # the third and last kind of item
            lines = _invariant(item, by_item[i])  # places the head's comment itself
        if not isinstance(item, ast.Invariant):
            _trailing(lines, head)
        out.extend(lines)
        prev_end = max(item.pos.end_line, item.line)
        for s in by_item[i].values():
            for c in s.leading + s.trailing:
                prev_end = max(prev_end, c.line)
    if tail:
        if items and _blank_between(program, prev_end, tail[0].line):
            out.append("")
        _comments(out, program, tail, None)
    return "\n".join(out) + "\n" if out else ""


def _comments(
    out: list[str],
    program: ast.Program,
    comments: Sequence[ast.Comment],
    before_line: int | None,
) -> None:
    """Own-line comments at column 0, keeping (single) blank lines that separated them."""
    for k, c in enumerate(comments):
        if k > 0 and _blank_between(program, comments[k - 1].line, c.line):
            out.append("")
        out.append(c.text)
    if (
        comments
        and before_line is not None
        and _blank_between(program, comments[-1].line, before_line)
    ):
        out.append("")


def _trailing(lines: list[str], slot: _Slot) -> None:
    if slot.trailing:
        lines[-1] = f"{lines[-1]}  {slot.trailing[0].text}"


def _invariant(item: ast.Invariant, slots: dict[str, _Slot]) -> list[str]:
    lines = [f"invariant {item.name.name}:"]
    _trailing(lines, slots["head"])
    parts: list[tuple[str, list[str]]] = []
    if item.description is not None:
        parts.append(("desc", [f"{INDENT}{_quote(item.description.value)}"]))
    if item.when is not None:
        parts.append(("when", _clause("when ", item.when, INDENT)))
    parts.append(("ensure", _clause("ensure ", item.ensure, INDENT)))
    for clause, clause_lines in parts:
        slot = slots.get(clause)
        if slot is not None:
            lines.extend(f"{INDENT}{c.text}" for c in slot.leading)
            _trailing(clause_lines, slot)
        lines.extend(clause_lines)
    return lines


def _let_widths(program: ast.Program, by_item: dict[int, dict[str, _Slot]]) -> dict[int, int]:
    """Name width of each let: the longest name of its run of adjacent lets."""
    widths: dict[int, int] = {}
    run: list[int] = []

    def close() -> None:
        width = max((len(program.items[k].name.name) for k in run), default=0)  # type: ignore[attr-defined]
        widths.update(dict.fromkeys(run, width))
        run.clear()

    prev_end = 0
    for i, item in enumerate(program.items):
        head = by_item[i]["head"]
        adjacent = (
            run
            and isinstance(item, ast.Let)
            and not head.leading
            and not _blank_between(program, prev_end, item.line)
        )
        if not adjacent:
            close()
        if isinstance(item, ast.Let):
            run.append(i)
        prev_end = max(item.pos.end_line, item.line)
        for c in head.trailing:
            prev_end = max(prev_end, c.line)
    close()
    return widths


def format_text(text: str, file: str = "<string>") -> str:
    """Parse *text* and return its canonical layout (raises :class:`DslError` on bad syntax).

    The result is parsed again and must give the same syntax tree and the same comments; a
    difference would be a bug in the formatter and is refused rather than written.
    """
    from clefprove.dsl.parser import parse_program
    from clefprove.errors import ClefproveError

    program = parse_program(text, file)
    out = format_program(program)
    again = parse_program(out, file)
    same_comments = [c.text for c in again.comments] == [c.text for c in program.comments]
    if again != program or not same_comments:
        raise ClefproveError(f"{file}: fmt would change this file's meaning (a bug; please report)")
    return out
