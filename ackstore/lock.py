"""The store's lock: one reentrant lock a store, its topics and its cursors share.

Engine internals. Every cursor call takes it (``with lock:``), so what taking it costs is
paid by every ack, read and delivery. Where ``ackstore._native`` is built it is the
compiled ``StoreLock``: ``threading.RLock``'s rule (the holding thread may take it again
and releases it as often; other threads wait, the interpreter lock released, signal
handlers running) at a fraction of RLock's cost a ``with``, and compiled code (the
one-position ack) takes it without a call through Python. Elsewhere (or where
the interpreter runs without its global lock) it is ``threading.RLock`` itself.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Protocol

from .fields import native

__all__ = ["StoreLock", "new_lock"]


class StoreLock(Protocol):
    """What the store's lock offers: ``with``, ``acquire`` and ``release``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (again, when this thread holds it); False when not taken in time."""
        ...

    def release(self) -> None:
        """Give the lock back once; RuntimeError when this thread does not hold it."""
        ...

    def __enter__(self) -> bool:
        """Take the lock, waiting as long as it takes."""
        ...

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None, /) -> None:
        """Give the lock back once."""
        ...


def new_lock() -> StoreLock:
    """A new store lock, of the implementation chosen for the package."""
    return _make()


# (a build without the interpreter lock makes no StoreLock: its state is guarded by it)
_make = getattr(native, "StoreLock", None) or threading.RLock
