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

    marker_seq: int
    """the marker recovery started from; -1: no intact marker, the cursor started empty"""
    markers_skipped: int
    """newer markers passed over because their chain or records were damaged or missing"""
    skipped_reasons: tuple[str, ...]
    """why each was skipped, newest first"""
    records_loaded: int
    """ledger records decoded at open"""
    bytes_loaded: int
    """bytes of the records decoded at open (a state marker's whole record: the ledgers it
    holds are decoded with it)"""
    seconds: float
    """how long recovery took"""


NO_RECOVERY = RecoveryReport(-1, 0, (), 0, 0, 0.0)
"""the report of a cursor recovery has not run for (one shared value: it is immutable)"""


@dataclass(frozen=True, slots=True)
class LogUsage:
    """What one cursor's records take in the log (keys + values)."""

    records: int
    """records the cursor has in the log"""
    record_bytes: int
    """their keys and values"""
    live_bytes: int
    """what the newest marker references (the marker and its chain included)"""
    garbage_bytes: int
    """superseded records a compaction would delete"""
    history_bytes: int = 0
    """what the cursor's history keeps (``CursorConfig.history_seconds``): the records only
    its kept states need, and its points"""


@dataclass(frozen=True, slots=True)
class FlushStats:
    """One group commit: every dirty cursor of the store in one LMDB write transaction."""

    cursors: int
    """cursors whose state this flush wrote"""
    ledger_records: int
    """ledger records written (a small cursor's state marker holds its ledgers: none for it)"""
    markers: int
    """markers written, one a cursor"""
    full_markers: int
    """of which full markers (every state marker is one)"""
    bytes_written: int
    """keys + values put"""
    records_trimmed: int
    """garbage records deleted in the same transaction"""
    seconds: float
    """how long the flush took, from its start to its return"""
    map_grows: int
    """times the memory map was grown during it"""


FLUSH_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""upper bounds (seconds) of the flush-duration histogram's buckets; the last is +Inf"""


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
"""the figures ``Cursor.figures()`` returns, in order: the cheap per-cursor numbers a metrics
scrape reads (the same counters ``stats()`` reports; cache bytes are the running upper bound)"""


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Store-wide figures since the store was opened (``store.stats()``); the counters count
    flushes that wrote something."""

    path: str
    """the store's directory (or snapshot file)"""
    readonly: bool
    """opened read-only"""
    format_version: int
    """the on-disk format the store is in"""
    topics: int
    """topics in the catalog"""
    cursors: int
    """cursors opened by this store object"""
    file_bytes: int
    """data.mdb (or the snapshot file) on disk"""
    map_size: int
    """the memory map's size now"""
    map_grows: int
    """times the map was grown since open"""
    flushes: int
    """flushes since open that wrote something"""
    flush_bytes: int
    """bytes those flushes wrote (keys + values)"""
    records_trimmed: int
    """garbage records those flushes deleted"""
    flush_seconds_sum: float
    """their total duration"""
    flush_seconds_buckets: tuple[tuple[float, int], ...]
    """cumulative ``(upper bound, flushes that took at most that long)``, ending with +Inf"""
    oldest_reader: OldestReader | None = None
    """the read transaction holding back the most pages (None: no reader); see :mod:`ackstore.readers`"""


@dataclass(frozen=True, slots=True)
class CursorStats:
    """A snapshot of a cursor's figures."""

    topic: str
    """the topic's name"""
    name: str
    """the subscription's name"""
    mark_delete_position: Position
    """M: every entry at or below it is acknowledged"""
    read_position: Position
    """where the next read starts (in memory only; a restart reads from M + 1)"""
    ack_range_count: int
    """ranges of individually acknowledged entries above M"""
    ledgers_in_memory: int
    """ledgers whose acks are loaded"""
    ledgers_swapped_out: int
    """ledgers whose acks are on disk only (the budget evicted them, or a lazy open has not read them yet)"""
    ledgers_indexed: int
    """ledgers the newest marker names"""
    dirty_ledgers: int
    """ledgers changed since the last flush"""
    cache_bytes: int
    """bytes the loaded ledgers are charged (a running upper bound)"""
    cache_budget: int
    """the cursor's max_individual_ack_cache_bytes"""
    largest_ledger_bytes: int
    """the largest loaded ledger: one larger than the budget still loads; this says how large"""
    over_budget: bool
    """the loaded ledgers hold more than the budget"""
    swap_ins: int
    """ledgers read from disk since open (after a lazy open, each one's first use too)"""
    evictions: int
    """ledgers evicted to fit the budget"""
    write_backs: int
    """dirty ledgers written before eviction"""
    flushes: int
    """flushes that wrote this cursor since open"""
    last_flush_bytes: int
    """bytes its last flush wrote"""
    total_flush_bytes: int
    """bytes its flushes wrote since open"""
    last_marker_seq: int
    """the log sequence of its newest marker"""
    deltas_since_full_marker: int
    """delta markers written since the last full one"""
    truncated: bool
    """the last marker persisted only part of the ranges (PIP-299)"""
    persisted_ranges: int
    """ranges the last marker holds"""
    ranges_over_limit: int
    """ranges a flush now would keep in memory only (PIP-299)"""
    recovery: RecoveryReport
    """what open-time recovery did"""
    revision_num: int = 0
    """PIP-269: position resets completed on this cursor (its revision number)"""
    revisions_done: int = 0
    """the same, as a counter metric"""
    revision_running: int = 0
    """1 while a position reset runs"""
    redeliveries: int = 0
    """deliveries of entries delivered before, since the store opened"""


@dataclass(frozen=True, slots=True)
class CompactStats:
    """One cursor's log before and after compaction (keys + values)."""

    topic: str
    """the topic's name"""
    cursor: str
    """the subscription's name"""
    records_before: int
    """records before compaction"""
    bytes_before: int
    """their keys and values"""
    records_after: int
    """records after"""
    bytes_after: int
    """their keys and values"""
