"""The group flush's own objects: a flush in flight (:class:`FlushJob`) and what the
flushes since open add up to (:class:`FlushTotals`). :meth:`AckStore.flush` runs the steps."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import lmdb

from .directory import OPEN
from .stats import FLUSH_SECONDS_BUCKETS, FlushStats
from .storage.catalog import Catalog
from .storage.log import CursorLog

if TYPE_CHECKING:
    from .cursor import Cursor, FlushPlan
    from .topic import Topic

__all__ = ["FlushJob", "FlushTotals"]


@dataclass(slots=True)
class FlushJob:
    """One group flush in flight: the plans taken (and their cursors, in order), the topics'
    bounds to write, how many plans were encoded, and the cursor whose own code failed."""

    catalog: Catalog
    log_db: Any
    plans: list[FlushPlan] = field(default_factory=list)
    cursors: list[Cursor] = field(default_factory=list)
    confirms: list[tuple[Topic, tuple[int, int]]] = field(default_factory=list)
    encoded: int = 0
    failed: Cursor | None = None

    def encode(self) -> None:
        """Step 2: every plan's records and marker, from its copies."""
        for plan in self.plans:
            plan.encode()
            self.encoded += 1

    def write(self, txn: lmdb.Transaction) -> int:
        """Step 3 (replayable): every plan's records, each plan's garbage trimmed, the topics'
        bounds; returns the records trimmed."""
        for topic, (ledger, confirmed) in self.confirms:
            self.catalog.put_ledger(txn, topic.topic_id, ledger, OPEN, confirmed)
        trimmed = 0
        db = self.log_db
        for plan in self.plans:
            for key, value in plan.puts:
                txn.put(key, value, db=db)
            if plan.gc_below > 0:
                trimmed += CursorLog(db, plan.cursor_id).trim(txn, plan.gc_below, plan.gc_live)
        return trimmed


@dataclass(slots=True)
class FlushTotals:
    """What the flushes since open add up to (``store.stats()`` reads it)."""

    flushes: int = 0
    bytes: int = 0
    trimmed: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(FLUSH_SECONDS_BUCKETS) + 1))

    def add(self, stats: FlushStats) -> None:
        self.flushes += 1
        self.bytes += stats.bytes_written
        self.trimmed += stats.records_trimmed
        self.seconds += stats.seconds
        self.buckets[bisect_left(FLUSH_SECONDS_BUCKETS, stats.seconds)] += 1
