"""Store behaviour: flush cost, group commit, map growth, threads, lifecycle, readers."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore.errors import InvalidArgumentError, StoreClosedError
from ackstore.storage import codecs

from .codec_impls import NOT_COMPILED
from .forms import end_form

T = "persistent://t/ns/store"


def _ledgers(topic, n: int, entries: int) -> None:  # type: ignore[no-untyped-def]
    for ledger in range(1, n + 1):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, entries)


def _holey_cursor(store: AckStore, n: int, entries: int, step: int):  # type: ignore[no-untyped-def]
    """A cursor over ``n`` sealed ledgers with every ``step``-th entry acked (from entry 1), all in memory."""
    topic = store.topic(T)
    _ledgers(topic, n, entries)
    cur = topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30, max_unacked_ranges_to_persist=0))
    for ledger in range(1, n + 1):
        cur.ack([Position(ledger, e) for e in range(1, entries, step)])
    return cur


@pytest.mark.slow
def test_flush_writes_only_the_dirty_ledger_and_a_delta_marker(store_path: Path) -> None:
    with AckStore.open(store_path, sync=False) as store:
        cur = _holey_cursor(store, 10_000, 1000, 3)
        first = store.flush()
        assert first.ledger_records == 10_000 and first.full_markers == 1
        cur.ack([Position(5000, 2)])
        stats = store.flush()  # one new ack in a ledger of 333: the delta marker carries it alone
        assert (stats.ledger_records, stats.markers, stats.full_markers) == (0, 1, 0)
        assert stats.bytes_written <= 120, stats.bytes_written
        assert cur.stats().last_flush_bytes == stats.bytes_written
        cur.ack([Position(4000, e) for e in range(2, 1000, 3)])  # a third of ledger 4000: a new record
        from ackstore.storage.records import encode_ledger

        stats = store.flush()
        record = len(encode_ledger(4000, cur._core._pages.cache.loaded[4000])) + 16
        assert (stats.ledger_records, stats.markers) == (1, 1)
        assert stats.bytes_written <= 1.2 * record + 200, (stats.bytes_written, record)
        assert first.bytes_written > 100 * stats.bytes_written
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(5000, 2)) and cur.is_acked(Position(4000, 998))
        assert not cur.is_acked(Position(5000, 3))
        cur._check()


def test_group_commit_one_transaction_for_many_cursors(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        _ledgers(topic, 3, 100)
        curs = [topic.cursor(f"s{i}") for i in range(50)]
        for i, cur in enumerate(curs):
            cur.ack([Position(2, i)])
        stats = store.flush()
        # each cursor's whole state is one state marker: no ledger record
        assert stats.cursors == 50 and stats.markers == 50 and stats.full_markers == 50 and stats.ledger_records == 0
        assert store.flush().cursors == 0  # nothing dirty any more
    with AckStore.open(store_path, readonly=True) as ro:
        topic = ro.topic(T)
        assert [list(topic.cursor(f"s{i}").ack_ranges()) for i in (0, 49)] == [
            [(Position(2, 0), Position(2, 0))],
            [(Position(2, 49), Position(2, 49))],
        ]


def test_mark_delete_moves_across_ledgers_and_cumulative(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        _ledgers(topic, 3, 4)
        topic.add_ledger(4)
        cur = topic.cursor("c")
        assert cur.mark_delete_position == Position(1, -1)
        cur.ack([Position(2, e) for e in range(4)] + [Position(3, 0)])
        assert cur.ack_range_count == 2  # a range never spans two ledgers: 2:0..2:3 and 3:0
        cur.ack([Position(1, e) for e in range(4)])
        assert cur.mark_delete_position == Position(3, 0)
        assert cur.read_position == Position(3, 1)
        cur.ack_cumulative(Position(3, 3))
        assert cur.mark_delete_position == Position(4, -1)
        cur.ack_batch_index(Position(4, 0), 3, [0, 2])
        assert not cur.is_acked(Position(4, 0))
        assert cur.batch_acked_indexes(Position(4, 0)) == frozenset({0, 2})
        cur.ack_batch_index(Position(4, 0), 3, [1])
        assert cur.mark_delete_position == Position(4, 0)
        assert cur.batch_acked_indexes(Position(4, 0)) is None


@pytest.mark.slow
def test_map_grows_without_the_caller_seeing_it(store_path: Path) -> None:
    with AckStore.open(store_path, map_size=1 << 16, sync=False) as store:
        cur = _holey_cursor(store, 200, 5000, 2)
        stats = store.flush()
        assert store.map_grows > 0
        expected = list(cur.ack_ranges())
    assert stats.ledger_records == 200
    with AckStore.open(store_path) as store:
        assert list(store.topic(T).cursor("c").ack_ranges()) == expected


@pytest.mark.slow
def test_acks_go_on_while_a_flush_encodes(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush encodes outside the store lock: while it encodes one cursor's 1,000 new records,
    acks on another cursor, and on the same cursor's ledger, complete; none is lost.

    No timing: the big plan's encode() waits until the main thread has made its acks (a
    lock held while encoding would block them, so the wait would run out and the test fail).
    The number of acks is fixed, whatever the machine's speed."""
    from ackstore.cursor.plan import FlushPlan

    real = FlushPlan.encode
    encoding, acked = threading.Event(), threading.Event()
    acked_in_time: list[bool] = []

    def gated(plan: FlushPlan) -> None:
        if len(plan.records) >= 1000:  # the big cursor's plan: let the acks run first
            encoding.set()
            acked_in_time.append(acked.wait(timeout=60))
        real(plan)

    monkeypatch.setattr(FlushPlan, "encode", gated)
    rng = random.Random(8)
    acks = 50
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        for ledger in range(1, 1001):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 5_000_000)
        topic.add_ledger(1001)
        unbounded = CursorConfig(max_unacked_ranges_to_persist=0)
        big, other = topic.cursor("big", unbounded), topic.cursor("other", unbounded)
        store.flush()
        for ledger in range(1, 1001):  # 1,000 new ledger records of 200 scattered acks
            big.ack_entries(ledger, rng.sample(range(100_000), 200))
        flusher = threading.Thread(target=store.flush)
        flusher.start()
        assert encoding.wait(timeout=60)
        for i in range(acks):  # while the big plan encodes
            other.ack(Position(1001, 2 * i + 1))
            big.ack(Position(1000, 4_000_000 + 2 * i + 1))
        acked.set()
        flusher.join()
        assert acked_in_time == [True]  # a lock held while encoding would have blocked the acks
        store.flush()
        expected = {name: list(c.ack_ranges()) for name, c in (("big", big), ("other", other))}
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert {name: list(topic.cursor(name).ack_ranges()) for name in expected} == expected
        assert expected["other"][-1][1] == Position(1001, 2 * acks - 1)
        assert expected["big"][-1][1] == Position(1000, 4_000_000 + 2 * acks - 1)


