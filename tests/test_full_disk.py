"""A full disk under a writer: ``close()`` whose flush fails keeps the store open with
every unflushed ack and delivery count, so the caller can free space and close again;
``close(discard=True)`` drops them as a crash would. On a real tmpfs (root only)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, StoreError

from .forms import end_form

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

T = "persistent://t/ns/full"


def fill(directory: Path, leave: int = 0) -> Path:
    """Fill the file system of ``directory`` to its last block with one file, then give
    ``leave`` bytes back; returns the file (remove it to free the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
        except OSError:
            pass
    if leave:
        with open(filler, "r+b") as fh:
            fh.truncate(filler.stat().st_size - leave)
    return filler


def _unflushed(store: AckStore) -> tuple[list[Position], dict[Position, int]]:
    """A store with one flushed state, then acks and delivery counts made since."""
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, 100_000)
    topic.add_ledger(2)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
    cur.ack([Position(1, 0)])
    store.flush()
    acked = [Position(2, e) for e in range(0, 16_000, 2)]
    cur.ack(acked)
    cur.ack_entries(2, range(20_000, 2_500_000, 7))  # ~350 KB of records: more than the file has free
    counts = {Position(1, e): 1 + e % 3 for e in range(1, 400, 2)}
    cur.record_deliveries([p for p, n in counts.items() for _ in range(n)])
    return acked, counts


@pytest.mark.parametrize("interval", [None, 3600.0])
def test_a_close_that_cannot_flush_keeps_the_store_open_with_its_acks(tmpfs, interval: float | None) -> None:  # type: ignore[no-untyped-def]
    disk = tmpfs(2 << 20)
    store = AckStore.open(disk / "s", map_size=1 << 16, flush_interval=interval)
    acked, counts = _unflushed(store)
    filler = fill(disk)
    with pytest.raises(StoreError):
        store.close()
    assert not store.closed
    cur = store.topic(T).cursor("c")
    assert cur.is_acked(acked[-1]) and cur.delivery_count(Position(1, 5)) == counts[Position(1, 5)]
    assert cur._core._listed, "the failed close left the cursor off the next flush"
    filler.unlink()
    store.close()
    assert store.closed
    with AckStore.open(disk / "s", readonly=True) as store:
        cur = store.topic(T).cursor("c")
        assert all(cur.is_acked(p) for p in acked), "acks the caller held were lost"
        assert cur.delivery_counts() == counts


def test_close_discard_drops_what_was_not_flushed(tmpfs) -> None:  # type: ignore[no-untyped-def]
    disk = tmpfs(2 << 20)
    store = AckStore.open(disk / "s", map_size=1 << 16)
    _unflushed(store)
    filler = fill(disk)
    with pytest.raises(StoreError):
        store.close()
    with pytest.raises(TypeError, match="discard must be a bool"):
        store.close(discard=1)  # type: ignore[arg-type]
    store.close(discard=True)
    assert store.closed
    filler.unlink()
    with AckStore.open(disk / "s", readonly=True) as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(1, 0)
        assert cur.ack_range_count == 0 and cur.delivery_counts() == {}


def test_a_write_back_the_full_disk_refuses_keeps_the_ledger_in_memory(tmpfs, caplog) -> None:  # type: ignore[no-untyped-def]
    """Over its budget a cursor writes a dirty ledger's record before it lets the ledger go;
    when the disk refuses that write, the ledger stays in memory (over budget beats losing
    acks), the failure is logged naming the cursor, and the acks reach the disk once there
    is room again."""
    disk = tmpfs(2 << 20)
    store = AckStore.open(disk / "s", map_size=1 << 16)
    topic = store.topic(T)
    for ledger in (1, 2):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 1_000_000)
    topic.add_ledger(3)
    config = CursorConfig(max_individual_ack_cache_bytes=120_000, max_unacked_ranges_to_persist=0)
    cur = topic.cursor("c", config)
    end_form(cur)  # (the parts' cache and its write-backs: the small form holds 60,000 runs in one ledger too)
    store.flush()
    draw = random.Random(5)
    first = sorted(draw.sample(range(1, 1_000_000), 60_000))  # scattered: its record does not compress away
    cur.ack_entries(1, first)
    pages = cur._core._pages
    assert list(pages.cache.loaded) == [1] and 1 in pages.dirty
    filler = fill(disk)
    caplog.clear()
    cur.ack_entries(2, sorted(draw.sample(range(1, 1_000_000), 60_000)))  # 1 must leave: its write fails
    assert [r.getMessage() for r in caplog.records if r.name == "ackstore"] == [
        "ackstore: write-back of 1 ledgers of cursor c failed"
    ]
    assert sorted(pages.cache.loaded) == [1, 2] and 1 in pages.dirty and not pages.cache.swapped
    assert cur.stats().write_backs == 0 and cur.is_acked(Position(1, first[-1]))
    filler.unlink()
    store.close()
    with AckStore.open(disk / "s", readonly=True) as store:
        cur = store.topic(T).cursor("c")
        assert all(cur.is_acked(Position(1, e)) for e in first[::97]) and cur.ack_range_count > 50_000
