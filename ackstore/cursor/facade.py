"""``Cursor``: one subscription's ack state over a topic, the public face of its parts.

The cursor holds the lock (the store's, shared by its cursors) and checks liveness; the
work is its components':

- :class:`~ackstore.cursor.state.AckState`: positions, range count, properties, ack rules;
- :class:`~ackstore.cursor.pages.Pages`: ledger ack sets in memory and on disk (the budget);
- :class:`~ackstore.cursor.plan.Planner` and :class:`~ackstore.cursor.chain.MarkerChain`:
  the flush protocol (``_prepare_flush() -> FlushPlan`` or ``MarkerPlan``, then ``commit()`` or ``abort()``)
  and compaction's rewrite plan.

Two small protocols face the rest of the package: the store's (``_prepare_flush``,
``directory_changed``, ``check_close``, the rewrite plan, ``release``) and the read
path's (``reset_to``, ``rewind``, ``move_read_position``, ``check_reset_target``; the
dispatch package calls them under the cursor's revision controller). A cursor process
uses the rest; resets go through a ``Dispatcher``.

Complexity: ``ack`` of one position O(1); of k positions in one ledger O(k) in C plus
O(containers); ``ack_range_count`` O(1); ``ack_ranges`` O(ranges).
"""

from __future__ import annotations

import _thread
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, TypeVar

from pyroaring import BitMap

from ..config import CursorConfig
from ..dispatch.revision import CursorStateRevisionController
from ..errors import (
    CursorDeletedError,
    InvalidArgumentError,
    InvalidTypeError,
    ReaderBehindError,
    ReadOnlyError,
    StoreClosedError,
)
from ..history import HistoryPoint, as_micros
from ..ledger_acks import bitmap_of_runs
from ..position import Position, trusted
from ..stats import CursorStats, LogUsage
from ..storage.log import CursorLog, MissingRecordError, RecoveredState
from . import lane
from .chain import MarkerChain
from .deliveries import delivery_count, delivery_counts, record_deliveries, set_delivery_counts
from .figures import Parts, cursor_figures, cursor_stats
from .moves import TopicView
from .pages import Pages
from .plan import Planner
from .small import check_small, small_of
from .snapshot import CursorSnapshot, batch_items, snapshot_of
from .state import AckState
from .store_side import StoreSide
from .validate import pair

if TYPE_CHECKING:
    import lmdb

    from ..history import HistoryKeeper, Point
    from ..ledger_acks import LedgerAcks
    from ..ledger_cache import CachePool
    from ..storage.env import Environment

__all__ = ["Cursor", "CursorHost"]

T = TypeVar("T")

_READ_TRIES = 16
"""how many times a read-only cursor's read runs again when the cursor moved to a newer flush
while it ran, before it gives up (ReaderBehindError): a small cursor's flush writes over the
state before the one it keeps, so a writer flushing in a tight loop on a busy machine moves
a reader on every other flush"""


class CursorHost(Protocol):
    """@private What a cursor needs of the store it lives in, and nothing more: the lock it shares,
    the storage and the cache pool under it, how it opened, the list of cursors the next
    flush visits (the store owns it; a cursor puts itself on it when it changes), and a
    durable write of its configuration."""

    lock: _thread.RLock
    cache_pool: CachePool
    readonly: bool
    closed: bool
    path: Path
    flush_list: dict[Cursor, Planner]
    small_list: dict[Any, Cursor]
    flush_count: int

    @property
    def storage(self) -> Environment: ...

    def persist_cursor_config(
        self, tid: int, name: str, cid: int, config: CursorConfig, drop_history: bool = False
    ) -> None: ...

    @property
    def history(self) -> HistoryKeeper: ...

    def restore_cursor(self, cursor: Cursor, micros: int) -> HistoryPoint: ...

    def history_target(self, cursor: Cursor, micros: int) -> Point: ...

    def history_state(self, cursor: Cursor, micros: int, budget: int | None) -> tuple[Point, RecoveredState]: ...

    def history_states(self, cursor: Cursor) -> Iterator[tuple[Point, RecoveredState]]: ...

    def _recover_log(
        self, txn: lmdb.Transaction, log: CursorLog, config: CursorConfig, topic: TopicView
    ) -> RecoveredState: ...

    def flush(self) -> Any: ...


def _recovered_snapshot(recovered: RecoveredState) -> CursorSnapshot:
    """The snapshot of a kept state recovered with every ledger loaded."""
    assert recovered.resolved is not None
    marker = recovered.resolved.marker
    return snapshot_of(trusted(*marker.mark_delete), marker.properties, sorted(recovered.ledgers.items()))


