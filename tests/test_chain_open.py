"""A holey cursor reopens straight into its small form: when its newest marker names records
of ledgers of its line (a chain its form wrote, or its parts' chain of a cursor over a slot's
bound), the open reads the marker, its delta chain and the records into the form and adopts
the chain, instead of recovering the parts and waiting for their next full marker. It holds
exactly what recovery holds, and its next flushes extend the chain as if it never closed."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import lmdb
import msgpack
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.cursor.small import IMPLEMENTATIONS, check_small, form_read, set_form_chains
from ackstore.errors import CorruptRecordError
from ackstore.fields import native
from ackstore.ledger_acks import LedgerAcks, bitmap_of_runs, run_bounds
from ackstore.storage import codecs, pure_acks, pure_codecs, records
from ackstore.storage.bitmaps import _inner_bounds, count_runs

from .chain_twins import form_fields
from .codec_impls import damaged
from .forms import LAYOUTS, compiled_layout

T = "persistent://t/n/chain-open"
CFG = CursorConfig(max_unacked_ranges_to_persist=0)
Step = Callable[[Any], None]


def _holes(cur: Any) -> None:
    """900 holes at random in ledger 1's first 2,500 entries (over a slot's 512 ranges),
    entry 0 one of them (a record coding them as its holes, in one pass)."""
    holes = {0, *random.Random(5).sample(range(1, 2500), 899)}
    cur.ack_entries(1, [e for e in range(2500) if e not in holes])


def _acks(*entries: int) -> Step:
    return lambda cur: cur.ack([Position(1, e) for e in entries])


def _deliver(*entries: int) -> Step:
    return lambda cur: cur.record_deliveries([Position(1, e) for e in entries])


def _acks_in(ledger: int, *entries: int) -> Step:
    return lambda cur: cur.ack([Position(ledger, e) for e in entries])


def _deliver_in(ledger: int, *entries: int) -> Step:
    return lambda cur: cur.record_deliveries([Position(ledger, e) for e in entries])


def _roll(ledger: int, entries: int, new: int) -> Step:
    """Ledger ``ledger`` sealed at ``entries`` and ledger ``new`` opened (the topic's)."""

    def step(cur: Any) -> None:
        cur.topic.close_ledger(ledger, entries)
        cur.topic.add_ledger(new)

    return step


def _prop(value: int) -> Step:
    return lambda cur: cur.set_property("p", value)


#: rounds of steps a cursor takes, each round followed by a flush; the store closes after the
#: first part and reopens for the second
SHAPES: dict[str, tuple[list[list[Step]], list[list[Step]]]] = {
    "the parts' record and full marker": ([[_holes]], [[_acks(4000)], [_acks(4002)]]),
    "the form's deltas after them": ([[_holes], [_acks(3000)], [_acks(3002)], [_acks(3004)]], [[_acks(3006)]]),
    "counts in the record and since": (
        [[_holes, _deliver(2, 4, 6, 3001, 3002)], [_deliver(4, 3003)], [_acks(3001), _deliver(8)]],
        [[_acks(3003), _deliver(3002)], [_acks(6)]],
    ),
    "M moved since the record": ([[_holes], [_acks(0, 2, 4)], [_acks(6)]], [[_acks(8, 3000)], [_acks(10)]]),
    "properties": ([[_holes, _prop(1)], [_acks(3000), _prop(2)]], [[_prop(3)], [_acks(3002)]]),
    "a held ledger and the next ones": (
        [
            [_holes],
            [_roll(1, 5000, 2), _acks_in(2, 1, 3, 5), _deliver_in(2, 7)],
            [_roll(2, 100, 3), _acks_in(3, 0)],
            [_acks_in(3, 2), _deliver_in(3, 4)],
        ],
        [[_acks(7, 9)], [_acks_in(2, 0, 2)], [_acks_in(3, 5)]],
    ),
    "counts alone in a ledger after M's": (
        [
            [_holes],
            [_roll(1, 5000, 2), _acks_in(2, 1, 3, 5), _deliver_in(2, 7)],
            [_roll(2, 100, 3), _acks_in(3, 0)],
            [_acks_in(3, 2), _deliver_in(3, 4)],
            [_roll(3, 10, 4), _deliver_in(4, 1, 2)],
        ],
        [[_deliver_in(4, 2), _acks_in(4, 3)], [_acks(11)]],
    ),
}


def _store(path: Path) -> Any:
    store = AckStore.open(path, sync=False)
    return store, store.topic(T)


def _play(path: Path, rounds: list[list[Step]], first: bool) -> Any:
    """The rounds on cursor ``c`` of the store at ``path`` (made, with ledger 1 open, when
    ``first``), a flush after each; returns whether the cursor was in the small form when
    the store opened it and after its rounds."""
    store, topic = _store(path)
    try:
        if first:
            topic.add_ledger(1)
        cur = topic.cursor("c", CFG)
        opened = cur._core.small is not None
        for steps in rounds:
            for step in steps:
                step(cur)
            store.flush()
            cur._check()
        return opened, cur._core.small is not None
    finally:
        store.close()


def _state(path: Path, chains: bool, name: str = "c") -> Any:
    """What the store at ``path`` holds of cursor ``name`` (its snapshot), opened with form
    chains on (the open reads the chain into the form) or off (recovery reads the parts)."""
    before = set_form_chains(chains)
    try:
        store, topic = _store(path)
        try:
            cur = topic.cursor(name, CFG)
            return cur._core.small is not None, cur.snapshot()
        finally:
            store.close()
    finally:
        set_form_chains(before)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_holey_cursor_reopens_into_its_form_holding_what_recovery_holds(tmp_path: Path, shape: str) -> None:
    """Reopened, the cursor is in the form at once and holds what recovery of its parts
    holds (M, ranges, delivery counts, properties); its flushes after the reopen extend the
    adopted chain: the store then holds what the same rounds without a close leave."""
    before, after = SHAPES[shape]
    _play(tmp_path / "a", before, True)
    in_form, state = _state(tmp_path / "a", True)
    parts_form, parts_state = _state(tmp_path / "a", False)
    assert (in_form, parts_form) == (True, False)
    assert state == parts_state
    opened, _ = _play(tmp_path / "a", after, False)
    assert opened
    _play(tmp_path / "b", before + after, True)
    expected = _state(tmp_path / "b", False)[1]
    assert _state(tmp_path / "a", False)[1] == expected
    assert _state(tmp_path / "a", True) == (True, expected)


READER = r"""
import sys
from ackstore import AckStore
store = AckStore.open(sys.argv[1], readonly=True)
cur = store.topic(sys.argv[2]).cursor("c")
for _ in sys.stdin:
    snap = cur.snapshot()
    cur._check()
    print(cur._core.small is not None, repr(snap), flush=True)
store.close()
"""


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_reader_opens_a_holey_cursor_into_its_form_and_follows_the_writer(tmp_path: Path, shape: str) -> None:
    """A reader (``readonly=True``, another process) opens the cursor into the form as the
    writer's open does, holding what recovery of the parts holds; once the writer flushed
    again, its next read holds the writer's newest flush, in the form when the writer's open
    would read it so."""
    before, after = SHAPES[shape]
    _play(tmp_path / "a", before, True)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path / "a"), T], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert reader.stdin is not None and reader.stdout is not None
    forms = 0
    try:
        for rounds in ([], after[:1]):
            _play(tmp_path / "a", rounds, False)
            in_form, expected = _state(tmp_path / "a", True)  # (the writer's open)
            assert expected == _state(tmp_path / "a", False)[1]
            reader.stdin.write("read\n")
            reader.stdin.flush()
            assert reader.stdout.readline().strip() == f"{in_form} {expected!r}"
            forms += in_form
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=60) == 0
    assert forms >= 1  # (the open's at least: what the test is about)


