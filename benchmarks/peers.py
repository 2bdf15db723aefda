"""What a Python developer would otherwise write to persist ack state, as honest peers of
ackstore on the same workloads (``test_bench_peers.py`` runs them side by side).

- :class:`SqlitePeer`: the stdlib's sqlite3, WAL, one row per ack range
  ``(cursor, ledger, first, last)`` kept by row deltas: one indexed statement per new ack
  (insert, or extend the neighbouring row; a join of two rows is two), the case known from
  the acks the peer holds in memory; one transaction per flush. ``synchronous=NORMAL`` or
  ``FULL``.
- :class:`PicklePeer`: each cursor's ``{ledger: BitMap}`` pickled (pyroaring's own
  portable serialization inside) into one LMDB value per changed cursor, one transaction.
- :class:`AckstorePeer`: ackstore itself through its public API.

Each keeps the state in memory the simplest way it can and implements ``ack``, ``flush``,
``file_bytes`` and ``reopen`` (close, open, and bring the whole state back into memory).
A workload builds the initial state and says which acks each round adds.
"""

from __future__ import annotations

import pickle
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
from pyroaring import BitMap

from ackstore import AckStore, Position
from ackstore.ledger_acks import LedgerAcks, run_end

from .states import UNBOUNDED

__all__ = ["Workload", "WORKLOADS", "SqlitePeer", "PicklePeer", "AckstorePeer", "PEERS"]

State = dict[str, dict[int, BitMap]]


@dataclass(frozen=True)
class Workload:
    """An initial state (cursor -> ledger -> acked entries; ledgers sealed at ``entries``)
    and the acks one round adds: ``touch(rng, state)`` -> [(cursor, ledger, entry)]."""

    name: str
    ledgers: int
    entries: int
    build: Callable[[random.Random], State]
    touch: Callable[[random.Random, State], list[tuple[str, int, int]]]


def _pattern(
    ledgers: int, entries: int, keep: Callable[[random.Random, int], bool]
) -> Callable[[random.Random], State]:
    def build(rng: random.Random) -> State:
        return {"c": {lg: BitMap(e for e in range(1, entries) if keep(rng, e)) for lg in range(1, ledgers + 1)}}

    return build


def _one_hole(rng: random.Random, state: State, entries: int) -> list[tuple[str, int, int]]:
    """One new ack in one random ledger of one random cursor: an entry not yet acked."""
    name = rng.choice(sorted(state))
    ledger = rng.choice(sorted(state[name]))
    bm = state[name][ledger]
    for _ in range(100):
        entry = rng.randrange(1, entries)
        if entry not in bm:
            return [(name, ledger, entry)]
    return []


def _each_cursor(rng: random.Random, state: State, entries: int) -> list[tuple[str, int, int]]:
    out = []
    for name, ledgers in state.items():
        for ledger, bm in ledgers.items():
            holes = [e for e in (rng.randrange(1, entries) for _ in range(20)) if e not in bm]
            if holes:
                out.append((name, ledger, holes[0]))
    return out


def _workloads() -> list[Workload]:
    e = 50_000
    many, sparse = 1000, 10_000
    return [
        Workload("random 10% acks", 5, e, _pattern(5, e, lambda r, _: r.random() < 0.1),
                 lambda r, s: _one_hole(r, s, e)),
        Workload("alternating acks", 5, e, _pattern(5, e, lambda _, x: x % 2 == 0),
                 lambda r, s: _one_hole(r, s, e)),
        Workload("runs of ~1000, random holes", 5, e, _pattern(5, e, lambda r, _: r.random() >= 0.001),
                 lambda r, s: _one_hole(r, s, e)),
        Workload("1,000 cursors x ~2,500 holes, 1 new ack each", 1, 5000,
                 lambda r: {f"c{i}": {1: BitMap(range(1, 5000, 2))} for i in range(many)},
                 lambda r, s: _each_cursor(r, s, 5000)),
        Workload("10,000 sparse ledgers, 1 touched", sparse, 1000,
                 lambda r: {"c": {lg: BitMap(r.sample(range(1, 1000), 3)) for lg in range(1, sparse + 1)}},
                 lambda r, s: _one_hole(r, s, 1000)),
    ]  # fmt: skip


