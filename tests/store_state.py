"""The whole logical state of a store, for comparing a store with its salvage, compaction,
copy or repair: every topic's directory and bound, every cursor's configuration,
positions, ranges, partial batches and properties."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ackstore import AckStore, CursorConfig, Position


def state_of(store: AckStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in store.topics():
        topic = store.topic(name)
        cursors = {}
        for c in topic.cursors():
            cur = topic.cursor(c)
            cursors[c] = (
                cur.config.to_obj(),
                cur.mark_delete_position,
                list(cur.ack_ranges()),
                cur.partial_batches(),
                cur.properties,
            )
        out[name] = (topic.ledgers(), topic.directory.tracked, topic.last_confirmed, cursors)
    return out


def state_at(path: Path) -> dict[str, Any]:
    with AckStore.open(path, readonly=True) as store:
        return state_of(store)


def build_store(path: Path, seed: int, flushes: int = 12) -> dict[str, Any]:
    """A store with a bit of everything a repair tool must keep or must not bring back:
    several topics, sealed and open ledgers, a tracked bound, holes, partial batches, int
    and string properties, configurations changed after use, trimmed ledgers, deleted
    cursors and topics, and records of exactly 22 bytes. Returns its committed state."""
    rng = random.Random(seed)
    with AckStore.open(path, sync=False) as store:
        for t in range(rng.randint(1, 3)):
            topic = store.topic(f"persistent://t/ns/s{seed}-{t}")
            ledgers = rng.randint(2, 5)
            for ledger in range(1, ledgers + 1):
                topic.add_ledger(ledger)
                if ledger < ledgers:
                    topic.close_ledger(ledger, rng.choice([100, 5000, 60_000]))
            if rng.random() < 0.5:
                topic.advance(ledgers, rng.randint(10, 500))
            last = topic.last_confirmed.entry if topic.last_confirmed is not None else 500
            curs = [
                topic.cursor(
                    f"sub/{c}" if c % 3 == 2 else f"sub-{c}", CursorConfig(full_marker_every=rng.randint(1, 6))
                )
                for c in range(rng.randint(1, 6))
            ]
            for _ in range(flushes):
                for cur in curs:
                    ledger = rng.randint(1, ledgers)
                    top = last if ledger == ledgers else topic.ledgers()[ledger - 1][1] - 1  # type: ignore[operator]
                    if top < 0:
                        continue
                    cur.ack([Position(ledger, rng.randint(0, top)) for _ in range(rng.randint(1, 40))])
                    if rng.random() < 0.2:
                        cur.ack_batch_index(Position(ledger, rng.randint(0, top)), 8, [rng.randrange(8)])
                    if rng.random() < 0.1:
                        cur.set_property("owner", rng.choice(["svc", "x" * 40]))
                    if rng.random() < 0.1:
                        cur.set_property("n", rng.randint(-5, 5))
                if rng.random() < 0.2:
                    curs[0].update_config(full_marker_every=rng.randint(1, 9))
                store.flush()
            if len(curs) > 1 and rng.random() < 0.5:
                topic.delete_cursor(curs[-1].name)
            if ledgers > 2 and rng.random() < 0.5:
                topic.trim_ledgers(2)
        small = store.topic(f"persistent://t/ns/small{seed}")  # a 22-byte ledger record's state
        small.add_ledger(7)
        small.cursor("c").ack([Position(7, 6), Position(7, 16), Position(7, 60)])
        if rng.random() < 0.5:
            gone = store.topic(f"persistent://t/ns/gone{seed}")
            gone.add_ledger(1)
            gone.cursor("g").ack([Position(1, 3)])
            store.flush()
            store.delete_topic(gone.name)
        expected = state_of(store)
    return expected


def sealed_two_open_one(store: AckStore, topic: str, entries: int) -> Any:
    """Topic ``topic`` of ``store`` with ledgers 1 and 2 sealed at ``entries`` entries and 3
    open; its cursor ``c`` (a new one: at the start)."""
    t = store.topic(topic)
    for ledger in (1, 2):
        t.add_ledger(ledger)
        t.close_ledger(ledger, entries)
    t.add_ledger(3)
    return t.cursor("c")
