"""PIP-269 (revision controller), PIP-194 (consumer epochs) and the PIP-299 dispatch pause.

Each PIP-269 case scripts its interleaving with a manual reader (reads complete when the
test says so) and runs twice: with the controller, where the case is handled, and with it
disabled, where the anomaly the PIP describes happens, so the test can fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from ackstore import (
    AckStore,
    CursorConfig,
    CursorStateRevisionController,
    Dispatcher,
    Position,
    RevisionInProgressError,
)
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/rev"


def _setup(store: AckStore, config: CursorConfig | None = None, enabled: bool = True, **kw):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    for ledger in (1, 2):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 10)
    topic.add_ledger(3)
    cur = topic.cursor("sub", config or CursorConfig())
    cur.ack_cumulative(Position(2, 9))  # everything before ledger 3 is consumed
    reader = InMemoryLedgerReader(topic, manual=True)
    reader.append(3, 20)
    dispatcher = Dispatcher(cur, reader, CursorStateRevisionController(enabled=enabled), **kw)
    return cur, reader, dispatcher


async def _until_pending(reader: InMemoryLedgerReader, n: int = 1) -> None:
    while len(reader.pending) < n:
        await asyncio.sleep(0)


async def _read_through(reader: InMemoryLedgerReader, read: Coroutine[Any, Any, object]) -> object:
    """Run ``read`` with nothing racing it: its reader call completes as soon as it is made."""
    task = asyncio.create_task(read)
    await _until_pending(reader)
    reader.complete()
    return await task


def _p(*entries: int) -> list[Position]:
    return [Position(3, e) for e in entries]


@pytest.mark.parametrize("enabled", [True, False])
def test_case_1_replay_read_races_a_reset(store_path: Path, enabled: bool) -> None:
    async def scenario() -> list[Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=enabled)
            consumer = d.add_consumer("c1")
            cur.read_path.move_read_position(Position(3, 10))
            d.redeliver(_p(5, 6))
            replay = asyncio.create_task(d.replay_read())  # 1: start to read [3:5, 3:6]
            await _until_pending(reader)
            d.reset(Position(3, 0))  # 3-4: clear redeliveries, read position -> 3:0
            reader.complete()  # 5: the replay read completes
            await replay
            await _read_through(reader, d.read_more(3))
            return consumer.received

    received = asyncio.run(scenario())
    if enabled:
        assert received == _p(0, 1, 2)  # in order from the reset point
    else:
        assert received == _p(5, 6, 0, 1, 2)  # the anomaly: 3:5, 3:6 before 3:0


@pytest.mark.parametrize("enabled", [True, False])
def test_case_2_sequential_read_races_a_reset(store_path: Path, enabled: bool) -> None:
    async def scenario() -> tuple[list[Position], Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=enabled)
            consumer = d.add_consumer("c1")
            cur.read_path.move_read_position(Position(3, 5))
            read = asyncio.create_task(d.read_more(5))  # 1: read {3:5, 5 entries}
            await _until_pending(reader)
            d.reset(Position(3, 0))  # 3-4
            reader.complete()  # 5: completes; without the controller it moves the read position to 3:10
            await read
            await _read_through(reader, d.read_more(5))
            return consumer.received, cur.read_position

    received, rp = asyncio.run(scenario())
    if enabled:
        assert received == _p(0, 1, 2, 3, 4) and rp == Position(3, 5)
    else:
        assert received == _p(5, 6, 7, 8, 9, 10, 11, 12, 13, 14)  # 3:0..3:4 are skipped: stuck
        assert rp == Position(3, 15)


@pytest.mark.parametrize("enabled", [True, False])
def test_half_in_flight_read_is_discarded(store_path: Path, enabled: bool) -> None:
    """The read position move happened, delivery did not, then a reset: nothing stale is delivered."""

    async def scenario() -> list[Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=enabled)
            consumer = d.add_consumer("c1")
            read = asyncio.create_task(d.read_more(4))
            await _until_pending(reader)
            reader.complete()
            while cur.read_position == Position(3, 0):  # the move has happened, the delivery not yet
                await asyncio.sleep(0)
            d.reset(Position(3, 2))
            await read
            return consumer.received

    received = asyncio.run(scenario())
    assert received == ([] if enabled else _p(0, 1, 2, 3))


@pytest.mark.parametrize("enabled", [True, False])
def test_case_7_recently_joined_position_after_rewind_with_read_in_flight(store_path: Path, enabled: bool) -> None:
    async def scenario() -> tuple[Position, Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=enabled)
            d.add_consumer("c1")
            cur.read_path.move_read_position(Position(3, 10))
            read = asyncio.create_task(d.read_more(5))  # in flight at 3:10
            await _until_pending(reader)
            d.rewind()  # all consumers gone and back: read again from 3:0
            d.add_consumer("c2")  # joins now: may not get entries past the read position
            reader.complete()
            await read
            return d.recently_joined["c2"], cur.read_position

    joined, rp = asyncio.run(scenario())
    assert joined == Position(3, 0)
    assert rp == (Position(3, 0) if enabled else Position(3, 15))  # without: c2's position is already stale


def test_reads_refused_while_a_reset_runs_and_second_reset_fails_fast(store_path: Path) -> None:
    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            _, _, d = _setup(store)
            assert d.controller.start_revision() == 0
            d.redeliver(_p(1))
            assert await d.read_more() == [] and await d.replay_read() == []
            assert d.refused == 2
            with pytest.raises(RevisionInProgressError, match="already running"):
                d.reset(Position(3, 0))
            assert d.controller.revision_running == 1
            d.controller.end_revision(lambda: None)
            assert d.stats()["revisions_done"] == 1 and d.stats()["revision_running"] == 0

    asyncio.run(scenario())


@pytest.mark.parametrize(("controller", "epochs"), [(True, True), (False, True), (False, False)])
def test_pip194_seek_never_delivers_pre_seek_reads_after_it_returns(store_path, controller, epochs) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> list[Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=controller, epochs=epochs)
            consumer = d.add_consumer("c1")
            cur.read_path.move_read_position(Position(3, 5))
            read = asyncio.create_task(d.read_more(3))  # reads 3:5..3:7 under epoch 0
            await _until_pending(reader)
            assert d.seek(Position(3, 0)) == 1 and consumer.epoch == 1
            reader.complete()
            await read
            return consumer.received

    received = asyncio.run(scenario())
    if controller or epochs:
        assert received == []  # the controller discards it, or the consumer drops the old epoch
    else:
        assert received == _p(5, 6, 7)  # neither: the anomaly


def test_epoch_only_grows_and_reconnect_resets_it(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _, _, d = _setup(store)
        c = d.add_consumer("c1")
        for _ in range(3):
            d.seek(Position(3, 0))
        assert d.epoch == 3 and c.epoch == 3
        c.epoch = 0  # a client that lost its state
        assert d.reconnect("c1").epoch == 3


def _paused_setup(store: AckStore, single: bool = False):  # type: ignore[no-untyped-def]
    config = CursorConfig(max_unacked_ranges_to_persist=2, dispatcher_pause_on_ack_state_persistent=True)
    cur, reader, d = _setup(store, config, single_consumer=single)
    reader.manual = False
    d.add_consumer("c1")
    cur.ack(_p(12, 14, 16))  # 3 ranges > 2: blocked
    assert cur.is_blocked_on_ack_state_persistent
    return cur, reader, d


def test_pip299_pause_stops_sequential_reads_not_replay(store_path: Path) -> None:
    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            cur, _, d = _paused_setup(store)
            assert await d.read_more() == [] and d.paused == 1
            d.redeliver(_p(3))
            assert [e.position for e in await d.replay_read()] == _p(3)
            cur.ack(_p(13))  # 3:12..3:14 joins: 2 ranges, unblocked
            assert [e.position for e in await d.read_more(2)] == _p(0, 1)

    asyncio.run(scenario())


def test_pip299_unpause_on_skip_and_dynamic_off(store_path: Path) -> None:
    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            cur, reader, d = _paused_setup(store)
            d.skip(17)  # acks 3:0..3:11, 3:13, 3:15 ... everything up to 3:19 but what is acked
            assert not cur.is_blocked_on_ack_state_persistent
            cur.ack(_p(22, 24, 26))
            assert cur.is_blocked_on_ack_state_persistent
            assert await d.read_more(1) == []
            reader.append(3, 20)  # more entries written; still paused until the setting goes off
            assert await d.read_more(1) == []
            cur.update_config(dispatcher_pause_on_ack_state_persistent=False)
            assert [e.position for e in await d.read_more(1)] == _p(20)

    asyncio.run(scenario())


def test_pip299_single_consumer_never_pauses(store_path: Path) -> None:
    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            cur, _, d = _paused_setup(store, single=True)
            assert [e.position for e in await d.read_more(2)] == _p(0, 1)
            assert cur.is_blocked_on_ack_state_persistent and d.paused == 0

    asyncio.run(scenario())


def test_clear_backlog_and_reset_persist(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur, _, d = _setup(store)
        d.clear_backlog()
        assert cur.mark_delete_position == Position(3, 19)
        d.reset(Position(3, 4))
        assert cur.mark_delete_position == Position(3, 3) and cur.read_position == Position(3, 4)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert cur.mark_delete_position == Position(3, 3) and cur.read_position == Position(3, 4)


@pytest.mark.parametrize("enabled", [True, False])
def test_case_4_rewind_races_a_sequential_read(store_path: Path, enabled: bool) -> None:
    """Geo-replication's rewind: a read in flight past the rewind point must not skip what it rewound to."""

    async def scenario() -> tuple[list[Position], Position]:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, enabled=enabled)
            consumer = d.add_consumer("replicator")
            cur.read_path.move_read_position(Position(3, 10))  # 3:0..3:9 were handed out, not yet acked
            read = asyncio.create_task(d.read_more(5))  # async read from 3:10
            await _until_pending(reader)
            d.rewind()  # sending 3:0..3:9 failed: read them again
            reader.complete()
            await read
            await _read_through(reader, d.read_more(10))
            return consumer.received, cur.read_position

    received, rp = asyncio.run(scenario())
    if enabled:
        assert received == _p(*range(10)) and rp == Position(3, 10)
    else:  # 3:0..3:9 are never read again until the next rewind
        assert received == _p(*range(10, 20)) and rp == Position(3, 20)


