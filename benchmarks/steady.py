"""The workload a broker runs all day, and what a Python developer would otherwise write for
it: subscriptions consuming their topic's open ledger in order, the mark-delete position
moving every round, a few acks held back and made one to three rounds later.

Each round every cursor acks the next ``k`` entries of its topic's open ledger, less one
or two it holds back (each made 1-3 rounds later), so it has a few open holes (1-5) and
its mark-delete position moves every round; then one flush of every cursor. The engines
keep the same state; only the flush is timed (``test_bench_steady.py``):

- :class:`AckstoreSteady`: ackstore, ``store.flush()``;
- :class:`PickleSteady`: each cursor's ``(mark-delete entry, BitMap of the acks above
  it)`` pickled (pyroaring's portable form inside) into one LMDB value, every cursor's in
  one ``putmulti`` of one transaction;
- :class:`SqliteSteady`: the stdlib's sqlite3 in WAL mode, one row per cursor ``(id,
  mark-delete entry, acks blob)`` (the BitMap's portable form), one UPSERT per cursor in
  one transaction (``executemany``), ``synchronous=NORMAL`` (``FULL`` with sync on).

:func:`position_info_bytes` is the size of Pulsar's ``PositionInfo`` protobuf for the same
state (mark-delete position and the acked ranges above it), for comparison.
"""

from __future__ import annotations

import pickle
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig
from ackstore.ledger_acks import run_bounds, run_end

__all__ = ["Steady", "AckstoreSteady", "PickleSteady", "SqliteSteady", "ENGINES", "position_info_bytes"]

#: subscriptions per topic (a topic's cursors share its open ledger)
PER_TOPIC = 100
LEDGER = 1
#: every cursor is written whole enough for the workload (no PIP-299 cap in play)
CONFIG = CursorConfig(max_unacked_ranges_to_persist=0)


class Steady:
    """The workload's state, as every engine keeps it: per cursor the mark-delete entry
    (of ledger 1), the acks above it, the next entry to consume and the held-back acks
    (entry -> round it is made)."""

    def __init__(self, cursors: int, k: int, seed: int = 7) -> None:
        self.cursors, self.k = cursors, k
        self.rng = random.Random(seed)
        self.md = [-1] * cursors
        self.acked = [BitMap() for _ in range(cursors)]
        self.next = [0] * cursors
        self.held: list[dict[int, int]] = [{} for _ in range(cursors)]
        self.round = 0

    def step(self) -> list[BitMap]:
        """One round: each cursor's new acks (also applied to this state, mark-delete moved)."""
        self.round += 1
        rng, k, out = self.rng, self.k, []
        for c in range(self.cursors):
            start = self.next[c]
            batch = BitMap(range(start, start + k))
            self.next[c] = start + k
            held = self.held[c]
            if len(held) < 5:  # hold one or two back, made 1-3 rounds later
                for e in rng.sample(range(start, start + k), rng.choice((1, 1, 2))):
                    held[e] = self.round + rng.randint(1, 3)
            due = [e for e, r in held.items() if r <= self.round]
            for e in due:
                del held[e]
            batch.difference_update(BitMap(held))
            batch.update(due)
            acked = self.acked[c]
            acked |= batch
            md = self.md[c]
            if md + 1 in acked:
                md = run_end(acked, md + 1)
                acked.remove_range(0, md + 1)
                self.md[c] = md
            out.append(batch)
        return out

    def ranges(self, c: int) -> Iterator[tuple[int, int]]:
        yield from run_bounds(self.acked[c])


