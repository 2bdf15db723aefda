"""The cursor core's side of what reads call: a read on one state (:meth:`ReadSide.read`,
run again when a read-only store's cursor moved to a newer flush meanwhile), a read-only
store's catch-up with the writer's newest flush, the figures, the history's points, and
the read path's checks of a reset or a redelivery.

:class:`ReadSide` is the base of :class:`~ackstore.cursor.core.CursorCore` (on
:class:`~ackstore.cursor.store_side.StoreSide`): its methods work on the core's parts and
fields, which the core sets up. Each takes the store's lock where it says so; the rest run
with it held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from ..dispatch.revision import CursorStateRevisionController
from ..errors import ReaderBehindError
from ..history import HistoryPoint
from ..position import Position, trusted
from ..stats import CursorStats, LogUsage
from ..storage.log import CursorLog, MissingRecordError, RecoveredState
from .figures import Carried, Parts, carried_now, cursor_figures, cursor_stats, form_stats
from .moves import batch_target, clamp_target, reset_target
from .small_span import line_entry
from .snapshot import acked_indexes
from .store_side import StoreSide
from .validate import check_entry, pair

if TYPE_CHECKING:
    import lmdb

    from ..config import CursorConfig
    from ..history import HistoryKeeper
    from ..ledger_acks import LedgerAcks
    from ..lock import StoreLock
    from ..storage.env import Environment
    from .chain import MarkerChain
    from .moves import TopicView
    from .small import OpenFigures

__all__ = ["OpensLogs", "ReadHost", "ReadSide"]

UNUSED = CursorStateRevisionController()
"""what a cursor's figures read of a revision controller it has not made yet (never changed:
no reset ran)"""
_MAKING = threading.Lock()
"""taken to make a cursor's revision controller at its first use"""

T = TypeVar("T")


class OpensLogs(Protocol):
    """What the reads call of the store's cursor side: a cursor's log recovered, or opened
    (into the small form where it can be), as the store opens cursors."""

    def recover_log(
        self, txn: lmdb.Transaction, log: CursorLog, config: CursorConfig, topic: TopicView
    ) -> RecoveredState: ...

    def open_log(self, txn: lmdb.Transaction, log: CursorLog, config: CursorConfig, topic: TopicView) -> Any: ...


class ReadHost(Protocol):
    """What the reads need of the store: its storage, whether it is read-only, its history
    keeper, and its cursor side's recovery of a cursor's log."""

    readonly: bool
    small_list: dict[Any, Any]

    @property
    def storage(self) -> Environment: ...

    @property
    def history(self) -> HistoryKeeper: ...

    @property
    def cursor_side(self) -> OpensLogs: ...


