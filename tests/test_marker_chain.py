"""The marker chain's own rules (``cursor/chain.py``): what a trim leaves below its floor, a
cursor's flush counters before and after its flushes, and ``MarkerChain._check``, which the
state machines call after every step: each invariant it asserts is shown to be asserted
(a loosened check would pass every state the engine makes and catch nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyroaring import FrozenBitMap

from ackstore import AckStore, Cursor, CursorConfig, Position
from ackstore.cursor.chain import EXACT_TRIM, MarkerChain, floor_after
from ackstore.storage.index_entry import IndexEntry

from . import rawlog
from .forms import end_form

EVERY = 8  # a chain's full marker cadence in these checks
DELTA_MAX = 4  # the acks and counts since a record a ledger's index entry may name


def _chain(next_seq: int = 5, marker_seq: int = 4, full_seq: int = 2) -> MarkerChain:
    chain = MarkerChain()
    chain.next_seq, chain.marker_seq, chain.full_seq = next_seq, marker_seq, full_seq
    return chain


def _entry(adds: range, counts: int = 0) -> IndexEntry:
    return IndexEntry(1, 1, FrozenBitMap(adds), {e: 2 for e in range(1000, 1000 + counts)} or None)


def test_a_trims_floor_keeps_the_sequences_it_kept_below_it() -> None:
    """After a trim below ``below`` that kept ``keep``, the chain's floor is ``below`` and its
    kept sequences those of ``keep`` under it (the chain's own object when they are the
    ones it kept before); past ``EXACT_TRIM`` of them, the lowest is the floor and none."""
    was = (3,)
    assert floor_after(10, {3, 12}, was)[1] is was
    assert floor_after(10, {3, 5, 12}, was) == (10, (3, 5))
    assert floor_after(10, {5}, was) == (10, (5,))
    assert floor_after(10, set(), was) == (10, ())
    many = set(range(1, EXACT_TRIM + 2))
    assert floor_after(EXACT_TRIM + 5, many, was) == (1, ())


def test_the_check_passes_a_chain_the_engine_makes_at_its_bounds() -> None:
    """A chain at each bound ``_check`` allows: its newest marker the one before the next
    sequence, ``every`` deltas, a ledger naming exactly ``delta_max`` acks and counts since
    its record (in M's ledger those above M), ``EXACT_TRIM`` kept sequences below the floor."""
    chain = _chain()
    chain.deltas = EVERY
    chain.floor, chain.kept = 20, tuple(range(EXACT_TRIM))
    index = {1: _entry(range(DELTA_MAX - 1), counts=1), 2: _entry(range(10, 10 + DELTA_MAX + 3))}
    chain._check(EVERY, index, DELTA_MAX, md=(2, 12))  # (ledger 2: 10..12 passed by M)
    fresh = MarkerChain()
    fresh._check(EVERY, {}, DELTA_MAX)


@pytest.mark.parametrize(
    "broken",
    [
        "marker at the next sequence",
        "marker at sequence 0, the next",
        "full after the marker",
        "deltas past the cadence",
        "a ledger over the delta bound",
        "one over in a ledger after a changed one",
        "slot",
        "slots",
        "kept out of order",
        "too many kept",
        "kept at the floor",
    ],
)
def test_the_check_asserts_each_invariant_of_the_chain(broken: str) -> None:
    """Each broken invariant, alone, fails ``_check``."""
    chain, index, changed = _chain(), {}, ()
    if broken == "marker at the next sequence":
        chain.marker_seq = chain.next_seq
    elif broken == "marker at sequence 0, the next":
        chain.next_seq = chain.marker_seq = chain.full_seq = 0
    elif broken == "full after the marker":
        chain.full_seq = chain.marker_seq + 1
    elif broken == "deltas past the cadence":
        chain.deltas = EVERY + 1
    elif broken == "a ledger over the delta bound":
        index = {3: _entry(range(DELTA_MAX), counts=1)}
    elif broken == "one over in a ledger after a changed one":
        index, changed = {1: _entry(range(100)), 3: _entry(range(DELTA_MAX + 1))}, (1,)
    elif broken == "slot":
        chain.slot = 2
    elif broken == "slots":
        chain.slots = 4
    elif broken == "kept out of order":
        chain.floor, chain.kept = 10, (3, 2)
    elif broken == "too many kept":
        chain.floor, chain.kept = 20, tuple(range(EXACT_TRIM + 1))
    else:
        chain.floor, chain.kept = 3, (1, 3)
    with pytest.raises(AssertionError):
        chain._check(EVERY, index, DELTA_MAX, md=(3, -1), changed=changed)


def test_a_cursor_in_its_parts_counts_the_bytes_of_every_flush(tmp_path: Path) -> None:
    """A cursor that stays in its parts (of many ranges, its small form ended before each
    flush) counts each of its flushes and their bytes, as the flushes say; before its first
    flush, none."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("persistent://t/ns/bytes")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        end_form(cur)  # (the parts hold it)
        st = cur.stats()
        assert cur._core.small is None
        assert (st.flushes, st.total_flush_bytes, st.last_flush_bytes) == (0, 0, 0)
        written = []
        for rnd in range(4):
            cur.ack([Position(1, e) for e in range(2 + 2000 * rnd, 2000 * (rnd + 1), 2)])
            end_form(cur)
            written.append(store.flush().bytes_written)
        st = cur.stats()
        assert cur._core.small is None and all(written)
        assert (st.flushes, st.total_flush_bytes, st.last_flush_bytes) == (4, sum(written), written[-1])


def _wide(store: AckStore) -> Cursor:
    """A cursor holding a hole in each of 300 ledgers, more than the small form's line
    spans: it stays in its parts, and reopens into them."""
    topic = store.topic("persistent://t/ns/wide")
    for ledger in range(1, 301):
        topic.add_ledger(ledger)
        if ledger < 300:
            topic.close_ledger(ledger, 10)
    cur = topic.cursor("c")
    cur.ack([Position(ledger, 1) for ledger in range(1, 301)])
    return cur


def test_a_cursor_reopened_into_its_parts_has_flushed_nothing_yet(tmp_path: Path) -> None:
    """A cursor whose state spans more ledgers than the small form's line reopens into its
    parts: its flush counters start at zero in this run, as a new cursor's do."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _wide(store)
        assert store.flush().bytes_written > 0 and cur.stats().flushes == 1
    with AckStore.open(path) as store:
        cur = store.topic("persistent://t/ns/wide").cursor("c")
        st = cur.stats()
        assert cur._core.small is None and st.ack_range_count == 300
        assert (st.flushes, st.total_flush_bytes, st.last_flush_bytes) == (0, 0, 0)


@pytest.mark.parametrize("form", [True, False], ids=["small form", "parts"])
def test_a_truncated_state_reopened_flushes_again(tmp_path: Path, form: bool) -> None:
    """A cursor over its PIP-299 cap that keeps history reopens with its cut not known (into
    the small form when that wrote it, a state marker under its log key; into its parts
    when they wrote it, a truncated marker), so the next flush over the cap writes it
    again: an ack above the cut flushes, and the state persisted still holds the lowest
    ranges, as many as the cap."""
    path, cfg = tmp_path / "s", CursorConfig(max_unacked_ranges_to_persist=4, history_seconds=3600)
    with AckStore.open(path) as store:
        topic = store.topic("persistent://t/ns/cut")
        topic.add_ledger(1)
        cur = topic.cursor("c", cfg)
        if not form:
            end_form(cur)
        cur.ack([Position(1, e) for e in range(1, 40, 2)])
        store.flush()
        assert cur.stats().persisted_ranges == 4 and (cur._core.small is not None) == form
    with AckStore.open(path) as store:
        cur = store.topic("persistent://t/ns/cut").cursor("c", cfg)
        assert (cur._core.small is not None) == form and cur.stats().ack_range_count == 4
        cur.ack(Position(1, 100))
        assert store.flush().bytes_written > 0
        st = cur.stats()
        assert (st.persisted_ranges, st.ack_range_count, st.flushes) == (4, 5, 1)


def test_after_falling_back_past_a_damaged_marker_the_next_marker_starts_a_chain(tmp_path: Path) -> None:
    """A reopen that fell back past one damaged marker writes a full marker at its next
    flush (a fresh chain, which trims the damaged one away), not a delta after it."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        cur = _wide(store)
        store.flush()
        cur.ack(Position(300, 3))
        store.flush()
        cid, newest = cur.cursor_id, cur.stats().last_marker_seq
    rawlog.damage(path, newest, cursor_id=cid)
    with AckStore.open(path) as store:
        cur = store.topic("persistent://t/ns/wide").cursor("c")
        assert cur._core.small is None and cur.stats().recovery.markers_skipped == 1
        cur.ack(Position(300, 5))
        store.flush()
        st = cur.stats()
        assert st.last_marker_seq > newest and st.deltas_since_full_marker == 0