def _varint(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _position(ledger: int, entry: int) -> int:
    """A NestedPositionInfo's bytes: ledgerId (field 1) and entryId (field 2), int64 varints."""
    return 1 + _varint(ledger) + 1 + _varint(entry & (1 << 64) - 1)


def position_info_bytes(md: tuple[int, int], ranges: Iterator[tuple[int, int]]) -> int:
    """The size of Pulsar's ``PositionInfo`` for a mark-delete position and the acked ranges
    above it (``individualDeletedMessages``: each a ``MessageRange`` of an open lower and a
    closed upper endpoint), no properties: the protobuf encoding's bytes."""
    size = _position(*md)  # ledgerId = 1, entryId = 2, as in a nested position
    for first, last in ranges:
        lower, upper = _position(md[0], first - 1), _position(md[0], last)
        body = 1 + _varint(lower) + lower + 1 + _varint(upper) + upper
        size += 1 + _varint(body) + body  # individualDeletedMessages = 3
    return size


class AckstoreSteady:
    """ackstore through its public API: a topic per 100 cursors, one open ledger each."""

    name = "ackstore"

    def __init__(self, path: Path, state: Steady, sync: bool, config: CursorConfig = CONFIG) -> None:
        self.store = AckStore.open(path, sync=sync, map_size=1 << 30)
        self.cursors = []
        self.topics: list[str] = []
        for t in range(0, state.cursors, PER_TOPIC):
            self.topics.append(f"persistent://t/ns/steady-{t // PER_TOPIC}")
            topic = self.store.topic(self.topics[-1])
            topic.add_ledger(LEDGER)
            self.cursors += [topic.cursor(f"s{c}", config) for c in range(t, min(t + PER_TOPIC, state.cursors))]
        self.logical = 0

    def ack(self, batches: list[BitMap]) -> None:
        for cur, batch in zip(self.cursors, batches, strict=True):
            cur.ack_entries(LEDGER, batch)

    def flush(self) -> None:
        self.logical = self.store.flush().bytes_written

    def reopen(self, read_all: bool = False, readonly: bool = False) -> None:
        """Close and reopen every cursor (a restart's bulk open, lazy as by default);
        ``read_all``: then read every cursor's ranges, so its whole state is in memory;
        ``readonly``: as a reader opens the store (a monitor, an audit)."""
        path = self.store.path
        self.store.close()
        self.store = AckStore.open(path, sync=False, map_size=1 << 30, readonly=readonly)
        self.cursors = []
        for name in self.topics:
            self.cursors += self.store.topic(name).open_cursors(CONFIG).values()
        if read_all:
            for cur in self.cursors:
                list(cur.ledger_ranges())

    def close(self) -> None:
        self.store.close()


class PickleSteady:
    """Each cursor's state pickled into one LMDB value; every cursor's in one transaction."""

    name = "pickled BitMaps in LMDB"

    def __init__(self, path: Path, state: Steady, sync: bool) -> None:
        self.state = state
        self.env = lmdb.open(str(path), map_size=1 << 30, sync=sync, metasync=sync, max_dbs=1)
        self.keys = [c.to_bytes(8, "big") for c in range(state.cursors)]
        self.logical = 0

    def ack(self, batches: list[BitMap]) -> None:
        return None  # the state is the workload's own (kept in memory, untimed)

    def flush(self) -> None:
        st = self.state
        values = [pickle.dumps((st.md[c], st.acked[c]), protocol=5) for c in range(st.cursors)]
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(list(zip(self.keys, values, strict=True)))
        self.logical = sum(map(len, values)) + 8 * len(values)

    def reopen(self) -> None:
        """Close and reopen the environment, unpickling every cursor's state (the least work
        that holds the state again)."""
        path = self.env.path()
        self.env.close()
        self.env = lmdb.open(path, map_size=1 << 30, sync=False, max_dbs=1)
        with self.env.begin() as txn:
            self.loaded = [pickle.loads(v) for _, v in txn.cursor()]

    def close(self) -> None:
        self.env.close()


class SqliteSteady:
    """A row per cursor: its mark-delete entry and its acks' portable roaring bytes."""

    name = "SQLite WAL (a row per cursor)"

    def __init__(self, path: Path, state: Steady, sync: bool) -> None:
        self.state = state
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
        self.db.execute("CREATE TABLE cursors (id INTEGER PRIMARY KEY, md INTEGER NOT NULL, acks BLOB NOT NULL)")
        self.logical = 0

    def ack(self, batches: list[BitMap]) -> None:
        return None

    def flush(self) -> None:
        st = self.state
        rows = [(c, st.md[c], st.acked[c].serialize()) for c in range(st.cursors)]
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO cursors VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET md = excluded.md, acks = excluded.acks",
            rows,
        )
        self.db.execute("COMMIT")
        self.logical = sum(len(r[2]) + 16 for r in rows)

    def close(self) -> None:
        self.db.close()


ENGINES: dict[str, Any] = {"ackstore": AckstoreSteady, "pickle": PickleSteady, "sqlite": SqliteSteady}
