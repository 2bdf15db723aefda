"""The in-memory half of PIP-81: loaded ledgers in LRU order under a byte budget.

A ledger's ack set is either *loaded* (a :class:`LedgerAcks` in :attr:`LedgerCache.loaded`,
least recently used first) or *swapped out* (its newest record is on disk and the
cursor's marker index knows it; its id is in :attr:`LedgerCache.swapped`). The cache only
does the accounting and picks victims; the cursor reads records in and writes dirty
victims back.

Sizes are honest: a ledger costs ``BitMap.__sizeof__()`` (pyroaring's serialized size,
which tracks its containers' payload within a few bytes) plus a fixed
:data:`~ackstore.ledger_acks.LEDGER_OVERHEAD_BYTES` plus 64 bytes per partial batch.
Between measurements a single-entry ack is charged :data:`ACK_CHARGE` bytes, an upper
bound of what one value can add to a roaring container, so the running total never
undercounts; when it passes the budget the loaded ledgers are measured again and
only then are victims chosen.
"""

from __future__ import annotations

import sys
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol

from .ledger_acks import LedgerAcks

__all__ = ["LedgerCache", "CachePool", "PoolMember", "ACK_CHARGE"]

ACK_CHARGE = 10
"""bytes charged per single-entry ack until the next measurement (array value 2 B, a new run 4
B, a new container's header 8 B: 10 B covers every case)"""
LOW_WATER = 0.9
"""after evicting, the cache is brought down to this fraction of its budget so that evictions
(and their write-backs) come in batches, not one per ack"""


class PoolMember(Protocol):
    """What the pool asks of a cursor's pages: its cache, and to evict down to a budget."""

    cache: LedgerCache

    def fit_own(self, incoming: int, keep: Iterable[int], budget: int | None) -> None: ...

    def fit(self, incoming: int = 0, keep: Iterable[int] = ()) -> None: ...


class CachePool:
    """The store-wide budget: the running total of every cursor's cache of one store, and
    the cursors' pages registered in it (held weakly), so that it can make them give way."""

    __slots__ = ("total", "budget", "members", "owed")

    total: int
    budget: int

    def __init__(self, budget: int | None) -> None:
        self.total = 0
        self.budget = sys.maxsize if budget is None else budget
        self.members: weakref.WeakSet[PoolMember] = weakref.WeakSet()
        self.owed: set[PoolMember] = set()
        """caches that stayed over a budget because a flush in flight pinned their ledgers"""

    def settle(self) -> None:
        """A flush ended, its ledgers no longer pinned: fit each cache that stayed over a
        budget for them (:attr:`owed`). O(those caches); the flush calls it under the store's lock."""
        if self.owed:
            owed, self.owed = self.owed, set()
            for pages in owed:
                pages.fit()

    def fit(self, current: PoolMember, incoming: int, keep: Iterable[int]) -> None:
        """Bring every member under the budget, largest caches first; ``keep`` holds for
        ``current`` (the pages asking) only. Each member's ``fit_own`` evicts (writing back)."""
        for pages in sorted(self.members, key=lambda p: p.cache.nbytes, reverse=True):
            excess = self.total + incoming - self.budget
            if excess <= 0:
                return
            target = max(0, pages.cache.nbytes - excess)
            pages.fit_own(0, keep if pages is current else (), target)


class LedgerCache:
    """Loaded ledgers (LRU order) and the ids of swapped-out ones. O(1) per touch.

    Every change of :attr:`nbytes` is mirrored into the store's :class:`CachePool`.
    """

    __slots__ = ("loaded", "swapped", "nbytes", "budget", "pool", "swap_ins", "evictions", "write_backs", "measures")

    loaded: OrderedDict[int, LedgerAcks]
    swapped: set[int]
    nbytes: int
    budget: int
    pool: CachePool

    def __init__(self, budget: int, pool: CachePool | None = None) -> None:
        self.pool = pool if pool is not None else CachePool(None)
        self.loaded = OrderedDict()
        self.swapped = set()
        self.nbytes = 0  # an upper bound of the loaded ledgers' real sizes
        self.budget = budget
        self.swap_ins = 0
        self.evictions = 0
        self.write_backs = 0
        self.measures = 0

    def __contains__(self, ledger: int) -> bool:
        return ledger in self.loaded or ledger in self.swapped

    def known(self) -> set[int]:
        """Every ledger with ack state, loaded or swapped out."""
        return set(self.loaded) | self.swapped

    def charge(self, nbytes: int) -> None:
        self.nbytes += nbytes
        self.pool.total += nbytes

    def add(self, ledger: int, la: LedgerAcks) -> None:
        la.size = la.nbytes()
        self.loaded[ledger] = la
        self.charge(la.size)

    def add_measured(self, ledgers: dict[int, LedgerAcks]) -> None:
        """Hold ``ledgers`` whose ``size`` is already measured (recovery measures as it loads), in order."""
        self.loaded.update(ledgers)
        self.charge(sum(la.size for la in ledgers.values()))

    def remove(self, ledger: int) -> LedgerAcks | None:
        la = self.loaded.pop(ledger, None)
        if la is not None:
            self.charge(-la.size)
        return la

    def measure(self, la: LedgerAcks) -> None:
        size = la.nbytes()
        self.charge(size - la.size)
        la.size = size

    def measure_all(self) -> None:
        self.measures += 1
        total = 0
        for la in self.loaded.values():
            la.size = la.nbytes()
            total += la.size
        self.charge(total - self.nbytes)

    def clear(self) -> None:
        """Drop everything (the cursor's store closes): give the bytes back to the pool."""
        self.charge(-self.nbytes)
        self.loaded.clear()

    def victims(self, incoming: int, keep: Iterable[int], budget: int | None = None) -> list[int]:
        """Least recently used ledgers to evict so that ``incoming`` more bytes fit ``budget``
        (default: this cache's own).

        Ledgers in ``keep`` are never chosen; if even evicting everything else cannot
        make room, everything else is chosen (the one big ledger then stands alone).
        """
        keep = set(keep)
        budget = self.budget if budget is None else budget
        if self.nbytes + incoming <= budget:
            return []
        target = int(budget * LOW_WATER) - incoming
        freed, out = 0, []
        for ledger, la in self.loaded.items():
            if self.nbytes - freed <= target:
                break
            if ledger in keep:
                continue
            out.append(ledger)
            freed += la.size
        return out
