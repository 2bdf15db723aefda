"""The ack state of one ledger above the mark-delete position.

A :class:`LedgerAcks` holds a roaring bitmap of acknowledged entry ids, the
partial batch-index acks of entries not yet wholly acknowledged, and the exact
number of contiguous runs ("ranges") in the bitmap, kept up to date without
walking the ranges on every call.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn, TypeVar

from pyroaring import BitMap, FrozenBitMap

__all__ = [
    "MAX_COUNT",
    "NO_ENTRIES",
    "LedgerAcks",
    "bitmap_of_range",
    "bitmap_of_runs",
    "count_runs",
    "run_bounds",
    "run_end",
]

LEDGER_OVERHEAD_BYTES = 200
"""Python object overhead charged per ledger on top of the bitmap's own bytes (the LedgerAcks
object, its dict slot and the BitMap wrapper)."""
COUNT_BYTES = 72
"""bytes charged per delivery count held (a dict slot and two small ints)"""
MAX_COUNT: Final = (1 << 32) - 1
"""the highest delivery count a cursor keeps and a record holds (a count past it stays there)"""


_V = TypeVar("_V")


class _NoEntries(dict[int, Any]):
    """An empty mapping that refuses to be written to: see :data:`NO_ENTRIES`."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a ledger's shared empty entries are read-only: it takes a dict of its own first")

    __setitem__ = __delitem__ = setdefault = update = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]


NO_ENTRIES: Final[dict[Any, Any]] = _NoEntries()
"""What a ledger's ``batches``, ``counts`` and ``counts_added`` are while they hold
nothing (most ledgers, most of the time): one empty mapping for every ledger, which
refuses writes, instead of three empty dicts a ledger (three fifths of an idle ledger's
Python memory, and three objects a flush of a small cursor would read). A ledger takes a
dict of its own when it first holds an entry (:meth:`LedgerAcks.own_batches`,
:meth:`~LedgerAcks.own_counts`, :meth:`~LedgerAcks.own_counts_added`); reads, ``pop``
with a default and ``len`` work on it as on any empty dict."""


def _own(entries: dict[int, _V]) -> dict[int, _V]:
    """``entries``, or a new dict in place of :data:`NO_ENTRIES` (a ledger's own to write to)."""
    return {} if entries is NO_ENTRIES else entries


def bitmap_of_range(values: range) -> BitMap:
    """``BitMap(values)``, built from an array when the step is 2**16 or more (one value a
    container; at most 65,536 values in 32 bits): pyroaring's stepped range constructor
    never returns for such a step once it reaches the last 65,536 ids (pyroaring 1.2.0)."""
    if values.step >= 1 << 16:
        return BitMap(array("I", values))
    return BitMap(values)


def count_runs(bitmap: BitMap) -> int:
    """Number of maximal runs of consecutive values. O(containers), in C."""
    n = len(bitmap)
    if n == 0:
        return 0
    return n - bitmap.intersection_cardinality(bitmap.shift(1))


