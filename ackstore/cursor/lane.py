"""The marker lane: the plan a cursor makes at a flush, decided in one place and, when it
can be, taken whole in one call.

Most flushes of a busy cursor are one of two plans, each one value encoded under the
store lock from the cursor's own sets, with nothing to copy and nothing to encode later
(a :class:`MarkerPlan`): a *small* cursor's whole state as one state marker
(:func:`small`, :func:`state_value`), or, for a larger one, a marker carrying a few acks
in ledgers that have a record already. :func:`take_marker` decides which plan a cursor
makes (the rules, each once: :func:`small`, :func:`worth_a_delta`, ``MarkerChain.full_due``,
:func:`trims`) and takes it; what it leaves is the planner's general path's
(``Planner.prepare_other``: new ledger records, PIP-299 truncated markers).
:func:`commit_marker` is ``Planner.commit`` of a marker plan once it was written.
:func:`take_all`, :func:`encode_all`, :func:`trim_all` and :func:`commit_all` are the
group flush's loops over its cursors and plans around them (the general path's plans are
encoded by themselves and adopted by the cursor).

A flush of the cursors in the small form (``ackstore.cursor.small``: nearly every cursor)
does not come here; these plan the others (a state the form does not hold: more ranges or
ledgers than it takes, or a cache budget that swaps ledgers out), in Python only.

``take_marker(planner)`` returns None when the cursor is idle (nothing to flush), a
:class:`MarkerPlan` when it took the change, and :data:`OTHER` when the planner's general
path must plan it, having taken nothing: ledgers written back since the last marker, a
PIP-299 cap exceeded now or at the last flush; for a cursor that is not small, ledgers
dropped since the last marker, a changed ledger without a record or with too many acks and
delivery counts since it, a full marker due where a fresh chain must start, or a field
outside the fixed marker layout.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence, Set
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

import lmdb
from pyroaring import BitMap, FrozenBitMap

from ..ledger_acks import NO_ENTRIES, LedgerAcks
from ..storage import codecs
from ..storage.log import trim_records
from ..storage.records import (
    FIXED_FULL,
    FORMAT_VERSION,
    SLOT_RESERVE,
    IndexEntry,
    MarkerItem,
    encode_state_marker,
    entry_of,
    log_key,
    pack_properties,
    seal_slot,
    slot_key,
)
from .chain import EXACT_TRIM, GARBAGE_FACTOR, SMALL_CHAIN, floor_after, full_marker, next_slot
from .pages import Pending

if TYPE_CHECKING:
    from .chain import MarkerChain
    from .pages import Pages
    from .state import AckState

__all__ = [
    "DELTA_MAX_ACKS",
    "DELTA_MAX_SHARE",
    "EXACT_TRIM",
    "GARBAGE_FACTOR",
    "OTHER",
    "Plan",
    "SMALL_CHAIN",
    "STATE_MAX_BYTES",
    "STATE_MAX_EXTRAS",
    "STATE_MAX_RUNS",
    "MarkerPlan",
    "commit_all",
    "commit_marker",
    "counts_since",
    "delta_of",
    "encode_all",
    "floor_after",
    "live_counts",
    "live_records",
    "prune_counts",
    "set_delta_bounds",
    "set_state_bound",
    "small",
    "state_slot",
    "state_value",
    "take_all",
    "take_marker",
    "trim_all",
    "trims",
    "worth_a_delta",
]

DELTA_MAX_ACKS = 64
"""a ledger's acks since its record travel in the marker while they are at most this many..."""
DELTA_MAX_SHARE = 0.125
"""... and at most this fraction of the ledger's acks; past either, a new base record"""
STATE_MAX_RUNS = 512
"""a cursor whose ledgers are all in memory and hold at most this many ranges, and at most
STATE_MAX_EXTRAS partial batches and delivery counts, writes its whole state as one state
marker (format 10) each flush: one value a cursor, which other cursors share a page with.
The counts are a cheap first test; :data:`STATE_MAX_BYTES` is the bound that holds (a run
between scattered holes costs 2-4 bytes, a delivery count 2-3: a subscription holding a
few hundred unacked entries, each delivered, stays in the layout and in the small form)"""
STATE_MAX_EXTRAS = 512
STATE_MAX_BYTES = 1984
"""... of at most this many bytes (its properties count too): in a state slot, with the
sequence (a varint, at most 9 bytes), its CRC (4), the room a slot's first value
reserves (``SLOT_RESERVE``, 8) and its padding to a multiple of 16 bytes, at most 2,008
bytes, under the 2,020 that an LMDB leaf page of 4 KiB holds in the page itself beside a
10-byte key: never on overflow pages of its own (two such states share a page, smaller ones
a few dozen)"""
_C = TypeVar("_C")
_P = TypeVar("_P", bound="Taking")

