"""Whether a store may be used now: the checks every call of the engine makes first.

Engine internals. A store is usable from its open until ``close()`` (then
:class:`~ackstore.errors.StoreClosedError`) and writable unless it was opened read-only
(then :class:`~ackstore.errors.ReadOnlyError`). The store, its topics, its cursor side and
the group flush call these on the store they work on.
"""

from __future__ import annotations

from typing import Protocol

from .errors import ReadOnlyError, StoreClosedError

__all__ = ["Life", "require_open", "require_writable"]


class Life(Protocol):
    """What the checks read of a store: its path, whether it was closed, whether it is read-only."""

    @property
    def path(self) -> object:
        """the store's directory or file, for the message"""
        ...

    @property
    def closed(self) -> bool:
        """``close()`` ran"""
        ...

    @property
    def readonly(self) -> bool:
        """opened with ``readonly=True``"""
        ...


def require_open(store: Life) -> None:
    """StoreClosedError when ``store`` was closed. O(1)."""
    if store.closed:
        raise StoreClosedError(f"store {store.path} is closed; reopen it with AckStore.open()")


def require_writable(store: Life) -> None:
    """StoreClosedError when ``store`` was closed, ReadOnlyError when it was opened read-only. O(1)."""
    require_open(store)
    if store.readonly:
        raise ReadOnlyError(f"store {store.path} was opened readonly=True; it cannot be changed")
