"""The small form (``ackstore/cursor/small.py``): its two twins on the same operations
against a plain model, the bytes they write against the state layout's own encoder and
decoder, and cursors going in and out of the form with their state exact, the same bytes
on disk as a cursor that never takes it, a failed write given back, and a cursor leaving
the form while its flush is being written."""

from __future__ import annotations

import itertools
import random
import shutil
import threading
from array import array
from dataclasses import fields
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import (
    AckStore,
    AckStoreError,
    CursorConfig,
    InvalidArgumentError,
    InvalidTypeError,
    Position,
    StoreError,
    testing,
)
from ackstore.cursor import small as small_form
from ackstore.cursor.small import IMPLEMENTATIONS, Small, check_small
from ackstore.cursor.small_span import SPAN_MOST, fit, form_position, ledgers_held
from ackstore.directory import OPEN, LedgerDirectory
from ackstore.flush import FlushJob, GroupFlush
from ackstore.ledger_acks import LedgerAcks, run_bounds
from ackstore.stats import CURSOR_FIGURES
from ackstore.storage import records
from ackstore.storage.log import read_slots

from .forms import LAYOUTS, compiled_layout, count_cap, end_form, sealed_topic
from .rawlog import damage, slots

IDS = ["python", "native"][: len(IMPLEMENTATIONS)]
T = "persistent://t/ns/small"
CID, LEDGER = 7, 3
VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, MAX_ACKS, CHAINS = small_form.flush_format()
BOUNDS = VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, MAX_ACKS, CHAINS


class Model:
    """A small cursor as sets of the form's entries: M, the acks above it, the delivery
    counts, the read position, the log's sequence and slots, and the spans: the ledgers
    after M's sealed one on the form's line, each at its offset (the form's entry offset + e
    is its e)."""

    def __init__(self, md_e: int, acked: set[int], seq: int, slot: int, slots: int) -> None:
        self.md_e, self.acked, self.seq, self.slot, self.slots = md_e, set(acked), seq, slot, slots
        self.md_l = LEDGER
        self.dirty = False
        self.cut_record: bytes | None = None  # the record of the newest state written, when cut
        self.counts: dict[int, int] = {}
        self.batches: dict[int, tuple[int, int]] = {}
        self.rp, self.rp_i = md_e + 1, 0
        self.redeliveries = 0
        self.spans: list[tuple[int, int]] = []
        self.limit, self.version = 100, 0
        self.properties: dict[str, int | str] = {}

    def ack(self, first: int, last: int) -> None:
        new = {e for e in range(max(first, self.md_e + 1), last + 1)} - self.acked
        if new:
            self.acked |= new
            for e in new:
                self.counts.pop(e, None)
                self.batches.pop(e, None)
            self.dirty = True
            while self.md_e + 1 in self.acked:
                self.md_e += 1
                self.acked.discard(self.md_e)
            if self.rp < self.md_e + 1:
                self.rp, self.rp_i = self.md_e + 1, 0
            if self.spans and self.md_e >= self.spans[0][1] - 1:
                self.rebase()

    def reset(self, ledger: int, entry: int) -> None:
        """A position reset to ``(ledger, entry)``: nothing above M acked or counted, reads
        from there, M's ledger alone on the line (bounded again by the caller)."""
        self.md_l, self.md_e, self.rp, self.rp_i = ledger, entry - 1, entry, 0
        self.acked, self.counts, self.batches, self.spans = set(), {}, {}, []
        self.limit, self.version = -1, -1
        self.dirty = True

    def rebase(self) -> None:
        """M moves on into the next ledgers it is at or past the start of: the form's
        entries from that one's offset on are its own."""
        while self.spans and self.md_e >= self.spans[0][1] - 1:
            (nl, b), rest = self.spans[0], self.spans[1:]
            self.md_l, self.md_e = nl, self.md_e - b
            self.acked = {e - b for e in self.acked}
            self.counts = {e - b: n for e, n in self.counts.items()}
            self.batches = {e - b: batch for e, batch in self.batches.items()}
            self.rp, self.rp_i = self.rp - b, max(self.rp_i - 1, 0)
            self.spans = [(ledger, offset - b) for ledger, offset in rest]
            self.limit -= b
        self.version = -1
        self.dirty = True

    def position(self, e: int) -> tuple[int, int]:
        at = [(ledger, offset) for ledger, offset in self.spans if offset <= e]
        return (at[-1][0], e - at[-1][1]) if at else (self.md_l, e)

    def ack_position(self, ledger: int, entry: int) -> None:
        offsets = dict([(self.md_l, 0), *self.spans])
        if ledger in offsets:
            self.ack(offsets[ledger] + entry, offsets[ledger] + entry)

    def is_acked(self, e: int) -> bool:
        return e <= self.md_e or e in self.acked

    def ack_batch(self, e: int, size: int, mask: int) -> None:
        """Indexes ``mask`` of the batch at ``e``: the entry acked once every index is."""
        if self.is_acked(e):
            return
        old = self.batches.get(e)
        mask |= old[1] if old else 0
        if mask == (1 << size) - 1:
            self.ack(e, e)
        elif (size, mask) != old:
            self.batches[e] = (size, mask)
            self.dirty = True

    def deliver(self, entries: list[int], values: list[int] | None = None) -> list[int]:
        out = []
        for i, e in enumerate(entries):
            if self.is_acked(e):
                out.append(0)
                continue
            if values is not None:
                n = values[i]
            else:
                n = min(self.counts.get(e, 0) + 1, 0xFFFFFFFF)  # (the highest stays)
                self.redeliveries += n > 1
            self.counts[e] = n
            self.dirty = True
            out.append(n)
        return out

    def read_from(self, e: int) -> None:
        while e in self.acked:
            e += 1
        at = sum(offset <= e for _, offset in self.spans)
        if (e, at) > (self.rp, self.rp_i):
            self.rp, self.rp_i = e, at

    def unacked(self, start: int, stop: int, n: int) -> list[int]:
        return [e for e in range(max(start, self.md_e + 1), stop) if e not in self.acked][:n]

    def runs(self) -> list[tuple[int, int]]:
        return run_bounds(BitMap(self.acked))

    def ledgers(self) -> dict[int, tuple[BitMap, dict[int, int], dict[int, tuple[int, int]]]]:
        """Each ledger's acks, counts and partial batches, as the parts hold them."""
        out: dict[int, tuple[BitMap, dict[int, int], dict[int, tuple[int, int]]]] = {}
        for e in self.acked:
            ledger, entry = self.position(e)
            out.setdefault(ledger, (BitMap(), {}, {}))[0].add(entry)
        for e, n in self.counts.items():
            ledger, entry = self.position(e)
            out.setdefault(ledger, (BitMap(), {}, {}))[1][entry] = n
        for e, batch in self.batches.items():
            ledger, entry = self.position(e)
            out.setdefault(ledger, (BitMap(), {}, {}))[2][entry] = batch
        return out

    def range_count(self) -> int:
        return sum(len(run_bounds(bm)) for bm, _, _ in self.ledgers().values())

    def persisted(self, persist: int) -> list[tuple[int, LedgerAcks]]:
        """What a flush persists of each ledger under a PIP-299 cap of ``persist`` ranges (0:
        none), by the parts' own rule: the lowest ranges, a ledger's counts and batches with
        them when it is kept whole, the ledger the cut goes through as ``LedgerAcks.prefix``."""
        out, left = [], persist
        cut = bool(persist) and self.range_count() > persist
        for ledger, (bm, counts, batches) in sorted(self.ledgers().items()):
            la = LedgerAcks.of_runs(bm, len(run_bounds(bm)), batches, counts)
            if cut and left <= 0:
                break
            if cut and la.runs > left:
                out.append((ledger, la.prefix(left)))
                break
            left -= la.runs
            out.append((ledger, la))
        return out

    def value(self, persist: int = 0) -> tuple[bytes, bytes]:
        """The state slot put of the next state, by the state layout's own encoder (what a
        cursor's state plan writes), under a PIP-299 cap of ``persist`` ranges."""
        slot = 1 - self.slot
        cut = bool(persist) and self.range_count() > persist
        record = records.encode_state_marker(CID, (self.md_l, self.md_e), self.properties, self.persisted(persist), cut)
        key = records.slot_key(CID, slot)
        return key, records.seal_slot(key, self.seq, record, 0 if self.slots >> slot & 1 else RESERVE)


def pairs(puts: Any) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of ``flush_small``'s puts as bytes: the compiled twin's ``Puts``
    hands out windows on its buffer, the pure twin's list holds bytes."""
    return [(bytes(key), bytes(value)) for key, value in puts]


def _fields(s: Any) -> tuple[Any, ...]:
    return (
        s.md_l, s.md_e, s.runs(), s.n, s.next_seq, s.slot, s.slots, s.dirty, s.persisted, s.flushes, s.flush_bytes,
        s.last_bytes, s.ended, s.counts(), s.nc, s.rp_e, s.redeliveries, s.props, s.logged, s.batches(), s.nb,
        s.touched, s.cut_at,
    )  # fmt: skip


def _span(s: Any) -> tuple[Any, ...]:
    return s.spans, s.rp_i, s.limit, s.limit_version, s.range_count(), s.top()


def _ack_form_entries(s: Any, entries: frozenset[int]) -> bool:
    """The form's own entries (across its line) acked, a run at a time; whether it fits."""
    for first, last in run_bounds(BitMap(entries)):
        s.ack_range(first, last)
    return bool(s.fits())


def _past_line(model: Model, pick: int = 0) -> int:
    """A ledger not on the form's line (another ledger: not the form's): after every one of
    it, before M's, or between two of it whose numbers are not consecutive (``pick`` says
    which of those there are)."""
    line = [model.md_l, *(ledger for ledger, _ in model.spans)]
    others = [line[-1] + 7, model.md_l - 1]
    others += [ledger + 1 for ledger, after in itertools.pairwise(line) if after > ledger + 1]
    return others[pick % len(others)]


def _rebound(model: Model, forms: list[Any]) -> None:
    """After M moved on into the next ledger: the forms bounded again as the model's line
    says (the directory did not change)."""
    if model.version < 0:
        model.version = 0
        assert [s.bound(0, tuple(model.spans), model.limit) for s in forms] == [False] * len(forms)


#: a read's entries, as a Dispatcher hands them to a consumer (``_read_entries``): from
#: ``d`` after M + 1, ``n`` entries one after another (across the line's ledgers as they
#: come), one of them left out (negatively acked) and one acked again, as one list
_READ = st.tuples(st.integers(0, 6), st.integers(1, 40), st.integers(-1, 40), st.integers(-1, 40))


def _read_entries(model: Model, d: int, n: int, skip: int, again: int) -> list[int]:
    first = model.md_e + 1 + d
    entries = [first + i for i in range(n) if i != skip]
    return entries + ([first + again] if 0 <= again < n else [])


OPS = st.one_of(
    st.tuples(st.just("range"), st.integers(0, 90), st.integers(0, 6)),
    st.tuples(st.just("bitmap"), st.frozensets(st.integers(0, 90), max_size=8), st.integers(0, 3)),
    st.tuples(st.just("positions"), st.lists(st.integers(0, 90), max_size=8), st.integers(0, 4)),
    st.tuples(st.just("read acks"), _READ, st.integers(0, 4)),
    st.tuples(st.just("seal"), st.integers(0, 95), st.integers(0, 1)),
    st.tuples(st.just("deliver"), st.lists(st.integers(0, 90), max_size=8), st.integers(0, 3)),
    st.tuples(st.just("read"), st.integers(0, 95), st.just(0)),
    st.tuples(st.just("unacked"), st.integers(0, 95), st.integers(0, 12)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("undo"), st.just(0), st.just(0)),
    st.tuples(st.just("property"), st.sampled_from(["p", "q"]), st.integers(-1, 2**40)),
    st.tuples(st.just("reset"), st.integers(0, 90), st.integers(0, 1)),
    st.tuples(st.just("batch"), st.integers(0, 90), st.tuples(st.integers(1, 9), st.integers(1, 2**9 - 1))),
)


@settings(max_examples=300, deadline=None)
@given(
    md_e=st.integers(-1, 20),
    start=st.frozensets(st.integers(0, 60), max_size=10),
    seq=st.integers(0, 300),
    slot=st.integers(0, 1),
    other=st.booleans(),
    ops=st.lists(OPS, max_size=30),
    persist=st.sampled_from([0, 0, 1, 2, 3, 5]),
    layout=st.sampled_from(LAYOUTS),
)
@example(  # a cut that holds: the second flush writes nothing, the third (a failed write given back) again
    md_e=0,
    start=frozenset([3, 5]),
    seq=0,
    slot=0,
    other=False,
    persist=1,
    layout=None,
    ops=[("range", 0, 1), ("flush", 0, 0), ("flush", 0, 0), ("undo", 0, 0), ("range", 9, 0), ("flush", 0, 0)],
)
@example(  # a read's acks across M's ledger's end (M moves on into the next: the line begins there) and on
    md_e=-1,
    start=frozenset(),
    seq=0,
    slot=0,
    other=False,
    persist=0,
    layout=None,
    ops=[("seal", 10, 0), ("read acks", (0, 14, 12, -1), 1)],
)
def test_the_twins_agree_with_the_model_and_write_the_state_layout(
    md_e: int,
    start: frozenset[int],
    seq: int,
    slot: int,
    other: bool,
    ops: list[tuple[str, Any, int]],
    persist: int,
    layout: tuple[int, int, int, int] | None,
) -> None:
    """Each twin, from the same state through the same acks, properties, flushes and undone flushes,
    holds what the model holds, and each flush writes the bytes the state layout's own
    encoder makes of the model's state, which its decoder reads back as that state; under a
    PIP-299 cap of ``persist`` ranges, what the parts' own rule persists of it (the form
    stays dirty while it is cut). The compiled twin as shipped, or with its layouts lowered
    (``LAYOUTS``: runs in chunks, counts dropped in place)."""
    with compiled_layout(layout):
        _twins_agree_with_the_model(md_e, start, seq, slot, other, ops, persist)


def _twins_agree_with_the_model(
    md_e: int, start: frozenset[int], seq: int, slot: int, other: bool, ops: list[tuple[str, Any, int]], persist: int
) -> None:
    acked = {e for e in start if e > md_e + 1}
    model = Model(md_e, acked, seq, slot, 1 << slot | (1 if other else 0) << (1 - slot))
    runs = model.runs()
    if runs and runs[0][0] == md_e + 1:
        return  # M would stand on an ack: not a state a cursor holds
    forms = [impl.SmallState(CID, LEDGER, md_e, seq, slot, model.slots, runs, 64) for impl in IMPLEMENTATIONS]
    for s in forms:
        assert not s.bound(0, (), model.limit)  # M's ledger open, entries up to 100
        s.persist = persist
    taken: tuple[int, int, int, bool] | None = None  # the model before the last flush that wrote
    floor = (LEDGER, md_e)  # M is never behind it but for a reset
    for op, a, b in ops:
        fits = [True] * len(forms)
        if op == "read acks":
            op, a = "positions", _read_entries(model, *a)
        if op == "batch":  # b: (size, mask), the mask cut to the size (a size other than one recorded: refused)
            size, mask = b[0], b[1] & ((1 << b[0]) - 1) or 1
            old = None if model.is_acked(a) else model.batches.get(a)
            if old is not None and old[0] != size:
                for s in forms:
                    with pytest.raises(
                        ValueError, match=f"batch size {size} is not the {old[0]} recorded at entry {a}"
                    ):
                        s.ack_batch(a, size, mask)
            else:
                model.ack_batch(a, size, mask)
                fits = [s.ack_batch(a, size, mask) for s in forms]
        elif op == "reset":  # b: 0 in M's ledger, 1 back to the first ledger (from one M moved on into)
            ledger = model.md_l if b == 0 else LEDGER
            model.reset(ledger, a)
            for s in forms:
                s.reset(ledger, a)
            assert [_span(s)[:4] for s in forms] == [((), 0, -1, -1)] * len(forms)  # unbounded
            model.limit = 100
            _rebound(model, forms)  # (the cursor bounds it again at once)
            floor = (ledger, a - 1)
        elif op == "range":
            model.ack(a, a + b)
            fits = [s.ack_range(a, a + b) for s in forms]
        elif op == "bitmap":  # b: 0 the form's entries, a run at a time; ack_entries of 1 M's ledger (its
            # entries only), 2 another, 3 the line's last ledger (its own entries, from its offset)
            if b:
                _rebound(model, forms)  # (M moved on into another ledger)
            ledger, offset = model.spans[-1] if b == 3 and model.spans else (model.md_l, 0)
            top = model.spans[0][1] - 1 if model.spans and b != 3 else model.limit  # (the ledger's part of the line)
            if b == 2 or (b in (1, 3) and a and offset + max(a) > top):
                ledger = _past_line(model, len(a)) if b == 2 else ledger
                assert [s.ack_entries(ledger, BitMap(a)) for s in forms] == [None] * len(forms)
            else:
                for first, last in run_bounds(BitMap(a)):
                    model.ack(offset + first, offset + last)
                fits = [s.ack_entries(ledger, BitMap(a)) if b else _ack_form_entries(s, a) for s in forms]
        elif op == "positions":  # b: 0 Positions, 1 tuples, 2 one in another ledger, 3 one past the bound,
            # 4 one past a sealed ledger's end (the form's entries given as their positions)
            _rebound(model, forms)  # (M moved on into another ledger)
            at = [model.position(e) for e in a]
            items: list[Any] = [Position(*p) if b == 0 else p for p in at]
            refused = b == 2 or (b == 3 and any(e > model.limit for e in a))
            if b == 2:
                items.append(Position(_past_line(model, len(a)), 1))
            if b == 4 and model.spans:
                items.append((model.md_l, model.spans[0][1]))
                refused = True
            got = [s.ack_positions(items) for s in forms]
            if refused or any(e > model.limit for e in a):
                assert got == [None] * len(forms)
            else:
                for p in at:
                    model.ack_position(*p)
                fits = got
        elif op == "seal":  # the line's last ledger sealed past what it holds, the next one after it
            # (b: sealed at most there, else at entry a of the line at least)
            if len(model.spans) < SPAN_MOST and model.version >= 0:
                last_l, last_o = model.spans[-1] if model.spans else (model.md_l, 0)
                held = [e + 1 for e in model.acked | set(model.counts)]
                end = max(0 if b else a, model.md_e + 1, model.rp, *held, last_o)  # (a read may stand at its end)
                spans = (*model.spans, (last_l + 1 + a % 2, end))  # (a ledger number may be skipped)
                moved = [s.bound(1, spans, end + 40) for s in forms]
                model.spans, model.limit, model.version = list(spans), end + 40, 1
                if model.md_e >= model.spans[0][1] - 1:
                    model.rebase()
                assert moved == [model.version < 0] * len(forms)
        elif op == "deliver":  # b: 0 Positions, 1 tuples, 2 one in another ledger (the form's entries as
            # positions), 3 counts set by hand (restore_delivery_counts)
            _rebound(model, forms)  # (M moved on into another ledger)
            items = [Position(*model.position(e)) if b == 0 else model.position(e) for e in a]
            if b == 2:
                items.append(Position(_past_line(model, len(a)), 1))
            values = [(e * 7) % 5 + 1 if e % 3 else 0xFFFFFFFF for e in a]
            got_counts = [s.set_counts(items, values) if b == 3 else s.deliver_positions(items) for s in forms]
            if b == 2 or any(e > model.limit for e in a):
                assert got_counts == [None] * len(forms)
            else:
                assert got_counts == [model.deliver(a, values if b == 3 else None)] * len(forms)
        elif op == "read":
            model.read_from(a)
            for s in forms:
                s.read_from(a)
        elif op == "unacked":
            assert [s.unacked(a, a + 30, b) for s in forms] == [model.unacked(a, a + 30, b)] * len(forms)
            window = sorted((e, n) for e, n in model.counts.items() if a <= e < a + 30 * b)  # (the counts of a read's)
            assert [s.counts(a, a + 30 * b) for s in forms] == [window] * len(forms)
        elif op == "property":  # b: its value, -1: removed (the form takes what the cursor packs)
            if b < 0:
                model.properties.pop(a, None)
            else:
                model.properties[a] = b if b % 2 else str(b)
            for s in forms:
                s.set_props(records.pack_properties(model.properties))
            model.dirty = True
        elif op == "flush":
            cut = bool(persist) and model.range_count() > persist
            expect = [model.value(persist)] if model.dirty else []
            if expect and cut and records.open_slot(*expect[0])[1] == model.cut_record:
                expect = []  # (the cut persisted holds: not written again)
            outs = [impl.flush_small([s], *BOUNDS) for impl, s in zip(IMPLEMENTATIONS, forms, strict=True)]
            for puts, nbytes, over, deltas in outs:
                assert pairs(puts) == expect and over == [] and deltas == 0  # (a slot's state: whole)
                assert nbytes == sum(len(k) + len(v) for k, v in expect)
            taken = None
            if expect:
                taken = (model.seq, model.slot, model.slots, True)
                key, value = expect[0]
                got_seq, record = records.open_slot(key, value)
                marker = records.decode_marker(record, got_seq)
                assert got_seq == model.seq and marker.mark_delete == (model.md_l, model.md_e)
                assert marker.properties == model.properties and marker.truncated == cut
                held = dict(model.persisted(persist))
                assert {lg: la.ranges() for lg, la in (marker.ledgers or {}).items()} == {
                    lg: la.ranges() for lg, la in held.items()
                }
                assert {lg: la.counts for lg, la in (marker.ledgers or {}).items()} == {
                    lg: la.counts for lg, la in held.items()
                }
                assert {lg: la.batches for lg, la in (marker.ledgers or {}).items()} == {
                    lg: la.batches for lg, la in held.items()
                }
                persisted = persist if cut else model.range_count()
                assert [(s.truncated, s.persisted) for s in forms] == [(cut, persisted)] * len(forms)
                model.slot = 1 - model.slot
                model.slots |= 1 << model.slot
                model.seq += 1
                model.dirty = cut  # (cut: what it left out waits, as the parts' cut ledger)
                model.cut_record = record if cut else None
        else:  # the write failed: the last flush given back
            for impl, s in zip(IMPLEMENTATIONS, forms, strict=True):
                impl.undo_small([s])
            if taken is not None:
                model.seq, model.slot, model.slots, model.dirty = taken
                model.cut_record = None  # (not known: the next state is written)
                taken = None
        first = _fields(forms[0])
        for s in forms:
            assert _fields(s) == first, (IDS, [_fields(f) for f in forms])
            check_small(s, floor)
        assert (first[0], first[1], first[2], first[4], first[5], first[6], bool(first[7])) == (
            model.md_l, model.md_e, model.runs(), model.seq, model.slot, model.slots, model.dirty
        )  # fmt: skip
        span = _span(forms[0])
        assert [_span(s) for s in forms] == [span] * len(forms)
        assert [ledgers_held(s) for s in forms] == [len(model.ledgers())] * len(forms)
        assert span[:5] == (tuple(model.spans), model.rp_i, model.limit, model.version, model.range_count())
        top = max([model.md_e, *(e for e in model.acked if e > model.md_e), *model.counts, *model.batches])
        assert span[5] == top, "top()"
        assert first[19] == [(e, *batch) for e, batch in sorted(model.batches.items())]
        assert [s.batch(e) for s in forms for e in range(0, 95, 7)] == [
            model.batches.get(e) for _ in forms for e in range(0, 95, 7)
        ]
        assert (first[13], first[15], first[16]) == (sorted(model.counts.items()), model.rp, model.redeliveries)
        assert first[17] == records.pack_properties(model.properties)
        assert [s.count(e) for s in forms for e in range(0, 95, 7)] == [
            model.counts.get(e, 0) for _ in forms for e in range(0, 95, 7)
        ]
        assert fits == [model.range_count() <= 64] * len(forms)
        for e in (model.md_e, model.md_e + 1, *list(model.acked)[:3], 95):
            assert [s.acked(e) for s in forms] == [e <= model.md_e or e in model.acked] * len(forms)


