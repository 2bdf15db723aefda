"""The LRU byte budget (PIP-81's memory half), including PIP-81's own five-point test plan."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.ledger_acks import LedgerAcks

from .forms import end_form, sealed_topic
from .model import CursorModel, TopicModel

T = "persistent://t/ns/budget"


def _topic_with(store: AckStore, n: int, entries: int):  # type: ignore[no-untyped-def]
    return sealed_topic(store, T, n, entries)


def _holes(cur, ledgers, entries: int, rate: float, seed: int = 1) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    for ledger in ledgers:
        cur.ack_entries(ledger, [e for e in range(1, entries) if rng.random() > rate])


def _snapshot(cur):  # type: ignore[no-untyped-def]
    return cur.mark_delete_position, list(cur.ack_ranges()), cur.ack_range_count, cur.partial_batches()


def test_1_save_and_restore_under_a_budget(store_path: Path) -> None:
    config = CursorConfig(max_individual_ack_cache_bytes=8 * 1024, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 60, 2000).cursor("c", config)
        _holes(cur, range(1, 61), 2000, 0.1)
        cur.ack_batch_index(Position(7, 0), 4, [2])
        cur._check()
        assert cur.stats().ledgers_swapped_out > 0
        assert cur.stats().write_backs > 0  # dirty ledgers left memory through their records
        expected = _snapshot(cur)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        stats = cur.stats()
        assert stats.ledgers_in_memory < 60 and stats.ledgers_swapped_out > 0
        assert stats.cache_bytes <= config.max_individual_ack_cache_bytes
        assert cur.ack_range_count == expected[2]  # exact while swapped out
        assert _snapshot(cur) == expected
        cur._check()


def test_2_marker_index_drops_ledgers_behind_the_mark_delete(store_path: Path) -> None:
    config = CursorConfig(max_individual_ack_cache_bytes=2 * 1024, full_marker_every=1000)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 20, 1000).cursor("c", config)
        _holes(cur, range(1, 21), 1000, 0.2)
        store.flush()
        assert cur.stats().ledgers_indexed == 20
        cur.ack_cumulative(Position(12, 500))
        cur._check()
        store.flush()  # a delta marker that drops ledgers 1..11
        assert cur.stats().ledgers_indexed == 9
        assert cur.stats().deltas_since_full_marker == 1
        expected = _snapshot(cur)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.stats().ledgers_indexed == 9
        assert _snapshot(cur) == expected
        assert all(first.ledger >= 12 for first, _ in cur.ack_ranges())


def test_3_budget_smaller_than_one_ledger(store_path: Path) -> None:
    config = CursorConfig(max_individual_ack_cache_bytes=300, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 50_000).cursor("c", config)
        end_form(cur)  # (the parts' cache: the small form holds one ledger over the budget too, as no cache)
        _holes(cur, [2], 50_000, 0.3)
        stats = cur.stats()
        assert stats.largest_ledger_bytes > config.max_individual_ack_cache_bytes
        assert stats.over_budget and stats.ledgers_in_memory == 1
        cur.ack([Position(3, 10)])  # ledger 2 must leave for ledger 3
        assert cur.stats().ledgers_in_memory == 1 and cur.stats().write_backs >= 1
        cur._check()
        expected = _snapshot(cur)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert _snapshot(cur) == expected
        for entry in range(0, 50):
            p = Position(2, entry)
            assert cur.is_acked(p) == (p <= expected[0] or any(a <= p <= b for a, b in expected[1]))


def test_4_lru_switching(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic_with(store, 8, 1000)
        probe = topic.cursor("probe", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        cur = topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        for c in (probe, cur):  # (the parts' LRU and charge: the small form holds acks until a flush)
            end_form(c)
        probe.ack_entries(1, range(1, 1000, 2))
        one = probe.stats().cache_bytes
        cur.update_config(max_individual_ack_cache_bytes=int(3.5 * one))
        for ledger in (1, 2, 3):
            cur.ack_entries(ledger, range(1, 1000, 2))
        assert list(cur._core._pages.cache.loaded) == [1, 2, 3]
        cur.is_acked(Position(1, 5))  # touch 1: now 2 is the least recently used
        cur.ack_entries(4, range(1, 1000, 2))
        assert list(cur._core._pages.cache.loaded) == [1, 4] or list(cur._core._pages.cache.loaded)[-2:] == [1, 4]
        assert 2 not in cur._core._pages.cache.loaded and 2 in cur._core._pages.cache.swapped
        cur.is_acked(Position(2, 5))  # swap 2 back in: the LRU of (3, 1, 4) goes
        assert list(cur._core._pages.cache.loaded)[-1] == 2
        assert cur.stats().swap_ins == 1
        cur._check()


def test_5_swap_in_that_needs_two_evictions(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic_with(store, 6, 20_000)
        cur = topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        cur.ack_entries(6, range(1, 20_000, 2))  # a big ledger
        for ledger in (1, 2, 3, 4, 5):
            cur.ack_entries(ledger, range(1, 200, 2))  # small ones
        store.flush()
        end_form(cur)  # (over the default cap on ranges persisted, the small form holds it)
        sizes = {ledger: la.nbytes() for ledger, la in cur._core._pages.cache.loaded.items()}
    budget = sizes[6] + 2 * sizes[1]
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=budget))
        for ledger in (1, 2, 3, 4, 5):
            cur.is_acked(Position(ledger, 1))
        assert 6 in cur._core._pages.cache.swapped
        before = cur.stats().evictions
        assert cur.is_acked(Position(6, 3))
        assert cur.stats().evictions - before >= 2
        assert 6 in cur._core._pages.cache.loaded
        cur._check()


@pytest.mark.slow
def test_range_count_stays_exact_and_cache_bounded_under_random_work(store_path: Path) -> None:
    config = CursorConfig(max_individual_ack_cache_bytes=4 * 1024, full_marker_every=4)
    rng = random.Random(11)
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic_with(store, 30, 400)
        cur = topic.cursor("c", config)
        model = TopicModel(ledgers=[[i, c] for i, c in topic.ledgers()], last_id=31)
        state = CursorModel()
        for step in range(600):
            ledger = rng.randint(1, 30)
            kind = rng.random()
            if kind < 0.6:
                batch = [(ledger, rng.randint(0, 399)) for _ in range(rng.randint(1, 20))]
                cur.ack(batch)
                model.ack(state, batch)
            elif kind < 0.65:
                p = (rng.randint(1, 4), rng.randint(-1, 399))
                cur.ack_cumulative(p)
                model.ack_cumulative(state, p)
            elif kind < 0.8:
                p = (ledger, rng.randint(0, 399))
                assert cur.is_acked(p) == model.is_acked(state, p)
            elif kind < 0.85:
                store.flush()
            cur._check()
            assert cur.ack_range_count == len(model.ranges(state)), step
        assert list(cur.ack_ranges()) == model.ranges(state)
        assert cur.stats().evictions > 0 and cur.stats().swap_ins > 0


def test_store_wide_budget(store_path: Path) -> None:
    with AckStore.open(store_path, cache_bytes=20_000) as store:
        topic = _topic_with(store, 10, 3000)
        curs = [topic.cursor(f"c{i}") for i in range(4)]
        for i, cur in enumerate(curs):
            _holes(cur, range(1, 11), 3000, 0.2, seed=i)
        total = sum(cur.stats().cache_bytes for cur in curs)
        largest = max(cur.stats().largest_ledger_bytes for cur in curs)
        assert total <= 20_000 + largest
        assert store.cache_budget == 20_000 and store.cache_bytes >= total
        expected = [list(cur.ack_ranges()) for cur in curs]
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert [list(topic.cursor(f"c{i}").ack_ranges()) for i in range(4)] == expected


def test_open_loads_newest_first_within_budget(store_path: Path, parts_chains: None) -> None:
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 40, 2000).cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        _holes(cur, range(1, 41), 2000, 0.1)
        store.flush()
        cur.ack([Position(3, 0)])  # ledger 3 becomes the newest record
        store.flush()
        one = cur._core._pages.cache.loaded[5].nbytes()
    with AckStore.open(store_path, load="budget") as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=int(4.5 * one)))
        loaded = list(cur._core._pages.cache.loaded)
        assert 1 in loaded  # the mark-delete ledger always
        assert 3 in loaded  # the newest record
        assert len(loaded) <= 5
        assert cur.stats().recovery.records_loaded == len(loaded)


def _swapped_record(store_path: Path) -> tuple[int, int, list[object]]:
    """A store whose cursor, opened with a small budget, leaves ledger 1's record on disk."""
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 30, 2000).cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        _holes(cur, range(1, 31), 2000, 0.1)
        store.flush()
        first_state = list(cur.ack_ranges())
        cur.ack([Position(30, 0)])
        store.flush()
        seq = cur._core._pages.index[2].seq
    return seq, 2, first_state


