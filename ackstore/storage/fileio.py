"""Files ackstore and its tools write beside a destination, then rename into place.

:func:`create_new_file` never follows a link planted at the temporary path and never
writes into a file that was already there: run as root in a shared directory, a symlink
``DEST.partial -> /etc/passwd`` is removed (the link, not its target) and a fresh file made
with ``O_EXCL | O_NOFOLLOW``. A leftover from a killed run is removed the same way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import InvalidArgumentError

__all__ = ["create_new_file"]


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