@pytest.mark.parametrize("enabled", [True, False])
def test_case_3_reset_races_consumer_reconnect(store_path: Path, enabled: bool) -> None:
    """Reset (disconnect all, then move) while consumers reconnect and a rewind is asked for."""

    async def scenario() -> tuple[dict[str, Position], Position, bool]:
        with AckStore.open(store_path) as store:
            cur, _, d = _setup(store, enabled=enabled)
            d.add_consumer("c0")
            cur.read_path.move_read_position(Position(3, 10))
            gate = asyncio.Event()
            reset = asyncio.create_task(d.reset_after(Position(2, 0), gate.wait))  # 1: disconnect all consumers
            await asyncio.sleep(0)
            d.remove_consumer("c0")  # 2
            d.add_consumer("c1")  # 3
            rewound = True
            try:
                d.rewind()  # 4: rewind to 3:0
            except RevisionInProgressError:
                rewound = False
            d.add_consumer("c2")  # 5-6: recently joined at the read position of the moment
            gate.set()
            await reset  # 7: read position -> 2:0
            return dict(d.recently_joined), cur.read_position, rewound

    joined, rp, rewound = asyncio.run(scenario())
    assert rp == Position(2, 0)
    if enabled:
        assert not rewound and joined == {"c2": Position(2, 0)}  # consistent with the reset
    else:
        assert rewound and joined == {"c2": Position(3, 0)}  # stale: c2 waits on a position past the reset


