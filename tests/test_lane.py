"""The marker lane: the flush plan of a cursor outside the small form, taken whole.

Every case builds a cursor in some state, asks ``take_marker`` for its plan
(``lane_takes``: a plan that, aborted, leaves the cursor as it was), then flushes and checks
what a reopen recovers. The state machines run ``lane_takes`` before every flush as well."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, Topic
from ackstore import flush as group_flush
from ackstore.cursor import lane
from ackstore.cursor.plan import FlushPlan
from ackstore.storage.records import log_key

from .forms import end_form
from .lane_checks import lane_takes

T = "persistent://t/ns/lane"
ROOMY = CursorConfig(max_unacked_ranges_to_persist=0, full_marker_every=5)


def _ranges(store: AckStore, name: str) -> list[tuple[Position, Position]]:
    return list(store.topic(T).cursor(name).ack_ranges())


def _flush_and_reopen(path: Path, store: AckStore, names: list[str]) -> None:
    """Flush, then a reopen recovers exactly what the cursors hold."""
    store.flush()
    expected = {name: list(store.topic(T).cursor(name).ack_ranges()) for name in names}
    md = {name: store.topic(T).cursor(name).mark_delete_position for name in names}
    store.close()
    with AckStore.open(path, readonly=True) as again:
        topic = again.topic(T)
        for name in names:
            cur = topic.cursor(name)
            assert (list(cur.ack_ranges()), cur.mark_delete_position) == (expected[name], md[name]), name


def _sealed_and_open(path: Path) -> tuple[AckStore, Topic]:
    """A new store at ``path`` whose topic has ledger 1 sealed (100,000 entries) and 2 open."""
    store = AckStore.open(path, sync=False)
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, 100_000)
    topic.add_ledger(2)
    return store, topic


@pytest.mark.usefixtures("marker_layout")
def test_the_common_flushes_are_taken_by_the_lane_alike(store_path: Path) -> None:
    """A one-ledger cursor: full markers while they repeat few acks, then deltas, then a new
    base past the delta bound (the general path); an idle cursor; a move of the mark-delete
    position alone; properties; every step agreed and recovered."""
    store, topic = _sealed_and_open(store_path)
    cur, idle = topic.cursor("c", ROOMY), topic.cursor("idle", ROOMY)
    assert lane_takes(cur) == "other"  # a fresh log: its first marker starts a chain
    cur.ack_entries(2, range(1, 4001, 2))
    store.flush()
    assert lane_takes(idle) == "idle"
    seen = []
    for e in range(4001, 4001 + 2 * (lane.DELTA_MAX_ACKS + 3), 2):
        cur.ack(Position(2, e))
        seen.append(lane_takes(cur))
        if len(seen) % 7 == 0:
            cur.set_property("at", e)
        store.flush()
    assert seen.count("plan") >= lane.DELTA_MAX_ACKS - 1 and "other" in seen  # past the bound: a new base
    cur.ack_cumulative(Position(1, 10))  # the mark-delete position moves; no ledger changes
    assert lane_takes(cur) == "plan"
    _flush_and_reopen(store_path, store, ["c", "idle"])


@pytest.mark.usefixtures("marker_layout")
def test_delivery_counts_ride_in_the_lane(store_path: Path) -> None:
    """A few delivery counts since the base go in the marker like a few acks: the counts
    that still stand (an ack since took some away: they leave ``counts_added`` once the
    plan is taken), and in a delta only those the chain has not named with the same value.
    Past the delta bound (acks and counts together), the general path; every step agreed,
    and a reopen has the counts."""
    store, topic = _sealed_and_open(store_path)
    cur, other = topic.cursor("c", ROOMY), topic.cursor("other", ROOMY)
    for c in (cur, other):  # the other ledger keeps full markers from being written instead of deltas
        c.ack_entries(1, range(1, 4001, 2))
        c.ack_entries(2, range(1, 4001, 2))
    store.flush()
    cur.record_deliveries([Position(1, 4002), Position(1, 4004)])
    assert lane_takes(cur) == "plan"
    stats = store.flush()
    assert stats.ledger_records == 0 and cur._core._planner.pages.index[1].counts == {4002: 1, 4004: 1}
    cur.record_deliveries([Position(1, 4004), Position(1, 4006)])
    cur.ack(Position(1, 4002))  # its count goes (the ack path leaves counts_added alone)
    cur.ack(Position(2, 4001))
    assert 4002 in cur._core._planner.pages.loaded[1].counts_added
    assert lane_takes(cur) == "plan"
    assert store.flush().ledger_records == 0
    la = cur._core._planner.pages.loaded[1]
    assert la.counts_added == {4004: 2, 4006: 1} == cur._core._planner.pages.index[1].counts
    assert cur.delivery_counts() == {Position(1, 4004): 2, Position(1, 4006): 1}
    cur.record_deliveries([Position(1, 4006)])  # the chain named 4004's count already: the delta names one
    one = store.flush().bytes_written
    cur.record_deliveries([Position(1, 4004), Position(1, 4006)])  # both changed: two
    assert store.flush().bytes_written == one + 8  # an entry and a count, a u32 each
    for e in range(4010, 4010 + 2 * lane.DELTA_MAX_ACKS, 2):  # acks and counts past the bound
        cur.record_deliveries([Position(1, e + 1)])
        cur.ack(Position(1, e))
    assert lane_takes(cur) == "other"
    assert store.flush().ledger_records == 1  # a new base record of ledger 1
    cur.record_deliveries([Position(1, 4004)])
    assert lane_takes(cur) == "plan"
    single = topic.cursor("single", ROOMY)  # one ledger: full markers while they repeat little
    single.ack_entries(1, range(1, 4001, 2))
    store.flush()
    for e in (4002, 4004, 4002):  # each full marker holds every count since the base
        single.record_deliveries([Position(1, e)])
        assert lane_takes(single) == "plan"
        stats = store.flush()
        assert stats.full_markers == 1 and stats.ledger_records == 0
    expected = {"c": cur.delivery_counts(), "single": single.delivery_counts()}
    assert expected["single"] == {Position(1, 4002): 2, Position(1, 4004): 1}
    _flush_and_reopen(store_path, store, ["c", "other", "single"])
    with AckStore.open(store_path, readonly=True) as reopened:
        assert {name: reopened.topic(T).cursor(name).delivery_counts() for name in expected} == expected
        assert expected["c"][Position(1, 4004)] == 4


@pytest.mark.usefixtures("marker_layout")
def test_what_the_lane_leaves_to_the_general_path(store_path: Path) -> None:
    """More delivery counts and acks since the base than a delta carries, a dropped ledger,
    a write-back by eviction, a PIP-299 cap exceeded now or at the last flush, too many
    acks, an id outside the fixed layout: OTHER, alike."""
    store = AckStore.open(store_path, sync=False)
    topic = store.topic(T)
    for ledger in (1, 2, 3):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 10_000)
    topic.add_ledger(1 << 33)  # a ledger id the fixed marker layout cannot hold
    counted = topic.cursor("counted", ROOMY)
    dropping = topic.cursor("dropping", ROOMY)
    small = topic.cursor("small", CursorConfig(max_individual_ack_cache_bytes=600, max_unacked_ranges_to_persist=0))
    capped = topic.cursor("capped", CursorConfig(max_unacked_ranges_to_persist=3))
    many = topic.cursor("many", ROOMY)
    huge = topic.cursor("huge", ROOMY)
    names = ["counted", "dropping", "small", "capped", "many", "huge"]
    for cur in (counted, dropping, many):
        for ledger in (1, 2):
            cur.ack_entries(ledger, range(1, 3001, 3))
    huge.ack([Position(1 << 33, 5)])
    store.flush()
    counted.record_deliveries([Position(1, e) for e in range(2, 2 + 3 * (lane.DELTA_MAX_ACKS + 1), 3)])
    assert lane_takes(counted) == "other"
    dropping.ack_cumulative(Position(2, 0))  # ledger 1 drops below the mark-delete position
    assert lane_takes(dropping) == "other"
    for ledger in (1, 2, 3):  # a 600-byte budget: the older ledgers are written back as it goes
        small.ack([Position(ledger, e) for e in range(1, 200, 2)])
    assert small._core._pages.unmarked and lane_takes(small) == "other"
    capped.ack([Position(1, e) for e in range(1, 20, 2)])
    assert lane_takes(capped) == "other"
    store.flush()
    capped.ack_cumulative(Position(1, 20))  # back under the cap: the flag of the last flush still says over
    assert capped.ack_range_count <= 3 and lane_takes(capped) == "other"
    many.ack([Position(1, e) for e in range(2, 2 + 3 * (lane.DELTA_MAX_ACKS + 1), 3)])
    assert lane_takes(many) == "other"
    with store.lock:  # a cursor's own prepare: where the lane says OTHER, the general path's plan
        plan = many._core._prepare_flush()
        assert type(plan) is FlushPlan and [ledger for _, ledger, _ in plan.records] == [1]
        many._core._abort_flush(plan)
        store.flush_list[many._core] = many._core._planner
    huge.ack(Position(1 << 33, 7))
    assert lane_takes(huge) == "other"
    _flush_and_reopen(store_path, store, names)


@pytest.mark.usefixtures("marker_layout")
def test_random_cursors_agree_and_recover(store_path: Path) -> None:
    """Many cursors over several ledgers with random acks, moves and properties, full
    markers due every few flushes (some trimming the log): every take agrees, and a reopen
    recovers every cursor."""
    rng = random.Random(23)
    store = AckStore.open(store_path, sync=False)
    topic = store.topic(T)
    for ledger in range(1, 5):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 5_000)
    topic.add_ledger(5)
    config = CursorConfig(max_unacked_ranges_to_persist=0, full_marker_every=3)
    cursors = [topic.cursor(f"c{i}", config) for i in range(12)]
    for cur in cursors:
        for ledger in rng.sample(range(1, 6), rng.randint(1, 4)):
            cur.ack_entries(ledger, range(rng.randrange(3), 4000, rng.choice([2, 3, 5])))
    store.flush()
    outcomes: dict[str, int] = {}
    for _ in range(40):
        for cur in rng.sample(cursors, 6):
            for _ in range(rng.randint(1, 4)):
                cur.ack(Position(rng.randint(1, 5), rng.randrange(4000, 5000)))
            if rng.random() < 0.1:
                cur.set_property("p", rng.randrange(100))
        for cur in cursors:
            kind = lane_takes(cur)
            outcomes[kind] = outcomes.get(kind, 0) + 1
        stats = store.flush()
        assert stats.cursors <= 6
    assert min(outcomes.get(kind, 0) for kind in ("plan", "other", "idle")) >= 50, outcomes  # each kind, often
    _flush_and_reopen(store_path, store, [cur.name for cur in cursors])


@pytest.mark.usefixtures("marker_layout")
@pytest.mark.parametrize("bounds", [(6, 1.0), (64, 0.125)])
def test_the_delta_bounds_decide_when_a_ledger_gets_a_new_base(store_path: Path, bounds: tuple[int, float]) -> None:
    """``set_delta_bounds`` changes the rule: with 6 acks, the seventh new ack since the
    record is a new base."""
    saved = lane.set_delta_bounds(*bounds)
    try:
        with AckStore.open(store_path, sync=False) as store:
            topic = store.topic(T)
            topic.add_ledger(1)
            cur = topic.cursor("c", ROOMY)
            cur.ack_entries(1, range(1, 1001, 2))
            store.flush()
            kinds = []
            for e in range(1001, 1001 + 2 * 8, 2):
                cur.ack(Position(1, e))
                kinds.append(lane_takes(cur))
                store.flush()
        assert kinds == (["plan"] * 6 + ["other", "plan"] if bounds[0] == 6 else ["plan"] * 8)
    finally:
        lane.set_delta_bounds(*saved)


def test_small_cursors_take_the_state_layout_alike(store_path: Path) -> None:
    """Small cursors (few ranges, a few partial batches and delivery counts, properties)
    are taken whole as state markers, alike: in-order acks with late ones, the mark-delete
    position moving past ledgers (dropped from the index), an idle cursor, a cursor that
    grows past the state bound (the marker layout, then the state layout again once it
    shrinks), one whose properties make the state too large, sequences whose varints in
    the state slots are one to six bytes; every step agreed, and a reopen recovers every
    cursor."""
    rng = random.Random(41)
    size = 2 * lane.STATE_MAX_RUNS + 16  # entries a ledger: one cursor's ranges go past the bound in one
    store = AckStore.open(store_path, sync=False)
    topic = store.topic(T)
    for ledger in range(1, 9):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, size)
    topic.add_ledger(9)
    cursors = [topic.cursor(f"s{i}", ROOMY) for i in range(8)]
    for cur in cursors:
        end_form(cur)  # (a new cursor starts in the small form: these are the lane's, in their parts)
    cursors[3]._core._planner.chain.next_seq = 1 << 40  # a state slot's sequence of six varint bytes
    cursors[4]._core._planner.chain.next_seq = 120  # of one, then two
    nxt = dict.fromkeys(range(8), 0)  # each cursor's next entry in order, over ledgers 1..9
    held: dict[int, list[Position]] = {i: [] for i in range(8)}
    outcomes: dict[str, int] = {}
    for step in range(60):
        for i, cur in enumerate(cursors):
            if i == 7 and step % 5:
                continue  # mostly idle
            positions = [Position(1 + (nxt[i] + k) // size, (nxt[i] + k) % size) for k in range(rng.randint(5, 40))]
            nxt[i] += len(positions)
            late = [p for p in positions if rng.random() < 0.1]
            cur.ack([p for p in positions if p not in late])
            if held[i]:  # the late ones of earlier rounds, a few at a time
                cur.ack(held[i][:3])
                del held[i][:3]
            held[i] += late
            if rng.random() < 0.1:
                cur.record_deliveries([rng.choice(late or positions)])
            if rng.random() < 0.1:
                p = Position(1 + nxt[i] // size, nxt[i] % size)
                cur.ack_batch_index(p, 8, [rng.randrange(8)])
            if rng.random() < 0.1:
                cur.set_property("step", step)
            end_form(cur)  # a read the small form does not serve: the cursor stays in its parts, the lane's
        if step == 20:  # one cursor's ranges past the bound, then filled again
            cursors[1].ack([Position(8, e) for e in range(0, 2 * lane.STATE_MAX_RUNS + 8, 2)])
        if step == 30:
            cursors[1].ack([Position(8, e) for e in range(1, 2 * lane.STATE_MAX_RUNS + 8, 2)])
        if step == 40:
            cursors[2].set_property("big", "x" * lane.STATE_MAX_BYTES)
        if step == 50:
            cursors[2].remove_property("big")
        for cur in cursors:
            kind = lane_takes(cur)
            outcomes[kind] = outcomes.get(kind, 0) + 1
        store.flush()
    assert outcomes.get("plan", 0) >= 350 and outcomes.get("idle", 0) >= 40 and outcomes.get("other", 0) >= 10, outcomes
    for cur in cursors:  # every ledger below the mark-delete went; the state layout holds what is left
        assert min(cur._core._pages.index, default=cur.mark_delete_position[0]) >= cur.mark_delete_position[0]
        assert len({entry.seq for entry in cur._core._pages.index.values()}) <= 1, cur.name  # one state marker
    _flush_and_reopen(store_path, store, [cur.name for cur in cursors])


def test_a_plan_holds_its_changes_as_what_it_took_when_they_are_the_dirty_ledgers(store_path: Path) -> None:
    """What a plan holds of the dirty set it took (pinned while it is written, dirty again
    if it is not) is its index changes when their keys are the dirty ledgers, no set made:
    a marker plan's always, a state plan's when every ledger of the cursor was dirty (the
    steady cursor's). Else a copy of the dirty set: a state plan of two ledgers of which one
    changed. An aborted plan leaves the dirty set as it was, either way."""
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100)
        topic.add_ledger(2)
        steady, pair = topic.cursor("steady", ROOMY), topic.cursor("pair", ROOMY)
        steady.ack([Position(1, e) for e in range(3, 9)])
        pair.ack([Position(1, 5), Position(2, 5)])
        store.flush()
        for cur in (steady, pair):
            end_form(cur)  # (the lane's plans are those of a cursor's parts)
        steady.ack([Position(1, 10)])
        pair.ack([Position(2, 7)])
        for cur, dirty, whole in ((steady, {1}, True), (pair, {2}, False)):
            planner = cur._core._planner
            with cur._core._lock:
                before = (sorted(planner.pages.dirty), planner.chain.next_seq, planner.chain.slot)
                assert before[0] == sorted(dirty)
                plan = lane.take_marker(planner)
                assert isinstance(plan, lane.MarkerPlan) and plan.full  # a state marker
                assert sorted(plan.changes) == ([1] if whole else [1, 2])
                assert (plan.pinned is plan.changes) is whole
                assert sorted(plan.pinned) == sorted(dirty)
                assert planner.pages.pinned is plan.pinned and not planner.pages.dirty
                planner.abort(plan)
                planner.chain.next_seq = before[1]
                assert (sorted(planner.pages.dirty), planner.chain.next_seq, planner.chain.slot) == before
                assert not planner.pages.pinned
        store.flush()  # what the aborted plans took is written by the next flush
    with AckStore.open(store_path, sync=False) as store:
        assert _ranges(store, "steady") == [(Position(1, 3), Position(1, 8)), (Position(1, 10), Position(1, 10))]
        pair_ranges = [(Position(1, 5), Position(1, 5)), (Position(2, 5), Position(2, 5))]
        pair_ranges.append((Position(2, 7), Position(2, 7)))
        assert _ranges(store, "pair") == pair_ranges


@pytest.mark.parametrize("chunk", [1, group_flush.CHUNK], ids=["a cursor a chunk", "one chunk"])
def test_a_cursor_whose_take_raises_is_named_and_nothing_is_lost(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, parts_chains: None
) -> None:
    """The flush's loop stops at the cursor whose planning raised, names it, and every cursor
    keeps what it had, the ones taken before it included, in its chunk or an earlier one."""
    from ackstore import StoreError

    monkeypatch.setattr(group_flush, "CHUNK", chunk)  # one: the failing cursor's chunk is not the first
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cursors = [topic.cursor(name, ROOMY) for name in ("a", "b", "c")]
        for cur in cursors:
            cur.ack_entries(1, range(1, 2001, 2))
        store.flush()
        for i, cur in enumerate(cursors):
            cur.ack(Position(1, 3001 + i))
        cursors[1]._core._state.properties["key-\udcff"] = 1  # msgpack cannot encode it: the take raises
        with pytest.raises(StoreError, match=r"while planning cursor .*/b, nothing was written"):
            store.flush()
        assert all(cur._core._listed and cur._core._pending for cur in cursors)
        del cursors[1]._core._state.properties["key-\udcff"]
        assert store.flush().cursors == 3
        expected = [list(cur.ack_ranges()) for cur in cursors]
    with AckStore.open(store_path, readonly=True) as store:
        topic = store.topic(T)
        assert [list(topic.cursor(name).ack_ranges()) for name in ("a", "b", "c")] == expected


@pytest.mark.parametrize("chunk", [1, group_flush.CHUNK], ids=["a cursor a chunk", "one chunk"])
def test_a_plan_whose_encoding_raises_is_named_and_nothing_is_lost(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, parts_chains: None
) -> None:
    """A flush job's encode stops at the general-path plan whose encoding raised (step 2, outside the
    store lock) and the flush names its cursor, not a neighbour: the marker plans around it
    were encoded when taken; in a chunk of its own, after chunks encoded before it. Every
    cursor keeps what it had."""
    from ackstore import StoreError

    monkeypatch.setattr(group_flush, "CHUNK", chunk)  # one: the failing cursor's chunk is not the first
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 5000)
        topic.add_ledger(2)
        cursors = [topic.cursor(name, ROOMY) for name in ("a", "b", "c", "d")]
        for cur in cursors:
            cur.ack_entries(1, range(1, 2001, 2))
        store.flush()
        for i, cur in enumerate(cursors):  # a and d: marker plans
            cur.ack(Position(1, 3001 + i))
        for cur in cursors[1:3]:  # b and c: a ledger without a record, the general path
            cur.ack(Position(2, 7))
        cursors[2]._core._state.properties["key-\udcff"] = 1  # msgpack cannot encode it
        with pytest.raises(StoreError, match=r"while encoding cursor .*/c, nothing was written"):
            store.flush()
        assert all(cur._core._listed and cur._core._pending for cur in cursors)
        del cursors[2]._core._state.properties["key-\udcff"]
        stats = store.flush()
        assert stats.cursors == 4 and stats.ledger_records == 2
        expected = [list(cur.ack_ranges()) for cur in cursors]
    with AckStore.open(store_path, readonly=True) as store:
        topic = store.topic(T)
        assert [list(topic.cursor(name).ack_ranges()) for name in ("a", "b", "c", "d")] == expected


def test_an_aborted_state_plan_gives_back_the_dropped_ledgers_it_took(store_path: Path) -> None:
    """A small cursor whose reset dropped both its ledgers, one of them acked again since:
    its state plan names both as dropped and the acked one with its state; an abort gives
    back every dropped ledger it took (the one made again among them), so the next take
    makes the same plan (``lane_takes`` takes, aborts and takes again)."""
    store, topic = _sealed_and_open(store_path)
    cur = topic.cursor("c")
    cur.ack([Position(1, 3), Position(2, 3)])
    store.flush()
    end_form(cur)  # (the lane's plans are those of a cursor's parts)
    cur.read_path.reset_to(Position(1, 0))  # both ledgers' acks gone: both dropped since the marker
    cur.ack(Position(1, 5))  # ledger 1 again
    assert sorted(cur._core._planner.pages.vanished) == [1, 2]
    assert lane_takes(cur) == "plan"
    assert sorted(cur._core._planner.pages.vanished) == [1, 2]
    _flush_and_reopen(store_path, store, ["c"])


def test_take_all_refuses_lists_of_unequal_length(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, 3)])
        with pytest.raises(ValueError, match=r"^take_all visits as many planners as cursors$"):
            lane.take_all([cur._core], [], [], [], [], [], [])


def _in_slots(store: AckStore, cur) -> bool:  # type: ignore[no-untyped-def]
    """Whether the cursor's newest flush wrote a state marker (into a state slot: its log
    key holds nothing)."""
    env, key = store._storage, log_key(cur.cursor_id, cur.stats().last_marker_seq)
    return env.read(lambda txn: txn.get(key, db=env.log_db)) is None


def test_a_state_of_exactly_the_state_bound_in_bytes_is_a_state_marker(store_path: Path) -> None:
    """A small cursor's whole state goes into a state slot while its value is at most
    STATE_MAX_BYTES: exactly that many (its property padded to it) is a state marker, one
    byte more the marker layout, and either reads back whole. A state at the bound, with the
    room a slot's first value reserves, sits in its leaf page: no overflow page of its own."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", ROOMY)
        cur.ack([Position(1, e) for e in (3, 5, 7)])
        core = cur._core
        with store.lock:
            core._parts()

        def size(pad: int) -> int:
            props = {"p": "x" * pad}
            value = lane.encode_state_marker(cur.cursor_id, core._state.md, props, sorted(core._pages.loaded.items()))
            return len(value)

        pad = lane.STATE_MAX_BYTES - size(0)
        while size(pad) > lane.STATE_MAX_BYTES:  # the str's own header grows with it
            pad -= 1
        assert size(pad) == lane.STATE_MAX_BYTES and size(pad + 1) == lane.STATE_MAX_BYTES + 1
        cur.set_property("p", "x" * pad)
        store.flush()
        assert _in_slots(store, cur)
        log = store.storage.read(lambda txn: txn.stat(store.storage.log_db))
        assert log["overflow_pages"] == 0 and log["leaf_pages"] >= 1
        cur.set_property("p", "x" * (pad + 1))
        store.flush()
        assert not _in_slots(store, cur)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert cur.properties == {"p": "x" * (pad + 1)} and [p.entry for p, _ in cur.ack_ranges()] == [3, 5, 7]


