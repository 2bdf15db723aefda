"""A broker's day: subscriptions that read through a :class:`~ackstore.Dispatcher` and ack
what they read, and what a Python developer would otherwise write to keep the same state.

Every topic (100 subscriptions each) writes ``k`` entries a round into its open ledger
(the reader's ``append``), and a ledger rolls over every ``rollover`` rounds (sealed at what
was written, the next one added, the one before the previous trimmed as retention does).
Each round every subscription:

1. reads again what it negatively acked the round before (``replay_read``) and ``k`` new
   entries (``read_more(k)``), through its Dispatcher with ``max_deliveries=5`` and a dead
   letter, so each delivery is counted in the cursor, as a broker's redelivery tracker;
2. negatively acks about one entry in a hundred of what it read (``redeliver``: read again
   next round);
3. acks everything else it read: one ``cur.ack(list)`` (``variant="list"``, ``"stuck"``,
   ``"capped"``, ``"wide"``, ``"queue"``, ``"deep"``, ``"over"``, ``"aging"`` or
   ``"history"``), one ``cur.ack(position)`` per entry
   (``variant="each"``), or one ``cur.ack_entries(ledger, array("I"))`` per ledger it read
   from (``variant="entries"``: the columnar call, the arrays built in the timed step). With ``stuck``, the first
   ``stuck`` of every fifth entry it reads are never acked, as by a consumer that hung
   holding them: they stay holes (and delivery counts) below what the subscription acks
   after them, ``stuck`` ranges more than it would hold. With ``late``, every other entry
   it reads is acked ``late`` rounds later, as by a consumer whose processing takes that
   long: the holes move along with its mark-delete position, which moves every round.
   Every subscription's ``config`` is :data:`CONFIG` unless given (:data:`HISTORY_CONFIG`: an
   hour of its states kept; :data:`CAPPED_CONFIG`: at most 64 ranges persisted;
   :data:`DEFAULT_CAP_CONFIG`: at most 10,000, the default).

Then one flush of the whole store. Steps 1 and 2 are the Dispatcher's (untimed); step 3
and the flush are what :mod:`test_bench_broker_day` times. The peers keep the same state
(per cursor: the mark-delete position, a BitMap of the acks above it per ledger, and the
delivery count of every entry delivered and not yet acked) from the same reads and acks,
and persist it a cursor at a time:

- :class:`PicklePeer`: each cursor's state pickled into one LMDB value, every cursor's in
  one ``putmulti`` of one transaction;
- :class:`SqlitePeer`: the stdlib's sqlite3 in WAL mode, a row per cursor (its
  mark-delete position and its pickled acks and counts), one UPSERT each in one
  transaction, ``synchronous=NORMAL`` (``FULL`` with sync on).
"""

from __future__ import annotations

import asyncio
import pickle
import random
import sqlite3
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Dispatcher, Position
from ackstore.dispatch.reads import Entry
from ackstore.ledger_acks import run_end
from ackstore.testing import InMemoryLedgerReader

__all__ = ["NACK_SHARE", "PER_TOPIC", "Day", "PeerCursor", "PicklePeer", "SqlitePeer", "PEERS"]

#: subscriptions per topic
PER_TOPIC = 100
#: the share of what a subscription reads that it negatively acks (read again next round)
NACK_SHARE = 0.01
CONFIG = CursorConfig(max_deliveries=5, max_unacked_ranges_to_persist=0)
#: the same, each subscription keeping an hour of its states (``history_seconds``)
HISTORY_CONFIG = CursorConfig(max_deliveries=5, max_unacked_ranges_to_persist=0, history_seconds=3600)
#: the same, each subscription persisting at most 64 ranges (PIP-299): one holding more
#: writes the lowest 64 alone at every flush (what a user's cap on ranges costs)
CAPPED_CONFIG = CursorConfig(max_deliveries=5, max_unacked_ranges_to_persist=64)
#: the same under the default cap (10,000 ranges persisted): what a subscription holding
#: more holes than that costs a broker that kept the default
DEFAULT_CAP_CONFIG = CursorConfig(max_deliveries=5)


async def _dead_letter(entry: Entry, count: int) -> None:
    return None  # never reached here: an entry is negatively acked once at most


