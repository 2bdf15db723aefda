"""The small form: a small cursor's whole state in one object of its own.

A broker's cursor spends its day consuming its topic's newest ledgers in order: its acks above
the mark-delete position M lie in M's ledger (and, across rollovers, the ledgers after it), in a few
ranges, and each flush writes its
whole state as one state marker into a state slot (the state layout of
``ackstore/storage/records.py``). Once a flush wrote such a state, the cursor takes the small
form (:func:`small_of` is the rule): a :class:`SmallState` holds M, the runs of acks above
it, the delivery counts of entries above it, the read position, the properties (packed as
the marker writes them), the log's next sequence and which state slots hold a value. The
calls a broker makes all day are served by it: ``ack`` of one position or of a list of
positions, ``ack_entries``, setting and removing a property, and what a
:class:`~ackstore.Dispatcher` reads with (the read position and its moves, unacked entries,
delivery counts, their recording and their restore, ``is_acked``), a snapshot and the ranges, and the
directory's changes: a seal, the next ledgers added (their entries then the form's too, on
one line: :mod:`ackstore.cursor.small_span`), a trim below M's ledger or of it (M moves to
the first ledger left: ``Served._past_trim``); the group flush encodes each changed
one's slot value straight from it and adopts it in the same visit (:func:`flush_small`;
:func:`undo_small` gives back a flush that was not written). A flush then touches one
small object per cursor instead of the cursor's parts, and writes the same bytes they would.

The cursor's parts (its AckState, Pages and MarkerChain) keep the state as it was when the
form began. Anything else asked of the cursor ends the form first (``Cursor._grow``): the
parts load the newest flushed state as a reopen would (when a flush wrote one since), then
take the acks, counts and read position since, so the rest of ackstore only ever sees the
parts.

A cursor that keeps history takes the form from its making, or once its newest state is a
state marker under its log key (not a slot: a history point names its marker by log key); the group flush writes its
states there, as its parts would, takes their points and trims what the window lets go
(:func:`logged_plan`). A cursor stays out of the form while it has acks or counts outside
M's ledger and those its line spans after it, or holds more runs than a state slot takes
(:data:`ackstore.cursor.lane.STATE_MAX_RUNS`; with chains, :data:`FORM_RUNS_FACTOR` times
that), or more
delivery counts and partial batches than :data:`COUNT_CAP`; an ack or a delivery that takes
it over a cap ends the form. A flush that finds more counts than the state layout takes
(reads handed out and not acked yet) hands the cursor to its parts, which write it. A form
holding more ranges than PIP-299 persists (its ``persist``) stays one: its flush writes the
lowest of them alone, a whole state flagged truncated, into a slot, or, when a slot does
not take it, under its next log key, the one marker of a chain of its own, which no delta
marker follows (:func:`_cut_end`: the parts' rule), and it stays dirty, as its parts keep
the ledger the cut goes through; the next flush writes it again only when that state's
record changed (``cut_record``: changes above the cut cost nothing, as the parts'
``Planner._cut_holds`` rules).

The form's own chain (while :func:`set_form_chains` says so: on by default). A state a slot
does not take (more ranges than a slot's ``STATE_MAX_RUNS``, or a record over
``STATE_MAX_BYTES``: holes far apart) goes under the cursor's log keys instead, in the
layout its parts write: a *record* of each ledger of the line holding state (their ledger
codec, which codes a stride of holes in a few bytes: :func:`base_puts`, for either twin),
in the line's order, and a full marker naming them (a *base*). The flushes after it write
markers naming those records (the fixed layout: M, the properties, and per ledger its
record, its range count, and the acks and delivery counts since it, in its own entries): a
small full marker with every ack and count since the records while those are few, a delta
marker of those since the last marker once they are not, a full one again when the deltas
outgrow it or ``full_marker_every`` of them were written; a full marker trims what lies
below the full marker before it but their records, when it was due or once the bytes
written since the last trim outgrow the chain's allowance: the rules of the parts' chain
(:mod:`ackstore.cursor.chain`), so a chain keeps a few keys and the file stays as small as
theirs. A ledger that changed past what a marker names is *stale* (state in a ledger with
no record yet: a consumer reading on after a rollover) and so are, once the acks and counts
since the records (above M) are more than :data:`~ackstore.cursor.lane.DELTA_MAX_ACKS`, the ledgers
they are most in: the next state is a base that records those alone, the others' records
standing (a consumer holding a sealed ledger's entries does not write that ledger's record
again while it acks on in the next ones: :func:`_to_record`), and the marker after those
records is a delta one naming them when the chain goes on (no full marker due, no record
dropped), so such a flush writes what changed, not an index of every ledger. M moving within its ledger, or
on into the next one (a *rebase*), leaves the records standing: the marker names M's
ledger's record as it is (format 15: the record and the acks since it hold what M passed
since, one range more than the form holds above M, ``passed``, which the marker's count
includes: :func:`_passed`), so a consumer acking its oldest holes late writes markers, not
that record, every flush; a ledger M leaves holding nothing is stale, and leaves the next
base's full marker (which is all that base writes when no stale ledger holds anything), and
the marker after a rebase is a full one, naming no ledger M left. An open declines a chain
whose M's ledger's record or acks since hold entries at or below M (recovery reads it, its
parts write that ledger's record again, and the form is taken at the next full marker).
What a marker cannot say at all (a
reset, a partial batch changed: ``fresh``) makes the next state whole: a record of every
ledger holding state and a full marker, or a slot again when the state fits one (the first
trims what lies below the chain's full marker, the second every log key). The chain may hold
a record of any ledger of the line (``recs`` has a bit for each of its up to 256). A cursor
whose parts write it in the marker
layout (more ranges than a slot takes, and at most three quarters of the form's: room to
grow, so that a cursor near the bound does not go in and out) takes the form after a full
marker of theirs naming records of ledgers of its line (all of its ledgers read in) and
*adopts* their chain: its next states are markers naming those records. An open reads such
a chain (records of ledgers of the line) straight into the form
(:func:`chain_opened`); any other is recovered into the parts. Where the compiled module is
built, one call reads a cursor's slots or its chain (:func:`form_read`, ``_native.form_open``)
and those functions are its twin, reading whatever it declines.

Two twins of one API, as the lane: ``ackstore._native``'s ``SmallState``, ``flush_small``
and ``undo_small`` (``ackstore/_small.c``) and the pure-Python ones here, which return the
same values and write the same bytes (``tests/test_small.py`` runs both on the same
operations); :data:`SmallState`, :data:`flush_small` and :data:`undo_small` are the ones in
use.
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack
from pyroaring import BitMap

from ..errors import CorruptRecordError
from ..ledger_acks import LEDGER_OVERHEAD_BYTES, MAX_COUNT, bitmap_of_runs, count_runs, run_bounds
from ..position import MAX_ENTRY
from ..stats import RecoveryReport
from ..storage import codecs, pure_acks, pure_codecs
from ..storage.bitmaps import encode_bitmap
from ..storage.pure_codecs import STATE_PROPS, STATE_TRUNCATED
from ..storage.records import (
    FIXED_FULL,
    FORMAT_VERSION,
    RECORD_LEDGER,
    RECORD_MARKER,
    SLOT_RESERVE,
    log_key,
    pack_properties,
    seal_slot,
    slot_key,
    unpack_properties,
)
from . import lane
from .chain import full_marker, garbage_due, next_slot, outgrown
from .moves import MAX_BATCH_SIZE
from .small_span import (
    SPAN_MOST,
    bound_of,
    fit,
    form_entries,
    form_entry,
    ledger_batches,
    ledger_counts,
    ledger_runs,
    ledgers_held,
    line_bound,
    line_index,
    place,
)
from .state import start_of

if TYPE_CHECKING:
    from ..config import CursorConfig
    from ..directory import LedgerDirectory
    from ..storage.log import NewestMarker
    from .chain import MarkerChain
    from .pages import Pages
    from .state import AckState

__all__ = [
    "COUNT_CAP",
    "DELTA_MOST",
    "FORM_RUNS_FACTOR",
    "IMPLEMENTATIONS",
    "OpenFigures",
    "OpenedForm",
    "PySmallState",
    "SmallState",
    "Small",
    "base_puts",
    "chain_opened",
    "form_read",
    "line_memo",
    "check_small",
    "flush_bases",
    "flush_format",
    "flush_small",
    "form_chains",
    "logged_plan",
    "small_born",
    "small_of",
    "small_of_record",
    "small_of_slots",
    "line_runs",
    "opened_report",
    "set_form_chains",
    "small_opened",
    "take_config",
    "trim_plan",
    "undo_small",
]

_ENTRY_MAX = 0xFFFFFFFF
_NO_LOW = _ENTRY_MAX + 1  # (an entry past every one: ``low`` of a record holding no acks)

FORM_RUNS_FACTOR = 16 if codecs.native is None else 2048
"""the small form holds up to this many times the runs the state layout a slot takes
(:data:`ackstore.cursor.lane.STATE_MAX_RUNS`): the compiled form 1,048,576 runs (8 MiB of
them, in chunks of up to 512: an ack among many moves one chunk's), the pure twin, whose runs
are one list, 8,192; a state over a slot's bound goes under the cursor's log keys, in a chain
of its own (:func:`_py_flush_small`)"""

DELTA_MOST = 256
"""the most acks and delivery counts since the chain's last marker a delta marker of the
form's chain names (each four bytes, a count eight: while the chain stays under its base's
bytes); more, and the next state is written whole"""

RANGE_CHARGE = 8
"""what a run or a delivery count of the form is charged against its cursor's cache budget
(two u32s); a ledger holding state is charged the parts' ``LEDGER_OVERHEAD_BYTES``"""

BATCH_CHARGE = 64
"""what a partial batch of the form is charged (the parts' figure)"""

COUNT_CAP = 1_048_576
"""the most delivery counts and partial batches the small form holds (those of a read
handed out and not yet acked: a broker reads ahead, a consumer holds some), as many as the
runs the compiled form holds; more end it (a cursor's cache budget, which counts each one,
ends it sooner when its state lies in more than one ledger). A
state slot takes at most :data:`ackstore.cursor.lane.STATE_MAX_EXTRAS` of them, as the
parts' state layout does: a state holding more goes to the form's chain, whose record
holds them all"""


def _entry(value: Any, what: str) -> int:
    if type(value) is not int:
        raise TypeError(f"{what} must be an int, got {value!r}")
    if not 0 <= value <= _ENTRY_MAX:
        raise ValueError(f"{what} {value} is not an entry of the layout (0..2**32-1)")
    return value


def _flat_runs(runs: Any, md_e: int) -> list[int]:
    """``runs``, ``(first, last)`` tuples (or :func:`line_runs`' bytes of their bounds) each
    above M + 1 (``md_e`` + 1) and the one before with a gap, as one flat list of their
    bounds; TypeError or ValueError when they are not."""
    if type(runs) is bytes:
        if len(runs) % 8:
            raise ValueError(f"runs of {len(runs)} bytes are not (first, last) pairs of u32s")
        bounds = array("I", runs).tolist()
        runs = zip(bounds[::2], bounds[1::2], strict=True)
    flat: list[int] = []
    at = md_e + 2  # a run starts above M + 1, each a gap after the one before
    for run in runs:
        if type(run) is not tuple or len(run) != 2:
            raise TypeError("a run is a (first, last) tuple")
        first, last = _entry(run[0], "first"), _entry(run[1], "last")
        if first < at or last < first:
            raise ValueError(f"run ({first}, {last}) is not above M + 1 and the run before, with a gap")
        flat += (first, last)
        at = last + 2
    return flat


def _held_counts(s: Any, counts: Any, batches: Any) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """``counts`` ``(entry, n)`` and ``batches`` ``(entry, size, mask)`` of the new form
    ``s`` (its M and runs set) as its maps, each of an unacked entry above M, once;
    TypeError or ValueError when they are not."""
    held: dict[int, int] = {}
    for entry, n in counts:
        entry = _entry(entry, "a counted entry")
        if entry <= s.md_e or entry in held or s.acked(entry) or not 1 <= n <= _ENTRY_MAX:
            raise ValueError(f"delivery count ({entry}, {n}) is not of an unacked entry above M, once")
        held[entry] = n
    partial: dict[int, tuple[int, int]] = {}
    for batch in batches:
        if type(batch) is not tuple or len(batch) != 3:
            raise TypeError("a partial batch is an (entry, size, mask) tuple")
        entry, size, mask = _entry(batch[0], "a batch's entry"), batch[1], batch[2]
        if entry <= s.md_e or entry in partial or s.acked(entry) or not _partial(size, mask):
            raise ValueError(f"partial batch ({entry}, {size}, {mask}) is not of an unacked entry above M, once")
        partial[entry] = (size, mask)
    return held, partial


def _partial(size: Any, mask: Any, whole: bool = False) -> bool:
    """Whether ``(size, mask)`` is a batch of ``size`` messages (1..``MAX_BATCH_SIZE``) with
    some of its indexes acked in ``mask``, not all of them (``whole``: all of them too)."""
    if type(size) is not int or type(mask) is not int or not 1 <= size <= MAX_BATCH_SIZE:
        return False
    full = (1 << size) - 1
    return 0 < mask <= full and (whole or mask != full)


def _check_counts(items: Any, values: Any) -> None:
    """``set_counts``'s values: a list of as many counts as ``items``, each 1..2**32 - 1."""
    if type(values) is not list or len(values) != len(items):
        raise TypeError("set_counts(items, values): values is a list of as many counts")
    for n in values:
        if not isinstance(n, int) or not 1 <= n <= MAX_COUNT:
            raise ValueError(f"delivery count {n!r} is not allowed: allowed 1..2**32-1")


