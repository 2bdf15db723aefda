"""Ack throughput against raw pyroaring on the same ids.

One position per call: 100,000 acks, each a Python call, against a dict of per-ledger
BitMaps updated one id at a time (the least a Python caller can do). One call for 1M:
``ack(list of Positions)`` and ``ack_entries(ledger, array)`` against ``BitMap.update``.
Each round acks into a fresh ledger so no round finds its ids already acked.
"""

from __future__ import annotations

import random
from array import array
from itertools import count

from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.ledger_acks import run_end

from .states import T

ONE = 100_000
MANY = 1_000_000
IDS = random.Random(3).sample(range(4_000_000), MANY)


def _fresh_ledger(store: AckStore):  # type: ignore[no-untyped-def]
    """A setup that seals the previous ledger, opens a new one and returns the cursor with it."""
    topic = store.topic(T)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
    ledgers = count(1)

    def setup():  # type: ignore[no-untyped-def]
        ledger = next(ledgers)
        if ledger > 1:
            topic.close_ledger(ledger - 1, 4_000_000)
        topic.add_ledger(ledger)
        return ledger

    return cur, setup


def test_one_per_call_raw_pyroaring(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "ack: one position per call"
    benchmark.extra_info.update(baseline=True, ops=ONE)
    positions = [(1, 2 * e + 1) for e in range(ONE)]

    def run(bitmaps: dict[int, BitMap]) -> None:
        for ledger, entry in positions:
            bitmaps[ledger].add(entry)

    benchmark.pedantic(run, setup=lambda: (({1: BitMap()},), {}), rounds=7)


def test_one_per_call_ackstore(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "ack: one position per call"
    benchmark.extra_info.update(ops=ONE)
    cur, new_ledger = _fresh_ledger(store)

    def setup():  # type: ignore[no-untyped-def]
        ledger = new_ledger()
        return ([Position(ledger, 2 * e + 1) for e in range(ONE)],), {}

    def run(positions: list[Position]) -> None:
        ack = cur.ack
        for p in positions:
            ack(p)

    benchmark.pedantic(run, setup=setup, rounds=7)
    assert cur.ack_range_count >= ONE


def test_one_per_call_ackstore_tracked_bound(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    """The same acks on a topic that tracks its open ledger's last confirmed entry, moved on
    every 100 acks (a broker confirming writes in batches): what the bound costs the hot path."""
    benchmark.group = "ack: one position per call"
    benchmark.extra_info.update(ops=ONE)
    cur, new_ledger = _fresh_ledger(store)
    topic = store.topic(T)

    def setup():  # type: ignore[no-untyped-def]
        ledger = new_ledger()
        topic.advance(ledger, 0)
        return ([Position(ledger, 2 * e + 1) for e in range(ONE)], ledger), {}

    def run(positions: list[Position], ledger: int) -> None:
        ack, advance = cur.ack, topic.advance
        for i in range(0, ONE, 100):
            advance(ledger, 2 * (i + 100))
            for p in positions[i : i + 100]:
                ack(p)

    benchmark.pedantic(run, setup=setup, rounds=7)
    assert cur.ack_range_count >= ONE


IN_ORDER = "ack: one position per call, in order"


def test_in_order_bitmap_with_the_mark_delete_move(benchmark) -> None:  # type: ignore[no-untyped-def]
    """What a Python developer writes for a consumer acking in order: the mark-delete
    position moved when the entry is the one after it (over a run acked before it), else the
    entry added to a BitMap."""
    benchmark.group = IN_ORDER
    benchmark.extra_info.update(baseline=True, ops=ONE)
    positions = [(1, e) for e in range(ONE)]

    def run() -> None:
        bm, md = BitMap(), -1
        for _, entry in positions:
            if entry == md + 1:
                md = entry
                if bm and md + 1 in bm:
                    md = run_end(bm, md + 1)
                    bm.remove_range(0, md + 1)
            elif entry > md:
                bm.add(entry)

    benchmark.pedantic(run, rounds=7)


def test_in_order_ackstore(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    """The same acks through ``Cursor.ack(Position)``, on a cursor that acks its topic's open
    ledger in order and was flushed (as a consumer's is: in the small form)."""
    benchmark.group = IN_ORDER
    benchmark.extra_info.update(ops=ONE)
    topic = store.topic(T)
    topic.add_ledger(1)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
    for rnd in range(3):
        cur.ack_entries(1, range(10 * rnd, 10 * rnd + 10))
        store.flush()

    def setup():  # type: ignore[no-untyped-def]
        start = cur.mark_delete_position.entry + 1
        return ([Position(1, e) for e in range(start, start + ONE)],), {}

    def run(positions: list[Position]) -> None:
        ack = cur.ack
        for p in positions:
            ack(p)

    benchmark.pedantic(run, setup=setup, rounds=7)
    assert cur.mark_delete_position == Position(1, 30 + 7 * ONE - 1) and cur.ack_range_count == 0


def test_1m_in_one_call_raw_pyroaring(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "ack: 1M positions in one call"
    benchmark.extra_info.update(baseline=True, ops=MANY)
    benchmark.pedantic(lambda bm: bm.update(IDS), setup=lambda: ((BitMap(),), {}), rounds=5)


def test_1m_in_one_call_ackstore_positions(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "ack: 1M positions in one call"
    benchmark.extra_info.update(ops=MANY)
    cur, new_ledger = _fresh_ledger(store)

    def setup():  # type: ignore[no-untyped-def]
        ledger = new_ledger()
        return ([Position(ledger, e) for e in IDS],), {}

    benchmark.pedantic(cur.ack, setup=setup, rounds=5)


def test_1m_in_one_call_ackstore_ack_entries_array(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "ack: 1M positions in one call"
    benchmark.extra_info.update(ops=MANY)
    cur, new_ledger = _fresh_ledger(store)
    ids = array("I", IDS)
    benchmark.pedantic(cur.ack_entries, setup=lambda: ((new_ledger(), ids), {}), rounds=5)
