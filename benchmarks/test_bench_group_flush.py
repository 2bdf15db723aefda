"""A group flush of 1,000 cursors with one dirty ledger each, against a raw LMDB
transaction making the same changes.

Each round every cursor acks one more entry of its ledger, then:

- ackstore: ``store.flush()`` encodes and writes, in one transaction, each cursor's
  marker, which carries the ledger's few acks since its record (a full marker while it
  repeats few of them, then deltas; a new ledger record only when they outgrow the delta
  bound), and deletes the records that marker no longer needs;
- baseline: one raw py-lmdb write transaction a round makes the very changes ackstore's
  flush of that round made (the same rounds, run untimed from the same state; what each
  put read back from the log, what each deleted found by listing the log's keys before
  and after), on a copy of the log as it was before the first round, opened with the same
  flags (``sync=False``), so only the engine's own work differs: one ``putmulti`` call, as
  the engine itself puts its records, and a ``delete`` a key. Round by round the bytes are
  the same (a full marker grows by an ack a round while it repeats the acks since the
  ledger's record).

The two medians are taken minutes apart, and a busy machine moved their ratio by 2x between
runs; the ackstore case also runs each round's raw transaction right after that round's
flush, and its figure is the median of the rounds' ratios (``paired_speed``).
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import lmdb
import pytest

from ackstore import AckStore, Position
from ackstore.storage.records import log_key

from .conftest import bench_flushes
from .states import UNBOUNDED, T

CURSORS, ENTRIES = 1000, 100_000
ROUNDS = 10
"""flushes timed a case: the raw cases replay ackstore's ten, round by round"""
GROUP = "group flush: 1,000 cursors x 1 dirty ledger"


def _holey_cursors(store: AckStore, count: int):  # type: ignore[no-untyped-def]
    """``count`` cursors with one ledger of ~2,500 ranges each, flushed; returns them and a
    setup that acks one more entry in each."""
    topic = store.topic(T)
    topic.add_ledger(1)
    cursors = [topic.cursor(f"c{i}", UNBOUNDED) for i in range(count)]
    for cur in cursors:
        cur.ack_entries(1, range(1, 5000, 2))
    store.flush()
    rng = random.Random(11)
    fresh = iter(range(5001, ENTRIES))

    def dirty_all() -> None:
        for cur in cursors:
            cur.ack(Position(1, next(fresh) + rng.randrange(2)))

    return cursors, dirty_all


@pytest.fixture
def many(store: AckStore):  # type: ignore[no-untyped-def]
    cursors, dirty_all = _holey_cursors(store, CURSORS)
    return store, cursors, dirty_all


def _flush_pairs(store: AckStore, cursors, before: dict[int, int]) -> list[tuple[bytes, bytes]]:  # type: ignore[no-untyped-def]
    """The (key, value) pairs the newest flush wrote: each cursor's records after the marker
    it had before (a new ledger record, if any, and the new marker)."""

    def read(txn: lmdb.Transaction) -> list[tuple[bytes, bytes]]:
        out = []
        for cur in cursors:
            for s in range(before[cur.cursor_id] + 1, cur.stats().last_marker_seq + 1):
                value = txn.get(log_key(cur.cursor_id, s), db=store.storage.log_db)
                if value is not None:
                    out.append((log_key(cur.cursor_id, s), bytes(value)))
        return out

    return store.storage.read(read)


def _log(store: AckStore) -> dict[bytes, bytes]:
    """Every key and value of the store's log."""
    return store.storage.read(lambda txn: {bytes(k): bytes(v) for k, v in txn.cursor(db=store.storage.log_db)})


def _raw_copy(store: AckStore, path: Path) -> tuple[lmdb.Environment, Any, set[bytes]]:
    """A fresh environment at ``path``, opened with the same flags as the store, holding a
    copy of the store's log as it is now; and the log's keys."""
    start = _log(store)
    env = lmdb.open(str(path), map_size=1 << 30, sync=False, max_dbs=2)
    db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        txn.cursor(db=db).putmulti(sorted(start.items()))
    return env, db, set(start)


def _round(store: AckStore, cursors, before: dict[int, int], keys: set[bytes]):  # type: ignore[no-untyped-def]
    """What the flush just made, from the log's ``keys`` before it: its puts, the keys it
    deleted (sorted), and the log's keys now."""
    now = set(_log(store))
    return _flush_pairs(store, cursors, before), sorted(keys - now), now


def _put_and_delete(env: lmdb.Environment, db: Any, pairs: list[tuple[bytes, bytes]], gone: list[bytes]) -> None:
    """One raw write transaction making a round's changes: one ``putmulti`` call (the pairs
    built here, as the engine builds its own) and a ``delete`` a key."""
    with env.begin(write=True) as txn:
        txn.cursor(db=db).putmulti([(key, value) for key, value in pairs])
        for key in gone:
            txn.delete(key, db=db)