OTHER: Final = False
"""what :func:`take_marker` returns when the planner's general path must plan the change"""
_EMPTY: frozenset[int] = frozenset()


class Taking(Protocol):
    """What the lane reads of a cursor's planner (``plan.Planner``)."""

    @property
    def cursor_id(self) -> int: ...
    @property
    def state(self) -> AckState: ...
    @property
    def pages(self) -> Pages: ...
    @property
    def chain(self) -> MarkerChain: ...
    @property
    def cap(self) -> int: ...
    @property
    def full_every(self) -> int: ...
    @property
    def history(self) -> int: ...


def worth_a_delta(added: BitMap, la: LedgerAcks, counts: dict[int, int] | None) -> bool:
    """Few acks and counts since the base, compared with the ledger: carry them in the marker.
    ``counts``: those set since the base that still stand (:func:`live_counts`). O(1)."""
    if not la.counts_added:  # the common case; a ledger holds at least as many acks as
        # ranges, so a few acks against many ranges pass without counting its bitmap
        n = len(added)
        return n <= DELTA_MAX_ACKS and (n <= DELTA_MAX_SHARE * la.runs or n <= DELTA_MAX_SHARE * len(la.bitmap))
    n = len(added) + len(counts or ())
    return n <= DELTA_MAX_ACKS and n <= DELTA_MAX_SHARE * (len(la.bitmap) + len(la.counts))


def delta_of(added: BitMap, la: LedgerAcks) -> tuple[bool, dict[int, int] | None]:
    """:func:`worth_a_delta` of a ledger's acks ``added`` since its base, and the counts the
    delta would carry (:func:`live_counts`), looked up only when the acks alone leave room
    for them: O(1) when they do not, O(counts added) else."""
    if len(added) > DELTA_MAX_ACKS:  # (worth_a_delta says no, whatever the counts)
        return False, None
    counts = live_counts(la) if la.counts_added else None
    return worth_a_delta(added, la, counts), counts


def live_counts(la: LedgerAcks) -> dict[int, int] | None:
    """The delivery counts set since the ledger's base record that still stand, or None: an
    ack takes a count away from ``counts`` and, on the hot path, leaves ``counts_added``
    alone, so those are left out here. Nothing is changed (:func:`prune_counts` does
    that). O(counts added)."""
    counts = la.counts
    return {e: n for e, n in la.counts_added.items() if e in counts} or None


def prune_counts(la: LedgerAcks) -> None:
    """Drop from ``counts_added`` the entries an ack took the count of. O(counts added)."""
    added, counts = la.counts_added, la.counts
    for e in [e for e in added if e not in counts]:
        del added[e]


def counts_since(counts: dict[int, int] | None, named: dict[int, int] | None) -> dict[int, int] | None:
    """The counts a delta marker names: those of ``counts`` set since the chain last named
    them (``named``, the index entry's). O(counts)."""
    if not counts or not named:
        return counts
    return {e: n for e, n in counts.items() if named.get(e) != n} or None


