"""The boundary between py-lmdb's exceptions and ackstore's: every ``lmdb.Error`` leaves
the engine as a :class:`~ackstore.errors.StoreError` with a plain-words message.

=====================================  ==================================================
LMDB says                              ackstore raises
=====================================  ==================================================
``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND``, ``CorruptStoreError``: the file is damaged (hint:
``MDB_BAD_TXN``, ``MDB_INVALID``,       ``ackstore check``); carries the path and the LMDB
``MDB_PANIC``, ``MDB_VERSION_MISMATCH``  error
``ENOSPC``, or ``EIO`` on a device      ``StoreError`` "no space left on the device"
with no free space left
anything else                          ``StoreError`` naming the step and LMDB's words
=====================================  ==================================================
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import lmdb

from ..errors import CorruptStoreError, StoreError

__all__ = ["translate", "DAMAGE", "no_space_left"]

DAMAGE: tuple[type[lmdb.Error], ...] = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.BadTxnError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.VersionMismatchError,
)
"""LMDB errors that mean the file's structure is damaged"""


def no_space_left(path: Path | str) -> bool:
    """True when the file system holding ``path`` has (next to) no space left for this user."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def translate(exc: BaseException, path: Path | str, doing: str) -> StoreError:
    """The StoreError to raise for ``exc`` (an ``lmdb.Error`` or ``OSError``) met while ``doing``."""
    code = getattr(exc, "code", None) or getattr(exc, "errno", None)
    if isinstance(exc, DAMAGE):
        return CorruptStoreError(f"{doing} {path}: the store's file is damaged (LMDB: {exc})", path, exc)
    if isinstance(exc, lmdb.DiskError) or code == errno.ENOSPC or (code == errno.EIO and no_space_left(path)):
        return StoreError(
            f"{doing} {path}: no space left on the device (LMDB: {exc}); nothing was written, free some space and retry"
        )
    return StoreError(f"{doing} {path} failed: {exc}")
