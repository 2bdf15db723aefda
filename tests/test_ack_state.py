"""The ack-state component alone, against the plain model: no LMDB, no lock, no store.

An :class:`AckState` over an in-memory ledger source (a dict of LedgerAcks with the same
small interface the cursor's pages offer) must move exactly as ``tests/model.py`` says.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, overload

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import AckStoreError, Position
from ackstore.cursor import fitting
from ackstore.cursor.deliveries import record_deliveries
from ackstore.cursor.moves import MAX_BATCH_SIZE
from ackstore.cursor.state import AckState
from ackstore.directory import LedgerDirectory
from ackstore.errors import (
    InvalidArgumentError,
    InvalidPositionError,
    InvalidTypeError,
    LedgerStateError,
    UnknownLedgerError,
)
from ackstore.ledger_acks import LedgerAcks
from ackstore.ledger_cache import LedgerCache
from ackstore.position import MAX_ENTRY
from ackstore.storage.records import Marker

from .model import CursorModel, TopicModel

LEDGERS: list[tuple[int, int | None]] = [(1, 20), (2, 10), (3, None)]


@dataclass
class _Topic:
    name: str
    directory: LedgerDirectory
    version: int = 0


class MemoryLedgers:
    """Ledger ack sets in a dict: everything stays loaded, nothing is written."""

    def __init__(self) -> None:
        self.cache = LedgerCache(1 << 40)
        self.dirty: set[int] = set()
        self.vanished: set[int] = set()

    @overload
    def get(self, ledger: int, create: Literal[True]) -> LedgerAcks: ...
    @overload
    def get(self, ledger: int, create: bool = False) -> LedgerAcks | None: ...
    def get(self, ledger: int, create: bool = False) -> LedgerAcks | None:
        la = self.cache.loaded.get(ledger)
        if la is None and create:
            la = LedgerAcks()
            self.cache.add(ledger, la)
        return la

    def peek(self, ledger: int) -> LedgerAcks | None:
        return self.cache.loaded.get(ledger)

    def known(self) -> set[int]:
        return self.cache.known()

    def vanish(self, ledger: int) -> int:
        la = self.cache.remove(ledger)
        self.dirty.discard(ledger)
        self.vanished.add(ledger)
        return la.runs if la is not None else 0

    def touched(self, ledger: int, la: LedgerAcks) -> int:
        if la:
            self.dirty.add(ledger)
            self.cache.measure(la)
            return 0
        return self.vanish(ledger)

    def fit(self, incoming: int = 0, keep: Iterable[int] = ()) -> None:
        return None

    def runs(self) -> int:
        return sum(la.runs for la in self.cache.loaded.values())


def _directory() -> LedgerDirectory:
    """The ledgers of :data:`LEDGERS`: 1 sealed at 20 entries, 2 at 10, 3 open."""
    d = LedgerDirectory()
    for ledger, count in LEDGERS:
        d.add(ledger)
        if count is not None:
            d.close(ledger, count)
    return d


def _fresh() -> tuple[AckState, MemoryLedgers, TopicModel, CursorModel]:
    d = _directory()
    ledgers = MemoryLedgers()
    state = AckState(_Topic("t", d), "c", ledgers)
    fitting.load(state, None)
    model = TopicModel(ledgers=[[i, c] for i, c in LEDGERS], last_id=3)
    return state, ledgers, model, CursorModel(floor=(1, -1))


def _same(state: AckState, ledgers: MemoryLedgers, model: TopicModel, c: CursorModel) -> None:
    state._check(ledgers.runs())
    assert tuple(state.md) == model.md(c)
    ranges = [
        ((ledger, first), (ledger, last))
        for ledger in sorted(ledgers.known())
        for first, last in ledgers.cache.loaded[ledger].ranges()
    ]
    assert ranges == model.ranges(c)
    partials = {
        (ledger, e): (size, frozenset(i for i in range(size) if mask >> i & 1))
        for ledger in sorted(ledgers.known())
        for e, (size, mask) in ledgers.cache.loaded[ledger].batches.items()
    }
    assert partials == model.partials(c)
    assert state.range_count == len(ranges)


position = st.tuples(st.sampled_from([1, 2, 3]), st.integers(0, 24))
step = st.one_of(
    st.tuples(st.just("ack"), st.lists(position, min_size=1, max_size=8)),
    st.tuples(st.just("one"), position),
    st.tuples(st.just("cumulative"), st.tuples(st.sampled_from([1, 2, 3]), st.integers(-1, 24))),
    st.tuples(st.just("batch"), position, st.integers(1, 4), st.lists(st.integers(0, 3), max_size=3)),
    st.tuples(st.just("reset"), position),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=30))
def test_ack_state_moves_as_the_model_says(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    state, ledgers, model, c = _fresh()
    for op, *args in steps:
        p = args[0]
        if op == "ack":
            valid = all(model.valid_position(x) for x in p)
        elif op == "reset":
            valid = model.valid_reset_position(p)
        else:
            valid = model.valid_position(p, low=-1 if op == "cumulative" else 0)
        if op == "batch":
            size, indexes = args[1], args[2]
            valid = valid and all(i < size for i in indexes) and not model.batch_size_conflict(c, p, size)
        if not valid:
            call = {
                "ack": lambda a=args: state.ack_items(a[0]),
                "one": lambda a=args: state.ack_one(*a[0]),
                "cumulative": lambda a=args: state.ack_cumulative(a[0]),
                "batch": lambda a=args: state.ack_batch_index(a[0], a[1], a[2]),
                "reset": lambda a=args: state.reset_to(a[0]),
            }[op]
            with pytest.raises(AckStoreError):
                call()
            _same(state, ledgers, model, c)
            continue
        if op == "ack":
            state.ack_items(args[0])
            model.ack(c, args[0])
        elif op == "one":
            state.ack_one(*p)
            model.ack(c, [p])
        elif op == "cumulative":
            state.ack_cumulative(p)
            model.ack_cumulative(c, p)
        elif op == "batch":
            state.ack_batch_index(p, args[1], args[2])
            model.ack_batch(c, p, args[1], args[2])
        else:
            state.reset_to(Position(*p))
            model.reset(c, p)
        _same(state, ledgers, model, c)


def test_a_new_state_starts_before_the_first_ledger_and_must_persist_it() -> None:
    state, ledgers, _, _ = _fresh()
    assert state.md == Position(1, -1) and state.rp == Position(1, 0) and state.meta_dirty
    state.ack_one(1, 0)
    assert state.md == Position(1, 0) and state.range_count == 0
    state.ack_items([Position(1, 5), Position(1, 6), Position(2, 3)])
    assert state.range_count == 2 and ledgers.dirty == {1, 2}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 200), max_size=120),
    st.integers(-1, 60),
    st.integers(0, 220),
    st.integers(0, 220),
    st.integers(0, 50),
)
def test_unacked_entries_hop_over_acked_runs(acked: list[int], md: int, start: int, stop: int, n: int) -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_cumulative((1, min(md, 19)))  # ledger 1 is sealed at 20 entries
    state.ack_items([(3, e) for e in acked] or [(3, 0), (3, 0)])
    for ledger in (1, 3):
        la = ledgers.get(ledger)
        expect = [
            e for e in range(start, stop) if (ledger, e) > tuple(state.md) and not (la is not None and e in la.bitmap)
        ][:n]
        assert state.unacked_entries(ledger, start, stop, n) == expect


@given(
    st.lists(st.tuples(st.integers(0, 400_000), st.integers(1, 70_000)), min_size=2, max_size=30),
    st.data(),
)
@settings(max_examples=150, deadline=None)
def test_prefix_keeps_exactly_the_lowest_runs_and_what_lies_below_them(spans, data) -> None:  # type: ignore[no-untyped-def]
    """``LedgerAcks.prefix`` against its naive definition: the lowest k runs (from a list of
    every range), batches and counts below the k-th run's end; runs spanning containers."""
    bm = BitMap()
    for start, length in spans:
        bm.add_range(start, start + length)
    la = LedgerAcks(bm)
    ranges = la.ranges()
    assume(len(ranges) >= 2)
    k = data.draw(st.integers(1, len(ranges) - 1))
    holes = [e for e in range(0, 500_000, 997) if e not in bm][:40]
    la.batches = {e: (4, 0b11) for e in holes[::2]}
    la.counts = {e: 2 for e in holes[1::2]}
    part = la.prefix(k)
    cut = ranges[k - 1][1]
    assert part.ranges() == ranges[:k] and part.runs == k
    assert part.batches == {e: b for e, b in la.batches.items() if e < cut}
    assert part.counts == {e: n for e, n in la.counts.items() if e < cut}
    assert la.ranges() == ranges, "prefix changed the ledger it was taken from"


