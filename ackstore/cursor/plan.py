"""The flush protocol of one cursor: prepare a plan, encode it, write it, then commit or abort.

The store's group flush is four steps, like a two-phase commit:

1. ``plan = cursor._prepare_flush()`` under the store lock: what changed since the last
   marker is taken from the cursor's pending sets and copied into a :class:`FlushPlan`:
   the ledgers that need a new record (snapshots), the acks that ride in the marker, the
   marker's fields (a PIP-299 truncated plan when the ranges exceed the cap). The ledgers
   the plan carries are pinned (not evictable) until it ends. If this raises, the pending
   sets are put back before the exception leaves. The common plan (a marker of a few acks
   in ledgers that have a record) is a :class:`MarkerPlan`, encoded here from the
   cursor's own sets: copying them to encode later would cost as much as encoding them.
   The store's flush list forgets the cursor now; a change from here on lists it again.
2. ``plan.encode()`` *outside* the store lock: acks on every cursor go on while the plan's
   records and marker are encoded from its copies (the store's flush lock keeps flushes
   one at a time). If it raises, the store aborts every plan (step 4's ``abort``);
3. the store writes every plan's ``puts`` (and trims each plan's garbage) in ONE
   transaction;
4. ``cursor._commit_flush(plan)`` when it committed: the cursor's pages adopt the new index
   and its marker chain the new marker; ``cursor._abort_flush(plan)`` when it did not:
   everything the plan carried is pending again. (A plan is data: it holds no reference
   back to the cursor that made it.)

:class:`MarkerChain` is where the cursor's log stands (next sequence, newest marker, its
full marker and the delta chain since). Compaction's rewrite plan lives here too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyroaring import BitMap, FrozenBitMap

from ..ledger_acks import NO_ENTRIES, LedgerAcks
from ..storage.log import RecoveredState
from ..storage.records import (
    IndexEntry,
    Marker,
    encode_fixed_marker,
    encode_ledger,
    encode_marker,
    first_slot_value,
    log_key,
    split_slot_key,
)
from . import lane
from .chain import MarkerChain, full_marker
from .lane import OTHER, MarkerPlan, counts_since, prune_counts
from .pages import Pending

if TYPE_CHECKING:
    from ..config import CursorConfig
    from .pages import Pages
    from .state import AckState

__all__ = [
    "AnyPlan",
    "FlushPlan",
    "MarkerChain",
    "MarkerPlan",
    "Planner",
    "RewritePlan",
    "say_capped",
]

log = logging.getLogger("ackstore")


MarkerHead = tuple[int, tuple[int, int], tuple[int, int], dict[str, int | str]]
"""what a marker says besides its index: (prev, mark-delete, read position, properties)"""

Cut = tuple[int, int, int, "int | BitMap", dict[int, tuple[int, int]]]
"""a PIP-299 truncated marker's cut, :func:`cut_print`'s: (ledger, cap, the highest entry
held of the ledger or -1 for all of it, its acks there or their number, partial batches)"""


class FlushPlan(lane.Plan):
    """One cursor's part of a group flush: what to encode (``records``: snapshots of the
    ledgers that get a new record; the marker), then the records to put (ledger records,
    then the marker), the garbage to trim, and what to do when the transaction commits or
    fails. It has the fields a :class:`~ackstore.cursor.lane.MarkerPlan` has (the group
    flush and the commit read them alike), and these of its own."""

    __slots__ = ("cut", "head", "index", "pending", "rebased", "records")  # and lane.Plan's

    records: list[tuple[int, int, LedgerAcks]]
    """(seq, ledger, snapshot) to encode"""
    head: MarkerHead
    index: dict[int, IndexEntry | None]
    """the marker's index"""
    pending: Pending
    """what it took from the cursor (given back if it is not written)"""
    rebased: frozenset[int]
    """ledgers this plan writes a new base record of"""
    cut: Cut | None
    """a PIP-299 marker's cut (:func:`cut_print`), None for any other plan"""

    def __init__(
        self,
        cursor_id: int,
        records: list[tuple[int, int, LedgerAcks]],
        head: MarkerHead,
        index: dict[int, IndexEntry | None],
        changes: dict[int, IndexEntry | None],
        full: bool,
        marker_seq: int,
        pending: Pending,
        pinned: set[int],
        persisted_ranges: int,
    ) -> None:
        meta, dropped = pending.meta_dirty, pending.vanished
        self._start(cursor_id, changes, full, marker_seq, pinned, meta, persisted_ranges, dropped)
        self.records = records
        self.head = head
        self.index = index
        self.pending = pending
        self.rebased = frozenset()
        self.cut = None

    def encode(self) -> None:
        """Step 2, outside the store lock: the plan's ledger records and marker, from the
        copies ``prepare`` made (nothing here reads the cursor). O(what the plan carries);
        a marker takes the fixed layout (``encode_fixed_marker``) unless it is truncated."""
        cid = self.cursor_id
        puts: list[tuple[bytes, bytes]] = []
        nbytes = 0
        if self.records:
            puts = [(log_key(cid, seq), encode_ledger(ledger, acks, cid)) for seq, ledger, acks in self.records]
            nbytes = sum(len(k) + len(v) for k, v in puts)
        prev, md, rp, props = self.head
        if self.truncated:  # PIP-299: the msgpack form, which says so
            value = encode_marker(Marker(True, prev, md, rp, props, self.index, True, {"c": cid}))
        else:
            value = encode_fixed_marker(prev, md, rp, props, sorted(self.index.items()), cid, self.full)
        puts.append((log_key(cid, self.marker_seq), value))
        self.puts = puts
        self.marker_bytes = len(value)
        self.nbytes = nbytes + 16 + len(value)


