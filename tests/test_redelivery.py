"""At-least-once across restarts: what was dispatched and not acked is read again.

Pulsar never persists a cursor's read position: on recovery it starts at the first entry
after the mark-delete position (acked entries skipped). ackstore does the same, after a
clean close and after kill -9 alike.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackstore import AckStore, Dispatcher, Position, testing
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/redeliver"
ROOT = Path(__file__).parent.parent


def _store(path: Path, entries: int = 10) -> None:
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(3)
        topic.close_ledger(3, entries)
        topic.cursor("c")


def _read_all(cur, topic, n: int = 1000) -> list[Position]:  # type: ignore[no-untyped-def]
    d = Dispatcher(cur, InMemoryLedgerReader(topic))
    out: list[Position] = []
    while batch := asyncio.run(d.read_more(n)):
        out.extend(e.position for e in batch)
    return out


@pytest.mark.parametrize("restart", ["close", "crash"])
def test_a_dispatched_unacked_entry_is_delivered_again_after_a_restart(store_path: Path, restart: str) -> None:
    _store(store_path)
    store = AckStore.open(store_path)
    topic = store.topic(T)
    cur = topic.cursor("c")
    d = Dispatcher(cur, InMemoryLedgerReader(topic))
    got = [e.position for e in asyncio.run(d.read_more(2))]
    assert got == [Position(3, 0), Position(3, 1)]
    cur.ack_cumulative(Position(3, 0))
    assert cur.read_position == Position(3, 2)
    if restart == "close":
        store.close()
    else:
        store.flush()
        testing.crash(store)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        assert cur.mark_delete_position == Position(3, 0)
        assert cur.read_position == Position(3, 1)  # the first unacked entry after M
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        assert [e.position for e in asyncio.run(d.read_more(10))] == [Position(3, e) for e in range(1, 10)]


def test_after_a_restart_reads_skip_acked_entries_above_the_mark_delete(store_path: Path) -> None:
    _store(store_path)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        assert len(_read_all(cur, topic)) == 10
        cur.ack([Position(3, 1), Position(3, 2), Position(3, 5)])
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        assert cur.read_position == Position(3, 0)
        assert _read_all(cur, topic) == [Position(3, e) for e in (0, 3, 4, 6, 7, 8, 9)]


def test_a_read_position_stored_by_an_older_format_is_ignored(store_path: Path) -> None:
    """Markers of format 6 and older held the read position; open never starts reads there."""
    from ackstore.storage.log import fetch_record
    from ackstore.storage.records import decode_marker, encode_marker, log_key, slot_key

    _store(store_path)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        _read_all(cur, topic)
        cur.ack([Position(3, 4)])
        store.flush()
        seq, cid = cur.stats().last_marker_seq, cur.cursor_id
        storage = store.storage

        def plant(txn):  # type: ignore[no-untyped-def]
            marker = decode_marker(fetch_record(txn, storage.log_db, cid, seq))
            marker.read_position = (3, 10)  # what an older writer stored after reading everything
            for slot in (0, 1):  # an older writer kept every marker under its log key
                txn.delete(slot_key(cid, slot), db=storage.log_db)
            txn.put(log_key(cid, seq), encode_marker(marker), db=storage.log_db)

        storage.write(plant)
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.read_position == Position(3, 0)


def test_reads_persist_delivery_counts_never_the_read_position(store_path: Path) -> None:
    """The read position is not persisted; what a read changes on disk is the delivery
    count of each entry it hands out. Moving the read position alone (a rewind) writes nothing."""
    _store(store_path)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cur = topic.cursor("c")
        store.flush()
        assert not cur.dirty
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        asyncio.run(d.read_more(4))
        d.rewind()
        asyncio.run(d.read_more(4))
        assert cur.dirty and store.flush().markers == 1
        d.rewind()
        assert not cur.dirty and store.flush().markers == 0
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.read_position == Position(3, 0)
        assert cur.delivery_counts() == {Position(3, e): 2 for e in range(4)}


CHILD = r"""
import asyncio, random, sys
from ackstore import AckStore, Dispatcher, Position
from ackstore.testing import InMemoryLedgerReader
path, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
store = AckStore.open(path, sync=True)
topic = store.topic(sys.argv[4])
cur = topic.cursor("c")
d = Dispatcher(cur, InMemoryLedgerReader(topic))
print("ready", flush=True)
for r in range(rounds):
    got = [e.position for e in asyncio.run(d.read_more(rng.randint(1, 40)))]
    print("read", " ".join(str(p) for p in got), flush=True)
    acks = [p for p in got if rng.random() < 0.6]
    if acks:
        cur.ack(acks)
    if rng.random() < 0.2:
        cur.ack_cumulative(Position(3, rng.randint(-1, 3 * r + 40)))
    if rng.random() < 0.5:
        store.flush()
        print("flushed", flush=True)
print("done", flush=True)
"""


@pytest.mark.stress
def test_kill_minus_nine_redelivers_every_dispatched_unacked_entry(tmp_path: Path, long_run: bool) -> None:
    """A child dispatches, acks some and flushes until it is killed; after each kill a fresh
    dispatcher reads everything left, and every entry the child dispatched whose ack did
    not survive is among what is read again (and nothing acked is)."""
    kills = 40 if long_run else 6
    # a child reads at most 400 x 40 entries past M, which stays below 3 x 400 + 40 plus what
    # it acked contiguously: 20,000 entries hold every child's reads (each kill reads the rest)
    entries = 20_000
    path = tmp_path / "store"
    _store(path, entries)
    rng = random.Random(20261124)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    redelivered = 0
    for kill in range(kills):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), str(rng.randrange(1 << 30)), "400", T],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.4))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        dispatched = {
            Position.parse(p) for line in out.splitlines() if line.startswith("read ") for p in line.split()[1:]
        }
        with AckStore.open(path) as store:
            topic = store.topic(T)
            cur = topic.cursor("c")
            acked = {p for p in dispatched if cur.is_acked(p)}
            assert cur.read_position == cur.mark_delete_position.next()
            again = set(_read_all(cur, topic, 5000))
            missing = dispatched - acked - again
            assert not missing, f"kill {kill}: {len(missing)} dispatched unacked not read: {sorted(missing)[:5]}"
            assert not (again & acked)
            redelivered += len(dispatched - acked)
    assert redelivered > 0  # the kills really left dispatched, unacked entries behind