def test_verify_keys_falls_back_past_a_missing_swapped_record(store_path: Path, parts_chains: None) -> None:
    from . import rawlog

    seq, _, _ = _swapped_record(store_path)
    rawlog.damage(store_path, seq, how="delete")
    small = CursorConfig(max_individual_ack_cache_bytes=2048)
    with AckStore.open(store_path, verify="keys") as store:
        cur = store.topic(T).cursor("c", small)
        report = cur.stats().recovery
        assert report.marker_seq == -1 and f"record {seq} is missing" in report.skipped_reasons[0]


@pytest.mark.parametrize("load", ["budget", "lazy"])
def test_both_opens_fall_back_past_a_missing_or_damaged_record_they_check(
    store_path: Path, load: str, marker_layout: None
) -> None:
    """What an open checks, a lazy one checks too: a record missing under ``verify="keys"``
    and a damaged mark-delete record (checksummed at every open) are found at open and
    recovery falls back past the markers that need them, for either load."""
    from . import rawlog

    seq, _, _ = _swapped_record(store_path)
    rawlog.damage(store_path, seq, how="delete")
    with AckStore.open(store_path, load=load, readonly=True) as store:
        report = store.topic(T).cursor("c").stats().recovery
        assert report.marker_seq == -1 and f"record {seq} is missing" in report.skipped_reasons[0]
    with AckStore.open(store_path) as store:  # another cursor, whose mark-delete ledger's record is damaged
        topic = store.topic(T + "-2")
        topic.add_ledger(1)
        cur = topic.cursor("d")
        cur.ack([Position(1, e) for e in (3, 5)])
        store.flush()
        first = (cur.stats().last_marker_seq, list(cur.ack_ranges()))
        cur.ack(Position(1, 9))  # a new record of ledger 1 (too many acks for a delta) and marker
        store.flush()
        cid, md_seq = cur.cursor_id, cur._core._pages.index[1].seq
    rawlog.damage(store_path, md_seq, cursor_id=cid)
    with AckStore.open(store_path, load=load, readonly=True) as store:
        cur = store.topic(T + "-2").cursor("d")
        report = cur.stats().recovery
        assert report.markers_skipped == 1 and f"record {md_seq} is damaged" in report.skipped_reasons[0]
        assert (report.marker_seq, list(cur.ack_ranges())) == first  # the previous flush's state