AnyPlan = FlushPlan | MarkerPlan
"""a plan of either kind: what the group flush and a cursor's commit and abort take"""


@dataclass(slots=True)
class RewritePlan:
    """Compaction's plan for one cursor: every ledger's record from ``start`` on, then one
    full marker. ``items`` are ``(ledger, runs, record bytes or the old record's sequence)``
    (swapped-out ledgers are copied, not decoded)."""

    start: int
    items: list[tuple[int, int, bytes | int]]
    marker: bytes
    index: dict[int, IndexEntry] = field(default_factory=dict)  # the new log's index
    state: bool = False  # the marker is a state marker holding every ledger (no items)
    slot: int = -1  # the state slot the state marker goes to (-1: its log key)


@dataclass(slots=True)
class _Draft:
    """What the planner decided for one plan, before it is sealed: the records to write, the
    index changes and the marker's index, full or not, what a full marker keeps alive, what
    it took from the cursor, the ledgers it carries, the ranges it persists (and for a
    PIP-299 marker, that it is truncated and what stays dirty), and whether a full one trims."""

    records: list[tuple[int, int, LedgerAcks]]
    changes: dict[int, IndexEntry | None]
    index: dict[int, IndexEntry | None]
    full: bool
    live: frozenset[int]
    pending: Pending
    pinned: set[int]
    persisted_ranges: int
    truncated: bool = False
    keep_dirty: frozenset[int] = frozenset()
    cut: Cut | None = None  # a truncated marker's cut (:func:`cut_print`)
    trim: bool = True  # a full marker trims the log below it (:meth:`MarkerChain.trim_due`)


def cut_print(ledger: int, la: LedgerAcks, limit: int, through: int = -1) -> Cut:
    """What a PIP-299 truncated marker's cut through ``ledger`` (whose acks are ``la``)
    depends on, under the cap ``limit``, in a form that changes whenever what the marker
    holds of ``ledger`` does between two flushes: ``through``, the highest entry it holds
    (the end of the cap's last run: its acks at or below, counts and partial batches
    below), or -1 when it holds the ledger whole. The print is ``(ledger, limit,
    through, acks, batches)``: ``acks`` the ledger's acks at or below ``through + 1`` (an
    ack of the entry after the last run would lengthen it), or for a whole ledger their
    number (acks are only added there between two flushes); ``batches`` the partial
    batches it holds. Delivery counts are not in it: the truncated flush forgets the
    ledgers' ``counts_added`` when it takes the state, so a count set since is there, and
    :meth:`Planner._cut_holds` looks for one at or below the cut, counts set by hand
    included (a move of the mark-delete position or a reset marks the cursor's meta dirty
    or leaves no cut to compare). O(the acks held at or below ``through`` + batches), not
    O(what the ledger holds above it: the new acks and counts of an active ledger)."""
    if through < 0:
        return ledger, limit, -1, len(la.bitmap), dict(la.batches)
    below = {e: b for e, b in la.batches.items() if e < through} if la.batches else NO_ENTRIES
    return ledger, limit, through, la.bitmap & BitMap(range(through + 2)), below


