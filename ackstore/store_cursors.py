"""The store's side for cursors: opening (one or a topic's all at once) and recovering
cursors, persisting a cursor's config, deleting cursors, and a cursor's history (the
restore, its target and its kept states): the calls a topic and a cursor's core make on
their store (``TopicHost.cursor_side``, ``CursorHost.cursor_side``).

A :class:`CursorSide` is a part of an :class:`~ackstore.store.AckStore` (its
``cursor_side``), not a base of it: these are the engine's own calls, and they are not on
the public object. Its methods work on the store's storage, lock, topics and history
keeper, which the store sets up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, Protocol, cast

import lmdb

from .config import CursorConfig
from .cursor import Cursor
from .cursor.core import CursorCore
from .cursor.moves import TopicView
from .cursor.small import chain_opened, form_read, line_memo, small_born, small_opened
from .errors import CorruptRecordError, HistoryRangeError, InvalidArgumentError, UnknownCursorError
from .history import HistoryPoint, Point, drop_points, iso
from .life import require_open, require_writable
from .stats import NO_RECOVERY, FlushStats
from .storage.log import CursorLog, NewestMarker, RecoveredState, newest_logged, newest_marker, slot_values
from .storage.records import log_key
from .topic import Topic

if TYPE_CHECKING:
    from pathlib import Path

    from .cursor.core import CursorHost
    from .cursor.plan import Planner
    from .flush import GroupFlush
    from .history import HistoryKeeper
    from .lock import StoreLock
    from .storage.env import Environment

__all__ = ["CursorSide", "SideHost"]

log = logging.getLogger("ackstore")

_LOAD_BATCH = 256
"""cursors a bulk open recovers in one read transaction, under one hold of the store lock"""


class SideHost(Protocol):
    """What the cursor side reads and changes of its store (an :class:`~ackstore.AckStore`)."""

    path: Path
    closed: bool
    readonly: bool
    lock: StoreLock
    held: dict[str, Topic]
    verify: str
    lazy: bool
    history: HistoryKeeper
    flush_list: dict[CursorCore, Planner]
    small_list: dict[Any, CursorCore]
    last_flush: FlushStats | None
    _storage: Environment
    _cursor_defaults: CursorConfig
    _group: GroupFlush


class CursorSide:
    """Cursors opened, recovered, flushed, deleted and restored, on the storage of ``store``."""

    __slots__ = ("store",)

    def __init__(self, store: SideHost) -> None:
        self.store = store

    # -- cursors ------------------------------------------------------------------------------

    def flush_cursors(self, only: list[CursorCore] | None) -> FlushStats:
        """The group flush (:class:`~ackstore.flush.GroupFlush`), of every listed
        cursor or of ``only`` these (their cores); on a read-only store, nothing."""
        store = self.store
        require_open(store)
        if store.readonly:
            return FlushStats(0, 0, 0, 0, 0, 0, 0.0, 0)
        stats = store._group.run(only)
        if stats.cursors or stats.bytes_written:
            store.last_flush = stats
        return stats

    def update_config(self, cur: CursorCore, changes: dict[str, Any]) -> CursorConfig:
        """``Cursor.update_config``: the changes checked (a field CursorConfig does not have, or
        a value it refuses: a typed error naming it, nothing written), the new configuration
        persisted (durable when this returns) and adopted by ``cur``, and its history window
        set to it (turned off: the points it kept dropped)."""
        with self.store.lock:
            cur._alive()
            known = [f.name for f in fields(CursorConfig)]
            unknown = sorted(set(changes) - set(known))
            if unknown:
                raise InvalidArgumentError(f"unknown CursorConfig fields {unknown}: allowed {known}")
            new = replace(cur.config, **changes)  # each value checked by CursorConfig: a typed error naming it
            off = bool(cur.config.history_seconds) and not new.history_seconds
            self.persist_config(cur.topic.topic_id, cur.name, cur.cursor_id, new, off)
            cur.apply_config(new)
            self.store.history.set_window(cur.cursor_id, new.history_seconds)
            return new

    def persist_config(self, tid: int, name: str, cid: int, config: CursorConfig, drop_history: bool = False) -> None:
        """Write a cursor's configuration to the catalog (durable when this returns);
        ``drop_history`` (its history was turned off) drops the points the cursor kept, in the
        same transaction."""
        storage = self.store._storage

        def put(txn: lmdb.Transaction) -> None:
            storage.catalog.put_cursor(txn, tid, name, cid, config)
            if drop_history:
                drop_points(txn, storage.history_db, cid)

        storage.write(put)
        if drop_history:
            self.store.history.forget(cid)

    def cursor_names(self, tid: int) -> list[str]:
        """The names of topic ``tid``'s persisted cursors (``Topic.cursor_names`` asks)."""
        with self.store.lock:
            require_open(self.store)
            return [
                name
                for name, _ in self.store._storage.read(
                    lambda txn: self.store._storage.catalog.cursor_entries(txn, tid)
                )
            ]

    def load_cursor(self, topic: Topic, name: str, config: CursorConfig | None, initial_position: str) -> Cursor:
        """@private"""
        catalog, tid, storage = self.store._storage.catalog, topic.topic_id, self.store._storage

        def find(txn: lmdb.Transaction) -> tuple[tuple[int, CursorConfig] | None, Any, int]:
            """The catalog entry and, for a cursor that exists, its recovered state: one
            snapshot (the transaction's id: the state is the log as it saw it)."""
            found = catalog.cursor(txn, tid, name)
            if found is None:
                return None, None, -1
            self._same_directory(topic, txn)
            return found, self.open_log(txn, CursorLog(storage.log_db, found[0]), config or found[1], topic), txn.id()

        found, state, seen = storage.read(find)
        if found is None and not topic.entries_checked:
            # not found: make sure no damaged entry (a flipped bit in its key) hides it, or a
            # new, empty cursor would silently take its place. Once per topic: O(its cursors)
            storage.read(lambda txn: catalog.cursor_entries(txn, tid))
            topic.entries_checked = True
        if found is None:
            if self.store.readonly:
                raise UnknownCursorError(f"topic {topic.name!r} has no cursor {name!r}")
            cfg = config or self.store._cursor_defaults

            def create(txn: lmdb.Transaction) -> int:
                cid = catalog.next_id(txn, b"next_cursor")
                catalog.put_cursor(txn, tid, name, cid, cfg)
                return cid

            cid = storage.write(create)
            state = storage.read(lambda txn: CursorLog(storage.log_db, cid).recover(txn, None, self.store.verify))
            return self._recovered(topic, name, cid, cfg, state, initial_position)
        cid, stored = found
        assert state is not None
        return self._recovered(topic, name, cid, self._config_of(topic, name, cid, stored, config), state, seen=seen)

    def _same_directory(self, topic: Topic, txn: lmdb.Transaction) -> None:
        """A read-only store's topic takes the directory ``txn`` sees before a cursor's state
        is read in it: a state is read with the directory of its own flush, never with an
        older one the reader read before (which would clip it to a state no flush wrote).
        The writer's directory is always its own newest: nothing to do. O(ledgers) on a
        reader."""
        if self.store.readonly:
            topic.reread_directory(txn)

    def open_log(
        self,
        txn: lmdb.Transaction,
        log: CursorLog,
        config: CursorConfig,
        topic: TopicView,
        probe: Any = None,
        lines: Callable[[int], Any] | None = None,
    ) -> Any:
        """@private A cursor's state as an open (or a reader's catch-up) starts from it: the
        small form, read from the cursor's state slots, when its log is only those and its
        state is in the form (``ackstore.cursor.small``), or from its newest record under a
        log key when that is its newest state and in the form (a marker naming records of
        ledgers of M's line, ``chain_opened``; a state marker: a cursor that keeps history
        writes each state so, another a cut state a slot does not take);
        else :meth:`recover_log`'s.
        ``probe``: a cursor of ``txn`` on the log to look with (a bulk open's, made once);
        ``lines``: the topic's directory's answers for a form's line in ``txn``
        (``line_memo``: a bulk open's batch asks once for each mark-delete ledger)."""
        history = bool(config.history_seconds)
        if not history:
            small = form_read(txn, log.db, log.cursor_id, config, topic.directory, probe, lines, self.store.lazy)
            if small is not None:
                return small  # (read in one compiled call; else by its Python twin, below)
            values = slot_values(txn, log.db, log.cursor_id, probe)
            if values is not None:
                small = small_opened(log.cursor_id, values, config, topic.directory, None, lines)
                return small if small is not None else self.recover_log(txn, log, config, topic)
            newest = newest_marker(txn, log.db, log.cursor_id, probe)
            if newest is not None:
                small = chain_opened(txn, log.db, log.cursor_id, newest, config, topic.directory)
                return small if small is not None else self.recover_log(txn, log, config, topic, newest)
        # a state under its log key: a history cursor's every state, another's a cut state
        # a slot did not take (a state marker)
        found = newest_logged(txn, log.db, log.cursor_id, probe, not history)
        if found is not None:
            small = small_opened(log.cursor_id, found[0], config, topic.directory, found[1], lines)
            if small is not None:
                return small
        return self.recover_log(txn, log, config, topic)

    def recover_log(
        self,
        txn: lmdb.Transaction,
        log: CursorLog,
        config: CursorConfig,
        topic: TopicView,
        newest: NewestMarker | None = None,
    ) -> RecoveredState:
        """@private Recover a cursor's ``log`` as this store opens cursors: under ``config``'s budget,
        as ``verify`` and ``load`` say, against ``topic``'s directory as it is now (the
        store lock is held); ``newest``: its newest marker, resolved already."""
        budget = config.max_individual_ack_cache_bytes
        past_end = topic.directory.past_end
        return log.recover(txn, budget, self.store.verify, self.store.lazy, past_end, None, newest)

    def load_cursors(self, topic: Topic, config: CursorConfig | None) -> tuple[list[str], set[str]]:
        """A restart's bulk form of :meth:`load_cursor`: every persisted cursor of ``topic``
        not held yet, recovered (one catalog scan, then batches of cursors sharing a read
        transaction) and put in ``topic.held``; each as ``load_cursor`` would. The store
        lock is taken per batch, so flushes and acks of cursors opened go on between them
        (a cursor deleted meanwhile is skipped: each batch checks its catalog entries in its
        own transaction). Returns the names of every persisted cursor of ``topic`` it found
        and now holds, sorted, and those of the ones it opened itself (with ``config``, as
        ``load_cursor`` would: the others were held already)."""
        catalog, tid, storage = self.store._storage.catalog, topic.topic_id, self.store._storage
        with self.store.lock:
            require_open(self.store)
            entries, scanned = storage.read(lambda txn: (catalog.cursor_configs(txn, tid), txn.id()))

        def recover(batch: list[tuple[str, int, CursorConfig, bytes]]) -> tuple[list[Any], int]:
            def each(txn: lmdb.Transaction) -> tuple[list[Any], int]:
                self._same_directory(topic, txn)
                same = txn.id() == scanned  # (the scan's snapshot: nothing written since, by anyone)
                probe = txn.cursor(db=storage.log_db)  # one for the batch, not one made a cursor
                lines = line_memo(topic.directory)  # (the directory as the batch's transaction sees it)
                states = [
                    self.open_log(txn, CursorLog(storage.log_db, cid), config or stored, topic, probe, lines)
                    if same or catalog.cursor_raw(txn, tid, name) == raw
                    else None  # deleted (or made again) since the scan
                    for name, cid, stored, raw in batch
                ]
                return states, txn.id()

            return storage.read(each)

        opened: set[str] = set()
        held = topic.held
        differs: dict[int, bool] = {}  # (entries of one configuration share its object)
        for start in range(0, len(entries), _LOAD_BATCH):
            with self.store.lock:
                require_open(self.store)
                topic.check_live()
                batch = [e for e in entries[start : start + _LOAD_BATCH] if e[0] not in held]
                states, seen = recover(batch)
                for (name, cid, stored, _), state in zip(batch, states, strict=True):
                    if state is not None:
                        cfg = self._config_of(topic, name, cid, stored, config, differs)
                        held[name] = self._recovered(topic, name, cid, cfg, state, seen=seen)
                        opened.add(name)
        return [e[0] for e in entries if e[0] in held], opened

    def _config_of(
        self,
        topic: Topic,
        name: str,
        cid: int,
        stored: CursorConfig,
        config: CursorConfig | None,
        differs: dict[int, bool] | None = None,
    ) -> CursorConfig:
        """The configuration an opened cursor runs with: ``config`` when given (persisted
        first when it differs, unless read-only), else the one it was stored with.
        ``differs``: whether ``config`` differs from a stored one, by its id, so far (a bulk
        open's: its entries of one configuration share one object, compared once)."""
        if config is None:
            return stored
        if not self.store.readonly:
            differs = {} if differs is None else differs
            if id(stored) not in differs:
                differs[id(stored)] = config != stored
            if differs[id(stored)]:
                self.persist_config(topic.topic_id, name, cid, config)
        return config

    def _recovered(
        self,
        topic: Topic,
        name: str,
        cid: int,
        cfg: CursorConfig,
        state: Any,
        initial_position: str = "earliest",
        seen: int = -1,
    ) -> Cursor:
        """The cursor over a recovered ``state`` (or a small form read at open; a writer's
        cursor whose log holds nothing, new or never flushed, is made in the small form:
        ``small_born``); a fallback past damaged markers is logged. ``seen``: the read
        transaction that read ``state`` (a reader's cursor then looks at its log again only
        after a newer one; -1: at its first read)."""
        report = state.report if isinstance(state, RecoveredState) else NO_RECOVERY  # (a form's open skips none)
        if report.markers_skipped or report.skipped_reasons:
            log.warning(
                "ackstore: cursor %s/%s recovered from marker %d after skipping %d marker(s): %s",
                topic.name,
                name,
                report.marker_seq,
                report.markers_skipped,
                "; ".join(report.skipped_reasons),
            )
        host = cast("CursorHost", self.store)  # the store is the cursor's host
        if isinstance(state, RecoveredState) and not (state.resolved or state.next_seq or self.store.readonly):
            state = small_born(cid, cfg, topic.directory, initial_position) or state
        cursor = Cursor(host, topic, name, cid, cfg, state, initial_position)
        if seen >= 0:
            cursor._core.read_in(seen)
        return cursor

    def delete_cursors(self, topic: Topic, names: list[str]) -> int:
        """Delete cursors ``names`` of ``topic`` with their logs in one transaction; how many were there."""
        with self.store._group.lock, self.store.lock:  # no flush of these cursors is in flight
            require_writable(self.store)
            topic.check_live()
            gone = self.store._storage.drop_cursors(topic.topic_id, names)
            for name in names:
                cur = topic.held.pop(name, None)
                if cur is not None:
                    self.forget(cur._core)
            return gone

    def restore_cursor(self, cur: CursorCore, micros: int) -> HistoryPoint:
        """``Cursor.restore_as_of``: under the flush lock (no plan of it in flight)
        and the store lock, the newest kept point at or before ``micros`` recovered from
        the log and adopted by ``cur``."""
        with self.store._group.lock, self.store.lock:
            require_writable(self.store)
            target, recovered = self.history_state(cur, micros, cur.config.max_individual_ack_cache_bytes)
            cur.adopt_restored(recovered)
            return target.public()

    def history_target(self, cur: CursorCore, micros: int) -> Point:
        """The kept point a restore of ``cur`` as of ``micros`` goes to; a typed
        error (the store read-only or closed, the cursor deleted, no history, a time before
        the window) when there is none. Nothing is changed."""
        with self.store.lock:
            require_writable(self.store)
            name, window = self._history_of(cur)
            return self.store.history.target(cur.cursor_id, window, micros, name, time.time())

    def history_state(self, cur: CursorCore, micros: int, budget: int | None) -> tuple[Point, RecoveredState]:
        """The kept point as of ``micros`` and its state, recovered as a reopen right
        after that flush would (``budget``: as an open with that budget; None: every ledger
        loaded). One read transaction: on a reader, the point and the records it needs are
        of one moment of the writer's. Typed errors as :meth:`history_target`; nothing is
        changed."""
        with self.store.lock:
            name, window = self._history_of(cur)
            cid, past_end = cur.cursor_id, cur.topic.directory.past_end
            log_ = CursorLog(self.store._storage.log_db, cid)
            lazy = self.store.lazy and budget is not None

            def read(txn: lmdb.Transaction) -> tuple[Point, RecoveredState]:
                target = self.store.history.target(cid, window, micros, name, time.time(), txn)
                return target, log_.recover(txn, budget, self.store.verify, lazy, past_end, target.seq)

            target, recovered = self.store._storage.read(read)
            return target, self._resolved_at(name, target, recovered)

    def history_states(self, cur: CursorCore) -> Iterator[tuple[Point, RecoveredState]]:
        """Every kept point of ``cur`` (oldest first, as listed when this starts) with
        its state, every ledger loaded; each state read in a read transaction of its own, so
        a point the writer's window left behind meanwhile is skipped. O(points + states)."""
        with self.store.lock:
            name, window = self._history_of(cur)
            points = self.store.history.visible(cur.cursor_id, window, time.time())
        cid, past_end, db = cur.cursor_id, cur.topic.directory.past_end, self.store._storage.history_db
        log_ = CursorLog(self.store._storage.log_db, cid)
        for point in points:

            def read(txn: lmdb.Transaction, seq: int = point.seq) -> RecoveredState | None:
                if txn.get(log_key(cid, seq), db=db) is None:
                    return None  # the window moved past it since the list was read
                return log_.recover(txn, None, self.store.verify, False, past_end, seq)

            with self.store.lock:
                cur.ensure_open()
                recovered = self.store._storage.read(read)
            if recovered is not None:
                yield point, self._resolved_at(name, point, recovered)

    def _resolved_at(self, name: str, target: Point, recovered: RecoveredState) -> RecoveredState:
        """``recovered``, which must be the state of ``target``'s marker: CorruptRecordError if not."""
        resolved = recovered.resolved
        if resolved is None or resolved.seq != target.seq:
            raise CorruptRecordError(
                f"cursor {name}: the state flushed at {iso(target.micros)} (marker {target.seq}) cannot be read "
                f"({'; '.join(recovered.report.skipped_reasons) or 'no marker'}); nothing was changed"
            )
        return recovered

    def _history_of(self, cur: CursorCore) -> tuple[str, int]:
        """``cur``'s name and history window; HistoryRangeError when it keeps none."""
        cur.ensure_open()
        name = f"{cur.topic.name}/{cur.name}"
        window = cur.config.history_seconds
        if not window:
            raise HistoryRangeError(f"cursor {name} keeps no history: set CursorConfig.history_seconds")
        return name, window

    def forget(self, cur: CursorCore) -> None:
        """A deleted cursor: off the flush lists, its handle dead, its history forgotten."""
        store = self.store
        store.flush_list.pop(cur, None)
        if cur.small is not None:
            store.small_list.pop(cur.small, None)
        cur.mark_deleted()
        store.history.set_window(cur.cursor_id, 0)
        store.history.forget(cur.cursor_id)

    def all_cursors(self) -> list[CursorCore]:
        """The cores of every cursor this store object has opened."""
        return [cur._core for topic in self.store.held.values() for cur in topic.held.values()]