def test_a_ledger_shares_the_empty_entries_until_it_holds_one() -> None:
    """A ledger without partial batches or delivery counts holds the one shared, read-only
    empty mapping for each (three empty dicts a ledger were most of an idle ledger's
    memory); it takes a dict of its own at its first one, and the shared one stays empty."""
    from ackstore.ledger_acks import NO_ENTRIES

    idle = LedgerAcks(BitMap([1, 2, 3]), {}, {})
    assert idle.batches is idle.counts is idle.counts_added is NO_ENTRIES
    assert idle.snapshot().batches is NO_ENTRIES and LedgerAcks.of_runs(BitMap([1]), 1, {}, {}).counts is NO_ENTRIES
    for write in (
        lambda m: m.__setitem__(1, 1),
        lambda m: m.update({1: 1}),
        lambda m: m.setdefault(1, 1),
        lambda m: m.__delitem__(1),
        lambda m: m.clear(),
        lambda m: m.popitem(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            write(idle.batches)
    assert idle.counts.pop(7, None) is None and idle.counts.get(7) is None and 7 not in idle.counts
    busy = LedgerAcks(BitMap([1]))
    assert busy.deliver(5) == 1 and busy.counts == {5: 1} == busy.counts_added
    assert busy.own_batches() is busy.batches is not NO_ENTRIES
    busy.batches[9] = (4, 0b11)
    assert busy.add(5) == 1 and busy.counts == {} and busy.counts is not NO_ENTRIES  # a new run; its own, emptied
    assert idle.batches is NO_ENTRIES and not NO_ENTRIES and NO_ENTRIES == {}
    kept = LedgerAcks(BitMap([1]), {4: (8, 1)}, {6: 2})
    assert kept.batches == {4: (8, 1)} and kept.counts == {6: 2} and kept.counts_added is NO_ENTRIES


@pytest.mark.parametrize("passed", [3, 40], ids=["fewer-passed-than-counts", "more-passed-than-counts"])
def test_moving_past_entries_drops_exactly_their_counts(passed: int) -> None:
    """``drop_through(entry, since)``: the counts of the entries M passed go, the others
    stay, whether it looks each passed entry up (fewer passed than counts) or scans the
    counts; neither starts a new base for a count (the marker says M moved)."""
    la = LedgerAcks(BitMap(range(10, 10 + passed)))
    for entry in [*range(10, 10 + passed), 10 + passed + 1, 10 + passed + 5, 200, 300, 400, 500]:
        if entry not in la.bitmap:
            la.deliver(entry)
    la.counts[10 + passed - 1] = 2  # (as a count the ack left behind would be)
    la.own_counts_added()
    la.added = BitMap()
    la.drop_through(10 + passed - 1, since=10)
    assert sorted(la.counts) == [10 + passed + 1, 10 + passed + 5, 200, 300, 400, 500]
    assert not la.bitmap and la.added is None  # the bitmap shrank: its removal is a new base
    assert 10 + passed - 1 not in la.counts_added


def test_an_idle_ledger_takes_under_160_bytes_of_python_memory() -> None:
    """What docs/architecture.md says of an idle ledger: its Python objects (the ledger,
    the BitMap wrapper; the bitmap's own containers are pyroaring's, outside the Python
    heap) take under 160 B, three empty dicts of its own not among them."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ledgers = [LedgerAcks(BitMap([1, 5, 9])) for _ in range(2000)]
        per = (tracemalloc.get_traced_memory()[0] - before) / len(ledgers)
    finally:
        tracemalloc.stop()
    assert 40 < per < 160, per


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 19), max_size=20),
    st.lists(st.lists(st.integers(0, 19), max_size=12), min_size=1, max_size=5),
)
def test_list_acks_leave_what_one_at_a_time_leaves(delivered: list[int], rounds: list[list[int]]) -> None:
    """Delivered entries (counted) acked by one list a round leave the state that the same
    acks one position at a time leave: M, the ranges held and the counts that stand,
    however the list meets M (a run from M + 1 that M passes, a hole, acks already held),
    and the invariants hold after each round."""
    lists, each = _fresh()[:2], _fresh()[:2]
    for _state, ledgers in (lists, each):
        for entry in delivered:
            la = ledgers.get(1, create=True)
            if entry not in la.bitmap:
                la.deliver(entry)
        ledgers.dirty.clear()
    for acks in rounds:
        positions = [Position(1, e) for e in acks]
        if positions:
            lists[0].ack_items(positions)
        for p in positions:
            each[0].ack_one(*p)
        for state, ledgers in (lists, each):
            state._check(ledgers.runs())
        want = [
            (state.md, {k: (sorted(la.bitmap), dict(la.counts)) for k, la in ledgers.cache.loaded.items()})
            for state, ledgers in (lists, each)
        ]
        assert want[0] == want[1]


def test_acks_that_pass_every_count_leave_the_shared_empty_entries() -> None:
    """M passing every counted entry, or an ack of every counted entry, leaves the ledger
    the shared empty counts (``NO_ENTRIES``), ``counts_added`` too; otherwise exactly the
    counts of the entries acked or passed go."""
    from ackstore.ledger_acks import NO_ENTRIES

    la = LedgerAcks(BitMap([30]))
    for entry in (3, 4, 9):
        la.deliver(entry)
    la.drop_through(9, since=3)
    assert la.counts is NO_ENTRIES and la.counts_added is NO_ENTRIES and list(la.bitmap) == [30]
    la = LedgerAcks(BitMap([30]))
    for entry in range(10):
        la.deliver(entry)
    la.update(BitMap(range(10)))
    assert la.counts is NO_ENTRIES and la.counts_added is NO_ENTRIES
    for entry in (40, 41, 42):
        la.deliver(entry)
    la.update(BitMap([41]))  # fewer acked than counted: looked up one by one
    assert la.counts == {40: 1, 42: 1} and la.counts_added == {40: 1, 42: 1}
    la.update(BitMap([40, 50, 51, 52]))  # more acked than counted: the counts scanned
    assert la.counts == {42: 1} and la.counts_added == {42: 1}


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), min_size=1, max_size=12), st.data())
def test_the_end_of_a_run_is_found_inside_and_at_the_top(spans: list[tuple[int, int]], data: st.DataObject) -> None:
    from ackstore.ledger_acks import run_end

    bm = BitMap()
    for first, n in spans:
        bm.add_range(first, first + n)
    start = data.draw(st.sampled_from(list(bm)))
    end = start
    while end + 1 in bm:
        end += 1
    assert run_end(bm, start) == end


def test_the_directory_answers_each_question_exactly() -> None:
    """The ledger directory's lookups, on ledgers 3 (sealed at 10), 7 (sealed at 0) and 9
    (open): membership, index, count, end, the next ledger and what lies past an end,
    untracked and then tracked."""
    from ackstore.position import MAX_ENTRY

    d = LedgerDirectory()
    for ledger, count in ((3, 10), (7, 0), (9, None)):
        d.add(ledger)
        if count is not None:
            d.close(ledger, count)
    assert [x in d for x in (2, 3, 5, 7, 9, 10)] == [False, True, False, True, True, False]
    assert [d.index(x) for x in (2, 3, 5, 7, 9, 10)] == [-1, 0, -1, 1, 2, -1]
    assert (d.first(), d.count(3), d.count(7), d.count(9)) == (3, 10, 0, -1)
    assert [d.next_after(x) for x in (1, 3, 7, 8, 9)] == [3, 7, 9, 9, None]
    assert d.items() == [(3, 10), (7, 0), (9, -1)]
    assert [d.end(x) for x in (3, 7, 9, 5)] == [10, 0, -1, -1]  # the open ledger untracked: no end
    assert d.open_limit() == MAX_ENTRY
    spans = [(3, 9), (3, 10), (7, 0), (9, 0), (9, 5), (5, 100), (10, 0)]
    assert d.past_end(spans) == [3, 7]
    d.advance(4)  # tracked: the open ledger ends after its last confirmed entry
    assert (d.end(9), d.open_limit()) == (5, 4)
    assert d.past_end(spans) == [3, 7, 9] and d.past_end([(9, 4)]) == []
    assert d.trim(7) == [3] and d.items() == [(7, 0), (9, -1)] and d.trim(7) == []


OPEN_TRACKED = "(the last confirmed entry never goes back)"


@pytest.mark.parametrize(
    "check,args,message",
    [
        ("check_add", (9,), "cannot add ledger 9: ledger ids must increase, the last one added was 9"),
        ("check_add", (10,), "cannot add ledger 10: ledger 9 is still open; close it with its entry count first"),
        ("check_close", (9, -1), "entries must be an int in 0..4294967295, got -1"),
        ("check_close", (9, 4294967296), "entries must be an int in 0..4294967295, got 4294967296"),
        (
            "check_close",
            (9, 4),
            "cannot close ledger 9 with 4 entries: its last confirmed entry is 9:4; allowed entries >= 5",
        ),
        ("check_close", (8, 5), "cannot close ledger 8: the topic has no such ledger"),
        ("check_close", (3, 5), "cannot close ledger 3: it is already sealed with 10 entries"),
        ("check_advance", (7, 1), "cannot advance ledger 7: only the newest ledger advances; the newest ledger is 9"),
        ("check_advance", (9, "1"), "last_entry must be an int, got '1' (str)"),
        ("check_advance", (9, 3), f"cannot advance ledger 9 to 3: allowed last_entry 4..4294967294 {OPEN_TRACKED}"),
        (
            "check_advance",
            (9, 2**32 - 1),
            f"cannot advance ledger 9 to 4294967295: allowed last_entry 4..4294967294 {OPEN_TRACKED}",
        ),
        ("check_trim", (10,), "cannot trim below ledger 10: the newest ledger 9 must stay; allowed below <= 9"),
        ("check_trim", (-1,), "below -1 is out of range: allowed 0..9223372036854775807"),
    ],
)
def test_the_directorys_checks_say_what_is_allowed(check: str, args: tuple[object, ...], message: str) -> None:
    """Each refusal of a change to the directory names the value and what is allowed; the
    last allowed values pass."""
    d = LedgerDirectory(tracked=True)
    for ledger, count in ((3, 10), (7, 0), (9, None)):
        d.add(ledger)
        if count is not None:
            d.close(ledger, count)
    d.advance(4)
    with pytest.raises(AckStoreError) as info:
        getattr(d, check)(*args)
    assert str(info.value) == message
    assert d.check_close(9, 5) == (9, 5) and d.check_close(9, 2**32 - 1) == (9, 2**32 - 1)
    assert d.check_advance(9, 4) == (9, 4) and d.check_advance(9, 2**32 - 2) == (9, 2**32 - 2)
    assert d.check_trim(9) == 9 and d.check_trim(0) == 0


def test_an_empty_or_sealed_newest_ledger_advances_only_as_allowed() -> None:
    d = LedgerDirectory()
    with pytest.raises(
        LedgerStateError,
        match=r"^cannot advance ledger 1: only the newest ledger advances; the topic has no ledgers yet$",
    ):
        d.check_advance(1, 0)
    d.add(1)
    assert d.check_advance(1, -1) == (1, -1)  # untracked: from -1
    with pytest.raises(LedgerStateError, match=r"^cannot advance ledger 1 to -2: allowed last_entry -1\.\.4294967294$"):
        d.check_advance(1, -2)
    d.close(1, 6)
    assert d.check_advance(1, 5) == (1, 5)
    for bad in (4, 6):
        with pytest.raises(
            LedgerStateError,
            match=rf"^cannot advance ledger 1 to {bad}: it is sealed with 6 entries; allowed last_entry 5$",
        ):
            d.check_advance(1, bad)


def test_a_read_past_a_sealed_ledgers_end_starts_the_next_ledger_at_its_first_entry() -> None:
    """The read position after a sealed ledger's last entry is the next ledger's entry 0
    (from any ledger but the newest), hopping the acked run that starts there; past the
    newest ledger's known entries it stays where the read left it."""
    state = _fresh()[0]
    state.move_read_position(Position(1, 20))  # ledger 1 holds entries 0..19
    assert state.rp == Position(2, 0)
    state.move_read_position(Position(2, 10))  # ledger 2 holds 0..9: on to the open ledger 3
    assert state.rp == Position(3, 0)
    fresh = _fresh()[0]
    fresh.ack_items([Position(2, e) for e in range(0, 4)])
    fresh.move_read_position(Position(1, 20))
    assert fresh.rp == Position(2, 4)  # entries 0..3 of ledger 2 are acked: hopped
    fresh.move_read_position(Position(2, 2))  # never backwards
    assert fresh.rp == Position(2, 4)


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [
        ([(1, 3), (1, -1)], InvalidPositionError, "position 1:-1 is outside ledger 1: allowed entries 0..19"),
        ([(1, -1), (1, 3)], InvalidPositionError, "position 1:-1 is outside ledger 1: allowed entries 0..19"),
        ([(1, 3), (1, 2**32)], InvalidPositionError, "position 1:4294967296 is outside ledger 1: allowed entries"),
        ([(1, 3), (1, 20)], InvalidPositionError, "position 1:20 is outside ledger 1: allowed entries 0..19"),
        ([Position(1, 3), "x"], InvalidTypeError, "expected a Position(ledger, entry), got 'x'"),
        ([Position(1, 3), (1,)], InvalidTypeError, "expected a Position(ledger, entry), got (1,)"),
        ([(1, 3), (1, 2.0)], InvalidTypeError, "expected a Position(ledger, entry) of ints, got (1, 2.0)"),
        ([(1, 3), (9, 0)], UnknownLedgerError, "ledger 9 is not in topic 't': the topic's ledgers are 1, 2, 3"),
        ([(1, 3), (-1, 2)], UnknownLedgerError, "ledger -1 is not in topic 't'"),
    ],
)
def test_a_list_with_one_bad_item_says_which_and_acks_none(items: list[object], error: type, message: str) -> None:
    """Items the compiled grouping does not take (a negative or too large entry, a ledger
    the topic lacks, anything not a pair of ints) are checked one by one: the first bad
    one is named exactly, and none of the good ones before it is acked."""
    state, ledgers, _, _ = _fresh()
    with pytest.raises(error) as raised:
        state.ack_items(items)
    assert str(raised.value).startswith(message)
    assert state.md == Position(1, -1) and state.range_count == 0 and not ledgers.dirty and not ledgers.known()


@pytest.mark.parametrize("initial", ["earliest", "latest"])
def test_a_new_state_on_a_topic_without_ledgers_starts_at_zero(initial: Literal["earliest", "latest"]) -> None:
    """No ledger yet: the mark-delete position is 0:-1 whichever start is asked for, read
    from 0:0, and the first flush persists it; the first ledger added moves it there."""
    d = LedgerDirectory()
    state = AckState(_Topic("t", d), "c", MemoryLedgers())
    fitting.load(state, None, initial)
    assert (state.md, state.rp, state.meta_dirty) == (Position(0, -1), Position(0, 0), True)
    d.add(7)
    fitting.directory_changed(state, d)
    assert (state.md, state.rp) == (Position(7, -1), Position(7, 0))


def _marker(md: tuple[int, int]) -> Marker:
    return Marker(full=True, prev=-1, mark_delete=md, read_position=(md[0], md[1] + 1), properties={}, index={})


def _loaded(md: tuple[int, int], held: dict[int, LedgerAcks]) -> tuple[AckState, MemoryLedgers]:
    """A state recovered at ``md`` whose ledgers' records held ``held`` (clipped on load)."""
    d = _directory()
    ledgers = MemoryLedgers()
    for ledger, la in held.items():
        ledgers.cache.add(ledger, la)
    state = AckState(_Topic("t", d), "c", ledgers)
    fitting.load(state, _marker(md))
    return state, ledgers


def test_a_recovered_state_drops_what_lies_at_or_below_its_mark_delete_position() -> None:
    """Acks at entry 0 and at M itself leave M's ledger on load; what lies above stays."""
    state, ledgers = _loaded((3, 5), {3: LedgerAcks(BitMap([0, 4, 5, 7]), counts={2: 1, 9: 2})})
    la = ledgers.peek(3)
    assert la is not None and list(la.bitmap) == [7] and la.counts == {9: 2}
    assert state.range_count == 1 and state.md == Position(3, 5) and state.rp == Position(3, 6)
    state._check(ledgers.runs())


def test_a_mark_delete_position_past_a_ledgers_end_is_clipped_and_persisted() -> None:
    """Persisted past the end the ledger was sealed at since (a crash between the two):
    M is the ledger's last entry, the read position M + 1, and the next flush writes it."""
    state, ledgers = _loaded((2, 14), {2: LedgerAcks(BitMap([3]), counts={10: 1, 9: 1})})
    # ledger 2 holds 10 entries: M is 2:9 (its last), which moves on to ledger 3
    assert state.md == Position(3, -1) and state.rp == Position(3, 0) and state.meta_dirty
    assert ledgers.peek(2) is None and state.range_count == 0
    state._check(ledgers.runs())


@pytest.mark.parametrize(("entries", "md"), [(10, Position(5, 9)), (0, Position(5, -1))])
def test_a_mark_delete_position_past_the_newest_ledgers_end_is_clipped_there(entries: int, md: Position) -> None:
    """The newest ledger sealed (at 10 entries, or empty) below a persisted M: M is its
    last entry (or before its first), nothing to move on to, and the next flush writes it."""
    d = LedgerDirectory()
    d.add(5)
    d.close(5, entries)
    state = AckState(_Topic("t", d), "c", MemoryLedgers())
    fitting.load(state, _marker((5, 14)))
    assert (state.md, state.rp, state.meta_dirty) == (md, md.next(), True)


def test_a_sealed_ledgers_state_past_its_end_is_clipped_counts_included() -> None:
    """A count or an ack at exactly the ledger's end (10 entries: 0..9) goes, one below stays."""
    state, ledgers = _loaded((1, 3), {2: LedgerAcks(BitMap([4]), counts={9: 1, 10: 3})})  # only a count reaches it
    la = ledgers.peek(2)
    assert la is not None and list(la.bitmap) == [4] and la.counts == {9: 1}
    assert state.range_count == 1  # ledger 2's one run
    state._check(ledgers.runs())


def test_mark_delete_plus_one_at_a_sealed_ledgers_last_entry_moves_into_the_next_ledger() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_cumulative((1, 18))
    state.ack_one(1, 19)  # ledger 1's last (20 entries)
    assert state.md == Position(2, -1) and state.rp == Position(2, 0)
    state.ack_cumulative((2, 8))
    record_deliveries(state, [(2, 9), (3, 0)])
    state.ack_one(2, 9)  # its count goes with it, and ledger 2 with M
    assert state.md == Position(3, -1) and ledgers.peek(2) is None
    state._check(ledgers.runs())


def test_a_list_from_m_plus_one_over_acks_held_marks_the_ledger_changed_though_the_rest_was_acked() -> None:
    """M + 1 and an entry acked already, in one list: M moves over the run M + 1 starts
    with the acks held (taking them out of the ledger's acks), and what is left of the list
    was acked before. The ledger changed all the same (M's run left it): dirty, its
    ranges recounted. (A list all acked before changes nothing.)"""
    state, ledgers, _, _ = _fresh()
    state.ack_items([Position(1, 1), Position(1, 3)])
    ledgers.dirty.clear()
    state.ack_items([Position(1, 3)])  # acked already: nothing changes
    assert not ledgers.dirty and state.range_count == 2
    state.ack_items([Position(1, 0), Position(1, 3)])  # M to 1:1; 3 acked already
    assert state.md == Position(1, 1) and ledgers.dirty == {1} and state.range_count == 1
    la = ledgers.peek(1)
    assert la is not None and list(la.bitmap) == [3]
    state._check(ledgers.runs())


def test_mark_delete_plus_one_whose_ledger_then_holds_nothing_keeps_the_other_ledgers_ranges() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_items([Position(3, 4), Position(3, 8)])
    record_deliveries(state, [(1, 0)])
    assert state.range_count == 2
    state.ack_one(1, 0)  # ledger 1 held only that count: it goes, ledger 3's two ranges stay
    assert ledgers.peek(1) is None and state.range_count == 2 and state.md == Position(1, 0)
    state._check(ledgers.runs())


def test_an_ack_of_an_entry_with_a_partial_batch_ends_the_batch_and_others_stay() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_batch_index((1, 5), 4, [0])
    state.ack_batch_index((1, 0), 4, [1])
    state.ack_batch_index((1, 7), 4, [2])
    state.ack_one(1, 5)  # acked whole: its batch goes
    la = ledgers.peek(1)
    assert la is not None and sorted(la.batches) == [0, 7] and la.added is None
    state.ack_one(1, 0)  # M + 1 with batches held elsewhere: M moves, 7's batch stays
    assert state.md == Position(1, 0) and sorted(la.batches) == [7]
    assert state.batch_acked_indexes((1, 7)) == frozenset({2})
    state._check(ledgers.runs())


def test_moving_over_a_run_drops_the_counts_of_every_entry_it_passes() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_cumulative((2, 9))
    assert state.md == Position(3, -1)
    record_deliveries(state, [(3, e) for e in range(6)])
    state.ack_items([Position(3, e) for e in (1, 2, 4)])
    state.ack_one(3, 0)  # M moves over 0..2: the counts of 1 and 2 went with their acks, 0's now
    la = ledgers.peek(3)
    assert state.md == Position(3, 2) and la is not None and la.counts == {3: 1, 5: 1}
    state.ack_one(3, 3)  # and over 3..4
    assert state.md == Position(3, 4) and la.counts == {5: 1}
    state._check(ledgers.runs())


def test_a_move_that_moves_nothing_changes_nothing_to_persist() -> None:
    """A ledger added (every cursor of the topic is asked to advance) moves no M that has
    nothing to move over: nothing for the next flush to write."""
    state, _, _, _ = _fresh()
    state.ack_items([Position(1, 3)])
    assert state.take_meta_dirty()
    state.topic.directory.close(3, 30)
    state.topic.directory.add(4)
    fitting.directory_changed(state, state.topic.directory)
    assert not state.meta_dirty and state.md == Position(1, -1)


@pytest.mark.parametrize("ledger", [3])
def test_closing_a_ledger_refuses_to_cut_off_an_ack_or_a_delivery(ledger: int) -> None:
    state, _, _, _ = _fresh()
    state.ack_items([Position(ledger, 9)])
    with pytest.raises(LedgerStateError, match=r"entry 3:9; allowed entries >= 10"):
        fitting.check_close(state, ledger, 9)
    fitting.check_close(state, ledger, 10)
    record_deliveries(state, [(ledger, 12)])
    with pytest.raises(LedgerStateError, match=r"entry 3:12; allowed entries >= 13"):
        fitting.check_close(state, ledger, 12)
    fitting.check_close(state, ledger, 13)


def test_an_ack_in_a_ledger_trimmed_below_the_mark_delete_position_is_ignored() -> None:
    """Ledger 0 and 1 trimmed while M stands in 2: an ack there (even of ledger 0) is ignored
    as Pulsar ignores it; a ledger never added above M is still refused."""
    d = LedgerDirectory()
    for ledger in (0, 1, 2):
        d.add(ledger)
        d.close(ledger, 5)
    d.add(3)
    ledgers = MemoryLedgers()
    state = AckState(_Topic("t", d), "c", ledgers)
    fitting.load(state, None)
    state.ack_cumulative((2, 1))
    d.trim(2)
    fitting.directory_changed(state, d)
    for position in [(0, 4), (1, 3), (0, 99)]:
        state.ack_one(*position)
        state.ack_items([Position(*position), Position(2, 3)])
    assert state.md == Position(2, 1) and state.is_acked((2, 3)) and state.range_count == 1
    with pytest.raises(UnknownLedgerError):
        state.ack_one(7, 0)


@pytest.mark.parametrize(
    ("entries", "error", "message"),
    [
        ([1, "x"], InvalidTypeError, "entry must be an int, got 'x' (str)"),
        ([1, 2.0], InvalidTypeError, "entry must be an int, got 2.0 (float)"),
        (array("d", [1.0]), InvalidTypeError, "entries must be ints, got an array of typecode 'd'"),
        (array("f", [1.0]), InvalidTypeError, "entries must be ints, got an array of typecode 'f'"),
        (7, InvalidTypeError, "entries must be an iterable of ints, got 7"),
        ([4, -1], InvalidPositionError, "position 3:-1 is outside ledger 3: allowed entries 0..4294967294"),
        (array("q", [4, -2]), InvalidPositionError, "position 3:-2 is outside ledger 3: allowed entries 0..4294967294"),
    ],
)
def test_entries_of_one_ledger_that_are_not_entries_are_named_and_none_acked(
    entries: object, error: type, message: str
) -> None:
    state, ledgers, _, _ = _fresh()
    with pytest.raises(error) as raised:
        state.ack_entries(3, entries)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message), str(raised.value)
    assert state.range_count == 0 and not ledgers.known()


