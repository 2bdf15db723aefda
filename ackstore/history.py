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

A point's value (format 13): a tag byte, a big-endian u64, varints (little-endian base
128), then a CRC32 (u32, little-endian) of the key and everything before it::

    u8 0x01 (the tag: format 12's points have none and start with the time's top byte, 0)
    u64 time (microseconds since the epoch; never less than the store's previous flush)
    varint mark-delete ledger   varint mark-delete entry + 1   varint ranges
    varint sequence - full marker sequence (0: the point's own marker is full)
    varint n   n x varint the records a full marker names, ascending, each as the gap
    from the one before (the first from 0)
    u32 CRC32

A point of a small cursor is 18-25 bytes beside its 16-byte key. A point that fails its
checksum is damaged: ``ackstore check`` reports it, a restore that it could be the answer to
refuses (``CorruptRecordError`` naming it), salvage counts it. Format 12's points (no tag,
no checksum) read as they were written.

The history database holds one key that is not a point, :data:`CLOCK_KEY` (a cursor id no
cursor has): the store's flush clock, the newest point's time (u64 big-endian, then a CRC32
of the key and it), written with every flush that writes points, so that a writer opened
later never labels a flush before it (see :meth:`HistoryKeeper.now`).

Engine internals: the cursor's methods are the API.
"""

from __future__ import annotations

import logging
import math
import struct
import time
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable
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
    "CLOCK_KEY",
    "ClockReading",
    "CursorHistory",
    "FlushClock",
    "HistoryKeeper",
    "HistoryPoint",
    "Point",
    "Taken",
    "as_micros",
    "clamp_trim",
    "decode_clock",
    "decode_point",
    "drop_points",
    "encode_clock",
    "encode_point",
    "iso",
]

log = logging.getLogger("ackstore")
_TIME = struct.Struct(">Q")
_CRC = struct.Struct("<I")
_TAG = b"\x01"
CLOCK_KEY = b"\xff" * 8 + b"\x00" * 8
"""the key of the store's flush clock in the history database (cursor id 2**64 - 1: ids stay below 2**63)"""
STEP_SECONDS = 10.0
"""a wall clock that moved this much more (or less) than the steady clock between two flushes
of one process stepped: the step is not taken into the points' times (see ``HistoryKeeper.now``)"""


def _elapsed() -> float:
    """Seconds on a clock that never steps (``CLOCK_BOOTTIME`` where there is one: it counts
    a suspend as the wall clock does; else ``time.monotonic``)."""
    return time.clock_gettime(_STEADY)


_STEADY = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
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


def encode_point(point: Point, cursor_id: int, key: bytes | None = None) -> bytes:
    """A point's value under ``cursor_id``'s key (``key``, when the caller made it: the layout
    of the module docstring)."""
    md_l, md_e = point.md
    refs = point.refs
    fields: tuple[int, ...] = (md_l, md_e + 1, point.ranges, point.seq - point.full_seq, len(refs))
    if refs:  # (a delta marker's point, and a small cursor's, names none)
        fields += tuple([b - a for a, b in zip((0, *refs), refs, strict=False)])
    body = _TAG + point_value(point.micros, fields)
    return body + _CRC.pack(zlib.crc32(body, zlib.crc32(key or log_key(cursor_id, point.seq))))


def decode_point(cursor_id: int, seq: int, value: bytes) -> Point:
    """The point ``cursor_id`` keeps at ``seq``; CorruptRecordError when ``value`` is not one
    (its checksum fails, or it does not decode)."""
    kind = f"history point of cursor id {cursor_id} at {seq}"
    try:
        start, end = 0, len(value)
        if value[:1] == _TAG:  # format 13: checksummed
            start, end = 1, len(value) - _CRC.size
            if end < 1 + _TIME.size:
                raise ValueError(f"{kind} is {len(value)} bytes: too short")
            body = memoryview(value)[:end]
            if zlib.crc32(body, zlib.crc32(log_key(cursor_id, seq))) != _CRC.unpack_from(value, end)[0]:
                raise ValueError(f"{kind} fails its checksum")
        if end - start < _TIME.size:
            raise ValueError(f"{kind} is {len(value)} bytes: too short")
        (micros,) = _TIME.unpack_from(value, start)
        md_l, i = read_varint(value, start + _TIME.size, _U63, "mark-delete ledger", kind)
        md_e1, i = read_varint(value, i, _U63, "mark-delete entry", kind)
        ranges, i = read_varint(value, i, _U63, "range count", kind)
        back, i = read_varint(value, i, seq, "full marker distance", kind)
        n, i = read_varint(value, i, end, "record count", kind)
        refs, last = [], 0
        for _ in range(n):
            gap, i = read_varint(value, i, seq - last, "record", kind)
            last += gap
            refs.append(last)
        if i != end:
            raise ValueError(f"{kind} has {end - i} bytes past its end")
    except ValueError as exc:
        raise CorruptRecordError(f"{exc}: the point is damaged") from None
    return Point(seq, micros, (md_l, md_e1 - 1), ranges, seq - back, tuple(refs))


_CLOCK = struct.Struct(">QQ16s")


class ClockReading(NamedTuple):
    """The store's flush clock as a flush left it: the newest point's time, the steady clock
    then (microseconds) and the boot it was read in (the steady clock counts from a boot)."""

    micros: int
    steady: int
    boot: bytes


def encode_clock(reading: ClockReading) -> bytes:
    """The value of :data:`CLOCK_KEY`: a reading, checksummed (u64 time, u64 steady, 16-byte
    boot id, all big-endian, then a CRC32 of the key and them)."""
    body = _CLOCK.pack(*reading)
    return body + _CRC.pack(zlib.crc32(body, zlib.crc32(CLOCK_KEY)))


def decode_clock(value: bytes) -> ClockReading:
    """The reading :func:`encode_clock` wrote; CorruptRecordError when ``value`` does not check."""
    if (
        len(value) != _CLOCK.size + _CRC.size
        or zlib.crc32(value[: _CLOCK.size], zlib.crc32(CLOCK_KEY)) != (_CRC.unpack_from(value, _CLOCK.size)[0])
    ):
        raise CorruptRecordError("the history clock fails its checksum: it is damaged")
    return ClockReading(*_CLOCK.unpack_from(value))


def _boot_id(path: str = "/proc/sys/kernel/random/boot_id") -> bytes:
    """This boot's id (Linux: ``path``), 16 bytes; zeros where there is none or it does not
    read as one (then every open is taken for a new boot)."""
    try:
        with open(path, "rb") as f:
            return bytes.fromhex(f.read().decode().strip().replace("-", ""))[:16].ljust(16, b"\0")
    except (OSError, ValueError):
        return bytes(16)


class FlushClock:
    """The store's flush clock: the time a flush labels its points with. The wall clock's,
    but never before the previous flush's, and a step of the wall clock is not taken: the
    steady clock (``_elapsed``, which never steps) measures the time between two flushes,
    and a wall clock that moved more than ``STEP_SECONDS`` away from it stepped (a
    correction, a bad reading): the time goes on from the previous flush's by the steady
    clock, and the difference is kept (``offset``) until the wall clock steps back. The
    previous flush is the store's newest (:data:`CLOCK_KEY`), so this holds across a restart
    in the same boot; after a reboot a wall clock behind the newest flush goes on from it.
    O(1)."""

    __slots__ = ("micros", "steady", "offset", "boot")

    def __init__(self, stored: ClockReading | None, boot: bytes) -> None:
        self.micros = stored.micros if stored is not None else 0
        """the newest flush's time (microseconds)"""
        self.steady: int | None = stored.steady if stored is not None and stored.boot == boot else None
        """the steady clock at that flush (None: not in this boot)"""
        self.offset = 0
        """microseconds added to the wall clock's reading"""
        self.boot = boot

    def reading(self, wall: float) -> tuple[int, int, int]:
        """``(time, offset, steady)`` a flush starting at ``wall`` (Unix seconds) takes; nothing changes."""
        steady = round(_elapsed() * 1e6)
        label = round(wall * 1e6) + self.offset
        offset = self.offset
        if self.steady is None:
            if label < self.micros:  # a wall clock behind the store's newest flush: go on from it
                offset += self.micros - label
                label = self.micros
        else:
            expected = self.micros + steady - self.steady
            if abs(label - expected) > STEP_SECONDS * 1e6:  # the wall clock stepped since
                offset += expected - label
                label = expected
        return max(label, self.micros), offset, steady

    def take(self, wall: float) -> int:
        """The time of a flush starting at ``wall``: the reading, taken."""
        self.micros, self.offset, self.steady = self.reading(wall)
        return self.micros

    def stored(self) -> ClockReading:
        return ClockReading(self.micros, self.steady or 0, self.boot)


def iso(micros: int) -> str:
    """A time in microseconds as ISO-8601 UTC (what history's messages and tools name)."""
    return datetime.fromtimestamp(micros / 1e6, tz=UTC).isoformat(timespec="microseconds")


_MAX_MICROS = (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
_ALLOWED = "allowed a Unix time from 0 (1970-01-01) to 253402300799 (9999-12-31), or a datetime in that range"


def as_micros(when: object) -> int:
    """``when`` (a datetime, or a Unix time in seconds) in microseconds since the epoch; a
    typed error for anything else, or a time before 1970 or after 9999. A naive datetime
    is local time, as ``datetime.timestamp`` reads it."""
    if isinstance(when, datetime):  # exact: no float in between
        try:
            aware = when if when.tzinfo is not None else when.astimezone()
            micros = (aware - _EPOCH) // timedelta(microseconds=1)
        except (ValueError, OverflowError):
            micros = -1  # (a naive datetime at the calendar's very ends: no local time)
        if not 0 <= micros <= _MAX_MICROS:
            raise InvalidArgumentError(f"time {when.isoformat()}: {_ALLOWED}")
        return micros
    if isinstance(when, bool) or not isinstance(when, int | float):
        raise InvalidTypeError(f"a time is a datetime or a Unix time in seconds, got {when!r}")
    if isinstance(when, int):
        micros = when * 1_000_000
    elif not math.isfinite(when):
        micros = -1
    else:  # the bound in whole microseconds: as a float of seconds, 9999's last one rounds up into 10000
        micros = round(when * 1e6)
    if not 0 <= micros <= _MAX_MICROS:
        shown = repr(when) if len(repr(when)) <= 40 else f"{repr(when)[:30]}... ({len(repr(when))} digits)"
        raise InvalidArgumentError(f"time {shown}: {_ALLOWED}")
    return micros


class CursorHistory:
    """The points one cursor keeps, oldest first, and what a flush of it must keep of its
    log. Loaded from the store's history database when first needed.

    A window holds a point a flush (an hour at one flush a second: 3,600 a cursor), so the
    points are held as columns of machine ints, one ``array`` a field (48 bytes a point,
    where a tuple a point took about 300), and a :class:`Point` is made when one is asked
    for. The records a full marker names (``refs``) are kept by its sequence, for the few
    points that name any. Entries ``[start:]`` are the points kept (those before ``start``
    are gone: the window drops its oldest every flush, and moving ``start`` is O(1) where
    deleting from the front is O(points); the columns are cut down once ``start`` passes
    a quarter of them). The times and the sequences both ascend (a later flush has a higher
    sequence and no earlier time), so the searches are bisections of their columns."""

    __slots__ = (
        "_seq",
        "_micros",
        "_md_l",
        "_md_e",
        "_ranges",
        "_full",
        "_refs",
        "start",
        "damaged",
        "reaching",
        "last_full",
        "_first_full",
    )

    def __init__(self, points: Iterable[Point] = ()) -> None:
        self._seq, self._micros = array("Q"), array("Q")  # (unsigned 64 bits: a key's sequence is)
        self._md_l, self._md_e, self._ranges, self._full = array("Q"), array("q"), array("Q"), array("Q")
        self._refs: dict[int, tuple[int, ...]] = {}
        self.start = 0
        self.damaged: list[int] = []
        """the sequences of points the store holds that do not check (ascending): a restore
        they could be the answer to refuses; one older than every kept point goes with the
        window"""
        self.reaching: list[Point] = []
        """the full markers that name a record their previous full marker among the points did
        not name although older than it (a restored state's, and the first full marker), in
        order: the only points whose older records :meth:`named_below` must look at"""
        self.last_full: Point | None = None
        """the newest full marker among the points"""
        self._first_full: Point | None = None  # (the oldest point's full marker, once asked; None: not yet)
        for point in points:
            self._append(point)

    def _append(self, point: Point) -> None:
        """``point`` is the newest. O(its records), amortized."""
        self._seq.append(point.seq)
        self._micros.append(point.micros)
        self._md_l.append(point.md[0])
        self._md_e.append(point.md[1])
        self._ranges.append(point.ranges)
        self._full.append(point.full_seq)
        if point.refs:
            self._refs[point.seq] = point.refs
        self._note_full(point)

    def _point(self, i: int) -> Point:
        """The point at column index ``i``."""
        seq = self._seq[i]
        return Point(
            seq,
            self._micros[i],
            (self._md_l[i], self._md_e[i]),
            self._ranges[i],
            self._full[i],
            self._refs.get(seq, ()),
        )

    def _set(self, i: int, point: Point) -> None:
        """Column index ``i`` holds ``point`` (its records already kept by its sequence)."""
        self._seq[i], self._micros[i], self._full[i] = point.seq, point.micros, point.full_seq
        self._md_l[i], self._md_e[i], self._ranges[i] = point.md[0], point.md[1], point.ranges

    def _note_full(self, point: Point) -> None:
        """``point`` is the newest: if it is a full marker, remember it, and whether it
        reaches back past what the previous full marker named. O(its records)."""
        if point.full_seq != point.seq:
            return
        prev = self.last_full
        if point.refs and (prev is None or not {r for r in point.refs if r < prev.seq} <= set(prev.refs)):
            self.reaching.append(point)
        self.last_full = point

    def __len__(self) -> int:
        return len(self._seq) - self.start

    @property
    def kept(self) -> list[Point]:
        """The points kept, oldest first (made now). O(points)."""
        return [self._point(i) for i in range(self.start, len(self._seq))]

    @property
    def oldest(self) -> Point | None:
        """The oldest point kept (None: none). O(1)."""
        return self._point(self.start) if len(self) else None

    @classmethod
    def read(cls, txn: lmdb.Transaction, db: lmdb._Database, cursor_id: int) -> CursorHistory:
        """The points of ``cursor_id`` stored in ``db``, less any damaged one (a WARNING
        names it; ``ackstore check`` reports it): a damaged point is a state that cannot be
        restored, never a reason to stop flushing. O(points)."""
        h = cls()
        for seq, value in CursorLog(db, cursor_id).records(txn):
            try:
                h._append(decode_point(cursor_id, seq, value))
            except CorruptRecordError as exc:
                log.warning("ackstore: a history point of cursor id %d is left out: %s", cursor_id, exc)
                h.damaged.append(seq)
        return h

    def damaged_between(self, low: int, high: int) -> int | None:
        """A damaged point's sequence between ``low`` and ``high`` (exclusive), or None."""
        i = bisect_right(self.damaged, low)
        return self.damaged[i] if i < len(self.damaged) and self.damaged[i] < high else None

    def visible(self, cutoff: int) -> list[Point]:
        """The points a restore may go to: those of flushes at or after ``cutoff``
        (microseconds), oldest first. O(log points + points returned)."""
        return [self._point(i) for i in range(bisect_left(self._micros, cutoff, self.start), len(self._seq))]

    def after(self, point: Point, cutoff: int) -> tuple[list[int], Point]:
        """With ``point`` added (a flush's, the newest): the sequences of the points to drop
        (older than ``cutoff``, microseconds), and the full marker the oldest point kept
        starts its chain at (kept while that point is: the flush keeps the log from it on,
        and the records it names). Nothing is changed (:meth:`add` does it once the flush
        is written). O(log points + points dropped)."""
        start, micros = self.start, self._micros
        if start == len(micros):  # (none kept yet: ``point`` is the oldest)
            return [], self._full_of(point)
        if micros[start] >= cutoff:  # (the window slid past none: a flush's common case)
            full = self._first_full
            if full is None:
                full = self._first_full = self._full_of(self._point(start))
            return [], full
        at = bisect_left(micros, cutoff, start)
        full = self._full_of(self._point(at) if at < len(micros) else point)
        keep = full.seq  # (a kept point's sequence: the only point at it)
        return [s for s in self._seq[start:at] if s != keep], full

    def _full_of(self, first: Point) -> Point:
        """The full marker ``first``'s chain starts at: a kept point (or, never seen, since
        history starts with a full marker, a stand-in naming no records)."""
        if first.full_seq == first.seq:
            return first
        seqs = self._seq
        f = bisect_left(seqs, first.full_seq, self.start)
        if f < len(seqs) and seqs[f] == first.full_seq:
            return self._point(f)
        return first._replace(seq=first.full_seq, refs=())

    def keeps(self) -> tuple[int, frozenset[int]] | None:
        """What the log keeps for these points: every record from a sequence on, and the
        records below it that a kept point names (None: no point kept). O(points)."""
        oldest = self.oldest
        if oldest is None:
            return None
        full = self._full_of(oldest)
        return full.seq, self.named_below(full, ())

    def named_below(self, full: Point, dropped: Collection[int]) -> frozenset[int]:
        """The records older than ``full`` (the full marker the oldest point kept starts its
        chain at) that a point kept names: ``full``'s, and those of any later full marker
        that names records older than ``full`` (a restored state's: its marker names the
        records of the state restored, which may be older than every marker since). A
        delta marker names only records written since its chain's full marker. The points
        at ``dropped`` are not kept. O(reaching markers)."""
        if not self.reaching:  # (no later full marker names older records: ``full``'s alone)
            return frozenset(full.refs)
        below = full.seq
        named = set(full.refs)
        gone = set(dropped)
        # A full marker's records older than the full marker before it are ones that marker
        # named too (a record, once superseded, is named again only by a restore): by
        # induction from ``full``, what a later full marker names below ``full`` is
        # ``full``'s, or a reaching marker's between them. So only those are looked at:
        # O(reaching markers), where every kept point was O(points) a flush.
        for p in self.reaching:
            if p.seq > below and p.refs[0] < below and p.seq not in gone:
                named.update(r for r in p.refs if r < below)
        return frozenset(named)

    def stale(self, dropped: list[int]) -> list[int]:
        """The damaged points older than every point kept once ``dropped`` are gone: no
        restore can be asked about them any more, so they go with the window."""
        gone = set(dropped)
        oldest = next((s for s in self._seq[self.start :] if s not in gone), None)
        return [d for d in self.damaged if oldest is not None and d < oldest]

    def add(self, point: Point, dropped: list[int]) -> None:
        """The flush that took ``point`` was written: it is the newest point, and those at
        ``dropped`` (the oldest, but for at most one full marker among them) are gone.
        O(points dropped), amortized."""
        seqs = self._seq
        if dropped:  # the oldest points, but for at most one full marker among them
            self._first_full = None  # (another point is the oldest now)
            gone, i, left, full = set(dropped), self.start, len(dropped), -1
            while left:
                if seqs[i] in gone:
                    left -= 1
                else:
                    full = i
                i += 1
            if full >= 0:  # the full marker kept: the oldest point now (its time and sequence are the lowest)
                i -= 1
                self._set(i, self._point(full))
            self.start = i
            if i > 64 and 4 * i > len(seqs):  # (at most a third more than the points kept)
                for column in (seqs, self._micros, self._md_l, self._md_e, self._ranges, self._full):
                    del column[:i]
                self.start = 0
                oldest = seqs[0]
                self.reaching = [p for p in self.reaching if p.seq >= oldest]
                self._refs = {s: refs for s, refs in self._refs.items() if s >= oldest}
        self._append(point)


def clamp_trim(plan: Any, full: Point, named: Callable[[], frozenset[int]]) -> None:
    """A history cursor's plan (a MarkerPlan or a FlushPlan) trims nothing its window
    needs: nothing from ``full``'s marker on, and none of the older records a kept point
    names (``named()``, asked only when the plan trims)."""
    if plan.gc_below > full.seq:
        plan.gc_below = full.seq
    if plan.gc_below >= 0:
        plan.gc_live = frozenset(plan.gc_live) | named()
        plan.trim_keys = None


@dataclass(slots=True)
class Taken:
    """A history cursor's part of a flush in flight: its point, and the points it keeps
    and drops once the flush is written."""

    cursor_id: int
    point: Point
    dropped: list[int]
    key: bytes
    """the point's key (its marker's log key)"""
    value: bytes
    """the point's value, as written"""
    stale: list[int] = field(default_factory=list)
    """damaged points that go with the window"""


class HistoryKeeper:
    """The store's side of history: which cursors keep it (cursor id to window seconds),
    their points (read when first needed), the store's flush clock, and the flush's three
    steps for them (take, write, adopt). A store whose cursors keep none pays one empty
    check a flush."""

    __slots__ = ("windows", "cursors", "_clock", "_storage", "read", "writer")

    def __init__(self, storage: Any, writer: bool = True) -> None:
        self.windows: dict[int, int] = {}
        self.cursors: dict[int, CursorHistory] = {}
        self._clock: FlushClock | None = None
        """the writer's flush clock (read from the store when first needed)"""
        self._storage = storage
        self.read = storage.read  # a function run in a read transaction
        self.writer = writer
        """False on a read-only store: another process writes the points, so they are read
        again each time (never cached)"""

    @property
    def db(self) -> lmdb._Database | None:
        """The history database (None: the store has none yet; a writer's first write to a
        store of an older format makes it)."""
        return self._storage.history_db  # type: ignore[no-any-return]

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

    def stored_clock(self, txn: lmdb.Transaction | None = None) -> ClockReading | None:
        """The store's flush clock as the history database holds it (None: none). A store
        that has points but no clock (format 12) takes the newest point's time: one scan."""
        db = self.db
        if db is None:
            return None

        def look(t: lmdb.Transaction) -> ClockReading | None:
            value = t.get(CLOCK_KEY, db=db)
            if value is not None:
                try:
                    return decode_clock(value)
                except CorruptRecordError as exc:
                    log.warning("ackstore: %s; the points' times are read instead", exc)
            newest = -1
            c = t.cursor(db=db)
            ok = c.first()
            while ok:
                key, value = c.item()
                if key != CLOCK_KEY and len(value) >= 1 + _TIME.size:
                    newest = max(newest, _TIME.unpack_from(value, 1 if value[:1] == _TAG else 0)[0])
                ok = c.next()
            return ClockReading(newest, 0, bytes(16)) if newest >= 0 else None

        return look(txn) if txn is not None else self.read(look)  # type: ignore[no-any-return]

    def clock(self, txn: lmdb.Transaction | None = None) -> FlushClock:
        """The flush clock: the writer's own (read from the store once), a reader's read
        from the store each time (another process flushes)."""
        if self.writer and self._clock is not None:
            return self._clock
        clock = FlushClock(self.stored_clock(txn), _boot_id())
        if self.writer:
            self._clock = clock
        return clock

    def wall_now(self, wall: float, txn: lmdb.Transaction | None = None) -> int:
        """The store's time now (microseconds), as a flush starting at ``wall`` would take it."""
        return self.clock(txn).reading(wall)[0]

    def visible(self, cursor_id: int, window: int, wall: float, txn: lmdb.Transaction | None = None) -> list[Point]:
        """The points cursor ``cursor_id`` keeps within ``window`` seconds before ``wall``
        (Unix seconds, as :meth:`wall_now` takes it), oldest first: what a restore may go
        to. The writer reads nothing but the first time; a reader reads them in ``txn`` (or
        a read transaction of its own). Moves no clock. O(log points + points returned)."""
        now = self.wall_now(wall, txn)
        return self.of(cursor_id, txn).visible(now - window * 1_000_000)

    def target(
        self, cursor_id: int, window: int, micros: int, name: str, wall: float, txn: lmdb.Transaction | None = None
    ) -> Point:
        """The point a restore as of ``micros`` goes to: the newest visible point at or before
        it (``micros`` is read against the points' times). HistoryRangeError, naming the range
        kept, when ``micros`` is before the oldest (and saying so when the wall clock's
        reading ``wall`` is behind the newest flush); CorruptRecordError naming a damaged
        point that may be the answer."""
        points = self.visible(cursor_id, window, wall, txn)
        if not points or micros < points[0].micros:
            kept = f"{iso(points[0].micros)} .. {iso(points[-1].micros)}" if points else "nothing flushed yet"
            behind = ""
            wall_us = round(wall * 1e6)
            if points and wall_us < points[-1].micros:
                behind = (
                    f" (this machine's clock reads {iso(wall_us)}, behind the newest flush: the points' times went on "
                    "from the store's clock, a time from `history` names one)"
                )
            raise HistoryRangeError(f"cursor {name} has no state as of {iso(micros)}: its history holds {kept}{behind}")
        at = bisect_right(points, micros, key=attrgetter("micros")) - 1
        point = points[at]
        later = points[at + 1].seq if at + 1 < len(points) else 1 << 64
        damaged = self.of(cursor_id, txn).damaged_between(point.seq, later)
        if damaged is not None:
            raise CorruptRecordError(
                f"cursor {name}: history point {damaged} is damaged and may be the state as of {iso(micros)} "
                f"(the kept points around it are {iso(point.micros)} and "
                f"{iso(points[at + 1].micros) if at + 1 < len(points) else 'none newer'}); nothing was changed: "
                "restore as of a time outside them, and run 'ackstore check'"
            )
        return point

    def now(self, wall: float) -> int:
        """The time of a flush starting at ``wall`` (Unix seconds), in microseconds (see
        :class:`FlushClock`): never before the previous flush's, a step of the wall clock
        not taken."""
        return self.clock().take(wall)

    def take(self, cursor_id: int, plan: Any, md: tuple[int, int], full_seq: int, micros: int) -> Taken:
        """A history cursor's plan was taken (store lock held): its point, with the points
        kept from the window's start; the plan trims nothing they need, and counts the
        point's bytes."""
        h = self.of(cursor_id)
        seq = plan.marker_seq  # a full marker's records older than itself (the log is kept from it on anyway)
        live = plan.full_live  # (a full marker's names itself: one alone names no older record)
        refs = tuple(sorted([r for r in live if r < seq])) if plan.full and len(live) > 1 else ()
        point = Point(seq, micros, (md[0], md[1]), plan.persisted_ranges, full_seq, refs)
        cutoff = micros - self.windows[cursor_id] * 1_000_000
        dropped, full = h.after(point, cutoff)
        clamp_trim(plan, full, lambda: h.named_below(full, dropped))
        key = log_key(cursor_id, seq)
        value = encode_point(point, cursor_id, key)
        plan.nbytes += 16 + len(value)  # the point is part of what this cursor's flush writes
        return Taken(cursor_id, point, dropped, key, value, h.stale(dropped) if h.damaged else [])

    def write(self, txn: lmdb.Transaction, taken: list[Taken]) -> None:
        """Step 3's part: every taken point put, the dropped ones (and damaged ones the window
        left) deleted, and the store's clock."""
        c = txn.cursor(db=self.db)
        for t in taken:
            if t.dropped or t.stale:
                for seq in (*t.dropped, *t.stale):
                    if c.set_key(log_key(t.cursor_id, seq)):
                        c.delete()
        items = [(t.key, t.value) for t in taken]
        if taken:
            items.append((CLOCK_KEY, encode_clock(self.clock().stored())))
        c.putmulti(items)

    def adopt(self, taken: list[Taken]) -> None:
        """Step 4's part (store lock held): the written points are the cursors' own."""
        for t in taken:
            h = self.of(t.cursor_id)
            h.add(t.point, t.dropped)
            if t.stale:
                h.damaged = [d for d in h.damaged if d not in t.stale]


def drop_points(txn: lmdb.Transaction, db: lmdb._Database | None, cursor_id: int) -> None:
    """Delete every point of ``cursor_id`` from ``db`` (in the caller's write transaction:
    the cursor was deleted, its history turned off or its log rewritten)."""
    if db is not None:
        CursorLog(db, cursor_id).drop(txn)
