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

A point's value: a big-endian u64 and then varints (little-endian base 128)::

    u64 time (microseconds since the epoch; never less than the store's previous flush)
    varint mark-delete ledger   varint mark-delete entry + 1   varint ranges
    varint sequence - full marker sequence (0: the point's own marker is full)
    varint n   n x varint the records a full marker names, ascending, each as the gap
    from the one before (the first from 0)

A point of a small cursor is 13-20 bytes beside its 16-byte key.

Engine internals: the cursor's methods are the API.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import CorruptRecordError, HistoryRangeError, InvalidArgumentError, InvalidTypeError
from .position import Position, trusted
from .storage.codecs import point_value
from .storage.log import CursorLog
from .storage.pure_codecs import read_varint
from .storage.records import log_key

if TYPE_CHECKING:
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
    "iso",
]

log = logging.getLogger("ackstore")
_TIME = struct.Struct(">Q")
_U63 = (1 << 63) - 1
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
    refs = point.refs
    gaps = [b - a for a, b in zip((0, *refs), refs, strict=False)]
    return point_value(point.micros, (md_l, md_e + 1, point.ranges, point.seq - point.full_seq, len(refs), *gaps))


def decode_point(cursor_id: int, seq: int, value: bytes) -> Point:
    """The point ``cursor_id`` keeps at ``seq``; CorruptRecordError when ``value`` is not one."""
    kind = f"history point of cursor id {cursor_id} at {seq}"
    try:
        if len(value) < _TIME.size:
            raise ValueError(f"{kind} is {len(value)} bytes: too short")
        (micros,) = _TIME.unpack_from(value)
        md_l, i = read_varint(value, _TIME.size, _U63, "mark-delete ledger", kind)
        md_e1, i = read_varint(value, i, _U63, "mark-delete entry", kind)
        ranges, i = read_varint(value, i, _U63, "range count", kind)
        back, i = read_varint(value, i, seq, "full marker distance", kind)
        n, i = read_varint(value, i, len(value), "record count", kind)
        refs, last = [], 0
        for _ in range(n):
            gap, i = read_varint(value, i, seq - last, "record", kind)
            last += gap
            refs.append(last)
        if i != len(value):
            raise ValueError(f"{kind} has {len(value) - i} bytes past its end")
    except ValueError as exc:
        raise CorruptRecordError(f"{exc}: the point is damaged") from None
    return Point(seq, micros, (md_l, md_e1 - 1), ranges, seq - back, tuple(refs))


def iso(micros: int) -> str:
    """A time in microseconds as ISO-8601 UTC (what history's messages and tools name)."""
    return datetime.fromtimestamp(micros / 1e6, tz=UTC).isoformat(timespec="microseconds")


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
    log. Loaded from the store's history database when first needed.

    ``points[start:]`` are the points kept (those before ``start`` are gone: the window
    drops its oldest every flush, and moving ``start`` is O(1) where deleting from the
    front of a list is O(points); the lists are cut down once ``start`` passes half of
    them). ``times`` and ``seqs`` are the points' times and sequences, beside them so the
    searches compare ints (both ascend: a later flush has a higher sequence and no
    earlier time)."""

    points: list[Point] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    start: int = 0

    def __post_init__(self) -> None:
        self.times = [p.micros for p in self.points]
        self.seqs = [p.seq for p in self.points]

    def __len__(self) -> int:
        return len(self.points) - self.start

    @property
    def kept(self) -> list[Point]:
        """The points kept, oldest first (a copy). O(points)."""
        return self.points[self.start :]

    @classmethod
    def read(cls, txn: lmdb.Transaction, db: lmdb._Database, cursor_id: int) -> CursorHistory:
        """The points of ``cursor_id`` stored in ``db``, less any damaged one (a WARNING
        names it; ``ackstore check`` reports it): a damaged point is a state that cannot be
        restored, never a reason to stop flushing. O(points)."""
        points = []
        for seq, value in CursorLog(db, cursor_id).records(txn):
            try:
                points.append(decode_point(cursor_id, seq, value))
            except CorruptRecordError as exc:
                log.warning("ackstore: a history point of cursor id %d is left out: %s", cursor_id, exc)
        return cls(points)

    def visible(self, cutoff: int) -> list[Point]:
        """The points a restore may go to: those of flushes at or after ``cutoff``
        (microseconds), oldest first. O(log points + points returned)."""
        return self.points[bisect_left(self.times, cutoff, self.start) :]

    def after(self, point: Point, cutoff: int) -> tuple[list[int], Point]:
        """With ``point`` added (a flush's, the newest): the sequences of the points to drop
        (older than ``cutoff``, microseconds), and the full marker the oldest point kept
        starts its chain at (kept while that point is: the flush keeps the log from it on,
        and the records it names). Nothing is changed (:meth:`add` does it once the flush
        is written). O(log points + points dropped)."""
        points = self.points
        at = bisect_left(self.times, cutoff, self.start)
        full = self._full_of(points[at] if at < len(points) else point)
        return [p.seq for p in points[self.start : at] if p is not full], full

    def _full_of(self, first: Point) -> Point:
        """The full marker ``first``'s chain starts at: a kept point (or, never seen, since
        history starts with a full marker, a stand-in naming no records)."""
        if first.full_seq == first.seq:
            return first
        seqs = self.seqs
        f = bisect_left(seqs, first.full_seq, self.start)
        if f < len(seqs) and seqs[f] == first.full_seq:
            return self.points[f]
        return first._replace(seq=first.full_seq, refs=())

    def keeps(self) -> tuple[int, frozenset[int]] | None:
        """What the log keeps for these points: every record from a sequence on, and the
        records that sequence's full marker names (None: no point kept). O(log points)."""
        if not len(self):
            return None
        full = self._full_of(self.points[self.start])
        return full.seq, frozenset(full.refs)

    def add(self, point: Point, dropped: list[int]) -> None:
        """The flush that took ``point`` was written: it is the newest point, and those at
        ``dropped`` (the oldest, but for a full marker still needed) are gone.
        O(points dropped), amortized."""
        points, times, seqs = self.points, self.times, self.seqs
        if dropped:  # the oldest points, but for at most one full marker among them
            gone, i, left, full = set(dropped), self.start, len(dropped), None
            while left:
                if points[i].seq in gone:
                    left -= 1
                else:
                    full = points[i]
                i += 1
            if full is not None:  # the full marker kept: the oldest point now (its time and sequence are the lowest)
                i -= 1
                points[i], times[i], seqs[i] = full, full.micros, full.seq
            self.start = i
            if i > 64 and 2 * i > len(points):
                del points[:i], times[:i], seqs[:i]
                self.start = 0
        points.append(point)
        times.append(point.micros)
        seqs.append(point.seq)


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
    dropped: list[int]
    value: bytes
    """the point's value, as written"""


class HistoryKeeper:
    """The store's side of history: which cursors keep it (cursor id to window seconds),
    their points (read when first needed), the store's flush clock, and the flush's three
    steps for them (take, write, adopt). A store whose cursors keep none pays one empty
    check a flush."""

    __slots__ = ("windows", "cursors", "clock", "db", "read", "writer")

    def __init__(self, db: lmdb._Database | None, read: Any, writer: bool = True) -> None:
        self.windows: dict[int, int] = {}
        self.cursors: dict[int, CursorHistory] = {}
        self.clock = 0
        """the newest flush's time (microseconds): a flush is never earlier"""
        self.db = db
        self.read = read  # storage.read: a function run in a read transaction
        self.writer = writer
        """False on a read-only store: another process writes the points, so they are read
        again each time (never cached)"""

    def set_window(self, cursor_id: int, seconds: int) -> None:
        """Cursor ``cursor_id`` keeps ``seconds`` of history (0: none)."""
        if seconds:
            self.windows[cursor_id] = seconds
        else:
            self.windows.pop(cursor_id, None)

    def forget(self, cursor_id: int) -> None:
        """A cursor deleted or compacted: its points are gone (its keys dropped by the caller)."""
        self.cursors.pop(cursor_id, None)

    def of(self, cursor_id: int, txn: lmdb.Transaction | None = None) -> CursorHistory:
        """Cursor ``cursor_id``'s points (read from the store the first time, in ``txn`` or
        a read transaction of its own)."""
        h = self.cursors.get(cursor_id)
        if h is None:
            h = self._read(cursor_id, txn)
            if self.writer:
                self.cursors[cursor_id] = h
        return h

    def held(self, cursor_id: int, txn: lmdb.Transaction | None = None) -> CursorHistory | None:
        """The points the store holds for ``cursor_id`` whatever its config says (a reader's
        cursor may have been opened with another one): None when there can be none (no
        history database, or on the writer a cursor that keeps no history)."""
        if self.db is None or (self.writer and cursor_id not in self.windows):
            return None
        return self.of(cursor_id, txn)

    def _read(self, cursor_id: int, txn: lmdb.Transaction | None) -> CursorHistory:
        db = self.db
        if db is None:
            return CursorHistory()
        if txn is None:
            return self.read(lambda t: CursorHistory.read(t, db, cursor_id))  # type: ignore[no-any-return]
        return CursorHistory.read(txn, db, cursor_id)

    def visible(self, cursor_id: int, window: int, wall: float, txn: lmdb.Transaction | None = None) -> list[Point]:
        """The points cursor ``cursor_id`` keeps within ``window`` seconds before ``wall``
        (Unix seconds; the flush clock, if it is ahead), oldest first: what a restore may go
        to. The writer reads nothing but the first time; a reader reads them in ``txn`` (or
        a read transaction of its own). Moves no clock. O(log points + points returned)."""
        now = max(self.clock, round(wall * 1e6))
        return self.of(cursor_id, txn).visible(now - window * 1_000_000)

    def target(self, points: list[Point], micros: int, name: str) -> Point:
        """The point a restore as of ``micros`` goes to: the newest of ``points`` (what
        :meth:`visible` gave) at or before it. HistoryRangeError, naming the range kept,
        when ``micros`` is before the oldest."""
        if not points or micros < points[0].micros:
            kept = f"{iso(points[0].micros)} .. {iso(points[-1].micros)}" if points else "nothing flushed yet"
            raise HistoryRangeError(f"cursor {name} has no state as of {iso(micros)}: its history holds {kept}")
        return points[bisect_right(points, micros, key=attrgetter("micros")) - 1]

    def now(self, wall: float) -> int:
        """The time of a flush starting at ``wall`` (Unix seconds), in microseconds: never
        before the previous flush's, whatever the clock did."""
        self.clock = max(self.clock, round(wall * 1e6))
        return self.clock

    def take(self, cursor_id: int, plan: Any, md: tuple[int, int], full_seq: int, micros: int) -> Taken:
        """A history cursor's plan was taken (store lock held): its point, with the points
        kept from the window's start; the plan trims nothing they need, and counts the
        point's bytes."""
        h = self.of(cursor_id)
        seq = plan.marker_seq  # a full marker's records older than itself (the log is kept from it on anyway)
        refs = tuple(sorted(r for r in plan.full_live if r < seq)) if plan.full else ()
        point = Point(seq, micros, (md[0], md[1]), plan.persisted_ranges, full_seq, refs)
        cutoff = micros - self.windows[cursor_id] * 1_000_000
        dropped, full = h.after(point, cutoff)
        clamp_trim(plan, full)
        value = encode_point(point)
        plan.nbytes += 16 + len(value)  # the point is part of what this cursor's flush writes
        return Taken(cursor_id, point, dropped, value)

    def write(self, txn: lmdb.Transaction, taken: list[Taken]) -> None:
        """Step 3's part: every taken point put, the dropped ones deleted."""
        c = txn.cursor(db=self.db)
        for t in taken:
            for seq in t.dropped:
                if c.set_key(log_key(t.cursor_id, seq)):
                    c.delete()
        c.putmulti([(log_key(t.cursor_id, t.point.seq), t.value) for t in taken])

    def adopt(self, taken: list[Taken]) -> None:
        """Step 4's part (store lock held): the written points are the cursors' own."""
        for t in taken:
            self.of(t.cursor_id).add(t.point, t.dropped)


def drop_points(txn: lmdb.Transaction, db: lmdb._Database | None, cursor_id: int) -> int:
    """Delete every point of ``cursor_id`` from ``db`` (in the caller's write transaction:
    the cursor was deleted, its history turned off or its log rewritten); how many."""
    return 0 if db is None else CursorLog(db, cursor_id).drop(txn)
