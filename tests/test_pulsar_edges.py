"""Cursor edges where ackstore follows Pulsar's managed-ledger cursor (issue: cursor edges)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ackstore import (
    AckStore,
    AckStoreError,
    CursorConfig,
    Dispatcher,
    InvalidArgumentError,
    InvalidPositionError,
    LedgerStateError,
    Position,
)
from ackstore.cursor.state import MAX_PROPERTY_VALUE_BYTES
from ackstore.storage.catalog import OPEN_LEDGER_ENTRY_BYTES
from ackstore.storage.records import FORMAT_VERSION
from ackstore.testing import InMemoryLedgerReader, crash

from .store_state import sealed_two_open_one

T = "persistent://t/ns/pulsar-edges"


def _setup(store: AckStore, open_last: bool = True):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(4)
    topic.close_ledger(4, 2)
    if open_last:
        topic.add_ledger(5)
    cur = topic.cursor("c")
    d = Dispatcher(cur, InMemoryLedgerReader(topic))
    d.add_consumer("x")
    return topic, cur, d


def test_reset_to_just_after_a_sealed_ledgers_last_entry_is_the_next_ledgers_first(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _setup(store)
        d.reset(Position(4, 2))  # "the position after message 4:1" (an exclusive seek)
        assert cur.mark_delete_position == Position(5, -1) and cur.read_position == Position(5, 0)
        assert cur.is_acked(Position(4, 0)) and cur.is_acked(Position(4, 1))
        epoch = d.epoch
        d.seek(Position(4, 2))
        assert d.epoch == epoch + 1 and cur.read_position == Position(5, 0)
        with pytest.raises(InvalidPositionError, match=r"allowed entries 0\.\.1"):
            d.reset(Position(4, 3), strict=True)  # further out is an error when strict...
        assert d.reset(Position(4, 3)) == Position(5, 0)  # ...and by default Pulsar's next valid position
        with pytest.raises(InvalidPositionError):
            cur.ack([Position(4, 2)])  # an ack there is still outside the ledger


def test_with_no_next_ledger_yet_it_acks_the_whole_ledger(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _setup(store, open_last=False)
        d.reset(Position(4, 2))
        assert cur.mark_delete_position == Position(4, 1) and cur.read_position == Position(4, 2)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(4, 1) and cur.read_position == Position(4, 2)
        store.topic(T).add_ledger(5)
        assert cur.mark_delete_position == Position(5, -1)


def test_a_read_to_a_sealed_ledgers_end_moves_the_read_position_to_the_next(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _setup(store)
        got = asyncio.run(d.read_more(2))
        assert [e.position for e in got] == [Position(4, 0), Position(4, 1)]
        assert cur.read_position == Position(5, 0)


def test_the_documented_differences_in_form(store_path: Path) -> None:
    """A fully acked sealed ledger: M shows as the next ledger's N:-1 (Pulsar: L:count-1);
    a cumulative ack behind M is accepted and changes nothing (Pulsar raises)."""
    with AckStore.open(store_path) as store:
        _, cur, _ = _setup(store)
        cur.ack([Position(4, 0), Position(4, 1)])
        assert cur.mark_delete_position == Position(5, -1)
        cur.ack(Position(5, 0))
        cur.ack_cumulative(Position(4, 1))
        assert cur.mark_delete_position == Position(5, 0) and cur.ack_range_count == 0


# -- the initial position (issue 14.3) ----------------------------------------------------------


def _topic(store: AckStore, last_open: bool, confirmed: int | None = None):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, 10)
    if last_open:
        topic.add_ledger(2)
        if confirmed is not None:
            topic.advance(2, confirmed)
    return topic


@pytest.mark.parametrize(
    ("last_open", "confirmed", "md"),
    [
        (False, None, Position(1, 9)),  # sealed newest ledger: its last entry
        (True, 6, Position(2, 6)),  # open and tracked: its last confirmed entry
        (True, None, Position(2, -1)),  # open, not tracked: everything in sealed ledgers is old
    ],
)
def test_latest_starts_just_before_the_next_entry_to_be_written(
    store_path: Path, last_open: bool, confirmed: int | None, md: Position
) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store, last_open, confirmed)
        cur = topic.cursor("late", initial_position="latest")
        assert cur.mark_delete_position == md and cur.read_position == md.next()
        assert cur.persisted and not cur.dirty  # placed durably before cursor() returned
        early = topic.cursor("early")  # the default: the earliest entry, as before
        assert early.mark_delete_position == Position(1, -1)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert topic.cursor("late", initial_position="earliest").mark_delete_position == md  # ignored now
        assert topic.cursor("early", initial_position="latest").mark_delete_position == Position(1, -1)


def test_latest_on_a_topic_without_ledgers_follows_the_first_one(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c", initial_position="latest")
        topic.add_ledger(3)
        assert cur.mark_delete_position == Position(3, -1)


def test_a_latest_cursor_survives_a_kill_right_after_it_is_opened(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _topic(store, last_open=False)
    code = (
        "import os, signal, sys\n"
        "from ackstore import AckStore\n"
        f"store = AckStore.open({str(store_path)!r})\n"
        f"store.topic({T!r}).cursor('late', initial_position='latest')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("late")  # no initial position given: the persisted one wins
        assert cur.mark_delete_position == Position(1, 9)


def test_a_bad_initial_position_is_refused_and_creates_nothing(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store, last_open=False)
        with pytest.raises(InvalidArgumentError, match=r"initial_position='newest'.*allowed 'earliest', 'latest'"):
            topic.cursor("c", initial_position="newest")
        assert topic.cursors() == []


# -- the open ledger's last confirmed entry (issue 14.4) -----------------------------------------


def test_a_tracked_open_ledger_bounds_acks_cumulative_acks_and_resets(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(8)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        assert topic.last_confirmed is None
        topic.advance(8, -1)  # nothing written yet
        assert topic.last_confirmed == Position(8, -1)
        with pytest.raises(InvalidPositionError, match="no confirmed entry yet"):
            cur.ack_cumulative(Position(8, 10))
        with pytest.raises(InvalidPositionError):
            d.reset(Position(8, 5), strict=True)
        assert d.reset(Position(8, 5)) == Position(8, 0)  # clamped to the latest
        d.reset(Position(8, 0))  # the next entry to be written: allowed
        topic.advance(8, 4)
        with pytest.raises(InvalidPositionError, match=r"allowed entries 0\.\.4 \(the ledger is open and its last"):
            cur.ack([Position(8, 3), Position(8, 5)])
        assert cur.ack_range_count == 0  # one bad position acks none
        with pytest.raises(InvalidPositionError):
            cur.ack_entries(8, range(0, 6))
        with pytest.raises(InvalidPositionError):
            cur.ack(Position(8, 5))
        cur.ack_entries(8, range(0, 5))
        assert cur.mark_delete_position == Position(8, 4)
        d.reset(Position(8, 5))
        with pytest.raises(InvalidPositionError):
            d.reset(Position(8, 6), strict=True)
        with pytest.raises(LedgerStateError, match=r"allowed last_entry 4\.\."):
            topic.advance(8, 3)  # never back
        with pytest.raises(LedgerStateError, match="only the newest ledger advances"):
            topic.advance(7, 3)
        with pytest.raises(LedgerStateError, match=r"allowed entries >= 5"):
            topic.close_ledger(8, 4)
        topic.close_ledger(8, 5)
        topic.add_ledger(9)  # the topic tracks: a new open ledger starts with nothing confirmed
        assert topic.last_confirmed == Position(9, -1)
        with pytest.raises(InvalidPositionError):
            cur.ack(Position(9, 0))


def test_an_untracked_topic_keeps_its_open_ledger_unbounded(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(8)
        cur = topic.cursor("c")
        cur.ack_cumulative(Position(8, 10))  # what a caller that never calls advance gets
        with pytest.raises(
            LedgerStateError, match=r"cursor 'c' has acknowledged or delivered entry 8:10; allowed entries >= 11"
        ):
            topic.advance(8, 5)  # turning the bound on below an ack is refused
        topic.advance(8, 10)
        assert topic.last_confirmed == Position(8, 10)


def test_the_bound_is_durable_first_then_written_by_each_flush(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(8)
        topic.advance(8, 3)  # the first call: durable at once
        topic.advance(8, 7)  # later ones: with the next flush
        crash(store)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert topic.last_confirmed == Position(8, 3)
        topic.advance(8, 9)
        stats = store.flush()  # no cursor is dirty, the bound alone is written
        assert stats.bytes_written == OPEN_LEDGER_ENTRY_BYTES and stats.cursors == 0
        topic.cursor("c").ack(Position(8, 9))
        crash(store)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert topic.last_confirmed == Position(8, 9)
        assert topic.cursor("c").ack_range_count == 0  # the ack was never flushed
        assert store.format_version == FORMAT_VERSION


@pytest.mark.parametrize("load", ["lazy", "budget"])
def test_acks_persisted_before_the_bound_existed_are_clipped_to_it(store_path: Path, load: str) -> None:
    """State persisted past what a ledger turned out to hold (bounded while the cursor was
    not open) is dropped at open, by either load: a lazy open decodes such a ledger at
    once (its record's fields show it), so the range count is right before any read."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(7)
        topic.close_ledger(7, 10)
        topic.add_ledger(8)
        cur = topic.cursor("c")
        cur.ack([Position(7, 3), Position(8, 2), Position(8, 20)])
        cur.record_deliveries([Position(8, 30)])
    with AckStore.open(store_path, load=load) as store:
        topic = store.topic(T)
        topic.advance(8, 5)  # "c" is not open: nothing in memory to check
        cur = topic.cursor("c")
        assert cur.ack_range_count == 2
        assert list(cur.ack_ranges()) == [(Position(7, 3), Position(7, 3)), (Position(8, 2), Position(8, 2))]
        assert cur.delivery_counts() == {}
        cur._check()


@pytest.mark.parametrize("load", ["lazy", "budget"])
def test_state_past_a_ledgers_end_is_dropped_when_the_ledger_is_left_out_of_the_budget(
    store_path: Path, load: str
) -> None:
    """The same with a budget too small for the ledger holding that state (the mark-delete
    ledger's ~2,000 ranges spend it first), and that ledger sealed with fewer entries than a
    flushed ack while the cursor's memory no longer held it (a reset, then a crash): an
    eager open keeps such a ledger out of the budget no more (it was left on disk, and a
    look at it showed the state, the range count counted it, and a read that swapped it
    in left the cursor changed and off the flush list), so it drops that state at open,
    as a lazy open does."""
    config = CursorConfig(max_individual_ack_cache_bytes=600)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(0)
        topic.close_ledger(0, 10_000)
        topic.add_ledger(1)
        cur = topic.cursor("c", config)
        cur.ack_entries(0, range(1, 4001, 2))
        cur.record_deliveries([Position(0, 0), Position(1, 0), Position(1, 1)])
        cur.ack([Position(1, 70)])
        held = list(cur.ack_ranges())[:-1]  # ledger 0's
    with AckStore.open(store_path, load=load) as store:
        topic = store.topic(T)
        cur = topic.cursor("c", config)
        cur.read_path.reset_to(Position(1, 0))  # not flushed: only the memory forgets ledger 1's state
        topic.close_ledger(1, 0)
        crash(store)
    for look in ("ranges", "is_acked"):
        with AckStore.open(store_path, load=load) as store:
            cur = store.topic(T).cursor("c", config)
            if look == "is_acked":  # a read that swaps ledger 1 in, if it was left on disk
                assert not cur.is_acked(Position(1, 70))
                cur._check()
            assert list(cur.ack_ranges()) == held
            assert cur.delivery_counts() == {Position(0, 0): 1}
            assert cur.ack_range_count == len(held)
            cur._check()
            crash(store)


@pytest.mark.parametrize("load", ["lazy", "budget"])
@pytest.mark.parametrize("cut", ["sealed", "bound"])
def test_the_ledger_open_at_the_last_flush_is_checked_for_state_past_its_end_whatever_the_budget(
    store_path: Path, load: str, cut: str
) -> None:
    """A one-byte budget (no record is read at open to fill it): the cursor's last flush
    holds acks and a delivery count in the open ledger 3 and acks in sealed ledgers; a reset
    held in memory forgets ledger 3, which is then sealed with no entries (or given a
    durable bound below the acks, ``advance``), and the process crashes. That ledger is the
    one a seal or a bound can cut below a flushed state (older ones were sealed before the
    flush, within their bounds): the open checks it whatever the budget and the cursor drops
    the state past its end, its range count, ranges, counts and memory agreeing (the open
    may hold it beyond the budget until the next fit)."""
    config = CursorConfig(full_marker_every=1, max_individual_ack_cache_bytes=1)
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        for ledger in range(3):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 40)
        topic.add_ledger(3)
        cur = topic.cursor("c", config)
        cur.ack([Position(0, 5), Position(0, 9), Position(1, 3), Position(3, 2), Position(3, 5), Position(3, 30)])
        cur.record_deliveries([Position(3, 31), Position(3, 7)])
        store.flush()
        Dispatcher(cur, InMemoryLedgerReader(topic)).seek(Position(0, 3))  # in memory only
        if cut == "sealed":
            topic.close_ledger(3, 0)
        else:
            topic.advance(3, 10)  # the bound is durable at once: entries 0..10
        crash(store)
    kept = [(0, 5), (0, 9), (1, 3)] + ([] if cut == "sealed" else [(3, 2), (3, 5)])
    with AckStore.open(store_path, load=load) as store:
        cur = store.topic(T).cursor("c", config)
        assert list(cur.ack_ranges()) == [(Position(*p), Position(*p)) for p in kept]
        assert cur.ack_range_count == len(kept)
        assert cur.delivery_counts() == ({} if cut == "sealed" else {Position(3, 7): 1})
        assert not cur.is_acked(Position(3, 30))
        cur._check()
        cur.ack(Position(2, 1))  # a use fits the budget again
        cur._check()


