"""The ledger directory of a topic: its ledgers in order, each open or sealed.

Kept in memory as two compact ``array('q')`` columns (ids ascending, entry counts
with ``-1`` for open) so that hundreds of thousands of ledgers cost 16 bytes each.
On disk each ledger is one small key, so adding or sealing one writes a few bytes.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from .errors import LedgerStateError
from .position import MAX_ENTRY, check_ledger_id

__all__ = ["LedgerDirectory", "OPEN"]

#: Entry count of a ledger that is still open.
OPEN = -1


class LedgerDirectory:
    """Ordered ledger ids with their entry counts. Lookups are O(log n)."""

    __slots__ = ("ids", "counts", "last_id")

    def __init__(self, ids: array | None = None, counts: array | None = None, last_id: int = -1) -> None:
        self.ids: array = ids if ids is not None else array("q")
        self.counts: array = counts if counts is not None else array("q")
        #: the highest ledger id ever added (trimmed ones included); new ids must exceed it
        self.last_id = last_id

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ledger: int) -> bool:
        i = bisect_left(self.ids, ledger)
        return i < len(self.ids) and self.ids[i] == ledger

    def first(self) -> int | None:
        return self.ids[0] if self.ids else None

    def index(self, ledger: int) -> int:
        """Position of ``ledger`` in the directory, or -1."""
        i = bisect_left(self.ids, ledger)
        return i if i < len(self.ids) and self.ids[i] == ledger else -1

    def count(self, ledger: int) -> int:
        """Entry count of a sealed ledger, ``OPEN`` for an open one. The ledger must exist."""
        return self.counts[self.index(ledger)]  # type: ignore[no-any-return]

    def next_after(self, ledger: int) -> int | None:
        """The ledger after ``ledger`` in the directory, or None."""
        i = bisect_left(self.ids, ledger + 1)
        return self.ids[i] if i < len(self.ids) else None

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

    def check_close(self, ledger: int, entries: int) -> tuple[int, int]:
        ledger = check_ledger_id(ledger)
        if type(entries) is not int or not 0 <= entries <= MAX_ENTRY + 1:
            raise LedgerStateError(f"entries must be an int in 0..{MAX_ENTRY + 1}, got {entries!r}")
        i = self.index(ledger)
        if i < 0:
            raise LedgerStateError(f"cannot close ledger {ledger}: the topic has no such ledger")
        if self.counts[i] != OPEN:
            raise LedgerStateError(f"cannot close ledger {ledger}: it is already sealed with {self.counts[i]} entries")
        return ledger, entries

    def close(self, ledger: int, entries: int) -> None:
        self.counts[self.index(ledger)] = entries

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