WORKLOADS = _workloads()


def _run_start(bitmap: BitMap, end: int) -> int:
    """The first value of the run that ends at ``end`` (which must be in ``bitmap``):
    a binary search on rank, O(log(span) * containers)."""
    base = bitmap.rank(end)
    lo, hi = bitmap.min(), end
    while lo < hi:  # every value in [hi, end] is present
        mid = (lo + hi) // 2
        if base - bitmap.rank(mid - 1) == end - mid + 1:
            hi = mid
        else:
            lo = mid + 1
    return lo


class SqlitePeer:
    """One row per ack range ``(cursor, ledger, first, last)``, kept as a competent user
    would: the peer holds the acks in memory anyway, so at ack time it knows whether a new
    ack starts a range, extends its left or right neighbour, or joins the two, and a flush
    runs ONE statement per ack on the primary key (an insert, or an update of the
    neighbouring row, whose ``first`` it also knows from memory; a join is an update and a
    delete). No second index: every index would be one more page written per ack. All of a
    flush in one transaction; the initial state is bulk-inserted."""

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        self.path, self.synchronous = path, synchronous
        self.state: State = {}
        self.pending: list[tuple[Any, ...]] = []
        self.db = self._connect()
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS ranges (cursor TEXT, ledger INTEGER, first INTEGER, last INTEGER, "
            "PRIMARY KEY (cursor, ledger, first)) WITHOUT ROWID"
        )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self.synchronous}")
        return db

    def load(self, state: State) -> None:
        self.state = {c: {lg: BitMap(bm) for lg, bm in ls.items()} for c, ls in state.items()}
        rows = [
            (c, lg, a, b) for c, ls in self.state.items() for lg, bm in ls.items() for a, b in LedgerAcks(bm).ranges()
        ]
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO ranges VALUES (?, ?, ?, ?)", rows)
        self.db.execute("COMMIT")

    def ack(self, cursor: str, ledger: int, entry: int) -> None:
        bm = self.state[cursor][ledger]
        if entry in bm:
            return
        left, right = entry > 0 and (entry - 1) in bm, (entry + 1) in bm
        if left and right:
            self.pending.append(("join", cursor, ledger, entry, _run_start(bm, entry - 1), run_end(bm, entry + 1)))
        elif left:
            self.pending.append(("left", cursor, ledger, entry, _run_start(bm, entry - 1)))
        elif right:
            self.pending.append(("right", cursor, ledger, entry))
        else:
            self.pending.append(("new", cursor, ledger, entry))
        bm.add(entry)

    def flush(self) -> None:
        db = self.db
        execute = db.execute
        execute("BEGIN")
        for kind, c, lg, e, *more in self.pending:
            if kind == "new":
                execute("INSERT INTO ranges VALUES (?, ?, ?, ?)", (c, lg, e, e))
            elif kind == "left":  # more: the left row's first
                execute("UPDATE ranges SET last = ? WHERE cursor = ? AND ledger = ? AND first = ?", (e, c, lg, more[0]))
            elif kind == "right":
                execute("UPDATE ranges SET first = ? WHERE cursor = ? AND ledger = ? AND first = ?", (e, c, lg, e + 1))
            else:  # more: the left row's first, the right row's last
                execute("DELETE FROM ranges WHERE cursor = ? AND ledger = ? AND first = ?", (c, lg, e + 1))
                execute(
                    "UPDATE ranges SET last = ? WHERE cursor = ? AND ledger = ? AND first = ?",
                    (more[1], c, lg, more[0]),
                )
        execute("COMMIT")
        self.pending.clear()

    def file_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))

    def reopen(self) -> None:
        self.db.close()
        self.db = self._connect()
        state: State = {}
        for cursor, ledger, first, last in self.db.execute("SELECT cursor, ledger, first, last FROM ranges"):
            state.setdefault(cursor, {}).setdefault(ledger, BitMap()).add_range(first, last + 1)
        self.state = state

    def close(self) -> None:
        self.db.close()