def test_threads_ack_while_another_flushes(store_path: Path) -> None:
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        _ledgers(topic, 4, 20_000)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        stop = threading.Event()
        errors: list[BaseException] = []

        def flusher() -> None:
            while not stop.is_set():
                try:
                    store.flush()
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

        def acker(ledger: int) -> None:
            try:
                for start in range(1, 20_000, 400):
                    cur.ack([Position(ledger, e) for e in range(start, start + 400, 2)])
                    cur.ack(Position(ledger, start + 1))
            except BaseException as exc:  # pragma: no cover
                errors.append(exc)

        f = threading.Thread(target=flusher)
        f.start()
        workers = [threading.Thread(target=acker, args=(ledger,)) for ledger in range(1, 5)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        stop.set()
        f.join()
        assert errors == []
        cur._check()
        expected = list(cur.ack_ranges())
        expected_count = cur.ack_range_count
    assert expected_count == 4 * 10_000 - 4 * 50
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert list(cur.ack_ranges()) == expected


def test_close_flushes_and_background_flusher(store_path: Path) -> None:
    with AckStore.open(store_path, flush_interval=0.05) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(full_marker_every=4))
        cur.ack([Position(1, 3)])
        deadline = time.monotonic() + 60  # a bound for a broken flusher, not a speed
        while cur.dirty and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not cur.dirty  # the background flusher wrote it
        cur.ack([Position(1, 9)])
    with AckStore.open(store_path) as store:  # close() flushed the last ack
        cur = store.topic(T).cursor("c")
        assert list(cur.ack_ranges()) == [(Position(1, 3), Position(1, 3)), (Position(1, 9), Position(1, 9))]
        assert cur.config.full_marker_every == 4  # the persisted config came back


