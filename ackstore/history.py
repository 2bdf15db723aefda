"""A cursor's history: the states its flushes wrote, kept for a window of time.

A cursor whose ``CursorConfig.history_seconds`` is set keeps, for that long, every state
a flush of it wrote, so that it can be put back exactly as it was at any flushed moment
(:meth:`ackstore.Cursor.restore_as_of`). The states themselves are the markers and
records of the cursor's own log: a flush of such a cursor trims its log only below the
oldest marker the window still needs (and keeps the records that marker names), so
every marker in the window still resolves as recovery resolves the newest one. What this
module keeps besides is a *point* per flush, in the store's ``history`` database under
the marker's own key ``(cursor id, sequence)``: the flush's time, the mark-delete
position and range count the marker holds, the full marker its chain starts at, and, for a
full marker, the records it names (what must outlive the trim while it is needed).

A point's value (big-endian)::

    u64 time (microseconds since the epoch; never less than the store's previous flush)
    u64 mark-delete ledger   i64 mark-delete entry   u32 ranges
    u64 full marker sequence   u32 n   n x u64 records the marker names (a full marker's)

Engine internals: the cursor's methods are the API.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import CorruptRecordError, InvalidArgumentError, InvalidTypeError
from .position import Position, trusted
from .storage.records import log_key, split_log_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    import lmdb

__all__ = [
    "CursorHistory",
    "HistoryKeeper",
    "HistoryPoint",
    "Point",
    "Taken",
    "as_micros",
    "clamp_trim",
    "decode_point",
    "drop_points",
    "encode_point",
    "history_keys",
    "point_entries",
]

log = logging.getLogger("ackstore")
_HEAD = struct.Struct(">QQqIQI")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class HistoryPoint(NamedTuple):
    """One flushed state of a cursor that :meth:`~ackstore.Cursor.restore_as_of` can put it
    back to: the flush's wall-clock ``time`` (Unix seconds; never decreasing within a store),
    the ``mark_delete_position`` and ``ack_range_count`` its marker holds."""

    time: float
    """when the flush that wrote this state ran (Unix time, seconds)"""
    mark_delete_position: Position
    """the mark-delete position of this state"""
    ack_range_count: int
    """how many ranges of acks this state holds (what its marker persisted)"""


class Point(NamedTuple):
    """A point as the store keeps it: the marker's sequence, the flush's time in
    microseconds, the mark-delete position, the ranges, the full marker its chain starts
    at, and the records a full marker names (empty for a delta marker)."""

    seq: int
    micros: int
    md: tuple[int, int]
    ranges: int
    full_seq: int
    refs: tuple[int, ...]

    def public(self) -> HistoryPoint:
        return HistoryPoint(self.micros / 1e6, trusted(*self.md), self.ranges)


def encode_point(point: Point) -> bytes:
    """A point's value (the layout of the module docstring)."""
    md_l, md_e = point.md
    head = _HEAD.pack(point.micros, md_l, md_e, point.ranges, point.full_seq, len(point.refs))
    return head + struct.pack(f">{len(point.refs)}Q", *point.refs)


def decode_point(key: bytes, value: bytes) -> tuple[int, Point]:
    """``(cursor id, point)`` of a history entry; CorruptRecordError when it is not one."""
    if len(key) != 16 or len(value) < _HEAD.size:
        raise CorruptRecordError(f"history entry of {len(key)}-byte key and {len(value)}-byte value is not a point")
    cid, seq = split_log_key(key)
    micros, md_l, md_e, ranges, full_seq, n = _HEAD.unpack_from(value)
    if len(value) != _HEAD.size + 8 * n or full_seq > seq or md_e < -1:
        raise CorruptRecordError(f"history point of cursor id {cid} at {seq} is damaged")
    refs = struct.unpack_from(f">{n}Q", value, _HEAD.size)
    return cid, Point(seq, micros, (md_l, md_e), ranges, full_seq, refs)


def as_micros(when: object) -> int:
    """``when`` (a datetime, or a Unix time in seconds) in microseconds since the epoch; a
    typed error for anything else. A naive datetime is local time, as
    ``datetime.timestamp`` reads it."""
    if isinstance(when, datetime):  # exact: no float in between
        aware = when if when.tzinfo is not None else when.astimezone()
        return (aware - _EPOCH) // timedelta(microseconds=1)
    if isinstance(when, bool) or not isinstance(when, int | float):
        raise InvalidTypeError(f"a time is a datetime or a Unix time in seconds, got {when!r}")
    if when != when or when in (float("inf"), float("-inf")) or when < 0:
        raise InvalidArgumentError(f"time {when!r}: allowed a Unix time from 0 on")
    return round(when * 1e6)


@dataclass(slots=True)
class CursorHistory:
    """The points one cursor keeps, oldest first, and what a flush of it must keep of its
    log. Loaded from the store's history database when first needed."""

    points: list[Point] = field(default_factory=list)

    @classmethod
    def read(cls, txn: lmdb.Transaction, db: lmdb._Database, cursor_id: int) -> CursorHistory:
        """The points of ``cursor_id`` stored in ``db``, less any damaged one (a WARNING
        names it; ``ackstore check`` reports it): a damaged point is a state that cannot be
        restored, never a reason to stop flushing. O(points)."""
        points = []
        for key, value in point_entries(txn, db, cursor_id):
            try:
                points.append(decode_point(key, value)[1])
            except CorruptRecordError as exc:
                log.warning("ackstore: a history point of cursor id %d is left out: %s", cursor_id, exc)
        return cls(points)

    def visible(self, cutoff: int) -> list[Point]:
        """The points a restore may go to: those of flushes at or after ``cutoff``
        (microseconds), oldest first."""
        return [p for p in self.points if p.micros >= cutoff]

    def after(self, point: Point, cutoff: int) -> tuple[list[Point], list[int], Point]:
        """With ``point`` added (a flush's): the points to keep, the sequences of those to
        drop, and the full marker the oldest visible point's chain starts at (kept while
        that point is: the flush keeps the log from it on, and the records it names).
        O(points)."""
        points = [*self.points, point]
        first = next(p for p in points if p.micros >= cutoff)  # the new point is, at least
        # its chain's full marker is a point too (history starts with a full marker); were
        # it not, the log is kept from that marker on all the same
        full = next((p for p in points if p.seq == first.full_seq), None) or first._replace(seq=first.full_seq, refs=())
        keep = [p for p in points if p.seq >= first.seq or p is full]
        dropped = [p.seq for p in points if p.seq < first.seq and p is not full]
        return keep, dropped, full


