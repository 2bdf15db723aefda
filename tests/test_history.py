"""A cursor's history (``CursorConfig.history_seconds``): every flushed state in the window
can be restored exactly, the window is kept and only the window, and bad requests change
nothing. The flush clock is a fake one (``clock``): nothing here depends on how fast the
machine is."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ackstore import (
    AckStore,
    Cursor,
    CursorConfig,
    CursorSnapshot,
    HistoryPoint,
    HistoryRangeError,
    InvalidArgumentError,
    InvalidTypeError,
    Position,
    ReadOnlyError,
)
from ackstore.storage.records import split_log_key

from .forms import end_form

T = "persistent://t/ns/history"
HOUR = CursorConfig(history_seconds=3600, max_unacked_ranges_to_persist=0, full_marker_every=4)


class Clock:
    """``time.time`` for the test, and the steady clock history measures steps of it with:
    start at fixed moments and move only when told."""

    def __init__(self) -> None:
        from ackstore import history

        self.now = 1_800_000_000.0
        self.steady = history._elapsed()  # where the real one is: the tool run in another process reads that

    def __call__(self) -> float:
        return self.now

    def elapsed(self) -> float:
        return self.steady

    def tick(self, seconds: float = 1.0) -> None:
        """Time passes: both clocks move."""
        self.now += seconds
        self.steady += seconds

    def step(self, seconds: float) -> None:
        """The wall clock alone is set ahead (or back): a correction, a bad reading."""
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    from ackstore import history

    fake = Clock()
    monkeypatch.setattr(time, "time", fake)
    monkeypatch.setattr(history, "_elapsed", fake.elapsed)
    yield fake


def _state(cur: Cursor) -> tuple[Any, ...]:
    """What a restore brings back: everything a flush persists but the properties."""
    return _state_of(cur.snapshot())


def _state_of(s: CursorSnapshot) -> tuple[Any, ...]:
    return s.mark_delete_position, s.ranges, s.partial_batches, s.delivery_counts


def _points(store: AckStore, cursor_id: int) -> list[int]:
    """The sequences of the history points the store holds for ``cursor_id``."""
    db = store.storage.history_db
    assert db is not None
    return store.storage.read(
        lambda txn: [
            split_log_key(bytes(k))[1] for k, _ in txn.cursor(db=db) if split_log_key(bytes(k))[0] == cursor_id
        ]
    )


def _step(rng: random.Random, cur: Cursor, r: int, sparse: bool) -> None:
    """One round of a consumer: in-order acks with late ones, or scattered acks; now and
    then the mark-delete moves, a batch is partly acked, entries are delivered."""
    if sparse:
        cur.ack([Position(1 + rng.randrange(3), rng.randrange(20_000)) for _ in range(rng.randint(1, 30))])
    else:
        base = 50 * r
        cur.ack([Position(4, e) for e in range(base, base + 50) if rng.random() > 0.1])
    if rng.random() < 0.2:
        cur.ack_batch_index(Position(4, 50 * r + 60), 8, [rng.randrange(8)])
    if rng.random() < 0.2:
        cur.record_deliveries([Position(4, 50 * r + rng.randrange(50, 100))])
    if rng.random() < 0.1:
        cur.ack_cumulative(Position(1 + rng.randrange(2), rng.randrange(1000)))
    if rng.random() < 0.2:
        cur.set_property("round", r)


def _topic(store: AckStore) -> Any:
    topic = store.topic(T)
    for ledger in (1, 2, 3):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 20_000)
    topic.add_ledger(4)
    return topic


def test_every_point_restores_the_state_that_flush_wrote(store_path: Path, clock: Clock) -> None:
    """A seeded run of 40 flushes of a small cursor (the state layout) and a large one
    (ledger records and delta markers, full markers every 4): restoring to each point, in
    a random order, gives exactly the state that flush wrote (what a reopen after it
    recovered); a time between two flushes gives the earlier one; the restored state is
    durable at the next flush."""
    rng = random.Random(11)
    written: dict[str, dict[float, tuple[Any, ...]]] = {"small": {}, "large": {}}
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cursors = {name: topic.cursor(name, HOUR) for name in written}
        cursors["large"].ack_entries(1, range(0, 20_000, 3))  # thousands of ranges: the marker layout
        for r in range(40):
            for name, cur in cursors.items():
                _step(rng, cur, r, sparse=name == "large")
            store.flush()
            for name, cur in cursors.items():
                written[name][clock.now] = _state(cur)
            clock.tick()
        for name, cur in cursors.items():
            points = cur.history()
            assert [p.time for p in points] == sorted(written[name], reverse=True), name
            assert all(isinstance(p, HistoryPoint) for p in points)
            for p in points:  # read without a restore: the same states
                assert _state_of(cur.snapshot_as_of(p.time + 0.5)) == written[name][p.time], (name, p)
            order = list(points)
            rng.shuffle(order)
            for p in order:
                assert cur.restore_as_of(p.time + 0.5) == p  # between two flushes: the earlier
                assert _state(cur) == written[name][p.time], (name, p)
                assert p.mark_delete_position == written[name][p.time][0]
                assert p.ack_range_count == sum(len(r) for _, r in written[name][p.time][1])
        target = points[-5]
        cursors["small"].restore_as_of(datetime.fromtimestamp(target.time, tz=UTC))
        expected = _state(cursors["small"])
        assert expected == written["small"][target.time]
        store.flush()
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("small")) == expected
        large = store.topic(T).cursor("large")
        for t, state in written["large"].items():  # a reader reads every kept state too
            assert _state_of(large.snapshot_as_of(t)) == state


def test_a_restore_is_itself_a_point_and_can_be_undone(store_path: Path, clock: Clock) -> None:
    """A restore is written by the next flush like any change, so the history gains a
    point and the state before the restore can be restored again; acks not flushed when
    the restore ran are dropped, as a crash would."""
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", HOUR)
        states = []
        for r in range(6):
            cur.ack([Position(4, e) for e in range(10 * r, 10 * r + 8)])
            store.flush()
            states.append(_state(cur))
            clock.tick()
        cur.ack(Position(4, 9))  # not flushed: the restore drops it
        before = cur.history()
        cur.restore_as_of(before[3].time)
        assert _state(cur) == states[2]
        store.flush()
        clock.tick()
        after = cur.history()
        assert len(after) == len(before) + 1 and after[0].mark_delete_position == states[2][0]
        cur.restore_as_of(before[0].time)  # undo
        assert _state(cur) == states[5]
        store.flush()
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == states[5]


def _history_states(store: AckStore) -> dict[str, float]:
    """Each cursor's ``ackstore_cursor_history_states`` sample, from a scrape."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ackstore.metrics import AckStoreCollector

    registry = CollectorRegistry()
    registry.register(AckStoreCollector(store))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    family = next(f for f in families if f.name == "ackstore_cursor_history_states")
    return {s.labels["subscription"]: s.value for s in family.samples}