def test_the_twins_hold_partial_batches_as_the_parts_do() -> None:
    """A partial batch in the form, on each twin alike: recorded and merged index by index,
    refused at another size, gone once its entry is acked (by its last index, a run over
    it, M moving over it), carried when M moves on into the next ledger, dropped by a
    reset, counted against the form's bound with the delivery counts, and written by the
    flush as the state layout's own encoder writes the same state."""
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, 5, 0, 0, 1, [(7, 9)], 64, [(6, 2)])
        assert s.ack_batch(6, 8, 0b0011) and s.ack_batch(12, 4, 0b0100) and s.ack_batch(13, 2, 0b01)
        assert s.ack_batch(6, 8, 0b0101) and s.batches() == [(6, 8, 0b0111), (12, 4, 0b0100), (13, 2, 0b01)]
        assert (s.nb, s.batch(6), s.batch(7), s.top()) == (3, (8, 0b0111), None, 13)
        with pytest.raises(ValueError, match="batch size 4 is not the 8 recorded at entry 6"):
            s.ack_batch(6, 4, 1)
        assert s.ack_batch(8, 3, 1) and s.batch(8) is None  # (acked: nothing to record)
        s.ack_range(11, 12)  # a run over a partial batch acks it whole
        assert s.batches() == [(6, 8, 0b0111), (13, 2, 0b01)]
        s.ack_batch(13, 2, 0b10)  # its last index: the entry acked
        assert s.batches() == [(6, 8, 0b0111)] and s.acked(13)
        assert not s.bound(0, ((LEDGER + 1, 20),), 60)
        model = Model(5, {7, 8, 9, 11, 12, 13}, 0, 0, 1)
        model.counts, model.batches = {6: 2}, {6: (8, 0b0111)}
        model.spans, model.limit = [(LEDGER + 1, 20)], 60
        key, value = model.value()
        puts, _, over, _ = impl.flush_small([s], *BOUNDS)
        assert pairs(puts) == [(key, value)] and over == []
        model.slot, model.slots, model.seq = 1 - model.slot, 3, 1
        s.ack_batch(25, 3, 0b101)  # in the next ledger: its entry 5
        model.batches[25] = (3, 0b101)
        s.ack_batch(6, 8, 0b11111000)  # the rest of it: entry 6 acked, M moves over 6..9
        assert s.md_e == 9 and s.batches() == [(25, 3, 0b101)] and s.count(6) == 0
        s.ack_range(10, 19)  # M to the ledger's last entry: on into the next one, its batch with it
        assert (s.md_l, s.md_e, s.batches()) == (LEDGER + 1, -1, [(5, 3, 0b101)])
        model.reset(LEDGER + 1, 0)
        model.batches = {5: (3, 0b101)}
        model.seq, model.slot, model.slots = 1, 1, 3
        key, value = model.value()
        assert pairs(impl.flush_small([s], *BOUNDS)[0]) == [(key, value)]
        s.reset(LEDGER + 1, 2)
        assert s.batches() == [] and s.nb == 0
        with count_cap(4096):  # (the bound lowered: what holds at 4,096 holds at 1,048,576)
            half = small_form.COUNT_CAP // 2
            full = impl.SmallState(CID, LEDGER, 4, 0, 0, 1, [], 64, [(e, 1) for e in range(10, 10 + half)])
            for e in range(2000, 2000 + half):
                assert full.ack_batch(e, 2, 1)
            assert not full.ack_batch(2000 + half + 7, 2, 1) and full.nb + full.nc == 4097  # past it
            counts, batches = [(e, 1) for e in range(10, 10 + half)], [(e, 2, 1) for e in range(2000, 2001 + half)]
            with pytest.raises(
                ValueError, match=f"{half} delivery counts and {half + 1} partial batches: the form holds at most 4096"
            ):
                impl.SmallState(CID, LEDGER, 4, 0, 0, 1, [], 64, counts, batches=batches)


SHAPES = ["plain", "properties", "batch", "count", "other ledger", "two ledgers", "other cursor"]


def _slot_value(slot: int, seq: int, md_e: int, acked: set[int], shape: str) -> bytes:
    """State slot ``slot``'s value: a state marker of cursor CID (M = (LEDGER, md_e), the
    acks above it) in ``shape``, by the state layout's own encoder, at sequence ``seq``."""
    bitmap = BitMap(acked)
    batches = {90: (4, 0b0011)} if shape == "batch" else {}
    counts = {91: 2} if shape == "count" else {}
    la = LedgerAcks.of_runs(bitmap, len(run_bounds(bitmap)), batches, counts)
    ledgers = [(LEDGER, la)] if bitmap or batches or counts else []
    other = (LEDGER + 1, LedgerAcks.of_runs(BitMap([5]), 1, {}, {}))
    if shape == "other ledger":
        ledgers = [other]
    elif shape == "two ledgers":
        ledgers = [(LEDGER, LedgerAcks.of_runs(BitMap([md_e + 5]), 1, {}, {})), other]
    cid = CID + 1 if shape == "other cursor" else CID
    record = records.encode_state_marker(cid, (LEDGER, md_e), {"k": 1} if shape == "properties" else {}, ledgers)
    key = records.slot_key(CID, slot)
    return records.seal_slot(key, seq, record, RESERVE if seq % 2 else 0)


@settings(max_examples=300, deadline=None)
@given(
    md_e=st.integers(-1, 20),
    acked=st.frozensets(st.integers(0, 60), max_size=10),
    seqs=st.tuples(st.none() | st.integers(0, 300), st.none() | st.integers(0, 300)),
    logged_seq=st.integers(0, 300),
    shape=st.sampled_from(["plain", "count", "properties", "batch", "other cursor"]),
    damage=st.none() | st.tuples(st.integers(0, 200), st.integers(1, 255)),
)
def test_the_twins_read_a_small_form_from_its_newest_log_key_alike(
    md_e: int,
    acked: frozenset[int],
    seqs: tuple[int | None, int | None],
    logged_seq: int,
    shape: str,
    damage: tuple[int, int] | None,
) -> None:
    """``small_of_slots`` given a cursor's newest record under a log key (``logged``, a cursor
    that keeps history): both twins return the same form or both None, the same with a byte
    of that record flipped; from intact values, the newest state of the three (a slot's on a
    tie), its next sequence after it, its slots as they hold values, or None when that state
    is outside the form."""
    plain = {e for e in acked if e > md_e + 1}
    values: list[bytes | None] = [
        None if seq is None else _slot_value(k, seq, md_e + k, {e for e in plain if e > md_e + k + 1}, "plain")
        for k, seq in enumerate(seqs)
    ]
    above = {e for e in plain if e > md_e + 3}
    _, record = records.open_slot(records.slot_key(CID, 0), _slot_value(0, logged_seq, md_e + 2, above, shape))
    record = bytes(record)
    if damage is not None:
        flipped = bytearray(record)
        flipped[damage[0] % len(flipped)] ^= damage[1]
        record = bytes(flipped)
    outs = [impl.small_of_slots(CID, *values, VERSION, 8, None, (logged_seq, record)) for impl in IMPLEMENTATIONS]
    got = [None if out is None else _fields(out) for out in outs]
    assert got == [got[0]] * len(got), (IDS, got)
    if damage is not None:
        return
    held = [k for k in (0, 1) if seqs[k] is not None]
    newest_slot = max(held, key=lambda k: (seqs[k], -k)) if held else None
    if newest_slot is not None and seqs[newest_slot] >= logged_seq:  # type: ignore[operator]
        return  # a slot's state: the test above holds those
    runs = run_bounds(BitMap(above))
    if shape not in ("plain", "count", "properties", "batch") or len(runs) > 8:
        assert got[0] is None
        return
    assert got[0] is not None
    slot = 1 if newest_slot is None else newest_slot
    assert got[0][:7] == (LEDGER, md_e + 2, runs, len(runs), logged_seq + 1, slot, sum(1 << k for k in held))
    assert got[0][19:21] == (([(90, 4, 0b0011)], 1) if shape == "batch" else ([], 0))
    for out in outs:
        check_small(out, (LEDGER, md_e + 2))
        assert out.logged == 1
    for impl in IMPLEMENTATIONS:
        with pytest.raises(TypeError, match="logged is"):
            impl.small_of_slots(CID, *values, VERSION, 8, None, (logged_seq, "not bytes"))


@settings(max_examples=300, deadline=None)
@given(
    md_e=st.integers(-1, 20),
    acked=st.frozensets(st.integers(0, 60), max_size=10),
    seqs=st.tuples(st.none() | st.integers(0, 300), st.none() | st.integers(0, 300)),
    cap=st.integers(0, 8),
    shape=st.sampled_from(SHAPES),
    damage=st.none() | st.tuples(st.integers(0, 1), st.integers(0, 200), st.integers(1, 255)),
    cut=st.none() | st.tuples(st.integers(0, 1), st.integers(0, 200)),
    spanned=st.booleans(),
)
def test_the_twins_read_a_small_form_from_its_slots_alike(
    md_e: int,
    acked: frozenset[int],
    seqs: tuple[int | None, int | None],
    cap: int,
    shape: str,
    damage: tuple[int, int, int, int] | None,
    cut: tuple[int, int] | None,
    spanned: bool,
) -> None:
    """``small_of_slots``: from the same two slot values (slot k holds M + k and the acks
    above it; a byte flipped or the value cut short), both twins return the same form or
    both None; from intact values, the form of the newest state when that state is in the
    form (M's ledger only or, given the line, the ledgers it spans, at most
    ``cap`` ranges; its properties packed as the marker holds them), else None."""
    states = [(md_e + k, {e for e in acked if e > md_e + k + 1}) for k in (0, 1)]
    values: list[bytes | None] = [
        None if seq is None else _slot_value(k, seq, *states[k], shape) for k, seq in enumerate(seqs)
    ]
    for change in (damage, cut):
        if change is not None and values[change[0]] is not None:
            value = bytearray(values[change[0]])  # type: ignore[arg-type]
            if change is damage:
                value[change[1] % len(value)] ^= change[2]  # type: ignore[misc]
            else:
                del value[change[1] % len(value) :]
            values[change[0]] = bytes(value)
    asked: list[int] = []

    def line(md_l: int) -> tuple[tuple[tuple[int, int], ...], int]:  # ledger LEDGER + 1 after 100 entries
        asked.append(md_l)
        return ((LEDGER + 1, 100),), 200

    outs = [impl.small_of_slots(CID, *values, VERSION, cap, *[line] * spanned) for impl in IMPLEMENTATIONS]
    got = [None if out is None else _fields(out) for out in outs]
    assert got == [got[0]] * len(got), (IDS, got)
    assert set(asked) <= {LEDGER}
    if damage is not None or cut is not None:
        return
    held = [k for k in (0, 1) if seqs[k] is not None]
    if not held:
        assert got[0] is None
        return
    newest = max(held, key=lambda k: (seqs[k], -k))  # the first on a tie
    m, above = states[newest]
    if spanned and shape in ("other ledger", "two ledgers"):  # on the line: LEDGER + 1's entry 5 is 105
        runs = [(m + 5, m + 5)] * (shape == "two ledgers") + [(105, 105)]
        if len(runs) > cap:
            assert got[0] is None
        else:
            assert got[0] is not None and got[0][2] == runs and asked == [LEDGER] * len(outs)
            assert [f.spans for f in outs] == [()] * len(outs)  # (bounded by the caller: small_opened's fit)
        return
    runs = run_bounds(BitMap(above))
    if shape not in ("plain", "count", "properties", "batch") or len(runs) > cap:
        assert got[0] is None
        return
    seq = seqs[newest]
    assert seq is not None
    slots = sum(1 << k for k in held)
    counts = [(91, 2)] if shape == "count" else []
    fields = (LEDGER, m, runs, len(runs), seq + 1, newest, slots, 0, len(runs), 0, 0, 0, False)
    props = records.pack_properties({"k": 1} if shape == "properties" else {})
    batches = [(90, 4, 0b0011)] if shape == "batch" else []
    assert got[0][:21] == (*fields, counts, len(counts), m + 1, 0, props, 0, batches, len(batches))
    for out in outs:
        check_small(out, (LEDGER, m))


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40), min_size=0, max_size=5),
    open_last=st.booleans(),
    confirmed=st.one_of(st.none(), st.integers(-1, 40)),
    md_e=st.integers(-1, 30),
    entries=st.frozensets(st.integers(0, 240), max_size=6),
    counted=st.frozensets(st.integers(0, 240), max_size=3),
)
def test_a_fitted_forms_limit_says_what_the_directorys_ends_say_of_its_top(
    counts: list[int],
    open_last: bool,
    confirmed: int | None,
    md_e: int,
    entries: frozenset[int],
    counted: frozenset[int],
) -> None:
    """An open fits the form read from a slot to the directory and checks its top entry (M,
    the last ack, the highest count) against the form's limit: for both twins that is the
    directory's own rule, a ledger's end (a sealed one's count, an open one's durable bound)
    at or below the highest entry holding state in it (``LedgerDirectory.past_end``)."""
    ids = list(range(LEDGER, LEDGER + len(counts) + (1 if open_last or not counts else 0)))
    sizes = counts + [-1] * (len(ids) - len(counts))
    d = LedgerDirectory(array("q", ids), array("q", sizes), ids[-1], confirmed is not None, confirmed)
    if sizes[0] >= 0 and md_e >= sizes[0] - 1 and len(ids) == 1:
        md_e = sizes[0] - 2  # (M before a lone sealed ledger's end: a form's M never rests past it)
    runs = [(e, e) for e in sorted(entries) if e > md_e + 1]
    runs = [r for i, r in enumerate(runs) if i == 0 or r[0] > runs[i - 1][1] + 1]
    for impl in IMPLEMENTATIONS:
        try:
            s = impl.SmallState(
                CID,
                LEDGER,
                md_e,
                5,
                0,
                1,
                runs,
                256,
                [(e, 1) for e in sorted(counted) if e > md_e and e not in entries],
                md_e + 1,
            )
        except ValueError:
            continue  # (outside the layout)
        if not fit(s, d):
            continue
        top = s.top()
        assert (top > s.limit) == bool(d.past_end([form_position(s, top)])), (impl, s.spans, s.limit, top)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IDS)