def test_a_cursor_holding_state_past_its_lines_64th_ledger_opens_into_the_form(tmp_path: Path) -> None:
    """A chain naming a ledger past the line's 64th (the form's chain records any ledger of
    its line) opens into the form, holding what it held."""
    store, topic = _store(tmp_path / "s")
    topic.add_ledger(1)
    cur = topic.cursor("wide", CFG)
    _holes(cur)
    for ledger in range(1, 67):
        topic.close_ledger(ledger, 5000 if ledger == 1 else 10)
        topic.add_ledger(ledger + 1)
    cur.ack_entries(67, range(1, 8, 2))
    store.flush()
    expected = cur.snapshot()
    store.close()
    in_form, state = _state(tmp_path / "s", True, "wide")
    assert in_form and state == expected


def _record(acks: list[tuple[int, int]], counts: dict[int, int], cursor_id: int = 7, ledger: int = 40) -> bytes:
    la = LedgerAcks(bitmap_of_runs(acks), {}, dict(counts))
    return records.encode_ledger(ledger, la, cursor_id)


#: where ledger 41's record is on the line in the twins' test: after ledger 40's 3,101 entries
NEXT, NEXT_STOP = 3101, 3701


@settings(max_examples=150, deadline=None)
@given(
    holes=st.frozensets(st.integers(0, 3000), min_size=1, max_size=80),
    top=st.sampled_from([3000, 3100]),
    at=st.integers(0, 100),
    shift=st.sampled_from([0, 0, 0, 1]),
    counts=st.dictionaries(st.integers(0, 3100), st.integers(1, 9), max_size=6),
    next_ledger=st.none()
    | st.tuples(
        st.frozensets(st.integers(0, 500), max_size=30),
        st.dictionaries(st.integers(0, 599), st.integers(1, 9), max_size=4),
    ),
    adds=st.frozensets(st.integers(0, 3600), max_size=6),
    since=st.dictionaries(st.integers(0, 3600), st.integers(1, 9), max_size=4),
    layout=st.sampled_from(LAYOUTS),
)
@example(  # an ack since among many counts (dropped in place when lowered), its entry counted since too
    holes=frozenset(range(1, 40, 2)),
    top=3000,
    at=0,
    shift=0,
    counts=dict.fromkeys(range(1, 40, 2), 1),
    next_ledger=None,
    adds=frozenset({21}),
    since={21: 2},
    layout=LAYOUTS[1],
)
def test_the_twins_read_records_into_the_same_form(
    holes: frozenset[int],
    top: int,
    at: int,
    shift: int,
    counts: dict[int, int],
    next_ledger: tuple[frozenset[int], dict[int, int]] | None,
    adds: frozenset[int],
    since: dict[int, int],
    layout: tuple[int, int, int, int] | None,
) -> None:
    """``small_of_record`` of both twins on the same records (M's ledger's acks with holes and
    delivery counts; perhaps the next ledger's, acks with holes, or none at all when it has
    no holes, and counts, at its offset on the line, a run across the offset joined) with
    acks and counts since: the same form or both None; when taken, the form holds the
    records' acks above M with the adds, the counts of unacked entries above M (the newer
    winning), and nothing M + 1 would move M over. Acks since the records at or below M
    leave the cursor to recovery."""
    md_e = sorted(holes)[at % len(holes)] - 1 + shift  # (mostly M before a hole, as a cursor keeps it)
    # (the record's acks above M, as a flush writes them)
    acks = [(max(a, md_e + 1), b - 1) for a, b in _gaps(holes, top) if b - 1 > md_e]
    counts = {e: n for e, n in counts.items() if not _in(acks, e)}
    items: list[Any] = [(40, 0, NEXT, _record(acks, counts), -1)]
    if next_ledger is not None:
        next_holes, next_counts = next_ledger
        next_acks = [(a, b - 1) for a, b in _gaps(next_holes, 500)] if next_holes else []
        next_counts = {e: n for e, n in next_counts.items() if not _in(next_acks, e)}
        items.append((41, NEXT, NEXT_STOP, _record(next_acks, next_counts, ledger=41), -1))
        acks += [(NEXT + a, NEXT + b) for a, b in next_acks]
        counts |= {NEXT + e: n for e, n in next_counts.items()}
    with compiled_layout(layout):  # (the compiled twin as shipped, or its layouts lowered: LAYOUTS)
        outs = [
            impl.small_of_record(
                7, 40, md_e, 9, 1, 0, 4096, b"", tuple(items), records.FORMAT_VERSION, sorted(adds), since
            )
            for impl in IMPLEMENTATIONS
        ]
    held = [None if s is None else (s.runs(), s.counts(), s.n, s.persisted, s.dirty, s.md_e) for s in outs]
    assert all(h == held[0] for h in held), held
    acked = bitmap_of_runs(acks) | BitMap(adds)
    moves = md_e + 1 in acked or any(md_e < e and e in acked for e in since)
    one_pass = all(_one_pass(item[3]) for item in items)
    below = any(e <= md_e for e in adds)  # (acks since the record at or below M: recovery's)
    assert (outs[0] is None) == (moves or below or not one_pass), (md_e, moves, below, one_pass)
    event("taken" if outs[0] is not None else "left to recovery")
    event(f"{len(items)} records")
    if outs[0] is None:
        return
    expect_runs = [(a, b) for a, b in run_bounds(acked) if b > md_e]
    expect_counts = {e: n for e, n in {**counts, **since}.items() if e > md_e and e not in acked}
    assert outs[0].runs() == expect_runs and dict(outs[0].counts()) == expect_counts
    for s in outs:
        s.base = -2  # (as the open leaves it: the log holds its state)
        s.bound(0, ((41, NEXT),), NEXT_STOP - 1)
        check_small(s, (40, -1))