def test_the_window_is_kept_and_only_the_window(store_path: Path, clock: Clock) -> None:
    """With a 10-second window and a flush a second, a cursor keeps 11 points (and its log
    only the records they need): older ones are trimmed as flushes go, restoring to the
    oldest kept works, and one second before it is a typed error naming the range kept."""
    config = CursorConfig(history_seconds=10, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", config)
        plain = topic.cursor("plain", CursorConfig(max_unacked_ranges_to_persist=0))
        states = {}
        for r in range(60):
            for c in (cur, plain):
                c.ack([Position(4, e) for e in range(10 * r, 10 * r + 9)])
            store.flush()
            states[clock.now] = _state(cur)
            clock.tick()
        clock.tick(-1)  # the newest flush's time
        points = cur.history()
        assert [p.time for p in points] == [clock.now - s for s in range(11)]
        assert len(_points(store, cur.cursor_id)) == 11
        assert len(_points(store, plain.cursor_id)) == 0
        assert _history_states(store) == {"c": 11, "plain": 0}  # what metrics and stat say, the window slid
        records = store.storage.read(lambda txn: len(list(cur._core._log.records(txn))))
        assert records <= 12  # a state marker a flush in the window (and the one before it)
        assert store.storage.read(lambda txn: len(list(plain._core._log.records(txn)))) == 2
        oldest = points[-1].time
        cur.restore_as_of(oldest)
        assert _state(cur) == states[oldest]
        with pytest.raises(HistoryRangeError, match="history holds 20") as info:
            cur.restore_as_of(oldest - 1)
        assert datetime.fromtimestamp(oldest, tz=UTC).isoformat()[:19] in str(info.value)


def _raw(store: AckStore, cursor_id: int) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """``cursor_id``'s log (its log keys and state slots) and its history points, as the
    store holds them."""
    from ackstore.storage.records import log_bounds, slot_key

    def read(txn: Any) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
        low, high = log_bounds(cursor_id)
        log_ = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=store.storage.log_db) if low <= bytes(k) < high]
        for slot in (0, 1):
            value = txn.get(slot_key(cursor_id, slot), db=store.storage.log_db)
            if value is not None:
                log_.append((slot_key(cursor_id, slot), bytes(value)))
        points = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=store.storage.history_db)]
        return log_, [(k, v) for k, v in points if split_log_key(k)[0] == cursor_id]

    return store.storage.read(read)


def test_a_cursor_that_keeps_history_in_the_small_form_writes_what_its_parts_would(
    tmp_path: Path, clock: Clock
) -> None:
    """A subscription consuming in order with a few acks held back, delivery counts and a
    property, keeping a 10-second window at a flush a second for 40 flushes with a restart
    after 20: in the small form (its flushes after the first, and from the restart on: the
    writer opens it into the form) its log and its points are byte for byte those of the
    same subscription kept out of the form (its parts asked before every flush), the window
    slides the same (the states it lets go trimmed), and every kept point restores the
    state its flush wrote."""
    rng = random.Random(5)
    ops = []
    for r in range(40):
        batch = list(range(10 * r, 10 * r + 10))
        held = rng.sample(batch, rng.randint(0, 2))
        late = [e for e in range(max(0, 10 * r - 10), 10 * r) if rng.random() < 0.05]
        ops.append(([e for e in batch if e not in held] + late, [10 * r + 11], r % 7 == 0))
    config = CursorConfig(history_seconds=10, max_unacked_ranges_to_persist=0)
    outcomes = []
    start = clock.now
    for kept_out in (False, True):
        clock.now = start
        formed = 0
        written: dict[float, tuple[Any, ...]] = {}
        for first, half in ((True, ops[:20]), (False, ops[20:])):  # a restart between them
            store = AckStore.open(tmp_path / f"out-{kept_out}", sync=False)
            cur = (_topic(store) if first else store.topic(T)).cursor("c", config)
            if not first:  # the writer opens it into the form, from its newest state under its log key
                assert cur._core.small is not None, kept_out
                assert _state(cur) == written[max(written)]
            for acks, delivered, prop in half:
                cur.ack([Position(4, e) for e in acks])
                cur.record_deliveries([Position(4, e) for e in delivered])
                if prop:
                    cur.set_property("round", len(written))
                if kept_out:
                    with store.lock:
                        cur._core._parts()  # asked what the form does not serve: out of it at the flush
                formed += cur._core.small is not None
                store.flush()
                written[clock.now] = _state(cur)
                clock.tick()
            if first:
                store.close()
        clock.tick(-1)  # the newest flush's time: the whole window visible
        points = cur.history()
        assert len(points) == 11
        for p in points:
            assert _state_of(cur.snapshot_as_of(p.time)) == written[p.time], (kept_out, p)
        outcomes.append((_raw(store, cur.cursor_id), [p.time for p in points], formed))
        store.close()
    (raw, times, formed), (raw_out, times_out, formed_out) = outcomes
    assert formed >= 35 and formed_out == 0, (formed, formed_out)
    assert times == times_out
    assert raw == raw_out
    log_, points = raw
    assert len(points) == 11 and len(log_) <= 12  # the window's states, and the one before them


def test_a_history_cursors_damaged_newest_state_is_recovered_past_not_read_into_the_form(
    store_path: Path, clock: Clock
) -> None:
    """A writer opens a history cursor into the small form from its newest state under its
    log key only when that state is intact: with a byte of it flipped, the open recovers the
    cursor as any other, from the state before (the report says a marker was skipped), on
    its parts, and its next flush is a point of its history again."""
    from . import rawlog

    config = CursorConfig(history_seconds=3600)
    states = []
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c", config)
        for r in range(4):
            cur.ack([Position(4, e) for e in range(10 * r, 10 * r + 9)])
            store.flush()
            states.append(_state(cur))
            clock.tick()
        assert cur._core.small is not None
        cid, newest = cur.cursor_id, cur.stats().last_marker_seq
    rawlog.damage(store_path, newest, cid)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c", config)
        assert cur._core.small is None  # recovered on its parts
        assert _state(cur) == states[-2]
        assert cur.stats().recovery.markers_skipped == 1
        cur.ack(Position(4, 100))
        store.flush()
        assert cur.history()[0].mark_delete_position == _state(cur)[0]


def test_bad_restores_change_nothing(store_path: Path, clock: Clock) -> None:
    """A cursor that keeps no history, a time that is not one, a negative time, a time
    before the window, a read-only store: each a typed error, and the cursor is as it was."""
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", HOUR)
        none = topic.cursor("none")
        for r in range(3):
            cur.ack(Position(4, r * 2))
            none.ack(Position(4, r * 2))
            store.flush()
            clock.tick()
        cur.ack(Position(4, 100))
        before = _state(cur)
        with pytest.raises(HistoryRangeError, match="keeps no history"):
            none.restore_as_of(clock.now)
        with pytest.raises(InvalidTypeError, match="'yesterday'"):
            cur.restore_as_of("yesterday")  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError):
            cur.restore_as_of(True)
        with pytest.raises(InvalidArgumentError, match="-5"):
            cur.restore_as_of(-5)
        with pytest.raises(HistoryRangeError, match="has no state as of"):
            cur.restore_as_of(clock.now - 3600)
        with pytest.raises(HistoryRangeError, match="has no state as of"):
            cur.snapshot_as_of(clock.now - 3600)
        with pytest.raises(HistoryRangeError, match="keeps no history"):
            none.snapshot_as_of(clock.now)
        with pytest.raises(InvalidTypeError, match="'yesterday'"):
            cur.snapshot_as_of("yesterday")  # type: ignore[arg-type]
        assert _state(cur) == before and none.history() == []
    with AckStore.open(store_path, readonly=True) as store:
        ro = store.topic(T).cursor("c")
        assert len(ro.history()) == 4  # the close flushed the pending ack
        with pytest.raises(ReadOnlyError):
            ro.restore_as_of(clock.now)