class Plan:
    """What every plan holds, the group flush and the commit read: :class:`MarkerPlan` and
    the general path's ``plan.FlushPlan`` derive from it."""

    __slots__ = (
        "cursor_id", "changes", "full", "marker_seq", "pinned", "meta_dirty", "persisted_ranges", "puts",
        "marker_bytes", "nbytes", "gc_below", "gc_live", "trim_keys", "full_live", "dropped", "truncated",
        "keep_dirty",
    )  # fmt: skip

    cursor_id: int
    changes: dict[int, IndexEntry | None]
    full: bool
    marker_seq: int
    pinned: Collection[int]
    meta_dirty: bool
    persisted_ranges: int
    puts: list[tuple[bytes, bytes]]
    marker_bytes: int
    nbytes: int
    gc_below: int
    gc_live: Collection[int]
    trim_keys: tuple[bytes, ...] | None
    full_live: Collection[int]
    dropped: Set[int]
    truncated: bool
    keep_dirty: Set[int]

    def _start(
        self,
        cursor_id: int,
        changes: dict[int, IndexEntry | None],
        full: bool,
        marker_seq: int,
        pinned: Collection[int],
        meta_dirty: bool,
        persisted_ranges: int,
        dropped: Set[int],
    ) -> None:
        """The fields every plan starts with: what it changes and took, and nothing put,
        trimmed or kept yet. O(1)."""
        self.cursor_id = cursor_id
        self.changes = changes
        self.full = full
        self.marker_seq = marker_seq
        self.pinned = pinned
        self.meta_dirty = meta_dirty
        self.persisted_ranges = persisted_ranges
        self.dropped = dropped
        """the cursor's dropped ledgers it took (a state plan's, the set itself; an abort
        gives them back as they were, one made again since among them)"""
        self.puts = []
        self.marker_bytes = self.nbytes = 0
        self.gc_below = -1  # delete unreferenced records below this sequence (-1: none)
        self.gc_live = _EMPTY  # what the previous full marker references
        self.trim_keys = None  # the trim's keys, when known (None: a scan)
        self.full_live = ()  # what this marker references, if full
        self.truncated = False  # PIP-299: only the lowest ranges were persisted
        self.keep_dirty = _EMPTY  # ledgers not (wholly) in this marker: still to persist


class MarkerPlan(Plan):
    """The common plan: one marker, encoded when it was taken under the store lock (every
    changed ledger gained a few acks since its record). It holds what it took from the
    cursor as two fields (``pinned``: the dirty ledgers it took, often its ``changes``, whose
    keys they are; ``meta_dirty``) instead of a :class:`Pending`, which only an abort builds."""

    __slots__ = ()
    records: tuple[()] = ()
    """what a FlushPlan may carry and this one never does"""
    rebased: frozenset[int] = _EMPTY

    def __init__(
        self,
        cursor_id: int,
        changes: dict[int, IndexEntry | None],
        full: bool,
        marker_seq: int,
        pinned: Collection[int],
        meta_dirty: bool,
        persisted_ranges: int,
        key: bytes,
        value: bytes,
    ) -> None:
        self._start(cursor_id, changes, full, marker_seq, pinned, meta_dirty, persisted_ranges, _EMPTY)
        self.puts = [(key, value)]
        self.marker_bytes = len(value)
        self.nbytes = len(key) + len(value)

    @property
    def pending(self) -> Pending:
        """What it took from the cursor, as a :class:`Pending` (an abort gives it back): the
        ledgers it changed, those dropped since the last marker (a state plan takes them;
        none of this lane's other plans), and whether the positions or properties changed."""
        return Pending(self.pinned, self.dropped, _EMPTY, self.meta_dirty)


def live_records(chain: MarkerChain, index: dict[int, IndexEntry]) -> frozenset[int]:
    """What a trim keeps: the full marker's records and every record the cursor's index
    names (swapped-out ledgers a truncated marker left out among them). O(ledgers)."""
    return frozenset([*chain.full_live, *(e.seq for e in index.values())])


