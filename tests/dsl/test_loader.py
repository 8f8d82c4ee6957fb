"""Loading invariant files and directories: order, errors, encodings."""

from __future__ import annotations

from pathlib import Path

import pytest

from clefprove.dsl.errors import Diagnostic, DslError
from clefprove.dsl.loader import expand_paths, load_invariants, parse_text
from clefprove.errors import ClefproveError

INV = "invariant {name}:\n  ensure action != allow\n"


def test_directory_means_every_inv_below_it_sorted(spec_model, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.inv").write_text(INV.format(name="bz"))
    (tmp_path / "b" / "a.inv").write_text(INV.format(name="ba"))
    (tmp_path / "a.inv").write_text(INV.format(name="a"))
    (tmp_path / "notes.txt").write_text("not an invariant file")
    program = load_invariants([tmp_path], spec_model)
    assert [i.name for i in program.invariants] == ["a", "ba", "bz"]
    # files named explicitly come in argument order, and once
    again = load_invariants([tmp_path / "b" / "z.inv", tmp_path, tmp_path / "a.inv"], spec_model)
    assert [i.name for i in again.invariants] == ["bz", "a", "ba"]


def test_missing_path_and_empty_directory(spec_model, tmp_path: Path) -> None:
    with pytest.raises(ClefproveError, match="no such file or directory"):
        load_invariants([tmp_path / "missing.inv"], spec_model)
    with pytest.raises(ClefproveError, match=r"no \.inv files"):
        load_invariants([tmp_path], spec_model)
    with pytest.raises(ClefproveError, match="no invariant files"):
        expand_paths([])


def test_a_dangling_inv_link_in_a_directory_is_an_error(spec_model, tmp_path: Path) -> None:
    """A CI gate must not pass on fewer invariants because one file is missing: a symbolic
    link named *.inv whose target is gone (a submodule not checked out) was skipped silently."""
    (tmp_path / "a.inv").write_text(INV.format(name="a"))
    (tmp_path / "critical.inv").symlink_to(tmp_path / "gone" / "critical.inv")
    with pytest.raises(ClefproveError, match=r"critical\.inv: .*does not exist"):
        load_invariants([tmp_path], spec_model)
    (tmp_path / "critical.inv").unlink()
    (tmp_path / "sub.inv").mkdir()  # a directory named *.inv, itself without files: ignored
    assert [i.name for i in load_invariants([tmp_path], spec_model).invariants] == ["a"]


def test_unreadable_file_is_one_line(
    spec_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "dir.inv"
    d.mkdir()
    (d / "x.inv").write_text(INV.format(name="x"))
    # a directory whose name ends in .inv is walked, not read
    assert [i.name for i in load_invariants([d], spec_model).invariants] == ["x"]
    f = tmp_path / "locked.inv"
    f.write_text(INV.format(name="y"))

    def refuse(path: object, limit: int) -> bytes:
        raise PermissionError(13, "Permission denied")

    # root can read anything; simulate (invariant files are read through a bounded read)
    monkeypatch.setattr("clefprove.dsl.files.read_file_bounded", refuse)
    with pytest.raises(ClefproveError) as info:
        load_invariants([f], spec_model)
    assert not isinstance(info.value, DslError)
    assert str(info.value) == f"{f}: cannot read: Permission denied"


def test_bom_is_accepted_and_bad_utf8_is_a_positioned_error(spec_model, tmp_path: Path) -> None:
    f = tmp_path / "bom.inv"
    f.write_bytes("\ufeff".encode() + INV.format(name="b").encode())
    assert load_invariants([f], spec_model).invariants[0].line == 1
    g = tmp_path / "bad.inv"
    g.write_bytes(b'invariant t:\n  ensure ua_family == "\xff"\n')
    with pytest.raises(DslError) as info:
        load_invariants([g], spec_model)
    d = info.value.diagnostics[0]
    assert (d.line, d.column) == (2, 24)


def test_errors_of_every_file_are_collected(spec_model, tmp_path: Path) -> None:
    (tmp_path / "a.inv").write_text("invariant a:\n  ensure action != alow\n")
    (tmp_path / "b.inv").write_text("invariant b:\n  when (x\n  ensure true\n")
    (tmp_path / "c.inv").write_text("invariant c:\n  ensure is_tr\n")
    with pytest.raises(DslError) as info:
        load_invariants([tmp_path], spec_model)
    where = [(Path(d.file).name, d.line) for d in info.value.diagnostics]
    assert where == [("a.inv", 2), ("b.inv", 2), ("c.inv", 2)]
    rendered = info.value.render()
    assert rendered.endswith("3 errors\n")
    assert rendered.count("^") == 3


def test_str_is_the_first_line_and_render_has_caret(spec_model) -> None:
    with pytest.raises(DslError) as info:
        parse_text("invariant t:\n\twhen client_rt_ms > 3\n\tensure true\n", spec_model, "t.inv")
    err = info.value
    assert str(err) == "t.inv:2:7: unknown feature 'client_rt_ms'; did you mean 'client_rtt_ms'?"
    assert err.one_line() == str(err)
    # the caret line keeps the tab so that it lines up under the column
    assert err.render().splitlines()[1:] == ["    \twhen client_rt_ms > 3", "    \t     ^"]


def test_caret_lines_up_after_wide_and_combining_characters(spec_model) -> None:
    # a terminal gives 路 two cells and the accent of e\u0301 none
    text = 'invariant t:\n  "路径 e\u0301" when client_rt_ms > 3\n  ensure true\n'
    with pytest.raises(DslError) as info:
        parse_text(text, spec_model, "t.inv")
    _, source, caret = info.value.render().splitlines()[:3]
    assert source == '      "路径 e\u0301" when client_rt_ms > 3'
    # cells before the column: 4 + 3 (two spaces and the quote) + 2 * 2 + 1 + 1 (e and its
    # accent) + 2 (quote, space) + 5 ("when ") = 4 + 16
    assert caret == " " * 20 + "^"


def test_diagnostic_without_source_renders_one_line() -> None:
    d = Diagnostic("f.inv", 1, 1, "boom")
    assert DslError([d]).render() == "f.inv:1:1: boom\n"
    with pytest.raises(ValueError):
        DslError([])


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_end_gives_the_same_positions(spec_model, tmp_path, end: str) -> None:
    # old Mac files end their lines with a lone CR: read as line ends, not one long line
    path = tmp_path / "t.inv"
    lines = [
        "invariant ok:",
        "  ensure true",
        "invariant bad:",
        "  when client_rt_ms > 3",
        "  ensure true",
    ]
    path.write_bytes(end.join(lines).encode())
    with pytest.raises(DslError) as info:
        load_invariants([path], spec_model)
    (d,) = info.value.diagnostics
    assert (d.line, d.column, d.source_line.rstrip("\r")) == (4, 8, "  when client_rt_ms > 3")