@pytest.mark.parametrize("load", ["lazy", "budget"])
@pytest.mark.parametrize("layout", ["state", "marker"])
def test_the_mark_delete_ledgers_own_state_past_a_bound_set_since_is_dropped_at_open(
    store_path: Path, request: pytest.FixtureRequest, load: str, layout: str
) -> None:
    """The same cut in the mark-delete ledger itself, with nothing of it at M + 1 (so only
    the bound can tell the open to look): M is 3:0, the flush holds acks at 3:5 and 3:30 and
    counts at 3:7 and 3:31; a reset held in memory, a durable bound at 3:10, a crash. The
    open decodes M's ledger whatever the load and drops what lies past the bound."""
    if layout == "marker":
        request.getfixturevalue("marker_layout")
    config = CursorConfig(max_individual_ack_cache_bytes=1)
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(3)
        cur = topic.cursor("c", config)
        cur.ack_cumulative(Position(3, 0))
        cur.ack([Position(3, 5), Position(3, 30)])
        cur.record_deliveries([Position(3, 31), Position(3, 7)])
        store.flush()
        Dispatcher(cur, InMemoryLedgerReader(topic)).seek(Position(3, 1))  # in memory only
        topic.advance(3, 10)
        crash(store)
    with AckStore.open(store_path, load=load) as store:
        cur = store.topic(T).cursor("c", config)
        assert cur.mark_delete_position == Position(3, 0)
        assert list(cur.ack_ranges()) == [(Position(3, 5), Position(3, 5))] and cur.ack_range_count == 1
        assert cur.delivery_counts() == {Position(3, 7): 1}
        assert not cur.is_acked(Position(3, 30))
        cur._check()


