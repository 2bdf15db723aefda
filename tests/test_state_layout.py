"""The state layout (format 10): a small cursor's whole state in one marker.

Its codec's twins write the same bytes and refuse the same inputs; a small cursor's flush
writes one state marker and keeps the previous one to fall back to; a cursor moves between
the layouts as it grows and shrinks; every open, swap-in, compaction and damage case
reads it back exactly.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest
from pyroaring import BitMap

from ackstore import AckStore, Cursor, CursorConfig, Position, check
from ackstore.cursor.lane import STATE_MAX_RUNS
from ackstore.errors import CorruptRecordError
from ackstore.storage import codecs, pure_codecs
from ackstore.storage.records import (
    FORMAT_VERSION,
    RECORD_LEDGER,
    RECORD_MARKER,
    decode_marker,
    encode_state_marker,
)

from . import rawlog
from .forms import end_form

T = "persistent://t/ns/state"
TWINS = [pure_codecs] + ([codecs.native] if codecs.native is not None else [])


def _random_state(rng: random.Random) -> tuple[int, int, list, bytes]:  # type: ignore[type-arg]
    md_l, md_e = rng.randrange(0, 1 << rng.choice((3, 20, 40))), rng.randrange(-1, 300)
    ledgers, ledger = [], md_l
    for i in range(rng.randrange(0, 4)):
        ledger += rng.randrange(0 if i == 0 else 1, 1 << rng.choice((2, 10, 33)))
        start = md_e + 1 if ledger == md_l else 0
        bm = BitMap(rng.sample(range(start, start + 400), rng.randrange(0, 40)))
        if rng.random() < 0.1:
            bm.add_range(start + 1000, start + 70_000)  # runs crossing roaring containers
        free = [e for e in range(start, start + 500) if e not in bm]
        batches = {}
        for e in rng.sample(free, rng.randrange(0, 3)):
            size = rng.randrange(1, 70)
            batches[e] = (size, rng.getrandbits(size))
        counts = {
            e: rng.randrange(1, 1 << 32) for e in rng.sample([e for e in free if e not in batches], rng.randrange(0, 3))
        }
        ledgers.append((ledger, bm, batches, counts))
    props = rng.choice([b"", b"\x81\xa1k\x07", b"\x82\xa1a\x01\xa1b\xa3xyz"])
    return md_l, md_e, ledgers, props


def test_the_twins_write_the_same_bytes_and_read_them_back() -> None:
    rng = random.Random(11)
    for _ in range(1500):
        md_l, md_e, ledgers, props = _random_state(rng)
        records = [twin.state_marker(FORMAT_VERSION, 42, md_l, md_e, ledgers, props) for twin in TWINS]
        assert all(r == records[0] for r in records)
        cid, ml, me, items, end = pure_codecs.state_fields(records[0][7:])
        assert (cid, ml, me, records[0][7 + end :]) == (42, md_l, md_e, props)
        for (ledger, bm, batches, counts), (ledger2, runs, batches2, counts2) in zip(ledgers, items, strict=True):
            back = BitMap()
            for i in range(0, len(runs), 2):
                back.add_range(runs[i], runs[i + 1] + 1)
            assert (ledger2, back, batches2, counts2) == (ledger, bm, batches, counts)


def _runs_optimized(values: list[int] | range) -> BitMap:
    bm = BitMap(values)
    bm.run_optimize()
    return bm


@pytest.mark.parametrize(
    "bitmap",
    [
        BitMap([65535, 65536]),  # two array containers whose values make one run across the boundary
        BitMap([65534, 65536, 65537, 131071, 131072]),
        _runs_optimized(range(65500, 65600)),  # run containers, one run across the boundary
        _runs_optimized([*range(10, 20), *range(21, 30), *range(65536, 65540), 70000]),
        _runs_optimized([*range(0, 4000), *range(4001, 4090)]),  # a run container of most of its card
    ],
    ids=["arrays-adjacent", "arrays-gaps", "runs-across", "runs-and-arrays", "runs-large"],
)
def test_the_twins_write_the_same_runs_from_every_container_kind(bitmap: BitMap) -> None:
    """The compiled encoder reads a bitmap's runs straight from its serialization: array and
    run containers, runs that cross a container boundary, as the pure twin does."""
    records = [twin.state_marker(FORMAT_VERSION, 3, 0, -1, [(0, bitmap, {}, {})], b"") for twin in TWINS]
    assert all(r == records[0] for r in records)
    _, _, _, items, _ = pure_codecs.state_fields(records[0][7:])
    back = BitMap()
    runs = items[0][1]
    for i in range(0, len(runs), 2):
        back.add_range(runs[i], runs[i + 1] + 1)
    assert back == bitmap


@pytest.mark.parametrize(
    "args,message",
    [
        ((-1, 0, 0, []), "cursor_id=-1 is outside"),
        ((1, -3, 0, []), "md_l=-3 is outside"),
        ((1, 0, -2, []), "md_e=-2 is outside"),
        ((1, 0, 1 << 32, []), "md_e=4294967296 is outside"),
        ((1, 5, 0, [(4, BitMap([1]), {}, {})]), "ledger=4 is outside 5.."),
        ((1, 5, 0, [(6, BitMap([1]), {}, {}), (6, BitMap([1]), {}, {})]), "ledger=6 is outside 7.."),
        ((1, 5, 9, [(5, BitMap([9]), {}, {})]), "ledger 5 holds entry 9, at or below the mark-delete"),
        ((1, 5, 9, [(5, BitMap(), {3: (4, 1)}, {})]), "partial batch at entry 3 of size 4 is outside"),
        ((1, 5, 0, [(5, BitMap(), {3: (0, 0)}, {})]), "partial batch at entry 3 of size 0 is outside"),
        ((1, 5, 0, [(5, BitMap(), {}, {3: 0})]), "delivery count 0 of entry 3 is outside"),
        ((1, 5, 0, [(5, BitMap(), {}, {3: 1 << 32})]), "delivery count 4294967296 of entry 3 is outside"),
    ],
)
def test_the_twins_refuse_the_same_inputs(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    for twin in TWINS:
        with pytest.raises(ValueError, match=message):
            twin.state_marker(FORMAT_VERSION, *args, b"")


def _outcome(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return "ok", fn(*args)
    except ValueError as exc:
        return "ValueError", str(exc)


def test_the_twins_read_every_body_alike() -> None:
    """The decoders return the same fields for every body, and the same ValueError for
    every cut and every flipped byte (checksum or not)."""
    rng = random.Random(8)
    for _ in range(200):
        md_l, md_e, ledgers, props = _random_state(rng)
        body = pure_codecs.state_marker(FORMAT_VERSION, 7, md_l, md_e, ledgers, props)[7:]
        cases = [body, *(body[:cut] for cut in range(len(body)))]
        for _ in range(20):
            flipped = bytearray(body)
            flipped[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
        cases.append(body[:2] + b"\xff" * 9 + b"\x7f" + body[2:])  # a varint over 64 bits
        for case in cases:
            outcomes = [_outcome(twin.state_fields, case) for twin in TWINS]
            assert all(o == outcomes[0] for o in outcomes), (case, outcomes)


def test_a_state_marker_cut_inside_each_field_says_which() -> None:
    """A state marker with two ledgers, runs, a partial batch and a delivery count, cut
    after each byte: the error names the field the cut fell in, for every field of the
    layout, in the twins alike."""
    ledgers = [(3, BitMap([5, 6, 9]), {12: (4, 0b0101)}, {14: 2}), (8, BitMap([1]), {}, {})]
    body = pure_codecs.state_marker(FORMAT_VERSION, 7, 3, 2, ledgers, b"")[7:]
    said = set()
    for cut in range(2, len(body)):
        outcomes = [_outcome(twin.state_fields, body[:cut]) for twin in TWINS]
        assert all(o == outcomes[0] for o in outcomes), (cut, outcomes)
        said.add(outcomes[0][1])
    fields = [
        "cursor id", "mark-delete ledger", "mark-delete entry", "ledger count", "ledger id", "run count",
        "run start", "run length", "batch count", "batch entry", "batch size", "count count", "counted entry",
        "delivery count",
    ]  # fmt: skip
    assert {f"a state marker ends inside its {field}" for field in fields} <= said, said


def test_a_state_markers_count_past_its_bound_and_bytes_after_its_ledgers_are_named() -> None:
    """The highest delivery count a state marker holds is 2**32-1 (stored less one); one
    more is refused, as are bytes after the last ledger of a marker without properties,
    with the words of each, in the twins alike."""
    top = (1 << 32) - 1
    body = pure_codecs.state_marker(FORMAT_VERSION, 7, 3, 2, [(3, BitMap([5]), {}, {14: top})], b"")[7:]
    assert pure_codecs.state_fields(body)[3][0][3] == {14: top}
    stored = pure_codecs.varint(top - 1)
    assert body.endswith(stored)
    over = body[: -len(stored)] + pure_codecs.varint(top)
    for case, said in [
        (over, f"a state marker's delivery count {top} is over {top - 1}"),
        (body + b"\x00\x01\x02", "a state marker has 3 bytes after its ledgers"),
    ]:
        outcomes = [_outcome(twin.state_fields, case) for twin in TWINS]
        assert outcomes == [("ValueError", said)] * len(TWINS)


def test_every_cut_or_flipped_state_marker_is_a_corrupt_record() -> None:
    """A damaged state marker is CorruptRecordError (never another exception), whether its
    checksum or its layout finds it: every cut, and every flipped byte of the body decoded
    as if the checksum had matched."""
    rng = random.Random(5)
    for _ in range(60):
        md_l, md_e, ledgers, _ = _random_state(rng)
        value = encode_state_marker(9, (md_l, md_e), {}, [(x[0], _acks(x)) for x in ledgers])
        for cut in range(len(value)):
            with pytest.raises(CorruptRecordError):
                decode_marker(value[:cut], 3)
        body = value[7:]
        for i in range(1, len(body)):
            flipped = bytearray(body)
            flipped[i] ^= 1 << rng.randrange(8)
            with contextlib.suppress(ValueError):  # anything else fails the test
                pure_codecs.state_fields(bytes(flipped))


def _acks(item):  # type: ignore[no-untyped-def]
    from ackstore.ledger_acks import LedgerAcks

    _, bm, batches, counts = item
    return LedgerAcks(BitMap(bm), dict(batches), dict(counts))


def _small(store: AckStore, name: str = "c"):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    if not topic.ledgers():
        for ledger in (1, 2):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, entries=4000)
        topic.add_ledger(3)
    return topic.cursor(name)


def _newest_slot(cur: Cursor) -> bytes:
    """The key of the state slot holding ``cur``'s newest state (the small form's, once it took one)."""
    from ackstore.storage.records import slot_key

    core = cur._core
    return slot_key(core.cursor_id, core._planner.chain.slot if core.small is None else core.small.slot)


def _state(cur):  # type: ignore[no-untyped-def]
    return cur.snapshot()


def test_a_small_cursor_keeps_one_state_marker_and_the_one_before(store_path: Path) -> None:
    states = []
    with AckStore.open(store_path) as store:
        cur = _small(store)
        for i in range(30):
            cur.ack([Position(1, 3 * i), Position(1, 3 * i + 1), Position(2, i)])
            if i % 7 == 0:
                cur.ack_batch_index(Position(3, i), 8, [1, 2])
                cur.set_property("round", i)
            stats = store.flush()
            assert (stats.ledger_records, stats.markers, stats.full_markers) == (0, 1, 1)
            states.append(_state(cur))
        cur._check()
    records = rawlog.records(store_path)
    assert [t for _, t in records] == [RECORD_MARKER, RECORD_MARKER]  # the newest and the one before
    for load in ("budget", "lazy"):
        with AckStore.open(store_path, load=load, readonly=True) as store:
            cur = store.topic(T).cursor("c")
            assert _state(cur) == states[-1], load
    # the newest damaged: the one before is recovered, exactly, and said so
    rawlog.damage(store_path, records[-1][0])
    with AckStore.open(store_path, readonly=True) as store:
        cur = store.topic(T).cursor("c")
        assert _state(cur) == states[-2]
        assert cur.stats().recovery.markers_skipped == 1


def test_a_cursor_moves_between_the_layouts_as_it_grows_and_shrinks(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(1, e) for e in range(2, 2 * STATE_MAX_RUNS + 4, 2)])  # one range more than the bound
        stats = store.flush()
        assert stats.ledger_records == 1  # the marker layout: a ledger record and a marker
        big = _state(cur)
        cur.ack([Position(1, e) for e in range(3, 2 * STATE_MAX_RUNS + 2, 2)])  # the holes filled: one range
        assert cur.ack_range_count == 1
        assert store.flush().ledger_records == 0  # the state layout again
        small = _state(cur)
        store.flush()
        cur.ack([Position(2, 5)])
        store.flush()
        cur._check()
    assert [t for _, t in rawlog.records(store_path)] == [RECORD_MARKER, RECORD_MARKER]  # the marker layout's trimmed
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert _state(cur).ranges == [*small.ranges, (2, [(5, 5)])] and big != small


def test_a_swapped_out_ledger_is_read_from_the_state_marker(store_path: Path) -> None:
    """Under a tiny budget a state cursor's ledgers are swapped out; each is read back from
    the state marker that holds it, and the next flush (not every ledger in memory) takes
    the marker layout, with the state marker as the untouched ledgers' record."""
    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(ledger, e) for ledger in (1, 2, 3) for e in (4, 6, 8)])
        cur.ack_batch_index(Position(1, 9), 4, [0])
        store.flush()
        whole = _state(cur)
    tiny = CursorConfig(max_individual_ack_cache_bytes=1)
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c", tiny)
        end_form(cur)  # (its parts: they recover the state marker under the tiny budget)
        assert _state(cur) == whole and cur._core._pages.cache.swapped
        cur.ack([Position(3, 10)])
        assert store.flush().ledger_records >= 1
        cur._check()
        after = _state(cur)
    kinds = [t for _, t in rawlog.records(store_path)]
    assert RECORD_LEDGER in kinds
    assert check(store_path) == []
    with AckStore.open(store_path, load="lazy", readonly=True) as store:
        assert _state(store.topic(T).cursor("c", tiny)) == after


