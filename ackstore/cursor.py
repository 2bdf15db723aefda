"""A cursor (subscription): its mark-delete position, individual and batch-index acks.

State lives in memory as one :class:`~ackstore.ledger_acks.LedgerAcks` per ledger
with anything acknowledged above the mark-delete position ``M``. A flush writes a
ledger record for each ledger changed since the last flush, plus one marker. All
mutating calls validate every argument before changing anything, so a call that
raises leaves the cursor as it was.

Complexity: ``ack`` of k positions in one ledger is O(k) in C plus O(containers)
to recount that ledger's runs; a single-position ``ack`` is O(1);
``ack_range_count`` is O(1); ``ack_ranges`` is O(ranges).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap

from .config import CursorConfig
from .errors import (
    InvalidArgumentError,
    InvalidPositionError,
    InvalidTypeError,
    LedgerStateError,
    ReadOnlyError,
    StoreClosedError,
    UnknownLedgerError,
)
from .ledger_acks import LedgerAcks, count_runs, run_end
from .position import MAX_ENTRY, Position, _trusted
from .records import IndexEntry, Marker, encode_ledger, encode_marker, log_key
from .recover import RecoveredState
from .stats import CursorStats, RecoveryReport

if TYPE_CHECKING:
    from .directory import LedgerDirectory
    from .store import Topic

__all__ = ["Cursor", "MAX_BATCH_SIZE"]

#: The largest batch a batch-index ack accepts.
MAX_BATCH_SIZE = 1 << 16

_first = itemgetter(0)
_second = itemgetter(1)


@dataclass(slots=True)
class _Capture:
    """One cursor's part of a group flush, prepared under the store lock."""

    cursor: Cursor
    puts: list[tuple[bytes, bytes]]
    changes: dict[int, IndexEntry | None]
    full: bool
    marker_seq: int
    marker_bytes: int
    gc_below: int  # delete unreferenced records below this sequence (-1: none)
    gc_live: frozenset[int]
    dirty: set[int]
    vanished: set[int]
    meta_dirty: bool


