"""The group flush takes, encodes and adopts its cursors a chunk at a time (``flush.CHUNK``),
letting the store lock go between chunks so acks wait for one chunk at most. Chunked or
not, a flush writes the same bytes; acks that land between chunks are kept, persisted by
this flush or the next; and ``encode_all`` (both implementations) goes on from the plans
already encoded."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore import flush as group_flush
from ackstore.cursor import lane
from ackstore.flush import FlushJob

from .lane_checks import twin_workload

T = "persistent://t/ns/chunks"
ROOMY = CursorConfig(max_unacked_ranges_to_persist=0, full_marker_every=5)


@pytest.fixture(autouse=True)
def _lane(parts_chains: None) -> None:
    """These cursors' states (over a slot's bound) are their parts', which the lane plans."""


@pytest.mark.parametrize("chunk", [1, 3])
def test_a_flush_in_chunks_writes_what_one_chunk_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The same seeded workload (the lane and the general path, full markers, trims) run in
    one chunk and in chunks of ``chunk`` cursors: the same bytes in every log, the same
    chains and figures after every flush."""
    whole = twin_workload(tmp_path / "whole")
    monkeypatch.setattr(group_flush, "CHUNK", chunk)
    chunked = twin_workload(tmp_path / "chunked")
    assert chunked[1] == whole[1]
    assert chunked[0] == whole[0]


def _store(path: Path, names: list[str]) -> tuple[AckStore, list[Any]]:
    store = AckStore.open(path, sync=False)
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, 5000)
    topic.add_ledger(2)
    cursors = [topic.cursor(name, ROOMY) for name in names]
    for cur in cursors:
        cur.ack_entries(1, range(1, 2001, 2))
    store.flush()
    return store, cursors


def _recovered(path: Path, names: list[str]) -> list[list[Any]]:
    with AckStore.open(path, readonly=True) as store:
        topic = store.topic(T)
        return [list(topic.cursor(name).ack_ranges()) for name in names]


def _flush_while(store: AckStore, cursors: list[Any], acker: Any, failed: list[BaseException]) -> None:
    """Flush in a loop while ``acker`` runs in another thread (at least once), then once
    more; ``failed`` holds what the acker raised (none, or the test fails here). The store
    is crashed if anything here raises."""
    thread = threading.Thread(target=acker)
    flushes = 0
    try:
        thread.start()
        while thread.is_alive():
            store.flush()
            flushes += 1
        thread.join()
        assert not failed, failed
        store.flush()
    except BaseException:
        testing.crash(store)
        raise
    assert flushes >= 1, flushes


def _crash_and_recover(store: AckStore, path: Path, names: list[str], cursors: list[Any]) -> None:
    """The store crashed: every cursor recovers the ranges and mark-delete position it held."""
    expected = [list(cur.ack_ranges()) for cur in cursors]
    marks = [cur.mark_delete_position for cur in cursors]
    testing.crash(store)
    assert _recovered(path, names) == expected
    with AckStore.open(path, readonly=True) as reopened:
        topic = reopened.topic(T)
        assert [topic.cursor(name).mark_delete_position for name in names] == marks


def test_acks_between_chunks_are_kept(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the chunks of a flush (a cursor a chunk), other code acks: a cursor taken in
    an earlier chunk (its ack waits for the next flush), a cursor of a later chunk (this
    flush carries it), and a cursor no one had changed (listed for the next flush); between
    the chunks of the adopt, a cursor whose plan is written but not adopted yet (the next
    flush carries it). Nothing is lost, and a crash after the second flush recovers it all."""
    monkeypatch.setattr(group_flush, "CHUNK", 1)
    names = ["a", "b", "c", "d"]
    store, (a, b, c, d) = _store(store_path, names)
    for cur in (a, b, c):
        cur.ack(Position(1, 3001))
    encode, commit_all = FlushJob.encode, lane.commit_all
    chunks: list[int] = []

    def encode_and_ack(job: FlushJob) -> None:  # step 2 runs outside the store lock after each take
        encode(job)
        chunks.append(len(job.plans))
        if len(chunks) == 1:  # a's plan is taken; b and c are not
            a.ack(Position(1, 3003))
            c.ack(Position(1, 3005))
            d.ack(Position(1, 3007))

    adopted: list[int] = []

    def commit_and_ack(plans: list[Any], planners: list[Any]) -> list[int]:
        rest = commit_all(plans, planners)
        adopted.append(len(plans))
        if len(adopted) == 1:  # a adopted; b and c written, not adopted yet
            c.ack(Position(1, 3009))
        return rest

    monkeypatch.setattr(FlushJob, "encode", encode_and_ack)
    monkeypatch.setattr(lane, "commit_all", commit_and_ack)
    try:
        stats = store.flush()
        assert chunks == [1, 2, 3] and adopted == [1, 1, 1]  # a cursor a chunk: a, b, c
        assert stats.cursors == 3
        listed = [cur._core._listed for cur in (a, b, c, d)]
        assert listed == [True, False, True, True]  # changed since taken, or never visited
        monkeypatch.setattr(FlushJob, "encode", encode)
        monkeypatch.setattr(lane, "commit_all", commit_all)
        assert store.flush().cursors == 3  # a, c and d
        assert not any(cur._core._listed for cur in (a, b, c, d))
        expected = [list(cur.ack_ranges()) for cur in (a, b, c, d)]
        for cur, entries in ((a, (3001, 3003)), (b, (3001,)), (c, (3001, 3005, 3009)), (d, (3007,))):
            assert all(cur.is_acked(Position(1, e)) for e in entries), cur.name
    finally:
        testing.crash(store)  # what the two flushes wrote is all a reopen sees
    assert _recovered(store_path, names) == expected


