"""A cursor's pages at their edges: what waits for the next marker (and comes back when a
flush fails), the budgets at exactly their bounds, the store-wide budget keeping the ledger
an ack is in, a writer's missing record, and each invariant ``_check`` asserts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, StoreError
from ackstore.cursor.pages import Pages, Pending
from ackstore.cursor.small import set_form_chains
from ackstore.ledger_acks import NO_ENTRIES
from ackstore.storage.index_entry import IndexEntry
from ackstore.storage.log import MissingRecordError
from ackstore.storage.records import log_key

from .forms import end_form, sealed_topic

T = "persistent://t/ns/pages"


@pytest.fixture(autouse=True, scope="module")
def _parts() -> Iterator[None]:
    """The cursors here keep their ledgers in their parts, whose pages and budget these tests
    are about: with form chains off a cursor over a slot's bound never takes the small form
    (which holds every ledger of its line at once, outside the budget)."""
    before = set_form_chains(False)
    yield
    set_form_chains(before)


HOLEY = range(1, 600, 2)  # 300 isolated acks: a ledger of a few hundred bytes, two past the state layout


def _topic(store: AckStore, ledgers: int = 3):  # type: ignore[no-untyped-def]
    return sealed_topic(store, T, ledgers, 1000)


def _pages(cur) -> Pages:  # type: ignore[no-untyped-def]
    return cur._core._pages  # type: ignore[no-any-return]


def test_a_marker_is_owed_for_what_a_marker_would_name() -> None:
    """A dropped ledger is worth a marker only when a marker named it; anything changed,
    written back or of the cursor's own fields always is."""
    named = {5: IndexEntry(3, 1)}
    assert Pending((), frozenset({5}), frozenset(), False).worth_a_marker(named)
    assert not Pending((), frozenset({6}), frozenset(), False).worth_a_marker(named)
    assert not Pending((), frozenset(), frozenset(), False).worth_a_marker(named)
    assert Pending((), frozenset(), frozenset({6}), False).worth_a_marker({})
    assert Pending({6}, frozenset(), frozenset(), False).worth_a_marker({})
    assert Pending((), frozenset(), frozenset(), True).worth_a_marker({})


def _written_back(store: AckStore):  # type: ignore[no-untyped-def]
    """A cursor whose budget holds one ledger: ledger 1 flushed, then changed and written
    back by eviction (no marker names that record yet), ledger 2 then read back in and
    ledger 3 written back in its turn: nothing is dirty in memory, two records wait."""
    cur = _topic(store).cursor("c", CursorConfig(max_individual_ack_cache_bytes=300, max_unacked_ranges_to_persist=0))
    cur.ack([Position(1, e) for e in HOLEY])
    store.flush()
    cur.ack([Position(1, 2)])
    cur.ack([Position(3, e) for e in HOLEY])  # 1 leaves: written back
    cur.ack([Position(2, e) for e in HOLEY])  # 3 leaves: written back
    store.flush()  # 2 written by the flush, and a marker names 1 and 3
    cur.ack([Position(1, 4)])  # 1 comes back and changes: 2 leaves, clean
    cur.ack([Position(3, 4)])  # 3 comes back and changes: 1 leaves, written back
    assert cur.is_acked(Position(2, 5))  # 2 comes back (read): 3 leaves, written back
    pages = _pages(cur)
    assert not pages.dirty and set(pages.unmarked) == {1, 3}
    return cur


def test_a_cursor_whose_only_change_is_a_written_back_record_is_dirty(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _written_back(store)
        assert cur.dirty, "a written-back record no marker names yet is a change to flush"
        stats = store.flush()
        assert stats.cursors == 1 and not cur.dirty and not _pages(cur).unmarked
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 4)) and cur.is_acked(Position(3, 4)) and cur.is_acked(Position(1, 2))


