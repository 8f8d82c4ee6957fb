"""Text -> :class:`~clefprove.dsl.ast.Program`, with every syntax error of a file collected.

The file is lexed once; the token stream is split before every top-level keyword (``severity``,
``let``, ``invariant``, which can appear nowhere else) and each item is parsed on its own by
Lark's LALR parser, so one mistake does not hide the next.  The Lark parser is built once, on
first use, and cached (``cache=True`` keeps the grammar analysis between processes).
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources
from typing import Any, NoReturn

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import BasicLexer, LexerThread
from lark.tree import Meta

from clefprove.dsl import ast
from clefprove.dsl.errors import Diagnostic, DslError

#: Deepest bracket nesting accepted (far beyond anything a person writes).
MAX_NESTING = 64

_ITEM_KEYWORDS = {"SEVERITY", "LET", "INVARIANT"}
_NAMES = {"NAME", "QUOTED_NAME"}
#: Reserved words: a feature or action with one of these names is written `in backticks`.
KEYWORDS = frozenset(
    [
        "severity",
        "let",
        "invariant",
        "when",
        "ensure",
        "and",
        "or",
        "not",
        "implies",
        "in",
        "true",
        "false",
    ]
)
_OPEN = {"LPAR": ")", "LSQB": "]", "LBRACE": "}"}
_CLOSE = {"RPAR": "(", "RSQB": "[", "RBRACE": "{"}
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_EXPRESSION_START = {"NAME", "NUMBER", "LPAR"}
_DISPLAY = {
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "$END": "end of file",
    "COLON": "':'",
    "LT": "'<'",
    "LE": "'<='",
    "GT": "'>'",
    "GE": "'>='",
    "EQ": "'=='",
    "NE": "'!='",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "COMMA": "','",
    "EQUAL": "'='",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
}


@cache
def lark_parser() -> Lark:
    """The LALR parser for one top-level item (built once per process)."""
    grammar = resources.files("clefprove.dsl").joinpath("grammar.lark").read_text("utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        start="item",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
    )


@cache
def _keeping_lexer() -> BasicLexer:
    """The lexer that also returns whitespace and comments, built once per process
    (``Lark.lex(dont_ignore=True)`` builds and compiles a new one on every call)."""
    conf = copy.copy(lark_parser().lexer_conf)
    conf.ignore = ()
    return BasicLexer(conf)


def _lex_all(text: str) -> Iterator[Token]:
    """Every token of *text*, ignored ones included (as ``lark_parser().lex(text, True)``)."""
    tokens: Iterator[Token] = LexerThread.from_text(_keeping_lexer(), text).lex(None)  # type: ignore[no-untyped-call]
    return tokens


@cache
def _scanner() -> tuple[re.Pattern[str], dict[str, Callable[[Token], Token]]] | None:
    """The keeping lexer's own terminal regex (the alternation Lark's scanner compiles, in its
    order) and its callbacks (the keyword retyping of names); None where this Lark keeps its
    scanner otherwise (the attributes read here are Lark 1.2-1.3's), and Lark's lexer is used."""
    try:
        lexer = _keeping_lexer()
        scanner = lexer.scanner
        pattern = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals)
        mre: re.Pattern[str] = scanner.re_.compile(pattern, scanner.g_regex_flags)
        return mre, dict(lexer.callback)
    except (AttributeError, TypeError, re.error):
        return None


def _lex_code(text: str) -> Iterator[Token]:
    """The tokens of *text* that are not whitespace (comments included), as
    ``_lex_all`` gives them: same types, values and positions (tests/dsl check it), without a
    token object per run of whitespace."""
    scanner = _scanner()
    if scanner is None:
        yield from (t for t in _lex_all(text) if t.type != "WS")
        return
    mre, callbacks = scanner
    match = mre.match
    pos, line, line_start, n = 0, 1, 0, len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:  # (no character is unmatched: BAD_CHAR) Lark says what it says
            list(_lex_all(text))
            raise AssertionError("the keeping lexer matched what its regex does not")
        value = m.group()
        kind = m.lastgroup
        assert kind is not None
        end = m.end()
        column = pos - line_start + 1
        start_line = line
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        if kind != "WS":
            tok = Token(kind, value, pos, start_line, column, line, end - line_start + 1, end)
            callback = callbacks.get(kind)
            yield callback(tok) if callback is not None else tok
        pos = end


@dataclass(frozen=True)
class ParseResult:
    """A file parsed as far as possible: the items that parsed, and the mistakes.

    *broken* names the ``let`` and ``invariant`` items that did not parse (so that the checker
    does not report their uses as unknown names); *broken_severity* says a ``severity`` line did
    not parse.
    """

    program: ast.Program
    diagnostics: tuple[Diagnostic, ...]
    broken: frozenset[str] = frozenset()
    broken_severity: bool = False


def parse_program(text: str, file: str = "<string>") -> ast.Program:
    """Parse the text of one invariant file (syntax only; no model needed).

    Raises :class:`DslError` with every syntax error found.
    """
    result = parse_partial(text, file)
    if result.diagnostics:
        raise DslError(result.diagnostics)
    return result.program


def parse_partial(text: str, file: str = "<string>") -> ParseResult:
    """Parse what parses; the syntax errors come back as data (sorted by position)."""
    return _FileParser(text, file).run()


def _pos(file: str, meta_or_token: object) -> ast.Pos:
    m = meta_or_token
    return ast.Pos(
        file,
        getattr(m, "line", 0) or 0,
        getattr(m, "column", 0) or 0,
        getattr(m, "end_line", 0) or 0,
        getattr(m, "end_column", 0) or 0,
    )


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    value = str(tok)
    if len(value) > 30:
        value = value[:27] + "..."
    return f"'{value}'"


_OPERATORS = {
    "LT",
    "LE",
    "GT",
    "GE",
    "EQ",
    "NE",
    "PLUS",
    "MINUS",
    "STAR",
    "AND",
    "OR",
    "IMPLIES",
    "IN",
    "NOT",
}
_OPERATOR_HINTS = {
    "&&": "; write 'and'",
    "&": "; write 'and'",
    "||": "; write 'or'",
    "|": "; write 'or'",
    "!": "; write 'not'",
}
_PUNCTUATION = {"RPAR", "RSQB", "RBRACE", "COMMA", "$END"}


def _expected(acceptable: Sequence[str]) -> str:
    """A short readable list of what the parser could have accepted."""
    names = set(acceptable)
    if names >= _EXPRESSION_START:
        return "an expression"
    shown: set[str] = set()
    operators = names & _OPERATORS
    rest = names - _OPERATORS
    if len(operators) > 2:
        shown.add("an operator")
        rest.discard("LPAR")  # the '(' of a call after a name: rarely what was meant
    else:
        rest |= operators
    for n in rest:
        shown.add("the next item" if n == "$END" else _DISPLAY.get(n, f"'{n.lower()}'"))
    ordered = sorted(shown)
    if not ordered:
        return ""
    if len(ordered) == 1:
        return ordered[0]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def keyword_hint(tok: Token, keywords: Iterable[str]) -> str | None:
    """The keyword among *keywords* that a mistyped name *tok* most likely meant."""
    if tok.type != "NAME":
        return None
    word = str(tok).lower()
    found = difflib.get_close_matches(word, sorted(keywords), n=1, cutoff=0.7)
    return found[0] if found and found[0] != word else None


class _FileParser:
    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.lines = text.split("\n")
        self.diagnostics: list[Diagnostic] = []

    def error(self, line: int, column: int, message: str) -> None:
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.diagnostics.append(Diagnostic(self.file, line, column, message, source))

    def error_at(self, tok: Token, message: str) -> None:
        self.error(tok.line or 0, tok.column or 0, message)

    def run(self) -> ParseResult:
        tokens: list[Token] = []
        comments: list[ast.Comment] = []
        for tok in _lex_code(self.text):
            if tok.type == "COMMENT":
                comments.append(ast.Comment(str(tok).rstrip(), pos=_pos(self.file, tok)))
                continue
            tokens.append(tok)
        items: list[ast.Item] = []
        broken: set[str] = set()
        broken_severity = False
        chunks = list(self._chunks(tokens))
        for i, chunk in enumerate(chunks):
            following = chunks[i + 1][0] if i + 1 < len(chunks) else None
            item = self._parse_item(chunk, following)
            if item is not None:
                items.append(item)
            elif chunk[0].type == "SEVERITY":
                broken_severity = True
            elif len(chunk) > 1 and chunk[1].type == "NAME":
                broken.add(str(chunk[1]))
        blank = frozenset(i + 1 for i, line in enumerate(self.lines) if not line.strip())
        starts: dict[int, int] = {}
        for tok in tokens:
            # lark types a token's line and column as Optional; a lexed token has both
            starts.setdefault(tok.line, tok.column)  # type: ignore[arg-type]
        program = ast.Program(
            self.file, tuple(items), tuple(comments), blank, tuple(sorted(starts.items()))
        )
        diagnostics = tuple(sorted(self.diagnostics, key=lambda d: (d.line, d.column)))
        return ParseResult(program, diagnostics, frozenset(broken), broken_severity)

    @staticmethod
    def _chunks(tokens: list[Token]) -> Iterator[list[Token]]:
        start = 0
        for i, tok in enumerate(tokens):
            if tok.type in _ITEM_KEYWORDS and i > start:
                yield tokens[start:i]
                start = i
        if start < len(tokens):
            yield tokens[start:]

    def _end_token(self, following: Token | None) -> Token:
        if following is not None:
            return Token("$END", str(following), line=following.line, column=following.column)
        line = len(self.lines)
        return Token("$END", "", line=line, column=len(self.lines[-1]) + 1)

    def _precheck(self, chunk: list[Token]) -> bool:
        """Lexical and bracket errors of one item; False when it cannot be parsed."""
        ok = True
        first = chunk[0]
        if first.type not in _ITEM_KEYWORDS:
            meant = keyword_hint(first, ("severity", "let", "invariant"))
            hint = (
                f"did you mean '{meant}'?" if meant else "expected 'severity', 'let' or 'invariant'"
            )
            self.error_at(first, f"unexpected {_describe(first)}; {hint}")
            return False
        previous: Token | None = None
        for tok in chunk:
            if tok.type == "BAD_CHAR":
                if not (
                    previous is not None
                    and previous.type == "BAD_CHAR"
                    and previous.end_pos == tok.start_pos
                ):
                    self._bad_chars(chunk, tok)
                ok = False
            elif tok.type == "SINGLE_QUOTED":
                self.error_at(tok, "strings are written in double quotes")
                ok = False
            elif tok.type == "UNTERMINATED_STRING":
                self.error_at(tok, "unterminated string")
                ok = False
            previous = tok
        if not ok:
            return False
        stack: list[Token] = []
        for tok in chunk:
            if tok.type in _OPEN:
                stack.append(tok)
                if len(stack) > MAX_NESTING:
                    self.error_at(tok, f"brackets nested more than {MAX_NESTING} deep")
                    return False
            elif tok.type in _CLOSE:
                if not stack:
                    self.error_at(tok, f"unmatched '{tok}'")
                    return False
                opener = stack.pop()
                if _OPEN[opener.type] != str(tok):
                    self.error_at(
                        tok,
                        f"'{tok}' does not match '{opener}' at line "
                        f"{opener.line}, column {opener.column}",
                    )
                    return False
        if stack:
            opener = stack[-1]
            self.error_at(opener, f"unclosed '{opener}'")
            return False
        if first.type == "INVARIANT" and not any(t.type == "ENSURE" for t in chunk):
            # A mistyped keyword ('ensrue') is the likeliest cause: point at it, not the header.
            typo = next((t for t in chunk[2:] if keyword_hint(t, ("ensure",))), None)
            if typo is not None:
                self.error_at(typo, f"unknown keyword {_describe(typo)}; did you mean 'ensure'?")
                return False
            name = chunk[1] if len(chunk) > 1 and chunk[1].type == "NAME" else None
            what = f"invariant '{name}'" if name is not None else "invariant"
            self.error_at(first, f"{what} has no 'ensure'")
            return False
        return True

    def _bad_chars(self, chunk: list[Token], first: Token) -> None:
        """One message for a run of characters that no token starts with."""
        run = str(first)
        end = first.end_pos
        for tok in chunk[chunk.index(first) + 1 :]:
            if tok.type != "BAD_CHAR" or tok.start_pos != end:
                break
            run += str(tok)
            end = tok.end_pos
        hint = _OPERATOR_HINTS.get(run, "")
        what = "character" if len(run) == 1 else "characters"
        self.error_at(first, f"unexpected {what} '{run}'{hint}")

    @staticmethod
    def _acceptable(chunk: list[Token], bad: Token) -> set[str]:
        """The terminals that the parser really accepts just before *bad* (for the message)."""
        interactive = lark_parser().parse_interactive(start="item")
        try:
            for tok in chunk:
                if tok is bad:
                    break
                interactive.feed_token(tok)
            return set(interactive.accepts())  # type: ignore[no-untyped-call]
        except UnexpectedInput:  # pragma: no cover - the prefix was accepted once already
            return set()

    #: Try the hand-written parser first (tests turn it off to compare the two routes).
    fast = True

    def _parse_item(self, chunk: list[Token], following: Token | None) -> ast.Item | None:
        if not self._precheck(chunk):
            return None
        if self.fast:
            mark = len(self.diagnostics)
            try:
                return _Descent(self, chunk).item()
            except _NotFast:
                del self.diagnostics[mark:]  # the Lark route reports them again
        return self._parse_item_lark(chunk, following)

    def _parse_item_lark(self, chunk: list[Token], following: Token | None) -> ast.Item | None:
        interactive = lark_parser().parse_interactive(start="item")
        try:
            for tok in chunk:
                interactive.feed_token(tok)
            tree = interactive.feed_eof(self._end_token(following))  # type: ignore[no-untyped-call]
        except UnexpectedToken as exc:
            tok = exc.token
            if tok.type == "$END" and following is None:
                tok = Token("$END", "", line=chunk[-1].end_line, column=chunk[-1].end_column)
            acceptable = self._acceptable(chunk, exc.token) or set(exc.expected)
            expected = _expected(sorted(acceptable))
            hint = f"; expected {expected}" if expected else ""
            if tok.type == "EQUAL" and "EQ" in acceptable:
                hint = "; write '==' to compare"
            meant = keyword_hint(tok, (t.lower() for t in acceptable if t.lower() in KEYWORDS))
            if meant:
                hint = f"; did you mean '{meant}'?"
            shown = "end of file" if tok.type == "$END" and following is None else None
            self.error_at(tok, f"unexpected {shown or _describe(tok)}{hint}")
            return None
        except UnexpectedInput as exc:  # defensive: any other parser complaint
            self.error(exc.line, exc.column, "syntax error")
            return None
        builder = _Builder(self)
        try:
            return builder.transform(tree)
        except RecursionError:
            self.error_at(chunk[0], "expression nested too deeply")
            return None
        except VisitError as exc:
            if isinstance(exc.orig_exc, RecursionError):
                self.error_at(chunk[0], "expression nested too deeply")
                return None
            raise


#: The children of a rule in grammar order: tokens, the AST nodes built for sub-rules (a tuple of
#: them for ``set`` and ``interval``) and None for an absent optional; grammar.lark fixes the shape.
_Children = list[Any]


def _plain(children: Sequence[Any]) -> list[ast.Expr]:
    """Children without keyword tokens and absent optionals: the expressions."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


@v_args(meta=True)
class _Builder(Transformer[Token, ast.Item]):
    """Lark parse tree -> AST (positions from ``propagate_positions``)."""

    def __init__(self, owner: _FileParser) -> None:
        super().__init__()
        self.owner = owner
        self.file = owner.file

    def _p(self, meta: Meta) -> ast.Pos:
        return _pos(self.file, meta)

    # items
    def severity(self, meta: Meta, children: _Children) -> ast.Severity:
        names = [c for c in children if isinstance(c, Token) and c.type in _NAMES]
        idents = tuple(ast.Ident(self._ident(n), pos=_pos(self.file, n)) for n in names)
        return ast.Severity(idents, pos=self._p(meta))

    def let_def(self, meta: Meta, children: _Children) -> ast.Let:
        name = children[1]
        return ast.Let(
            ast.Ident(str(name), pos=_pos(self.file, name)), children[2], pos=self._p(meta)
        )

    def invariant(self, meta: Meta, children: _Children) -> ast.Invariant:
        _kw, name, desc, when_kw, when, ensure_kw, ensure = children
        description = None
        if desc is not None:
            description = ast.String(self._string(desc), pos=_pos(self.file, desc))
        return ast.Invariant(
            ast.Ident(str(name), pos=_pos(self.file, name)),
            description,
            when,
            ensure,
            when_pos=_pos(self.file, when_kw) if when_kw is not None else None,
            ensure_pos=_pos(self.file, ensure_kw),
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
        return ast.Number(str(tok), self._number(tok), pos=_pos(self.file, tok))

    def string(self, meta: Meta, children: _Children) -> ast.String:
        tok = children[0]
        return ast.String(self._string(tok), pos=_pos(self.file, tok))

    def true(self, meta: Meta, children: _Children) -> ast.BoolLit:
        return ast.BoolLit(True, pos=_pos(self.file, children[0]))

    def false(self, meta: Meta, children: _Children) -> ast.BoolLit:
        return ast.BoolLit(False, pos=_pos(self.file, children[0]))

    def name(self, meta: Meta, children: _Children) -> ast.Name:
        tok = children[0]
        return ast.Name(self._ident(tok), pos=_pos(self.file, tok))

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
        if not _NUMBER.match(text):
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


class _NotFast(Exception):
    """The item is not one the hand-written parser takes: Lark decides (and reports)."""


#: Bracket and prefix-operator depth beyond which Lark decides the item (its tree transformer
#: can run out of stack on deep nesting, reported as "nested too deeply": Lark alone says so).
_FAST_DEPTH = 16

_COMPARE_OPS = frozenset({"LT", "LE", "GT", "GE", "EQ", "NE"})


class _Descent:
    """Recursive descent over one item's tokens, building exactly the AST (positions
    included) that Lark's LALR parser and :class:`_Builder` build for grammar.lark.

    It takes only items that parse: at the first token the grammar does not allow there it
    raises :class:`_NotFast`, and the Lark route parses the item again and words the error;
    tests/dsl/test_fast_parser.py compares the two routes on generated and mutated files.  A
    node spans its first token to its last, as ``propagate_positions`` gives it."""

    def __init__(self, owner: _FileParser, tokens: list[Token]) -> None:
        self.owner = owner
        self.file = owner.file
        self.toks = tokens
        self.i = 0
        self.depth = 0
        self.lit = _Builder(owner)  # the literal checks (_ident, _number, _string)

    # tokens
    def _peek(self) -> str:
        return self.toks[self.i].type if self.i < len(self.toks) else "$END"

    def _take(self, kind: str) -> Token:
        if self.i >= len(self.toks) or self.toks[self.i].type != kind:
            raise _NotFast
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def _span(self, first: Token) -> ast.Pos:
        last = self.toks[self.i - 1]
        return ast.Pos(
            self.file,
            first.line or 0,
            first.column or 0,
            last.end_line or 0,
            last.end_column or 0,
        )

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _FAST_DEPTH:
            raise _NotFast

    # items
    def item(self) -> ast.Item:
        kind = self._peek()
        if kind == "INVARIANT":
            out: ast.Item = self._invariant()
        elif kind == "LET":
            out = self._let()
        elif kind == "SEVERITY":
            out = self._severity()
        else:
            raise _NotFast
        if self.i != len(self.toks):
            raise _NotFast
        return out

    def _severity(self) -> ast.Severity:
        first = self._take("SEVERITY")
        names = [self._ref()]
        while self._peek() == "LT":
            self.i += 1
            names.append(self._ref())
        idents = tuple(ast.Ident(self.lit._ident(n), pos=_pos(self.file, n)) for n in names)
        return ast.Severity(idents, pos=self._span(first))

    def _ref(self) -> Token:
        if self._peek() not in _NAMES:
            raise _NotFast
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def _let(self) -> ast.Let:
        first = self._take("LET")
        name = self._take("NAME")
        self._take("EQUAL")
        expr = self._expr()
        return ast.Let(ast.Ident(str(name), pos=_pos(self.file, name)), expr, pos=self._span(first))

    def _invariant(self) -> ast.Invariant:
        first = self._take("INVARIANT")
        name = self._take("NAME")
        self._take("COLON")
        description = None
        if self._peek() == "STRING":
            desc = self._take("STRING")
            description = ast.String(self.lit._string(desc), pos=_pos(self.file, desc))
        when = None
        when_pos = None
        if self._peek() == "WHEN":
            when_pos = _pos(self.file, self._take("WHEN"))
            when = self._expr()
        ensure_kw = self._take("ENSURE")
        ensure = self._expr()
        return ast.Invariant(
            ast.Ident(str(name), pos=_pos(self.file, name)),
            description,
            when,
            ensure,
            when_pos=when_pos,
            ensure_pos=_pos(self.file, ensure_kw),
            pos=self._span(first),
        )

    # boolean structure
    def _expr(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        args = [self._or()]
        while self._peek() == "IMPLIES":
            self.i += 1
            args.append(self._or())
        if len(args) == 1:
            return args[0]
        assert first is not None
        return ast.Implies(tuple(args), pos=self._span(first))

    def _or(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        args = [self._and()]
        while self._peek() == "OR":
            self.i += 1
            args.append(self._and())
        if len(args) == 1:
            return args[0]
        assert first is not None
        return ast.Or(tuple(args), pos=self._span(first))

    def _and(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        args = [self._not()]
        while self._peek() == "AND":
            self.i += 1
            args.append(self._not())
        if len(args) == 1:
            return args[0]
        assert first is not None
        return ast.And(tuple(args), pos=self._span(first))

    def _not(self) -> ast.Expr:
        nots: list[Token] = []
        while self._peek() == "NOT":
            self._enter()
            nots.append(self.toks[self.i])
            self.i += 1
        out = self._comparison()
        self.depth -= len(nots)
        for tok in reversed(nots):
            out = ast.Not(out, pos=self._span(tok))
        return out

    def _comparison(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        subject = self._sum()
        kind = self._peek()
        negated = False
        if kind == "NOT":
            self.i += 1
            if self._peek() != "IN":
                raise _NotFast
            negated = True
            kind = "IN"
        if kind == "IN":
            self.i += 1
            assert first is not None
            opener = self._peek()
            if opener == "LBRACE":
                elements = self._set()
                return ast.InSet(subject, elements, negated, pos=self._span(first))
            if opener == "LSQB":
                lo, hi = self._interval()
                return ast.InInterval(subject, lo, hi, negated, pos=self._span(first))
            raise _NotFast
        if kind not in _COMPARE_OPS:
            return subject
        operands = [subject]
        ops: list[str] = []
        while self._peek() in _COMPARE_OPS:
            ops.append(str(self.toks[self.i]))
            self.i += 1
            operands.append(self._sum())
        assert first is not None
        return ast.Compare(tuple(operands), tuple(ops), pos=self._span(first))

    def _set(self) -> tuple[ast.Expr, ...]:
        self._take("LBRACE")
        self._enter()
        out: list[ast.Expr] = []
        if self._peek() != "RBRACE":
            out.append(self._sum())
            while self._peek() == "COMMA":
                self.i += 1
                out.append(self._sum())
        self._take("RBRACE")
        self.depth -= 1
        return tuple(out)

    def _interval(self) -> tuple[ast.Expr, ast.Expr]:
        self._take("LSQB")
        self._enter()
        lo = self._sum()
        self._take("COMMA")
        hi = self._sum()
        self._take("RSQB")
        self.depth -= 1
        return lo, hi

    # arithmetic
    def _sum(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        head = self._product()
        rest: list[tuple[str, ast.Expr]] = []
        while self._peek() in ("PLUS", "MINUS"):
            op = str(self.toks[self.i])
            self.i += 1
            rest.append((op, self._product()))
        if not rest:
            return head
        assert first is not None
        return ast.Sum(head, tuple(rest), pos=self._span(first))

    def _product(self) -> ast.Expr:
        first = self.toks[self.i] if self.i < len(self.toks) else None
        factors = [self._unary()]
        while self._peek() == "STAR":
            self.i += 1
            factors.append(self._unary())
        if len(factors) == 1:
            return factors[0]
        assert first is not None
        return ast.Product(tuple(factors), pos=self._span(first))

    def _unary(self) -> ast.Expr:
        minus: list[Token] = []
        while self._peek() == "MINUS":
            self._enter()
            minus.append(self.toks[self.i])
            self.i += 1
        out = self._atom()
        self.depth -= len(minus)
        for tok in reversed(minus):
            out = ast.Neg(out, pos=self._span(tok))
        return out

    def _atom(self) -> ast.Expr:
        if self.i >= len(self.toks):
            raise _NotFast
        tok = self.toks[self.i]
        kind = tok.type
        self.i += 1
        if kind == "NUMBER":
            return ast.Number(str(tok), self.lit._number(tok), pos=_pos(self.file, tok))
        if kind == "NAME":
            if self._peek() == "LPAR":
                return self._call(tok)
            return ast.Name(str(tok), pos=_pos(self.file, tok))
        if kind == "QUOTED_NAME":
            return ast.Name(self.lit._ident(tok), pos=_pos(self.file, tok))
        if kind == "STRING":
            return ast.String(self.lit._string(tok), pos=_pos(self.file, tok))
        if kind == "TRUE" or kind == "FALSE":
            return ast.BoolLit(kind == "TRUE", pos=_pos(self.file, tok))
        if kind == "LPAR":
            self._enter()
            inner = self._expr()
            self._take("RPAR")
            self.depth -= 1
            return ast.Paren(inner, pos=self._span(tok))
        raise _NotFast

    def _call(self, name: Token) -> ast.Call:
        self._take("LPAR")
        self._enter()
        args: list[ast.Expr] = []
        if self._peek() != "RPAR":
            args.append(self._expr())
            while self._peek() == "COMMA":
                self.i += 1
                args.append(self._expr())
        self._take("RPAR")
        self.depth -= 1
        return ast.Call(str(name), tuple(args), pos=self._span(name))
