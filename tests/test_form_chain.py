"""The small form's own chain: a state over the bound a state slot takes goes under the
cursor's log keys, a base (the whole state) and then delta markers of the acks and delivery
counts since; the twins write the same bytes and trims, and what they wrote, trims applied,
recovers to the form's state."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore.cursor import small as small_form
from ackstore.cursor.small import DELTA_MOST, IMPLEMENTATIONS, check_small
from ackstore.cursor.small_span import ledger_counts, ledger_runs
from ackstore.ledger_acks import bitmap_of_runs, run_bounds
from ackstore.storage import records
from ackstore.storage.log import MemoryLog, recover_cursor

CID, LEDGER = 7, 40
VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, _, MAX_ACKS, _ = small_form.flush_format()
MAX_RUNS = 2
"""a slot takes states of at most this many ranges here: most states go to the chain"""


def _puts(puts: Any) -> list[tuple[bytes, bytes]]:
    return [(bytes(k), bytes(v)) for k, v in puts]


def _flush(
    impl: Any, s: Any, trims: list[Any], max_acks: int = MAX_ACKS, max_runs: int = MAX_RUNS
) -> tuple[list[tuple[bytes, bytes]], int, list[Any]]:
    """One group flush of ``s`` as the store's makes it: ``flush_small``, then the new chains."""
    based: list[Any] = []
    puts, nbytes, over, deltas = impl.flush_small(
        [s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, max_runs, max_acks, 1, None, trims, based
    )
    assert deltas == (s.deltas > 0 and s.marker == s.next_seq - 1 and len(_puts(puts)) == 1)
    more, nbytes_based, _, _ = small_form.flush_bases(based, VERSION, max_acks, trims, over)
    written = _puts(puts) + more
    assert nbytes + nbytes_based == sum(len(k) + len(v) for k, v in written)  # (the flush's figure: keys and values)
    return written, nbytes + nbytes_based, list(over)


def _trim(log: dict[bytes, bytes], below: int, keeps: tuple[int, ...]) -> None:
    """What the group flush's scan trim does to the form's cursor (``log.trim_records``)."""
    lo, hi = records.log_bounds(CID)
    for key in [k for k in log if lo <= k < hi]:
        seq = records.split_log_key(key)[1]
        if seq < below and seq not in keeps:
            del log[key]
    for slot in (0, 1):
        key = records.slot_key(CID, slot)
        if key in log and (seq := records.slot_seq(log[key])[0]) < below and seq not in keeps:
            del log[key]


def _recovered(log: dict[bytes, bytes]) -> tuple[tuple[int, int], dict[int, Any], dict[int, Any]]:
    state = recover_cursor(MemoryLog(dict(log)), None, CID, None, "all")
    assert state.resolved is not None and not state.report.skipped_reasons
    md = state.resolved.marker.mark_delete
    if md[0] in state.ledgers:  # (M's ledger's record may hold acks M passed since: a cursor drops them at open)
        state.ledgers[md[0]].drop_through(md[1])
    assert all(state.ledgers.values()), "a ledger named with nothing in it"  # (the parts keep none such)
    runs = {lg: run_bounds(la.bitmap) for lg, la in state.ledgers.items() if len(la.bitmap)}
    counts = {lg: dict(la.counts) for lg, la in state.ledgers.items() if la.counts}
    return md, runs, counts


def _held(s: Any) -> tuple[tuple[int, int], dict[int, Any], dict[int, Any]]:
    counts: dict[int, dict[int, int]] = {}
    for (ledger, entry), n in ledger_counts(s):
        counts.setdefault(ledger, {})[entry] = n
    return (s.md_l, s.md_e), dict(ledger_runs(s)), counts


def _chain(s: Any) -> tuple[Any, ...]:
    return (
        s.base, s.marker, s.deltas, s.chain_bytes, s.base_bytes, s.tail, s.fresh, s.every, s.slot, s.slots,
        s.next_seq, s.md_l, s.md_e, s.runs(), s.counts(), s.batches(), s.dirty, s.persisted, s.spans, s.touched,
        s.cut_at,
    )  # fmt: skip


def _chained(
    impl: Any, spans: tuple[tuple[int, int], ...], acked: Any, slot: int = 0, slots: int = 1, every: int = 0
) -> tuple[Any, dict[bytes, bytes], list[Any], list[tuple[bytes, bytes]]]:
    """A form at M = 9 of ledger ``LEDGER``, its line ``spans`` (up to entry 300), ``acked``
    entries acked, its newest state in ``slot`` of ``slots``, ``every`` delta markers at most
    (and ~1 KB of properties: no garbage's trim soon) when given, then flushed: the first
    base of its chain. ``(form, log, trims, puts)``, the log holding what the flush wrote."""
    s = impl.SmallState(CID, LEDGER, 9, 5, slot, slots, [], 1 << 12)
    if every:
        s.every = every
        s.set_props(records.pack_properties({"p": "x" * 1000}))
    assert not s.bound(0, spans, 300)
    for e in acked:
        s.ack_range(e, e)
    trims: list[Any] = []
    puts, _, over = _flush(impl, s, trims, max_acks=2 if every else MAX_ACKS)
    assert over == [] and s.base >= 0
    return s, dict(puts), trims, puts


def _next(s: Any) -> int:
    """The last entry of the ledger after M's on the form's line (its limit when it is the last)."""
    return s.spans[1][1] - 1 if len(s.spans) > 1 else s.limit


OPS = st.one_of(
    st.tuples(st.just("ack"), st.integers(0, 140), st.integers(0, 3)),
    st.tuples(st.just("acks"), st.lists(st.integers(0, 140), max_size=6), st.just(0)),
    st.tuples(st.just("acks"), st.lists(st.integers(0, 140), max_size=6), st.just(0)),
    st.tuples(st.just("deliver"), st.lists(st.integers(0, 140), max_size=4), st.integers(0, 1)),
    st.tuples(st.just("batch"), st.integers(0, 140), st.integers(1, 7)),
    st.tuples(st.just("seal"), st.integers(0, 140), st.just(0)),
    st.tuples(st.just("reset"), st.integers(0, 140), st.just(0)),
    st.tuples(st.just("property"), st.integers(0, 9), st.just(0)),
    st.just(("flush", 0, 0)),
    st.just(("flush", 0, 0)),
    st.just(("undo", 0, 0)),
)


@settings(max_examples=200, deadline=None)
@given(
    start=st.frozensets(st.integers(2, 120), max_size=12),
    every=st.integers(1, 5),
    from_parts=st.booleans(),
    max_acks=st.sampled_from([2, 9, 40]),
    max_runs=st.sampled_from([MAX_RUNS, MAX_RUNS, -1]),
    persist=st.sampled_from([0, 0, 3, 7]),
    ops=st.lists(OPS, min_size=20, max_size=80),
)
def test_the_twins_write_one_chain_and_it_recovers_to_the_forms_state(
    start: frozenset[int],
    every: int,
    from_parts: bool,
    max_acks: int,
    max_runs: int,
    persist: int,
    ops: list[tuple[str, Any, int]],
) -> None:
    """Both twins through the same acks, delivery counts, partial batches, rollovers, resets,
    flushes and undone flushes (a slot taking at most two ranges: the chain most of the
    time) hold the same fields and write the same pairs and trims; after every flush, the
    log as the write leaves it (its trims applied) recovers to the form's mark-delete
    position, runs and delivery counts, or, over its PIP-299 cap (``persist``), to the
    lowest ``persist`` ranges of them and the counts below the last (a cut state a slot
    does not take is one state marker under its log key); a delta marker is never the
    first state of a chain nor past ``every`` of them."""
    runs = [(e, e) for e in sorted(start) if e % 2 == 0 and e > 1]
    forms = [impl.SmallState(CID, LEDGER, 0, 5, 0, 1, runs, 1 << 12) for impl in IMPLEMENTATIONS]
    logs: list[dict[bytes, bytes]] = []
    for s in forms:
        s.every = every
        s.persist = persist
        s.base = -2 if from_parts else -1
        assert not s.bound(0, (), 200)
        logs.append({})
    last: list[dict[bytes, bytes]] | None = None  # the logs before the last flush that wrote
    written = False  # a state is in the logs (the first flush writes the whole state)
    version = 0
    for op, a, b in ops:
        edge = forms[0].spans[0][1] if forms[0].spans else 200
        if op == "ack" and a <= forms[0].limit:
            top = min(a + b, forms[0].limit)
            for s in forms:
                s.ack_range(a, top)
        elif op in ("acks", "deliver"):  # (positions of M's ledger, and of the next one once it is on the line)
            s0 = forms[0]
            items = [(s0.md_l, e) for e in a if s0.md_e < e < edge]
            items += [(s0.spans[0][0], e - edge) for e in a if s0.spans and edge <= e <= min(s0.limit, _next(s0))]
            values = [e % 4 + 1 for _, e in items]  # (b = 1: counts set by hand)
            got = [
                s.ack_positions(items)
                if op == "acks"
                else s.set_counts(items, values)
                if b
                else s.deliver_positions(items)
                for s in forms
            ]
            assert len({repr(g) for g in got}) == 1
        elif op == "batch":
            outcomes = set()
            for s in forms:
                try:
                    s.ack_batch(a, 3, b)
                    outcomes.add("ok")
                except ValueError as exc:
                    outcomes.add(str(exc))
            assert len(outcomes) == 1
        elif op == "seal":
            s0 = forms[0]
            if len(s0.spans) < 2:  # (the ledger after M's, then the one after that)
                end = max(a, s0.top() + 1, s0.rp_e, s0.md_e + 2, s0.spans[-1][1] if s0.spans else 0)
                version += 1
                spans = (*s0.spans, (s0.md_l + 1 + len(s0.spans), end))
                assert len({s.bound(version, spans, end + 60) for s in forms}) == 1
        elif op == "reset":
            version += 1
            for s in forms:
                s.reset(s.md_l, a)
                s.bound(version, (), 200)
        elif op == "property":
            for s in forms:
                s.set_props(records.pack_properties({"p": a}) if a else b"")
        elif op == "flush":
            before = [dict(log) for log in logs]
            outs = []
            for impl, s, log in zip(IMPLEMENTATIONS, forms, logs, strict=True):
                trims: list[Any] = []
                was = s.base, s.marker, s.deltas, s.fresh
                puts, nbytes, over = _flush(impl, s, trims, max_acks, max_runs)
                outs.append((puts, nbytes, len(over), [(below, keeps) for _, below, keeps in trims]))
                for _, below, keeps in trims:
                    _trim(log, below, keeps)
                log.update(puts)
                if puts and s.marker == s.next_seq - 1 and s.deltas:  # a delta marker (after new records, if any)
                    assert was[0] >= 0 and was[3] == 0 and s.marker == was[1] + len(puts) == s.next_seq - 1
                assert s.deltas <= s.every
            assert all(out == outs[0] for out in outs), outs
            last = before if outs[0][0] else None  # (an undo gives back this flush only)
            written = written or bool(outs[0][0])
        else:  # the write failed: given back
            for impl, s in zip(IMPLEMENTATIONS, forms, strict=True):
                impl.undo_small([s])
            if last is not None:
                logs, last = last, None
        assert all(_chain(s) == _chain(forms[0]) for s in forms), [_chain(s) for s in forms]
        for s in forms:
            check_small(s, (LEDGER, -1))
        cut = op == "flush" and forms[0].truncated and not outs[0][2]  # (a cut state written now, or that holds)
        if written and op in ("flush", "undo") and (not forms[0].dirty or cut):
            assert all(log == logs[0] for log in logs)
            held = _held(forms[0])
            assert _recovered(logs[0]) == (_cut(held, persist) if cut else held)


def _cut(held: tuple[tuple[int, int], dict[int, Any], dict[int, Any]], persist: int) -> tuple[Any, ...]:
    """What a PIP-299 flush persists of the state ``held`` (:func:`_held`'s): its lowest
    ``persist`` ranges, ledger by ledger, with the delivery counts of each ledger all of
    whose ranges are persisted, and of the one the cut goes through those below it."""
    md, runs, counts = held
    left, kept, kept_counts = persist, {}, {}
    for ledger in sorted(runs.keys() | counts.keys()):
        if left <= 0:
            break
        mine = list(runs.get(ledger, ()))
        end = mine[left - 1][1] if len(mine) > left else None  # (the cut goes through it, after that range)
        if mine[:left]:
            kept[ledger] = mine[:left]
        left -= len(mine)
        mine_counts = {e: n for e, n in counts.get(ledger, {}).items() if end is None or e < end}
        if mine_counts:
            kept_counts[ledger] = mine_counts
    return md, kept, kept_counts


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_form_never_written_begins_its_chain_with_a_first_state_over_a_slot(impl: Any) -> None:
    """A new cursor's form (its log holds nothing: sequence 0, no slot written) whose first
    state is over the slot bound begins a chain of its own as any form does: a record of its
    ledger under sequence 0 and a full marker under 1 that follows no marker (its ``prev``
    the fixed layout's none, read back as -1), which recovers to the form's state. The form
    keeps it: it is not left to its parts. Once a state was written (sequence 1 on) the
    same state begins a chain whose marker names the sequence before its records."""
    runs = [(e, e) for e in range(2, 20000, 300)]
    s = impl.SmallState(CID, LEDGER, 0, 0, 1, 0, runs, 1 << 12)
    s.bound(0, (), 1 << 20)
    s.set_props(b"")  # (changed: a flush writes it)
    trims: list[Any] = []
    puts, _, over = _flush(impl, s, trims)
    assert [k for k, _ in puts] == [records.log_key(CID, 0), records.log_key(CID, 1)] and over == [] and trims == []
    marker = records.decode_marker(puts[1][1], 1)
    assert (marker.full, marker.prev, sorted(marker.index)) == (True, -1, [LEDGER])
    assert (s.next_seq, s.base, s.marker, s.dirty) == (2, 1, 1, 0)
    assert _recovered(dict(puts)) == _held(s)
    s = impl.SmallState(CID, LEDGER, 0, 1, 1, 0, runs, 1 << 12)
    s.bound(0, (), 1 << 20)
    s.set_props(b"")
    puts, _, over = _flush(impl, s, trims)
    assert [k for k, _ in puts] == [records.log_key(CID, 1), records.log_key(CID, 2)] and over == []
    assert records.decode_marker(puts[1][1], 2).prev == 0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_cut_state_a_slot_does_not_take_is_one_state_marker_under_its_log_key(impl: Any) -> None:
    """Over its PIP-299 cap with more ranges persisted than a slot takes, the form writes its
    cut state whole, as a truncated state marker under its next log key (a chain of that
    one marker: no delta marker follows it), and stays dirty; while the cut holds nothing
    is written; a change below it writes the cut again and trims below the one before,
    which stays; an undone flush gives the chain back; back under the cap, the state goes
    to a slot again and the log keys go."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    s.persist = 3
    assert not s.bound(0, (), 300)
    for e in (11, 13, 15, 17, 19):  # 5 ranges, 3 persisted: more than a slot takes here
        s.ack_range(e, e)
    log: dict[bytes, bytes] = {}

    def flush() -> tuple[list[tuple[bytes, bytes]], list[Any]]:
        trims: list[Any] = []
        puts, _, over = _flush(impl, s, trims)
        assert over == []
        for _, below, keeps in trims:
            _trim(log, below, keeps)
        log.update(puts)
        return puts, [(below, keeps) for _, below, keeps in trims]

    assert flush() == ([(records.log_key(CID, 5), log[records.log_key(CID, 5)])], [])
    marker = records.decode_marker(log[records.log_key(CID, 5)], 5)
    assert marker.truncated and marker.full and marker.ledgers is not None
    assert (s.base, s.marker, s.deltas, s.fresh, s.dirty, s.truncated) == (5, 5, 0, 1, 1, 1)
    assert _recovered(log) == ((LEDGER, 9), {LEDGER: [(11, 11), (13, 13), (15, 15)]}, {})
    s.ack_range(21, 21)  # above the cut: it holds
    assert flush() == ([], []) and s.dirty
    s.ack_range(12, 12)  # below it: 11..13, 15, 17
    puts, trims = flush()
    assert [k for k, _ in puts] == [records.log_key(CID, 6)] and trims == [(5, ())]
    assert sorted(log) == [records.log_key(CID, 5), records.log_key(CID, 6)]
    assert _recovered(log) == ((LEDGER, 9), {LEDGER: [(11, 13), (15, 15), (17, 17)]}, {})
    before = _chain(s)
    s.ack_range(14, 14)  # 11..15, 17, 19, 21: still cut
    flush()
    impl.undo_small([s])  # (the write failed: its log as before)
    del log[records.log_key(CID, 7)]
    assert _chain(s)[:11] == before[:11] and s.dirty
    s.ack_range(16, 20)  # 11..21: one range, a slot's
    puts, trims = flush()
    assert [k for k, _ in puts] == [records.slot_key(CID, 1)] and trims == [(6, ())]
    assert (s.base, s.tail, s.truncated) == (-1, 1, 0)
    assert _recovered(log) == ((LEDGER, 9), {LEDGER: [(11, 21)]}, {})
    check_small(s, (LEDGER, 9))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_the_chain_names_a_record_with_the_acks_and_counts_since(impl: Any) -> None:
    """Over the slot bound, one ack and one delivery between flushes: the first flush writes
    M's ledger's record with the parts' codec and a full marker naming it; the next ones
    write small full markers naming the record and every ack and count since it, then,
    once those name more than ``SMALL_CHAIN`` bytes, delta markers of the acks since the
    last marker, a full one again when the deltas outgrow it (which trims below the full
    marker before it, but the record); past ``max_acks`` acks since the record, or M
    moving, a new record."""
    s = impl.SmallState(CID, LEDGER, 0, 5, 0, 1, [(e, e) for e in range(2, 20000, 300)], 1 << 12)
    s.bound(0, (), 1 << 20)
    s.set_props(b"")  # (changed: a flush writes it)
    trims: list[Any] = []
    puts, base_bytes, _ = _flush(impl, s, trims)
    assert [k for k, _ in puts] == [records.log_key(CID, 5), records.log_key(CID, 6)]
    assert (s.base, s.marker, s.record, s.fresh, trims) == (6, 6, 5, 0, [])
    assert records.decode_ledger_owned(puts[0][1])[0] == LEDGER and base_bytes < 300  # (a stride: a few bytes)
    marker = records.decode_marker(puts[1][1], 6)
    assert marker.full and marker.index[LEDGER].seq == 5 and not marker.index[LEDGER].adds
    s.ack_range(41, 41)  # (between the runs at 2 and 302)
    assert s.deliver_positions([(LEDGER, 45)]) == [1]
    ((key, value),), nbytes, _ = _flush(impl, s, trims)
    marker = records.decode_marker(value, 7)
    entry = marker.index[LEDGER]
    assert key == records.log_key(CID, 7) and nbytes < 80 and marker.full and marker.mark_delete == (LEDGER, 0)
    assert (entry.seq, entry.runs, list(entry.adds), entry.counts) == (5, s.n, [41], {45: 1})
    kinds = []
    for e in range(42, 42 + 30):
        s.ack_range(e * 2 + 600, e * 2 + 600)
        ((key, value),), nbytes, _ = _flush(impl, s, trims)
        seq = records.split_log_key(key)[1]
        marker = records.decode_marker(value, seq)
        kinds.append(marker.full)
        if not marker.full:
            assert list(marker.index[LEDGER].adds) == [e * 2 + 600] and marker.prev == seq - 1
    assert kinds[:14] == [True] * 14 and not all(kinds) and sum(kinds) > 15  # (full again once the deltas outgrow it)
    assert trims and all(keeps == (5,) for _, _, keeps in trims)
    for e in range(20, 20 + MAX_ACKS):  # more acks since the record than a marker names: a new record
        s.ack_range(e * 300 + 7, e * 300 + 7)
    puts, nbytes, _ = _flush(impl, s, trims)
    assert len(puts) == 2 and s.record == s.next_seq - 2 and trims[-1][2] == (5,)
    record = s.record
    s.ack_range(1, 1)  # M moves: M's ledger's record stands, its acks up to M one range more than above M
    assert (s.md_e, s.fresh, s.stale, s.passed) == (2, 0, 0, 1)
    ((key, value),), nbytes, _ = _flush(impl, s, trims)
    marker = records.decode_marker(value, records.split_log_key(key)[1])
    assert s.record == record and marker.index[LEDGER].seq == record and marker.index[LEDGER].runs == s.n + 1


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_state_past_ms_ledger_over_a_slot_keeps_a_record_of_each_ledger_holding_state(impl: Any) -> None:
    """Over a slot's bound with state in the ledgers after M's (a consumer that holds entries
    of a sealed ledger and reads on across rollovers): the chain's base is a record of each
    ledger of the line holding state, in the line's order, and a full marker naming them;
    the next states are markers naming each record with the acks and counts since it, in
    that ledger's own entries; a ledger with no record gaining state, or more acks since the
    records than a marker names, makes the next state a new base that records only those
    ledgers and a delta marker naming them and what changed since the last marker (the
    others' records stand); what was written recovers to the form's state."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    assert not s.bound(0, ((LEDGER + 1, 20), (LEDGER + 2, 100)), 300)
    for e in range(22, 60, 3):  # ranges in the next ledger only
        s.ack_range(e, e)
    trims: list[Any] = []
    log: dict[bytes, bytes] = {}
    puts, _, over = _flush(impl, s, trims)
    assert over == [] and [k for k, _ in puts] == [records.log_key(CID, 5), records.log_key(CID, 6)]
    assert (s.base, s.marker, s.records(), s.recs, s.fresh) == (6, 6, (5,), 0b10, 0)
    assert records.decode_ledger_owned(puts[0][1])[0] == LEDGER + 1
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(11, 11)  # M's ledger: no record yet, a new base recording it alone
    assert (s.fresh, s.stale) == (0, 0b01)
    puts, _, _ = _flush(impl, s, trims)
    assert [records.split_log_key(k)[1] for k, _ in puts] == [7, 8] and (s.records(), s.recs) == ((7, 5), 0b11)
    assert records.decode_ledger_owned(puts[0][1])[0] == LEDGER
    marker = records.decode_marker(puts[1][1], 8)  # a delta marker naming the new record alone: the chain goes on
    assert not marker.full and marker.prev == 6 and {lg: x.seq for lg, x in marker.index.items()} == {LEDGER: 7}
    assert (s.base, s.marker, s.deltas) == (6, 8, 1)
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(13, 13)
    s.ack_range(120, 121)  # (the third ledger: entries 20, 21)
    assert (s.fresh, s.stale) == (0, 0b100)  # (no record of the third ledger)
    puts, _, _ = _flush(impl, s, trims)
    assert (s.records(), s.recs, len(puts)) == ((7, 5, 9), 0b111, 2)
    log.update(puts)
    assert _recovered(log) == _held(s)
    for e in (15, 62, 125):  # one in each ledger: a marker naming the three records
        s.ack_range(e, e)
        assert not s.fresh and not s.stale
    s.deliver_positions([(LEDGER + 2, 30)])
    ((key, value),), _, _ = _flush(impl, s, trims)
    marker = records.decode_marker(value, records.split_log_key(key)[1])
    assert {lg: (x.seq, sorted(x.adds or ()), x.counts) for lg, x in marker.index.items()} == {
        LEDGER: (7, [13, 15], None),
        LEDGER + 1: (5, [42], None),
        LEDGER + 2: (9, [25], {30: 1}),
    }
    log[key] = value
    assert _recovered(log) == _held(s)
    for e in range(130, 130 + 2 * MAX_ACKS, 2):  # more acks since the records than a marker names, in one ledger:
        s.ack_range(e, e)
    puts, _, _ = _flush(impl, s, trims)  # its record alone is written again (the others' acks since: few)
    assert (s.records(), len(puts), s.named) == ((7, 5, s.next_seq - 2), 2, 3)
    assert all(keeps == (7, 5, 9) for _, _, keeps in trims)  # (a trim keeps the records the chain names)
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(131, 131)  # named by a marker, in the ledger whose record comes next
    ((key, value),), _, _ = _flush(impl, s, trims)
    log[key] = value
    s.ack_range(47, 47)  # the second ledger: acked since that marker, its record standing
    for e in range(133, 133 + 2 * MAX_ACKS, 2):
        s.ack_range(e, e)
    trims.clear()
    puts, _, _ = _flush(impl, s, trims)  # the third ledger's record, and a delta marker naming it and that ack
    marker = records.decode_marker(puts[-1][1], records.split_log_key(puts[-1][0])[1])
    assert len(puts) == 2 and not trims and not marker.full and s.base < s.marker
    assert {lg: (x.seq, sorted(x.adds or ())) for lg, x in marker.index.items()} == {
        LEDGER + 1: (5, [27]),
        LEDGER + 2: (s.next_seq - 2, []),
    }
    log.update(puts)
    assert _recovered(log) == _held(s)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_chain_keeps_a_record_of_any_ledger_of_the_line(impl: Any) -> None:
    """A chain holds records of ledgers anywhere on the form's line (it spans up to 255
    ledgers after M's), not only its first 64: a state far along the line is a base of
    records of those ledgers; the next states are markers naming the acks since them; M
    moving on across many ledgers keeps the records of the ledgers after it (their places
    on the line move down, across a word of the compiled twin's set of them); what was
    written recovers to the form's state at every step."""
    ledgers = 200
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    assert not s.bound(0, tuple((LEDGER + 1 + i, 20 + 10 * i) for i in range(ledgers)), 20 + 10 * ledgers)
    held_in = (63, 64, 65, 130, 199)  # the k-th ledgers of the line (0: M's)
    for k in held_in:
        for x in (1, 3, 5):
            s.ack_range(10 + 10 * k + x, 10 + 10 * k + x)
    trims: list[Any] = []
    log: dict[bytes, bytes] = {}
    puts, _, over = _flush(impl, s, trims)
    assert over == [] and len(puts) == len(held_in) + 1 and s.dirty == 0  # a record of each, and a full marker
    assert s.recs == sum(1 << k for k in held_in) and s.held() == s.recs and s.stale == 0
    log.update(puts)
    assert _recovered(log) == _held(s)
    for k in (65, 199):  # acks since the records: a marker names them
        s.ack_range(10 + 10 * k + 7, 10 + 10 * k + 7)
    puts, _, over = _flush(impl, s, trims)
    assert over == [] and len(puts) == 1 and s.marker == s.next_seq - 1
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(10, 10 + 10 * 70 - 1)  # M moves on to the line's 70th ledger: the records after it stand
    assert s.md_l == LEDGER + 70 and len(s.spans) == ledgers - 70
    assert s.recs == sum(1 << k - 70 for k in held_in if k > 70) and s.recs >= 1 << 64
    for e in (602, 604):  # (ledger 130, now the 60th at offset 600: acks since its record)
        s.ack_range(e, e)
        puts, _, over = _flush(impl, s, trims)
        assert over == [] and len(puts) == 1 and s.recs == sum(1 << k - 70 for k in held_in if k > 70)
        for _, below, keeps in trims:
            _trim(log, below, keeps)
        trims.clear()
        log.update(puts)
        assert _recovered(log) == _held(s)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_m_moving_in_its_ledger_names_its_record_as_it_stands(impl: Any) -> None:
    """A chain of records of three ledgers (a consumer holding entries of a sealed ledger,
    reading on in the next ones): M moving within its ledger, which still holds acks above
    it, writes a marker naming every record as it stands (M's ledger's counting the acks M
    passed, up to M, as one range more than it holds above M), not a record; M moving past
    the last acks of its ledger leaves that ledger nothing to name: the next base is a full
    marker alone, naming the other two records. Each recovers to the form's state."""
    spans = ((LEDGER + 1, 100), (LEDGER + 2, 200))
    s, log, trims, puts = _chained(impl, spans, (*range(12, 40, 2), *range(102, 140, 2), *range(202, 240, 2)))
    assert len(puts) == 4 and s.recs == 0b111
    before = s.records()
    s.ack_range(10, 11)  # M (9) moves over 10..12, ledger 0 still holds 14, 16, ...
    assert (s.md_e, s.fresh, s.stale, s.passed) == (12, 0, 0, 1)
    puts, _, _ = _flush(impl, s, trims)
    assert len(puts) == 1 and s.records() == before
    marker = records.decode_marker(puts[0][1], s.next_seq - 1)
    assert marker.mark_delete == (LEDGER, 12) and marker.index[LEDGER].runs == len(s.runs_of(0)) + 1
    log.update(puts)
    assert _recovered(log) == _held(s)
    for _ in range(3):  # M on again, a marker each time
        s.ack_range(s.md_e + 1, s.md_e + 1)
        ((key, value),), _, _ = _flush(impl, s, trims)
        log[key] = value
        assert _recovered(log) == _held(s) and s.records() == before
    s.ack_range(103, 103)  # a marker again: the records stand
    ((key, value),), _, _ = _flush(impl, s, trims)
    log[key] = value
    assert _recovered(log) == _held(s)
    for e in range(13, 40, 2):  # M moves past every ack of its ledger: nothing of it to record
        s.ack_range(e, e)
    assert s.md_e > 38 and not s.runs_of(0)
    puts, _, _ = _flush(impl, s, trims)
    assert len(puts) == 1 and s.recs == 0b110 and s.records() == before[1:]  # (a full marker alone: M's record goes)
    assert set(records.decode_marker(puts[0][1], s.next_seq - 1).index) == {LEDGER + 1, LEDGER + 2}
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log.update(puts)
    assert _recovered(log) == _held(s)
    check_small(s, (LEDGER, 9))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
@pytest.mark.parametrize("at_once", [False, True], ids=["in-order-first", "into-the-record-at-once"])
def test_m_moving_below_what_its_record_holds_names_nothing_it_passed(impl: Any, at_once: bool) -> None:
    """A consumer acking in order one entry at a time below the acks its ledger's record
    holds (700 scattered ones, from entry 200): each flush is a marker naming no ack and
    counting the ranges above M, as the parts' marker would (the acks M passed are implied
    by M). Once M reaches the record's acks, after acks it left unnamed, the ledger's record
    is due and the next base writes it; M reaching them at once (nothing left unnamed) names
    the acks since as one range more, as before. Each state recovers to the form's."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    for e in range(200, 1600, 2):
        s.ack_range(e, e)
    trims: list[Any] = []
    log: dict[bytes, bytes] = {}
    puts, _, over = _flush(impl, s, trims)
    assert over == [] and len(puts) == 2 and s.recs == 0b1 and s.low == 200
    log.update(puts)
    record = s.records()
    if not at_once:
        for e in range(10, 20):
            s.ack_range(e, e)
            ((key, value),), _, _ = _flush(impl, s, trims)
            marker = records.decode_marker(value, s.next_seq - 1)
            entry = marker.index.get(LEDGER)  # (a delta marker names no ledger that changed past M)
            assert marker.mark_delete == (LEDGER, e) and len(value) < 60, (marker, len(value))
            assert entry is None or (entry.adds, entry.runs) == (None, 700), entry
            assert (s.passed, s.dropped, s.records()) == (0, 1, record)
            log[key] = value
            assert _recovered(log) == _held(s)
    s.ack_range(s.md_e + 1, 199)  # M reaches the record's first ack (200)
    assert s.md_e == 200 and (s.passed, s.stale) == ((1, 0) if at_once else (0, 1))
    puts, _, _ = _flush(impl, s, trims)
    if at_once:  # a marker: the acks since it as one range more
        ((_, value),) = puts
        entry = records.decode_marker(value, s.next_seq - 1).index[LEDGER]
        assert entry.runs == 700 and len(entry.adds) == 190 and s.records() == record
    else:  # a new base: the ledger's record written again, above M alone
        assert len(puts) == 2 and s.records() != record and (s.dropped, s.low) == (0, 202)
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log.update(puts)
    assert _recovered(log) == _held(s)
    check_small(s, (LEDGER, 9))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_m_moving_on_into_the_next_ledger_keeps_the_records_after_it(impl: Any) -> None:
    """A chain of records of three ledgers: M's ledger acked whole, M moves on into the next
    one (a rebase): the records of the two ledgers after it stand, and a full marker names
    them, not the ledger M left; acks after it are a marker again. What was written recovers
    to the form's state at every step."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    assert not s.bound(0, ((LEDGER + 1, 100), (LEDGER + 2, 200)), 300)
    s.ack_range(10, 49)
    s.ack_range(51, 119)
    for e in (*range(121, 130), *range(131, 160, 2), *range(202, 240, 2)):
        s.ack_range(e, e)
    trims: list[Any] = []
    log: dict[bytes, bytes] = {}
    puts, _, _ = _flush(impl, s, trims)
    assert len(puts) == 4 and s.recs == 0b111 and s.md_e == 49
    log.update(puts)
    third = s.records()[2]
    second = s.records()[1]
    s.ack_range(50, 50)  # M runs on to the end of its ledger, and on into the next
    assert (s.md_l, s.md_e, s.fresh, s.recs, s.stale, s.passed) == (LEDGER + 1, 19, 0, 0b11, 0, 1)
    puts, _, _ = _flush(impl, s, trims)  # a full marker naming the two records as they stand
    assert len(puts) == 1 and s.records() == (second, third)
    marker = records.decode_marker(puts[0][1], s.next_seq - 1)
    assert marker.full and {lg: x.seq for lg, x in marker.index.items()} == {LEDGER + 1: second, LEDGER + 2: third}
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(41, 41)  # (the form's entries now: the second ledger's from 0, the third's from 100)
    s.ack_range(105, 105)
    ((key, value),), _, _ = _flush(impl, s, trims)  # a marker naming the two records
    log[key] = value
    assert _recovered(log) == _held(s)
    s.ack_range(20, 20)
    s.ack_range(30, 99)  # M on across the second ledger, into the third: its record stands as the only one
    assert (s.md_l, s.md_e, s.recs, s.passed) == (LEDGER + 2, -1, 0b1, 0)
    puts, _, _ = _flush(impl, s, trims)  # a full marker naming it alone
    assert len(puts) == 1 and s.records() == (third,)
    named = records.decode_marker(puts[0][1], s.next_seq - 1).index
    assert {lg: x.seq for lg, x in named.items()} == {LEDGER + 2: third}
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log.update(puts)
    assert _recovered(log) == _held(s)
    check_small(s, (LEDGER + 2, -1))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_m_moving_on_onto_the_next_ledgers_first_entry_counts_its_run(impl: Any) -> None:
    """The edge of the rebase above: the next ledger's record holds its entry 0 acked and
    not entry 1, so M moves on to exactly (next ledger, 0). That record stands, holding M's
    run (entry 0) as one range more than the form holds above M; the marker counts it, and
    what was written recovers to the form's state."""
    s, log, trims, puts = _chained(impl, ((LEDGER + 1, 100),), (*range(12, 40, 2), 100, *range(102, 140, 2)))
    assert len(puts) == 3 and s.recs == 0b11
    second = s.records()[1]
    s.ack_range(10, 99)  # M's ledger acked whole: M on into the next, onto its entry 0
    assert (s.md_l, s.md_e, s.recs, s.stale, s.passed) == (LEDGER + 1, 0, 0b1, 0, 1)
    puts, _, _ = _flush(impl, s, trims)
    assert len(puts) == 1 and s.records() == (second,)
    marker = records.decode_marker(puts[0][1], s.next_seq - 1)
    assert marker.mark_delete == (LEDGER + 1, 0) and marker.index[LEDGER + 1].runs == len(s.runs_of(0)) + 1
    log.update(puts)
    assert _recovered(log) == _held(s)
    s.ack_range(105, 105)  # (the form's entries now: the second ledger's from 0)
    ((key, value),), _, _ = _flush(impl, s, trims)
    log[key] = value
    assert _recovered(log) == _held(s)
    check_small(s, (LEDGER + 1, -1))


def test_an_adopted_chain_names_the_acks_since_its_parts_record() -> None:
    """A form adopting its parts' chain takes the acks and counted entries their full marker
    named since the record: its next full marker names them with the ones since (both twins,
    the same bytes); more than the chain names, or an entry outside the layout, is refused."""
    outs = []
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, 0, 10, 0, 1, [(e, e) for e in range(2, 2000, 3)], 1 << 12)
        s.bound(0, (), 1 << 20)
        s.base = -2
        s.adopt(9, 9, 4, 100, [5, 8], [])
        assert (s.base, s.marker, s.record, s.named, s.cnamed, s.fresh) == (9, 9, 4, 2, 0, 0)
        s.ack_range(12, 12)
        puts, _, _ = _flush(impl, s, [])
        ((key, value),) = puts
        marker = records.decode_marker(value, 10)
        entry = marker.index[LEDGER]
        assert key == records.log_key(CID, 10) and marker.full and marker.prev == 9
        assert (entry.seq, list(entry.adds), entry.runs) == (4, [5, 8, 12], s.n)
        outs.append(puts)
        for adds, error in (([5] * (DELTA_MOST + 1), ValueError), ([1 << 32], ValueError), (["5"], TypeError)):
            other = impl.SmallState(CID, LEDGER, 0, 10, 0, 1, [(5, 5)], 1 << 12)
            other.base = -2
            with pytest.raises(error):
                other.adopt(9, 9, 4, 100, adds, [])
            assert (other.base, other.fresh) == (-2, 1)
    assert all(out == outs[0] for out in outs)


def _holey_file(path: Path, chains: bool) -> tuple[int, int, int]:
    """The disk-bound run's workload, smaller: 40 cursors of ~2,500 holes each, one new ack
    a flush for 150 flushes, their small forms keeping chains or not: ``(cursors in the
    form at the end, live bytes, data.mdb's size)``."""
    from ackstore import AckStore, Position
    from ackstore.cursor.small import set_form_chains

    before = set_form_chains(chains)
    try:
        with AckStore.open(path, sync=False) as store:
            topic = store.topic("persistent://t/n/disk")
            topic.add_ledger(1)
            cursors = [topic.cursor(f"c{i}", CursorConfig(max_unacked_ranges_to_persist=0)) for i in range(40)]
            for cur in cursors:
                cur.ack_entries(1, range(1, 5000, 2))
            store.flush()
            fresh, rng = iter(range(5001, 1 << 31)), random.Random(1)
            for _ in range(150):
                for cur in cursors:
                    cur.ack(Position(1, next(fresh) + rng.randrange(2)))
                store.flush()
            in_form = sum(cur._core.small is not None for cur in cursors)
            live = sum(cur.log_usage().live_bytes for cur in cursors)
        return in_form, live, (path / "data.mdb").stat().st_size
    finally:
        set_form_chains(before)


def test_holey_cursors_chains_cost_the_disk_their_parts_would() -> None:
    """Holey cursors whose small forms keep chains (every one of them in the form at the
    end) leave the file their parts leave: live bytes and ``data.mdb`` within a quarter of
    theirs, and within the disk bound (4x live + 16 KiB a cursor). A chain that kept more
    keys than the parts' rules, or records larger than their codec writes (a state marker
    of the holes: ~13x the live bytes), fails here."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        formed, live, size = _holey_file(Path(tmp) / "chains", True)
        parted, parts_live, parts_size = _holey_file(Path(tmp) / "parts", False)
    assert (formed, parted) == (40, 0)
    assert live <= 1.25 * parts_live and size <= 1.25 * parts_size, (live, parts_live, size, parts_size)
    assert size <= 4 * live + 40 * 16 * 1024, (size, live)


def test_a_new_cursors_first_flush_of_many_holes_keeps_its_form(tmp_path: Path) -> None:
    """A subscription made and acked with ~1,000 scattered holes (and delivery counts)
    before its first flush: that flush begins the form's own chain (a record and a full
    marker that follows none) and the cursor stays in the form, the same object, flush
    after flush. Reopened (lazily, decoding at open, read-only) it holds the same state,
    and ``check`` finds nothing."""
    from ackstore import AckStore, Position
    from ackstore.checker import check

    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/first")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        form = cur._core.small
        holes = random.Random(5).sample(range(1, 20_000), 1000)
        cur.ack_entries(1, BitMap(range(20_000)) - BitMap(holes))
        cur.record_deliveries([Position(1, e) for e in holes[:10]])
        stats = store.flush()
        assert form is not None and cur._core.small is form
        assert (stats.markers, stats.full_markers) == (1, 1)
        for i in range(3):
            cur.ack(Position(1, holes[i]))
            store.flush()
            assert cur._core.small is form, i
        expected = cur.snapshot()
        assert len(expected.delivery_counts) == 7 and expected.mark_delete_position < Position(1, min(holes))
    for how in ({}, {"load": "budget"}, {"readonly": True}):
        with AckStore.open(tmp_path / "s", sync=False, **how) as store:  # type: ignore[arg-type]
            assert store.topic("persistent://t/n/first").cursor("c").snapshot() == expected, how
    assert check(tmp_path / "s") == []


def test_a_cursor_holding_more_counts_than_a_slot_takes_keeps_them_in_its_forms_chain(tmp_path: Path) -> None:
    """A cursor over a slot's bound holding more delivery counts than a state slot takes (a
    broker's reads handed out, not acked) takes the form at a full marker of its parts and
    keeps it, flush after flush: its chain's record holds the counts, its markers the acks
    since (one form all along, never handed back and recovered again; the flush's figures
    count a delta marker as a marker, not a full one); reopened, it opens
    into the form holding what recovery of its parts holds."""
    from ackstore import AckStore, Position
    from ackstore.cursor.small import set_form_chains

    cfg = CursorConfig(max_unacked_ranges_to_persist=0)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/counts")
        topic.add_ledger(1)
        cur = topic.cursor("c", cfg)
        holes = {0, *random.Random(3).sample(range(1, 3000), 1499)}  # (coded as holes: read in one pass)
        cur.ack_entries(1, [e for e in range(3000) if e not in holes])
        cur.record_deliveries([Position(1, e) for e in range(3000, 3600)])
        store.flush()
        store.flush()  # (no change: the form takes it at the next full marker of its parts)
        cur.ack(Position(1, 3998))
        store.flush()
        form = cur._core.small
        assert form is not None and form.nc == 600
        deltas = 0
        for i in range(12):
            cur.ack(Position(1, 4000 + 2 * i))
            cur.record_deliveries([Position(1, 5001 + 2 * i)])
            stats = store.flush()
            assert cur._core.small is form, i
            assert (stats.markers, stats.full_markers) == (1, 0 if form.deltas else 1), i  # (a delta is not full)
            deltas += form.deltas > 0
        assert 3 <= deltas < 12  # (delta markers between full ones: both counted as they are)
        expected = cur.snapshot()
    for chains in (True, False):
        before = set_form_chains(chains)
        try:
            with AckStore.open(tmp_path / "s", sync=False) as store:
                cur = store.topic("persistent://t/n/counts").cursor("c", cfg)
                assert (cur._core.small is not None, cur.snapshot()) == (chains, expected)
                assert cur.delivery_counts()[Position(1, 3001)] == 1 and len(expected.delivery_counts) == 612
        finally:
            set_form_chains(before)


@settings(max_examples=100, deadline=None)
@given(
    holes=st.frozensets(st.integers(1, 3000), max_size=60),
    counted=st.frozensets(st.integers(1, 3100), max_size=8),
    batched=st.frozensets(st.integers(1, 3100), max_size=3),
    offsets=st.lists(st.integers(2, 3200), max_size=3).map(sorted),
)
def test_a_forms_record_of_a_ledger_is_the_one_the_parts_codec_writes(
    holes: frozenset[int], counted: frozenset[int], batched: frozenset[int], offsets: list[int]
) -> None:
    """``record_of`` of both twins writes, byte for byte, what ``records.encode_ledger``
    writes for each ledger of the line (M's, and those after it at ``offsets``, some with no
    entries): its acks (``acks_of``, in its own entries; ``runs_of`` their runs), partial batches and delivery
    counts: the records a form's new chain begins with, and the ones its open reads back.
    ``held`` names exactly the ledgers holding any of it."""
    from ackstore.ledger_acks import LedgerAcks
    from ackstore.storage.bitmaps import encode_bitmap

    acked = [e for e in range(2, 3001) if e not in holes]
    runs = run_bounds(bitmap_of_runs([(e, e) for e in acked]))
    counts = [(e, 1 + e % 5) for e in sorted(counted) if e not in acked and e > 1]
    batches = [(e, 9, 0b101) for e in sorted(batched) if e not in acked and e > 1 and e not in counted]
    spans = tuple((LEDGER + 1 + i, o) for i, o in enumerate(offsets))
    line = ((LEDGER, 0), *spans)
    outs = []
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, 0, 5, 0, 1, runs, 1 << 13, counts, -1, b"", 0, batches)
        s.bound(0, spans, 9000)
        held = 0
        for k, (ledger, start) in enumerate(line):
            end = line[k + 1][1] if k + 1 < len(line) else 1 << 33
            acks = BitMap.deserialize(s.acks_of(k))
            cut = [(max(a, start) - start, min(b, end - 1) - start) for a, b in runs if a < end and b >= start]
            assert acks == bitmap_of_runs(cut if start < end else [])
            assert s.runs_of(k) == (cut if start < end else [])  # (as the parts hold them)
            la = LedgerAcks(
                BitMap(acks),
                {e - start: (size, mask) for e, size, mask in batches if start <= e < end} or None,
                {e - start: n for e, n in counts if start <= e < end} or None,
            )
            record = s.record_of(k, VERSION, *encode_bitmap(BitMap(acks)))
            assert record == records.encode_ledger(ledger, la, CID)
            held |= bool(acks or la.counts or la.batches) << k
            outs.append(record)
        assert s.held() == held
        with pytest.raises(ValueError, match="k="):
            s.acks_of(len(line))
        with pytest.raises(ValueError, match="k="):
            s.runs_of(len(line))
    assert outs[: len(outs) // len(IMPLEMENTATIONS)] * len(IMPLEMENTATIONS) == outs


def test_an_adopted_chain_of_several_ledgers_names_each_record_with_the_acks_since() -> None:
    """A form adopting its parts' chain of records of several ledgers of its line takes each
    record and the acks and counts since them (the form's entries): its next full marker
    names each with its own (both twins, the same bytes); a ledger off the line, one named
    twice or a record at or past the full marker is refused, changing nothing."""
    outs = []
    for impl in IMPLEMENTATIONS:
        s = impl.SmallState(CID, LEDGER, 0, 10, 0, 1, [(e, e) for e in range(2, 2000, 3)], 1 << 12)
        s.bound(0, ((LEDGER + 1, 3000),), 5000)
        s.ack_range(3010, 3010)
        s.base = -2
        s.adopt(9, 9, ((0, 4), (1, 6)), 100, [5, 8, 3020], [3030])
        assert (s.records(), s.recs, s.record, s.named, s.cnamed, s.fresh) == ((4, 6), 0b11, 4, 3, 1, 0)
        s.ack_range(12, 12)
        s.ack_range(3040, 3040)
        puts, _, _ = _flush(impl, s, [])
        ((key, value),) = puts
        marker = records.decode_marker(value, 10)
        assert key == records.log_key(CID, 10) and marker.full and marker.prev == 9
        assert {lg: (x.seq, sorted(x.adds or ())) for lg, x in marker.index.items()} == {
            LEDGER: (4, [5, 8, 12]),
            LEDGER + 1: (6, [20, 40]),
        }
        outs.append(puts)
        for refused in (((2, 4),), ((0, 4), (0, 5)), ((1, 9),), ((1, -2),), (("1", 4),)):
            other = impl.SmallState(CID, LEDGER, 0, 10, 0, 1, [(5, 5)], 1 << 12)
            other.bound(0, ((LEDGER + 1, 3000),), 5000)
            other.base = -2
            with pytest.raises(ValueError):
                other.adopt(9, 9, refused, 100, [], [])
            assert (other.base, other.fresh, other.recs) == (-2, 1, 0)
    assert all(out == outs[0] for out in outs)


def test_a_consumer_holding_messages_across_rollovers_keeps_its_form(tmp_path: Path) -> None:
    """A subscription holding ~1,500 holes of a sealed ledger (a state over a slot's bound)
    that reads and acks on in the ledgers after it, one rollover after another, keeps one
    small form all along: its chain holds a record of each ledger holding state, and each
    flush writes a marker, or a record of the ledger it acks in and a marker, never the
    held ledger's record again. Reopened, it holds what it held, in the form from the open,
    its chain adopted (the held ledger's record stands)."""
    from ackstore import AckStore, Position

    cfg = CursorConfig(max_unacked_ranges_to_persist=0)
    rng = random.Random(5)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/held")
        topic.add_ledger(1)
        cur = topic.cursor("c", cfg)
        holes = {0, *rng.sample(range(1, 3000), 1499)}
        cur.ack_entries(1, [e for e in range(3000) if e not in holes])
        topic.close_ledger(1, 3000)
        topic.add_ledger(2)
        store.flush()
        for hole in sorted(holes)[-70:]:  # (its parts' chain: the form takes it at one of their full markers)
            if cur._core.small is not None:
                break
            cur.ack(Position(1, hole))
            store.flush()
        form = cur._core.small
        assert form is not None and form.records() and form.recs == 0b1
        held_record = form.records()[0]
        written = []
        for ledger in (2, 3, 4):
            for e in range(0, 400, 4):
                cur.ack([Position(ledger, x) for x in range(e, e + 4)])
                written.append(store.flush().bytes_written)
                assert cur._core.small is form
            topic.close_ledger(ledger, 400)
            topic.add_ledger(ledger + 1)
        assert form.records()[0] == held_record and len(form.records()) >= 2  # (the held ledger's record stands)
        assert max(written) < 2000, max(written)  # (1,500 holes: a few KiB of record, never written again)
        expected = cur.snapshot()
    with AckStore.open(tmp_path / "s", sync=False, load="budget") as store:
        cur = store.topic("persistent://t/n/held").cursor("c", cfg)
        form = cur._core.small
        assert cur.snapshot() == expected and form is not None  # (read straight into the form, its chain adopted)
        assert form.records()[0] == held_record and len(form.records()) >= 2
        for e in range(0, 200, 2):
            cur.ack(Position(5, e))
            store.flush()
            assert cur._core.small is form and form.records()[0] == held_record
        cur.ack(Position(5, 301))
        store.flush()
        expected = cur.snapshot()
    with AckStore.open(tmp_path / "s", sync=False) as store:
        assert store.topic("persistent://t/n/held").cursor("c", cfg).snapshot() == expected


def _first_ledger_open(store: Any, name: str, cfg: CursorConfig) -> tuple[Any, Any, Any]:
    """Topic ``name`` of ``store`` with ledger 1 open, its cursor ``c`` and that cursor's form."""
    topic = store.topic(name)
    topic.add_ledger(1)
    cur = topic.cursor("c", cfg)
    return topic, cur, cur._core.small


def test_a_consumer_holding_an_entry_across_a_hundred_rollovers_keeps_its_form(tmp_path: Path) -> None:
    """A subscription that never acks the first entry of its first ledger (its mark-delete
    position stays there) and holds a few messages of each ledger it reads on, one rollover
    after another, keeps one small form past the line's 64th ledger: a state over a slot's
    bound from about the 60th, its chain holds a record of each ledger holding state
    wherever it lies on the line, and a flush writes the record of the ledger acked in and
    a marker, never the whole state. Reopened, it holds what it held, in the form from the
    open."""
    cfg = CursorConfig(max_unacked_ranges_to_persist=0)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic, cur, form = _first_ledger_open(store, "persistent://t/n/stuck", cfg)
        written = []
        for ledger in range(1, 101):
            cur.ack([Position(ledger, e) for e in range(50) if e % 6 != 3 and (ledger, e) != (1, 0)])
            written.append(store.flush().bytes_written)
            assert cur._core.small is form, ledger
            topic.close_ledger(ledger, 50)
            topic.add_ledger(ledger + 1)
        assert cur.mark_delete_position == Position(1, -1) and cur.ack_range_count > 800
        # (each flush: the record of the ledger acked in, and a full marker naming each ledger's record)
        assert form.recs == (1 << 100) - 1 and max(written[70:]) < 2000, max(written[70:])
        expected = cur.snapshot()
        testing.crash(store)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        cur = store.topic("persistent://t/n/stuck").cursor("c", cfg)
        assert cur._core.small is not None and cur.snapshot() == expected
        cur.ack(Position(1, 0))
        store.flush()
        assert cur.mark_delete_position == Position(1, 2)
        expected = cur.snapshot()
    with AckStore.open(tmp_path / "s", sync=False) as store:
        assert store.topic("persistent://t/n/stuck").cursor("c", cfg).snapshot() == expected


def test_a_hung_consumers_flush_that_records_the_ledger_it_reads_writes_what_changed(tmp_path: Path) -> None:
    """A subscription whose mark-delete position stays in its first ledger while it acks on,
    ten entries a read and a flush after each, holding one entry in six of every ledger: past
    a slot's bound its state is a chain, and a flush whose acks since the records are more
    than a marker names writes the record of the ledger it reads in and a delta marker naming
    that record and the acks since the last marker, not a full marker naming a record of
    each of the seventy ledgers holding state (16 bytes each). A full marker comes when the
    chain's rules make one due. Reopened after a crash, it holds what it held."""
    cfg = CursorConfig(max_unacked_ranges_to_persist=0)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic, cur, form = _first_ledger_open(store, "persistent://t/n/hung", cfg)
        recorded: list[int] = []  # the bytes of each flush that wrote a record, from the 60th ledger on
        for ledger in range(1, 76):
            for r in range(10):
                read = [Position(ledger, e) for e in range(10 * r, 10 * r + 10)]
                cur.ack([p for p in read if p.entry % 6 != 3 and p != Position(1, 0)])
                seq = form.next_seq
                written = store.flush().bytes_written
                if ledger >= 60 and form.next_seq - seq > 1:
                    recorded.append(written)
            topic.close_ledger(ledger, 100)
            topic.add_ledger(ledger + 1)
        assert cur._core.small is form and form.recs.bit_count() > 64 and form.base >= 0
        assert len(recorded) > 20 and sorted(recorded)[len(recorded) * 4 // 5] < 400, recorded
        for r in range(10):  # the crash comes after a flush that wrote a record and a delta marker
            cur.ack([Position(76, e) for e in range(10 * r, 10 * r + 10) if e % 6 != 3])
            seq = form.next_seq
            store.flush()
            if form.next_seq - seq > 1 and form.base != form.marker:
                break
        else:
            raise AssertionError("no flush in ledger 76 wrote its record and a delta marker")
        expected = cur.snapshot()
        testing.crash(store)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        cur = store.topic("persistent://t/n/hung").cursor("c", cfg)
        assert cur._core.small is not None and cur.snapshot() == expected


def test_a_form_over_its_cursors_cache_budget_goes_to_its_parts(tmp_path: Path) -> None:
    """The cache budget holds for a cursor whose state the small form could hold: a form
    holding state in one ledger is held whatever its charge (as the parts hold one ledger over
    the budget), one in several ledgers charged more than the budget goes to its parts at its
    next flush, which swap ledgers out to fit; an open does not read it into the form, and a
    budget shrunk under a form's charge ends it at once. The state is the same throughout."""
    from ackstore import AckStore, Position

    tight = CursorConfig(max_unacked_ranges_to_persist=0, max_individual_ack_cache_bytes=2_000)
    roomy = CursorConfig(max_unacked_ranges_to_persist=0)
    rng = random.Random(9)
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/budget")
        topic.add_ledger(1)
        cur, other = topic.cursor("c", tight), topic.cursor("d", roomy)
        holes = {0, *rng.sample(range(1, 3000), 1499)}
        for c in (cur, other):
            c.ack_entries(1, [e for e in range(3000) if e not in holes])
        topic.close_ledger(1, 3000)
        topic.add_ledger(2)
        store.flush()
        for hole in sorted(holes)[-70:]:  # (the form takes the parts' chain at one of their full markers)
            for c in (cur, other):
                c.ack(Position(1, hole))
            store.flush()
        form = cur._core.small
        assert form is not None and form.budget == 2_000 and form.charge() > 2_000  # (one ledger: held)
        for c in (cur, other):
            c.ack([Position(2, x) for x in range(0, 40, 2)])
        store.flush()  # (two ledgers holding state, charged over the budget: the parts write it)
        assert cur._core.small is None and form.ended
        assert other._core.small is not None  # (the default budget: 3 MiB)
        stats = cur.stats()
        assert stats.cache_bytes <= max(2_000, stats.largest_ledger_bytes) and stats.ledgers_in_memory == 1
        for c in (cur, other):
            c.ack(Position(2, 41))
        store.flush()
        assert cur._core.small is None  # (nor taken again at a later flush)
        expected = other.snapshot()
        assert cur.snapshot() == expected
        other.update_config(max_individual_ack_cache_bytes=2_000)  # (a budget shrunk under the form's charge)
        assert other._core.small is None and other.snapshot() == expected
    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/budget")
        cur = topic.cursor("c", tight)
        assert cur._core.small is None and cur.snapshot() == expected
        assert topic.cursor("d", roomy)._core.small is not None  # (its own budget back at the default)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_forms_charge_and_budget_are_the_twins_rule(impl: Any) -> None:
    """A form's charge (a ledger holding state 200 B, a run or a count 8 B, a partial batch 64
    B) is the same in both twins; ``flush_small`` lists a dirty form of several ledgers over
    its budget among those its parts write, and writes one of one ledger over it, or within."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    assert not s.bound(0, ((LEDGER + 1, 100),), 300)
    for e in range(12, 60, 2):  # 24 runs in M's ledger
        s.ack_range(e, e)
    s.deliver_positions([(LEDGER, 61)])
    assert (s.charge(), s.budget) == (200 + 8 * 25, -1)
    s.budget = 300
    puts, _, over = _flush(impl, s, [], max_runs=1 << 12)
    assert over == [] and len(puts) == 1  # (one ledger: held whatever its charge)
    s.ack_range(150, 150)
    assert s.charge() == 400 + 8 * 26
    puts, _, over = _flush(impl, s, [], max_runs=1 << 12)
    assert puts == [] and over == [s] and s.dirty
    s.budget = 400 + 8 * 26
    puts, _, over = _flush(impl, s, [], max_runs=1 << 12)
    assert over == [] and len(puts) == 1


def test_a_forms_delivery_counts_of_a_window_are_those_of_all_in_it(tmp_path: Path) -> None:
    """A Dispatcher asks the counts of each read's window: a form of several ledgers answers
    from its counts in that window alone, the same as every count filtered to it, for
    windows within a ledger, across ledgers, from before M, up to an entry -1, past the line."""
    from ackstore import AckStore, Position

    with AckStore.open(tmp_path / "s", sync=False) as store:
        topic = store.topic("persistent://t/n/counts")
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0, max_deliveries=9))
        cur.ack([Position(1, e) for e in range(0, 300, 3)])
        cur.record_deliveries([Position(1, e) for e in range(1, 300, 3)])
        topic.close_ledger(1, 300)
        topic.add_ledger(4)
        cur.ack([Position(4, e) for e in range(0, 200, 2)])
        cur.record_deliveries([Position(4, e) for e in range(1, 200, 2)])
        for i in range(4):  # (a change a flush: the form is taken after one)
            cur.ack(Position(4, 200 + 2 * i))
            store.flush()
        assert cur._core.small is not None and cur._core.small.spans
        every = cur.delivery_counts()
        assert len(every) == 200
        marks = [Position(0, 5), Position(1, 0), Position(1, 100), Position(1, 299), Position(1, 500)]
        marks += [Position(2, 0), Position(4, -1), Position(4, 0), Position(4, 51), Position(4, 199), Position(9, 0)]
        for lo in marks:
            for hi in [*marks, None]:
                want = {p: n for p, n in every.items() if p >= lo and (hi is None or p < hi)}
                assert cur.delivery_counts(lo, hi) == want, (lo, hi)


T = "persistent://t/ns/late"


def test_a_late_consumers_moving_mark_delete_writes_markers_and_reopens_exact(tmp_path: Path) -> None:
    """A holey cursor over a slot's bound (in the form's chain) whose consumer acks its oldest
    holes late, so M moves every flush while holes above it stand: each flush writes one
    marker, not M's ledger's record again, until the acks since the record outgrow what a
    marker names; a reopen after any of them (the store closed, or its file copied as a
    crash leaves it) holds exactly the state flushed, and the cursor takes the form again."""
    path = tmp_path / "s"
    rng = random.Random(3)
    acked = BitMap(range(1, 4000, 2))  # entry 0 unacked: M before ledger 1's first entry
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack_entries(1, acked)
        for _ in range(4):  # (into the form, its chain)
            extra = rng.randrange(8000, 9000)
            cur.ack(Position(1, extra))
            acked.add(extra)
            store.flush()
        core = cur._core
        assert core.small is not None and core.small.base >= 0
        record = core.small.record
        for rnd in range(6):
            for e in range(2 * rnd, 2 * rnd + 2):  # the oldest holes acked: M moves
                cur.ack(Position(1, e))
                acked.add(e)
            keys = set(_keys(store))
            store.flush()
            new = set(_keys(store)) - keys
            small = core.small
            assert small is not None and small.md_e == 2 * rnd + 1 and small.passed == 1
            assert len(new) == 1 and small.record == record  # (a marker; the record stands)
            copy = tmp_path / f"copy{rnd}"
            shutil.copytree(path, copy)
            with AckStore.open(copy) as again:
                other = again.topic(T).cursor("c")
                md = other.mark_delete_position
                assert md == Position(1, 2 * rnd + 1)
                assert list(other.ack_ranges()) == [
                    (Position(1, a), Position(1, b)) for a, b in run_bounds(acked) if a > 2 * rnd + 1
                ]
                for _ in range(3):  # (its parts write the record again; then the form takes it)
                    other.ack(Position(1, 9500 + _))
                    again.flush()
                assert other._core.small is not None


def _keys(store: AckStore) -> list[bytes]:
    return store.storage.read(lambda txn: [bytes(k) for k, _ in txn.cursor(db=store.storage.log_db)])


def test_a_parts_chain_naming_one_state_marker_for_several_ledgers_stays_with_the_parts(tmp_path: Path) -> None:
    """A cursor whose state marker held two ledgers outgrows the state layout by acks in a
    third: its parts' full marker names that state marker as the record of both untouched
    ledgers. The form keeps a record of each ledger of its chain, so it does not take that
    chain (it took it, holding one record twice, which its own check refused); the parts
    write on, every check holds at every flush, and a reopen holds every ack."""
    from ackstore.cursor.lane import set_state_bound

    before, chains = set_state_bound(3), small_form.set_form_chains(True)
    acks = [Position(1, 5), Position(2, 5), *(Position(3, e) for e in (1, 3, 5, 7, 9, 11))]
    try:
        config = CursorConfig(full_marker_every=3, max_unacked_ranges_to_persist=0)
        with AckStore.open(tmp_path / "s", sync=False) as store:
            topic = store.topic("persistent://t/n/shared")
            for ledger in (1, 2):
                topic.add_ledger(ledger)
                topic.close_ledger(ledger, 40)
            topic.add_ledger(3)
            cur = topic.cursor("c", config)
            for group in (acks[:2], acks[2:5], *([p] for p in acks[5:])):
                cur.ack(group)
                store.flush()
                cur._check()
        with AckStore.open(tmp_path / "s", readonly=True) as store:
            again = store.topic("persistent://t/n/shared").cursor("c", config)
            assert [p for p in acks if again.is_acked(p)] == acks and again.ack_range_count == 8
    finally:
        set_state_bound(before)
        small_form.set_form_chains(chains)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_m_passing_the_only_entry_a_chained_ledger_held_leaves_its_record_due(impl: Any) -> None:
    """A chain over the slot bound whose M's ledger holds one delivery count and nothing
    else: an ack that moves M past that entry leaves the ledger holding nothing and its
    record due (``stale``), the ack M passed left for the next base to drop; that ledger
    then holds no state a chain could name, so the next flush hands the cursor to its parts
    (``over``), as a state the layout does not take."""
    s = impl.SmallState(CID, LEDGER, 0, 5, 0, 1, [], 1 << 12)
    s.base = -1
    s.bound(0, (), 200)
    assert s.deliver_positions([(LEDGER, 1)]) == [1]
    trims: list[Any] = []
    puts, _, _ = _flush(impl, s, trims, 2, -1)
    assert (s.base, s.record, s.fresh, len(puts)) == (6, 5, 0, 2) and s.counts() == [(1, 1)]
    s.ack_range(0, 1)
    assert (s.md_e, s.stale, s.passed, s.counts(), s.dirty) == (1, 1, 0, [], 1)
    check_small(s, (LEDGER, -1))
    puts, _, over = _flush(impl, s, trims, 2, -1)
    assert puts == [] and over == [s] and s.dirty
    check_small(s, (LEDGER, -1))


def test_a_reset_back_out_of_a_ledger_whose_marker_names_what_m_passed_keeps_the_parts_check(tmp_path: Path) -> None:
    """The form's chain names M's ledger's record with the acks M passed since it (beyond the
    delta bound: one range). Its parts then take the cursor and a reset moves M back into the
    ledger before: the index entry, as the marker wrote it, still names those acks, now
    above M. The ledger changed (the next flush writes it again), so the chain's check does
    not hold it to the bound; the flush after the reset leaves nothing of it to ask."""
    from ackstore import Dispatcher
    from ackstore.cursor import lane
    from ackstore.testing import InMemoryLedgerReader

    from .forms import end_form

    saved, runs = lane.set_delta_bounds(6, 1.0), lane.set_state_bound(3)
    try:
        with AckStore.open(tmp_path / "s") as store:
            topic = store.topic(T)
            topic.add_ledger(1)
            topic.close_ledger(1, 10)
            topic.add_ledger(2)
            cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=0))
            cur.ack_cumulative(Position(1, 9))  # M on into ledger 2
            store.flush()  # (a slot's state: the form takes the cursor)
            cur.ack([Position(2, e) for e in (1, 3, 5, 7, 9, 11, 15, 17, 19, 21, 23)])  # over a slot's 3: a chain
            store.flush()
            assert cur._core.small is not None and cur._core.small.base >= 0
            for e in (0, 2, 4, 6, 8, 10, 12, 13):  # M passes them all, one flush each: markers name them
                cur.ack(Position(2, e))
                store.flush()
            assert cur.mark_delete_position == Position(2, 13) and cur._core.small is not None
            end_form(cur)
            entry = cur._core._pages.index[2]
            assert entry.adds is not None and len(entry.adds) > 6  # (beyond the bound: M passed them)
            cur._check()
            reader = InMemoryLedgerReader(topic)
            Dispatcher(cur, reader).reset(Position(1, 5))
            assert cur.mark_delete_position == Position(1, 4)
            cur._check()  # (the index entry of ledger 2 is the next flush's: not asked)
            store.flush()
            cur._check()
    finally:
        lane.set_delta_bounds(*saved)
        lane.set_state_bound(runs)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_base_over_the_acks_a_marker_names_records_the_ledgers_they_are_most_in(impl: Any) -> None:
    """A chain of records of two ledgers, then more acks since them than a marker names
    (``max_acks``): the next base records the ledger holding the most of them, then the next
    most, until those left are at most half of ``max_acks`` (and no ledger holding none)."""
    s, _, _, puts = _chained(impl, ((LEDGER + 1, 100),), (*range(12, 99, 2), *range(102, 199, 2)))
    assert len(puts) == 3 and s.recs == 0b11
    for e in range(13, 13 + 2 * 25, 2):  # 25 acks since the records in M's ledger (M stays: 10, 11 unacked)
        s.ack_range(e, e)
    assert s.to_record(40) == 0 and s.to_record(20) == 0b01  # (25 over 20: M's ledger's record leaves none)
    for e in range(103, 103 + 2 * 20, 2):  # and 20 in the next
        s.ack_range(e, e)
    assert s.to_record(100) == 0  # (45 acks since: a marker names them)
    assert s.to_record(40) == 0b01  # M's ledger's 25 recorded: 20 left, at most half of 40
    assert s.to_record(20) == 0b11  # 20 left is more than 10: the next ledger's too
    assert s.to_record(0) == 0b11


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_new_base_after_a_chain_of_every_delta_it_takes_trims_below_the_old_one(impl: Any) -> None:
    """A chain of two records, then as many delta markers as it takes (``every``), then more
    acks since the records than a marker names: the new base (a record of the ledger they
    are in, and a full marker) is due a full marker's trim, below the old base but the record
    that stands; what is left recovers to the form's state."""
    s, log, trims, _ = _chained(impl, ((LEDGER + 1, 100),), (*range(12, 99, 2), *range(102, 199, 2)), every=2)
    first = s.records()
    for e in (103, 105):  # a delta marker each: the chain's two
        s.ack_range(e, e)
        ((key, value),), _, _ = _flush(impl, s, trims, max_acks=2)
        log[key] = value
    assert s.deltas == 2 and not trims
    base = s.base
    s.ack_range(107, 107)  # three acks since the records: a new record of the ledger they are in
    puts, _, _ = _flush(impl, s, trims, max_acks=2)
    assert len(puts) == 2 and s.records() == (first[0], s.base - 1)
    assert [(below, keeps) for _, below, keeps in trims] == [(base, first)]  # (every delta: a full marker's trim)
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log.update(puts)
    assert _recovered(log) == _held(s)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_chained_form_over_its_cap_writes_its_lowest_ranges_whole_not_a_marker(impl: Any) -> None:
    """A form in a chain of its own that holds more ranges than its cap persists (PIP-299):
    its next flush writes the lowest ranges alone as a whole state in a slot, flagged
    truncated, not a marker of its chain naming every range; the log's newest state then
    recovers to exactly that cut."""
    s, log, trims, _ = _chained(impl, (), range(12, 60, 2))
    assert s.recs == 0b1
    s.persist = 2
    s.ack_range(61, 61)  # (one ack since the record: a marker of the chain, were it not for the cap)
    puts, _, over = _flush(impl, s, trims)
    assert over == []
    ((key, value),) = puts
    assert key[:1] == b"\xff" and (s.truncated, s.persisted) == (1, 2)
    for _, below, keeps in trims:
        _trim(log, below, keeps)
    log[key] = value
    md, runs, _ = _recovered(log)
    assert md == (LEDGER, 9) and runs == {LEDGER: [(12, 12), (14, 14)]}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_form_back_in_a_slot_its_chains_trim_emptied_reserves_the_slots_room(impl: Any) -> None:
    """A form whose states were in both slots (the newest in slot 1) grows into a chain of
    its own; a base's trim deletes what lies below the chain, both slots' values with it.
    Once its state fits a slot again, it goes into slot 0 as a slot's first value: with the
    room a first value reserves."""
    acked = (*range(12, 99, 2), *range(102, 199, 2))
    s, _, trims, _ = _chained(impl, ((LEDGER + 1, 100),), acked, slot=1, slots=3, every=2)
    for e in (103, 105, 107):  # two delta markers, then a new base: its trim takes the slots' values
        s.ack_range(e, e)
        _flush(impl, s, trims, max_acks=2)
    assert [below for _, below, _ in trims] == [7] and s.slots == 0  # (below the first full marker)
    s.ack_range(10, 250)  # every entry acked: a state a slot takes
    ((key, value),), _, _ = _flush(impl, s, trims, max_acks=2)
    assert key == records.slot_key(CID, 0) and (s.slot, s.slots) == (0, 1)
    _, start = records.slot_seq(value)
    room = records.slot_room(key, value)  # the first value's, and its padding
    assert RESERVE <= room < RESERVE + records.SLOT_ALIGN and records.first_slot_value(value)
    assert value[start + 4 : start + 4 + room] == bytes(room) and RESERVE > 0
    assert len(value) == start + 4 + room + len(records.open_slot(key, value)[1])


def test_a_form_adopting_a_chain_from_the_logs_first_sequence_holds_every_invariant(tmp_path: Path) -> None:
    """A new cursor whose first state is over a slot: its parts write the record at the log's
    first sequence, 0, and a full marker; the next flush's form adopts that chain, its lowest
    record at 0, and every invariant of the form holds (``_check``); a reopen gives the
    same state."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("persistent://t/ns/first")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, e) for e in range(2, 3000, 2)])
        store.flush()
        cur.ack(Position(1, 3001))
        store.flush()
        s = cur._core.small
        assert s is not None and s.record == 0 and s.base >= 0 and not s.fresh
        cur._check()
        ranges = list(cur.ledger_ranges())
    with AckStore.open(tmp_path / "s") as store:
        assert list(store.topic("persistent://t/ns/first").cursor("c").ledger_ranges()) == ranges
