"""The hand-written Coq library that every export ships with (package data, ``coqlib/``)."""

from __future__ import annotations

from importlib import resources

#: The library files, in dependency order.
LIBRARY = ("ClefSyntax.v", "ClefCheck.v")


def library_text(name: str) -> str:
    """The text of a library file shipped as package data (``coqlib/``)."""
    return resources.files("clefprove.coq_export").joinpath("coqlib", name).read_text()