def trims(plan: Plan, chain: MarkerChain, keep: Collection[int]) -> None:
    """``plan`` trims the log below the chain's full marker, keeping ``keep``. When the chain
    knows the log's keys hold nothing below a sequence (its floor) at most
    :data:`EXACT_TRIM` below but the few the last trim kept (``chain.kept``), the plan names
    the keys to delete (``trim_keys``): those of the kept ones ``keep`` no longer names,
    then those of the sequences from the floor that it does not name. What a small cursor's
    every flush trims is the one state marker before the one it keeps; what a cursor of
    the marker layout trims, the markers since its last trim (its ledgers' records kept
    below the floor). Else the write scans the cursor's keys below the bound.
    O(EXACT_TRIM)."""
    below, floor = chain.full_seq, chain.floor
    plan.gc_below, plan.gc_live = below, keep
    if floor >= 0 and below - floor <= EXACT_TRIM:
        cid = plan.cursor_id
        gone = [seq for seq in chain.kept if seq not in keep]
        gone += [seq for seq in range(floor, below) if seq not in keep]
        plan.trim_keys = tuple([log_key(cid, seq) for seq in gone])


def _took(planner: Taking, seq: int, taken: Collection[int], dropped: bool) -> None:
    """What every plan the lane takes does last, having changed nothing before: the
    cursor's next sequence is past the plan's marker ``seq``, its dirty set is empty (the
    plan holds the ledgers it took, ``taken`` (:func:`_taken`), pinned until it ends: not
    evictable; the ack state holds the set itself, so it is emptied, not replaced) and so
    is its set of dropped ledgers when ``dropped`` (a state plan names them), and the
    positions and properties are no longer changed."""
    pages = planner.pages
    planner.chain.next_seq = seq + 1
    pages.dirty.clear()
    if dropped:
        pages.vanished = _EMPTY
    pages.pinned = taken
    planner.state.meta_dirty = False


def _taken(dirty: set[int], changes: dict[int, IndexEntry | None]) -> Collection[int]:
    """What a plan whose index ``changes`` name every dirty ledger holds of the dirty set
    (``Pending.dirty``, what an abort makes dirty again): ``changes`` itself when its keys
    are the dirty ledgers (a marker plan's are, a state plan's when every ledger of the
    cursor was dirty and none was dropped: the steady cursor's), else a copy. A flush
    of thousands of cursors then copies no set for most of them: a set made and freed a
    cursor, each a few cache lines a flush goes through. O(dirty)."""
    if len(changes) == len(dirty) and all(ledger in dirty for ledger in changes):
        return changes
    return set(dirty)


def small(pages: Pages, state: AckState) -> bool:
    """Whether a cursor's whole state is small enough for one state marker: every ledger in
    memory, at most :data:`STATE_MAX_RUNS` ranges and :data:`STATE_MAX_EXTRAS` partial
    batches and delivery counts. O(ledgers)."""
    if pages.swapped or state.range_count > STATE_MAX_RUNS:
        return False
    extras = 0
    for la in pages.loaded.values():
        if la.batches or la.counts:
            extras += len(la.batches) + len(la.counts)
    return extras <= STATE_MAX_EXTRAS


def state_slot(history: int, chain: MarkerChain) -> tuple[int, int]:
    """Where a state marker goes and the room its value keeps: the state slot the newest
    state is not in (that one is what a damaged new one falls back to) and its room
    (:func:`~ackstore.cursor.chain.next_slot`), or ``(-1, 0)``, its log key, when the cursor
    keeps ``history`` (seconds; a history point names its marker by log key). O(1)."""
    return (-1, 0) if history else next_slot(chain.slot, chain.slots, SLOT_RESERVE)


def state_value(cursor_id: int, state: AckState, ledgers: Iterable[tuple[int, LedgerAcks]]) -> bytes | None:
    """A small cursor's whole state as one state marker (``ledgers`` ascending), or None
    when it is over :data:`STATE_MAX_BYTES` (its properties) or outside the layout. O(the
    state)."""
    try:
        value = encode_state_marker(cursor_id, state.md, state.properties, ledgers)
    except (ValueError, OverflowError):  # a field outside the layout: the marker layout takes it
        return None
    return value if len(value) <= STATE_MAX_BYTES else None