@pytest.mark.parametrize("load", ["budget", "lazy"])
def test_a_one_byte_budget_still_checks_the_newest_record_when_the_mark_delete_ledger_holds_none(
    store_path: Path, load: str, marker_layout: None
) -> None:
    """M's ledger holds no state, so an eager open decodes the newest record however small
    the budget (one ledger at least is loaded) and a lazy open reads and checksums that same
    record: damage to it fails the newest marker at open for either load, and the cursor
    opens at the flush before."""
    from . import rawlog

    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 100).cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 30))
        cur.ack([Position(2, e) for e in (3, 5)] + [Position(3, e) for e in (4, 8)])
        store.flush()
        first = (cur.stats().last_marker_seq, list(cur.ack_ranges()))
        cur.ack([Position(2, e) for e in range(20, 60, 2)])  # a new record of ledger 2: the newest
        store.flush()  # (not of the highest ledger, which an open checks for a cut anyway)
        seq, newest = cur._core._pages.index[2].seq, cur.stats().last_marker_seq
        assert seq > first[0] and cur.mark_delete_position == Position(1, -1)
    rawlog.damage(store_path, seq)
    with AckStore.open(store_path, load=load) as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=1))
        report = cur.stats().recovery
        assert report.markers_skipped == 1
        assert report.skipped_reasons[0].startswith(f"marker {newest}: ledger 2's record {seq} is damaged (")
        assert (report.marker_seq, list(cur.ack_ranges())) == first


