"""``CursorSnapshot``: a cursor's whole ack state, read from one state at once."""

from __future__ import annotations

from dataclasses import dataclass

from ..position import Position

__all__ = ["CursorSnapshot"]


@dataclass(frozen=True, slots=True)
class CursorSnapshot:
    """Everything a flush persists of a cursor, read in one go (:meth:`Cursor.snapshot`).

    On a read-only store it is one flushed state, never parts of two: what a reopen after
    that flush recovers. On the writer it is the state in memory, flushed or not.
    """

    mark_delete_position: Position
    """everything at or below it is acknowledged"""
    properties: dict[str, int | str]
    """the properties persisted with each marker"""
    ranges: list[tuple[int, list[tuple[int, int]]]]
    """``(ledger, [(first, last), ...])`` for every ledger with acks above the mark-delete
    position, ascending (as :meth:`Cursor.ledger_ranges`)"""
    partial_batches: dict[Position, tuple[int, frozenset[int]]]
    """``{position: (batch_size, acked indexes)}`` of every partially acknowledged batch entry"""
    delivery_counts: dict[Position, int]
    """``{position: count}`` of every unacknowledged entry delivered at least once"""

    @property
    def ack_range_count(self) -> int:
        """Contiguous acknowledged ranges above the mark-delete position."""
        return sum(len(r) for _, r in self.ranges)