def _one_pass(value: bytes) -> bool:
    """Whether a record is one the open reads in one pass: its acks in a Rice, stride,
    Elias-Fano or run-bounds code, or none at all, or one run (no holes: the empty roaring
    form of them)."""
    flags, _, _, payload = msgpack.unpackb(pure_codecs.open_envelope(value, records.FORMAT_VERSION)[2])[1:5]
    empty = BitMap().serialize()
    return flags in (8, 9, 16, 17, 32, 33, 64) or (flags, payload) in ((0, b""), (1, empty))


def _gaps(holes: frozenset[int], top: int) -> list[tuple[int, int]]:
    """The runs [a, b) of 0..top the ``holes`` leave."""
    out, at = [], 0
    for h in sorted(holes):
        if h > at:
            out.append((at, h))
        at = h + 1
    if at <= top:
        out.append((at, top + 1))
    return out


def _in(runs: list[tuple[int, int]], e: int) -> bool:
    return any(a <= e <= b for a, b in runs)


def _coded_record(flags: int, first: int, last: int, code: bytes, runs: int, ledger: int = 40) -> bytes:
    """A ledger record of cursor 7 holding ``code`` as its acks' fields, checksummed as a
    flush writes it (so that a damaged code is found by its decode, not by the envelope)."""
    return records.encode_record(records.RECORD_LEDGER, msgpack.packb([ledger, flags, first, last, code, runs, [], 7]))


def test_long_elias_fano_codes_read_into_the_form_alike_and_damage_in_them_is_refused_alike() -> None:
    """The Elias-Fano codes of thousands of values (acks, holes, run bounds: read in blocks,
    each code across many) give both twins the same form, holding exactly the set's runs;
    a code damaged under a sound checksum (a bit flipped, bytes cut or added) gives both the
    same outcome, and any form taken holds runs of the entries it stated."""
    rng = random.Random(56)
    top, taken, refused = 49_999, 0, 0
    shapes = [BitMap(range(1, top + 1)) - BitMap(rng.sample(range(2, top), n)) for n in (300, 2500, 9000)]
    runs_set = BitMap()
    at = 1
    while at <= top:
        step = rng.randrange(1, 10)
        runs_set.add_range(at, min(at + step, top + 1))
        at += step + rng.randrange(1, 10)
    shapes.append(runs_set)
    for acked in shapes:
        low, high = acked.min(), acked.max()
        holes = BitMap(acked).flip(low, high + 1)
        nruns = count_runs(acked)
        codes = [
            (32, low, high, codecs.ef_code(acked.to_array(), low, high)),
            (33, low, high, codecs.ef_code(holes.to_array(), low, high)),
            (64, low, high, codecs.ef_code(_inner_bounds(acked).to_array(), low, high)),
        ]
        for flags, first, last, code in codes:
            outs = [_one_record(read, _coded_record(flags, first, last, code, nruns)) for read in _reads()]
            assert all(o == outs[0] for o in outs) and outs[0] == run_bounds(acked), flags
            taken += 1
            for _ in range(6):
                bad = damaged(code, rng)
                outs = [_one_record(read, _coded_record(flags, first, last, bad, nruns)) for read in _reads()]
                assert all(o == outs[0] for o in outs), flags
                refused += outs[0] is None
    assert taken == 12 and refused > 30


