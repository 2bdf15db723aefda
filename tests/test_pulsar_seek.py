"""Seeks and resets as Pulsar does them: into a batch, clamped when stale, and reads'
argument checks and read-position moves (written from Pulsar's subscription-seek and
managed-cursor behaviour)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ackstore import (
    AckStore,
    Dispatcher,
    InvalidArgumentError,
    InvalidPositionError,
    InvalidTypeError,
    Position,
    UnknownLedgerError,
    testing,
)
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/seek"


def _topic(  # type: ignore[no-untyped-def]
    store: AckStore, sealed: tuple[tuple[int, int], ...] = ((3, 30), (5, 10)), newest_empty: bool = False
):
    """Ledgers ``sealed`` (id, entries: 3 with 30 and 5 with 10), then 7 open and tracked up
    to 7:9, or (``newest_empty``) 7 sealed empty, the newest; cursor ``c`` and its Dispatcher."""
    topic = store.topic(T)
    for ledger, count in sealed:
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, count)
    topic.add_ledger(7)
    if newest_empty:
        topic.close_ledger(7, 0)
    else:
        topic.advance(7, 9)
    cur = topic.cursor("c")
    return topic, cur, Dispatcher(cur, InMemoryLedgerReader(topic))


def _read(d: Dispatcher, n: int) -> list[Position]:
    return [e.position for e in asyncio.run(d.read_more(n))]


def test_seek_to_a_message_inside_a_batch(store_path: Path) -> None:
    """Pulsar resets to a batch message id (entry, index i) with indexes 0..i-1 acked: the
    next message delivered is exactly that one."""
    with AckStore.open(store_path) as store:
        _, cur, d = _topic(store)
        cur.ack_cumulative(Position(5, 2))
        epoch = d.seek(Position(3, 5), batch_index=4, batch_size=10)
        assert epoch == 1
        assert cur.mark_delete_position == Position(3, 4)  # M moved back
        assert cur.partial_batches() == {Position(3, 5): (10, frozenset({0, 1, 2, 3}))}
        assert cur.batch_acked_indexes(Position(3, 5)) == frozenset(range(4))
        assert _read(d, 2) == [Position(3, 5), Position(3, 6)]  # the batch entry first
        d.reset(Position(3, 8), batch_index=0, batch_size=3)  # index 0: a plain reset
        assert cur.partial_batches() == {} and cur.mark_delete_position == Position(3, 7)
    with AckStore.open(store_path) as store:  # flushed with the rest
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(3, 7)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"batch_index": 4}, InvalidArgumentError),  # both or neither
        ({"batch_index": 10, "batch_size": 10}, InvalidArgumentError),
        ({"batch_index": -1, "batch_size": 10}, InvalidArgumentError),
        ({"batch_index": 1, "batch_size": 0}, InvalidArgumentError),
        ({"batch_index": "1", "batch_size": 10}, InvalidTypeError),
        ({"strict": "yes"}, InvalidTypeError),
    ],
)
def test_bad_batch_arguments_change_nothing(store_path: Path, kwargs: dict[str, object], error: type) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _topic(store)
        cur.ack([Position(3, 9)])
        with pytest.raises(error):
            d.seek(Position(3, 5), **kwargs)  # type: ignore[arg-type]
        assert d.epoch == 0 and list(cur.ack_ranges()) == [(Position(3, 9), Position(3, 9))]


def test_a_batch_index_on_a_position_that_is_no_message_is_an_error_when_strict(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _topic(store)
        with pytest.raises(InvalidPositionError, match=r"^position 3:30 is outside ledger 3: allowed entries 0\.\.29"):
            d.reset(Position(3, 30), batch_index=2, batch_size=4, strict=True)  # just past 3's end
        with pytest.raises(InvalidPositionError, match=r"^position 7:10 is outside ledger 7: allowed entries 0\.\.9"):
            d.reset(Position(7, 10), batch_index=2, batch_size=4, strict=True)  # the latest: no message yet
        assert d.reset(Position(3, 30), batch_index=2, batch_size=4) == Position(5, 0)  # clamped, batch dropped
        assert cur.partial_batches() == {}


def test_stale_positions_clamp_like_pulsar(store_path: Path) -> None:
    """A seek to a message whose ledger retention deleted goes to the earliest; one past the
    last entry to the latest; a missing ledger or a ledger's end to the next ledger."""
    with AckStore.open(store_path) as store:
        topic, cur, d = _topic(store)
        topic.trim_ledgers(5)  # retention deleted ledger 3
        assert d.seek(Position(3, 7)) == 1
        assert cur.mark_delete_position == Position(5, -1) and cur.read_position == Position(5, 0)  # earliest
        d.reset(Position(9, 0))  # a ledger past the newest: the latest
        assert cur.read_position == Position(7, 10) and cur.mark_delete_position == Position(7, 9)
        d.reset(Position(6, 3))  # a ledger the topic never had: the next one's first entry
        assert cur.read_position == Position(7, 0)
        d.reset(Position(5, 44))  # past a sealed ledger's end
        assert cur.read_position == Position(7, 0) and cur.mark_delete_position == Position(7, -1)
        d.reset(Position(7, 10**6))  # past the open ledger's last confirmed entry: the latest
        assert cur.read_position == Position(7, 10)


