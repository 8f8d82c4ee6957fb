"""Where an invariant lives, as CI services want it: relative to the repository root.

The repository root is the nearest directory at or above the current directory that holds a
``.git`` entry (a directory, or the file of a worktree or submodule); without one it is the
current directory.  Code-scanning services resolve result locations against the checkout, so a
path spelled ``../inv/a.inv`` from a subdirectory and ``inv/a.inv`` from the root must come out
the same.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from clefprove.frozen import frozen


def repository_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest enclosing directory with a ``.git`` entry, else *start* (default: cwd)."""
    here = Path(start if start is not None else os.getcwd()).absolute()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return here


@frozen
class Location:
    """A file named relative to the repository root, or absolutely when it lies outside."""

    root: Path
    #: POSIX path relative to :attr:`root`, or None for a file outside the root.
    relative: str | None
    absolute: Path

    @property
    def display(self) -> str:
        """The path CI annotations name (relative when inside the root)."""
        return self.relative if self.relative is not None else self.absolute.as_posix()

    @property
    def uri(self) -> str:
        """A percent-encoded URI: relative to the root, or a ``file://`` URI outside it."""
        if self.relative is not None:
            # the path's own bytes: a name that is not UTF-8 is percent-encoded as it is
            return quote(os.fsencode(self.relative), safe="/")
        return file_uri(self.absolute)


def locate(path: str | os.PathLike[str], root: Path | None = None) -> Location:
    """*path* (as a report names it, relative to the current directory) against the root."""
    root = root if root is not None else repository_root()
    absolute = Path(os.path.normpath(Path(path).absolute()))
    try:
        relative: str | None = PurePosixPath(absolute.relative_to(root).as_posix()).as_posix()
    except ValueError:
        relative = None
    return Location(root, relative, absolute)


def file_uri(path: Path, directory: bool = False) -> str:
    """``file://`` URI of an absolute path (percent-encoded; a trailing ``/`` for a directory)."""
    text = quote(os.fsencode(path.as_posix()), safe="/")
    if directory and not text.endswith("/"):
        text += "/"
    return "file://" + text