@pytest.mark.parametrize("layout", ["state", "marker"])
def test_an_open_reports_the_records_and_bytes_it_decoded(
    store_path: Path, request: pytest.FixtureRequest, layout: str
) -> None:
    """``stats().recovery`` of an eager open: the newest marker, every ledger decoded, and
    the bytes of the records that held them: each ledger's record, or a small cursor's one
    state marker (its ledgers come with it). A lazy open decodes no ledger record; a state
    marker it decodes whole all the same, and a small cursor's every ledger with it (the
    small form holds them all)."""
    from . import rawlog

    if layout == "marker":
        request.getfixturevalue("marker_layout")
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 100).cursor("c")
        cur.ack([Position(1, e) for e in (3, 5)] + [Position(2, 4)] + [Position(3, e) for e in (1, 8, 9)])
        store.flush()
        cid, newest = cur.cursor_id, cur.stats().last_marker_seq
        end_form(cur)  # (its parts' index: what the flush named)
        index = {ledger: entry.seq for ledger, entry in cur._core._pages.index.items()}
    lengths = rawlog.lengths(store_path, cid)
    held = [newest] if layout == "state" else sorted(index.values())
    assert sorted(index) == [1, 2, 3] and (set(index.values()) == {newest}) == (layout == "state")
    lazily = (3, lengths[newest]) if layout == "state" else (0, 0)
    for load, records, nbytes in [("budget", 3, sum(lengths[seq] for seq in held)), ("lazy", *lazily)]:
        with AckStore.open(store_path, load=load) as store:
            report = store.topic(T).cursor("c").stats().recovery
            assert (report.marker_seq, report.markers_skipped, report.records_loaded) == (newest, 0, records)
            assert report.bytes_loaded == nbytes


def test_verify_all_and_loaded_on_a_damaged_swapped_record(store_path: Path, parts_chains: None) -> None:
    import pytest

    from ackstore import CorruptRecordError

    from . import rawlog

    seq, ledger, _ = _swapped_record(store_path)
    rawlog.damage(store_path, seq)
    small = CursorConfig(max_individual_ack_cache_bytes=2048)
    with AckStore.open(store_path, readonly=True, verify="keys", load="budget") as store:
        cur = store.topic(T).cursor("c", small)
        assert cur.stats().recovery.markers_skipped == 0  # the key exists: "keys" cannot see the damage
        with pytest.raises(CorruptRecordError, match=r"ackstore check --fix"):
            cur.is_acked(Position(ledger, 1999))
    with AckStore.open(store_path, readonly=True, verify="all", load="budget") as store:
        cur = store.topic(T).cursor("c", small)
        assert cur.stats().recovery.markers_skipped == 2
        assert "damaged" in cur.stats().recovery.skipped_reasons[0]


def test_a_lazy_open_decodes_no_ledger_and_is_whole(store_path: Path, parts_chains: None) -> None:
    """``load="lazy"``: no ledger decoded at open (the mark-delete one's record holds nothing
    at or below M + 1), yet positions, ranges, range count and delivery counts are right at
    once; a ledger is read on first use and stays (an unlimited budget evicts nothing); a
    reader opens lazily too."""
    import pytest

    from ackstore import InvalidArgumentError

    big = CursorConfig(max_individual_ack_cache_bytes=1 << 30)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 12, 500).cursor("c", big)
        _holes(cur, range(1, 13), 500, 0.2)
        cur.record_deliveries([Position(7, e) for e in range(500) if not cur.is_acked(Position(7, e))][:3])
        store.flush()
        cur.ack([Position(4, e) for e in range(500)][::7])  # a delta on top of ledger 4's record
        store.flush()
        want = (_snapshot(cur), cur.delivery_counts())
    for readonly in (True, False):  # the writer last: it acks
        with AckStore.open(store_path, load="lazy", readonly=readonly) as store:
            cur = store.topic(T).cursor("c", big)
            assert cur.mark_delete_position == want[0][0] and not cur._core._pages.cache.loaded
            assert cur.stats().recovery.records_loaded == 0
            assert (_snapshot(cur), cur.delivery_counts()) == want  # read from disk, not loaded
            assert not cur._core._pages.cache.loaded
            assert cur.is_acked(Position(4, 0))  # first use of ledger 4: read, with its delta
            assert list(cur._core._pages.cache.loaded) == [4]
            if not readonly:  # M + 1 acked: ledger 1 is read, M advances over its contiguous acks
                (md_ledger, md_entry), ranges = want[0][:2]
                after = {start: end for start, end in ranges}.get(Position(md_ledger, md_entry + 2))
                cur.ack(Position(md_ledger, md_entry + 1))
                assert cur.mark_delete_position == (after or Position(md_ledger, md_entry + 1))
                assert md_ledger in cur._core._pages.cache.loaded
            cur._check()
    with AckStore.open(store_path) as store:  # lazy is the default
        assert store.topic(T).cursor("c", big).stats().recovery.records_loaded == 0
    with AckStore.open(store_path, load="budget") as store:  # decodes what fits the budget: all
        assert store.topic(T).cursor("c", big).stats().recovery.records_loaded == 12
    with pytest.raises(InvalidArgumentError, match=r"load='eager' is not allowed: allowed 'lazy', 'budget'"):
        AckStore.open(store_path, load="eager")


