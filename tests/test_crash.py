"""kill -9 during ack + flush: nothing flushed is lost, nothing unacked appears acked."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from ackstore import AckStore, CursorConfig, Position

from . import crash_workload as w
from .model import CursorModel, TopicModel

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

CHILD = Path(w.__file__)
ROOT = CHILD.parent.parent


def _engine_state(path: Path) -> tuple[object, list[object], dict[object, object]]:
    """What a reader recovers; a lazy open (no ledger decoded) must recover the same."""
    states = []
    for load in ("budget", "lazy"):
        with AckStore.open(path, readonly=True, load=load) as store:
            cur = store.topic(w.TOPIC).cursor(w.CURSOR)
            states.append((cur.mark_delete_position, list(cur.ack_ranges()), cur.partial_batches()))
    assert states[0] == states[1], states
    return states[0]


def _model_state(topic: TopicModel, c: CursorModel) -> tuple[object, list[object], dict[object, object]]:
    return topic.md(c), topic.ranges(c), topic.partials(c)


def _acked(state: tuple[object, list[object], dict[object, object]]) -> set[tuple[int, int]]:
    """Every acknowledged position of a state: at or below its mark-delete (within the
    ledgers it names) and inside its ranges."""
    md, ranges, _ = state
    out = {(md[0], e) for e in range(md[1] + 1)}  # type: ignore[index]
    for first, last in ranges:  # type: ignore[misc]
        out.update((first[0], e) for e in range(first[1], last[1] + 1))
    return out


#: the history workload's cursor: an hour of history, delta markers between full ones
HISTORY = CursorConfig(history_seconds=3600, full_marker_every=4)


def _check_history(path: Path, states: list[tuple[object, list[object], dict[object, object]]]) -> int:
    """Every state the cursor's history keeps is the state after one of the rounds, in the
    order they ran (no state invented, none mixed from two flushes, none out of order), the
    newest is the state recovered, and ``check`` finds nothing. Returns the states kept."""
    from ackstore import check

    with AckStore.open(path, readonly=True) as store:
        cur = store.topic(w.TOPIC).cursor(w.CURSOR)
        points = list(reversed(cur.history()))
        assert points, "a cursor that keeps history kept nothing"
        at = 0
        for n, point in enumerate(points):
            snap = cur.snapshot_as_of(point.time)
            kept = (
                snap.mark_delete_position,
                [(Position(ledger, a), Position(ledger, b)) for ledger, runs in snap.ranges for a, b in runs],
                snap.partial_batches,
            )
            while at < len(states) and states[at] != kept:
                at += 1
            assert at < len(states), f"kept state {n} of {len(points)} ({point}) is no round's state"
        assert kept == (cur.mark_delete_position, list(cur.ack_ranges()), cur.partial_batches())
        assert check(store) == []
        return len(points)


@pytest.mark.stress
@pytest.mark.parametrize("workload", sorted(w.WORKLOADS))
def test_kill_minus_nine_during_ack_and_flush(tmp_path: Path, long_run: bool, workload: str) -> None:
    """Random acks of every kind, or the steady broker workload (in order, the mark-delete
    moving every round, late acks): after each kill the store holds the state of the last
    reported flush or of the one after it, never less, never more."""
    ops = w.WORKLOADS[workload]
    rounds = 200 if long_run else (10 if workload == "random" else 14)  # random's rounds replay more
    seed = 20261122
    path = tmp_path / "store"
    with AckStore.open(path) as store:
        topic = store.topic(w.TOPIC)
        for ledger, count in w.LEDGERS:
            topic.add_ledger(ledger)
            if count is not None:
                topic.close_ledger(ledger, count)
        topic.cursor(w.CURSOR, HISTORY if workload.endswith("history") else CursorConfig())
    model = TopicModel(ledgers=[[i, c] for i, c in w.LEDGERS], last_id=w.LEDGERS[-1][0])
    state = CursorModel()
    states = [_model_state(model, state)]  # the state after each round, in order (history's candidates)
    next_round = 0
    small = 0  # flushes the child reported from the small form
    rng = random.Random(seed)
    for kill in range(rounds):
        out = w.run_and_kill([str(CHILD), str(path), str(seed), str(next_round), workload], rng.uniform(0.0, 0.25))
        reported = [int(line.split()[1]) for line in out.splitlines() if line.startswith("flushed")]
        small += sum(line.endswith(" small") for line in out.splitlines())
        last = reported[-1] if reported else next_round - 1
        # state after the last reported flush, and after the one that may have committed unreported
        for rnd in range(next_round, last + 1):
            w.apply_model(model, state, ops(seed, rnd))
            if workload.endswith("history"):
                states.append(_model_state(model, state))
        after_reported = _model_state(model, state)
        pending = TopicModel(ledgers=model.ledgers, last_id=model.last_id)
        maybe = CursorModel(state.floor, set(state.acked), {k: (s, set(v)) for k, (s, v) in state.batches.items()})
        w.apply_model(pending, maybe, ops(seed, last + 1))
        found = _engine_state(path)
        if found == after_reported:
            next_round = last + 1
        elif found == _model_state(pending, maybe):
            state, next_round = maybe, last + 2
            if workload.endswith("history"):
                states.append(found)
        else:  # name what differs: flushed acks that are gone, or acks that were never made
            have, flushed, maybe_too = _acked(found), _acked(after_reported), _acked(_model_state(pending, maybe))
            lost, phantom = flushed - have, have - maybe_too
            pytest.fail(
                f"kill {kill}: recovered state matches neither round {last} nor {last + 1}: "
                f"{len(lost)} flushed acks lost (e.g. {sorted(lost)[:5]}), "
                f"{len(phantom)} never-made acks appeared (e.g. {sorted(phantom)[:5]})"
            )
        if workload.endswith("history") and kill == rounds - 1:
            assert _check_history(path, states) >= rounds  # every kill's flushes left states, all checked
    assert next_round > rounds  # the children really made progress between kills
    if workload.endswith("chain"):  # the form's own chain was written (and read back after each kill)
        assert small > 0, "no flush of the small form: its chain was never written"
    if workload.startswith("steady"):  # in order: the mark-delete moved along the open ledger, mostly in the small form
        assert model.md(state) >= w.log_position(w.STEADY_FROM + rounds * w.STEADY_K - 2 * w.STEADY_K), model.md(state)
        assert small > rounds, f"{small} of the children's flushes were of the small form"


def _broker_day_found(
    path: Path,
) -> tuple[dict[str, set[tuple[int, int]]], dict[str, set[tuple[int, int]]], dict[int, int | None]]:
    """What a reader recovers of the broker's day: each subscription's acked positions
    within the ledgers the directory holds, each one's counted positions, and those ledgers
    with their entry counts (None: open); ``check`` finds nothing."""
    from ackstore import check

    from . import broker_crash_workload as b

    with AckStore.open(path, readonly=True) as store:
        topic = store.topic(b.TOPIC)
        ledgers = dict(topic.ledgers())
        acked, counted = {}, {}
        for name in b.CURSORS:
            snap = topic.cursor(name).snapshot()
            md_l, md_e = snap.mark_delete_position
            have = {(lg, e) for lg, count in ledgers.items() if lg < md_l for e in range(count or 0)}
            have |= {(md_l, e) for e in range(md_e + 1)}
            have |= {(lg, e) for lg, runs in snap.ranges for a, z in runs for e in range(a, z + 1)}
            acked[name] = have
            counted[name] = set(snap.delivery_counts)
        assert check(store) == []
    return acked, counted, ledgers


def _held_after(
    b: Any, seed: int, i: int, cap: int, began: set[tuple[int, int]], first: int, rnd: int
) -> set[tuple[int, int]]:
    """What subscription ``i`` of the broker's day holds in memory once round ``rnd`` ran, its
    child having begun at round ``first`` with ``began`` (what the kill before left): that,
    the late acks of the round before it, every entry written since, less the round's own
    negative acks. (Under a PIP-299 cap a kill loses the acks above the cut, and the child
    does not ack them again: it acks by round, not by what it reads.)"""
    late = set(b.nacked(seed, first - 1, i, cap)) if first > 0 else set()
    since = {p for r in range(first, rnd + 1) for p in b.written(r)}
    return (began | late | since) - set(b.nacked(seed, rnd, i, cap)) if rnd >= first else began


@pytest.mark.stress
@pytest.mark.parametrize("cap", [0, 1], ids=["uncapped", "capped"])
def test_kill_minus_nine_during_a_brokers_day(tmp_path: Path, long_run: bool, cap: int) -> None:
    """Subscriptions that read through their Dispatchers (every delivery counted), ack in
    lists and one position at a time, negatively ack and ack late, across ledger rollovers
    and trims, flushing every round: after each kill every subscription holds exactly what
    the last reported round acked, or (all of them) what the round after it acked; no
    flushed ack lost, none never made; no delivery count on an acked entry. Under a PIP-299
    cap of one range (two negative acks a round: flushes cut), exactly what the cut of that
    round's acks keeps."""
    from . import broker_crash_workload as b

    kills = 150 if long_run else 10
    seed, path = 20261129, tmp_path / "store"
    child_path = Path(b.__file__)
    rng = random.Random(seed)
    next_round = 0
    base: dict[str, set[tuple[int, int]]] = {name: set() for name in b.CURSORS}  # what each child began with

    for kill in range(kills):
        args = [str(child_path), str(path), str(seed), str(next_round), str(cap)]
        out = w.run_and_kill(args, rng.uniform(0.0, 0.3))
        reported = [int(line.split()[1]) for line in out.splitlines() if line.startswith("flushed")]
        last = reported[-1] if reported else next_round - 1
        acked, counted, ledgers = _broker_day_found(path)
        # what each subscription holds after each round, in every ledger it ever acked in
        # (a trim since the flush drops a ledger from what the reader sees, not from what
        # the flush cut: that is computed with the ledgers the round's flush saw)
        held = {
            rnd: {name: _held_after(b, seed, i, cap, base[name], next_round, rnd) for i, name in enumerate(b.CURSORS)}
            for rnd in (last, last + 1)
        }
        if cap:
            held = {rnd: {name: b.cut(v, b.ledgers_at(rnd), cap) for name, v in by.items()} for rnd, by in held.items()}
        want = {rnd: {name: {p for p in v if p[0] in ledgers} for name, v in by.items()} for rnd, by in held.items()}
        matched = [rnd for rnd, state in want.items() if acked == state]
        if not matched:  # name what differs from the last reported round
            lost = {name: v - acked[name] for name, v in want[last].items() if v - acked[name]}
            phantom = {name: acked[name] - v for name, v in want[last].items() if acked[name] - v}
            pytest.fail(
                f"kill {kill}: recovered state matches neither round {last} nor {last + 1}: "
                f"flushed acks lost {sorted(lost.items())[:3]}, "
                f"acks of the next round or never made {sorted(phantom.items())[:3]}"
            )
        for name in b.CURSORS:
            assert not counted[name] & acked[name], (kill, name, sorted(counted[name] & acked[name])[:5])
        low = min(b.ledgers_at(matched[0]))  # (no later round's flush sees a ledger below it)
        next_round = matched[0] + 1
        base = {name: {p for p in v if p[0] >= low} for name, v in held[matched[0]].items()}
    assert next_round > kills  # the children made progress between kills
    assert next_round > 2 * b.R  # ... across rollovers and trims