def test_delayed_delivery_tracker_changes_inside_the_revision(store_path: Path) -> None:
    """Held delayed entries are dropped by a reset (read again after it), released when due."""

    async def scenario() -> None:
        now = [0.0]
        with AckStore.open(store_path) as store:
            due = {1: 10.0, 5: 20.0}  # entries 3:1 and 3:5 are delayed
            cur, reader, d = _setup(store, deliver_at=lambda p: due.get(p.entry, 0.0), clock=lambda: now[0])
            reader.manual = False
            consumer = d.add_consumer("c1")
            assert [e.position for e in await d.read_more(4)] == _p(0, 2, 3)
            assert d.delayed == {Position(3, 1): 10.0} and d.stats()["delayed"] == 1
            d.rewind()  # the tracker is cleared in the revision: 3:1 will be read again
            assert d.delayed == {} and cur.read_position == Position(3, 0)
            await d.read_more(4)
            assert d.delayed == {Position(3, 1): 10.0}
            assert await d.replay_read() == []  # not due yet
            now[0] = 10.0
            assert [e.position for e in await d.replay_read()] == _p(1)
            assert consumer.received == _p(0, 2, 3, 0, 2, 3, 1) and d.delayed == {}
            await d.read_more(4)  # 3:4..3:7, 3:5 held until 20
            assert d.delayed == {Position(3, 5): 20.0}
            d.reset(Position(3, 6))  # acks up to 3:5 and clears the tracker with it
            now[0] = 20.0
            assert d.delayed == {} and await d.replay_read() == []  # 3:5 is never delivered
            assert consumer.received[-3:] == _p(4, 6, 7)

    asyncio.run(scenario())


