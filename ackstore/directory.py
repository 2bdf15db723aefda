"""The ledger directory of a topic: its ledgers in order, each open or sealed.

Kept in memory as two compact ``array('q')`` columns (ids ascending, entry counts
with ``-1`` for open) so that hundreds of thousands of ledgers cost 16 bytes each.
On disk each ledger is one small key, so adding or sealing one writes a few bytes.

The open (newest) ledger may carry a *last confirmed entry* (Pulsar's LAC): once a
topic tracks it (``tracked``, set by the first ``topic.advance``), acks, cumulative acks
and resets in the open ledger are bounded by it; a topic that never tracks it keeps
the open ledger unbounded.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from .errors import LedgerStateError
from .position import MAX_ENTRY, check_ledger_id

__all__ = ["LedgerDirectory", "OPEN"]

OPEN = -1
"""Entry count of a ledger that is still open."""


class LedgerDirectory:
    """Ordered ledger ids with their entry counts. Lookups are O(log n)."""

    __slots__ = ("ids", "counts", "last_id", "tracked", "confirmed")

    def __init__(
        self,
        ids: array | None = None,
        counts: array | None = None,
        last_id: int = -1,
        tracked: bool = False,
        confirmed: int | None = None,
    ) -> None:
        self.ids: array = ids if ids is not None else array("q")
        self.counts: array = counts if counts is not None else array("q")
        self.last_id = last_id
        """the highest ledger id ever added (trimmed ones included); new ids must exceed it"""
        self.tracked = tracked
        """True once the topic tracks its open ledger's last confirmed entry"""
        self.confirmed = confirmed
        """the open ledger's last confirmed entry (-1: none yet); None when the open ledger is
        unbounded (not tracked) or there is no open ledger"""

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ledger: int) -> bool:
        i = bisect_left(self.ids, ledger)
        return i < len(self.ids) and self.ids[i] == ledger

    def first(self) -> int | None:
        return self.ids[0] if self.ids else None

    def trimmed(self, ledger: int) -> bool:
        """Whether ``ledger`` lies below the first ledger held: retention dropped it (or it
        never was added there). False with no ledgers held. O(1)."""
        return bool(self.ids) and ledger < self.ids[0]

    def index(self, ledger: int) -> int:
        """Position of ``ledger`` in the directory, or -1."""
        i = bisect_left(self.ids, ledger)
        return i if i < len(self.ids) and self.ids[i] == ledger else -1

    def count(self, ledger: int) -> int:
        """Entry count of a sealed ledger, ``OPEN`` for an open one. The ledger must exist."""
        return self.counts[self.index(ledger)]  # type: ignore[no-any-return]

    def end(self, ledger: int) -> int:
        """The first entry past what ``ledger`` holds: a sealed ledger's count, an open tracked
        ledger's last confirmed entry + 1; -1 for an unbounded or unknown ledger. O(log n)."""
        i = self.index(ledger)
        if i < 0:
            return -1
        count = self.counts[i]
        if count >= 0:
            return int(count)
        return -1 if self.confirmed is None else self.confirmed + 1

    def past_end(self, spans: list[tuple[int, int]]) -> list[int]:
        """The ledgers of ``(ledger, highest entry holding state)`` pairs whose highest entry
        is at or past the ledger's :meth:`end` (the same rule, inline: a restart runs it on
        every ledger it reads). O(len(spans) log n)."""
        ids, counts, n = self.ids, self.counts, len(self.ids)
        bound = -1 if self.confirmed is None else self.confirmed + 1
        past = []
        for ledger, highest in spans:
            i = bisect_left(ids, ledger)
            if i < n and ids[i] == ledger:
                count = counts[i]
                end = count if count >= 0 else bound
                if 0 <= end <= highest:
                    past.append(ledger)
        return past

    def next_after(self, ledger: int) -> int | None:
        """The ledger after ``ledger`` in the directory, or None."""
        i = bisect_left(self.ids, ledger + 1)
        return self.ids[i] if i < len(self.ids) else None

    def open_limit(self) -> int:
        """The highest entry the open ledger accepts: its last confirmed entry, or
        ``MAX_ENTRY`` while that is not tracked."""
        return MAX_ENTRY if self.confirmed is None else self.confirmed

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self.ids, self.counts, strict=True))

    # -- changes (validated; the caller persists) -------------------------------------------

    def check_add(self, ledger: int) -> int:
        ledger = check_ledger_id(ledger)
        if ledger <= self.last_id:
            raise LedgerStateError(
                f"cannot add ledger {ledger}: ledger ids must increase, the last one added was {self.last_id}"
            )
        if self.counts and self.counts[-1] == OPEN:
            raise LedgerStateError(
                f"cannot add ledger {ledger}: ledger {self.ids[-1]} is still open; close it with its entry count first"
            )
        return ledger

    def add(self, ledger: int) -> None:
        self.ids.append(ledger)
        self.counts.append(OPEN)
        self.last_id = ledger
        self.confirmed = -1 if self.tracked else None

    def check_close(self, ledger: int, entries: int) -> tuple[int, int]:
        ledger = check_ledger_id(ledger)
        if type(entries) is not int or not 0 <= entries <= MAX_ENTRY + 1:
            raise LedgerStateError(f"entries must be an int in 0..{MAX_ENTRY + 1}, got {entries!r}")
        i = self.index(ledger)
        if i < 0:
            raise LedgerStateError(f"cannot close ledger {ledger}: the topic has no such ledger")
        if self.counts[i] != OPEN:
            raise LedgerStateError(f"cannot close ledger {ledger}: it is already sealed with {self.counts[i]} entries")
        if self.confirmed is not None and entries <= self.confirmed:
            raise LedgerStateError(
                f"cannot close ledger {ledger} with {entries} entries: its last confirmed entry is "
                f"{ledger}:{self.confirmed}; allowed entries >= {self.confirmed + 1}"
            )
        return ledger, entries

    def close(self, ledger: int, entries: int) -> None:
        self.counts[self.index(ledger)] = entries
        self.confirmed = None

    def check_advance(self, ledger: int, last_entry: int) -> tuple[int, int]:
        """Validate ``topic.advance(ledger, last_entry)``: ``ledger`` is the newest ledger;
        open, ``last_entry`` may not go back; sealed, it must be its last entry (which only
        turns tracking on)."""
        ledger = check_ledger_id(ledger)
        if not self.ids or ledger != self.ids[-1]:
            newest = f"the newest ledger is {self.ids[-1]}" if self.ids else "the topic has no ledgers yet"
            raise LedgerStateError(f"cannot advance ledger {ledger}: only the newest ledger advances; {newest}")
        if type(last_entry) is not int:
            raise LedgerStateError(f"last_entry must be an int, got {last_entry!r} ({type(last_entry).__name__})")
        count = self.counts[-1]
        if count != OPEN:
            if last_entry != count - 1:
                raise LedgerStateError(
                    f"cannot advance ledger {ledger} to {last_entry}: it is sealed with {count} entries; "
                    f"allowed last_entry {count - 1}"
                )
            return ledger, last_entry
        low = -1 if self.confirmed is None else self.confirmed
        if not low <= last_entry <= MAX_ENTRY:
            raise LedgerStateError(
                f"cannot advance ledger {ledger} to {last_entry}: allowed last_entry {low}..{MAX_ENTRY}"
                + (" (the last confirmed entry never goes back)" if self.confirmed is not None else "")
            )
        return ledger, last_entry

    def advance(self, last_entry: int) -> None:
        """Track the open ledger's last confirmed entry (validated by ``check_advance``)."""
        self.tracked = True
        if self.counts[-1] == OPEN:
            self.confirmed = last_entry

    def check_trim(self, below: int) -> int:
        below = check_ledger_id(below, "below")
        if self.ids and below > self.ids[-1]:
            raise LedgerStateError(
                f"cannot trim below ledger {below}: the newest ledger {self.ids[-1]} must stay; "
                f"allowed below <= {self.ids[-1]}"
            )
        return below

    def trim(self, below: int) -> list[int]:
        """Drop every ledger with id < ``below``; return the ids dropped."""
        cut = bisect_left(self.ids, below)
        dropped = list(self.ids[:cut])
        del self.ids[:cut]
        del self.counts[:cut]
        return dropped