def test_bad_arguments_are_refused_with_the_same_errors(impl: Small) -> None:
    """Each twin refuses a position, slot or run outside the layout, and an entry that is
    not one, with the same error and message; nothing changes."""
    make = impl.SmallState
    with pytest.raises(ValueError, match="position, slot or slots are outside the layout"):
        make(CID, LEDGER, -2, 0, 0, 1, [], 64)
    with pytest.raises(ValueError, match="position, slot or slots are outside the layout"):
        make(CID, LEDGER, 5, 0, 2, 1, [], 64)
    with pytest.raises(ValueError, match=r"run \(6, 9\) is not above M \+ 1 and the run before, with a gap"):
        make(CID, LEDGER, 5, 0, 0, 1, [(6, 9)], 64)  # M would stand on it
    with pytest.raises(ValueError, match=r"run \(9, 12\) is not above M \+ 1 and the run before, with a gap"):
        make(CID, LEDGER, 5, 0, 0, 1, [(7, 8), (9, 12)], 64)  # touching: one run
    with pytest.raises(TypeError, match=r"a run is a \(first, last\) tuple"):
        make(CID, LEDGER, 5, 0, 0, 1, [[7, 8]], 64)
    with pytest.raises(ValueError, match=r"last 4294967296 is not an entry of the layout \(0..2\*\*32-1\)"):
        make(CID, LEDGER, 5, 0, 0, 1, [(7, 2**32)], 64)
    s = make(CID, LEDGER, 5, 0, 0, 1, [(7, 8)], 64)
    with pytest.raises(ValueError, match=r"first -1 is not an entry of the layout"):
        s.ack_range(-1, 3)
    with pytest.raises(ValueError, match=r"run \(9, 8\) ends before it starts"):
        s.ack_range(9, 8)
    with pytest.raises(TypeError):
        s.ack_range("9", 10)
    with pytest.raises(TypeError, match="flush_small flushes SmallStates"):
        impl.flush_small([s, object()], *BOUNDS)
    with pytest.raises(ValueError, match=r"flush_small: format 12 or room -1 is outside the layout \(0..255, 0..64\)"):
        impl.flush_small([s], 12, -1, MAX_COUNTS, MAX_BYTES, MAX_RUNS, MAX_ACKS, CHAINS)
    with pytest.raises(ValueError, match=r"entry 4294967296 is not an entry of the layout \(0..2\*\*32-1\)"):
        s.reset(LEDGER, 2**32)
    with pytest.raises(ValueError, match=r"ledger -1 is not a ledger id \(>= 0\)"):
        s.reset(-1, 0)
    for bad in ((True, 0), (LEDGER, 1.0)):
        with pytest.raises(TypeError, match=r"reset\(ledger: int, entry: int\)"):
            s.reset(*bad)
    with pytest.raises(TypeError):
        s.reset(LEDGER)
    with pytest.raises(ValueError, match=r"^entry -1 is not an entry of the layout"):
        s.ack_batch(-1, 4, 1)
    for values in ([0], [2**32], ["3"], [1.0]):
        with pytest.raises(ValueError, match=rf"^delivery count {values[0]!r} is not allowed: allowed 1..2\*\*32-1$"):
            s.set_counts([(LEDGER, 10)], values)
    for values in ([1, 2], (1,)):  # type: ignore[assignment]
        with pytest.raises(TypeError, match=r"values is a list of as many counts"):
            s.set_counts([(LEDGER, 10)], values)
    assert s.set_counts({(LEDGER, 10): 1}, [1]) is None and s.count(10) == 0  # (not a list: not the form's)
    with pytest.raises(ValueError, match=r"does not fit a form at"):
        s.bound(1, (("9", 20),), 100)  # (a span's ledger that is not an int, its offset one)
    with pytest.raises(TypeError, match=r"a partial batch is an \(entry, size, mask\) tuple"):
        make(CID, LEDGER, 5, 0, 0, 1, [(7, 8)], 64, (), -1, b"", 0, [[9, 4, 1]])
    for written in (0, 1 << 64, "1"):  # (a base's records: of ledgers of the line, one at least)
        with pytest.raises(ValueError, match=rf"took_base: {written!r} names no ledger of the line, or one past it"):
            s.took_base(VERSION, written, 0)
    assert s.runs() == [(7, 8)] and not s.dirty and s.next_seq == 0 and (s.md_l, s.md_e) == (LEDGER, 5)


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.sets(st.integers(0, 70_000), max_size=60), st.booleans()),
        max_size=5,
    )
)
@settings(max_examples=150, deadline=None)
def test_the_twins_give_a_lines_runs_alike_and_a_form_takes_them(parts: list[tuple[int, set[int], bool]]) -> None:
    """``line_runs`` of ledgers at ascending offsets (each a gap, or none: a run across the
    offset is one) gives the same bytes in each twin, the runs of the union of the ledgers'
    entries at their offsets; a SmallState made from those bytes holds those runs."""
    ledgers, offset, union = [], 0, BitMap()
    for gap, entries, dense in parts:
        offset = offset + gap if not ledgers else union.max() + 1 + gap if union else offset + gap
        bitmap = BitMap(entries)
        if dense and entries:  # (a run of a container's length: the bitmap walk's long runs)
            bitmap.add_range(min(entries), min(entries) + 5000)
        ledgers.append((offset, bitmap))
        union |= bitmap.shift(offset)
    outs = [impl.line_runs(ledgers) for impl in IMPLEMENTATIONS]
    assert all(out == outs[0] for out in outs)
    bounds = array("I", outs[0]).tolist()
    assert list(zip(bounds[::2], bounds[1::2], strict=True)) == run_bounds(union)
    if union and union.min() >= 2:
        for impl in IMPLEMENTATIONS:
            assert impl.SmallState(CID, LEDGER, 0, 0, 0, 1, outs[0], 1 << 20).runs() == run_bounds(union)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IDS)
def test_a_lines_runs_past_the_layout_or_out_of_order_are_refused(impl: Small) -> None:
    """``line_runs`` refuses a ledger whose entries lie past 2**32 - 1 at its offset, or at
    or below the ledger before's; a SmallState refuses runs bytes that are not pairs."""
    with pytest.raises(ValueError, match="ledger at offset 4294967295 of the line is past the layout"):
        impl.line_runs([(2**32 - 1, BitMap([0, 1]))])
    with pytest.raises(ValueError, match="ledger at offset 5 of the line is past the layout or the ledger before"):
        impl.line_runs([(0, BitMap([7])), (5, BitMap([2]))])
    with pytest.raises(TypeError):
        impl.line_runs([(0, BitMap([7]), 1)])
    with pytest.raises(ValueError, match="runs of 4 bytes are not"):
        impl.SmallState(CID, LEDGER, 0, 0, 0, 1, b"\0\0\0\7", 64)
    assert impl.line_runs([]) == b"" and impl.line_runs([(3, BitMap())]) == b""


def test_a_form_of_a_cursor_that_keeps_history_writes_its_state_under_its_log_key() -> None:
    """A ``logged`` form (its cursor keeps history) writes the very state marker a state slot
    would hold, under its log key, leaves its slots as they were and is named in the flush's
    ``written``; a failed write gives it back. Both twins, byte for byte, beside a form that
    writes its slot."""
    outs = []
    for impl in IMPLEMENTATIONS:
        logged, slotted = (impl.SmallState(CID, LEDGER, 4, 9, 1, 3, [(7, 8), (11, 20)], 64) for _ in range(2))
        for s in (logged, slotted):
            s.ack_range(30, 31)
        logged.logged = 1
        written: list[object] = []
        puts, nbytes, over, _ = impl.flush_small([logged], *BOUNDS, written)
        assert written == [logged]
        ((key, value),) = pairs(puts)
        assert (key, over, nbytes) == (records.log_key(CID, 9), [], len(key) + len(value))
        assert (logged.next_seq, logged.slot, logged.slots, logged.dirty) == (10, 1, 3, 0)
        ((slot_key, slot_value),) = pairs(impl.flush_small([slotted], *BOUNDS, written)[0])
        assert written == [logged]  # (a slot's form is not named)
        assert slot_key == records.slot_key(CID, 0)
        assert records.open_slot(slot_key, slot_value) == (9, value)  # the same marker, in a slot
        marker = records.decode_marker(value, 9)
        assert marker.mark_delete == (LEDGER, 4)
        assert {lg: la.ranges() for lg, la in (marker.ledgers or {}).items()} == {LEDGER: [(7, 8), (11, 20), (30, 31)]}
        impl.undo_small([logged])
        assert (logged.next_seq, logged.slot, logged.slots, logged.dirty) == (9, 1, 3, 1)
        check_small(logged, (LEDGER, 4))
        with pytest.raises(TypeError, match="written is a list"):
            impl.flush_small([logged], *BOUNDS, {CID: 3600})
        assert logged.next_seq == 9 and logged.dirty
        outs.append((key, value, slot_value))
    assert outs == [outs[0]] * len(outs)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IDS)
def test_a_form_that_ended_is_never_flushed_nor_given_back(impl: Small) -> None:
    """Once its cursor left the form, a flush skips it, and an undo of a flush that took it
    before it ended leaves it as it is (the cursor's parts hold the state)."""
    s = impl.SmallState(CID, LEDGER, -1, 4, 1, 3, [], 64)
    s.ack_range(3, 5)
    puts, _, _, _ = impl.flush_small([s], *BOUNDS)
    assert len(puts) == 1 and s.next_seq == 5
    s.end()
    impl.undo_small([s])
    assert (s.next_seq, s.dirty, s.ended) == (5, 0, 1)
    s.ack_range(7, 9)
    puts, nbytes, over, _ = impl.flush_small([s], *BOUNDS)
    assert (pairs(puts), nbytes, over) == ([], 0, [])


def test_a_cap_the_runs_pass_is_reported() -> None:
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, -1, 0, 1, 1, [], 2)
        assert s.ack_range(2, 3) and s.ack_range(5, 5)
        assert not s.ack_range(8, 8) and s.n == 3  # applied; the caller takes it to the parts


def test_a_bulk_ack_of_more_runs_than_the_cap_is_the_parts() -> None:
    """``ack_entries`` of a BitMap holding more runs than the form's cap changes nothing and
    says None (the parts take it whole); one within the cap is taken, even when the runs it
    leaves are more (the caller then takes the state to the parts)."""
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, -1, 0, 1, 1, [(20, 21)], 3)
        assert not s.bound(0, (), 100)
        assert s.ack_entries(LEDGER, BitMap([2, 4, 6, 8])) is None and s.n == 1 and not s.dirty
        assert s.ack_entries(LEDGER, BitMap([2, 4, 6])) is False and s.n == 4  # applied: past the cap
        assert s.ack_entries(LEDGER, BitMap(range(1, 30))) is True and s.n == 1  # one run: the holes it covers close


@pytest.mark.parametrize("layout", LAYOUTS, ids=["shipped", "lowered-2", "lowered-5"])
@pytest.mark.parametrize("seed", range(4))
def test_the_twins_hold_the_same_runs_as_m_passes_runs_and_holes_open_and_close_at_both_ends(
    seed: int, layout: tuple[int, int, int, int] | None
) -> None:
    """Many runs, acked as a consumer with late acks does: M passing the first runs (the
    compiled twin leaves their room before the first), holes opened at the far end, closed
    near M and in the middle, runs inserted and merged near the front (into that room) and
    near the back: both twins hold the model's runs after every ack, and M where it says.
    The compiled twin's runs in one array, or past a few in chunks of a few (split when an
    insert finds one full, joined when merges leave one nearly empty, dropped when empty)."""
    with compiled_layout(layout):
        _same_runs_at_both_ends(seed)


def _same_runs_at_both_ends(seed: int) -> None:
    rng = random.Random(seed)
    forms = [impl.SmallState(CID, LEDGER, -1, 0, 1, 1, [], 1 << 16) for impl in IMPLEMENTATIONS]
    for s in forms:
        assert not s.bound(0, (), 1 << 20)
    acked: set[int] = set()
    top = 0
    for step in range(3000):
        kind = rng.random()
        if kind < 0.4:  # the next entries, one of every few left out
            e = top + rng.randint(1, 6)
            top = e + rng.randint(0, 4)
            f, last = e, top
        else:  # a late ack: near M, or anywhere below the top
            md = next(x for x in itertools.count() if x not in acked) - 1
            lo = md + 1 if kind < 0.7 else rng.randint(md + 1, top + 1)
            f = min(lo + rng.randint(0, 3), top + 1)
            last = f + rng.randint(0, 1)
        acked.update(range(f, last + 1))
        top = max(top, last)
        for s in forms:
            s.ack_range(f, last)
        md = next(x for x in itertools.count() if x not in acked) - 1
        want = run_bounds(BitMap(e for e in acked if e > md))
        for s in forms:
            assert (s.md_e, s.runs()) == (md, want), (step, IDS)
    assert len(want) > 100  # (the runs many: the front's room used and taken back)


@pytest.mark.parametrize("layout", LAYOUTS, ids=["shipped", "lowered-2", "lowered-5"])
def test_a_count_an_ack_drops_in_place_is_in_no_state_a_flush_writes(layout: tuple[int, int, int, int] | None) -> None:
    """Acks among many delivery counts (the compiled twin lowered drops them in place and
    keeps them until something reads the counts whole): each flush after writes, in a slot,
    the bytes the pure twin writes, holding the counts left and none of the acked entries';
    the counts then read whole are the same, and a count delivered again after is one more."""
    with compiled_layout(layout):
        forms = [impl.SmallState(CID, LEDGER, -1, 0, 0, 1, [], 64) for impl in IMPLEMENTATIONS]
        for s in forms:
            assert not s.bound(0, (), 100)
            assert s.deliver_positions([Position(LEDGER, e) for e in range(1, 21)]) == [1] * 20
        gone: set[int] = set()
        for acked in ([5], [9, 12], [13, 14, 15], [2]):  # (in the middle of the counts, then near the front)
            gone.update(acked)
            for s in forms:
                for e in acked:
                    s.ack_range(e, e)
            outs = [pairs(impl.flush_small([s], *BOUNDS)[0]) for impl, s in zip(IMPLEMENTATIONS, forms, strict=True)]
            assert all(out == outs[0] for out in outs) and len(outs[0]) == 1, acked
            key, value = outs[0][0]
            seq, record = records.open_slot(key, value)
            (la,) = records.decode_marker(record, seq).ledgers.values()
            assert la.counts == {e: 1 for e in range(1, 21) if e not in gone}, acked
        for s in forms:
            assert s.deliver_positions([Position(LEDGER, 10)]) == [2]
            assert [s.count(e) for e in (5, 9, 10, 11)] == [0, 0, 2, 1]
        assert all(f.counts() == forms[0].counts() for f in forms) and forms[0].nc == 13


@pytest.mark.parametrize("layout", LAYOUTS, ids=["shipped", "lowered-2", "lowered-5"])
@pytest.mark.parametrize("seed", range(4))
def test_the_twins_hold_the_same_counts_as_deliveries_and_acks_come_at_both_ends(
    seed: int, layout: tuple[int, int, int, int] | None
) -> None:
    """Delivery counts opened and closed anywhere: new entries delivered at the top, entries
    delivered again low and high, counted entries acked near M (the compiled twin leaves
    their room before the first), in the middle and at the top, and new counts then made
    below the middle (into that room): both twins hold the model's counts after every step.
    The compiled twin as shipped, or dropping an acked entry's count in place when more than
    a few counts would move (``LAYOUTS``): each count read one at a time every step (which
    leaves those dropped in place), all of them every few steps (which takes them out)."""
    with compiled_layout(layout):
        _same_counts_at_both_ends(seed)


def _same_counts_at_both_ends(seed: int) -> None:
    rng = random.Random(seed)
    forms = [impl.SmallState(CID, LEDGER, -1, 0, 1, 1, [], 1 << 16) for impl in IMPLEMENTATIONS]
    for s in forms:
        assert not s.bound(0, (), 1 << 20)
    counts: dict[int, int] = {}
    acked: set[int] = set()
    top = 0
    for step in range(2000):
        md = next(x for x in itertools.count() if x not in acked) - 1
        kind = rng.random()
        if kind < 0.35 or not counts:  # new entries at the top, one of every few left for later
            new = [top + k for k in range(1, rng.randint(2, 6)) if rng.random() < 0.7] or [top + 1]
            top = max(new)
        elif kind < 0.6:  # delivered again, or first delivered, anywhere above M
            new = [rng.randint(md + 1, top) for _ in range(rng.randint(1, 3))]
            new = [e for e in dict.fromkeys(new) if e not in acked]
        else:  # acks of counted entries: the lowest, one anywhere, the highest, or a few around one
            live = sorted(counts)
            e = live[0] if kind < 0.72 else (rng.choice(live) if kind < 0.85 else live[-1])
            f, last = (e, e) if kind < 0.93 else (max(md + 1, e - rng.randint(0, 6)), e + rng.randint(0, 6))
            acked.update(range(f, last + 1))
            top = max(top, last)
            for x in range(f, last + 1):
                counts.pop(x, None)
            for s in forms:
                s.ack_range(f, last)
            new = []
        if new:
            for e in new:
                counts[e] = counts.get(e, 0) + 1
            for s in forms:
                assert s.deliver_positions([Position(LEDGER, e) for e in new]) == [counts[e] for e in new]
        md = next(x for x in itertools.count() if x not in acked) - 1
        for e in [e for e in counts if e <= md]:
            counts.pop(e)
        for s in forms:
            assert (s.md_e, s.nc) == (md, len(counts)), (step, IDS)
            assert s.top() == max(md, *acked, *counts), (step, IDS)
            assert all(s.count(e) == counts.get(e, 0) for e in range(md - 2, top + 2)), (step, IDS)
            if step % 7 == 0:
                assert dict(s.counts()) == counts, (step, IDS)
    assert len(counts) > 50


# -- cursors in and out of the form --------------------------------------------------------


def _topic(store: AckStore) -> Any:
    topic = store.topic(T)
    if not topic.ledgers():
        topic.add_ledger(1)
    return topic


def _steady(cur: Any, rnd: int) -> None:
    """A broker's round: ten entries acked in order, one held back for two rounds."""
    batch = BitMap(range(10 * rnd, 10 * rnd + 10))
    batch.discard(10 * rnd + 3)
    if rnd >= 2:
        batch.add(10 * (rnd - 2) + 3)
    cur.ack_entries(1, batch)


SETTLE = 3
"""steady rounds, each flushed, that a test runs before it looks at the form (a new cursor
is in it from its making: its log keys hold nothing, and its first state goes into a slot)"""


def _settle(store: AckStore, cursors: list[Any]) -> None:
    """Steady rounds 0 .. SETTLE - 1, each flushed: the cursors are then in the form."""
    for rnd in range(SETTLE):
        for cur in cursors:
            _steady(cur, rnd)
        store.flush()
    assert all(cur._core.small is not None for cur in cursors)


def _model_ranges(rounds: int) -> tuple[int, list[tuple[int, int]]]:
    acked = set(range(10 * rounds)) - {10 * r + 3 for r in range(max(rounds - 2, 0), rounds)}
    md = -1
    while md + 1 in acked:
        md += 1
    return md, run_bounds(BitMap(e for e in acked if e > md))


def _log(path: Path) -> dict[bytes, bytes]:
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=8)
    try:
        with env.begin(db=env.open_db(b"log", create=False)) as txn:
            return dict(txn.cursor())
    finally:
        env.close()