def test_pip299_check_never_computed_when_pausing_is_off(store_path: Path) -> None:
    async def scenario() -> None:
        config = CursorConfig(max_unacked_ranges_to_persist=2)  # pausing off (the default)
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store, config)
            reader.manual = False
            cur.ack(_p(12, 14, 16))  # over the limit, but pausing is off
            assert len(await d.read_more(2)) == 2
            assert d.stats()["pause_checks"] == 0 and d.paused == 0
            cur.update_config(dispatcher_pause_on_ack_state_persistent=True)
            assert await d.read_more(2) == []
            assert d.stats()["pause_checks"] == 1 and d.paused == 1

    asyncio.run(scenario())


def test_direct_reads_touch_no_cursor_state_and_are_never_refused(store_path: Path) -> None:
    async def scenario() -> None:
        with AckStore.open(store_path) as store:
            cur, reader, d = _setup(store)
            reader.manual = False
            cur.read_path.move_read_position(Position(3, 4))
            before = (cur.read_position, cur.mark_delete_position, d.controller.revision_num)
            assert d.controller.start_revision() == 0  # a reset is running
            assert [e.position for e in await d.read_direct(_p(7, 1))] == _p(7, 1)
            assert await d.read_more() == [] and d.refused == 1  # a sequential read is refused
            d.controller.end_revision(lambda: None)
            assert (cur.read_position, cur.mark_delete_position) == before[:2]
            assert d.controller.revision_num == before[2] + 1

    asyncio.run(scenario())


