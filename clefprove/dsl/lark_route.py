"""Lark's route through grammar.lark: the LALR parser, its lexer, the parse tree -> AST
transformer, and the derivation of the fast lexer's scanner table.

Only a file that the hand-written route does not take (a syntax error to word, a construct
it leaves to Lark) imports this module, and with it Lark.  ``python -m
clefprove.dsl.lark_route`` rewrites :mod:`clefprove.dsl.scanner_table` from the grammar.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn, Protocol

from lark import Lark, Token, Transformer, v_args
from lark.lexer import BasicLexer, LexerThread, PatternStr, UnlessCallback
from lark.tree import Meta

from clefprove.dsl import ast
from clefprove.dsl.lexicon import NAMES, NUMBER, pos_of


def _grammar() -> str:
    return resources.files("clefprove.dsl").joinpath("grammar.lark").read_text("utf-8")


@cache
def lark_parser() -> Lark:
    """The LALR parser for one top-level item (built once per process)."""
    return Lark(
        _grammar(),
        parser="lalr",
        lexer="basic",
        start="item",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
    )


@cache
def keeping_lexer() -> BasicLexer:
    """The lexer that also returns whitespace and comments, built once per process
    (``Lark.lex(dont_ignore=True)`` builds and compiles a new one on every call)."""
    conf = copy.copy(lark_parser().lexer_conf)
    conf.ignore = ()
    return BasicLexer(conf)


def lex_all(text: str) -> Iterator[Token]:
    """Every token of *text*, ignored ones included (as ``lark_parser().lex(text, True)``)."""
    tokens: Iterator[Token] = LexerThread.from_text(keeping_lexer(), text).lex(None)  # type: ignore[no-untyped-call]
    return tokens


#: The scanner as Lark keeps it: master regex, flags, the lexer's callbacks by token type.
DerivedScanner = tuple[str, int, dict[str, Callable[[Token], Token]]]


def derive_scanner() -> DerivedScanner:
    """The keeping lexer's own terminals as one master regex, and its callbacks (the keyword
    retyping of names), read from this Lark's lexer (the attributes of Lark 1.2-1.3).

    The regex is the alternation Lark's scanner compiles, in its order, except that the
    whitespace terminal ``WS`` is an atomic prefix of every match instead of a token of its
    own: no other terminal but the catch-all ``BAD_CHAR`` (last) starts with a whitespace
    character, so a run of whitespace is what Lark's ``WS`` takes there, and one match is
    one token that is not whitespace.  The whole optional prefix is atomic (``(?>(?:ws)?)``):
    with ``(?>ws)?`` the regex could still skip it after the run when nothing follows (trailing
    whitespace) and match its first character as ``BAD_CHAR``."""
    lexer = keeping_lexer()
    scanner = lexer.scanner
    terminals = scanner.terminals
    (ws,) = [t.pattern.to_regexp() for t in terminals if t.name == "WS"]
    pattern = "|".join(
        f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals if t.name != "WS"
    )
    return f"(?>(?:{ws})?)(?:{pattern})", int(scanner.g_regex_flags), dict(lexer.callback)


def keyword_table(callback: Callable[[Token], Token]) -> dict[str, str]:
    """The retyping that *callback* does, as a table (value -> type): Lark's ``UnlessCallback``
    over plain strings without flags (the keywords that a name terminal also matches: a value
    is retyped exactly when it equals one of them).  ValueError for any other callback: the
    fast lexer would not retype as it does."""
    if type(callback) is not UnlessCallback or callback.scanner.g_regex_flags:
        raise ValueError(f"a lexer callback other than plain keywords: {callback!r}")
    table: dict[str, str] = {}
    for terminal in callback.scanner.terminals:
        pattern = terminal.pattern
        if type(pattern) is not PatternStr or pattern.flags:
            raise ValueError(f"a keyword terminal that is not a plain string: {terminal!r}")
        table[pattern.value] = terminal.name
    return table


def render_scanner_table() -> str:
    """The text of :mod:`clefprove.dsl.scanner_table` for this grammar and Lark (laid out as
    ``ruff format`` keeps it: one alternative of the regex, one keyword per line)."""
    import hashlib

    import lark

    master, flags, callbacks = derive_scanner()
    alternatives = master.split("|(?P<")
    prefix, first = alternatives[0].split("(?:(?P<", 1)  # the whitespace prefix, NUMBER
    pieces = [prefix + "(?:", "(?P<" + first, *("|(?P<" + a for a in alternatives[1:])]
    out = [
        '"""The fast lexer\'s scanner, derived from grammar.lark by Lark (generated: do not edit).',
        "",
        "Written by ``python -m clefprove.dsl.lark_route`` from the grammar whose SHA-256 it",
        "records; tests/dsl/test_fast_parser.py checks that digest against grammar.lark, the",
        "scanner against what the Lark it records derives, and the tokens against Lark's lexer.",
        '"""',
        "",
        f"GRAMMAR_SHA256 = {_literal(hashlib.sha256(_grammar().encode()).hexdigest())}",
        f"LARK_VERSION = {_literal(lark.__version__)}",
        "MASTER = (",
        *(f"    {_literal(p)}" for p in pieces),
        ")",
        f"FLAGS = {flags}",
        "KEYWORDS: dict[str, dict[str, str]] = {",
    ]
    for kind, callback in sorted(callbacks.items()):
        out.append(f"    {_literal(kind)}: {{")
        for value, name in sorted(keyword_table(callback).items()):
            out.append(f"        {_literal(value)}: {_literal(name)},")
        out.append("    },")
    out.append("}")
    return "\n".join(out) + "\n"