def test_a_lazy_open_checks_what_the_budget_covers_at_open_and_the_rest_at_first_use(
    store_path: Path, parts_chains: None
) -> None:
    """A lazy open reads and checksums the records an eager one would decode (newest
    first, within the budget), so a damaged one among them makes recovery fall back at
    open, as an eager open does; one beyond the budget raises CorruptRecordError at its
    first use (``verify="all"`` checks it at open)."""
    import pytest

    from ackstore import CorruptRecordError

    from . import rawlog

    seq, ledger, _ = _swapped_record(store_path)
    rawlog.damage(store_path, seq)  # ledger 2's record, among the oldest
    for load in ("lazy", "budget"):  # the default budget covers every record: found at open, both ways
        with AckStore.open(store_path, load=load, readonly=True) as store:
            report = store.topic(T).cursor("c").stats().recovery
            assert report.markers_skipped == 2 and f"record {seq} is damaged" in report.skipped_reasons[0]
    small = CursorConfig(max_individual_ack_cache_bytes=2048)  # a few of the newest records
    with AckStore.open(store_path, readonly=True) as store:
        cur = store.topic(T).cursor("c", small)
        assert cur.stats().recovery.markers_skipped == 0 and not cur._core._pages.cache.loaded
        assert cur.is_acked(Position(30, 0))  # the newest record: checked at open, fine
        with pytest.raises(CorruptRecordError, match=r"ackstore check --fix"):
            cur.is_acked(Position(ledger, 1999))
    with AckStore.open(store_path, verify="all", readonly=True) as store:
        assert store.topic(T).cursor("c", small).stats().recovery.markers_skipped == 2  # checked at open: fell back


def test_a_lazy_open_reads_a_mark_delete_ledger_holding_m_plus_1(store_path: Path, marker_layout: None) -> None:
    """A mark-delete ledger whose record holds M + 1 (no flush leaves one; planted here) is
    decoded at a lazy open too, and M advances over it as the default open does."""
    import lmdb

    from ackstore.storage.records import encode_ledger, log_key

    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 2, 100).cursor("c")
        cur.ack([Position(1, e) for e in (0, 1, 2, 3, 4, 7, 8, 10)])  # M = 1:4, ranges 7-8, 10
        store.flush()
        cid, seq = cur.cursor_id, cur._core._pages.index[1].seq
    env = lmdb.open(str(store_path), max_dbs=8)
    db = env.open_db(b"log", create=False)
    with env.begin(write=True) as txn:  # the same run count, one entry lower: 5-6, 9
        txn.put(log_key(cid, seq), encode_ledger(1, LedgerAcks(BitMap([5, 6, 9])), cid), db=db)
    env.close()
    for load in ("lazy", "budget"):
        with AckStore.open(store_path, load=load, readonly=True) as store:
            cur = store.topic(T).cursor("c")
            assert cur.mark_delete_position == Position(1, 6), load
            assert list(cur.ack_ranges()) == [(Position(1, 9), Position(1, 9))], load
            assert cur.stats().recovery.records_loaded == 1, load