class PySmallState:
    """The pure-Python twin of ``ackstore._native.SmallState``: a small cursor's mark-delete
    position ``(md_l, md_e)``, the runs of acks above it in ``md_l`` (``runs``: ascending
    ``(first, last)``, a gap between two, none at M + 1), the delivery counts of entries above
    it (``counts``: ``(entry, n)``, none of an acked entry), the read position's entry
    ``rp_e`` in ``md_l`` (never below M + 1; -1: M + 1), the log's ``next_seq``, the state
    slot the newest state is in and which slots hold a value, and ``cap``: the most runs the
    form holds (it holds at most :data:`COUNT_CAP` counts). The flush counters count the
    flushes in the form; ``redeliveries`` the deliveries of entries delivered before."""

    __slots__ = (
        "cursor_id", "md_l", "md_e", "rp_e", "next_seq", "slot", "slots", "dirty", "cap", "persisted", "flushes",
        "flush_bytes", "last_bytes", "ended", "redeliveries", "spans", "rp_i", "limit", "limit_version",
        "props", "_runs", "_counts", "_batches", "_undo", "_undo_persisted", "logged", "base", "marker", "deltas",
        "chain_bytes", "base_bytes", "tail", "fresh", "every", "_adds", "_counted", "_undo_chain", "record", "named",
        "cnamed", "untrimmed", "recs", "stale", "_rec", "budget", "passed", "low", "dropped", "persist", "truncated",
        "over_cap", "cut_record", "touched", "cut_at",
    )  # fmt: skip

    def __init__(
        self, cursor_id: int, md_l: int, md_e: int, next_seq: int, slot: int, slots: int, runs: Any, cap: int,
        counts: Any = (), rp_e: int = -1, props: bytes = b"", rp_i: int = 0, batches: Any = (),
    ) -> None:  # fmt: skip
        if type(props) is not bytes:
            raise TypeError(f"properties are packed bytes, not {props!r}")
        bad = not 0 <= rp_i <= SPAN_MOST
        if md_l < 0 or not -1 <= md_e < _ENTRY_MAX or slot not in (0, 1) or not 0 <= slots <= 3 or bad:
            raise ValueError("a small state's position, slot or slots are outside the layout")
        flat = _flat_runs(runs, md_e)
        self.cursor_id = cursor_id
        """the cursor's id"""
        self.md_l = md_l
        """the mark-delete position's ledger"""
        self.md_e = md_e
        """the mark-delete position's entry"""
        self.rp_e = md_e + 1 if rp_e == -1 else _entry(rp_e, "rp_e")
        """the read position's entry in ``md_l`` (in memory only, as the parts' read position)"""
        if self.rp_e <= md_e:
            raise ValueError(f"read position {rp_e} is at or below M {md_e}")
        self.next_seq = next_seq
        """the log's next sequence"""
        self.slot = slot
        """the state slot the newest state is in (the next goes to the other)"""
        self.slots = slots
        """which state slots hold a value (bits 0 and 1): a slot's first value reserves room"""
        self.cap = cap
        """the most runs the form holds"""
        self.dirty = 0
        """1 when it changed since its last flush"""
        self.ended = 0
        """1 once the cursor left the small form (no flush takes it again)"""
        self.persisted = len(flat) // 2
        """runs the newest flushed state holds"""
        self.persist = 0
        """the most ranges a flush persists (PIP-299's ``max_unacked_ranges_to_persist``; 0: all)"""
        self.truncated = 0
        """1 while its newest state holds only the lowest :attr:`persist` ranges (:func:`_cut_end`)"""
        self.cut_record: bytes | None = None
        """then, that state's record as written (None: not known): a cut that holds, the same
        record again, is not written again"""
        self.over_cap = 0
        """1 when it held more than :attr:`persist` ranges at its last flush in this process"""
        self.touched = 0
        """the lowest entry changed since its last flush (:data:`UNTOUCHED`: none; 0: M, the line, props)"""
        self.cut_at = 0
        """the end of the cut its newest state holds (:func:`_cut_end`'s): none above it changes the cut"""
        self.flushes = 0
        """flushes in the small form"""
        self.flush_bytes = 0
        """the bytes they wrote (keys and values)"""
        self.last_bytes = 0
        """the bytes the last one wrote"""
        self.redeliveries = 0
        """deliveries in the form of entries delivered before"""
        self.props = props
        """the properties, packed as the state layout writes them (b"": none)"""
        self._runs = flat
        self._counts, self._batches = _held_counts(self, counts, batches)
        if len(self._counts) + len(self._batches) > COUNT_CAP:
            raise ValueError(
                f"{len(self._counts)} delivery counts and {len(self._batches)} partial batches: "
                f"the form holds at most {COUNT_CAP}"
            )
        self.logged = 0
        """1 when its cursor keeps history: each state goes under its log key, not a state slot"""
        self._undo = -1  # the slots before the last flush took it (-1: it did not)
        self._undo_persisted = 0
        self.base = -1
        """where the newest state is: -1 in the state slot ``slot``; -2 in the log, its next
        state written whole; else the newest full marker of the chain (the module docstring)"""
        self.record = -1
        """the chain's oldest record (-1: none): :meth:`records` gives them all"""
        self.recs = 0
        """the ledgers of the line the chain has a record of (bit k: the k-th, 0 M's)"""
        self.stale = 0
        """those whose next record is due (their state changed since, past what a marker names)"""
        self.passed = 0
        """1 when M moved past entries of its ledger's record since it was written: that record
        and the acks since it hold the entries from the one after the M it was written at up
        to M, one range more than the form holds above M, which a marker counts"""
        self.low = -1
        """the lowest entry of M's ledger that its record and the chain's markers hold acked
        (2**32: none; -1: not known, as after an open): while M is below it, the
        acks M passes go unnamed (:func:`_passed`)"""
        self.dropped = 0
        """1 when acks M passed were left unnamed since M's ledger's record was written"""
        self._rec = [-1] * LINE_LEDGERS  # the record of each (its bit in recs)
        self.marker = -1
        """the chain's newest marker (the previous one of its next marker)"""
        self.deltas = 0
        """delta markers since the full marker: at most ``every`` (the cursor's full_marker_every)"""
        self.every = 64
        """the cursor's full_marker_every"""
        self.budget = -1
        """its cursor's cache budget in bytes (-1: none): a form of several ledgers charged
        more (:meth:`charge`) is its parts' to write and hold (:func:`_over_budget`)"""
        self.chain_bytes = 0
        """the delta markers' bytes"""
        self.base_bytes = 0
        """the full marker's bytes"""
        self.untrimmed = 0
        """the bytes written since the chain's last trim"""
        self.tail = 0
        """1 when log keys lie under the slots: the next state a slot takes trims them"""
        self.fresh = 1
        """1 when the next state cannot be a marker naming ``record`` (:meth:`unchain`)"""
        self.named = 0
        """how many of the acks since the record the markers named"""
        self.cnamed = 0
        """how many of the entries counted since the record the markers named"""
        self._adds: list[int] = []  # the entries acked since the record (while not fresh)
        self._counted: list[int] = []  # the entries whose delivery count was set since
        self._undo_chain: tuple[Any, ...] = ()
        self.spans: tuple[tuple[int, int], ...] = ()
        """the ledgers after M's on the form's line, each with its offset (``small_span``):
        ledger ``l``'s entry e is the form's ``offset + e``"""
        self.rp_i = rp_i
        """the ledger of the line the read position is in (0: M's, i: the i-th spanned: the
        spans :meth:`bound` gives say which)"""
        self.limit = -1
        """the form's highest entry allowed, as of ``limit_version``: what :meth:`bound` said"""
        self.limit_version = -1
        """the version of the topic's directory ``limit`` is of (-1: none yet, or M moved since)"""

    @property
    def n(self) -> int:
        """Runs held."""
        return len(self._runs) // 2

    @property
    def nc(self) -> int:
        """Delivery counts held."""
        return len(self._counts)

    @property
    def nb(self) -> int:
        """Partial batches held."""
        return len(self._batches)

    def runs(self) -> list[tuple[int, int]]:
        """The runs above M, ``[(first, last), ...]``. O(runs)."""
        r = self._runs
        return [(r[i], r[i + 1]) for i in range(0, len(r), 2)]

    def runs_of(self, k: int) -> list[tuple[int, int]]:
        """The line's ``k``-th ledger's runs, its own entries: :func:`_runs_of`."""
        return _runs_of(self, k)

    def acks_of(self, k: int) -> bytes:
        """The line's ``k``-th ledger's acks, in the portable roaring serialization: :func:`_acks_of`."""
        return _acks_of(self, k)

    def record_of(self, k: int, version: int, flags: int, first: int, last: int, code: bytes) -> bytes:
        """The line's ``k``-th ledger's record of its state, its acks coded as given: :func:`_record_of`."""
        return _record_of(self, k, version, flags, first, last, code)

    def held(self) -> int:
        """The ledgers of the line holding state: :func:`_held`."""
        return _held(self)

    def held_count(self) -> int:
        """How many ledgers of the whole line hold state: :func:`_held_count`."""
        return _held_count(self)

    def charge(self) -> int:
        """What the form is charged against its cursor's cache budget: :func:`_charge`."""
        return _charge(self, _held_count(self))

    def records(self) -> tuple[int, ...]:
        """The chain's records, in the line's order (none while it has none)."""
        return _records(self)

    def to_record(self, max_acks: int) -> int:
        """The ledgers a new base of the chain writes records of: :func:`_to_record`."""
        return _to_record(self, max_acks)

    def counts(self, first: int = 0, stop: int = _ENTRY_MAX + 1) -> list[tuple[int, int]]:
        """The delivery counts above M, ``[(entry, n), ...]`` ascending, of the entries
        ``first..stop - 1``. O(counts log counts); the compiled twin's O(log counts + those)."""
        if not (type(first) is int and type(stop) is int and 0 <= min(first, stop) <= max(first, stop) <= 1 << 32):
            raise ValueError(f"counts({first!r}, {stop!r}): entries are 0..2**32")
        return sorted((e, n) for e, n in self._counts.items() if first <= e < stop)

    def count(self, entry: int) -> int:
        """``entry``'s delivery count (0: none, or acked). O(1)."""
        return self._counts.get(entry, 0)

    def batches(self) -> list[tuple[int, int, int]]:
        """The partial batches above M, ``[(entry, size, mask), ...]`` ascending (bit i of
        ``mask``: index i of the batch acked). O(batches)."""
        return [(entry, *batch) for entry, batch in sorted(self._batches.items())]

    def batch(self, entry: int) -> tuple[int, int] | None:
        """``entry``'s partial batch ``(size, mask)``, or None. O(1)."""
        return self._batches.get(entry)

    def ack_batch(self, entry: int, size: int, mask: int) -> bool:
        """Indexes ``mask`` of the batch of ``size`` messages at the form's ``entry`` acked
        (the caller checked them, and that a batch recorded there is of that size): with
        those recorded before, the entry is acked once every index is; an acked entry
        changes nothing. Whether the state still fits. O(runs + counts + batches)."""
        entry = _entry(entry, "entry")
        if not _partial(size, mask, whole=True):
            raise ValueError(f"batch mask {mask} of size {size} is outside the layout")
        if self.acked(entry):
            return self.fits()
        old = self._batches.get(entry)
        if old is not None:
            if old[0] != size:
                raise ValueError(f"batch size {size} is not the {old[0]} recorded at entry {entry}")
            mask |= old[1]
        if mask == (1 << size) - 1:
            _ack_run(self, entry, entry)
        elif old is None or mask != old[1]:
            self._batches[entry] = (size, mask)
            _touch(self, entry)
            self.unchain()
        return self.fits()

    def bound(self, version: int, spans: Any, limit: int) -> bool:
        """As of the topic's directory at ``version``: the ledgers after M's on the form's
        line, ``spans`` (``((ledger, offset), ...)``, ledgers ascending after M's, offsets
        ascending or equal, those the form spans already as they were), and the form's
        entries go up to ``limit`` (``small_span.bound_of`` says them). True when M moved on
        into the first spanned ledger (it was at its offset - 1): ask again for the new M's
        ledger. O(runs + counts) then, else O(spans)."""
        ok = type(spans) is tuple and len(spans) <= SPAN_MOST and type(limit) is int and -1 <= limit <= _ENTRY_MAX
        last_l, last_o = self.md_l, 0
        for i, span in enumerate(spans if ok else ()):
            ok = type(span) is tuple and len(span) == 2 and type(span[0]) is int and type(span[1]) is int
            ok = ok and span[0] > last_l and last_o <= span[1] <= _ENTRY_MAX
            ok = ok and (i >= len(self.spans) or self.spans[i][1] == span[1])
            if not ok:
                break
            last_l, last_o = span
        if not ok:
            raise ValueError(f"bound({version}, {spans}, {limit}) does not fit a form at ({self.md_l}, {self.md_e})")
        self.spans, self.limit, self.limit_version = spans, limit, version
        if spans and self.md_e >= spans[0][1] - 1:
            _rebase(self)
            return True
        return False

    def reset(self, ledger: int, entry: int) -> None:
        """A position reset to ``(ledger, entry)``, a place the caller checked: M is the entry
        before it and the read position that entry; nothing above M is acked or counted any
        more; the line is M's new ledger alone, unbounded until :meth:`bound` gives its spans
        and limit again. The form changed. O(1)."""
        if type(ledger) is not int or type(entry) is not int:
            raise TypeError("reset(ledger: int, entry: int)")
        entry = _entry(entry, "entry")
        if ledger < 0:
            raise ValueError(f"ledger {ledger} is not a ledger id (>= 0)")
        self.md_l, self.md_e, self.rp_e, self.rp_i = ledger, entry - 1, entry, 0
        self._runs, self._counts, self._batches, self.spans = [], {}, {}, ()
        self.limit = self.limit_version = -1
        _touch(self, 0)
        self.unchain()

    def range_count(self) -> int:
        """The ranges held as the parts count them (a run across M's ledger's end is one in each). O(log runs)."""
        return self.n + self._crossing()

    def _crossing(self) -> int:
        """Runs across an offset of the line (each is a range in every ledger it touches)."""
        out, seen = 0, 0
        for _, offset in self.spans:
            if offset > seen:  # (a ledger with no entries: its offset is the next one's)
                seen = offset
                i = self._first_ending_at_or_after(offset)
                out += i < self.n and self._runs[2 * i] < offset
        return out

    def fits(self) -> bool:
        """Whether the runs and counts fit the form (:attr:`cap`, :data:`COUNT_CAP`)."""
        return self.range_count() <= self.cap and len(self._counts) + len(self._batches) <= COUNT_CAP

    def top(self) -> int:
        """The highest entry holding state: the last run's end, the highest delivery
        count's or partial batch's entry, else M. O(counts + batches)."""
        last = self._runs[-1] if self._runs else -1
        return max(self.md_e, last, max(self._counts, default=-1), max(self._batches, default=-1))

    def ack_range(self, first: int, last: int) -> bool:
        """Entries ``first..last`` of the form acked (those at or below M are); whether the
        state still fits. O(runs + counts in the range)."""
        first, last = _entry(first, "first"), _entry(last, "last")
        if last < first:
            raise ValueError(f"run ({first}, {last}) ends before it starts")
        _ack_run(self, first, last)
        return self.fits()

    def ack_entries(self, ledger: int, bitmap: BitMap) -> bool | None:
        """``Cursor.ack_entries`` of a BitMap in the form: None, changing nothing, unless
        ``ledger`` is on the line (M's or a spanned one), every entry lies in its part of
        the line (below the next ledger's offset, or within the bound) and the BitMap holds
        at most :attr:`cap` runs (more: a bulk ack, the parts'); else whether the state
        still fits the cap and its cursor's cache budget (an empty BitMap changes nothing).
        O(its runs x runs)."""
        at = place(self, ledger)
        if at is None or count_runs(bitmap) > self.cap:
            return None
        offset, following = at
        if bitmap and offset + bitmap.max() > (following - 1 if following >= 0 else self.limit):
            return None
        for first, last in run_bounds(bitmap):
            _ack_run(self, offset + first, offset + last)
        return self.fits() and not _over_budget(self)

    def ack_positions(self, items: Any) -> bool | None:
        """``Cursor.ack`` of a list of positions, when the form takes every one (a Position or
        a ``(ledger, entry)`` tuple of ints: ``small_span.form_entry``, within the bound
        :meth:`bound` gave): each acked in order, those that follow one another as one run
        (as the compiled twin acks them), and whether the state still fits; None, changing
        nothing, when one is not (the parts check and take them). O(items x runs)."""
        if form_entries(self, items) is None:
            return None
        first = last = -2
        for ledger, entry in items:
            x = form_entry(self, ledger, entry)  # (as the line stands after the runs acked before it)
            if x >= 0 and x == last + 1:
                last = x
                continue
            if first >= 0:
                _ack_run(self, first, last)
                x = form_entry(self, ledger, entry)
            first = last = x if x >= 0 else -2  # (-2: M moved on past every entry of its ledger)
        if first >= 0:
            _ack_run(self, first, last)
        return self.fits()

    def deliver_positions(self, items: Any) -> list[int] | None:
        """One more delivery of each position of ``items`` when the form takes every one (as
        :meth:`ack_positions`); each one's count after it, 0 for an acked one (not counted);
        None, changing nothing, when one is not (the parts count them). A count past
        2**32 - 1 stays there. O(items)."""
        return _deliver(self, items, None)

    def set_counts(self, items: Any, values: list[int]) -> list[int] | None:
        """``Cursor.restore_delivery_counts``: each position's count set to its value in
        ``values`` (1..2**32 - 1 each), as :meth:`deliver_positions` takes them. O(items)."""
        if not isinstance(items, (list, tuple)):
            return None
        _check_counts(items, values)
        return _deliver(self, items, values)

    def read_from(self, entry: int) -> None:
        """A sequential read moved on to the form's ``entry``: the read position goes there
        (never backwards), hopping a run of acks that starts there; from a spanned ledger's
        offset on it is in that ledger (a sealed ledger's end is the next one's first
        entry). O(log runs + spans)."""
        entry = _entry(entry, "entry")
        i = self._run_at(entry)
        if i >= 0:
            entry = self._runs[2 * i + 1] + 1
        at = line_index(self, entry)
        if (entry, at) > (self.rp_e, self.rp_i):
            self.rp_e, self.rp_i = entry, at

    def rewind(self) -> None:
        """Read again from M + 1."""
        self.rp_e, self.rp_i = self.md_e + 1, 0

    def unacked(self, start: int, stop: int, n: int) -> list[int]:
        """Up to ``n`` entries of the form in ``[start, stop)`` not acked, ascending; acked
        runs are hopped over whole. O(runs touched + entries returned)."""
        out: list[int] = []
        e = max(start, self.md_e + 1)
        r = self._runs
        i = self._first_ending_at_or_after(e)
        while len(out) < n and e < stop:
            if i < len(r) // 2 and r[2 * i] <= e:
                e = r[2 * i + 1] + 1
                i += 1
            else:
                out.append(e)
                e += 1
        return out

    def acked(self, entry: int) -> bool:
        """Whether ``entry`` of the form is acked (at or below M, or in a run). O(log runs)."""
        return entry <= self.md_e or self._run_at(entry) >= 0

    def _first_ending_at_or_after(self, entry: int) -> int:
        r = self._runs
        lo, hi = 0, len(r) // 2
        while lo < hi:
            mid = (lo + hi) // 2
            if r[2 * mid + 1] < entry:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _run_at(self, entry: int) -> int:
        """The index of the run holding ``entry``, or -1."""
        i = self._first_ending_at_or_after(entry)
        return i if i < len(self._runs) // 2 and self._runs[2 * i] <= entry else -1

    def end(self) -> None:
        """The cursor left the small form: no flush takes this one again."""
        self.ended, self.dirty = 1, 0

    def set_props(self, packed: bytes) -> None:
        """The properties, packed as the state layout writes them (b"": none); the form changed."""
        if type(packed) is not bytes:
            raise TypeError(f"properties are packed bytes, not {packed!r}")
        self.props = packed
        _touch(self, 0)

    def unchain(self) -> None:
        """The next state cannot be a marker naming the chain's record (anything but acks and
        counts in M's ledger, up to :data:`DELTA_MOST`, changed since it, or a trim of M's
        ledger, after which the parts write their state whole too): it is written whole,
        naming no record the chain wrote before. O(1)."""
        self.fresh = 1
        self._adds.clear()
        self._counted.clear()
        self.named = self.cnamed = self.passed = self.dropped = 0
        self.low = -1

    def adopt(self, base: int, marker: int, records: Any, base_bytes: int, *chain: Any) -> None:
        """The chain its parts wrote last, which the form's next states extend: :func:`_adopt`
        (``chain``: its ``adds=()``, ``counted=()``, ``deltas=0``, ``chain_bytes=0``)."""
        _adopt(self, base, marker, records, base_bytes, *chain, *((), (), 0, 0)[len(chain) :])

    def took_base(self, version: int, written: int, nbytes: int) -> tuple[bytes, int, tuple[int, ...]] | None:
        """A flush wrote records of the chain's new base: :func:`_took_base` says it all."""
        return _took_base(self, version, written, nbytes)