class PicklePeer:
    """Each changed cursor's ``{ledger: BitMap}`` pickled into one LMDB value."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = lmdb.open(str(path), map_size=1 << 34, sync=False, max_dbs=1)
        self.state: State = {}
        self.dirty: set[str] = set()

    def load(self, state: State) -> None:
        self.state = {c: {lg: BitMap(bm) for lg, bm in ls.items()} for c, ls in state.items()}
        self.dirty = set(state)
        self.flush()

    def ack(self, cursor: str, ledger: int, entry: int) -> None:
        self.state[cursor][ledger].add(entry)
        self.dirty.add(cursor)

    def flush(self) -> None:
        with self.env.begin(write=True) as txn:
            for cursor in sorted(self.dirty):
                txn.put(cursor.encode(), pickle.dumps(self.state[cursor], protocol=pickle.HIGHEST_PROTOCOL))
        self.dirty.clear()

    def file_bytes(self) -> int:
        return (self.path / "data.mdb").stat().st_size

    def reopen(self) -> None:
        self.env.close()
        self.env = lmdb.open(str(self.path), map_size=1 << 34, sync=False, max_dbs=1)
        with self.env.begin() as txn:
            self.state = {k.decode(): pickle.loads(v) for k, v in txn.cursor()}

    def close(self) -> None:
        self.env.close()


class AckstorePeer:
    """ackstore through its public API (no budget: the whole state in memory, as the peers)."""

    def __init__(self, path: Path, ledgers: int, entries: int) -> None:
        self.path, self.ledgers, self.entries = path, ledgers, entries
        self.store = AckStore.open(path, sync=False, map_size=1 << 30)
        self.cursors: dict = {}
        #: a mirror of the acks, so the workload can pick holes (not part of what is timed)
        self.state: State = {}

    def _topic(self):  # type: ignore[no-untyped-def]
        return self.store.topic("persistent://bench/ns/peers")

    def load(self, state: State) -> None:
        self.state = {c: {lg: BitMap(bm) for lg, bm in ls.items()} for c, ls in state.items()}
        topic = self._topic()
        for ledger in range(1, self.ledgers + 1):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, self.entries)
        for name, ledgers in state.items():
            cur = self.cursors[name] = topic.cursor(name, UNBOUNDED)
            cur.ack_cumulative(Position(1, -1))
            for ledger, bm in ledgers.items():
                cur.ack_entries(ledger, bm)
        self.store.flush()

    def ack(self, cursor: str, ledger: int, entry: int) -> None:
        self.cursors[cursor].ack(Position(ledger, entry))
        self.state[cursor][ledger].add(entry)

    def flush(self) -> None:
        self.store.flush()

    def file_bytes(self) -> int:
        return (self.path / "data.mdb").stat().st_size

    def reopen(self, load: str = "lazy", readonly: bool = False, read_all: bool = False) -> None:
        """Close and reopen every cursor (a restart's bulk open; lazily, as by default);
        ``read_all``: then read every ledger once, so it ends with the whole state in memory."""
        self.store.close()
        self.store = AckStore.open(self.path, sync=False, map_size=1 << 30, load=load, readonly=readonly)
        self.cursors = self._topic().open_cursors()
        if read_all:
            for name, cur in self.cursors.items():
                for ledger in self.state[name]:
                    cur.is_acked(Position(ledger, 0))

    def close(self) -> None:
        self.store.close()


#: more ways to reopen the ackstore peer's store: (name, reopen's keyword arguments)
REOPENS: dict[str, dict[str, Any]] = {
    "ackstore, then every ledger read": {"read_all": True},
    "ackstore, load='budget'": {"load": "budget"},
    "ackstore, read-only": {"readonly": True},
    "ackstore, read-only, load='budget'": {"readonly": True, "load": "budget"},
}

PEERS: dict[str, Callable[[Path, Workload], object]] = {
    "sqlite rows, synchronous=NORMAL": lambda p, w: SqlitePeer(p / "acks.sqlite", "NORMAL"),
    "sqlite rows, synchronous=FULL": lambda p, w: SqlitePeer(p / "acks.sqlite", "FULL"),
    "pickled BitMaps in LMDB": lambda p, w: PicklePeer(p / "pickle"),
    "ackstore": lambda p, w: AckstorePeer(p / "store", w.ledgers, w.entries),
}