def test_a_flush_that_fails_gives_back_the_written_back_records_it_took(store_path: Path) -> None:
    """The records eviction wrote since the last marker are owed to the next marker; a flush
    that fails before it writes owes them still, or their acks are lost at the reopen."""
    with AckStore.open(store_path) as store:
        cur = _written_back(store)
        with store.lock:
            cur._core._parts()
        cur._core._state.properties["key-\udcff"] = 1  # msgpack cannot encode it: the flush fails
        with pytest.raises(StoreError, match="nothing was written"):
            store.flush()
        assert set(_pages(cur).unmarked) == {1, 3}
        del cur._core._state.properties["key-\udcff"]
        store.flush()
        assert not _pages(cur).unmarked
        cur._check()
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 4)) and cur.is_acked(Position(3, 4)) and cur.is_acked(Position(1, 2))


def test_a_ledger_a_flush_in_flight_carries_stays_while_acks_evict_around_it(store_path: Path) -> None:
    """While a flush writes (outside the store's lock), an ack needs room: the ledger the
    flush carries is pinned, so the ack evicts the others; everything reaches the disk."""
    with AckStore.open(store_path) as store:
        cur = _written_back(store)  # the general path: records wait for a marker
        cur.ack([Position(2, 2)])  # 2 dirty: the flush carries it
        group = store._group
        write = group._write
        seen: list[tuple[object, ...]] = []

        def ack_meanwhile(job):  # type: ignore[no-untyped-def]
            pages = _pages(cur)
            assert set(pages.pinned) == {2}
            cur.ack([Position(1, 6), Position(3, 6)])  # each swapped in, each needs room
            seen.append((sorted(pages.loaded), cur.stats().evictions))
            return write(job)

        group._write = ack_meanwhile
        store.flush()
        del group._write
        loaded, _ = seen[0]
        assert 2 in loaded, "a ledger the flush in flight carries was evicted"
        assert not _pages(cur).pinned
        cur._check()
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert all(cur.is_acked(Position(ledger, e)) for ledger in (1, 3) for e in (2, 4, 6) if (ledger, e) != (3, 2))
        assert cur.is_acked(Position(2, 2))


def _sizes(path: Path) -> tuple[int, int]:
    """What ledgers 1 and 2 of a cursor holding HOLEY in each are charged when read back
    from their records (a read-only lazy open: the first read of each loads it whole)."""
    with AckStore.open(path) as store:
        cur = _topic(store).cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack([Position(1, e) for e in HOLEY] + [Position(2, e) for e in HOLEY])
    with AckStore.open(path, readonly=True) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 1)) and cur.is_acked(Position(2, 1))
        loaded = _pages(cur).cache.loaded
        return loaded[1].size, loaded[2].size


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int]:
    return _sizes(tmp_path_factory.mktemp("sizes") / "s")


@pytest.fixture
def two_ledgers(tmp_path: Path) -> Iterator[Path]:
    with AckStore.open(tmp_path / "s") as store:
        cur = _topic(store).cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack([Position(1, e) for e in HOLEY] + [Position(2, e) for e in HOLEY])
    yield tmp_path / "s"


@pytest.mark.parametrize("spare", [0, -1])
def test_a_cursors_budget_holds_exactly_its_bytes(two_ledgers: Path, sizes: tuple[int, int], spare: int) -> None:
    """Both ledgers read back fit a budget of exactly their bytes; one byte less and the
    first read is evicted for the second."""
    with AckStore.open(two_ledgers) as store:
        cur = store.topic(T).cursor("c")
        cur.update_config(max_individual_ack_cache_bytes=sum(sizes) + spare)
    with AckStore.open(two_ledgers) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 1)) and cur.is_acked(Position(2, 1))
        assert cur.stats().evictions == (0 if spare == 0 else 1)
        cur._check()


