"""The hand-written parser (``parser._Descent``) against the Lark route it shortcuts: the same
AST with every position, the same diagnostics, on every invariant file of the repository,
generated programs, and token mutations (which mostly do not parse: then Lark alone decides)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clefprove.dsl import ast, lark_route, scanner_table
from clefprove.dsl import parser as ps
from clefprove.dsl.fmt import format_program

from .strategies import programs
from .test_properties import _TOKEN, POOL, RICH, VALID

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(
    max_examples=int(os.environ.get("CLEFPROVE_DSL_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class _LarkOnly(ps._FileParser):
    fast = False


def _dump(node: object) -> object:
    """Every field of an AST, positions included (they are left out of ``==``)."""
    if isinstance(node, tuple | list):
        return tuple(_dump(x) for x in node)
    if isinstance(node, frozenset):
        return frozenset(_dump(x) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = tuple((f.name, _dump(getattr(node, f.name))) for f in dataclasses.fields(node))
        return (type(node).__name__, *fields)
    return node


def _result(cls: type[ps._FileParser], text: str) -> tuple[object, ...]:
    r = cls(text, "t.inv").run()
    diags = tuple(dataclasses.astuple(d) for d in r.diagnostics)
    return _dump(r.program), diags, r.broken, r.broken_severity


def _tokens(tokens: object) -> list[tuple[object, ...]]:
    return [
        (t.type, str(t), t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)
        for t in tokens  # type: ignore[attr-defined]
    ]


def _same(text: str) -> None:
    assert _result(ps._FileParser, text) == _result(_LarkOnly, text)
    lark_tokens = [t for t in lark_route.lex_all(text) if t.type != "WS"]
    assert _tokens(ps._lex_code(text)) == _tokens(lark_tokens)


def _files() -> list[Path]:
    found = sorted((ROOT / "tests").rglob("*.inv")) + sorted((ROOT / "invariants").rglob("*.inv"))
    found += sorted((ROOT / "examples").rglob("*.inv"))
    return found


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_invariant_files(path: Path) -> None:
    _same(path.read_text("utf-8", errors="replace"))


BOX = (
    "invariant box:\n  when "
    + " and ".join(f"f{j} >= {0.1 * j!r} and f{j} <= {-1.5e-3 * j!r}" for j in range(30))
    + "\n  ensure action == class_0\n"
)

#: Box literals of every shape the descent builds in one step, across lines, next to others.
BOX_FORMS = (
    "invariant box:\n  when f0 >= 1e5 and f1 < .5 and\n    f2 > 0. and f3 <= 1E-300 and "
    "f4 == 2 and f5 != 7.25e+3\n    and 3 <= f6 and `f 7` >= 1 and f8 >= 1e999 and f9 >= 1 or "
    "f10 <= 0 implies f11 < 1\n  ensure action == class_0\n"
)

CASES = [
    RICH,
    BOX,
    BOX_FORMS,
    "invariant t:\n  ensure f()\n",
    "invariant t:\n  ensure f(a, b and c, -(1))\n",
    'invariant t: "d" ensure x in {}\n',
    "invariant t: ensure x not in [1, -2] implies y\n",
    "invariant t: ensure not not - -x < 3 <= y\n",
    "severity `in` < b < `x y`\nlet q = 1\ninvariant t: ensure q\n",
    "let e = ``\ninvariant t: ensure e and 1.2.3 > 1e999\n",
    'invariant t: ensure "\\ud800" == "\\q"\n',
    "invariant t:\n  ensure " + "not " * 40 + "is_tor\n",
    "invariant t:\n  ensure " + "(" * 30 + "is_tor" + ")" * 30 + "\n",
    "invariant t:\n  ensure " + "not " * 3000 + "is_tor\n",
    "invariant t:\n  ensure path_depth > " + "-" * 3000 + "1\n",
    "invariant t:\n  ensure " + "(" * 200 + "is_tor" + ")" * 200 + "\n",
    "invariant t: ensure x in {1} < 2\n",
    "invariant t: ensure x not y\n",
    "invariant t: ensure x in y\n",
    "invariant t: ensure {1}\n",
    "invariant t: ensure x in {1,}\n",
    "invariant t: when ensure x\n",
    "invariant t: ensure x\ninvariant u ensure y\nlet = 2\nseverity a <\n",
    "# only a comment\r\n\n\t  \u2028 \x00 @ 'x' \"open\n`q\n",
    "",
    "\n\n   \n",
    "invariant t:\r\n  ensure\r\n x # c\r\n",
    "invariant t:\n  ensure x \t \n  \t",  # trailing blanks: whitespace, never BAD_CHAR
    "invariant t: ensure x ",
]


@pytest.mark.parametrize("text", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_cases(text: str) -> None:
    _same(text)


def test_the_fast_route_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Items that parse never reach Lark's parser (so the comparisons above compare two routes)."""

    def refuse(*args: object) -> None:
        raise AssertionError("Lark route used")

    monkeypatch.setattr(ps._FileParser, "_parse_item_lark", refuse)
    for text in (RICH, BOX, BOX_FORMS.replace(" and f8 >= 1e999", ""), *VALID):
        result = ps.parse_partial(text, "t.inv")
        assert result.program.items and not result.diagnostics