class Cursor(StoreSide):
    """One subscription's ack state over a topic. Get one with ``topic.cursor(name)``."""

    # slots: a flush reads these for every dirty cursor; one object, no separate dict to fetch
    __slots__ = (
        "_ack_one",
        "_asked",
        "_chain",
        "_deleted",
        "_flush_list",
        "_lock",
        "_log",
        "_store",
        "_topic",
        "_unbuilt",
        "_unloaded",
        "_view",
        "cursor_id",
        "name",
        "revision_controller",
        "__weakref__",
    )

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
        store = host
        self._topic = topic
        self._store = store
        self._flush_list = store.flush_list
        """the host's list of cursors the next flush visits (its one owner: the store takes a
        cursor off it; a change puts it on)"""
        self._lock: _thread.RLock = store.lock
        self.name = name
        """the subscription's name in its topic"""
        self.cursor_id = cursor_id
        """the id the store gave this cursor (its records' keys carry it; a cursor deleted and
        made again under its name gets a new one)"""
        self._config = config
        self.revision_controller = CursorStateRevisionController()
        """PIP-269: one controller per cursor, shared by every component that reads it"""
        self._log = CursorLog(store.storage.log_db, cursor_id)
        self.small = None
        self._asked = -1
        """the store's flush count when the cursor was last asked something the small form
        does not serve: asked since the last flush, it stays out of the form at the next
        (a cursor read through its parts every round would leave the form every round)"""
        self._deleted = False
        """True once the cursor was deleted: every call raises CursorDeletedError"""
        self._unloaded = self._unbuilt = not isinstance(recovered, RecoveredState)
        """``_unloaded``: True while the parts hold nothing: the cursor was opened into the
        small form (``recovered`` is that form) and its parts are loaded when first needed;
        ``_unbuilt``: True while they do not even exist (:meth:`_built` makes them)"""
        self._view = (-1, recovered.next_seq - 1) if store.readonly else (-1, -1)
        """read-only: ``(transaction, newest sequence)``: the newest sequence of the cursor's log
        when its state was read, and the last transaction that found it unchanged"""
        if self._unloaded:
            self.small = recovered
        else:
            self._build_parts()
            self._load(recovered, initial_position)
        if config.history_seconds:
            store.history.set_window(cursor_id, config.history_seconds)
        self._changed()  # a new cursor's start position is pending: list it

    def _built(self) -> AckState:
        """The parts exist (lock held), and the ack state is returned: a cursor opened into
        the small form has none until something asks for them, and then they are made
        holding nothing (the form holds the state until :meth:`_grow` loads them). O(1)."""
        if self._unbuilt:
            self._build_parts()
        return self._state

    def _build_parts(self) -> None:
        """Make the cursor's parts, holding nothing yet, and wire them together."""
        store, name, config = self._store, self.name, self._config
        budget = config.max_individual_ack_cache_bytes
        self._pages = pages = Pages(store.storage, self._log, budget, store.cache_pool, name)
        self._state = state = AckState(self._topic, name, pages)
        self._chain = chain = MarkerChain()
        self._planner = Planner(self.cursor_id, state, pages, chain, config)
        pages.alloc = chain.alloc
        pages.on_load = state.on_load
        if store.readonly:
            pages.refresh = self._refresh
        self._ack_one = state.ack_one  # bound once: the one-position hot path
        self._unbuilt = False

    def _load(self, recovered: RecoveredState, initial_position: str = "earliest") -> None:
        """Start from a recovered state (at open; a read-only store also when it refreshes);
        ``initial_position`` places a cursor that has no marker yet."""
        self._pages.load(recovered)
        self._state.load(recovered.resolved.marker if recovered.resolved is not None else None, initial_position)
        self._chain.load(recovered, self._state.range_count)  # the pages' ranges (an invariant of _check)

    def _refresh(self) -> None:
        """Read-only: move the whole cursor to the writer's newest flush (the writer trimmed a
        record this state needs); CursorDeletedError when the writer deleted the cursor."""
        self._load_newest(self._store.storage.read(self._newest))

    def _newest(self, txn: lmdb.Transaction) -> RecoveredState | None:
        """Read-only (lock held): the newest flushed state as ``txn`` sees it, recovered
        against the topic's directory as ``txn`` sees it (which the topic takes); None when
        the writer deleted the cursor (its catalog entry is gone or names another cursor id)."""
        store = self._store
        if store.storage.catalog.cursor_id(txn, self._topic.topic_id, self.name) != self.cursor_id:
            return None
        self._topic.reread_directory(txn)
        self._view = (txn.id(), self._log.newest(txn))
        return store._recover_log(txn, self._log, self._config, self._topic)

    def _load_newest(self, recovered: RecoveredState | None) -> None:
        """Adopt what :meth:`_newest` read (outside its transaction: loading the state may
        read records in transactions of its own)."""
        if recovered is None:
            self.mark_deleted()
            self._gone()
        self._load(recovered)

    def _catch_up(self) -> None:
        """Read-only (lock held), before every read: when the writer wrote this cursor's log
        since its state was read, the whole cursor moves to the newest flush first, so a
        read is never older than the writer's newest flush when it began, and reads never go
        back. O(1) (one read transaction) when nothing was written; a move reads the cursor
        as a reopen would."""
        moved = self._store.storage.read(self._look)
        if moved is not False:
            self._load_newest(moved)

    def _look(self, txn: lmdb.Transaction) -> RecoveredState | Literal[False] | None:
        """False when the cursor's log is as its state was read; else :meth:`_newest`."""
        seen, newest = self._view
        now = txn.id()
        if now == seen:
            return False
        if self._log.newest(txn) == newest:
            self._view = (now, newest)
            return False
        return self._newest(txn)

    # -- liveness ------------------------------------------------------------------------------

    def _gone(self) -> NoReturn:
        raise CursorDeletedError(
            f"cursor {self.name!r} of topic {self._topic.name!r} was deleted; "
            "topic.cursor(name) opens a new one under that name"
        )

    def mark_deleted(self) -> None:
        """@private The cursor was deleted (the store calls this, lock held): every later call raises
        CursorDeletedError, and its memory goes back to the pool."""
        self._deleted = True
        if self.small is not None:  # (the store's _unlist took it off the list)
            self.small.end()
            self.small = None
        if not self._unbuilt:
            self._pages.cache.clear()
            self._pages.cache.swapped.clear()

    def _release(self) -> None:
        """@private The store closes: give the cache's bytes back to the pool (parts never built
        have none)."""
        if not self._unbuilt:
            super()._release()

    def _alive(self) -> None:
        if self._deleted:
            self._gone()
        if self._store.closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")
        if self._store.readonly:
            raise ReadOnlyError(f"store {self._store.path} was opened readonly=True; cursors cannot change")

    def _open(self) -> None:
        if self._deleted:
            self._gone()
        if self._store.closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")

    # -- acks ----------------------------------------------------------------------------------

    def ack(self, positions: Iterable[Position] | Position) -> None:
        """Acknowledge positions individually. All are checked first: one bad position acks none.

        Takes any iterable of ``Position`` (or ``(ledger, entry)`` tuples), or one Position.
        Positions at or below the mark-delete position are already acknowledged and ignored,
        whatever their ledger (one the topic trimmed since is no error).
        O(1) for one position; O(k) in C plus O(containers) per ledger touched for k positions.
        For millions of entries of one ledger, :meth:`ack_entries` skips the Python objects.
        """
        store = self._store
        if store.closed or store.readonly or self._deleted:
            self._alive()
        if type(positions) is Position:  # the hot path: acquire/release is half the cost of `with` here
            lock = self._lock
            lock.acquire()
            try:
                small = self.small
                if small is not None:
                    ledger, entry = positions
                    if ledger == small.md_l and 0 <= entry <= self._topic.directory.open_limit():
                        fits = small.ack_range(entry, entry)
                        self._store.small_list[small] = self
                        if not fits:
                            self._parts()  # over the form's cap: the parts take it
                        return
                    self._parts()
                self._ack_one(positions[0], positions[1])
                listed = self._flush_list
                if self not in listed:
                    listed[self] = self._planner
            finally:
                lock.release()
            return
        with self._lock:
            self._parts()
            if isinstance(positions, tuple) and len(positions) == 2 and type(positions[0]) is int:
                positions = (positions,)  # type: ignore[assignment]
            try:
                items = positions if isinstance(positions, (list, tuple)) else list(positions)
            except TypeError:
                raise InvalidTypeError(f"ack takes an iterable of Position, got {type(positions).__name__}") from None
            if not items:
                return
            try:
                if len(items) == 1:
                    ledger, entry = pair(items[0])
                    self._ack_one(ledger, entry)
                else:
                    self._state.ack_items(items)
            finally:
                self._changed()

    def ack_entries(self, ledger: int, entries: Iterable[int]) -> None:
        """Acknowledge many entries of one ledger: the columnar fast path of :meth:`ack`.

        ``entries`` may be a ``pyroaring.BitMap``, an ``array('I')``, a ``range`` or any
        iterable of ints; a BitMap or array is taken without touching Python ints.
        All are checked first; one bad entry acks none.
        """
        small = self.small
        bitmap = entries if isinstance(entries, BitMap) else None
        span = entries if isinstance(entries, range) and entries.step == 1 and entries.start >= 0 else None
        served = bitmap is not None or span is not None  # a kind of entries the small form takes
        if small is not None and served and type(ledger) is int and ledger == small.md_l:
            with self._lock:
                if self.small is small and not (self._deleted or self._store.closed):
                    if not entries:
                        return
                    top = bitmap.max() if bitmap is not None else span[-1]  # type: ignore[index]
                    if top <= self._topic.directory.open_limit():
                        fits = small.ack_bitmap(bitmap) if bitmap is not None else small.ack_range(span[0], top)  # type: ignore[index]
                        self._store.small_list[small] = self
                        if not fits:
                            self._parts()  # over the form's cap: the parts take it
                        return
        self._edit(AckState.ack_entries, ledger, entries, served=served)

    def ack_cumulative(self, position: Position) -> None:
        """Acknowledge everything up to and including ``position`` (moves the mark-delete position)."""
        self._edit(AckState.ack_cumulative, position)

    def ack_batch_index(self, position: Position, batch_size: int, indexes: Iterable[int]) -> None:
        """Acknowledge some messages of a batch entry. The entry is acked once all its indexes are."""
        self._edit(AckState.ack_batch_index, position, batch_size, indexes)

    def set_property(self, key: str, value: int | str) -> None:
        """Set a property: a 64-bit int (Pulsar's mark-delete properties) or a str of up to
        4096 UTF-8 bytes (its cursor properties). Persisted by the next flush, with every
        marker (keep them few and small: each flush writes them all)."""
        self._edit(AckState.set_property, key, value)

    def remove_property(self, key: str) -> bool:
        """Drop a property (persisted by the next flush); True if it was set."""
        return self._edit(AckState.remove_property, key)

    # -- delivery counts -----------------------------------------------------------------------

    def record_deliveries(self, positions: Iterable[Position], *, durable: bool = False) -> list[int]:
        """One more delivery of each position, for callers that dispatch without the
        :class:`~ackstore.Dispatcher` (it counts by itself); each count after it, 0 for an acked
        position. All are checked first. Persisted by the next flush, like acks;
        ``durable=True`` flushes before returning (a flush per call)."""
        try:
            items = list(positions)
        except TypeError:
            raise InvalidTypeError(f"positions must be an iterable of Position, got {positions!r}") from None
        if type(durable) is not bool:
            raise InvalidTypeError(f"durable must be a bool, got {durable!r}")
        counts = self._edit(record_deliveries, items)
        if durable and any(counts):
            self._store.flush()
        return counts

    def restore_delivery_counts(self, counts: dict[Position, int]) -> int:
        """Set delivery counts exactly, ``{position: count >= 1}`` (for the restore and salvage
        tools; an acknowledged position is skipped). All are checked first; returns how many
        were set. Persisted by the next flush."""
        if not isinstance(counts, dict):
            raise InvalidTypeError(f"counts must be a dict of Position to int, got {counts!r}")
        return self._edit(set_delivery_counts, counts)

    def delivery_count(self, position: Position) -> int:
        """How many times ``position`` was delivered; 0 if never, or once it is acknowledged."""
        return self._one_state(lambda: delivery_count(self._built(), position), served=True)

    def delivery_counts(self, start: Position | None = None, end: Position | None = None) -> dict[Position, int]:
        """Every entry in ``[start, end)`` with a delivery count (None: from the mark-delete
        position on / to the end), ascending: the bulk form of :meth:`delivery_count`."""
        return self._one_state(lambda: delivery_counts(self._built(), start, end), served=True)

    # -- queries -------------------------------------------------------------------------------

    def _one_state(self, read: Callable[..., T], *args: Any, served: bool = False) -> T:
        """``read(*args)`` under the lock, on one state. A read-only cursor moves to the
        writer's newest flush whole when a record it needs was trimmed (``Pages.refresh``);
        a read that saw it move ran partly on the old state, so it runs again on the new
        one: no answer mixes two flushes. The writer's cursor never moves: one run. A read
        ``served`` answers from the form, or from the parts as they are in the form (what it
        reads does not change there: partial batches, delivery counts), which it builds if
        they were never built."""
        with self._lock:
            self._open()
            if not served:
                self._parts()
            elif self._unbuilt:  # a writer's cursor opened into the form: it never moves, one run
                return read(*args)
            if self._store.readonly:
                self._catch_up()
            pages = self._pages
            for _ in range(_READ_TRIES):
                seen = pages.generation
                result = read(*args)
                if pages.generation == seen:
                    return result
        raise ReaderBehindError(
            f"cursor {self.name!r} of topic {self._topic.name!r}: the writer trimmed what this reader needed "
            f"{_READ_TRIES} times while one read ran; try again"
        )

    def is_acked(self, position: Position) -> bool:
        """True when the whole entry at ``position`` is acknowledged."""
        return self._one_state(self._is_acked, pair(position), served=True)

    def _is_acked(self, at: tuple[int, int]) -> bool:
        small = self.small
        if small is not None:
            return at <= (small.md_l, small.md_e) or (at[0] == small.md_l and small.acked(at[1]))
        return at <= self._state.md or self._state.is_acked(at)

    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]:
        """Up to ``n`` entries of ``ledger`` in ``[start, stop)`` not acknowledged, ascending.
        Acked runs are hopped over whole: O(runs touched + entries returned), however many
        acked entries lie between (what reads and skips use)."""
        return self._one_state(lambda: self._state.unacked_entries(ledger, start, stop, n))

    def batch_acked_indexes(self, position: Position) -> frozenset[int] | None:
        """Acked indexes of a partially acknowledged batch entry, or None if there is no partial batch."""
        ledger, entry = pair(position)
        return self._one_state(lambda: self._state.batch_acked_indexes((ledger, entry)))

    @property
    def mark_delete_position(self) -> Position:
        """Everything at or below this position is acknowledged."""
        if self._deleted:
            self._gone()
        if self._store.readonly:
            return self._one_state(lambda: self._state.md)
        small = self.small
        return self._state.md if small is None else trusted(small.md_l, small.md_e)

    @property
    def read_position(self) -> Position:
        """Where the next sequential read starts. In memory only, as in Pulsar: a restart
        (clean or a crash) starts it again at the first unacked entry after the mark-delete
        position, so entries dispatched and not acked are delivered again (at-least-once)."""
        if self._deleted:
            self._gone()
        if self._store.readonly:
            return self._one_state(lambda: self._state.rp)
        small = self.small
        if small is not None and (self._unbuilt or self._state.rp <= (small.md_l, small.md_e)):
            return trusted(small.md_l, small.md_e + 1)  # M moved past it, as AckState.set_md moves it
        return self._state.rp

    @property
    def ack_range_count(self) -> int:
        """Number of contiguous acknowledged ranges above the mark-delete position. O(1)."""
        if self._deleted:
            self._gone()
        if self._store.readonly:
            return self._one_state(lambda: self._state.range_count)
        small = self.small
        return self._state.range_count if small is None else small.n

    @property
    def properties(self) -> dict[str, int | str]:
        """Cursor properties persisted with each marker (a copy)."""
        with self._lock:
            if self._deleted:
                self._gone()
            if self._store.readonly:
                return self._one_state(lambda: dict(self._state.properties))
            return dict(self._built().properties)

    @property
    def topic(self) -> TopicView:
        """The topic this cursor (subscription) reads."""
        return self._topic

    @property
    def is_blocked_on_ack_state_persistent(self) -> bool:
        """PIP-299: True while pausing is on and the ranges exceed what a flush can persist.

        Computed only when ``dispatcher_pause_on_ack_state_persistent`` is on; O(1).
        It clears as soon as acks, skips, seeks or resets bring the range count back to
        the limit, or the setting is turned off.
        """
        if self._deleted:
            self._gone()
        cfg = self._config
        if self._store.readonly:
            return self._one_state(
                lambda: self._state.blocked(
                    cfg.dispatcher_pause_on_ack_state_persistent, cfg.max_unacked_ranges_to_persist
                )
            )
        if self.small is not None:
            return False  # the form holds no more ranges than PIP-299 persists
        return self._state.blocked(cfg.dispatcher_pause_on_ack_state_persistent, cfg.max_unacked_ranges_to_persist)

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
        if self._store.readonly:
            yield from self._one_state(self._ranges)
            return
        with self._lock:
            self._open()
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
        """One ledger's ranges (a swapped-out one read from its record, not cached); lock held."""
        small = self.small
        if small is not None:  # the form began since the iterator started
            return small.runs() if ledger == small.md_l else []
        la = self._pages.peek(ledger)
        return la.ranges() if la is not None else []

    def _ranges(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """Every ledger's ranges, read under the lock already held."""
        out = []
        for ledger in sorted(self._pages.known()):
            ranges = self._ledger_ranges(ledger)
            if ranges:
                out.append((ledger, ranges))
        return out

    def partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        """Every partially acknowledged batch entry: ``{position: (batch_size, acked indexes)}``."""
        return self._one_state(self._partial_batches, served=True)

    def _partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        self._built()
        out: dict[Position, tuple[int, frozenset[int]]] = {}
        for ledger, la in self._ledgers():
            out.update(batch_items(ledger, la))
        return out

    def _ledgers(self) -> Iterator[tuple[int, LedgerAcks]]:
        """Every ledger's acks, ascending (a swapped-out one read, not loaded); lock held."""
        pages = self._pages
        for ledger in sorted(pages.known()):
            la = pages.peek(ledger)
            if la is not None:
                yield ledger, la

    def history(self) -> list[HistoryPoint]:
        """The flushed states this cursor can be put back to with :meth:`restore_as_of`,
        newest first: one per flush that wrote this cursor within its window
        (``CursorConfig.history_seconds``), each with the flush's time, the mark-delete
        position and the range count of that state. Empty for a cursor that keeps no
        history. O(points kept)."""
        with self._lock:
            self._open()
            keeper = self._store.history
            window = self._config.history_seconds
            if not window:
                return []
            return [p.public() for p in reversed(keeper.visible(self.cursor_id, window, time.time()))]

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
        return self._store.restore_cursor(self, as_micros(when))

    def check_restore(self, when: datetime | float) -> HistoryPoint:
        """@private The point :meth:`restore_as_of` would restore (the same typed errors);
        nothing is changed."""
        return self._store.history_target(self, as_micros(when)).public()

    def snapshot(self) -> CursorSnapshot:
        """The cursor's whole ack state read at once: mark-delete position, properties,
        ranges, partial batches and delivery counts. On a read-only store it is one flushed
        state (what a reopen after that flush recovers), never parts of two: a backup or an
        audit of a store a writer is flushing reads cursors this way. O(state)."""
        return self._one_state(self._snapshot)

    def _snapshot(self) -> CursorSnapshot:
        state = self._state
        return snapshot_of(state.md, state.properties, self._ledgers())

    def snapshot_as_of(self, when: datetime | float) -> CursorSnapshot:
        """The cursor's whole ack state as the newest kept flush at or before ``when`` (a
        datetime, or a Unix time in seconds) left it: the state :meth:`restore_as_of` would
        put back, with the properties that flush persisted (a restore keeps today's).
        Nothing is changed; it works on a read-only store too (one flushed moment of the
        writer's, never parts of two). HistoryRangeError as :meth:`restore_as_of`.
        O(the state read)."""
        _, recovered = self._store.history_state(self, as_micros(when), None)
        return _recovered_snapshot(recovered)

    def history_snapshots(self) -> Iterator[tuple[HistoryPoint, CursorSnapshot]]:
        """Every kept state with its point, oldest first: what :meth:`snapshot_as_of` gives
        for each point of :meth:`history` (``ackstore dump --history`` writes them). Each
        state is read on its own (one flushed moment); a state the writer's window drops
        while this runs is left out. Empty for a cursor that keeps no history.
        O(points + the states read)."""
        if not self._config.history_seconds:
            return
        for point, recovered in self._store.history_states(self):
            yield point.public(), _recovered_snapshot(recovered)

    # -- configuration -------------------------------------------------------------------------

    @property
    def config(self) -> CursorConfig:
        """This cursor's settings (persisted with it)."""
        return self._config

    def update_config(self, **changes: Any) -> CursorConfig:
        """Change settings at run time, e.g. ``update_config(max_unacked_ranges_to_persist=0)``.

        Validated, then persisted at once (durable when this returns); returns the new config.
        """
        with self._lock:
            self._alive()
            known = [f.name for f in fields(CursorConfig)]
            unknown = sorted(set(changes) - set(known))
            if unknown:
                raise InvalidArgumentError(f"unknown CursorConfig fields {unknown}: allowed {known}")
            new = replace(self._config, **changes)  # each value checked by CursorConfig: a typed error naming it
            off = bool(self._config.history_seconds) and not new.history_seconds
            self._store.persist_cursor_config(self._topic.topic_id, self.name, self.cursor_id, new, off)
            self.apply_config(new)
            self._store.history.set_window(self.cursor_id, new.history_seconds)
            return new

    # -- figures -------------------------------------------------------------------------------

    def stats(self) -> CursorStats:
        """A snapshot of this cursor's figures (cache sizes measured exactly)."""
        with self._lock:
            self._open()
            self._parts()
            if self._store.readonly:
                self._catch_up()
            return cursor_stats(self._topic.name, self.name, self._figure_parts())

    def figures(self) -> tuple[int, ...]:
        """The numbers named by ``ackstore.stats.CURSOR_FIGURES``, in that order: what a
        metrics scrape reads, cheaply (no measuring; cache bytes are the running upper bound
        the budget enforces). O(1)."""
        with self._lock:
            return cursor_figures(self._figure_parts(), self.small)

    def _figure_parts(self) -> Parts:
        if self._unbuilt:  # (a scrape does not build them)
            return Parts(None, None, None, self._config, self.revision_controller)
        return Parts(self._state, self._pages, self._chain, self._config, self.revision_controller)

    def log_usage(self) -> LogUsage:
        """Records and bytes this cursor has in the log, as of its newest marker. O(records).

        ``live_bytes`` is what recovery reads (with an unlimited budget) and what a
        compaction keeps; ``garbage_bytes`` is what it deletes; ``history_bytes`` what the
        cursor's history keeps besides (its points included). Unflushed changes are not
        counted."""
        tries = 3
        while True:
            with self._lock:
                self._open()
                self._parts()
                seq = self._chain.marker_seq
            try:
                return self._store.storage.read(partial(self._usage, seq))
            except MissingRecordError:
                tries -= 1
                if not self._store.readonly or not tries:
                    raise
            with self._lock:  # the writer trimmed this reader's marker meanwhile: catch up, look again
                self._refresh()

    def _usage(self, seq: int, txn: lmdb.Transaction) -> LogUsage:
        """:meth:`log_usage` in ``txn``: the points the store holds for this cursor say what
        its history keeps (a reader's cursor may have been opened with another config)."""
        keeper = self._store.history
        kept = keeper.held(self.cursor_id, txn)
        return self._log.usage(txn, seq, kept.keeps() if kept is not None else None, keeper.db)

    def history_kept(self) -> int:
        """@private The states the store holds for this cursor's history (what
        ``ackstore stat`` and the metrics show; a reader reads them). O(1) on the writer."""
        kept = self._store.history.held(self.cursor_id)
        return 0 if kept is None else len(kept)

    @property
    def _pending(self) -> bool:
        """@private True when a flush would have something to do for this cursor (what
        ``_prepare_flush`` checks first). O(1)."""
        small = self.small
        if small is not None:
            return bool(small.dirty)
        return not self._unbuilt and (self._pages.pending() or self._state.meta_dirty)

    @property
    def _listed(self) -> bool:
        """@private True while the next flush visits this cursor (it changed since its last flush)."""
        small = self.small
        return self in self._flush_list if small is None else small in self._store.small_list

    def _edit(self, change: Callable[..., T], *args: Any, check: bool = True, served: bool = False) -> T:
        """Make one change, ``change(ack state, *args)``, under the lock (first checking the
        cursor may change, unless ``check`` is off: the read path's own moves) and see that
        the next flush visits this cursor, whether or not the change raised. The change
        works on the parts (the small form ends first); one the small form also ``served``
        keeps the cursor eligible for it at its next flush."""
        with self._lock:
            if check:
                self._alive()
            if not served or self.small is not None:
                self._parts()
            try:
                return change(self._state, *args)
            finally:
                self._changed()

    def _changed(self) -> None:
        """After any change: make sure the next flush visits this cursor. Lock held."""
        small = self.small
        if small is not None:
            if small.dirty:
                self._store.small_list[small] = self
            return
        if self not in self._flush_list and self._pending:
            self._flush_list[self] = self._planner

    @property
    def persisted(self) -> bool:
        """True once a flush wrote this cursor's state (a cursor without one starts at the
        initial position it is opened with)."""
        return self.small is not None or (not self._unbuilt and self._chain.marker_seq >= 0)

    @property
    def dirty(self) -> bool:
        """@private True when a flush would write something for this cursor (:attr:`pending`)."""
        return self._pending

    # -- the small form (cursor/small.py) -----------------------------------------------------

    def _parts(self) -> None:
        """Before anything the small form does not serve (lock held): the parts hold the
        cursor's state, and the cursor stays out of the form at its next flush."""
        self._asked = self._store.flush_count
        if self.small is not None:
            self._grow()
        elif self._unbuilt:  # (deleted while in the form: the parts of nothing)
            self._build_parts()

    def _grow(self) -> None:
        """End the small form: the parts hold the cursor's state again. When a flush wrote
        the form's state since it began (or is writing it), the parts first load the newest
        flushed state as a reopen would, keeping what lives in memory only (the read
        position, the flush counters, the open's recovery report), and the next sequence
        stays past the form's; then they take the acks since. O(the state)."""
        small = self.small
        assert small is not None
        self._built()
        self.small = None
        small.end()
        store = self._store
        store.small_list.pop(small, None)
        state, chain = self._state, self._chain
        if small.flushes or self._unloaded:
            rp, recovery, flushes, total = state.rp, chain.recovery, chain.flushes, chain.total_flush_bytes
            storage = store.storage
            self._load(storage.read(lambda txn: store._recover_log(txn, self._log, self._config, self._topic)))
            state.rp = max(rp, state.rp)
            if not self._unloaded:  # (an open into the form: the report is this first recovery's)
                chain.recovery = recovery
            self._unloaded = False
            chain.flushes, chain.total_flush_bytes = flushes + small.flushes, total + small.flush_bytes
            chain.last_flush_bytes = small.last_bytes
            chain.next_seq = max(chain.next_seq, small.next_seq)  # never a sequence a flush in flight took
        if (small.md_l, small.md_e) > state.md:  # M where the form had it, by the rule acks take
            state.ack_cumulative((small.md_l, small.md_e))
        runs = small.runs()
        if runs:
            state.apply_groups([(small.md_l, bitmap_of_runs(runs))])
        self._changed()

    def take_small_form(self) -> None:
        """@private A flush just wrote a full marker of this cursor: take the small form when
        the cursor fits it (its whole state in a state slot: ``small_of``) and was asked
        nothing else since its last flush (store lock held)."""
        store = self._store
        if self._asked >= store.flush_count or self.small is not None or self._deleted or store.readonly:
            return
        if not self._pending:
            parts = self._state, self._pages, self._chain, self._config, self._topic.directory
            self.small = small_of(self.cursor_id, *parts)

    # -- the read path's protocol (dispatch/, under the revision controller) -------------------

    def reset_to(self, position: Position, batch: tuple[int, int] | None = None) -> None:
        """@private A position reset: everything before ``position`` is acked, nothing from it on, and
        reads start there (M may move backwards); ``batch`` ``(batch_index, batch_size)``
        also acks the batch's indexes before ``batch_index``. For the read path: a reset
        outside a Dispatcher's revision races with reads in flight."""
        self._edit(AckState.reset_to, position, batch)

    def check_reset_target(self, position: Any, batch: tuple[int, int] | None = None) -> tuple[int, int]:
        """@private Raise a typed error unless ``position`` (and ``batch``) is a place a reset may move to."""
        with self._lock:
            self._parts()
            if batch is not None:
                self._state.check_batch_target(None, *batch)  # the batch's own shape first
            target = self._state.check_reset_target(position)
            if batch is not None:
                self._state.check_batch_target(pair(position), *batch)
            return target

    def ensure_open(self) -> None:
        """@private Raise StoreClosedError once the store is closed, CursorDeletedError once the cursor
        is deleted: the read path checks it before every read (Pulsar's reads of a closed
        cursor fail, whether or not there are entries to read)."""
        self._open()

    def check_position(self, position: Any) -> None:
        """@private Raise a typed error unless ``position`` is an entry the topic's ledgers allow (a
        ledger the topic has, within its sealed end or its open bound): the rule acks and
        delivery counts follow (the read path checks a redelivery with it)."""
        ledger, entry = pair(position)
        with self._lock:
            self._open()
            self._parts()
            self._state.check_entry(ledger, entry)

    def clamp_reset_target(self, position: Any) -> Position:
        """@private Where a reset to ``position`` goes by Pulsar's rule (the next valid position:
        before the first ledger the earliest, past the last entry the latest)."""
        with self._lock:
            self._parts()
            return trusted(*self._state.clamp_reset_target(position))

    def move_read_position(self, position: Position) -> None:
        """@private A sequential read moved past ``position``'s predecessor (never backwards)."""
        self._edit(AckState.move_read_position, position, check=False)

    def rewind(self) -> None:
        """@private Read again from the first unacked position."""
        self._edit(AckState.rewind, check=False)

    # -- invariants ----------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (tests call this after each step)."""
        with self._lock:  # each component asserts its own invariants (the _check convention)
            if self._unloaded:  # the parts hold nothing yet: the form is the state
                assert self.small is not None, "a cursor with neither its parts nor the small form"
                check_small(self.small, (self.small.md_l, -1))
            else:
                held = self._pages._check(self._state.md, self._topic.directory)
                self._state._check(held)
                cfg = self._config
                self._chain._check(
                    cfg.full_marker_every, cfg.max_unacked_ranges_to_persist, self._pages.index, lane.DELTA_MAX_ACKS
                )
                if self.small is not None:
                    check_small(self.small, self._state.md)
            assert self._listed or not self._pending or self._store.readonly, "a pending cursor a flush would not visit"
