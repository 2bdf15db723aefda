"""Back-to-front recovery: damaged or missing records make recovery fall back, and say so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore.storage.records import RECORD_LEDGER

from . import rawlog

T = "persistent://t/ns/rec"


def _state(cur):  # type: ignore[no-untyped-def]
    return cur.mark_delete_position, list(cur.ack_ranges()), cur.partial_batches()


def _build(path: Path, config: CursorConfig | None = None) -> list[object]:
    """Three flushes that each touch ledger 2 (and the first touches 1 and 3); states after each."""
    states = []
    with AckStore.open(path) as store:
        topic = store.topic(T)
        for ledger in (1, 2, 3):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 100)
        cur = topic.cursor("c", config or CursorConfig())
        cur.ack([Position(1, 5), Position(3, 7), Position(2, 10)])
        cur.ack_batch_index(Position(3, 9), 4, [1])
        store.flush()
        states.append(_state(cur))
        cur.ack([Position(2, 20), Position(2, 21)])
        store.flush()
        states.append(_state(cur))
        cur.ack([Position(2, 40)])
        store.flush()
        states.append(_state(cur))
    return states


def _reopen(path: Path):  # type: ignore[no-untyped-def]
    store = AckStore.open(path)
    return store, store.topic(T).cursor("c")


def test_clean_reopen_recovers_newest(store_path: Path) -> None:
    states = _build(store_path)
    store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == states[-1]
        assert cur.stats().recovery.markers_skipped == 0


def test_damaged_newest_marker_falls_back(store_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    states = _build(store_path)
    *_, previous, newest = rawlog.markers(store_path)
    rawlog.damage(store_path, newest)
    with caplog.at_level(logging.WARNING, logger="ackstore"):
        store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == states[-2]
        report = cur.stats().recovery
        assert report.markers_skipped == 1
        assert f"marker {newest}" in report.skipped_reasons[0]
        assert report.marker_seq == previous
    assert "skipping 1 marker" in caplog.text


@pytest.mark.parametrize("how", ["flip", "delete"])
def test_damaged_or_missing_ledger_record_falls_back(store_path: Path, how: str, marker_layout: None) -> None:
    states = _build(store_path)
    recs = rawlog.records(store_path)
    newest_ledger_record = [seq for seq, t in recs if t == RECORD_LEDGER][-1]
    rawlog.damage(store_path, newest_ledger_record, how=how)
    store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == states[-2]
        reason = cur.stats().recovery.skipped_reasons[0]
        assert f"record {newest_ledger_record}" in reason
        assert ("missing" if how == "delete" else "damaged") in reason


def test_broken_middle_of_delta_chain_falls_back_past_it(store_path: Path, marker_layout: None) -> None:
    states = _build(store_path)
    m = rawlog.markers(store_path)
    rawlog.damage(store_path, m[1])  # the newest marker's chain runs through it
    store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == states[0]
        assert cur.stats().recovery.markers_skipped == 2


def test_no_intact_marker_starts_empty_and_says_so(store_path: Path, marker_layout: None) -> None:
    _build(store_path)
    for seq in rawlog.markers(store_path):
        rawlog.damage(store_path, seq)
    store, cur = _reopen(store_path)
    with store:
        assert cur.mark_delete_position == Position(1, -1)
        assert list(cur.ack_ranges()) == []
        report = cur.stats().recovery
        assert report.marker_seq == -1 and report.markers_skipped == 3


def test_store_works_after_fallback_and_next_flush_is_full(store_path: Path) -> None:
    states = _build(store_path)
    rawlog.damage(store_path, rawlog.markers(store_path)[-1])
    store, cur = _reopen(store_path)
    with store:
        cur.ack([Position(2, 50)])
        stats = store.flush()
        assert stats.full_markers == 1
        expected = _state(cur)
    assert expected != states[-1]
    store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == expected
        assert cur.stats().recovery.markers_skipped == 0


def test_garbage_is_trimmed_after_full_markers(store_path: Path, marker_layout: None) -> None:
    config = CursorConfig(full_marker_every=2)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", config)
        trimmed = 0
        for i in range(30):
            cur.ack([Position(1, 2 * i + 5)])
            trimmed += store.flush().records_trimmed
        expected = _state(cur)
    assert trimmed > 0
    # one ledger: what stays is at most two full-marker generations of records
    assert len(rawlog.records(store_path)) <= 2 * (config.full_marker_every + 1) * 2
    store, cur = _reopen(store_path)
    with store:
        assert _state(cur) == expected


def test_trimmed_ledgers_vanish_on_reopen(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        for ledger in (1, 2, 3):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 10)
        cur = topic.cursor("c")
        cur.ack([Position(1, 3), Position(2, 4), Position(3, 5)])
        store.flush()
        topic.trim_ledgers(3)
        assert cur.mark_delete_position == Position(3, -1)
        assert list(cur.ack_ranges()) == [(Position(3, 5), Position(3, 5))]
        testing.crash(store)  # the trim is durable, the cursor's move is not flushed
    store, cur = _reopen(store_path)
    with store:
        assert cur.mark_delete_position == Position(3, -1)
        assert list(cur.ack_ranges()) == [(Position(3, 5), Position(3, 5))]


def test_open_drops_persisted_acks_at_or_below_the_mark_delete_and_measures_that_ledger(
    store_path: Path, parts_chains: None
) -> None:
    """A marker whose mark-delete position is past acks in its own ledger's record (left by
    an older writer): open drops them from that ledger and re-measures that ledger."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        for ledger in (1, 2):
            topic.add_ledger(ledger)
            if ledger == 1:
                topic.close_ledger(1, 100_000)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack_entries(1, range(3, 100_000, 2))  # a large set, then a small one in ledger 2
        cur.ack([Position(2, 5)])
        store.flush()
        with store.lock:  # M past most of ledger 1's record, with no new record for it
            cur._core._state.md = Position(1, 99_990)
            cur._core._state.rp = Position(1, 99_991)
            cur._core._state.meta_dirty = True
            cur._core._changed()  # an edit behind the facade: list it for the flush as the facade would
        store.flush()
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        cache = cur._core._pages.cache
        assert cache.loaded[1].size == cache.loaded[1].nbytes()  # measured after the drop
        assert cache.nbytes == sum(la.nbytes() for la in cache.loaded.values())
        assert cur.mark_delete_position == Position(1, 99_991)  # advanced over the acked 99,991
        assert [(a.entry, b.entry) for a, b in cur.ack_ranges() if a.ledger == 1] == [
            (e, e) for e in (99_993, 99_995, 99_997, 99_999)
        ]
        cur._check()


