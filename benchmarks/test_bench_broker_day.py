"""A broker's day (``broker_day.py``): each round every subscription reads through its
Dispatcher (delivery counts on), negatively acks about one entry in a hundred and acks
the rest, then one flush; the peers keep the same state from the same reads and acks.

What is timed, per round, on both sides: the acks of every subscription (ackstore: its
``Cursor.ack`` calls; a peer: the same acks applied to its state) and the flush. The
Dispatcher's reads and negative acks are the broker's own work, untimed on both sides.
As in the steady suite, the engines run in the same rounds, in an order that rotates
from round to round, and ackstore's time is set against the faster peer's round by round
(the median of each round's ratio), for the acks and flush together and for the flush
alone.

Cases: 1,000 and 10,000 subscriptions, ``k`` = 10, 50, 100 entries a read, acked with
one ``cur.ack(list)`` a read; at 1,000 x 50 also one ``cur.ack(position)`` per entry, and
one ``cur.ack(list)`` a read by subscriptions that each hold 80 holes (``stuck``: a state
of a few hundred bytes, as a slot takes it), 400 (``wide``: a state of about 1.6 KB, still a
slot's) or 1,000, a consumer's full receiver queue (``queue``: a state over a slot's 1,984
bytes, written as ledger records and markers), or that ack every other entry 40 rounds after
reading it (``late``: 1,000 holes that move on with the mark-delete position, every round; at
k = 25, 500 holes, whose acks since their ledger's record fit a marker for a few rounds),
or keep an hour of history (``history``); at 100 x 500, subscriptions that each hold
10,000 holes (``deep``: more than 8,192 ranges each) or 12,000 (``over``: more ranges
than the 10,000 a flush persists by default, so each flush persists the lowest 10,000 and
finds them unchanged while the acks land above them); and the rounds in which every topic's ledger rolls
over (one round in ten here), set against the plain rounds between them in the same run, by
subscriptions that hold no entry, that hold 80 or 1,000 of the first ledger across every
rollover, or that ack late across them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap

from .broker_day import CAPPED_CONFIG, CONFIG, DEFAULT_CAP_CONFIG, HISTORY_CONFIG, PEERS, Day
from .kernel import wchar as _wchar

#: (cursors, k, variant, rollover): "rollover" cases time only the rounds that roll over. The
#: 1,000-cursor cases run first, the largest heaps last: a case run after one of 10,000
#: cursors (and their peers) finds the heap that case left (one ack a call read 6.3 ms a round
#: there, 4.9 ms alone), so the two ack variants run from the same kind of heap
CASES = [(1000, k, "list", 0) for k in (10, 50, 100)]
CASES += [(1000, 50, "each", 0), (1000, 50, "entries", 0), (1000, 50, "list", 10), (1000, 50, "entries", 10)]
CASES += [(1000, 50, "stuck", 0), (1000, 50, "capped", 0), (1000, 50, "wide", 0)]
CASES += [(1000, 50, "stuck", 10), (1000, 50, "history", 0), (1000, 50, "queue", 0), (1000, 50, "queue", 10)]
CASES += [(1000, 25, "late", 0), (1000, 50, "late", 0), (1000, 50, "late", 10), (100, 500, "deep", 0)]
CASES += [(100, 500, "over", 0)]
CASES += [(100, 50, "aging", 2)]
CASES += [(10_000, k, "list", 0) for k in (10, 50, 100)]
#: the holes a subscription of these variants holds
STUCK = {"stuck": 80, "wide": 400, "queue": 1000, "capped": 80, "deep": 10_000, "over": 12_000, "aging": 80}
#: the variants whose subscriptions are configured apart
CONFIGS = {"history": HISTORY_CONFIG, "capped": CAPPED_CONFIG, "over": DEFAULT_CAP_CONFIG}
LATE = {"late": 40}  # the rounds every other entry waits for its ack (1,000 holes at k = 50)
AGED = {"aging": 300}  # untimed rounds first (150 rollovers at one every 2 rounds: 150 ledgers after the holes')
WARM = 8  # untimed rounds first: counts, holes and records as the workload keeps them


def _case_id(case: tuple[int, int, str, int]) -> str:
    n, k, variant, rollover = case
    return f"{n}x{k}-{variant}" + (f"-rollover-every-{rollover}" if rollover else "")


@pytest.mark.parametrize("cursors,k,variant,rollover", CASES, ids=[_case_id(c) for c in CASES])
def test_broker_day(benchmark: Any, tmp_path: Path, cursors: int, k: int, variant: str, rollover: int) -> None:
    stuck = STUCK.get(variant, 0)
    late = LATE.get(variant, 0)
    day = Day(
        tmp_path / "ackstore",
        cursors,
        k,
        False,
        rollover or 100,
        stuck=stuck,
        late=late,
        config=CONFIGS.get(variant, CONFIG),
    )
    peers = {name: cls(tmp_path / name, day, False) for name, cls in PEERS.items()}
    engines = ["ackstore", *peers]
    orders = [engines[i:] + engines[:i] for i in range(len(engines))]
    acks: list[Any] = []
    ours: dict[str, list[float]] = {"ack": [], "flush": [], "plain": []}
    theirs: dict[str, dict[str, list[float]]] = {name: {"ack": [], "flush": []} for name in peers}
    wchar = dict.fromkeys(engines, 0)
    state: dict[str, Any] = {"after": [], "mark": 0, "done": 0}
    written: list[int] = []

    def timed(fn: Callable[[], object]) -> float:
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started

    def flush_peer(name: str) -> None:
        before = _wchar()
        theirs[name]["flush"].append(timed(peers[name].flush))
        wchar[name] += _wchar() - before

    def plain_round() -> None:
        """A whole round, untimed but for ackstore's acks and flush (the rollover case's
        plain rounds, set against its rollover rounds)."""
        acks[:] = day.read()
        day.peer_ack(acks)
        ours["plain"].append(timed(lambda: day.ack(acks, variant)) + timed(day.store.flush))
        for peer in peers.values():
            peer.flush()

    def round_setup() -> None:
        """The previous round's peers due after ackstore; this round's reads; the peers'
        acks (one state, timed once for both) and the peers due before ackstore."""
        if state["mark"]:
            wchar["ackstore"] += _wchar() - state["mark"]
        for name in state["after"]:
            flush_peer(name)
        if rollover:
            while (day.round + 1) % rollover:
                plain_round()
        order = orders[state["done"] % len(orders)]
        state["done"] += 1
        at = order.index("ackstore")
        state["after"] = order[at + 1 :]
        acks[:] = day.read()
        spent = timed(lambda: day.peer_ack(acks))
        for name in peers:
            theirs[name]["ack"].append(spent)
        for name in order[:at]:
            flush_peer(name)
        state["mark"] = _wchar()

    def acks_and_flush() -> None:
        ours["ack"].append(timed(lambda: day.ack(acks, variant)))
        started = time.perf_counter()
        written.append(day.store.flush().bytes_written)
        ours["flush"].append(time.perf_counter() - started)

    rounds = 6 if rollover else (24 if cursors <= 1000 else 12)
    try:
        for _ in range(max(WARM, 5 * stuck // k + 1, late + 2, AGED.get(variant, 0))):  # (every hole made first)
            plain_round()
        ours["plain"].clear()
        benchmark.group = f"broker's day: {_case_id((cursors, k, variant, rollover))}"
        benchmark.pedantic(acks_and_flush, setup=round_setup, rounds=rounds)
        wchar["ackstore"] += _wchar() - state["mark"]
        for name in state["after"]:
            flush_peer(name)
        _same_state(day)
        total = {name: [a + f for a, f in zip(t["ack"], t["flush"], strict=True)] for name, t in theirs.items()}
        mine = [a + f for a, f in zip(ours["ack"], ours["flush"], strict=True)]
        faster = min(peers, key=lambda name: statistics.median(total[name]))
        benchmark.extra_info.update(
            day=True,
            cursors=cursors,
            k=k,
            variant=variant,
            rollover=rollover,
            ack=statistics.median(ours["ack"]),
            flush=statistics.median(ours["flush"]),
            total=statistics.median(mine),
            paired=statistics.median(m / p for m, p in zip(mine, total[faster], strict=True)),
            paired_flush=statistics.median(m / p for m, p in zip(ours["flush"], theirs[faster]["flush"], strict=True)),
            plain=statistics.median(ours["plain"]) if ours["plain"] else None,
            wchar=wchar["ackstore"] // rounds,
            bytes=statistics.median(written),
            acks=sum(map(len, acks)),
            peers={
                name: {
                    "engine": peers[name].name,
                    "ack": statistics.median(theirs[name]["ack"]),
                    "flush": statistics.median(theirs[name]["flush"]),
                    "total": statistics.median(total[name]),
                    "wchar": wchar[name] // rounds,
                    "bytes": peers[name].logical,
                }
                for name in peers
            },
        )
    finally:
        for peer in peers.values():
            peer.close()
        day.close()


def _same_state(day: Day) -> None:
    """The engines did the same work: every tenth of ackstore's cursors holds what the
    peers' state holds (the mark-delete position, the acks above it and the delivery
    counts of what was delivered and not acked)."""
    for cur, peer in list(zip(day.cursors, day.peers, strict=True))[::10]:
        ranges = {ledger: BitMap() for ledger, _ in cur.ledger_ranges()}
        for ledger, runs in cur.ledger_ranges():
            for first, last in runs:
                ranges[ledger].add_range(first, last + 1)
        assert ranges == {ledger: bm for ledger, bm in peer.acked.items() if bm}, cur.name
        assert {(p.ledger, p.entry): n for p, n in cur.delivery_counts().items()} == peer.counts, cur.name
        md = cur.mark_delete_position
        assert (md.ledger, md.entry) == peer.md, (cur.name, md, peer.md)
