"""A holey cursor reopens straight into its small form: when its newest marker names M's
ledger's record alone (a chain its form wrote, or its parts' chain of a cursor over a slot's
bound), the open reads the marker, its delta chain and the record into the form and adopts
the chain, instead of recovering the parts and waiting for their next full marker. It holds
exactly what recovery holds, and its next flushes extend the chain as if it never closed."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.cursor.small import IMPLEMENTATIONS, check_small, set_form_chains
from ackstore.ledger_acks import LedgerAcks, bitmap_of_runs, run_bounds
from ackstore.storage import pure_acks, records

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


def test_a_cursor_holding_state_past_ms_ledger_is_recovered(tmp_path: Path) -> None:
    """A chain naming more ledgers than M's opens through recovery, as before (the form's
    chain names M's ledger's record alone), holding what it held."""
    store, topic = _store(tmp_path / "s")
    topic.add_ledger(1)
    cur = topic.cursor("wide", CFG)
    _holes(cur)
    topic.close_ledger(1, 5000)
    topic.add_ledger(2)
    cur.ack_entries(2, range(1, 200, 2))
    store.flush()
    expected = cur.snapshot()
    store.close()
    in_form, state = _state(tmp_path / "s", True, "wide")
    assert not in_form and state == expected


def _record(acks: list[tuple[int, int]], counts: dict[int, int], cursor_id: int = 7) -> bytes:
    la = LedgerAcks(bitmap_of_runs(acks), {}, dict(counts))
    return records.encode_ledger(40, la, cursor_id)


@settings(max_examples=150, deadline=None)
@given(
    holes=st.frozensets(st.integers(0, 3000), min_size=1, max_size=80),
    at=st.integers(0, 100),
    shift=st.sampled_from([0, 0, 0, 1]),
    counts=st.dictionaries(st.integers(0, 3100), st.integers(1, 9), max_size=6),
    adds=st.frozensets(st.integers(0, 3100), max_size=6),
    since=st.dictionaries(st.integers(0, 3100), st.integers(1, 9), max_size=4),
)
def test_the_twins_read_a_record_into_the_same_form(
    holes: frozenset[int],
    at: int,
    shift: int,
    counts: dict[int, int],
    adds: frozenset[int],
    since: dict[int, int],
) -> None:
    """``small_of_record`` of both twins on the same record (acks with holes, delivery
    counts) with acks and counts since: the same form or both None; when taken, the form
    holds the record's acks above M with the adds, the counts of unacked entries above M
    (the newer winning), and nothing M + 1 would move M over."""
    md_e = sorted(holes)[at % len(holes)] - 1 + shift  # (mostly M before a hole, as a cursor keeps it)
    acks = [(a, b - 1) for a, b in _gaps(holes, 3000)]
    counts = {e: n for e, n in counts.items() if not _in(acks, e)}
    value = _record(acks, counts)
    outs = [
        impl.small_of_record(7, 40, md_e, 9, 1, 0, 4096, b"", value, records.FORMAT_VERSION, -1, sorted(adds), since)
        for impl in IMPLEMENTATIONS
    ]
    held = [None if s is None else (s.runs(), s.counts(), s.n, s.persisted, s.dirty, s.md_e) for s in outs]
    assert all(h == held[0] for h in held), held
    acked = bitmap_of_runs(acks) | BitMap(adds)
    moves = md_e + 1 in acked or any(md_e < e and e in acked for e in since)
    one_pass = pure_acks.ledger_bounds(value, records.RECORD_LEDGER, records.FORMAT_VERSION) is not None
    assert (outs[0] is None) == (moves or not one_pass), (md_e, moves, one_pass)
    event("taken" if outs[0] is not None else "left to recovery")
    if outs[0] is None:
        return
    expect_runs = [(a, b) for a, b in run_bounds(acked) if b > md_e]
    expect_counts = {e: n for e, n in {**counts, **since}.items() if e > md_e and e not in acked}
    assert outs[0].runs() == expect_runs and dict(outs[0].counts()) == expect_counts
    for s in outs:
        s.base = -2  # (as the open leaves it: the log holds its state)
        s.bound(0, (), 1 << 20)
        check_small(s, (40, -1))


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


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_record_the_open_does_not_read_in_one_pass_is_left_to_recovery(impl: Any) -> None:
    """Another cursor's record, another ledger's, a damaged one, one stating other runs
    than asked, one with a partial batch: None (recovery reads them and names damage)."""
    good = _record([(1, 5), (7, 900)], {6: 2})
    args = (7, 40, -1, 9, 1, 0, 4096, b"", good, records.FORMAT_VERSION, -1, [], {})
    assert impl.small_of_record(*args) is not None
    batch = records.encode_ledger(40, LedgerAcks(bitmap_of_runs([(1, 900)]), {950: (4, 0b1)}, {}), 7)
    bad = {
        "another cursor's": _record([(1, 5), (7, 900)], {}, 8),
        "another ledger's": records.encode_ledger(41, LedgerAcks(bitmap_of_runs([(1, 900)]), {}, {}), 7),
        "damaged": good[:-3] + bytes([good[-3] ^ 1]) + good[-2:],
        "a partial batch": batch,
    }
    for why, value in bad.items():
        assert impl.small_of_record(*args[:8], value, *args[9:]) is None, why
    assert impl.small_of_record(*args[:10], 5, *args[11:]) is None  # (it states 2 runs)
    assert impl.small_of_record(*args[:10], 2, *args[11:]) is not None
    with pytest.raises(TypeError):
        impl.small_of_record(*args[:8], "not bytes", *args[9:])


def test_the_open_looks_into_a_marker_naming_ms_ledger_alone_and_no_other() -> None:
    """The look before resolving a newest marker (``records.names_m_alone``) says yes for a
    marker naming the mark-delete ledger alone, in either layout, and no for one naming
    another ledger or more, a ledger record, a msgpack marker too large to look into, and
    bytes of no record."""
    entry = records.IndexEntry(3, 40, None, None)
    other = records.IndexEntry(4, 2, None, None)

    def fixed(items: list[Any]) -> bytes:
        return records.encode_fixed_marker(3, (1, 5), (1, 6), {}, items, 7, True)

    def packed(index: dict[int, Any], props: dict[str, Any] | None = None) -> bytes:
        marker = records.Marker(True, 3, (1, 5), (1, 6), props or {}, index, extra={"c": 7})
        return records.encode_marker(marker)

    yes = {"fixed": fixed([(1, entry)]), "msgpack": packed({1: entry})}
    no = {
        "fixed, another ledger": fixed([(2, entry)]),
        "fixed, two ledgers": fixed([(1, entry), (2, other)]),
        "msgpack, two ledgers": packed({1: entry, 2: other}),
        "msgpack, too large to look into": packed({1: entry}, {"p": "x" * 2000}),
        "a ledger record": _record([(1, 5)], {}),
        "no record": b"\xc1\x02\x0e",
    }
    assert all(records.names_m_alone(v) for v in yes.values())
    assert not [why for why, v in no.items() if records.names_m_alone(v)]
