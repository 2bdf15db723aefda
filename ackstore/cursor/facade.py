"""``Cursor``: one subscription's ack state over a topic, the public face of its core.

The cursor checks what it is given and calls its :class:`~ackstore.cursor.core.CursorCore`,
which holds the state and takes the lock (the store's, shared by its cursors). The
store, its topics and the group flush call the core, never this face. The read path's
protocol (``reset_to``, ``move_read_position``, ``check_reset_target``...: the dispatch
package calls them under the cursor's revision controller) is the core's too, reached
through :attr:`Cursor.read_path`; resets go through a ``Dispatcher``.

Complexity: ``ack`` of one position O(1); of k positions in one ledger O(k) in C plus
O(containers); ``ack_range_count`` O(1); ``ack_ranges`` O(ranges).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from ..config import CursorConfig
from ..dispatch.revision import CursorStateRevisionController
from ..errors import InvalidTypeError
from ..fields import FacadeFields, native
from ..history import HistoryPoint, as_micros
from ..position import Position, trusted
from ..stats import CursorStats, LogUsage
from ..storage.log import RecoveredState
from .core import CursorCore, CursorHost
from .moves import TopicView
from .snapshot import CursorSnapshot, recovered_snapshot
from .validate import pair

__all__ = ["Cursor", "CursorHost"]


class Cursor(FacadeFields):
    """One subscription's ack state over a topic. Get one with ``topic.cursor(name)``."""

    __slots__ = ("_store", "name", "cursor_id", "__weakref__")

    def __init__(
        self,
        host: CursorHost,
        topic: TopicView,
        name: str,
        cursor_id: int,
        config: CursorConfig,
        recovered: RecoveredState | Any,
        initial_position: str = "earliest",
    ) -> None:
        self._core = CursorCore(host, topic, name, cursor_id, config, recovered, initial_position)
        """@private the cursor's state and the engine's calls on it"""
        self._store = host
        self.name = name
        """the subscription's name in its topic"""
        self.cursor_id = cursor_id
        """the id the store gave this cursor (its records' keys carry it; a cursor deleted and
        made again under its name gets a new one)"""

    @property
    def revision_controller(self) -> CursorStateRevisionController:
        """PIP-269: one controller per cursor, shared by every component that reads it."""
        return self._core.revision_controller

    # -- acks ----------------------------------------------------------------------------------

    def ack(self, positions: Iterable[Position] | Position) -> None:
        """Acknowledge positions individually. All are checked first: one bad position acks none.

        Takes any iterable of ``Position`` (or ``(ledger, entry)`` tuples), or one Position.
        Positions at or below the mark-delete position are already acknowledged and ignored,
        whatever their ledger (one the topic trimmed since is no error).
        O(1) for one position; O(k) in C plus O(containers) per ledger touched for k positions.
        For millions of entries of one ledger, :meth:`ack_entries` skips the Python objects.
        """
        self._core.ack(positions)  # (where the module is built, what the compiled ack takes never comes here)

    def ack_entries(self, ledger: int, entries: Iterable[int]) -> None:
        """Acknowledge many entries of one ledger: the columnar fast path of :meth:`ack`.

        ``entries`` may be a ``pyroaring.BitMap``, an ``array('I')``, a ``range`` or any
        iterable of ints; a BitMap or array is taken without touching Python ints.
        All are checked first; one bad entry acks none.
        """
        self._core.ack_entries(ledger, entries)

    def ack_cumulative(self, position: Position) -> None:
        """Acknowledge everything up to and including ``position`` (moves the mark-delete position)."""
        self._core.ack_cumulative(position)

    def ack_batch_index(self, position: Position, batch_size: int, indexes: Iterable[int]) -> None:
        """Acknowledge some messages of a batch entry. The entry is acked once all its indexes are."""
        self._core.ack_batch_index(position, batch_size, indexes)

    def set_property(self, key: str, value: int | str) -> None:
        """Set a property: a 64-bit int (Pulsar's mark-delete properties) or a str of up to
        4096 UTF-8 bytes (its cursor properties). Persisted by the next flush, with every
        marker (keep them few and small: each flush writes them all)."""
        self._core.set_property(key, value)

    def remove_property(self, key: str) -> bool:
        """Drop a property (persisted by the next flush); True if it was set."""
        return self._core.remove_property(key)

    # -- delivery counts -----------------------------------------------------------------------

    def record_deliveries(self, positions: Iterable[Position], *, durable: bool = False) -> list[int]:
        """One more delivery of each position, for callers that dispatch without the
        :class:`~ackstore.Dispatcher` (it counts by itself); each count after it, 0 for an acked
        position. All are checked first. Persisted by the next flush, like acks;
        ``durable=True`` flushes before returning (a flush per call)."""
        if type(durable) is not bool:
            raise InvalidTypeError(f"durable must be a bool, got {durable!r}")
        counts = self._core.record_deliveries(positions)
        if durable and any(counts):
            self._store.flush()
        return counts

    def restore_delivery_counts(self, counts: dict[Position, int]) -> int:
        """Set delivery counts exactly, ``{position: count >= 1}`` (for the restore and salvage
        tools; an acknowledged position is skipped). All are checked first; returns how many
        were set. Persisted by the next flush."""
        if not isinstance(counts, dict):
            raise InvalidTypeError(f"counts must be a dict of Position to int, got {counts!r}")
        return self._core.restore_delivery_counts(counts)

    def delivery_count(self, position: Position) -> int:
        """How many times ``position`` was delivered; 0 if never, or once it is acknowledged."""
        return self._core.delivery_count(position)

    def delivery_counts(self, start: Position | None = None, end: Position | None = None) -> dict[Position, int]:
        """Every entry in ``[start, end)`` with a delivery count (None: from the mark-delete
        position on / to the end), ascending: the bulk form of :meth:`delivery_count`."""
        return self._core.delivery_counts(start, end)

    # -- queries -------------------------------------------------------------------------------

    def is_acked(self, position: Position) -> bool:
        """True when the whole entry at ``position`` is acknowledged."""
        return self._core.read(self._core.is_acked, pair(position), served=True)

    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]:
        """Up to ``n`` entries of ``ledger`` in ``[start, stop)`` not acknowledged, ascending.
        Acked runs are hopped over whole: O(runs touched + entries returned), however many
        acked entries lie between (what reads and skips use)."""
        return self._core.unacked_entries(ledger, start, stop, n)

    def batch_acked_indexes(self, position: Position) -> frozenset[int] | None:
        """Acked indexes of a partially acknowledged batch entry, or None if there is no partial batch."""
        return self._core.batch_acked_indexes(pair(position))

    @property
    def mark_delete_position(self) -> Position:
        """Everything at or below this position is acknowledged."""
        return self._core.mark_delete()

    @property
    def read_position(self) -> Position:
        """Where the next sequential read starts. In memory only, as in Pulsar: a restart
        (clean or a crash) starts it again at the first unacked entry after the mark-delete
        position, so entries dispatched and not acked are delivered again (at-least-once)."""
        return self._core.read_position()

    @property
    def ack_range_count(self) -> int:
        """Number of contiguous acknowledged ranges above the mark-delete position. O(1)."""
        return self._core.range_count()

    @property
    def properties(self) -> dict[str, int | str]:
        """Cursor properties persisted with each marker (a copy)."""
        return self._core.properties()

    @property
    def topic(self) -> TopicView:
        """The topic this cursor (subscription) reads."""
        return self._core.topic

    @property
    def is_blocked_on_ack_state_persistent(self) -> bool:
        """PIP-299: True while pausing is on and the ranges exceed what a flush can persist.

        Computed only when ``dispatcher_pause_on_ack_state_persistent`` is on; O(1).
        It clears as soon as acks, skips, seeks or resets bring the range count back to
        the limit, or the setting is turned off.
        """
        return self._core.blocked()

    def ack_ranges(self) -> Iterator[tuple[Position, Position]]:
        """Inclusive ``(first, last)`` acknowledged ranges above M, ascending. O(ranges).

        Ledger by ledger: each ledger's ranges are read under the lock, swapped-out ones
        straight from their record without entering the cache (a scan must not flush the
        LRU); acks made while the iterator runs show up in ledgers it has not reached yet.
        """
        for ledger, ranges in self.ledger_ranges():
            for first, last in ranges:
                yield trusted(ledger, first), trusted(ledger, last)

    def ledger_ranges(self) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """``(ledger, [(first, last), ...])`` for every ledger with acks above M, ascending:
        the ranges of :meth:`ack_ranges` as plain ints, without a Position per bound (the
        bulk form for audits and exports). O(ranges), in C.

        The writer's cursor is read ledger by ledger, each under the lock (acks go on
        between them and show up in ledgers not reached yet); a read-only cursor's ranges
        are read whole first, from one flushed state (see :meth:`snapshot`)."""
        return self._core.ledger_ranges()

    def partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        """Every partially acknowledged batch entry: ``{position: (batch_size, acked indexes)}``."""
        return self._core.read(self._core.partial_batches, served=True)

    def snapshot(self) -> CursorSnapshot:
        """The cursor's whole ack state read at once: mark-delete position, properties,
        ranges, partial batches and delivery counts. On a read-only store it is one flushed
        state (what a reopen after that flush recovers), never parts of two: a backup or an
        audit of a store a writer is flushing reads cursors this way. O(state)."""
        return self._core.read(self._core.snapshot, served=True)

    # -- history -------------------------------------------------------------------------------

    def history(self) -> list[HistoryPoint]:
        """The flushed states this cursor can be put back to with :meth:`restore_as_of`,
        newest first: one per flush that wrote this cursor within its window
        (``CursorConfig.history_seconds``), each with the flush's time, the mark-delete
        position and the range count of that state. Empty for a cursor that keeps no
        history. O(points kept)."""
        return self._core.history()

    def restore_as_of(self, when: datetime | float) -> HistoryPoint:
        """Put the cursor back exactly as a flush left it: its acks, mark-delete position,
        partial batches and delivery counts become those of the newest kept state flushed
        at or before ``when`` (a datetime, or a Unix time in seconds); its properties stay;
        reads start again at the first unacked entry after the mark-delete position, as
        after a restart. Acks not flushed yet are dropped, as a crash would. Durable at the
        next flush, which is itself a point of the history (a restore can be undone).
        Returns the point restored.

        HistoryRangeError when ``when`` is before the oldest state kept (the message names
        the range kept) or the cursor keeps no history; ReadOnlyError on a read-only store.
        Outside a :class:`~ackstore.Dispatcher` this races with reads in flight as a reset
        does; ``Dispatcher.restore_as_of`` makes it a revision. O(the state restored)."""
        return self._store.cursor_side.restore_cursor(self._core, as_micros(when))

    def check_restore(self, when: datetime | float) -> HistoryPoint:
        """@private The point :meth:`restore_as_of` would restore (the same typed errors);
        nothing is changed."""
        return self._store.cursor_side.history_target(self._core, as_micros(when)).public()

    def snapshot_as_of(self, when: datetime | float) -> CursorSnapshot:
        """The cursor's whole ack state as the newest kept flush at or before ``when`` (a
        datetime, or a Unix time in seconds) left it: the state :meth:`restore_as_of` would
        put back, with the properties that flush persisted (a restore keeps today's).
        Nothing is changed; it works on a read-only store too (one flushed moment of the
        writer's, never parts of two). HistoryRangeError as :meth:`restore_as_of`.
        O(the state read)."""
        _, recovered = self._store.cursor_side.history_state(self._core, as_micros(when), None)
        return recovered_snapshot(recovered)

    def history_snapshots(self) -> Iterator[tuple[HistoryPoint, CursorSnapshot]]:
        """Every kept state with its point, oldest first: what :meth:`snapshot_as_of` gives
        for each point of :meth:`history` (``ackstore dump --history`` writes them). Each
        state is read on its own (one flushed moment); a state the writer's window drops
        while this runs is left out. Empty for a cursor that keeps no history.
        O(points + the states read)."""
        core = self._core
        if not core.config.history_seconds:
            return
        for point, recovered in self._store.cursor_side.history_states(core):
            yield point.public(), recovered_snapshot(recovered)

    # -- configuration and figures --------------------------------------------------------------

    @property
    def config(self) -> CursorConfig:
        """This cursor's settings (persisted with it)."""
        return self._core.config

    def update_config(self, **changes: Any) -> CursorConfig:
        """Change settings at run time, e.g. ``update_config(max_unacked_ranges_to_persist=0)``.

        Validated, then persisted at once (durable when this returns); returns the new config.
        """
        return self._store.cursor_side.update_config(self._core, changes)

    def stats(self) -> CursorStats:
        """A snapshot of this cursor's figures (cache sizes measured exactly)."""
        return self._core.stats()

    def figures(self) -> tuple[int, ...]:
        """The numbers named by ``ackstore.stats.CURSOR_FIGURES``, in that order: what a
        metrics scrape reads, cheaply (no measuring; cache bytes are the running upper bound
        the budget enforces). O(1)."""
        return self._core.figures()

    def log_usage(self) -> LogUsage:
        """Records and bytes this cursor has in the log, as of its newest marker. O(records).

        ``live_bytes`` is what recovery reads (with an unlimited budget) and what a
        compaction keeps; ``garbage_bytes`` is what it deletes; ``history_bytes`` what the
        cursor's history keeps besides (its points included). Unflushed changes are not
        counted."""
        return self._core.log_usage()

    def history_kept(self) -> int:
        """@private The states the store holds for this cursor's history (what
        ``ackstore stat`` and the metrics show; a reader reads them). O(1) on the writer."""
        kept = self._store.history.held(self.cursor_id)
        return 0 if kept is None else len(kept)

    @property
    def persisted(self) -> bool:
        """True once a flush wrote this cursor's state (a cursor without one starts at the
        initial position it is opened with)."""
        return self._core.persisted

    @property
    def dirty(self) -> bool:
        """@private True when a flush would write something for this cursor."""
        return self._core._pending

    # -- the read path's protocol (dispatch/, under the revision controller) -------------------

    @property
    def read_path(self) -> CursorCore:
        """@private What the read path (the dispatch package, under the cursor's revision
        controller) works on besides the public calls: ``ensure_open``, ``check_position``,
        ``move_read_position``, ``check_reset_target``, ``clamp_reset_target`` and
        ``reset_to`` (a reset outside a Dispatcher's revision races with reads in flight)."""
        return self._core

    def rewind(self) -> None:
        """@private Read again from the first unacked position."""
        self._core.rewind()

    def _check(self) -> None:
        """Assert every internal invariant (tests call this after each step)."""
        self._core._check()


if native is not None:  # Cursor.ack compiled: a Position or a list, in the small form, acked with no Python frame
    setattr(Cursor, "ack", native.ack_method(Cursor.ack, CursorCore.ack))  # noqa: B010
