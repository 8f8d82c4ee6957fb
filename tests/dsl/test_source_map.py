"""The checked program carries its source map: reports quote exactly the text that was checked."""

from __future__ import annotations

import hashlib

from clefprove.dsl.loader import load_invariants, parse_text

TEXT = """\
severity allow < challenge < rate_limit < block

# the first one
invariant first:
  "One."
  when client_rtt_ms > 300
  ensure action != allow

# a comment that belongs to nothing

let deep = path_depth >= 3
invariant second: ensure action == block implies confidence >= 0.5
"""


def test_each_invariant_carries_its_own_text(tmp_path, spec_model):
    path = tmp_path / "a.inv"
    path.write_bytes(TEXT.encode())
    program = load_invariants([path], spec_model)
    first, second = program.invariants
    assert (
        first.source
        == 'invariant first:\n  "One."\n  when client_rtt_ms > 300\n  ensure action != allow'
    )
    assert second.source == "invariant second: ensure action == block implies confidence >= 0.5"
    (src,) = program.sources
    assert src.path == str(path) and src.text == TEXT
    assert src.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_text_is_what_was_parsed_not_what_is_on_disk_later(tmp_path, spec_model):
    path = tmp_path / "a.inv"
    path.write_text(TEXT)
    program = load_invariants([path], spec_model)
    path.write_text("invariant first: ensure true\n")
    assert program.invariants[0].source is not None
    assert "client_rtt_ms > 300" in program.invariants[0].source
    assert program.sources[0].text == TEXT


def test_source_is_not_part_of_the_meaning(spec_model):
    a = parse_text("invariant t:\n  ensure action != allow\n", spec_model).invariants[0]
    b = parse_text("invariant t: ensure action != allow  # same\n", spec_model).invariants[0]
    assert a.source != b.source
    assert a == b and a.digest == b.digest
