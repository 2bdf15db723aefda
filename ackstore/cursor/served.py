"""The calls a broker's read path makes all day, answered from the small form when the cursor
is in it (``ackstore.cursor.small``), else from its parts: delivery counts and their
recording, the read position's moves, unacked entries and the ranges. Each takes the store's lock.

:class:`Served` is a base of :class:`~ackstore.cursor.core.CursorCore`, on
:class:`~ackstore.cursor.read_side.ReadSide`; the form and the parts give the same answers
(the state machines hold the two to one model).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..position import MAX_ENTRY, Position, trusted
from .deliveries import counts_window, delivery_count, delivery_counts, record_deliveries
from .read_side import ReadSide
from .small import entries_in
from .state import AckState
from .validate import pair

__all__ = ["Served"]


class Served(ReadSide):
    """The read path's calls, the small form's answers first."""

    __slots__ = ()

    small: Any

    def record_deliveries(self, items: list[Any]) -> list[int]:
        """``Cursor.record_deliveries``: in the small form when every position is in M's
        ledger (one that takes it over its cap ends the form), else by the parts."""
        with self._lock:
            small = self.small
            if small is not None:
                self._alive()
                entries = entries_in(items, small.md_l, self.topic.directory.open_limit())
                if entries is not None:
                    counts: list[int] = small.deliver(entries)
                    if not small.fits():
                        self._parts()
                    self._changed()
                    return counts
            return self.edit(record_deliveries, items, served=True)  # type: ignore[no-any-return]

    def delivery_count(self, position: Any) -> int:
        """``Cursor.delivery_count``."""
        with self._lock:
            small = self.small
            if small is not None:
                self.ensure_open()
                ledger, entry = pair(position)
                return small.count(entry) if ledger == small.md_l else 0  # type: ignore[no-any-return]
            return self.read(lambda: delivery_count(self.built(), position), served=True)

    def delivery_counts(self, start: Any = None, end: Any = None) -> dict[Position, int]:
        """``Cursor.delivery_counts``."""
        with self._lock:
            small = self.small
            if small is not None:
                self.ensure_open()
                md_l = small.md_l
                low, high = counts_window((md_l, small.md_e), start, end)
                return {
                    trusted(md_l, e): n
                    for e, n in small.counts()
                    if (md_l, e) >= low and (high is None or (md_l, e) < high)
                }
            return self.read(lambda: delivery_counts(self.built(), start, end), served=True)

    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]:
        """``Cursor.unacked_entries``."""
        with self._lock:
            small = self.small
            if small is not None:
                self.ensure_open()
                if type(ledger) is int and ledger == small.md_l:
                    return small.unacked(start, stop, n)  # type: ignore[no-any-return]
                self._parts()  # another ledger: the parts answer (the form ends)
            return self.read(lambda: self.built().unacked_entries(ledger, start, stop, n), served=True)

    def move_read_position(self, position: Position) -> None:
        """``Cursor.move_read_position`` (the read path's own move: not checked)."""
        with self._lock:
            small = self.small
            if small is not None and position[0] == small.md_l and 0 <= position[1] <= MAX_ENTRY:
                small.read_from(position[1])
                return
            self.edit(AckState.move_read_position, position, check=False, served=True)

    def rewind(self) -> None:
        """``Cursor.rewind``."""
        with self._lock:
            small = self.small
            if small is not None:
                small.rewind()
                return
            self.edit(AckState.rewind, check=False, served=True)

    def ledger_ranges(self) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """``Cursor.ledger_ranges``: the writer's cursor ledger by ledger, each under the
        lock; a read-only cursor's whole first, from one flushed state."""
        if self._store.readonly:
            yield from self.read(self._ranges)
            return
        with self._lock:
            self.ensure_open()
            small = self.small
            if small is None:
                ledgers = sorted(self._pages.known())
            else:  # the form's one ledger, read at once
                runs = small.runs()
        if small is not None:
            if runs:
                yield small.md_l, runs
            return
        for ledger in ledgers:
            with self._lock:
                ranges = self._ledger_ranges(ledger)
            if ranges:
                yield ledger, ranges

    def _ledger_ranges(self, ledger: int) -> list[tuple[int, int]]:
        """One ledger's ranges (a swapped-out one read from its record, not cached)."""
        small = self.small
        if small is not None:  # the form began since the iterator started
            return small.runs() if ledger == small.md_l else []
        la = self._pages.peek(ledger)
        return la.ranges() if la is not None else []

    def _ranges(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """Every ledger's ranges."""
        out = []
        for ledger in sorted(self._pages.known()):
            ranges = self._ledger_ranges(ledger)
            if ranges:
                out.append((ledger, ranges))
        return out