def test_strict_resets_keep_the_typed_errors(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic, cur, d = _topic(store)
        topic.trim_ledgers(5)
        cur.ack([Position(5, 4)])
        with pytest.raises(UnknownLedgerError, match="trimmed"):
            d.seek(Position(3, 7), strict=True)
        with pytest.raises(InvalidPositionError, match=r"allowed entries 0\.\.9"):
            d.reset(Position(5, 44), strict=True)
        assert d.epoch == 0 and cur.ack_range_count == 1  # nothing changed


def test_clamping_past_an_untracked_open_ledger_is_an_error(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(3)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        with pytest.raises(InvalidPositionError, match="latest position is not known"):
            d.reset(Position(4, 0))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None, True])
def test_read_counts_are_checked(store_path: Path, bad: object) -> None:
    with AckStore.open(store_path) as store:
        _, cur, d = _topic(store)
        error = InvalidTypeError if type(bad) is not int else InvalidArgumentError
        with pytest.raises(error, match=repr(bad).replace("(", r"\(")):
            asyncio.run(d.read_more(bad))  # type: ignore[arg-type]
        with pytest.raises(error):
            asyncio.run(d.replay_read(bad))  # type: ignore[arg-type]
        assert cur.read_position == Position(3, 0)


def test_a_read_hops_the_acked_run_after_it(store_path: Path) -> None:
    """Pulsar's read position after a read is the next available position: past a run of
    acked entries that follows, and past a sealed ledger's end."""
    with AckStore.open(store_path) as store:
        _, cur, d = _topic(store)
        cur.ack([Position(3, e) for e in range(19, 25)])
        assert _read(d, 19) == [Position(3, e) for e in range(19)]
        assert cur.read_position == Position(3, 25)
        cur.ack([Position(3, e) for e in range(26, 30)] + [Position(5, 0), Position(5, 1)])
        assert _read(d, 1) == [Position(3, 25)]
        assert cur.read_position == Position(5, 2)  # 3's tail, its end, then 5's acked head


def _edges(store: AckStore, newest_empty: bool = False):  # type: ignore[no-untyped-def]
    """:func:`_topic` with an empty sealed ledger 2 before ledger 3: cursor and Dispatcher."""
    _, cur, d = _topic(store, ((2, 0), (3, 30), (5, 10)), newest_empty)
    return cur, d


@pytest.mark.parametrize(
    ("position", "strict", "md", "rp"),
    [
        ((3, 0), True, (3, -1), (3, 0)),  # a ledger's first entry
        ((2, 0), True, (3, -1), (3, 0)),  # just after an empty sealed ledger's (no) last entry
        ((3, 30), True, (5, -1), (5, 0)),  # just after a sealed ledger's last entry
        ((7, 10), True, (7, 9), (7, 10)),  # the next entry to be written: the latest
        ((3, -1), False, (3, -1), (3, 0)),  # before a ledger's first entry: that entry
        ((4, 5), False, (5, -1), (5, 0)),  # a ledger the topic never had: the next one's first
        ((7, 11), False, (7, 9), (7, 10)),  # past the latest: the latest
    ],
)
def test_reset_targets_at_every_boundary(
    store_path: Path, position: tuple[int, int], strict: bool, md: tuple[int, int], rp: tuple[int, int]
) -> None:
    """Where a reset goes at each edge of the log, strict (a place in the log) or clamped."""
    with AckStore.open(store_path) as store:
        cur, d = _edges(store)
        cur.ack_cumulative(Position(5, 4))
        d.reset(Position(*position), strict=strict)
        assert (cur.mark_delete_position, cur.read_position) == (md, rp)


