"""ackstore: an embedded, persistent store of message-cursor acknowledgment state on LMDB.

What a program calls, by task (everything else in the package is the engine's own):

- **Open a store**: `AckStore.open` (durability options, read-only readers), then
  `AckStore.topic` (a `Topic`: its ledger directory, `Topic.add_ledger`,
  `Topic.close_ledger`, `Topic.advance`) and `Topic.cursor` (a `Cursor`, configured by a
  `CursorConfig`); `AckStore.flush` writes every changed cursor in one transaction;
  `AckStore.close` flushes and closes.
- **Acks**: `Cursor.ack`, `Cursor.ack_entries`, `Cursor.ack_cumulative`,
  `Cursor.ack_batch_index`; reading them back: `Cursor.is_acked`, `Cursor.ack_ranges`,
  `Cursor.mark_delete_position`, `Cursor.snapshot` (a `CursorSnapshot`: the whole state at
  once). Positions are `Position` values.
- **Reads and resets**: a `Dispatcher` over a cursor and a `LedgerReader` (sequential and
  replay reads, `Dispatcher.reset`, `Dispatcher.seek` with consumer epochs, skips, the
  PIP-299 pause); a `Replicator` for geo-replication. Test doubles of the reader and of a
  remote cluster are in `ackstore.testing`.
- **Delivery counts and dead letters**: `Cursor.record_deliveries`,
  `Cursor.delivery_count`; `CursorConfig.max_deliveries` with a `Dispatcher`'s
  `dead_letter` coroutine.
- **Tools**: `check` (and the `ackstore` command: check, salvage, dump, restore,
  compact, copy, stat); `AckStore.compact`, `AckStore.copy`.
- **Figures and metrics**: `AckStore.stats`, `Cursor.stats` (`CursorStats`), and the
  Prometheus collector in `ackstore.metrics`.
- **Errors**: every error ackstore raises on purpose is an `AckStoreError`; argument errors
  are also `ValueError` or `TypeError`.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checker import FINDING_KINDS, Finding, check
    from .config import CursorConfig
    from .cursor import Cursor
    from .cursor.snapshot import CursorSnapshot
    from .directory import LedgerDirectory
    from .dispatch.dispatcher import Consumer, Dispatcher
    from .dispatch.read_loop import CursorReadLoop, RevisionInProgressError
    from .dispatch.reads import Entry, LedgerReader
    from .dispatch.replicator import ReplicationSendError, Replicator
    from .dispatch.revision import CursorStateRevisionController
    from .errors import (
        AckStoreError,
        CorruptRecordError,
        CorruptStoreError,
        CursorDeletedError,
        FormatVersionError,
        HistoryRangeError,
        InvalidArgumentError,
        InvalidPositionError,
        InvalidTypeError,
        LedgerStateError,
        NotAStoreError,
        ReaderBehindError,
        ReadOnlyError,
        StoreClosedError,
        StoreError,
        StoreLockedError,
        TopicDeletedError,
        UnknownCursorError,
        UnknownLedgerError,
        UnknownTopicError,
    )
    from .history import HistoryPoint
    from .position import Position
    from .stats import CompactStats, CursorStats, FlushStats, LogUsage, RecoveryReport
    from .store import AckStore, Topic

__all__ = [
    "AckStore",
    "Topic",
    "Cursor",
    "CursorSnapshot",
    "HistoryPoint",
    "CursorConfig",
    "Position",
    "LedgerDirectory",
    "Dispatcher",
    "Consumer",
    "RevisionInProgressError",
    "CursorReadLoop",
    "Replicator",
    "ReplicationSendError",
    "Entry",
    "LedgerReader",
    "CursorStateRevisionController",
    "CursorStats",
    "FlushStats",
    "RecoveryReport",
    "CompactStats",
    "LogUsage",
    "check",
    "Finding",
    "FINDING_KINDS",
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
    "CursorDeletedError",
    "TopicDeletedError",
    "CorruptRecordError",
    "CorruptStoreError",
    "ReaderBehindError",
]

__version__ = "0.1.0"

_HOME = {
    **dict.fromkeys(("FINDING_KINDS", "Finding", "check"), ".checker"),
    "CursorConfig": ".config",
    "Cursor": ".cursor",
    "CursorSnapshot": ".cursor.snapshot",
    "LedgerDirectory": ".directory",
    **dict.fromkeys(("Consumer", "Dispatcher"), ".dispatch.dispatcher"),
    **dict.fromkeys(("CursorReadLoop", "RevisionInProgressError"), ".dispatch.read_loop"),
    **dict.fromkeys(("Entry", "LedgerReader"), ".dispatch.reads"),
    **dict.fromkeys(("ReplicationSendError", "Replicator"), ".dispatch.replicator"),
    "CursorStateRevisionController": ".dispatch.revision",
    "HistoryPoint": ".history",
    "Position": ".position",
    **dict.fromkeys(("CompactStats", "CursorStats", "FlushStats", "LogUsage", "RecoveryReport"), ".stats"),
    **dict.fromkeys(("AckStore", "Topic"), ".store"),
}
"""where each public name lives: the package imports a module when one of its names is first
used, so ``import ackstore`` (and ``python -m ackstore.recovery``, which imports it first)
costs nothing until then"""


def __getattr__(name: str) -> Any:
    home = _HOME.get(name) or (".errors" if name in __all__ else None)
    if home is None:
        raise AttributeError(f"module 'ackstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# a library logs, the application decides where it goes (recovery skips are logged as warnings)
logging.getLogger("ackstore").addHandler(logging.NullHandler())
