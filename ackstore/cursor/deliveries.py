"""Delivery counts: how many times each entry that is not acknowledged was handed out.

They live beside the acks in each ledger's :class:`~ackstore.ledger_acks.LedgerAcks`
(``counts``, sparse: an entry never delivered has none, an acked one loses its count), so
they are persisted by the same group flush as the acks (a marker carries the counts set
since a ledger's record, as it carries the acks), recovered with them, charged to the same
byte budget and swapped in and out with their ledger. A position reset (reset, seek)
drops every count: it forgets the acks after its target too, and a reset is a decision to
deliver from there again, not a failed delivery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import InvalidArgumentError
from ..ledger_acks import MAX_COUNT, LedgerAcks
from ..position import Position, trusted
from .state import AckState
from .validate import pair

__all__ = [
    "checked_counts",
    "checked_deliveries",
    "counts_window",
    "put_counts",
    "record_deliveries",
    "set_delivery_counts",
    "delivery_count",
    "delivery_counts",
]


def checked_deliveries(items: Any, check: Callable[[int, Any], object]) -> list[tuple[int, int]]:
    """Positions to count a delivery of, checked (``check``: ``validate.check_ack``'s at the
    cursor's M) in their order, as ``(ledger, entry)`` pairs: the first bad one raises, with
    nothing changed. O(positions)."""
    checked = [pair(item) for item in items]
    for ledger, entry in checked:
        check(ledger, entry)
    return checked


def checked_counts(counts: dict[Any, Any], check: Callable[[int, Any], object]) -> dict[tuple[int, int], int]:
    """Delivery counts to set, ``{position: count}``, checked (``check`` as for
    :func:`checked_deliveries`; each count 1..2**32-1) in their order, as ``{(ledger, entry):
    count}``: the first bad one raises, with nothing changed. O(counts)."""
    wanted: dict[tuple[int, int], int] = {}
    for position, n in counts.items():
        ledger, entry = pair(position)
        check(ledger, entry)
        if type(n) is not int or not 1 <= n <= MAX_COUNT:
            raise InvalidArgumentError(f"delivery count {n!r} of {ledger}:{entry} is not allowed: allowed 1..2**32-1")
        wanted[(ledger, entry)] = n
    return wanted


def record_deliveries(state: AckState, items: list[Any]) -> list[int]:
    """One more delivery of each position (a position listed twice counts twice); returns
    each one's count after it, 0 for an acknowledged one (not counted). Every position is
    checked first: one bad position records none. O(positions) + swap-ins."""
    checked = checked_deliveries(items, state.check_ack)
    out = _count_each(state, checked, lambda la, _, entry: la.deliver(entry))
    state.redeliveries += sum(1 for n in out if n > 1)
    return out


def set_delivery_counts(state: AckState, counts: dict[Any, Any]) -> int:
    """Set counts exactly (restore and salvage tools): ``{position: count >= 1}``; an
    acknowledged position is skipped. All are checked first. Returns how many were set."""
    wanted = checked_counts(counts, state.check_ack)
    out = _count_each(state, list(wanted), lambda la, ledger, entry: la.set_count(entry, wanted[(ledger, entry)]))
    return sum(1 for n in out if n)


def put_counts(state: AckState, by_ledger: dict[int, dict[int, int]]) -> None:
    """Set the delivery counts ``{ledger: {entry: count}}`` that are known to be of entries
    above M that are not acknowledged (a small form's, which the parts take when it ends):
    each ledger's at once, touched and fitted to the budget once, not checked entry by
    entry as :func:`set_delivery_counts` checks a caller's. O(counts + ledgers)."""
    ledgers = state.ledgers
    for ledger, counts in by_ledger.items():
        la = ledgers.get(ledger, create=True)
        la.set_counts(counts)
        state.range_count -= ledgers.touched(ledger, la)  # dirty, re-measured
        ledgers.fit(keep=(ledger,))


def _count_each(
    state: AckState, positions: list[tuple[int, int]], count: Callable[[LedgerAcks, int, int], int]
) -> list[int]:
    """``count(ledger's acks, ledger, entry)`` for each position not acknowledged (its new count),
    0 for an acknowledged one; each touched ledger is marked dirty and the budget kept."""
    out: list[int] = []
    ledgers = state.ledgers
    for ledger, entry in positions:
        if state.is_acked((ledger, entry)):  # at or below M too
            out.append(0)
            continue
        la = ledgers.get(ledger, create=True)
        out.append(count(la, ledger, entry))
        state.range_count -= ledgers.touched(ledger, la)  # dirty, re-measured
        ledgers.fit(keep=(ledger,))
    return out


def delivery_count(state: AckState, position: Any) -> int:
    """How many times ``position`` was delivered; 0 if never, or if it is acknowledged. O(1) + a swap-in."""
    ledger, entry = pair(position)
    if (ledger, entry) <= state.md:
        return 0
    la = state.ledgers.peek(ledger)
    return 0 if la is None else la.counts.get(entry, 0)


def counts_window(md: tuple[int, int], start: Any, end: Any) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Where ``delivery_counts(start, end)`` looks with the mark-delete position at ``md``:
    from ``start`` but never at or below M (what is there has no count, whatever its record
    still holds), to ``end`` (None: to the end), both checked. O(1)."""
    low = (md[0], md[1] + 1)
    if start is not None:
        low = max(low, pair(start))
    return low, pair(end) if end is not None else None


def delivery_counts(state: AckState, start: Any = None, end: Any = None) -> dict[Position, int]:
    """Every counted entry in ``[start, end)`` above the mark-delete position (None: from it /
    to the end) with its count, ascending. Swapped-out ledgers are read, not loaded.
    O(ledgers in range + counts in range), a narrow span (a Dispatcher's read) O(its
    entries) however many counts its ledger holds."""
    low, high = counts_window(state.md, start, end)
    out: dict[Position, int] = {}
    ledgers = state.ledgers
    for ledger in _between(ledgers.known(), low[0], None if high is None else high[0]):
        la = ledgers.peek(ledger)
        if la is None or not la.counts:
            continue
        counts = la.counts
        first = low[1] if ledger == low[0] else 0
        stop = high[1] if high is not None and ledger == high[0] else None  # (exclusive)
        if stop is not None and stop - first <= len(counts):  # a narrow span (a read's): its entries
            entries: Iterable[int] = (e for e in range(first, stop) if e in counts)
        else:
            entries = sorted(e for e in counts if e >= first and (stop is None or e < stop))
        for entry in entries:
            out[trusted(ledger, entry)] = counts[entry]
    return out


def _between(ids: set[int], first: int, last: int | None) -> list[int]:
    """The ids of ``ids`` from ``first`` through ``last`` (None: on), ascending:
    O(min(last - first, ids)) when bounded, else O(ids log ids)."""
    if last is not None and last - first <= len(ids):
        return [i for i in range(first, last + 1) if i in ids]
    return sorted(i for i in ids if i >= first and (last is None or i <= last))