def test_a_lazy_open_leaves_a_small_cursors_ledgers_in_its_state_marker(store_path: Path) -> None:
    """A lazy open on the parts (here of a cursor opened to keep history, whose state is in a
    slot: not its small form's) decodes the state marker it reads (so checks every ledger in
    it) and holds none of its ledgers that can wait: each is read from the marker at its first use.
    An ack in another ledger while they wait takes the marker layout, naming the state
    marker, in its slot, as their record: the slot keeps it while it is named, and every
    open reads the cursor exactly; once every ledger is in memory again the state layout
    comes back."""
    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(ledger, e) for ledger in (1, 2) for e in (4, 6, 8)])
        cur.ack_batch_index(Position(2, 9), 4, [0])
        store.flush()
        whole = _state(cur)
        named = cur.stats().last_marker_seq
    with AckStore.open(store_path) as store:  # lazy, the default
        cur = store.topic(T).cursor("c", CursorConfig(history_seconds=3600))  # (its slot is not its form)
        cache = cur._core._pages.cache
        assert (list(cache.loaded), cache.swapped) == ([], {1, 2})
        assert _state(cur) == whole  # read from the marker, not held
        assert list(cache.loaded) == []
        cur.ack([Position(3, 1)])  # a ledger of its own while 1 and 2 wait in the marker
        assert store.flush().ledger_records == 1  # the marker layout: ledger 3's record and a marker
        assert cache.swapped == {1, 2}
        cur._check()
        mixed = _state(cur)
    assert named in rawlog.slots(store_path).values()
    assert check(store_path) == []
    for load in ("lazy", "budget"):
        with AckStore.open(store_path, load=load, readonly=True) as store:
            assert _state(store.topic(T).cursor("c")) == mixed, load
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        cur.ack([Position(ledger, 9) for ledger in (1, 2, 3)])  # every ledger in memory again
        assert store.flush().ledger_records == 0  # the state layout
        cur._check()
        small = _state(cur)
    assert check(store_path) == []
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == small