UNTOUCHED = _ENTRY_MAX + 2
"""a form's ``touched`` when nothing changed since its last flush"""


def _touch(s: PySmallState, entry: int) -> None:
    """The form ``s`` changed at ``entry`` (0: M, the line or the properties)."""
    s.dirty = 1
    if entry < s.touched:
        s.touched = entry


def _ack_run(s: PySmallState, first: int, last: int) -> None:
    """Entries ``first..last`` of the form ``s`` acked: merged into its runs, their counts and
    partial batches dropped, the chain told (:func:`_track`), M moved over a run at M + 1
    and on into the next ledger. O(runs + counts in the range)."""
    if last <= s.md_e:
        return
    first = max(first, s.md_e + 1)
    r, n = s._runs, s.n
    i = s._first_ending_at_or_after(first - 1)  # the first run that touches first or lies after it
    j = i
    while j < n and r[2 * j] <= last + 1:
        j += 1
    if j == i + 1 and r[2 * i] <= first and last <= r[2 * i + 1]:
        return  # acked already
    if not s.fresh:
        _track(s, first, last, i, j)
    batches = len(s._batches)
    for held in (s._counts, s._batches):  # an acked entry has no count, no partial batch
        if held:
            if last - first < len(held):
                for e in range(first, last + 1):
                    held.pop(e, None)
            else:
                for e in [e for e in held if first <= e <= last]:
                    del held[e]
    if batches != len(s._batches) and not s.fresh:
        s.unchain()  # (a partial batch gone: the chain's record still holds it)
    _touch(s, first)
    if j > i:
        first, last = min(first, r[2 * i]), max(last, r[2 * j - 1])
    r[2 * i : 2 * j] = (first, last)
    if r[0] == s.md_e + 1:  # M moves over the first run
        s.md_e = r[1]
        del r[:2]
        if s.rp_e < s.md_e + 1:
            s.rp_e, s.rp_i = s.md_e + 1, 0
        _passed(s)
    if s.spans and s.md_e >= s.spans[0][1] - 1:  # ... and on into the next ledger
        _rebase(s)


def _rebase(s: PySmallState) -> None:
    """M's ledger is sealed and M at (or past) its last entry: M moves on into the next
    spanned ledger, which becomes M's ledger (the others stay spanned), and on across
    those it is at or past the end of; the bound is asked again. The chain's records of
    the ledgers after stand (its ledgers' places on the line move down), the new M's
    ledger's too while it holds state (:func:`_passed`); the next marker is a full one,
    which no longer names those M left."""
    gone = left = 0
    while s.spans and s.md_e >= s.spans[0][1] - 1:
        (following, b), rest = s.spans[0], s.spans[1:]
        s.md_l, s.md_e = following, s.md_e - b
        s._runs[:] = [x - b for x in s._runs]
        s._counts = {x - b: n for x, n in s._counts.items()}
        s._batches = {x - b: batch for x, batch in s._batches.items()}
        s.rp_e, s.rp_i = s.rp_e - b, max(s.rp_i - 1, 0)
        s.spans = tuple((ledger, offset - b) for ledger, offset in rest)
        s.limit -= b
        gone += b
        if not s.fresh:
            left |= s.recs & 1
            s.recs, s.stale, s._rec = s.recs >> 1, s.stale >> 1, [*s._rec[1:], -1]
    if not s.fresh:
        if not s.recs:  # (no record left on the line: the next state is whole)
            s.record = -1
            s.unchain()
        else:
            if left:  # (a full marker due: the next one names the records that stand, not the one left)
                s.deltas = s.every
            s.record = min(s._rec[k] for k in _bits(s.recs))
            s._adds[:], s.named = _shifted(s._adds, s.named, gone)
            s._counted[:], s.cnamed = _shifted(s._counted, s.cnamed, gone)
            s.passed = s.dropped = 0  # (the new M's ledger's record was written before M reached it,
            s.low = -1  # what it holds not known)
            _passed(s)
    s.limit_version = -1
    _touch(s, 0)


def _passed(s: PySmallState) -> None:
    """M just moved on within its ledger (or into it: a rebase): while that ledger's record
    stands in the chain and it holds state above M, the record stays named. While M is below
    everything the chain holds of the ledger (``low``), the acks M passed go unnamed, as the
    parts' (``dropped``: the chain holds nothing up to M, so a marker counts the ranges above
    M). Once M reaches what the chain holds, ``passed``: the record and the acks since hold
    M's run from the M it was written at, tracked since, one range more than the form above
    M; unless acks M passed went unnamed, and then the ledger's record is due (``stale``),
    as it is when the ledger holds nothing (the next base drops it from the full marker)."""
    end = _line_end(s, 0)
    first = min(s._counts, default=end), min(s._batches, default=end)
    holds = bool(s._runs and s._runs[0] < end) or min(first) < end
    if s.fresh or not s.recs & 1 or not holds:
        s.stale |= 1
    elif s.md_e < s.low:  # (the chain holds nothing up to M: what M passed goes unnamed, as the parts')
        kept = [e for e in s._adds[s.named :] if e > s.md_e]  # (those named lie at or above low)
        if s.named + len(kept) < len(s._adds):
            s._adds[s.named :], s.dropped = kept, 1
    elif s.dropped:  # (M reached what the chain holds past acks it left unnamed: a new record is due)
        s.stale |= 1
    else:
        s.passed = int(s.md_e >= 0)


def _held_low(s: PySmallState) -> int:
    """The lowest entry of M's ledger the form holds acked (2**32: none): ``low`` of a chain
    whose records hold what the form holds there. O(1)."""
    end = _line_end(s, 0)
    return s._runs[0] if s._runs and s._runs[0] < end else _NO_LOW


def _named_low(s: PySmallState) -> None:
    """A marker of the chain names the acks since its records from ``s.named`` on: the
    lowest of M's ledger's is one the chain holds (``low``). O(acks since)."""
    end = _line_end(s, 0)
    s.low = min([s.low, *[e for e in s._adds[s.named :] if e < end]])


def _shifted(entries: list[int], named: int, by: int) -> tuple[list[int], int]:
    """``entries`` (the first ``named`` of them named by a marker) moved ``by`` down the line,
    those it moves below its start left out, and how many of those kept were named."""
    kept = [e - by for e in entries if e >= by]
    return kept, sum(e >= by for e in entries[:named])


def _charge(s: Any, ledgers: int) -> int:
    """What the form ``s`` (either twin's) holding state in ``ledgers`` ledgers is charged
    against its cursor's cache budget, as the parts charge theirs: each ledger the parts'
    overhead, each run and delivery count :data:`RANGE_CHARGE`, each partial batch
    :data:`BATCH_CHARGE`."""
    return LEDGER_OVERHEAD_BYTES * ledgers + RANGE_CHARGE * (s.n + s.nc) + BATCH_CHARGE * s.nb


def _over_budget(s: Any, budget: int | None = None) -> bool:
    """Whether the form ``s`` (either twin's) is over its cursor's cache budget (``budget``,
    or its own ``s.budget``; -1: none): its state in more than one ledger (one alone is held
    whatever its size, as the parts hold one ledger over the budget) and charged more. Such a
    form is its parts' to write and hold, swapping ledgers out. O(1) while clearly within it,
    else O(spans x log(runs + counts + batches))."""
    budget = s.budget if budget is None else budget
    if budget < 0 or _charge(s, len(s.spans) + 1) <= budget:
        return False
    ledgers = s.held_count()
    return ledgers > 1 and _charge(s, ledgers) > budget


def _line_start(s: Any, k: int) -> int:
    """The form's first entry in the line's ``k``-th ledger (0: M's, from 0)."""
    return s.spans[k - 1][1] if k else 0


def _line_end(s: Any, k: int) -> int:
    """The form's first entry past the line's ``k``-th ledger (its last has none)."""
    return s.spans[k][1] if k < len(s.spans) else _ENTRY_MAX + 1


def _line_ledger(s: Any, k: Any) -> int:
    """The ledger of the line's ``k``-th place (0: M's); TypeError or ValueError for a ``k``
    past the line (the compiled twin's words)."""
    if type(k) is not int:
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 0 <= k <= len(s.spans):
        raise ValueError(f"k={k} is outside 0..{len(s.spans)}")
    return int(s.spans[k - 1][0] if k else s.md_l)


def _bits(mask: int) -> list[int]:
    """The places of ``mask``'s set bits, ascending. O(set bits)."""
    out: list[int] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _records(s: PySmallState) -> tuple[int, ...]:
    """``s.records``: the chain's records, in the line's order (none while it has none)."""
    return tuple(s._rec[k] for k in _bits(s.recs)) if s.record >= 0 else ()


def _stale(s: PySmallState, first: int, last: int) -> None:
    """Entries ``first..last`` changed past what the chain's markers name: the next state is
    a new base holding a new record of each ledger of the line they are in."""
    k, last_k = line_index(s, first), line_index(s, last)
    s.stale |= (1 << last_k + 1) - (1 << k)


def _recorded(s: PySmallState, first: int, last: int) -> bool:
    """Whether every ledger of the line holding an entry of ``first..last`` has a record in
    the chain (a ledger with no entries holds none). O(log spans + ledgers between)."""
    for k in range(line_index(s, first), line_index(s, last) + 1):
        if not s.recs >> k & 1 and _line_start(s, k) < _line_end(s, k):
            return False
    return True


