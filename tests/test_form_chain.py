"""The small form's own chain: a state over the bound a state slot takes goes under the
cursor's log keys, a base (the whole state) and then delta markers of the acks and delivery
counts since; the twins write the same bytes and trims, and what they wrote, trims applied,
recovers to the form's state."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackstore.cursor import small as small_form
from ackstore.cursor.small import DELTA_MOST, IMPLEMENTATIONS, check_small
from ackstore.cursor.small_span import ledger_counts, ledger_runs
from ackstore.ledger_acks import run_bounds
from ackstore.storage import records
from ackstore.storage.log import MemoryLog, recover_cursor

CID, LEDGER = 7, 40
VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, _, _ = small_form.flush_format()
MAX_RUNS = 2
"""a slot takes states of at most this many ranges here: most states go to the chain"""


def _puts(puts: Any) -> list[tuple[bytes, bytes]]:
    return [(bytes(k), bytes(v)) for k, v in puts]


def _trim(log: dict[bytes, bytes], below: int, keep: int) -> None:
    """What the group flush's scan trim does to the form's cursor (``log.trim_records``)."""
    lo, hi = records.log_bounds(CID)
    for key in [k for k in log if lo <= k < hi]:
        seq = records.split_log_key(key)[1]
        if seq < below and seq != keep:
            del log[key]
    for slot in (0, 1):
        key = records.slot_key(CID, slot)
        if key in log and (seq := records.slot_seq(log[key])[0]) < below and seq != keep:
            del log[key]


def _recovered(log: dict[bytes, bytes]) -> tuple[tuple[int, int], dict[int, Any], dict[int, Any]]:
    state = recover_cursor(MemoryLog(dict(log)), None, CID, None, "all")
    assert state.resolved is not None and not state.report.skipped_reasons
    md = state.resolved.marker.mark_delete
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
        s.next_seq, s.md_l, s.md_e, s.runs(), s.counts(), s.batches(), s.dirty, s.persisted, s.spans,
    )  # fmt: skip


OPS = st.one_of(
    st.tuples(st.just("ack"), st.integers(0, 140), st.integers(0, 3)),
    st.tuples(st.just("acks"), st.lists(st.integers(0, 140), max_size=6), st.just(0)),
    st.tuples(st.just("deliver"), st.lists(st.integers(0, 140), max_size=4), st.just(0)),
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
    ops=st.lists(OPS, max_size=40),
)
def test_the_twins_write_one_chain_and_it_recovers_to_the_forms_state(
    start: frozenset[int], every: int, from_parts: bool, ops: list[tuple[str, Any, int]]
) -> None:
    """Both twins through the same acks, delivery counts, partial batches, rollovers, resets,
    flushes and undone flushes (a slot taking at most two ranges: the chain most of the
    time) hold the same fields and write the same pairs and trims; after every flush, the
    log as the write leaves it (its trims applied) recovers to the form's mark-delete
    position, runs and delivery counts, and a delta marker is never the first state of a
    chain nor past ``every`` of them."""
    runs = [(e, e) for e in sorted(start) if e % 2 == 0 and e > 1]
    forms = [impl.SmallState(CID, LEDGER, 0, 5, 0, 1, runs, 1 << 12) for impl in IMPLEMENTATIONS]
    logs: list[dict[bytes, bytes]] = []
    for s in forms:
        s.every = every
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
        elif op == "acks":
            items = [(forms[0].md_l, e) for e in a if forms[0].md_e < e < edge]
            assert len({repr(s.ack_positions(items)) for s in forms}) == 1
        elif op == "deliver":
            items = [(forms[0].md_l, e) for e in a if forms[0].md_e < e < edge]
            assert len({repr(s.deliver_positions(items)) for s in forms}) == 1
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
            if not s0.spans:
                end = max(a, s0.top() + 1, s0.rp_e, s0.md_e + 2)
                version += 1
                assert len({s.bound(version, ((s0.md_l + 1, end),), end + 60) for s in forms}) == 1
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
                puts, nbytes, over = impl.flush_small(
                    [s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims
                )
                outs.append((_puts(puts), nbytes, len(over), [(below, keep) for _, below, keep in trims]))
                for _, below, keep in trims:
                    _trim(log, below, keep)
                log.update(_puts(puts))
                if puts and s.marker == s.next_seq - 1 and s.deltas:  # a delta marker
                    assert was[0] >= 0 and was[3] == 0 and s.marker == was[1] + (s.next_seq - 1 - was[1])
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
        if written and op in ("flush", "undo") and not forms[0].dirty:
            assert all(log == logs[0] for log in logs)
            assert _recovered(logs[0]) == _held(forms[0])


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_delta_marker_names_the_acks_and_counts_since_the_last_marker(impl: Any) -> None:
    """Over the slot bound, one ack and one delivery between flushes: the second flush is a
    delta marker of a few tens of bytes naming that ack and that count (and the chain's
    base as the ledger's record, with the ledger's range count), not the state again;
    past :data:`DELTA_MOST` acks since, or M moving, the next state is a base again."""
    s = impl.SmallState(CID, LEDGER, 0, 5, 0, 1, [(e, e) for e in range(2, 20000, 300)], 1 << 12)
    s.bound(0, (), 1 << 20)
    s.set_props(b"")
    trims: list[Any] = []
    puts, base_bytes, _ = impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
    assert (s.base, s.marker, s.fresh, trims) == (5, 5, 0, [])
    s.ack_range(41, 41)  # (between the runs at 2 and 302)
    assert s.deliver_positions([(LEDGER, 45)]) == [1]
    puts, nbytes, _ = impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
    ((key, value),) = _puts(puts)
    assert key == records.log_key(CID, 6) and nbytes < 80 < base_bytes
    marker = records.decode_marker(value, 6)
    assert not marker.full and marker.prev == 5 and marker.mark_delete == (LEDGER, 0)
    entry = marker.index[LEDGER]
    assert (entry.seq, entry.runs, list(entry.adds), entry.counts) == (5, s.n, [41], {45: 1})
    assert (s.deltas, s.marker, s.fresh) == (1, 6, 0)
    s.ack_range(610, 610 + DELTA_MOST)  # more acks since than a delta names: the state whole
    assert s.fresh == 1
    puts, nbytes, _ = impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
    assert (s.base, s.marker, s.deltas, trims[-1][1:]) == (7, 7, 0, (5, -1)) and nbytes > 80
    s.ack_range(3000, 3000)
    puts, nbytes, _ = impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
    assert (s.base, s.marker, s.deltas, s.fresh, nbytes < 80) == (7, 8, 1, 0, True)
    s.ack_range(1, 1)  # M moves: the next state is a base
    assert (s.md_e, s.fresh) == (2, 1)
    impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
    assert (s.base, s.marker, s.deltas, trims[-1][1:]) == (9, 9, 0, (7, -1))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["pure", "native"][: len(IMPLEMENTATIONS)])
def test_a_base_that_lists_no_ledger_of_m_is_no_record_for_a_delta(impl: Any) -> None:
    """A state marker lists only the ledgers that hold state: a base written while M's
    ledger holds nothing above M (every range in the ledger after it) is no record of M's
    ledger, so an ack there next is written whole, not as a delta naming the base; the log
    recovers to the form's state after each flush."""
    s = impl.SmallState(CID, LEDGER, 9, 5, 0, 1, [], 1 << 12)
    assert not s.bound(0, ((LEDGER + 1, 20),), 200)
    for e in range(22, 60, 3):  # ranges in the next ledger only
        s.ack_range(e, e)
    log: dict[bytes, bytes] = {}
    for step in range(3):
        trims: list[Any] = []
        puts, _, over = impl.flush_small([s], VERSION, RESERVE, MAX_COUNTS, MAX_BYTES, MAX_RUNS, 1, None, trims)
        assert over == []
        for _, below, keep in trims:
            _trim(log, below, keep)
        log.update(_puts(puts))
        assert _recovered(log) == _held(s), step
        if step == 0:
            assert s.base >= 0 and s.record == -1 and s.fresh == 1
        s.ack_range(12 + step, 12 + step)  # in M's ledger (entry 10 is M + 1: M stays)