@pytest.mark.parametrize(
    ("position", "error", "words"),
    [
        ((2, 10), InvalidPositionError, "2:10"),  # an empty sealed ledger's "next entry" is no place
        ((6, 10), UnknownLedgerError, "6"),  # the open ledger's next entry, in a ledger the topic never had
        ([3, 5], InvalidTypeError, r"reset position must be a Position, got \[3, 5\]"),
        ((3.0, 30), InvalidTypeError, "3.0"),
        ((3, "5"), InvalidTypeError, "'5'"),
    ],
)
def test_what_a_strict_reset_refuses_at_the_boundaries(
    store_path: Path, position: object, error: type, words: str
) -> None:
    with AckStore.open(store_path) as store:
        cur, d = _edges(store)
        cur.ack([Position(5, 4)])
        with pytest.raises(error, match=words):
            d.reset(position, strict=True)  # type: ignore[arg-type]
        assert d.epoch == 0 and cur.mark_delete_position == Position(3, -1) and cur.ack_range_count == 1


def test_a_clamp_past_a_newest_ledger_sealed_empty_is_its_start(store_path: Path) -> None:
    """The latest position when the newest ledger is sealed with no entries: its entry 0
    (where the next ledger takes over), never "not known"."""
    with AckStore.open(store_path) as store:
        cur, d = _edges(store, newest_empty=True)
        d.reset(Position(9, 3))
        assert (cur.mark_delete_position, cur.read_position) == ((7, -1), (7, 0))


def test_clamping_past_an_untracked_open_ledger_says_what_is_allowed(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(3)
        d = Dispatcher(topic.cursor("c"), InMemoryLedgerReader(topic))
        with pytest.raises(InvalidPositionError) as caught:
            d.reset(Position(4, 0))
        assert str(caught.value) == (
            f"reset position 4:0 lies past topic {T!r}'s open ledger 3, whose last entry is not tracked, so the "
            "latest position is not known: allowed a position in the topic's ledgers (topic.advance tracks the "
            "open ledger's last confirmed entry)"
        )


@pytest.mark.parametrize("size", [1, 1 << 16])
def test_a_batch_reset_takes_the_smallest_and_the_largest_batch(store_path: Path, size: int) -> None:
    with AckStore.open(store_path) as store:
        cur, d = _edges(store)
        d.seek(Position(3, 5), batch_index=size - 1, batch_size=size)
        assert cur.mark_delete_position == Position(3, 4)
        assert cur.partial_batches() == ({Position(3, 5): (size, frozenset(range(size - 1)))} if size > 1 else {})


def test_batch_arguments_of_the_wrong_type_are_named(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, d = _edges(store)
        with pytest.raises(InvalidTypeError, match=r"batch_index and batch_size must be ints, got 1 and '4'"):
            d.seek(Position(3, 5), batch_index=1, batch_size="4")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match=r"^batch_index 10 is outside the batch: allowed 0\.\.9$"):
            d.seek(Position(3, 5), batch_index=10, batch_size=10)
        with pytest.raises(InvalidArgumentError, match=r"batch_size 65537 is not allowed: allowed 1\.\.65536"):
            d.seek(Position(3, 5), batch_index=1, batch_size=(1 << 16) + 1)


@pytest.mark.usefixtures("marker_layout")
@pytest.mark.parametrize("restart", ["close", "crash"])
def test_a_reset_into_a_batch_is_flushed_as_a_ledger_record_and_survives(store_path: Path, restart: str) -> None:
    """In the marker layout the reset's partial batch is a new ledger record of its own
    (never a delta on what the reset dropped), and acks after it ride on it."""
    with AckStore.open(store_path) as store:
        cur, d = _edges(store)
        cur.ack_entries(3, range(10, 30, 2))
        store.flush()
        d.seek(Position(3, 5), batch_index=2, batch_size=4)
        stats = store.flush()
        assert stats.ledger_records == 1
        cur.ack([Position(3, 9)])
        store.flush()
        if restart == "crash":
            testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(3, 4)
        assert cur.partial_batches() == {Position(3, 5): (4, frozenset({0, 1}))}
        assert list(cur.ack_ranges()) == [(Position(3, 9), Position(3, 9))]


def test_a_read_crosses_an_empty_sealed_ledger(store_path: Path) -> None:
    """The read position after a sealed ledger's last entry skips a sealed ledger with no
    entries to the next one's first."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        for ledger, count in ((1, 3), (2, 0)):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, count)
        topic.add_ledger(3)
        topic.advance(3, 4)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        assert _read(d, 3) == [Position(1, 0), Position(1, 1), Position(1, 2)]
        assert cur.read_position == Position(3, 0)
        assert _read(d, 2) == [Position(3, 0), Position(3, 1)]