@dataclass(slots=True)
class PeerCursor:
    """A subscription's state as a peer keeps it: what its broker developer writes."""

    md: tuple[int, int]
    """the mark-delete position (ledger, entry): everything up to it is acked"""
    acked: dict[int, BitMap] = field(default_factory=dict)
    """the acks above the mark-delete position, a BitMap per ledger"""
    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    """delivery counts of the entries delivered and not yet acked"""

    def deliver(self, positions: list[tuple[int, int]]) -> None:
        counts = self.counts
        for p in positions:
            counts[p] = counts.get(p, 0) + 1

    def ack(self, positions: list[tuple[int, int]], sealed: dict[int, int], following: dict[int, int]) -> None:
        """Acks, then the mark-delete position moved over what is now contiguous (across a
        ledger sealed at ``sealed[ledger]`` entries into ``following[ledger]``)."""
        acked, counts = self.acked, self.counts
        for p in positions:
            ledger, entry = p
            bm = acked.get(ledger)
            if bm is None:
                bm = acked[ledger] = BitMap()
            bm.add(entry)
            counts.pop(p, None)
        ledger, entry = self.md
        while True:
            bm = acked.get(ledger)
            if bm is not None and entry + 1 in bm:
                entry = run_end(bm, entry + 1)
                bm.remove_range(0, entry + 1)
                if not bm:
                    del acked[ledger]
            if sealed.get(ledger) == entry + 1 and ledger in following:
                ledger, entry = following[ledger], -1
                continue
            break
        self.md = (ledger, entry)


class Day:
    """The workload: a store of ``cursors`` subscriptions with their Dispatchers, the peers'
    cursors beside them, and the rounds."""

    def __init__(
        self,
        path: Path,
        cursors: int,
        k: int,
        sync: bool,
        rollover: int = 100,
        seed: int = 11,
        stuck: int = 0,
        late: int = 0,
        config: CursorConfig = CONFIG,
    ) -> None:
        self.k, self.rollover, self.round, self.stuck, self.late = k, rollover, 0, stuck, late
        self.rng = random.Random(seed)
        self.store = AckStore.open(path, sync=sync, map_size=1 << 31)
        self.loop = asyncio.new_event_loop()
        self.topics, self.readers, self.open = [], [], []
        self.cursors, self.dispatchers, self.peers = [], [], []
        self.sealed: dict[int, int] = {}
        self.offsets = {1: 0}  # each ledger's first entry among all the topic wrote (every topic's alike)
        self.following: dict[int, int] = {}
        for t in range(0, cursors, PER_TOPIC):
            topic = self.store.topic(f"persistent://day/ns/t{t // PER_TOPIC}")
            topic.add_ledger(1)
            reader = InMemoryLedgerReader(topic)
            self.topics.append(topic)
            self.readers.append(reader)
            self.open.append(1)
            for c in range(t, min(t + PER_TOPIC, cursors)):
                cur = topic.cursor(f"s{c}", config)
                d = Dispatcher(cur, reader, dead_letter=_dead_letter)
                d.add_consumer("c")
                self.cursors.append(cur)
                self.dispatchers.append(d)
                self.peers.append(PeerCursor((1, -1)))
        self.nacked: list[list[Position]] = [[] for _ in self.cursors]
        self.held: list[list[list[Position]]] = [[] for _ in self.cursors]  # (late: a round's held entries each)

    def _roll(self, t: int) -> None:
        """Topic ``t``'s open ledger sealed at what was written, the next one added, and the
        ledger before the sealed one trimmed (every cursor is past it by then; not while
        subscriptions hold entries of the first ledgers unacked: ``stuck``, ``late``)."""
        topic, reader, ledger = self.topics[t], self.readers[t], self.open[t]
        written = reader.written(ledger)
        topic.close_ledger(ledger, written)
        topic.add_ledger(ledger + 1)
        self.sealed[ledger], self.following[ledger] = written, ledger + 1
        self.offsets[ledger + 1] = self.offsets[ledger] + written
        self.open[t] = ledger + 1
        if not self.stuck and not self.late:
            topic.trim_ledgers(ledger)

    def read(self) -> list[list[Position]]:
        """Steps 1 and 2 of a round for every subscription (and each peer counts the same
        deliveries); returns what each acks this round."""
        self.round += 1
        rolls = self.round % self.rollover == 0
        for t, reader in enumerate(self.readers):
            if rolls:
                self._roll(t)
            reader.append(self.open[t], self.k)
        return self.loop.run_until_complete(self._reads())

    async def _reads(self) -> list[list[Position]]:
        rng, share, out = self.rng, NACK_SHARE, []
        for i, d in enumerate(self.dispatchers):
            again = [e.position for e in await d.replay_read(10)] if self.nacked[i] else []
            new = [e.position for e in await d.read_more(self.k)]
            self.peers[i].deliver([(p.ledger, p.entry) for p in again + new])
            nacked = [p for p in new if rng.random() < share]  # a new entry, so none reaches max_deliveries
            if nacked:
                d.redeliver(nacked)
                new = [p for p in new if p not in nacked]
            if self.stuck:  # held by a hung consumer: never acked
                at, most = self.offsets, 5 * self.stuck
                new = [p for p in new if not (p.entry % 5 == 2 and at[p.ledger] + p.entry < most)]
            if self.late:  # every other entry acked `late` rounds after it was read
                held = self.held[i]
                held.append([p for p in new if p.entry % 2])
                new = [p for p in new if not p.entry % 2] + (held.pop(0) if len(held) > self.late else [])
            self.nacked[i] = nacked
            out.append(again + new)
        return out

    def ack(self, acks: list[list[Position]], variant: str = "list") -> None:
        """Step 3 on ackstore: every subscription's acks of the round."""
        if variant == "entries":
            for cur, positions in zip(self.cursors, acks, strict=True):
                by: dict[int, array[int]] = {}
                for ledger, entry in positions:
                    entries = by.get(ledger)
                    if entries is None:
                        entries = by[ledger] = array("I")
                    entries.append(entry)
                for ledger, entries in by.items():
                    cur.ack_entries(ledger, entries)
        elif variant != "each":
            for cur, positions in zip(self.cursors, acks, strict=True):
                cur.ack(positions)
        else:
            for cur, positions in zip(self.cursors, acks, strict=True):
                for p in positions:
                    cur.ack(p)

    def peer_ack(self, acks: list[list[Position]]) -> None:
        """Step 3 on the peers' state (one state for both: they persist the same)."""
        sealed, following = self.sealed, self.following
        for peer, positions in zip(self.peers, acks, strict=True):
            peer.ack([(p.ledger, p.entry) for p in positions], sealed, following)

    def close(self) -> None:
        self.store.close()
        self.loop.close()