def history_keys(cursor_id: int, seqs: Iterable[int]) -> list[bytes]:
    """The keys of ``cursor_id``'s points at ``seqs``."""
    return [log_key(cursor_id, seq) for seq in seqs]


def clamp_trim(plan: Any, full: Point) -> None:
    """A history cursor's plan (a MarkerPlan or a FlushPlan) trims nothing its window
    needs: nothing from ``full``'s marker on, and not the records that marker names."""
    if plan.gc_below > full.seq:
        plan.gc_below = full.seq
    if plan.gc_below >= 0:
        plan.gc_live = frozenset(plan.gc_live) | frozenset(full.refs)
        plan.trim_keys = None


@dataclass(slots=True)
class Taken:
    """A history cursor's part of a flush in flight: its point, and the points it keeps
    and drops once the flush is written."""

    cursor_id: int
    point: Point
    keep: list[Point]
    dropped: list[int]


class HistoryKeeper:
    """The store's side of history: which cursors keep it (cursor id to window seconds),
    their points (read when first needed), the store's flush clock, and the flush's three
    steps for them (take, write, adopt). A store whose cursors keep none pays one empty
    check a flush."""

    __slots__ = ("windows", "cursors", "clock", "db", "read")

    def __init__(self, db: lmdb._Database | None, read: Any) -> None:
        self.windows: dict[int, int] = {}
        self.cursors: dict[int, CursorHistory] = {}
        self.clock = 0
        """the newest flush's time (microseconds): a flush is never earlier"""
        self.db = db
        self.read = read  # storage.read: a function run in a read transaction

    def set_window(self, cursor_id: int, seconds: int) -> None:
        """Cursor ``cursor_id`` keeps ``seconds`` of history (0: none)."""
        if seconds:
            self.windows[cursor_id] = seconds
        else:
            self.windows.pop(cursor_id, None)

    def forget(self, cursor_id: int) -> None:
        """A cursor deleted or compacted: its points are gone (its keys dropped by the caller)."""
        self.cursors.pop(cursor_id, None)

    def of(self, cursor_id: int) -> CursorHistory:
        """Cursor ``cursor_id``'s points (read from the store the first time)."""
        h = self.cursors.get(cursor_id)
        if h is None:
            db = self.db
            h = self.cursors[cursor_id] = (
                CursorHistory() if db is None else self.read(lambda txn: CursorHistory.read(txn, db, cursor_id))
            )
        return h

    def now(self, wall: float) -> int:
        """The time of a flush starting at ``wall`` (Unix seconds), in microseconds: never
        before the previous flush's, whatever the clock did."""
        self.clock = max(self.clock, round(wall * 1e6))
        return self.clock

    def take(self, cursor_id: int, plan: Any, md: tuple[int, int], full_seq: int, micros: int) -> Taken:
        """A history cursor's plan was taken (store lock held): its point, with the points
        kept from the window's start; the plan trims nothing they need."""
        h = self.of(cursor_id)
        refs = tuple(sorted(plan.full_live)) if plan.full else ()
        point = Point(plan.marker_seq, micros, (md[0], md[1]), plan.persisted_ranges, full_seq, refs)
        cutoff = micros - self.windows[cursor_id] * 1_000_000
        keep, dropped, full = h.after(point, cutoff)
        clamp_trim(plan, full)
        return Taken(cursor_id, point, keep, dropped)

    def write(self, txn: lmdb.Transaction, taken: list[Taken]) -> None:
        """Step 3's part: every taken point put, the dropped ones deleted."""
        db = self.db
        for t in taken:
            txn.put(log_key(t.cursor_id, t.point.seq), encode_point(t.point), db=db)
            for seq in t.dropped:
                txn.delete(log_key(t.cursor_id, seq), db=db)

    def adopt(self, taken: list[Taken]) -> None:
        """Step 4's part (store lock held): the written points are the cursors' own."""
        for t in taken:
            self.of(t.cursor_id).points = t.keep


def point_entries(txn: lmdb.Transaction, db: lmdb._Database, cursor_id: int) -> list[tuple[bytes, bytes]]:
    """The raw ``(key, value)`` entries of ``cursor_id``'s points, in sequence order."""
    out = []
    c = txn.cursor(db=db)
    ok = c.set_range(log_key(cursor_id, 0))
    end = log_key(cursor_id + 1, 0)
    while ok and c.key() < end:
        out.append((bytes(c.key()), bytes(c.value())))
        ok = c.next()
    return out


def drop_points(txn: lmdb.Transaction, db: lmdb._Database | None, cursor_id: int) -> int:
    """Delete every point of ``cursor_id`` from ``db`` (in the caller's write transaction:
    the cursor was deleted or its log rewritten); how many."""
    if db is None:
        return 0
    c = txn.cursor(db=db)
    end, n = log_key(cursor_id + 1, 0), 0
    ok = c.set_range(log_key(cursor_id, 0))
    while ok and c.key() < end:
        ok = c.delete()
        n += 1
    return n
