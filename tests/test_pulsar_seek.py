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
)
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/seek"


def _topic(store: AckStore):  # type: ignore[no-untyped-def]
    """Ledgers 3 (30 entries), 5 (10 entries) and 7 (open, tracked up to 7:9)."""
    topic = store.topic(T)
    for ledger, count in ((3, 30), (5, 10)):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, count)
    topic.add_ledger(7)
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
        with pytest.raises(InvalidPositionError):
            d.reset(Position(3, 30), batch_index=2, batch_size=4, strict=True)  # just past 3's end
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