@pytest.mark.parametrize("spare", [0, -1])
def test_a_budget_shrunk_to_exactly_what_is_held_evicts_nothing(
    two_ledgers: Path, sizes: tuple[int, int], spare: int
) -> None:
    with AckStore.open(two_ledgers) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 1)) and cur.is_acked(Position(2, 1))
        assert _pages(cur).cache.nbytes == sum(sizes)
        cur.update_config(max_individual_ack_cache_bytes=sum(sizes) + spare)
        assert cur.stats().evictions == (0 if spare == 0 else 1)
        cur._check()


@pytest.mark.parametrize("spare", [0, -1])
def test_the_store_wide_budget_holds_exactly_its_bytes(two_ledgers: Path, sizes: tuple[int, int], spare: int) -> None:
    """Another cursor's read asks the store-wide budget for room before it loads: with room
    for exactly what it loads nothing gives way; one byte less and the largest cache does."""
    with AckStore.open(two_ledgers) as store:
        store.topic(T).cursor("d", CursorConfig(max_unacked_ranges_to_persist=0)).ack(
            [Position(1, e) for e in HOLEY] + [Position(2, e) for e in HOLEY]
        )
    with AckStore.open(two_ledgers, cache_bytes=2 * sizes[0] + sizes[1] + spare) as store:
        c, d = store.topic(T).cursor("c"), store.topic(T).cursor("d")
        assert c.is_acked(Position(1, 1)) and c.is_acked(Position(2, 1))
        assert c.stats().evictions == 0
        assert d.is_acked(Position(1, 1))  # its ledger 1 needs room: c's is the largest cache
        assert (c.stats().evictions, d.stats().evictions) == (0 if spare == 0 else 1, 0)
        c._check()
        d._check()


def test_the_store_wide_budget_keeps_the_ledger_being_acked(store_path: Path) -> None:
    """A store-wide budget smaller than one ledger: the cursor acking in it is the largest
    cache, and the pool asks it to give way, but never with the ledger it acks in."""
    with AckStore.open(store_path, cache_bytes=200) as store:
        cur = _topic(store).cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        end_form(cur)  # (the parts' cache: a new cursor's small form is charged at its flush)
        for e in HOLEY:
            cur.ack(Position(1, e))
        stats = cur.stats()
        assert (stats.evictions, stats.write_backs, stats.ledgers_in_memory) == (0, 0, 1)
        cur._check()


def test_a_writers_missing_record_is_a_typed_error(store_path: Path) -> None:
    """A record the marker names, lost from a writer's log after the open looked: reading
    its ledger raises MissingRecordError (a writer has no newer state to move to, as a
    reader does)."""
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack([Position(1, e) for e in HOLEY] + [Position(2, e) for e in HOLEY])
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        pages = _pages(cur)
        assert 2 in pages.swapped
        env = store._storage
        seq = pages.index[2].seq
        key = log_key(cur.cursor_id, seq)
        assert env.write(lambda txn: txn.delete(key, db=env.log_db))
        with pytest.raises(MissingRecordError, match=f"ledger 2's record {seq} is missing"):
            cur.is_acked(Position(2, 1))


def _checked(cur) -> None:  # type: ignore[no-untyped-def]
    core = cur._core
    _pages(cur)._check(core._state.md, core.topic.directory)


@pytest.fixture
def held(store_path: Path) -> Iterator[object]:
    """A cursor holding two loaded ledgers with acks and a swapped-out one, all flushed."""
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack([Position(ledger, e) for ledger in (1, 2, 3) for e in HOLEY])
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(2, 1)) and cur.is_acked(Position(3, 1))
        assert sorted(_pages(cur).loaded) == [2, 3] and _pages(cur).swapped == {1}
        _checked(cur)
        yield cur


def test_check_finds_a_swapped_ledger_the_index_lost(held) -> None:  # type: ignore[no-untyped-def]
    del _pages(held).index[1]
    with pytest.raises(AssertionError):
        _checked(held)


