"""PIP-299: a cap on the ranges a flush persists, and pausing dispatch while over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, InvalidArgumentError, Position, testing

from .forms import end_form, sealed_topic

T = "persistent://t/ns/pip299"


def _cursor(store: AckStore, config: CursorConfig):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    for ledger in (1, 2, 3):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 100)
    topic.add_ledger(4)
    return topic.cursor("sub", config)


def test_flush_persists_lowest_ranges_and_a_crash_redelivers_exactly_the_rest(store_path: Path) -> None:
    config = CursorConfig(max_unacked_ranges_to_persist=5, max_individual_ack_cache_bytes=1 << 20)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        acked = [Position(1, e) for e in range(1, 8, 2)] + [Position(2, e) for e in (10, 11, 20, 30)]
        cur.ack(acked)  # ranges: 1:1 1:3 1:5 1:7 | 2:10-11 2:20 2:30  -> 7 ranges
        assert cur.ack_range_count == 7
        store.flush()
        stats = cur.stats()
        assert stats.truncated and stats.persisted_ranges == 5 and stats.ranges_over_limit == 2
        assert cur.dirty  # ledger 2 is not wholly persisted: it stays to persist
        testing.crash(store)  # crash
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert list(cur.ack_ranges()) == [
            (Position(1, 1), Position(1, 1)),
            (Position(1, 3), Position(1, 3)),
            (Position(1, 5), Position(1, 5)),
            (Position(1, 7), Position(1, 7)),
            (Position(2, 10), Position(2, 11)),
        ]
        # exactly these acked positions come back as unacked (redelivered)
        assert [p for p in acked if not cur.is_acked(p)] == [Position(2, 20), Position(2, 30)]
        assert cur.stats().truncated and cur.stats().recovery.markers_skipped == 0


def test_back_under_the_limit_persists_everything_again(store_path: Path) -> None:
    config = CursorConfig(max_unacked_ranges_to_persist=3)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        cur.ack([Position(1, e) for e in (2, 4, 6, 8)])
        store.flush()
        assert cur.stats().truncated
        cur.ack([Position(1, e) for e in (3, 5, 7)])  # joins them: one range 1:2..1:8
        store.flush()
        assert not cur.stats().truncated and cur.stats().persisted_ranges == 1
        expected = list(cur.ack_ranges())
        testing.crash(store)
    with AckStore.open(store_path) as store:
        assert list(store.topic(T).cursor("sub").ack_ranges()) == expected


def test_limit_zero_means_no_limit(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _cursor(
            store, CursorConfig(max_unacked_ranges_to_persist=0, dispatcher_pause_on_ack_state_persistent=True)
        )
        cur.ack([Position(1, e) for e in range(1, 100, 2)])
        store.flush()
        assert not cur.stats().truncated and not cur.is_blocked_on_ack_state_persistent
        expected = list(cur.ack_ranges())
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert list(cur.ack_ranges()) == expected and len(expected) == 50
        assert not cur.stats().truncated and not cur.is_blocked_on_ack_state_persistent


@pytest.mark.parametrize("cap", [3, 4, 5, 7, 8, 9])
def test_the_cap_cuts_across_ledgers_at_its_exact_count_and_a_crash_keeps_exactly_that(
    store_path: Path, cap: int
) -> None:
    """Eight ranges over three ledgers (3 in ledger 1, 3 in ledger 2, 2 in ledger 3): a cap
    at a ledger's last range keeps that ledger whole and the next one not at all, a cap
    inside a ledger cuts it there, a ledger wholly above the cap persists nothing, and a cap
    at the count or over it persists everything (not truncated). After a crash the cursor
    holds exactly the lowest ``cap`` ranges, its flags as the reopen computes them."""
    config = CursorConfig(max_unacked_ranges_to_persist=cap, dispatcher_pause_on_ack_state_persistent=True)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        cur.ack([Position(1, e) for e in (1, 3, 5)] + [Position(2, e) for e in (1, 3, 5)] + [Position(3, 1)])
        cur.ack_entries(3, [3])
        ranges = list(cur.ack_ranges())
        assert len(ranges) == 8
        store.flush()
        stats = cur.stats()
        assert (stats.truncated, stats.persisted_ranges, stats.ranges_over_limit) == (
            cap < 8,
            min(cap, 8),
            max(8 - cap, 0),
        )
        assert cur.is_blocked_on_ack_state_persistent == (cap < 8)
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert list(cur.ack_ranges()) == ranges[:cap]
        stats = cur.stats()
        assert (stats.truncated, cur.ack_range_count, cur.is_blocked_on_ack_state_persistent) == (
            cap < 8,
            min(cap, 8),
            False,
        )


def test_pause_on_and_unpause_by_acks_and_by_turning_it_off(store_path: Path) -> None:
    config = CursorConfig(max_unacked_ranges_to_persist=2, dispatcher_pause_on_ack_state_persistent=True)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        cur.ack([Position(1, 2), Position(1, 4)])
        assert not cur.is_blocked_on_ack_state_persistent  # 2 ranges: at the limit is fine
        cur.ack([Position(1, 6)])
        assert cur.is_blocked_on_ack_state_persistent
        cur.ack([Position(1, 5)])  # 1:4..1:6 joins: back to 2
        assert not cur.is_blocked_on_ack_state_persistent
        cur.ack([Position(2, 9)])
        assert cur.is_blocked_on_ack_state_persistent
        cur.ack_cumulative(Position(1, 99))  # a skip / clear-backlog style move
        assert not cur.is_blocked_on_ack_state_persistent
        cur.ack([Position(2, 1), Position(2, 3), Position(2, 5)])
        assert cur.is_blocked_on_ack_state_persistent
        cur.update_config(dispatcher_pause_on_ack_state_persistent=False)
        assert not cur.is_blocked_on_ack_state_persistent
        cur.update_config(dispatcher_pause_on_ack_state_persistent=True, max_unacked_ranges_to_persist=10)
        assert not cur.is_blocked_on_ack_state_persistent
    with AckStore.open(store_path) as store:  # the per-subscription override was persisted
        assert store.topic(T).cursor("sub").config.max_unacked_ranges_to_persist == 10


def test_store_wide_default_and_per_subscription_override(store_path: Path) -> None:
    defaults = CursorConfig(max_unacked_ranges_to_persist=1, dispatcher_pause_on_ack_state_persistent=True)
    with AckStore.open(store_path, cursor_defaults=defaults) as store:
        cur = _cursor(store, None)  # type: ignore[arg-type]
        other = store.topic(T).cursor("other", CursorConfig(max_unacked_ranges_to_persist=0))
        for c in (cur, other):
            c.ack([Position(1, 2), Position(1, 4)])
        assert cur.is_blocked_on_ack_state_persistent and not other.is_blocked_on_ack_state_persistent


def test_update_config_rejects_bad_values(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _cursor(store, CursorConfig())
        with pytest.raises(InvalidArgumentError, match="max_unacked_ranges_to_persist=-1"):
            cur.update_config(max_unacked_ranges_to_persist=-1)
        with pytest.raises(InvalidArgumentError, match="unknown CursorConfig fields"):
            cur.update_config(nope=1)
        assert cur.config == CursorConfig()


HUGE = r"""
import resource, sys
from ackstore import AckStore, CursorConfig
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # the old flush needed ~9 GB here
with AckStore.open(sys.argv[1], sync=False) as store:
    topic = store.topic("t")
    topic.add_ledger(2)
    cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=10_000))
    cur.ack_entries(2, range(0, 2**27, 2))  # 67M ranges, a 16 MB bitmap, accepted at once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    store.flush()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_a_capped_flush_of_a_huge_stride_takes_memory_as_what_it_writes(tmp_path: Path) -> None:
    """Millions of ranges in one ledger over the PIP-299 cap: the flush cuts the lowest
    10,000 from a prefix of the bitmap (it made a list of every range: ~135 B each, the
    OOM killer's at 2**31 entries)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", HUGE, str(tmp_path / "s")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) < 64 << 20, f"the flush grew the process by {int(r.stdout):,} bytes"
    with AckStore.open(tmp_path / "s", readonly=True) as store:
        cur = store.topic("t").cursor("c")
        assert cur.ack_range_count == 10_000
        assert cur.mark_delete_position == Position(2, 0)  # entry 0 moved it at the ack
        assert list(cur.ack_ranges())[-1] == (Position(2, 20_000), Position(2, 20_000))
        assert cur.is_acked(Position(2, 20_000)) and not cur.is_acked(Position(2, 20_002))


def test_an_ack_after_a_truncated_flush_is_persisted_once_the_ranges_fit_again(store_path: Path) -> None:
    """The truncated flush leaves the ledger it cut through dirty; an ack in another ledger
    after it, made while the ranges are back under the cap, is written by the next flush
    (the dirty set the acks mark is the one the flush reads, whatever a plan left in it)."""
    config = CursorConfig(max_unacked_ranges_to_persist=3, max_individual_ack_cache_bytes=1 << 20)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        cur.ack([Position(2, e) for e in (10, 20, 30, 40)])  # 4 ranges: the cap cuts ledger 2
        store.flush()
        assert cur.stats().truncated
        cur.ack([Position(2, e) for e in range(11, 41)])  # ledger 2 is one range 2:10-2:40 now
        cur.ack(Position(3, 50))  # and ledger 3 one more: 2 ranges, under the cap
        store.flush()
        assert not cur.stats().truncated
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert list(cur.ack_ranges()) == [
            (Position(2, 10), Position(2, 40)),
            (Position(3, 50), Position(3, 50)),
        ]


def test_the_cap_is_said_once_when_crossed_and_once_when_back_under(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One WARNING at the flush that first persists fewer ranges than the cursor holds
    (what a crash then loses), none while it stays over, one INFO at the flush back under."""
    import logging

    caplog.set_level(logging.INFO, logger="ackstore")
    with AckStore.open(store_path) as store:
        cur = _cursor(store, CursorConfig(max_unacked_ranges_to_persist=3))

        def said() -> list[tuple[int, str]]:
            got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "ackstore"]
            caplog.clear()
            return got

        cur.ack([Position(1, e) for e in (2, 4, 6)])
        store.flush()
        assert said() == []  # at the cap: all persisted
        cur.ack([Position(1, 8)])
        store.flush()
        assert said() == [
            (
                logging.WARNING,
                f"ackstore: cursor {T}/sub has 4 ack ranges, over its max_unacked_ranges_to_persist=3: flushes now "
                "persist only the lowest 3 ranges; after a crash the acks in the other 1 ranges are lost and those "
                "messages redelivered",
            )
        ]
        cur.ack([Position(1, 10)])
        store.flush()
        assert said() == []  # still over: said once
        cur.ack([Position(1, e) for e in (3, 5, 7)])  # 1:2..1:8 and 1:10
        store.flush()
        assert said() == [
            (
                logging.INFO,
                f"ackstore: cursor {T}/sub is back to 2 ack ranges (cap 3): flushes persist all of them again",
            )
        ]