@contextmanager
def _collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the block (after one collection), and back on
    after it if it was on: what the block frees, reference counting alone frees."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _cyclic_garbage() -> set[str]:
    """The type names of what one collection finds unreachable (kept aside, then dropped)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


#: the types of a cursor and of its parts, none of which may be left to the cyclic collector
CURSOR_TYPES = {"Cursor", "CursorCore", "AckState", "Pages", "LedgerCache"}


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("ended", [False, True], ids=["small form", "parts"])
@pytest.mark.parametrize("discard", [False, True], ids=["flushed", "discarded"])
def test_a_closed_store_lets_go_of_its_cursors(store_path: Path, readonly: bool, ended: bool, discard: bool) -> None:
    """Closing lets go of every cursor the store opened: once the application drops its
    handles, reference counting frees them and their ack state, their parts' included, with
    the cyclic collector off (no store, topic, cursor or parts cycle left for it to find),
    and a handle kept raises. ``discard``: the writer's cursors changed since their flush
    and closed without flushing (still listed for the next flush)."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        _ledgers(topic, 3, 100)
        for c in range(5):
            cur = topic.cursor(f"c{c}")
            cur.ack([Position(1, e) for e in range(2, 100, 3)])
            if ended:
                end_form(cur)
    with _collector_off():
        store = AckStore.open(store_path, readonly=readonly)
        cursors = store.topic(T).open_cursors()
        kept = cursors.pop("c0")
        for cur in cursors.values():
            if ended:
                end_form(cur)
                assert cur._core.small is None
            if discard and not readonly:
                cur.ack(Position(1, 99))
        gone = [weakref.ref(cur) for cur in cursors.values()] + [weakref.ref(cur._core) for cur in cursors.values()]
        assert sum(r() is not None for r in gone) == 8
        store.close(discard=discard)
        del cursors, cur
        assert [r() for r in gone] == [None] * 8  # freed by reference counting alone
        assert _cyclic_garbage().isdisjoint(CURSOR_TYPES | {"Topic"})
        with pytest.raises(StoreClosedError):
            kept.ack(Position(1, 50))


def test_a_deleted_cursors_parts_go_with_its_handle(store_path: Path) -> None:
    """A cursor deleted while the store stays open: once its handle is dropped, reference
    counting frees it and its parts (no cycle left through its pages for the collector)."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        _ledgers(topic, 2, 100)
        cur = topic.cursor("c")
        cur.ack([Position(1, e) for e in range(2, 100, 3)])
        end_form(cur)
        with _collector_off():
            assert topic.delete_cursor("c")
            del cur
            assert _cyclic_garbage().isdisjoint(CURSOR_TYPES)


READER = """
import sys
from ackstore import AckStore
with AckStore.open(sys.argv[1], readonly=True) as s:
    c = s.topic(sys.argv[2]).cursor("c")
    print(c.mark_delete_position, c.ack_range_count)