def test_entries_of_one_ledger_up_to_its_last_and_none_at_all() -> None:
    state, _, _, _ = _fresh()
    state.ack_entries(3, [])
    state.ack_entries(2, array("I", [9]))  # ledger 2's last entry (10 entries)
    assert state.is_acked((2, 9)) and state.range_count == 1
    with pytest.raises(InvalidPositionError, match=r"position 2:10 is outside ledger 2: allowed entries 0\.\.9"):
        state.ack_entries(2, BitMap([3, 10]))
    assert not state.is_acked((2, 3)) and state.range_count == 1


def test_a_batchs_acks_add_up_and_its_size_and_indexes_are_checked_at_their_bounds() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_batch_index((3, 4), 4, [0])
    state.ack_batch_index((3, 4), 4, [2])  # the second adds to the first
    assert state.batch_acked_indexes((3, 4)) == frozenset({0, 2}) and not state.is_acked((3, 4))
    with pytest.raises(InvalidArgumentError, match=r"^batch_size 5 does not match the 4 already recorded for 3:4$"):
        state.ack_batch_index((3, 4), 5, [1])
    with pytest.raises(InvalidArgumentError, match=r"^batch index 4 is outside the batch: allowed 0\.\.3$"):
        state.ack_batch_index((3, 4), 4, [4])
    for size in (0, MAX_BATCH_SIZE + 1):
        with pytest.raises(
            InvalidArgumentError, match=rf"^batch_size {size} is not allowed: allowed 1\.\.{MAX_BATCH_SIZE}$"
        ):
            state.ack_batch_index((3, 6), size, [0])
    state.ack_batch_index((3, 6), MAX_BATCH_SIZE, [MAX_BATCH_SIZE - 1])  # the largest batch, its last index
    assert state.batch_acked_indexes((3, 6)) == frozenset({MAX_BATCH_SIZE - 1})
    state.ack_batch_index((3, 4), 4, [1, 3])  # every index: the entry is acked whole
    assert state.is_acked((3, 4)) and state.batch_acked_indexes((3, 4)) is None
    state._check(ledgers.runs())


