"""A cursor's ack state: the mark-delete and read positions, the range count, properties,
and the rules that move them (individual, cumulative and batch-index acks, advancing M
across sealed ledgers, position resets); fitting it to a changed ledger directory is
:mod:`ackstore.cursor.fitting`'s.

No LMDB and no lock here: the per-ledger ack sets come from a :class:`LedgerSource` (the
cursor's :class:`~ackstore.cursor.pages.Pages`, or a plain in-memory one in tests), and the
caller holds the cursor's lock. Every method validates before it changes anything.

Complexity: one position O(1); k positions of one ledger O(k) in C plus O(containers) to
recount its runs; a cumulative ack O(ledgers passed); ``range_count`` is kept exact, O(1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pyroaring import BitMap

from ..errors import InvalidTypeError, UnknownLedgerError
from ..ledger_acks import LedgerAcks, run_end
from ..ledger_cache import ACK_CHARGE, LedgerCache
from ..position import MAX_ENTRY, Position, trusted
from ..storage.codecs import positions_by_ledger
from .moves import MAX_BATCH_SIZE, LedgerSource, PositionMoves, TopicView, batch_mask, check_batch_size
from .validate import (
    MAX_PROPERTY_KEY_BYTES,
    MAX_PROPERTY_VALUE_BYTES,
    ack_limit,
    check_ack,
    check_entries,
    check_entry,
    check_property,
    check_property_key,
    entries_bitmap,
    ledger_limit,
    pair,
    refuse_entries,
)

if TYPE_CHECKING:
    from ..directory import LedgerDirectory

__all__ = [
    "AckState",
    "LedgerSource",
    "MAX_BATCH_SIZE",
    "MAX_PROPERTY_KEY_BYTES",
    "MAX_PROPERTY_VALUE_BYTES",
    "drop_property",
    "group_positions",
    "latest_mark_delete",
    "put_property",
    "start_of",
]


def put_property(properties: dict[str, int | str], key: Any, value: Any) -> bool:
    """Property ``key`` set in ``properties`` (an integer of 64 bits, or a string of UTF-8 up
    to ``MAX_PROPERTY_VALUE_BYTES``), checked first; True: they changed (a set always counts,
    as a marker writes it again). The rule of the parts and of the small form alike."""
    check_property(key, value)
    properties[key] = value
    return True


def drop_property(properties: dict[str, int | str], key: Any) -> bool:
    """Property ``key`` dropped from ``properties`` (the key checked first); True if it was set."""
    check_property_key(key)
    return properties.pop(key, _ABSENT) is not _ABSENT


_ABSENT = object()


def start_of(d: LedgerDirectory, initial_position: str) -> tuple[int, int]:
    """The mark-delete position a cursor that never flushed starts at: ``"latest"``, just
    before the next entry to be written (:func:`latest_mark_delete`), else (``"earliest"``)
    before the topic's first ledger's first entry (``0:-1`` with no ledgers). O(1)."""
    if initial_position == "latest":
        return latest_mark_delete(d)
    first = d.first()
    return first if first is not None else 0, -1


def latest_mark_delete(d: LedgerDirectory) -> tuple[int, int]:
    """The mark-delete position of a cursor that starts at the latest position: just before
    the next entry to be written. That is the newest ledger's last entry when it is sealed,
    its last confirmed entry when it is open and tracked, and its entry -1 when it is open
    and not tracked (the caller does not say what was written: everything in sealed ledgers
    counts as old). With no ledgers yet, ``0:-1``, as for the earliest position."""
    if not d.ids:
        return 0, -1
    ledger, count = d.ids[-1], d.counts[-1]
    if count >= 0:
        return ledger, count - 1
    return ledger, -1 if d.confirmed is None else d.confirmed


def _ends_before_another(d: LedgerDirectory, i: int, entry: int) -> bool:
    """``entry`` is the last (or past the last) of the sealed ledger at ``d``'s index ``i``,
    and a ledger follows it: M there moves on to the next ledger. O(1)."""
    count = d.counts[i]
    return bool(count >= 0 and entry >= count - 1 and i + 1 < len(d.ids))


def _per_ledger(items: list[Any] | tuple[Any, ...]) -> dict[Any, list[Any]]:
    """``items`` (each checked to be a Position or a ``(ledger, entry)`` pair) grouped per
    ledger, their entries as given, for :meth:`AckState.group` to check."""
    if set(map(type, items)) != {Position}:  # Positions are checked when made; anything else here
        for item in items:
            if type(item) is not Position:
                pair(item)
    per: dict[Any, list[Any]] = {}  # (every item is a pair of ints now)
    for ledger, entry in items:
        lst = per.get(ledger)
        if lst is None:
            per[ledger] = [entry]
        else:
            lst.append(entry)
    return per


def group_positions(
    items: list[Any] | tuple[Any, ...], limit: Callable[[Any], int], check: Callable[[int, Any], object]
) -> list[tuple[int, BitMap]]:
    """A list of positions to ack checked, and their entries grouped per ledger as bitmaps
    (``Cursor.ack``'s rule for a list): each ledger's ack limit (``limit``:
    ``validate.ack_limit``'s), and past it its highest entry (``check``: ``validate.check_ack``'s).
    Positions (and ``(ledger, entry)`` tuples of ints) are grouped in one compiled pass, each
    ledger's entries handed over as roaring bytes; anything else is checked item by item,
    and the first bad one named. Raises with nothing changed: the caller's state is not
    read. O(items + ledgers x limit)."""
    grouped = positions_by_ledger(items)
    per: dict[Any, Any] = dict(grouped) if grouped is not None else _per_ledger(items)
    out: list[tuple[int, BitMap]] = []
    for ledger, entries in per.items():
        top = limit(ledger)
        if grouped is not None:
            bm = BitMap.deserialize(entries)
        else:
            try:
                bm = BitMap(entries)
            except (TypeError, OverflowError, ValueError):
                for entry in entries:
                    check(ledger, entry)
                raise InvalidTypeError(f"entries of ledger {ledger} must be ints") from None  # pragma: no cover
        if bm.max() > top:
            check(ledger, bm.max())
        out.append((ledger, bm))
    return out


class AckState(PositionMoves):
    """Positions, range count, properties and the ack rules of one cursor (the moves the
    read path makes, resets and reads, are :class:`~ackstore.cursor.moves.PositionMoves`')."""

    # slots: a flush reads these for every dirty cursor; one object, no separate dict to fetch
    __slots__ = ("ledgers", "name", "redeliveries", "topic")  # and PositionMoves'

    cache: LedgerCache

    def __init__(self, topic: TopicView, name: str, ledgers: LedgerSource) -> None:
        self.topic = topic
        self.name = name
        self.ledgers = ledgers
        self.cache = ledgers.cache  # the hot path reads these directly (never rebound)
        self.dirty = ledgers.dirty
        self.md: Position = trusted(0, -1)
        self.rp: Position = trusted(0, 0)
        self.range_count = 0
        self.properties: dict[str, int | str] = {}
        self.meta_dirty = False
        self.redeliveries = 0  # deliveries of entries delivered before (a counter, in memory)
        self.limit_ledger, self.limit_value, self.limit_version = -1, -1, -1  # one-entry cache of the limit

    # -- helpers -----------------------------------------------------------------------------------

    def take_meta_dirty(self) -> bool:
        """Whether the positions or properties changed since the last marker; a flush plan
        takes it (and puts it back with :meth:`restore_meta` if it is not written)."""
        dirty, self.meta_dirty = self.meta_dirty, False
        return dirty

    def restore_meta(self, dirty: bool) -> None:
        self.meta_dirty = self.meta_dirty or dirty

    def set_md(self, md: Position) -> None:
        self.md = md
        self.meta_dirty = True
        if self.rp < (md[0], md[1] + 1):
            self.rp = trusted(md[0], md[1] + 1)

    def touched(self, ledger: int, la: LedgerAcks) -> None:
        """``ledger``'s acks ``la`` changed: the source marks it dirty and recounts its ranges."""
        self.range_count -= self.ledgers.touched(ledger, la)

    def limit(self, ledger: Any) -> int:
        return ledger_limit(self.topic.directory, self.topic.name, ledger)

    def cached_limit(self, ledger: Any) -> int:
        """:meth:`limit`, kept in the one-entry cache of the ledger acked last (acks come a
        ledger at a time). O(1) when cached."""
        if type(ledger) is int and ledger == self.limit_ledger and self.limit_version == self.topic.version:
            return self.limit_value  # (1.0 and True equal 1: the check below refuses them)
        limit = self.limit(ledger)
        self.limit_ledger, self.limit_value, self.limit_version = ledger, limit, self.topic.version
        return limit

    def check_entry(self, ledger: int, entry: Any, low: int = 0) -> None:
        check_entry(self.topic.directory, self.topic.name, ledger, entry, low)

    def check_ack(self, ledger: int, entry: Any, low: int = 0) -> None:
        """``validate.check_ack`` at this state's M."""
        check_ack(self.topic.directory, self.topic.name, self.md, ledger, entry, low)

    def ack_limit(self, ledger: Any) -> int:
        """:meth:`limit` for acks: a ledger below M's that the topic no longer has (trimmed)
        allows any entry, all of them at or below M (ignored)."""
        return ack_limit(self.cached_limit, self.md[0], ledger)

    def advance(self, clean: int | None = None) -> None:
        """Move M over contiguous acks and across fully acked sealed ledgers (``clean``: a
        ledger known to hold nothing at M + 1, not read for it)."""
        d = self.topic.directory
        ledgers = self.ledgers
        ledger, entry = self.md
        moved = False
        while True:
            la = ledgers.get(ledger) if ledger != clean else None
            if la is not None and (entry + 1) in la.bitmap:
                since, entry = entry + 1, run_end(la.bitmap, entry + 1)
                moved = True
                self.range_count += la.drop_through(entry, since)
                self.touched(ledger, la)
            i = d.index(ledger)
            if i < 0:
                break
            if _ends_before_another(d, i, entry):
                if ledger in self.cache:
                    self.range_count -= ledgers.vanish(ledger)
                ledger, entry = d.ids[i + 1], -1
                moved = True
                continue
            break
        if moved:
            self.set_md(trusted(ledger, entry))

    # -- acks --------------------------------------------------------------------------------------

    def ack_one(self, ledger: Any, entry: Any) -> None:
        """One position: the hot path, kept to a handful of dict/bitmap operations."""
        try:
            limit = self.cached_limit(ledger)
        except UnknownLedgerError:
            self.check_ack(ledger, entry)  # raises unless at or below M (a ledger trimmed since)
            return
        if type(entry) is not int or not 0 <= entry <= limit:
            self.check_entry(ledger, entry)
        md_l, md_e = self.md
        if ledger < md_l or (ledger == md_l and entry <= md_e):
            return
        if ledger == md_l and entry == md_e + 1 and self._pass(ledger, entry, limit):
            return
        cache = self.cache
        la = cache.loaded.get(ledger)
        if la is None:
            la = self.ledgers.get(ledger, create=True)
        else:
            cache.loaded.move_to_end(ledger)
        bm = la.bitmap
        if entry in bm:
            return
        delta = 1 - ((entry - 1) in bm if entry else 0) - ((entry + 1) in bm)
        bm.add(entry)
        added = la.added
        if added is not None:
            added.add(entry)
        if la.batches and la.batches.pop(entry, None) is not None:
            la.added = None  # a partial batch left the record: the next flush writes a new base
        if la.counts:
            la.counts.pop(entry, None)  # an acked entry has no delivery count (the next flush
            # leaves it out of ``counts_added`` too: the hot path does one dict operation)
        la.runs += delta
        self.range_count += delta
        self.dirty.add(ledger)
        la.size += ACK_CHARGE
        cache.nbytes += ACK_CHARGE
        pool = cache.pool
        pool.total += ACK_CHARGE
        if cache.nbytes > cache.budget or pool.total > pool.budget:
            self.ledgers.fit(keep=(ledger,))
        if ledger == md_l and entry == md_e + 1:
            self.advance()

    def _pass(self, ledger: int, entry: int, limit: int) -> bool:
        """An ack of M + 1 (``entry``, in M's ``ledger``, whose highest entry allowed is
        ``limit``) that moves M to it and no further: M moves, the entry's delivery count and
        partial batch go, and nothing enters the ledger's acks (what is at or below M is not
        held: the marker says it). Returns False, changing nothing, when M would move further
        (``entry + 1`` is acked, or ``entry`` is the last of a sealed ledger with one after
        it): :meth:`advance` moves it then. O(1).

        The ledger's size stays charged as it was (an upper bound, as an ack's charge is)."""
        cache = self.cache
        la = cache.loaded.get(ledger)
        if la is None:
            la = self.ledgers.get(ledger)  # swapped in when it is on disk; None: no state
            if la is not None and (cache.nbytes > cache.budget or cache.pool.total > cache.pool.budget):
                self.ledgers.fit(keep=(ledger,))
        else:
            cache.loaded.move_to_end(ledger)
        if la is not None and (entry + 1) in la.bitmap:
            return False
        if entry >= limit:  # a sealed ledger's last entry (an open ledger never ends)
            d = self.topic.directory
            i = d.index(ledger)
            if i >= 0 and _ends_before_another(d, i, entry):
                return False
        if la is not None:
            changed = False
            if la.counts and la.counts.pop(entry, None) is not None:
                la.counts_added.pop(entry, None)  # below M: the marker says so (no new base)
                changed = True
            if la.batches and la.batches.pop(entry, None) is not None:
                la.added = None  # a partial batch left the record: the next flush writes a new base
                changed = True
            if changed:
                if la:
                    self.dirty.add(ledger)
                else:
                    self.range_count -= self.ledgers.vanish(ledger)
        self.set_md(trusted(ledger, entry))
        return True

    def ack_items(self, items: list[Any] | tuple[Any, ...]) -> None:
        """Validate every item first (one bad item acks none), then apply them per ledger."""
        self.apply_groups(self.group(items))

    def ack_entries(self, ledger: int, entries: Iterable[int]) -> None:
        """Many entries of one ledger; a BitMap, array or integer ndarray skips Python ints."""
        self.ack_limit(ledger)  # (first: a ledger never added is named before what its entries are)
        bm, entries = entries_bitmap(entries)
        if bm is None:
            refuse_entries(entries, lambda entry: self.check_ack(ledger, entry))
            return  # pragma: no cover (it raised)
        if bm is entries:  # (the caller's own: a copy, trimmed below M)
            bm = BitMap(bm)
        check_entries(self.ack_limit, self.check_ack, ledger, bm)
        self.apply_groups([(ledger, bm)])

    def apply_groups(self, groups: list[tuple[int, BitMap]]) -> None:
        """Apply validated per-ledger bitmaps of acks. Acks that M passes never enter the
        ledger's acks: M moves over the run they start at M + 1 first (with the acks held),
        and only what lies above it is added."""
        md_l, md_e = self.md
        advance = False
        for ledger, bm in groups:
            if ledger < md_l:
                continue
            if ledger == md_l:
                if md_e >= 0:
                    bm.remove_range(0, md_e + 1)
                if (md_e + 1) in bm:
                    self._lead(ledger, md_e + 1, bm)
                    advance = True
            if not bm:
                continue
            la = self.ledgers.get(ledger, create=True)
            # acked already (so neither counted nor batched), and M's run not taken out of
            # it just now (_lead leaves that ledger to be touched here): nothing changes
            if (advance and ledger == md_l) or not bm.issubset(la.bitmap):
                self.range_count += la.update(bm)
                self.touched(ledger, la)
            self.ledgers.fit(keep=(ledger,))  # (a swap-in may have filled the cache)
        if advance:
            self.advance()

    def _lead(self, ledger: int, since: int, bm: BitMap) -> None:
        """``bm`` (acks of M's ``ledger``, none at or below M) holds ``since`` (M + 1): M moves
        to the end of the run from it that ``bm`` and the acks held make, and ``bm`` keeps
        only what lies above. The ledger's acks lose what M passed; nothing of ``bm`` is
        added here. O(containers)."""
        la = self.ledgers.get(ledger)
        held = la.bitmap if la is not None else None
        end = run_end(bm | held if held else bm, since)
        bm.remove_range(0, end + 1)
        if la is not None:
            self.range_count += la.drop_through(end, since)
            if not bm:
                self.touched(ledger, la)
        self.set_md(trusted(ledger, end))

    def group(self, items: list[Any] | tuple[Any, ...]) -> list[tuple[int, BitMap]]:
        """:func:`group_positions` at this state's M."""
        return group_positions(items, self.ack_limit, self.check_ack)

    def ack_cumulative(self, position: Any) -> None:
        """Everything up to and including ``position`` (moves M; never backwards)."""
        ledger, entry = pair(position)
        self.check_ack(ledger, entry, low=-1)
        if (ledger, entry) <= self.md:
            return
        d = self.topic.directory
        ledgers = self.ledgers
        for other in d.ids[max(d.index(self.md[0]), 0) : max(d.index(ledger), 0)]:
            if other in self.cache:
                self.range_count -= ledgers.vanish(other)
        la = ledgers.get(ledger)
        if la is not None:
            self.range_count += la.drop_through(entry)
            self.touched(ledger, la)
        self.set_md(trusted(ledger, entry))
        self.advance()

    def ack_batch_index(self, position: Any, batch_size: Any, indexes: Iterable[int]) -> None:
        """Some messages of a batch entry; the entry is acked once all its indexes are."""
        ledger, entry = pair(position)
        self.check_ack(ledger, entry)
        mask = batch_mask(batch_size, indexes)
        ledgers = self.ledgers
        la = ledgers.get(ledger) if (ledger, entry) > self.md else None
        old = la.batches.get(entry) if la is not None else None
        check_batch_size(ledger, entry, batch_size, old)
        if not mask or (ledger, entry) <= self.md or (la is not None and entry in la.bitmap):
            return
        if old is not None:
            mask |= old[1]
        if mask == (1 << batch_size) - 1:
            la = ledgers.get(ledger, create=True)
            self.range_count += la.add(entry)
            self.touched(ledger, la)
            ledgers.fit(keep=(ledger,))
        else:
            la = self.put_batch(ledger, entry, (batch_size, mask))  # (fitted)
        if (ledger, entry - 1) == self.md and entry in la.bitmap:
            self.advance()

    # -- queries -----------------------------------------------------------------------------------

    def is_acked(self, position: Any) -> bool:
        ledger, entry = pair(position)
        if (ledger, entry) <= self.md:
            return True
        la = self.ledgers.get(ledger)
        return la is not None and 0 <= entry <= MAX_ENTRY and entry in la.bitmap

    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]:
        """Up to ``n`` entries of ``ledger`` in ``[start, stop)`` that are not acknowledged,
        ascending; acked runs are hopped over whole. O(runs touched + entries returned)."""
        md_l, md_e = self.md
        if ledger < md_l:
            return []
        if ledger == md_l:
            start = max(start, md_e + 1)
        la = self.ledgers.get(ledger)
        bm = la.bitmap if la is not None else None
        out: list[int] = []
        e = start
        while len(out) < n and e < stop:
            if bm is not None and e in bm:
                e = run_end(bm, e) + 1
            else:
                out.append(e)
                e += 1
        return out

    def batch_acked_indexes(self, position: Any) -> frozenset[int] | None:
        ledger, entry = pair(position)
        la = self.ledgers.get(ledger) if (ledger, entry) > self.md else None
        part = la.batches.get(entry) if la is not None else None
        if part is None:
            return None
        size, mask = part
        return frozenset(i for i in range(size) if mask >> i & 1)

    def set_property(self, key: Any, value: Any) -> None:
        """:func:`put_property` on this state's properties."""
        self.meta_dirty |= put_property(self.properties, key, value)

    def remove_property(self, key: Any) -> bool:
        """:func:`drop_property` on this state's properties; True if it was set."""
        dropped = drop_property(self.properties, key)
        self.meta_dirty |= dropped
        return dropped

    # -- invariants --------------------------------------------------------------------------------

    def _check(self, held_runs: int) -> None:
        """Assert the positions' invariants and that ``held_runs`` (the ranges in the ledger
        source) is the range count."""
        d = self.topic.directory
        md_l, md_e = self.md
        assert self.rp >= (md_l, md_e + 1), (self.rp, self.md)
        if len(d):
            assert md_l in d, f"mark-delete ledger {md_l} not in directory"
            count = d.count(md_l)
            assert d.end(md_l) < 0 or md_e <= d.end(md_l) - 1, (self.md, d.end(md_l))
            assert not (count >= 0 and md_e == count - 1 and d.next_after(md_l) is not None), "M not normalized"
        assert held_runs == self.range_count, (held_runs, self.range_count)
        for ledger, la in self.cache.loaded.items():
            entries = list(la.batches) + list(la.counts)
            for entry, n in la.counts.items():
                assert n >= 1 and entry not in la.bitmap, (ledger, entry, n)
            if la.bitmap:
                entries += [la.bitmap.min(), la.bitmap.max()]
            lowest, highest = min(entries), max(entries)
            if ledger == md_l:
                assert lowest > md_e, (ledger, lowest, md_e)
                assert (md_e + 1) not in la.bitmap, "M not advanced"
            assert d.end(ledger) < 0 or highest < d.end(ledger), (ledger, highest, d.end(ledger))
            for entry, (size, mask) in la.batches.items():
                assert entry not in la.bitmap
                assert 0 < mask < (1 << size) - 1, (entry, size, mask)
