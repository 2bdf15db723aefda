"""Base + delta folding (format 5): a ledger changed by a few acks is flushed as those acks
in the marker, against its newest record; past a threshold a new base record is written.
A seeded model-based run checks every state a crash or a reopen can bring back."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import lmdb
import pytest
from pyroaring import BitMap, FrozenBitMap

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore.checker import check
from ackstore.cursor import lane
from ackstore.storage import records
from ackstore.storage.index_entry import IndexEntry
from ackstore.storage.records import RECORD_LEDGER, RECORD_MARKER

from . import rawlog

T = "persistent://t/ns/deltas"
LEDGERS, ENTRIES = (1, 2, 3), 3000


def _open(path: Path, budget: int):  # type: ignore[no-untyped-def]
    store = AckStore.open(path, sync=False)
    topic = store.topic(T)
    if not topic.ledgers():
        for ledger in LEDGERS:
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, ENTRIES)
    cfg = CursorConfig(max_individual_ack_cache_bytes=budget, full_marker_every=5, max_unacked_ranges_to_persist=0)
    return store, topic.cursor("c", cfg)


def _state(cur) -> set[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return {(lg, e) for lg, ranges in cur.ledger_ranges() for a, b in ranges for e in range(a, b + 1)}


def _run(tmp_path: Path, seed: int, steps: int) -> dict[str, int]:
    """Random acks (entry 0 of each ledger never: the mark-delete position stays put, so
    only deltas and rebases are at work), flushes, crashes and reopens, with a small budget
    so ledgers with acks since their record are swapped out and in again."""
    rng = random.Random(seed)
    path = tmp_path / f"s{seed}"
    budget = rng.choice([1, 2000, 1 << 30])
    store, cur = _open(path, budget)
    acked: set[tuple[int, int]] = set()
    flushed: set[tuple[int, int]] = set()
    seen = {"deltas": 0, "records": 0, "crashes": 0}
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.6:
            ledger = rng.choice(LEDGERS)
            batch = [(ledger, rng.randrange(1, ENTRIES)) for _ in range(rng.choice([1, 1, 2, 5, 40]))]
            cur.ack([Position(*p) for p in batch])
            acked.update(batch)
        elif roll < 0.85:
            stats = store.flush()
            seen["records"] += stats.ledger_records
            seen["deltas"] += stats.markers and not stats.ledger_records
            flushed = set(acked)
        elif roll < 0.95:
            testing.crash(store)
            seen["crashes"] += 1
            acked = set(flushed)
            store, cur = _open(path, budget)
        else:
            store.close()
            flushed = set(acked)
            store, cur = _open(path, budget)
        cur._check()
        assert _state(cur) == acked
    store.close()
    return seen


@pytest.mark.stress
def test_base_and_delta_folding_against_a_model(tmp_path: Path, long_run: bool) -> None:
    totals = {"deltas": 0, "records": 0, "crashes": 0}
    for seed in range(40 if long_run else 6):
        for key, value in _run(tmp_path, seed, 300 if long_run else 120).items():
            totals[key] += value
    assert totals["deltas"] > 0 and totals["records"] > 0 and totals["crashes"] > 0, totals


def test_a_delta_grows_until_it_is_folded_into_a_new_base(tmp_path: Path, marker_layout: None) -> None:
    store, cur = _open(tmp_path / "s", 1 << 30)
    cur.ack([Position(1, e) for e in range(1, ENTRIES, 2)])  # 1,500 acks: the base
    assert store.flush().ledger_records == 1
    written = []
    for e in range(2, 2 * lane.DELTA_MAX_ACKS + 6, 2):  # one new ack per flush
        cur.ack(Position(1, e))
        written.append(store.flush().ledger_records)
    assert written[: lane.DELTA_MAX_ACKS] == [0] * lane.DELTA_MAX_ACKS  # the marker carries them
    assert written[lane.DELTA_MAX_ACKS] == 1  # one past the bound: folded into a new base
    assert written[lane.DELTA_MAX_ACKS + 1 :] == [0] * (len(written) - lane.DELTA_MAX_ACKS - 1)
    cur.ack_cumulative(Position(1, 10))  # a removal (below M) is never a delta
    assert store.flush().ledger_records == 1
    testing.crash(store)
    store, cur = _open(tmp_path / "s", 1 << 30)
    assert cur.is_acked(Position(1, 2 * lane.DELTA_MAX_ACKS + 4)) and not cur.is_acked(Position(2, 5))
    store.close()


def test_a_delta_is_at_most_its_share_of_the_ledgers_acks_and_few_ranges_do_not_bound_it(
    tmp_path: Path, marker_layout: None
) -> None:
    """Acks since the base travel in the marker while they are at most DELTA_MAX_SHARE of
    the ledger's acks, counted whole: a base of one long run (one range) carries as many
    as a holey one. Exactly at the share a delta, one past it a new base."""
    share = lane.DELTA_MAX_SHARE
    base = 7 * 8  # one run of 56 acks: 8 more are exactly an eighth of the 64 then
    assert share == 1 / 8
    store, cur = _open(tmp_path / "s", 1 << 30)
    cur.ack_entries(1, range(100, 100 + base))
    cur.ack_entries(2, range(100, 2100))  # one run of 2,000
    assert store.flush().ledger_records == 2
    cur.ack_entries(1, range(200, 216, 2))  # 8 isolated acks since the base: 8 of 64
    cur.ack_entries(2, range(2200, 2300, 2))  # 50 of 2,050, 51 ranges: far under the share of acks
    assert store.flush().ledger_records == 0
    cur.ack(Position(1, 300))  # 9 of 65
    assert store.flush().ledger_records == 1
    store.close()
    store, cur = _open(tmp_path / "s", 1 << 30)
    assert cur.is_acked(Position(1, 214)) and cur.is_acked(Position(1, 300)) and cur.is_acked(Position(2, 2298))
    assert not cur.is_acked(Position(2, 2299))
    store.close()


def test_delivery_counts_since_the_base_count_toward_a_deltas_share_with_the_ledgers_counts(
    tmp_path: Path, marker_layout: None
) -> None:
    """Delivery counts set since the base ride in the marker as acks do, within the same
    share, of the ledger's acks and counts together: 8 counts beside 56 acks are exactly an
    eighth of 64, one count more is past it."""
    store, cur = _open(tmp_path / "s", 1 << 30)
    cur.ack_entries(1, range(100, 156))  # one run of 56
    assert store.flush().ledger_records == 1
    cur.record_deliveries([Position(1, e) for e in range(200, 208)])  # 8 counts since the base
    assert store.flush().ledger_records == 0
    cur.record_deliveries([Position(1, 300)])  # 9 of 65
    assert store.flush().ledger_records == 1
    store.close()
    store, cur = _open(tmp_path / "s", 1 << 30)
    assert cur.delivery_counts() == {Position(1, e): 1 for e in (*range(200, 208), 300)}
    store.close()


def test_recovery_resolves_the_index_the_writer_held_when_an_ack_took_a_count_away(
    tmp_path: Path, marker_layout: None
) -> None:
    """A delta marker names a delivery count, a later one the ack of that entry: recovery's
    index is the writer's (the ack took the count away, so what a delta would carry stays
    within its bound), not the union of the two."""
    store = AckStore.open(tmp_path / "s", sync=False)
    topic = store.topic(T)
    for ledger in range(1, 13):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, ENTRIES)
    cur = topic.cursor("c", CursorConfig(full_marker_every=5, max_unacked_ranges_to_persist=0))
    for ledger in range(1, 13):  # eleven that do not change: a full marker outweighs a delta
        cur.ack_entries(ledger, range(100, 400, 2))
    assert store.flush().ledger_records == 12
    cur.record_deliveries([Position(1, e) for e in (401, 403, 405)])
    assert (store.flush().ledger_records, cur.stats().deltas_since_full_marker) == (0, 1)  # the counts in a delta
    cur.ack([Position(1, 403), Position(1, 7)])
    assert (store.flush().ledger_records, cur.stats().deltas_since_full_marker) == (0, 2)  # the acks in the next
    held = cur._core._pages.index[1]
    assert held.counts == {401: 1, 405: 1} and sorted(held.adds or ()) == [7, 403]
    store.close()
    store = AckStore.open(tmp_path / "s", sync=False)
    cur = store.topic(T).cursor("c")
    assert cur._core._pages.index[1] == held
    assert cur.delivery_counts() == {Position(1, 401): 1, Position(1, 405): 1}
    cur._check()
    store.close()


def test_each_delta_marker_names_only_the_acks_since_the_chain_named_them(tmp_path: Path, marker_layout: None) -> None:
    """The common flush (a few acks in a ledger that has a record) writes a delta marker
    naming the acks since the previous marker, and the chain adds up to every ack since the
    record; with a delivery count in the ledger the same shape comes from the general path."""
    from ackstore.storage.log import resolve_marker
    from ackstore.storage.records import decode_marker, log_key

    store, cur = _open(tmp_path / "s", 1 << 30)
    cur.ack([Position(1, e) for e in range(1, 1200, 2)])  # past the state layout's ranges
    cur.ack([Position(2, e) for e in range(1, 50, 2)])  # a ledger that does not change: deltas
    store.flush()

    def newest():  # type: ignore[no-untyped-def]
        seq = cur.stats().last_marker_seq
        raw = store.storage.read(lambda txn: bytes(txn.get(log_key(cur.cursor_id, seq), db=store.storage.log_db)))
        index = store.storage.read(lambda txn: resolve_marker(txn, store.storage.log_db, cur.cursor_id, seq).index)
        return decode_marker(raw), index

    deltas = 0
    for e in range(2, 20, 2):
        cur.ack(Position(1, e))
        stats = store.flush()
        assert (stats.markers, stats.ledger_records) == (1, 0)
        marker, index = newest()
        if not marker.full:  # after a full marker (which names them all) too: only the new one
            deltas += 1
            assert sorted(marker.index[1].adds) == [e]
        assert sorted(index[1].adds) == list(range(2, e + 1, 2))
    assert deltas >= 6
    cur.record_deliveries([Position(1, 22)])  # a count rides in the general path's delta
    cur.ack(Position(1, 20))
    store.flush()
    marker, index = newest()
    assert sorted(index[1].adds) == list(range(2, 21, 2)) and index[1].counts == {22: 1}
    if not marker.full:
        assert sorted(marker.index[1].adds) == [20] and marker.index[1].counts == {22: 1}
    store.close()


def test_a_cursor_whose_every_ledger_changed_writes_full_markers_while_they_are_small(
    tmp_path: Path, marker_layout: None
) -> None:
    """A full marker costs what the delta costs plus the acks the chain named already: while
    that is at most SMALL_CHAIN bytes the flush writes it, so the reopen of a small cursor
    reads one marker and no chain; past it, delta markers again (and a full one when due)."""
    from ackstore.storage.log import resolve_marker

    store, cur = _open(tmp_path / "s", 1 << 30)
    cur.ack([Position(1, e) for e in range(1, 1200, 2)])
    store.flush()
    kinds = []
    for e in range(2, 2 + 2 * 30, 2):
        cur.ack(Position(1, e))
        stats = store.flush()
        assert (stats.markers, stats.ledger_records) == (1, 0)
        kinds.append(stats.full_markers)
        newest = partial(
            resolve_marker, db=store.storage.log_db, cursor_id=cur.cursor_id, seq=cur.stats().last_marker_seq
        )
        resolved = store.storage.read(newest)
        assert sorted(resolved.index[1].adds) == list(range(2, e + 1, 2))
        assert len(resolved.chain) == 1 + resolved.deltas_since_full
    small = lane.SMALL_CHAIN // 4 + 1  # the acks a full marker may repeat, plus the new one
    assert kinds[:small] == [1] * small  # one marker to read at a reopen
    assert 0 in kinds[small:]  # then deltas: a full marker would repeat too much
    testing.crash(store)
    store, cur = _open(tmp_path / "s", 1 << 30)
    assert all(cur.is_acked(Position(1, e)) for e in range(2, 2 + 2 * 30, 2))
    cur._check()
    store.close()


@pytest.mark.parametrize("counted", [False, True], ids=["acks", "delivered-then-acked"])
def test_acking_the_next_entries_one_at_a_time_writes_no_record_again(tmp_path: Path, counted: bool) -> None:
    """A consumer acking M + 1, M + 2, ... one call each, with 5,000 scattered acks held
    above M: the flush writes M's move (a marker), not the ledger's record again (each such
    ack passed through the ledger's acks, and the removal below M made the next flush write
    a new base of the whole record). With delivery counts on those entries (a dispatcher
    counted them) the same, and the counts go with the acks. A reopen shows every ack."""
    path = tmp_path / "s"
    rng = random.Random(5)
    held = rng.sample(range(100, 50_000), 5000)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack([Position(1, e) for e in held])
        if counted:
            cur.record_deliveries([Position(1, e) for e in range(10)])
        record = store.flush().bytes_written
        assert record > 3000
        for e in range(10):
            cur.ack(Position(1, e))
        moved = store.flush().bytes_written
        assert moved < 100, (moved, record)
        assert cur.mark_delete_position == Position(1, 9) and cur.delivery_counts() == {}
    with AckStore.open(path, readonly=True) as store:
        again = store.topic(T).open_cursors()["c"]
        assert again.mark_delete_position == Position(1, 9)
        runs = len(held) - len(set(held) & {e + 1 for e in held})  # an entry after an acked one joins its run
        assert again.ack_range_count == runs
        assert again.delivery_counts() == {} and all(again.is_acked(Position(1, e)) for e in held)


def test_log_usage_says_which_records_the_newest_chain_references(tmp_path: Path, marker_layout: None) -> None:
    """Four flushes in the marker layout (ledgers 1-3 with acks; a new base of ledger 2 and
    a delta marker; a delta marker; a new base of ledger 3 and a full marker): nine records,
    every byte of them counted; the garbage is the superseded records of ledgers 2 and 3
    and the chain of markers the full one replaced, the rest (what it references) is live."""
    path = tmp_path / "s"
    steps = [
        [Position(lg, e) for lg in (1, 2, 3) for e in range(5, 900, 3)],
        [Position(2, e) for e in range(6, 900, 3)],
        [Position(2, 7)],
        [Position(3, e) for e in range(6, 900, 3)],
    ]
    for acks in steps:  # a process each: the file is read between them
        with AckStore.open(path, sync=False) as store:
            topic = store.topic(T)
            if not topic.ledgers():
                for ledger in (1, 2, 3):
                    topic.add_ledger(ledger)
                    topic.close_ledger(ledger, 1000)
            cur = topic.cursor("c", CursorConfig(full_marker_every=100))
            cur.ack(acks)
            store.flush()
            usage = cur.log_usage()
    sizes = rawlog.sizes(path)
    led, mark = RECORD_LEDGER, RECORD_MARKER
    assert [t for _, t in rawlog.records(path)] == [led, led, led, mark, led, mark, mark, led, mark]
    garbage = sum(sizes[seq] for seq in (1, 2, 3, 5, 6))  # records 4 and 7 replaced 1 and 2, marker 8 the chain
    assert (usage.records, usage.record_bytes) == (9, sum(sizes.values()))
    assert (usage.garbage_bytes, usage.live_bytes, usage.history_bytes) == (garbage, sum(sizes.values()) - garbage, 0)


@pytest.mark.parametrize("where", ["slot", "log key"])
def test_a_delta_marker_against_a_state_marker_reads_as_base_plus_adds(tmp_path: Path, where: str) -> None:
    """The format reads a delta marker whose chain starts at a state marker (format 10), in a
    state slot or under a log key (a cursor that keeps history writes its states there):
    the state marker is the base of every ledger it holds, and the delta's index entry adds
    its acks, as for a ledger record. No flush writes one yet (a cursor that grows out of
    the state layout writes ledger records); recovery, the open and ``check`` must read it
    all the same, as the form would write it once it keeps a state past a slot's bound."""
    path = tmp_path / "store"
    config = CursorConfig(history_seconds=3600 if where == "log key" else 0)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100)
        topic.add_ledger(2)
        cur = topic.cursor("c", config)
        cur.ack_entries(1, BitMap([1, 2, 3, 10, 11, 20, 50]))  # entry 0 unacked: M stays put
        store.flush()
        cid, base = cur.cursor_id, cur.stats().last_marker_seq
    assert rawlog.slots(path, cid) == ({0: base} if where == "slot" else {})
    seq, record, _ = rawlog._scan(path, cid)[-1]
    assert seq == base and records.decode_marker(record, seq).ledgers is not None  # a state marker
    delta = records.Marker(
        False, base, (1, -1), (1, 0), {}, {1: IndexEntry(base, 5, FrozenBitMap([60]), None)}, extra={"c": cid}
    )
    env = lmdb.open(str(path), max_dbs=8, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(records.log_key(cid, base + 1), records.encode_marker(delta), db=env.open_db(b"log", txn=txn))
    env.close()
    assert check(path) == []
    with AckStore.open(path, readonly=True) as store:
        cur = store.topic(T).cursor("c", config)
        assert cur.stats().last_marker_seq == base + 1
        assert list(cur.ledger_ranges()) == [(1, [(1, 3), (10, 11), (20, 20), (50, 50), (60, 60)])]
