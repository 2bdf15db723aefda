"""PIP-269 Cases 5 and 6 (geo-replication), scripted with a manual reader, a manual remote
and a gated schema loader; each runs with the revision controller (handled) and without
it (the anomaly the PIP describes: entries that never reach the remote). Plus a seeded
run with random send failures that must end with every entry replicated once, in order.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from ackstore import AckStore, CursorStateRevisionController, Position, Replicator
from ackstore.testing import InMemoryLedgerReader, InMemoryRemote

T = "persistent://t/ns/geo"


def _p(*entries: int) -> list[Position]:
    return [Position(3, e) for e in entries]


def _setup(store: AckStore, enabled: bool, written: int = 5, **kw):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    topic.add_ledger(3)
    cur = topic.cursor("geo-replicator")
    reader = InMemoryLedgerReader(topic, manual=True)
    reader.append(3, written)
    remote = InMemoryRemote(manual=kw.pop("manual_remote", False))
    rep = Replicator(cur, reader, remote, CursorStateRevisionController(enabled=enabled), **kw)
    return cur, reader, remote, rep


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the scripted step never happened")


async def _read(rep: Replicator, reader: InMemoryLedgerReader, n: int) -> list[Position]:
    task = asyncio.create_task(rep.replicate_once(n))
    await asyncio.sleep(0)
    if reader.pending:
        reader.complete()
    return [e.position for e in await task]


@pytest.mark.parametrize("enabled", [True, False])
def test_case_5_schema_load_then_rewind(store_path: Path, enabled: bool) -> None:
    """Entries 1-3 need a schema the remote lacks: it loads asynchronously, then the cursor
    rewinds. Meanwhile entries 4-5 must not be read and sent, or the remote's de-duplication
    rejects 1-3 when they come again."""

    async def scenario() -> tuple[list[Position], list[Position], Position]:
        with AckStore.open(store_path) as store:
            gate = asyncio.Event()
            remote_box: list[InMemoryRemote] = []

            async def load(schema: int) -> None:
                await gate.wait()
                await remote_box[0].load_schema(schema)

            schema_of = {**{p: 2 for p in _p(0, 1, 2)}, **{p: 0 for p in _p(3, 4)}}
            cur, reader, remote, rep = _setup(store, enabled, schema_of=schema_of.__getitem__, load_schema=load)
            remote_box.append(remote)
            assert await _read(rep, reader, 3) == []  # 1-2: receive 1~3, start loading schema 2
            assert rep.controller.revision_running == int(enabled)
            await _read(rep, reader, 2)  # 3-4: receive 4~5 and send them (only without the controller)
            for _ in range(5):  # let a send that was started finish
                await asyncio.sleep(0)
            gate.set()  # 5: schema loaded, rewind to the first unacked entry
            await _until(lambda: rep.controller.revision_running == 0 and rep.rewinds == 1)
            await _read(rep, reader, 5)  # 6: receive again from there and send
            await rep.settle()
            return remote.accepted, remote.duplicates, cur.mark_delete_position

    accepted, duplicates, md = asyncio.run(scenario())
    if enabled:
        assert accepted == _p(0, 1, 2, 3, 4) and duplicates == [] and md == Position(3, 4)
    else:  # 4~5 overtook 1~3: the remote rejects 1~3 as duplicates, yet the source acks them: lost
        assert accepted == _p(3, 4) and duplicates == _p(0, 1, 2) and md == Position(3, 4)


@pytest.mark.parametrize("enabled", [True, False])
def test_case_6_send_failure_then_rewind(store_path: Path, enabled: bool) -> None:
    """Sending 1~3 fails while the read of 4~5 is in flight: the rewind must discard that
    read, or 4~5 are sent and the read position passes 1~3 for good."""

    async def scenario() -> tuple[list[Position], Position, Position]:
        with AckStore.open(store_path) as store:
            cur, reader, remote, rep = _setup(store, enabled, manual_remote=True)
            assert await _read(rep, reader, 3) == _p(0, 1, 2)  # receive 1~3; their send is pending
            await _until(lambda: len(remote.pending) == 1)
            second = asyncio.create_task(rep.replicate_once(2))  # read 4~5, in flight
            await _until(lambda: len(reader.pending) == 1)
            remote.complete(ok=False)  # the send of 1~3 fails: rewind
            await _until(lambda: rep.send_failures == 1)
            reader.complete()  # the read of 4~5 completes
            await second
            while remote.pending:  # let any send that was started succeed
                remote.complete()
                await asyncio.sleep(0)
            await rep.settle()
            task = asyncio.create_task(rep.replicate_once(5))  # the next round
            await asyncio.sleep(0)
            if reader.pending:
                reader.complete()
            await task
            await _until(lambda: bool(remote.pending) or not rep.tasks)
            while remote.pending:
                remote.complete()
                await asyncio.sleep(0)
            await rep.settle()
            return remote.accepted, cur.read_position, cur.mark_delete_position

    accepted, rp, md = asyncio.run(scenario())
    if enabled:
        assert accepted == _p(0, 1, 2, 3, 4) and md == Position(3, 4) and rp == Position(3, 5)
    else:  # 1~3 are lost: the read position is past them, the mark-delete position stuck before
        assert accepted == _p(3, 4) and rp == Position(3, 5) and md == Position(3, -1)


async def _random_run(store_path: Path, enabled: bool, seed: int) -> tuple[list[Position], Position]:
    """Reads, read completions and send completions (15% failures) in a seeded random order."""
    rng = random.Random(seed)
    with AckStore.open(store_path) as store:
        cur, reader, remote, rep = _setup(store, enabled, written=200, manual_remote=True)
        reads: list[asyncio.Task[object]] = []
        for _ in range(5000):
            reads = [t for t in reads if not t.done()]
            if cur.mark_delete_position == Position(3, 199) or (not reads and cur.read_position == Position(3, 200)):
                break
            step = rng.random()
            if step < 0.4 and len(reads) < 2:
                reads.append(asyncio.create_task(rep.replicate_once(rng.randint(1, 8))))
            elif step < 0.7 and reader.pending:
                reader.complete()
            elif remote.pending:
                remote.complete(ok=rng.random() > 0.15)
            await asyncio.sleep(0)
            cur._check()
        for _ in range(1000):  # drain: everything in flight completes, successfully
            reads = [t for t in reads if not t.done()]
            if not (reads or reader.pending or remote.pending or rep.tasks):
                break
            if reader.pending:
                reader.complete()
            elif remote.pending:
                remote.complete()
            await asyncio.sleep(0)
        return remote.accepted, cur.mark_delete_position


@pytest.mark.stress
def test_random_failures_replicate_everything_once_in_order(tmp_path: Path, long_run: bool) -> None:
    """5 seeds by default, 300 with --long."""
    for seed in range(1, 301 if long_run else 6):
        accepted, md = asyncio.run(_random_run(tmp_path / str(seed), True, seed))
        assert md == Position(3, 199), seed
        assert accepted == _p(*range(200)), seed  # every entry once, in order, despite failures and rewinds


def test_random_failures_lose_entries_without_the_controller(store_path: Path) -> None:
    lost = 0
    for seed in (1, 2, 3, 4, 5):
        accepted, _ = asyncio.run(_random_run(store_path / str(seed), False, seed))
        lost += 200 - len(accepted)
    assert lost > 0


def test_loops_over_one_cursor_share_its_revisions(store_path: Path) -> None:
    """A dispatcher's reset discards a replicator's read in flight on the same cursor; the
    cursor's stats count the revision."""
    from ackstore import Dispatcher

    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            topic.add_ledger(3)
            cur = topic.cursor("shared")
            reader = InMemoryLedgerReader(topic, manual=True)
            reader.append(3, 10)
            rep = Replicator(cur, reader, InMemoryRemote())
            d = Dispatcher(cur, reader)
            assert rep.controller is d.controller is cur.revision_controller
            read = asyncio.create_task(rep.replicate_once(5))
            await _until(lambda: bool(reader.pending))
            d.reset(Position(3, 2))
            reader.complete()
            assert await read == [] and rep.discarded == 1 and rep.remote.accepted == []
            stats = cur.stats()
            assert (stats.revisions_done, stats.revision_running, stats.revision_num) == (1, 0, 1)
            assert cur.read_position == Position(3, 2)

    asyncio.run(scenario())