def test_compaction_writes_a_small_cursor_as_one_state_marker(store_path: Path, marker_layout: None) -> None:
    """A log of the marker layout (records, deltas, garbage) compacts to one state marker
    once the state layout is allowed again, and reads back the same."""
    from ackstore.cursor.lane import set_state_bound

    with AckStore.open(store_path) as store:
        cur = _small(store)
        for i in range(10):
            cur.ack([Position(1, 2 * i), Position(3, i)])
            store.flush()
        before = _state(cur)
    assert len(rawlog.records(store_path)) > 2
    saved = set_state_bound(STATE_MAX_RUNS)
    try:
        with AckStore.open(store_path) as store:
            store.topic(T).cursor("c")
            store.compact(verify=True)
    finally:
        set_state_bound(saved)
    assert [t for _, t in rawlog.records(store_path)] == [RECORD_MARKER]
    with AckStore.open(store_path) as store:
        assert _state(store.topic(T).cursor("c")) == before
    assert check(store_path) == []


@pytest.mark.parametrize("layout", ["state", "marker"])
def test_compacting_again_changes_nothing(store_path: Path, layout: str, request: pytest.FixtureRequest) -> None:
    """A compacted log compacts to the same bytes: small cursors (one state marker, or in the
    marker layout a record a ledger and a full marker), a large one and one with a ledger
    swapped out under a small budget (its record copied): each cursor's records and bytes
    after each compaction equal the first's, and its state is the same."""
    if layout == "marker":
        request.getfixturevalue("marker_layout")
    tiny = CursorConfig(max_individual_ack_cache_bytes=1)
    with AckStore.open(store_path) as store:
        small = _small(store, "small")
        small.ack([Position(1, 3), Position(3, 9)])
        small.set_property("k", "v")
        large = _small(store, "large")
        large.ack([Position(ledger, e) for ledger in (2, 3) for e in range(1000, 2400, 3)])
        swapped = _small(store, "swapped")
        swapped.ack([Position(ledger, e) for ledger in (2, 3) for e in range(1, 300, 2)])
        for i in range(5):
            for cur in (small, large, swapped):
                cur.ack([Position(3, 500 + i)])
            store.flush()
    runs = []
    for _ in range(3):
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            cursors = {
                name: topic.cursor(name, tiny if name == "swapped" else None) for name in ("small", "large", "swapped")
            }
            stats = store.compact()
            states = {name: cur.snapshot() for name, cur in cursors.items()}
        runs.append(({(s.cursor, s.records_after, s.bytes_after) for s in stats}, states))
    assert runs[0] == runs[1] == runs[2]
    assert check(store_path) == []