"""


def test_readonly_process_sees_flushed_state_while_writer_runs(store_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, 0), Position(1, 5)])
        store.flush()
        cur.ack([Position(1, 7)])  # not flushed: the reader must not see it
        out = subprocess.run(
            [sys.executable, "-c", READER, str(store_path), T], capture_output=True, text=True, env=env, check=True
        )
        assert out.stdout.split() == ["1:0", "1"]


def test_log_usage_counts_live_and_garbage_and_compaction_keeps_the_live(
    store_path: Path, marker_layout: None, parts_chains: None
) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("sub", CursorConfig(full_marker_every=100))
        for round_ in range(5):  # the same ledger rewritten: each flush supersedes the last record
            cur.ack([Position(1, e) for e in range(round_, 4000, 7)])  # over the state layout's runs
            store.flush()
        usage = cur.log_usage()
        # each flush: the ledger's record and a full marker (its one ledger changed, so the
        # marker is the whole index); a full marker that is not due trims only once the bytes
        # written since the last trim outgrow the chain's allowance: the third flush trimmed
        # the first two's, none since
        assert usage.records == 8
        assert usage.record_bytes == usage.live_bytes + usage.garbage_bytes and usage.garbage_bytes > 0
        store.compact()
        after = cur.log_usage()
        assert after.garbage_bytes == 0 and after.records < usage.records
        assert after.live_bytes <= usage.live_bytes
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topic(T).cursor("sub").log_usage() == after


def test_a_writer_raises_an_older_format_version_and_reads_its_records(store_path: Path) -> None:
    from ackstore.storage.records import FORMAT_VERSION

    from . import rawlog

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.cursor("sub").ack([Position(1, e) for e in range(0, 100, 2)])
    rawlog.set_format(store_path, 1)  # as an ackstore of format 1 left it
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == 1  # a reader changes nothing
        assert store.topic(T).cursor("sub").ack_range_count == 49
    with AckStore.open(store_path) as store:
        assert store.format_version == 1  # an open that writes nothing changes nothing
        assert store.topic(T).cursor("sub").ack_range_count == 49
        store.topic(T).cursor("sub").ack(Position(1, 101))
        store.flush()
        assert store.format_version == FORMAT_VERSION == 16  # raised by the first write
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == 16 and store.topic(T).cursor("sub").ack_range_count == 50


def test_a_group_flush_leaves_no_plans_for_the_collector(store_path: Path) -> None:
    """The flush pauses the cyclic collector and frees its plans before switching it back
    on: a collection that the flush's allocations set off then walks only what the cursors
    keep (their new index entries, 1-2 containers a cursor, and at a cursor's first trim
    the sequences its chain knows it kept, one more), not every plan's containers (9-15 a
    cursor, which it then moved to an older generation: a gen-2 collection, walking every
    object the application holds, came every hundred flushes)."""
    import gc

    young: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            young.append(len(gc.get_objects(generation=0)))

    n = 2000
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cursors = [topic.cursor(f"c{i}") for i in range(n)]
        for cur in cursors:
            cur.ack_entries(1, range(1, 2000, 2))
        store.flush()
        for cur in cursors:  # (the first full marker after it: the cursors take the small form, which they keep)
            cur.ack(Position(1, 2000))
        store.flush()
        for entry in range(2001, 2008):  # markers, full ones among them
            for cur in cursors:
                cur.ack(Position(1, entry))
            gc.collect()  # the count starts at zero: what the flush allocates sets it off
            gc.callbacks.append(seen)
            try:
                stats = store.flush()
            finally:
                gc.callbacks.remove(seen)
            assert stats.cursors == n and gc.isenabled()
    assert max(young, default=0) <= 3 * n + 100, young  # none at all is better still


def test_open_cursors_opens_every_persisted_cursor_with_the_collector_paused(store_path: Path) -> None:
    import gc

    from ackstore import InvalidTypeError

    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        for i in range(5):
            topic.cursor(f"c{i}").ack([Position(1, i), Position(1, 10 + i)])
    with AckStore.open(store_path, readonly=True) as store:
        topic = store.topic("t")
        assert gc.isenabled()
        opened = topic.open_cursors(CursorConfig(max_individual_ack_cache_bytes=4096))
        assert gc.isenabled()  # back on
        assert list(opened) == [f"c{i}" for i in range(5)]
        assert all(opened[f"c{i}"] is topic.cursor(f"c{i}") for i in range(5))
        assert [c.ack_range_count for c in opened.values()] == [1, 2, 2, 2, 2]  # c0: 1:0 moved M
        assert opened["c0"].mark_delete_position == Position(1, 0)
        assert opened["c3"].config.max_individual_ack_cache_bytes == 4096
        with pytest.raises(InvalidTypeError):
            topic.open_cursors({"budget": 1})  # type: ignore[arg-type]


def test_open_cursors_in_batches_equals_opening_each(store_path: Path) -> None:
    """More cursors than one batch of the bulk open, some already held: every one recovers
    to what ``cursor(name)`` gives, and a config given is persisted for each (writer)."""
    from ackstore.store import _LOAD_BATCH

    count = _LOAD_BATCH * 2 + 7
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        for i in range(count):
            topic.cursor(f"c{i:04d}").ack([Position(1, i), Position(1, i + 2 + i % 5)])
    with AckStore.open(store_path, readonly=True) as store:
        one_by_one = {name: list(store.topic("t").cursor(name).ack_ranges()) for name in store.topic("t").cursors()}
    bigger = CursorConfig(max_individual_ack_cache_bytes=8192)
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        early = topic.cursor("c0300")
        opened = topic.open_cursors(bigger)
        assert len(opened) == count and opened["c0300"] is early
        assert {name: list(cur.ack_ranges()) for name, cur in opened.items()} == one_by_one
        assert all(cur.config == bigger for cur in opened.values())
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topic("t").cursor("c0511").config == bigger


def test_open_cursors_skips_a_cursor_deleted_after_its_catalog_scan(store_path: Path) -> None:
    """The bulk open scans the catalog, then recovers in batches with the lock released
    between them: a cursor deleted in between is skipped, never opened as a new one (here
    the delete runs where another thread's could, just before the first batch), and so is
    one made again under its name since (another cursor: the scan's entry is not its)."""
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        for name in ("a", "b", "c"):
            topic.cursor(name).ack([Position(1, 3)])
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        check = topic.check_live

        def between() -> None:  # the first batch's check, after the scan
            topic.check_live = check  # type: ignore[method-assign]
            topic.delete_cursor("a")
            topic.delete_cursor("c")
            store.topic("t").cursor("c").ack([Position(1, 5)])  # made again: held, a new cursor id
            check()

        topic.check_live = between  # type: ignore[method-assign]
        assert list(topic.open_cursors()) == ["b", "c"]
        assert topic.cursors() == ["b", "c"] and "a" not in topic.held
        assert topic.held["c"].is_acked(Position(1, 5)) and not topic.held["c"].is_acked(Position(1, 3))


def test_ack_entries_of_a_wide_stepped_range_up_to_the_last_entry_id(store_path: Path) -> None:
    """A range with a step of 2**16 or more that reaches the last 65,536 entry ids is acked
    (pyroaring's own range constructor never returns for it), flushed and read back."""
    top = (1 << 32) - 2  # the last entry an unsealed ledger accepts
    wide = range(top - 3 * (1 << 16), top + 1, 1 << 16)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack_entries(1, wide)
        assert cur.ack_range_count == 4 and all(cur.is_acked(Position(1, e)) for e in wide)
    with AckStore.open(store_path, readonly=True) as store:
        assert [first[1] for first, _ in store.topic(T).cursor("c").ack_ranges()] == list(wide)


def test_a_failed_flush_transaction_gives_every_cursor_its_acks_back(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both kinds of plan, the common one (one marker, encoded when taken) and one with a new
    ledger record, are aborted when the transaction fails: both cursors wait for the next
    flush with every ack, nothing stays pinned, and the next flush writes it all."""
    from ackstore.flush import FlushJob

    real = FlushJob.write
    kinds: list[str] = []

    def broken(job: FlushJob, txn: object) -> int:
        kinds.extend(type(plan).__name__ for plan in job.plans)
        raise OSError("the disk went away")

    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        small, big = topic.cursor("small"), topic.cursor("big")
        for cur in (small, big):
            cur.ack_entries(1, range(1, 100, 2))
        store.flush()
        for cur in (small, big):
            end_form(cur)  # (their plans: the small form writes neither kind)
        small.ack(Position(1, 201))  # a few acks since its record: the marker carries them
        big.ack_entries(1, range(301, 1501, 2))  # many: a new ledger record
        monkeypatch.setattr(FlushJob, "write", broken)
        with pytest.raises(OSError, match="went away"):
            store.flush()
        assert sorted(kinds) == ["FlushPlan", "MarkerPlan"]
        for cur in (small, big):
            assert cur._core._listed and cur._core._pending and not cur._core._pages.pinned
            cur._check()
        monkeypatch.setattr(FlushJob, "write", real)
        stats = store.flush()
        assert (stats.cursors, stats.ledger_records) == (2, 1)
        assert not small._core._listed and not big._core._listed
        expected = {cur.name: list(cur.ack_ranges()) for cur in (small, big)}
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert {name: list(topic.cursor(name).ack_ranges()) for name in expected} == expected
        assert expected["small"][-1] == (Position(1, 201), Position(1, 201))


def test_a_flush_unlists_what_it_wrote_and_keeps_what_changed_meanwhile(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cursor leaves the flush list when its plan is taken: one acked while the transaction
    is written is listed again by that ack, and the next flush writes it alone; one whose
    ranges PIP-299 left out stays listed (and is not written again while its cut holds); an
    idle one is not visited."""
    from ackstore.flush import FlushJob

    real = FlushJob.write

    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        quiet, busy, idle = topic.cursor("quiet"), topic.cursor("busy"), topic.cursor("idle")
        capped = topic.cursor("capped", CursorConfig(max_unacked_ranges_to_persist=2))
        store.flush()
        assert not any(cur._core._listed for cur in (quiet, busy, idle, capped))

        def acking(job: FlushJob, txn: object) -> int:
            busy.ack(Position(1, 51))  # another thread would do this; the store lock is free here
            return real(job, txn)  # type: ignore[arg-type]

        monkeypatch.setattr(FlushJob, "write", acking)
        quiet.ack(Position(1, 3))
        busy.ack(Position(1, 5))
        capped.ack([Position(1, e) for e in range(1, 20, 2)])  # 10 ranges, 2 persisted
        stats = store.flush()
        monkeypatch.setattr(FlushJob, "write", real)
        assert stats.cursors == 3
        assert [c._core._listed for c in (quiet, busy, idle, capped)] == [False, True, False, True]
        stats = store.flush()
        assert stats.cursors == 1  # busy's ack made while the last one was written (capped's cut holds)
        assert (quiet._core._listed, busy._core._listed, capped._core._listed) == (False, False, True)
    with AckStore.open(store_path) as store:
        busy = store.topic(T).cursor("busy")
        assert list(busy.ack_ranges()) == [(Position(1, 5), Position(1, 5)), (Position(1, 51), Position(1, 51))]


def test_add_ledgers_is_one_transaction_with_the_one_ledger_checks(store_path: Path) -> None:
    """``topic.add_ledgers``: what add_ledger and close_ledger do for each, in ONE write
    transaction (restore's directory of 100,000 ledgers took a durable one per call); a bad
    ledger anywhere adds none."""
    from ackstore import LedgerStateError

    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        env = store.storage.env
        before = env.info()["last_txnid"]
        topic.add_ledgers([(1, 10), (3, 5), (7, None)])
        assert env.info()["last_txnid"] == before + 1
        assert topic.ledgers() == [(1, 10), (3, 5), (7, None)]
        for bad in ([(9, 1)], [(8, 1), (8, 2)], [(10, None), (11, 1)], [(12, -1)]):
            with pytest.raises(LedgerStateError):  # 7 is open; ids must increase; only the last open; entries >= 0
                topic.add_ledgers(bad)
        topic.close_ledger(7, 4)
        with pytest.raises(LedgerStateError):
            topic.add_ledgers([(8, 1), (8, 2)])
        assert topic.ledgers() == [(1, 10), (3, 5), (7, 4)]
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topic("t").ledgers() == [(1, 10), (3, 5), (7, 4)]


def test_a_read_transaction_in_this_process_is_the_oldest_reader_until_it_ends(tmp_path: Path) -> None:
    """The reader table as the writer and a read-only store see it, without a subprocess:
    a read transaction held here is the oldest reader (this pid, its transaction id, as
    many transactions behind as were written since); once it ends there is none."""
    from ackstore.readers import oldest_reader, reader_slots

    with AckStore.open(tmp_path / "s", sync=False) as store:
        store.topic("t").add_ledger(1)
        cur = store.topic("t").cursor("c")
        store.flush()
        env = store._storage.env
        assert oldest_reader(env) is None and store.stats().oldest_reader is None
        began = time.monotonic()
        txn = env.begin()
        try:
            for e in range(4):
                cur.ack([Position(1, 2 * e)])
                store.flush()
            last = env.info()["last_txnid"]
            found = oldest_reader(env)
            assert found is not None and (found.pid, found.txnid) == (os.getpid(), txn.id())
            assert found.behind == last - txn.id() >= 4
            seen = store.stats().oldest_reader
            assert seen is not None and (seen.pid, seen.txnid, seen.behind) == (found.pid, found.txnid, found.behind)
            time.sleep(0.05)  # how long it is held: since the first flush that saw it, at least this
            held = store.stats().oldest_reader
            assert held is not None and held.seconds is not None and 0.05 <= held.seconds <= time.monotonic() - began
            (slot,) = reader_slots(env)  # the reading thread as LMDB names it: this one's id, in hex
            assert (slot.pid, int(slot.thread, 16), slot.txnid) == (os.getpid(), threading.get_ident(), txn.id())
        finally:
            txn.abort()
        assert oldest_reader(env) is None and store.stats().oldest_reader is None


def test_log_usage_of_a_state_cursor_and_of_its_neighbour_is_exactly_theirs(store_path: Path) -> None:
    """``log_usage`` of a small cursor (its states in two slots): after its first flush (its
    marker is sequence 0) everything is live; after the second the older slot is garbage,
    to the byte. A cursor in the marker layout beside it counts its own records only, not
    the next cursor's first record (the first key past its log)."""
    from ackstore.cursor.lane import set_state_bound

    from . import rawlog

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        small = topic.cursor("small")
        small.ack([Position(1, 3)])
        store.flush()
        first = small.log_usage()
        small.ack([Position(1, 5)])
        store.flush()
        second = small.log_usage()
        cid = small.cursor_id
    sizes = rawlog.sizes(store_path, cid)
    assert sorted(sizes) == [0, 1]
    assert (first.records, first.record_bytes, first.live_bytes, first.garbage_bytes) == (1, sizes[0], sizes[0], 0)
    assert (second.records, second.record_bytes) == (2, sizes[0] + sizes[1])
    assert (second.live_bytes, second.garbage_bytes, second.history_bytes) == (sizes[1], sizes[0], 0)
    saved = set_state_bound(-1)
    try:
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            big, after = topic.cursor("big"), topic.cursor("after")
            for cur in (big, after):
                cur.ack([Position(1, 10), Position(1, 12)])
            store.flush()
            usage, ids = big.log_usage(), (big.cursor_id, after.cursor_id)
    finally:
        set_state_bound(saved)
    assert ids[1] == ids[0] + 1 and 0 in rawlog.sizes(store_path, ids[1])
    own = rawlog.sizes(store_path, ids[0])
    assert (usage.records, usage.record_bytes, usage.garbage_bytes) == (len(own), sum(own.values()), 0)


def test_a_rewrite_that_does_not_read_back_is_told_how(store_path: Path) -> None:
    """Compaction's verify (and ``check --fix``'s) compares what the new log recovers with
    the cursor: the same state is no difference; each way they can differ is named (the
    marker found, M, the properties, which ledgers, a ledger's acks or batches)."""
    from ackstore.cursor.lane import set_state_bound

    saved = set_state_bound(-1)
    try:
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            for ledger in range(1, 12):
                topic.add_ledger(ledger)
                if ledger < 11:
                    topic.close_ledger(ledger, 20)
            cur = topic.cursor("c")
            cur.ack([Position(ledger, 5) for ledger in range(2, 11)])
            cur.set_property("k", 1)
            store.flush()

            def differs(seq: int) -> str | None:
                recovered = store.storage.read(lambda txn: cur._core._log.recover(txn, None, "all"))
                return cur._core.rewrite_differs(recovered, seq)

            seq = cur.stats().last_marker_seq
            assert differs(seq) is None
            assert differs(seq + 1) == f"recovery found marker {seq}, not {seq + 1}"
            empty = topic.cursor("never-flushed")._core._log  # a log without a marker
            nothing = store.storage.read(lambda txn: empty.recover(txn, None, "all"))
            assert cur._core.rewrite_differs(nothing, seq) == f"recovery found marker None, not {seq}"
            changes: list[tuple[Callable[[], object], str]] = [
                (lambda: cur.ack_batch_index(Position(3, 9), 4, [1]), "ledger 3's acks differ"),
                (lambda: cur.ack([Position(4, 7)]), "ledger 4's acks differ"),
                (lambda: cur.set_property("k", 2), "the properties differ"),
                (lambda: cur.ack([Position(11, 1)]), "ledgers [2, 3, 4, 5, 6, 7, 8, 9], not [2, 3, 4, 5, 6, 7, 8, 9]"),
                (lambda: cur.ack_cumulative(Position(1, 3)), "mark-delete (1, -1), not 1:3"),
            ]
            for change, said in changes:  # each a change not flushed yet, then flushed
                change()
                assert differs(cur.stats().last_marker_seq) == said
                store.flush()
    finally:
        set_state_bound(saved)


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_the_compiled_ack_of_a_cursor_takes_one_position_whole_and_declines_the_rest(store_path: Path) -> None:
    """``Cursor.ack``'s compiled call, of a Position or a list: done in the cursor's small form
    (the form listed for the next flush, the store's lock free again) when the cursor's
    checks pass without a word; declined, nothing changed, for anything its core decides
    (another type, a cursor outside the form, a deleted cursor, a closed or read-only store)."""
    from ackstore.cursor.core import ACK_CURSOR

    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        core = cur._core
        end_form(cur)  # kept in its parts at the flush: the compiled ack declines, the core acks
        cur.ack(Position(1, 5))
        store.flush()
        assert ACK_CURSOR(core, Position(1, 7)) == 0 and not cur.is_acked(Position(1, 7))
        assert ACK_CURSOR(core, [Position(1, 7), Position(1, 8)]) == 0 and not store.lock._is_owned()
        cur.ack([Position(1, 7)])
        assert core not in store.small_list and store.flush_list.get(core) is core._planner
        store.flush()
    with AckStore.open(store_path) as store:
        cur = store.topic("t").cursor("c")
        assert cur.is_acked(Position(1, 7)) and not cur.is_acked(Position(1, 6)) and cur.ack_range_count == 2
        small = cur._core.small
        assert small is not None  # opened into the small form, not bounded by the directory yet:
        assert ACK_CURSOR(cur._core, Position(1, 9)) == 0 and not cur.is_acked(Position(1, 9))  # its core's
        cur.ack(Position(1, 3))
        store.flush()
        assert small.dirty == 0 and small not in store.small_list and cur._core.small is small
        assert ACK_CURSOR(cur._core, Position(1, 9)) == 1 and cur.is_acked(Position(1, 9))
        assert store.small_list.get(small) is cur._core  # listed by the ack that changed it first
        assert ACK_CURSOR(cur._core, Position(1, 9)) == 1 and small.dirty  # (acked already: nothing to do)
        assert ACK_CURSOR(cur._core, [Position(1, 11), Position(1, 13)]) == 1  # a list, in the form
        assert cur.is_acked(Position(1, 11)) and cur.is_acked(Position(1, 13)) and cur.ack_range_count == 6
        for declined in ((1, 15), [Position(1, 15), Position(99, 1)], [Position(1, 15), "x"], {Position(1, 15)}):
            assert ACK_CURSOR(cur._core, declined) == 0  # (a pair of ints, a ledger or an item not the form's, a set)
        assert not cur.is_acked(Position(1, 15)) and cur.ack_range_count == 6
        topic = store.topic("t")
        topic.delete_cursor("c")
        assert ACK_CURSOR(cur._core, Position(1, 11)) == 0
    assert ACK_CURSOR(store.topic, Position(1, 9)) == 0  # not a core


def _free_elsewhere(lock: object) -> bool:
    """Whether another thread can take ``lock`` at once (it gives it back)."""
    got: list[bool] = []

    def take() -> None:
        if lock.acquire(blocking=False):  # type: ignore[attr-defined]
            lock.release()  # type: ignore[attr-defined]
            got.append(True)

    t = threading.Thread(target=take)
    t.start()
    t.join(60)
    return got == [True]


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_cursor_ack_compiled_takes_one_position_itself_and_hands_every_other_call_to_the_python_method(
    store_path: Path,
) -> None:
    """``Cursor.ack`` is compiled where the module is built: a call with one Position, or
    with a list of Positions, that the cursor's small form takes acks with no Python frame
    (the Python method it stands for is not called); anything else is that method's (a
    cursor outside the form, a list of pairs of ints, a keyword, a missing argument, another
    object as ``self``, a position the form does not take); its name, doc and signature are
    the Python method's."""
    import inspect

    from ackstore import Cursor
    from ackstore.cursor.core import CursorCore
    from ackstore.fields import native

    spec = Cursor.ack.__wrapped__
    assert inspect.signature(Cursor.ack) == inspect.signature(spec)
    assert Cursor.ack.__doc__ == spec.__doc__ and Cursor.ack.__qualname__ == "Cursor.ack"
    calls: list[tuple[object, ...]] = []

    def recording(*args: object, **kw: object) -> None:
        calls.append((*args, *kw.values()))
        spec(*args, **kw)

    ack = native.ack_method(recording, CursorCore.ack)
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        end_form(cur)  # (outside the small form: every call is the Python method's)
        ack(cur, Position(1, 5))
        ack(cur, Position(1, 7))
        assert cur.is_acked(Position(1, 7)) and store.flush_list.get(cur._core) is not None
        assert not store.lock._is_owned() and _free_elsewhere(store.lock)
        ack(cur, [Position(1, 8)])
        assert calls == [(cur, Position(1, 5)), (cur, Position(1, 7)), (cur, [Position(1, 8)])]
        assert cur.is_acked(Position(1, 8))
        calls.clear()
        ack(cur, [(1, 8)])
        ack(cur, positions=Position(1, 9))
        assert calls == [(cur, [(1, 8)]), (cur, Position(1, 9))] and cur.ack_range_count == 2
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'positions'"):
            ack(cur)
        with pytest.raises(AttributeError):
            ack(topic, Position(1, 10))  # not a cursor: the Python method's own error
        with pytest.raises(TypeError, match="entry must be an int"):
            ack(cur, Position(1, "x"))
        assert not cur.is_acked(Position(1, 10)) and cur.ack_range_count == 2
        for entry in (11, 13, 15, 17):  # (flushes with no read between put the cursor in the small form)
            ack(cur, Position(1, entry))
            store.flush()
        small = cur._core.small
        assert small is not None and small not in store.small_list  # the form, flushed
        calls.clear()
        ack(cur, Position(1, 19))
        ack(cur, Position(1, 21))
        assert calls == [] and cur.is_acked(Position(1, 21)) and not store.lock._is_owned()
        assert store.small_list.get(small) is cur._core
        ack(cur, [Position(1, 23), Position(1, 25)])
        assert calls == [] and cur.is_acked(Position(1, 25))  # a list the form takes: compiled too
        with pytest.raises(InvalidArgumentError):
            ack(cur, [Position(1, 27), (1, -5)])  # one the form does not take: the Python method's
        assert calls == [(cur, [Position(1, 27), (1, -5)])] and not cur.is_acked(Position(1, 27))


def test_compaction_keeps_the_acks_a_swapped_out_ledger_holds_since_its_record(
    store_path: Path, marker_layout: None
) -> None:
    """A ledger left on disk whose newest marker carries acks since its record (a delta):
    compaction copies the record and keeps those acks in the new marker, with delivery
    counts or without."""
    config = CursorConfig(max_individual_ack_cache_bytes=1, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        for ledger in (1, 2):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 1000)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))  # room: no write-back
        cur.ack([Position(ledger, e) for ledger in (1, 2) for e in range(1, 300, 2)])
        store.flush()
        cur.ack([Position(1, 500), Position(1, 502), Position(2, 500)])  # deltas: the marker carries them
        cur.record_deliveries([Position(2, 600)])
        assert store.flush().ledger_records == 0
    with AckStore.open(store_path) as store:
        cur = store.topic("t").cursor("c", config)
        index = cur._core._pages.index
        assert cur._core._pages.swapped == {1, 2} and index[1].adds and not index[1].counts and index[2].counts
        store.compact(verify=True)
    with AckStore.open(store_path) as store:
        cur = store.topic("t").cursor("c")
        assert all(cur.is_acked(p) for p in (Position(1, 500), Position(1, 502), Position(2, 500), Position(2, 299)))
        assert cur.delivery_counts() == {Position(2, 600): 1}