def _literal(text: str) -> str:
    """A Python string literal of *text*, in the quotes ``ruff format`` prefers."""
    quoted = json.dumps(text, allow_nan=False)
    if '"' in text and "'" not in text:
        return "'" + quoted[1:-1].replace('\\"', '"') + "'"
    return quoted


class Owner(Protocol):
    """What the transformer reports to: the file's name and its list of mistakes."""

    file: str

    def error_at(self, tok: Token, message: str) -> None: ...


#: The children of a rule in grammar order: tokens, the AST nodes built for sub-rules (a tuple of
#: them for ``set`` and ``interval``) and None for an absent optional; grammar.lark fixes the shape.
_Children = list[Any]


def _plain(children: Sequence[Any]) -> list[ast.Expr]:
    """Children without keyword tokens and absent optionals: the expressions."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


@v_args(meta=True)
class Builder(Transformer[Token, ast.Item]):
    """Lark parse tree -> AST (positions from ``propagate_positions``)."""

    def __init__(self, owner: Owner) -> None:
        super().__init__()
        self.owner = owner
        self.file = owner.file

    def _p(self, meta: Meta) -> ast.Pos:
        return pos_of(self.file, meta)

    # items
    def severity(self, meta: Meta, children: _Children) -> ast.Severity:
        names = [c for c in children if isinstance(c, Token) and c.type in NAMES]
        idents = tuple(ast.Ident(self._ident(n), pos=pos_of(self.file, n)) for n in names)
        return ast.Severity(idents, pos=self._p(meta))

    def let_def(self, meta: Meta, children: _Children) -> ast.Let:
        name = children[1]
        return ast.Let(
            ast.Ident(str(name), pos=pos_of(self.file, name)), children[2], pos=self._p(meta)
        )

    def invariant(self, meta: Meta, children: _Children) -> ast.Invariant:
        _kw, name, desc, when_kw, when, ensure_kw, ensure = children
        description = None
        if desc is not None:
            description = ast.String(self._string(desc), pos=pos_of(self.file, desc))
        return ast.Invariant(
            ast.Ident(str(name), pos=pos_of(self.file, name)),
            description,
            when,
            ensure,
            when_pos=pos_of(self.file, when_kw) if when_kw is not None else None,
            ensure_pos=pos_of(self.file, ensure_kw),
            pos=self._p(meta),
        )

    # boolean structure
    def implies(self, meta: Meta, children: _Children) -> ast.Implies:
        return ast.Implies(tuple(_plain(children)), pos=self._p(meta))

    def or_expr(self, meta: Meta, children: _Children) -> ast.Or:
        return ast.Or(tuple(_plain(children)), pos=self._p(meta))

    def and_expr(self, meta: Meta, children: _Children) -> ast.And:
        return ast.And(tuple(_plain(children)), pos=self._p(meta))

    def not_(self, meta: Meta, children: _Children) -> ast.Not:
        return ast.Not(children[1], pos=self._p(meta))

    def comparison(self, meta: Meta, children: _Children) -> ast.Compare:
        operands = tuple(c for c in children if not isinstance(c, Token))
        ops = tuple(str(c) for c in children if isinstance(c, Token))
        return ast.Compare(operands, ops, pos=self._p(meta))

    def in_set(self, meta: Meta, children: _Children) -> ast.InSet:
        return ast.InSet(children[0], children[-1], False, pos=self._p(meta))

    def not_in_set(self, meta: Meta, children: _Children) -> ast.InSet:
        return ast.InSet(children[0], children[-1], True, pos=self._p(meta))

    def in_interval(self, meta: Meta, children: _Children) -> ast.InInterval:
        lo, hi = children[-1]
        return ast.InInterval(children[0], lo, hi, False, pos=self._p(meta))

    def not_in_interval(self, meta: Meta, children: _Children) -> ast.InInterval:
        lo, hi = children[-1]
        return ast.InInterval(children[0], lo, hi, True, pos=self._p(meta))

    def set(self, meta: Meta, children: _Children) -> tuple[ast.Expr, ...]:
        return tuple(_plain(children))

    def interval(self, meta: Meta, children: _Children) -> tuple[ast.Expr, ...]:
        return tuple(_plain(children))

    # arithmetic
    def sum(self, meta: Meta, children: _Children) -> ast.Sum:
        rest = tuple((str(children[i]), children[i + 1]) for i in range(1, len(children), 2))
        return ast.Sum(children[0], rest, pos=self._p(meta))

    def product(self, meta: Meta, children: _Children) -> ast.Product:
        return ast.Product(tuple(_plain(children)), pos=self._p(meta))

    def neg(self, meta: Meta, children: _Children) -> ast.Neg:
        return ast.Neg(children[1], pos=self._p(meta))

    # atoms
    def number(self, meta: Meta, children: _Children) -> ast.Number:
        tok = children[0]
        return ast.Number(str(tok), self._number(tok), pos=pos_of(self.file, tok))

    def string(self, meta: Meta, children: _Children) -> ast.String:
        tok = children[0]
        return ast.String(self._string(tok), pos=pos_of(self.file, tok))

    def true(self, meta: Meta, children: _Children) -> ast.BoolLit:
        return ast.BoolLit(True, pos=pos_of(self.file, children[0]))

    def false(self, meta: Meta, children: _Children) -> ast.BoolLit:
        return ast.BoolLit(False, pos=pos_of(self.file, children[0]))

    def name(self, meta: Meta, children: _Children) -> ast.Name:
        tok = children[0]
        return ast.Name(self._ident(tok), pos=pos_of(self.file, tok))

    def call(self, meta: Meta, children: _Children) -> ast.Call:
        name = children[0]
        return ast.Call(str(name), tuple(_plain(children[1:])), pos=self._p(meta))

    def paren(self, meta: Meta, children: _Children) -> ast.Paren:
        return ast.Paren(_plain(children)[0], pos=self._p(meta))

    def __default__(
        self, data: str, children: _Children, meta: Meta
    ) -> NoReturn:  # pragma: no cover - grammar and builder agree
        raise AssertionError(f"no AST rule for {data!r}")

    # literal checks
    def _ident(self, tok: Token) -> str:
        text = str(tok)
        if tok.type != "QUOTED_NAME":
            return text
        if len(text) == 2:
            self.owner.error_at(tok, "empty quoted name")
        return text[1:-1]

    def _number(self, tok: Token) -> Fraction:
        text = str(tok)
        if not NUMBER.match(text):
            self.owner.error_at(tok, f"malformed number '{text}'")
            return Fraction(0)
        value = float(text)
        if not math.isfinite(value):
            self.owner.error_at(tok, f"number '{text}' is out of the float64 range")
            return Fraction(0)
        return Fraction(value)

    def _string(self, tok: Token) -> str:
        try:
            value: str = json.loads(str(tok))  # a STRING token is one JSON string
        except ValueError:
            self.owner.error_at(tok, "malformed string (escapes are those of JSON)")
            return ""
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            self.owner.error_at(tok, "malformed string (lone surrogate escape)")
            return ""
        return value


def main() -> None:
    """Rewrite scanner_table.py next to this module."""
    target = Path(__file__).with_name("scanner_table.py")
    target.write_text(render_scanner_table(), "utf-8")
    sys.stdout.write(f"wrote {target}\n")


if __name__ == "__main__":
    main()