def test_a_small_cursor_with_large_properties_takes_the_marker_layout(store_path: Path) -> None:
    """A state marker is at most STATE_MAX_BYTES: a small cursor whose properties are larger
    is written in the marker layout (a ledger record and a marker), and back in the state
    layout once they shrink; each flush reads back the same."""
    from ackstore.cursor.lane import STATE_MAX_BYTES

    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(3, 4), Position(3, 9)])
        cur.set_property("big", "x" * STATE_MAX_BYTES)
        assert store.flush().ledger_records == 1
        big = _state(cur)
        cur.remove_property("big")
        assert store.flush().ledger_records == 0
        small = _state(cur)
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == small
    assert big.properties == {"big": "x" * STATE_MAX_BYTES} and small.properties == {}


def test_the_steady_workload_writes_a_small_value_a_cursor(store_path: Path) -> None:
    """The steady workload (benchmarks/steady.py: in-order acks, the mark-delete moving every
    round, one or two acks made late) at 100 cursors, k = 50: every flush writes one state
    marker a cursor and no ledger record, at most 64 logical bytes a cursor (key and value,
    the value padded to a multiple of 16 bytes; without the padding under Pulsar's
    PositionInfo of the same state, 42-46 B, plus 16 bytes: the slot's 10-byte key and, of
    its 12-byte head, what the state marker saves on it), and each cursor's log holds its
    newest state and the one before, nothing else."""
    from ackstore.storage.records import slot_room
    from benchmarks.steady import LEDGER, Steady, position_info_bytes

    state = Steady(100, 50, seed=3)
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(LEDGER)
        cursors = [topic.cursor(f"s{c}", CursorConfig(max_unacked_ranges_to_persist=0)) for c in range(100)]
        for _ in range(30):
            for cur, batch in zip(cursors, state.step(), strict=True):
                cur.ack_entries(LEDGER, batch)
            stats = store.flush()
            assert (stats.cursors, stats.ledger_records, stats.full_markers) == (100, 0, 100)
            assert stats.bytes_written <= 64 * 100, stats.bytes_written
        info = sum(position_info_bytes((LEDGER, state.md[c]), state.ranges(c)) for c in range(100)) / 100
        keys, db = [_newest_slot(cur) for cur in cursors], store.storage.log_db
        padding = store.storage.read(lambda txn: sum(slot_room(k, txn.get(k, db=db)) for k in keys))
        assert (stats.bytes_written - padding) / 100 - 16 <= info, (stats.bytes_written, padding, info)
        ids = [cur.cursor_id for cur in cursors]
    for cid in ids[:10]:
        assert [t for _, t in rawlog.records(store_path, cid)] == [RECORD_MARKER, RECORD_MARKER]


def test_a_small_cursors_flush_names_no_key_to_trim(store_path: Path) -> None:
    """Once a trim has run, the marker chain knows the log's keys hold nothing of the cursor
    below a sequence (its floor); a small cursor's state goes into a slot and the one before
    is in the other, so from its second trim on its flush names no key to delete (the floor
    is past its newest state): through a compaction (a fresh log whose state is in a slot)
    and a reopen (the floor not known until the first trim); its log is its two slots."""

    def flush_a_few(store: AckStore, cur_name: str, start: int) -> list[int]:
        cur = store.topic(T).cursor(cur_name)
        floors = []
        for e in range(start, start + 6):
            cur.ack(Position(1, e))
            end_form(cur)  # read through its parts each round: out of the small form, its parts' plans checked
            store.flush()
            floors.append(cur._core._planner.chain.floor)
        chain = cur._core._planner.chain
        assert chain.floor == chain.full_seq + 1, floors
        cur.ack(Position(1, start + 7))
        with store.lock:
            plan = cur._core._prepare_flush()
            assert plan is not None and plan.trim_keys == ()
            cur._core._abort_flush(plan)
            store.flush_list[cur._core] = cur._core._planner
        store.flush()
        return floors

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cid = cur.cursor_id
        floors = flush_a_few(store, "c", 0)
        assert floors[:2] == [1, 2]  # a new cursor's log holds nothing: its states, in slots, leave none
    assert _slotted(store_path, cid) == ({0: 7, 1: 5}, 0)  # (6: the plan not written)
    with AckStore.open(store_path) as store:
        reopened = store.topic(T).cursor("c")
        end_form(reopened)  # out of the small form it opened into: its parts recovered
        assert reopened._core._planner.chain.floor == -1  # not known after a reopen
        flush_a_few(store, "c", 10)
        store.compact()
        chain = store.topic(T).cursor("c")._core._planner.chain
        assert chain.floor == chain.full_seq  # the compacted log starts at its one state marker
        flush_a_few(store, "c", 20)
        expected = list(store.topic(T).cursor("c").ack_ranges())
    slots, logged = _slotted(store_path, cid)
    assert len(slots) == 2 and logged == 0
    with AckStore.open(store_path, readonly=True) as store:
        assert list(store.topic(T).cursor("c").ack_ranges()) == expected


