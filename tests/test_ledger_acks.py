"""One ledger's acks (``LedgerAcks``) and the run helpers beside it, against a plain model:
the acked entries as a set, the partial batches and delivery counts as dicts, the acks since
the ledger's record as a set or None. Every operation's returned change in runs, and every
field after it, is held to the model."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from pyroaring import BitMap

from ackstore.ledger_acks import (
    COUNT_BYTES,
    LEDGER_OVERHEAD_BYTES,
    NO_ENTRIES,
    LedgerAcks,
    bitmap_of_range,
    bitmap_of_runs,
    count_runs,
    run_bounds,
    run_end,
)

TOP = (1 << 32) - 1
entries = st.integers(0, 80)


def model_runs(values: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in sorted(values):
        if out and out[-1][1] == v - 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


@given(st.sets(st.integers(0, 300)))
def test_the_run_helpers_agree_with_the_model(values: set[int]) -> None:
    bm = BitMap(values)
    runs = model_runs(values)
    assert run_bounds(bm) == runs and count_runs(bm) == len(runs)
    assert bitmap_of_runs(runs) == bm
    for first, last in runs:
        for start in (first, (first + last) // 2, last):
            assert run_end(bm, start) == last


@pytest.mark.parametrize(
    "values",
    [
        range(5, 40, 3),
        range(0, 1 << 20, 1 << 16),
        range(TOP - 9 * (1 << 16), TOP + 1, 1 << 16),
        range(TOP - 3, TOP + 1),
    ],
)
def test_a_range_becomes_its_bitmap_whatever_its_step(values: range) -> None:
    """A step of 2**16 or more reaching the top 65,536 ids is built from an array (pyroaring's
    stepped constructor never returns there): the values are exact, beyond 2**31 included."""
    assert bitmap_of_range(values) == BitMap(array("I", values))


class LedgerMachine(RuleBasedStateMachine):
    """``LedgerAcks``' own operations on one ledger, and the model beside it."""

    @initialize()
    def start(self) -> None:
        self.la = LedgerAcks()
        self.acked: set[int] = set()
        self.batches: dict[int, tuple[int, int]] = {}
        self.counts: dict[int, int] = {}
        self.counts_added: dict[int, int] = {}
        self.added: set[int] | None = None

    def _runs(self) -> int:
        return len(model_runs(self.acked))

    @rule()
    def record_written(self) -> None:
        """A flush wrote the ledger's record: from here the ledger tracks the acks since."""
        self.la.added = BitMap()
        self.la.counts_added = NO_ENTRIES
        self.added, self.counts_added = set(), {}

    @rule(entry=entries)
    def add(self, entry: int) -> None:
        before = self._runs()
        got = self.la.add(entry)
        if entry not in self.acked:
            if self.batches.pop(entry, None) is not None:
                self.added = None
            self.acked.add(entry)
            if self.added is not None:
                self.added.add(entry)
            if self.counts.pop(entry, None) is not None:
                self.counts_added.pop(entry, None)
        assert got == self._runs() - before

    @rule(data=st.data())
    def ack_a_counted_entry(self, data: st.DataObject) -> None:
        """An entry that was delivered is acked (its count goes, and with it any count since
        the record)."""
        if self.counts:
            self.add(data.draw(st.sampled_from(sorted(self.counts))))

    @rule(values=st.sets(entries, max_size=12))
    def update(self, values: set[int]) -> None:
        before = self._runs()
        got = self.la.update(BitMap(values))
        self.acked |= values
        if self.added is not None:
            self.added |= values
        for entry in [e for e in self.batches if e in values]:
            del self.batches[entry]
            self.added = None
        for entry in [e for e in self.counts if e in values]:
            del self.counts[entry]
            self.counts_added.pop(entry, None)
        assert got == self._runs() - before

    @rule(entry=entries, size=st.integers(2, 9), data=st.data())
    def partial_batch(self, entry: int, size: int, data: st.DataObject) -> None:
        if entry in self.acked:
            return
        mask = data.draw(st.integers(1, (1 << size) - 2))  # some indexes acked, not all
        self.la.own_batches()[entry] = (size, mask)
        self.la.added = None  # what the ack state does: a partial batch is written with a new base
        self.batches[entry] = (size, mask)
        self.added = None

    @rule(entry=entries)
    def deliver(self, entry: int) -> None:
        if entry in self.acked:
            return
        assert self.la.deliver(entry) == self.counts.get(entry, 0) + 1
        self.counts[entry] = self.counts_added[entry] = self.counts.get(entry, 0) + 1

    @rule(entry=entries, n=st.integers(1, 9))
    def set_count(self, entry: int, n: int) -> None:
        if entry in self.acked:
            return
        assert self.la.set_count(entry, n) == n
        self.counts[entry] = self.counts_added[entry] = n

    @rule(entry=st.integers(-1, 85), data=st.data())
    def drop_through(self, entry: int, data: st.DataObject) -> None:
        """M moved to ``entry``; ``since``: no count lies below it (M was just under it)."""
        low = min(self.counts, default=entry + 1)
        since = data.draw(st.integers(0, max(0, min(low, entry + 1))))
        before = self._runs()
        got = self.la.drop_through(entry, since)
        if entry >= 0:
            left = {e for e in self.acked if e <= entry}
            self.acked -= left
            for e in [e for e in self.batches if e <= entry]:
                del self.batches[e]
                self.added = None
            for e in [e for e in self.counts if e <= entry]:
                del self.counts[e]
                self.counts_added.pop(e, None)
            if left:
                self.added = None
        assert got == self._runs() - before

    @rule(entry=entries)
    def drop_from(self, entry: int) -> None:
        before = self._runs()
        got = self.la.drop_from(entry)
        self.acked = {e for e in self.acked if e < entry}
        self.batches = {e: b for e, b in self.batches.items() if e < entry}
        self.counts = {e: n for e, n in self.counts.items() if e < entry}
        self.counts_added = {e: n for e, n in self.counts_added.items() if e < entry}
        self.added = None
        assert got == self._runs() - before

    @rule(cut=st.integers(1, 20))
    def prefix(self, cut: int) -> None:
        runs = model_runs(self.acked)
        if not 1 <= cut < len(runs):
            return
        end = runs[cut - 1][1]
        part = self.la.prefix(cut)
        assert set(part.bitmap) == {e for e in self.acked if e <= end} and part.runs == cut
        assert part.batches == {e: b for e, b in self.batches.items() if e < end}
        assert part.counts == {e: n for e, n in self.counts.items() if e < end}

    @rule()
    def snapshot(self) -> None:
        copy = self.la.snapshot()
        assert set(copy.bitmap) == self.acked and copy.runs == self._runs()
        assert copy.batches == self.batches and copy.counts == self.counts
        assert copy.added is None and copy.counts_added == {} and copy.size == 0
        copy.bitmap.add(999)  # a copy: the ledger does not see it
        assert 999 not in self.la.bitmap

    @invariant()
    def agrees(self) -> None:
        la = self.la
        assert set(la.bitmap) == self.acked
        assert la.runs == self._runs() == count_runs(la.bitmap)
        assert dict(la.batches) == self.batches and dict(la.counts) == self.counts
        assert dict(la.counts_added) == self.counts_added
        assert (None if la.added is None else set(la.added)) == self.added
        assert la.ranges() == model_runs(self.acked)
        known = self.acked | set(self.batches) | set(self.counts)
        assert la.highest() == max(known, default=-1) and la.lowest() == min(known, default=-1)
        assert bool(la) == bool(known)
        expected = la.bitmap.__sizeof__() + LEDGER_OVERHEAD_BYTES + 64 * len(self.batches)
        assert la.nbytes() == expected + COUNT_BYTES * (len(self.counts) + len(self.counts_added))


LedgerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestLedgerMachine = LedgerMachine.TestCase


def test_a_new_ledger_state_holds_nothing_and_is_charged_nothing() -> None:
    """A new state (and one a decoder made from runs) has no bytes charged to the cache yet:
    the cache charges what it holds when it takes it."""
    la = LedgerAcks()
    assert (la.size, la.runs, la.added, la.highest(), la.lowest(), bool(la)) == (0, 0, None, -1, -1, False)
    assert la.batches is NO_ENTRIES and la.counts is NO_ENTRIES and la.counts_added is NO_ENTRIES
    made = LedgerAcks.of_runs(BitMap([3, 4, 9]), 2, {}, {5: 2})
    assert (made.size, made.runs, made.added, made.counts, made.highest(), made.lowest()) == (0, 2, None, {5: 2}, 9, 3)
    with pytest.raises(
        TypeError, match=r"^a ledger.s shared empty entries are read-only: it takes a dict of its own first$"
    ):
        la.counts[1] = 1  # the shared empty dict: a ledger takes its own first


def test_a_count_dropped_by_a_sealed_end_rebases_and_one_kept_does_not() -> None:
    """Counts beyond a sealed end go with a new base (the marker cannot say it); a drop that
    keeps every count leaves the acks since the record as they were."""
    la = LedgerAcks(BitMap([1, 2]))
    la.added = BitMap([2])
    la._drop_counts(lambda e: True, rebase=True)
    assert la.added == BitMap([2])
    la.set_count(7, 3)
    la._drop_counts(lambda e: e < 5, rebase=True)
    assert la.added is None and la.counts == {} and la.counts_added == {}


def test_drop_through_at_its_edges() -> None:
    """M before the ledger (-1) drops nothing; a partial batch exactly at M goes, with a new
    base; counts M passes while no ack leaves keep the acks since the record (the marker says
    M moved: no new base)."""
    la = LedgerAcks(BitMap([5, 6]))
    la.own_batches()[3] = (4, 0b0101)
    assert la.drop_through(-1) == 0 and set(la.bitmap) == {5, 6} and la.batches == {3: (4, 0b0101)}
    la.added = BitMap()
    assert la.drop_through(3) == 0 and la.batches == {} and la.added is None  # the batch at M itself
    la = LedgerAcks(BitMap([20, 21]))
    la.added = BitMap([21])
    for entry in (10, 12, 14):
        la.set_count(entry, 1)
    assert la.drop_through(12, since=9) == 0  # M passes two counts and no ack
    assert la.counts == {14: 1} and la.counts_added == {14: 1} and la.added == BitMap([21])