@pytest.mark.parametrize("initial", ["earliest", "latest"])
def test_a_new_cursor_is_in_the_form_from_its_making_and_its_first_flush_fills_a_slot(
    tmp_path: Path, initial: str
) -> None:
    """A cursor just made (its log holds nothing) is in the small form before any flush, its
    start position the change the first flush writes: into state slot 0, with no log key,
    as a flushed form's state. Not persisted until then ("latest" is flushed as it is made,
    so a crash cannot move it back to the earliest); a crash before that flush reopens
    "earliest" where it began and loses only the acks since."""
    path = tmp_path / "s"
    store = AckStore.open(path)
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, 10)
    topic.add_ledger(2)
    cur = topic.cursor("c", initial_position=initial)
    core, start = cur._core, (Position(2, -1) if initial == "latest" else Position(1, -1))
    assert core.small is not None and core._unbuilt and cur.mark_delete_position == start
    latest = initial == "latest"
    assert core.persisted == latest and _slots(store, cur.cursor_id) == ({0: 0} if latest else {})
    cur._check()
    cur.ack([Position(2, 0), Position(2, 2)])
    assert core.small is not None and cur.ack_range_count == (1 if initial == "latest" else 2)
    cur._check()
    testing.crash(store)  # the acks were never flushed
    store = AckStore.open(path)
    cur = store.topic(T).cursor("c", initial_position="earliest")
    assert cur.mark_delete_position == start and cur.ack_range_count == 0 and cur._core.small is not None
    cur.ack([Position(2, 0), Position(2, 2)])
    store.flush()
    held = 1 if initial == "latest" else 0  # ("latest" flushed into slot 0 as it was made)
    assert _slots(store, cur.cursor_id) == ({0: 0, 1: 1} if held else {0: 0}) and _log_keys(store, cur.cursor_id) == []
    assert not cur._core.small.dirty and cur._core.persisted
    cur._check()
    two = (Position(2, 2), Position(2, 2))
    if initial == "earliest":
        want: Any = (start, [(Position(2, 0), Position(2, 0)), two])
    else:  # (M moves onto 2:0)
        want = (Position(2, 0), [two])
    assert (cur.mark_delete_position, list(cur.ack_ranges())) == want
    store.close()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert (cur.mark_delete_position, list(cur.ack_ranges())) == want and cur._core.small is not None


def test_acks_at_or_below_m_in_an_earlier_ledger_keep_the_form(tmp_path: Path) -> None:
    """Acks of positions in a ledger before M's (a duplicate ack after M moved on, a ledger
    trimmed since) are ignored, as the parts and Pulsar ignore them, and the cursor stays in
    the form: one position, a list (with positions the form takes: those are acked), a
    ledger's entries; so are their deliveries and counts set by hand (acked: count 0, not
    counted). A bad one raises what the parts raise, with nothing changed and the form kept:
    a ledger the topic never had, an entry its ledger cannot have. The same calls on the
    parts give the same results, state and errors."""
    from .forms import end_form

    def play(form: bool) -> tuple[Any, ...]:
        with AckStore.open(tmp_path / f"s{form}", sync=False) as store:
            topic = sealed_topic(store, T, 2, 10)
            cur = topic.cursor("c")
            cur.ack([Position(1, e) for e in range(10)] + [Position(2, e) for e in range(10)] + [Position(3, 2)])
            store.flush()
            if not form:
                end_form(cur)
            assert cur.mark_delete_position == Position(3, -1)
            topic.trim_ledgers(2)  # (ledger 1 gone from the topic)
            errors = []
            calls = [
                lambda: cur.ack(Position(2, 5)),
                lambda: cur.ack(Position(1, 7)),  # (trimmed since: no error)
                lambda: cur.ack([Position(2, 1), Position(1, 3), Position(3, 4)]),
                lambda: cur.ack([(2, 0), (2, 9)]),
                lambda: cur.ack_entries(2, BitMap([1, 2, 3])),
                lambda: cur.ack_entries(1, [5, 6]),
                lambda: cur.ack_entries(2, []),
                lambda: cur.ack(Position(9, 1)),  # a ledger the topic never had
                lambda: cur.ack(Position(2, 10)),  # past ledger 2's last entry
                lambda: cur.ack([Position(2, 11), Position(3, 6)]),
                lambda: cur.ack([Position(3, 7), Position(2, 11), Position(2, 15), Position(1, 3)]),
                lambda: cur.ack_entries(2, BitMap([3, 12])),
                lambda: cur.record_deliveries([Position(2, 3), Position(3, 5), Position(1, 2), Position(3, 5)]),
                lambda: cur.restore_delivery_counts({Position(2, 4): 3, Position(3, 6): 7, Position(1, 9): 2}),
                lambda: cur.record_deliveries([Position(3, 5), Position(2, 10)]),
                lambda: cur.restore_delivery_counts({Position(2, -1): 3}),
            ]
            for call in calls:
                try:
                    errors.append(("ok", call()))
                except InvalidArgumentError as exc:
                    errors.append((type(exc).__name__, str(exc)))
            assert (cur._core.small is not None) == form
            cur._check()
            return errors, cur.snapshot(), store.flush().cursors

    form, parts = play(True), play(False)
    assert form[:2] == parts[:2]
    assert form[0][:7] == [("ok", None)] * 7 and all(e[0] != "ok" for e in form[0][7:12] + form[0][14:])
    assert form[0][12:14] == [("ok", [0, 1, 0, 2]), ("ok", 1)]
    assert form[1].ranges == [(3, [(2, 2), (4, 4)])]
    assert form[1].delivery_counts == {Position(3, 5): 2, Position(3, 6): 7}


def test_a_bad_call_the_form_does_not_take_raises_with_the_form_kept(tmp_path: Path) -> None:
    """A call the form does not take goes to the parts, but a bad one (a ledger the topic
    never had, an entry past its ledger's end, an item that is no position, a count not
    allowed) is first checked as the parts check it, at the form's M: it raises what the
    parts raise, with nothing changed and the very same form kept. The same calls on the
    parts give the same errors, and both cursors end in the same state."""

    def play(form: bool) -> tuple[Any, ...]:
        with AckStore.open(tmp_path / f"s{form}", sync=False) as store:
            topic = sealed_topic(store, T, 1, 10)
            cur = topic.cursor("c")
            cur.ack([Position(1, e) for e in (0, 1, 2, 3, 5, 7)])
            cur.record_deliveries([Position(1, 4), Position(1, 6)])
            store.flush()
            if not form:
                end_form(cur)
            held = cur._core.small
            assert (held is not None) == form
            outcomes = []
            calls = [
                lambda: cur.ack([Position(1, 8), Position(5, 1)]),  # a ledger never added
                lambda: cur.ack([Position(1, 8), Position(1, 12)]),  # past ledger 1's last entry
                lambda: cur.ack((Position(2, 0), (1, "x"))),
                lambda: cur.ack([Position(1, 8), (1,)]),
                lambda: cur.ack([Position(2, 3), (-1, 2)]),
                lambda: cur.ack_entries(1, [8, 12]),
                lambda: cur.ack_entries(5, [1]),
                lambda: cur.ack_entries(5, []),
                lambda: cur.record_deliveries([Position(1, 8), Position(5, 0)]),
                lambda: cur.record_deliveries([Position(2, 1), Position(1, 12)]),
                lambda: cur.restore_delivery_counts({Position(1, 8): 0}),
                lambda: cur.restore_delivery_counts({Position(1, 8): 2, Position(7, 1): 1}),
                lambda: cur.restore_delivery_counts({Position(1, 9): 2, Position(1, 20): 1}),
                lambda: cur.ack([Position(1, 4), Position(2, 2)]),  # good ones after them
                lambda: cur.record_deliveries([Position(1, 6), Position(2, 0)]),
                lambda: cur.restore_delivery_counts({Position(1, 8): 4}),
            ]
            for call in calls:
                try:
                    outcomes.append(("ok", call()))
                except AckStoreError as exc:
                    outcomes.append((type(exc).__name__, str(exc)))
            assert cur._core.small is held  # (the same form throughout, or the parts throughout)
            cur._check()
            return outcomes, cur.snapshot(), store.flush().cursors

    form, parts = play(True), play(False)
    assert form[:2] == parts[:2]
    assert all(o[0] != "ok" for o in form[0][:13]), form[0]
    assert form[0][13:] == [("ok", None), ("ok", [2, 1]), ("ok", 1)]
    assert form[1].mark_delete_position == Position(1, 5)
    assert form[1].ranges == [(1, [(7, 7)]), (2, [(2, 2)])]
    assert form[1].delivery_counts == {Position(1, 6): 2, Position(1, 8): 4, Position(2, 0): 1}


def test_a_steady_cursor_takes_the_form_and_writes_what_a_cursor_without_it_writes(tmp_path: Path) -> None:
    """After its first state flush a steady cursor is in the form: its acks go there, its
    reads are answered from it, each flush writes it; the store holds the very bytes a
    cursor kept out of the form (read through its parts every round) writes, and both
    reopen to the model's state."""
    stores = {}
    for name in ("small", "parts"):
        store = AckStore.open(tmp_path / name)
        cur = _topic(store).cursor("c")
        for rnd in range(12):
            _steady(cur, rnd)
            if name == "parts":
                end_form(cur)  # a read the form does not serve: the cursor stays out of it
            stats = store.flush()
            assert stats.cursors == 1
            assert (cur._core.small is not None) == (name == "small"), (name, rnd)
            cur._check()
        md, ranges = _model_ranges(12)
        assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]
        assert cur.ack_range_count == len(ranges) and cur.read_position == Position(1, md + 1)
        assert cur.is_acked(Position(1, ranges[0][0])) and not cur.is_acked(Position(1, md + 1))
        assert cur.figures()[:2] == (len(ranges), len(ranges)) and cur.figures()[12] == 12
        assert cur.partial_batches() == {} and cur.delivery_counts() == {} and cur.properties == {}
        assert cur.batch_acked_indexes(Position(1, md + 1)) is None  # (served: the form holds no partial batch)
        assert (cur._core.small is not None) == (name == "small")
        stores[name] = store
        store.close()
    assert _log(tmp_path / "small") == _log(tmp_path / "parts")
    for name in stores:
        with AckStore.open(tmp_path / name) as store:
            cur = store.topic(T).cursor("c")
            assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]


def _props_round(cur: Any, rnd: int) -> None:
    """Round ``rnd``'s property changes: one set each round, another removed every third."""
    cur.set_property("round", rnd)
    cur.set_property(f"k{rnd % 4}", "v" * rnd)
    if rnd % 3 == 2:
        assert cur.remove_property(f"k{(rnd - 1) % 4}")
    assert not cur.remove_property("never")


def _props_model(rounds: int) -> dict[str, int | str]:
    props: dict[str, int | str] = {}
    for rnd in range(rounds):
        props["round"] = rnd
        props[f"k{rnd % 4}"] = "v" * rnd
        if rnd % 3 == 2:
            del props[f"k{(rnd - 1) % 4}"]
    return props


def test_a_cursor_that_takes_the_form_lets_its_parts_go_and_keeps_what_lives_in_memory(tmp_path: Path) -> None:
    """Once a cursor takes the form its parts are gone, their cache bytes back in the store's
    pool: the form alone holds the state (nothing to fall back to). What lives only in memory
    is the same in the form and after it: the open's recovery report, every flush counted,
    the bytes they wrote."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        cur.ack_entries(1, range(0, 1200, 2))  # 600 ranges ...
        cur.ack_batch_index(Position(1, 1), 4, [0])  # ... and a partial batch: opened by recovery
        store.flush()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        core = cur._core
        opened = core._chain.recovery  # (stats() would keep it out of the form at the next flush)
        cur.ack_entries(1, range(1200))  # M at 1199: steady rounds from 120 on
        written, held = [], []
        for rnd in range(120, 120 + SETTLE + 2):
            _steady(cur, rnd)
            held.append(store.cache_bytes)
            written.append(store.flush().bytes_written)
        assert opened.marker_seq >= 0 and held[0] > 0  # (the parts held the ledger's acks above M)
        assert core.small is not None and core._unbuilt and store.cache_bytes == 0
        assert not hasattr(core, "_state") and not hasattr(core, "_planner")  # no second copy of the state
        figures = dict(zip(CURSOR_FIGURES, cur.figures(), strict=True))
        assert figures["flushes"] == len(written) and figures["total_flush_bytes"] == sum(written)
        cur._check()
        snap = cur.snapshot()  # served by the form
        assert core.small is not None
        end_form(cur)  # not served: the form ends, the parts load the newest flushed state
        st = cur.stats()
        assert core.small is None and st.recovery == opened and cur.snapshot() == snap
        assert (st.flushes, st.total_flush_bytes, st.last_flush_bytes) == (len(written), sum(written), written[-1])
        md, ranges = _model_ranges(120 + SETTLE + 2)
        assert snap.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]
        cur._check()


def test_properties_stay_in_the_form_and_are_written_as_the_parts_write_them(tmp_path: Path) -> None:
    """A cursor setting and removing properties every round stays in the small form; the
    store holds the very bytes a cursor kept out of it writes; a bad property is refused
    there with nothing changed; both reopen (the form's into the form) with the model's
    properties; a read that ends the form carries those set since its flush to the parts,
    and the next flush writes them."""
    for name in ("small", "parts"):
        with AckStore.open(tmp_path / name) as store:
            cur = _topic(store).cursor("c")
            for rnd in range(12):
                _steady(cur, rnd)
                _props_round(cur, rnd)
                if name == "parts":
                    end_form(cur)  # a read the form does not serve: the cursor stays out of it
                assert cur.properties == _props_model(rnd + 1)
                store.flush()
                assert (cur._core.small is not None) == (name == "small"), (name, rnd)
                cur._check()
            with pytest.raises(InvalidArgumentError):
                cur.set_property("big", "x" * 5000)
            with pytest.raises(InvalidArgumentError):
                cur.set_property("float", 1.5)
            with pytest.raises(InvalidTypeError):
                cur.remove_property(7)
            assert cur.properties == _props_model(12) and not cur._core._pending
    assert _log(tmp_path / "small") == _log(tmp_path / "parts")
    with AckStore.open(tmp_path / "small") as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is not None and cur._core._unbuilt and cur.properties == _props_model(12)
        cur.set_property("late", 1)
        assert cur.remove_property("round")
        snap = cur.snapshot()  # served by the form, with the properties set and removed since its flush
        assert cur._core.small is not None and snap.properties == cur.properties
        end_form(cur)  # the form ends: the parts load the flushed state, then take what changed since
        assert cur._core.small is None and cur.snapshot() == snap
        expect = {**_props_model(12), "late": 1}
        del expect["round"]
        assert cur.properties == expect and cur._core._pending
        cur._check()
        store.flush()
    with AckStore.open(tmp_path / "small", readonly=True) as store:
        assert store.topic(T).cursor("c").properties == expect


CACHE_STATS = ("ledgers_in_memory", "ledgers_swapped_out", "cache_bytes", "largest_ledger_bytes", "swap_ins")
"""what ``stats()`` says of the ack cache: the form is not in it (its parts' loads are)"""
GROWN = "dirty_ledgers"
"""parts made at the form's end take its delivery counts again: their ledger is dirty"""


def _stat_names(stats: Any) -> list[str]:
    return [f.name for f in fields(stats)]


def test_a_cursor_in_the_small_form_is_two_objects_the_collector_tracks(tmp_path: Path) -> None:
    """A cursor made or opened into the small form is its facade and its core to the cyclic
    collector: what the open did (its report, asked for by ``stats()``) is kept as plain
    figures the collector stops tracking, not as the object the open returned (which holds the
    form), so a full collection of a broker of 100,000 cursors walks a third fewer objects."""
    import gc

    n = 300
    path = tmp_path / "s"

    def tracked_by_type() -> dict[str, int]:
        gc.collect()
        counts: dict[str, int] = {}
        for obj in gc.get_objects():
            counts[type(obj).__name__] = counts.get(type(obj).__name__, 0) + 1
        return counts

    with AckStore.open(path, sync=False) as store:
        topic = _topic(store)
        before = tracked_by_type()
        made = [topic.cursor(f"c{i}") for i in range(n)]
        for cur in made:
            cur.ack(Position(1, 1))
        store.flush()
        after = tracked_by_type()
        assert all(cur._core.small is not None for cur in made)
        grown = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) >= n // 2}
        assert "OpenedForm" not in grown and grown["Cursor"] == grown["CursorCore"] == n, grown
        assert small_form._native is None or grown == {"Cursor": n, "CursorCore": n}, grown  # (pure: the form too)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        before = tracked_by_type()
        opened = [topic.cursor(f"c{i}") for i in range(n)]
        after = tracked_by_type()
        assert all(cur._core.small is not None for cur in opened)
        grown = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) >= n // 2}
        assert "OpenedForm" not in grown and grown["Cursor"] == grown["CursorCore"] == n, grown
        assert small_form._native is None or grown == {"Cursor": n, "CursorCore": n}, grown  # (pure: the form too)
        assert not gc.is_tracked(opened[0]._core._carried)
        for cur in opened[:3]:  # the open's report, as the open made it
            st = cur.stats()
            assert st.recovery.marker_seq == st.last_marker_seq >= 0, st
            assert st.recovery.records_loaded == 1 and st.recovery.bytes_loaded > 0, st


def test_stats_are_the_forms_and_leave_the_cursor_in_it(tmp_path: Path) -> None:
    """``stats()`` (a broker's periodic per-subscription figures) answers from the small form:
    the cursor stays in it, changed or not, and its next flushes are the form's. What it
    says is what ``figures()`` says, and what the same cursor's parts say once a read the
    form does not serve ends it, but for the cache (the form is not in it): the positions,
    ranges, the ledgers its state holds (one rolled over, one with delivery counts), the
    flushes and their bytes, the newest marker, the open's recovery report."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])
    with AckStore.open(path) as store:  # opened into the form: its report is the open's
        topic = store.topic(T)
        cur = topic.cursor("c")
        small = cur._core.small
        assert small is not None
        _steady(cur, SETTLE)  # 23 and 33 held back
        topic.close_ledger(1, 45)
        topic.add_ledger(2)
        cur.ack([Position(2, e) for e in range(5)])
        assert cur.record_deliveries([Position(1, 41), Position(1, 41)]) == [1, 2]
        cur.set_property("k", 1)
        changed = cur.stats()
        assert cur._core.small is small and small.spans  # (M's ledger and the next one: one line)
        assert (changed.dirty_ledgers, changed.ledgers_indexed, changed.flushes) == (2, 2, 0)
        assert changed.recovery.marker_seq == changed.last_marker_seq == SETTLE - 1
        assert changed.recovery.records_loaded == 1 and changed.recovery.bytes_loaded > 0
        figures = dict(zip(CURSOR_FIGURES, cur.figures(), strict=True))
        named = {k: v for k, v in figures.items() if hasattr(changed, k)}
        assert {k: getattr(changed, k) for k in named} == named
        written = store.flush().bytes_written
        assert cur._core.small is small and cur.stats().dirty_ledgers == 0
        assert store.flush().cursors == 0  # (nothing changed: the stats wrote nothing, listed nothing)
        form = cur.stats()
        assert (form.flushes, form.last_flush_bytes, form.total_flush_bytes) == (1, written, written)
        assert form.mark_delete_position == Position(1, 22) and form.ack_range_count == 3  # (23, 33 held)
        end_form(cur)  # not served: the form ends, the parts load the flushed state
        parts = cur.stats()
        assert cur._core.small is None
        assert {k: getattr(form, k) for k in _stat_names(form) if k not in (*CACHE_STATS, GROWN)} == {
            k: getattr(parts, k) for k in _stat_names(parts) if k not in (*CACHE_STATS, GROWN)
        }
        assert parts.ledgers_in_memory + parts.ledgers_swapped_out == 2 and form.ledgers_in_memory == 0


def test_log_usage_is_the_forms_and_leaves_the_cursor_in_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``log_usage()`` (what a metrics scrape asks of every cursor that keeps history, once per
    flush of it) answers in the small form, for a cursor whose states go into its slots and
    for one whose states go under its log keys: what the same cursor's parts say of the same
    log, and the cursor stays in the form. A flush in flight is not in it (its state is not
    committed yet), as the parts answer as of the marker they adopted."""
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        slotted, logged = topic.cursor("slots"), topic.cursor("logged", CursorConfig(history_seconds=3600))
        cursors = [slotted, logged]
        _settle(store, cursors)
        forms = [cur._core.small for cur in cursors]
        usages = []
        for rnd in range(SETTLE, SETTLE + 3):
            for cur in cursors:
                _steady(cur, rnd)
            store.flush()
            usages.append([cur.log_usage() for cur in cursors])
            assert [cur._core.small for cur in cursors] == forms
        assert [u.records for u in usages[-1]] == [2, SETTLE + 3] and usages[-1][1].history_bytes > 0
        assert usages[-1][1].records == usages[-2][1].records + 1  # (the window keeps every state)
        write_job = GroupFlush._write
        in_flight: list[Any] = []

        def read_then_write(self: GroupFlush, job: FlushJob) -> int:
            reader = threading.Thread(target=lambda: in_flight.extend(cur.log_usage() for cur in cursors))
            reader.start()  # outside the store lock, before the transaction
            reader.join()
            return write_job(self, job)

        for cur in cursors:
            _steady(cur, SETTLE + 3)
        with monkeypatch.context() as m:
            m.setattr(GroupFlush, "_write", read_then_write)
            store.flush()
        assert in_flight == usages[-1]  # as of the state committed before it
        after = [cur.log_usage() for cur in cursors]
        assert after[1].records == in_flight[1].records + 1 and [cur._core.small for cur in cursors] == forms
        for cur in cursors:
            end_form(cur)
        assert [cur.log_usage() for cur in cursors] == after  # the parts' answer