def test_run_if_current_is_atomic_with_end_revision() -> None:
    import threading

    c = CursorStateRevisionController()
    ran: list[str] = []
    assert c.run_if_current(0, lambda: ran.append("a")) and ran == ["a"]
    n = c.start_revision()
    assert not c.run_if_current(n, lambda: ran.append("b"))  # a reset is running
    editing, release = threading.Event(), threading.Event()

    def editor() -> None:
        editing.set()
        release.wait(5)
        ran.append("edit")

    ender = threading.Thread(target=c.end_revision, args=(editor,))
    ender.start()
    editing.wait(5)
    late = threading.Thread(target=lambda: ran.append(str(c.run_if_current(n, lambda: ran.append("c")))))
    late.start()
    late.join(0.2)
    assert late.is_alive()  # it waits for the reset to end, then sees it outdated
    release.set()
    ender.join(5)
    late.join(5)
    assert ran == ["a", "edit", "False"] and c.revision_num == 1


def test_a_consumer_keeps_its_newest_positions_and_counts_them_all(store_path: Path) -> None:
    """A dispatcher that runs for days: each consumer keeps the newest positions it was sent
    (at least RECEIVED_KEPT, at most twice: older ones let go, so memory stays bounded) in
    order, counts every one, and the round robin hands them out as one entry at a time
    would; an older epoch drops a whole read's share, each one counted."""
    from ackstore.dispatch.dispatcher import RECEIVED_KEPT
    from ackstore.dispatch.reads import Entry

    async def scenario() -> tuple[Any, ...]:
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            topic.add_ledger(1)
            cur = topic.cursor("sub")
            reader = InMemoryLedgerReader(topic)
            written = 10 * RECEIVED_KEPT + 7
            reader.append(1, written)
            d = Dispatcher(cur, reader)
            a, b = d.add_consumer("a"), d.add_consumer("b")
            sent: list[Position] = []
            while len(sent) < written:
                entries = await d.read_more(33)  # (odd: the turn goes on from read to read)
                sent += [e.position for e in entries]
                cur.ack([e.position for e in entries])
            b.epoch = d.epoch + 1  # (as after a reconnect at a newer epoch than these reads)
            await d.read_more(1)  # nothing left to read: nothing dropped
            return sent, a, b

    sent, a, b = asyncio.run(scenario())
    assert len(sent) == 10 * RECEIVED_KEPT + 7 and sent == sorted(set(sent))
    for i, consumer in enumerate((a, b)):
        mine = sent[i::2]  # round robin, entry by entry, a first
        assert consumer.received_count == len(mine)
        assert RECEIVED_KEPT <= len(consumer.received) <= 2 * RECEIVED_KEPT
        assert consumer.received == mine[-len(consumer.received) :]
    assert (a.dropped, b.dropped) == (0, 0)
    b.receive_all([Entry(p, b"") for p in sent[:5]], b.epoch - 1)  # an older epoch: each entry dropped, counted
    assert b.dropped == 5 and b.received_count == len(sent[1::2])


def test_a_cursors_one_controller_is_made_at_its_first_use_and_shared(tmp_path: Path) -> None:
    """A reopened cursor holds no revision controller until something asks for it (a restart
    of many cursors makes none); the first ask makes one, the cursor's facade, its core and
    every later ask (from any thread) get that same one, a reset counts on it (its figures read it), and a metrics
    scrape before it existed read zeros without making it."""
    import threading

    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.cursor("sub").ack(Position(1, 0))
    with AckStore.open(tmp_path / "s", sync=False) as store:
        cur = store.topic(T).open_cursors()["sub"]
        assert cur._core._revision is None
        stats = cur.stats()
        assert (stats.revision_num, stats.revisions_done, stats.revision_running) == (0, 0, 0)
        assert cur._core._revision is None  # (the scrape made none)
        seen: list[CursorStateRevisionController] = []
        threads = [threading.Thread(target=lambda: seen.append(cur.revision_controller)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(seen) == 8 and all(c is seen[0] for c in seen)
        assert cur._core.revision_controller is seen[0] is cur._core._revision
        controller = cur.revision_controller
        assert controller.start_revision() == 0 and controller.end_revision(lambda: None) == 1
        assert cur.stats().revisions_done == 1 and cur.stats().revision_num == 1
