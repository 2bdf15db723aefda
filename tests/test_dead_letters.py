"""Dead letters that never strand an entry: a dead letter that fails leaves its entry due
and the next read tries again; the release that reaches ``max_deliveries`` dead-letters
(not the next read); a restart's entries at the limit are due from construction; a
``dead_letter`` that is not a coroutine function, or a redelivery of a position the log
never had, is refused where it is given."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest

from ackstore import (
    AckStore,
    CursorConfig,
    Dispatcher,
    InvalidPositionError,
    InvalidTypeError,
    Position,
    UnknownLedgerError,
)
from ackstore.dispatch.reads import Entry
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/dead"
P = Position


class DeadLetterTopic:
    """A dead-letter topic that is down for its first ``down`` calls."""

    def __init__(self, down: int = 0) -> None:
        self.down = down
        self.calls = 0
        self.received: list[tuple[Position, int]] = []

    async def send(self, entry: Entry, count: int) -> None:
        self.calls += 1
        if self.calls <= self.down:
            raise ConnectionError("dead-letter topic is down")
        self.received.append((entry.position, count))


def _store(path: Path, limit: int = 2):  # type: ignore[no-untyped-def]
    store = AckStore.open(path)
    topic = store.topic(T)
    if not topic.ledgers():
        topic.add_ledger(1)
        topic.close_ledger(1, 20)
        topic.add_ledger(2)
    return store, topic, topic.cursor("c", CursorConfig(max_deliveries=limit))


def _scrape(store: AckStore, d: Dispatcher) -> dict[str, float]:
    """The dispatcher's samples of one scrape, parsed: ``{sample name: value}`` (each
    ``ackstore_dispatcher_*`` sample has this one dispatcher's labels)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ackstore.metrics import AckStoreCollector

    registry = CollectorRegistry()
    registry.register(AckStoreCollector(store, dispatchers=[d]))
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.startswith("ackstore_dispatcher_"):
                assert sample.name not in samples, sample  # one dispatcher: one sample a name
                samples[sample.name] = sample.value
    return samples


def _fail_all(d: Dispatcher, entries: list[Entry]) -> None:
    d.redeliver([e.position for e in entries])  # a consumer that fails on every entry


def test_a_dead_letter_that_fails_leaves_its_entries_due_and_the_next_read_tries_again(store_path: Path) -> None:
    store, topic, cur = _store(store_path, limit=2)
    with store:
        dlq = DeadLetterTopic(down=1)
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=dlq.send)
        first = asyncio.run(d.read_more(3))  # delivery 1 of 1:0..1:2
        _fail_all(d, first)
        second = asyncio.run(d.replay_read(3))  # delivery 2: the limit
        assert [e.position for e in second] == [P(1, 0), P(1, 1), P(1, 2)]
        _fail_all(d, second)  # the release that reaches the limit: all three due
        assert d.stats()["dead_letter_due"] == 3 and d.stats()["replay_queue"] == 0
        assert asyncio.run(d.replay_read(3)) == []  # the dead letter is down: the first one fails
        assert dlq.calls == 1 and isinstance(d.last_dead_letter_error, ConnectionError)
        assert d.stats()["dead_letter_due"] == 3 and d.stats()["dead_letter_failures"] == 1
        assert not any(cur.is_acked(P(1, e)) for e in range(3))
        scrape = _scrape(store, d)
        assert scrape["ackstore_dispatcher_dead_letter_due"] == 3.0
        assert scrape["ackstore_dispatcher_dead_letter_failures_total"] == 1.0
        asyncio.run(d.read_more(2))  # the next read tries again: every due entry goes
        assert dlq.received == [(P(1, 0), 2), (P(1, 1), 2), (P(1, 2), 2)]
        assert all(cur.is_acked(P(1, e)) for e in range(3)) and cur.mark_delete_position == P(1, 2)
        assert d.stats()["dead_letter_due"] == 0 and d.stats()["dead_lettered"] == 3


def test_dead_letter_due_raises_what_the_dead_letter_raises_and_keeps_the_entry(store_path: Path) -> None:
    store, topic, cur = _store(store_path, limit=1)
    with store:
        dlq = DeadLetterTopic(down=1)
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=dlq.send)
        _fail_all(d, asyncio.run(d.read_more(1)))
        with pytest.raises(ConnectionError):
            asyncio.run(d.dead_letter_due())
        assert not cur.is_acked(P(1, 0)) and d.stats()["dead_letter_due"] == 1
        assert asyncio.run(d.dead_letter_due()) == 1
        assert cur.is_acked(P(1, 0)) and dlq.received == [(P(1, 0), 1)]


