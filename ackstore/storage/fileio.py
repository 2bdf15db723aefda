"""Files ackstore and its tools write beside a destination, then rename into place.

:func:`create_new_file` never follows a link planted at the temporary path and never
writes into a file that was already there: run as root in a shared directory, a symlink
``DEST.partial -> /etc/passwd`` is removed (the link, not its target) and a fresh file made
with ``O_EXCL | O_NOFOLLOW``. A leftover from a killed run is removed the same way.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import InvalidArgumentError

__all__ = ["create_new_file", "temporary", "remove_leftovers", "LEFTOVERS"]

LEFTOVERS: list[int] = []
"""A descriptor a guarding process reads (its one item; empty: none): every temporary path
this process makes is written to it as ``+PATH``, and ``-PATH`` once renamed into place or
removed, so that a worker killed before its own cleanup ran leaves nothing behind
(:func:`remove_leftovers`). The ``ackstore`` tool's worker sets it."""


def _say(line: str) -> None:
    if LEFTOVERS:
        with suppress(OSError):
            os.write(LEFTOVERS[0], (line + "\n").encode("utf-8", "surrogateescape"))


@contextmanager
def temporary(path: Path) -> Iterator[Path]:
    """``path``, a temporary file or directory the block makes and then renames into place
    or removes; announced on :data:`LEFTOVERS` while it may exist."""
    _say(f"+{path}")
    try:
        yield path
    finally:
        if not os.path.lexists(path):
            _say(f"-{path}")


def remove_leftovers(announced: bytes) -> list[str]:
    """Remove every path ``announced`` (what :data:`LEFTOVERS` received) made and never
    retracted; the paths removed."""
    live: dict[str, None] = {}
    for line in announced.decode("utf-8", "surrogateescape").splitlines():
        if line[:1] == "+":
            live[line[1:]] = None
        elif line[:1] == "-":
            live.pop(line[1:], None)
    removed = []
    for path in live:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)
        removed.append(path)
    return removed


def create_new_file(path: str | os.PathLike[str], mode: int = 0o644) -> int:
    """Create ``path`` as a new, empty regular file and return its descriptor (write-only).

    A regular file or a symlink already at ``path`` (a leftover ``.partial``, or a planted
    link) is unlinked first; anything else there (a directory) is refused. If something
    appears between the unlink and the create, the create fails instead of following it.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise InvalidArgumentError(f"{path} exists and is not a file; allowed: a path ackstore may create")
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode)