def _raw_transaction(many, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A raw py-lmdb write transaction a round making what ackstore's flush of that round
    made: the :data:`ROUNDS` rounds the ackstore case times, run here untimed on ``many``
    (the same state, the same acks), each one's puts and deletes replayed in turn on a copy
    of the log as it was before them, in a fresh environment opened with the same flags.
    Returns the function to time, the last round's bytes (the figure the ackstore case
    reports), the deletions of all the rounds, and the environment."""
    store, cursors, dirty_all = many
    env, db, keys = _raw_copy(store, tmp_path / "raw")
    rounds: list[tuple[list[tuple[bytes, bytes]], list[bytes]]] = []
    for _ in range(ROUNDS):
        dirty_all()
        before = {cur.cursor_id: cur.stats().last_marker_seq for cur in cursors}
        store.flush()
        pairs, gone, keys = _round(store, cursors, before, keys)
        rounds.append((pairs, gone))
    replay = iter(rounds)

    def putmulti_and_delete() -> None:
        _put_and_delete(env, db, *next(replay))

    return putmulti_and_delete, sum(len(k) + len(v) for k, v in rounds[-1][0]), sum(len(g) for _, g in rounds), env


def test_group_flush_raw_lmdb_baseline(benchmark, many, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The baseline: the raw transaction, one ``putmulti`` call (the fastest way py-lmdb
    writes them) and the same deletions."""
    run, nbytes, deleted, env = _raw_transaction(many, tmp_path)
    assert deleted > 0, "the rounds' flushes trimmed nothing: the case would not show what a trim costs"
    benchmark.group = GROUP
    benchmark.pedantic(run, rounds=ROUNDS)
    benchmark.extra_info.update(baseline=True, bytes=nbytes)
    env.close()


def test_group_flush_ackstore(benchmark, many, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ackstore's flush, each round paired with the raw transaction making that very round's
    puts and deletes right after it (on a copy of the log as it was before the first round),
    so that both see the machine as it was then: ``paired_speed``, the median of each
    round's raw time over ackstore's, is the group's figure (the baseline case above runs at
    another time, and a busy machine moved the ratio of the two medians by 2x)."""
    store, cursors, dirty_all = many
    env, db, keys = _raw_copy(store, tmp_path / "paired")
    before: dict[int, int] = {}
    ours: list[float] = []
    raw: list[float] = []
    written: list[int] = []

    def replay() -> None:
        """The round just flushed, made again by a raw transaction, timed."""
        nonlocal keys
        pairs, gone, keys = _round(store, cursors, before, keys)
        t = time.perf_counter()
        _put_and_delete(env, db, pairs, gone)
        raw.append(time.perf_counter() - t)

    def setup() -> None:
        if ours:
            replay()
        dirty_all()
        before.clear()
        before.update({cur.cursor_id: cur.stats().last_marker_seq for cur in cursors})

    def flush() -> None:
        t = time.perf_counter()
        written.append(store.flush().bytes_written)
        ours.append(time.perf_counter() - t)

    benchmark.group = GROUP
    benchmark.pedantic(flush, setup=setup, rounds=ROUNDS)
    replay()
    env.close()
    speed = statistics.median(r / o for r, o in zip(raw, ours, strict=True))
    benchmark.extra_info.update(bytes=written[-1], paired_speed=speed)


SCALE = "per-cursor cost: one store of 10,000 cursors vs ten stores of 1,000"


def test_group_flush_ten_stores_of_1000(benchmark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The baseline: the same 10,000 cursor flushes as ten flushes of 1,000-cursor stores."""
    stores = [AckStore.open(tmp_path / f"s{i}", sync=False) for i in range(10)]
    dirties = [_holey_cursors(s, CURSORS)[1] for s in stores]

    def dirty() -> None:
        for d in dirties:
            d()

    benchmark.group = SCALE
    benchmark.extra_info.update(baseline=True, ops=10 * CURSORS)
    benchmark.pedantic(lambda: [s.flush() for s in stores], setup=dirty, rounds=5)
    for s in stores:
        s.close()


def test_group_flush_one_store_of_10000(benchmark, store: AckStore) -> None:  # type: ignore[no-untyped-def]
    """Issue 15's target: within 1.3x of the baseline's time (speed >= 0.77x)."""
    _, dirty_all = _holey_cursors(store, 10 * CURSORS)
    benchmark.extra_info.update(ops=10 * CURSORS)
    bench_flushes(benchmark, store, SCALE, dirty_all, rounds=5)


IDLE = 10_000
IDLE_GROUP = "flush with 10,000 idle cursors and 10 dirty ones"


def _ten_busy(store: AckStore, total: int):  # type: ignore[no-untyped-def]
    """``total`` cursors that flushed once; returns a setup that makes the first 10 dirty."""
    topic = store.topic(T)
    topic.add_ledger(1)
    cursors = [topic.cursor(f"c{i}", UNBOUNDED) for i in range(total)]
    for cur in cursors:
        cur.ack(Position(1, 3))
    store.flush()
    busy = cursors[:10]
    fresh = iter(range(5, 10_000_000, 2))

    def dirty_some() -> None:
        for cur in busy:
            cur.ack(Position(1, next(fresh)))

    return dirty_some


def test_flush_of_10_dirty_cursors_alone(benchmark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The baseline: the same 10 dirty cursors in a store that holds nothing else."""
    with AckStore.open(tmp_path / "alone", sync=False) as store:
        dirty_some = _ten_busy(store, 10)
        benchmark.extra_info.update(baseline=True)
        bench_flushes(benchmark, store, IDLE_GROUP, dirty_some, rounds=30)


def test_flush_of_10_dirty_among_10000_idle(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    """Only listed (changed) cursors are visited: 10,000 idle ones should cost nothing."""
    dirty_some = _ten_busy(store, IDLE)
    bench_flushes(benchmark, store, IDLE_GROUP, dirty_some, rounds=30)
    assert store.last_flush is not None and store.last_flush.cursors == 10


def test_flush_visiting_every_cursor(benchmark, store) -> None:  # type: ignore[no-untyped-def]
    """What a flush cost before cursors listed themselves: every cursor visited (close() still does)."""
    dirty_some = _ten_busy(store, IDLE)
    benchmark.group = IDLE_GROUP
    benchmark.pedantic(
        lambda: store.cursor_side.flush_cursors(store.cursor_side.all_cursors()), setup=dirty_some, rounds=30
    )
