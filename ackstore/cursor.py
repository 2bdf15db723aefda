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

import logging
import threading
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, replace
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, overload

from pyroaring import BitMap

from .config import CursorConfig
from .dispatch.revision import CursorStateRevisionController
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
from .ledger_cache import ACK_CHARGE, LedgerCache
from .position import MAX_ENTRY, Position, _trusted
from .stats import CursorStats, LogUsage, RecoveryReport
from .storage.log import CursorLog, MissingRecordError, RecoveredState
from .storage.records import IndexEntry, Marker, encode_ledger, encode_marker, log_key

if TYPE_CHECKING:
    from .directory import LedgerDirectory
    from .store import Topic

__all__ = ["Cursor", "MAX_BATCH_SIZE"]

#: The largest batch a batch-index ack accepts.
MAX_BATCH_SIZE = 1 << 16
#: The longest property key, in UTF-8 bytes.
MAX_PROPERTY_KEY_BYTES = 1024

log = logging.getLogger("ackstore")

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
    gc_live: frozenset[int]  # what the previous full marker references
    full_live: frozenset[int]  # what this marker references, if full
    dirty: set[int]
    vanished: set[int]
    unmarked: set[int]
    pinned: set[int]
    meta_dirty: bool
    truncated: bool = False  # PIP-299: only the lowest ranges were persisted
    persisted_ranges: int = 0
    keep_dirty: frozenset[int] = frozenset()  # ledgers not (wholly) in this marker: still to persist


