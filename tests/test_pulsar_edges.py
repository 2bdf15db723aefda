"""Cursor edges where ackstore follows Pulsar's managed-ledger cursor (issue: cursor edges)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ackstore import AckStore, Dispatcher, InMemoryLedgerReader, InvalidPositionError, Position

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
            d.reset(Position(4, 3))  # further out stays an error
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
