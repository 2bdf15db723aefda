"""ackstore: an embedded, persistent store of message-cursor acknowledgment state on LMDB."""

from __future__ import annotations

import logging

from .check import FINDING_KINDS, Finding, check
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
from .position import Position
from .stats import CompactStats, CursorStats, FlushStats, LogUsage, RecoveryReport
from .store import AckStore, Topic

__all__ = [
    "AckStore",
    "Topic",
    "Cursor",
    "CursorSnapshot",
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

# a library logs, the application decides where it goes (recovery skips are logged as warnings)
logging.getLogger("ackstore").addHandler(logging.NullHandler())