class Cursor:
    """One subscription's ack state over a topic. Get one with ``topic.cursor(name)``."""

    def __init__(self, topic: Topic, name: str, cursor_id: int, config: CursorConfig, state: RecoveredState) -> None:
        self._topic = topic
        self._store = topic._store
        self._storage = topic._store.storage
        self._log = CursorLog(self._storage.log_db, cursor_id)
        self._lock: threading.RLock = topic._store._lock
        self.name = name
        self.cursor_id = cursor_id
        self._config = config
        #: PIP-269: one controller per cursor, shared by every component that reads it
        self.revision_controller = CursorStateRevisionController()
        self._flushes = 0
        self._last_flush_bytes = 0
        self._total_flush_bytes = 0
        self._adopt(state)

    def _adopt(self, state: RecoveredState) -> None:
        """Start from a recovered state (at open; a read-only store also when it refreshes)."""
        topic = self._topic
        self._cache = LedgerCache(self._config.max_individual_ack_cache_bytes, topic._store._pool)
        for ledger, la in state.ledgers.items():
            self._cache.add(ledger, la)
        self._cache.swapped = set(state.swapped)
        self._dirty: set[int] = set()
        self._vanished: set[int] = set()
        self._unmarked: set[int] = set()  # written back by eviction, not yet in a marker
        self._pinned: set[int] = set()  # carried by a flush in flight: not evictable
        self._meta_dirty = False
        self._next_seq = state.next_seq
        self._recovery: RecoveryReport = state.report
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
            self._truncated = False
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
            self._truncated = m.truncated
            # after falling back past a broken marker, start a fresh chain
            self._force_full = state.report.markers_skipped > 0
        self._range_count = sum(la.runs for la in self._cache.loaded.values()) + sum(
            self._index[ledger].runs for ledger in self._cache.swapped
        )
        self._persisted_ranges = self._range_count
        self._limit_ledger, self._limit_value, self._limit_version = -1, -1, -1  # one-entry cache of _limit
        self._reconcile(d)

    # -- reconciliation with the ledger directory ---------------------------------------------

    def _reconcile(self, d: LedgerDirectory) -> None:
        """Fit recovered state to the current directory (ledgers trimmed or sealed since)."""
        for ledger in self._cache.known():
            if ledger not in d:
                self._vanish(ledger)
        for ledger, la in list(self._cache.loaded.items()):
            self._clip(ledger, la, d)
        first = d.first()
        if first is not None and self._md[0] < first:
            self._set_md(_trusted(first, -1))
        md_l, md_e = self._md
        i = d.index(md_l)
        if i >= 0 and 0 <= d.counts[i] <= md_e:  # persisted past an end sealed since: clip to it
            md_e = d.counts[i] - 1
            self._md = _trusted(md_l, md_e)
            self._rp = self._md.next()
            self._meta_dirty = True
        for ledger in [x for x in self._cache.known() if x < md_l]:
            self._vanish(ledger)
        md_acks = self._get(md_l)
        if md_acks is not None and (md_acks.bitmap.min() if md_acks.bitmap else min(md_acks.batches)) <= md_e:
            self._range_count += md_acks.drop_through(md_e)
            self._touched(md_l, md_acks)
        self._advance()

    def _clip(self, ledger: int, la: LedgerAcks, d: LedgerDirectory) -> None:
        """Drop acks beyond a sealed ledger's end (state persisted before it was sealed)."""
        count = d.count(ledger)
        if count >= 0 and ((la.bitmap and la.bitmap.max() >= count) or any(e >= count for e in la.batches)):
            self._range_count += la.drop_from(count)
            self._touched(ledger, la)

    def _on_directory_change(self, d: LedgerDirectory) -> None:
        first = d.first()
        if first is not None and self._md[0] < first:
            self._set_md(_trusted(first, -1))
        self._advance()

    def _check_close(self, ledger: int, entries: int) -> None:
        la = self._peek(ledger)  # a look, not a use: it need not enter the cache
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
        """Forget a ledger's ack state (it fell below M or out of the directory)."""
        cache = self._cache
        la = cache.remove(ledger)
        if la is not None:
            self._range_count -= la.runs
        elif ledger in cache.swapped:
            cache.swapped.discard(ledger)
            self._range_count -= self._index[ledger].runs
        self._dirty.discard(ledger)
        self._unmarked.discard(ledger)  # a written-back record of it must not re-enter the next marker
        self._vanished.add(ledger)

    def _touched(self, ledger: int, la: LedgerAcks) -> None:
        if la:
            self._dirty.add(ledger)
            self._cache.measure(la)
        else:
            self._vanish(ledger)

    @overload
    def _get(self, ledger: int, create: Literal[True]) -> LedgerAcks: ...
    @overload
    def _get(self, ledger: int, create: bool = False) -> LedgerAcks | None: ...
    def _get(self, ledger: int, create: bool = False) -> LedgerAcks | None:
        """The loaded ack state of ``ledger``: swapped in if needed, created if asked. O(1) + swap-in."""
        cache = self._cache
        la = cache.loaded.get(ledger)
        if la is not None:
            cache.loaded.move_to_end(ledger)
            return la
        if ledger in cache.swapped:
            la = self._swap_in(ledger)
            if la is not None or not create:
                return la
            cache = self._cache
        if create:
            la = LedgerAcks()
            cache.add(ledger, la)
            return la
        return None

    def _read_record(self, ledger: int) -> LedgerAcks | None:
        """Read a swapped-out ledger's record. Lock held.

        A read-only store whose writer trimmed the record since this cursor's marker was
        read refreshes to the newest flushed state and reads again (None: the ledger has
        no acks there any more); only a record missing from that state too is an error.
        """
        store = self._store
        try:
            return self._fetch(ledger)
        except MissingRecordError:
            if not store.readonly:
                raise
        for _ in range(3):
            state = self._storage.read(partial(self._log.recover, budget=self._cache.budget, verify=store._verify))
            self._cache.clear()
            self._adopt(state)
            if ledger in self._cache.loaded:
                return self._cache.loaded[ledger]
            if ledger not in self._cache.swapped:
                return None
            try:
                return self._fetch(ledger)
            except MissingRecordError:
                continue
        raise MissingRecordError(f"ledger {ledger}'s record of cursor {self.name!r} keeps vanishing under this reader")

    def _fetch(self, ledger: int) -> LedgerAcks:
        entry = self._index[ledger]
        return self._storage.read(lambda txn: self._log.read_ledger(txn, ledger, entry))

    def _swap_in(self, ledger: int) -> LedgerAcks | None:
        """Load a swapped-out ledger whole, evicting least recently used ones to make room."""
        la = self._read_record(ledger)
        if la is None or ledger in self._cache.loaded:  # a read-only refresh settled it
            return la
        cache = self._cache
        self._fit(incoming=la.nbytes(), keep=(ledger,))
        cache.swapped.discard(ledger)
        cache.add(ledger, la)
        cache.swap_ins += 1
        self._clip(ledger, la, self._topic._directory)
        return la

    def _fit(self, incoming: int = 0, keep: Iterable[int] = (), budget: int | None = None) -> None:
        """Evict least recently used ledgers until ``incoming`` more bytes fit the budget.

        Dirty victims are written back first, all in one transaction, and the next
        marker references their records. A ledger in ``keep`` or in a flush in flight
        stays. Then, if the store-wide budget is exceeded, the store evicts from its
        largest caches. Lock held.
        """
        self._fit_own(incoming, keep, budget)
        pool = self._cache.pool
        if budget is None and pool.total + incoming > pool.budget:
            self._store._fit_pool(self, incoming, keep)

    def _fit_own(self, incoming: int, keep: Iterable[int], budget: int | None) -> None:
        cache = self._cache
        limit = cache.budget if budget is None else budget
        if cache.nbytes + incoming <= limit:
            return
        cache.measure_all()
        victims = cache.victims(incoming, set(keep) | self._pinned, limit)
        if not victims:
            return
        back = [v for v in victims if v in self._dirty or v not in self._index]
        if back:
            try:
                self._write_back(back)
            except Exception:  # keep them in memory: over budget beats losing acks
                log.exception("ackstore: write-back of %d ledgers of cursor %s failed", len(back), self.name)
                victims = [v for v in victims if v not in set(back)]
        for ledger in victims:
            cache.remove(ledger)
            cache.swapped.add(ledger)
            cache.evictions += 1

    def _write_back(self, ledgers: list[int]) -> None:
        """Write the records of dirty ledgers about to be evicted, in one transaction."""
        loaded = self._cache.loaded
        staged = [(ledger, self._alloc(), loaded[ledger]) for ledger in ledgers]
        puts = [(log_key(self.cursor_id, seq), encode_ledger(ledger, la, self.cursor_id)) for ledger, seq, la in staged]

        def write(txn: Any) -> None:
            for key, value in puts:
                txn.put(key, value, db=self._storage.log_db)

        self._storage.write(write)
        for ledger, seq, la in staged:
            self._index[ledger] = IndexEntry(seq, la.runs)
            self._unmarked.add(ledger)
            self._dirty.discard(ledger)
        self._cache.write_backs += len(staged)

    def _advance(self) -> None:
        """Move M over contiguous acks and across fully acked sealed ledgers."""
        d = self._topic._directory
        ledger, entry = self._md
        moved = False
        while True:
            la = self._get(ledger)
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
                if ledger in self._cache:
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
        if type(positions) is Position:  # the hot path: acquire/release is half the cost of `with` here
            lock = self._lock
            lock.acquire()
            try:
                self._ack_one(positions[0], positions[1])
            finally:
                lock.release()
            return
        with self._lock:
            if isinstance(positions, tuple) and len(positions) == 2 and type(positions[0]) is int:
                positions = (positions,)  # type: ignore[assignment]
            try:
                items = positions if isinstance(positions, (list, tuple)) else list(positions)
            except TypeError:
                raise InvalidTypeError(f"ack takes an iterable of Position, got {type(positions).__name__}") from None
            if not items:
                return
            if len(items) == 1:
                ledger, entry = _pair(items[0])
                self._ack_one(ledger, entry)
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
            if not (isinstance(entries, (BitMap, range, array)) or _int_dtype(entries)):
                try:
                    entries = list(entries)
                except TypeError:
                    raise InvalidTypeError(f"entries must be an iterable of ints, got {entries!r}") from None
                if not set(map(type, entries)) <= {int}:
                    bad = next(e for e in entries if type(e) is not int)
                    raise InvalidTypeError(f"entry must be an int, got {bad!r} ({type(bad).__name__})")
            elif isinstance(entries, array) and entries.typecode in "fd":
                raise InvalidTypeError(f"entries must be ints, got an array of typecode {entries.typecode!r}")
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
        advance = False
        for ledger, bm in groups:
            if ledger < md_l:
                continue
            if ledger == md_l:
                if md_e >= 0:
                    bm.remove_range(0, md_e + 1)
                advance = (md_e + 1) in bm
            if not bm:
                continue
            la = self._get(ledger, create=True)
            self._range_count += la.update(bm)
            self._touched(ledger, la)
            self._fit(keep=(ledger,))
        if advance:
            self._advance()

    def _ack_one(self, ledger: Any, entry: Any) -> None:
        """One position: the hot path, kept to a handful of dict/bitmap operations. Lock held."""
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
        cache = self._cache
        la = cache.loaded.get(ledger)
        if la is None:
            la = self._get(ledger, create=True)
        else:
            cache.loaded.move_to_end(ledger)
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
        la.size += ACK_CHARGE
        cache.nbytes += ACK_CHARGE
        pool = cache.pool
        pool.total += ACK_CHARGE
        if cache.nbytes > cache.budget or pool.total > pool.budget:
            self._fit(keep=(ledger,))
        if ledger == md_l and entry == md_e + 1:
            self._advance()

    def _group(self, items: list[Any] | tuple[Any, ...]) -> list[tuple[int, BitMap]]:
        """Validate ``items`` and group their entries per ledger as bitmaps."""
        if set(map(type, items)) != {Position}:  # Positions are checked when made; anything else here
            for item in items:
                if type(item) is not Position:
                    _pair(item)
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
            d = self._topic._directory
            cache = self._cache
            for other in d.ids[max(d.index(self._md[0]), 0) : max(d.index(ledger), 0)]:
                if other in cache:
                    self._vanish(other)
            la = self._get(ledger)
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
            la = self._get(ledger) if (ledger, entry) > self._md else None
            old = la.batches.get(entry) if la is not None else None
            if old is not None and old[0] != batch_size:
                raise InvalidArgumentError(
                    f"batch_size {batch_size} does not match the {old[0]} already recorded for {ledger}:{entry}"
                )
            if not mask or (ledger, entry) <= self._md or (la is not None and entry in la.bitmap):
                return
            if old is not None:
                mask |= old[1]
            la = self._get(ledger, create=True)
            if mask == (1 << batch_size) - 1:
                self._range_count += la.add(entry)
            else:
                la.batches[entry] = (batch_size, mask)
            self._touched(ledger, la)
            self._fit(keep=(ledger,))
            if (ledger, entry - 1) == self._md and entry in la.bitmap:
                self._advance()

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
            self._open()
            la = self._get(ledger)
            return la is not None and 0 <= entry <= MAX_ENTRY and entry in la.bitmap

    def batch_acked_indexes(self, position: Position) -> frozenset[int] | None:
        """Acked indexes of a partially acknowledged batch entry, or None if there is no partial batch."""
        ledger, entry = _pair(position)
        with self._lock:
            self._open()
            la = self._get(ledger) if (ledger, entry) > self._md else None
            part = la.batches.get(entry) if la is not None else None
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
        """This cursor's settings (persisted with it)."""
        return self._config

    def update_config(self, **changes: Any) -> CursorConfig:
        """Change settings at run time, e.g. ``update_config(max_unacked_ranges_to_persist=0)``.

        Validated, then persisted at once (durable when this returns); returns the new config.
        """
        with self._lock:
            self._alive()
            try:
                new = replace(self._config, **changes)
            except TypeError:
                raise InvalidArgumentError(
                    f"unknown CursorConfig fields {sorted(changes)}: allowed {[f.name for f in fields(CursorConfig)]}"
                ) from None
            self._store._put_cursor(self._topic.topic_id, self.name, self.cursor_id, new)
            self._apply_config(new)
            return new

    def _apply_config(self, config: CursorConfig) -> None:
        """Adopt ``config`` in memory (the budget may shrink: evict to fit). Lock held."""
        self._config = config
        self._cache.budget = config.max_individual_ack_cache_bytes
        self._fit()

    @property
    def is_blocked_on_ack_state_persistent(self) -> bool:
        """PIP-299: True while pausing is on and the ranges exceed what a flush can persist.

        Computed only when ``dispatcher_pause_on_ack_state_persistent`` is on; O(1).
        It clears as soon as acks, skips, seeks or resets bring the range count back to
        the limit, or the setting is turned off.
        """
        cfg = self._config
        if not cfg.dispatcher_pause_on_ack_state_persistent:
            return False
        limit = cfg.max_unacked_ranges_to_persist
        return limit > 0 and self._range_count > limit

    @property
    def topic(self) -> Topic:
        return self._topic

    def ack_ranges(self) -> Iterator[tuple[Position, Position]]:
        """Inclusive ``(first, last)`` acknowledged ranges above M, ascending. O(ranges).

        Ledger by ledger: each ledger's ranges are read under the lock, swapped-out ones
        straight from their record without entering the cache (a scan must not flush the
        LRU); acks made while the iterator runs show up in ledgers it has not reached yet.
        """
        for ledger, ranges in self.ledger_ranges():
            for first, last in ranges:
                yield _trusted(ledger, first), _trusted(ledger, last)

    def ledger_ranges(self) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """``(ledger, [(first, last), ...])`` for every ledger with acks above M, ascending:
        the ranges of :meth:`ack_ranges` as plain ints, without a Position per bound (the
        bulk form for audits and exports). Same locking and swap rules. O(ranges), in C."""
        with self._lock:
            self._open()
            ledgers = sorted(self._cache.known())
        for ledger in ledgers:
            with self._lock:
                la = self._peek(ledger)
                ranges = la.ranges() if la is not None else []
            if ranges:
                yield ledger, ranges

    def partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        """Every partially acknowledged batch entry: ``{position: (batch_size, acked indexes)}``."""
        out: dict[Position, tuple[int, frozenset[int]]] = {}
        with self._lock:
            self._open()
            for ledger in sorted(self._cache.known()):
                la = self._peek(ledger)
                for entry, (size, mask) in sorted(la.batches.items()) if la is not None else ():
                    out[_trusted(ledger, entry)] = (size, frozenset(i for i in range(size) if mask >> i & 1))
        return out

    def _peek(self, ledger: int) -> LedgerAcks | None:
        """A ledger's state for reading only: the loaded one, or its record (not cached). Lock held."""
        la = self._cache.loaded.get(ledger)
        if la is not None or ledger not in self._cache.swapped:
            return la
        return self._read_record(ledger)

    def _open(self) -> None:
        if self._store._closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")

    @property
    def properties(self) -> dict[str, int]:
        """Cursor properties persisted with each marker (a copy)."""
        return dict(self._properties)

    def set_property(self, key: str, value: int) -> None:
        """Set an integer property; persisted by the next flush."""
        if not isinstance(key, str) or not key:
            raise InvalidTypeError(f"property key must be a non-empty str, got {key!r}")
        try:
            size = len(key.encode())
        except UnicodeEncodeError:
            size = -1
        if not 1 <= size <= MAX_PROPERTY_KEY_BYTES:
            raise InvalidArgumentError(
                f"property key {key!r} is not allowed: allowed 1..{MAX_PROPERTY_KEY_BYTES} UTF-8 bytes "
                "(valid Unicode, no lone surrogates)"
            )
        if type(value) is not int or not -(1 << 63) <= value < (1 << 63):
            raise InvalidArgumentError(f"property {key!r} value must be a 64-bit int, got {value!r}")
        with self._lock:
            self._alive()
            self._properties[key] = value
            self._meta_dirty = True

    def stats(self) -> CursorStats:
        """A snapshot of this cursor's figures (cache sizes measured exactly)."""
        with self._lock:
            cache = self._cache
            cache.measure_all()
            sizes = [la.size for la in cache.loaded.values()]
            return CursorStats(
                topic=self._topic.name,
                name=self.name,
                mark_delete_position=self._md,
                read_position=self._rp,
                ack_range_count=self._range_count,
                ledgers_in_memory=len(cache.loaded),
                ledgers_swapped_out=len(cache.swapped),
                ledgers_indexed=len(self._index),
                dirty_ledgers=len(self._dirty),
                cache_bytes=cache.nbytes,
                cache_budget=cache.budget,
                largest_ledger_bytes=max(sizes, default=0),
                over_budget=cache.nbytes > cache.budget,
                swap_ins=cache.swap_ins,
                evictions=cache.evictions,
                write_backs=cache.write_backs,
                flushes=self._flushes,
                last_flush_bytes=self._last_flush_bytes,
                total_flush_bytes=self._total_flush_bytes,
                last_marker_seq=self._marker_seq,
                deltas_since_full_marker=self._deltas,
                truncated=self._truncated,
                persisted_ranges=self._persisted_ranges,
                ranges_over_limit=max(0, self._range_count - self._config.max_unacked_ranges_to_persist)
                if self._config.max_unacked_ranges_to_persist
                else 0,
                recovery=self._recovery,
                revision_num=self.revision_controller.revision_num,
                revisions_done=self.revision_controller.revisions_done,
                revision_running=self.revision_controller.revision_running,
            )

    def log_usage(self) -> LogUsage:
        """Records and bytes this cursor has in the log, as of its newest marker. O(records).

        ``live_bytes`` is what recovery reads (with an unlimited budget) and what a
        compaction keeps; ``garbage_bytes`` is what it deletes. Unflushed changes are not
        counted."""
        with self._lock:
            self._open()
            seq = self._marker_seq
        return self._storage.read(lambda txn: self._log.usage(txn, seq))

    @property
    def dirty(self) -> bool:
        """True when a flush would write something for this cursor."""
        return bool(self._dirty or self._vanished or self._meta_dirty)

    # -- flush (called by the store under its locks) -----------------------------------------

    def _alloc(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    # -- position resets and reads (driven by a dispatcher through the revision controller) ---

    def _reset_to(self, position: Position) -> None:
        """A position reset: everything before ``position`` is acked, nothing from it on,
        and reads start there. The mark-delete position may move backwards. Lock taken."""
        with self._lock:
            self._alive()
            ledger, entry = self._check_reset_target(position)
            for known in list(self._cache.known()):
                self._vanish(known)
            self._md = _trusted(ledger, entry - 1)
            self._rp = _trusted(ledger, entry)
            self._meta_dirty = True
            self._advance()

    def _check_reset_target(self, position: Any) -> tuple[int, int]:
        """Raise a typed error unless ``position`` is a place a reset may move to."""
        if not isinstance(position, tuple) or len(position) != 2:
            raise InvalidTypeError(f"reset position must be a Position, got {position!r}")
        ledger, entry = position
        self._check_entry(ledger, entry)
        return ledger, entry

    def _move_read_position(self, position: Position) -> None:
        """A sequential read moved past ``position``'s predecessor (never backwards)."""
        with self._lock:
            if position > self._rp:
                self._rp = position
                self._meta_dirty = True

    def _rewind(self) -> None:
        """Read again from the first unacked position."""
        with self._lock:
            self._rp = self._md.next()
            self._meta_dirty = True

    def restore_read_position(self, position: Position) -> None:
        """Set the read position exactly (what ``ackstore restore`` does with a dump's).

        Not for cursor processes: their reads move it (and resets, seeks and rewinds go
        through a Dispatcher). ``position`` may not lie below ``mark_delete_position + 1``.
        """
        ledger, entry = _pair(position)
        with self._lock:
            self._alive()
            if (ledger, entry) < self._md.next():
                raise InvalidArgumentError(f"read position {ledger}:{entry} is below the mark-delete {self._md}")
            self._rp = _trusted(ledger, entry)
            self._meta_dirty = True

    def _rewrite_plan(self) -> tuple[int, list[tuple[int, int, bytes | int]], bytes]:
        """Plan a fresh log (every ledger's record + one full marker) for compaction. Lock held.

        Returns the first new sequence, ``[(ledger, runs, record bytes or old sequence)]``
        (swapped-out ledgers are copied from their record, not decoded) and the marker.
        """
        cache = self._cache
        start = self._next_seq
        items: list[tuple[int, int, bytes | int]] = []
        for ledger in sorted(cache.known()):
            la = cache.loaded.get(ledger)
            if la is not None:
                items.append((ledger, la.runs, encode_ledger(ledger, la, self.cursor_id)))
                cache.measure(la)
            else:
                items.append((ledger, self._index[ledger].runs, self._index[ledger].seq))
        index = {ledger: IndexEntry(start + i, runs) for i, (ledger, runs, _) in enumerate(items)}
        marker = Marker(
            full=True,
            prev=-1,
            mark_delete=(self._md[0], self._md[1]),
            read_position=(self._rp[0], self._rp[1]),
            properties=dict(self._properties),
            index=dict(index),
            extra={"c": self.cursor_id},
        )
        self._next_seq = start + len(items) + 1
        return start, items, encode_marker(marker)

    def _differs_from(self, state: RecoveredState, marker_seq: int) -> str | None:
        """How ``state`` (recovered with every record loaded) differs from this cursor's
        state, or None when it is the same. Lock held."""
        resolved = state.resolved
        if resolved is None or resolved.seq != marker_seq:
            return f"recovery found marker {None if resolved is None else resolved.seq}, not {marker_seq}"
        m = resolved.marker
        if (tuple(m.mark_delete), tuple(m.read_position)) != (tuple(self._md), tuple(self._rp)):
            return f"positions {m.mark_delete}/{m.read_position}, not {self._md}/{self._rp}"
        if m.properties != self._properties:
            return "the properties differ"
        if set(state.ledgers) != self._cache.known():
            return f"ledgers {sorted(state.ledgers)[:8]}, not {sorted(self._cache.known())[:8]}"
        for ledger, la in state.ledgers.items():
            mine = self._cache.loaded.get(ledger)
            if mine is None:
                if la.runs != self._index[ledger].runs:
                    return f"ledger {ledger} has {la.runs} ranges, not {self._index[ledger].runs}"
            elif mine.bitmap != la.bitmap or mine.batches != la.batches:
                return f"ledger {ledger}'s acks differ"
        return None

    def _adopt_rewrite(self, start: int, items: list[tuple[int, int, bytes | int]], marker_bytes: int) -> None:
        """The compaction transaction committed: the log is now exactly the planned one."""
        self._index = {ledger: IndexEntry(start + i, runs) for i, (ledger, runs, _) in enumerate(items)}
        self._marker_seq = self._full_seq = start + len(items)
        self._full_live = frozenset(e.seq for e in self._index.values()) | {self._marker_seq}
        self._deltas = self._chain_bytes = 0
        self._full_bytes = marker_bytes
        self._force_full = False
        self._dirty.clear()
        self._vanished.clear()
        self._unmarked.clear()
        self._meta_dirty = False

    def _capture(self) -> _Capture | None:
        """Serialize what changed since the last marker. Store lock held.

        Exception-safe: if encoding fails, everything taken from the pending sets is put
        back before the exception leaves, so the cursor is exactly as dirty as before.
        """
        dirty, self._dirty = self._dirty, set()
        vanished, self._vanished = self._vanished, set()
        unmarked, self._unmarked = self._unmarked, set()
        meta_dirty, self._meta_dirty = self._meta_dirty, False
        if not dirty and not meta_dirty and not unmarked and not any(v in self._index for v in vanished):
            return None
        try:
            return self._capture_pending(dirty, vanished, unmarked, meta_dirty)
        except BaseException:
            self._dirty |= dirty
            self._vanished |= vanished
            self._unmarked |= unmarked
            self._meta_dirty = self._meta_dirty or meta_dirty
            raise

    def _capture_pending(self, dirty: set[int], vanished: set[int], unmarked: set[int], meta_dirty: bool) -> _Capture:
        limit = self._config.max_unacked_ranges_to_persist
        if limit and self._range_count > limit:
            return self._capture_truncated(dirty, vanished, unmarked, meta_dirty, limit)
        cid = self.cursor_id
        loaded = self._cache.loaded
        puts: list[tuple[bytes, bytes]] = []
        changes: dict[int, IndexEntry | None] = {}
        for ledger in sorted(dirty):
            la = loaded.get(ledger)
            if not la:
                continue
            seq = self._alloc()
            puts.append((log_key(cid, seq), encode_ledger(ledger, la, cid)))
            self._cache.measure(la)  # encoding run-optimizes the bitmap, which can change its size
            changes[ledger] = IndexEntry(seq, la.runs)
        for ledger in unmarked:  # written back by eviction since the last marker
            if ledger not in changes and ledger in self._index:
                changes[ledger] = self._index[ledger]
        for ledger in vanished:
            if ledger not in changes and ledger in self._index and ledger not in self._cache:
                changes[ledger] = None
        cfg = self._config
        full = (
            self._force_full
            or self._truncated
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
            live = frozenset(e.seq for e in index.values() if e is not None)
        else:
            index = changes
            live = frozenset()
        pinned = {ledger for ledger, entry in changes.items() if entry is not None and ledger in dirty}
        return self._seal(
            puts, changes, index, full, live, (dirty, vanished, unmarked, meta_dirty), pinned, self._range_count
        )

    def _seal(
        self,
        puts: list[tuple[bytes, bytes]],
        changes: dict[int, IndexEntry | None],
        index: dict[int, IndexEntry | None],
        full: bool,
        live: frozenset[int],
        pending: tuple[set[int], set[int], set[int], bool],
        pinned: set[int],
        persisted_ranges: int,
        truncated: bool = False,
        keep_dirty: frozenset[int] = frozenset(),
    ) -> _Capture:
        """Append the marker to a capture's records and pin what it carries. Lock held."""
        marker = Marker(
            full=full,
            prev=self._marker_seq,
            mark_delete=(self._md[0], self._md[1]),
            read_position=(self._rp[0], self._rp[1]),
            properties=dict(self._properties),
            index=index,
            truncated=truncated,
            extra={"c": self.cursor_id},
        )
        marker_seq = self._alloc()
        value = encode_marker(marker)
        puts.append((log_key(self.cursor_id, marker_seq), value))
        self._pinned |= pinned
        dirty, vanished, unmarked, meta_dirty = pending
        return _Capture(
            self,
            puts,
            changes,
            full,
            marker_seq,
            len(value),
            self._full_seq if full else -1,
            self._gc_live() if full else frozenset(),  # O(ledgers): only full markers trim garbage
            live | {marker_seq},
            dirty,
            vanished,
            unmarked,
            pinned,
            meta_dirty,
            truncated=truncated,
            persisted_ranges=persisted_ranges,
            keep_dirty=keep_dirty,
        )

    def _gc_live(self) -> frozenset[int]:
        """What garbage trimming must keep: the previous full marker's records and every record
        the cursor itself still points to (swapped-out ledgers a truncated marker left out)."""
        return self._full_live | {e.seq for e in self._index.values()}

    def _capture_truncated(
        self, dirty: set[int], vanished: set[int], unmarked: set[int], meta_dirty: bool, limit: int
    ) -> _Capture:
        """PIP-299: a full marker holding only the lowest ``limit`` ranges. Lock held.

        Ledgers wholly under the limit are persisted as usual; the ledger the limit cuts
        through gets a record of its lowest ranges only (its whole state stays in memory
        and dirty); ledgers above are left out of the marker. A crash loses what was left
        out: those messages are redelivered.
        """
        cid = self.cursor_id
        cache = self._cache
        puts: list[tuple[bytes, bytes]] = []
        changes: dict[int, IndexEntry | None] = {}
        index: dict[int, IndexEntry | None] = {}
        keep_dirty: set[int] = set()
        left = limit
        for ledger in sorted(cache.known()):
            la = cache.loaded.get(ledger)
            runs = la.runs if la is not None else self._index[ledger].runs
            if left <= 0:
                if ledger in dirty:
                    keep_dirty.add(ledger)
                continue
            if runs <= left:
                if ledger in dirty and la is not None:
                    seq = self._alloc()
                    puts.append((log_key(cid, seq), encode_ledger(ledger, la, cid)))
                    cache.measure(la)
                    changes[ledger] = index[ledger] = IndexEntry(seq, runs)
                else:
                    index[ledger] = self._index[ledger]
                left -= runs
                continue
            whole = self._peek(ledger)
            assert whole is not None
            cut = whole.ranges()[left - 1][1]
            part = LedgerAcks(BitMap(whole.bitmap), {e: b for e, b in whole.batches.items() if e < cut})
            part.drop_from(cut + 1)
            seq = self._alloc()
            puts.append((log_key(cid, seq), encode_ledger(ledger, part, cid)))
            index[ledger] = IndexEntry(seq, part.runs)
            if ledger in dirty:
                keep_dirty.add(ledger)
            left = 0
        for ledger in vanished:
            if ledger in self._index and ledger not in cache:
                changes[ledger] = None
        pinned = {ledger for ledger, entry in changes.items() if entry is not None}
        live = frozenset(e.seq for e in index.values() if e is not None)
        return self._seal(
            puts,
            changes,
            index,
            True,
            live,
            (dirty, vanished, unmarked, meta_dirty),
            pinned,
            limit,
            truncated=True,
            keep_dirty=frozenset(keep_dirty),
        )

    def _commit(self, cap: _Capture) -> None:
        """The flush transaction committed: adopt its index. Store lock held."""
        for ledger, entry in cap.changes.items():
            if entry is None:
                if ledger not in self._cache:  # not re-created since the capture
                    self._index.pop(ledger, None)
            elif ledger not in self._unmarked:  # a later write-back supersedes this record
                self._index[ledger] = entry
        self._pinned -= cap.pinned
        self._dirty |= {ledger for ledger in cap.keep_dirty if ledger in self._cache.loaded}
        self._truncated = cap.truncated
        self._persisted_ranges = cap.persisted_ranges
        self._marker_seq = cap.marker_seq
        if cap.full:
            self._full_seq = cap.marker_seq
            self._full_live = cap.full_live
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
        """The flush transaction failed: everything it carried is pending again. Store lock held."""
        self._pinned -= cap.pinned
        self._dirty |= {ledger for ledger in cap.dirty if ledger in self._cache.loaded}
        self._vanished |= cap.vanished
        self._unmarked |= {ledger for ledger in cap.unmarked if ledger in self._index}
        self._meta_dirty = self._meta_dirty or cap.meta_dirty

    # -- invariants ---------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (tests call this after each step)."""
        with self._lock:
            d = self._topic._directory
            cache = self._cache
            md_l, md_e = self._md
            assert self._rp >= (md_l, md_e + 1), (self._rp, self._md)
            if len(d):
                assert md_l in d, f"mark-delete ledger {md_l} not in directory"
                count = d.count(md_l)
                assert count < 0 or md_e <= count - 1
                assert not (count >= 0 and md_e == count - 1 and d.next_after(md_l) is not None), "M not normalized"
            assert not (set(cache.loaded) & cache.swapped)
            total = 0
            for ledger in cache.swapped:
                assert ledger in self._index and ledger >= md_l and ledger in d, ledger
                total += self._index[ledger].runs
            exact = 0
            for ledger, la in cache.loaded.items():
                assert la, f"empty LedgerAcks kept for ledger {ledger}"
                assert ledger >= md_l and ledger in d, ledger
                assert la.runs == count_runs(la.bitmap), ledger
                assert la.size >= la.nbytes(), (ledger, la.size, la.nbytes())
                exact += la.nbytes()
                total += la.runs
                if ledger not in self._dirty and ledger not in self._pinned:
                    assert ledger in self._index and self._index[ledger].runs == la.runs, ledger
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
            assert cache.nbytes >= exact, "the cache's running total undercounts"
            largest = max((la.nbytes() for la in cache.loaded.values()), default=0)
            assert exact <= cache.budget + largest, (exact, cache.budget, largest)
            for ledger in self._dirty:
                assert ledger in cache.loaded


def _int_dtype(obj: Any) -> bool:
    """True for a numpy-like array of integers (taken without a Python int per entry)."""
    return getattr(getattr(obj, "dtype", None), "kind", "") in ("i", "u")


def _pair(item: Any) -> tuple[int, int]:
    """``(ledger, entry)`` of a Position or a 2-tuple of ints; a typed error for anything else."""
    try:
        ledger, entry = item
    except (TypeError, ValueError):
        raise InvalidTypeError(f"expected a Position(ledger, entry), got {item!r}") from None
    if type(ledger) is not int or type(entry) is not int:
        raise InvalidTypeError(f"expected a Position(ledger, entry) of ints, got {item!r}")
    return ledger, entry


def _describe(d: LedgerDirectory) -> str:
    if not len(d):
        return "none yet (add one with topic.add_ledger)"
    if len(d) <= 6:
        return ", ".join(str(x) for x in d.ids)
    return f"{d.ids[0]}..{d.ids[-1]} ({len(d)} ledgers)"
