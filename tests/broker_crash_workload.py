"""A broker's day for the kill -9 campaign: the child process's rounds and what they ack.

``CURSORS`` subscriptions of one topic each read through a :class:`~ackstore.Dispatcher`
(every delivery counted), and each round ``r`` acks the ``K`` entries the topic wrote in
that round less the ones it negatively acks (:func:`nacked`), which it reads again and acks
in the round after; the ledger rolls over every ``R`` rounds (the open one sealed at what
was written, the next added, the one before the sealed one trimmed). What a round acks
depends only on the seed, the round and the subscription, never on what the reads returned
(after a restart they deliver again what was not flushed), so the parent knows exactly what
every round acked: :func:`acked_after`.

With a PIP-299 cap (``CAP`` > 0) each subscription persists at most that many ranges and
negatively acks two entries a round when it negatively acks any, so that its flushes cut
(:func:`cut`: what a restart then holds).

Child: ``broker_crash_workload.py STORE SEED FIRST_ROUND [CAP]``; runs rounds from
FIRST_ROUND, flushing after each (``sync=True``) and printing ``flushed R``, until killed.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ackstore import Topic

TOPIC = "persistent://t/ns/broker-day"
CURSORS = [f"s{i}" for i in range(12)]
K = 10
"""entries the topic writes a round"""
R = 4
"""rounds a ledger is open for: a sealed ledger holds ``R * K`` entries"""


def ledger_of(rnd: int) -> int:
    """The open ledger during round ``rnd`` (ledgers 1, 2, ...)."""
    return 1 + rnd // R


def ledgers_at(rnd: int) -> dict[int, int | None]:
    """The topic's ledgers during round ``rnd`` (:func:`roll_to`'s): the open one and the one
    sealed before it, ``{ledger: entries}`` (None: open)."""
    ledger = ledger_of(rnd)
    return {ledger - 1: R * K, ledger: None} if ledger > 1 else {ledger: None}


def written(rnd: int) -> list[tuple[int, int]]:
    """The positions the topic writes in round ``rnd``."""
    ledger, start = ledger_of(rnd), (rnd % R) * K
    return [(ledger, e) for e in range(start, start + K)]


def nacked(seed: int, rnd: int, cursor: int, cap: int = 0) -> list[tuple[int, int]]:
    """What subscription ``cursor`` negatively acks of round ``rnd``'s entries (acked next
    round): one entry, or with a ``cap``, two."""
    rng = random.Random(seed * 1_000_003 + rnd * 1_009 + cursor)
    if rng.random() >= 0.5:
        return []
    return sorted(rng.sample(written(rnd), 2)) if cap else [rng.choice(written(rnd))]


def acks(seed: int, rnd: int, cursor: int, cap: int = 0) -> list[tuple[int, int]]:
    """What subscription ``cursor`` acks in round ``rnd``: the negative acks of the round
    before, then the round's entries less its own negative acks."""
    late = nacked(seed, rnd - 1, cursor, cap) if rnd > 0 else []
    held = set(nacked(seed, rnd, cursor, cap))
    return [*late, *(p for p in written(rnd) if p not in held)]


def acked_after(seed: int, rnd: int, cursor: int, cap: int = 0) -> set[tuple[int, int]]:
    """Every position subscription ``cursor`` has acked once round ``rnd`` ran (none before round 0)."""
    out = {p for r in range(rnd + 1) for p in written(r)}
    return out - set(nacked(seed, rnd, cursor, cap)) if rnd >= 0 else out


def cut(acked: set[tuple[int, int]], ledgers: dict[int, int | None], cap: int) -> set[tuple[int, int]]:
    """What a flush under a PIP-299 cap of ``cap`` ranges persists of ``acked`` (positions in
    ``ledgers``, ``{ledger: entries}``, None for the open one): the entries up to the
    mark-delete position, then the lowest ``cap`` runs above it, each ledger's counted apart."""
    out: set[tuple[int, int]] = set()
    prefix, left = True, cap
    for ledger, count in sorted(ledgers.items()):
        here = {e for lg, e in acked if lg == ledger}
        start = 0
        if prefix:  # M's part: acked from the ledger's first entry on, and on into the next when sealed whole
            while start in here:
                out.add((ledger, start))
                start += 1
            prefix = count is not None and start == count
        entries = sorted(e for e in here if e >= start)
        runs: list[list[int]] = []
        for e in entries:
            if runs and runs[-1][-1] == e - 1:
                runs[-1].append(e)
            else:
                runs.append([e])
        for run in runs[:left]:
            out |= {(ledger, e) for e in run}
        left -= min(left, len(runs))
    return out


def roll_to(topic: Topic, rnd: int) -> None:
    """Bring the topic's directory to what round ``rnd`` reads: its open ledger added, every
    ledger before it sealed at ``R * K`` entries, and the ones before the last sealed one
    trimmed. Idempotent: a child that restarts after a kill finds the directory its
    predecessor left (directory changes are durable at once) and makes only what is missing."""
    target = ledger_of(rnd)
    if not topic.ledgers():
        topic.add_ledger(1)
    while True:
        ledger, count = topic.ledgers()[-1]
        if count is None and ledger >= target:
            break
        if count is None:  # (a kill between the seal and the next ledger leaves it sealed)
            topic.close_ledger(ledger, R * K)
        topic.add_ledger(ledger + 1)
    if topic.ledgers()[0][0] < target - 1:  # (and one between the next ledger and the trim, untrimmed)
        topic.trim_ledgers(target - 1)


def main() -> None:
    from ackstore import AckStore, CursorConfig, Dispatcher, Position
    from ackstore.testing import InMemoryLedgerReader

    path, seed, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cap = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    store = AckStore.open(path, sync=True)
    topic = store.topic(TOPIC)
    config = CursorConfig(max_unacked_ranges_to_persist=cap)
    cursors = [topic.cursor(name, config) for name in CURSORS]
    reader = InMemoryLedgerReader(topic)
    dispatchers = [Dispatcher(cur, reader) for cur in cursors]
    loop = asyncio.new_event_loop()
    print("ready", flush=True)
    rnd = first
    roll_to(topic, rnd)
    reader.append(ledger_of(rnd), (rnd % R) * K)  # what the open ledger held before this round
    while True:
        if rnd % R == 0:
            roll_to(topic, rnd)
        reader.append(ledger_of(rnd), K)
        for i, (cur, d) in enumerate(zip(cursors, dispatchers, strict=True)):
            loop.run_until_complete(d.replay_read(10))
            loop.run_until_complete(d.read_more(2 * K))  # what this round wrote, and any left unread
            held = nacked(seed, rnd, i, cap)
            if held:
                d.redeliver([Position(*p) for p in held])
            positions = [Position(*p) for p in acks(seed, rnd, i, cap)]
            if i % 2:
                cur.ack(positions)  # one list, as a broker acks what it read
            else:
                for p in positions:  # one position at a time
                    cur.ack(p)
        store.flush()
        print(f"flushed {rnd}", flush=True)
        rnd += 1


if __name__ == "__main__":
    main()