def run_bounds(bitmap: BitMap) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` of each maximal run of consecutive values, ascending.
    O(containers + runs), in C but for the list."""
    if not bitmap:
        return []
    return list(zip(bitmap - bitmap.shift(1), bitmap - bitmap.shift(-1), strict=True))


def bitmap_of_runs(runs: Iterable[tuple[int, int]]) -> BitMap:
    """The values of inclusive runs ``(first, last)``: what :func:`run_bounds` reads, back.
    O(runs)."""
    bitmap = BitMap()
    for first, last in runs:
        bitmap.add_range(first, last + 1)
    return bitmap


def run_end(bitmap: BitMap, start: int) -> int:
    """Last value of the run that starts at ``start`` (which must be in ``bitmap``).

    O(containers) when the run reaches the bitmap's maximum (an in-order consumer's acks);
    else a galloping search (the run's length doubled until a value is missing, then
    halved): O(log(run) * containers), a few steps for the short runs between scattered
    holes, where a search over the whole span took as many as the span's bits.
    """
    hi = bitmap.max()
    held = bitmap.contains_range  # held(a, b): every value of a..b - 1 is in the bitmap
    if held(start, hi + 1):
        return hi
    lo, step = start, 1
    # invariant: start..lo are all held, and start..hi are not (hi: the max, or a probe that failed)
    while lo + step < hi:
        if not held(start, lo + step + 1):
            hi = lo + step
            break
        lo += step
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if held(start, mid + 1):
            lo = mid
        else:
            hi = mid
    return lo


class LedgerAcks:
    """Acks of one ledger: ``bitmap`` of whole entries, ``batches`` of partial ones.

    ``batches`` maps an entry id to ``(batch_size, mask)`` where bit ``i`` of
    ``mask`` is set when batch index ``i`` is acknowledged. An entry is never in
    both. ``runs`` is always ``count_runs(bitmap)``.

    ``added`` is what was acked since this ledger's newest record on disk (its *base*): a
    flush may then write only those entries, in the marker, instead of the whole ledger
    again. None when there is no base or something was removed or a partial batch changed
    since (the next flush must write a new base).

    ``counts`` maps an entry that is not acknowledged to how many times it was delivered
    (sparse: an entry never delivered has none, an acked one loses its count);
    ``counts_added`` is the counts set since the base (the values now), which a delta
    marker carries as it carries ``added`` (the one-position ack path leaves an acked
    entry in it; a flush drops it there). A count removed other than by an ack makes
    ``added`` None (a new base).
    """

    __slots__ = ("bitmap", "batches", "runs", "added", "counts", "counts_added", "size")

    bitmap: BitMap
    batches: dict[int, tuple[int, int]]
    runs: int
    added: BitMap | None
    counts: dict[int, int]
    counts_added: dict[int, int]
    size: int

    def __init__(
        self,
        bitmap: BitMap | None = None,
        batches: dict[int, tuple[int, int]] | None = None,
        counts: dict[int, int] | None = None,
    ) -> None:
        """``batches`` and ``counts`` are kept when they hold something (an empty one is
        not: the ledger holds :data:`NO_ENTRIES` instead)."""
        self.bitmap = bitmap if bitmap is not None else BitMap()
        self.batches: dict[int, tuple[int, int]] = batches or NO_ENTRIES
        self.runs = count_runs(self.bitmap)
        self.size = 0  # bytes charged to the cache (see ledger_cache)
        self.added: BitMap | None = None
        self.counts: dict[int, int] = counts or NO_ENTRIES
        self.counts_added: dict[int, int] = NO_ENTRIES

    @classmethod
    def of_runs(
        cls, bitmap: BitMap, runs: int, batches: dict[int, tuple[int, int]], counts: dict[int, int]
    ) -> LedgerAcks:
        """A state whose run count is known (``runs``: what a decoder built ``bitmap`` from,
        maximal runs), without counting them again; it tracks no acks since a record
        (``added`` None: what a state marker's ledgers are). O(1)."""
        la = cls.__new__(cls)
        la.bitmap, la.batches, la.runs, la.size = bitmap, batches or NO_ENTRIES, runs, 0
        la.added, la.counts, la.counts_added = None, counts or NO_ENTRIES, NO_ENTRIES
        return la

    def own_batches(self) -> dict[int, tuple[int, int]]:
        """``batches``, a dict of this ledger's own to write to (no longer :data:`NO_ENTRIES`). O(1)."""
        self.batches = owned = _own(self.batches)
        return owned

    def own_counts(self) -> dict[int, int]:
        """``counts``, a dict of this ledger's own to write to. O(1)."""
        self.counts = owned = _own(self.counts)
        return owned

    def own_counts_added(self) -> dict[int, int]:
        """``counts_added``, a dict of this ledger's own to write to. O(1)."""
        self.counts_added = owned = _own(self.counts_added)
        return owned

    def __bool__(self) -> bool:
        return bool(self.bitmap or self.batches or self.counts)

    def deliver(self, entry: int) -> int:
        """One more delivery of ``entry`` (not acked); its count now, which stays at the
        highest a record holds once there (2**32 - 1). O(1)."""
        n = self.counts.get(entry, 0)
        return self.set_count(entry, n + 1 if n < MAX_COUNT else MAX_COUNT)

    def set_count(self, entry: int, n: int) -> int:
        """``entry`` (not acked) was delivered ``n`` times; returns ``n``. O(1)."""
        self.own_counts()[entry] = self.own_counts_added()[entry] = n
        return n

    def set_counts(self, counts: dict[int, int]) -> None:
        """Each entry of ``counts`` (none acked) was delivered as many times as it says: the
        bulk :meth:`set_count`. O(len(counts))."""
        self.own_counts().update(counts)
        self.own_counts_added().update(counts)

    def _drop_counts(self, keep: Callable[[int], bool], rebase: bool) -> None:
        """Forget the counts of entries ``keep`` refuses; ``rebase``: the removal is not one a
        marker says by itself (an ack, or M passing), so the next flush writes a new base."""
        gone = [e for e in self.counts if not keep(e)]
        for e in gone:
            del self.counts[e]
            self.counts_added.pop(e, None)
        if gone and rebase:
            self.added = None

    def highest(self) -> int:
        """The highest entry with any state (acked, partly acked or counted); -1 when none."""
        return self._extreme(max, self.bitmap.max)

    def lowest(self) -> int:
        """The lowest entry with any state (acked, partly acked or counted); -1 when none."""
        return self._extreme(min, self.bitmap.min)

    def _extreme(self, pick: Callable[..., int], of_bitmap: Callable[[], int]) -> int:
        if not self.batches and not self.counts:  # most ledgers: acks only
            return of_bitmap() if self.bitmap else -1
        found = [of_bitmap()] if self.bitmap else []
        if self.batches:
            found.append(pick(self.batches))
        if self.counts:
            found.append(pick(self.counts))
        return pick(found, default=-1)

    def add(self, entry: int) -> int:
        """Ack one entry; return the change in ``runs``. O(1)."""
        bm = self.bitmap
        if entry in bm:
            return 0
        if self.batches and self.batches.pop(entry, None) is not None:
            self.added = None  # a partial batch left the record: a new base
        delta = 1 - ((entry - 1) in bm if entry else 0) - ((entry + 1) in bm)
        bm.add(entry)
        if self.added is not None:
            self.added.add(entry)
        if self.counts and self.counts.pop(entry, None) is not None:
            self.counts_added.pop(entry, None)  # an acked entry has no count (the ack says so)
        self.runs += delta
        return delta

    def update(self, entries: BitMap | FrozenBitMap) -> int:
        """Ack many entries; return the change in ``runs``. O(containers)."""
        before = self.runs
        self.bitmap |= entries
        if self.added is not None:
            self.added |= entries
        if self.batches:
            for entry in [e for e in self.batches if e in entries]:
                del self.batches[entry]
                self.added = None
        if self.counts:
            self._ack_counts(entries)
        self.runs = count_runs(self.bitmap)
        return self.runs - before

    def _ack_counts(self, entries: BitMap | FrozenBitMap) -> None:
        """The counts of ``entries`` (just acked) go. O(min(counts, entries)) lookups, and one
        step in place of the deletions when every counted entry is acked (what a consumer that
        acks what it read does)."""
        counts, added = self.counts, self.counts_added
        if len(entries) < len(counts):
            for entry in entries:
                if counts.pop(entry, None) is not None:
                    added.pop(entry, None)
            return
        gone = [e for e in counts if e in entries]
        if len(gone) == len(counts):  # every count: the entries in ``counts_added`` are acked too
            self.counts = self.counts_added = NO_ENTRIES
            return
        for entry in gone:
            del counts[entry]
            added.pop(entry, None)

    def drop_through(self, entry: int, since: int = 0) -> int:
        """Forget everything ``<= entry`` (it is below the mark-delete now); return the change
        in ``runs``. ``since``: no entry below it has a count (the mark-delete position was
        just under it, and nothing at or below M is counted), so only the counts of the
        entries the move passed are looked up: O(min(entries passed, counts)) for them, not
        O(counts) for every move of M (a cursor acked one entry at a time, with every read
        entry counted, moves M each ack)."""
        before = self.runs
        if entry < 0:
            return 0
        n = len(self.bitmap)
        if n:
            self.bitmap.remove_range(0, entry + 1)
        if self.batches:
            for e in [e for e in self.batches if e <= entry]:
                del self.batches[e]
                self.added = None
        counts = self.counts
        if counts:  # below M: the marker says so (no new base)
            passed = entry - since + 1
            if len(counts) <= passed and max(counts) <= entry:  # every count, looked at in O(counts)
                self.counts = self.counts_added = NO_ENTRIES  # (what counts_added holds above M is acked)
            elif passed <= len(counts):
                added = self.counts_added
                for e in range(since, entry + 1):
                    if counts.pop(e, None) is not None:
                        added.pop(e, None)
            else:
                self._drop_counts(lambda e: e > entry, rebase=False)
        if len(self.bitmap) == n:
            return 0  # nothing left the bitmap: its runs are as they were
        self.added = None  # removals are never deltas: a new base
        self.runs = count_runs(self.bitmap)
        return self.runs - before

    def drop_from(self, entry: int) -> int:
        """Forget everything ``>= entry`` (beyond a ledger's sealed end); return the change in ``runs``."""
        before = self.runs
        self.bitmap.remove_range(entry, 1 << 32)
        self.added = None  # removals are never deltas: a new base
        if self.batches:
            for e in [e for e in self.batches if e >= entry]:
                del self.batches[e]
        if self.counts:
            self._drop_counts(lambda e: e < entry, rebase=True)
        self.runs = count_runs(self.bitmap)
        return self.runs - before

    def snapshot(self) -> LedgerAcks:
        """A copy for a flush to encode outside the store lock. Run-optimizes this ledger's
        bitmap first (its smallest form, the one encoding makes anyway), so the caller can
        measure it now. O(containers), in C."""
        self.bitmap.run_optimize()
        copy = LedgerAcks.__new__(LedgerAcks)
        copy.bitmap = BitMap(self.bitmap)
        copy.batches = dict(self.batches) if self.batches else NO_ENTRIES
        copy.runs = self.runs
        copy.size = 0
        copy.added = None
        copy.counts = dict(self.counts) if self.counts else NO_ENTRIES
        copy.counts_added = NO_ENTRIES
        return copy

    def prefix(self, runs: int) -> LedgerAcks:
        """A new state holding this one's lowest ``runs`` runs of acked entries (``runs`` >= 1,
        fewer than it holds) and the partial batches and counts below the last of them's end
        (what a PIP-299 truncated marker persists of the ledger the cap cuts through).

        Time and memory as the prefix's containers, whatever the bitmap holds above it: a
        window from the lowest entry grows (doubling) until the ``runs``-th run ends inside
        it; the whole bitmap is never copied and no list of ranges is made."""
        bm = self.bitmap
        low, last, span = bm.min(), bm.max(), 1 << 16
        while True:
            stop = min(low + span, last + 1)
            part = bm & BitMap(range(low, stop))
            if stop > last or count_runs(part) > runs:  # the runs-th run ended inside the window
                break
            span *= 2
        cut = int((part - part.shift(-1))[runs - 1])  # the runs' ends, one select
        part.remove_range(cut + 1, 1 << 32)
        return LedgerAcks(
            part,
            {e: b for e, b in self.batches.items() if e < cut},
            {e: n for e, n in self.counts.items() if e < cut},
        )

    def ranges(self) -> list[tuple[int, int]]:
        """Inclusive ``(first, last)`` entry runs, ascending. O(runs)."""
        return run_bounds(self.bitmap)

    def nbytes(self) -> int:
        """Bytes this ledger's state holds in memory: the bitmap's size as pyroaring reports
        it (``__sizeof__``, its serialized size), a fixed object overhead, 64 B per partial batch
        and ``COUNT_BYTES`` per delivery count (in each of two dicts)."""
        return (
            self.bitmap.__sizeof__()
            + LEDGER_OVERHEAD_BYTES
            + 64 * len(self.batches)
            + COUNT_BYTES * (len(self.counts) + len(self.counts_added))
        )