def _counted(s: PySmallState, entry: int) -> None:
    """``entry``'s delivery count set: one of the counts since the chain's records (one the
    markers named before is to be named again), while its ledger has a record that is not
    due (else the next base records it: :func:`_stale`) and they are at most
    :data:`DELTA_MOST` with the acks since (past that, its ledger is due a record)."""
    if not _tracks(s, entry, entry):
        _stale(s, entry, entry)
        return
    counted = s._counted
    if entry in counted:
        i = counted.index(entry)
        if i < s.cnamed:
            del counted[i]
            s.cnamed -= 1
            counted.append(entry)
    elif len(counted) + len(s._adds) < DELTA_MOST:
        counted.append(entry)
    else:
        _stale(s, entry, entry)


def _tracks(s: PySmallState, first: int, last: int) -> bool:
    """Whether the chain tracks changes to entries ``first..last`` since its records: every
    ledger of the line holding one has a record (:func:`_recorded`), and not every one is
    due a new record (``stale``: the next base records what it holds)."""
    k, last_k = line_index(s, first), line_index(s, last)
    due = all(s.stale >> x & 1 for x in range(k, last_k + 1))
    return not due and _recorded(s, first, last)


def _chainable(s: Any) -> bool:
    """Whether the form ``s`` (either twin's) holds state its chain's records can hold: above M."""
    return bool(s.md_e < s.top())


def _holds(s: PySmallState, k: int) -> bool:
    """Whether the k-th ledger of the line of ``s`` (0: M's) holds state: a run's entries, a
    delivery count, a partial batch. O(log runs + counts + batches)."""
    start, end = _line_start(s, k), _line_end(s, k)
    return bool(_ranges_in(s, k)) or any(start <= e < end for e in (*s._counts, *s._batches))


def _held(s: PySmallState) -> int:
    """``s.held``: the ledgers of the line holding state (:func:`_holds`; bit k: the k-th, 0
    M's). O(spans x (log runs + counts + batches)); the compiled twin's O(spans x log(runs +
    counts + batches))."""
    out = 0
    for k in range(len(s.spans) + 1):
        if _holds(s, k):
            out |= 1 << k
    return out


def _held_count(s: PySmallState) -> int:
    """How many ledgers of the whole line of ``s`` hold state (:func:`_holds`). O(spans x
    (log runs + counts + batches))."""
    return sum(_holds(s, k) for k in range(len(s.spans) + 1))


def _track(s: PySmallState, first: int, last: int, i: int, j: int) -> None:
    """Entries ``first..last`` of ``s`` are acked now, its runs ``i..j`` (those touching
    them) acked before: the others go to the acks since the chain's records, while their
    ledgers have one that is not due (else those ledgers are due new ones, which hold them:
    :func:`_stale`) and they are at most :data:`DELTA_MOST` with the counts set since (past
    that, their ledgers are due new records)."""
    r, adds = s._runs, s._adds
    if not _tracks(s, first, last):
        _stale(s, first, last)
        return
    e, most = first, DELTA_MOST - len(s._counted)
    for k in range(i, j + 1):
        stop = min(r[2 * k] - 1 if k < j else last, last)  # (the entries before run k, or to the end)
        if e <= stop:
            if len(adds) + stop - e + 1 > most:
                _stale(s, first, last)
                return
            adds.extend(range(e, stop + 1))
        if k < j:
            e = max(e, r[2 * k + 1] + 1)


def _state_record(s: PySmallState, version: int, cut: int = 0) -> bytes:
    """The form's whole state as one state marker record (format ``version``; ``cut``: a
    state that holds only the lowest ranges a flush persists, :func:`_cut_view`'s)."""
    runs = dict(ledger_runs(s))
    counted: dict[int, dict[int, int]] = {}
    for (ledger, entry), n in ledger_counts(s):
        counted.setdefault(ledger, {})[entry] = n
    batched: dict[int, dict[int, tuple[int, int]]] = {}
    for (ledger, entry), batch in ledger_batches(s):
        batched.setdefault(ledger, {})[entry] = batch
    ledgers: list[tuple[int, BitMap, dict[int, tuple[int, int]], dict[int, int]]] = [
        (ledger, bitmap_of_runs(runs.get(ledger, [])), batched.get(ledger, {}), counted.get(ledger, {}))
        for ledger in sorted(runs.keys() | counted.keys() | batched.keys())
    ]
    return pure_codecs.state_marker(version, s.cursor_id, s.md_l, s.md_e, ledgers, s.props, bool(cut))


def _cut_end(s: PySmallState, most: int) -> int:
    """PIP-299: where the state a flush persists of ``s`` ends on the line when ``s`` holds
    more than ``most`` ranges: past the lowest ``most`` of them, counted in each ledger as the
    parts count them (a run across an offset is one in each ledger); a ledger's counts and
    batches go with its ranges when all of them are persisted, and in the ledger the cut goes
    through those below the last range persisted (``Planner._prepare_truncated``'s rule).
    O(spans x log runs)."""
    left = most
    for k in range(len(s.spans) + 1):
        if left == 0:
            return _line_start(s, k)
        r = _ranges_in(s, k)
        if r > left:
            start, end = _line_start(s, k), _line_end(s, k)
            last = s._runs[2 * (s._first_ending_at_or_after(start) + left - 1) + 1]
            return end if last >= end else last + 1
        left -= r
    return _ENTRY_MAX + 1


def _cut_view(s: PySmallState, end: int) -> tuple[list[int], dict[int, int], dict[int, tuple[int, int]]]:
    """``s`` as the state a flush persists when it ends at ``end`` (:func:`_cut_end`): its
    runs, counts and batches from there on left out, the run across ``end`` cut at it.
    Returns what it held, for the caller to put back. O(runs + counts)."""
    held = s._runs, s._counts, s._batches
    i = s._first_ending_at_or_after(end)
    n = i + (i < s.n and s._runs[2 * i] < end)
    runs = s._runs[: 2 * n]
    if n and runs[-1] >= end:
        runs[-1] = end - 1
    s._runs = runs
    s._counts = {e: c for e, c in s._counts.items() if e < end}
    s._batches = {e: b for e, b in s._batches.items() if e < end}
    return held


def _ranges_in(s: PySmallState, k: int) -> int:
    """The ranges of the line's ``k``-th ledger (a run across its start or end is one there
    too). O(log runs)."""
    start, end = _line_start(s, k), _line_end(s, k)
    if start >= end:  # (a ledger with no entries)
        return 0
    i = s._first_ending_at_or_after(start)
    j = s._first_ending_at_or_after(end) if end <= _ENTRY_MAX else s.n
    return j - i + (j < s.n and s._runs[2 * j] < end)


def _runs_of(s: PySmallState, k: int) -> list[tuple[int, int]]:
    """``s.runs_of``: the line's ``k``-th ledger's runs of acks (M's: above M), its own
    entries (the form's less the ledger's offset; a run across its start or end cut there),
    as the parts hold them. O(log runs + its runs)."""
    _line_ledger(s, k)
    r, start, end = s._runs, _line_start(s, k), _line_end(s, k)
    i = s._first_ending_at_or_after(start)
    return [(max(r[2 * x], start) - start, min(r[2 * x + 1], end - 1) - start) for x in range(i, i + _ranges_in(s, k))]


def _acks_of(s: PySmallState, k: int) -> bytes:
    """``s.acks_of``: the line's ``k``-th ledger's acks (:func:`_runs_of`) in the portable
    roaring serialization: what a record of that ledger holds. O(its runs)."""
    return bitmap_of_runs(_runs_of(s, k)).serialize()


