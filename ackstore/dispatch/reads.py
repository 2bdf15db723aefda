"""The read side: entries, the ``LedgerReader`` protocol, and an in-memory reader.

A cursor process reads entries from its log through a :class:`LedgerReader`. The
in-memory reader ships for tests and stress runs: it serves synthetic payloads, with an
optional latency, or in ``manual`` mode holds every read until the test completes it,
so interleavings are scripted, not left to sleeps.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..position import Position

if TYPE_CHECKING:
    from ..store import Topic

__all__ = ["Entry", "LedgerReader", "InMemoryLedgerReader"]


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    payload: bytes


class LedgerReader(Protocol):
    """What a dispatcher needs from the log."""

    def written(self, ledger: int) -> int:
        """Entries written so far in ``ledger``."""
        ...

    async def read(self, positions: list[Position]) -> list[Entry]:
        """The entries at ``positions`` (they exist)."""
        ...


class InMemoryLedgerReader:
    """Synthetic entries over a topic's ledger directory; sealed ledgers are full,
    open ones hold what :meth:`append` wrote."""

    def __init__(self, topic: Topic, latency: float = 0.0, manual: bool = False) -> None:
        self.topic = topic
        self.latency = latency
        self.manual = manual
        self.pending: list[tuple[list[Position], asyncio.Future[None]]] = []
        self._open_written: dict[int, int] = {}
        self.reads = 0

    def append(self, ledger: int, n: int) -> None:
        """``n`` more entries were written to open ``ledger``."""
        self._open_written[ledger] = self._open_written.get(ledger, 0) + n

    def written(self, ledger: int) -> int:
        for lid, count in self.topic.ledgers():
            if lid == ledger:
                return count if count is not None else self._open_written.get(ledger, 0)
        return 0

    async def read(self, positions: list[Position]) -> list[Entry]:
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
