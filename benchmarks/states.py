"""Cursor states the benchmarks and figures build: sealed ledgers with a given ack pattern."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ackstore import AckStore, Cursor, CursorConfig, Position

__all__ = ["T", "UNBOUNDED", "sealed_cursor"]

T = "persistent://bench/ns/t"

#: no cache budget and no cap on persisted ranges: the whole state stays and is written
UNBOUNDED = CursorConfig(max_individual_ack_cache_bytes=1 << 40, max_unacked_ranges_to_persist=0)


def sealed_cursor(
    store: AckStore,
    ledgers: int,
    entries: int,
    acks: Callable[[int], Iterable[int]] | None = None,
    topic: str = T,
) -> Cursor:
    """Cursor ``c`` of ``topic`` over ledgers 1..``ledgers`` sealed at ``entries`` each, its
    mark-delete position just before ledger 1, and ``acks(ledger)`` acked in each ledger."""
    t = store.topic(topic)
    cur = t.cursor("c", UNBOUNDED)
    for ledger in range(1, ledgers + 1):
        t.add_ledger(ledger)
        t.close_ledger(ledger, entries)
        if ledger == 1:
            cur.ack_cumulative(Position(1, -1))
        if acks is not None:
            cur.ack_entries(ledger, acks(ledger))
    return cur