def test_turning_history_off_or_deleting_the_cursor_drops_its_points(store_path: Path, clock: Clock) -> None:
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        a, b = topic.cursor("a", HOUR), topic.cursor("b", HOUR)
        for r in range(4):
            for c in (a, b):
                c.ack(Position(4, r))
            store.flush()
            clock.tick()
        assert len(_points(store, a.cursor_id)) == 4 and len(a.history()) == 4
        a.update_config(history_seconds=0)
        assert _points(store, a.cursor_id) == [] and a.history() == []
        bid = b.cursor_id
        topic.delete_cursor("b")
        assert _points(store, bid) == []
        a.update_config(history_seconds=60)  # on again: from the next flush
        a.ack(Position(4, 10))
        store.flush()
        assert len(a.history()) == 1


def test_compaction_leaves_a_cursor_with_history_as_it_is(store_path: Path, clock: Clock) -> None:
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", HOUR)
        for r in range(5):
            cur.ack(Position(4, 2 * r))
            store.flush()
            clock.tick()
        first = cur.history()[-1]
        stats = store.compact()
        assert [s.cursor for s in stats] == []
        cur.restore_as_of(first.time)
        assert cur.snapshot().ranges == [(4, [(0, 0)])]


def _cli(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_the_history_and_rewind_commands(store_path: Path) -> None:
    """``ackstore history`` lists the points (JSON too); ``ackstore rewind`` says what
    changes and asks, changes nothing when told no, restores exactly and durably with
    --yes; a time that is not one is a usage error (exit 2), one before the window a
    failure naming the range (exit 1), and so is a store a writer holds."""
    states = []
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        cur = topic.cursor("sub", HOUR)
        for r in range(5):
            cur.ack([Position(4, e) for e in range(10 * r, 10 * r + 6)])
            store.flush()
            states.append(_state(cur))
    spec = f"{T}/sub"
    stat = _cli("stat", store_path, "--json")
    figures = json.loads(stat.stdout)["topics"][T]["cursors"]["sub"]
    assert (figures["history_seconds"], figures["history_points"]) == (3600, 5), stat.stderr
    assert "history 3,600 s: 5 states kept from" in _cli("stat", store_path).stdout
    listed = _cli("history", store_path, "--cursor", spec, "--json")
    assert listed.returncode == 0, listed.stderr
    points = json.loads(listed.stdout)["points"]
    assert len(points) == 5 and [p["ranges"] for p in points] == [5, 4, 3, 2, 1]
    text = _cli("history", store_path, "--cursor", spec)
    assert "5 flushed states kept (window 3,600 s)" in text.stdout and points[0]["iso"] in text.stdout
    no = _cli("rewind", store_path, "--cursor", spec, "--to", points[3]["time"], stdin="n\n")
    assert no.returncode == 1 and "5 ranges -> 2 ranges" in no.stderr, no.stderr
    yes = _cli("rewind", store_path, "--cursor", spec, "--to", points[3]["iso"], "--yes")
    assert yes.returncode == 0 and "rewound" in yes.stdout, yes.stderr
    with AckStore.open(store_path, readonly=True) as store:
        again = store.topic(T).cursor("sub")
        assert _state(again) == states[1] and len(again.history()) == 6
    bad = _cli("rewind", store_path, "--cursor", spec, "--to", "soon", "--yes")
    assert bad.returncode == 2 and "'soon' is not a time" in bad.stderr and "Traceback" not in bad.stderr
    early = _cli("rewind", store_path, "--cursor", spec, "--to", "2001-01-01T00:00:00Z", "--yes")
    assert early.returncode == 1 and "its history holds" in early.stderr, early.stderr
    with AckStore.open(store_path):
        held = _cli("rewind", store_path, "--cursor", spec, "--to", points[0]["time"], "--yes")
    assert held.returncode != 0 and "Traceback" not in held.stderr, held.stderr


def test_dump_with_history_writes_every_kept_state(store_path: Path, tmp_path: Path) -> None:
    """``ackstore dump --history`` adds one line per kept state, oldest first, each the state
    that flush wrote (ranges, batches, delivery counts, the properties then); a dump without
    it has none; restore reads such a dump, counts the states and says it does not bring
    them back (the restored store's cursor has today's state and a history of its own)."""
    states = []
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        cur = topic.cursor("sub", HOUR)
        topic.cursor("plain")  # keeps no history: no lines
        for r in range(4):
            cur.ack([Position(4, e) for e in range(10 * r, 10 * r + 6)])
            cur.ack_batch_index(Position(4, 200 + r), 8, [1, 2])
            cur.record_deliveries([Position(4, 300 + r)])
            cur.set_property("round", r)
            store.flush()
            states.append(cur.snapshot())
    spec = f"{T}/sub"
    dumped = _cli("dump", store_path, "--history")
    assert dumped.returncode == 0, dumped.stderr
    lines = [json.loads(x) for x in dumped.stdout.splitlines()]
    kept = [x for x in lines if x["type"] == "history"]
    assert [x["cursor"] for x in kept] == ["sub"] * 4 and lines[-1]["history"] == 4
    for line, snap in zip(kept, states, strict=True):
        assert line["mark_delete"] == str(snap.mark_delete_position)
        assert line["ranges"] == [[ledger, a, b] for ledger, runs in snap.ranges for a, b in runs]
        assert line["batches"] == [[str(p), n, sorted(ix)] for p, (n, ix) in snap.partial_batches.items()]
        assert line["deliveries"] == [[str(p), n] for p, n in snap.delivery_counts.items()]
        assert line["properties"] == snap.properties
    assert [x["time"] for x in kept] == sorted(x["time"] for x in kept)
    plain = _cli("dump", store_path, "--cursor", spec)
    assert plain.returncode == 0 and '"history"' not in plain.stdout
    csv_ = _cli("dump", store_path, "--history", "--format", "csv")
    assert csv_.returncode == 2 and "--history" in csv_.stderr and "Traceback" not in csv_.stderr
    back = _cli("restore", tmp_path / "back", "-", stdin=dumped.stdout)
    assert back.returncode == 0 and "history states not brought back: 4" in back.stdout, back.stderr
    with AckStore.open(tmp_path / "back", readonly=True) as store:
        again = store.topic(T).cursor("sub")
        assert again.snapshot() == states[-1] and len(again.history()) == 1


def test_salvage_brings_back_the_newest_state_and_says_history_did_not_survive(
    store_path: Path, tmp_path: Path, clock: Clock
) -> None:
    """Salvage gives a history cursor its newest state, says how many kept states it loses
    (library report and CLI), and the new store's cursor keeps history again from there."""
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur, plain = topic.cursor("sub", HOUR), topic.cursor("plain")
        for r in range(6):
            for c in (cur, plain):
                c.ack([Position(4, e) for e in range(10 * r, 10 * r + 6)])
            store.flush()
            clock.tick()
        newest = _state(cur)
    from ackstore.salvage import salvage

    report = salvage(store_path, tmp_path / "saved")
    by_name = {c.cursor: c for c in report.cursors}
    assert by_name["sub"].history_lost == 6 and by_name["plain"].history_lost == 0
    assert all(c.complete for c in report.cursors)  # complete is about the newest state
    with AckStore.open(tmp_path / "saved", readonly=True) as saved:
        again = saved.topic(T).cursor("sub")
        assert _state(again) == newest and again.config.history_seconds == 3600 and len(again.history()) == 1
    out = _cli("salvage", store_path, tmp_path / "cli")
    assert out.returncode == 0 and "history not carried: 6 kept states" in out.stdout, out.stderr


def test_a_dispatcher_restore_is_a_revision_and_a_new_epoch(store_path: Path, clock: Clock) -> None:
    """Through a Dispatcher, a restore discards the read in flight (PIP-269), moves the
    consumers to a new epoch (PIP-194) and reads again from after the restored mark-delete
    position; a time before the window raises before anything changes (same epoch)."""
    import asyncio

    from ackstore import CursorStateRevisionController, Dispatcher
    from ackstore.testing import InMemoryLedgerReader

    async def scenario() -> tuple[list[Position], Position, int]:
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            topic.add_ledger(1)
            cur = topic.cursor("sub", HOUR)
            reader = InMemoryLedgerReader(topic, manual=True)
            reader.append(1, 40)
            d = Dispatcher(cur, reader, CursorStateRevisionController())
            consumer = d.add_consumer("c1")
            cur.ack_cumulative(Position(1, 4))
            store.flush()
            kept = clock.now
            clock.tick()
            cur.ack_cumulative(Position(1, 20))  # the bad deploy
            store.flush()
            clock.tick()
            with pytest.raises(HistoryRangeError):
                d.restore_as_of(kept - 100)
            assert d.epoch == 0 and cur.mark_delete_position == Position(1, 20)
            read = asyncio.create_task(d.read_more(3))  # 1:21..1:23, in flight
            while not reader.pending:
                await asyncio.sleep(0)
            point = d.restore_as_of(kept)
            reader.complete()
            await read
            assert point.mark_delete_position == Position(1, 4) and cur.read_position == Position(1, 5)
            return consumer.received, cur.mark_delete_position, consumer.epoch

    received, md, epoch = asyncio.run(scenario())
    assert received == [] and md == Position(1, 4) and epoch == 1


def test_check_reports_damaged_history_and_fix_drops_it(
    store_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A point whose value is damaged, and one whose marker is gone: ``check`` names both
    (damaged-history); the store still opens and flushes (the damaged point is left out,
    the other refuses a restore with a typed error and changes nothing); ``check --fix``
    drops the cursor's history, saying so, and the store is clean again."""
    import lmdb

    from ackstore import CorruptRecordError, check
    from ackstore.storage.records import log_key

    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", HOUR)
        cur.ack_entries(1, range(0, 20_000, 3))  # the marker layout: ledger records and markers
        for r in range(8):
            cur.ack([Position(4, e) for e in range(10 * r, 10 * r + 5)])
            store.flush()
            clock.tick()
        cid = cur.cursor_id
        seqs = _points(store, cid)
    assert check(store_path) == []
    env = lmdb.open(str(store_path), max_dbs=8)
    history_db, log_db = env.open_db(b"history"), env.open_db(b"log")
    with env.begin(write=True) as txn:
        txn.put(log_key(cid, seqs[3]), b"\x00" * 7, db=history_db)  # a damaged point
        txn.delete(log_key(cid, seqs[1]), db=log_db)  # an old point's marker gone
    env.close()
    found = check(store_path)
    assert {f.kind for f in found} == {"damaged-history"}, found
    assert any(f.seq == seqs[1] for f in found) and any("too short" in f.message for f in found)
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        points = cur.history()
        assert len(points) == 7  # the damaged one left out
        said = [r.getMessage() for r in caplog.records if r.name == "ackstore" and "is left out" in r.getMessage()]
        assert said == [
            f"ackstore: a history point of cursor id {cid} is left out: history point of cursor id {cid} at "
            f"{seqs[3]} is 7 bytes: too short: the point is damaged"
        ]
        before = _state(cur)
        with pytest.raises(CorruptRecordError, match="nothing was changed"):
            cur.restore_as_of(points[-2].time)  # the point whose marker is gone
        assert _state(cur) == before
        cur.ack(Position(4, 500))
        store.flush()  # flushing goes on
        expected = _state(cur)
    fixed = check(store_path, fix=True)
    assert fixed and all(f.fixed and "history was dropped" in f.message for f in fixed)
    assert check(store_path) == []
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        assert _state(cur) == expected and cur.history() == []
        cur.ack(Position(4, 501))
        store.flush()
        assert len(cur.history()) == 1


def test_the_compact_command_keeps_the_window_unless_told(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        kept, plain = topic.cursor("kept", HOUR), topic.cursor("plain")
        for r in range(4):
            for c in (kept, plain):
                c.ack(Position(4, 2 * r))
            store.flush()
    first = _cli("compact", store_path)
    assert first.returncode == 0 and f"keeping their history (--drop-history rewrites them): {T}/kept" in first.stdout
    with AckStore.open(store_path, readonly=True) as store:
        assert len(store.topic(T).cursor("kept").history()) == 4
    second = _cli("compact", store_path, "--drop-history", "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["kept"] == []
    with AckStore.open(store_path, readonly=True) as store:
        cur = store.topic(T).cursor("kept")
        assert cur.history() == [] and cur.snapshot().ranges == [(4, [(0, 0), (2, 2), (4, 4), (6, 6)])]


def test_the_window_keeps_the_full_marker_its_oldest_point_needs() -> None:
    """``CursorHistory.after`` / ``add`` on points of a chain: what leaves the window goes,
    but for the full marker the oldest point kept starts its chain at."""
    from ackstore.history import CursorHistory, Point

    def p(seq: int, full_seq: int) -> Point:
        return Point(seq, 100 * seq, (1, -1), 0, full_seq, (seq,) if seq == full_seq else ())

    h = CursorHistory([p(1, 1), p(2, 1), p(3, 1), p(4, 4), p(5, 4)])
    dropped, full = h.after(p(6, 4), cutoff=300)  # the oldest kept: 3, whose chain starts at 1
    assert (dropped, full.seq) == ([2], 1)
    h.add(p(6, 4), dropped)
    assert [x.seq for x in h.kept] == [1, 3, 4, 5, 6] and [x.seq for x in h.visible(300)] == [3, 4, 5, 6]
    dropped, full = h.after(p(7, 4), cutoff=500)  # the oldest kept: 5, from 4
    assert (dropped, full.seq) == ([1, 3], 4)
    h.add(p(7, 4), dropped)
    assert [x.seq for x in h.kept] == [4, 5, 6, 7]
    dropped, full = h.after(p(8, 8), cutoff=900)  # nothing older kept: the new point only
    assert (dropped, full.seq) == ([4, 5, 6, 7], 8)
    h.add(p(8, 8), dropped)
    assert [x.seq for x in h.kept] == [8]


def test_a_store_of_format_10_gains_the_history_database_at_a_writers_first_write(
    store_path: Path, clock: Clock
) -> None:
    """A store an ackstore without history left (format 10, no ``history`` database) opens for
    reading as it is, and for writing too until something is written; the writer's first
    write creates the database and raises the store to this format (an ackstore that would
    trim a window away then refuses it), and history works from there."""
    import lmdb

    from ackstore.storage.records import FORMAT_VERSION

    from . import rawlog

    with AckStore.open(store_path) as store:
        _topic(store).cursor("sub").ack([Position(1, e) for e in range(0, 100, 2)])
    env = lmdb.open(str(store_path), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"history", txn=txn), delete=True)
    env.close()
    rawlog.set_format(store_path, 10)
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == 10 and store.storage.history_db is None
        cur = store.topic(T).cursor("sub")
        assert cur.ack_range_count == 49 and cur.history() == []
    with AckStore.open(store_path) as store:
        assert store.format_version == 10 and store.storage.history_db is None
        cur = store.topic(T).cursor("sub")
        assert cur.history() == []
        cur.update_config(history_seconds=3600)  # a write: the store is raised in its transaction
        assert store.format_version == FORMAT_VERSION == 16 and store.storage.history_db is not None
        cur.ack([Position(1, 1)])
        store.flush()
        assert [p.ack_range_count for p in cur.history()] == [48]


def test_a_point_round_trips_and_any_cut_flipped_or_extra_byte_is_damage() -> None:
    """Points of random shapes decode to themselves; every value cut short, with a byte
    more, with any one bit flipped, or read under another key is a CorruptRecordError naming
    the point, never another point. A point of format 12 (no tag, no checksum) still reads."""
    from ackstore.errors import CorruptRecordError
    from ackstore.history import Point, decode_point, encode_point
    from ackstore.storage.codecs import point_value

    rng = random.Random(5)
    for _ in range(300):
        seq = rng.randrange(1 << rng.choice((4, 20, 40, 62)))
        full = rng.randint(0, seq)
        refs = tuple(sorted(rng.sample(range(full + 1), min(full + 1, rng.randrange(6))))) if full == seq else ()
        md = (rng.randrange(1 << rng.choice((3, 30, 62))), rng.randrange(-1, 1 << rng.choice((3, 31, 62))))
        point = Point(seq, rng.randrange(1 << 63), md, rng.randrange(1 << 20), full, refs)
        value = encode_point(point, 9)
        assert decode_point(9, seq, value) == point
        for cut in range(len(value)):
            with pytest.raises(CorruptRecordError, match=f"cursor id 9 at {seq}"):
                decode_point(9, seq, value[:cut])
        with pytest.raises(CorruptRecordError, match="fails its checksum"):
            decode_point(9, seq, value + b"\x00")
        for bit in rng.sample(range(8 * len(value)), 12):
            flipped = bytearray(value)
            flipped[bit // 8] ^= 1 << (bit % 8)
            with pytest.raises(CorruptRecordError, match=f"cursor id 9 at {seq}"):
                decode_point(9, seq, bytes(flipped))
        with pytest.raises(CorruptRecordError, match="fails its checksum"):
            decode_point(10, seq, value)
        gaps = [b - a for a, b in zip((0, *refs), refs, strict=False)]
        legacy = point_value(point.micros, (md[0], md[1] + 1, point.ranges, seq - full, len(refs), *gaps))
        if legacy[0] == 0:  # format 12's (every time before the year 4253)
            assert decode_point(9, seq, legacy) == point
    small = encode_point(Point(1000, 1_800_000_000_000_000, (4, 123_456), 3, 1000, ()), 9)
    assert len(small) <= 25


def test_times_are_read_from_the_epoch_to_9999_and_said_in_utc() -> None:
    from datetime import UTC, datetime

    from ackstore.history import as_micros, iso

    assert iso(0) == "1970-01-01T00:00:00.000000+00:00"
    assert iso(1_800_000_000_123_456) == "2027-01-15T08:00:00.123456+00:00"
    assert as_micros(0) == as_micros(0.0) == as_micros(datetime(1970, 1, 1, tzinfo=UTC)) == 0
    assert as_micros(253402300799) == 253402300799 * 10**6
    for bad in (-1e-6, 253402300800, float("nan")):
        with pytest.raises(InvalidArgumentError, match=r"allowed a Unix time from 0 \(1970-01-01\)"):
            as_micros(bad)


def test_a_point_cut_inside_each_field_names_that_field() -> None:
    """A point of format 12 (no checksum: what its fields say is all there is to check) cut
    inside each field, with a byte past its end, or naming a full marker above itself: the
    error names the point and exactly what is wrong."""
    from ackstore.errors import CorruptRecordError
    from ackstore.history import decode_point
    from ackstore.storage.codecs import point_value

    value = point_value(1_800_000_000_000_000, (4, 6, 3, 0, 2, 3, 4))  # every field one byte
    assert value[0] == 0 and len(value) == 15 and decode_point(9, 10, value).refs == (3, 7)
    kind = "history point of cursor id 9 at 10"
    fields = ["mark-delete ledger", "mark-delete entry", "range count", "full marker distance", "record count"]
    for cut, what in enumerate([*fields, "record", "record"], start=8):
        with pytest.raises(CorruptRecordError) as caught:
            decode_point(9, 10, value[:cut])
        assert str(caught.value) == f"{kind} ends inside its {what}: the point is damaged"
    with pytest.raises(CorruptRecordError) as caught:
        decode_point(9, 10, value + b"\x00")
    assert str(caught.value) == f"{kind} has 1 bytes past its end: the point is damaged"
    with pytest.raises(CorruptRecordError) as caught:
        decode_point(9, 10, point_value(1_800_000_000_000_000, (4, 6, 3, 11, 0)))
    assert str(caught.value) == f"{kind}'s full marker distance 11 is over 10: the point is damaged"


def test_the_disk_bound_holds_while_the_window_slides(store_path: Path, clock: Clock) -> None:
    """Steady consumption (the mark-delete moving every flush, a few acks held back) and a
    cursor of thousands of ranges, a minute of history at one flush a second, for five
    minutes: ``data.mdb`` stays within 4x (live + what the window keeps) + 16 KiB a cursor,
    every cursor keeps the window's 60 states, and a kept flush costs what the flush wrote."""
    rng = random.Random(8)
    minute = CursorConfig(history_seconds=60, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cursors = [topic.cursor(f"s{i}", minute) for i in range(40)]
        big = topic.cursor("big", minute)
        big.ack_entries(1, range(0, 20_000, 3))
        held: list[list[int]] = [[] for _ in cursors]
        written = 0
        for r in range(300):
            for i, cur in enumerate(cursors):
                batch = list(range(50 * r, 50 * r + 50))
                back = rng.sample(batch, rng.randint(1, 2)) if len(held[i]) < 5 else []
                cur.ack([Position(4, e) for e in batch if e not in back] + [Position(4, e) for e in held[i][:1]])
                held[i] = held[i][1:] + back
            big.ack(Position(2, 7 * r + 1))  # a new ack every flush: every flush writes it
            stats = store.flush()
            if r >= 200:
                written += stats.bytes_written
            clock.tick()
        usages = [cur.log_usage() for cur in [*cursors, big]]
        live = sum(u.live_bytes for u in usages)
        history = sum(u.history_bytes for u in usages)
        assert [len(cur.history()) for cur in [*cursors, big]] == [60] * 41
        kept_per_flush = history / (60 * 41)
        assert kept_per_flush <= 1.5 * written / (100 * 41)  # a kept flush costs about what a flush wrote
    size = (store_path / "data.mdb").stat().st_size
    assert size <= 4 * (live + history) + 16 * 1024 * 41, (size, live, history)


def test_every_kept_point_stays_restorable_while_restores_and_the_window_trim(store_path: Path, clock: Clock) -> None:
    """A two-second window, a full marker every third flush, 150 rounds of 20 random acks
    over three ledgers, a flush each round 1/64 s apart, and every tenth round a
    restore to a random kept point: a restore's full marker names the records of the state
    it restored, older than the window's oldest full marker, and the window kept only what
    that one named. Every kept point stays restorable to the state its flush wrote, and
    ``check`` finds nothing."""
    from ackstore import check

    rng = random.Random(52)
    written: dict[float, tuple[Any, ...]] = {}
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c", CursorConfig(history_seconds=2, full_marker_every=3))
        for r in range(150):
            cur.ack([Position(rng.randint(1, 3), rng.randrange(500)) for _ in range(20)])
            if r % 10 == 9:
                cur.restore_as_of(rng.choice(cur.history()).time)
            store.flush()
            written[clock.now] = _state(cur)
            clock.tick(1 / 64)
        points = cur.history()
        assert len(points) == 128
        for p in points:
            assert _state_of(cur.snapshot_as_of(p.time)) == written[p.time], p
    assert check(store_path) == []


def test_the_boot_id_is_sixteen_bytes_or_zeros_where_there_is_none(tmp_path: Path) -> None:
    from ackstore.history import _boot_id

    (tmp_path / "id").write_text("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n")
    assert _boot_id(str(tmp_path / "id")) == bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
    (tmp_path / "bad").write_text("not a boot id\n")
    assert _boot_id(str(tmp_path / "bad")) == bytes(16) == _boot_id(str(tmp_path / "missing"))
    assert len(_boot_id()) == 16


def test_a_wall_clock_within_the_step_bound_is_followed_and_past_it_is_not(store_path: Path, clock: Clock) -> None:
    """Between two flushes the wall clock may drift from the steady clock by up to
    STEP_SECONDS and still label the point; one that moved further stepped: the point is
    labelled by the steady clock from the flush before."""
    from ackstore import history

    with AckStore.open(store_path, sync=False) as store:
        cur = _topic(store).cursor("c", HOUR)
        times = []
        for drift in (0.0, history.STEP_SECONDS, history.STEP_SECONDS + 1):
            clock.tick(1.0)
            clock.step(drift)
            cur.ack(Position(4, len(times)))
            store.flush()
            times.append(cur.history()[0].time)
        start = 1_800_000_000.0
        assert times == [start + 1, start + 2 + history.STEP_SECONDS, start + 3 + history.STEP_SECONDS]


@pytest.mark.parametrize("reboot", [False, True], ids=["same-boot", "after-a-reboot"])
def test_a_clock_stepped_back_across_a_restart_labels_no_point_before_the_last(
    store_path: Path, clock: Clock, reboot: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three flushes, a reopen with the wall clock ten minutes behind, three more: the new
    points are never before the newest one: in the same boot they go on from it by the
    steady clock, a second apart as they ran; after a reboot (no steady clock to go by)
    the first one takes the newest point's time and the rest go on from it. A restore to a
    point's time gives its state, one between two flushes the earlier; the wall clock's now,
    before every point, is a HistoryRangeError that says the clock is behind them."""
    from ackstore import history

    states = []
    with AckStore.open(store_path, sync=False) as store:
        cur = _topic(store).cursor("c", HOUR)
        for r in range(3):
            cur.ack(Position(4, r))
            store.flush()
            states.append(_state(cur))
            clock.tick()
    first = clock.now - 1
    clock.step(-600)
    if reboot:
        monkeypatch.setattr(history, "_boot_id", lambda: b"another boot....")
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        for r in range(3, 6):
            cur.ack(Position(4, 10 + r))
            store.flush()
            states.append(_state(cur))
            clock.tick()
        times = [p.time for p in reversed(cur.history())]
        after = [first, first + 1, first + 2] if reboot else [first + 1, first + 2, first + 3]
        assert times == [first - 2, first - 1, first, *after], times
        assert cur.restore_as_of(after[2]).time == after[2] and _state(cur) == states[5]
        assert cur.restore_as_of(after[1] + 0.5).time == after[1] and _state(cur) == states[4]
        assert cur.restore_as_of(first - 0.5).time == first - 1 and _state(cur) == states[1]
        with pytest.raises(HistoryRangeError, match=r"this machine's clock reads .* behind the newest flush"):
            cur.restore_as_of(time.time())  # ten minutes before every point, by the points' times


def test_one_wrong_clock_reading_neither_mislabels_points_nor_empties_the_window(
    store_path: Path, clock: Clock
) -> None:
    """Ten flushes a second apart, one with the wall clock two hours ahead, then the clock
    corrected and three more: the one-hour window keeps all fourteen states, each labelled
    a second after the one before as the steady clock measured, and each restores to its
    own; a restore as of now gives the newest."""
    states = {}
    with AckStore.open(store_path, sync=False) as store:
        cur = _topic(store).cursor("c", HOUR)
        start = clock.now
        for r in range(14):
            if r == 10:
                clock.step(7200)
            if r == 11:
                clock.step(-7200)
            cur.ack(Position(4, r))
            store.flush()
            states[start + r] = _state(cur)
            clock.tick()
        points = list(reversed(cur.history()))
        assert [p.time for p in points] == [start + r for r in range(14)]
        for p in points:
            assert _state_of(cur.snapshot_as_of(p.time)) == states[p.time]
        assert cur.restore_as_of(time.time()).time == start + 13
    with AckStore.open(store_path, sync=False) as store:  # the restore was flushed at close: a point more
        assert len(store.topic(T).cursor("c").history()) == 15


def _ack_one(cur: Cursor, r: int) -> None:
    cur.ack(Position(4, r))


def _flushed_points(
    store_path: Path, clock: Clock, config: CursorConfig, flushes: int, ack: Callable[[Cursor, int], None] = _ack_one
) -> tuple[int, list[int], Any]:
    """Cursor ``c`` with ``config`` acks (``ack(cur, r)`` in round r; one entry of ledger 4,
    4:r, unless told) and flushes ``flushes`` times, a second apart: its id, its points'
    sequences and its state."""
    with AckStore.open(store_path, sync=False) as store:
        cur = _topic(store).cursor("c", config)
        for r in range(flushes):
            ack(cur, r)
            store.flush()
            clock.tick()
        return cur.cursor_id, _points(store, cur.cursor_id), _state(cur)


def _flip_point_time(store_path: Path, cid: int, seq: int) -> None:
    """One bit of the time of the point at ``seq`` flipped (a time in 2035 if believed)."""
    import lmdb

    from ackstore.storage.records import log_key

    env = lmdb.open(str(store_path), max_dbs=8)
    db = env.open_db(b"history")
    with env.begin(write=True) as txn:
        value = bytearray(txn.get(log_key(cid, seq), db=db))
        value[4] ^= 0x10
        txn.put(log_key(cid, seq), bytes(value), db=db)
    env.close()


def test_a_damaged_point_is_found_refused_and_counted(store_path: Path, tmp_path: Path, clock: Clock) -> None:
    """One bit of the newest point's time flipped (a time in 2035 if it were believed):
    ``check`` reports it, a restore it could be the answer to refuses naming it (the API
    and ``ackstore rewind``, one line, nothing changed), an older one still works, and
    salvage says the point was damaged."""
    from ackstore import CorruptRecordError, check
    from ackstore.salvage import salvage

    cid, seqs, before = _flushed_points(store_path, clock, HOUR, 5)
    _flip_point_time(store_path, cid, seqs[-1])
    found = check(store_path)
    assert [f.kind for f in found] == ["damaged-history"] and "fails its checksum" in found[0].message
    rewind = _cli("rewind", store_path, "--cursor", f"{T}/c", "--to", str(time.time()), "--yes")
    assert rewind.returncode == 1 and f"history point {seqs[-1]} is damaged" in rewind.stderr
    assert len(rewind.stderr.strip().splitlines()) == 1 and "Traceback" not in rewind.stderr
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        assert len(cur.history()) == 4
        with pytest.raises(CorruptRecordError, match=f"history point {seqs[-1]} is damaged"):
            cur.restore_as_of(time.time())
        assert _state(cur) == before
        assert cur.restore_as_of(clock.now - 3.5).time == clock.now - 4  # before it: not in doubt
    report = salvage(store_path, tmp_path / "new")
    (c,) = report.cursors
    assert (c.history_lost, c.history_damaged) == (6, 1)  # (the restore's flush at close is a point too)


@pytest.mark.parametrize(
    "when", [10**400, 2**63, 1e300, -0.5, datetime.min, datetime(1960, 1, 1, tzinfo=UTC)], ids=repr
)
def test_a_time_outside_the_calendar_is_a_typed_error_naming_it(store_path: Path, clock: Clock, when: Any) -> None:
    """A restore, a look or ``ackstore rewind --to`` as of a time before 1970 or past 9999
    (a huge int, an infinite-ish float, ``datetime.min``) is an InvalidArgumentError naming
    it and the range allowed, never an OverflowError or ValueError from inside; nothing
    changes, and the tool says so in one line, exit 2."""
    from ackstore import InvalidArgumentError

    with AckStore.open(store_path, sync=False) as store:
        cur = _topic(store).cursor("c", HOUR)
        cur.ack(Position(4, 1))
        store.flush()
        before = _state(cur)
        for call in (cur.restore_as_of, cur.snapshot_as_of):
            with pytest.raises(InvalidArgumentError, match=r"allowed a Unix time from 0 .1970-01-01. to 253402300799"):
                call(when)
        assert _state(cur) == before and not cur.dirty
    text = when.isoformat() if isinstance(when, datetime) else repr(when)
    r = _cli("rewind", store_path, "--cursor", f"{T}/c", "--to", text, "--yes")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "allowed a Unix time" in r.stderr, r.stderr


def _named_below_by_scan(h: Any, full: Any, dropped: list[int]) -> frozenset[int]:
    """What ``CursorHistory.named_below`` must give, by its definition: ``full``'s records
    and those older than it that any later kept point names (every point looked at)."""
    named = set(full.refs)
    for p in h.kept:
        if p.refs and p.seq > full.seq and p.seq not in set(dropped):
            named.update(r for r in p.refs if r < full.seq)
    return frozenset(named)


@pytest.mark.parametrize("seed", range(12))
def test_the_records_a_window_keeps_are_what_every_kept_point_names(seed: int) -> None:
    """A cursor's window over a log of three ledgers: each flush writes a new record of some
    ledgers and a marker (full every few flushes, naming each ledger's newest record), and
    now and then a restore's full marker names the records of an older state instead. At
    every flush, what the window keeps below its oldest full marker (looking only at the
    markers that reach back) is what a scan of every kept point names, over the window
    sliding, restores, a reopen's reload of the points, and the lists being cut down."""
    from ackstore.history import CursorHistory, Point

    rng = random.Random(seed)
    live = {ledger: -1 for ledger in (1, 2, 3)}
    fulls: list[tuple[int, ...]] = []  # what each full marker named: a restore goes back to one
    h, seq, full_seq, window = CursorHistory(), 0, 0, rng.choice([3, 10, 40])
    added: dict[int, Point] = {}
    for flush in range(300):
        for ledger in rng.sample(sorted(live), rng.randint(0, 2)):
            live[ledger], seq = seq, seq + 1
        if fulls and rng.random() < 0.08:  # a restore: a full marker naming an older state's records
            refs = rng.choice(fulls)
        elif rng.random() < 0.3 or not fulls:
            refs = tuple(sorted(r for r in live.values() if r >= 0))
        else:
            refs = ()
        if refs:
            full_seq = seq
            fulls.append(refs)
        point = Point(seq, flush * 1_000_000, (1 + flush % 7, flush - 1), flush % 5, full_seq, refs)
        added[seq] = point
        seq += 1
        dropped, full = h.after(point, (flush - window) * 1_000_000)
        assert h.named_below(full, dropped) == _named_below_by_scan(h, full, dropped), flush
        h.add(point, dropped)
        if rng.random() < 0.02:  # a reopen reads the points back, in order
            h = CursorHistory(list(h.kept))
        kept = h.kept  # each kept point is the one added at its sequence, field by field, in order
        assert kept == [added[p.seq] for p in kept] and [p.seq for p in kept] == sorted({p.seq for p in kept})
        assert kept[-1] == point and h.oldest == kept[0] and len(h) == len(kept)
        assert h.keeps() == (h._full_of(kept[0]).seq, _named_below_by_scan(h, h._full_of(kept[0]), []))


def test_a_damaged_point_goes_with_the_window(store_path: Path, clock: Clock) -> None:
    """A damaged point is a ``check`` finding while the window holds a point older than it;
    once the window has left every point before it, the writer deletes it with the points
    it drops (it can answer no restore any more): ``check`` is clean, and only the window's
    points are left."""
    from ackstore import check

    config = CursorConfig(history_seconds=3, max_unacked_ranges_to_persist=0)
    cid, seqs, _ = _flushed_points(store_path, clock, config, 3)
    _flip_point_time(store_path, cid, seqs[1])
    assert [f.kind for f in check(store_path)] == ["damaged-history"]
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c", config)
        cur.ack(Position(4, 3))
        store.flush()  # the window still holds the first point: the damaged one stays
        assert seqs[0] in _points(store, cid) and seqs[1] in _points(store, cid)
        for r in range(4, 10):
            clock.tick()
            cur.ack(Position(4, r))
            store.flush()
            held = _points(store, cid)
            assert (seqs[0] in held) == (seqs[1] in held), (r, held)  # it goes in the flush that drops the first
        kept = _points(store, cid)
        assert seqs[0] not in kept and seqs[1] not in kept
        assert len(kept) == len(cur.history()) == 4  # the points of the last 3 seconds and the one at their start
    assert check(store_path) == []


def test_check_names_the_record_a_kept_state_needs_that_is_gone(store_path: Path, clock: Clock) -> None:
    """A ledger record only an old point's state needs (the cursor's newest state has a newer
    one), deleted: ``check`` says that point's state cannot be restored and which record it
    names is missing; the newest state is whole."""
    import lmdb

    from ackstore import check
    from ackstore.storage.log import resolve_marker
    from ackstore.storage.records import log_key

    def rebase(cur: Cursor, r: int) -> None:  # ledger 1 written anew each flush: too many acks for a delta
        end_form(cur)  # (its parts' records: the small form writes a state whole)
        cur.ack_entries(1, range(1000 * r + 1, 1000 * r + 600, 2))

    cid, seqs, _ = _flushed_points(store_path, clock, HOUR, 6, rebase)
    assert check(store_path) == []
    env = lmdb.open(str(store_path), max_dbs=8)
    log_db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        old = resolve_marker(txn, log_db, cid, seqs[1]).index
        new = resolve_marker(txn, log_db, cid, seqs[-1]).index
        gone = old[1].seq  # ledger 1's record in the second point's state, not in the newest
        assert gone != new[1].seq
        txn.delete(log_key(cid, gone), db=log_db)
    env.close()
    found = check(store_path)
    needing = [f for f in found if f.message.endswith(f"record {gone} it names is missing")]
    assert needing and {f.kind for f in found} == {"damaged-history"}, found
    assert all(
        f.message == f"the state flushed at point {f.seq} cannot be restored: record {gone} it names is missing"
        for f in needing
    )
    assert seqs[1] in {f.seq for f in needing} and seqs[-1] not in {f.seq for f in found}


def test_a_damaged_full_points_chain_is_kept_for_the_points_after_it(
    store_path: Path, clock: Clock, marker_layout: None
) -> None:
    """The point of a full marker is damaged (left out), the delta points after it are kept:
    the log keeps that full marker's records from its sequence on, so each later point
    still restores after more flushes trim the log."""
    config = CursorConfig(history_seconds=3600, max_unacked_ranges_to_persist=0, full_marker_every=8)
    cid, seqs, _ = _flushed_points(store_path, clock, config, 3)
    _flip_point_time(store_path, cid, seqs[0])
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c", config)
        points = cur.history()
        assert len(points) == 2  # the damaged one left out
        for r in range(3, 12):
            cur.ack(Position(4, r))
            store.flush()
            clock.tick()
        for point in points:
            assert cur.snapshot_as_of(point.time).mark_delete_position == point.mark_delete_position


def test_a_damaged_flush_clock_is_said_and_the_points_times_go_on_instead(
    store_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's flush clock fails its checksum: a WARNING says so, and the newest point's
    time stands in for it (as for a store without one): with the wall clock ten minutes
    behind, the next point takes that time, and none is before it."""
    import lmdb

    from ackstore.history import CLOCK_KEY

    _flushed_points(store_path, clock, HOUR, 3)
    newest = clock.now - 1
    env = lmdb.open(str(store_path), max_dbs=8)
    db = env.open_db(b"history")
    with env.begin(write=True) as txn:
        value = bytearray(txn.get(CLOCK_KEY, db=db))
        value[3] ^= 1
        txn.put(CLOCK_KEY, bytes(value), db=db)
    env.close()
    clock.step(-600)
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        cur.ack(Position(4, 10))
        store.flush()
        assert [p.time for p in cur.history()][:2] == [newest, newest]
    said = [r.getMessage() for r in caplog.records if r.name == "ackstore" and "points' times" in r.getMessage()]
    assert said and all(m.startswith("ackstore: ") and m.endswith("; the points' times are read instead") for m in said)


@pytest.mark.parametrize("damaged", [2, 3], ids=["a middle point", "the newest point"])
def test_a_restore_is_refused_only_where_a_damaged_point_may_be_the_answer(
    store_path: Path, clock: Clock, damaged: int
) -> None:
    """Four points a second apart, one damaged: a time whose answer could be the damaged
    point (between the kept points around it) is refused naming it and them; any other time
    restores, on either side of it."""
    from ackstore import CorruptRecordError
    from ackstore.history import iso

    cid, seqs, _ = _flushed_points(store_path, clock, HOUR, 4)
    _flip_point_time(store_path, cid, seqs[damaged])
    t = [1_800_000_000.0 + i for i in range(4)]
    with AckStore.open(store_path, sync=False) as store:
        cur = store.topic(T).cursor("c")
        assert cur.check_restore(t[0] + 0.5).time == t[0]
        if damaged == 3:
            assert cur.check_restore(t[1] + 0.5).time == t[1]  # the kept point after it, not the damaged one
        ask = t[damaged - 1] + 0.5
        with pytest.raises(CorruptRecordError) as caught:
            cur.check_restore(ask)
        newer = iso(round(t[3] * 1e6)) if damaged == 2 else "none newer"
        assert str(caught.value) == (
            f"cursor {T}/c: history point {seqs[damaged]} is damaged and may be the state as of "
            f"{iso(round(ask * 1e6))} (the kept points around it are {iso(round(t[damaged - 1] * 1e6))} and {newer}); "
            "nothing was changed: restore as of a time outside them, and run 'ackstore check'"
        )
        if damaged == 2:
            assert cur.check_restore(t[3]).time == t[3]


def test_a_restore_before_every_point_says_whether_the_machines_clock_is_behind(store_path: Path, clock: Clock) -> None:
    from ackstore.history import iso

    with AckStore.open(store_path.parent / "fresh", sync=False) as store:
        cur = _topic(store).cursor("c", HOUR)
        with pytest.raises(HistoryRangeError) as nothing:
            cur.check_restore(1_800_000_000.0)
        assert str(nothing.value) == (
            f"cursor {T}/c has no state as of {iso(1_800_000_000_000_000)}: its history holds nothing flushed yet"
        )
    _flushed_points(store_path, clock, HOUR, 3)  # points at t, t + 1, t + 2
    t = 1_800_000_000.0
    held = f"its history holds {iso(round(t * 1e6))} .. {iso(round((t + 2) * 1e6))}"
    for wall, behind in ((t + 2, False), (t + 1.5, True)):
        clock.now = wall
        with AckStore.open(store_path, sync=False) as store, pytest.raises(HistoryRangeError) as caught:
            store.topic(T).cursor("c").check_restore(t - 10)
        said = str(caught.value)
        assert said.startswith(f"cursor {T}/c has no state as of {iso(round((t - 10) * 1e6))}: {held}")
        assert (f"(this machine's clock reads {iso(round(wall * 1e6))}, behind the newest flush" in said) is behind
        assert said.endswith(held) is not behind


def test_a_kept_point_costs_at_most_72_bytes_of_memory() -> None:
    """A window of an hour at one flush a second holds 3,600 points a cursor: the writer
    keeps each as six machine ints, 48 bytes, and up to a third as many dropped ones until
    it cuts them away (a tuple a point took about 300 bytes: 1 GB for 1,000 such cursors).
    Measured with tracemalloc over 20 cursors' full windows, the window slid to just before
    a cut, the most they hold."""
    import tracemalloc

    from ackstore.history import CursorHistory, Point

    window, flushes = 3600, 4790
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = []
        for c in range(20):
            h = CursorHistory()
            for s in range(1, flushes + 1):
                micros = 1_764_000_000_000_000 + s * 1_000_000
                point = Point(1000 + s, micros, (12_345 + c, 50 * s - 1), 3, 1000 + s, ())
                dropped, _ = h.after(point, micros - window * 1_000_000)
                h.add(point, dropped)
            kept.append(h)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    points = sum(len(h) for h in kept)
    assert points == 20 * (window + 1)
    assert used / points <= 72, f"{used / points:.0f} bytes a point"
