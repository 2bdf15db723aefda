"""The one error hierarchy of ackstore.

Every error the engine raises on purpose is a subclass of :class:`AckStoreError`.
Argument errors are also ``ValueError`` / ``TypeError`` so that generic callers
that catch those keep working. Messages name the offending value and say what is
allowed; where a setting would help, they carry a hint.
"""

from __future__ import annotations

__all__ = [
    "AckStoreError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "InvalidPositionError",
    "UnknownLedgerError",
    "LedgerStateError",
    "HistoryRangeError",
    "StoreError",
    "NotAStoreError",
    "FormatVersionError",
    "StoreLockedError",
    "ReadOnlyError",
    "StoreClosedError",
    "UnknownTopicError",
    "UnknownCursorError",
    "CorruptRecordError",
    "CorruptStoreError",
    "ReaderBehindError",
]


class AckStoreError(Exception):
    """Base class of every error ackstore raises on purpose."""


class InvalidArgumentError(AckStoreError, ValueError):
    """An argument has the right type but a value that is not allowed."""


class InvalidTypeError(AckStoreError, TypeError):
    """An argument has a type that is not allowed."""


class InvalidPositionError(InvalidArgumentError):
    """A position is outside what the ledger directory allows."""


class UnknownLedgerError(InvalidPositionError):
    """A position names a ledger that the topic does not have (never added, or trimmed)."""


class LedgerStateError(InvalidArgumentError):
    """A ledger-directory change that the directory's state does not allow."""


class HistoryRangeError(InvalidArgumentError):
    """A restore to a time the cursor's kept history does not cover (before its oldest
    kept flush, or a cursor that keeps none); the message names the range kept."""


class StoreError(AckStoreError):
    """A problem with the store on disk rather than with an argument."""


class NotAStoreError(StoreError):
    """The path exists but does not hold an ackstore store."""


class FormatVersionError(StoreError):
    """The store was written by a newer ackstore format than this one reads."""


class StoreLockedError(StoreError):
    """Another writer (process or open store object) holds the store. ``holder`` is its pid
    as the lock file names it ("unknown" when it does not), ``path`` the store."""

    def __init__(self, message: str, path: object = None, holder: str = "unknown") -> None:
        super().__init__(message)
        self.path = path
        """the store's path"""
        self.holder = holder
        """the pid of the process holding the store, as its lock file names it"""


class ReadOnlyError(StoreError):
    """A write was attempted on a store opened with ``readonly=True``."""


class StoreClosedError(StoreError):
    """The store (or its cursor) was used after ``close()``."""


class UnknownTopicError(StoreError, KeyError):
    """A read-only store was asked for a topic it does not hold."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class UnknownCursorError(StoreError, KeyError):
    """A read-only store was asked for a cursor it does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CursorDeletedError(UnknownCursorError):
    """A cursor handle was used after its cursor was deleted (``topic.delete_cursor`` or
    ``store.delete_topic``, here or, for a read-only store, by the writer)."""


class TopicDeletedError(UnknownTopicError):
    """A topic handle was used after ``store.delete_topic`` deleted it."""


class ReaderBehindError(StoreError):
    """A read-only cursor could not answer from one flushed state: a record its state names
    was missing from the one read transaction it read that state in (a read whose records
    the writer trims meanwhile runs again in one snapshot, where no trim can reach it). The
    store's log is not what its markers say: run ``ackstore check``."""


class CorruptRecordError(StoreError):
    """A record failed its checksum or could not be decoded."""


class CorruptStoreError(StoreError):
    """The store's file is damaged: LMDB's structure, a catalog value, or the file's size.

    Carries the ``path`` and, where LMDB raised it, the ``lmdb_error``. The message ends
    with what to do: ``ackstore check STORE`` says what is damaged.
    """

    HINT = "run 'ackstore check' on the store to see what is damaged ('ackstore salvage' rebuilds what it holds)"
    """what to do, unless the raiser knows better"""

    def __init__(
        self, message: str, path: object = None, lmdb_error: BaseException | None = None, hint: str | None = None
    ) -> None:
        hint = self.HINT if hint is None else hint
        super().__init__(message if not hint or hint in message else f"{message}; {hint}")
        self.detail = message
        """the message without what to do"""
        self.hint = hint
        """what to do"""
        self.path = path
        """the store's path, where known"""
        self.lmdb_error = lmdb_error
        """the LMDB exception behind it, where LMDB raised one"""
