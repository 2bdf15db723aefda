"""Readers of a store's file, as LMDB's reader table lists them, and the writer's watch on
the oldest one.

LMDB cannot reuse a page that a reader's snapshot still sees: a read transaction held for
long (a hung reader process, a stopped ``ackstore copy``) makes every flush write new pages,
and the file grows until the reader ends. The writer looks at the reader table after each
flush that wrote something: :class:`ReaderWatch` keeps the oldest reader (its pid, the
transaction it sees, how many transactions it holds back, since when this writer has seen
it) and logs one WARNING per reader once it holds back more than a set number.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["OldestReader", "ReaderSlot", "ReaderWatch", "oldest_reader", "reader_slots"]

log = logging.getLogger("ackstore")


@dataclass(frozen=True, slots=True)
class ReaderSlot:
    """One active read transaction: the process, its thread, the transaction it sees."""

    pid: int
    """the reading process"""
    thread: str
    """the reading thread, as LMDB names it"""
    txnid: int
    """the transaction its snapshot sees"""


@dataclass(frozen=True, slots=True)
class OldestReader:
    """The reader holding back the most: LMDB keeps every page its snapshot sees."""

    pid: int
    """the reading process"""
    txnid: int
    """the transaction its snapshot sees"""
    behind: int
    """transactions committed since the one it sees (each flush is one)"""
    seconds: float | None = None
    """seconds since this process first saw it hold that transaction (None: not watched here)"""


def reader_slots(env: Any) -> list[ReaderSlot]:
    """The active read transactions of ``env`` (an ``lmdb.Environment``), from its reader table."""
    out = []
    for line in env.readers().splitlines()[1:]:
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[2].isdigit():  # "-": a free slot
            out.append(ReaderSlot(int(parts[0]), parts[1], int(parts[2])))
    return out


def _live_slots(env: Any) -> list[ReaderSlot]:
    """:func:`reader_slots`, after clearing the slots of readers that died (a killed
    reader's slot stays until someone clears it)."""
    slots = reader_slots(env)
    if slots:
        env.reader_check()
        slots = reader_slots(env)
    return slots


def _oldest(env: Any, slots: list[ReaderSlot]) -> OldestReader | None:
    """The slot seeing the oldest transaction, and how far behind the newest it is."""
    if not slots:
        return None
    oldest = min(slots, key=lambda s: s.txnid)
    return OldestReader(oldest.pid, oldest.txnid, int(env.info()["last_txnid"]) - oldest.txnid)


def oldest_reader(env: Any) -> OldestReader | None:
    """The active reader seeing the oldest transaction of ``env``; None when there is none."""
    return _oldest(env, _live_slots(env))


class ReaderWatch:
    """The writer's view of its readers, updated after flushes: the oldest one, and one
    WARNING per reader (pid and transaction) that holds back more than ``warn_after``
    transactions."""

    __slots__ = ("warn_after", "first_seen", "warned", "path")

    def __init__(self, warn_after: int, path: object) -> None:
        self.warn_after = warn_after
        """transactions a reader may hold back before its one WARNING"""
        self.path = path
        """the store's path, for the WARNING"""
        self.first_seen: dict[tuple[int, int], float] = {}
        """(pid, transaction) -> when this process first saw that reader hold it"""
        self.warned: set[tuple[int, int]] = set()
        """the readers warned about (once each)"""

    def observe(self, env: Any) -> OldestReader | None:
        """Read the reader table now; the oldest reader."""
        now = time.monotonic()
        slots = _live_slots(env)
        held = {(s.pid, s.txnid) for s in slots}
        self.first_seen = {key: self.first_seen.get(key, now) for key in held}
        self.warned &= held
        found = _oldest(env, slots)
        if found is None:
            return None
        oldest = replace(found, seconds=now - self.first_seen[(found.pid, found.txnid)])
        last = found.txnid + found.behind
        for slot in slots:
            key, behind = (slot.pid, slot.txnid), last - slot.txnid
            if behind > self.warn_after and key not in self.warned:
                self.warned.add(key)
                log.warning(
                    "ackstore: a reader of %s (pid %d) has held transaction %d for %d flushes: LMDB cannot reuse "
                    "the pages it sees, so the file grows until it ends its read transaction (a hung reader, a "
                    "stopped 'ackstore copy'?)",
                    self.path,
                    slot.pid,
                    slot.txnid,
                    behind,
                )
        return oldest