def test_a_trim_by_key_deletes_what_a_scan_deletes() -> None:
    """The keys ``lane.trims`` names when the chain knows its floor delete what a scan of
    the cursor's keys below the bound deletes, and none of its neighbours', for random
    logs, bounds, sequences to keep, and floors with what the chain knows it kept below
    them (every record under the floor, and some sequences the log no longer holds)."""
    import tempfile
    from types import SimpleNamespace

    import lmdb

    from ackstore.cursor.lane import EXACT_TRIM, trims
    from ackstore.storage.log import trim_records
    from ackstore.storage.records import log_key

    rng = random.Random(17)
    by_key = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = lmdb.open(tmp, map_size=1 << 24)
        for _ in range(300):
            seqs = sorted(rng.sample(range(40), rng.randint(0, 12)))
            below = rng.randint(0, 42)
            keep = frozenset(rng.sample(range(42), rng.randint(0, 4)))
            floor = rng.randint(max(0, below - EXACT_TRIM), below) if rng.random() < 0.7 else -1
            under = {s for s in seqs if s < floor} | set(rng.sample(range(max(floor, 0)), min(max(floor, 0), 2)))
            kept = tuple(sorted(under))  # what the log holds under the floor, and maybe more
            plan = SimpleNamespace(cursor_id=5, trim_keys=None)
            chain = SimpleNamespace(full_seq=below, floor=floor, kept=kept)
            trims(plan, chain, keep)  # type: ignore[arg-type]
            assert plan.gc_below == below and plan.gc_live is keep
            results = []
            for keys in (plan.trim_keys, None):
                with env.begin(write=True) as txn:
                    txn.drop(env.open_db(), delete=False)
                    for cid in (4, 5, 6):
                        for s in seqs:
                            txn.put(log_key(cid, s), b"x")
                    c = txn.cursor()
                    if keys is None:
                        n = trim_records(c, 5, below, keep)
                    else:
                        n = sum(bool(c.set_key(k) and c.delete()) for k in keys)
                    results.append((n, [bytes(k) for k, _ in txn.cursor()]))
            by_key += plan.trim_keys is not None
            assert results[0] == results[1], (seqs, below, keep, floor, kept)
            assert results[0][0] == len([s for s in seqs if s < below and s not in keep])
        env.close()
    assert by_key >= 80  # a third of the cases, at least, by key


def test_a_cursor_of_the_marker_layout_trims_by_key_keeping_its_ledgers_record(
    store_path: Path, parts_chains: None
) -> None:
    """A cursor of ~2,000 ranges acking one entry a flush writes a full marker each flush
    (it repeats few acks) and trims every few: the first trim scans (after an open; a new
    cursor's log held nothing below 0, which its chain knows), and tells the chain its
    floor and the one record it kept under it (the ledger's); every
    trim after it whose bound is at most EXACT_TRIM past the floor names its keys (the
    markers since the last trim), keeps the record, and leaves the log's keys holding
    nothing under the floor but it. A reopen recovers it."""
    from ackstore.cursor.lane import EXACT_TRIM
    from ackstore.storage.records import split_log_key

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
        cur.ack_entries(1, range(1, 4001, 2))
        store.flush()
        record = cur._core._planner.pages.index[1].seq
        scans, by_key = 0, 0
        for e in range(4001, 4061, 2):
            cur.ack(Position(1, e))
            with store.lock:
                plan = cur._core._prepare_flush()
                assert plan is not None
                if plan.gc_below >= 0:  # a trim: by key exactly when the chain knows enough
                    floor = cur._core._planner.chain.floor
                    assert (plan.trim_keys is not None) == (floor >= 0 and plan.gc_below - floor <= EXACT_TRIM)
                    scans += plan.trim_keys is None
                    by_key += plan.trim_keys is not None
                cur._core._abort_flush(plan)
                store.flush_list[cur._core] = cur._core._planner
            store.flush()
            chain = cur._core._planner.chain
            seqs = store.storage.read(
                lambda txn: [split_log_key(bytes(k))[1] for k, _ in txn.cursor(db=store.storage.log_db)]
            )
            assert record in seqs and cur._core._planner.pages.index[1].seq == record  # no new record: deltas of it
            if chain.floor > record:
                assert chain.kept == (record,), (chain.floor, chain.kept)
                assert [s for s in seqs if s < chain.floor] == [record], (seqs, chain.floor)
            elif chain.floor >= 0:  # a new cursor's log held nothing: no trim yet, nothing under 0
                assert chain.kept == () and chain.floor == 0, (chain.floor, chain.kept)
        assert scans <= 3 and by_key >= 3, (scans, by_key)
        expected = list(cur.ack_ranges())
    with AckStore.open(store_path, readonly=True) as store:
        assert list(store.topic(T).cursor("c").ack_ranges()) == expected


def _slotted(path: Path, cid: int = 0) -> tuple[dict[int, int], int]:
    """``({slot: seq}, records under log keys)`` of a cursor."""
    slots = rawlog.slots(path, cid)
    return slots, len(rawlog.records(path, cid)) - len(slots)


def test_a_small_cursors_states_alternate_between_its_two_slots(store_path: Path) -> None:
    """A small cursor that keeps no history writes each state into the slot its newest state
    is not in, across reopens: its log keys hold nothing, its two slots its newest two states."""
    newest_slots = []
    for i in range(5):
        with AckStore.open(store_path) as store:
            cur = _small(store)
            cur.ack([Position(1, 2 * i)])
            store.flush()
            seq = cur.stats().last_marker_seq
        slots, logged = _slotted(store_path)
        assert logged == 0
        assert sorted(slots.values()) == ([seq - 1, seq] if i else [seq])
        newest_slots.append(next(s for s, q in slots.items() if q == seq))
    assert newest_slots == [0, 1, 0, 1, 0]