def _take_state(planner: Taking) -> MarkerPlan | Literal[False] | None:
    """A small cursor's plan (:func:`small` said so): its whole state as one state marker
    (format 10), written where :func:`state_slot` says (over the older of its two state
    slots, the newer kept to fall back to; under its log key for a cursor that keeps
    history, the previous full marker's generation kept and everything older trimmed);
    None when nothing changed, :data:`OTHER` when the state does not fit the layout
    (nothing taken). Encoded here, and nothing is changed until the plan is made. From here
    on the cursor's ledgers carry no acks since a record (``added`` None): the state is
    written whole each flush, never a delta against it. O(the state)."""
    pages, state, chain, cid = planner.pages, planner.state, planner.chain, planner.cursor_id
    dirty, vanished, index, loaded = pages.dirty, pages.vanished, pages.index, pages.loaded
    dropped = [ledger for ledger in vanished if ledger in index] if vanished else ()
    if not (dirty or dropped or state.meta_dirty):
        return None
    ledgers = sorted(loaded.items()) if len(loaded) > 1 else list(loaded.items())
    value = state_value(cid, state, ledgers)
    if value is None:
        return OTHER
    seq = chain.next_seq
    changes: dict[int, IndexEntry | None] = dict.fromkeys(dropped) if dropped else {}
    for ledger, la in ledgers:
        changes[ledger] = entry_of((seq, la.runs, None, None))
    slot, room = state_slot(planner.history, chain)
    if slot < 0:
        key = log_key(cid, seq)
    else:
        key = slot_key(cid, slot)
        value = seal_slot(key, seq, value, room)
    plan = MarkerPlan(cid, changes, True, seq, _taken(dirty, changes), state.meta_dirty, state.range_count, key, value)
    if vanished:
        plan.dropped = vanished  # what an abort gives back
    plan.full_live = (seq,)
    keep = chain.full_live
    trims(plan, chain, keep)  # the index names nothing else
    if slot >= 0 and plan.trim_keys is not None and (not keep or (len(keep) == 1 and chain.full_seq in keep)):
        # the state before is the other slot's, or there is none (a new cursor's first): once
        # the trim ran, the log's keys hold nothing of the cursor below this state (its next
        # flush names no key to delete)
        plan.gc_below, plan.gc_live = seq + 1, ()
    # nothing above changed the cursor; now the plan takes what it carries
    for la in loaded.values():
        la.added = None
        if la.counts_added:
            la.counts_added = NO_ENTRIES
    if slot >= 0:
        chain.slot = slot
        chain.slots |= 1 << slot
    _took(planner, seq, plan.pinned, bool(vanished))
    return plan


