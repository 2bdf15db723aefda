"""``CursorSnapshot``: a cursor's whole ack state, read from one state at once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..position import Position, trusted
from ..storage.records import unpack_properties
from .small_span import ledger_batches, ledger_counts, ledger_runs

if TYPE_CHECKING:
    from ..ledger_acks import LedgerAcks
    from ..storage.log import RecoveredState

__all__ = [
    "CursorSnapshot",
    "acked_indexes",
    "batch_items",
    "form_batches",
    "form_snapshot",
    "recovered_snapshot",
    "snapshot_of",
]


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
        yield trusted(ledger, entry), acked_indexes(size, mask)


def acked_indexes(size: int, mask: int) -> tuple[int, frozenset[int]]:
    """A partial batch as a snapshot gives it: its size and the indexes acked (``mask``'s bits)."""
    return size, frozenset(i for i in range(size) if mask >> i & 1)


def form_batches(small: Any) -> dict[Position, tuple[int, frozenset[int]]]:
    """The small form's partial batches as a snapshot gives them. O(batches)."""
    return {trusted(*at): acked_indexes(*batch) for at, batch in ledger_batches(small)}


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


def form_snapshot(small: Any) -> CursorSnapshot:
    """The snapshot of a cursor in the small form (``ackstore.cursor.small``), from the form
    alone: what :func:`snapshot_of` reads of the parts the form holds the state of (it holds
    no delivery count at or below M). O(its runs, counts and batches)."""
    counts = {trusted(*at): n for at, n in ledger_counts(small)}
    md, props = trusted(small.md_l, small.md_e), unpack_properties(small.props)
    return CursorSnapshot(md, props, ledger_runs(small), form_batches(small), counts)


def recovered_snapshot(recovered: RecoveredState) -> CursorSnapshot:
    """The snapshot of a state recovered with every ledger loaded (a kept state, a rewritten
    log read back). O(state)."""
    assert recovered.resolved is not None
    marker = recovered.resolved.marker
    return snapshot_of(trusted(*marker.mark_delete), marker.properties, sorted(recovered.ledgers.items()))
