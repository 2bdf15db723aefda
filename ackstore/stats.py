"""Plain-data figures reported by cursors and flushes."""

from __future__ import annotations

from dataclasses import dataclass

from .position import Position
from .readers import OldestReader

__all__ = [
    "CURSOR_FIGURES",
    "StoreStats",
    "FLUSH_SECONDS_BUCKETS",
    "CursorStats",
    "FlushStats",
    "RecoveryReport",
    "NO_RECOVERY",
    "CompactStats",
    "LogUsage",
]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What open-time recovery did for one cursor."""

    marker_seq: int  # -1: no intact marker, the cursor started empty
    markers_skipped: int
    skipped_reasons: tuple[str, ...]
    records_loaded: int
    bytes_loaded: int
    seconds: float


#: the report of a cursor recovery has not run for (one shared value: it is immutable)
NO_RECOVERY = RecoveryReport(-1, 0, (), 0, 0, 0.0)


@dataclass(frozen=True, slots=True)
class LogUsage:
    """What one cursor's records take in the log (keys + values)."""

    records: int
    record_bytes: int
    live_bytes: int  # what the newest marker references (the marker and its chain included)
    garbage_bytes: int  # superseded records a compaction would delete


@dataclass(frozen=True, slots=True)
class FlushStats:
    """One group commit: every dirty cursor of the store in one LMDB write transaction."""

    cursors: int
    ledger_records: int
    markers: int
    full_markers: int
    bytes_written: int  # keys + values put
    records_trimmed: int  # garbage records deleted after a full marker
    seconds: float
    map_grows: int


#: upper bounds (seconds) of the flush-duration histogram's buckets; the last is +Inf
FLUSH_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


#: the figures ``Cursor.figures()`` returns, in order: the cheap per-cursor numbers a metrics
#: scrape reads (the same counters ``stats()`` reports; cache bytes are the running upper bound)
CURSOR_FIGURES = (
    "ack_range_count",
    "persisted_ranges",
    "ranges_over_limit",
    "truncated",
    "blocked",
    "cache_bytes",
    "cache_budget",
    "ledgers_in_memory",
    "ledgers_swapped_out",
    "swap_ins",
    "evictions",
    "write_backs",
    "flushes",
    "total_flush_bytes",
    "markers_skipped",
    "revisions_done",
    "revision_running",
    "redeliveries",
)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Store-wide figures since the store was opened (``store.stats()``); the counters count
    flushes that wrote something."""

    path: str
    readonly: bool
    format_version: int
    topics: int
    cursors: int  # cursors opened by this store object
    file_bytes: int  # data.mdb (or the snapshot file) on disk
    map_size: int
    map_grows: int
    flushes: int
    flush_bytes: int
    records_trimmed: int
    flush_seconds_sum: float
    flush_seconds_buckets: tuple[tuple[float, int], ...]
    """cumulative ``(upper bound, flushes that took at most that long)``, ending with +Inf"""
    oldest_reader: OldestReader | None = None
    """the read transaction holding back the most pages (None: no reader); see :mod:`ackstore.readers`"""


@dataclass(frozen=True, slots=True)
class CursorStats:
    """A snapshot of a cursor's figures."""

    topic: str
    name: str
    mark_delete_position: Position
    read_position: Position
    ack_range_count: int
    ledgers_in_memory: int
    ledgers_swapped_out: int
    ledgers_indexed: int
    dirty_ledgers: int
    cache_bytes: int
    cache_budget: int
    largest_ledger_bytes: int  # one ledger larger than the budget still loads; this says how large
    over_budget: bool
    swap_ins: int  # ledgers read from disk since open (after a lazy open, each one's first use too)
    evictions: int
    write_backs: int  # dirty ledgers written before eviction
    flushes: int
    last_flush_bytes: int
    total_flush_bytes: int
    last_marker_seq: int
    deltas_since_full_marker: int
    truncated: bool  # the last marker persisted only part of the ranges (PIP-299)
    persisted_ranges: int  # ranges the last marker holds
    ranges_over_limit: int  # ranges a flush now would keep in memory only (PIP-299)
    recovery: RecoveryReport
    revision_num: int = 0  # PIP-269: position resets completed on this cursor (its revision number)
    revisions_done: int = 0  # the same as a counter metric
    revision_running: int = 0  # 1 while a position reset runs
    redeliveries: int = 0  # deliveries of entries delivered before, since the store opened


@dataclass(frozen=True, slots=True)
class CompactStats:
    """One cursor's log before and after compaction (keys + values)."""

    topic: str
    cursor: str
    records_before: int
    bytes_before: int
    records_after: int
    bytes_after: int
