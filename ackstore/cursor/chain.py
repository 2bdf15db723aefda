"""Where a cursor's log stands: :class:`MarkerChain` (the next sequence, the newest marker,
the full marker and the delta chain behind it, the state slots, the trim floor, the flush
counters) and the rules that are the chain's own: when a full marker is due
(:meth:`MarkerChain.full_due`, with :data:`SMALL_CHAIN`), whether a flush's marker is full
(:func:`full_marker`) and whether that one trims (:meth:`MarkerChain.trim_due`, with
:data:`GARBAGE_FACTOR`), and what a trim leaves below its floor (:func:`floor_after`, with
:data:`EXACT_TRIM`). A plan of any kind is adopted here
once it was written (:meth:`MarkerChain.adopt`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from ..fields import native
from ..stats import NO_RECOVERY

if TYPE_CHECKING:
    from ..storage.index_entry import IndexEntry
    from ..storage.log import RecoveredState

__all__ = [
    "EXACT_TRIM",
    "GARBAGE_FACTOR",
    "MarkerChain",
    "SMALL_CHAIN",
    "Written",
    "floor_after",
    "full_marker",
    "garbage_due",
    "next_slot",
    "outgrown",
]

SMALL_CHAIN = 64
"""a chain of delta markers may grow to the size of its full marker, or to this many bytes for a
small cursor; and a full marker is written instead of a delta when it costs at most this many
bytes more (a reopen reads the whole chain: a small cursor then reads one marker)"""
GARBAGE_FACTOR = 4
"""a full marker that was not due trims the log only once what was written since the last
trim outgrows this many times the chain's allowance (a trim is a scan of the cursor's keys)"""
EXACT_TRIM = 8
"""a trim whose cursor's log is known to hold nothing below a sequence at most this many
below the trim's bound deletes those sequences by key instead of scanning the cursor's keys"""
if native is not None:  # the compiled rules (``ackstore/_native.h``'s) apply the same bounds
    native.chain_setup(SMALL_CHAIN, GARBAGE_FACTOR)


class Written(Protocol):
    """What the chain reads of a plan that was written (a marker plan or a flush plan)."""

    @property
    def truncated(self) -> bool: ...
    @property
    def persisted_ranges(self) -> int: ...
    @property
    def marker_seq(self) -> int: ...
    @property
    def full(self) -> bool: ...
    @property
    def full_live(self) -> Collection[int]: ...
    @property
    def marker_bytes(self) -> int: ...
    @property
    def gc_below(self) -> int: ...
    @property
    def gc_live(self) -> Collection[int]: ...
    @property
    def nbytes(self) -> int: ...


def full_marker(due: bool, covering: bool, named: int) -> bool:
    """Whether a flush's marker is a full one, on every path that writes a marker: when one
    is due (:meth:`MarkerChain.full_due`), or when ``covering`` (every ledger of the cursor
    changed, so the marker's items are its whole index) and the full marker repeats at most
    :data:`SMALL_CHAIN` bytes the chain named already (``named`` u32s: acks and counts since
    a record; then it costs what the delta costs, and a reopen reads one marker and walks no
    chain). The compiled twin of this and the rules below is ``_native.h``'s, one for every
    compiled part. O(1)."""
    return due or (covering and 4 * named <= SMALL_CHAIN)


def allowance(full_bytes: int) -> int:
    """The bytes a chain of delta markers may reach past a full marker of ``full_bytes``
    before the next marker is a full one: the full marker's own size, or :data:`SMALL_CHAIN`
    when that is smaller. O(1)."""
    return max(full_bytes, SMALL_CHAIN)


def outgrown(deltas: int, every: int, chain_bytes: int, full_bytes: int) -> bool:
    """Whether a chain's next marker must be full because of the chain itself: ``every``
    deltas were written since its full marker, or their bytes outgrew the full marker's
    (or :data:`SMALL_CHAIN`). :meth:`MarkerChain.full_due` adds what only the parts know;
    the small form's chain asks this alone. O(1)."""
    return deltas >= every or chain_bytes > allowance(full_bytes)


def garbage_due(untrimmed: int, full_bytes: int) -> bool:
    """Whether a full marker that was not due trims all the same: the bytes written since the
    last trim outgrow :data:`GARBAGE_FACTOR` times the chain's allowance. O(1)."""
    return untrimmed > GARBAGE_FACTOR * allowance(full_bytes)


def next_slot(slot: int, slots: int, first_room: int) -> tuple[int, int]:
    """Where a cursor's next state goes and the room its value keeps: the state slot the
    newest state (in ``slot``) is not in, so that one stays to fall back to, and
    ``first_room`` zero bytes when that slot holds no value yet (``slots``: bit 0 and bit 1,
    which slots hold one), so that the values packed in order on a page as they are first
    written can grow a little without moving; 0 for a slot written before. The flush of
    either layout and compaction take it from here (the compiled twin: ``next_slot`` in
    ``ackstore/_native.h``). O(1)."""
    to = 1 - slot
    return to, 0 if slots >> to & 1 else first_room


def floor_after(below: int, keep: Collection[int], was: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """The chain's floor and kept sequences once a trim below ``below`` that kept ``keep``
    ran (``ackstore.cursor.lane.trims``, or a scan: either leaves nothing below ``below`` that ``keep`` does
    not name): ``below`` and the kept ones under it, while they are at most
    :data:`EXACT_TRIM` (a cursor's ledgers' records, often one); past that, the lowest of
    them and none (what a cursor of many ledgers holds, which is not worth copying). The
    kept ones are ``was``, the chain's before, when they are the same (most trims keep the
    same records: no new object a cursor). O(keep)."""
    low = sorted([seq for seq in keep if seq < below])
    if len(low) > EXACT_TRIM:
        return low[0], ()
    kept = tuple(low)
    return below, was if kept == was else kept


class MarkerChain:
    """The log's bookkeeping: sequences, the newest marker, the full marker and delta chain
    behind it, what the last full marker keeps alive, and the flush counters."""

    __slots__ = (
        "next_seq", "marker_seq", "full_seq", "full_live", "deltas", "chain_bytes", "full_bytes", "force_full",
        "truncated", "untrimmed", "over_cap", "persisted_ranges", "flushes", "last_flush_bytes",
        "total_flush_bytes", "floor", "kept", "slot", "slots", "cut", "recovery",
    )  # fmt: skip

    next_seq: int
    marker_seq: int
    full_seq: int
    full_live: Collection[int]
    deltas: int
    chain_bytes: int
    full_bytes: int
    force_full: bool
    truncated: bool
    untrimmed: int
    over_cap: bool
    persisted_ranges: int
    flushes: int
    last_flush_bytes: int
    total_flush_bytes: int
    floor: int
    kept: tuple[int, ...]
    slot: int
    slots: int

    def __init__(self) -> None:
        self.next_seq = 0
        self.marker_seq = -1
        self.full_seq = -1
        self.full_live: Collection[int] = ()
        """the records the newest full marker references, and itself (a marker plan's is a
        tuple: a frozenset costs more than a flush of a one-ack cursor's other work)"""
        self.deltas = 0
        self.chain_bytes = 0
        self.full_bytes = 0
        self.force_full = True
        self.truncated = False
        self.untrimmed = 0  # bytes written since the last trim of the log (or the open)
        self.over_cap = False  # the range count was over the PIP-299 cap at the last flush
        self.persisted_ranges = 0
        self.recovery = NO_RECOVERY
        self.cut: tuple[Any, ...] | None = None
        """the newest marker's PIP-299 cut, as ``plan.cut_print`` gave it (None: it is not
        truncated, or not known: the next flush writes it again)"""
        self.flushes = 0
        self.last_flush_bytes = 0
        self.total_flush_bytes = 0
        self.floor = -1
        """the log's keys hold no record of the cursor below this sequence (-1: not known)
        but the ones ``kept`` names, so a trim deletes those it no longer keeps and the few
        sequences from here by key instead of scanning (``ackstore.cursor.lane.trims``)"""
        self.kept: tuple[int, ...] = ()
        """the sequences below the floor the last trim kept (ascending; at most
        :data:`~ackstore.cursor.EXACT_TRIM` of them: ``lane.floor_after``)"""
        self.slot = 1
        """the state slot the newest state marker is in (the next one goes to the other)"""
        self.slots = 0
        """which state slots hold a value (bit 0, bit 1): a slot's first value reserves room"""

    def load(self, state: RecoveredState, ranges: int) -> None:
        """Stand where recovery left the log (``ranges``: what the marker persisted)."""
        self.next_seq = state.next_seq
        self.slot, self.slots = state.slot, state.slots
        self.recovery = state.report
        self.untrimmed = 0  # what earlier runs left untrimmed goes at this run's first trim
        self.cut = None  # (not known: the next flush over the cap writes its cut)
        # a log with no key at all (a new cursor's) holds nothing below 0: its first state
        # marker, in a slot, leaves its log keys empty (``lane._take_state``)
        self.floor, self.kept = (0 if state.next_seq == 0 and not state.slots else -1), ()
        resolved = state.resolved
        if resolved is None:
            self.marker_seq = self.full_seq = -1
            self.full_live = frozenset()
            self.deltas = self.chain_bytes = self.full_bytes = 0
            self.force_full = True
            self.truncated = False
        else:
            self.marker_seq = resolved.seq
            self.full_seq = resolved.full_seq
            self.full_live = frozenset(resolved.full_index_seqs | {resolved.full_seq})
            self.deltas = resolved.deltas_since_full
            self.chain_bytes = resolved.chain_bytes
            self.full_bytes = resolved.full_bytes
            self.truncated = resolved.marker.truncated
            # after falling back past a broken marker, start a fresh chain
            self.force_full = state.report.markers_skipped > 0
        self.persisted_ranges = ranges

    def _check(
        self,
        every: int,
        index: dict[int, IndexEntry],
        delta_max: int,
        md: tuple[int, int] = (-1, -1),
        changed: Collection[int] = (),
    ) -> None:
        """Assert the chain's invariants: the sequences in order, the full marker cadence
        (``every``), each index entry's acks and counts since its record within the delta
        bound (``delta_max``; in the mark-delete position ``md``'s ledger those above it:
        the acks M passed since the record are one range, which a chain the small form wrote
        names beyond the bound; a ledger ``changed`` since the marker is not asked: its entry
        is the next flush's to write again, and what M passed then may lie above M now, after
        a reset moved M back), the
        slots, and the sequences a trim kept below its floor. (Whether a record the chain
        needs lies below the floor unkept is the log's to say: a state slot holds its
        state below the floor; the crash steps of the state machines read it back. What the
        newest marker persisted under the PIP-299 cap is theirs too: it was written under
        the cap in force then, which ``update_config`` may have lowered since.)"""
        assert self.full_seq <= self.marker_seq < self.next_seq or self.marker_seq < 0, (
            self.full_seq,
            self.marker_seq,
            self.next_seq,
        )
        assert self.deltas <= every, (self.deltas, every)
        for ledger, entry in index.items():
            if ledger in changed:
                continue
            adds = entry.adds
            passed = adds.rank(md[1]) if adds and ledger == md[0] and md[1] >= 0 else 0
            since = len(adds or ()) - passed + len(entry.counts or ())
            assert since <= delta_max, (ledger, since)
        assert self.slot in (0, 1) and 0 <= self.slots <= 3, (self.slot, self.slots)
        assert list(self.kept) == sorted(self.kept) and len(self.kept) <= EXACT_TRIM, self.kept
        assert self.floor < 0 or all(seq < self.floor for seq in self.kept), (self.kept, self.floor)

    def full_due(self, every: int) -> bool:
        """Whether the next marker must be full: a fresh log, after a fallback or a PIP-299
        marker, every ``every`` deltas, or when the chain outgrew its full marker. O(1)."""
        return (
            self.force_full
            or self.truncated
            or self.marker_seq < 0
            or outgrown(self.deltas, every, self.chain_bytes, self.full_bytes)
        )

    def trim_due(self, due: bool) -> bool:
        """Whether a full marker trims the log below it: when it was ``due``, or when the
        bytes written since the last trim outgrow :data:`GARBAGE_FACTOR` times the chain's
        allowance. O(1)."""
        return due or garbage_due(self.untrimmed, self.full_bytes)

    def adopt(self, plan: Written) -> None:
        """``plan``'s marker was written: it is the newest, the start of a new chain if full."""
        self.truncated = plan.truncated
        self.persisted_ranges = plan.persisted_ranges
        self.marker_seq = plan.marker_seq
        if plan.full:
            self.full_seq = plan.marker_seq
            self.full_live = plan.full_live
            self.deltas = 0
            self.chain_bytes = 0
            self.full_bytes = plan.marker_bytes
            self.force_full = False
        else:
            self.deltas += 1
            self.chain_bytes += plan.marker_bytes
        if plan.gc_below >= 0:  # trimmed: below it, only what the trim kept
            self.untrimmed = 0
            self.floor, self.kept = floor_after(plan.gc_below, plan.gc_live, self.kept)
        else:
            self.untrimmed += plan.nbytes
        self.flushes += 1
        self.last_flush_bytes = plan.nbytes
        self.total_flush_bytes += plan.nbytes

    @property
    def in_slots(self) -> bool:
        """Whether the log's keys hold nothing of the cursor: its trims left only its newest
        state, which is in a state slot (the floor is past the newest marker, and nothing
        below it was kept). O(1)."""
        return self.floor > self.marker_seq and not self.kept

    def alloc(self) -> int:
        """The next log sequence."""
        seq = self.next_seq
        self.next_seq += 1
        return seq
