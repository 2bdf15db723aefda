"""A cursor's pages: its ledger ack sets in memory (the LRU budget, PIP-81) and on disk.

:class:`Pages` owns the cache of loaded ledgers, the marker index (``ledger -> newest
record``), and the sets that say what a flush owes: ``dirty`` (changed in memory),
``vanished`` (dropped: the next marker removes them), ``unmarked`` (written back by
eviction, not yet in a marker) and ``pinned`` (carried by a flush in flight: not
evictable). ``dirty`` is never rebound, so the ack state may hold it directly. The others
are usually empty, and then they are one shared empty frozenset: a flush asks every dirty
cursor whether they are empty, and a shared object is in the CPU's cache where thousands of
cursors' own sets would not be.

Swapping: a swapped-out ledger is loaded whole on first use (:meth:`get`), least recently
used ones are evicted to make room (:meth:`fit`), a dirty victim is written back first
(:meth:`write_back`, all victims in one transaction). The store-wide budget is a
:class:`~ackstore.ledger_cache.CachePool` every cursor's pages are registered in; it asks
the largest caches to give way, no call back into the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from pyroaring import BitMap

from ..ledger_acks import NO_ENTRIES, LedgerAcks, count_runs
from ..ledger_cache import CachePool, LedgerCache
from ..storage.log import CursorLog, MissingRecordError, RecoveredState
from ..storage.records import IndexEntry, encode_ledger

if TYPE_CHECKING:
    from collections import OrderedDict

    from ..directory import LedgerDirectory
    from ..storage.env import Environment

__all__ = ["Pages", "Pending"]

log = logging.getLogger("ackstore")


def _ignore(ledger: int, la: LedgerAcks) -> None:
    return None


_NONE: frozenset[int] = frozenset()


def _own(ledgers: Set[int]) -> set[int]:
    """A set to change: ``ledgers`` itself, or a new one in place of the shared empty one."""
    return ledgers if type(ledgers) is set else set(ledgers)


@dataclass(slots=True)
class Pending:
    """What a flush takes from a cursor's pages (and its ack state's ``meta_dirty``): the
    ledgers changed in memory, dropped, and written back by eviction since the last marker."""

    dirty: Collection[int]
    vanished: Set[int]
    unmarked: Set[int]
    meta_dirty: bool

    def worth_a_marker(self, index: dict[int, IndexEntry]) -> bool:
        """True when a marker must be written for it (a dropped ledger no marker named does not count)."""
        return bool(self.dirty or self.meta_dirty or self.unmarked or any(v in index for v in self.vanished))


class Pages:
    """Loaded and swapped-out ledgers of one cursor, its marker index and flush bookkeeping."""

    # slots: a flush reads these for every dirty cursor; one object, no separate dict to fetch (the pool
    # holds pages by weak reference)
    __slots__ = (
        "dirty",
        "unmarked",
        "vanished",
        "loaded",
        "swapped",
        "index",
        "pinned",
        "storage",
        "log",
        "name",
        "cache",
        "alloc",
        "on_load",
        "refresh",
        "generation",
        "forced",
        "__weakref__",
    )

    dirty: set[int]
    unmarked: Set[int]
    vanished: Set[int]
    loaded: OrderedDict[int, LedgerAcks]
    swapped: set[int]
    index: dict[int, IndexEntry]
    pinned: Collection[int]

    def __init__(self, storage: Environment, cursor_log: CursorLog, budget: int, pool: CachePool, name: str) -> None:
        self.storage = storage
        self.log = cursor_log
        self.name = name
        self.cache = LedgerCache(budget, pool)
        self.loaded = self.cache.loaded
        """the cache's loaded ledgers (the same dict, one step nearer for a flush)"""
        self.swapped = self.cache.swapped
        """the cache's swapped-out ledgers (the same set, as ``loaded``)"""
        self.index: dict[int, IndexEntry] = {}
        self.dirty: set[int] = set()
        self.vanished: Set[int] = _NONE  # a set of their own once one is added
        self.unmarked: Set[int] = _NONE
        self.pinned: Collection[int] = _NONE
        """the ledgers the flush plan in flight carries (a flush takes the flush lock, so a
        cursor has one plan in flight at most): set and reset whole, never edited"""
        self.alloc: Callable[[], int] = lambda: -1
        """takes the next log sequence (the marker chain's)"""
        self.on_load: Callable[[int, LedgerAcks], None] = _ignore
        """called with every ledger swapped in (the ack state clips it to the directory and to
        M, and forgets it when nothing is left)"""
        self.refresh: Callable[[int], LedgerAcks | None] | None = None
        """read-only stores: re-read the newest flushed state (the writer trimmed a record), and
        the given ledger's record as the same transaction sees it (None: it is not on disk there)"""
        self.generation = 0
        """how many recovered states these pages were loaded from: a read-only cursor's refresh
        moves it to a newer flush whole, and a read that saw this change ran partly on the
        old state (the cursor runs it again)"""
        self.forced: frozenset[int] = frozenset()
        """ledgers the open loaded beyond the budget because they held state past their end
        (the cursor dropped it): held until the next :meth:`fit_own`, which may evict them"""
        pool.members.add(self)

    def release(self) -> None:
        """The pages are done with (the store closed, the cursor was deleted, or the small
        form took its state): the cache's bytes go back to the pool, and what the pages call
        back goes (the ack state's hook and a reader's refresh both lead back to the pages:
        kept, the cursor's parts and their ack sets were a cycle only the cyclic collector
        frees). O(ledgers loaded)."""
        self.cache.clear()
        self.on_load, self.refresh = _ignore, None

    def load(self, state: RecoveredState) -> None:
        """Hold what recovery loaded; everything else it references is swapped out."""
        cache = self.cache
        if cache.loaded or cache.swapped:  # a read-only cursor refreshing (a new one holds nothing)
            cache.clear()
            cache.swapped.clear()
        if state.ledgers:
            cache.add_measured(state.ledgers)
        cache.swapped.update(state.swapped)
        self.forced = frozenset(state.forced)
        self.index = state.resolved.index if state.resolved is not None else {}
        self.generation += 1
        self.settled()

    def settled(self) -> None:
        """Nothing waits for a marker any more (the log was just loaded or rewritten), and no
        plan is in flight."""
        self.dirty.clear()
        self.vanished = self.unmarked = self.pinned = _NONE

    def runs(self) -> int:
        """Ranges held in every ledger, loaded or swapped out (the index knows the latter)."""
        cache, index = self.cache, self.index
        runs = 0
        for la in cache.loaded.values():
            runs += la.runs
        for x in cache.swapped:
            runs += index[x].runs
        return runs

    def known(self) -> set[int]:
        return self.cache.known()

    # -- reading -------------------------------------------------------------------------------

    @overload
    def get(self, ledger: int, create: Literal[True]) -> LedgerAcks: ...
    @overload
    def get(self, ledger: int, create: bool = False) -> LedgerAcks | None: ...
    def get(self, ledger: int, create: bool = False) -> LedgerAcks | None:
        """The loaded ack state of ``ledger``: swapped in if needed, created if asked. O(1) + swap-in."""
        cache = self.cache
        la = cache.loaded.get(ledger)
        if la is not None:
            cache.loaded.move_to_end(ledger)
            return la
        if ledger in cache.swapped:
            la = self.swap_in(ledger)
            if la is not None or not create:
                return la
        if create:
            la = LedgerAcks()
            cache.add(ledger, la)
            return la
        return None

    def peek(self, ledger: int) -> LedgerAcks | None:
        """A ledger's state for reading only: the loaded one, or its record (not cached)."""
        la = self.cache.loaded.get(ledger)
        if la is not None or ledger not in self.cache.swapped:
            return la
        return self.read_record(ledger)

    def read_record(self, ledger: int) -> LedgerAcks | None:
        """Read a swapped-out ledger's record.

        A read-only store whose writer trimmed the record since this cursor's marker was
        read refreshes to the newest flushed state and reads the record in the same
        transaction (None: the ledger has no acks there any more); only a record missing
        from that state too is an error.
        """
        try:
            return self._fetch(ledger)
        except MissingRecordError:
            if self.refresh is None:
                raise
        record = self.refresh(ledger)  # (None: that state does not leave the ledger on disk)
        return self.cache.loaded.get(ledger, record)

    def _fetch(self, ledger: int) -> LedgerAcks:
        entry = self.index[ledger]
        return self.storage.read(lambda txn: self.log.read_ledger(txn, ledger, entry))

    def swap_in(self, ledger: int) -> LedgerAcks | None:
        """Load a swapped-out ledger whole, evicting least recently used ones to make room."""
        la = self.read_record(ledger)
        if la is None or ledger in self.cache.loaded:  # a read-only refresh settled it
            return la
        self.fit(incoming=la.nbytes(), keep=(ledger,))
        cache = self.cache
        cache.swapped.discard(ledger)
        cache.add(ledger, la)
        cache.swap_ins += 1
        self.on_load(ledger, la)
        return cache.loaded.get(ledger)  # None: nothing was left of it

    # -- changes -------------------------------------------------------------------------------

    def pending(self) -> bool:
        """True when ledgers wait for the next marker: changed, written back, or dropped."""
        return bool(self.dirty or self.unmarked or self.vanished)

    # -- the flush protocol: take, then restore (abort) or adopt (commit) -------------------

    def take_pending(self, meta_dirty: bool) -> Pending:
        """Hand what waits for the next marker to a flush plan, and start afresh. ``dirty`` is
        copied (the ack path holds the set itself); the usually empty sets are taken whole."""
        pending = Pending(set(self.dirty), _NONE, _NONE, meta_dirty)
        self.dirty.clear()
        if self.vanished:
            pending.vanished, self.vanished = self.vanished, _NONE
        if self.unmarked:
            pending.unmarked, self.unmarked = self.unmarked, _NONE
        return pending

    def restore(self, pending: Pending) -> None:
        """A plan that took ``pending`` will not be written: it waits again (the ledgers
        still held or indexed), and the plan's ledgers may be evicted again."""
        self.pinned = _NONE
        self.dirty |= {ledger for ledger in pending.dirty if ledger in self.cache.loaded}
        if pending.vanished:
            self.vanished = vanished = _own(self.vanished)
            vanished |= pending.vanished
        if pending.unmarked:
            self.unmarked = unmarked = _own(self.unmarked)
            unmarked |= {ledger for ledger in pending.unmarked if ledger in self.index}

    def pin(self, ledgers: Collection[int]) -> None:
        """The plan in flight carries these ledgers' snapshots: not evictable until it ends."""
        self.pinned = ledgers

    def adopt(self, changes: dict[int, IndexEntry | None], keep_dirty: Set[int]) -> None:
        """A plan's transaction committed: its index ``changes`` hold (a ledger dropped and
        made again since, or written back since, keeps what it has), its ledgers may be
        evicted again, and ``keep_dirty`` (what a PIP-299 marker left out) waits again."""
        index, cache, unmarked = self.index, self.cache, self.unmarked
        for ledger, entry in changes.items():
            if entry is None:
                if ledger not in cache:
                    index.pop(ledger, None)
            elif ledger not in unmarked:
                index[ledger] = entry
        self.pinned = _NONE
        if keep_dirty:
            self.dirty |= {ledger for ledger in keep_dirty if ledger in cache.loaded}

    def vanish(self, ledger: int) -> int:
        """Forget a ledger's ack state (it fell below M or out of the directory); the ranges it held."""
        cache = self.cache
        runs = 0
        la = cache.remove(ledger)
        if la is not None:
            runs = la.runs
        elif ledger in cache.swapped:
            cache.swapped.discard(ledger)
            runs = self.index[ledger].runs
        self.dirty.discard(ledger)
        if ledger in self.unmarked:  # a written-back record of it must not re-enter the next marker
            self.unmarked = unmarked = _own(self.unmarked)
            unmarked.discard(ledger)
        self.vanished = vanished = _own(self.vanished)
        vanished.add(ledger)
        return runs

    def touched(self, ledger: int, la: LedgerAcks) -> int:
        """``la`` changed: mark it dirty and re-measure it, or forget it when empty (the ranges dropped)."""
        if la:
            self.dirty.add(ledger)
            self.cache.measure(la)
            return 0
        return self.vanish(ledger)

    # -- the budget ----------------------------------------------------------------------------

    def fit(self, incoming: int = 0, keep: Iterable[int] = ()) -> None:
        """Evict least recently used ledgers until ``incoming`` more bytes fit this cursor's
        budget, then, if the store-wide budget is exceeded, let the pool ask the largest
        caches to give way. A ledger in ``keep`` or pinned by a flush in flight stays."""
        self.fit_own(incoming, keep, None)
        pool = self.cache.pool
        if pool.total + incoming > pool.budget:
            pool.fit(self, incoming, keep)

    def fit_own(self, incoming: int, keep: Iterable[int], budget: int | None) -> None:
        self.forced = frozenset()  # the budget holds from here on
        cache = self.cache
        limit = cache.budget if budget is None else budget
        if cache.nbytes + incoming <= limit:
            return
        cache.measure_all()
        if self.pinned:  # a flush in flight carries them: they stay, and the pool fits this cache once it ends
            cache.pool.owed.add(self)
        victims = cache.victims(incoming, set(keep).union(self.pinned), limit)
        if not victims:
            return
        back = [v for v in victims if v in self.dirty or v not in self.index]
        if back:
            try:
                self.write_back(back)
            except Exception:  # keep them in memory: over budget beats losing acks
                log.exception("ackstore: write-back of %d ledgers of cursor %s failed", len(back), self.name)
                victims = [v for v in victims if v not in set(back)]
        for ledger in victims:
            cache.remove(ledger)
            cache.swapped.add(ledger)
            cache.evictions += 1

    def write_back(self, ledgers: list[int]) -> None:
        """Write the records of dirty ledgers about to be evicted, in one transaction; the next
        marker references them (they are ``unmarked`` until then)."""
        loaded = self.cache.loaded
        cid = self.log.cursor_id
        staged = [(ledger, self.alloc(), loaded[ledger]) for ledger in ledgers]
        records = [(seq, encode_ledger(ledger, la, cid)) for ledger, seq, la in staged]

        def write(txn: Any) -> None:
            for seq, value in records:
                self.log.put(txn, seq, value)

        self.storage.write(write)
        self.unmarked = unmarked = _own(self.unmarked)
        unmarked.update(ledgers)
        for ledger, seq, la in staged:
            self.index[ledger] = IndexEntry(seq, la.runs)
            self.dirty.discard(ledger)
        self.cache.write_backs += len(staged)

    # -- invariants ----------------------------------------------------------------------------

    def _check(self, md: tuple[int, int], d: LedgerDirectory) -> int:
        """Assert the pages' invariants; returns the ranges they hold (the ack state compares)."""
        cache, md_l = self.cache, md[0]
        assert not (set(cache.loaded) & cache.swapped)
        assert not NO_ENTRIES, "a ledger wrote to the shared empty entries"
        total = 0
        for ledger in cache.swapped:
            assert ledger in self.index and ledger >= md_l and ledger in d, ledger
            total += self.index[ledger].runs
        exact = 0
        for ledger, la in cache.loaded.items():
            assert la, f"empty LedgerAcks kept for ledger {ledger}"
            assert ledger >= md_l and ledger in d, ledger
            assert la.runs == count_runs(la.bitmap), ledger
            assert la.size >= la.nbytes(), (ledger, la.size, la.nbytes())
            exact += la.nbytes()
            total += la.runs
            if ledger not in self.dirty and ledger not in self.pinned:
                assert ledger in self.index and self.index[ledger].runs == la.runs, ledger
                if la.added is not None:  # what a delta would carry is what the marker carries
                    assert la.added == BitMap(self.index[ledger].adds or ()), ledger
                    named = self.index[ledger].counts or {}
                    assert all(named.get(e) == n for e, n in la.counts_added.items()), ledger
        assert cache.nbytes >= exact, "the cache's running total undercounts"
        largest = max((la.nbytes() for la in cache.loaded.values()), default=0)
        forced = sum(cache.loaded[ledger].nbytes() for ledger in self.forced if ledger in cache.loaded)
        assert exact <= cache.budget + largest + forced, (exact, cache.budget, largest, forced)
        for ledger in self.dirty:
            assert ledger in cache.loaded
        for ledger in self.unmarked:  # a write-back's record is whole: its entry names no acks since
            assert ledger not in self.index or self.index[ledger].adds is None, ledger
        return total
