"""What every component that reads a cursor shares: the revision-guarded read path.

A *read loop* (the :class:`~ackstore.dispatch.dispatcher.Dispatcher`, the
:class:`~ackstore.dispatch.replicator.Replicator`) reads entries from the cursor's read position
through a :class:`~ackstore.dispatch.reads.LedgerReader` and resets the cursor's position through
the PIP-269 :class:`~ackstore.dispatch.revision.CursorStateRevisionController`:

- a read is refused while a reset runs;
- a read remembers the revision number it started under and is discarded when it
  completes under a newer one, both before its read-position move and, when that already
  happened, before its entries are used ("half in-flight");
- a reset clears the loop's own state beside the cursor (:meth:`_clear_side_state`)
  between ``start_revision`` and ``end_revision``, so both change together;
- a second reset while one runs fails fast with :class:`RevisionInProgressError`.

Every loop over one cursor shares that cursor's controller (``cursor.revision_controller``),
so a dispatcher's reset also discards a replicator's read in flight, and the other way round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from ..config import CursorConfig
from ..errors import AckStoreError, InvalidArgumentError, InvalidTypeError
from ..position import Position, trusted
from .reads import Entry, LedgerReader
from .revision import CursorStateRevisionController

__all__ = ["CursorPositions", "CursorReadLoop", "ReadPath", "RevisionInProgressError"]


class _LedgerList(Protocol):
    name: str

    def ledgers(self) -> list[tuple[int, int | None]]: ...


class ReadPath(Protocol):
    """@private The moves and checks a read or a reset makes on a cursor (its
    ``read_path``), documented on ``ackstore.cursor.core.CursorCore``."""

    def reset_to(self, position: Position, batch: tuple[int, int] | None = None) -> None: ...
    def check_reset_target(self, position: Any, batch: tuple[int, int] | None = None) -> tuple[int, int]: ...
    def ensure_open(self) -> None: ...
    def check_position(self, position: Any) -> None: ...
    def clamp_reset_target(self, position: Any) -> Position: ...
    def move_read_position(self, position: Position) -> None: ...


class CursorPositions(Protocol):
    """@private What the read path needs of a cursor (``ackstore.Cursor`` is one, and its
    methods are documented there): its positions and acks, and the moves a read or a reset
    makes. Nothing else of the cursor is touched."""

    revision_controller: CursorStateRevisionController
    name: str

    @property
    def topic(self) -> _LedgerList: ...
    @property
    def ack_range_count(self) -> int: ...
    @property
    def config(self) -> CursorConfig: ...
    @property
    def read_position(self) -> Position: ...
    @property
    def mark_delete_position(self) -> Position: ...
    @property
    def is_blocked_on_ack_state_persistent(self) -> bool: ...
    def is_acked(self, position: Position) -> bool: ...
    def delivery_count(self, position: Position) -> int: ...
    def delivery_counts(self, start: Position | None = None, end: Position | None = None) -> dict[Position, int]: ...
    def record_deliveries(self, positions: Any, *, durable: bool = False) -> list[int]: ...
    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]: ...
    def ack(self, positions: Any) -> None: ...
    def ack_cumulative(self, position: Position) -> None: ...
    def restore_as_of(self, when: Any) -> Any: ...
    def check_restore(self, when: Any) -> Any: ...
    def rewind(self) -> None: ...
    @property
    def read_path(self) -> ReadPath: ...


class RevisionInProgressError(AckStoreError):
    """A position reset was asked for while another one runs (they fail fast, PIP-269)."""


class CursorReadLoop:
    """Base of the components that read a cursor and reset its position."""

    def __init__(
        self,
        cursor: CursorPositions,
        reader: LedgerReader,
        controller: CursorStateRevisionController | None = None,
    ) -> None:
        self.cursor = cursor
        """the cursor whose entries are read"""
        self.reader = reader
        """where the entries are read from"""
        self.controller = controller or cursor.revision_controller
        """the cursor's revision controller (PIP-269) unless one was given (tests pass a disabled one)"""
        self.refused = self.discarded = 0

    # -- reads ------------------------------------------------------------------------------
    def _next_positions(self, start: Position, n: int) -> list[Position]:
        """Up to ``n`` unacked, written positions from ``start`` on: acked runs are hopped
        over whole (O(runs touched + entries returned), not O(acked entries skipped))."""
        out: list[Position] = []
        ledger, entry = start
        ledgers = [lid for lid, _ in self.cursor.topic.ledgers()]
        i = ledgers.index(ledger) if ledger in ledgers else 0
        while len(out) < n and i < len(ledgers):
            ledger = ledgers[i]
            written = self.reader.written(ledger)
            if entry < written:
                found = self.cursor.unacked_entries(ledger, entry, written, n - len(out))
                out.extend(trusted(ledger, e) for e in found)
            if len(out) < n:
                i, entry = i + 1, 0
        return out

    @staticmethod
    def _check_count(n: Any, what: str) -> int:
        """A read's entry count: an int >= 1 (as Pulsar's reads require), else a typed error."""
        if type(n) is not int:
            raise InvalidTypeError(f"{what} count must be an int, got {n!r} ({type(n).__name__})")
        if n < 1:
            raise InvalidArgumentError(f"{what} count {n} is not allowed: allowed an int >= 1")
        return n

    def _refused(self) -> bool:
        """True when a reset runs (the read is refused and counted); every read asks it
        first, so a closed store or a deleted cursor raises here, entries or not."""
        self.cursor.read_path.ensure_open()
        if self.controller.reads_allowed():
            return False
        self.refused += 1
        return True

    async def _read(self, positions: list[Position]) -> tuple[list[Entry], int] | None:
        """Read ``positions`` under the current revision; None if there are none or it is outdated."""
        if not positions:
            return None
        revision = self.controller.revision_num
        entries = await self.reader.read(positions)
        return None if self._stale(revision) else (entries, revision)

    async def _sequential(self, n: int) -> tuple[list[Entry], int] | None:
        """One sequential read of up to ``n`` entries: read, move the read position, then
        (a separate step, where a reset may land) check the revision again."""
        positions = self._next_positions(self.cursor.read_position, n)
        done = await self._read(positions)
        if done is None:
            return None
        if not self.controller.run_if_current(
            done[1], lambda: self.cursor.read_path.move_read_position(positions[-1].next())
        ):
            self.discarded += 1  # a reset landed since the completion check (another thread)
            return None
        await asyncio.sleep(0)  # using the entries is a separate step: a reset may land in between
        if self._stale(done[1]):  # half in-flight: the move happened, the use must not
            return None
        return done

    async def read_direct(self, positions: list[Position]) -> list[Entry]:
        """A direct read (peek, get-by-position): touches no cursor state, so neither a
        running reset nor a completed one affects it."""
        return await self.reader.read(list(positions)) if positions else []

    def _stale(self, revision: int) -> bool:
        if self.controller.is_revision_num_outdated(revision):
            self.discarded += 1
            return True
        return False

    # -- position resets (PIP-269) -----------------------------------------------------------
    def _clear_side_state(self) -> None:
        """Drop the state this loop keeps beside the cursor (runs inside the revision)."""

    def _start_revision(self) -> None:
        if self.controller.start_revision() == -1:
            raise RevisionInProgressError("a cursor position reset is already running; retry when it ends")
        self._clear_side_state()

    def _end_revision(self, edit_cursor: Callable[[], object]) -> None:
        self.controller.end_revision(edit_cursor)  # type: ignore[arg-type]

    def _revise(self, edit_cursor: Callable[[], object]) -> None:
        self._start_revision()
        self._end_revision(edit_cursor)

    def rewind(self) -> None:
        """Read again from the first unacked position."""
        self._revise(self.cursor.rewind)

    def revision_stats(self) -> dict[str, int]:
        """Reads refused and discarded because a position reset ran, and the revision figures."""
        return {
            "revisions_done": self.controller.revisions_done,
            "revision_running": self.controller.revision_running,
            "revision_num": self.controller.revision_num,
            "reads_refused": self.refused,
            "reads_discarded": self.discarded,
        }
