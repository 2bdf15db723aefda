"""A geo-replicator over a cursor: read entries, send them to a remote cluster, ack them
when the remote took them, and rewind when something goes wrong (PIP-269 Cases 4-6).

The loop is the one PIP-269 describes for Pulsar's replicator: read from the source,
send to the target, on an error rewind to the first unacked position and go on. Two
errors stop a batch: an entry whose schema the remote does not know yet (the schema is
loaded asynchronously, then the cursor rewinds) and a failed send. Both make the rewind
a *revision*: it starts the moment the error is seen, so reads are refused and reads in
flight are discarded until the cursor is back at the first unacked position. Without
that, a later batch overtakes the failed one, the remote's de-duplication (it keeps
entries in position order) rejects the failed batch when it comes again, and those
entries are never replicated.

:class:`~ackstore.testing.InMemoryRemote` is a target cluster for tests and stress runs: it de-duplicates
by position, knows a set of schemas, and in ``manual`` mode holds each send until the
test completes it (with success or failure). Like a producer, it keeps order: a failed
send fails every send queued behind it, and later sends, until the replicator reconnects
(it does when its rewind ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..errors import AckStoreError
from ..position import Position
from .read_loop import CursorPositions, CursorReadLoop, RevisionInProgressError
from .reads import Entry, LedgerReader
from .revision import CursorStateRevisionController

__all__ = ["Remote", "Replicator", "ReplicationSendError"]


class Remote(Protocol):
    """What a replicator needs of its target (a producer to another cluster):
    :class:`~ackstore.testing.InMemoryRemote` is one for tests and stress runs."""

    schemas: set[int]
    """the schema versions the target knows"""

    async def send(self, entries: list[Entry]) -> None:
        """Send ``entries`` in order; raise ReplicationSendError when it fails (it then
        refuses every send until :meth:`reconnect`)."""
        ...

    def reconnect(self) -> None:
        """Start over after a failed send."""
        ...

    async def load_schema(self, schema: int) -> None:
        """Make the target know ``schema``."""
        ...


class ReplicationSendError(AckStoreError):
    """The remote cluster did not take a batch."""


class Replicator(CursorReadLoop):
    """Replicates a cursor's entries to ``remote``; acks what the remote took."""

    def __init__(
        self,
        cursor: CursorPositions,
        reader: LedgerReader,
        remote: Remote,
        controller: CursorStateRevisionController | None = None,
        schema_of: Callable[[Position], int] = lambda p: 0,
        load_schema: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(cursor, reader, controller)
        self.remote = remote
        """where the entries are sent"""
        self.schema_of = schema_of
        """the schema version of the entry at a position"""
        self.load_schema = load_schema or remote.load_schema
        """makes the remote know a schema before an entry of it is sent"""
        self.tasks: set[asyncio.Task[None]] = set()
        """sends in flight"""
        self.rewinds = self.send_failures = 0

    async def replicate_once(self, n: int = 10) -> list[Entry]:
        """One sequential read of up to ``n`` entries, handed to the remote; returns the
        entries sent ([] when refused, discarded, or stopped by an unknown schema). The
        send runs as a task: the next read need not wait for it."""
        if self._refused():
            return []
        done = await self._sequential(n)
        if done is None:
            return []
        entries = done[0]
        unknown = next((s for s in (self.schema_of(e.position) for e in entries) if s not in self.remote.schemas), None)
        if unknown is not None:
            self._rewind_after(self.load_schema(unknown))
            return []
        self._spawn(self._send(entries, done[1]))
        return entries

    async def _send(self, entries: list[Entry], revision: int) -> None:
        if self._stale(revision):  # a rewind came between the read and the send
            return
        try:
            await self.remote.send(entries)
        except ReplicationSendError:
            self.send_failures += 1
            self._rewind_after(None)
            return
        self.cursor.ack([e.position for e in entries])

    def _rewind_after(self, work: Awaitable[None] | None) -> None:
        """Start a rewind now; end it (cursor back at the first unacked entry) after ``work``."""
        try:
            self._start_revision()
        except RevisionInProgressError:  # a rewind is already under way: it covers this
            if work is not None:
                self._spawn(work)
            return
        if work is None:
            self._finish_rewind()
        else:
            self._spawn(self._rewind_when_done(work))

    async def _rewind_when_done(self, work: Awaitable[None]) -> None:
        try:
            await work
        finally:
            self._finish_rewind()

    def _finish_rewind(self) -> None:
        self.rewinds += 1
        self.remote.reconnect()
        self._end_revision(self.cursor.rewind)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def settle(self) -> None:
        """Wait for every send and schema load started so far."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks))

    def stats(self) -> dict[str, int]:
        """The replicator's counters: revisions (PIP-269), rewinds after a failed send, failed sends."""
        return {**self.revision_stats(), "rewinds": self.rewinds, "send_failures": self.send_failures}