def test_a_metrics_scrape_keeps_the_cursors_that_keep_history_in_the_form(tmp_path: Path) -> None:
    """A scrape counts each history cursor's kept bytes from its log once per flush of it:
    that read is the form's, so cursors with history stay in the form scrape after scrape."""
    from ackstore.metrics import AckStoreCollector

    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cursors = [topic.cursor(f"h{i}", CursorConfig(history_seconds=3600)) for i in range(3)]
        _settle(store, cursors)
        forms = [cur._core.small for cur in cursors]
        collector = AckStoreCollector(store)
        for rnd in range(SETTLE, SETTLE + 3):
            for cur in cursors:
                _steady(cur, rnd)
            store.flush()
            scraped = {
                s.labels["subscription"]: s.value
                for f in collector.collect()
                for s in f.samples
                if s.name == "ackstore_cursor_history_bytes"
            }
            assert [cur._core.small for cur in cursors] == forms
            assert scraped == {cur.name: cur.log_usage().history_bytes for cur in cursors}
            assert all(v > 0 for v in scraped.values())


def test_a_read_the_form_does_not_serve_ends_it_with_the_state_exact(tmp_path: Path) -> None:
    """A read the form does not serve (``stats``) ends it: the parts load the newest flushed
    state and take the acks since, and the snapshot the form gave before is theirs; the
    flush counters go on; the cursor stays out for one flush, then is back."""
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c")
        for rnd in range(6):
            _steady(cur, rnd)
            store.flush()
        _steady(cur, 6)
        cur.ack(Position(1, 200))  # one position: the form takes it too
        assert cur._core.small is not None and cur._core.small.dirty
        snap = cur.snapshot()  # served by the form
        assert cur._core.small is not None
        end_form(cur)
        assert cur._core.small is None and cur.snapshot() == snap
        md, ranges = _model_ranges(7)
        assert snap.mark_delete_position == Position(1, md)
        assert list(cur.ledger_ranges()) == [(1, [*ranges, (200, 200)])]
        assert cur.stats().flushes == 6 and cur._core._pending and cur._core._listed
        cur._check()
        store.flush()
        assert cur._core.small is None  # asked something else since its last flush
        _steady(cur, 7)
        store.flush()
        assert cur._core.small is not None
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        md, ranges = _model_ranges(8)
        assert cur.mark_delete_position == Position(1, md)
        assert list(cur.ledger_ranges()) == [(1, [*ranges, (200, 200)])]


def test_acks_past_the_cap_keep_the_form_and_a_rollover_keeps_it(tmp_path: Path) -> None:
    """More runs than PIP-299 persists keep the cursor in the form, whose flushes write the
    lowest of them (truncated) until they fit again; sealing the ledger and opening the next
    keeps it in the form, M moving on into the next ledger when the sealed one is acked
    whole; nothing is lost either way."""
    config = CursorConfig(max_unacked_ranges_to_persist=3)
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c", config)
        for e in range(SETTLE):
            cur.ack_entries(1, range(0, 3 + e))  # M at 4 after the last
            store.flush()
        assert cur._core.small is not None and cur._core.small.persist == 3
        for e in (7, 9, 11):
            cur.ack(Position(1, e))
        assert cur._core.small is not None and cur.ack_range_count == 3
        cur.ack(Position(1, 13))
        small = cur._core.small
        assert small is not None and cur.ack_range_count == 4
        cur._check()
        store.flush()
        assert cur._core.small is small and cur.figures()[:4] == (4, 3, 1, 1)  # truncated (ranges, persisted, over)
        assert small.dirty and cur._core._listed  # (what the cut left out waits, as the parts' cut ledger)
        cur.ack_entries(1, BitMap(range(5, 14)))
        store.flush()  # the whole state again, under the PIP-299 cap
        assert cur._core.small is small and cur.mark_delete_position == Position(1, 13)
        assert cur.figures()[:4] == (0, 0, 0, 0) and not small.dirty
        for e in range(SETTLE):
            cur.ack(Position(1, 15 + e))
            store.flush()
        assert cur._core.small is small
        topic.close_ledger(1, 20)
        topic.add_ledger(2)
        small = cur._core.small
        assert small is not None and small.spans == ((2, 20),)
        cur.ack_entries(1, BitMap([14, *range(16, 20)]))
        assert cur._core.small is small and (small.md_l, small.md_e, small.spans) == (2, -1, ())
        store.flush()
        assert cur.mark_delete_position == Position(2, -1)
        for e in range(SETTLE):
            cur.ack_entries(2, BitMap([0, 1, 5 + 2 * e]))
            store.flush()
        assert cur._core.small is small
        cur._check()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c", config)
        assert cur.mark_delete_position == Position(2, 1)
        assert list(cur.ledger_ranges()) == [(2, [(5, 5), (7, 7), (9, 9)])]


def test_a_write_that_fails_gives_the_forms_their_state_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush whose transaction fails leaves every form as before it (its state pending,
    listed again); the next flush writes it with the sequence the failed one took."""
    with AckStore.open(tmp_path / "s") as store:
        cursors = [_topic(store).cursor(f"c{i}") for i in range(3)]
        _settle(store, cursors)
        for cur in cursors:
            _steady(cur, SETTLE)

        def heads() -> list[tuple[int, int, int, int]]:
            return [(f.next_seq, f.slot, f.slots, f.flushes) for f in (c._core.small for c in cursors)]

        before = heads()

        def fail(self: FlushJob, txn: lmdb.Transaction) -> int:
            raise lmdb.DiskError("injected")

        with monkeypatch.context() as m:
            m.setattr(FlushJob, "write", fail)
            with pytest.raises(StoreError):
                store.flush()
        assert heads() == before
        assert all(c._core._pending and c._core._listed for c in cursors)
        assert store.flush().cursors == 3
        assert [c._core.small.next_seq for c in cursors] == [b[0] + 1 for b in before]
    with AckStore.open(tmp_path / "s") as store:
        md, ranges = _model_ranges(SETTLE + 1)
        for i in range(3):
            cur = store.topic(T).cursor(f"c{i}")
            assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]


@pytest.mark.parametrize("fails", [False, True], ids=["lands", "fails"])
def test_a_cursor_that_leaves_the_form_while_its_flush_is_in_flight_never_reuses_a_sequence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """The flush took the form's state (its sequence on) and, before its transaction, another
    thread's read ends the form (the parts load the state the store holds, the one before).
    The cursor's next flush writes a sequence past the one in flight, whether that write
    lands or fails, and the store reopens to the state."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])
        _steady(cur, SETTLE)
        in_flight = cur._core.small.next_seq
        write_job, write = GroupFlush._write, FlushJob.write

        def read_then_write(self: GroupFlush, job: FlushJob) -> int:
            reader = threading.Thread(target=end_form, args=(cur,))  # outside the store lock, before the transaction
            reader.start()
            reader.join()
            return write_job(self, job)

        def write_or_fail(self: FlushJob, txn: lmdb.Transaction) -> int:
            if fails:
                raise lmdb.DiskError("injected")
            return write(self, txn)

        with monkeypatch.context() as m:
            m.setattr(GroupFlush, "_write", read_then_write)
            m.setattr(FlushJob, "write", write_or_fail)
            if fails:
                with pytest.raises(StoreError):
                    store.flush()
            else:
                store.flush()
        assert cur._core.small is None and cur._core._chain.next_seq == in_flight + 1
        _steady(cur, SETTLE + 1)
        store.flush()
        log = store.storage.read(lambda txn: dict(txn.cursor(db=store.storage.log_db)))
        entries = [records.log_entry(k, v) for k, v in log.items()]
        seqs = [seq for cid, seq, _ in entries if cid == cur.cursor_id]
        assert len(seqs) == len(set(seqs)) and max(seqs) == in_flight + 1, seqs
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        md, ranges = _model_ranges(SETTLE + 2)
        assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]


def test_a_cursor_that_shrinks_into_the_form_leaves_nothing_under_its_log_keys(tmp_path: Path) -> None:
    """A cursor of many ranges (ledger records and markers under its log keys) whose holes
    are then acked takes the form only once its trims left nothing under its log keys (the
    form never trims): its log is then its two state slots, and stays so."""
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c")
        cur.ack_entries(1, BitMap(range(0, 2000, 2)))  # 1,000 ranges: the marker layout
        store.flush()
        cur.ack_entries(1, BitMap(range(1, 1990, 2)))  # the holes acked but the last few
        flushes = 0
        while cur._core.small is None:
            cur.ack(Position(1, 3000 + 2 * flushes))  # a change a flush
            store.flush()
            flushes += 1
            assert flushes <= 2 * SETTLE, "a small cursor did not take the form"
        for i in range(10):
            cur.ack(Position(1, 4000 + 2 * i))
            store.flush()
        log = store.storage.read(lambda txn: dict(txn.cursor(db=store.storage.log_db)))
        mine = [key for key, value in log.items() if records.log_entry(key, value)[0] == cur.cursor_id]
        assert len(mine) == 2 and all(records.split_slot_key(key) is not None for key in mine), mine
        assert cur.log_usage().records == 2  # the newest state, and the one before to fall back to


def test_a_writer_opens_a_steady_cursor_into_the_form(tmp_path: Path) -> None:
    """A cursor whose log is its two state slots, its state in the form, is opened into the
    form (its slots read and decoded; its parts loaded when first needed), by the bulk open
    and by one cursor's open; its state is the model's, and a read that ends the form loads
    the parts as recovery does (its report, the flushes since the open). A reader opens them
    into the form too; a damaged newest slot or a log under log keys is recovered."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cursors = [_topic(store).cursor(name) for name in ("a", "b", "props", "wide")]
        _settle(store, cursors)
        cursors[2].set_property("k", 1)
        cursors[3].ack_entries(1, BitMap(range(1000, 3000, 2)))  # 1,000 ranges: the marker layout
        store.flush()
    md, ranges = _model_ranges(SETTLE)
    shutil.copytree(path, tmp_path / "copy")
    for bulk in (True, False):
        with AckStore.open(path if bulk else tmp_path / "copy") as store:
            topic = store.topic(T)
            opened = (
                topic.open_cursors() if bulk else {name: topic.cursor(name) for name in ("a", "b", "props", "wide")}
            )
            assert [name for name, cur in sorted(opened.items()) if cur._core.small is not None] == ["a", "b", "props"]
            assert opened["props"].properties == {"k": 1} and opened["props"]._core._unbuilt
            cur = opened["a"]
            assert cur._core._unbuilt and cur.persisted and not cur._core._pending
            cur._check()
            assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]
            assert cur.is_acked(Position(1, ranges[0][0])) and not cur.is_acked(Position(1, md + 1))
            assert cur.read_position == Position(1, md + 1) and cur.ack_range_count == len(ranges)
            _steady(cur, SETTLE)
            store.flush()
            newest = cur._core.small.next_seq - 1
            snap = cur.snapshot()  # served by the form
            assert cur._core.small is not None
            st = cur.stats()  # served by the form: the open's report, the flush since
            assert (st.recovery.marker_seq, st.recovery.records_loaded, st.flushes) == (newest - 1, 1, 1)
            assert st.last_marker_seq == newest and cur._core.small is not None
            end_form(cur)  # not served: the parts, by recovery
            assert cur.stats().recovery == st.recovery and cur.stats().flushes == 1
            assert cur._core.small is None and not cur._core._unbuilt and cur.snapshot() == snap
            md2, ranges2 = _model_ranges(SETTLE + 1)
            assert snap.mark_delete_position == Position(1, md2) and list(cur.ledger_ranges()) == [(1, ranges2)]
            cur._check()
    with AckStore.open(path, readonly=True) as store:  # a reader opens into the form too, with the same answers
        opened = store.topic(T).open_cursors()
        assert [name for name, cur in sorted(opened.items()) if cur._core.small is not None] == ["a", "b", "props"]
        assert opened["props"].properties == {"k": 1}
        md3, ranges3 = _model_ranges(SETTLE + 1)
        cur = opened["a"]
        assert cur.mark_delete_position == Position(1, md3) and list(cur.ledger_ranges()) == [(1, ranges3)]
        assert cur._core.small is not None and cur._core._unbuilt  # answered by the form, no parts built
    with AckStore.open(path) as store:
        cid = store.topic(T).cursor("b").cursor_id
    damage(path, max(slots(path, cid).values()), cid)  # the newest state's record: its check fails
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("b")
        assert cur._core.small is None and cur.stats().recovery.markers_skipped == 1  # fell back to the slot before


def test_an_open_reads_the_slots_alike_from_the_file_and_from_records_a_page_scan_found(tmp_path: Path) -> None:
    """What an open reads of a cursor's log to take the form (``slot_values``): its two
    slots' values when its log is only those, None when it has records under log keys or
    nothing; the same from an LMDB transaction and from a ``MemoryLog`` of the same items."""
    from ackstore.storage.log import MemoryLog, slot_values

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cursors = [_topic(store).cursor(name) for name in ("a", "wide")]
        _settle(store, cursors)
        cursors[1].ack_entries(1, BitMap(range(1000, 3000, 2)))  # the marker layout: records under log keys
        store.flush()
        ids = [cur.cursor_id for cur in cursors]
        storage = store.storage
        items = storage.read(lambda txn: {bytes(k): bytes(v) for k, v in txn.cursor(db=storage.log_db)})
        for cid in (*ids, max(ids) + 1):
            read = storage.read(lambda txn: slot_values(txn, storage.log_db, cid))  # noqa: B023
            assert slot_values(MemoryLog(items), None, cid) == read
            if cid == ids[0]:
                assert read == (items.get(records.slot_key(cid, 0)), items.get(records.slot_key(cid, 1)))
                assert read[0] is not None and read[1] is not None
            else:
                assert read is None


def test_a_cursor_opened_into_the_form_builds_no_parts_until_asked(tmp_path: Path) -> None:
    """A cursor opened into the form has no parts until something the form does not serve
    asks for them: its acks, flushes, positions, ranges and figures (a metrics scrape) leave
    them unbuilt, and so do the reads the form answers (the read position, partial batches,
    a delivery count, the properties), the figures the same before and after; a read the
    form does not serve loads them, with the state exact."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        _settle(store, [_topic(store).cursor("a")])
    md, ranges = _model_ranges(SETTLE)
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("a")
        assert cur._core.small is not None and cur._core._unbuilt
        figures = dict(zip(CURSOR_FIGURES, cur.figures(), strict=True))
        budget = CursorConfig().max_individual_ack_cache_bytes
        assert figures == dict.fromkeys(CURSOR_FIGURES, 0) | {
            "ack_range_count": len(ranges), "persisted_ranges": len(ranges), "cache_budget": budget,
        }  # fmt: skip
        assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]
        assert cur.is_acked(Position(1, md)) and cur.ack_range_count == len(ranges) and cur.persisted
        _steady(cur, SETTLE)
        assert cur._core._pending
        store.flush()
        assert not cur._core._pending and cur._core._unbuilt and cur.figures()[CURSOR_FIGURES.index("flushes")] == 1
        before = cur.figures()
        md2, ranges2 = _model_ranges(SETTLE + 1)
        assert cur.read_position == Position(1, md2 + 1)
        assert cur.partial_batches() == {} and cur.delivery_count(Position(1, md2 + 1)) == 0
        assert cur.properties == {}
        assert cur._core._unbuilt and cur._core.small is not None  # the form answered: no parts built
        assert cur.figures() == before
        cur._check()
        snap = cur.snapshot()  # served by the form too
        assert cur._core._unbuilt and cur._core.small is not None
        end_form(cur)  # not served: the form ends, the parts load
        assert cur._core.small is None and not cur._core._unbuilt and cur.snapshot() == snap
        assert snap.mark_delete_position == Position(1, md2) and list(cur.ledger_ranges()) == [(1, ranges2)]
        cur._check()


def _reopened_at_39(path: Path) -> tuple[AckStore, Any, Any]:
    """A store whose cursor ``c`` flushed M = 1:39 from the small form, open again (not in a
    ``with``: the caller crashes it): the store, its topic and the cursor."""
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        for e in range(SETTLE):
            cur.ack_entries(1, range(0, 38 + e))
            store.flush()
        assert cur._core.small is not None and cur.mark_delete_position == Position(1, 39)
    store = AckStore.open(path)
    topic = store.topic(T)
    return store, topic, topic.cursor("c")


def test_a_state_past_its_ledgers_durable_bound_is_recovered_not_opened_into_the_form(tmp_path: Path) -> None:
    """The open ledger's bound went durable (the topic's first ``advance``) below the
    mark-delete position a cursor last flushed (it was reset since, not flushed; then a
    crash): the open does not take that state into the form, it recovers it, which clips
    it to the bound, as a reader's open does."""
    path = tmp_path / "s"
    store, topic, cur = _reopened_at_39(path)
    assert cur._core.small is not None  # opened into the form
    cur.read_path.reset_to(Position(1, 1))  # in memory only
    topic.advance(1, 0)  # durable at once: the bound is below the state the slot holds
    testing.crash(store)
    with AckStore.open(path, readonly=True) as reader:
        recovered = reader.topic(T).cursor("c").mark_delete_position
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is None and cur.mark_delete_position == recovered, (cur.mark_delete_position, recovered)


def test_a_mark_delete_past_its_ledgers_sealed_end_is_recovered_not_opened_into_the_form(tmp_path: Path) -> None:
    """The cursor's ledger was sealed below the mark-delete position it last flushed (it was
    reset since, not flushed), a ledger added after it, then a crash: the open does not take
    that state into the form, where M would move on into the next ledger at the same entry
    (acking entries of it no one acked); recovery clips M to the sealed end and moves it on
    across the empty ledger, for the writer and for a reader."""
    path = tmp_path / "s"
    store, topic, cur = _reopened_at_39(path)
    cur.read_path.reset_to(Position(1, 0))  # in memory only
    topic.close_ledger(1, 0)  # durable at once: M's ledger sealed below the state the slot holds
    topic.add_ledger(2)
    testing.crash(store)
    for readonly in (True, False):
        with AckStore.open(path, readonly=readonly) as store:
            cur = store.topic(T).cursor("c")
            assert cur.mark_delete_position == Position(2, -1) and not cur.is_acked(Position(2, 0)), readonly
            assert cur._core.small is None and list(cur.ack_ranges()) == []


