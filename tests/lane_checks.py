"""The marker lane's take (``ackstore.cursor.lane.take_marker``) on a cursor, aborted: the
cursor as it was after. Used by test_lane and, before every flush, by the state machines.
And one workload whose logs and chains two ways of flushing must write alike
(``twin_workload``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.cursor import Cursor, lane
from ackstore.cursor.lane import MarkerPlan
from ackstore.fields import field_names

__all__ = ["lane_takes", "twin_workload"]

T = "persistent://t/ns/lane"


def _value(x: Any) -> Any:
    """``x`` with bitmaps as sorted lists and sets sorted, so outcomes compare by value."""
    if isinstance(x, BitMap | frozenset | set) or type(x).__name__ == "FrozenBitMap":
        return ("set", sorted(x))
    if isinstance(x, dict):
        return ("dict", [(k, _value(v)) for k, v in x.items()])  # in order: the order is part of it
    if isinstance(x, list | tuple):
        return (type(x).__name__, [_value(v) for v in x])
    return x


def _cursor(cur: Cursor) -> Any:
    """What a take may change, and what it reads."""
    planner = cur._core._planner
    pages, chain, state = planner.pages, planner.chain, planner.state
    return (
        chain.next_seq,
        sorted(pages.dirty),
        _value(pages.pinned),
        state.meta_dirty,
        _value(pages.index),
        _value(chain.full_live),
        chain.slot,
        chain.slots,
    )


def lane_takes(cur: Cursor) -> str:
    """Run ``take_marker`` on ``cur`` under its lock; a plan it takes is aborted and the
    sequence it took given back, and the cursor must then be as it was (so must it be when
    the take raised, or found nothing to take). Returns what the outcome was: "idle",
    "other" or "plan" ("form" for a cursor opened into the small form whose parts were never
    built: the lane never sees it); AssertionError when the take raised."""
    if cur._core._unbuilt:
        return "form"
    planner = cur._core._planner
    with cur._core._lock:
        before = _cursor(cur)
        try:
            plan = lane.take_marker(planner)
        except Exception as exc:
            raise AssertionError(f"take_marker raised on a cursor: {exc!r}, before: {before}") from exc
        if isinstance(plan, MarkerPlan):
            planner.abort(plan)
            planner.chain.next_seq = before[0]
        after = _cursor(cur)
        changed = [(i, was, now) for i, (was, now) in enumerate(zip(before, after, strict=True)) if was != now]
        assert not changed, changed  # which of _cursor's fields, as they were and are
    return "idle" if plan is None else "other" if plan is lane.OTHER else "plan"


def _log(store: AckStore) -> list[tuple[bytes, bytes]]:
    """Every record of every cursor's log."""
    return store.storage.read(lambda txn: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=store.storage.log_db)])


def _chains(store: AckStore, names: list[str]) -> list[object]:
    """What a flush leaves in each cursor: its marker chain's fields, its index, its pins."""
    out = []
    for name in names:
        core = store.topic(T).cursor(name)._core
        small = core.small
        if small is not None:  # the form holds its state alone: its log's place and what it holds
            out.append((name, "form", small.next_seq, small.slot, small.slots, small.md_l, small.md_e, small.runs()))
            continue
        planner = core._planner
        chain = planner.chain
        fields = {slot: getattr(chain, slot) for slot in field_names(type(chain)) if slot != "recovery"}
        index = {ledger: (e.seq, e.runs, sorted(e.adds or ()), e.counts) for ledger, e in planner.pages.index.items()}
        out.append((name, fields, index, sorted(planner.pages.pinned), sorted(planner.pages.dirty)))
    return out


def twin_workload(path: Path, small: bool = False) -> tuple[list[tuple[bytes, bytes]], list[object]]:
    """One seeded workload in a new store at ``path`` (many cursors, small acks, moves,
    properties, full markers due, trims, a cursor with more acks than a delta carries, ledgers
    dropped whole by a cumulative ack, the general path and the lane; ``small``: cursors of
    a few ranges, which write the state layout and cross into the marker layout as their
    ranges grow): every record of the log at the end, and after every flush each cursor's
    chain and index with the flush's figures."""
    from ackstore.cursor.small import set_form_chains

    before = set_form_chains(False)  # (states over a slot's bound stay their parts', which the lane plans)
    try:
        return _workload(path, small)
    finally:
        set_form_chains(before)


def _workload(path: Path, small: bool) -> tuple[list[tuple[bytes, bytes]], list[object]]:
    rng = random.Random(5)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        for ledger in (1, 2, 3):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 20_000)
        topic.add_ledger(4)
        config = CursorConfig(max_unacked_ranges_to_persist=0, full_marker_every=4)
        names = [f"c{i}" for i in range(8)]
        cursors = [topic.cursor(name, config) for name in names]
        for i, cur in enumerate(cursors):  # half of them hold one ledger: full markers while small
            for ledger in rng.sample((1, 2, 3, 4), 1 if i % 2 else rng.randint(2, 3)):
                cur.ack_entries(ledger, range(1, 40 if small else 12_000, rng.choice([2, 3])))
        store.flush()
        seen: list[object] = []
        for step in range(60):
            for cur in rng.sample(cursors, 5):
                core = cur._core
                known = [core.small.md_l] if core.small is not None else sorted(core._pages.known())
                ledger = rng.choice(known or [1])
                k = 80 if step % 17 == 0 else rng.randint(1, 3)
                span = 150 if small else 5_000
                cur.ack([Position(ledger, 12_000 + rng.randrange(span)) for _ in range(k)])
                if rng.random() < 0.05:
                    cur.set_property("step", step)
                if rng.random() < 0.03:
                    cur.ack_cumulative(Position(1, 2 * step))
            if step in (30, 45):  # cursors' ledgers dropped whole: their plans forget them
                for cur in cursors[step % 2 :: 2]:
                    cur.ack_cumulative(Position(step // 15 - 1, 19_999))
            stats = store.flush()
            figures = (stats.cursors, stats.ledger_records, stats.full_markers, stats.bytes_written)
            seen.append((_chains(store, names), figures, stats.records_trimmed))
        return _log(store), seen