def test_a_newest_marker_disguised_by_damage_is_said_to_maybe_be_one(store_path: Path, marker_layout: None) -> None:
    """The newest marker's type byte flipped into a ledger record's: recovery falls back to
    the marker before and says the damaged record may have been a newer marker; the report
    says how long recovery took."""
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, 3)])
        store.flush()
        first = cur.stats().last_marker_seq
        cur.ack([Position(1, 5)])
        store.flush()
        newest = cur.stats().last_marker_seq
    rawlog.edit(store_path, newest, lambda raw: raw.__setitem__(1, RECORD_LEDGER))
    with AckStore.open(store_path, readonly=True) as store:
        cur = store.topic("t").cursor("c")
        report = cur.stats().recovery
        assert report.marker_seq == first and list(cur.ack_ranges()) == [(Position(1, 3), Position(1, 3))]
        (reason,) = report.skipped_reasons
        assert reason.startswith(f"marker? record {newest} is damaged (") and reason.endswith(
            "); it may have been a newer marker"
        )
        assert type(report.seconds) is float and report.seconds >= 0


@pytest.mark.parametrize("flushes", [1, 2, 3])
def test_a_small_cursor_reopens_at_its_newest_state_whichever_slot_holds_it(store_path: Path, flushes: int) -> None:
    """A small cursor's flushes go to its two state slots in turn: a writer's reopen starts
    from the newer of them, whichever slot it is in, and a reader's too."""
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        for f in range(flushes):
            cur.ack([Position(1, 2 * f + 3)])
            store.flush()
        expected = (cur.mark_delete_position, list(cur.ack_ranges()))
        testing.crash(store)  # no flush at close: the slots are as the last flush left them
    for readonly in (False, True):
        with AckStore.open(store_path, readonly=readonly) as store:
            cur = store.topic("t").cursor("c")
            assert (cur.mark_delete_position, list(cur.ack_ranges())) == expected, readonly
            assert len(expected[1]) == flushes


def test_a_cursors_records_end_where_the_next_cursors_begin(store_path: Path, marker_layout: None) -> None:
    """Two cursors with neighbouring ids, each with ledger records and markers, and history
    points: ``check`` reads each one's records and points alone (the next cursor's first
    record lies at the first key past this one's): nothing found, and damage to the second
    one's first record is a finding of that cursor only."""
    from ackstore import check

    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        curs = [topic.cursor(name, CursorConfig(history_seconds=3600)) for name in ("a", "b")]
        assert [c.cursor_id for c in curs] == [0, 1]
        for r in range(3):
            for c in curs:
                c.ack([Position(1, 2 * r + 3)])
            store.flush()
        counts = [c.log_usage().records for c in curs]
        assert [len(c.history()) for c in curs] == [3, 3]
    assert check(store_path) == []
    with AckStore.open(store_path, readonly=True) as store:
        topic = store.topic("t")
        assert [len(topic.cursor(n).history()) for n in ("a", "b")] == [3, 3]
        assert [topic.cursor(n).log_usage().records for n in ("a", "b")] == counts
    rawlog.damage(store_path, 0, cursor_id=1)  # b's first record: a finding of b's alone
    found = check(store_path)
    assert found and {(f.cursor, f.seq) for f in found} == {("b", 0)}, found
