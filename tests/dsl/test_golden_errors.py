"""Golden files: one per message of the error catalogue (docs/dsl.md).

Each case is ``golden/NAME.inv`` (or a directory ``golden/NAME/`` of files, checked as one run)
and its expected ``render()`` output ``golden/NAME.err``.  Regenerate with
``CLEFPROVE_UPDATE_GOLDEN=1 pytest tests/dsl/test_golden_errors.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clefprove.dsl.errors import DslError
from clefprove.dsl.loader import load_invariants

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(
    p.name.removesuffix(".inv")
    for p in GOLDEN.iterdir()
    if p.suffix == ".inv" or (p.is_dir() and any(p.glob("*.inv")))
)


@pytest.mark.parametrize("case", CASES)
def test_golden_error(case: str, spec_model, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    target = case if Path(case).is_dir() else f"{case}.inv"
    with pytest.raises(DslError) as info:
        load_invariants([target], spec_model)
    err = info.value
    rendered = err.render()
    expected_file = GOLDEN / f"{case}.err"
    if os.environ.get("CLEFPROVE_UPDATE_GOLDEN"):
        expected_file.write_text(rendered)
    assert rendered == expected_file.read_text()
    # str() is the first diagnostic's line; every diagnostic points into a real line
    first = err.diagnostics[0]
    assert str(err) == f"{first.file}:{first.line}:{first.column}: {first.message}"
    for d in err.diagnostics:
        assert d.line >= 1 and d.column >= 1
        assert d.source_line


def test_catalogue_is_complete() -> None:
    """Every case has its golden output (and no output is orphaned)."""
    outputs = {p.name.removesuffix(".err") for p in GOLDEN.glob("*.err")}
    assert outputs == set(CASES)


def test_a_file_of_garbage_prints_the_first_mistakes_and_the_count(spec_model, tmp_path) -> None:
    # thousands of diagnostics are all kept as data; the rendering shows the first ones
    bad = tmp_path / "garbage.inv"
    bad.write_text("".join(f"invariant i{k}: ensure && {k}\n" for k in range(400)))
    with pytest.raises(DslError) as err:
        load_invariants([bad], spec_model)
    shown = err.value.render()
    n = len(err.value.diagnostics)
    assert n >= 400
    assert shown.count("garbage.inv:") == 50
    assert shown.endswith(f"... and {n - 50} more\n{n} errors\n")
