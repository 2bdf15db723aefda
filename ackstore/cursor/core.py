"""``CursorCore``: one cursor's ack state and everything the engine does with it, behind the
public :class:`~ackstore.cursor.facade.Cursor`.

The core holds the cursor's state, in one of two shapes: its parts (its
:class:`~ackstore.cursor.state.AckState`, :class:`~ackstore.cursor.pages.Pages`,
:class:`~ackstore.cursor.chain.MarkerChain` and :class:`~ackstore.cursor.plan.Planner`) or
the small form (``ackstore.cursor.small``), and moves between them (:meth:`_parts`,
:meth:`_grow`, :meth:`take_small_form`). The facade checks arguments where they are its
own and calls the core; the store, its topics, the group flush and compaction call the
core (the flush list maps a core to its planner; its base
:class:`~ackstore.cursor.store_side.StoreSide` has their calls), never the facade's public
methods. Its other base, :class:`~ackstore.cursor.read_side.ReadSide`, has the reads on one
state, a read-only store's catch-up with the writer, the figures and the read path's
checks.

What the facade calls takes the store's lock itself; the engine's calls run with it held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from ..config import CursorConfig
from ..dispatch.revision import CursorStateRevisionController
from ..errors import CursorDeletedError, InvalidTypeError, ReadOnlyError, StoreClosedError
from ..fields import native
from ..history import HistoryPoint
from ..lock import StoreLock
from ..position import Position, trusted
from ..storage.log import RecoveredState
from ..storage.records import unpack_properties
from . import fitting, lane
from .chain import MarkerChain
from .figures import Carried, carried_now, carried_of, carry_back
from .moves import TopicView
from .pages import Pages
from .plan import Planner
from .read_side import OpensLogs, ReadHost
from .served import Served
from .small import OpenedForm, OpenFigures, check_small, small_of
from .small_span import behind_line, form_entry, is_acked, read_position
from .snapshot import CursorSnapshot, batch_items, form_batches, form_snapshot, snapshot_of
from .state import AckState
from .validate import check_entries, entries_bitmap, pair

if TYPE_CHECKING:
    from ..history import Point
    from ..ledger_acks import LedgerAcks
    from ..ledger_cache import CachePool

__all__ = ["CursorCore", "CursorHost", "HistorySide"]

T = TypeVar("T")


if native is not None:  # (the compiled Cursor.ack tells a Position from any other argument)
    native.ack_setup(Position)
ACK_CURSOR: Any = None if native is None else native.ack_cursor
"""``ackstore._native.ack_cursor(core, positions)`` where the module was built (the compiled
``Cursor.ack`` runs it): :meth:`CursorCore.ack` of one Position, or of a list or tuple of
positions, whole (the checks, the store's lock, the ack, the flush list) when the cursor's
checks pass without a word and it is in its small form, the form holds a limit cached for
the topic's directory as it is and takes every position; 0 when it declines having changed
nothing (:meth:`CursorCore.ack` decides), 1 when done, 3 when done past the form's cap
(:meth:`CursorCore.ack` hands the state to the parts), 4 when done with M moved on into the
next ledger (:meth:`CursorCore.ack` bounds the form again); None where it was not built."""


class HistorySide(OpensLogs, Protocol):
    """What a cursor calls of its store's cursor side
    (:class:`~ackstore.store_cursors.CursorSide`): besides the reads' log recovery, a
    durable change of its configuration, its history's restore, target and states."""

    def update_config(self, cursor: CursorCore, changes: dict[str, Any]) -> CursorConfig: ...

    def restore_cursor(self, cursor: CursorCore, micros: int) -> HistoryPoint: ...

    def history_target(self, cursor: CursorCore, micros: int) -> Point: ...

    def history_state(self, cursor: CursorCore, micros: int, budget: int | None) -> tuple[Point, RecoveredState]: ...

    def history_states(self, cursor: CursorCore) -> Iterator[tuple[Point, RecoveredState]]: ...


class CursorHost(ReadHost, Protocol):
    """What a cursor needs of the store it lives in, and nothing more: besides what its reads
    need (:class:`~ackstore.cursor.read_side.ReadHost`), the lock it shares, the cache pool,
    the list of cursors the next flush visits (the store owns it; a cursor puts itself on it
    when it changes), and its store's cursor side (:class:`HistorySide`)."""

    lock: StoreLock
    cache_pool: CachePool
    closed: bool
    path: Path
    flush_list: dict[CursorCore, Planner]
    small_list: dict[Any, CursorCore]
    flush_count: int

    @property
    def cursor_side(self) -> HistorySide: ...

    def flush(self) -> Any: ...


class CursorCore(Served):
    """One cursor's state (its parts or the small form) and the engine's calls on it."""

    # slots: a flush reads these for every dirty cursor; one object, no separate dict to fetch
    __slots__ = (
        "_ack_one",
        "_asked",
        "_carried",
        "_chain",
        "_revision",
        "_unbuilt",
        "cursor_id",
        "name",
        "__weakref__",
    )  # and CoreFields' (what the compiled ack reads: the small form, the store, its lock, ...)

    _store: CursorHost

    def __init__(
        self,
        host: CursorHost,
        topic: TopicView,
        name: str,
        cursor_id: int,
        config: CursorConfig,
        recovered: RecoveredState | OpenedForm,
        initial_position: str = "earliest",
    ) -> None:
        store = host
        self.topic = topic
        self._store = store
        self._flush_list = store.flush_list
        """the host's list of cursors the next flush visits (its one owner: the store takes a
        cursor off it; a change puts it on)"""
        self._lock: StoreLock = store.lock
        self.name = name
        self.cursor_id = cursor_id
        self._config = config
        self._revision: CursorStateRevisionController | None = None
        """the cursor's :attr:`revision_controller`, once asked for"""
        self.small = None
        self._asked = -1
        """the store's flush count when the cursor was last asked something the small form
        does not serve: asked since the last flush, it stays out of the form at the next
        (a cursor read through its parts every round would leave the form every round)"""
        self._deleted = False
        """True once the cursor was deleted: every call raises CursorDeletedError"""
        self._unbuilt = not isinstance(recovered, RecoveredState)
        """True while the parts do not exist (:meth:`built` makes them): never while they hold
        the state, always while the small form does (opened into it, ``recovered`` is that
        form, or taken since: :meth:`take_small_form`)"""
        self._carried: Carried | OpenFigures | None = None
        """what lives in memory only of parts the small form replaced, given back when the
        form ends (for a cursor opened into the form: what the open did, :func:`carried_now`)"""
        self._view = (-1, recovered.next_seq - 1) if store.readonly else (-1, -1)
        if isinstance(recovered, OpenedForm):
            self.small, self._carried = recovered.small, recovered.figures
        else:
            self._build_parts()
            self._load(recovered, initial_position)
        if config.history_seconds:
            store.history.set_window(cursor_id, config.history_seconds)
        self._changed()  # a new cursor's start position is pending: list it

    @property
    def config(self) -> CursorConfig:
        return self._config

    def built(self) -> AckState:
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
        self._state = state = AckState(self.topic, name, pages)
        self._chain = chain = MarkerChain()
        self._planner = Planner(self.cursor_id, state, pages, chain, config)
        pages.alloc = chain.alloc
        if store.readonly:
            pages.on_load = partial(fitting.on_load, state)
            pages.refresh = self._refresh
        else:
            pages.on_load = self._loaded
        self._ack_one = state.ack_one  # bound once: the one-position hot path
        self._unbuilt = False

    def _loaded(self, ledger: int, la: LedgerAcks) -> None:
        """The writer's swap-in of ``ledger``: its acks clipped to what the state allows
        (:func:`~ackstore.cursor.fitting.on_load`). A record written before M passed some of
        its entries (a small form's chain may name one) leaves the ledger changed then, so
        the cursor is listed for the next flush, whatever call swapped it in. O(1) more."""
        fitting.on_load(self._state, ledger, la)
        self._changed()

    def _load(self, recovered: RecoveredState, initial_position: str = "earliest") -> None:
        """Start from a recovered state (at open; a read-only store also when it refreshes);
        ``initial_position`` places a cursor that has no marker yet."""
        self._pages.load(recovered)
        resolved = recovered.resolved
        fitting.load(self._state, resolved.marker if resolved is not None else None, initial_position)
        self._chain.load(recovered, self._state.range_count)  # the pages' ranges (an invariant of _check)

    # -- liveness ------------------------------------------------------------------------------

    def _gone(self) -> NoReturn:
        raise CursorDeletedError(
            f"cursor {self.name!r} of topic {self.topic.name!r} was deleted; "
            "topic.cursor(name) opens a new one under that name"
        )

    def mark_deleted(self) -> None:
        """The cursor was deleted (the store calls this): every later call raises
        CursorDeletedError, and its memory goes back to the pool."""
        self._deleted = True
        if self.small is not None:  # (the store's _unlist took it off the list)
            self.small.end()
            self.small = None
        if not self._unbuilt:
            self._pages.release()
            self._pages.cache.swapped.clear()

    def _release(self) -> None:
        """The store closes: give the cache's bytes back to the pool (parts never built have none)."""
        if not self._unbuilt:
            super()._release()

    def _alive(self) -> None:
        if self._deleted:
            self._gone()
        if self._store.closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")
        if self._store.readonly:
            raise ReadOnlyError(f"store {self._store.path} was opened readonly=True; cursors cannot change")

    def ensure_open(self) -> None:
        """StoreClosedError once the store is closed, CursorDeletedError once the cursor is deleted."""
        if self._deleted:
            self._gone()
        if self._store.closed:
            raise StoreClosedError(f"store {self._store.path} is closed; reopen it with AckStore.open()")

    # -- acks (the lock taken here) ------------------------------------------------------------

    def ack(self, positions: Iterable[Position] | Position, done: int = 0) -> None:
        """``Cursor.ack``: one Position on the hot path, anything else checked whole first.
        ``done``: what :data:`ACK_CURSOR` said first (3: the form past its cap, the parts take
        it; 4: bound the form again)."""
        if done >= 3:
            with self._lock:
                small = self.small
                if small is not None:
                    if done == 3:
                        self._parts()
                    else:
                        self._bounded(small)
            return
        store = self._store
        if store.closed or store.readonly or self._deleted:
            self._alive()
        if type(positions) is Position:  # the hot path: acquire/release is half the cost of `with` here
            lock = self._lock
            lock.acquire()
            try:
                small = self.small
                if small is not None and self._bounded(small):  # (the bound: for ACK_CURSOR's next ones too)
                    x = form_entry(small, positions[0], positions[1])
                    if x >= 0:
                        fits = small.ack_range(x, x)
                        self._store.small_list[small] = self
                        self._after_form_ack(small, fits)
                        return
                    if behind_line(small, self.topic.directory, self.topic.name, positions[0], positions[1]):
                        return  # (at or below M: ignored, as the parts ignore it)
                    self._parts()
                self._ack_one(positions[0], positions[1])  # (what ACK_CURSOR declined)
                listed = self._flush_list
                if self not in listed:
                    listed[self] = self._planner
            finally:
                lock.release()
            return
        with self._lock:
            if self._ack_in_form(positions):
                return
            small = self.small
            if small is not None:
                self._parts()
            else:  # a call the form serves: the cursor stays eligible for it
                self.built()
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
        """``Cursor.ack_entries``: in the form when every entry lies on its line (entries of
        any kind the parts take, read into one BitMap first), else the parts, given the same
        entries (an iterator is read once), which name what is wrong. A form the call takes
        over its cap or its cache budget ends: the parts hold the state (under the budget)."""
        if self.small is not None and type(ledger) is int:
            bitmap, entries = entries_bitmap(entries)
            if bitmap is not None:
                store = self._store
                with self._lock:
                    small = self.small
                    if (
                        small is not None
                        and not (self._deleted or store.closed or store.readonly)
                        and (small.limit_version == self.topic.version or self._bounded(small))
                    ):
                        fits = small.ack_entries(ledger, bitmap)
                        if fits is None and ledger < small.md_l:  # (at or below M: checked, then ignored)
                            if bitmap:
                                behind_line(small, self.topic.directory, self.topic.name, ledger, bitmap.max())
                            return
                        if fits is None:  # (checked first as the parts check it: a bad one raises here)
                            checks = self._form_checks(small)
                            check_entries(checks.limit, checks.check, ledger, bitmap)
                        else:
                            store.small_list[small] = self
                            if not fits or small.limit_version < 0:
                                self._after_form_ack(small, fits)
                            return
                entries = bitmap
        self.edit(AckState.ack_entries, ledger, entries, served=True)

    def edit(self, change: Callable[..., T], *args: Any, check: bool = True, served: bool = False) -> T:
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
            else:
                self.built()
            try:
                return change(self._state, *args)
            finally:
                self._changed()

    def _changed(self) -> None:
        """After any change: make sure the next flush visits this cursor."""
        small = self.small
        if small is not None:
            if small.dirty:
                self._store.small_list[small] = self
            return
        if self not in self._flush_list and self._pending:
            self._flush_list[self] = self._planner

    @property
    def _pending(self) -> bool:
        """True when a flush would have something to do for this cursor (what
        ``_prepare_flush`` checks first). O(1)."""
        small = self.small
        if small is not None:
            return bool(small.dirty)
        return not self._unbuilt and (self._pages.pending() or self._state.meta_dirty)

    @property
    def _listed(self) -> bool:
        """True while the next flush visits this cursor (it changed since its last flush)."""
        small = self.small
        return self in self._flush_list if small is None else small in self._store.small_list

    @property
    def persisted(self) -> bool:
        """True once a flush wrote this cursor's state."""
        small = self.small
        return small.next_seq > 0 if small is not None else not self._unbuilt and self._chain.marker_seq >= 0

    # -- reads ---------------------------------------------------------------------------------

    def is_acked(self, at: tuple[int, int]) -> bool:
        small = self.small
        if small is not None:
            return is_acked(small, at[0], at[1])
        return at <= self._state.md or self._state.is_acked(at)

    def _answer(self, read: Callable[[], T]) -> T:
        """``read()`` as it is, without the lock (one field read); a read-only store's
        cursor through :meth:`read`, after its catch-up (a deleted one raises there)."""
        if self._deleted or self._store.readonly:
            return self.read(read, served=True)
        return read()

    def mark_delete(self) -> Position:
        return self._answer(self._mark_delete)

    def _mark_delete(self) -> Position:
        small = self.small
        return self._state.md if small is None else trusted(small.md_l, small.md_e)

    def read_position(self) -> Position:
        return self._answer(self._read_position)

    def _read_position(self) -> Position:
        small = self.small
        return self._state.rp if small is None else trusted(*read_position(small))

    def range_count(self) -> int:
        return self._answer(self._range_count)

    def _range_count(self) -> int:
        small = self.small
        return self._state.range_count if small is None else small.range_count()  # type: ignore[no-any-return]

    def blocked(self) -> bool:
        """PIP-299's pause (``Cursor.is_blocked_on_ack_state_persistent``). O(1)."""
        return self._answer(self._blocked)

    def _blocked(self) -> bool:
        return self._config.pauses(self._range_count())

    def partial_batches(self) -> dict[Position, tuple[int, frozenset[int]]]:
        if self.small is not None:
            return form_batches(self.small)
        out: dict[Position, tuple[int, frozenset[int]]] = {}
        for ledger, la in self._ledgers():
            out.update(batch_items(ledger, la))
        return out

    def _ledgers(self) -> Iterator[tuple[int, LedgerAcks]]:
        """Every ledger's acks, ascending (a swapped-out one read, not loaded)."""
        pages = self._pages
        for ledger in sorted(pages.known()):
            la = pages.peek(ledger)
            if la is not None:
                yield ledger, la

    def snapshot(self) -> CursorSnapshot:
        if self.small is not None:
            return form_snapshot(self.small)
        return snapshot_of(self._state.md, self._state.properties, self._ledgers())

    # -- the small form (cursor/small.py) -----------------------------------------------------

    def _parts(self) -> None:
        """Before anything the small form does not serve: the parts hold the cursor's
        state, and the cursor stays out of the form at its next flush."""
        self._asked = self._store.flush_count
        if self.small is not None:
            self._grow()
        elif self._unbuilt:  # (deleted while in the form: the parts of nothing)
            self._build_parts()

    def _grow(self) -> None:
        """End the small form: the parts hold the cursor's state again. They load the newest
        flushed state as a reopen would (for its log: the chain, the slots, the records),
        take back what lives in memory only (:func:`~ackstore.cursor.figures.carry_back`),
        keep the next sequence past the form's (a flush of it may be in flight), then take
        the form's state exactly (:func:`~ackstore.cursor.fitting.take_form`) and its
        properties. O(the state)."""
        small = self.small
        assert small is not None
        self.built()  # (the form holds the state alone: the parts are made now, holding nothing)
        self.small = None
        changed = small.dirty
        small.end()
        store = self._store
        store.small_list.pop(small, None)
        if store.readonly:  # a reader's form is a flushed state and no more: the parts read the newest
            self._refresh()
            return
        state, chain = self._state, self._chain
        recover = store.cursor_side.recover_log
        self._load(store.storage.read(lambda txn: recover(txn, self._log, self._config, self.topic)))
        carry_back(carried_now(self._carried), small, state, self._pages, chain)
        self._carried = None
        flushed = not changed and chain.next_seq == small.next_seq  # (else a flush of it in flight, or changes)
        chain.next_seq = max(chain.next_seq, small.next_seq)  # never a sequence a flush in flight took
        fitting.take_form(state, small, flushed)
        props = unpack_properties(small.props)
        if props != state.properties:  # set or removed in the form since its last flush
            state.meta_dirty = True
        state.properties = props
        self._changed()

    def take_small_form(self) -> None:
        """A flush just wrote a full marker: take the small form when the cursor fits it (``small_of``), was
        asked nothing else since its last flush and has nothing pending but a PIP-299 cut's (store lock held)."""
        store = self._store
        if self._asked >= store.flush_count or self.small is not None or self._deleted or store.readonly:
            return
        if not self._pending or self._chain.truncated:  # (the form writes what that marker left out)
            small = small_of(self.cursor_id, self._state, self._pages, self._chain, self._config, self.topic.directory)
            if small is not None:
                self._enter(small)

    def _enter(self, small: Any) -> None:
        """The small form ``small`` holds the cursor's state from now on, alone: the parts go
        (their bytes back to the pool) as if the cursor had been opened into the form; what
        lives only in memory waits in ``_carried`` for :meth:`_grow`. O(the parts' ledgers)."""
        self._carried = carried_of(self._state, self._pages, self._chain)
        self._release()
        del self._state, self._pages, self._chain, self._planner, self._ack_one
        self._unbuilt = True
        self.small = small
        if small.dirty:  # (what a PIP-299 marker left out: the form's to write, the parts' listing gone)
            self._store.flush_list.pop(self, None)
            self._store.small_list[small] = self

    # -- invariants ----------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (tests call this after each step)."""
        with self._lock:  # each component asserts its own invariants (the _check convention)
            small = self.small
            if small is not None:  # the form holds the state alone: no parts beside it
                check_small(small, (small.md_l, -1), bool(self._config.history_seconds))
                assert self._unbuilt, "parts beside the small form"
            else:
                held = self._pages._check(self._state.md, self.topic.directory)
                self._state._check(held)
                pages = self._pages
                changed = pages.dirty | pages.vanished
                self._chain._check(
                    self._config.full_marker_every, pages.index, lane.DELTA_MAX_ACKS, self._state.md, changed
                )
            assert self._listed or not self._pending or self._store.readonly, "a pending cursor a flush would not visit"