def test_elias_fano_codes_of_every_low_width_read_alike_with_or_without_vector_reads() -> None:
    """Codes whose values carry 0 to 12 low bits each (the compiled reader takes 1 to 8 of
    them 8 values at a time where the machine has AVX2), as acks, holes and run bounds, at
    an offset on the line: every read gives the set's runs; a low part or a high part damaged
    under a sound checksum (a value no longer above the one before, or past the span) gives
    every read the same outcome."""
    rng = random.Random(8)
    top, refused = 60_000 - 1, 0
    for width in range(13):
        gap = 1 << width  # (a span of about gap x values: ef_width's L)
        acked, at = BitMap(), 1 + rng.randrange(gap)
        while at < top - 2 * gap:
            run = rng.randrange(1, gap + 2)
            acked.add_range(at, at + run)
            at += run + rng.randrange(1, 2 * gap + 1)
        low, high = acked.min(), acked.max()
        holes = BitMap(acked).flip(low, high + 1)
        for flags, values in ((32, acked), (33, holes), (64, _inner_bounds(acked))):
            if not values:
                continue
            code, offset = codecs.ef_code(values.to_array(), low, high), 1000 * width
            record = _coded_record(flags, low, high, code, count_runs(acked))
            outs = [_one_record(read, record, offset) for read in _reads()]
            assert all(o == outs[0] for o in outs), (width, flags)
            assert outs[0] == [(a + offset, b + offset) for a, b in run_bounds(acked)], (width, flags)
            for _ in range(4):
                bad = bytearray(code)
                bad[rng.randrange(2, len(bad))] ^= 1 << rng.randrange(8)  # (past the count's varint)
                bad_record = _coded_record(flags, low, high, bytes(bad), count_runs(acked))
                outs = [_one_record(read, bad_record) for read in _reads()]
                assert all(o == outs[0] for o in outs), (width, flags)
            for bad in _descending(code, values.to_array(), low, high, rng):
                outs = [_one_record(read, _coded_record(flags, low, high, bad, count_runs(acked))) for read in _reads()]
                assert outs == [None] * len(outs), (width, flags)
                refused += 1
    assert refused > 50