def _record_of(s: PySmallState, k: int, version: int, flags: int, first: int, last: int, code: bytes) -> bytes:
    """``s.record_of``: the line's ``k``-th ledger's record of the form's state there, the
    bytes ``records.encode_ledger`` writes for it: its acks as ``bitmaps.encode_bitmap``
    coded them (``flags``, ``first``, ``last``, ``code``: of :func:`_acks_of`' set), their
    runs, the partial batches and delivery counts of its entries, the cursor's id. O(its
    state)."""
    ledger = _line_ledger(s, k)
    start, end = _line_start(s, k), _line_end(s, k)
    batches = [
        [e - start, n, mask.to_bytes((n + 7) // 8, "little")]
        for e, (n, mask) in sorted(s._batches.items())
        if start <= e < end
    ]
    counts = [x for e, n in sorted(s._counts.items()) if start <= e < end for x in (e - start, n)]
    fields = [ledger, flags, first, last, code, _ranges_in(s, k), batches, s.cursor_id, *([counts] if counts else [])]
    return pure_codecs.seal_envelope(RECORD_LEDGER, version, msgpack.packb(fields))


def _marker_items(s: PySmallState, full: bool, renamed: int = 0) -> list[tuple[Any, ...]]:
    """The index a marker of the chain names: each ledger with a record (a full marker: every
    one) with its record, its range count and the acks and delivery counts since it (a
    delta marker: those with any since the last marker, and those, and the ledgers
    ``renamed`` names, bit k the k-th: their new records). O(those ledgers' runs + acks and
    counts since)."""
    counts = s._counts
    adds = sorted(s._adds if full else s._adds[s.named :])
    counted = sorted(e for e in (s._counted if full else s._counted[s.cnamed :]) if e in counts)
    items: list[tuple[Any, ...]] = []
    for k in _bits(s.recs):
        start, end = _line_start(s, k), _line_end(s, k)
        acked = [e - start for e in adds if start <= e < end]
        since = {e - start: counts[e] for e in counted if start <= e < end}
        if full or acked or since or renamed >> k & 1:
            ranges = _ranges_in(s, k) + (s.passed if k == 0 else 0)
            items.append((_line_ledger(s, k), (s._rec[k], ranges, BitMap(acked) or None, since or None)))
    return items


def _past_layout(s: PySmallState, prev: int, recs: int) -> bool:
    """Whether a marker of ``s`` after ``prev`` (-1: none, a new cursor's first state, which
    a full marker names as :data:`~ackstore.storage.codecs.NO_PREV`) naming the ledgers
    ``recs`` has a field past the fixed layout's 32 bits."""
    top = max(s.cursor_id, s.md_l, prev + 1, s.md_e + 2, _line_ledger(s, recs.bit_length() - 1))
    return prev < -1 or top > _ENTRY_MAX


def _over(s: PySmallState, max_acks: int) -> bool:
    """Whether the acks above M and the counts still standing since the chain's records are
    more than ``max_acks``: more than a marker names (new records are due). The acks M passed
    since (``passed``: one range) are not counted: a consumer acking its oldest holes late
    makes as many of them as it acks above M."""
    return sum(e > s.md_e for e in s._adds) + sum(e in s._counts for e in s._counted) > max_acks


def _marker_record(s: PySmallState, version: int, max_acks: int) -> tuple[bytes, bool, bool] | None:
    """The form's next state as a marker of its chain, and whether it is a full one (the
    rule of the parts' :func:`~ackstore.cursor.chain.full_marker`: when one is due, every
    ``every`` delta markers or once they outgrow the full marker's bytes or
    :data:`~ackstore.cursor.chain.SMALL_CHAIN`, or when every ledger with a record changed
    and the chain named at most that many bytes of them already): :func:`_marker_items`.
    None when it cannot be one: no chain, anything else changed (``fresh``), a ledger due
    a new record (``stale``), more than ``max_acks`` acks and counts since the records (new
    ones are due), or a field past the fixed layout's 32 bits. O(runs of those ledgers +
    acks and counts since)."""
    if s.base < 0 or s.record < 0 or s.fresh or s.stale or not s.recs or _past_layout(s, s.marker, s.recs):
        return None
    counts = s._counts
    if _over(s, max_acks):
        return None
    due = outgrown(s.deltas, s.every, s.chain_bytes, s.base_bytes)
    touched = {line_index(s, e) for e in (*s._adds[s.named :], *s._counted[s.cnamed :])}
    changed = all(k in touched for k in _bits(s.recs))  # (the whole index)
    full = full_marker(due, changed, s.named + 2 * sum(e in counts for e in s._counted[: s.cnamed]))
    value = pure_codecs.fixed_marker(
        version, FIXED_FULL if full else 0, s.marker, s.md_l, s.md_e, s.md_l, s.md_e + 1, s.cursor_id,
        _marker_items(s, full), s.props,
    )  # fmt: skip
    return value, full, due


def _to_record(s: PySmallState, max_acks: int) -> int:
    """``s.to_record``: the ledgers of the line (bit k: the k-th) a new base of the chain
    writes a record of: every one holding state when the state is written whole (no chain,
    ``fresh``); else those due one (``stale``, or holding state and none yet) and, when the
    acks and counts since the records are more than ``max_acks``, those they are most in,
    the most first (the first of a tie), until the rest are at most half of it (the ledger
    a consumer reads on in, not the one whose holes it holds). None of them (0) when those
    due hold nothing now (M moved past their acks): the base is a full marker alone, naming
    the records that stand. O(acks and counts since + spans x log runs)."""
    held = _held(s)
    if s.fresh or s.base < 0 or not s.recs:
        return held
    due = s.stale | held & ~s.recs
    if _over(s, max_acks):
        per = [0] * (len(s.spans) + 1)
        for e in (*s._adds, *s._counted):
            per[line_index(s, e)] += 1
        left = len(s._adds) + len(s._counted)
        for k in sorted(range(len(per)), key=lambda k: (-per[k], k)):
            if left <= max_acks // 2 or not per[k]:
                break
            due, left = due | 1 << k, left - per[k]
    written = due & held
    return written if written or s.recs & ~s.stale else held


def base_puts(
    s: Any, version: int, max_acks: int
) -> tuple[list[tuple[bytes, bytes]], int, int, tuple[int, ...]] | None:
    """A new base of the chain of the form ``s`` that :data:`flush_small` listed as
    ``based`` (its state over a state slot's bound): a record of each ledger of the line
    ``s.to_record(max_acks)`` names (the bytes ``records.encode_ledger`` writes: the code
    ``encode_bitmap`` chooses for the form's ``acks_of`` it, the rest of the record written
    by the form, ``record_of``) under the form's next log sequences, in the line's order,
    and a marker naming them under the one after (``took_base`` says which), written and
    adopted by ``took_base``:
    ``(puts, bytes, below, keeps)``, the trim it makes as ``flush_small``'s trims say it;
    None, changing nothing, when a field is outside the fixed marker's layout (the parts
    write it). Either twin's form. O(the runs and counts of the ledgers recorded)."""
    seq, written = s.next_seq, s.to_record(max_acks)
    puts = [
        (log_key(s.cursor_id, seq + i), s.record_of(k, version, *encode_bitmap(BitMap.deserialize(s.acks_of(k)))))
        for i, k in enumerate(_bits(written))
    ]
    nbytes = sum(len(k) + len(v) for k, v in puts)
    took = s.took_base(version, written, nbytes)
    if took is None:
        return None
    marker, below, keeps = took
    puts.append((log_key(s.cursor_id, seq + len(puts)), marker))
    return puts, nbytes + 16 + len(marker), below, keeps


def flush_bases(
    based: list[Any], version: int, max_acks: int, trims: list[Any], over: list[Any]
) -> tuple[list[tuple[bytes, bytes]], int, int, int]:
    """:func:`base_puts` of each form :data:`flush_small` listed in ``based``: their puts and
    bytes, how many forms wrote a base (a marker each) and how many of those markers are
    full ones (a chain that goes on ends in a delta); the trims they make appended to
    ``trims`` as ``flush_small`` appends its own, those outside the fixed layout to ``over``
    (their parts write them). O(their states)."""
    puts: list[tuple[bytes, bytes]] = []
    nbytes = bases = full = 0
    for form in based:
        made = base_puts(form, version, max_acks)
        if made is None:
            over.append(form)
            continue
        puts += made[0]
        nbytes += made[1]
        bases += 1
        full += form.base == form.marker
        if made[2] >= 0:
            trims.append((form, made[2], made[3]))
    return puts, nbytes, bases, full


def _adopt(
    s: PySmallState,
    base: int,
    marker: int,
    records: Any,
    base_bytes: int,
    adds: Any,
    counted: Any,
    deltas: int,
    bytes_: int,
) -> None:
    """``s.adopt``: the chain its parts wrote last, full marker ``base`` of ``base_bytes``
    and ``deltas`` delta markers after it of ``bytes_`` up to ``marker`` (``base`` itself
    when none), naming the records ``records`` (``((k, seq), ...)``: the line's ``k``-th
    ledger's, each below ``marker`` and not ``base``: a delta marker may name records written
    after the full one; or M's ledger's alone, an int, -1: none) with the entries (the
    form's) acked since them ``adds`` and those counted since ``counted``: the next states
    are markers naming those records. O(adds + counted)."""
    adds, counted = [_entry(e, "an entry acked since") for e in adds], [_entry(e, "a counted entry") for e in counted]
    pairs = ((0, records),) if type(records) is int else tuple(records)
    pairs = tuple(pair for pair in pairs if pair != (0, -1))
    line = len(s.spans) + 1
    ok = all(type(p) is tuple and len(p) == 2 and type(p[0]) is int and type(p[1]) is int for p in pairs)
    ok = ok and len({k for k, _ in pairs}) == len(pairs)
    ok = ok and all(0 <= k < line and 0 <= seq < marker and seq != base for k, seq in pairs)
    bad = not 0 <= base <= marker < s.next_seq or (deltas == 0) != (marker == base) or not ok
    if bad or s.base != -2 or deltas < 0 or bytes_ < 0 or len(adds) + len(counted) > DELTA_MOST:
        raise ValueError(f"adopt({base}, {marker}, {records}): not a chain before {s.next_seq} of its parts")
    s._rec = [-1] * LINE_LEDGERS
    for k, seq in pairs:
        s._rec[k] = seq
    s.recs = sum(1 << k for k, _ in pairs)
    s.base, s.marker, s.record, s.base_bytes = base, marker, min((seq for _, seq in pairs), default=-1), base_bytes
    s.deltas, s.chain_bytes, s.untrimmed, s.stale = deltas, bytes_, 0, 0
    s.unchain()  # (passed 0: the records adopted hold nothing at or below M, nor do the acks since)
    if pairs:
        s._adds[:], s._counted[:], s.named, s.cnamed = adds, counted, len(adds), len(counted)
        s.fresh = 0
        s.low = _held_low(s)  # (what they hold: above M)


def _took_base(s: PySmallState, version: int, written: int, nbytes: int) -> tuple[bytes, int, tuple[int, ...]] | None:
    """``s.took_base``: a flush wrote a record of each ledger of the line ``written`` names
    (bit k: the k-th), ``nbytes`` of keys and values, under the form's next sequences, in
    the line's order: the chain's new base, adopted as :data:`flush_small` adopts what it
    writes (:data:`undo_small` gives it back). Returns the marker to write under the
    sequence after them and the trim it makes, ``(marker, below, keeps)``: a delta marker
    naming the new records and the acks and counts since the last marker when the chain goes
    on (records of other ledgers stand, none went, no trim is due: a flush costs what
    changed), else a full marker naming every ledger's record (these, and, unless the state
    was written whole, the others' with the acks and counts since them), and below the
    chain before but its records (-1: none) when the state was written whole or by a full
    marker's trim rule; None, changing nothing, when a field of the marker is outside the
    fixed layout. ``written`` may name none (0) when the state is not written whole: the
    full marker alone. O(acks and counts since + the marker's ledgers' runs)."""
    whole = bool(s.fresh or s.base < 0 or not s.recs)
    ok = type(written) is int and 0 <= written < 1 << len(s.spans) + 1
    gone = 0 if whole or not ok else s.stale & ~written  # (stale, not written: holds nothing now, its record goes)
    recs = written | (0 if whole else s.recs & ~gone) if ok else 0
    if not recs:
        raise ValueError(f"took_base: {written!r} names no ledger of the line, or one past it")
    seq, m = s.next_seq, written.bit_count()
    due = outgrown(s.deltas, s.every, s.chain_bytes, s.base_bytes)  # (a full marker's trim: MarkerChain.trim_due)
    trim = s.base >= 0 and (whole or due or garbage_due(s.untrimmed, s.base_bytes))
    full = trim or whole or bool(gone) or not written or not recs & ~written
    if _past_layout(s, seq - 1 if full else s.marker, recs):
        return None
    _stash(s)
    below, keeps = (s.base, _records(s)) if trim else (-1, ())
    if trim:
        s.slots = 0  # (below the chain: trimmed)
    named = cnamed = 0
    if whole:
        s._rec = [-1] * LINE_LEDGERS
        s.unchain()
    else:  # (what the new records hold is no longer since a record; a delta marker names the rest since the last)
        renewed = written | gone
        named, s._adds[:] = _kept(s, s._adds, s.named, renewed)
        cnamed, s._counted[:] = _kept(s, s._counted, s.cnamed, renewed)
    for i, k in enumerate(_bits(written)):
        s._rec[k] = seq + i
    s.recs, s.stale, s.fresh = recs, 0, 0
    if whole or (written | gone) & 1:  # (M's ledger's record written: above M alone)
        s.low, s.passed, s.dropped = _held_low(s), 0, 0
    s.named, s.cnamed = (0, 0) if full else (named, cnamed)
    items = _marker_items(s, full, written)
    _named_low(s)  # (the marker names every ack since the records, or since the last marker)
    s.named, s.cnamed = len(s._adds), len(s._counted)
    s.record = min(s._rec[k] for k in _bits(recs))
    flags, prev = (FIXED_FULL, seq - 1) if full else (0, s.marker)
    md_l, md_e = s.md_l, s.md_e
    marker = pure_codecs.fixed_marker(version, flags, prev, md_l, md_e, md_l, md_e + 1, s.cursor_id, items, s.props)
    s.marker = seq + m
    if full:
        s.base = s.marker
        s.base_bytes, s.deltas, s.chain_bytes, s.tail = len(marker), 0, 0, 0
    else:
        s.deltas, s.chain_bytes = s.deltas + 1, s.chain_bytes + len(marker)
    total = nbytes + 16 + len(marker)
    s.untrimmed = 0 if trim else total if whole else s.untrimmed + total
    _adopted(s, m + 1, total, 0)
    return marker, below, keeps


def _kept(s: PySmallState, entries: list[int], named: int, renewed: int) -> tuple[int, list[int]]:
    """``entries`` (acked or counted since the chain's records, the first ``named`` of them
    named by a marker) without those in the ledgers ``renewed`` names (bit k: the line's
    k-th, whose new record holds them), and how many of those kept were named."""
    kept = [not renewed >> line_index(s, e) & 1 for e in entries]
    return sum(kept[:named]), [e for e, keep in zip(entries, kept, strict=True) if keep]


def _stash(s: PySmallState) -> None:
    """What :func:`_py_undo_small` gives back of a flush about to be adopted."""
    s._undo_chain = (
        s.base, s.marker, s.deltas, s.chain_bytes, s.base_bytes, s.tail, s.slot, s.record, s.untrimmed, s.slots,
        s.next_seq, s.recs, s.stale, list(s._rec), s.passed, s.truncated,
    )  # fmt: skip
    s._undo_persisted = s.persisted
    s._undo = s.slots


def _adopted(s: PySmallState, seqs: int, nbytes: int, cut: int) -> None:
    """A flush wrote ``seqs`` sequences of the form's state, ``nbytes`` in all: adopted
    (``cut``: the state holds only the lowest :attr:`~PySmallState.persist` ranges, and the
    form stays to be flushed, as its parts keep a ledger the cap cut dirty)."""
    s.next_seq += seqs
    s.touched = UNTOUCHED
    s.dirty = s.truncated = cut
    s.persisted = s.persist if cut else s.range_count()
    s.flushes += 1
    s.flush_bytes += nbytes
    s.last_bytes = nbytes


def _py_flush_small(
    smalls: list[Any],
    version: int,
    reserve: int,
    max_counts: int,
    max_bytes: int,
    max_runs: int,
    max_acks: int,
    chains: int,
    written: list[Any] | None = None,
    trims: list[Any] | None = None,
    based: list[Any] | None = None,
    capped: list[Any] | None = None,
) -> tuple[list[tuple[bytes, bytes]], int, list[Any], int]:
    """The pure-Python :data:`flush_small`: every changed one's next state, and each adopted:
    its sequence on, its chain or slots as the state went, unchanged. Where a state goes:

    - a ``logged`` one's (its cursor keeps history: :func:`~ackstore.cursor.lane.state_slot`'s
      rule) as its state marker under its log key, its slots left as they are; the form is
      appended to ``written`` (when given);
    - else a marker of the form's own chain under its log key, when it can be one
      (:func:`_marker_record`: at most ``max_acks`` acks and counts since the record);
    - else, when the state layout a slot takes holds it (at most ``max_runs`` ranges, a
      record of at most ``max_bytes``), the state slot its newest is not in (``reserve``
      zero bytes of room in a slot's first value; ``version`` the record's format);
    - else, when ``chains`` (:func:`set_form_chains`) and it holds state above M, a new
      chain: the form is appended to ``based`` and not written here (its
      records are the parts' codec's: :func:`base_puts` writes them); else it is over (its
      parts write it).

    A state that trims appends ``(form, below, keeps)`` to ``trims`` (when given): delete its
    log keys and slot states of sequences below ``below`` but those in ``keeps``. A full
    marker trims below the full marker before it but their records, when a full one was due
    or once the bytes written since the last trim outgrow
    :data:`~ackstore.cursor.chain.GARBAGE_FACTOR` times the chain's allowance (the parts'
    rule: ``MarkerChain.trim_due``); the first state a slot takes after the chain trims
    what lies below that chain's full marker but its records, the second one every log key
    (the one before it is then in the other slot). One whose state the state layout does
    not take (more than ``max_counts`` delivery counts and partial batches, or, for a
    ``logged`` one, a record over ``max_bytes``: the limits a flush of the parts writes a
    state marker within) goes to the form's chain as any state over a slot's bound, or, when
    ``logged``, is not written and is listed instead (its cursor's parts take the state).
    One holding more ranges than its ``persist`` (PIP-299) writes the lowest of them alone
    (:func:`_cut_end`), a whole state in a slot or under its
    log key (``logged``, or one a slot does not take, when ``chains``: then the one marker of
    its chain, which trims below the full marker before it but its records), none when its
    newest state is that very record (:attr:`~PySmallState.cut_record`: the cut holds), and
    stays dirty (without ``chains``, one a slot does not take is over); ``(its index in
    smalls, flipped)`` is appended to ``capped`` (when given) for each one
    whose state is cut now, or was at its last flush and is not now (``flipped``: the one or
    the other changed at this flush). Returns the puts (a list of ``(key, value)``; the compiled twin's are the same
    pairs in one ``Puts``, ``ackstore/_puts.c``), their bytes, those not written and how many
    of the puts are delta markers (every other put is a whole state or a full marker).
    O(smalls + their runs and counts)."""
    if not 0 <= version <= 0xFF or not 0 <= reserve <= 64:
        raise ValueError(f"flush_small: format {version} or room {reserve} is outside the layout (0..255, 0..64)")
    for given, what in ((written, "written"), (trims, "trims"), (based, "based"), (capped, "capped")):
        if given is not None and not isinstance(given, list):
            raise TypeError(f"flush_small's {what} is a list (of the forms it writes so) or None")
    puts: list[tuple[bytes, bytes]] = []
    over: list[Any] = []
    total = deltas = 0
    for at, s in enumerate(smalls):
        if type(s) is not PySmallState:
            raise TypeError(f"flush_small flushes SmallStates, not {s!r}")
        s._undo = -1
        if not s.dirty or s.ended:
            continue
        if _over_budget(s):  # its parts hold it under the budget
            over.append(s)
            continue
        cut = int(bool(s.persist) and s.range_count() > s.persist)  # (PIP-299)
        seq = s.next_seq
        key = log_key(s.cursor_id, seq)
        keeps: tuple[int, ...] = ()
        below = -1
        end = _cut_end(s, s.persist) if cut else 0
        if cut and s.truncated and s.cut_record is not None and s.touched > end == s.cut_at:
            _watch_cap(s, at, cut, capped)  # nothing changed up to the cut: it holds
            continue
        marked = None if s.logged or cut else _marker_record(s, version, max_acks)
        loggable = bool(cut and chains and not s.logged)  # (a cut state a slot does not take: under its log key)
        logs = False
        if marked is None:
            held = _cut_view(s, end) if cut else None
            try:
                many = s.nc + s.nb > max_counts  # more than a slot's layout takes
                record = b"" if many and not loggable else _state_record(s, version, cut)
                wide = not s.logged and s.range_count() > max_runs
            finally:
                if held is not None:
                    s._runs, s._counts, s._batches = held
            logs = loggable and (many or len(record) > max_bytes or wide)
            if not logs and (many or len(record) > max_bytes or wide):  # not a slot's
                if not cut and chains and based is not None and not s.logged and _chainable(s):
                    _watch_cap(s, at, 0, capped)
                    based.append(s)  # a new chain: base_puts writes it
                else:
                    over.append(s)  # the parts' to write (a cut one, without chains or logged, among them)
                continue
            if cut and s.truncated and record == s.cut_record:  # the cut persisted holds: nothing to write
                _watch_cap(s, at, cut, capped)
                s.touched, s.cut_at = UNTOUCHED, end
                continue
        _stash(s)
        if marked is not None:  # a marker of the form's chain
            value, full, due = marked
            if full:
                if due or garbage_due(s.untrimmed, s.base_bytes):  # (MarkerChain.trim_due's rule)
                    below, keeps, s.slots = s.base, _records(s), 0  # (the slots: below the chain)
                s.base, s.base_bytes, s.deltas, s.chain_bytes = seq, len(value), 0, 0
            else:
                s.deltas, s.chain_bytes = s.deltas + 1, s.chain_bytes + len(value)
                deltas += 1
            _named_low(s)
            s.marker, s.named, s.cnamed = seq, len(s._adds), len(s._counted)
        elif s.logged:
            value = record
            if written is not None:
                written.append(s)
        elif logs:  # a cut state a slot does not take: whole, under its log key, its chain's one marker
            value = record
            if s.base >= 0:  # (the marker before stays, and its records: below it goes)
                below, keeps, s.slots = s.base, _records(s), 0
            s.base = s.marker = seq
            s.tail = s.deltas = s.chain_bytes = s.recs = s.stale = 0
            s.base_bytes, s.record, s._rec = len(value), -1, [-1] * LINE_LEDGERS
            s.unchain()
        else:  # a state slot
            slot, room = next_slot(s.slot, s.slots, reserve)
            key = slot_key(s.cursor_id, slot)
            value = seal_slot(key, seq, record, room)
            if s.base >= 0:  # leaving the chain: what lies below its full marker goes but its records
                below, keeps, s.slots = s.base, _records(s), 0
            if s.base != -1:
                s.tail, s.base = 1, -1
            elif s.tail:  # the one before in the other slot: every log key goes
                below, keeps, s.tail = seq, (seq - 1,), 0
            s.slot = slot
            s.slots |= 1 << slot
            s.unchain()
        if below >= 0 and trims is not None:
            trims.append((s, below, keeps))
        puts.append((key, value))
        _watch_cap(s, at, cut, capped)
        s.cut_record = record if cut else None
        nbytes = len(key) + len(value)
        s.untrimmed = 0 if below >= 0 else s.untrimmed + nbytes
        _adopted(s, 1, nbytes, cut)  # (undo_small gives it back)
        s.cut_at = end
        total += nbytes
    return puts, total, over, deltas


def _deliver(s: PySmallState, items: Any, values: list[int] | None) -> list[int] | None:
    """:meth:`PySmallState.deliver_positions` (``values`` None: one more delivery of each) and
    :meth:`PySmallState.set_counts` (each count set to its value). O(items)."""
    entries = form_entries(s, items)
    if entries is None:
        return None
    out: list[int] = []
    counts = s._counts
    for i, entry in enumerate(entries):
        if s.acked(entry):
            out.append(0)
            continue
        if values is not None:
            n = int(values[i])
        else:
            n = min(counts.get(entry, 0) + 1, MAX_COUNT)
            if n > 1:
                s.redeliveries += 1
        counts[entry] = n
        if not s.fresh:
            _counted(s, entry)
        out.append(n)
        _touch(s, entry)
    return out


def _watch_cap(s: PySmallState, at: int, cut: int, capped: list[Any] | None) -> None:
    """``s``, the ``at``-th form the flush was given, has its state written now ``cut``
    (PIP-299): ``(at, flipped)`` appended to ``capped`` (when given) when it is cut or was
    at its last flush (``flipped``: it was not then, or the other way round)."""
    flipped = int(cut != s.over_cap)
    s.over_cap = cut
    if capped is not None and (cut or flipped):
        capped.append((at, flipped))


def _py_undo_small(smalls: list[Any]) -> None:
    """The pure-Python :data:`undo_small`: each one the last flush took, as it was before
    that flush (its chain and slots), and changed again (its state waits for the next
    flush, written whole: the acks and counts a marker would have named are in it).
    O(smalls)."""
    for s in smalls:
        if type(s) is not PySmallState or s._undo < 0 or s.ended:
            continue
        (
            s.base, s.marker, s.deltas, s.chain_bytes, s.base_bytes, s.tail, s.slot, s.record, s.untrimmed, s.slots,
            s.next_seq, s.recs, s.stale, s._rec, s.passed, s.truncated,
        ) = s._undo_chain  # fmt: skip
        s.cut_record = None  # (not known now: the next one is written)
        s.persisted = s._undo_persisted
        s.flushes -= 1
        s.flush_bytes -= s.last_bytes
        _touch(s, 0)
        s.unchain()
        s._undo = -1


def _py_small_of_slots(
    cursor_id: int,
    value0: bytes | None,
    value1: bytes | None,
    max_version: int,
    cap: int,
    line: Any = None,
    logged: tuple[int, bytes] | None = None,
) -> Any:
    """The small form of a cursor whose log is only its state slots, read from their values
    (None: the slot holds none), or whose newest state is ``logged``, ``(seq, record)`` under
    its log key, when newer than both (a cursor that keeps history: its slots, if any, hold
    older states), or None: when a slot's head is damaged (recovery says what
    it may have held), when the newest state is not an intact state marker of this cursor,
    or when it is outside the form (a ledger not on the form's line, more than ``cap`` ranges
    or :data:`COUNT_CAP` counts and partial batches). ``line(md_l)`` gives the line of a
    state of more than M's ledger (``small_span.bound_of``'s ``(spans, limit)``, or None),
    asked only for such a state (None: none is the form's); the form is bounded by the
    caller (:func:`small_opened`). Its properties are taken as the bytes they are
    (:func:`small_opened` checks they decode). O(the newest value)."""
    newest: tuple[int, int, bytes] | None = None
    held = 0
    for slot, value in enumerate((value0, value1)):
        if value is None:
            continue
        held |= 1 << slot
        try:
            seq, start = pure_codecs.slot_head(slot_key(cursor_id, slot), value)
        except ValueError:
            return None
        if newest is None or seq > newest[0]:
            newest = seq, slot, value[start:]
    if logged is not None:
        if not (isinstance(logged, tuple) and len(logged) == 2 and isinstance(logged[1], bytes)):
            raise TypeError(f"small_of_slots's logged is (seq, record bytes) or None, not {logged!r}")
        if newest is None or logged[0] > newest[0]:  # (no slot holds a value: the next state's slot is 0)
            newest = logged[0], 1 if newest is None else newest[1], logged[1]
    if newest is None:
        return None
    seq, slot, record = newest
    if record[:1] != b"\xc1":
        return None  # not the fixed envelope: recovery's
    try:
        rtype, _, body = pure_codecs.open_envelope(record, max_version)
        if rtype != RECORD_MARKER or body[:1] != b"\xc2":
            return None  # another layout
        cid, md_l, md_e, ledgers, end = pure_codecs.state_fields(body)
    except ValueError:
        return None
    if cid != cursor_id:
        return None  # (state_fields refused unknown flags)
    props = body[end:]
    if bool(props) != bool(body[1] & STATE_PROPS):
        return None  # bytes after the ledgers with no properties, or none with them
    offsets, ends = {md_l: 0}, {md_l: _ENTRY_MAX + 1}  # each ledger's offset on the line, and its end there
    if any(ledger != md_l for ledger, *_ in ledgers):
        bound = None if line is None else line(md_l)
        if bound is None:
            return None
        points = [(md_l, 0), *bound[0]]
        offsets = dict(points)
        ends = {ledger: end for (ledger, _), (_, end) in zip(points, [*points[1:], (-1, bound[1] + 1)], strict=True)}
    runs: list[tuple[int, int]] = []
    counts: list[tuple[int, int]] = []
    batches: list[tuple[int, int, int]] = []
    ranges = 0
    for ledger, flat, batched, counted in ledgers:
        offset = offsets.get(ledger)
        if offset is None or not (flat or counted or batched):
            return None
        if offset + max([*flat[-1:], *counted, *batched]) >= ends[ledger]:
            return None  # past the ledger's end on the line (a bound durable first: recovery clips)
        batches += [(offset + entry, *batch) for entry, batch in sorted(batched.items())]
        ranges += len(flat) // 2
        for first, last in zip(flat[::2], flat[1::2], strict=True):
            if runs and runs[-1][1] + 1 == offset + first:  # (a run across an offset: one on the line)
                runs[-1] = (runs[-1][0], offset + last)
            else:
                runs.append((offset + first, offset + last))
        counts += [(offset + entry, n) for entry, n in sorted(counted.items())]
    if ranges > cap or len(counts) + len(batches) > COUNT_CAP or (runs and runs[-1][1] > _ENTRY_MAX):
        return None
    try:
        s = PySmallState(
            cursor_id, md_l, md_e, seq + 1, slot, held, runs, cap, counts, props=bytes(props), batches=batches
        )
    except ValueError:  # a run at M + 1, a count or a partial batch of an acked entry
        return None
    s.logged = int(logged is not None)  # (read for a cursor that keeps history: its states go under log keys)
    s.truncated = int(bool(body[1] & STATE_TRUNCATED))
    return s


def _py_small_of_record(
    cursor_id: int,
    md_l: int,
    md_e: int,
    next_seq: int,
    slot: int,
    slots: int,
    cap: int,
    props: bytes,
    records: tuple[tuple[int, int, int, bytes, int], ...],
    max_version: int,
    adds: Any,
    counts: dict[int, int] | None,
    lazy: bool = False,
) -> Any:
    """The small form of a cursor whose newest marker names the ``records`` of ledgers of its
    line (:func:`chain_opened` reads and checks the marker and gives each as ``(ledger,
    offset, stop, record, runs)``, in line order: the ledger at ``offset`` on the form's
    line, its entries before ``stop``, its record and the runs it is to state, -1: not
    asked): each record's acks above M and delivery counts at their offset, then ``adds``
    (the form's entries acked since them) and ``counts`` (those counted since, the newer
    count winning), with M, the sequences and slots, ``cap`` and the packed ``props`` given.
    None, so that recovery reads the cursor, for a record not of its ledger and this cursor,
    not read in one pass (``pure_acks.ledger_bounds``'s records of ``ONE_PASS_CODES``, with
    delivery counts but no partial batch), damaged, stating other than its runs or
    than ``runs``, holding state at or past ``stop`` or acks at M + 1 (M would move:
    recovery's to fit), or over ``cap`` runs or :data:`COUNT_CAP` counts. ``lazy``: the
    compiled twin may keep one record of M's ledger holding acks alone, with nothing since,
    for the form's first use to read (its ``unread``), having checked it but for the decode;
    this twin reads it now (a form answers the same either way).
    O(the records' values + adds + counts)."""
    if type(props) is not bytes or type(records) is not tuple or not (counts is None or type(counts) is dict):
        raise TypeError("small_of_record's props are bytes, its records a tuple, its counts a dict or None")
    if md_l < 0 or not -1 <= md_e < _ENTRY_MAX or slot not in (0, 1) or not 0 <= slots <= 3:
        return None
    s = PySmallState(cursor_id, md_l, md_e, next_seq, slot, slots, [], cap)
    try:
        floor = 0  # (each record's ledger after the one before on the line)
        for item in records:
            if not _record_into(s, item, max_version, floor):
                return None
            floor = item[2]
        for e in sorted(adds):
            if e <= md_e + 1:  # (M would move; at or below M: recovery's to read)
                return None
            _ack_run(s, e, e)
        for e, n in (counts or {}).items():
            if e > md_e:
                s._counts.pop(e, None)
                s._counts[_entry(e, "a counted entry")] = _count(s, e, n)
    except ValueError:
        return None
    if s.n > cap or len(s._counts) > COUNT_CAP:
        return None
    s.props, s.persisted, s.dirty = props, s.n, 0
    return s


def _record_into(s: PySmallState, item: Any, max_version: int, floor: int) -> bool:
    """One ledger's record read into ``s`` (:func:`_py_small_of_record`'s ``records``' item,
    its offset at or after ``floor``, the stop of the one before):
    its acks above M appended after the runs of the ledgers before it (a run across the
    offset joined), then its delivery counts; whether the form takes it. O(its values)."""
    if type(item) is not tuple or len(item) != 5 or type(item[3]) is not bytes:
        raise TypeError(f"small_of_record's records are (ledger, offset, stop, record: bytes, runs), not {item!r}")
    ledger, offset, stop, record, runs = item
    if not floor <= offset < stop <= _ENTRY_MAX + 1:
        return False
    read = pure_acks.ledger_bounds(record, RECORD_LEDGER, max_version, pure_acks.ONE_PASS_CODES)
    if read is None:
        return False
    fields, bounds = read
    owner, flat = [*fields, None, None][7:9]
    if fields[0] != ledger or (owner is not None and owner != s.cursor_id) or 0 <= runs != fields[5]:
        return False
    if len(flat or ()) % 2:
        return False
    held = s._runs
    for first, end in zip(bounds[::2], bounds[1::2], strict=True):
        first, last = offset + first, offset + end - 1
        if last >= stop:
            return False
        if first <= s.md_e + 1 or (held and first <= held[-1]):  # (M would move, or acks at or below M)
            return False
        if held and first == held[-1] + 1:
            held[-1] = last
        elif len(held) // 2 >= s.cap:
            return False
        else:
            held += (first, last)
    for e, n in zip(flat[::2], flat[1::2], strict=True) if flat else ():
        if e < 0 or offset + e >= stop:
            return False
        if offset + e > s.md_e:
            if offset + e in s._counts:
                raise ValueError(f"entry {offset + e} counted twice")
            s._counts[offset + e] = _count(s, offset + e, n)
    return True


def _count(s: PySmallState, entry: int, n: int) -> int:
    """``n`` as the delivery count of ``entry`` in form ``s`` (not acked, 1..2**32-1);
    ValueError for any other."""
    if s.acked(entry) or not 1 <= n <= _ENTRY_MAX:
        raise ValueError(f"delivery count ({entry}, {n}) is not of an unacked entry above M")
    return n


def _py_line_runs(ledgers: Any) -> bytes:
    """The pure-Python ``line_runs``: the runs of ``ledgers``, ``(offset, BitMap)`` pairs in
    the order of their offsets on a form's line, each BitMap's values at its offset, as the
    flat bounds ``(first, last, ...)`` in native u32s that :class:`SmallState` takes as its
    runs; a run across an offset is one. ValueError for a value past the layout or a ledger
    overlapping the one before. O(containers + runs)."""
    out = array("I")
    top = -1
    for item in ledgers:
        if type(item) is not tuple or len(item) != 2:
            raise TypeError("a ledger of the line is an (offset, BitMap) tuple")
        offset, held = item[0], run_bounds(item[1])
        if offset < 0 or (held and (held[0][0] + offset <= top or held[-1][1] + offset > _ENTRY_MAX)):
            raise ValueError(f"ledger at offset {offset} of the line is past the layout or the ledger before")
        for first, last in held:
            if out and first + offset == top + 1:  # (across the offset: one run)
                out[-1] = last + offset
            else:
                out.extend((first + offset, last + offset))
            top = last + offset
    return out.tobytes()


class Small(NamedTuple):
    """One implementation of the small form (the type and its functions)."""

    SmallState: Callable[..., Any]
    flush_small: Callable[..., Any]
    undo_small: Callable[..., Any]
    small_of_slots: Callable[..., Any]
    small_of_record: Callable[..., Any]
    line_runs: Callable[..., Any]


_native = codecs.native
SmallState: Callable[..., Any] = PySmallState if _native is None else _native.SmallState
"""the small form's type in use: ``ackstore._native.SmallState`` where the compiled module
was built, else :class:`PySmallState`"""
flush_small: Callable[..., Any] = _py_flush_small if _native is None else _native.flush_small
"""the flush of small forms in use (the pure twin: :func:`_py_flush_small`)"""
undo_small: Callable[..., Any] = _py_undo_small if _native is None else _native.undo_small
"""the undo of a flush of small forms in use (the pure twin: :func:`_py_undo_small`)"""
small_of_slots: Callable[..., Any] = _py_small_of_slots if _native is None else _native.small_of_slots
"""the read of a small form from its state slots in use (the pure twin: :func:`_py_small_of_slots`)"""
small_of_record: Callable[..., Any] = _py_small_of_record if _native is None else _native.small_of_record
"""the read of a small form from the record its newest marker names in use (the pure twin:
:func:`_py_small_of_record`)"""
line_runs: Callable[..., Any] = _py_line_runs if _native is None else _native.line_runs
"""the runs of a form's line's BitMaps, as :data:`SmallState` takes them, in use (the pure
twin: :func:`_py_line_runs`)"""
IMPLEMENTATIONS = [
    Small(PySmallState, _py_flush_small, _py_undo_small, _py_small_of_slots, _py_small_of_record, _py_line_runs)
]
"""the twins, pure first (the tests run each)"""
if _native is not None:
    IMPLEMENTATIONS.append(Small(SmallState, flush_small, undo_small, small_of_slots, small_of_record, line_runs))


def _cap(config: CursorConfig) -> int:
    """The most runs a cursor of ``config`` holds in the small form; -1: it never takes it
    (no cursor writes the state layout)."""
    if lane.STATE_MAX_RUNS < 0:
        return -1
    return FORM_RUNS_FACTOR * lane.STATE_MAX_RUNS if _CHAINS[0] else lane.STATE_MAX_RUNS


def _settle(s: Any, config: CursorConfig) -> None:
    """The form ``s`` runs under ``config`` from now on: its full-marker period, its cache
    budget and the most ranges a flush persists (PIP-299). O(1)."""
    s.every, s.budget = config.full_marker_every, config.max_individual_ack_cache_bytes
    s.persist = config.max_unacked_ranges_to_persist


def take_config(small: Any, old: CursorConfig, new: CursorConfig) -> bool:
    """A cursor in the small form ``small`` whose configuration goes from ``old`` to ``new``:
    True when it keeps the form, which then runs under ``new`` (its cap, full-marker period
    and cache budget); False, the form unchanged, when it does not: its runs and counts do
    not fit under the new cap (``fits``), its states would go elsewhere (history turned on
    or off), or it is over the new cache budget (:func:`_over_budget`). Dead letters and the
    window's length are the parts' or the store's. O(spans), or O(spans x log runs) near the
    budget."""
    cap = _cap(new)
    if cap < 0 or bool(new.history_seconds) != bool(old.history_seconds):
        return False
    if _over_budget(small, new.max_individual_ack_cache_bytes):
        return False
    was, small.cap = small.cap, cap
    if not small.fits():
        small.cap = was
        return False
    _settle(small, new)
    return True


def small_of(
    cursor_id: int,
    state: AckState,
    pages: Pages,
    chain: MarkerChain,
    config: CursorConfig,
    directory: LedgerDirectory,
) -> Any:
    """The small form of a cursor whose flush just wrote its whole state into a state slot
    and that has nothing pending since, or a PIP-299 marker (what it left out pending: the
    form writes its next state whole, ``base`` -2, and is changed), or None when the cursor
    is outside the form (see
    the module docstring; the caller knows the store is writable). Only once its trims
    left nothing of it under log keys (the chain's floor past its newest state, which is
    then in a state slot): the form writes its two slots and never trims, so what the log
    keys held would stay. A cursor that keeps history writes each state under its log key
    and its window keeps them (the form's flush trims what the window lets go, as the
    parts' does: :func:`logged_plan`): it takes the form once its newest state is a state
    marker, a full marker naming no record but itself. O(its ranges)."""
    cap = _cap(config)
    if cap < 0:
        return None
    if config.history_seconds:  # (the form's states then follow it one sequence apart: logged_plan's "before")
        newest = chain.marker_seq
        if not (0 <= newest == chain.full_seq == chain.next_seq - 1 and tuple(chain.full_live) == (newest,)):
            return None
    base, index = -1, None  # its newest state in a slot (a cursor that keeps history: under its log key)
    if chain.truncated and not (config.history_seconds or chain.in_slots):  # a PIP-299 marker of its parts':
        base = -2  # (the form writes its next state whole, cut or not, and what that marker left out with it)
    elif not (config.history_seconds or chain.in_slots):  # its newest state in the log, as its parts wrote it:
        if not _CHAINS[0] or state.range_count <= lane.STATE_MAX_RUNS:  # (the form's once the parts' state
            return None  # plans put it in a slot)
        if state.range_count > cap - cap // 4:  # (room to grow: a cursor near the cap does not go in and out)
            return None
        index = dict(pages.index)  # (the form's chain is its parts': see below)
        if not index or sum(len(e.adds or ()) + len(e.counts or ()) for e in index.values()) > DELTA_MOST:
            return None
        if len({e.seq for e in index.values()}) < len(index):  # (a state marker the record of several
            return None  # ledgers, as the parts' index keeps it: the form's chain holds a record of each)
        if (
            chain.full_seq != chain.marker_seq
            or chain.truncated
            or max(e.seq for e in index.values()) >= chain.full_seq
        ):
            return None  # (a full marker of theirs just written, naming their records)
        if sum(len(la.counts) + len(la.batches) for la in pages.loaded.values()) > COUNT_CAP - COUNT_CAP // 4:
            return None  # (room to grow, as for the runs: a cursor near the bound does not go in and out)
        base = -2
    if state.range_count > cap or pages.swapped or pages.vanished or pages.unmarked:
        return None
    md_l, md_e = state.md
    bound = bound_of(directory, md_l)
    if bound is None or len(pages.index) > len(pages.loaded):
        return None
    line = [(md_l, 0), *bound[0]]
    offsets = dict(line)  # each ledger's offset on the form's line
    rp_i = next((i for i, (ledger, _) in enumerate(line) if ledger == state.rp[0]), -1)
    if rp_i < 0:
        return None
    ledgers: list[tuple[int, BitMap]] = []
    counts: list[tuple[int, int]] = []
    batches: list[tuple[int, int, int]] = []
    for ledger, la in sorted(pages.loaded.items()):
        offset = offsets.get(ledger)
        if offset is None:
            return None
        ledgers.append((offset, la.bitmap))
        counts += [(offset + entry, n) for entry, n in sorted(la.counts.items())]
        batches += [(offset + entry, *batch) for entry, batch in sorted(la.batches.items())]
    try:
        runs = line_runs(ledgers)
    except ValueError:
        return None  # (past the layout)
    if len(counts) + len(batches) > COUNT_CAP or (runs and int.from_bytes(runs[-4:], sys.byteorder) > bound[1]):
        return None
    chain_at = chain.next_seq, chain.slot, chain.slots
    rp_e, props = line[rp_i][1] + state.rp[1], pack_properties(state.properties)
    if rp_e > MAX_ENTRY:
        return None
    s = SmallState(cursor_id, md_l, md_e, *chain_at, runs, cap, counts, rp_e, props, rp_i, batches)
    s.logged = int(bool(config.history_seconds))
    s.base = base
    _settle(s, config)
    if not fit(s, directory) or _over_budget(s):
        return None
    if base == -2 and index is None:  # (its parts' truncated marker: a change to write)
        s.set_props(s.props)
    if index is not None:  # its parts' chain, its full marker naming their records (and what since)
        if (s.md_l, s.md_e) != (md_l, md_e):  # (M moved on, fitted: the records are of another line)
            return None
        md_adds = index[md_l].adds if md_l in index else None
        if md_adds and md_adds.min() <= md_e:  # (the form counts M's ledger's record from M: passed 0)
            return None
        at = {ledger: k for k, (ledger, _) in enumerate(line)}
        if any(ledger not in at for ledger in index):
            return None
        records = tuple((at[ledger], e.seq) for ledger, e in sorted(index.items()))
        adds = [offsets[ledger] + x for ledger, e in sorted(index.items()) for x in (e.adds or ())]
        counted = [offsets[ledger] + x for ledger, e in sorted(index.items()) for x in (e.counts or ())]
        s.adopt(chain.full_seq, chain.marker_seq, records, chain.full_bytes, adds, counted)
        if not s.recs or s.held() & ~s.recs:  # (every ledger holding state has its record)
            return None
    return s


def small_born(
    cursor_id: int, config: CursorConfig, directory: LedgerDirectory, initial_position: str
) -> OpenedForm | None:
    """The small form of a cursor just made, whose log holds nothing, as an open of no
    recovery gives one (an :class:`OpenedForm` of no marker): M at its start position
    (:func:`~ackstore.cursor.state.start_of`), fitted to ``directory`` as the parts fit a
    recovered state, nothing acked, and changed: its start is what its first flush writes,
    into state slot 0, or, for a cursor that keeps history (``logged``), under its log key
    0 with the window's first point. None when the cursor starts in its parts: no cursor
    takes the form, or M's ledger is not in the directory (a topic of no ledgers yet).
    O(ledgers crossed)."""
    cap = _cap(config)
    if cap < 0:
        return None
    md_l, md_e = start_of(directory, initial_position)
    s = SmallState(cursor_id, md_l, md_e, 0, 1, 0, (), cap)
    _settle(s, config)
    s.logged = int(bool(config.history_seconds))
    if not fit(s, directory):
        return None
    s.set_props(b"")  # (a change: the properties, none, set)
    return OpenedForm(s, -1, 0, 0, 0.0)


class OpenedForm(NamedTuple):
    """A cursor's state as an open read it into the small form: the form, and what the open
    did (the state marker's sequence, the ledgers it holds, the record's bytes, the time
    taken), made into its :attr:`report` only when asked (an open of many cursors builds none)."""

    small: Any
    seq: int
    ledgers: int
    nbytes: int
    seconds: float

    @property
    def next_seq(self) -> int:
        """The log's next sequence after the state read (a RecoveredState's, alike)."""
        return self.seq + 1

    @property
    def report(self) -> RecoveryReport:
        """The open's report: the state marker read, its ledgers decoded, its bytes."""
        return opened_report(self.figures)

    @property
    def figures(self) -> OpenFigures:
        """What the open did, as a plain tuple a cursor keeps for its report: of ints and a
        float only, so the collector stops tracking it (an open of 100,000 cursors keeping
        this form of it instead of the OpenedForm, which holds the form: a full collection
        70 ms -> 50 ms)."""
        return (self.seq, self.ledgers, self.nbytes, self.seconds)


OpenFigures = tuple[int, int, int, float]
"""what an open into the small form did: the state marker's sequence, the ledgers it holds,
the bytes read, the seconds taken (:attr:`OpenedForm.figures`)"""


def opened_report(figures: OpenFigures) -> RecoveryReport:
    """The report of an open into the small form that did ``figures``. O(1)."""
    seq, ledgers, nbytes, seconds = figures
    return RecoveryReport(seq, 0, (), ledgers, nbytes, seconds)


def small_opened(
    cursor_id: int,
    values: tuple[bytes | None, bytes | None],
    config: CursorConfig,
    directory: LedgerDirectory,
    logged: tuple[int, bytes] | None = None,
    lines: Callable[[int], Any] | None = None,
) -> OpenedForm | None:
    """The small form of a cursor opened from a log that is only its state slots (``values``:
    theirs, :func:`ackstore.storage.log.slot_values`), or from its newest record under a log
    key (``logged``: ``(seq, record)``, :func:`ackstore.storage.log.newest_logged`) and its
    slots: for a cursor that keeps history, its newest state; for another, a state marker
    newer than its slots (a cut state a slot did not take: its chain's one marker, which
    the form adopts), with the open's report; None
    when its newest state is outside the form (then the cursor is recovered as any other):
    :func:`small_of`'s rule, on the state as the slot holds it (:data:`small_of_slots`), and
    M's ledger in the directory with nothing at or past its durable bound. ``lines``: as
    :func:`form_read` takes it. O(its ranges and counts)."""
    started = time.perf_counter()
    cap = _cap(config)
    if cap < 0 or (config.history_seconds and logged is None):
        return None  # (a history cursor's newest state is under a log key: asked for with it)
    line = line_memo(directory) if lines is None else lines
    s = small_of_slots(cursor_id, *values, FORMAT_VERSION, cap, lambda md_l: (b := line(md_l)) and b[:2], logged)
    if s is None:
        return None
    if logged is not None and not config.history_seconds:  # its chain's one marker, when its newest state
        if not _CHAINS[0] or s.next_seq - 1 != logged[0]:  # (a slot's newer: log keys lie under it, recovery's)
            return None
        s.logged, s.base = 0, -2
        s.adopt(logged[0], logged[0], -1, len(logged[1]))
    _settle(s, config)
    try:
        if s.props:
            unpack_properties(s.props)
    except CorruptRecordError:
        return None  # damage: recovery's to report
    bound = line(s.md_l)
    if bound is not None and 0 <= bound[2] <= s.md_e:  # M past its ledger's end: sealed (or bounded) lower
        return None  # since its flush, recovery clips (fit would move it on into the next ledger as if it stood there)
    # M's ledger in the directory; sealed since and the next ones added, M moves on as a recovery's would
    if bound is None or not fit(s, directory, bound[:2]) or s.top() > s.limit:
        return None  # (M, acks or counts at or past a ledger's bound: the bound went durable first, recovery clips)
    if _over_budget(s):
        return None  # (its parts hold it under the cache budget)
    if logged is not None and logged[0] == s.next_seq - 1:
        nbytes = len(logged[1])
    else:  # (the record, without the slot's seal)
        value = values[s.slot]
        assert value is not None
        nbytes = len(value) - codecs.slot_head(slot_key(cursor_id, s.slot), value)[1]
    return OpenedForm(s, s.next_seq - 1, ledgers_held(s), nbytes, time.perf_counter() - started)


def chain_opened(
    txn: Any, db: Any, cursor_id: int, newest: NewestMarker, config: CursorConfig, directory: LedgerDirectory
) -> OpenedForm | None:
    """The small form of a cursor whose newest marker (``newest``, resolved:
    :func:`~ackstore.storage.log.newest_marker`) names records of ledgers of its line (a chain
    the form wrote, or its parts' of a cursor over a slot's bound with state on its line: the
    module docstring), read straight into the form with the open's
    report: the records, their acks and counts and those the markers named since
    (:data:`small_of_record`), the chain adopted. None when the newest state is outside the
    form, by :func:`small_of`'s rule (then recovery reads the cursor, from ``newest``, and the
    form is taken at a full marker, as before): a state marker, a PIP-299 marker, a ledger
    off the line, more than :data:`DELTA_MOST` acks and counts since the
    records, a record not read in one pass, a state the slots would take, near or over the
    cap, or with more counts than a flush of the form takes (room to grow). O(the records'
    values)."""
    started = time.perf_counter()
    cap = _cap(config)
    resolved = newest.resolved
    marker, index, seq = resolved.marker, resolved.index, resolved.seq
    md_l, md_e = marker.mark_delete
    if cap < 0 or not _CHAINS[0] or config.history_seconds or not index or marker.ledgers is not None:
        return None
    if marker.truncated or resolved.deltas_since_full > config.full_marker_every:
        return None
    # the fewest and the most runs the form would hold (an ack since joins at most two runs or
    # makes one, a ledger's first run joins at most the one before it): over the room to grow,
    # or a state a slot takes, declined before a record is read
    fewest = sum([e.runs - len(e.adds or ()) for e in index.values()]) - len(index) + 1
    if fewest > cap - cap // 4 or sum([e.runs + len(e.adds or ()) for e in index.values()]) <= lane.STATE_MAX_RUNS:
        return None
    bound = bound_of(directory, md_l)
    if bound is None:
        return None
    line = ((md_l, 0), *bound[0])
    at = {ledger: k for k, (ledger, _) in enumerate(line)}
    if any(ledger not in at or e.seq >= seq for ledger, e in index.items()):
        return None
    items: list[tuple[int, int, int, bytes, int]] = []
    adds: list[int] = []
    counts: dict[int, int] = {}
    found: list[tuple[int, int]] = []
    last = len(line) - 1
    for k in sorted(at[ledger] for ledger in index):  # (in line order)
        ledger, offset = line[k]
        e = index[ledger]
        record = txn.get(log_key(cursor_id, e.seq), db=db)
        if record is None:
            return None
        runs = e.runs
        if e.adds or e.counts:
            adds += [offset + x for x in e.adds or ()]
            counts.update((offset + x, n) for x, n in (e.counts or {}).items())
            runs = -1
        items.append((ledger, offset, line[k + 1][1] if k < last else bound[1] + 1, record, runs))
        found.append((k, e.seq))
    if len(adds) + len(counts) > DELTA_MOST:
        return None
    props = pack_properties(marker.properties)
    slots = newest.slot, newest.slots
    s = small_of_record(cursor_id, md_l, md_e, seq + 1, *slots, cap, props, tuple(items), FORMAT_VERSION, adds, counts)
    if s is None or s.n <= lane.STATE_MAX_RUNS or s.n > cap - cap // 4 or s.nc > COUNT_CAP - COUNT_CAP // 4:
        return None  # (small_of's: a slot's state, room to grow)
    s.base = -2
    _settle(s, config)
    end = directory.end(md_l)
    if 0 <= end <= md_e or not fit(s, directory, bound) or s.top() > s.limit or (s.md_l, s.md_e) != (md_l, md_e):
        return None  # (M or acks at or past a ledger's bound: recovery clips; M moved: the records are of another line)
    chain = resolved.deltas_since_full, resolved.chain_bytes
    s.adopt(resolved.full_seq, seq, tuple(found), resolved.full_bytes, sorted(adds), list(counts), *chain)
    if s.held() & ~s.recs or _over_budget(s):  # (every ledger holding state has its record; within the budget)
        return None
    nbytes = resolved.full_bytes + resolved.chain_bytes + sum(len(item[3]) for item in items)
    return OpenedForm(s, seq, len(items), nbytes, time.perf_counter() - started)


def line_memo(directory: LedgerDirectory) -> Callable[[int], Any]:
    """:func:`~ackstore.cursor.small_span.line_bound` of ``directory``, each ledger's asked
    once (a bulk open's batch makes one: its transaction's directory does not change under
    it). O(1) for a ledger asked before."""
    known: dict[int, Any] = {}

    def line(md_l: int) -> Any:
        found = known.get(md_l, known)
        if found is known:
            found = known[md_l] = line_bound(directory, md_l)
        return found

    return line


def form_read(
    txn: Any,
    db: Any,
    cursor_id: int,
    config: CursorConfig,
    directory: LedgerDirectory,
    probe: Any = None,
    lines: Callable[[int], Any] | None = None,
    lazy: bool = False,
) -> OpenedForm | None:
    """The form of a cursor that keeps no history, read straight from its log in one compiled
    call (``_native.form_open``): from its state slots when they are its whole log, as
    :func:`~ackstore.storage.log.slot_values` then :func:`small_opened` read it, or from a
    chain of fixed-layout markers under log keys, as
    :func:`~ackstore.storage.log.newest_marker` then :func:`chain_opened` read it. None where
    it declines, or where the compiled module is not built: then those functions read the
    cursor (and recovery, when they decline), as before. ``probe``: a cursor of ``txn`` on
    the log (a bulk open's); ``lines``: :func:`line_memo` of ``directory`` as ``txn`` sees
    it (a bulk open's, made once for its batch); ``lazy``: a lazy open's, whose form may
    keep its one record's runs to read at its first use (``small_of_record``). O(the state's
    values: the newest slot's, or the records' and the chain's markers; lazily, their
    checksums but the one record's runs)."""
    if _native is None:
        return None
    started = time.perf_counter()
    cap = _cap(config)
    if cap < 0 or config.history_seconds:
        return None
    got = _native.form_open(
        cursor_id,
        txn.cursor(db=db) if probe is None else probe,
        line_memo(directory) if lines is None else lines,
        cap,
        FORMAT_VERSION,
        config.full_marker_every,
        config.max_individual_ack_cache_bytes,
        lane.STATE_MAX_RUNS,
        _CHAINS[0],
        lazy,
    )
    if got is None:
        return None
    s, seq, records, nbytes, older = got
    _settle(s, config)
    try:  # (the properties as the states wrote them decode, as resolve_marker reads a marker's
        # and small_opened a slot's; the newest's are the form's, as chain_opened packs them)
        for props in older:
            unpack_properties(props)
        if s.props and pack_properties(unpack_properties(s.props)) != s.props:
            return None
    except CorruptRecordError:
        return None
    return OpenedForm(s, seq, records, nbytes, time.perf_counter() - started)


def check_small(s: Any, md: tuple[int, int], logged: bool | None = None) -> None:
    """Assert every invariant of a small form (the tests call it after each change):
    its runs ascending, a gap between two, all above M + 1, in the layout; at most ``cap``;
    its M at or after ``md`` (in the same ledger or a later one); its newest state in a
    state slot once it wrote one, unless it is ``logged`` (its cursor keeps history: its
    states are under log keys), as ``logged`` says when given (its cursor's config)."""
    assert not s.ended, "an ended small form is still the cursor's"
    assert (s.md_l, s.md_e) >= md, f"small M {(s.md_l, s.md_e)} is behind {md}"
    at = s.md_e + 2
    for first, last in s.runs():
        assert at <= first <= last <= _ENTRY_MAX, f"run ({first}, {last}) is not above M + 1 and its neighbour"
        at = last + 2
    assert s.n <= s.cap, f"{s.n} runs in a small form of {s.cap}"
    for entry, n in s.counts():
        assert n >= 1 and not s.acked(entry), f"delivery count {n} of entry {entry}, acked or at or below M"
    assert s.nc + s.nb <= COUNT_CAP, f"{s.nc} delivery counts and {s.nb} partial batches in a small form"
    for entry, size, mask in s.batches():
        assert _partial(size, mask) and not s.acked(entry), f"partial batch ({entry}, {size}, {mask}) of an acked entry"
    assert s.rp_e > s.md_e, f"read position {s.rp_e} at or below M {s.md_e}"
    spans = s.spans
    assert len(spans) <= SPAN_MOST and 0 <= s.rp_i <= len(spans), f"spans {spans}, read position in {s.rp_i}"
    if spans:  # M's ledger sealed, others after it: M never rests at its last entry
        assert s.md_e < spans[0][1] - 1, f"M {s.md_e} of a ledger of {spans[0][1]} entries"
    for (l0, o0), (l1, o1) in zip(((s.md_l, 0), *spans), spans, strict=False):
        assert l0 < l1 and o0 <= o1, f"spans {spans} after ledger {s.md_l} out of order"
    if s.rp_i:  # (a sealed ledger's end is the next one's first entry)
        assert spans[s.rp_i - 1][1] <= s.rp_e, f"read position {s.rp_e} below its ledger's offset in {spans}"
    assert s.slot in (0, 1) and 0 <= s.slots <= 3, f"slot {s.slot}, slots {s.slots}"
    assert logged is None or bool(s.logged) == logged, f"logged {s.logged}, its cursor's config says {logged}"
    new = not s.next_seq  # (a new cursor's form before its first flush: no state written yet)
    assert s.logged or s.base != -1 or s.slots >> s.slot & 1 or new, f"the newest state's slot {s.slot} holds nothing"
    assert s.base >= -2 and s.tail in (0, 1) and (not s.tail or s.base == -1), f"base {s.base}, tail {s.tail}"
    if s.base >= 0:  # the form's chain: its record, its full marker, then its delta markers
        assert not s.logged and s.base <= s.marker < s.next_seq, f"chain {s.base}..{s.marker}, next {s.next_seq}"
        assert 0 <= s.deltas <= s.every, f"{s.deltas} delta markers after the full one, every {s.every}"
    if s.base >= 0 and s.record >= 0:  # (its records: of the line as it was, until the next state is whole)
        recs = s.records()
        assert len(recs) == s.recs.bit_count() and len(set(recs)) == len(recs), f"records {recs} of {s.recs:b}"
        ok = s.record == min(recs) and max(recs) < s.marker and s.base not in recs
        assert ok, f"records {recs} of a chain {s.base}..{s.marker}"
        assert s.fresh or s.recs < 1 << len(s.spans) + 1, f"records of ledgers {s.recs:b}, a line of {len(s.spans) + 1}"
    assert not s.passed or (s.recs & 1 and not s.fresh and s.base >= 0), f"passed, records {s.recs:b}, fresh {s.fresh}"
    assert not s.passed or s.low <= s.md_e, f"passed, M {s.md_e} below what the chain holds from {s.low}"
    assert not s.dropped or (s.recs & 1 and not s.fresh), f"acks M passed unnamed, records {s.recs:b}"
    held = s.held()
    ok = s.base >= 0 and s.record >= 0 and (held or s.stale) and not held & ~(s.recs | s.stale)
    assert s.fresh or ok, "a marker to come, no record"
    if type(s) is PySmallState:
        assert s.named <= len(s._adds) and s.cnamed <= len(s._counted), "named more than there is"
        assert len(s._adds) == len(set(s._adds)) and len(s._counted) == len(set(s._counted))
        # (unless M's ledger's record is due: the next base writes or drops it, and its acks since with it)
        passed_named = s.md_e < s.low and not s.stale & 1 and any(e <= s.md_e for e in s._adds)
        assert not passed_named, f"acks M passed named, below {s.low}"
    assert pack_properties(unpack_properties(s.props)) == s.props, f"properties {s.props!r} not as a marker packs them"


def logged_plan(cursor_id: int, seq: int, ranges: int) -> lane.MarkerPlan:
    """What a flush of a form whose cursor keeps history wrote (:data:`flush_small`: its
    state marker under log key ``seq``, holding ``ranges`` ranges), as the plan the history
    keeper takes its point from (``HistoryKeeper.take``, which bounds its trim to what the
    window needs): a full marker naming no record but itself, trimming what the parts' state
    plan trims (:func:`~ackstore.cursor.lane.trims`: below the state before, which it keeps;
    the form's states are one sequence apart, from the state its parts wrote last:
    :func:`small_of`). Its puts are the form's, already in the flush's. O(1)."""
    plan = lane.MarkerPlan(cursor_id, {}, True, seq, (), False, ranges, b"", b"")
    plan.puts = []  # (nbytes 0: the point's bytes are what the keeper adds)
    plan.full_live = (seq,)
    if seq > 0:
        plan.gc_below, plan.gc_live = seq - 1, (seq - 1,)
    return plan


def trim_plan(cursor_id: int, below: int, keeps: tuple[int, ...]) -> lane.MarkerPlan:
    """The trim a flush of a small form makes (:data:`flush_small`'s ``trims``), as a plan
    the group flush's write trims with the others (:func:`~ackstore.cursor.lane.trim_all`):
    the cursor's log keys and slot states below sequence ``below`` but those in ``keeps``,
    found by a scan of its keys. Its puts are the form's, already in the flush's. O(1)."""
    plan = lane.MarkerPlan(cursor_id, {}, True, below, (), False, 0, b"", b"")
    plan.puts = []
    plan.gc_below, plan.gc_live = below, keeps
    return plan


LINE_LEDGERS = SPAN_MOST + 1
"""the most ledgers of a form's line (M's and those it spans), any of which its chain may
hold a record of (``recs`` and ``stale`` have a bit each; the compiled twin's
``LINE_LEDGERS``)"""

_CHAINS = [1]  # whether forms keep chains of their own: on by default (see set_form_chains)


def set_form_chains(on: bool) -> bool:
    """Whether a small form whose state a slot does not take keeps a chain of its own under
    its log keys (the module docstring: the layout and the rules of its parts' chain) and
    holds up to :data:`FORM_RUNS_FACTOR` times a slot's ranges, or ends (its parts write it,
    as they write every larger cursor); returns the setting before. On by default; off, a
    cursor over a slot's bound costs its parts' flush (a comparison the benchmarks make)."""
    before, _CHAINS[0] = bool(_CHAINS[0]), int(bool(on))
    return before


def form_chains() -> bool:
    """Whether small forms keep chains of their own now (:func:`set_form_chains`)."""
    return bool(_CHAINS[0])


def flush_format() -> tuple[int, int, int, int, int, int, int]:
    """What the group flush gives :data:`flush_small`: the record format, a slot's first
    room, and the bounds of the state layout a flush writes (the most delivery counts, the
    most bytes, the most ranges a slot takes: :data:`~ackstore.cursor.lane.STATE_MAX_EXTRAS`,
    :data:`~ackstore.cursor.lane.STATE_MAX_BYTES`, :data:`~ackstore.cursor.lane.STATE_MAX_RUNS`,
    as they are now), the most acks a marker names since a record
    (:data:`~ackstore.cursor.lane.DELTA_MAX_ACKS`), and whether forms keep chains of their
    own (:func:`set_form_chains`)."""
    lanes = lane.STATE_MAX_EXTRAS, lane.STATE_MAX_BYTES, lane.STATE_MAX_RUNS, lane.DELTA_MAX_ACKS
    return FORMAT_VERSION, SLOT_RESERVE, *lanes, _CHAINS[0]
