"""The small form (``ackstore/cursor/small.py``): its two twins on the same operations
against a plain model, and the bytes they write against the state layout's own encoder and
decoder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore.cursor import small as small_form
from ackstore.cursor.small import IMPLEMENTATIONS, Small, check_small
from ackstore.ledger_acks import LedgerAcks, run_bounds
from ackstore.storage import records

IDS = ["python", "native"][: len(IMPLEMENTATIONS)]
CID, LEDGER = 7, 3
VERSION, RESERVE = small_form.FLUSH_FORMAT


class Model:
    """A small cursor as sets: M's entry, the acks above it, the log's sequence and slots."""

    def __init__(self, md_e: int, acked: set[int], seq: int, slot: int, slots: int) -> None:
        self.md_e, self.acked, self.seq, self.slot, self.slots = md_e, set(acked), seq, slot, slots
        self.dirty = False

    def ack(self, first: int, last: int) -> None:
        new = {e for e in range(max(first, self.md_e + 1), last + 1)} - self.acked
        if new:
            self.acked |= new
            self.dirty = True
            while self.md_e + 1 in self.acked:
                self.md_e += 1
                self.acked.discard(self.md_e)

    def runs(self) -> list[tuple[int, int]]:
        return run_bounds(BitMap(self.acked))

    def value(self) -> tuple[bytes, bytes]:
        """The state slot put of the next state, by the state layout's own encoder (what a
        cursor's state plan writes)."""
        slot = 1 - self.slot
        bitmap = BitMap(self.acked)
        ledgers = [(LEDGER, LedgerAcks.of_runs(bitmap, len(self.runs()), {}, {}))] if bitmap else []
        record = records.encode_state_marker(CID, (LEDGER, self.md_e), {}, ledgers)
        key = records.slot_key(CID, slot)
        return key, records.seal_slot(key, self.seq, record, 0 if self.slots >> slot & 1 else RESERVE)


def _fields(s: Any) -> tuple[Any, ...]:
    return (
        s.md_l, s.md_e, s.runs(), s.n, s.next_seq, s.slot, s.slots, s.dirty, s.persisted, s.flushes, s.flush_bytes,
        s.last_bytes, s.ended,
    )  # fmt: skip


OPS = st.one_of(
    st.tuples(st.just("range"), st.integers(0, 90), st.integers(0, 6)),
    st.tuples(st.just("bitmap"), st.frozensets(st.integers(0, 90), max_size=8), st.just(0)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("undo"), st.just(0), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(
    md_e=st.integers(-1, 20),
    start=st.frozensets(st.integers(0, 60), max_size=10),
    seq=st.integers(0, 300),
    slot=st.integers(0, 1),
    other=st.booleans(),
    ops=st.lists(OPS, max_size=30),
)
def test_the_twins_agree_with_the_model_and_write_the_state_layout(
    md_e: int, start: frozenset[int], seq: int, slot: int, other: bool, ops: list[tuple[str, Any, int]]
) -> None:
    """Each twin, from the same state through the same acks, flushes and undone flushes,
    holds what the model holds, and each flush writes the bytes the state layout's own
    encoder makes of the model's state, which its decoder reads back as that state."""
    acked = {e for e in start if e > md_e + 1}
    model = Model(md_e, acked, seq, slot, 1 << slot | (1 if other else 0) << (1 - slot))
    runs = model.runs()
    if runs and runs[0][0] == md_e + 1:
        return  # M would stand on an ack: not a state a cursor holds
    forms = [impl.SmallState(CID, LEDGER, md_e, seq, slot, model.slots, runs, 64) for impl in IMPLEMENTATIONS]
    taken: tuple[int, int, int, bool] | None = None  # the model before the last flush that wrote
    for op, a, b in ops:
        if op == "range":
            model.ack(a, a + b)
            fits = [s.ack_range(a, a + b) for s in forms]
        elif op == "bitmap":
            for first, last in run_bounds(BitMap(a)):
                model.ack(first, last)
            fits = [s.ack_bitmap(BitMap(a)) for s in forms]
        elif op == "flush":
            expect = [model.value()] if model.dirty else []
            outs = [impl.flush_small([s], VERSION, RESERVE) for impl, s in zip(IMPLEMENTATIONS, forms, strict=True)]
            for puts, nbytes in outs:
                assert puts == expect
                assert nbytes == sum(len(k) + len(v) for k, v in expect)
            taken = None
            if expect:
                taken = (model.seq, model.slot, model.slots, True)
                key, value = expect[0]
                got_seq, record = records.open_slot(key, value)
                marker = records.decode_marker(record, got_seq)
                assert got_seq == model.seq and marker.mark_delete == (LEDGER, model.md_e)
                assert {lg: la.ranges() for lg, la in (marker.ledgers or {}).items()} == (
                    {LEDGER: model.runs()} if model.acked else {}
                )
                model.slot = 1 - model.slot
                model.slots |= 1 << model.slot
                model.seq += 1
                model.dirty = False
            fits = [True] * len(forms)
        else:  # the write failed: the last flush given back
            for impl, s in zip(IMPLEMENTATIONS, forms, strict=True):
                impl.undo_small([s])
            if taken is not None:
                model.seq, model.slot, model.slots, model.dirty = taken
                taken = None
            fits = [True] * len(forms)
        first = _fields(forms[0])
        for s in forms:
            assert _fields(s) == first, (IDS, [_fields(f) for f in forms])
            check_small(s, (LEDGER, md_e))
        assert (first[1], first[2], first[4], first[5], first[6], bool(first[7])) == (
            model.md_e, model.runs(), model.seq, model.slot, model.slots, model.dirty
        )  # fmt: skip
        assert fits == [len(model.runs()) <= 64] * len(forms)
        for e in (model.md_e, model.md_e + 1, *list(model.acked)[:3], 95):
            assert [s.acked(e) for s in forms] == [e <= model.md_e or e in model.acked] * len(forms)


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
        impl.flush_small([s, object()], VERSION, RESERVE)
    with pytest.raises(ValueError, match=r"flush_small: format 12 or room -1 is outside the layout \(0..255, 0..64\)"):
        impl.flush_small([s], 12, -1)
    assert s.runs() == [(7, 8)] and not s.dirty and s.next_seq == 0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=IDS)
def test_a_form_that_ended_is_never_flushed_nor_given_back(impl: Small) -> None:
    """Once its cursor left the form, a flush skips it, and an undo of a flush that took it
    before it ended leaves it as it is (the cursor's parts hold the state)."""
    s = impl.SmallState(CID, LEDGER, -1, 4, 1, 3, [], 64)
    s.ack_range(3, 5)
    puts, _ = impl.flush_small([s], VERSION, RESERVE)
    assert len(puts) == 1 and s.next_seq == 5
    s.end()
    impl.undo_small([s])
    assert (s.next_seq, s.dirty, s.ended) == (5, 0, 1)
    s.ack_range(7, 9)
    assert impl.flush_small([s], VERSION, RESERVE) == ([], 0)


def test_a_cap_the_runs_pass_is_reported() -> None:
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, -1, 0, 1, 1, [], 2)
        assert s.ack_range(2, 3) and s.ack_range(5, 5)
        assert not s.ack_range(8, 8) and s.n == 3  # applied; the caller takes it to the parts