def take_marker(planner: Taking) -> MarkerPlan | Literal[False] | None:
    """A cursor's plan (see the module docstring). A delta marker; or a
    full one when one is due, or when every ledger of the cursor changed and the full marker
    repeats at most ``SMALL_CHAIN`` bytes of acks the chain named already (then it costs what
    the delta costs, and a reopen reads one marker and walks no chain). Such a full marker
    trims the log only once its garbage outgrows ``GARBAGE_FACTOR`` times the chain's
    allowance (a trim is a scan of the cursor's keys). O(changed ledgers + their acks since
    their records); a due full marker of a cursor not every ledger of which changed
    O(ledgers)."""
    pages, state, chain = planner.pages, planner.state, planner.chain
    dirty = pages.dirty
    if not (dirty or pages.unmarked or pages.vanished or state.meta_dirty):
        return None  # an idle cursor
    if pages.unmarked or chain.over_cap:
        return OTHER
    limit = planner.cap
    if limit and state.range_count > limit:
        return OTHER
    if small(pages, state):  # the state layout
        taken = _take_state(planner)
        if taken is not OTHER:
            return taken
    if pages.vanished:
        return OTHER
    due = chain.full_due(planner.full_every)
    loaded, index = pages.loaded, pages.index
    changes: dict[int, IndexEntry | None] = {}
    items: list[MarkerItem] = []  # a delta marker's, each with what the chain named of it
    named = 0  # u32s the chain named already: what a full marker writes beyond the delta
    counted: list[LedgerAcks] = []  # ledgers with counts since their base: pruned once taken
    for ledger in sorted(dirty) if len(dirty) > 1 else dirty:
        la = loaded.get(ledger)
        base = index.get(ledger)
        if la is None or base is None:
            return OTHER
        added = la.added
        if added is None:
            return OTHER
        worth, counts = delta_of(added, la)
        if not worth:
            return OTHER
        adds = FrozenBitMap(added, optimize=False)  # a copy as it is: a few values, nothing to optimize
        changes[ledger] = entry = entry_of((base.seq, la.runs, adds, counts))
        if base.adds:
            named += len(base.adds)
        if la.counts_added:
            counted.append(la)
        if counts:  # the delta names the counts set since the chain named them (an entry and
            # a count: two u32s each)
            since = counts_since(counts, base.counts)
            named += 2 * (len(counts) - len(since or ()))
            if since is not counts:
                entry = entry_of((base.seq, la.runs, adds, since))
        items.append((ledger, entry, base.adds))
    covering = len(changes) == len(index)  # every ledger changed: the changes are the index
    full = full_marker(due, covering, named)
    whole = changes  # a full marker's index
    marker_items: list[Any] = items  # a delta marker names only the acks added since the chain named them
    if full:
        if chain.force_full or chain.truncated or chain.marker_seq < 0:
            return OTHER  # a fresh chain
        if covering:  # in order already
            marker_items = list(changes.items())
        else:
            whole = {**index, **changes}
            marker_items = sorted(whole.items())
    md, props, cid = state.md, state.properties, planner.cursor_id
    try:
        value = codecs.fixed_marker(
            FORMAT_VERSION, FIXED_FULL if full else 0, chain.marker_seq, md[0], md[1], md[0], md[1] + 1, cid,
            marker_items, pack_properties(props),
        )  # fmt: skip
    except OverflowError:
        return OTHER  # the general path writes the msgpack form
    marker_seq = chain.next_seq
    key, held = log_key(cid, marker_seq), _taken(dirty, changes)
    plan = MarkerPlan(cid, changes, full, marker_seq, held, state.meta_dirty, state.range_count, key, value)
    if full:
        plan.full_live = (*[e.seq for e in whole.values() if e is not None], marker_seq)
        if chain.trim_due(due):
            trims(plan, chain, live_records(chain, pages.index))
    # nothing above changed the cursor; now the plan takes what it carries
    for la in counted:
        prune_counts(la)
    _took(planner, marker_seq, plan.pinned, False)
    return plan


def take_all(
    visit: Sequence[_C],
    planners_in: Sequence[_P],
    plans: list[Any],
    cursors: list[_C],
    planners: list[_P],
    idle: list[_C],
    others: list[tuple[_C, _P]],
) -> None:
    """The group flush's take over the cursors it visits
    (``visit``, each with its planner at the same place in ``planners_in``): each one's plan
    :func:`take_marker` takes, appended with its cursor and planner; a cursor it leaves to
    the general path (:data:`OTHER`) to ``others`` with its planner (the caller runs
    ``prepare_other``); an idle cursor to ``idle``. If one raises, what was taken is in the
    lists: the cursor that failed is ``visit[len(plans) + len(idle) + len(others)]``."""
    if len(visit) != len(planners_in):
        raise ValueError("take_all visits as many planners as cursors")
    for cur, planner in zip(visit, planners_in, strict=True):
        plan = take_marker(planner)
        if plan is False:  # OTHER
            others.append((cur, planner))
        elif plan is None:
            idle.append(cur)
        else:
            plans.append(plan)
            cursors.append(cur)
            planners.append(planner)


