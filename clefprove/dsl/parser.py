"""Text -> :class:`~clefprove.dsl.ast.Program`, with every syntax error of a file collected.

The file is lexed once; the token stream is split before every top-level keyword
(``severity``, ``let``, ``invariant``, which can appear nowhere else) and each item is parsed
on its own, so one mistake does not hide the next.  Two routes parse an item to the same AST:
a hand-written descent (:class:`_Descent`) over the tokens of the fast lexer
(:mod:`clefprove.dsl.lexicon`), and Lark's LALR parser over grammar.lark
(:mod:`clefprove.dsl.lark_route`), which decides and words everything the descent does not
take.  Lark is imported only then.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from clefprove.dsl import ast
from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.dsl.lexicon import NAMES, NUMBER, pos_of, scanner
from clefprove.frozen import frozen

if TYPE_CHECKING:
    from lark import Token

_T = TypeVar("_T")

#: Deepest bracket nesting accepted (far beyond anything a person writes).
MAX_NESTING = 64

_ITEM_KEYWORDS = {"SEVERITY", "LET", "INVARIANT"}
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


_NEWLINE = re.compile("\n")
_LASTGROUP = operator.attrgetter("lastgroup")
_MATCH_START = re.Match.start
_MATCH_GROUP = re.Match.group


@frozen
class _Lexed:
    """The tokens of a text that are not whitespace, as parallel lists (no token object per
    token): type (after Lark's callbacks: keywords retyped), value, start offset, and the
    line and column of the start and of the end, as Lark's ``Token`` has them."""

    kinds: list[str]
    values: list[str]
    starts: list[int]
    lines: list[int]
    cols: list[int]
    end_lines: list[int]
    end_cols: list[int]

    def token(self, i: int) -> Token:
        """The Lark token *i* (for the Lark route and the error messages)."""
        from lark import Token

        value = self.values[i]
        start = self.starts[i]
        return Token(
            self.kinds[i],
            value,
            start,
            self.lines[i],
            self.cols[i],
            self.end_lines[i],
            self.end_cols[i],
            start + len(value),
        )

    def tokens(self, lo: int, hi: int) -> list[Token]:
        return [self.token(i) for i in range(lo, hi)]

    def select(self, keep: list[int]) -> _Lexed:
        return _Lexed(
            [self.kinds[i] for i in keep],
            [self.values[i] for i in keep],
            [self.starts[i] for i in keep],
            [self.lines[i] for i in keep],
            [self.cols[i] for i in keep],
            [self.end_lines[i] for i in keep],
            [self.end_cols[i] for i in keep],
        )

    def without(self, drop: list[int]) -> _Lexed:
        """:meth:`select` of every token but those at *drop* (ascending): copies of the lists
        with those few entries deleted, instead of a comprehension over every token."""
        return _Lexed(
            _cut(self.kinds, drop),
            _cut(self.values, drop),
            _cut(self.starts, drop),
            _cut(self.lines, drop),
            _cut(self.cols, drop),
            _cut(self.end_lines, drop),
            _cut(self.end_cols, drop),
        )

    @staticmethod
    def of_tokens(tokens: Sequence[Token]) -> _Lexed:
        return _Lexed(
            [t.type for t in tokens],
            [str(t) for t in tokens],
            [t.start_pos or 0 for t in tokens],
            [t.line or 0 for t in tokens],
            [t.column or 0 for t in tokens],
            [t.end_line or 0 for t in tokens],
            [t.end_column or 0 for t in tokens],
        )


def _cut(source: list[_T], drop: list[int]) -> list[_T]:
    """A copy of *source* without the entries at *drop* (ascending)."""
    out = source.copy()
    for i in reversed(drop):
        del out[i]
    return out


def _lex_fast(text: str) -> _Lexed | None:
    """The tokens of *text* that are not whitespace (comments included), as Lark's lexer
    gives them: same types, values and positions (tests/dsl check it).  The scanner's master
    regex runs over the whole text at C speed (one match per token); the rest is list
    comprehensions.  None where that does not apply (a character no terminal matches, a token
    other than whitespace spanning lines): then Lark's lexer does it."""
    mre, tables = scanner()
    matches = list(iter(mre.scanner(text).match, None))  # type: ignore[attr-defined]
    end = matches[-1].end() if matches else 0
    if text[end:].strip(" \t\f\r\n"):  # trailing whitespace is what no match takes
        return None
    if not matches:
        return _Lexed([], [], [], [], [], [], [])
    # (map over the Match methods: a C loop, no Python frame per token)
    kinds: list[str] = list(map(_LASTGROUP, matches))
    if None in kinds:
        return None
    starts: list[int] = list(map(_MATCH_START, matches, kinds))
    values: list[str] = list(map(_MATCH_GROUP, matches, kinds))
    if "\n" in "".join(values):
        return None
    for kind, table in tables.items():
        if kind in kinds:
            kinds = [
                table.get(v, k) if k == kind else k for k, v in zip(kinds, values, strict=True)
            ]
    line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
    if len(line_starts) == 1:
        lines = [1] * len(starts)
        cols = [s + 1 for s in starts]
    else:
        lines = list(map(partial(bisect_right, line_starts), starts))
        # a token on line n starts line_starts[n - 1] characters in: column start - that + 1
        before = [0, *(a - 1 for a in line_starts)]
        cols = list(map(operator.sub, starts, map(before.__getitem__, lines)))
    end_cols = list(map(operator.add, cols, map(len, values)))
    return _Lexed(kinds, values, starts, lines, cols, lines, end_cols)


def _lex_code(text: str) -> Iterator[Token]:
    """The tokens of *text* that are not whitespace (comments included), as
    ``lark_route.lex_all`` gives them: same types, values and positions (tests/dsl check it)."""
    lexed = _lex_fast(text)
    if lexed is None:
        from clefprove.dsl.lark_route import lex_all

        yield from (t for t in lex_all(text) if t.type != "WS")
        return
    yield from lexed.tokens(0, len(lexed.kinds))


@frozen
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
    import difflib  # a suggestion, on an error only

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
        lexed = _lex_fast(self.text)
        if lexed is None or not _BAD_KINDS.isdisjoint(lexed.kinds):
            return self._run_tokens(list(_lex_code(self.text)))
        comments: list[ast.Comment] = []
        if "COMMENT" in lexed.kinds:
            at = [i for i, kind in enumerate(lexed.kinds) if kind == "COMMENT"]
            for i in at:
                comments.append(ast.Comment(lexed.values[i].rstrip(), pos=self._tpos(lexed, i)))
            lexed = lexed.without(at)
        kinds = lexed.kinds
        n = len(kinds)
        bounds = [0, *(i for i, k in enumerate(kinds) if k in _ITEM_KEYWORDS and i > 0), n]
        items: list[ast.Item] = []
        broken: set[str] = set()
        broken_severity = False
        for lo, hi in itertools.pairwise(bounds):
            if lo == hi:
                continue
            item = self._parse_item_fast(lexed, lo, hi)
            if item is not None:
                items.append(item)
            elif kinds[lo] == "SEVERITY":
                broken_severity = True
            elif hi - lo > 1 and kinds[lo + 1] == "NAME":
                broken.add(lexed.values[lo + 1])
        return self._result(items, comments, broken, broken_severity, lexed.lines, lexed.cols)

    def _run_tokens(self, lexed: list[Token]) -> ParseResult:
        """:meth:`run` over Lark tokens (a file with a lexical error, or one the fast lexer
        does not take)."""
        tokens: list[Token] = []
        comments: list[ast.Comment] = []
        for tok in lexed:
            if tok.type == "COMMENT":
                comments.append(ast.Comment(str(tok).rstrip(), pos=pos_of(self.file, tok)))
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
        lines = [t.line or 0 for t in tokens]
        cols = [t.column or 0 for t in tokens]
        return self._result(items, comments, broken, broken_severity, lines, cols)

    def _result(
        self,
        items: list[ast.Item],
        comments: list[ast.Comment],
        broken: set[str],
        broken_severity: bool,
        lines: list[int],
        cols: list[int],
    ) -> ParseResult:
        blank = frozenset(i + 1 for i, line in enumerate(self.lines) if not line.strip())
        # the column of the first token on each line (later ones overwritten by earlier ones)
        starts = dict(zip(reversed(lines), reversed(cols), strict=True))
        program = ast.Program(
            self.file, tuple(items), tuple(comments), blank, tuple(sorted(starts.items()))
        )
        diagnostics = tuple(sorted(self.diagnostics, key=lambda d: (d.line, d.column)))
        return ParseResult(program, diagnostics, frozenset(broken), broken_severity)

    def _tpos(self, lexed: _Lexed, i: int) -> ast.Pos:
        return _new_pos(
            self.file, lexed.lines[i], lexed.cols[i], lexed.end_lines[i], lexed.end_cols[i]
        )

    def _parse_item_fast(self, lexed: _Lexed, lo: int, hi: int) -> ast.Item | None:
        """:meth:`_parse_item` of the tokens *lo* to *hi* of *lexed*, Lark tokens made only
        where Lark parses or words a mistake."""
        if self.fast and _clean(lexed.kinds, lexed.values, lo, hi):
            mark = len(self.diagnostics)
            try:
                return _Descent(self, lexed, lo, hi).item()
            except _NotFast:
                del self.diagnostics[mark:]  # the Lark route reports them again
            return self._parse_item_lark(lexed.tokens(lo, hi), self._following(lexed, hi))
        return self._parse_item(lexed.tokens(lo, hi), self._following(lexed, hi))

    @staticmethod
    def _following(lexed: _Lexed, hi: int) -> Token | None:
        """The token after an item (Lark's end-of-item token; made only on the Lark route)."""
        return lexed.token(hi) if hi < len(lexed.kinds) else None

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
        from lark import Token

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
        from lark.exceptions import UnexpectedInput

        from clefprove.dsl.lark_route import lark_parser

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
                return _Descent(self, _Lexed.of_tokens(chunk), 0, len(chunk)).item()
            except _NotFast:
                del self.diagnostics[mark:]  # the Lark route reports them again
        return self._parse_item_lark(chunk, following)

    def _parse_item_lark(self, chunk: list[Token], following: Token | None) -> ast.Item | None:
        from lark import Token
        from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError

        from clefprove.dsl.lark_route import Builder, lark_parser

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
        builder = Builder(self)
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


def _plain_pos_class() -> bool:
    """Whether ``ast.Pos`` is the plain frozen dataclass :func:`_new_pos` fills directly."""
    return ast.fillable(ast.Pos, ("file", "line", "column", "end_line", "end_column"))


def _plain_literal_classes() -> bool:
    """Whether ``ast.Name``, ``ast.Number`` and ``ast.Compare`` are the plain frozen
    dataclasses :func:`_new_literal` fills directly (``pos`` first, as their ``__init__``
    stores it)."""
    return (
        _plain_pos_class()
        and ast.fillable(ast.Name, ("pos", "id"))
        and ast.fillable(ast.Number, ("pos", "text", "value"))
        and ast.fillable(ast.Compare, ("pos", "operands", "ops"))
    )


_NEW = object.__new__
_SET = object.__setattr__


def _new_pos(file: str, line: int, column: int, end_line: int, end_column: int) -> ast.Pos:
    """``ast.Pos(file, line, column, end_line, end_column)`` without the frozen dataclass's
    ``__init__`` (five ``object.__setattr__`` calls, ~1 us; the descent makes about 85 per
    SPEC file): the same instance dict, set in one call.  Only while ``ast.Pos`` is the plain
    class that checks (:func:`_plain_pos_class`); else its constructor."""
    pos: ast.Pos = _NEW(ast.Pos)
    _SET(pos, "__dict__", {"file": file, "line": line, "column": column,
                           "end_line": end_line, "end_column": end_column})  # fmt: skip
    return pos


if not _plain_pos_class():  # pragma: no cover - ast.Pos changed shape: its constructor
    _new_pos = ast.Pos


def _new_literal(d: _Descent, i: int, value: Fraction) -> ast.Compare:
    """The comparison ``name OP number`` at token *i* of *d* as the descent builds it (a
    Compare of a Name and a Number, each spanning its token, the Compare both), the four
    nodes filled without their frozen dataclass ``__init__`` (two to three
    ``object.__setattr__`` calls each; the box literals of a 60-literal ``when``).  Only
    while the classes are the plain ones that check (:func:`_plain_literal_classes`); else
    their constructors (:func:`_built_literal`)."""
    file, lines, cols, end_lines, end_cols = d.file, d.lines, d.cols, d.end_lines, d.end_cols
    values = d.values
    j = i + 2
    new, fill = _NEW, _SET
    pos: ast.Pos = new(ast.Pos)
    line, col = lines[i], cols[i]
    fill(pos, "__dict__", {"file": file, "line": line, "column": col,
                           "end_line": end_lines[i], "end_column": end_cols[i]})  # fmt: skip
    left: ast.Name = new(ast.Name)
    fill(left, "__dict__", {"pos": pos, "id": values[i]})
    pos = new(ast.Pos)
    end_line, end_col = end_lines[j], end_cols[j]
    fill(pos, "__dict__", {"file": file, "line": lines[j], "column": cols[j],
                           "end_line": end_line, "end_column": end_col})  # fmt: skip
    right: ast.Number = new(ast.Number)
    fill(right, "__dict__", {"pos": pos, "text": values[j], "value": value})
    pos = new(ast.Pos)
    fill(pos, "__dict__", {"file": file, "line": line, "column": col,
                           "end_line": end_line, "end_column": end_col})  # fmt: skip
    out: ast.Compare = new(ast.Compare)
    fill(out, "__dict__", {"pos": pos, "operands": (left, right), "ops": (values[i + 1],)})
    return out


def _built_literal(d: _Descent, i: int, value: Fraction) -> ast.Compare:
    """:func:`_new_literal` through the constructors (the classes changed shape)."""
    left = d._plain_name(i)
    right = ast.Number(d.values[i + 2], value, pos=d._tpos(i + 2))
    return ast.Compare((left, right), (d.values[i + 1],), pos=d._span(i))


if not _plain_literal_classes():  # pragma: no cover - the AST changed shape: its constructors
    _new_literal = _built_literal


class _NotFast(Exception):
    """The item is not one the hand-written parser takes: Lark decides (and reports)."""


#: Bracket and prefix-operator depth beyond which Lark decides the item (its tree transformer
#: can run out of stack on deep nesting, reported as "nested too deeply": Lark alone says so).
_FAST_DEPTH = 16

_COMPARE_OPS = frozenset({"LT", "LE", "GT", "GE", "EQ", "NE"})


_BAD_KINDS = frozenset({"BAD_CHAR", "SINGLE_QUOTED", "UNTERMINATED_STRING"})
_PAIRS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
_BRACKET_KINDS = frozenset({*_OPEN, *_CLOSE})


def _clean(kinds: list[str], values: list[str], lo: int, hi: int) -> bool:
    """Whether ``_FileParser._precheck`` passes the item *lo* to *hi* without a word (the
    file has no lexical error): it starts with an item keyword, its brackets match, nest at
    most ``MAX_NESTING`` deep, and an invariant has its ``ensure``."""
    if kinds[lo] not in _ITEM_KEYWORDS:
        return False
    part = kinds[lo:hi]
    if kinds[lo] == "INVARIANT" and "ENSURE" not in part:
        return False
    stack: list[str] = []
    for kind in part:
        if kind not in _BRACKET_KINDS:
            continue
        if kind in _PAIRS:
            stack.append(_PAIRS[kind])
            if len(stack) > MAX_NESTING:
                return False
        elif not stack or stack.pop() != kind:
            return False
    return not stack


#: What may follow a ``name OP number`` comparison for it to be the whole comparison (no
#: sum, product, call or chain continues it).
_LITERAL_END = frozenset({"AND", "OR", "IMPLIES", "ENSURE", "RPAR", "COMMA", "$END"})
_OPERANDS = frozenset({"NAME", "NUMBER"})


class _Descent:
    """Recursive descent over one item's tokens (``lexed`` from *lo* to *hi*), building
    exactly the AST (positions included) that Lark's LALR parser and
    :class:`~clefprove.dsl.lark_route.Builder` build for grammar.lark.

    It takes only items that parse and whose literals are well-formed: at the first token
    the grammar does not allow there (or a malformed number, string or quoted name) it raises
    :class:`_NotFast`, and the Lark route parses the item again and words the error;
    tests/dsl/test_fast_parser.py compares the two routes on generated and mutated files.  A
    node spans its first token to its last, as ``propagate_positions`` gives it.  A
    comparison ``name OP number`` (``number OP name``, name and number alike) followed by
    ``and``, ``or``, ... is built in one step (the box literals of a ``when``)."""

    def __init__(self, owner: _FileParser, lexed: _Lexed, lo: int, hi: int) -> None:
        self.file = owner.file
        self.kinds = [*lexed.kinds[lo:hi], "$END"]  # the sentinel: no bounds checks
        self.values = lexed.values[lo:hi]
        self.lines = lexed.lines[lo:hi]
        self.cols = lexed.cols[lo:hi]
        self.end_lines = lexed.end_lines[lo:hi]
        self.end_cols = lexed.end_cols[lo:hi]
        self.n = hi - lo
        self.i = 0
        self.depth = 0

    # tokens
    def _take(self, kind: str) -> int:
        i = self.i
        if self.kinds[i] != kind:
            raise _NotFast
        self.i = i + 1
        return i

    def _tpos(self, i: int) -> ast.Pos:
        return _new_pos(self.file, self.lines[i], self.cols[i], self.end_lines[i], self.end_cols[i])

    def _span(self, first: int) -> ast.Pos:
        i = self.i - 1
        return _new_pos(
            self.file, self.lines[first], self.cols[first], self.end_lines[i], self.end_cols[i]
        )

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _FAST_DEPTH:
            raise _NotFast

    # literals (a malformed one: the Lark route words it)
    def _ident(self, i: int) -> str:
        text = self.values[i]
        if self.kinds[i] != "QUOTED_NAME":
            return text
        if len(text) == 2:
            raise _NotFast
        return text[1:-1]

    def _number(self, i: int) -> ast.Number:
        text = self.values[i]
        if not NUMBER.match(text):
            raise _NotFast
        value = float(text)
        if not math.isfinite(value):
            raise _NotFast
        return ast.Number(text, ast.exact_fraction(value), pos=self._tpos(i))

    def _string(self, i: int) -> str:
        try:
            value: str = json.loads(self.values[i])
            value.encode("utf-8")
        except (ValueError, UnicodeEncodeError):
            raise _NotFast from None
        return value

    # items
    def item(self) -> ast.Item:
        kind = self.kinds[0]
        if kind == "INVARIANT":
            out: ast.Item = self._invariant()
        elif kind == "LET":
            out = self._let()
        elif kind == "SEVERITY":
            out = self._severity()
        else:
            raise _NotFast
        if self.i != self.n:
            raise _NotFast
        return out

    def _severity(self) -> ast.Severity:
        first = self._take("SEVERITY")
        names = [self._ref()]
        while self.kinds[self.i] == "LT":
            self.i += 1
            names.append(self._ref())
        idents = tuple(ast.Ident(self._ident(n), pos=self._tpos(n)) for n in names)
        return ast.Severity(idents, pos=self._span(first))

    def _ref(self) -> int:
        i = self.i
        if self.kinds[i] not in NAMES:
            raise _NotFast
        self.i = i + 1
        return i

    def _let(self) -> ast.Let:
        first = self._take("LET")
        name = self._take("NAME")
        self._take("EQUAL")
        expr = self._expr()
        return ast.Let(
            ast.Ident(self.values[name], pos=self._tpos(name)), expr, pos=self._span(first)
        )

    def _invariant(self) -> ast.Invariant:
        first = self._take("INVARIANT")
        name = self._take("NAME")
        self._take("COLON")
        description = None
        if self.kinds[self.i] == "STRING":
            desc = self._take("STRING")
            description = ast.String(self._string(desc), pos=self._tpos(desc))
        when = None
        when_pos = None
        if self.kinds[self.i] == "WHEN":
            when_pos = self._tpos(self._take("WHEN"))
            when = self._expr()
        ensure_kw = self._take("ENSURE")
        ensure = self._expr()
        return ast.Invariant(
            ast.Ident(self.values[name], pos=self._tpos(name)),
            description,
            when,
            ensure,
            when_pos=when_pos,
            ensure_pos=self._tpos(ensure_kw),
            pos=self._span(first),
        )

    # boolean structure
    def _expr(self) -> ast.Expr:
        first = self.i
        args = [self._or()]
        while self.kinds[self.i] == "IMPLIES":
            self.i += 1
            args.append(self._or())
        if len(args) == 1:
            return args[0]
        return ast.Implies(tuple(args), pos=self._span(first))

    def _or(self) -> ast.Expr:
        first = self.i
        args = [self._and()]
        while self.kinds[self.i] == "OR":
            self.i += 1
            args.append(self._and())
        if len(args) == 1:
            return args[0]
        return ast.Or(tuple(args), pos=self._span(first))

    def _and(self) -> ast.Expr:
        first = self.i
        kinds = self.kinds
        args = [self._literal() or self._not()]
        while kinds[self.i] == "AND":
            self.i += 1
            args.append(self._literal() or self._not())
        if len(args) == 1:
            return args[0]
        return ast.And(tuple(args), pos=self._span(first))

    def _literal(self) -> ast.Compare | None:
        """``a OP b`` with a and b each a name or a number, ending there; None otherwise."""
        i = self.i
        kinds = self.kinds
        if (
            kinds[i] not in _OPERANDS
            or kinds[i + 1] not in _COMPARE_OPS
            or kinds[i + 2] not in _OPERANDS
            or kinds[i + 3] not in _LITERAL_END
        ):
            return None
        if kinds[i] == "NAME" and kinds[i + 2] == "NUMBER":  # a box literal: x >= 0.25
            values = self.values
            text = values[i + 2]
            if not NUMBER.match(text):
                raise _NotFast
            value = float(text)
            if not math.isfinite(value):
                raise _NotFast
            self.i = i + 3
            return _new_literal(self, i, ast.exact_fraction(value))
        left = self._number(i) if kinds[i] == "NUMBER" else self._plain_name(i)
        right = self._number(i + 2) if kinds[i + 2] == "NUMBER" else self._plain_name(i + 2)
        self.i = i + 3
        return ast.Compare((left, right), (self.values[i + 1],), pos=self._span(i))

    def _plain_name(self, i: int) -> ast.Name:
        return ast.Name(self.values[i], pos=self._tpos(i))

    def _not(self) -> ast.Expr:
        nots: list[int] = []
        while self.kinds[self.i] == "NOT":
            self._enter()
            nots.append(self.i)
            self.i += 1
        out = self._comparison()
        self.depth -= len(nots)
        for tok in reversed(nots):
            out = ast.Not(out, pos=self._span(tok))
        return out

    def _comparison(self) -> ast.Expr:
        first = self.i
        subject = self._sum()
        kind = self.kinds[self.i]
        negated = False
        if kind == "NOT":
            self.i += 1
            if self.kinds[self.i] != "IN":
                raise _NotFast
            negated = True
            kind = "IN"
        if kind == "IN":
            self.i += 1
            opener = self.kinds[self.i]
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
        while self.kinds[self.i] in _COMPARE_OPS:
            ops.append(self.values[self.i])
            self.i += 1
            operands.append(self._sum())
        return ast.Compare(tuple(operands), tuple(ops), pos=self._span(first))

    def _set(self) -> tuple[ast.Expr, ...]:
        self._take("LBRACE")
        self._enter()
        out: list[ast.Expr] = []
        if self.kinds[self.i] != "RBRACE":
            out.append(self._sum())
            while self.kinds[self.i] == "COMMA":
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
        first = self.i
        head = self._product()
        rest: list[tuple[str, ast.Expr]] = []
        while self.kinds[self.i] in ("PLUS", "MINUS"):
            op = self.values[self.i]
            self.i += 1
            rest.append((op, self._product()))
        if not rest:
            return head
        return ast.Sum(head, tuple(rest), pos=self._span(first))

    def _product(self) -> ast.Expr:
        first = self.i
        factors = [self._unary()]
        while self.kinds[self.i] == "STAR":
            self.i += 1
            factors.append(self._unary())
        if len(factors) == 1:
            return factors[0]
        return ast.Product(tuple(factors), pos=self._span(first))

    def _unary(self) -> ast.Expr:
        minus: list[int] = []
        while self.kinds[self.i] == "MINUS":
            self._enter()
            minus.append(self.i)
            self.i += 1
        out = self._atom()
        self.depth -= len(minus)
        for tok in reversed(minus):
            out = ast.Neg(out, pos=self._span(tok))
        return out

    def _atom(self) -> ast.Expr:
        i = self.i
        kind = self.kinds[i]
        if kind == "$END":
            raise _NotFast
        self.i = i + 1
        if kind == "NUMBER":
            return self._number(i)
        if kind == "NAME":
            if self.kinds[self.i] == "LPAR":
                return self._call(i)
            return ast.Name(self.values[i], pos=self._tpos(i))
        if kind == "QUOTED_NAME":
            return ast.Name(self._ident(i), pos=self._tpos(i))
        if kind == "STRING":
            return ast.String(self._string(i), pos=self._tpos(i))
        if kind == "TRUE" or kind == "FALSE":
            return ast.BoolLit(kind == "TRUE", pos=self._tpos(i))
        if kind == "LPAR":
            self._enter()
            inner = self._expr()
            self._take("RPAR")
            self.depth -= 1
            return ast.Paren(inner, pos=self._span(i))
        raise _NotFast

    def _call(self, name: int) -> ast.Call:
        self._take("LPAR")
        self._enter()
        args: list[ast.Expr] = []
        if self.kinds[self.i] != "RPAR":
            args.append(self._expr())
            while self.kinds[self.i] == "COMMA":
                self.i += 1
                args.append(self._expr())
        self._take("RPAR")
        self.depth -= 1
        return ast.Call(self.values[name], tuple(args), pos=self._span(name))
