"""Delivery counts in use against the same work without them, in one run.

- ack: 100,000 acks one per call into a fresh ledger; with counts, every acked entry was
  delivered once before (the ack takes its count away). Target: within 1.1x.
- ack in random order: 15,000 acks one per call, in random order, of 30,000 entries of a
  fresh ledger (as a shared subscription's consumers ack); with counts, all 30,000 were
  delivered once before, so each ack lands among thousands of counted entries.
- group flush: 1,000 cursors x 1 new ack each, and with counts one delivery more each;
  ``bytes`` shows what the counts add to a flush (a delta: what changed).
- durable deliveries: a read of 10 entries counted with ``durable=True`` (a flush per read)
  against counted in memory and flushed every 100 reads.
"""

from __future__ import annotations

import random
from itertools import count

from ackstore import AckStore, CursorConfig, Position

from .conftest import bench_flushes
from .states import UNBOUNDED, T

ONE = 100_000
ACK = "delivery counts: ack one position per call"
SHUFFLED = 30_000
RANDOM = "delivery counts: ack one position per call, in random order, among 30,000"
FLUSH = "delivery counts: group flush, 1,000 cursors"
DURABLE = "delivery counts: durable before dispatch, reads of 10 entries"


def _ledgers(store: AckStore):  # type: ignore[no-untyped-def]
    """A cursor that flushed once on its topic's first ledger (as a broker's has), and a
    function that seals the newest ledger and adds the next."""
    topic = store.topic(T)
    topic.add_ledger(1)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0, max_individual_ack_cache_bytes=1 << 40))
    store.flush()
    ledgers = count(2)

    def new_ledger() -> int:
        ledger = next(ledgers)
        topic.close_ledger(ledger - 1, 4 * ONE)
        topic.add_ledger(ledger)
        return ledger

    return cur, new_ledger


def _bench_acks(benchmark, store: AckStore, counted: bool) -> None:  # type: ignore[no-untyped-def]
    cur, new_ledger = _ledgers(store)

    def setup():  # type: ignore[no-untyped-def]
        ledger = new_ledger()
        positions = [Position(ledger, 2 * e + 1) for e in range(ONE)]
        if counted:
            cur.record_deliveries(positions)
        store.flush()
        return (positions,), {}

    def run(positions: list[Position]) -> None:
        ack = cur.ack
        for p in positions:
            ack(p)

    benchmark.group = ACK
    benchmark.extra_info.update(baseline=not counted, ops=ONE)
    benchmark.pedantic(run, setup=setup, rounds=7)
    assert cur.delivery_counts() == {}


def test_ack_without_counts(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    _bench_acks(benchmark, store, counted=False)


def test_ack_of_counted_entries(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    _bench_acks(benchmark, store, counted=True)


def _bench_random_acks(benchmark, store: AckStore, counted: bool) -> None:  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(1)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0, max_individual_ack_cache_bytes=1 << 40))
    store.flush()  # (a cursor that flushed once, as a broker's has)
    rng = random.Random(7)
    ledgers = count(1)

    def setup():  # type: ignore[no-untyped-def]
        ledger = next(ledgers)
        if ledger > 1:  # (the ledger before acked whole, then sealed: each round starts with no counts)
            cur.ack_entries(ledger - 1, range(SHUFFLED))
            topic.close_ledger(ledger - 1, SHUFFLED)
            topic.add_ledger(ledger)
        positions = [Position(ledger, e) for e in range(SHUFFLED)]
        if counted:
            cur.record_deliveries(positions)
        store.flush()
        rng.shuffle(positions)
        return (positions[: SHUFFLED // 2],), {}

    def run(positions: list[Position]) -> None:
        ack = cur.ack
        for p in positions:
            ack(p)

    benchmark.group = RANDOM
    benchmark.extra_info.update(baseline=not counted, ops=SHUFFLED // 2)
    benchmark.pedantic(run, setup=setup, rounds=7)
    assert len(cur.delivery_counts()) == (SHUFFLED // 2 if counted else 0)


def test_random_acks_without_counts(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    _bench_random_acks(benchmark, store, counted=False)


def test_random_acks_of_counted_entries(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    _bench_random_acks(benchmark, store, counted=True)


def _cursors(store: AckStore, counted: bool):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(1)
    cursors = [topic.cursor(f"c{i}", UNBOUNDED) for i in range(1000)]
    for cur in cursors:
        cur.ack_entries(1, range(1, 5000, 2))
    store.flush()
    rng = random.Random(11)
    fresh = iter(range(5001, 400_000, 3))

    def dirty() -> None:
        for cur in cursors:
            e = next(fresh) + rng.randrange(2)
            cur.ack(Position(1, e))
            if counted:
                cur.record_deliveries([Position(1, e + 1)])

    return dirty


def test_group_flush_without_counts(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info.update(baseline=True)
    bench_flushes(benchmark, store, FLUSH, _cursors(store, counted=False), rounds=10)


def test_group_flush_with_a_count_per_cursor(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    bench_flushes(benchmark, store, FLUSH, _cursors(store, counted=True), rounds=10)


def _reads(store: AckStore, durable: bool):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(1)
    cur = topic.cursor("c")
    start = count(0, 10)

    def run() -> None:
        for _ in range(100):
            first = next(start)
            cur.record_deliveries([Position(1, e) for e in range(first, first + 10)], durable=durable)
        if not durable:
            store.flush()

    return run


def test_deliveries_flushed_every_100_reads(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = DURABLE
    benchmark.extra_info.update(baseline=True, ops=100)
    benchmark.pedantic(_reads(store, durable=False), rounds=5)


def test_deliveries_durable_before_each_read(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = DURABLE
    benchmark.extra_info.update(ops=100)
    benchmark.pedantic(_reads(store, durable=True), rounds=5)