def encode_all(plans: Sequence[Plan], start: int, puts: list[tuple[bytes, bytes]], trims: list[Any]) -> tuple[int, int]:
    """The gathering of the group flush's step 2
    (``FlushJob.encode``, outside the store lock): the puts of every plan from ``start`` on
    (encoded already: a lane's plan when it was taken, the general path's just before)
    appended to ``puts`` in order, the plans that trim to ``trims``; returns the full
    markers and the bytes they add. O(plans from start on)."""
    if start < 0:
        raise ValueError(f"encode_all starts at plan {start}, not a count")
    full = nbytes = 0
    for i in range(start, len(plans)):
        plan = plans[i]
        puts += plan.puts
        if plan.gc_below > 0:
            trims.append(plan)
        full += bool(plan.full)
        nbytes += plan.nbytes
    return full, nbytes


def trim_all(trims: Sequence[Plan], untrimmed: Set[int], c: lmdb.Cursor, failed: list[Any]) -> int:
    """The first part of the group flush's write
    (``FlushJob.write``): the garbage of every plan that trims (``trims``), deleted with LMDB
    cursor ``c`` over the log, but a cursor's whose trim failed before in this flush (its id
    in ``untrimmed``); by key where the plan names its keys (:func:`trims`), else by a scan
    of the cursor's keys below its bound (``trim_records``). Returns how many records it
    deleted. A plan whose trim LMDB refuses is appended to ``failed`` and the error goes on.
    O(records deleted), and a scan's records kept."""
    trimmed = 0
    for plan in trims:
        if plan.cursor_id in untrimmed:
            continue
        try:
            keys = plan.trim_keys
            if keys is None:
                trimmed += trim_records(c, plan.cursor_id, plan.gc_below, plan.gc_live)
            else:
                for key in keys:
                    if c.set_key(key):
                        c.delete()
                        trimmed += 1
        except lmdb.Error:
            failed.append(plan)  # one cursor's records: the flush can go on without this trim
            raise
    return trimmed


def commit_all(plans: Sequence[Plan], planners: Sequence[Taking]) -> list[int]:
    """Every marker plan written, adopted by its cursor's
    planner (:func:`commit_marker`). Returns the indexes of the plans whose cursors the
    caller still acts on: any other plan (its cursor adopts it) and a full marker plan (the
    cursor may take the small form: ``small.small_of`` says), so the caller visits those
    only. O(plans)."""
    if len(plans) != len(planners):
        raise TypeError("commit_all takes two lists of one length")
    rest = []
    for i, (plan, planner) in enumerate(zip(plans, planners, strict=True)):
        if type(plan) is MarkerPlan:
            commit_marker(planner, plan)
            if not plan.full:
                continue
        rest.append(i)
    return rest


def commit_marker(planner: Taking, plan: MarkerPlan) -> None:
    """``plan`` was written; the cursor's pages adopt
    its index changes (a ledger written back since keeps its newer record) and its marker
    chain the marker, as ``Planner.commit`` does for any plan."""
    planner.pages.adopt(plan.changes, plan.keep_dirty)
    planner.chain.adopt(plan)


def set_delta_bounds(max_acks: int, max_share: float) -> tuple[int, float]:
    """Set :data:`DELTA_MAX_ACKS` and :data:`DELTA_MAX_SHARE` (the tests make new base records
    frequent with it); returns the bounds before."""
    global DELTA_MAX_ACKS, DELTA_MAX_SHARE
    before = DELTA_MAX_ACKS, DELTA_MAX_SHARE
    DELTA_MAX_ACKS, DELTA_MAX_SHARE = max_acks, max_share
    return before


def set_state_bound(max_runs: int) -> int:
    """Set :data:`STATE_MAX_RUNS` (-1: no cursor writes the state layout; the tests of the
    marker layout's own records use it); returns the bound before."""
    global STATE_MAX_RUNS
    before, STATE_MAX_RUNS = STATE_MAX_RUNS, max_runs
    return before
