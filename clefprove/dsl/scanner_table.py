"""The fast lexer's scanner, derived from grammar.lark by Lark (generated: do not edit).

Written by ``python -m clefprove.dsl.lark_route`` from the grammar whose SHA-256 it
records; tests/dsl/test_fast_parser.py checks that digest against grammar.lark, the
scanner against what the Lark it records derives, and the tokens against Lark's lexer.
"""

GRAMMAR_SHA256 = "cbc72c06bd560a1b3338a14e16a8861446c91d8eb98026b9d59183c074e0a590"
LARK_VERSION = "1.3.1"
MASTER = (
    "(?>(?:[ \t\f\r\n]+)?)(?:"
    "(?P<NUMBER>(?:[0-9]|\\.[0-9])[A-Za-z0-9_.]*(?:(?<=[eE])[+-][A-Za-z0-9_.]*)?)"
    '|(?P<STRING>"(?:[^"\\\\\n]|\\\\.)*")'
    "|(?P<NAME>[^\\W\\d]\\w*)"
    "|(?P<QUOTED_NAME>`[^`\n]*`)"
    "|(?P<SINGLE_QUOTED>'[^'\n]*')"
    "|(?P<COMMENT>#[^\n]*)"
    "|(?P<EQ>==)"
    "|(?P<GE>>=)"
    "|(?P<LE><=)"
    "|(?P<NE>!=)"
    "|(?P<COLON>:)"
    "|(?P<COMMA>,)"
    "|(?P<EQUAL>=)"
    "|(?P<GT>>)"
    "|(?P<LBRACE>\\{)"
    "|(?P<LPAR>\\()"
    "|(?P<LSQB>\\[)"
    "|(?P<LT><)"
    "|(?P<MINUS>\\-)"
    "|(?P<PLUS>\\+)"
    "|(?P<RBRACE>\\})"
    "|(?P<RPAR>\\))"
    "|(?P<RSQB>\\])"
    "|(?P<STAR>\\*)"
    '|(?P<UNTERMINATED_STRING>"(?:[^"\\\\\n]|\\\\.)*\\\\?)'
    "|(?P<BAD_CHAR>.))"
)
FLAGS = 0
KEYWORDS: dict[str, dict[str, str]] = {
    "NAME": {
        "and": "AND",
        "ensure": "ENSURE",
        "false": "FALSE",
        "implies": "IMPLIES",
        "in": "IN",
        "invariant": "INVARIANT",
        "let": "LET",
        "not": "NOT",
        "or": "OR",
        "severity": "SEVERITY",
        "true": "TRUE",
        "when": "WHEN",
    },
}