def say_capped(topic: str, name: str, ranges: int, limit: int, over: bool) -> None:
    """Say when a cursor's acks stop (and start again) being persisted whole: one WARNING
    when its range count first exceeds its PIP-299 cap ``limit`` at a flush (``over``), one
    INFO when it is back under. O(1)."""
    if over:
        log.warning(
            "ackstore: cursor %s/%s has %d ack ranges, over its max_unacked_ranges_to_persist=%d: "
            "flushes now persist only the lowest %d ranges; after a crash the acks in the other %d "
            "ranges are lost and those messages redelivered",
            topic,
            name,
            ranges,
            limit,
            limit,
            ranges - limit,
        )
    else:
        log.info(
            "ackstore: cursor %s/%s is back to %d ack ranges (cap %s): flushes persist all of them again",
            topic,
            name,
            ranges,
            limit or "none",
        )


class Planner:
    """Prepares, commits and aborts the flush plans of one cursor (and its rewrite plans)."""

    __slots__ = ("cursor_id", "state", "pages", "chain", "cap", "full_every", "history")

    cursor_id: int
    state: AckState
    pages: Pages
    chain: MarkerChain
    cap: int
    full_every: int
    history: int

    def __init__(self, cursor_id: int, state: AckState, pages: Pages, chain: MarkerChain, config: CursorConfig) -> None:
        self.cursor_id = cursor_id
        self.state = state
        self.pages = pages
        self.chain = chain
        self.configure(config)

    def configure(self, config: CursorConfig) -> None:
        """Plan with ``config`` from now on: the bounds a flush reads of it. O(1)."""
        self.cap = config.max_unacked_ranges_to_persist
        self.full_every = config.full_marker_every
        self.history = config.history_seconds

    # -- prepare -------------------------------------------------------------------------------

    def prepare(self) -> AnyPlan | None:
        """Take what changed since the last marker (None: nothing did). The common change
        is taken whole by :func:`~ackstore.cursor.lane.take_marker` (a marker plan, encoded
        here); any other is copied into a plan that encodes it later, outside the lock.
        Exception-safe: on error the pending sets are back."""
        plan = lane.take_marker(self)
        return plan if plan is not OTHER else self.prepare_other()

    def prepare_other(self) -> FlushPlan | None:
        """:meth:`prepare` of a change the marker lane left to the general path (the group
        flush calls this itself when the lane said OTHER): a PIP-299 truncated plan, or a
        plan of records and a marker."""
        pages, state, chain = self.pages, self.state, self.chain
        limit = self.cap
        over = limit and state.range_count > limit
        if over or chain.over_cap:  # over the cap now, or it was at the last flush
            self._watch_cap()
        pending = pages.take_pending(state.take_meta_dirty())
        if not pending.worth_a_marker(pages.index):
            return None
        if over and self._cut_holds(pending):  # what the newest marker persists is still so
            pages.restore(pending)
            return None
        try:
            if over:
                return self._prepare_truncated(pending, limit)
            return self._prepare(pending)
        except BaseException:
            pages.restore(pending)
            state.restore_meta(pending.meta_dirty)
            raise

    def _cut_holds(self, pending: Pending) -> bool:
        """Whether the newest marker, a PIP-299 truncated one, still holds the lowest ranges
        exactly, so that the truncated marker this flush would write is the same: nothing
        changed at or below the ledger its cut went through but for that ledger's acks,
        counts and batches above the cut (:func:`cut_print`, under the same cap; a count set
        since the last truncated flush, or the last flush that looked, is in
        ``counts_added``). Changes above it stay dirty, as a truncated marker leaves them.
        O(dirty ledgers + the cut's print + the counts set since the last flush)."""
        chain, cut = self.chain, self.chain.cut
        if cut is None or not chain.truncated or pending.meta_dirty or pending.unmarked or pending.vanished:
            return False
        ledger, through = cut[0], cut[2]
        for dirty in pending.dirty:
            if dirty < ledger:
                return False
            if dirty == ledger:
                la = self.pages.cache.loaded.get(ledger)
                if la is None or cut_print(ledger, la, self.cap, through) != cut:
                    return False
                if la.counts_added:
                    if through < 0 or min(la.counts_added) < through:
                        return False
                    if la.added is None:  # (no delta reads them: the counts looked at go, so
                        la.counts_added = NO_ENTRIES  # the next flush looks at its own only)
        return True

    def _watch_cap(self) -> None:
        """:func:`say_capped` when the range count crossed the cap since the last flush."""
        chain, state, limit = self.chain, self.state, self.cap
        over = bool(limit) and state.range_count > limit
        if over != chain.over_cap:
            say_capped(state.topic.name, state.name, state.range_count, limit, over)
        chain.over_cap = over

    def _prepare(self, pending: Pending) -> FlushPlan:
        pages, chain = self.pages, self.chain
        dirty, vanished, unmarked = pending.dirty, pending.vanished, pending.unmarked
        cache, index = pages.cache, pages.index
        loaded = cache.loaded
        due = chain.full_due(self.full_every)
        named = 0  # u32s a full marker would repeat that the chain named already
        records: list[tuple[int, int, LedgerAcks]] = []
        changes: dict[int, IndexEntry | None] = {}
        marker_index: dict[int, IndexEntry | None] = {}  # a delta marker's (a full one's is built below)
        rebased: list[int] = []
        pinned: set[int] = set()  # the dirty ledgers this plan carries
        for ledger in sorted(dirty):
            la = loaded.get(ledger)
            if not la:
                continue
            pinned.add(ledger)
            base = index.get(ledger)
            added = la.added
            if base is not None and added is not None and (delta := lane.delta_of(added, la))[0]:
                counts = delta[1]
                # a few acks (and counts) since its record: the marker carries them, the
                # ledger is not rewritten
                adds = FrozenBitMap(added)
                prune_counts(la)
                changes[ledger] = entry = IndexEntry(base.seq, la.runs, adds, counts)
                if base.adds or base.counts:
                    # a delta marker names only what changed since the chain last named it
                    since = counts_since(counts, base.counts) if counts else None
                    named += len(base.adds or ()) + 2 * (len(counts or ()) - len(since or ()))
                    entry = IndexEntry(base.seq, la.runs, adds - base.adds if base.adds else adds, since)
                marker_index[ledger] = entry
                continue
            seq = chain.alloc()
            records.append((seq, ledger, la.snapshot()))
            cache.measure(la)  # the snapshot run-optimized the bitmap, which can change its size
            changes[ledger] = marker_index[ledger] = IndexEntry(seq, la.runs)
            rebased.append(ledger)
            la.added = BitMap()  # acks from now on are relative to the new record
            la.counts_added = NO_ENTRIES
        for ledger in unmarked:  # written back by eviction since the last marker: a whole record, no adds
            if ledger not in changes and ledger in index:
                changes[ledger] = marker_index[ledger] = index[ledger]
        for ledger in vanished:
            if ledger not in changes and ledger in index and ledger not in cache:
                changes[ledger] = marker_index[ledger] = None
        live: frozenset[int] = frozenset()
        # covering: every ledger of the index changed (changes may name new ledgers too);
        # the count first, so a flush of a few of many ledgers does not walk the index
        covering = len(changes) >= len(index) and all(ledger in changes for ledger in index)
        full = full_marker(due, covering, named)  # the lane's rule
        if full:
            marker_index = dict(index)
            for ledger, change in changes.items():
                if change is None:
                    marker_index.pop(ledger, None)
                else:
                    marker_index[ledger] = change
            live = frozenset(e.seq for e in marker_index.values() if e is not None)
        try:
            trim = full and chain.trim_due(due)
            plan = self._seal(
                _Draft(records, changes, marker_index, full, live, pending, pinned, self.state.range_count, trim=trim)
            )
        except BaseException:
            self._unrebase(rebased)
            raise
        if rebased:
            plan.rebased = frozenset(rebased)
        return plan

    def _seal(self, draft: _Draft) -> FlushPlan:
        """The plan of ``draft``: the marker's fields copied, what it carries pinned."""
        state, chain = self.state, self.chain
        md = state.md
        # the read position is not persisted (a restart reads again from M + 1); the
        # marker's field keeps the layout and holds M + 1, never where reads stood
        head = (chain.marker_seq, (md[0], md[1]), (md[0], md[1] + 1), dict(state.properties))
        marker_seq = chain.alloc()
        self.pages.pin(draft.pinned)
        plan = FlushPlan(
            self.cursor_id,
            draft.records,
            head,
            draft.index,
            draft.changes,
            draft.full,
            marker_seq,
            draft.pending,
            draft.pinned,
            draft.persisted_ranges,
        )
        if draft.full:
            if draft.trim:  # O(ledgers): only full markers trim
                lane.trims(plan, chain, lane.live_records(chain, self.pages.index))
            plan.full_live = draft.live | {marker_seq}
        if draft.truncated:
            plan.truncated, plan.keep_dirty, plan.cut = True, draft.keep_dirty, draft.cut
        return plan

    def _prepare_truncated(self, pending: Pending, limit: int) -> FlushPlan:
        """PIP-299: a full marker holding only the lowest ``limit`` ranges.

        Ledgers wholly under the limit are persisted as usual; the ledger the limit cuts
        through gets a record of its lowest ranges only (its whole state stays in memory
        and dirty); ledgers above are left out of the marker. A crash loses what was left
        out: those messages are redelivered.
        """
        pages, chain = self.pages, self.chain
        cache, own = pages.cache, pages.index
        dirty, vanished = pending.dirty, pending.vanished
        records: list[tuple[int, int, LedgerAcks]] = []
        changes: dict[int, IndexEntry | None] = {}
        index: dict[int, IndexEntry | None] = {}
        keep_dirty: set[int] = set()
        cut: Cut | None = None
        left = limit
        for held in cache.loaded.values():  # no deltas against records a truncated marker may drop
            held.added = None  # (so counts_added says nothing a record needs: from now on it
            if held.counts_added:  # holds the counts set since this take, which the cut reads)
                held.counts_added = NO_ENTRIES
        for ledger in sorted(cache.known()):
            la = cache.loaded.get(ledger)
            runs = la.runs if la is not None else own[ledger].runs
            if left <= 0:
                if ledger in dirty:
                    keep_dirty.add(ledger)
                continue
            if runs <= left:
                if runs == left and la is not None:  # the cut ends with this ledger
                    cut = cut_print(ledger, la, limit)
                if ledger in dirty and la is not None:
                    seq = chain.alloc()
                    records.append((seq, ledger, la.snapshot()))
                    cache.measure(la)
                    changes[ledger] = index[ledger] = IndexEntry(seq, runs)
                else:
                    index[ledger] = own[ledger]
                left -= runs
                continue
            whole = pages.peek(ledger)
            assert whole is not None
            part = whole.prefix(left)  # memory as what it writes, whatever the ledger holds above
            cut = cut_print(ledger, whole, limit, part.bitmap.max())
            seq = chain.alloc()
            records.append((seq, ledger, part))
            index[ledger] = IndexEntry(seq, part.runs)
            if ledger in dirty:
                keep_dirty.add(ledger)
            left = 0
        for ledger in vanished:
            if ledger in own and ledger not in cache:
                changes[ledger] = None
        pinned = {ledger for ledger, entry in changes.items() if entry is not None}
        live = frozenset(e.seq for e in index.values() if e is not None)
        draft = _Draft(records, changes, index, True, live, pending, pinned, limit, True, frozenset(keep_dirty), cut)
        return self._seal(draft)

    # -- commit / abort ------------------------------------------------------------------------

    def commit(self, plan: AnyPlan) -> None:
        """The flush transaction committed: the pages adopt the plan's index, the chain its
        marker (what the lane's ``commit_marker`` does for a marker plan)."""
        self.pages.adopt(plan.changes, plan.keep_dirty)
        self.chain.adopt(plan)
        self.chain.cut = plan.cut if isinstance(plan, FlushPlan) else None

    def _unrebase(self, rebased: Iterable[int]) -> None:
        """A new base was planned but will not be written: the ledgers' acks since their old
        base are unknown now, so their next flush writes a base again."""
        loaded = self.pages.cache.loaded
        for ledger in rebased:
            la = loaded.get(ledger)
            if la is not None:
                la.added = None

    def abort(self, plan: AnyPlan) -> None:
        """The flush transaction failed: everything the plan carried is pending again (and
        a truncated plan's take forgot the counts set before it: no cut to compare)."""
        self._unrebase(plan.rebased)
        self.chain.cut = None
        if type(plan) is MarkerPlan:  # a state marker not written: its slot still holds the older one
            key, value = plan.puts[-1]
            slotted = split_slot_key(key)
            if slotted is not None:
                slot = slotted[1]
                self.chain.slot = 1 - slot
                if first_slot_value(value):  # the slot's first value: the slot is empty still
                    self.chain.slots &= ~(1 << slot)
        pending = plan.pending
        self.pages.restore(pending)
        self.state.restore_meta(pending.meta_dirty)

    # -- compaction --------------------------------------------------------------------------

    def rewrite_plan(self) -> RewritePlan:
        """A fresh log for compaction: every ledger's record + one full marker, or for a small
        cursor one state marker."""
        pages, chain, state = self.pages, self.chain, self.state
        cache = pages.cache
        if state.range_count <= lane.STATE_MAX_RUNS:
            for ledger in list(cache.swapped):  # a small cursor's ledgers, read to write them as one
                pages.get(ledger)  # (under a small budget a swap-in may write back another ledger)
        start = chain.next_seq  # past every record, those written back just now too: the copies' sources
        if lane.small(pages, state):
            value = lane.state_value(self.cursor_id, state, sorted(cache.loaded.items()))
            if value is not None:
                chain.next_seq = start + 1
                whole = {ledger: IndexEntry(start, la.runs) for ledger, la in cache.loaded.items()}
                slot = lane.state_slot(self.history, chain)[0]  # as a flush would put it
                return RewritePlan(start, [], value, whole, state=True, slot=slot)
        items: list[tuple[int, int, bytes | int]] = []
        kept: dict[int, IndexEntry] = {}  # swapped-out ledgers keep their acks and counts since their record
        for ledger in sorted(cache.known()):
            la = cache.loaded.get(ledger)
            if la is not None:
                items.append((ledger, la.runs, encode_ledger(ledger, la, self.cursor_id)))
                cache.measure(la)
            else:
                entry = pages.index[ledger]
                items.append((ledger, entry.runs, entry.seq))
                if entry.adds or entry.counts:
                    kept[ledger] = entry
        index = {
            ledger: kept[ledger]._replace(seq=start + i) if ledger in kept else IndexEntry(start + i, runs)
            for i, (ledger, runs, _) in enumerate(items)
        }
        md = (state.md[0], state.md[1])
        marker = encode_fixed_marker(
            -1, md, (md[0], md[1] + 1), dict(state.properties), sorted(index.items()), self.cursor_id, full=True
        )
        chain.next_seq = start + len(items) + 1
        return RewritePlan(start, items, marker, index)

    def adopt_rewrite(self, plan: RewritePlan) -> None:
        """The compaction transaction committed: the log is now exactly the planned one."""
        pages, chain = self.pages, self.chain
        start, items = plan.start, plan.items
        pages.index = dict(plan.index)
        for la in pages.cache.loaded.values():  # rewritten whole: nothing added since
            la.added = None if plan.state else BitMap()  # (never a delta against a state marker)
            la.counts_added = NO_ENTRIES
        chain.marker_seq = chain.full_seq = start + len(items)
        chain.full_live = frozenset(e.seq for e in pages.index.values()) | {chain.marker_seq}
        chain.deltas = chain.chain_bytes = chain.untrimmed = 0  # a fresh log: no garbage
        chain.floor, chain.kept = start, ()
        if plan.slot >= 0:  # the other slot's older state went with the rewrite
            chain.slot, chain.slots = plan.slot, 1 << plan.slot
        chain.full_bytes = len(plan.marker)
        chain.force_full = False
        chain.cut = None
        pages.settled()
        self.state.meta_dirty = False

    def differs_from(self, recovered: RecoveredState, marker_seq: int) -> str | None:
        """How ``recovered`` (every record loaded) differs from the cursor, or None when the same."""
        resolved = recovered.resolved
        if resolved is None or resolved.seq != marker_seq:
            return f"recovery found marker {None if resolved is None else resolved.seq}, not {marker_seq}"
        m, state, pages = resolved.marker, self.state, self.pages
        if tuple(m.mark_delete) != tuple(state.md):
            return f"mark-delete {m.mark_delete}, not {state.md}"
        if m.properties != state.properties:
            return "the properties differ"
        if set(recovered.ledgers) != pages.known():
            return f"ledgers {sorted(recovered.ledgers)[:8]}, not {sorted(pages.known())[:8]}"
        for ledger, la in recovered.ledgers.items():
            mine = pages.cache.loaded.get(ledger)
            if mine is None:
                if la.runs != pages.index[ledger].runs:
                    return f"ledger {ledger} has {la.runs} ranges, not {pages.index[ledger].runs}"
            elif mine.bitmap != la.bitmap or mine.batches != la.batches:
                return f"ledger {ledger}'s acks differ"
        return None