def test_a_cursor_back_in_the_state_layout_keeps_its_newest_slots_state(store_path: Path) -> None:
    """A small cursor's three states leave slot 0 holding the newest (seq 2), slot 1 the one
    before; it grows into the marker layout (a ledger record and a full marker under log
    keys: its one ledger changed) and reopens from that marker; when it shrinks again, its
    next state goes into slot 1, the one the newest slot state is not in, and the marker
    before it stays to fall back to. Slot 0's state, older than that marker, is trimmed with
    the other records the new state supersedes."""
    logged = -1
    for round_ in range(3):
        with AckStore.open(store_path) as store:
            topic = store.topic(T)
            if round_ == 0:
                topic.add_ledger(1)
                cur = topic.cursor("c")
                for e in (3, 5, 7):
                    cur.ack(Position(1, e))
                    store.flush()
            elif round_ == 1:
                cur = topic.cursor("c")
                cur.ack([Position(1, e) for e in range(10, 2 * STATE_MAX_RUNS + 20, 2)])  # past the state bound
                store.flush()
                logged = cur.stats().last_marker_seq
            else:
                cur = topic.cursor("c")
                assert cur.stats().recovery.marker_seq == logged > 2
                cur.ack_cumulative(Position(1, 2 * STATE_MAX_RUNS + 100))
                cur.ack(Position(1, 2 * STATE_MAX_RUNS + 102))
                store.flush()
                assert cur.stats().last_marker_seq == logged + 1
        if round_ == 0:
            assert rawlog.slots(store_path) == {0: 2, 1: 1}
    assert rawlog.slots(store_path) == {1: logged + 1}
    assert rawlog.markers(store_path) == [logged, logged + 1]


def test_a_state_in_a_slot_whose_sequence_is_damaged_is_skipped_and_overwritten(store_path: Path) -> None:
    """The sequence a slot holds is checked (with its key): one flipped bit there and the
    state is skipped, said so, and reported by check; the other slot's state is recovered,
    and the next flush writes over the damaged slot, keeping the good one to fall back to."""
    import lmdb

    from ackstore.storage.records import slot_key

    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(1, 5)])
        store.flush()
        before = _state(cur)
        cur.ack([Position(1, 9)])
        store.flush()
    slots, _ = _slotted(store_path)
    newest = max(slots, key=slots.__getitem__)
    env = lmdb.open(str(store_path), max_dbs=8)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            raw = bytearray(txn.get(slot_key(0, newest), db=db))
            raw[0] ^= 0x01  # the sequence's low bit (its varint's first byte)
            txn.put(slot_key(0, newest), bytes(raw), db=db)
    finally:
        env.close()
    assert [f.kind for f in check(store_path)] == ["corrupt-record"]
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        assert _state(cur) == before
        assert cur.stats().recovery.markers_skipped == 1
        assert f"state slot {newest} is damaged" in cur.stats().recovery.skipped_reasons[0]
        cur.ack([Position(1, 20)])
        store.flush()
        after = _state(cur)
    slots_after, _ = _slotted(store_path)
    assert slots_after[1 - newest] == slots[1 - newest]  # the recovered state, kept
    assert slots_after[newest] > slots[1 - newest]
    assert check(store_path) == []
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == after


def test_a_store_of_format_11_moves_its_states_into_the_slots(store_path: Path) -> None:
    """Format 11 kept every state marker under its log key: such a store opens as it was,
    and a writer's flushes put the next states into the slots and trim the old ones."""
    import lmdb

    from ackstore.storage.records import log_key, open_slot, slot_key

    with AckStore.open(store_path) as store:
        cur = _small(store)
        for e in (3, 4, 8):
            cur.ack([Position(1, e)])
            store.flush()
        expected = _state(cur)
    env = lmdb.open(str(store_path), max_dbs=8)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            for slot in (0, 1):
                key = slot_key(0, slot)
                seq, record = open_slot(key, txn.get(key, db=db))
                txn.put(log_key(0, seq), bytes(record), db=db)
                txn.delete(key, db=db)
    finally:
        env.close()
    rawlog.set_format(store_path, 11)
    assert _slotted(store_path) == ({}, 2)
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == 11
        assert _state(store.topic(T).cursor("c")) == expected
    with AckStore.open(store_path) as store:
        assert store.format_version == 11  # until the first write
        cur = store.topic(T).cursor("c")
        assert _state(cur) == expected
        for e in (20, 21):
            cur.ack([Position(1, e)])
            store.flush()
        assert store.format_version == FORMAT_VERSION
        expected = _state(cur)
    slots, logged = _slotted(store_path)
    assert len(slots) == 2 and logged == 0
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == expected


def test_a_state_not_written_gives_its_slot_back(store_path: Path) -> None:
    """A flush whose transaction fails leaves the slots as they were: the next state goes
    into the slot the aborted one would have used, never over the newest state."""
    with AckStore.open(store_path) as store:
        cur = _small(store)
        for e in (1, 3):
            cur.ack([Position(1, e)])
            store.flush()
        cur.ack([Position(1, 7)])
        with store.lock:
            plan = cur._core._prepare_flush()
            assert plan is not None
            cur._core._abort_flush(plan)
            store.flush_list[cur._core] = cur._core._planner
        store.flush()
        seq, expected = cur.stats().last_marker_seq, _state(cur)
    slots, _ = _slotted(store_path)
    assert sorted(slots.values())[0] == 1 and max(slots.values()) == seq  # the state at 1 kept
    assert slots[0] == seq  # slots 0, 1, then 0 again
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("c")) == expected