def test_a_truncated_marker_names_its_cursor_and_its_bytes_are_counted_exactly(store_path: Path) -> None:
    """A capped flush writes its marker in the form that says it is truncated, with the id of
    the cursor it belongs to (recovery refuses a marker of another cursor's chain), and the
    flush counts exactly the bytes of the keys and values it put."""
    from ackstore.storage.records import decode_marker, log_key

    with AckStore.open(store_path) as store:
        cur = _cursor(store, CursorConfig(max_unacked_ranges_to_persist=2, max_individual_ack_cache_bytes=1 << 20))
        store.flush()
        end_form(cur)  # (its parts write the truncated marker)
        env = store._storage
        first = cur._core._planner.chain.next_seq
        cur.ack([Position(1, e) for e in (2, 4, 6, 8)])
        stats = store.flush()
        seq = cur._core._planner.chain.marker_seq
        keys = [log_key(cur.cursor_id, s) for s in range(first, seq + 1)]
        values = env.read(lambda txn: [txn.get(k, db=env.log_db) for k in keys])
        written = [(k, v) for k, v in zip(keys, values, strict=True) if v is not None]
        assert stats.bytes_written == sum(len(k) + len(v) for k, v in written)
        marker = decode_marker(values[-1], seq)
        assert marker.truncated and marker.full and marker.extra.get("c") == cur.cursor_id
        assert stats.full_markers == 1 and cur.stats().deltas_since_full_marker == 0  # a chain starts there


