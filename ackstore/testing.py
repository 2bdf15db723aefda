"""Test doubles and a crash, for tests and stress runs of code that embeds ackstore.

- :class:`InMemoryLedgerReader`: synthetic entries over a topic's ledger directory, with an
  optional latency, or in ``manual`` mode holding every read until the test completes it
  (interleavings are scripted, not left to sleeps).
- :class:`InMemoryRemote`: a replication target that de-duplicates by position like a
  producer does, optionally manual.
- :func:`crash`: drop a store without flushing, as a killed process would.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .dispatch.reads import Entry
from .dispatch.replicator import ReplicationSendError
from .position import Position

if TYPE_CHECKING:
    from .store import AckStore, Topic

__all__ = ["InMemoryLedgerReader", "InMemoryRemote", "crash"]


def crash(store: AckStore) -> None:
    """Drop ``store`` without flushing, as a crashed process would: what was acked since
    the last flush is gone, the writer lock is released. The store is closed after it."""
    store._abandon()  # the one reach into the store: a crash is not part of its API


class InMemoryLedgerReader:
    """Synthetic entries over a topic's ledger directory; sealed ledgers are full, open
    ones hold their confirmed entries (a tracking topic) or what :meth:`append` wrote."""

    def __init__(self, topic: Topic, latency: float = 0.0, manual: bool = False) -> None:
        self.topic = topic
        """the topic whose ledger directory the entries follow"""
        self.latency = latency
        """seconds each read takes"""
        self.manual = manual
        """reads wait for :meth:`complete`"""
        self.pending: list[tuple[list[Position], asyncio.Future[None]]] = []
        """reads waiting for :meth:`complete` (manual mode)"""
        self._open_written: dict[int, int] = {}
        self.reads = 0
        """reads made"""

    def append(self, ledger: int, n: int) -> None:
        """``n`` more entries were written to open ``ledger``."""
        self._open_written[ledger] = self._open_written.get(ledger, 0) + n

    def written(self, ledger: int) -> int:
        """A sealed ledger's count; an open one's last confirmed entry + 1 when the topic
        tracks it (``topic.advance``: reads stop there, as Pulsar's do), else what
        :meth:`append` wrote."""
        for lid, count in self.topic.ledgers():
            if lid == ledger:
                if count is not None:
                    return count
                confirmed = self.topic.last_confirmed
                if confirmed is not None and self.topic.directory.tracked:
                    return confirmed.entry + 1
                return self._open_written.get(ledger, 0)
        return 0

    async def read(self, positions: list[Position]) -> list[Entry]:
        """The entries at ``positions`` (their payload: the position's text)."""
        self.reads += 1
        if self.manual:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.pending.append((positions, done))
            await done
        elif self.latency:
            await asyncio.sleep(self.latency)
        return [Entry(p, str(p).encode()) for p in positions]

    def complete(self, index: int = 0) -> list[Position]:
        """Let the ``index``-th pending read finish (manual mode); returns its positions."""
        positions, done = self.pending.pop(index)
        done.set_result(None)
        return positions


class InMemoryRemote:
    """A target cluster: accepts entries in position order, rejects older ones as duplicates."""

    def __init__(self, schemas: set[int] | None = None, manual: bool = False) -> None:
        self.schemas = set(schemas) if schemas is not None else {0}
        """the schema versions the target knows"""
        self.manual = manual
        """sends wait for :meth:`complete`"""
        self.accepted: list[Position] = []
        """positions accepted, in order"""
        self.duplicates: list[Position] = []
        """positions refused as already accepted (producer de-duplication)"""
        self.failed = False
        """after a failed send, every send fails until :meth:`reconnect`"""
        self.pending: list[tuple[list[Entry], asyncio.Future[bool]]] = []
        """sends waiting for :meth:`complete` (manual mode)"""

    async def send(self, entries: list[Entry]) -> None:
        """Take ``entries`` in order; ReplicationSendError after a failure until :meth:`reconnect`."""
        if self.failed:
            raise ReplicationSendError(f"producer failed; send from {entries[0].position} refused until reconnect")
        if self.manual:
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self.pending.append((entries, done))
            if not await done:
                raise ReplicationSendError(f"send of {len(entries)} entries from {entries[0].position} failed")
        for entry in entries:
            if self.accepted and entry.position <= self.accepted[-1]:
                self.duplicates.append(entry.position)  # producer de-duplication
            else:
                self.accepted.append(entry.position)

    def complete(self, ok: bool = True) -> list[Position]:
        """Let the oldest pending send finish (manual mode); returns its positions. Sends
        finish in order, and a failure fails every send queued behind it too, as a
        producer does to keep its order."""
        failed = self.pending if not ok else self.pending[:1]
        self.failed = self.failed or not ok
        for _, done in failed:
            done.set_result(ok)
        positions = [e.position for e in self.pending[0][0]]
        del self.pending[: len(failed)]
        return positions

    def reconnect(self) -> None:
        """A new producer: sends are taken again."""
        self.failed = False

    async def load_schema(self, schema: int) -> None:
        """The target learns ``schema``."""
        self.schemas.add(schema)