def test_dump_and_restore_carry_the_bound_and_string_properties(store_path: Path, tmp_path: Path) -> None:
    import io

    from ackstore.recovery.dump import dump_lines, restore, write_dump

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(8)
        topic.advance(8, 6)
        cur = topic.cursor("c")
        cur.ack(Position(8, 4))
        cur.set_property("owner", "svc-a")
        cur.set_property("count", 7)
        out = io.StringIO()
        write_dump(dump_lines(store), out)
    dest = tmp_path / "restored"
    restore(io.StringIO(out.getvalue()), dest)
    with AckStore.open(dest) as store:
        topic = store.topic(T)
        assert topic.last_confirmed == Position(8, 6)
        cur = topic.cursor("c")
        assert cur.properties == {"owner": "svc-a", "count": 7}
        assert list(cur.ack_ranges()) == [(Position(8, 4), Position(8, 4))]


# -- skip counting acked entries, string properties (issue 14.5) --------------------------------


def test_skip_can_count_acked_entries_too(store_path: Path) -> None:
    """Pulsar's skipEntries(n, IndividualDeletedEntries.Include) against the default Exclude."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 10)
        topic.add_ledger(2)
        topic.close_ledger(2, 10)
        a, b = topic.cursor("a"), topic.cursor("b")
        for cur in (a, b):
            cur.ack([Position(1, 1), Position(1, 2), Position(1, 5)])
        Dispatcher(a, InMemoryLedgerReader(topic)).skip(4)  # 4 unacked: 0, 3, 4, 6
        assert a.mark_delete_position == Position(1, 6)
        Dispatcher(b, InMemoryLedgerReader(topic)).skip(4, include_acked=True)  # entries 0..3
        assert b.mark_delete_position == Position(1, 3) and b.ack_range_count == 1  # 1:5 still above M
        Dispatcher(b, InMemoryLedgerReader(topic)).skip(7, include_acked=True)  # 1:4..1:9, 2:0
        assert b.mark_delete_position == Position(2, 0) and b.ack_range_count == 0
        Dispatcher(b, InMemoryLedgerReader(topic)).skip(100, include_acked=True)  # past the end: all
        assert b.mark_delete_position == Position(2, 9)
        with pytest.raises(InvalidArgumentError):
            Dispatcher(b, InMemoryLedgerReader(topic)).skip(1, include_acked="yes")  # type: ignore[arg-type]


def test_string_properties_persist_and_bad_ones_are_refused(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.set_property("owner", "svc-ü")
        cur.set_property("empty", "")
        cur.set_property("n", -5)
        for bad in ("x" * (MAX_PROPERTY_VALUE_BYTES + 1), "\ud800", 1.5, b"raw", None, True):
            with pytest.raises(AckStoreError, match="property 'bad'"):
                cur.set_property("bad", bad)
        assert cur.remove_property("n") and not cur.remove_property("n")
    with AckStore.open(store_path) as store:
        assert store.topic(T).cursor("c").properties == {"owner": "svc-ü", "empty": ""}


def test_reads_stop_at_the_last_confirmed_entry(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(8)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        d.add_consumer("x")
        topic.advance(8, 2)
        assert [e.position for e in asyncio.run(d.read_more(10))] == [Position(8, e) for e in range(3)]
        d.clear_backlog()
        assert cur.mark_delete_position == Position(8, 2)


def _trimmed(store: AckStore):  # type: ignore[no-untyped-def]
    """Ledgers 1 and 2 sealed at 5 entries, 3 open, a cursor at the start, then 1 trimmed."""
    c = sealed_two_open_one(store, "trimmed", 5)
    c.topic.trim_ledgers(2)
    return c.topic, c


def test_acks_of_positions_in_a_trimmed_ledger_are_ignored_and_the_rest_of_the_call_acks(tmp_path: Path) -> None:
    """A ledger trimmed under a cursor left every position of it at or below the mark-delete
    position: acks there are ignored by every ack call, as Pulsar ignores acks at or below
    it, and the positions beside them in the same call are acked (they were failing the
    whole batch, so 2:4 was delivered again)."""
    with AckStore.open(tmp_path / "s") as store:
        _, c = _trimmed(store)
        assert c.mark_delete_position == Position(2, -1) and c.is_acked(Position(1, 3))
        c.ack([Position(1, 3), Position(2, 4)])
        assert c.is_acked(Position(2, 4)) and list(c.ack_ranges()) == [(Position(2, 4), Position(2, 4))]
        c.ack(Position(1, 2))
        c.ack([(1, 4)])
        c.ack_entries(1, [0, 1, 2])
        c.ack_entries(1, range(5))
        c.ack_cumulative(Position(1, 4))
        c.ack_batch_index(Position(1, 2), 10, [1])
        assert c.record_deliveries([Position(1, 0), Position(2, 1)]) == [0, 1]
        assert c.restore_delivery_counts({Position(1, 1): 3, Position(2, 2): 2}) == 1
        assert c.mark_delete_position == Position(2, -1)
        assert c.ack_range_count == 1 and c.partial_batches() == {}
        assert c.delivery_counts() == {Position(2, 1): 1, Position(2, 2): 2}
        c.ack_batch_index(Position(2, 0), 2, [0])  # a live position of the same kind still counts
        assert c.partial_batches() == {Position(2, 0): (2, frozenset({0}))}
        c._check()
    with AckStore.open(tmp_path / "s") as store:
        c = store.topic("trimmed").cursor("c")
        assert c.is_acked(Position(2, 4)) and c.ack_range_count == 1
        assert c.delivery_counts() == {Position(2, 1): 1, Position(2, 2): 2}


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.ack([Position(1, 3), Position(4, 0)]),
        lambda c: c.ack(Position(4, 0)),
        lambda c: c.ack_entries(4, [0]),
        lambda c: c.ack_cumulative(Position(4, 0)),
        lambda c: c.ack_batch_index(Position(4, 0), 2, [0]),
        lambda c: c.record_deliveries([Position(1, 3), Position(4, 0)]),
    ],
)
def test_a_ledger_never_added_above_the_mark_delete_position_stays_an_error(tmp_path: Path, call) -> None:  # type: ignore[no-untyped-def]
    """Only positions at or below the mark-delete position pass whatever their ledger: a
    ledger the topic never had above it is an UnknownLedgerError, and nothing is changed."""
    from ackstore import UnknownLedgerError

    with AckStore.open(tmp_path / "s") as store:
        _, c = _trimmed(store)
        store.flush()
        with pytest.raises(UnknownLedgerError, match="ledger 4 is not in topic 'trimmed'"):
            call(c)
        assert c.ack_range_count == 0 and c.delivery_counts() == {}
        assert store.flush().bytes_written == 0