def test_a_state_and_its_fallback_are_on_different_pages(store_path: Path) -> None:
    """Every cursor's slot 0 sits with the others', then every slot 1: in a store of many
    small cursors a state and the one before it lie on different leaf pages (but at the
    page where the two runs meet), so one damaged page does not take both."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cursors = [topic.cursor(f"s{c}") for c in range(300)]
        for e in range(2):
            for cur in cursors:
                cur.ack([Position(1, e)])
            store.flush()
        ids = [cur.cursor_id for cur in cursors]
    shared = 0
    for cid in ids:
        slots = rawlog.slots(store_path, cid)
        assert len(slots) == 2
        pages = {rawlog.node_offset(store_path, seq, cid) // 4096 for seq in slots.values()}
        shared += len(pages) == 1
    assert shared <= 60, shared  # at most the one page where slot 0's run ends and slot 1's starts


def test_a_history_cursor_keeps_log_keys_and_moves_into_the_slots_when_it_stops(store_path: Path) -> None:
    """A history point names its marker by log key: a cursor that keeps history keeps its
    states there; once history is off, its next flushes put its states into the slots and
    trim the window's states away."""
    from ackstore.storage.log import CursorLog, read_slots

    with AckStore.open(store_path) as store:
        _small(store)
        cur = store.topic(T).cursor("h", CursorConfig(history_seconds=3600))
        for e in range(4):
            cur.ack([Position(1, e * 2)])
            store.flush()
        cid, log = cur.cursor_id, CursorLog(store.storage.log_db, cur.cursor_id)
        records = store.storage.read(lambda txn: sum(1 for _ in log.records(txn)))
        assert records == 4 and store.storage.read(lambda txn: read_slots(txn, log.db, cid)[2]) == 0
        cur.update_config(history_seconds=0)  # in the same run: the chain's floor must be forgotten
        for e in (20, 22, 24):
            cur.ack([Position(1, e)])
            store.flush()
        expected = _state(cur)
    slots, logged = _slotted(store_path, cid)
    assert len(slots) == 2 and logged == 0
    with AckStore.open(store_path, readonly=True) as store:
        assert _state(store.topic(T).cursor("h")) == expected


