"""A topic: its ledger directory and its cursors (``store.topic(name)``).

Topic and :class:`~ackstore.store.AckStore` are one unit, and these are the only places
where one calls into the other: a topic calls its store's cursor side
(``load_cursor``, ``load_cursors``, ``cursor_names``, ``delete_cursors``,
``flush_cursors``: the engine's own calls, on a part of the store rather than the public
object) and checks that the store is open (:mod:`ackstore.life`); the store (and its group flush) reads
each topic's ``held`` cursors, ``pending_bound``/``bound_written`` and ``entries_checked``.
Applications use neither side.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import lmdb

from .config import CursorConfig
from .cursor import Cursor
from .cursor.core import CursorCore
from .cursor.validate import quoted, utf8_size
from .directory import OPEN, LedgerDirectory
from .errors import InvalidArgumentError, InvalidTypeError, TopicDeletedError
from .fields import TopicFields
from .gcpause import gc_paused
from .life import require_open, require_writable
from .position import Position

if TYPE_CHECKING:
    from .lock import StoreLock
    from .stats import FlushStats
    from .storage.env import Environment

__all__ = ["Topic", "TopicHost", "TopicSide", "check_name", "MAX_NAME_BYTES"]

MAX_NAME_BYTES = 1024
"""the longest topic or cursor name, in UTF-8 bytes"""


class TopicHost(Protocol):
    """@private What a topic calls of its store (an :class:`~ackstore.AckStore`): the calls the module
    docstring names, its lock, storage and whether it is read-only."""

    closed: bool
    readonly: bool
    lock: StoreLock

    @property
    def path(self) -> object: ...
    @property
    def storage(self) -> Environment: ...
    @property
    def cursor_side(self) -> TopicSide: ...
    def topic(self, name: str) -> Topic: ...
    def delete_topic(self, name: str) -> bool: ...


class TopicSide(Protocol):
    """@private What a topic calls of its store's cursor side
    (:class:`~ackstore.store_cursors.CursorSide`)."""

    def cursor_names(self, tid: int) -> list[str]: ...
    def load_cursor(self, topic: Topic, name: str, config: CursorConfig | None, initial_position: str) -> Cursor: ...
    def load_cursors(self, topic: Topic, config: CursorConfig | None) -> tuple[list[str], set[str]]: ...
    def delete_cursors(self, topic: Topic, names: list[str]) -> int: ...
    def flush_cursors(self, only: list[CursorCore] | None) -> FlushStats: ...


def check_name(name: Any, what: str) -> str:
    """``name`` if it is a topic or cursor name (a str of 1..MAX_NAME_BYTES UTF-8 bytes, no
    NUL); else InvalidTypeError or InvalidArgumentError naming ``what`` and the value."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"{what} name must be a str, got {name!r} ({type(name).__name__})")
    size = utf8_size(name)
    if not 1 <= size <= MAX_NAME_BYTES or "\x00" in name:
        raise InvalidArgumentError(
            f"{what} name {quoted(name)} is not allowed: allowed 1..{MAX_NAME_BYTES} UTF-8 bytes "
            "(valid Unicode, no lone surrogates), no NUL"
        )
    return name