def test_the_highest_entry_a_position_can_have_is_acked_and_read_back() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_one(3, MAX_ENTRY)  # ledger 3 is open and its end untracked: any entry is allowed
    assert state.is_acked((3, MAX_ENTRY)) and not state.is_acked((3, MAX_ENTRY - 1))
    assert not state.is_acked((3, MAX_ENTRY + 1))
    state._check(ledgers.runs())


def test_a_property_set_or_removed_is_persisted_by_the_next_flush() -> None:
    state, _, _, _ = _fresh()
    state.take_meta_dirty()
    state.set_property("a", 1)
    assert state.take_meta_dirty() is True and state.properties == {"a": 1}
    assert state.remove_property("b") is False and state.meta_dirty is False
    assert state.remove_property("a") is True and state.take_meta_dirty() is True


def _place_md(state: AckState, md: Position) -> None:
    state.md, state.rp = md, md.next()


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        (lambda s, ls: ls.get(1, create=True).own_batches().__setitem__(2, (3, 0b111)), "2"),  # a full mask
        (lambda s, ls: ls.get(1, create=True).own_batches().__setitem__(3, (3, 0)), "3"),  # an empty one
        (lambda s, ls: ls.get(2, create=True).own_counts().__setitem__(10, 1), "10"),  # past the end (10 entries)
        (lambda s, ls: _place_md(s, Position(2, 9)), "M not normalized"),  # M at a sealed end, a ledger after
        (  # M + 1 acked (and counted as a range), M not moved
            lambda s, ls: setattr(s, "range_count", s.range_count + ls.get(1, create=True).update(BitMap([1]))),
            "M not advanced",
        ),
        (lambda s, ls: _place_md(s, Position(2, 10)), "(2, 10)"),  # M past the end
    ],
)
def test_the_states_own_check_finds_each_planted_fault(plant: Any, message: str) -> None:
    """``_check`` (what the tests call after each change) fails on each invariant broken,
    at its bound: a batch whose mask is full or empty, a count at exactly a ledger's end,
    M left at a sealed ledger's last entry, M past the end."""
    state, ledgers, _, _ = _fresh()
    state.ack_cumulative((1, 0))
    state._check(ledgers.runs())
    plant(state, ledgers)
    with pytest.raises(AssertionError, match=f"^{message}$" if message[0] == "M" else re.escape(message)):
        state._check(ledgers.runs())


def test_the_states_own_check_finds_an_entry_at_the_mark_delete_position() -> None:
    state, ledgers, _, _ = _fresh()
    state.ack_cumulative((1, 4))
    ledgers.get(1, create=True).own_counts()[4] = 1  # at M itself: nothing at or below M is held
    with pytest.raises(AssertionError, match=r"\(1, 4, 4\)"):
        state._check(ledgers.runs())