def test_a_ledger_written_back_then_passed_by_the_mark_delete_position_leaves_the_index(store_path: Path) -> None:
    """Ledger 1 is written back by eviction (its record not yet in a marker), then M passes
    it: the next marker names no ledger at or below M, so neither its record nor a reopen
    brings it back."""
    config = CursorConfig(max_individual_ack_cache_bytes=300, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 1000).cursor("c", config)
        cur.ack([Position(1, e) for e in range(1, 400, 2)])  # ledger 1 over the budget
        store.flush()
        end_form(cur)  # (the parts' budget: the small form, of one ledger here, is charged at its flush)
        cur.ack([Position(1, 2)])  # dirty again
        cur.ack([Position(2, e) for e in range(1, 400, 2)])  # ledger 1 must leave for ledger 2
        pages = cur._core._pages
        assert 1 in pages.unmarked and 1 not in pages.cache.loaded  # written back, no marker yet
        cur.ack_cumulative(Position(1, 999))  # M passes ledger 1
        assert 1 not in pages.unmarked
        store.flush()
        assert cur.mark_delete_position == Position(2, -1) and sorted(pages.index) == [2]
        cur._check()
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.mark_delete_position == Position(2, -1) and sorted(cur._core._pages.index) == [2]


def test_the_caches_counters_count_each_swap_in_eviction_and_write_back_once(store_path: Path) -> None:
    """A budget that holds one ledger: each ack in another ledger evicts the one held (a
    dirty one written back first), each read of an evicted one swaps it in; the cursor's
    figures count each exactly."""
    config = CursorConfig(max_individual_ack_cache_bytes=300, max_unacked_ranges_to_persist=0)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 1000).cursor("c", config)
        end_form(cur)  # (the parts' cache: a new cursor's small form is charged at its flush)
        cur.ack([Position(1, e) for e in range(1, 400, 2)])
        stats = cur.stats()
        assert (stats.swap_ins, stats.evictions, stats.write_backs) == (0, 0, 0)
        cur.ack([Position(2, e) for e in range(1, 400, 2)])  # 1 leaves, written back
        stats = cur.stats()
        assert (stats.swap_ins, stats.evictions, stats.write_backs) == (0, 1, 1)
        store.flush()  # 2 written by the flush: clean from here
        cur.ack([Position(3, e) for e in range(1, 400, 2)])  # 2 leaves, nothing to write back
        stats = cur.stats()
        assert (stats.swap_ins, stats.evictions, stats.write_backs) == (0, 2, 1)
        assert cur.is_acked(Position(1, 399)) and not cur.is_acked(Position(1, 398))  # 1 comes back: 3 leaves
        stats = cur.stats()
        assert (stats.swap_ins, stats.evictions, stats.write_backs) == (1, 3, 2)
        assert cur.is_acked(Position(2, 5))  # 2 comes back: 1 leaves, clean (read, not changed)
        stats = cur.stats()
        assert (stats.swap_ins, stats.evictions, stats.write_backs) == (2, 4, 2)
        cur._check()


@pytest.mark.parametrize("acks", [10, 9000])
def test_the_budget_holds_when_a_small_form_ends_holding_partial_batches_in_two_ledgers(
    store_path: Path, acks: int
) -> None:
    """A one-byte budget: the cursor takes the small form with a partial batch in one ledger,
    gets another in a second ledger in the form, then acks that end the form (at the flush,
    or at once: more ranges than the form holds). The parts made from the form keep one
    ledger in memory at most, the rest written back, and hold the same state."""
    config = CursorConfig(max_individual_ack_cache_bytes=1, full_marker_every=1)
    with AckStore.open(store_path) as store:
        cur = _topic_with(store, 3, 20000).cursor("c", config)
        cur.ack_batch_index(Position(1, 5), 4, [0])
        store.flush()
        store.flush()
        assert cur._core.small is not None
        cur.ack_batch_index(Position(3, 5), 4, [0])
        cur.ack([Position(1, 10 + 2 * i) for i in range(acks)])
        store.flush()
        assert cur._core.small is None
        stats = cur.stats()
        assert stats.ledgers_in_memory <= 1 and stats.write_backs > 0
        cur._check()
        expected = _snapshot(cur)
        assert expected[2] == acks and set(expected[3]) == {Position(1, 5), Position(3, 5)}
    with AckStore.open(store_path) as store:
        assert _snapshot(store.topic(T).cursor("c")) == expected