class Topic(TopicFields):
    """A topic: its ledger directory and its cursors. Get one with ``store.topic(name)``
    (see the module docstring for what it and its store call of each other)."""

    def __init__(self, store: TopicHost, name: str, topic_id: int, directory: LedgerDirectory) -> None:
        self.store = store
        """the store this topic belongs to"""
        self.name = name
        """the topic's name"""
        self.topic_id = topic_id
        """the id the catalog gave the topic (names longer than a key are found by it)"""
        self.directory = directory
        """the ledger directory (read it; change it with add_ledger, close_ledger, trim_ledgers)"""
        self.version = 0
        """bumped on every directory change (cursors cache ledger limits by it)"""
        self.held: dict[str, Cursor] = {}
        """@private the cursors this topic object holds"""
        self._confirm_pending = False
        """``advance`` moved the last confirmed entry past what is written"""
        self._deleted = False
        """True once ``store.delete_topic`` deleted it: every call raises TopicDeletedError"""
        self.entries_checked = False
        """True once every cursor entry of this topic was read and checked (the first time a
        name was not found: damage to an entry's key must not pass for a missing cursor)"""

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, ledgers={len(self.directory)})"

    def mark_deleted(self) -> None:
        """``store.delete_topic`` deleted it (its cursors were marked already): every later
        call raises TopicDeletedError."""
        self.held.clear()
        self._deleted = True

    def check_live(self) -> None:
        """Raise TopicDeletedError once the topic was deleted (lock held or not)."""
        if self._deleted:
            raise TopicDeletedError(
                f"topic {self.name!r} was deleted; store.topic(name) creates a new one under that name"
            )

    # -- ledger directory ---------------------------------------------------------------------

    def reread_directory(self, txn: lmdb.Transaction) -> None:
        """@private A read-only store's topic takes the directory the writer last persisted, as
        ``txn`` sees it (a reader's cursor moving to a newer flush reads its state against
        the directory of that moment). O(ledgers)."""
        catalog = self.store.storage.catalog
        found = catalog.topic(txn, self.name)
        if found is None or found[0] != self.topic_id:
            return  # deleted since: the cursor's own catalog look says so
        directory = catalog.load_directory(txn, self.topic_id, found[1], found[2])
        old = self.directory
        if (directory.items(), directory.tracked, directory.confirmed) != (old.items(), old.tracked, old.confirmed):
            self.directory = directory
            self.version += 1

    def ledgers(self) -> list[tuple[int, int | None]]:
        """``[(ledger id, entry count or None while open)]`` in order."""
        with self.store.lock:
            self.check_live()
            return [(i, None if c < 0 else c) for i, c in self.directory.items()]

    def add_ledger(self, ledger: int) -> None:
        """Append a new open ledger; ids must increase and the previous ledger must be sealed."""
        store = self.store
        with store.lock:
            require_writable(store)
            self.check_live()
            ledger = self.directory.check_add(ledger)

            tracked = self.directory.tracked

            def persist(txn: lmdb.Transaction) -> None:
                store.storage.catalog.put_ledger(txn, self.topic_id, ledger, OPEN, -1 if tracked else None)
                store.storage.catalog.put_topic(txn, self.name, self.topic_id, ledger, tracked)

            self._change(persist, lambda d: d.add(ledger))
            self._confirm_pending = False

    def add_ledgers(self, ledgers: Iterable[tuple[int, int | None]]) -> None:
        """Append many ledgers in ONE transaction, durable when this returns: ``(id,
        entries)`` a sealed ledger, ``(id, None)`` an open one (only the last may be). The
        same as :meth:`add_ledger` and :meth:`close_ledger` for each (the same checks, on
        every one first: a bad one adds none), for rebuilding a directory (``restore``).
        O(ledgers)."""
        store = self.store
        with store.lock:
            require_writable(store)
            self.check_live()
            try:
                items = [(ledger, entries) for ledger, entries in ledgers]
            except (TypeError, ValueError):
                raise InvalidTypeError("add_ledgers takes an iterable of (ledger id, entries or None)") from None
            trial = copy.deepcopy(self.directory)  # every rule applied as the one-ledger calls apply it
            checked: list[tuple[int, int | None]] = []
            for ledger, entries in items:
                ledger = trial.check_add(ledger)
                trial.add(ledger)
                if entries is not None:
                    ledger, entries = trial.check_close(ledger, entries)
                    trial.close(ledger, entries)
                checked.append((ledger, entries))
            if not checked:
                return
            tracked = self.directory.tracked
            catalog = store.storage.catalog

            def persist(txn: lmdb.Transaction) -> None:
                for ledger, entries in checked:
                    if entries is None:
                        catalog.put_ledger(txn, self.topic_id, ledger, OPEN, -1 if tracked else None)
                    else:
                        catalog.put_ledger(txn, self.topic_id, ledger, entries)
                catalog.put_topic(txn, self.name, self.topic_id, checked[-1][0], tracked)

            def edit(d: LedgerDirectory) -> None:
                for ledger, entries in checked:
                    d.add(ledger)
                    if entries is not None:
                        d.close(ledger, entries)

            self._change(persist, edit)
            self._confirm_pending = False

    def close_ledger(self, ledger: int, entries: int) -> None:
        """Seal an open ledger with its entry count (every cursor's acks must fit in it)."""
        store = self.store
        with store.lock:
            require_writable(store)
            self.check_live()
            ledger, entries = self.directory.check_close(ledger, entries)
            for cur in self.held.values():
                cur._core.check_close(ledger, entries)
            self._change(
                lambda txn: store.storage.catalog.put_ledger(txn, self.topic_id, ledger, entries),
                lambda d: d.close(ledger, entries),
            )
            self._confirm_pending = False

    def advance(self, ledger: int, last_entry: int) -> None:
        """Entries up to ``last_entry`` of the open ``ledger`` are written and confirmed
        (Pulsar's last confirmed entry): from now on acks, cumulative acks and resets in the
        open ledger may not go past it (a reset may go to ``last_entry + 1``, the next entry
        to be written), and a cursor created at ``"latest"`` starts just after it.

        It never goes back. The first call turns tracking on for this topic and is durable
        when it returns (new open ledgers then start with nothing confirmed); later calls
        are kept in memory and written by the next flush, in its transaction (one key per
        topic, rewritten in place), so a crash can only bring back an older bound together
        with the older acks. On a sealed newest ledger only its last entry is allowed (it
        turns tracking on). O(1) in memory; O(cursors) on the first call, which checks that
        no cursor acked past ``last_entry``.
        """
        store = self.store
        with store.lock:
            require_writable(store)
            self.check_live()
            d = self.directory
            ledger, last_entry = d.check_advance(ledger, last_entry)
            if d.confirmed == last_entry:
                return
            if d.confirmed is None and d.count(ledger) == OPEN:  # nothing bounded this ledger yet
                for cur in self.held.values():
                    cur._core.check_close(ledger, last_entry + 1)
            if not d.tracked:
                confirmed = last_entry if d.count(ledger) == OPEN else None

                def persist(txn: lmdb.Transaction) -> None:
                    store.storage.catalog.put_ledger(txn, self.topic_id, ledger, d.count(ledger), confirmed)
                    store.storage.catalog.put_topic(txn, self.name, self.topic_id, d.last_id, True)

                store.storage.write(persist)
            else:
                self._confirm_pending = True
            d.advance(last_entry)
            self.version += 1

    @property
    def last_confirmed(self) -> Position | None:
        """The newest ledger's last entry when it is sealed, its last confirmed entry when it
        is open and tracked (:meth:`advance`); None while the open ledger is not tracked."""
        with self.store.lock:
            self.check_live()
            d = self.directory
            if not d.ids:
                return None
            if d.counts[-1] >= 0:
                return Position(d.ids[-1], d.counts[-1] - 1)
            return None if d.confirmed is None else Position(d.ids[-1], d.confirmed)

    def pending_bound(self) -> tuple[int, int] | None:
        """``(open ledger, last confirmed entry)`` not yet written, or None (lock held)."""
        d = self.directory
        if not self._confirm_pending or d.confirmed is None:
            return None
        return d.ids[-1], d.confirmed

    def bound_written(self, written: tuple[int, int]) -> None:
        """A flush wrote ``written``; nothing more is pending unless it advanced since."""
        if self.pending_bound() == written:
            self._confirm_pending = False

    def trim_ledgers(self, below: int) -> list[int]:
        """Drop every ledger with id < ``below`` (the log deleted them); their acks vanish.

        Cursors whose mark-delete position was in a dropped ledger move to the first
        remaining one. The newest ledger always stays. Returns the ids dropped.
        """
        store = self.store
        with store.lock:
            require_writable(store)
            self.check_live()
            below = self.directory.check_trim(below)
            dropped = [i for i in self.directory.ids if i < below]
            if dropped:
                self._change(
                    lambda txn: store.storage.catalog.delete_ledgers(txn, self.topic_id, dropped),
                    lambda d: d.trim(below),
                    trim=True,
                )
            return dropped

    def _change(
        self,
        persist: Callable[[lmdb.Transaction], None],
        edit: Callable[[LedgerDirectory], object],
        trim: bool = False,
    ) -> None:
        """Persist a directory change (durable when this returns), then apply it in memory."""
        self.store.storage.write(persist)
        d = self.directory
        edit(d)
        self.version += 1
        for cur in self.held.values():
            cur._core.directory_changed(d, trimmed=trim)

    # -- cursors ------------------------------------------------------------------------------

    def cursor(self, name: str, config: CursorConfig | None = None, *, initial_position: str = "earliest") -> Cursor:
        """The cursor ``name``: created (and persisted) on first use, else recovered back to front.

        ``config`` replaces the persisted configuration when given; otherwise a new
        cursor takes the store's default and an existing one keeps its own.

        ``initial_position`` places a cursor that has no flushed state yet: ``"earliest"``
        (default: the topic's first entry, nothing acked) or ``"latest"`` (Pulsar's
        default: everything written so far is acked; see :meth:`last_confirmed`). A
        ``"latest"`` cursor's position is flushed before this returns, so a crash cannot
        move it back to the earliest. A cursor that has flushed ignores it.
        """
        name = check_name(name, "cursor")
        if config is not None and not isinstance(config, CursorConfig):
            raise InvalidTypeError(f"config must be a CursorConfig, got {type(config).__name__}")
        if initial_position not in ("earliest", "latest"):
            raise InvalidArgumentError(
                f"initial_position={initial_position!r} is not allowed: allowed 'earliest', 'latest'"
            )
        store = self.store
        with store.lock:
            require_open(store)
            self.check_live()
            cur = self.held.get(name)
            if cur is not None:
                if config is not None and config != cur.config:
                    if store.readonly:  # a reader may pick its own budget; nothing is persisted
                        cur._core.apply_config(config)
                    else:
                        cur.update_config(**config.to_obj())
                return cur
            cur = store.cursor_side.load_cursor(self, name, config, initial_position)
            self.held[name] = cur
            place = initial_position == "latest" and not cur.persisted and not store.readonly
        if place:  # outside the store lock: a flush takes the flush lock first
            store.cursor_side.flush_cursors([cur._core])
        return cur

    def open_cursors(self, config: CursorConfig | None = None) -> dict[str, Cursor]:
        """Every persisted cursor of this topic, opened (a restart's bulk form of
        :meth:`cursor`, by name, sorted): each recovered as ``cursor(name, config)`` would,
        with the cyclic garbage collector paused for the whole batch (the recovered state
        makes no cycles, and collections set off by its allocations would walk an ever
        larger heap: the per-cursor cost would grow with the count). O(cursors + their state)."""
        if config is not None and not isinstance(config, CursorConfig):
            raise InvalidTypeError(f"config must be a CursorConfig, got {type(config).__name__}")
        with gc_paused():
            names, opened = self.store.cursor_side.load_cursors(self, config)  # the ones not held yet, in batches
            # each was just opened with ``config``, or held already: as cursor(name, config) returns it
            held = self.held
            return {
                name: cur if config is None or name in opened else self.cursor(name, config)
                for name in names
                if (cur := held.get(name)) is not None
            }

    def cursors(self) -> list[str]:
        """Names of every cursor of this topic (persisted ones included), sorted."""
        self.check_live()
        return self.store.cursor_side.cursor_names(self.topic_id)

    def delete_cursor(self, name: str) -> bool:
        """Delete the cursor ``name`` (Pulsar's unsubscribe): its catalog entry and its whole
        record log go in ONE write transaction, durable when this returns (as ``sync``
        says). Returns False when there was no such cursor.

        A handle still held raises CursorDeletedError on every call (readers in other
        processes: at their next refresh); ``cursor(name)`` then opens a new cursor, at the
        initial position it is given, with nothing of the old one. The pages freed are
        reused by later writes. Waits for a flush in flight. O(records of the cursor)."""
        name = check_name(name, "cursor")
        return self.store.cursor_side.delete_cursors(self, [name]) == 1