# -- a broker's calls through a Dispatcher -----------------------------------------------------


async def _no_dead_letter(entry: Any, count: int) -> None:
    raise AssertionError("no entry is delivered max_deliveries times here")


def _broker_round(d: Any, cur: Any, nack: list[int], k: int) -> list[Position]:
    """A round as a broker runs it: what was negatively acked read again, ``k`` new entries
    read, the ``nack`` ones of those (by place) negatively acked, the rest acked in one list."""
    import asyncio

    async def reads() -> tuple[list[Position], list[Position]]:
        again = [e.position for e in await d.replay_read(10)]
        return again, [e.position for e in await d.read_more(k)]

    again, new = asyncio.run(reads())
    nacked = [new[i] for i in nack if i < len(new)]
    if nacked:
        d.redeliver(nacked)
    cur.ack([*again, *(p for p in new if p not in nacked)])
    return nacked


def test_a_brokers_calls_keep_a_cursor_in_the_form_with_its_counts_exact(tmp_path: Path) -> None:
    """Reads through a Dispatcher (delivery counts on), negative acks read again, a list of
    positions acked: every call is the form's, so after its first state flushes the cursor
    stays in it; its counts, read position and redeliveries are the ones the parts would
    hold; a reopen opens it into the form with its counts, and leaving the form (a
    read it does not serve) hands all of them to the parts."""
    from ackstore import Dispatcher
    from ackstore.testing import InMemoryLedgerReader

    config = CursorConfig(max_deliveries=5)
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        reader = InMemoryLedgerReader(topic)
        cur = topic.cursor("c", config)
        d = Dispatcher(cur, reader, dead_letter=_no_dead_letter)
        d.add_consumer("a")
        for rnd in range(8):
            reader.append(1, 10)
            nacked = _broker_round(d, cur, [3], 10)
            store.flush()
            assert nacked == [Position(1, 10 * rnd + 3)]
            assert cur.delivery_counts() == {nacked[0]: 1}, rnd
            assert cur.read_position == Position(1, 10 * rnd + 10)
            assert cur._core.small is not None, rnd
            cur._check()
        assert cur.mark_delete_position == Position(1, 72) and list(cur.ack_ranges()) == [
            (Position(1, 74), Position(1, 79))
        ]
        assert cur.figures()[-1] == 7  # the entries negatively acked and read again: delivered twice
        assert cur.delivery_count(Position(1, 73)) == 1 and cur.delivery_count(Position(1, 72)) == 0
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c", config)
        small = cur._core.small
        assert small is not None and small.counts() == [(73, 1)] and cur._core._unbuilt
        assert cur.delivery_counts() == {Position(1, 73): 1} and cur.read_position == Position(1, 73)
        cur.record_deliveries([Position(1, 73), Position(1, 80)])
        cur.read_path.move_read_position(Position(1, 81))
        assert cur._core.small is small  # served by the form
        snap = cur.snapshot()  # served by the form
        assert cur._core.small is small
        end_form(cur)  # not the form's: the parts take every count and the read position
        assert cur._core.small is None and cur.snapshot() == snap
        assert snap.delivery_counts == {Position(1, 73): 2, Position(1, 80): 1}
        assert cur.delivery_counts() == snap.delivery_counts and cur.read_position == Position(1, 81)
        assert cur.stats().redeliveries == 1
        cur._check()


def test_a_reset_is_the_forms_and_the_parts_take_its_state_exactly(tmp_path: Path) -> None:
    """A Dispatcher's reset and seek keep the cursor in the form, back past what it acked
    and forward past its holes: M just before the target, nothing above it acked or
    counted, reads from the target (what was acked after it is read again), the flush
    writes it and a reopen reads it. A reset into a batch is the parts' (the form holds no
    partial batch). When the form ends after a reset it did not flush, the parts hold
    exactly the form's state: the acks the reset dropped do not come back from the state
    flushed before it, nor does M."""
    from ackstore import Dispatcher
    from ackstore.testing import InMemoryLedgerReader

    config = CursorConfig(max_deliveries=5)
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = _topic(store)
        reader = InMemoryLedgerReader(topic)
        cur = topic.cursor("c", config)
        d = Dispatcher(cur, reader, dead_letter=_no_dead_letter)
        d.add_consumer("a")
        for _ in range(SETTLE + 2):
            reader.append(1, 10)
            _broker_round(d, cur, [3], 10)
            store.flush()
        small = cur._core.small
        assert small is not None and cur.mark_delete_position == Position(1, 42)  # (43 held, its count 1)
        assert cur.delivery_counts() == {Position(1, 43): 1}
        d.reset(Position(1, 20))  # back: 20.. read again, nothing above 19 acked or counted
        assert cur._core.small is small and small.dirty
        assert (cur.mark_delete_position, cur.read_position, list(cur.ack_ranges())) == (
            Position(1, 19),
            Position(1, 20),
            [],
        )
        assert cur.delivery_counts() == {} and cur.unacked_entries(1, 0, 50, 3) == [20, 21, 22]
        cur._check()
        store.flush()
        epoch = d.seek(Position(1, 45))  # forward, over the hole at 43: acked by the seek
        assert cur._core.small is small and epoch == 1 and cur.mark_delete_position == Position(1, 44)
        store.flush()
        reader.append(1, 10)
        _broker_round(d, cur, [], 5)  # 45..49 read and acked
        assert cur._core.small is small and cur.mark_delete_position == Position(1, 49)
        store.flush()
        d.reset(Position(1, 30))
        expect = (Position(1, 29), [], {})
        assert cur._core.small is small
        end_form(cur)  # a reset the form did not flush: the parts take it exactly
        assert cur._core.small is None
        assert (cur.mark_delete_position, list(cur.ack_ranges()), cur.delivery_counts()) == expect
        assert cur.read_position == Position(1, 30)
        cur._check()
        store.flush()
        d.reset(Position(1, 35), batch_index=2, batch_size=4)  # into a batch: the parts'
        assert cur.partial_batches() == {Position(1, 35): (4, frozenset({0, 1}))}
        d.reset(Position(1, 33))
        store.flush()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c", config)
        assert (cur.mark_delete_position, list(cur.ack_ranges()), cur.partial_batches()) == (Position(1, 32), [], {})
        assert cur.is_acked(Position(1, 32)) and not cur.is_acked(Position(1, 40))


def test_batch_index_acks_are_the_forms_and_the_parts_take_them_exactly(tmp_path: Path) -> None:
    """Acks of some messages of a batch entry keep the cursor in the form, as does a reset
    into a batch: the form records the partial batch as the parts do (``partial_batches``,
    ``batch_acked_indexes``), acks the entry once every index is (M moves over it), refuses
    another size with the parts' error and nothing changed, and its flush writes the batch
    in the state marker; the parts take it exactly when the form ends, and a reopen reads
    the state slot with it straight into the form."""
    from ackstore import InvalidArgumentError

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])  # M 12, 13 and 23 held
        small = cur._core.small
        cur.ack_batch_index(Position(1, 13), 4, [0, 1])
        cur.ack_batch_index(Position(1, 23), 2, [1])
        assert cur._core.small is small and small.nb == 2
        partial = {Position(1, 13): (4, frozenset({0, 1})), Position(1, 23): (2, frozenset({1}))}
        assert cur.partial_batches() == partial and cur.batch_acked_indexes(Position(1, 13)) == frozenset({0, 1})
        assert cur.batch_acked_indexes(Position(1, 14)) is None and not cur.is_acked(Position(1, 13))
        with pytest.raises(InvalidArgumentError, match="batch_size 8 does not match the 4 already recorded for 1:13"):
            cur.ack_batch_index(Position(1, 13), 8, [7])
        assert cur.partial_batches() == partial
        cur._check()
        store.flush()
        cur.ack_batch_index(Position(1, 13), 4, [2, 3])  # every index: 13 acked, M over 13..22
        assert cur.mark_delete_position == Position(1, 22) and cur._core.small is small
        assert cur.partial_batches() == {Position(1, 23): (2, frozenset({1}))}
        store.flush()
        snap = cur.snapshot()
        assert snap.partial_batches == cur.partial_batches()
        end_form(cur)  # the parts take the form's state: its partial batch too
        assert cur._core.small is None and cur.snapshot() == snap
        cur._check()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.snapshot() == snap and cur._core.small is not None  # (its slot, read into the form)
        for e in range(SETTLE):  # flushes in the form, the partial batch held
            cur.ack(Position(1, 40 + e))
            store.flush()
        assert cur._core.small is not None and cur.partial_batches() == {Position(1, 23): (2, frozenset({1}))}
        cur.read_path.reset_to(Position(1, 50), (2, 4))  # a reset into a batch: the form's too
        assert cur._core.small is not None
        assert cur.partial_batches() == {Position(1, 50): (4, frozenset({0, 1}))}
        assert cur.mark_delete_position == Position(1, 49)
        cur._check()
        store.flush()
    with AckStore.open(path) as store:  # the form's slot, read straight into the form
        cur = store.topic(T).cursor("c")
        assert cur._core.small is not None and cur._core.small.nb == 1
        assert cur.partial_batches() == {Position(1, 50): (4, frozenset({0, 1}))}
        assert cur.mark_delete_position == Position(1, 49) and list(cur.ack_ranges()) == []


def test_a_cursor_acking_batch_indexes_every_round_takes_the_form(tmp_path: Path) -> None:
    """A consumer of batched messages: each round it acks what it read and some messages of
    one batch entry (the rest of it the round after). Those calls are the form's, and the
    parts' too without ending the cursor's chance of it: after its first flush the
    cursor is in the form, and stays there."""
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c")
        for rnd in range(2 * SETTLE):
            e = 10 * rnd
            cur.ack([Position(1, x) for x in range(e, e + 9)])
            cur.ack_batch_index(Position(1, e + 9), 4, [0, 1])
            if rnd:
                cur.ack_batch_index(Position(1, e - 1), 4, [2, 3])
            store.flush()
            assert cur._core.small is not None, rnd
        assert cur.mark_delete_position == Position(1, 10 * rnd + 8)
        assert cur.partial_batches() == {Position(1, 10 * rnd + 9): (4, frozenset({0, 1}))}


def test_a_config_change_the_form_holds_the_same_under_keeps_the_cursor_in_it(tmp_path: Path) -> None:
    """``update_config`` of what the form does not hold (the cache budget, the full-marker
    period) keeps the cursor in the form, persisted at once; the parts built later run
    with it. So does a cap on ranges (PIP-299), whether its runs fit under it or not: its
    flushes persist the lowest ranges up to it from then on, in the form; history turned on
    ends the form first."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])
        small = cur._core.small
        cur.update_config(max_individual_ack_cache_bytes=1 << 20, full_marker_every=9)
        assert cur._core.small is small and not small.dirty and store.flush().cursors == 0
        end_form(cur)
        assert cur._core._pages.cache.budget == 1 << 20 and cur._core._planner.full_every == 9
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.config.max_individual_ack_cache_bytes == 1 << 20 and cur._core.small is not None
        for name in ("lowered", "outgrown"):
            other = store.topic(T).cursor(name)
            other.ack([Position(1, e) for e in range(60, 67, 2)])  # 4 ranges
            store.flush()
            small = other._core.small
            other.update_config(max_unacked_ranges_to_persist=4)  # the runs fit the new cap: the form stays
            assert other._core.small is small and small.persist == 4 and other.config.max_unacked_ranges_to_persist == 4
            if name == "lowered":
                other.update_config(max_unacked_ranges_to_persist=3)  # they do not: the form stays too
                assert other._core.small is small and other.ack_range_count == 4
                assert store.flush().cursors == 0  # nothing changed: the flushed state holds
                other.ack(Position(1, 70))  # the next flush persists the lowest 3 of 5
            else:
                other.ack(Position(1, 68))  # a fifth range: the form's flush persists the lowest 4
                assert other._core.small is small and other.ack_range_count == 5
            store.flush()
            assert other._core.small is small and other.stats().truncated
            assert other.stats().persisted_ranges == (3 if name == "lowered" else 4)
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c", CursorConfig())
        assert cur._core.small is not None
        cur.update_config(history_seconds=60)  # its states go under log keys from now on: the form ends
        assert cur._core.small is None


def test_sealing_a_ledger_below_a_partial_batch_in_the_form_is_refused(tmp_path: Path) -> None:
    """A partial batch holds state in its entry, as the parts count it: sealing M's ledger
    below it is refused with the parts' error, and nothing changes."""
    from ackstore import LedgerStateError

    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        _settle(store, [cur])
        cur.ack_batch_index(Position(1, 35), 4, [1])
        assert cur._core.small is not None
        with pytest.raises(LedgerStateError, match="cursor 'c' has acknowledged or delivered entry 1:35"):
            topic.close_ledger(1, 35)
        topic.close_ledger(1, 36)
        assert cur.partial_batches() == {Position(1, 35): (4, frozenset({1}))}


def _slots(store: AckStore, cid: int) -> dict[int, int]:
    """``{slot: seq}`` of cursor ``cid``'s state slots that hold a state, read by the store."""
    found, _, _ = store.storage.read(lambda txn: read_slots(txn, store.storage.log_db, cid))
    return {slot: seq for seq, _, slot in found}


def _log_keys(store: AckStore, cid: int) -> list[int]:
    """The sequences of cursor ``cid``'s records under log keys, ascending."""

    def read(txn: Any) -> list[int]:
        lo, hi = records.log_bounds(cid)
        return [records.split_log_key(bytes(k))[1] for k, _ in txn.cursor(db=store.storage.log_db) if lo <= k < hi]

    return store.storage.read(read)