def test_the_release_that_reaches_the_limit_dead_letters_without_a_read(store_path: Path) -> None:
    """Inside a running event loop the negative ack that reaches the limit hands the
    entry to the dead letter at once: the backlog, mark-delete and stats are right
    before anything reads again."""
    store, topic, cur = _store(store_path, limit=1)
    with store:
        dlq = DeadLetterTopic()
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=dlq.send)

        async def consume() -> None:
            entries = await d.read_more(1)
            assert [e.position for e in entries] == [P(1, 0)]
            d.redeliver([P(1, 0)])
            for _ in range(5):  # the dead letter's task runs; nothing reads
                await asyncio.sleep(0)

        asyncio.run(consume())
        assert dlq.received == [(P(1, 0), 1)]
        assert cur.is_acked(P(1, 0)) and cur.mark_delete_position == P(1, 0)
        assert d.stats()["dead_lettered"] == 1 and d.stats()["dead_letter_due"] == 0


def test_a_restart_leaves_no_poison_entry_in_the_backlog(store_path: Path) -> None:
    store, topic, cur = _store(store_path, limit=2)
    with store:
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=DeadLetterTopic().send)
        _fail_all(d, asyncio.run(d.read_more(1)))
        assert [e.position for e in asyncio.run(d.replay_read(1))] == [P(1, 0)]  # delivery 2: the limit
    # the consumer died holding it: its count (2, the limit) is persisted, no release came
    store, topic, cur = _store(store_path, limit=2)
    with store:
        dlq = DeadLetterTopic()
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=dlq.send)
        assert d.stats()["dead_letter_due"] == 1  # due from construction, before any read
        assert asyncio.run(d.dead_letter_due()) == 1
        assert dlq.received == [(P(1, 0), 2)] and cur.is_acked(P(1, 0))


def test_dead_letter_must_be_a_coroutine_function(store_path: Path) -> None:
    store, topic, cur = _store(store_path)
    with store:
        reader = InMemoryLedgerReader(topic)
        for bad in (lambda e, n: None, 42, print):
            with pytest.raises(InvalidTypeError, match="dead_letter must be a coroutine function"):
                Dispatcher(cur, reader, dead_letter=bad)  # type: ignore[arg-type]

        called: list[tuple[str, Position, int]] = []

        async def send(entry: Entry, count: int, where: str) -> None:
            called.append((where, entry.position, count))

        class Sender:
            async def __call__(self, entry: Entry, count: int) -> None:
                called.append(("object", entry.position, count))

        topic_dlq = DeadLetterTopic()
        goods = (topic_dlq.send, functools.partial(send, where="partial"), Sender())
        for e, good in enumerate(goods):  # each one taken, and called when an entry reaches the limit
            cur.update_config(max_deliveries=1)
            d = Dispatcher(cur, reader, dead_letter=good)
            _fail_all(d, asyncio.run(d.read_more(1)))  # delivery 1 of 1:e, released: at the limit
            asyncio.run(d.dead_letter_due())
            assert cur.is_acked(P(1, e)) and cur.mark_delete_position == P(1, e)
        assert topic_dlq.received == [(P(1, 0), 1)]
        assert called == [("partial", P(1, 1), 1), ("object", P(1, 2), 1)]


def test_redeliver_refuses_a_position_the_log_never_had(store_path: Path) -> None:
    store, topic, cur = _store(store_path, limit=3)
    with store:
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=DeadLetterTopic().send)
        with pytest.raises(InvalidPositionError, match=r"position 1:21 is outside ledger 1: allowed entries 0\.\.19"):
            d.redeliver([P(1, 21)])
        with pytest.raises(UnknownLedgerError, match="ledger 9 is not in topic"):
            d.redeliver([P(9, 0)])
        with pytest.raises(InvalidPositionError):
            d.redeliver([P(1, 3), P(1, 20)])  # one bad position queues none
        assert d.stats()["replay_queue"] == 0
        d.redeliver([P(1, 3)])
        assert [e.position for e in asyncio.run(d.replay_read(5))] == [P(1, 3)]