class ReadSide(StoreSide):
    """Reads on one state, a reader's catch-up, figures and the read path's checks."""

    __slots__ = ("_view",)  # and StoreSide's parts; CursorCore has the rest

    _store: ReadHost
    _lock: StoreLock
    _revision: CursorStateRevisionController | None
    _view: tuple[int, int]
    """read-only: ``(transaction, newest sequence)``: the newest sequence of the cursor's log
    when its state was read, and the last transaction that found it unchanged"""
    _chain: MarkerChain
    _unbuilt: bool
    _carried: Carried | OpenFigures | None
    topic: TopicView
    name: str
    cursor_id: int

    @property
    def revision_controller(self) -> CursorStateRevisionController:
        """PIP-269: one controller per cursor, shared by every component that reads it; made
        at its first use (a restart opens many cursors that no Dispatcher reads for a while:
        each would hold a controller and its lock for nothing). O(1)."""
        controller = self._revision
        if controller is None:
            with _MAKING:  # (two threads asking first get one controller)
                controller = self._revision
                if controller is None:
                    controller = self._revision = CursorStateRevisionController()
        return controller

    @property
    def _log(self) -> CursorLog:
        """The cursor's records in the store's log, as a reader of them takes it (made when
        asked: holding one per cursor cost every open a tracked object). O(1)."""
        return CursorLog(self._store.storage.log_db, self.cursor_id)

    def ensure_open(self) -> None:
        raise NotImplementedError  # the core's

    def _load(self, recovered: RecoveredState, initial_position: str = "earliest") -> None:
        raise NotImplementedError  # the core's

    def mark_deleted(self) -> None:
        raise NotImplementedError  # the core's

    def _gone(self) -> NoReturn:
        raise NotImplementedError  # the core's

    def built(self) -> Any:
        """The parts, built if they were not (:meth:`CursorCore.built`)."""
        raise NotImplementedError  # the core's

    # -- a read-only store's cursor --------------------------------------------------------------

    def read_in(self, txn_id: int) -> None:
        """@private The cursor's state is its log as read transaction ``txn_id`` saw it (the
        open's): a reader's next read looks at the log only once the store has a newer
        transaction (:meth:`_look`), as after any catch-up. O(1)."""
        if self._store.readonly:
            self._view = (txn_id, self._view[1])

    def _refresh(self, ledger: int | None = None) -> LedgerAcks | None:
        """Move the whole cursor's parts to the writer's newest flush (the writer trimmed a
        record this state needs, or the cursor leaves the small form); CursorDeletedError
        when the writer deleted the cursor. With ``ledger``: that ledger's record too, read
        in the same transaction (a writer flushing meanwhile cannot trim it away between
        the two), when that state left it on disk; else None."""
        recovered, record = self._store.storage.read(partial(self._newest_with, ledger))
        self._load_newest(recovered)
        return record

    def _newest_with(self, ledger: int | None, txn: lmdb.Transaction) -> tuple[Any, LedgerAcks | None]:
        """:meth:`_newest` (the parts'), and ``ledger``'s record as ``txn`` sees it when that
        state left it on disk (else None)."""
        recovered = self._newest(False, txn)
        if ledger is None or recovered is None or ledger not in recovered.swapped or recovered.resolved is None:
            return recovered, None
        return recovered, self._log.read_ledger(txn, ledger, recovered.resolved.index[ledger])

    def _newest(self, form: bool, txn: lmdb.Transaction) -> Any:
        """The newest flushed state as ``txn`` sees it, recovered against the topic's
        directory as ``txn`` sees it (which the topic takes): with ``form``, the small form
        when that state is one (as a writer's open reads it), else the parts'
        ``RecoveredState``; None when the writer deleted the cursor (its catalog entry is
        gone or names another cursor id)."""
        store = self._store
        if store.storage.catalog.cursor_id(txn, self.topic.topic_id, self.name) != self.cursor_id:
            return None
        self.topic.reread_directory(txn)
        self._view = (txn.id(), self._log.newest(txn))
        side = store.cursor_side
        return (side.open_log if form else side.recover_log)(txn, self._log, self._config, self.topic)

    def _load_newest(self, recovered: Any) -> None:
        """Adopt what :meth:`_newest` read (outside its transaction: loading the state may
        read records in transactions of its own): a small form replaces the one the cursor
        holds; a ``RecoveredState`` is loaded into the parts (a form the cursor held ends)."""
        if recovered is None:
            self.mark_deleted()
            self._gone()
        small = self.small
        if small is not None:
            small.end()
            self._store.small_list.pop(small, None)  # (a form M moved in was listed: nothing flushes a reader's)
            if not isinstance(recovered, RecoveredState):  # (an OpenedForm)
                self.small = recovered.small  # the parts stay unloaded
                carried = self._carried  # (parts' counts since: kept, with this open's report)
                self._carried = (
                    carried._replace(recovery=recovered.report) if isinstance(carried, Carried) else recovered.figures
                )
                return
            self.small = None
            self.built()
        self._load(recovered)

    def _catch_up(self) -> None:
        """Before every read: when the writer wrote this cursor's log since its state was
        read, the whole cursor moves to the newest flush first, so a read is never older
        than the writer's newest flush when it began, and reads never go back. A cursor in
        the small form moves to the newest state's form when it is one (else its parts
        take it); one in its parts stays there. O(1) (one read transaction) when nothing
        was written; a move reads the cursor as a reopen would."""
        moved = self._store.storage.read(self._look)
        if moved is not False:
            self._load_newest(moved)

    def _look(self, txn: lmdb.Transaction) -> Any:
        """False when the cursor's log is as its state was read; else :meth:`_newest` (into
        the small form when the cursor holds one)."""
        seen, newest = self._view
        now = txn.id()
        if now == seen:
            return False
        if self._log.newest(txn) == newest:
            self._view = (now, newest)
            return False
        return self._newest(self.small is not None, txn)

    # -- reads ---------------------------------------------------------------------------------

    def _fresh(self) -> Any:
        """The small form a read answers from, or None (lock held): a read-only store's
        cursor first catches up with the writer's newest flush (:meth:`_catch_up`)."""
        if self._store.readonly:
            self.ensure_open()
            self._catch_up()
        return self.small

    def read(self, read: Callable[..., T], *args: Any, served: bool = False, caught_up: bool = False) -> T:
        """``read(*args)`` under the lock, on one state. A read-only cursor moves to the
        writer's newest flush whole when a record it needs was trimmed (``Pages.refresh``);
        a read that saw it move ran partly on the old state, so it runs again on the new
        one, holding one read transaction for all of it (``Environment.pinned``): nothing
        it reads can be trimmed under it, so it answers then, however often the writer
        trims. No answer mixes two flushes. The writer's cursor never moves: one run. A read
        ``served`` answers from the form, or from the parts as they are in the form (what it
        reads does not change there: partial batches, delivery counts), which it builds if
        they were never built. ``caught_up``: the caller caught up (:meth:`_fresh`) in the
        same hold of the lock, so this read does not look again."""
        with self._lock:
            self.ensure_open()
            if not served:
                self._parts()
            if self._store.readonly and not caught_up:
                self._catch_up()
            if self.small is not None:  # the form answers from memory: nothing moves it now, one run
                return read(*args)
            seen = self._pages.generation
            result = read(*args)
            if self._pages.generation == seen:
                return result
            with self._store.storage.pinned():  # (a first run holds no snapshot: a long read pins no pages)
                self._catch_up()
                if self.small is not None:
                    return read(*args)
                seen = self._pages.generation
                result = read(*args)
                if self._pages.generation == seen:
                    return result
        raise ReaderBehindError(  # (a record missing from the snapshot its own state is read in)
            f"cursor {self.name!r} of topic {self.topic.name!r}: what this reader needed moved while it "
            "read one snapshot of the store; check the store (ackstore check)"
        )

    def batch_acked_indexes(self, at: tuple[int, int]) -> frozenset[int] | None:
        """``Cursor.batch_acked_indexes``: from the small form's partial batches, or the parts'."""
        return self.read(self._batch_acked, at, served=True)

    def _batch_acked(self, at: tuple[int, int]) -> frozenset[int] | None:
        small = self.small
        if small is None:
            return self.built().batch_acked_indexes(at)  # type: ignore[no-any-return]
        x = line_entry(small, *at)
        batch = small.batch(x) if x >= 0 else None
        return None if batch is None else acked_indexes(*batch)[1]

    def history(self) -> list[HistoryPoint]:
        """The points of ``Cursor.history``, newest first."""
        with self._lock:
            self.ensure_open()
            window = self._config.history_seconds
            if not window:
                return []
            return [p.public() for p in reversed(self._store.history.visible(self.cursor_id, window, time.time()))]

    # -- figures -------------------------------------------------------------------------------

    def stats(self) -> CursorStats:
        """``Cursor.stats``: of the small form from the form (it stays), else of the parts."""
        with self._lock:
            self.ensure_open()
            small = self._fresh()
            if small is not None:
                self._carried = carried = carried_now(self._carried)
                assert carried is not None  # (a form always has: its open's, or its parts')
                return form_stats(self.topic.name, self.name, small, carried, self._figure_parts())
            self.built()
            return cursor_stats(self.topic.name, self.name, self._figure_parts())

    def figures(self) -> tuple[int, ...]:
        with self._lock:
            self._carried = carried = carried_now(self._carried)
            return cursor_figures(self._figure_parts(), self.small, carried)

    def _figure_parts(self) -> Parts:
        controller = self._revision or UNUSED  # (a scrape does not make one)
        if self._unbuilt:  # (a scrape does not build them; in the small form they do not exist)
            return Parts(None, None, None, self._config, controller)
        return Parts(self._state, self._pages, self._chain, self._config, controller)

    def log_usage(self) -> LogUsage:
        """``Cursor.log_usage``: as of the newest marker. A reader whose marker the writer
        trimmed meanwhile reads the newest state and its usage in one transaction (so no
        later flush can trim it again between the two) and adopts that state. A cursor in
        the small form stays in it (a reader's catches up in the same transaction)."""
        with self._lock:
            self.ensure_open()
            if self.small is not None:  # the form stays: see _form_usage
                if not self._store.readonly:
                    return self._store.storage.read(self._form_usage)
                moved, now = self._store.storage.read(self._caught_up_usage)
                if moved is not False:
                    self._load_newest(moved)  # (raises CursorDeletedError when there is none)
                return now
            self._parts()
            seq = self._chain.marker_seq
        try:
            return self._store.storage.read(partial(self._usage, seq))
        except MissingRecordError:
            if not self._store.readonly:
                raise
        with self._lock:
            recovered, usage = self._store.storage.read(self._newest_usage)
            self._load_newest(recovered)  # (raises CursorDeletedError when there is none)
            assert usage is not None
            return usage

    def _form_usage(self, txn: lmdb.Transaction) -> LogUsage:
        """:meth:`log_usage` of a cursor in the small form, in ``txn``: as of the
        newest record of its log, which is its newest state there (the form writes nothing
        else, and took its state when that was its newest record), the one its newest flush
        committed; a flush in flight is not in ``txn``, as the parts' newest marker is the
        one they adopted."""
        return self._usage(self._log.newest(txn), txn)

    def _caught_up_usage(self, txn: lmdb.Transaction) -> tuple[Any, LogUsage]:
        """A reader's cursor in the small form: :meth:`_look` (what it moves to, or False) and
        the usage as of the newest record, which is the state it then holds, both in ``txn``."""
        return self._look(txn), self._form_usage(txn)

    def _newest_usage(self, txn: lmdb.Transaction) -> tuple[Any, LogUsage | None]:
        """:meth:`_newest` (parts) and the usage as of its marker, both in ``txn``."""
        recovered = self._newest(False, txn)
        if recovered is None:
            return None, None
        resolved = recovered.resolved
        return recovered, self._usage(resolved.seq if resolved is not None else -1, txn)

    def _usage(self, seq: int, txn: lmdb.Transaction) -> LogUsage:
        """:meth:`log_usage` in ``txn``: the points the store holds for this cursor say what
        its history keeps (a reader's cursor may have been opened with another config)."""
        keeper = self._store.history
        kept = keeper.held(self.cursor_id, txn)
        return self._log.usage(txn, seq, kept.keeps() if kept is not None else None, keeper.db)

    # -- the read path's checks ----------------------------------------------------------------

    def check_reset_target(self, position: Any, batch: tuple[int, int] | None = None) -> tuple[int, int]:
        """A typed error unless ``position`` (and ``batch``) is a place a reset may move to."""
        with self._lock:  # (the topic's directory alone says: no parts needed)
            if batch is not None:
                batch_target(self.topic, None, *batch)  # the batch's own shape first
            target = reset_target(self.topic, position)
            if batch is not None:
                batch_target(self.topic, pair(position), *batch)
            return target

    def check_position(self, position: Any) -> None:
        """A typed error unless ``position`` is an entry the topic's ledgers allow (a ledger
        the topic has, within its sealed end or its open bound): the rule acks and delivery
        counts follow (the read path checks a redelivery with it)."""
        at = pair(position)
        with self._lock:
            self.ensure_open()
            check_entry(self.topic.directory, self.topic.name, *at)  # the topic's ledgers only: no parts needed

    def clamp_reset_target(self, position: Any) -> Position:
        """Where a reset to ``position`` goes by Pulsar's rule."""
        with self._lock:
            return trusted(*clamp_target(self.topic, position))
