"""The store: one LMDB environment per directory, its topics, cursors and group flush.

Durability (what a crash can lose), per option of :meth:`AckStore.open`:

=====================  ==========================================================
``sync=True``          (default) a flush that returned survives a process crash
                       and a power cut or OS crash: LMDB fsyncs data and meta page
                       before ``flush()`` returns.
``sync=True,           a returned flush survives a process crash; a power cut may
metasync=False``       undo the last flush (the meta page is not fsynced) but the
                       store stays consistent: recovery finds the previous flush.
``sync=False``         a returned flush survives a process crash (kill -9): it is
                       in the OS page cache. A power cut or OS crash may lose the
                       last flushes and, on file systems that reorder writes, may
                       damage the file; ``ackstore check`` then says so.
=====================  ==========================================================

In every mode: acks not yet flushed live only in memory and a crash loses them
(their messages are redelivered); ``close()`` flushes, so a graceful shutdown
loses nothing (a close whose flush fails raises and leaves the store open, its state
held, so the caller can free space and close again). Ledger-directory changes (``add_ledger``, ``close_ledger``,
``trim_ledgers``) and cursor creation are written when the call returns, under
the same ``sync`` setting. LMDB's ``writemap`` is never used, so a crash of this
process cannot scribble on the file.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from .compact import compact_cursors, rewritten_of
from .config import CursorConfig
from .cursor import Cursor
from .cursor.core import CursorCore
from .cursor.plan import Planner
from .directory import LedgerDirectory
from .errors import (
    InvalidArgumentError,
    InvalidTypeError,
    StoreClosedError,
    UnknownTopicError,
)
from .fields import HostFields
from .flush import GroupFlush
from .history import HistoryKeeper
from .ledger_cache import CachePool
from .life import require_open, require_writable
from .lock import StoreLock, new_lock
from .readers import ReaderWatch, oldest_reader
from .stats import FLUSH_SECONDS_BUCKETS, CompactStats, FlushStats, StoreStats
from .storage.env import LOCK_FILE, Environment
from .store_cursors import CursorSide
from .topic import Topic, check_name

__all__ = ["AckStore", "Topic", "DEFAULT_MAP_SIZE", "LOCK_FILE"]

log = logging.getLogger("ackstore")


DEFAULT_MAP_SIZE = 64 << 20
"""the memory map a new store starts with, in bytes (it grows as the store does)"""
MAX_MAP_SIZE = 1 << 50
"""the largest map a store may ask for (1 PiB; LMDB needs address space for it)"""
MAX_FLUSH_INTERVAL = 86_400.0
"""the longest background flush interval, in seconds (one day)"""

_LOAD_BATCH = 256
"""cursors a bulk open recovers in one read transaction, under one hold of the store lock"""

T = TypeVar("T")


def _check_open_options(
    path: Any,
    sync: Any,
    metasync: Any,
    readonly: Any,
    create: Any,
    map_size: Any,
    flush_interval: Any,
    verify: Any,
    cache_bytes: Any,
    cursor_defaults: Any,
    load: Any,
    reader_warn_flushes: Any,
) -> None:
    """Every option of :meth:`AckStore.open`, checked before anything is opened: a typed
    error naming the value and what is allowed."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InvalidTypeError(f"path must be a non-empty str or os.PathLike, got {path!r}")
    for flag, value in (("sync", sync), ("metasync", metasync), ("readonly", readonly), ("create", create)):
        if type(value) is not bool:
            raise InvalidTypeError(f"{flag} must be a bool, got {value!r}")
    if type(map_size) is not int or not 1 << 16 <= map_size <= MAX_MAP_SIZE:
        raise InvalidArgumentError(
            f"map_size={map_size!r} is not allowed: allowed an int of 65536..{MAX_MAP_SIZE} bytes"
        )
    if flush_interval is not None and (
        not isinstance(flush_interval, (int, float))
        or isinstance(flush_interval, bool)
        or not 0 < flush_interval <= MAX_FLUSH_INTERVAL  # also refuses nan
    ):
        raise InvalidArgumentError(
            f"flush_interval={flush_interval!r}: allowed None or seconds in (0, {MAX_FLUSH_INTERVAL}]"
        )
    if verify not in ("keys", "all", "loaded"):
        raise InvalidArgumentError(f"verify={verify!r} is not allowed: allowed 'keys', 'all', 'loaded'")
    if load not in ("lazy", "budget"):
        raise InvalidArgumentError(f"load={load!r} is not allowed: allowed 'lazy', 'budget'")
    if cache_bytes is not None and (type(cache_bytes) is not int or not 0 <= cache_bytes <= sys.maxsize):
        raise InvalidArgumentError(
            f"cache_bytes={cache_bytes!r} is not allowed: allowed None or an int of 0..{sys.maxsize}"
        )
    if type(reader_warn_flushes) is not int or not 1 <= reader_warn_flushes <= 1 << 62:
        raise InvalidArgumentError(
            f"reader_warn_flushes={reader_warn_flushes!r} is not allowed: allowed an int of 1..{1 << 62}"
        )
    if cursor_defaults is not None and not isinstance(cursor_defaults, CursorConfig):
        raise InvalidTypeError(f"cursor_defaults must be a CursorConfig, got {type(cursor_defaults).__name__}")