def test_the_twins_read_every_state_slot_head_alike() -> None:
    """The sequence and check at the head of a state slot's value, and the room a first value
    reserves: what ``seal_slot`` writes reads back (sequences of one to nine varint bytes,
    with room or without, the value padded to a multiple of 16 bytes and the room) in both
    twins; every cut and every flipped bit of the head is the same ValueError in both, never
    a wrong sequence (a cut inside the room reads as the same head with nothing after it)."""
    from ackstore.storage.records import SLOT_ALIGN, seal_slot, slot_key

    rng = random.Random(23)
    for seq in [
        0,
        1,
        127,
        128,
        300,
        1 << 40,
        (1 << 63) - 1,
        *[rng.randrange(1 << rng.randrange(1, 63)) for _ in range(50)],
    ]:
        key = slot_key(rng.randrange(1 << 63), rng.randrange(2))
        room = rng.choice((0, 8))
        value = seal_slot(key, seq, b"\xc1record", room)
        start = len(value) - len(b"\xc1record")
        head = len(pure_codecs.varint(seq)) + 4
        assert len(value) % SLOT_ALIGN == room and room <= start - head < room + SLOT_ALIGN
        for twin in TWINS:
            assert twin.slot_head(key, value) == (seq, start)
        for cut in range(start):
            outcomes = []
            for twin in TWINS:
                try:
                    outcomes.append(twin.slot_head(key, value[:cut]))
                except ValueError as exc:
                    outcomes.append(str(exc))
            assert len(set(outcomes)) == 1, outcomes
            assert isinstance(outcomes[0], str) if cut < head else outcomes[0] == (seq, cut), outcomes
        for bit in range(8 * head):
            raw = bytearray(value)
            raw[bit // 8] ^= 1 << (bit % 8)
            outcomes = []
            for twin in TWINS:
                try:
                    outcomes.append(twin.slot_head(key, bytes(raw)))
                except ValueError as exc:
                    outcomes.append(str(exc))
            assert len(set(outcomes)) == 1 and isinstance(outcomes[0], str), outcomes
    with pytest.raises(ValueError, match="a state slot's sequence 9223372036854775808 is over"):
        pure_codecs.slot_head(b"k", pure_codecs.varint(1 << 63) + b"\0" * 4)


def test_a_slots_first_value_reserves_room_and_keeps_the_pages_full(store_path: Path) -> None:
    """A slot's first value carries SLOT_RESERVE zero bytes before its record, later ones
    none (besides each value's padding to a multiple of SLOT_ALIGN); so the steady
    workload's slots (1,000 cursors, k = 10, 60 flushes) stay on the pages the first two
    flushes filled, at most 31 leaf pages for the 2,000 values, and no page splits after
    them (without the room a value that grows splits its full page in two, and the log
    settled at 45-51 pages, each written whole by every flush)."""
    from ackstore.storage.records import SLOT_ALIGN, SLOT_RESERVE, first_slot_value, slot_room
    from benchmarks.steady import LEDGER, Steady

    state = Steady(1000, 10, seed=5)
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(LEDGER)
        cursors = [topic.cursor(f"s{c}", CursorConfig(max_unacked_ranges_to_persist=0)) for c in range(1000)]
        rooms, filled = [], 0
        for r in range(60):
            for cur, batch in zip(cursors, state.step(), strict=True):
                cur.ack_entries(LEDGER, batch)
            store.flush()
            if r == 1:  # both slots of every cursor hold a value
                filled = store.storage.read(lambda txn: txn.stat(store.storage.log_db)["leaf_pages"])
            if r < 3:
                key = _newest_slot(cursors[7])
                value = store.storage.read(lambda txn, k=key: txn.get(k, db=store.storage.log_db))
                rooms.append((first_slot_value(value), slot_room(key, value)))
        leaf_pages = store.storage.read(lambda txn: txn.stat(store.storage.log_db)["leaf_pages"])
    # each slot's first value, then none (beside each value's padding to a multiple of SLOT_ALIGN)
    assert [first for first, _ in rooms] == [True, True, False], rooms
    assert [room >= SLOT_RESERVE for _, room in rooms[:2]] == [True, True] and rooms[2][1] < SLOT_ALIGN, rooms
    assert leaf_pages == filled <= 31, (filled, leaf_pages)


@pytest.mark.parametrize("layout", ["state", "marker"])
def test_cursors_flush_on_from_their_compacted_logs(
    store_path: Path, layout: str, request: pytest.FixtureRequest
) -> None:
    """After a compaction each cursor flushes on from its new log: what it acks, counts,
    batches and sets afterwards, flushed, is what a reopen reads (the next marker lies above
    the compacted one, and is no delta against a state marker); the compacted log is the
    plan's (a state marker, or a record a ledger and a full marker), and each cursor's
    invariants hold after the compaction and after the next flush. Small, large and
    swapped-out cursors, with delivery counts, partial batches and properties."""
    if layout == "marker":
        request.getfixturevalue("marker_layout")
    tiny = CursorConfig(max_individual_ack_cache_bytes=1)
    with AckStore.open(store_path) as store:
        small, large, swapped = (_small(store, name) for name in ("small", "large", "swapped"))
        small.ack([Position(1, 3), Position(3, 9)])
        small.ack_batch_index(Position(3, 12), 8, [1, 2])
        small.record_deliveries([Position(3, 14)])
        small.set_property("k", "v")
        large.ack([Position(ledger, e) for ledger in (2, 3) for e in range(1000, 2400, 3)])
        swapped.ack([Position(ledger, e) for ledger in (2, 3) for e in range(1, 300, 2)])
        for i in range(4):
            for cur in (small, large, swapped):
                cur.ack([Position(3, 500 + 2 * i)])
            store.flush()
    names = ("small", "large", "swapped")
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cursors = {name: topic.cursor(name, tiny if name == "swapped" else None) for name in names}
        for cur in cursors.values():  # ledgers in memory (a lazy open left them on disk)
            assert [cur.is_acked(Position(ledger, 1)) for ledger in (2, 3)] == [cur.name == "swapped"] * 2
        ids = {name: cur.cursor_id for name, cur in cursors.items()}
        stats = {s.cursor: s for s in store.compact(verify=True)}
        for cur in cursors.values():
            cur._check()
            want = 1 if (layout, cur.name) == ("state", "small") else len(cur.snapshot().ranges) + 1
            usage = cur.log_usage()
            assert (usage.records, usage.garbage_bytes, stats[cur.name].records_after) == (want, 0, want), cur.name
        compacted = {name: cur.stats().last_marker_seq for name, cur in cursors.items()}
        for cur in cursors.values():  # one ack in one ledger: rides in a delta marker (a state marker when small)
            cur.ack([Position(3, 601)])
        one = store.flush()
        assert (one.ledger_records, one.full_markers) == ((0, 1) if layout == "state" else (1, 0)), one
        ones = {name: cur.stats().last_marker_seq for name, cur in cursors.items()}
        assert all(ones[name] > compacted[name] for name in names), (ones, compacted)
    if layout == "state":  # the compacted state stays to fall back to, in the other slot
        assert sorted(rawlog.slots(store_path, ids["small"]).values()) == [compacted["small"], ones["small"]]
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        cursors = {name: topic.cursor(name, tiny if name == "swapped" else None) for name in names}
        for cur in cursors.values():
            cur.ack([Position(3, 603), Position(3, 605)])
            cur.ack_batch_index(Position(3, 700), 4, [0])
            cur.record_deliveries([Position(3, 702), Position(3, 702)])
            cur.set_property("after", cur.name)
        store.flush()
        for cur in cursors.values():
            cur._check()
        after = {name: cur.snapshot() for name, cur in cursors.items()}
        marked = {name: cur.stats().last_marker_seq for name, cur in cursors.items()}
    for name, cur_id in ids.items():
        kinds = [t for _, t in rawlog.records(store_path, cur_id)]
        assert max(rawlog.markers(store_path, cur_id)) == marked[name] and kinds[-1] == RECORD_MARKER, (name, kinds)
    with AckStore.open(store_path, readonly=True) as store:
        topic = store.topic(T)
        assert {name: topic.cursor(name).snapshot() for name in after} == after
    for name, snap in after.items():
        assert snap.properties["after"] == name and snap.delivery_counts[Position(3, 702)] == 2
        assert snap.partial_batches[Position(3, 700)] == (4, frozenset({0}))
        assert Position(3, 603) not in snap.delivery_counts and snap.ranges[-1][1][-1][1] >= 603
    assert check(store_path) == []


@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-bound", "one-over"])
def test_compaction_reads_the_ledgers_a_lazy_open_left_of_a_cursor_at_the_state_bound(
    store_path: Path, extra: int
) -> None:
    """A cursor with exactly STATE_MAX_RUNS ranges in two ledgers, opened lazily (its
    ledgers left in its state marker until first used), compacts to one state marker: its
    ledgers are read to be written as one. One range more and it compacts to a record a
    ledger and a full marker. Both read back as they were."""
    runs = STATE_MAX_RUNS + extra
    with AckStore.open(store_path) as store:
        cur = _small(store)
        cur.ack([Position(1 + i % 2, 2 * i + 1) for i in range(runs)])
        store.flush()
        before = cur.snapshot()
    assert before.ack_range_count == runs
    with AckStore.open(store_path) as store:
        cur = store.topic(T).cursor("c")
        (stats,) = store.compact(verify=True)
        cur._check()
        assert stats.records_after == (1 if extra == 0 else 3)
    assert stats.bytes_after == sum(rawlog.sizes(store_path).values())  # keys and values, to the byte
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topic(T).cursor("c").snapshot() == before