def test_a_form_over_the_slot_bound_writes_a_chain_of_its_own_and_comes_back_to_the_slots(
    tmp_path: Path, form_chains: None
) -> None:
    """At the state layout's real bounds: ranges far apart cost a state marker a few bytes
    each, so a form can hold fewer ranges than a slot takes and still more bytes. The flush
    that finds it writes M's ledger's record with the parts' codec (a stride: a few bytes)
    and a full marker naming it; the flushes after it write markers of the acks since (tens
    of bytes, not the state again), trimming what lies below the full marker before; more
    acks since the record than a marker names, and a new record trims the chain before the
    one it falls back to. A reopen reads every range back, and the form adopts its parts'
    chain; once the ranges are acked the state goes back to the slots, and the second state
    there trims every log key."""
    from ackstore.cursor import lane

    many = lane.STATE_MAX_RUNS - 12  # within the run bound ...
    positions = [Position(1, 1000 + (1 << 16) * i) for i in range(many)]  # ... ~4 bytes a range: over the byte bound
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])
        held = cur.ack_range_count  # (the steady rounds' own, below every one of these)
        cur.ack(positions)
        assert cur._core.small is not None and cur.ack_range_count == held + many
        stats = store.flush()
        small = cur._core.small
        assert stats.cursors == 1 and small is not None and small.base == small.marker == small.next_seq - 1
        assert stats.bytes_written < 300 and _log_keys(store, cur.cursor_id) == [small.record, small.base]
        records_seen = {small.record}
        most = 0
        for i in range(3 * lane.DELTA_MAX_ACKS):  # one ack a flush between the far ranges: a marker each
            cur.ack(Position(1, 1000 + (1 << 16) * (i % (many - 1)) + 7 + i // (many - 1)))
            stats = store.flush()
            assert cur._core.small is small and small.record >= 0
            assert stats.bytes_written < (80 + 4 * lane.DELTA_MAX_ACKS if small.record in records_seen else 300)
            records_seen.add(small.record)
            keys = _log_keys(store, cur.cursor_id)
            most = max(most, len(keys))
            assert small.record in keys and small.base in keys and keys[-1] == small.next_seq - 1
        assert len(records_seen) >= 3 and most <= 16  # (new records; a few keys at a time: trimmed as it goes)
        cur._check()
        ranges = list(cur.ack_ranges())
    with AckStore.open(tmp_path / "s") as store:  # recovered by the parts, then the form again
        cur = store.topic(T).cursor("c")
        assert list(cur.ack_ranges()) == ranges
        for k in range(2):  # a full marker of its parts (acks since their record in it), then the form
            if cur._core.small is not None:
                break
            cur.ack(Position(1, 1000 + (1 << 16) * k + 3))
            store.flush()
        small = cur._core.small
        assert small is not None and small.base >= 0 and small.record >= 0  # (its parts' chain, adopted)
        assert small.named > 0 or small.record == small.base - 1  # (the acks since the record it names, if any)
        for i in range(8):
            cur.ack(Position(1, 3000 + (1 << 16) * i))
            stats = store.flush()
            assert cur._core.small is small and stats.bytes_written < 300  # (a marker, or a new record)
        ranges = list(cur.ack_ranges())
        cur._check()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert list(cur.ack_ranges()) == ranges
        cur.ack_cumulative(positions[-1])
        for i in range(SETTLE):  # a steady consumer's flushes: in the slots again, its log keys trimmed
            store.flush()
            cur.ack(Position(1, positions[-1].entry + 1 + i))
        store.flush()
        assert cur._core.small is not None and cur._core.small.base == -1 and cur.ack_range_count == 0
        assert _log_keys(store, cur.cursor_id) == []
        cur._check()


@pytest.mark.parametrize("over", ["counts", "bytes", "bytes, chains"])
def test_a_form_whose_state_the_layout_does_not_take_is_written_by_its_parts(
    tmp_path: Path, over: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form holds more delivery counts than a state marker takes, or a state of more
    bytes (entries handed out and not acked yet: a broker reads ahead); the flush that finds
    it hands the cursor to its parts, which write it in that same flush (unless the form
    keeps a chain of its own, ``set_form_chains``, which a state of more bytes in M's
    ledger takes: M's ledger's record and a full marker): nothing is lost, and once the
    counts are few again the cursor is back in the form."""
    from ackstore.cursor import lane

    many, step, bound = lane.STATE_MAX_EXTRAS + 1, 1, lane.STATE_MAX_BYTES
    if over.startswith("bytes"):  # (a state marker's bound, lowered for the form's check: 20 spread counts pass it)
        monkeypatch.setattr(lane, "STATE_MAX_BYTES", 60)
        many, step = 20, 1 << 20
    monkeypatch.setattr(small_form, "_CHAINS", [int(over.endswith("chains"))])
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c")
        _settle(store, [cur])
        positions = [Position(1, 1000 + step * i) for i in range(many)]  # above every ack
        cur.record_deliveries(positions)
        assert cur._core.small is not None and cur._core.small.nc == many
        stats = store.flush()
        if over.endswith("chains"):  # its own chain: the ledger's record, a full marker naming it
            small = cur._core.small
            assert stats.cursors == 1 and small is not None and small.record == small.base - 1 >= 0
        else:
            assert stats.cursors == 1 and cur._core.small is None  # its parts wrote it
        cur._check()
    monkeypatch.setattr(lane, "STATE_MAX_BYTES", bound)
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert cur.delivery_counts() == dict.fromkeys(positions, 1)
        cur.ack(positions)
        for i in range(SETTLE):
            store.flush()
            cur.ack(Position(1, 999 - i))
        store.flush()
        assert cur._core.small is not None and cur.delivery_counts() == {}


def _entries_kinds(entries: list[int]) -> list[tuple[str, Any]]:
    """``entries`` as every kind ``ack_entries`` takes (each call a fresh object: an
    iterator is read once)."""
    import numpy as np

    kinds: list[tuple[str, Any]] = [
        ("bitmap", lambda: BitMap(entries)),
        ("list", lambda: list(entries)),
        ("tuple", lambda: tuple(entries)),
        ("array", lambda: array("I", entries)),
        ("signed array", lambda: array("q", entries)),
        ("ndarray", lambda: np.array(entries, dtype=np.int64)),
        ("iterator", lambda: iter(entries)),
    ]
    if entries and entries == list(
        range(entries[0], entries[-1] + 1, max(1, entries[1] - entries[0]) if len(entries) > 1 else 1)
    ):
        step = entries[1] - entries[0] if len(entries) > 1 else 1
        kinds.append(("range", lambda: range(entries[0], entries[-1] + 1, step)))
    return kinds


@pytest.mark.parametrize("ledger", [1, 2], ids=["M's ledger", "the next ledger"])
@pytest.mark.parametrize(
    "entries",
    [[3, 5, 9], list(range(10, 40)), list(range(10, 40, 3)), [], list(range(0, 40_000, 2))],
    ids=["few", "a run", "stepped", "none", "more runs than the form holds"],
)
def test_ack_entries_of_every_kind_keeps_the_form(tmp_path: Path, ledger: int, entries: list[int]) -> None:
    """``ack_entries`` of any kind of entries (a BitMap, list, tuple, array, ndarray,
    iterator, range) of M's ledger or the next one on the form's line: the form takes them
    and stays (more runs than it holds, 20,000 past the pure twin's cap: the parts take them),
    and the state is the one the
    parts make of the same call, before and after a flush and a reopen."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        topic.add_ledgers([(1, 50_000), (2, None)])
        topic.advance(2, 50_000)
        for kind, make in _entries_kinds(entries):
            config = CursorConfig(max_unacked_ranges_to_persist=0)  # (every range persisted: a reopen holds them)
            form, parts = topic.cursor(f"form {kind}", config), topic.cursor(f"parts {kind}", config)
            for cur in (form, parts):
                cur.ack(Position(1, 7))
            store.flush()
            end_form(parts)
            assert form._core.small is not None, kind
            form.ack_entries(ledger, make())
            parts.ack_entries(ledger, make())
            assert (form._core.small is not None) == (len(entries) < small_form._cap(config)), kind
            assert form.snapshot() == parts.snapshot(), kind
            assert [form.is_acked(Position(ledger, e)) for e in entries] == [True] * len(entries), kind
            form._check()
            store.flush()
            assert form.snapshot() == parts.snapshot(), kind
        kept = {name: topic.cursor(name).snapshot() for name in topic.cursors()}
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        assert {name: topic.cursor(name).snapshot() for name in topic.cursors()} == kept


@pytest.mark.parametrize(
    "entries,error,says",
    [
        (["3"], InvalidTypeError, "entry must be an int, got '3' (str)"),
        ([3, True], InvalidTypeError, "entry must be an int, got True (bool)"),
        ([3, -1], InvalidArgumentError, "1:-1"),
        (array("d", [3.0]), InvalidTypeError, "typecode 'd'"),
        (None, InvalidTypeError, "an iterable of ints, got None"),
        ([3, 10_000], InvalidArgumentError, "outside ledger 1"),
        ("iterator", InvalidArgumentError, "1:1099511627776"),
    ],
    ids=["a str", "a bool", "negative", "floats", "not iterable", "past the sealed end", "past 32 bits"],
)
def test_ack_entries_refused_alike_in_and_out_of_the_form(
    tmp_path: Path, entries: Any, error: type[Exception], says: str
) -> None:
    """Entries ``ack_entries`` refuses get the same typed error from a cursor in the form and
    one on its parts, naming the value, and change neither (the form ends: the parts check)."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        topic.add_ledgers([(1, 10_000), (2, None)])
        form, parts = topic.cursor("form"), topic.cursor("parts")
        for cur in (form, parts):
            cur.ack(Position(1, 7))
        store.flush()
        end_form(parts)
        before = form.snapshot()
        said = []
        for cur in (form, parts):
            with pytest.raises(error) as caught:
                cur.ack_entries(1, iter([3, 2**40]) if entries == "iterator" else entries)
            said.append(str(caught.value))
            assert cur.snapshot() == before
        assert said[0] == said[1] and says in said[0], said


def test_unacked_entries_of_another_ledger_are_the_forms_answer_and_the_parts(tmp_path: Path) -> None:
    """A cursor opened into the form (its parts not built) asked for the unacked entries of a
    ledger other than M's: the form answers (the ledger before M's is wholly acked), and the
    parts, loaded when the form ends, answer the same."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 10)
        topic.add_ledger(2)
        cur = topic.cursor("c")
        cur.ack_entries(1, range(10))
        cur.ack_entries(2, BitMap([3, 5]))
        for _ in range(SETTLE):
            store.flush()
            cur.ack(Position(2, 7))
        store.flush()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is not None and cur._core._unbuilt
        assert cur.unacked_entries(2, 0, 10, 10) == [0, 1, 2, 4, 6, 8, 9]
        assert cur._core.small is not None  # M's ledger: the form's
        assert cur.unacked_entries(1, 0, 10, 10) == []
        assert cur._core.small is not None
        cur.ack_entries(2, [8])
        assert cur._core.small is not None
        end_form(cur)  # (the parts load the flushed state and take the ack since)
        assert cur._core.small is None
        assert cur.unacked_entries(1, 0, 10, 10) == []
        assert cur.unacked_entries(2, 0, 10, 10) == [0, 1, 2, 4, 6, 9]
        cur._check()


def test_one_position_acks_in_the_form_past_its_cap_hand_the_state_to_the_parts(tmp_path: Path) -> None:
    """One position at a time (compiled where it was built, once the form changed since its
    flush): acks that take the form past its cap (lowered here to three runs) hand the
    state to the parts with every ack in it, and the cursor stays listed for the flush."""
    config = CursorConfig(max_unacked_ranges_to_persist=3)
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c", config)
        for e in range(SETTLE):
            cur.ack_entries(1, range(0, 3 + e))
            store.flush()
        assert cur._core.small is not None
        cur._core.small.cap = 3  # (the form's own bound, as a state slot's runs bound it)
        for e in (10, 12, 14):
            cur.ack(Position(1, e))
            assert cur._core.small is not None and cur._core._listed
            cur._check()
        cur.ack(Position(1, 16))  # a fourth range: over the cap
        assert cur._core.small is None and cur._core._listed
        cur._check()
        assert list(cur.ack_ranges()) == [(Position(1, e), Position(1, e)) for e in (10, 12, 14, 16)]
        store.flush()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c", config)
        assert cur.ack_range_count == 3  # PIP-299 persisted the lowest three


def test_a_cursor_opened_after_a_rollover_takes_the_form_with_its_mark_delete_moved_on(tmp_path: Path) -> None:
    """A cursor whose newest state has M at its ledger's last entry, opened after that
    ledger was sealed and the next added (a crash between the rollover and the next flush):
    it opens into the form with M moved on into the next ledger, as a recovery of its parts
    moves it, and the next flush writes that."""
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        for e in range(SETTLE + 1):
            cur.ack_entries(1, range(0, 10 * (e + 1)))
            store.flush()
        assert cur._core.small is not None and cur.mark_delete_position == Position(1, 39)
        topic.close_ledger(1, 40)
        topic.add_ledger(2)
        testing.crash(store)
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is not None and cur.mark_delete_position == Position(2, -1)
        assert cur.read_position == Position(2, 0) and cur.dirty
        cur._check()
        store.flush()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(2, -1) and list(cur.ledger_ranges()) == []


def test_a_cumulative_consumer_stays_in_the_form_across_rollovers(tmp_path: Path) -> None:
    """A consumer that acks cumulatively what it read, through ledger rollovers (one entry
    of the sealed ledger still owed when the next is added), stays in the form; its state is
    the one the acks make, and a reopen holds it."""
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        for e in range(SETTLE):
            cur.ack_cumulative(Position(1, 10 * e + 9))
            store.flush()
        small = cur._core.small
        assert small is not None
        cur.ack_entries(1, BitMap(range(31, 40)))  # entry 30 still owed
        topic.close_ledger(1, 40)
        topic.add_ledger(2)
        cur.ack(Position(2, 0))
        cur.ack_cumulative((2, -1))  # the sealed ledger acked whole: M moves on into ledger 2
        assert cur._core.small is small and cur.mark_delete_position == Position(2, 0)
        cur.ack_cumulative(Position(1, 5))  # behind M: nothing
        cur.ack_cumulative(Position(2, 4))
        store.flush()
        assert cur._core.small is small and cur.mark_delete_position == Position(2, 4)
        cur._check()
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(2, 4) and cur._core.small is not None


def _hold_across_rollovers(store: AckStore) -> Any:
    """A cursor of ledgers of 20 entries, 10 acked a round and each round flushed, entry
    (1, 3) held back across four rollovers: ledgers 1-4 sealed, 5 open with 0-9 acked."""
    topic = _topic(store)
    cur = topic.cursor("c")
    for rnd in range(9):
        ledger, first = 1 + rnd // 2, 10 * (rnd % 2)
        if rnd and not first:
            topic.close_ledger(ledger - 1, 20)
            topic.add_ledger(ledger)
        cur.ack([Position(ledger, e) for e in range(first, first + 10) if (ledger, e) != (1, 3)])
        store.flush()
    return cur


def test_a_hole_held_across_rollovers_keeps_the_cursor_in_the_form(tmp_path: Path) -> None:
    """A subscription that still owes one entry of ledger 1 while its topic rolls over four
    times stays in the small form: its line spans the ledgers since, and what it answers
    (ranges, delivery counts, the read position, a snapshot) is what its parts answer once
    the form ends; the held entry acked, M moves on across every ledger acked whole into
    the newest; a reopen opens it into the form with the same state."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _hold_across_rollovers(store)
        cur.record_deliveries([Position(1, 3), Position(5, 12)])
        cur.read_path.move_read_position(Position(5, 12))
        small = cur._core.small
        assert small is not None and [ledger for ledger, _ in small.spans] == [2, 3, 4, 5]
        expect = [(1, [(4, 19)]), (2, [(0, 19)]), (3, [(0, 19)]), (4, [(0, 19)]), (5, [(0, 9)])]
        assert list(cur.ledger_ranges()) == expect and cur.ack_range_count == 5
        assert cur.mark_delete_position == Position(1, 2) and cur.read_position == Position(5, 12)
        assert cur.delivery_counts() == {Position(1, 3): 1, Position(5, 12): 1}
        assert cur.is_acked(Position(4, 19)) and not cur.is_acked(Position(5, 10)) and not cur.is_acked(Position(1, 3))
        snap = cur.snapshot()
        cur._check()
        store.flush()
        end_form(cur)  # the form ends: the parts, from the flushed state and what changed since
        assert cur._core.small is None and cur.snapshot() == snap and list(cur.ledger_ranges()) == expect
        assert cur.read_position == Position(5, 12)
        for e in range(SETTLE):  # back into the form (the parts' state, on its line)
            cur.ack(Position(5, 14 + e))
            store.flush()
        small = cur._core.small
        assert small is not None and len(small.spans) == 4 and cur.read_position == Position(5, 12)
        cur.ack(Position(1, 3))
        assert cur.mark_delete_position == Position(5, 9) and cur._core.small is small and small.spans == ()
        held = [(5, [(14, 13 + SETTLE)])]
        assert list(cur.ledger_ranges()) == held and cur.delivery_counts() == {Position(5, 12): 1}
        cur._check()
        store.flush()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is not None and cur.mark_delete_position == Position(5, 9)
        assert list(cur.ledger_ranges()) == held and cur.delivery_counts() == {Position(5, 12): 1}


@pytest.mark.parametrize("sealed", [False, True], ids=["open", "sealed"])
def test_a_cursor_made_before_its_topics_first_ledger_takes_the_form_at_its_first_flush(
    tmp_path: Path, sealed: bool
) -> None:
    """A cursor made while its topic has no ledger is not in the small form (it has no
    position in a ledger); the topic's first ledgers (added, and sealed) are changes the form
    follows, so its first flush writes its state whole into a slot and it takes the form."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        topic.add_ledger(1)
        cur.ack([Position(1, 0), Position(1, 2)])
        if sealed:
            topic.close_ledger(1, 4)
            topic.add_ledger(2)
            cur.ack([Position(2, 1)])
        assert cur._core.small is None
        store.flush()
        assert cur._core.small is not None
        want = [(1, [(2, 2)]), (2, [(1, 1)])] if sealed else [(1, [(2, 2)])]
        assert list(cur.ledger_ranges()) == want and cur.mark_delete_position == Position(1, 0)
        cur._check()


def test_the_line_spans_at_most_span_most_ledgers(tmp_path: Path) -> None:
    """``bound_of`` spans the sealed ledgers after M's, each at the entries before it, up
    to ``SPAN_MOST`` of them: the form's entries end with the last one spanned (an ack past
    it is the parts'); a ledger with no entries is spanned at the next one's offset."""
    from ackstore.cursor.small_span import bound_of
    from ackstore.position import MAX_ENTRY

    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        for ledger in range(1, SPAN_MOST + 4):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 0 if ledger == 3 else 2)
        topic.add_ledger(SPAN_MOST + 4)
        d = topic.directory
        spans, limit = bound_of(d, 1)  # type: ignore[misc]
        assert len(spans) == SPAN_MOST and spans[:3] == ((2, 2), (3, 4), (4, 4))
        assert spans[-1] == (SPAN_MOST + 1, 2 * SPAN_MOST - 2) and limit == 2 * SPAN_MOST - 1
        assert bound_of(d, SPAN_MOST + 4) == ((), MAX_ENTRY) and bound_of(d, SPAN_MOST + 9) is None
        spans, limit = bound_of(d, SPAN_MOST + 2)  # type: ignore[misc]
        assert spans == ((SPAN_MOST + 3, 2), (SPAN_MOST + 4, 4)) and limit == MAX_ENTRY  # (the open one's bound)


def test_a_hole_held_across_span_most_rollovers_stays_in_the_form_and_leaves_it_after(tmp_path: Path) -> None:
    """A subscription that owes entry (1, 1) while its topic rolls over ``SPAN_MOST`` times
    (every ledger after it acked whole, a delivery count in some) stays in the small form,
    written whole into a state slot each flush, and reopens into it with the same state; an
    ack in the ledger after the line's last is its parts', which hold the same state and
    more; acking the held entry moves M on across every ledger acked whole."""
    path = tmp_path / "s"
    held: dict[int, list[tuple[int, int]]] = {1: [(2, 2)]}
    with AckStore.open(path) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        cur.ack([Position(1, 0), Position(1, 2)])
        topic.close_ledger(1, 3)
        for ledger in range(2, SPAN_MOST + 2):
            topic.add_ledger(ledger)
            entries = [Position(ledger, e) for e in range(3)]
            if ledger % 50 == 0:  # (a delivery counted and the entry acked later: its count goes)
                cur.record_deliveries(entries[:1])
            cur.ack(entries)
            topic.close_ledger(ledger, 3)
            held[ledger] = [(0, 2)]
            if ledger % 7 == 0:
                store.flush()
                assert cur._core.small is not None, ledger
        store.flush()
        small = cur._core.small
        assert small is not None and len(small.spans) == SPAN_MOST
        assert list(cur.ledger_ranges()) == list(held.items()) and cur.delivery_counts() == {}
        assert cur.mark_delete_position == Position(1, 0)
        assert len(_cursor_keys(store, cur.cursor_id)[0]) == 0  # (its state in a slot: no log key)
    with AckStore.open(path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        small = cur._core.small
        assert small is not None and [ledger for ledger, _ in small.spans] == list(range(2, SPAN_MOST + 2))
        assert list(cur.ledger_ranges()) == list(held.items()) and cur.mark_delete_position == Position(1, 0)
        topic.add_ledger(SPAN_MOST + 2)
        cur.ack([Position(SPAN_MOST + 2, 1)])  # (past the line: the parts')
        held[SPAN_MOST + 2] = [(1, 1)]
        assert cur._core.small is None and list(cur.ledger_ranges()) == list(held.items())
        store.flush()
        cur.ack([Position(1, 1), Position(SPAN_MOST + 2, 0)])
        assert cur.mark_delete_position == Position(SPAN_MOST + 2, 1) and list(cur.ledger_ranges()) == []
        store.flush()
        cur._check()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(SPAN_MOST + 2, 1) and list(cur.ledger_ranges()) == []


@pytest.mark.parametrize("hop", [False, True], ids=["at-the-end", "over-acks-to-the-end"])
def test_a_read_through_the_lines_last_ledger_stands_at_the_next_ones_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hop: bool
) -> None:
    """The form's line stops at ``SPAN_MOST`` ledgers after M's (lowered to 2 here) while the
    topic holds more: a sequential read through the end of the line's last ledger (or up to
    a run of acks reaching it) stands at the next ledger's first entry, as the parts' read
    position does (a sealed ledger's end is the next one's first), not at the end of the
    line; reads go on from there."""
    from ackstore.cursor import small_span

    monkeypatch.setattr(small_span, "SPAN_MOST", 2)
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c")  # (holds (1, 0): M stays in ledger 1)
        cur.ack([Position(1, 1), Position(1, 2)])
        for ledger in (1, 2, 3):
            topic.close_ledger(ledger, 3)
            topic.add_ledger(ledger + 1)
        cur.ack([Position(2, e) for e in range(3)] + ([Position(3, 1), Position(3, 2)] if hop else []))
        store.flush()
        small = cur._core.small
        assert small is not None and [ledger for ledger, _ in small.spans] == [2, 3]
        cur.read_path.move_read_position(Position(3, 1 if hop else 3))
        assert cur.read_position == Position(4, 0)
        cur.read_path.move_read_position(Position(4, 2))
        assert cur.read_position == Position(4, 2) and cur.mark_delete_position == Position(1, -1)
        cur._check()


def test_a_trim_past_the_lines_last_ledger_resets_the_form_to_the_first_ledger_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention trims every ledger the form's line holds (its line stops at ``SPAN_MOST``
    ledgers after M's, lowered to 2 here, while the topic holds more): the form is reset to
    the first ledger left, before its first entry, as the parts' reconcile moves M, and its
    next flush writes that state whole."""
    from ackstore.cursor import small_span

    monkeypatch.setattr(small_span, "SPAN_MOST", 2)
    with AckStore.open(tmp_path / "s") as store:
        topic = _topic(store)
        cur = topic.cursor("c")  # (holds (1, 0): M stays in ledger 1)
        cur.ack([Position(1, 1), Position(1, 2)])
        for ledger in (1, 2, 3, 4):
            topic.close_ledger(ledger, 3)
            topic.add_ledger(ledger + 1)
        cur.ack([Position(2, 1)])
        store.flush()
        small = cur._core.small
        assert small is not None and [ledger for ledger, _ in small.spans] == [2, 3]
        topic.trim_ledgers(5)
        assert cur.mark_delete_position == Position(5, -1) and list(cur.ack_ranges()) == []
        assert cur._core.small is small
        cur._check()
        store.flush()
    with AckStore.open(tmp_path / "s") as store:
        assert _topic(store).cursor("c").mark_delete_position == Position(5, -1)


@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
def test_a_cursor_holding_entries_across_rollovers_opens_into_the_form(tmp_path: Path, readonly: bool) -> None:
    """A state slot holding entries of several ledgers of the form's line opens straight into
    the form (a writer's open and a reader's), bounded by the directory, with the state the
    writer flushed."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _hold_across_rollovers(store)
        cur.record_deliveries([Position(5, 12)])
        store.flush()
        assert cur._core.small is not None
        expect = list(cur.ledger_ranges())
    with AckStore.open(path, readonly=readonly) as store:
        cur = store.topic(T).cursor("c")
        small = cur._core.small
        assert small is not None and [ledger for ledger, _ in small.spans] == [2, 3, 4, 5]
        assert list(cur.ledger_ranges()) == expect and cur.mark_delete_position == Position(1, 2)
        assert cur.delivery_counts() == {Position(5, 12): 1} and cur.ack_range_count == 5
        held = {ledger for ledger, _ in expect} | {5}  # (ledger 5: the delivery count)
        report = cur.stats().recovery  # the ledgers its state marker names, all decoded at open
        assert (report.records_loaded, report.markers_skipped) == (len(held), 0) and len(held) > 1
        cur._check()


def _cursor_keys(store: AckStore, cid: int) -> tuple[list[int], list[int]]:
    """A cursor's sequences under its log keys, and its state slots' numbers."""
    log = store.storage.read(lambda txn: dict(txn.cursor(db=store.storage.log_db)))
    seqs, slots = [], []
    for key, value in log.items():
        slot = records.split_slot_key(key)
        if records.log_entry(key, value)[0] == cid:
            (seqs if slot is None else slots).append(records.log_entry(key, value)[1] if slot is None else slot[1])
    return sorted(seqs), sorted(slots)


def _wide_form(store: AckStore, cur: Any) -> None:
    """``cur`` holding 1,000 ranges (over a slot's bound), flushed until it takes the form:
    a form whose state is in a chain of its own."""
    cur.ack_entries(1, BitMap(range(1000, 3000, 2)))
    for i in range(4 * SETTLE):
        store.flush()
        if cur._core.small is not None:
            break
        cur.ack(Position(1, 5000 + 2 * i))
    assert cur._core.small is not None and cur._core.small.base >= 0


def _states(cursors: list[Any]) -> list[Any]:
    return [(c.mark_delete_position, list(c.ack_ranges()), c.properties) for c in cursors]


@pytest.mark.parametrize("verify", [False, True], ids=["plain", "verify"])
def test_compaction_writes_each_forms_state_whole_and_keeps_it_in_the_form(tmp_path: Path, verify: bool) -> None:
    """Compaction of cursors in the small form: each writes its whole state from memory (the
    acks and properties since its last flush too) as a flush writes a state whole, a steady
    one into a state slot and one of 1,000 ranges as a base of its own chain (a record of
    its ledger and a full marker), and everything of its log below goes (its other slot
    too). Each stays in the form; its next flush is a steady one's, and a reopen gives back
    the state compaction wrote. With ``verify`` (a repair's) too: each form's new log is
    read back and compared with the form before the compaction commits."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cursors = [_topic(store).cursor(name) for name in ("a", "b", "wide")]
        _settle(store, cursors[:2])
        _wide_form(store, cursors[2])
        for i in range(2):  # markers of its chain
            cursors[2].ack(Position(1, 6001 + 2 * i))
            store.flush()
        for cur in cursors[:2]:
            _steady(cur, SETTLE)  # not flushed
        cursors[1].set_property("k", "v")
        cursors[2].ack(Position(1, 7001))
        before = {c.name: _cursor_keys(store, c.cursor_id) for c in cursors}
        assert before["a"] == ([], [0, 1]) and len(before["wide"][0]) > 2
        states = _states(cursors)
        forms = [c._core.small for c in cursors]
        stats = {s.cursor: s for s in store.compact(verify=verify)}
        assert [c._core.small for c in cursors] == forms
        for c in cursors:
            c._check()
        assert _states(cursors) == states
        for name in ("a", "b"):
            seqs, slots = _cursor_keys(store, cursors[0 if name == "a" else 1].cursor_id)
            assert seqs == [] and len(slots) == 1
            assert (stats[name].records_before, stats[name].records_after) == (2, 1)
        seqs, slots = _cursor_keys(store, cursors[2].cursor_id)
        assert slots == [] and len(seqs) == 2 == stats["wide"].records_after
        assert stats["wide"].records_before == len(before["wide"][0]) + len(before["wide"][1])
        assert not any(c._core._pending for c in cursors)  # compaction wrote what changed
        for c in cursors:
            _steady(c, SETTLE + 1)
        flushed = store.flush()
        assert flushed.cursors == 3 and all(c._core.small is not None for c in cursors)
        for name in ("a", "b"):
            assert _cursor_keys(store, cursors[0 if name == "a" else 1].cursor_id) == ([], [0, 1])
        states = _states(cursors)
    with AckStore.open(path) as store:
        opened = [store.topic(T).cursor(name) for name in ("a", "b", "wide")]
        assert _states(opened) == states


@pytest.mark.parametrize("how", ["write", "read back"])
def test_a_compaction_that_fails_gives_the_forms_their_state_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A compaction whose transaction fails (a write, or with ``verify`` a form's new log
    that does not read back as its state) leaves every form as before it (its chain, slots
    and sequence; its state pending, listed) and the log as it was; the next flush writes
    the state, and a reopen gives it back."""
    from ackstore import compact

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cursors = [_topic(store).cursor(name) for name in ("a", "wide")]
        _settle(store, cursors[:1])
        _wide_form(store, cursors[1])
        _steady(cursors[0], SETTLE)

        def heads() -> list[tuple[int, ...]]:
            return [(f.next_seq, f.slot, f.slots, f.base, f.marker) for f in (c._core.small for c in cursors)]

        before, log = heads(), [_cursor_keys(store, c.cursor_id) for c in cursors]

        def fail(*args: Any) -> None:
            raise lmdb.DiskError("injected")

        with monkeypatch.context() as m:
            if how == "write":
                m.setattr(compact, "drop_points", fail)
            else:  # (what the form holds, as verify reads it, is not what the log gives back)
                m.setattr(compact, "form_snapshot", lambda small: None)
            why = "injected" if how == "write" else "did not read back .the states differ."
            with pytest.raises(StoreError, match=why):
                store.compact(verify=how != "write")
        assert heads() == before and [_cursor_keys(store, c.cursor_id) for c in cursors] == log
        assert all(c._core.small is not None and c._core._pending and c._core._listed for c in cursors)
        for c in cursors:
            c._check()
        states = _states(cursors)
        assert store.flush().cursors == 2
    with AckStore.open(path) as store:
        assert _states([store.topic(T).cursor(name) for name in ("a", "wide")]) == states


def test_a_new_cursor_that_keeps_history_is_in_the_form_and_its_first_flush_is_a_point(tmp_path: Path) -> None:
    """A cursor that keeps history, just made, is in the small form (its states go under its
    log key): its first flush writes its start there, with the window's first point, and no
    state slot; a restore to that point after more flushes, and a reopen, give it back."""
    path = tmp_path / "s"
    config = CursorConfig(history_seconds=3600)
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("h", config)
        small = cur._core.small
        assert small is not None and small.logged and not cur.persisted and cur.history() == []
        store.flush()
        assert cur._core.small is small and cur.persisted
        assert _cursor_keys(store, cur.cursor_id) == ([0], [])
        (first,) = cur.history()
        assert first.mark_delete_position == Position(1, -1) and first.ack_range_count == 0
        for rnd in range(3):
            _steady(cur, rnd)
            store.flush()
        assert cur._core.small is small and len(cur.history()) == 4
        cur._check()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("h", config)
        md, ranges = _model_ranges(3)
        assert cur.mark_delete_position == Position(1, md) and list(cur.ledger_ranges()) == [(1, ranges)]
        assert len(cur.history()) == 4
        cur.restore_as_of(first.time)
        assert cur.mark_delete_position == Position(1, -1) and list(cur.ack_ranges()) == []
        store.flush()
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("h", config)
        assert cur.mark_delete_position == Position(1, -1) and list(cur.ack_ranges()) == []


def test_a_cursor_that_keeps_history_made_before_its_topics_first_ledger_takes_the_form_at_its_first_flush(
    tmp_path: Path,
) -> None:
    """A cursor that keeps history, made while its topic has no ledger yet, starts in its
    parts; its first flush writes its state marker at the log's first sequence, 0, and it
    takes the small form there (not one flush later)."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        cur = topic.cursor("h", CursorConfig(history_seconds=3600))
        assert cur._core.small is None
        topic.add_ledger(1)
        cur.ack(Position(1, 0))
        store.flush()
        assert _cursor_keys(store, cur.cursor_id) == ([0], [])
        assert cur._core.small is not None and cur._core.small.next_seq == 1
        cur._check()


def _lagging(store: AckStore, name: str) -> Any:
    """A cursor whose M is in ledger 1 (of 100 entries, sealed): holes there and in ledger 2
    (sealed, 100), entries of both delivered and counted, some acks in ledger 3 (open)."""
    cur = store.topic(T).cursor(name, CursorConfig(max_deliveries=5))
    cur.ack([Position(1, e) for e in range(0, 100) if e % 7])
    cur.ack([Position(2, e) for e in range(0, 100, 3)])
    cur.ack([Position(3, e) for e in (1, 2, 5)])
    cur.record_deliveries([Position(1, 7), Position(2, 1), Position(2, 2), Position(3, 0)])
    return cur


def _view(cur: Any) -> tuple[Any, ...]:
    return (
        cur.mark_delete_position,
        cur.read_position,
        list(cur.ack_ranges()),
        cur.delivery_counts(),
        cur.partial_batches(),
    )


@pytest.mark.parametrize("upto", [2, 3], ids=["into-the-line", "past-it"])
def test_a_trim_of_ms_ledger_keeps_the_form_and_gives_what_the_parts_give(tmp_path: Path, upto: int) -> None:
    """Retention trims the ledger M is in (a consumer that lags): the form stays, M moves to
    the first ledger left and on over its acks, the trimmed ledgers' acks and delivery
    counts go, exactly as a cursor in its parts reconciles; after the flush a reopen is the
    same. Trimmed up to ledger 2 (on the form's line) or 3 (the line, bound before ledgers 2
    and 3 came, does not reach it: everything the form held is gone)."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        if upto == 2:
            topic.close_ledger(1, 100)
            topic.add_ledger(2)
            topic.close_ledger(2, 100)
            topic.add_ledger(3)
            form, parts = _lagging(store, "form"), _lagging(store, "parts")
        else:
            form, parts = (store.topic(T).cursor(n, CursorConfig(max_deliveries=5)) for n in ("form", "parts"))
            for cur in (form, parts):
                cur.ack([Position(1, e) for e in range(0, 90) if e % 7])
                cur.record_deliveries([Position(1, 7), Position(1, 95)])
            store.flush()
            assert form._core.small is not None and form._core.small.spans == ()
            topic.close_ledger(1, 100)
            topic.add_ledger(2)
            topic.close_ledger(2, 100)
            topic.add_ledger(3)
        assert form._core.small is not None
        end_form(parts)
        topic.trim_ledgers(upto)
        assert form._core.small is not None
        form._check()
        assert _view(form) == _view(parts)
        assert form.mark_delete_position[0] == upto
        store.flush()
        assert form._core.small is not None
        seen = _view(form)
    with AckStore.open(path) as store:
        again = store.topic(T).cursor("form")
        assert _view(again)[0] == seen[0] and _view(again)[2:] == seen[2:]


def test_a_trim_of_ms_ledger_writes_a_chained_forms_state_whole(tmp_path: Path) -> None:
    """A form whose state was in a chain of its own (1,000 holes in ledger 1) and whose M's
    ledger is trimmed: its state is small now, and the next flush writes it whole, in a state
    slot, as the parts write a reconciled state; no marker goes on naming the records the
    chain wrote before the trim (a damaged one would leave every later marker unusable and
    the cursor nothing to fall back to). The flush after it leaves no log key."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 10_000)
        topic.add_ledger(2)
        cur = topic.cursor("w")
        _wide_form(store, cur)
        cur.ack([Position(2, e) for e in (1, 2, 5)])
        store.flush()
        assert _cursor_keys(store, cur.cursor_id)[0], "the chain's records and markers"
        topic.trim_ledgers(2)
        small = cur._core.small
        assert small is not None and cur.mark_delete_position == Position(2, -1)
        store.flush()
        assert cur._core.small is small and small.base == -1, f"still in the chain at {small.base}"
        cur.ack(Position(2, 7))
        store.flush()
        assert _cursor_keys(store, cur.cursor_id) == ([], [0, 1])
        seen = _states([cur])
    with AckStore.open(path) as store:
        assert _states([store.topic(T).cursor("w")]) == seen


def test_a_state_past_its_topics_durable_bound_is_left_to_recovery_which_clips_it(tmp_path: Path) -> None:
    """A cursor's state holding acks past its open ledger's bound (as a store holds it when
    the bound went durable lower than the acks: here written so by hand) is not opened into
    the small form: recovery reads it and drops what lies past the bound."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.advance(1, 100)
        cur = topic.cursor("c")
        cur.ack([Position(1, e) for e in (0, 1, 2, 50, 52)])
        store.flush()
        assert cur._core.small is not None and list(cur.ledger_ranges()) == [(1, [(50, 50), (52, 52)])]
        store.storage.write(lambda txn: store.storage.catalog.put_ledger(txn, topic.topic_id, 1, OPEN, 20))
    with AckStore.open(path) as store:
        cur = store.topic(T).cursor("c")
        assert cur._core.small is None
        assert cur.mark_delete_position == Position(1, 2) and list(cur.ledger_ranges()) == []


def _pairs_along_a_line(store: AckStore, n: int, open_ledger: int, acks: list[Position]) -> list[tuple[Any, Any]]:
    """``n`` pairs of cursors of the same ``acks`` on a line of sealed ledgers (1 of 5 entries,
    2 of 4, then ``open_ledger``, open): the first of each in the small form, the second in
    its parts (asked what the form does not serve), after one flush."""
    topic = store.topic(T)
    topic.add_ledger(1)
    cursors = [topic.cursor(f"c{i}") for i in range(2 * n)]
    topic.close_ledger(1, 5)
    topic.add_ledger(2)
    topic.close_ledger(2, 4)
    topic.add_ledger(open_ledger)
    for cur in cursors:
        cur.ack(acks)
    store.flush()
    pairs = list(zip(cursors[:n], cursors[n:], strict=True))
    for form, parts in pairs:
        end_form(parts)  # (the parts answer from now on)
        assert form._core.small is not None and [ledger for ledger, _ in form._core.small.spans] == [2, open_ledger]
        assert parts._core.small is None
    return pairs


def test_unacked_entries_along_the_forms_line_are_the_parts_answers(tmp_path: Path) -> None:
    """``unacked_entries`` of a cursor in the small form, whose line spans sealed ledgers
    after M's, gives what a cursor of the same acks in its parts gives, for every ledger
    (M's, a spanned one, one the directory never had, the open one, one after them all)
    and spans that stop inside a ledger or run past its end (each asked of a cursor still
    in the form), and the cursor stays in the form."""
    spans = ((0, 10, 10), (0, 4, 10), (2, 4, 10), (1, 3, 1), (3, 12, 5), (0, 40, 40), (2, 30, 3), (5, 9, 2))
    asks = [(ledger, *span) for ledger in range(6) for span in spans]
    with AckStore.open(tmp_path / "s") as store:
        acks = [Position(1, 1), Position(1, 2), Position(2, 1), Position(4, 2)]
        for (form, parts), ask in zip(_pairs_along_a_line(store, len(asks), 4, acks), asks, strict=True):
            assert form._core.small is not None
            got = form.unacked_entries(*ask)
            assert got == parts.unacked_entries(*ask), (ask, got)
            assert form._core.small is not None, ask


def test_a_parts_cursor_rewound_and_its_ranges_read_across_the_flush_that_takes_the_form(tmp_path: Path) -> None:
    """A cursor in its parts: a rewind moves its read position back to M + 1; reading its
    ranges ledger by ledger while a flush puts it in the small form gives every range, the
    ledgers after the flush read from the form."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, e) for e in (1, 3, 5)])
        topic.close_ledger(1, 10)
        topic.add_ledger(2)
        cur.ack([Position(2, e) for e in (2, 4)])
        cur.read_path.move_read_position(Position(2, 7))
        end_form(cur)  # (the parts hold it)
        assert cur._core.small is None
        cur.rewind()
        assert cur.read_position == Position(1, 0)
        ranges = cur.ledger_ranges()
        assert next(ranges) == (1, [(1, 1), (3, 3), (5, 5)])
        store.flush()
        cur.ack(Position(2, 9))
        store.flush()
        assert cur._core.small is not None
        assert list(ranges) == [(2, [(2, 2), (4, 4), (9, 9)])]


def test_read_position_moves_along_the_forms_line_are_the_parts_answers(tmp_path: Path) -> None:
    """``move_read_position`` of a cursor in the small form, whose line spans sealed ledgers,
    leaves the read position where a cursor in its parts leaves it: in a spanned ledger, at
    or past its end (the next ledger's first entry), in the open ledger, at M's ledger's
    end (each asked of a cursor still in the form); ``is_acked`` anywhere on and around the
    line answers as the parts do. A cumulative ack of M's ledger's entry 0 from before it is
    the form's own."""
    moves = [Position(2, 3), Position(2, 4), Position(2, 9), Position(3, 2), Position(1, 5), Position(1, 3)]
    with AckStore.open(tmp_path / "s") as store:
        pairs = _pairs_along_a_line(store, len(moves), 3, [Position(1, 1)])
        for (form, other), to in zip(pairs, moves, strict=True):
            assert form._core.small is not None
            form.read_path.move_read_position(to)
            other.read_path.move_read_position(to)
            assert form.read_position == other.read_position, (to, form.read_position, other.read_position)
        form, other = pairs[-1]  # (their read positions moved back: in M's ledger)
        form.ack([Position(1, 4), Position(2, 0), Position(2, 3)])
        other.ack([Position(1, 4), Position(2, 0), Position(2, 3)])
        for ledger in range(5):
            for entry in range(-1, 6):
                at = Position(ledger, entry)
                assert form.is_acked(at) == other.is_acked(at), at
        assert form._core.small is not None
        fresh = store.topic(T).cursor("fresh")
        small = fresh._core.small
        assert small is not None and fresh.mark_delete_position == Position(1, -1)
        fresh.ack_cumulative(Position(1, 0))
        assert fresh.mark_delete_position == Position(1, 0) and fresh._core.small is small


def test_delivery_counts_of_windows_around_ms_ledgers_first_entry(tmp_path: Path) -> None:
    """In the small form, a window of delivery counts starting at a ledger before M's holds
    the count of M's ledger's entry 0 (the form's first entry) as the whole map does; one
    ending before M's ledger holds none."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic(T)
        topic.add_ledger(3)
        cur = topic.cursor("c", CursorConfig(max_deliveries=5))
        cur.record_deliveries([Position(3, 0), Position(3, 2)])
        assert cur._core.small is not None and cur.mark_delete_position == Position(3, -1)
        whole = {Position(3, 0): 1, Position(3, 2): 1}
        assert cur.delivery_counts() == whole
        assert cur.delivery_counts(Position(1, 7)) == whole
        assert cur.delivery_counts(Position(1, 7), Position(3, 1)) == {Position(3, 0): 1}
        assert cur.delivery_counts(None, Position(1, 7)) == {}  # (a window ending before M's ledger)
        assert cur._core.small is not None