@pytest.mark.parametrize("batches", [lane.STATE_MAX_EXTRAS, lane.STATE_MAX_EXTRAS + 1])
def test_partial_batches_alone_count_toward_the_state_layouts_bound(store_path: Path, batches: int) -> None:
    """A cursor whose only extras are partial batches (no delivery counts) takes the state
    layout with STATE_MAX_EXTRAS of them, and the marker layout with one more."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", ROOMY)
        for e in range(1, 2 * batches + 1, 2):
            cur.ack_batch_index(Position(1, e), 2, [0])
        store.flush()
        assert _in_slots(store, cur) is (batches <= lane.STATE_MAX_EXTRAS)
    with AckStore.open(store_path) as store:
        got = store.topic(T).cursor("c").partial_batches()
        assert got == {Position(1, e): (2, frozenset({0})) for e in range(1, 2 * batches + 1, 2)}


@pytest.mark.usefixtures("marker_layout")
def test_each_flush_counts_exactly_the_records_its_trims_deleted(store_path: Path) -> None:
    """``records_trimmed`` is what left the log: the cursor's records before a flush, plus
    what it wrote, less it, are its records after, for trims by key and by a scan of the
    cursor's keys (the first trim after an open knows no floor)."""
    trimmed = 0
    for _ in range(2):
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            if not topic.ledgers():
                for ledger in (1, 2):
                    topic.add_ledger(ledger)
                    topic.close_ledger(ledger, 100_000)
            cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0, full_marker_every=2))
            for r in range(12):
                before = cur.log_usage().records
                cur.ack_entries(1 + r % 2, range(1000 * r + 1, 1000 * r + 400, 2))  # a new base each time
                stats = store.flush()
                assert cur.log_usage().records == before + stats.ledger_records + stats.markers - stats.records_trimmed
                trimmed += stats.records_trimmed
    assert trimmed > 0