@pytest.mark.slow
@SETTINGS
@given(programs())
def test_generated_programs(prog: ast.Program) -> None:
    _same(format_program(prog))


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_token_mutations(data: st.DataObject) -> None:
    tokens = _TOKEN.findall(data.draw(st.sampled_from([*VALID, BOX])))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(tokens) - 1))
        op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete":
            del tokens[i]
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        elif op == "swap" and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == "replace":
            tokens[i] = data.draw(st.sampled_from(POOL))
        else:
            tokens.insert(i, data.draw(st.sampled_from(POOL)))
        if not tokens:
            tokens = [" "]
    _same("".join(tokens))


def test_the_scanner_table_is_that_of_this_grammar() -> None:
    """After a change to grammar.lark, regenerate scanner_table.py with ``python -m
    clefprove.dsl.lark_route``."""
    grammar = (ROOT / "clefprove" / "dsl" / "grammar.lark").read_bytes()
    assert hashlib.sha256(grammar).hexdigest() == scanner_table.GRAMMAR_SHA256


def test_the_scanner_table_is_what_its_lark_derives() -> None:
    """The table is exactly what the Lark it records derives from the grammar (another Lark
    may order or spell its terminals otherwise: the token tests below compare behaviour)."""
    if lark.__version__ != scanner_table.LARK_VERSION:
        pytest.skip(f"table derived by Lark {scanner_table.LARK_VERSION}, not {lark.__version__}")
    assert lark_route.render_scanner_table() == Path(scanner_table.__file__).read_text("utf-8")


def test_a_text_the_fast_lexer_does_not_take_is_lexed_by_lark(monkeypatch) -> None:
    """Where the scanner gives up (here: always), the tokens come from Lark's own lexer."""
    text = (ROOT / "invariants" / "edge.inv").read_text()
    fast = _tokens(ps._lex_code(text))
    monkeypatch.setattr(ps, "_lex_fast", lambda text: None)
    assert _tokens(ps._lex_code(text)) == fast
    assert _result(ps._FileParser, text) == _result(_LarkOnly, text)


def test_a_file_that_parses_imports_no_lark() -> None:
    code = (
        "import sys\nfrom clefprove.dsl.parser import parse_partial\n"
        f"r = parse_partial({(ROOT / 'invariants' / 'edge.inv').read_text()!r})\n"
        "print(len(r.program.items), len(r.diagnostics), 'lark' in sys.modules)\n"
        "r = parse_partial('invariant x: ensure action == +')\n"
        "print(len(r.diagnostics), 'lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["9 0 False", "1 True"], out.stderr


@SETTINGS
@given(
    st.lists(
        st.sampled_from(sorted(ps.KEYWORDS)) | st.from_regex(r"[A-Za-z_]\w{0,9}", fullmatch=True)
    )
)
def test_keyword_tables_retype_as_lark_does(words: list[str]) -> None:
    """A word lexes to the type Lark's lexer gives it: keywords, their case variants,
    prefixes and extensions, other names."""
    extra = [w for k in sorted(ps.KEYWORDS) for w in (k.upper(), k.title(), k[:-1], k + "s")]
    for word in [*words, *sorted(ps.KEYWORDS), *extra]:
        lexed = ps._lex_fast(word)
        assert lexed is not None
        assert lexed.kinds == [t.type for t in lark_route.lex_all(word) if t.type != "WS"], word


@SETTINGS
@given(st.data())
def test_without_is_select_of_the_rest(data: st.DataObject) -> None:
    """Dropping a few tokens (the comments) by deletion keeps what selecting the rest keeps."""
    lexed = ps._lex_fast((ROOT / "invariants" / "edge.inv").read_text())
    assert lexed is not None
    n = len(lexed.kinds)
    drop = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=8)))
    keep = [i for i in range(n) if i not in drop]
    assert lexed.without(drop) == lexed.select(keep)


def test_positions_made_directly_are_the_constructors() -> None:
    """The descent's positions (filled without the dataclass __init__) equal, hash, print
    and hold exactly what ast.Pos(...) does."""
    assert ps._plain_pos_class()
    made = ps._new_pos("f.inv", 3, 4, 3, 9)
    built = ast.Pos("f.inv", 3, 4, 3, 9)
    assert type(made) is ast.Pos
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert vars(made) == vars(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.line = 1  # type: ignore[misc]


def test_box_literals_made_directly_are_the_constructors() -> None:
    """The descent's box literals (four nodes filled without their __init__) equal, hash and
    hold exactly what the constructors build, positions included."""
    assert ps._plain_literal_classes()
    text = "invariant t: when speed >= 12.5 ensure x\n"
    lexed = ps._lex_fast(text)
    assert lexed is not None
    d = ps._Descent(ps._FileParser(text, "t.inv"), lexed, 0, len(lexed.kinds))
    i = lexed.kinds.index("NAME", 3)
    value = ast.Number("12.5", Fraction(12.5)).value
    d.i = i + 3
    made, built = ps._new_literal(d, i, value), ps._built_literal(d, i, value)
    assert _dump(made) == _dump(built) and hash(made) == hash(built) and repr(made) == repr(built)
    for a, b in zip((made, *made.operands), (built, *built.operands), strict=True):
        assert type(a) is type(b) and vars(a) == vars(b) and list(vars(a)) == list(vars(b))
        assert vars(a.pos) == vars(b.pos) and list(vars(a.pos)) == list(vars(b.pos))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.ops = ()  # type: ignore[misc]