def test_check_finds_a_loaded_ledger_below_the_mark_delete_position(held) -> None:  # type: ignore[no-untyped-def]
    core = held._core
    core._state.md = (2, -1)  # planted: ledger 1 (swapped) and nothing else lies below it
    pages = _pages(held)
    pages.swapped.discard(1)
    pages.loaded[1] = pages.loaded.pop(2)  # a loaded ledger below M, in the directory
    pages.index[1], pages.index[2] = pages.index[2], pages.index[1]
    with pytest.raises(AssertionError):
        _checked(held)


def test_check_finds_a_running_total_that_undercounts(held) -> None:  # type: ignore[no-untyped-def]
    cache = _pages(held).cache
    cache.nbytes = sum(la.nbytes() for la in cache.loaded.values()) - 1
    with pytest.raises(AssertionError, match=r"^the cache's running total undercounts$"):
        _checked(held)


def test_check_finds_a_clean_ledger_whose_index_counts_other_ranges(held) -> None:  # type: ignore[no-untyped-def]
    pages = _pages(held)
    entry = pages.index[2]
    pages.index[2] = entry._replace(runs=entry.runs + 1)
    with pytest.raises(AssertionError):
        _checked(held)


def test_check_finds_a_write_to_the_shared_empty_entries(held) -> None:  # type: ignore[no-untyped-def]
    dict.__setitem__(NO_ENTRIES, 7, 1)  # as a compiled write past its guard would
    try:
        with pytest.raises(AssertionError, match=r"^a ledger wrote to the shared empty entries$"):
            _checked(held)
    finally:
        dict.__delitem__(NO_ENTRIES, 7)


def test_a_budget_of_zero_holds_the_one_ledger_being_acked_and_no_other(store_path: Path) -> None:
    """Nothing fits a budget of 0 but the ledger an ack is in, which stays (it stands alone):
    the cache then holds exactly the budget plus its largest ledger, the bound ``_check``
    allows, and an ack in another ledger evicts it."""
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c", CursorConfig(max_individual_ack_cache_bytes=0, max_unacked_ranges_to_persist=0))
        end_form(cur)  # (the parts' cache: a new cursor's small form is charged at its flush)
        cur.ack([Position(1, e) for e in HOLEY])
        pages = _pages(cur)
        assert list(pages.loaded) == [1] and cur.stats().evictions == 0
        cur._check()
        cur.ack([Position(2, e) for e in HOLEY])
        assert list(pages.loaded) == [2] and (cur.stats().evictions, cur.stats().write_backs) == (1, 1)
        cur._check()
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert all(cur.is_acked(Position(ledger, e)) for ledger in (1, 2) for e in HOLEY)


def test_a_flush_whose_planning_raises_gives_back_what_it_took(store_path: Path) -> None:
    """A cursor whose plan fails while it is made (here: an index entry planted broken, as
    a bug would leave it) gets back everything the plan took, the written-back records a
    marker owes included: once the entry is mended the next flush writes it all."""
    with AckStore.open(store_path) as store:
        cur = _written_back(store)
        pages = _pages(cur)
        entry = pages.index[3]
        pages.index[3] = "broken"  # type: ignore[assignment]
        cur._core._chain.force_full = True  # a full marker: planning reads every index entry
        with pytest.raises(StoreError, match=rf"failed while planning cursor {T}/c, nothing was written"):
            store.flush()
        assert set(pages.unmarked) == {1, 3} and cur.dirty
        pages.index[3] = entry
        store.flush()
        cur._check()
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.is_acked(Position(1, 4)) and cur.is_acked(Position(3, 4)) and cur.is_acked(Position(1, 2))


def test_check_finds_a_written_back_ledger_whose_entry_names_acks_since_its_record(store_path: Path) -> None:
    from pyroaring import FrozenBitMap

    with AckStore.open(store_path) as store:
        cur = _written_back(store)
        _checked(cur)
        pages = _pages(cur)
        pages.index[1] = pages.index[1]._replace(adds=FrozenBitMap([7]))
        with pytest.raises(AssertionError):
            _checked(cur)
