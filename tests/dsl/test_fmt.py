"""The canonical layout: fixed points, comments, alignment, wrapping, meaning preserved."""

from __future__ import annotations

from pathlib import Path

import pytest

from clefprove.dsl.errors import DslError
from clefprove.dsl.fmt import format_text
from clefprove.dsl.loader import parse_text

ROOT = Path(__file__).resolve().parents[2]


def test_spec_edge_file_is_already_canonical() -> None:
    text = (ROOT / "invariants" / "edge.inv").read_text()
    assert format_text(text) == text


@pytest.mark.parametrize("path", sorted((ROOT / "invariants").rglob("*.inv")), ids=str)
def test_shipped_invariant_files_are_canonical(path: Path) -> None:
    text = path.read_text()
    assert format_text(text, str(path)) == text


MESSY = """\
  # header comment

severity   allow<challenge<rate_limit<block
let a=client_rtt_ms>300 # about a
let bbbb   =  ( tls_version<772 )


let c = is_tor
# about d
let d = a and
  # inside d
  bbbb
invariant x : "desc" # on the description
  # before when
  when a and not bbbb
  ensure action>=challenge implies   confidence>=0.5 implies -client_rtt_ms*2 <= - 3 # end
invariant y: ensure monotone( client_rtt_ms )
invariant long_one: when client_rtt_ms > 300 and tls_version < 772 and path_depth in [1, 3] \
and ua_family not in {"curl"} ensure action in {block}
# final
"""

CANONICAL = """\
# header comment

severity allow < challenge < rate_limit < block

let a    = client_rtt_ms > 300  # about a
let bbbb = (tls_version < 772)

let c = is_tor
# about d
# inside d
let d = a and bbbb

invariant x:
  "desc"  # on the description
  # before when
  when a and not bbbb
  ensure action >= challenge implies confidence >= 0.5 implies -client_rtt_ms * 2 <= -3  # end

invariant y:
  ensure monotone(client_rtt_ms)

invariant long_one:
  when client_rtt_ms > 300
      and tls_version < 772
      and path_depth in [1, 3]
      and ua_family not in {"curl"}
  ensure action in {block}
# final
"""


def test_messy_file_gets_the_canonical_layout(spec_model) -> None:
    out = format_text(MESSY)
    assert out == CANONICAL
    assert format_text(out) == out
    before = parse_text(MESSY, spec_model)
    after = parse_text(out, spec_model)
    assert [i.digest for i in before.invariants] == [i.digest for i in after.invariants]


def test_comments_are_never_lost() -> None:
    out = format_text(MESSY)
    for comment in (
        "# header comment",
        "# about a",
        "# about d",
        "# inside d",
        "# on the desc",
        "# before when",
        "# end",
        "# final",
    ):
        assert comment in out


def test_parentheses_as_written_are_kept() -> None:
    assert format_text("invariant t: ensure not (action == allow)") == (
        "invariant t:\n  ensure not (action == allow)\n"
    )
    assert format_text("invariant t: ensure ((is_tor))") == "invariant t:\n  ensure ((is_tor))\n"


def test_strings_are_requoted_as_json() -> None:
    out = format_text('invariant t:\n  "caf\\u00e9 \\"q\\""\n  ensure ua_family == "curl"\n')
    assert out == 'invariant t:\n  "café \\"q\\""\n  ensure ua_family == "curl"\n'


def test_empty_and_comment_only_files() -> None:
    assert format_text("") == ""
    assert format_text("\n\n   \n") == ""
    assert format_text("# a\n\n\n# b\n") == "# a\n\n# b\n"


def test_fmt_refuses_bad_syntax() -> None:
    with pytest.raises(DslError):
        format_text("invariant t: when (is_tor ensure true")


def test_fmt_needs_no_model_and_keeps_type_errors() -> None:
    # fmt formats syntax: an unknown name is the checker's business, not fmt's
    assert format_text("invariant t: ensure nosuchthing") == "invariant t:\n  ensure nosuchthing\n"


@pytest.mark.parametrize(
    "text",
    [
        "invariant a:#\n  ensure action == allow\n",
        "invariant a: # head\n  when is_tor # when\n  ensure action == allow # ensure\n",
        'invariant a: # head\n  "d" # desc\n  ensure action == allow\n',
    ],
)
def test_end_of_line_comment_on_an_invariant_head_is_kept_once(text: str) -> None:
    out = format_text(text)
    assert out.splitlines()[0].startswith("invariant a:  #")
    assert out.count("#") == text.count("#")
    assert format_text(out) == out