class AckStore(HostFields):
    """An embedded, persistent store of cursor ack state. Open it with :meth:`open`."""

    path: Path
    """the store's directory (or snapshot file)"""
    readonly: bool
    """opened read-only (``AckStore.open(readonly=True)``)"""
    _sync: bool
    _cursor_defaults: CursorConfig
    lock: StoreLock
    """@private the store lock: cursors of this store share it (lock order: a revision
    controller, then the flush lock, then this one, then the environment's)"""
    held: dict[str, Topic]
    """@private the topics this store object has loaded (the unit's: topics, flush and close walk it)"""
    _topics_checked: bool
    """every topic entry was read and checked (once, when a name was first not found)"""
    closed: bool
    """True once ``close()`` ran (a plain attribute: the ack hot path reads it)"""
    cache_pool: CachePool
    """@private the store-wide cache budget every cursor's pages are registered in"""
    verify: str
    """@private what opening a cursor checks (see ``open``)"""
    load: str
    """@private when a cursor's ledgers are decoded: "lazy" or "budget" (see ``open``)"""
    lazy: bool
    """@private ``load == "lazy"``"""
    flush_list: dict[CursorCore, Planner]
    """@private the cursors a flush visits: every one with a change since its last flush (a
    cursor lists itself on change; idle cursors cost a flush nothing). The store owns it."""
    small_list: dict[Any, CursorCore]
    """@private the same for the cursors in the small form (``ackstore.cursor.small``): each
    changed form, with its cursor"""
    flush_count: int
    """@private flushes written since open (a cursor asked something the small form does not
    serve since the last one stays out of it at the next)"""
    _flusher: threading.Thread | None
    _flush_interval: float | None
    _stop: threading.Event
    _storage: Environment
    last_flush: FlushStats | None
    """the figures of the newest flush that wrote something (None: none yet)"""
    _group: GroupFlush
    """the group flush: its lock (the flush lock), its steps, the totals since open"""
    last_flush_error: BaseException | None
    """what the background flusher's last failed flush raised (None: none failed)"""
    readers: ReaderWatch
    """@private the writer's watch on the readers of its file (see :mod:`ackstore.readers`)"""
    history: HistoryKeeper
    """@private which cursors keep history, their points and the flush clock (:mod:`ackstore.history`)"""
    cursor_side: CursorSide
    """@private the engine's calls on this store for cursors (:mod:`ackstore.store_cursors`)"""

    def __init__(self) -> None:  # use AckStore.open()
        self.closed = True

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        sync: bool = True,
        metasync: bool = True,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        flush_interval: float | None = None,
        cursor_defaults: CursorConfig | None = None,
        cache_bytes: int | None = None,
        verify: str = "keys",
        create: bool = True,
        load: str = "lazy",
        reader_warn_flushes: int = 1000,
    ) -> AckStore:
        """Create or open the store in directory ``path``.

        - ``sync`` / ``metasync``: durability, see the module docstring for what each can lose.
        - ``readonly``: open a store another process may be writing; sees flushed states only.
        - ``map_size``: initial LMDB map size in bytes; it grows by itself when full.
        - ``flush_interval``: seconds between background flushes (None: only explicit flushes).
        - ``cursor_defaults``: the configuration new cursors get when none is given.
        - ``cache_bytes``: an optional budget for the ack state of all cursors together, on top
          of each cursor's own ``max_individual_ack_cache_bytes``; the largest caches give way first.
        - ``verify``: how much of the file an open checks. ``"keys"`` (default) first walks
          the file's B-trees with its own reader (:mod:`ackstore.storage.lmdb_file`: every page
          reached lies inside the file and says what it is, keys in order within their
          parents' bounds, counts as the meta records; O(pages), a fraction of an open's
          cost) so that damage LMDB would abort the process on, or that would hide records
          from lookups, is a CorruptStoreError instead; opening a cursor then checks that
          each record it leaves on disk (swapped out) exists. ``"all"`` also checksums
          those records (reads the whole state). ``"loaded"`` trusts the file: no walk, no
          check of swapped-out records (fastest; a damaged page can then stop the process
          inside LMDB, and a damaged record raises CorruptRecordError when its ledger is
          first needed). Loaded records are always checksummed, and recovery falls back past
          any marker that fails, saying so in the cursor's ``stats().recovery`` and the log.
          Every open checks that the file holds its meta pages and its trees' roots.
        - ``create``: make a new store when ``path`` holds none (default); with False a path
          without a store raises NotAStoreError (maintenance tools use it).
        - ``load``: when a cursor's ledgers are decoded. ``"lazy"`` (default): at first use,
          as a swapped-out ledger is; opening it reads and checks, without decoding, the
          records an eager open would decode (newest first, up to the cursor's
          ``max_individual_ack_cache_bytes`` in record bytes: envelope, checksum, fields,
          the range count the marker expects), so a damaged one makes recovery fall back
          to an older marker at open; the records beyond are checked as ``verify`` says.
          Decoded at open all the same: the mark-delete ledger when its record holds an
          entry at or below M + 1, and a ledger holding state past its end (sealed
          shorter since), states no flush leaves that the cursor drops, and a small
          cursor's ledgers, held in the one state marker the open reads. ``"budget"`` (as
          PIP-81 recovers): its newest ledgers, until the budget is spent. The cursor is
          whole either way: positions, range count and delivery counts are right when
          ``cursor()`` returns. Lazy opens are faster (a restart of many cursors or
          ledgers decodes only what is touched) and hold less memory; the first use of
          each ledger pays its decode, and a record beyond the budget that is damaged
          surfaces then, as CorruptRecordError (``verify="all"`` checks every record at
          open).
        - ``reader_warn_flushes``: one WARNING when a reader (another process's read
          transaction) has held back more than this many flushes: LMDB cannot reuse the
          pages it sees, so the file grows until it ends. ``stats().oldest_reader`` shows it.
        """
        _check_open_options(
            path,
            sync,
            metasync,
            readonly,
            create,
            map_size,
            flush_interval,
            verify,
            cache_bytes,
            cursor_defaults,
            load,
            reader_warn_flushes,
        )
        self = cls()
        self.path = Path(path)
        self.readonly = readonly
        self._sync = sync
        self._cursor_defaults = cursor_defaults or CursorConfig()
        self.lock = new_lock()
        self.held = {}
        self._topics_checked = False
        self.flush_list = {}
        self.small_list = {}
        self.flush_count = 0
        self.cache_pool = CachePool(cache_bytes)
        self.verify = verify
        self.load = load
        self.lazy = load == "lazy"
        self._flusher = None
        self._stop = threading.Event()
        self.last_flush = None
        self.last_flush_error = None
        self._group = GroupFlush(self)
        self.cursor_side = CursorSide(self)
        self.readers = ReaderWatch(reader_warn_flushes, self.path)
        self._storage = Environment.open(
            self.path,
            readonly=readonly,
            map_size=map_size,
            sync=sync,
            metasync=metasync,
            create=create,
            walk_first=verify != "loaded",
        )
        self.history = HistoryKeeper(self._storage, writer=not readonly)
        self.closed = False
        self._flush_interval = flush_interval
        if flush_interval is not None and not readonly:
            self._start_flusher(flush_interval)
        return self

    def _start_flusher(self, interval: float | None) -> None:
        assert interval is not None
        self._stop = threading.Event()
        self._flusher = threading.Thread(
            target=self._flush_loop, args=(float(interval), self._stop), name="ackstore-flusher", daemon=True
        )
        self._flusher.start()

    @property
    def map_size(self) -> int:
        """The LMDB map's current size in bytes (it grows by itself when full)."""
        require_open(self)
        return self._storage.map_size

    @property
    def format_version(self) -> int:
        """The format version recorded in the store (a writer raises an older one to this
        ackstore's ``FORMAT_VERSION`` when it opens the store)."""
        require_open(self)
        return self._storage.catalog.version

    @property
    def map_grows(self) -> int:
        """How many times the map grew since this store was opened."""
        return self._storage.map_grows

    @property
    def storage(self) -> Environment:
        """The storage layer under this store, for maintenance code (``check``, ``compact``)
        that works on records rather than cursors. Not for cursor processes."""
        require_open(self)
        return self._storage

    # -- topics -------------------------------------------------------------------------------

    def topic(self, name: str) -> Topic:
        """The topic ``name``: created on first use (and persisted), else loaded."""
        name = check_name(name, "topic")
        with self.lock:
            require_open(self)
            topic = self.held.get(name)
            if topic is not None:
                return topic
            catalog = self._storage.catalog
            found = self._storage.read(lambda txn: catalog.topic(txn, name))
            if found is None and not self._topics_checked:  # as for cursors: damage must not pass for absence
                self._storage.read(catalog.topic_names)
                self._topics_checked = True
            if found is None:
                if self.readonly:
                    raise UnknownTopicError(f"store {self.path} has no topic {name!r}")
                directory = LedgerDirectory()

                def create(txn: lmdb.Transaction) -> int:
                    tid = catalog.next_id(txn, b"next_topic")
                    catalog.put_topic(txn, name, tid, -1)
                    return tid

                tid = self._storage.write(create)
            else:
                tid, last, tracked = found
                directory = self._storage.read(lambda txn: catalog.load_directory(txn, tid, last, tracked))
            topic = self.held[name] = Topic(self, name, tid, directory)
            return topic

    def topics(self) -> list[str]:
        """Names of every topic in the store, sorted."""
        with self.lock:
            require_open(self)
            return self._storage.read(self._storage.catalog.topic_names)

    def delete_topic(self, name: str) -> bool:
        """Delete the topic ``name`` as Pulsar does when a topic is deleted: every cursor of
        it with its record log, its ledger directory and its catalog entry, in ONE write
        transaction, durable when this returns. Returns False when there was no such topic.

        Handles still held raise TopicDeletedError / CursorDeletedError on every call;
        ``topic(name)`` then creates a new, empty topic. O(cursors' records + ledgers)."""
        name = check_name(name, "topic")
        with self._group.lock, self.lock:
            require_writable(self)
            existed = self._storage.drop_topic(name)
            topic = self.held.pop(name, None)
            if topic is not None:
                for cur in topic.held.values():
                    self.cursor_side.forget(cur._core)
                topic.mark_deleted()
            return existed

    def open_cursors(self) -> list[Cursor]:
        """Every cursor this store object has opened (the ones in memory), by topic and name."""
        with self.lock:
            return [c for t in sorted(self.held) for _, c in sorted(self.held[t].held.items())]

    # -- the store-wide cache budget -----------------------------------------------------------

    @property
    def cache_bytes(self) -> int:
        """Bytes of ack state held in memory by every open cursor (an upper bound)."""
        return self.cache_pool.total

    @property
    def cache_budget(self) -> int | None:
        """The store-wide budget given to :meth:`open` (None: only per-cursor budgets)."""
        return None if self.cache_pool.budget == sys.maxsize else self.cache_pool.budget

    # -- flush --------------------------------------------------------------------------------

    def flush(self) -> FlushStats:
        """Group commit: every dirty cursor's ledger records and marker in ONE write transaction.

        Acks may go on in other threads while the transaction is written, and between the
        chunks of cursors the flush takes and adopts (an ack waits for one chunk of
        ``flush.CHUNK`` cursors at most). When this returns, the flushed state is durable
        as the ``sync`` option says. The topics' last confirmed entries
        (``topic.advance``) are written in the same transaction.
        """
        return self.cursor_side.flush_cursors(None)

    def stats(self) -> StoreStats:
        """Store-wide figures: flush counters and a duration histogram since open, file and
        map sizes, topics and cursors. O(topics). Per-cursor figures: ``cursor.stats()``."""
        require_open(self)
        data = self.path if self.path.is_file() else self.path / "data.mdb"
        with self.lock:
            totals = self._group.totals
            running, buckets = 0, []
            for bound, count in zip((*FLUSH_SECONDS_BUCKETS, float("inf")), totals.buckets, strict=True):
                running += count
                buckets.append((bound, running))
            cursors = sum(len(t.held) for t in self.held.values())
        return StoreStats(
            path=str(self.path),
            readonly=self.readonly,
            format_version=self._storage.catalog.version,
            topics=len(self.topics()),
            cursors=cursors,
            file_bytes=data.stat().st_size if data.exists() else 0,
            map_size=self._storage.map_size,
            map_grows=self._storage.map_grows,
            flushes=totals.flushes,
            flush_bytes=totals.bytes,
            records_trimmed=totals.trimmed,
            flush_seconds_sum=totals.seconds,
            flush_seconds_buckets=tuple(buckets),
            oldest_reader=self.readers.observe(self._storage.env)
            if not self.readonly
            else oldest_reader(self._storage.env),
        )

    # -- maintenance --------------------------------------------------------------------------

    def compact(
        self, cursors: list[Cursor] | None = None, *, verify: bool = False, drop_history: bool = False
    ) -> list[CompactStats]:
        """Rewrite every cursor's log as its live ledger records plus one full marker.

        Drops every record no longer needed (superseded records, older markers, what a
        crash or a fallback left behind). All cursors (or those given) in ONE write transaction: a crash
        leaves the store as before or as after. Returns bytes and records per cursor.
        The file does not shrink (LMDB reuses the pages); ``copy(compact=True)`` does.

        ``verify``: before committing, recover every rewritten cursor from the new log
        inside the same transaction and compare it with the state in memory; any
        difference aborts the transaction (StoreError) and nothing changes. ``check
        --fix`` uses it, so a repair never leaves less than open recovered.

        A cursor that keeps history (``CursorConfig.history_seconds``) is left as it is: its
        log is its window (its flushes trim what is older), and a rewrite would lose it;
        ``drop_history=True`` rewrites it too and drops its history (it starts again at the
        next flush). A cursor holding more ranges than its ``max_unacked_ranges_to_persist``
        is left as its flushes wrote it (the lowest ranges up to the cap: a rewrite writes
        what a flush would), unless ``verify`` (a repair keeps everything open recovered).
        """
        if type(drop_history) is not bool:
            raise InvalidTypeError(f"drop_history must be a bool, got {drop_history!r}")
        require_writable(self)
        if cursors is None:
            topics = [self.topic(t) for t in self.topics()]
            cursors = [topic.cursor(name) for topic in topics for name in topic.cursors()]
        with self._group.lock, self.lock:
            windows = self.history.windows
            rewritten = rewritten_of(cursors, windows, drop_history, verify)
            stats = compact_cursors(self._storage, [cur._core for cur in rewritten], verify)
            for cur in rewritten:  # their points went with the rewrite
                self.history.forget(cur.cursor_id)
                if cur.cursor_id in windows:
                    cur._core._planner.chain.force_full = True  # history starts again with a full marker
            return stats

    def copy(self, dest: str | os.PathLike[str], compact: bool = True) -> int:
        """Write a consistent single-file snapshot of the flushed state to ``dest``; return its size.

        Readable while this or another process writes. ``compact`` drops free pages.
        The file appears whole or not at all (written beside it, then renamed).
        Open it with ``AckStore.open(dest, readonly=True)``.
        """
        require_open(self)
        if not isinstance(dest, (str, os.PathLike)) or not str(dest):
            raise InvalidTypeError(f"copy destination must be a non-empty str or os.PathLike, got {dest!r}")
        target = Path(dest)
        if not target.parent.is_dir():
            raise InvalidArgumentError(
                f"copy destination {target}: its directory {target.parent} does not exist; allowed: a new path "
                "in an existing directory"
            )
        return self._storage.copy(target, compact)

    def _flush_loop(self, interval: float, stop: threading.Event) -> None:
        while not stop.wait(interval):
            try:
                self.flush()
            except StoreClosedError:
                return
            except Exception as exc:  # keep flushing; the error is kept for the owner to see
                self.last_flush_error = exc
                log.exception("ackstore: background flush of %s failed", self.path)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self, *, discard: bool = False) -> None:
        """Flush every dirty cursor, then close. Idempotent.

        If the closing flush fails (a full disk, an I/O error), it raises and the store
        stays open with every unflushed ack and delivery count still held (the background
        flusher, if any, keeps running): free space and call ``close()`` again, or
        ``flush()``. ``discard=True`` closes without flushing, dropping what was not
        flushed, as a crash would (a read-only store has nothing to flush either way).
        """
        if type(discard) is not bool:
            raise InvalidTypeError(f"discard must be a bool, got {discard!r}")
        if self.closed:
            return
        flusher = self._flusher
        self._stop.set()
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join()
        if not self.readonly and not discard:
            try:
                side = self.cursor_side
                side.flush_cursors(side.all_cursors())  # at close every cursor is visited, listed or not
            except BaseException:
                if flusher is not None:  # still open: as it was
                    self._start_flusher(self._flush_interval)
                raise
        self._shut()

    def _shut(self) -> None:
        """Close, letting go of every cursor (each refers to its store: held, they were one
        cycle, ack state and all, for the cyclic collector); a handle kept raises on use."""
        with self.lock:
            self.closed = True
            for topic in self.held.values():
                for cur in topic.held.values():
                    cur._core._release()
                topic.held.clear()
            self.held.clear()
            self.flush_list.clear()
            self.small_list.clear()
            self._storage.close()

    def _abandon(self) -> None:
        """Drop the store without flushing, as a crashed process would (for tests)."""
        if self.closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        self._shut()

    def __enter__(self) -> AckStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("readonly" if self.readonly else "open")
        return f"AckStore({str(self.path)!r}, {state})"