def test_compaction_leaves_a_cursor_over_its_cap_as_its_flushes_wrote_it(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cursor over its cap: its flushes persist the lowest ranges up to the cap, and a crash
    redelivers the rest. Compaction writes what a flush writes, so it leaves that cursor's
    log as it is (it wrote every range from memory: a reopen showed all 7) and says so; the
    other cursors are rewritten. Back under the cap, compaction rewrites it whole."""
    import logging

    config = CursorConfig(max_unacked_ranges_to_persist=5, max_individual_ack_cache_bytes=1 << 20)
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        other = store.topic(T).cursor("other", CursorConfig())
        cur.ack([Position(1, e) for e in range(1, 8, 2)] + [Position(2, e) for e in (10, 11, 20, 30)])
        other.ack([Position(1, 4), Position(1, 6)])
        store.flush()
        with caplog.at_level(logging.INFO, logger="ackstore"):
            stats = store.compact()
        assert [(s.topic, s.cursor) for s in stats] == [(T, "other")]
        assert f"compaction leaves 1 cursor(s) over their max_unacked_ranges_to_persist as they are ({T}/sub)" in (
            caplog.text
        )
        assert cur.ack_range_count == 7 and cur.stats().truncated  # in memory, as before
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert cur.ack_range_count == 5 and cur.is_acked(Position(2, 11)) and not cur.is_acked(Position(2, 20))
        assert store.topic(T).cursor("other").ack_range_count == 2
        cur.ack([Position(1, e) for e in (2, 4, 6)])  # 1:1..1:7 joins: 2 ranges, under the cap
        stats = store.compact()
        assert {s.cursor for s in stats} == {"sub", "other"}
        testing.crash(store)
    with AckStore.open(store_path) as store:
        assert list(store.topic(T).cursor("sub").ack_ranges()) == [
            (Position(1, 1), Position(1, 7)),
            (Position(2, 10), Position(2, 11)),
        ]


def _held_state(store: AckStore) -> tuple[object, ...]:
    cur = store.topic(T).cursor("sub")
    return (
        cur.mark_delete_position,
        list(cur.ack_ranges()),
        cur.partial_batches(),
        cur.delivery_counts(),
        cur.properties,
        cur.stats().truncated,
    )


@pytest.mark.parametrize("cap", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("form", [True, False], ids=["form", "parts"])
def test_the_small_form_cuts_where_its_parts_cut_counts_and_batches_with_their_ledger(
    tmp_path: Path, cap: int, form: bool
) -> None:
    """A cursor in the small form over its cap stays in it and writes the lowest ranges
    alone, as its parts would: the same ranges, the delivery counts and partial batches of
    every ledger it keeps whole and those below the cut in the ledger the cut goes through,
    nothing of a ledger above it, and a state that says it is truncated. One store keeps the
    form, the other ends it; after a crash both hold exactly the same."""
    held = {}
    for kept in (form, not form):
        path = tmp_path / ("form" if kept else "parts")
        config = CursorConfig(max_unacked_ranges_to_persist=cap, max_deliveries=9)
        with AckStore.open(path) as store:
            cur = _cursor(store, config)
            cur.set_property("k", "v")
            store.flush()
            if not kept:
                end_form(cur)
            # 2 ranges in ledger 1, one across 1 -> 2 (ledger 1 is sealed at 100), 2 more in
            # ledger 2, 1 in ledger 3: 7 ranges; counts and partial batches in each ledger
            cur.ack([Position(1, e) for e in (3, 7, 99)] + [Position(2, e) for e in (0, 5, 9)] + [Position(3, 2)])
            cur.record_deliveries([Position(1, 5), Position(1, 5), Position(2, 2), Position(2, 7), Position(3, 9)])
            cur.ack_batch_index(Position(1, 50), 8, [1, 2])
            cur.ack_batch_index(Position(2, 8), 4, [0])
            cur.ack_batch_index(Position(3, 4), 4, [3])
            assert cur.ack_range_count == 7
            store.flush()
            assert (cur._core.small is not None) == kept
            assert cur.stats().truncated == (cap < 7) and cur.stats().persisted_ranges == min(cap, 7)
            testing.crash(store)
        with AckStore.open(path) as store:
            held[kept] = _held_state(store)
    assert held[True] == held[False]
    ranges = held[True][1]
    assert isinstance(ranges, list) and len(ranges) == min(cap, 7)


def test_the_tools_read_a_cut_state_as_the_store_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cursor whose newest state is the small form's cut (flagged truncated in its slot):
    ``check`` finds nothing, ``stat`` says it is truncated, salvage gives the same state
    (written whole, no longer truncated),
    ``compact`` writes the same (whole: reopened, it holds no more than its cap), and dump,
    restore, dump is identical."""
    from ackstore.recovery.cli import main

    from ackstore import check
    from ackstore.salvage import salvage

    path = tmp_path / "s"
    config = CursorConfig(max_unacked_ranges_to_persist=2, max_deliveries=9)
    with AckStore.open(path) as store:
        cur = _cursor(store, config)
        store.flush()
        cur.ack([Position(1, e) for e in (2, 4, 6, 8)] + [Position(2, 5)])
        cur.record_deliveries([Position(1, 3), Position(1, 7)])
        store.flush()
        assert cur._core.small is not None and cur.stats().truncated
    with AckStore.open(path) as store:
        want = _held_state(store)
    assert want[1] == [(Position(1, 2), Position(1, 2)), (Position(1, 4), Position(1, 4))] and want[5]
    assert check(path) == []

    def run(*args: object) -> tuple[int, str]:
        code = main([str(a) for a in args])
        return code, capsys.readouterr().out

    code, out = run("stat", path, "--json")
    assert code == 0 and '"truncated": true' in out
    report = salvage(path, tmp_path / "salvaged")
    assert all(c.complete for c in report.cursors)
    with AckStore.open(tmp_path / "salvaged") as store:  # (written whole: it holds all it has)
        assert _held_state(store)[:5] == want[:5]
    before = run("dump", path)[1]
    assert run("compact", path)[0] == 0  # (reopened, it holds its cap's ranges: written whole)
    assert run("dump", path)[1] == before
    with AckStore.open(path) as store:
        assert _held_state(store)[:5] == want[:5]
    first, second = tmp_path / "d1.jsonl", tmp_path / "d2.jsonl"
    assert run("dump", path, "-o", first)[0] == 0
    assert run("restore", tmp_path / "restored", first)[0] == 0
    assert run("dump", tmp_path / "restored", "-o", second)[0] == 0
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("form", [True, False], ids=["small form", "parts"])
def test_a_cursor_that_keeps_history_over_its_cap_persists_the_lowest_ranges_too(tmp_path: Path, form: bool) -> None:
    """A cursor that keeps history, past its cap: PIP-299 holds for it as for any other
    (truncated, the lowest ranges persisted, the rest lost to a crash), each state written a
    point of its history, which restores to that cut; a flush whose changes all lie above
    the cut writes nothing and takes no point. The small form stays one throughout (its
    states under its log key), and does what the parts do."""
    config = CursorConfig(max_unacked_ranges_to_persist=2, history_seconds=3600)
    with AckStore.open(tmp_path / "s") as store:
        cur = _cursor(store, config)
        store.flush()
        if not form:
            end_form(cur)
        held = cur._core.small
        assert (held is not None and held.logged) == form
        cur.ack([Position(1, e) for e in (2, 4, 6, 8)])
        assert store.flush().bytes_written > 0
        assert cur.stats().truncated and cur.stats().persisted_ranges == 2
        points = len(cur.history())
        cur.ack([Position(1, 10), Position(2, 3)])  # above the cut: nothing to write, no point
        assert store.flush().bytes_written == 0 and len(cur.history()) == points
        cur.ack(Position(1, 3))  # the cut's last range grows: 2..4
        assert store.flush().bytes_written > 0 and len(cur.history()) == points + 1
        cut = [(Position(1, 2), Position(1, 4)), (Position(1, 6), Position(1, 6))]
        assert cur.snapshot_as_of(cur.history()[0].time).ranges == [(1, [(2, 4), (6, 6)])]
        assert cur._core.small is held
        testing.crash(store)
    with AckStore.open(tmp_path / "s") as store:
        cur = store.topic(T).cursor("sub")
        assert list(cur.ack_ranges()) == cut


@pytest.mark.parametrize("form", [True, False], ids=["small form", "parts"])
def test_a_truncated_state_is_written_again_only_when_what_it_holds_changed(
    store_path: Path, form: bool, request: pytest.FixtureRequest
) -> None:
    """Over the cap, a flush whose changes all lie above the cut (in later ledgers, or in
    the cut's ledger past its last range and the entry after it) writes nothing: the
    newest truncated state is what it would write again (the parts' truncated marker, the
    small form's state in a slot). An ack that lengthens the cut's last range, an ack or a
    delivery count below the cut, or counts set by hand are written by the next flush, and
    a crash keeps exactly what was written. The small form stays one throughout (the parts,
    in the marker layout, never take it)."""
    config = CursorConfig(max_unacked_ranges_to_persist=3, max_deliveries=5, max_individual_ack_cache_bytes=1 << 20)
    if not form:
        request.getfixturevalue("marker_layout")
    with AckStore.open(store_path) as store:
        cur = _cursor(store, config)
        if not form:
            end_form(cur)
        held = cur._core.small
        cur.ack([Position(1, e) for e in (1, 3, 5, 7, 9)])  # 5 ranges: the cut goes through ledger 1
        assert store.flush().bytes_written > 0 and cur.stats().truncated
        cur.ack([Position(2, 5), Position(3, 5)])  # above the cut's ledger: nothing to write again
        assert store.flush().bytes_written == 0
        cur.ack(Position(1, 11))  # in the cut's ledger, above its last range and the entry after
        cur.record_deliveries([Position(1, 12), Position(2, 6)])  # counts above the cut
        assert store.flush().bytes_written == 0
        cur.ack(Position(1, 6))  # the entry after the cut's last range: that range is 5..7 now
        assert store.flush().bytes_written > 0
        assert store.flush().bytes_written == 0
        cur.record_deliveries([Position(1, 2)])  # a count below the cut
        assert store.flush().bytes_written > 0
        cur.restore_delivery_counts({Position(1, 2): 1, Position(1, 4): 2})
        assert store.flush().bytes_written > 0
        cur.restore_delivery_counts({Position(1, 2): 2, Position(1, 4): 1})  # the same number and sum
        assert store.flush().bytes_written > 0
        cur.ack(Position(1, 70))
        cur.ack(Position(3, 80))
        assert store.flush().bytes_written == 0
        cur.ack(Position(1, 4))  # below the cut: it holds 1, 3..7, 9 now
        assert store.flush().bytes_written > 0
        cur.ack(Position(1, 0))  # M moves: 3..7, 9, 11
        assert store.flush().bytes_written > 0
        cur.ack(Position(1, 20))
        assert store.flush().bytes_written == 0
        assert cur._core.small is held and (held is not None) == form
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("sub")
        assert cur.mark_delete_position == Position(1, 1)
        assert list(cur.ack_ranges()) == [(Position(1, e), Position(1, f)) for e, f in ((3, 7), (9, 9), (11, 11))]
        assert cur.delivery_count(Position(1, 2)) == 2 and cur.delivery_count(Position(1, 4)) == 0


@pytest.mark.parametrize("form", [True, False], ids=["small form", "parts"])
def test_a_truncated_state_over_a_slots_bound_stays_in_the_form_and_is_written_when_it_changed(
    store_path: Path, form: bool, request: pytest.FixtureRequest
) -> None:
    """Over the cap, with more ranges persisted than a state slot takes (600 of 700 here,
    a slot taking 512): the small form writes its cut state whole under its log key and
    stays the form; a flush whose changes all lie above the cut writes nothing, one below
    it writes the cut again, and a crash keeps exactly the lowest 600 ranges, as the
    parts' truncated marker does (the parts in the marker layout, which never take the form).
    Reopened, the form's state marker opens into the form."""
    config = CursorConfig(max_unacked_ranges_to_persist=600, max_individual_ack_cache_bytes=1 << 22)
    if not form:
        request.getfixturevalue("marker_layout")
    with AckStore.open(store_path) as store:
        cur = sealed_topic(store, T, 1, 5000).cursor("sub", config)
        if not form:
            end_form(cur)
        held = cur._core.small
        cur.ack([Position(1, e) for e in range(1, 1400, 2)])  # 700 ranges: the cut after the 600th
        assert store.flush().bytes_written > 0 and cur.stats().truncated
        cur.ack([Position(1, 1401), Position(2, 5)])  # above the cut: nothing to write again
        assert store.flush().bytes_written == 0
        cur.ack(Position(1, 2))  # below it: the first range is 1..3 now
        assert store.flush().bytes_written > 0
        assert store.flush().bytes_written == 0
        assert cur._core.small is held and (held is not None) == form
        testing.crash(store)
    for first in (3, 5):  # (reopened into the form, then written as a chain of records, reopened again)
        with AckStore.open(store_path) as store:
            cur = store.topic(T).cursor("sub")
            ranges = list(cur.ack_ranges())
            assert (cur._core.small is not None) == form
            assert ranges[0] == (Position(1, 1), Position(1, first))
            assert ranges[1:] == [(Position(1, e), Position(1, e)) for e in range(first + 2, 1202, 2)]
            if first == 3:
                cur.ack(Position(1, 4))  # 1..5: 599 ranges, all persisted again
                assert store.flush().bytes_written > 0
            testing.crash(store)


def test_a_cursor_whose_parts_wrote_a_truncated_marker_takes_the_small_form(store_path: Path) -> None:
    """A cursor over its cap in its parts takes the small form once they wrote a PIP-299
    marker: what that marker left out waits in the form, whose next flush writes the cut
    in its own layout, once; then the cut holds, and a crash keeps exactly the lowest
    ranges."""
    with AckStore.open(store_path) as store:
        cur = _cursor(store, CursorConfig(max_unacked_ranges_to_persist=3))
        end_form(cur)  # (asked since its last flush: its parts write the next one, and keep it)
        cur.ack([Position(1, e) for e in (1, 3, 5, 7, 9)])
        assert store.flush().bytes_written > 0 and cur._core.small is None
        cur.ack(Position(1, 2))  # below the cut: 1..3, 5, 7, 9
        assert store.flush().bytes_written > 0 and cur._core.small is not None
        assert store.flush().bytes_written > 0  # (the form's own layout)
        cur.ack(Position(2, 5))  # above the cut
        assert store.flush().bytes_written == 0 and cur.stats().truncated
        testing.crash(store)
    with AckStore.open(store_path) as store:
        cut = [(Position(1, 1), Position(1, 3)), (Position(1, 5), Position(1, 5)), (Position(1, 7), Position(1, 7))]
        assert list(store.topic(T).cursor("sub").ack_ranges()) == cut