def test_an_ack_gets_in_between_the_chunks_of_a_take(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store lock is free between the chunks of step 1: an ack made in another thread
    once the first chunk is taken completes before the next chunk is taken (with one chunk,
    acks wait for the whole take). The acked cursor was not listed when the flush began:
    the next flush writes it."""
    monkeypatch.setattr(group_flush, "CHUNK", 1)
    names = ["a", "b", "c", "d", "e"]
    store, cursors = _store(store_path, names)
    other = store.topic(T).cursor("other", ROOMY)
    store.flush()  # a new cursor's first marker: not listed from now on
    for cur in cursors:
        cur.ack(Position(1, 3001))
    order: list[str] = []
    take = group_flush.GroupFlush._take

    def ack() -> None:
        other.ack(Position(2, 7))
        order.append("ack")

    thread = threading.Thread(target=ack)

    def take_then_ack(self: group_flush.GroupFlush, job: FlushJob, start: int) -> None:
        take(self, job, start)
        order.append(f"take {start}")
        if start == 0:  # the first chunk is taken: the acking thread runs to its end now
            thread.start()
            thread.join(60)

    monkeypatch.setattr(group_flush.GroupFlush, "_take", take_then_ack)
    try:
        stats = store.flush()
        assert order == ["take 0", "ack", *[f"take {i}" for i in range(1, len(names))]], order
    finally:
        monkeypatch.setattr(group_flush.GroupFlush, "_take", take)
    try:
        assert stats.cursors == len(names) and other._core._listed
        assert store.flush().cursors == 1
    finally:
        store.close()
    assert _recovered(store_path, ["other"]) == [[(Position(2, 7), Position(2, 7))]]


def test_encode_all_goes_on_from_the_plans_encoded(store_path: Path) -> None:
    """A flush job's encode goes on from the plans encoded (``job.encoded``) and adds to the
    job's figures (what a chunked flush calls once a chunk); a negative count is refused,
    nothing gathered."""
    store, cursors = _store(store_path, ["a", "b", "c"])
    try:
        for cur in cursors:  # a: a marker plan; b and c: a ledger without a record (general path)
            cur.ack(Position(1, 3001))
        for cur in cursors[1:]:
            cur.ack(Position(2, 7))
        job = FlushJob(store.storage.catalog, store.storage.log_db)
        visit = list(store.flush_list)
        idle: list[Any] = []

        def take(part: list[Any]) -> None:  # as the group flush takes: the lane's plans, then the general path's
            others: list[Any] = []
            with store.lock:
                lane.take_all(part, [c._planner for c in part], job.plans, job.cursors, job.planners, idle, others)
                job.take_general(others, idle)

        take(visit[:1])
        job.encode()
        first = (job.encoded, len(job.puts), job.ledger_records, job.full_markers, job.nbytes)
        take(visit[1:])
        job.encode()
        assert first[0] == 1 and job.encoded == 3
        assert job.ledger_records == first[2] + 2  # the two general plans' records, added
        assert job.nbytes == first[4] + sum(p.nbytes for p in job.plans[1:])
        assert len(job.puts) == first[1] + sum(len(p.puts) for p in job.plans[1:])
        assert job.puts == [put for p in job.plans for put in p.puts]  # in order, each once
        job.encoded = -1
        with pytest.raises(ValueError, match=r"^a flush job's encoded count is -1, not a count$"):
            job.encode()
        with pytest.raises(ValueError, match=r"^encode_all starts at plan -1, not a count$"):
            lane.encode_all(job.plans, -1, job.puts, job.trims)
        assert len(job.puts) == sum(len(p.puts) for p in job.plans)
        with store.lock:
            for plan, cur in zip(job.plans, job.cursors, strict=True):
                cur._abort_flush(plan)
                store.flush_list[cur] = cur._planner
    finally:
        store.close()
    with AckStore.open(store_path, readonly=True) as store:  # the aborted plans' acks were kept and flushed
        topic = store.topic(T)
        for name in ("a", "b", "c"):
            cur = topic.cursor(name)
            assert cur.is_acked(Position(1, 3001)) and cur.is_acked(Position(2, 7)) == (name != "a"), name


@pytest.mark.stress
def test_acks_from_another_thread_during_chunked_flushes_are_all_kept(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, long_run: bool
) -> None:
    """Another thread makes 4,000 acks (60,000 with ``--long``), individual and cumulative,
    across 40 cursors while this one flushes in a loop, 3 cursors a chunk, so acks land
    before, between and after the chunks of takes and adopts. Whatever the interleaving,
    after a last flush and a crash every cursor recovers exactly what it held."""
    import random

    monkeypatch.setattr(group_flush, "CHUNK", 3)
    names = [f"c{i}" for i in range(40)]
    store, cursors = _store(store_path, names)
    rng = random.Random(11)
    acks = 60_000 if long_run else 4_000
    plan = [(rng.randrange(len(cursors)), rng.randrange(2, 4000), rng.random() < 0.02) for _ in range(acks)]
    failed: list[BaseException] = []

    def acker() -> None:
        try:
            for k, (i, entry, cumulative) in enumerate(plan):
                if k % 4 == 0:
                    time.sleep(0)  # let the flushing thread run: acks land all through its steps
                cur = cursors[i]
                if cumulative:
                    cur.ack_cumulative(Position(1, entry // 4))
                else:
                    cur.ack(Position(1, entry))
        except BaseException as exc:  # reported below
            failed.append(exc)

    _flush_while(store, cursors, acker, failed)
    listed = [cur.name for cur in cursors if cur._core._listed]
    _crash_and_recover(store, store_path, names, cursors)
    assert listed == []


def test_compiled_acks_into_small_forms_from_another_thread_during_flushes_are_all_kept(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, long_run: bool
) -> None:
    """Cursors in the small form, acked in order with a few holes from another thread (one
    position a call and lists, the compiled ``Cursor.ack`` taking the store lock in C),
    while this thread flushes in a loop, 2 forms a chunk: whatever the interleaving (an ack
    waiting for the flush's lock, a form listed again while the flush writes it), after a
    last flush and a crash every cursor recovers exactly what it held, and the acks stayed
    in the form."""
    import random

    monkeypatch.setattr(group_flush, "CHUNK", 2)
    names = [f"s{i}" for i in range(12)]
    store = AckStore.open(store_path, sync=False)
    topic = store.topic(T)
    topic.add_ledger(1)
    cursors = [topic.cursor(name, CursorConfig(max_unacked_ranges_to_persist=0)) for name in names]
    for _ in range(3):  # (flushes with nothing read between put each cursor in the small form)
        for cur in cursors:
            cur.ack(Position(1, cur.mark_delete_position.entry + 1))
        store.flush()
    assert all(cur._core.small is not None for cur in cursors)
    rng = random.Random(5)
    rounds = 3_000 if long_run else 300
    failed: list[BaseException] = []

    def acker() -> None:
        try:
            nxt = [cur.mark_delete_position.entry + 1 for cur in cursors]
            for k in range(rounds):
                i = rng.randrange(len(cursors))
                cur, e = cursors[i], nxt[i]
                if k % 3 == 0:
                    cur.ack([Position(1, x) for x in range(e, e + 5) if x != e + 2 or k % 6])  # a hole now and then
                    nxt[i] = e + 5
                else:
                    cur.ack(Position(1, e))
                    nxt[i] = e + 1
                if k % 4 == 0:
                    time.sleep(0)  # let the flushing thread run
        except BaseException as exc:  # reported below
            failed.append(exc)

    _flush_while(store, cursors, acker, failed)
    left = [cur.name for cur in cursors if cur._core.small is None]
    _crash_and_recover(store, store_path, names, cursors)
    assert left == []  # the acks stayed in the form
