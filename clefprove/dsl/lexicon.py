"""What both parsing routes share without Lark: token classes, the number syntax, positions,
and the fast lexer's scanner.

The scanner is grammar.lark's own lexer as one master regex and keyword tables, derived from
Lark once and kept as data in :mod:`clefprove.dsl.scanner_table` (``python -m
clefprove.dsl.lark_route`` writes it; tests/dsl check it against the grammar's digest, against
what the Lark version it records derives, and its tokens against Lark's lexer).
A file that parses takes no Lark at all: importing Lark and loading its parser was about a
quarter of a whole ``check`` command on the bundled example (docs/performance.md).
"""

from __future__ import annotations

import re
from functools import cache

from clefprove.dsl import ast, scanner_table

#: The token types of a name (plain, or quoted in backticks).
NAMES = frozenset({"NAME", "QUOTED_NAME"})
#: A NUMBER token that is a float literal (the terminal takes a little more, for the message).
NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")

#: A scanner: the master regex (one match per token that is not whitespace, the token type as
#: the match's last group) and, per token type that keywords retype, value -> keyword type.
Scanner = tuple[re.Pattern[str], dict[str, dict[str, str]]]


@cache
def scanner() -> Scanner:
    """The fast lexer's scanner, compiled once per process."""
    return re.compile(scanner_table.MASTER, scanner_table.FLAGS), scanner_table.KEYWORDS


def pos_of(file: str, meta_or_token: object) -> ast.Pos:
    """The position of a Lark token or tree node (``propagate_positions``)."""
    m = meta_or_token
    return ast.Pos(
        file,
        getattr(m, "line", 0) or 0,
        getattr(m, "column", 0) or 0,
        getattr(m, "end_line", 0) or 0,
        getattr(m, "end_column", 0) or 0,
    )
