"""``CursorSnapshot``: a cursor's whole ack state, read from one state at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..position import Position, trusted

if TYPE_CHECKING:
    from ..ledger_acks import LedgerAcks

__all__ = ["CursorSnapshot", "batch_items", "snapshot_of"]


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


def batch_items(ledger: int, la: LedgerAcks) -> Iterator[tuple[Position, tuple[int, frozenset[int]]]]:
    """A ledger's partially acknowledged entries as ``(position, (batch_size, acked indexes))``, ascending."""
    for entry, (size, mask) in sorted(la.batches.items()):
        yield trusted(ledger, entry), (size, frozenset(i for i in range(size) if mask >> i & 1))


def snapshot_of(
    md: Position, properties: dict[str, int | str], ledgers: Iterable[tuple[int, LedgerAcks]]
) -> CursorSnapshot:
    """The snapshot of a state: its mark-delete position, properties and ledgers (ascending).
    Delivery counts at or below ``md`` are not part of it. O(state)."""
    ranges: list[tuple[int, list[tuple[int, int]]]] = []
    batches: dict[Position, tuple[int, frozenset[int]]] = {}
    counts: dict[Position, int] = {}
    low = (md.ledger, md.entry + 1)
    for ledger, la in ledgers:
        runs = la.ranges()
        if runs:
            ranges.append((ledger, runs))
        batches.update(batch_items(ledger, la))
        for entry in sorted(la.counts):
            if (ledger, entry) >= low:
                counts[trusted(ledger, entry)] = la.counts[entry]
    return CursorSnapshot(md, dict(properties), ranges, batches, counts)