def _descending(code: bytes, values: Any, first: int, last: int, rng: random.Random) -> Iterator[bytes]:
    """``code`` (the Elias-Fano code of ``values`` over first..last) with a value made greater
    than the next, each of a few ways: two values of one high part whose low bits are set to
    all ones and to zeros (none where the code has no low bits)."""
    n, width = len(values), pure_acks.ef_width(last - first + 1, len(values))
    start = len(pure_codecs.varint(n))
    pairs = [i for i in range(n - 1) if (values[i] - first) >> width == (values[i + 1] - first) >> width]
    for i in rng.sample(pairs, min(3, len(pairs))) if width else ():
        bits = int.from_bytes(code[start : start + (n * width + 7) // 8], "little")
        one = (1 << width) - 1
        bits = (bits | one << (i * width)) & ~(one << ((i + 1) * width))
        yield code[:start] + bits.to_bytes((n * width + 7) // 8, "little") + code[start + (n * width + 7) // 8 :]


def _reads() -> Iterator[Any]:
    """Each twin of ``small_of_record`` in turn, the compiled one twice: its reader of
    Elias-Fano codes scanning their high part 8 bits at a time (SSE2), then a set bit at a
    time (set back as it was after)."""
    for impl in IMPLEMENTATIONS:
        if native is None or impl.small_of_record is not native.small_of_record:
            yield impl
            continue
        was = native._ef_simd(True)
        try:
            yield impl
            native._ef_simd(False)
            yield impl
        finally:
            native._ef_simd(was)


def _one_record(impl: Any, value: bytes, offset: int = 0) -> list[tuple[int, int]] | None:
    """The runs of the form ``impl.small_of_record`` reads from ledger 40's record ``value``
    alone (M before entry 0), the ledger at ``offset`` on the form's line, or None."""
    item = (40, offset, offset + 60_000, value, -1)
    s = impl.small_of_record(7, 40, -1, 9, 1, 0, 1 << 16, b"", (item,), records.FORMAT_VERSION, [], {})
    return None if s is None else s.runs()


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_record_the_open_does_not_read_in_one_pass_is_left_to_recovery(impl: Any) -> None:
    """Another cursor's record, another ledger's, a damaged one, one stating other runs
    than asked, one with a partial batch, one holding state at or past its ledger's end on
    the line, records out of line order: None (recovery reads them and names damage); a
    record of delivery counts alone is taken."""
    good = _record([(1, 5), (7, 900)], {6: 2})

    def call(*items: tuple[Any, ...]) -> Any:
        return impl.small_of_record(7, 40, -1, 9, 1, 0, 4096, b"", items, records.FORMAT_VERSION, [], {})

    assert call((40, 0, 1000, good, -1)) is not None
    batch = records.encode_ledger(40, LedgerAcks(bitmap_of_runs([(1, 900)]), {950: (4, 0b1)}, {}), 7)
    bad = {
        "another cursor's": _record([(1, 5), (7, 900)], {}, 8),
        "another ledger's": records.encode_ledger(41, LedgerAcks(bitmap_of_runs([(1, 900)]), {}, {}), 7),
        "damaged": good[:-3] + bytes([good[-3] ^ 1]) + good[-2:],
        "a partial batch": batch,
    }
    for why, value in bad.items():
        assert call((40, 0, 1000, value, -1)) is None, why
    assert call((40, 0, 1000, good, 5)) is None  # (it states 2 runs)
    assert call((40, 0, 1000, good, 2)) is not None
    assert call((40, 0, 900, good, -1)) is None  # (an ack at 900: past the ledger's end)
    assert call((40, 0, 901, good, -1)) is not None
    counted = _record([], {3: 2, 5: 1}, ledger=41)
    s = call((40, 0, 1000, good, -1), (41, 1000, 1100, counted, 0))
    assert s is not None and s.runs() == [(1, 5), (7, 900)] and s.counts() == [(6, 2), (1003, 2), (1005, 1)]
    assert call((40, 0, 1000, good, -1), (41, 1000, 1004, counted, 0)) is None  # (a count past its end)
    assert call((41, 1000, 1100, counted, 0), (40, 0, 1000, good, -1)) is None  # (out of line order)
    joined = call((40, 0, 901, good, -1), (41, 901, 2000, _record([(0, 9)], {}, ledger=41), 1))
    assert joined is not None and joined.runs() == [(1, 5), (7, 910)]
    with pytest.raises(TypeError):
        call((40, 0, 1000, "not bytes", -1))


def test_the_open_looks_into_a_marker_naming_ledgers_of_ms_line() -> None:
    """The look before resolving a newest marker (``records.names_line``) says yes for a
    marker naming up to 256 ledgers (a form's line: M's and 255 after it; a delta marker of a
    change of properties alone names none), none before the mark-delete one, in either
    layout, and no for one naming a ledger before it or more than 256, a ledger record, a msgpack marker
    too large to look into, and bytes of no record."""
    entry = records.IndexEntry(3, 40, None, None)
    other = records.IndexEntry(4, 2, None, None)

    def fixed(items: list[Any]) -> bytes:
        return records.encode_fixed_marker(3, (2, 5), (2, 6), {}, items, 7, True)

    def packed(index: dict[int, Any], props: dict[str, Any] | None = None) -> bytes:
        marker = records.Marker(True, 3, (2, 5), (2, 6), props or {}, index, extra={"c": 7})
        return records.encode_marker(marker)

    many = [(ledger, entry) for ledger in range(2, 259)]  # (257 ledgers)
    yes = {
        "fixed, M's": fixed([(2, entry)]),
        "fixed, a later one": fixed([(3, entry)]),
        "fixed, 256 of the line": fixed(many[:256]),
        "msgpack, M's": packed({2: entry}),
        "msgpack, two": packed({2: entry, 3: other}),
        "fixed, none (a change of properties alone)": fixed([]),
        "msgpack, none": packed({}),
    }
    no = {
        "fixed, one before M's": fixed([(1, entry), (2, other)]),
        "fixed, 257": fixed(many),
        "msgpack, one before M's": packed({1: entry, 2: other}),
        "msgpack, too large to look into": packed({2: entry}, {"p": "x" * 2000}),
        "a ledger record": _record([(1, 5)], {}),
        "no record": b"\xc1\x02\x0e",
    }
    assert not [why for why, v in yes.items() if not records.names_line(v)]
    assert not [why for why, v in no.items() if records.names_line(v)]


@contextmanager
def _log_of(path: Path, write: bool = False) -> Iterator[tuple[Any, Any]]:
    """A transaction of the closed store at ``path`` (LMDB's own, writing when ``write``)
    and its log database."""
    env = lmdb.open(str(path), max_dbs=16, map_size=1 << 30, readonly=not write)
    try:
        with env.begin(write=write) as txn:
            yield txn, env.open_db(b"log", txn=txn, create=False)
    finally:
        env.close()


def _damage(txn: Any, db: Any, key: bytes) -> None:
    """The value under ``key`` with a bit of its last byte flipped."""
    value = bytearray(txn.get(key, db=db))
    value[-1] ^= 0x40
    txn.put(key, bytes(value), db=db)


def _compiled_read(path: Path) -> Any:
    """What the compiled open (``form_read``) reads of cursor ``c`` of the store at
    ``path``, in a read transaction of its own (None: the Python functions read it)."""
    store, topic = _store(path)
    try:
        cid = topic.cursor("c", CFG)._core.cursor_id
        storage = store.storage
        return storage.read(lambda txn: form_read(txn, storage.log_db, cid, CFG, topic.directory))
    finally:
        store.close()


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_compiled_open_reads_every_shape_in_one_call(tmp_path: Path, shape: str) -> None:
    """Each shape's chain (a first full marker, deltas with acks and counts since,
    properties, a held ledger and the next ones) is read by the compiled open, not left to
    the Python functions it stands for; what it reads is theirs (the suite holds every
    open's form against theirs: ``tests/chain_twins.py``)."""
    before, after = SHAPES[shape]
    _play(tmp_path / "a", before, True)
    opened = _compiled_read(tmp_path / "a")
    assert opened is not None and opened.small.md_l >= 1 and opened.ledgers >= 1
    _play(tmp_path / "a", after, False)
    assert _compiled_read(tmp_path / "a") is not None


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
@pytest.mark.parametrize("damage", ["newest marker", "older marker", "record", "older marker gone"])
def test_the_compiled_open_leaves_damage_to_recovery(tmp_path: Path, damage: str) -> None:
    """A damaged or missing link of a chain of delta markers, or a damaged record it names:
    the compiled open reads nothing (None), and the open that follows recovers the cursor as
    before, from an older marker, into its parts."""
    path = tmp_path / "a"
    _play(path, [[_holes], [_roll(1, 5000, 2), _acks_in(2, 1, 3, 5)], [_acks_in(2, 7)]], True)
    with _log_of(path, write=True) as (txn, db):
        logged = [(bytes(k), records.record_type(v)) for k, v in txn.cursor(db=db)]
        markers = [k for k, rtype in logged if rtype == records.RECORD_MARKER]
        ledger_records = [k for k, rtype in logged if rtype == records.RECORD_LEDGER]
        assert not records.decode_marker(txn.get(markers[-1], db=db)).full  # (a delta: the chain has links)
        key = {"newest marker": markers[-1], "record": ledger_records[-1]}.get(damage, markers[-2])
        if damage.endswith("gone"):
            txn.delete(key, db=db)
        else:
            _damage(txn, db, key)
    assert _compiled_read(path) is None
    store, topic = _store(path)
    try:
        cur = topic.cursor("c", CFG)
        assert cur._core.small is None
        cur._check()
    finally:
        store.close()


def test_an_open_reads_a_chain_whose_delta_markers_name_records_after_its_full_marker(tmp_path: Path) -> None:
    """The parts' chain of a cursor holding a ledger's entries as it reads on across two
    rollovers: a full marker, then a record of each new ledger and a delta marker naming it.
    An open reads it into the form (records written after the chain's full marker are
    records of its line like any other), holding what recovery of the parts holds; its
    next flushes go on from that chain."""
    path = tmp_path / "a"
    before, after = SHAPES["a held ledger and the next ones"]
    was = set_form_chains(False)  # (the parts write the chain)
    try:
        _play(path, before[:3], True)
    finally:
        set_form_chains(was)
    with _log_of(path) as (txn, db):
        logged = [(records.split_log_key(bytes(k))[1], bytes(v)) for k, v in txn.cursor(db=db) if len(k) == 16]
    marker = records.RECORD_MARKER
    markers = {seq: records.decode_marker(v, seq) for seq, v in logged if records.record_type(v) == marker}
    full = max(seq for seq, m in markers.items() if m.full)
    newest = markers[max(markers)]
    assert not newest.full and any(e.seq > full for e in newest.index.values())  # (a record after the full marker)
    in_form, state = _state(path, True)
    assert in_form and state == _state(path, False)[1]
    assert _play(path, after, False) == (True, True)
    assert _state(path, True) == (True, _state(path, False)[1])


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
def test_the_compiled_open_reads_a_chain_whose_older_markers_carry_properties(tmp_path: Path) -> None:
    """A chain of delta markers each carrying the cursor's properties (set every flush) is
    read by the compiled open too, the older markers' properties checked to decode, and
    holds what recovery holds."""
    path = tmp_path / "a"
    before, after = SHAPES["a held ledger and the next ones"]
    _play(path, [[*steps, _prop(i)] for i, steps in enumerate((before + after)[:4])], True)
    with _log_of(path) as (txn, db):
        values = [bytes(v) for _, v in txn.cursor(db=db) if records.record_type(v) == records.RECORD_MARKER]
    markers = [records.decode_marker(v) for v in values]
    assert not markers[-1].full and not markers[-2].full and all(m.properties for m in markers)  # (deltas, all with)
    opened = _compiled_read(path)
    assert opened is not None and records.unpack_properties(opened.small.props) == {"p": 3}
    in_form, state = _state(path, True)
    assert in_form and state == _state(path, False)[1]


#: a small cursor's rounds (its state in a state slot), each followed by a flush; what its
#: form then holds: M, the runs above it and the delivery counts, on the form's line
SLOT_SHAPES: dict[str, tuple[list[list[Step]], tuple[int, int], list[tuple[int, int]], list[tuple[int, int]]]] = {
    "a few holes": ([[_acks(0, 1, 3, 7)], [_acks(9)]], (1, 1), [(3, 3), (7, 7), (9, 9)], []),
    "counts and properties": (
        [[_acks(0, 2), _deliver(4, 5), _prop(1)], [_acks(5)]],
        (1, 0),
        [(2, 2), (5, 5)],
        [(4, 1)],
    ),
    "a held ledger and the next one": (
        [[_acks(0, 2)], [_roll(1, 10, 2), _acks_in(2, 1, 3), _deliver_in(2, 5)]],
        (1, 0),
        [(2, 2), (11, 11), (13, 13)],
        [(15, 1)],
    ),
}


def _slot_keys_only(path: Path) -> bool:
    """Whether every key of the store's log is a state slot's (none under a log key)."""
    with _log_of(path) as (txn, db):
        keys = [bytes(k) for k in txn.cursor(db=db).iternext(values=False)]
    return bool(keys) and all(len(k) == 10 and k[0] == 0xFF for k in keys)


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
@pytest.mark.parametrize("shape", list(SLOT_SHAPES))
def test_the_compiled_open_reads_a_cursor_whose_log_is_its_slots(tmp_path: Path, shape: str) -> None:
    """A small cursor whose log is only its state slots is read by the compiled open in one
    call (slots, the newer's state, its line and checks), holding what its flushes wrote
    (the suite holds its form against the Python read's at every open); and the store's
    open of it takes that form."""
    rounds, md, runs, counts = SLOT_SHAPES[shape]
    path = tmp_path / "a"
    _play(path, rounds, True)
    assert _slot_keys_only(path)
    opened = _compiled_read(path)
    assert opened is not None
    s = opened.small
    assert ((s.md_l, s.md_e), list(s.runs()), list(s.counts())) == (md, runs, counts)
    assert opened.ledgers == (2 if shape.startswith("a held") else 1) and opened.seq == s.next_seq - 1
    assert records.unpack_properties(s.props) == ({"p": 1} if "properties" in shape else {})
    assert _play(path, [[_acks(9)]], False)[0]  # (the store's open: in the form from the start)


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
@pytest.mark.parametrize("damage", ["newer slot", "no state"])
def test_the_compiled_open_of_slots_leaves_damage_and_nothing_to_recovery(tmp_path: Path, damage: str) -> None:
    """A damaged newer state slot, or a log with no state at all (both slots gone): the
    compiled open reads nothing (None), and the store's open reads the cursor as before
    (from the older slot; at its initial position)."""
    path = tmp_path / "a"
    _play(path, [[_acks(0, 2)], [_acks(4)]], True)
    with _log_of(path, write=True) as (txn, db):
        slots = sorted((codecs.slot_head(bytes(k), bytes(v))[0], bytes(k)) for k, v in txn.cursor(db=db))
        if damage == "no state":
            for _, key in slots:
                txn.delete(key, db=db)
        else:
            _damage(txn, db, slots[-1][1])
    assert _compiled_read(path) is None
    store, topic = _store(path)
    try:
        cur = topic.cursor("c", CFG)
        if damage == "newer slot":  # (the older slot's state)
            assert cur.mark_delete_position == Position(1, 0) and cur.is_acked(Position(1, 2))
        assert not cur.is_acked(Position(1, 4))
        cur._check()
    finally:
        store.close()


def _lazy_pair(path: Path) -> tuple[Any, Any]:
    """The compiled open's form of cursor ``c`` of the store at ``path``, read lazily (its
    record's runs waiting for the first use) and eagerly (None: it declines)."""
    store, topic = _store(path)
    try:
        cid = topic.cursor("c", CFG)._core.cursor_id
        storage = store.storage
        read = [
            storage.read(
                partial(form_read, db=storage.log_db, cursor_id=cid, config=CFG, directory=topic.directory, lazy=lazy)
            )
            for lazy in (True, False)
        ]
        return tuple(None if got is None else got.small for got in read)  # type: ignore[return-value]
    finally:
        store.close()


#: what is asked of a lazy open's form first: a reading, or a change and then every reading
_FIRST_USES: dict[str, Callable[[Any], Any]] = {
    "runs": lambda s: s.runs(),
    "acked": lambda s: [s.acked(e) for e in (0, 1, 17, 2499, 2500, 9999)],
    "range count": lambda s: s.range_count(),
    "unacked": lambda s: s.unacked(0, 3000, 40),
    "held": lambda s: s.held(),
    "charge": lambda s: s.charge(),
    "top": lambda s: s.top(),
    "low": lambda s: s.low,
    "acks of": lambda s: s.acks_of(0),
    "an ack": lambda s: s.ack_range(0, 0),
    "an ack at the end": lambda s: s.ack_range(2499, 2600),
    "deliveries": lambda s: s.deliver_positions([(1, e) for e in range(40)]),
    "a reset": lambda s: s.reset(1, 900),
}


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
@pytest.mark.parametrize("use", list(_FIRST_USES))
def test_a_lazy_opens_form_reads_its_record_at_its_first_use(tmp_path: Path, use: str) -> None:
    """A lazy open of a holey cursor (one record of M's ledger, acks alone, nothing since)
    checks the record but for the decode and keeps it (``unread``) with the ranges it states;
    the form's first use, whatever it is, reads the runs first, and from then on the form is
    the eager open's: the same answer, and every field and reading the same after it."""
    path = tmp_path / "a"
    _play(path, [[_holes]], True)
    lazy, eager = _lazy_pair(path)
    assert lazy.unread and not eager.unread and (lazy.n, lazy.top()) == (eager.n, eager.top()) == (560, 2499)
    first = _FIRST_USES[use]
    assert first(lazy) == first(eager) and not lazy.unread
    assert form_fields(lazy) == form_fields(eager)
    check_small(lazy, (1, -1))


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
def test_a_lazy_open_reads_lazily_only_a_record_of_acks_alone_with_nothing_since(tmp_path: Path) -> None:
    """Delivery counts in the record, or acks since it (a delta marker), and the lazy open
    reads the runs at once, as the eager one does."""
    path = tmp_path / "a"
    _play(path, [[_holes, _deliver(0)]], True)
    assert not _lazy_pair(path)[0].unread
    _play(path, [[_acks(2)]], False)
    assert not _lazy_pair(path)[0].unread


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
def test_a_lazy_opens_record_that_does_not_decode_says_so_at_its_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose checksum holds but whose code does not decode (a writer's fault): the
    lazy open takes it, and its first use raises CorruptRecordError naming the cursor and the
    ledger, changing nothing (the next use says it again); an eager open leaves it to
    recovery."""
    path = tmp_path / "a"
    _play(path, [[_holes]], True)
    with _log_of(path, write=True) as (txn, db):
        ((key, value),) = [
            (bytes(k), v) for k, v in txn.cursor(db=db) if records.record_type(v) == records.RECORD_LEDGER
        ]
        body = msgpack.unpackb(bytes(value)[7:], strict_map_key=False)
        at = next(i for i, x in enumerate(body) if isinstance(x, bytes) and len(x) > 100)
        code = bytearray(body[at])
        code[-1] ^= 0xFF  # (the high part's last bits: more values than the count says)
        body[at] = bytes(code)
        txn.put(key, records.encode_record(records.RECORD_LEDGER, msgpack.packb(body)), db=db)
    from ackstore import store_cursors

    monkeypatch.setattr(store_cursors, "form_read", form_read)  # (the suite's check would read it at the open)
    lazy, eager = _lazy_pair(path)
    assert lazy is not None and lazy.unread and eager is None
    for _ in range(2):
        with pytest.raises(CorruptRecordError, match=r"cursor id \d+: the record of ledger 1 .* 560 ranges"):
            lazy.acked(5)
        assert lazy.unread and lazy.n == 560


@pytest.mark.skipif(native is None, reason="the compiled open is the built module's")
def test_a_lazy_open_of_holey_cursors_answers_and_flushes_as_the_eager_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of holey cursors reopened lazily (its forms not read by the suite's check at
    the open): each cursor answers is_acked, takes acks and flushes; reopened eagerly, every
    cursor holds what a model of its acks holds."""
    from ackstore import store_cursors

    monkeypatch.setattr(store_cursors, "form_read", form_read)  # (the forms as the open leaves them)
    path, rng = tmp_path / "a", random.Random(8)
    model: dict[str, set[int]] = {}
    store, topic = _store(path)
    topic.add_ledger(1)
    topic.close_ledger(1, 3000)
    topic.add_ledger(2)
    for c in range(4):
        acked = set(range(1, 3000)) - set(rng.sample(range(1, 3000), 800))
        topic.cursor(f"c{c}", CFG).ack_entries(1, sorted(acked))
        model[f"c{c}"] = acked
    store.close()
    with AckStore.open(path, load="lazy") as store:
        curs = store.topic(T).open_cursors(CFG)
        assert all(cur._core.small is not None and cur._core.small.unread for cur in curs.values())
        for name, cur in curs.items():
            e = rng.randrange(1, 3000)
            assert cur.is_acked(Position(1, e)) == (e in model[name])
            cur.ack(Position(1, e))
            model[name].add(e)
            cur._check()
        store.flush()
    with AckStore.open(path, load="budget") as store:
        for name, cur in store.topic(T).open_cursors(CFG).items():
            md = cur.mark_delete_position
            held = {e for e in range(3000) if cur.is_acked(Position(1, e))}
            assert held == {e for e in range(3000) if e in model[name] or e <= md[1]} and md[0] == 1


def _random_steps(path: Path, seed: int) -> int:
    """One seeded run of random steps on a holey cursor (3,000 entries of a sealed ledger,
    600 to 2,000 holes) against a model of its acks: one ack or a list, a delivery, a read
    of one entry and of the mark-delete position, M's next entry acked, a flush, and a
    reopen (lazily most often: the form's record waits for its first use); the cursor's own
    check after every step, and an eager reopen at the end holding the model's acks.
    Returns how many reopens left a form unread."""
    rng, n = random.Random(seed), 3000
    acked = set(range(1, n)) - set(rng.sample(range(1, n), rng.choice([600, 1200, 2000])))
    store = AckStore.open(path, sync=False)
    topic = store.topic(T)
    topic.add_ledger(1)
    topic.close_ledger(1, n)
    topic.add_ledger(2)
    cur = topic.cursor("c", CFG)
    cur.ack_entries(1, sorted(acked))
    store.flush()
    unread = 0
    try:
        for _ in range(60):
            r, md = rng.random(), cur.mark_delete_position
            if r < 0.15:
                store.close()
                store = AckStore.open(path, sync=False, load=rng.choice(["lazy", "lazy", "budget"]))
                cur = store.topic(T).open_cursors(CFG)["c"]
                unread += bool(getattr(cur._core.small, "unread", False))
            elif r < 0.45:
                entries = [rng.randrange(n) for _ in range(rng.choice([1, 1, 5, 50]))]
                cur.ack(Position(1, entries[0]) if len(entries) == 1 else [Position(1, e) for e in entries])
                acked |= set(entries)
            elif r < 0.55:
                e = rng.randrange(n)
                if e not in acked and e > md[1]:
                    cur.record_deliveries([Position(1, e)])
            elif r < 0.7:
                e, m = rng.randrange(n), -1
                while m + 1 in acked:
                    m += 1
                assert cur.is_acked(Position(1, e)) == (e in acked or e <= m) and md == Position(1, m), (seed, e)
            elif r < 0.8:
                cur.ack(Position(1, md[1] + 1))
                acked.add(md[1] + 1)
            else:
                store.flush()
            cur._check()
        store.flush()
    finally:
        store.close()
    with AckStore.open(path, load="budget") as store:
        again = store.topic(T).open_cursors(CFG)["c"]
        m = again.mark_delete_position[1]
        assert {e for e in range(n) if again.is_acked(Position(1, e))} == {e for e in range(n) if e in acked or e <= m}
    return unread


def test_holey_cursors_opened_lazily_follow_a_model_through_random_steps(tmp_path: Path, long_run: bool) -> None:
    """Seeded runs of :func:`_random_steps` (24, or 200 with ``--long``): every answer and the
    reopened state the model's, and the lazy form left unread by some of the reopens (the
    suite's check holds each open against an eager read and the Python twin)."""
    seeds = range(200 if long_run else 24)
    unread = sum(_random_steps(tmp_path / f"s{seed}", seed) for seed in seeds)
    assert unread > 0 or native is None


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_records_acks_since_are_taken_above_m_and_the_entry_after_it(impl: Any) -> None:
    """The acks since a record that a chain's markers name are the form's from M + 2 on; one
    at M + 1 would move M (the open leaves that to recovery: None). Arguments of the wrong
    type are refused alike."""
    good = _record([(5, 9)], {})

    def call(adds: list[int], props: Any = b"") -> Any:
        item = (40, 0, 1000, good, -1)
        return impl.small_of_record(7, 40, -1, 9, 1, 0, 4096, props, (item,), records.FORMAT_VERSION, adds, {})

    assert call([1]).runs() == [(1, 1), (5, 9)]  # (M + 2: entry 0, M + 1, stays a hole)
    assert call([2, 12]).runs() == [(2, 2), (5, 9), (12, 12)]
    assert call([0]) is None
    with pytest.raises(TypeError, match=r"^small_of_record(\(cursor_id|'s props are bytes, its records a tuple)"):
        call([], props="")  # (the compiled twin's words are its signature)