class PicklePeer:
    """Each cursor's state pickled into one LMDB value; every cursor's in one transaction."""

    name = "pickled state in LMDB"

    def __init__(self, path: Path, day: Day, sync: bool) -> None:
        self.day = day
        self.env = lmdb.open(str(path), map_size=1 << 31, sync=sync, metasync=sync, max_dbs=1)
        self.keys = [c.to_bytes(8, "big") for c in range(len(day.peers))]
        self.logical = 0

    def flush(self) -> None:
        values = [pickle.dumps((p.md, p.acked, p.counts), protocol=5) for p in self.day.peers]
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(list(zip(self.keys, values, strict=True)))
        self.logical = sum(map(len, values)) + 8 * len(values)

    def close(self) -> None:
        self.env.close()


class SqlitePeer:
    """A row per cursor: its mark-delete position and its pickled acks and counts."""

    name = "SQLite WAL (a row per cursor)"

    def __init__(self, path: Path, day: Day, sync: bool) -> None:
        self.day = day
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
        self.db.execute(
            "CREATE TABLE cursors (id INTEGER PRIMARY KEY, md_ledger INTEGER NOT NULL, md_entry INTEGER NOT NULL,"
            " state BLOB NOT NULL)"
        )
        self.logical = 0

    def flush(self) -> None:
        rows = [
            (c, p.md[0], p.md[1], pickle.dumps((p.acked, p.counts), protocol=5)) for c, p in enumerate(self.day.peers)
        ]
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO cursors VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET md_ledger = excluded.md_ledger,"
            " md_entry = excluded.md_entry, state = excluded.state",
            rows,
        )
        self.db.execute("COMMIT")
        self.logical = sum(24 + len(r[3]) for r in rows)

    def close(self) -> None:
        self.db.close()


#: the peers by short name
PEERS: dict[str, Any] = {"pickle": PicklePeer, "sqlite": SqlitePeer}