class Cursor:
    """One subscription's ack state over a topic. Get one with ``topic.cursor(name)``."""

    def __init__(self, topic: Topic, name: str, cursor_id: int, config: CursorConfig, state: RecoveredState) -> None:
        self._topic = topic
        self._store = topic._store
        self._lock: threading.RLock = topic._store._lock
        self.name = name
        self.cursor_id = cursor_id
        self._config = config
        self._ledgers: dict[int, LedgerAcks] = state.ledgers
        self._dirty: set[int] = set()
        self._vanished: set[int] = set()
        self._meta_dirty = False
        self._next_seq = state.next_seq
        self._recovery: RecoveryReport = state.report
        self._flushes = 0
        self._last_flush_bytes = 0
        self._total_flush_bytes = 0
        resolved = state.resolved
        d = topic._directory
        if resolved is None:
            first = d.first()
            self._md = _trusted(first if first is not None else 0, -1)
            self._rp = self._md.next()
            self._properties: dict[str, int] = {}
            self._index: dict[int, IndexEntry] = {}
            self._marker_seq = -1
            self._full_seq = -1
            self._full_live: frozenset[int] = frozenset()
            self._deltas = 0
            self._chain_bytes = 0
            self._full_bytes = 0
            self._force_full = True
            self._meta_dirty = True  # a new cursor's start position is persisted by the first flush
        else:
            m = resolved.marker
            self._md = _trusted(*m.mark_delete)
            self._rp = _trusted(*m.read_position)
            self._properties = dict(m.properties)
            self._index = resolved.index
            self._marker_seq = resolved.seq
            self._full_seq = resolved.full_seq
            self._full_live = frozenset(resolved.full_index_seqs | {resolved.full_seq})
            self._deltas = resolved.deltas_since_full
            self._chain_bytes = resolved.chain_bytes
            self._full_bytes = resolved.full_bytes
            # after falling back past a broken marker, start a fresh chain
            self._force_full = state.report.markers_skipped > 0
        self._range_count = sum(la.runs for la in self._ledgers.values())
        self._limit_ledger, self._limit_value, self._limit_version = -1, -1, -1  # one-entry cache of _limit
        self._reconcile(d)

    # -- reconciliation with the ledger directory ---------------------------------------------

    def _reconcile(self, d: LedgerDirectory) -> None:
        """Fit recovered state to the current directory (ledgers trimmed or sealed since)."""
        for ledger in list(self._ledgers):
            i = d.index(ledger)
            if i < 0:
                self._vanish(ledger)
                continue
            count = d.counts[i]
            la = self._ledgers[ledger]
            if count >= 0 and ((la.bitmap and la.bitmap.max() >= count) or any(e >= count for e in la.batches)):
                self._range_count += la.drop_from(count)
                self._touched(ledger, la)
        first = d.first()
        if first is not None and self._md[0] < first:
            self._set_md(_trusted(first, -1))
        la = self._ledgers.get(self._md[0])
        if la is not None and la and (la.bitmap.min() if la.bitmap else min(la.batches)) <= self._md[1]:
            self._range_count += la.drop_through(self._md[1])
            self._touched(self._md[0], la)
        for ledger in [x for x in self._ledgers if x < self._md[0]]:
            self._vanish(ledger)
        self._advance()

    def _on_trim(self, d: LedgerDirectory) -> None:
        self._reconcile(d)

    def _on_directory_change(self, d: LedgerDirectory) -> None:
        first = d.first()
        if first is not None and self._md[0] < first:
            self._set_md(_trusted(first, -1))
        self._advance()

    def _check_close(self, ledger: int, entries: int) -> None:
        la = self._ledgers.get(ledger)
        highest = -1
        if la is not None:
            if la.bitmap:
                highest = la.bitmap.max()
            if la.batches:
                highest = max(highest, max(la.batches))
        if self._md[0] == ledger:
            highest = max(highest, self._md[1])
        if highest >= entries:
            raise LedgerStateError(
                f"cannot close ledger {ledger} with {entries} entries: cursor {self.name!r} has acknowledged "
                f"entry {ledger}:{highest}; allowed entries >= {highest + 1}"
            )

    # -- internal helpers ---------------------------------------------------------------------

    def _alive(self) -> None:
        if self._store._closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")
        if self._store.readonly:
            raise ReadOnlyError(f"store {self._store.path} was opened readonly=True; cursors cannot change")

    def _set_md(self, md: Position) -> None:
        self._md = md
        self._meta_dirty = True
        if self._rp < (md[0], md[1] + 1):
            self._rp = _trusted(md[0], md[1] + 1)

    def _vanish(self, ledger: int) -> None:
        la = self._ledgers.pop(ledger, None)
        if la is not None:
            self._range_count -= la.runs
        self._dirty.discard(ledger)
        self._vanished.add(ledger)

    def _touched(self, ledger: int, la: LedgerAcks) -> None:
        if la:
            self._dirty.add(ledger)
        else:
            self._vanish(ledger)

    def _advance(self) -> None:
        """Move M over contiguous acks and across fully acked sealed ledgers."""
        d = self._topic._directory
        ledger, entry = self._md
        moved = False
        while True:
            la = self._ledgers.get(ledger)
            if la is not None and (entry + 1) in la.bitmap:
                entry = run_end(la.bitmap, entry + 1)
                moved = True
                self._range_count += la.drop_through(entry)
                self._touched(ledger, la)
            i = d.index(ledger)
            if i < 0:
                break
            count = d.counts[i]
            if count >= 0 and entry >= count - 1 and i + 1 < len(d.ids):
                if ledger in self._ledgers:
                    self._vanish(ledger)
                ledger, entry = d.ids[i + 1], -1
                moved = True
                continue
            break
        if moved:
            self._set_md(_trusted(ledger, entry))

    def _limit(self, ledger: Any) -> int:
        """Highest entry id allowed in ``ledger``; raises for an unknown/trimmed ledger."""
        if type(ledger) is not int:
            raise InvalidTypeError(f"ledger must be an int, got {ledger!r} ({type(ledger).__name__})")
        d = self._topic._directory
        i = d.index(ledger)
        if i < 0:
            first = d.first()
            if first is not None and 0 <= ledger < first:
                why = f"it was trimmed (the topic's first ledger is {first})"
            else:
                why = f"the topic's ledgers are {_describe(d)}"
            raise UnknownLedgerError(f"ledger {ledger} is not in topic {self._topic.name!r}: {why}")
        count = d.counts[i]
        return MAX_ENTRY if count < 0 else count - 1

    def _check_entry(self, ledger: int, entry: Any, low: int = 0) -> None:
        if type(entry) is not int:
            raise InvalidTypeError(f"entry must be an int, got {entry!r} ({type(entry).__name__})")
        limit = self._limit(ledger)
        if not low <= entry <= limit:
            raise InvalidPositionError(
                f"position {ledger}:{entry} is outside ledger {ledger}: allowed entries {low}..{limit}"
                + (" (the ledger is sealed)" if limit != MAX_ENTRY else "")
            )

    def _ledger_for_write(self, ledger: int) -> LedgerAcks:
        la = self._ledgers.get(ledger)
        if la is None:
            la = self._ledgers[ledger] = LedgerAcks()
        return la

    # -- acks ---------------------------------------------------------------------------------

    def ack(self, positions: Iterable[Position] | Position) -> None:
        """Acknowledge positions individually. All are checked first: one bad position acks none.

        Takes any iterable of ``Position`` (or ``(ledger, entry)`` tuples), or one Position.
        Positions at or below the mark-delete position are already acknowledged and ignored.
        O(1) for one position; O(k) in C plus O(containers) per ledger touched for k positions.
        For millions of entries of one ledger, :meth:`ack_entries` skips the Python objects.
        """
        store = self._store
        if store._closed or store.readonly:
            self._alive()
        if type(positions) is Position:
            with self._lock:
                self._ack_one(positions)
            return
        with self._lock:
            self._alive()
            if isinstance(positions, tuple) and len(positions) == 2 and type(positions[0]) is int:
                positions = (positions,)  # type: ignore[assignment]
            try:
                items = positions if isinstance(positions, (list, tuple)) else list(positions)
            except TypeError:
                raise InvalidTypeError(f"ack takes an iterable of Position, got {type(positions).__name__}") from None
            if not items:
                return
            if len(items) == 1:
                self._ack_one(items[0])
                return
            self._apply_groups(self._group(items))

    def ack_entries(self, ledger: int, entries: Iterable[int]) -> None:
        """Acknowledge many entries of one ledger: the columnar fast path of :meth:`ack`.

        ``entries`` may be a ``pyroaring.BitMap``, an ``array('I')``, a ``range`` or any
        iterable of ints; a BitMap or array is taken without touching Python ints.
        All are checked first; one bad entry acks none.
        """
        with self._lock:
            self._alive()
            limit = self._limit(ledger)
            try:
                bm = BitMap(entries)  # a copy: it is trimmed below M before use
            except (TypeError, OverflowError, ValueError):
                for entry in list(entries):
                    self._check_entry(ledger, entry)
                raise InvalidTypeError(f"entries of ledger {ledger} must be ints") from None  # pragma: no cover
            if bm and bm.max() > limit:
                self._check_entry(ledger, bm.max())
            self._apply_groups([(ledger, bm)])

    def _apply_groups(self, groups: list[tuple[int, BitMap]]) -> None:
        """Apply validated per-ledger bitmaps of acks. Lock held."""
        md_l, md_e = self._md
        for ledger, bm in groups:
            if ledger < md_l:
                continue
            if ledger == md_l and md_e >= 0:
                bm.remove_range(0, md_e + 1)
            if not bm:
                continue
            la = self._ledger_for_write(ledger)
            self._range_count += la.update(bm)
            self._dirty.add(ledger)
        la = self._ledgers.get(md_l)
        if la is not None and (md_e + 1) in la.bitmap:
            self._advance()

    def _ack_one(self, pos: Any) -> None:
        """One position: the hot path, kept to a handful of dict/bitmap operations. Lock held."""
        try:
            ledger, entry = pos
        except (TypeError, ValueError):
            raise InvalidTypeError(f"expected a Position(ledger, entry), got {pos!r}") from None
        if ledger == self._limit_ledger and self._limit_version == self._topic._version:
            limit = self._limit_value
        else:
            limit = self._limit(ledger)
            self._limit_ledger, self._limit_value, self._limit_version = ledger, limit, self._topic._version
        if type(entry) is not int or not 0 <= entry <= limit:
            self._check_entry(ledger, entry)
        md_l, md_e = self._md
        if ledger < md_l or (ledger == md_l and entry <= md_e):
            return
        la = self._ledgers.get(ledger)
        if la is None:
            la = self._ledgers[ledger] = LedgerAcks()
        bm = la.bitmap
        if entry in bm:
            return
        delta = 1 - ((entry - 1) in bm if entry else 0) - ((entry + 1) in bm)
        bm.add(entry)
        if la.batches:
            la.batches.pop(entry, None)
        la.runs += delta
        self._range_count += delta
        self._dirty.add(ledger)
        if ledger == md_l and entry == md_e + 1:
            self._advance()

    def _group(self, items: Iterable[Any]) -> list[tuple[int, BitMap]]:
        """Validate ``items`` and group their entries per ledger as bitmaps."""
        try:
            ledgers = set(map(_first, items))
            if len(ledgers) == 1:
                (ledger,) = ledgers
                per: dict[Any, Any] = {ledger: list(map(_second, items))}
            else:
                per = {}
                for ledger, entry in items:
                    lst = per.get(ledger)
                    if lst is None:
                        per[ledger] = [entry]
                    else:
                        lst.append(entry)
        except (TypeError, ValueError, IndexError):
            bad = next((p for p in items if not (isinstance(p, tuple) and len(p) == 2)), items)
            raise InvalidTypeError(f"expected Position(ledger, entry) items, got {bad!r}") from None
        out: list[tuple[int, BitMap]] = []
        for ledger, entries in per.items():
            limit = self._limit(ledger)
            try:
                bm = BitMap(entries)
            except (TypeError, OverflowError, ValueError):
                bm = None
            if bm is None:
                for entry in entries:
                    self._check_entry(ledger, entry)
                raise InvalidTypeError(f"entries of ledger {ledger} must be ints")  # pragma: no cover
            if bm.max() > limit:
                self._check_entry(ledger, bm.max())
            out.append((ledger, bm))
        return out

    def ack_cumulative(self, position: Position) -> None:
        """Acknowledge everything up to and including ``position`` (moves the mark-delete position)."""
        with self._lock:
            self._alive()
            try:
                ledger, entry = position
            except (TypeError, ValueError):
                raise InvalidTypeError(f"expected a Position(ledger, entry), got {position!r}") from None
            self._check_entry(ledger, entry, low=-1)
            if (ledger, entry) <= self._md:
                return
            for other in [x for x in self._ledgers if x < ledger]:
                self._vanish(other)
            la = self._ledgers.get(ledger)
            if la is not None:
                self._range_count += la.drop_through(entry)
                self._touched(ledger, la)
            self._set_md(_trusted(ledger, entry))
            self._advance()

    def ack_batch_index(self, position: Position, batch_size: int, indexes: Iterable[int]) -> None:
        """Acknowledge some messages of a batch entry. The entry is acked once all its indexes are."""
        with self._lock:
            self._alive()
            try:
                ledger, entry = position
            except (TypeError, ValueError):
                raise InvalidTypeError(f"expected a Position(ledger, entry), got {position!r}") from None
            self._check_entry(ledger, entry)
            if type(batch_size) is not int:
                raise InvalidTypeError(f"batch_size must be an int, got {batch_size!r}")
            if not 1 <= batch_size <= MAX_BATCH_SIZE:
                raise InvalidArgumentError(f"batch_size {batch_size} is not allowed: allowed 1..{MAX_BATCH_SIZE}")
            try:
                idx = list(indexes)
            except TypeError:
                raise InvalidTypeError(f"indexes must be an iterable of ints, got {indexes!r}") from None
            mask = 0
            for i in idx:
                if type(i) is not int:
                    raise InvalidTypeError(f"batch index must be an int, got {i!r}")
                if not 0 <= i < batch_size:
                    raise InvalidArgumentError(f"batch index {i} is outside the batch: allowed 0..{batch_size - 1}")
                mask |= 1 << i
            la = self._ledgers.get(ledger)
            old = la.batches.get(entry) if la is not None else None
            if old is not None and old[0] != batch_size:
                raise InvalidArgumentError(
                    f"batch_size {batch_size} does not match the {old[0]} already recorded for {ledger}:{entry}"
                )
            if not mask or (ledger, entry) <= self._md or (la is not None and entry in la.bitmap):
                return
            if old is not None:
                mask |= old[1]
            la = self._ledger_for_write(ledger)
            self._dirty.add(ledger)
            if mask == (1 << batch_size) - 1:
                self._range_count += la.add(entry)
                if (ledger, entry - 1) == self._md:
                    self._advance()
            else:
                la.batches[entry] = (batch_size, mask)

    # -- queries ------------------------------------------------------------------------------

    def is_acked(self, position: Position) -> bool:
        """True when the whole entry at ``position`` is acknowledged."""
        with self._lock:
            try:
                ledger, entry = position
            except (TypeError, ValueError):
                raise InvalidTypeError(f"expected a Position(ledger, entry), got {position!r}") from None
            if type(ledger) is not int or type(entry) is not int:
                raise InvalidTypeError(f"expected a Position(ledger, entry) of ints, got {position!r}")
            if (ledger, entry) <= self._md:
                return True
            la = self._ledgers.get(ledger)
            return la is not None and 0 <= entry <= MAX_ENTRY and entry in la.bitmap

    def batch_acked_indexes(self, position: Position) -> frozenset[int] | None:
        """Acked indexes of a partially acknowledged batch entry, or None if there is no partial batch."""
        with self._lock:
            la = self._ledgers.get(position[0])
            part = la.batches.get(position[1]) if la is not None else None
            if part is None:
                return None
            size, mask = part
            return frozenset(i for i in range(size) if mask >> i & 1)

    @property
    def mark_delete_position(self) -> Position:
        """Everything at or below this position is acknowledged."""
        return self._md

    @property
    def read_position(self) -> Position:
        """Where the next sequential read starts."""
        return self._rp

    @property
    def ack_range_count(self) -> int:
        """Number of contiguous acknowledged ranges above the mark-delete position. O(1)."""
        return self._range_count

    @property
    def config(self) -> CursorConfig:
        return self._config

    @property
    def topic(self) -> Topic:
        return self._topic

    def ack_ranges(self) -> Iterator[tuple[Position, Position]]:
        """Inclusive ``(first, last)`` acknowledged ranges above M, ascending. O(ranges)."""
        with self._lock:
            snapshot = [(ledger, self._ledgers[ledger].ranges()) for ledger in sorted(self._ledgers)]
        for ledger, ranges in snapshot:
            for first, last in ranges:
                yield _trusted(ledger, first), _trusted(ledger, last)

    def partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        """Every partially acknowledged batch entry: ``{position: (batch_size, acked indexes)}``."""
        with self._lock:
            return {
                _trusted(ledger, entry): (size, frozenset(i for i in range(size) if mask >> i & 1))
                for ledger, la in self._ledgers.items()
                for entry, (size, mask) in la.batches.items()
            }

    @property
    def properties(self) -> dict[str, int]:
        """Cursor properties persisted with each marker (a copy)."""
        return dict(self._properties)

    def set_property(self, key: str, value: int) -> None:
        """Set an integer property; persisted by the next flush."""
        if not isinstance(key, str) or not key:
            raise InvalidTypeError(f"property key must be a non-empty str, got {key!r}")
        if type(value) is not int or not -(1 << 63) <= value < (1 << 63):
            raise InvalidArgumentError(f"property {key!r} value must be a 64-bit int, got {value!r}")
        with self._lock:
            self._alive()
            self._properties[key] = value
            self._meta_dirty = True

    def stats(self) -> CursorStats:
        """A snapshot of this cursor's figures."""
        with self._lock:
            return CursorStats(
                topic=self._topic.name,
                name=self.name,
                mark_delete_position=self._md,
                read_position=self._rp,
                ack_range_count=self._range_count,
                acked_entries_above_mark_delete=sum(len(la.bitmap) for la in self._ledgers.values()),
                partial_batches=sum(len(la.batches) for la in self._ledgers.values()),
                ledgers_in_memory=len(self._ledgers),
                ledgers_indexed=len(self._index),
                dirty_ledgers=len(self._dirty),
                cache_bytes=sum(la.nbytes() for la in self._ledgers.values()),
                cache_budget=self._config.max_individual_ack_cache_bytes,
                flushes=self._flushes,
                last_flush_bytes=self._last_flush_bytes,
                total_flush_bytes=self._total_flush_bytes,
                last_marker_seq=self._marker_seq,
                deltas_since_full_marker=self._deltas,
                recovery=self._recovery,
            )

    @property
    def dirty(self) -> bool:
        """True when a flush would write something for this cursor."""
        return bool(self._dirty or self._vanished or self._meta_dirty)

    # -- flush (called by the store under its locks) -----------------------------------------

    def _alloc(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _capture(self) -> _Capture | None:
        """Serialize what changed since the last flush. Store lock held."""
        dirty, self._dirty = self._dirty, set()
        vanished, self._vanished = self._vanished, set()
        meta_dirty, self._meta_dirty = self._meta_dirty, False
        if not dirty and not meta_dirty and not any(v in self._index for v in vanished):
            return None
        cid = self.cursor_id
        puts: list[tuple[bytes, bytes]] = []
        changes: dict[int, IndexEntry | None] = {}
        for ledger in sorted(dirty):
            la = self._ledgers.get(ledger)
            if not la:
                continue
            seq = self._alloc()
            puts.append((log_key(cid, seq), encode_ledger(ledger, la)))
            changes[ledger] = IndexEntry(seq, la.runs)
        for ledger in vanished:
            if ledger not in changes and ledger in self._index:
                changes[ledger] = None
        cfg = self._config
        full = (
            self._force_full
            or self._marker_seq < 0
            or self._deltas >= cfg.full_marker_every
            or self._chain_bytes > max(self._full_bytes, 4096)
        )
        if full:
            index: dict[int, IndexEntry | None] = dict(self._index)
            for ledger, entry in changes.items():
                if entry is None:
                    index.pop(ledger, None)
                else:
                    index[ledger] = entry
        else:
            index = changes
        marker = Marker(
            full=full,
            prev=self._marker_seq,
            mark_delete=(self._md[0], self._md[1]),
            read_position=(self._rp[0], self._rp[1]),
            properties=dict(self._properties),
            index=index,
        )
        marker_seq = self._alloc()
        value = encode_marker(marker)
        puts.append((log_key(cid, marker_seq), value))
        gc_below = self._full_seq if full else -1
        return _Capture(
            self, puts, changes, full, marker_seq, len(value), gc_below, self._full_live, dirty, vanished, meta_dirty
        )

    def _commit(self, cap: _Capture) -> None:
        """The flush transaction committed: adopt its index. Store lock held."""
        for ledger, entry in cap.changes.items():
            if entry is None:
                self._index.pop(ledger, None)
            else:
                self._index[ledger] = entry
        self._marker_seq = cap.marker_seq
        if cap.full:
            self._full_seq = cap.marker_seq
            self._full_live = frozenset({e.seq for e in self._index.values()} | {cap.marker_seq})
            self._deltas = 0
            self._chain_bytes = 0
            self._full_bytes = cap.marker_bytes
            self._force_full = False
        else:
            self._deltas += 1
            self._chain_bytes += cap.marker_bytes
        written = sum(len(k) + len(v) for k, v in cap.puts)
        self._flushes += 1
        self._last_flush_bytes = written
        self._total_flush_bytes += written

    def _abort(self, cap: _Capture) -> None:
        """The flush transaction failed: everything it carried is dirty again. Store lock held."""
        self._dirty |= {ledger for ledger in cap.dirty if ledger in self._ledgers}
        self._vanished |= cap.vanished
        self._meta_dirty = self._meta_dirty or cap.meta_dirty

    # -- invariants ---------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (tests call this after each step)."""
        with self._lock:
            d = self._topic._directory
            md_l, md_e = self._md
            assert self._rp >= (md_l, md_e + 1), (self._rp, self._md)
            if len(d):
                assert md_l in d, f"mark-delete ledger {md_l} not in directory"
                count = d.count(md_l)
                assert count < 0 or md_e <= count - 1
                assert not (count >= 0 and md_e == count - 1 and d.next_after(md_l) is not None), "M not normalized"
            total = 0
            for ledger, la in self._ledgers.items():
                assert la, f"empty LedgerAcks kept for ledger {ledger}"
                assert ledger >= md_l and ledger in d, ledger
                assert la.runs == count_runs(la.bitmap), ledger
                total += la.runs
                entries = list(la.batches)
                if la.bitmap:
                    entries += [la.bitmap.min(), la.bitmap.max()]
                lowest, highest = min(entries), max(entries)
                if ledger == md_l:
                    assert lowest > md_e, (ledger, lowest, md_e)
                    assert (md_e + 1) not in la.bitmap, "M not advanced"
                count = d.count(ledger)
                assert count < 0 or highest < count
                for entry, (size, mask) in la.batches.items():
                    assert entry not in la.bitmap
                    assert 0 < mask < (1 << size) - 1, (entry, size, mask)
            assert total == self._range_count, (total, self._range_count)
            for ledger in self._dirty:
                assert ledger in self._ledgers


def _describe(d: LedgerDirectory) -> str:
    if not len(d):
        return "none yet (add one with topic.add_ledger)"
    if len(d) <= 6:
        return ", ".join(str(x) for x in d.ids)
    return f"{d.ids[0]}..{d.ids[-1]} ({len(d)} ledgers)"
