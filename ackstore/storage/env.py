"""The LMDB environment of one store: open, the writer's lock file, snapshots, reads,
writes replayed on a full map, growth, copies, the structure walk, close.

Lock order (outermost first): a cursor's revision controller -> the store's flush lock
-> the store lock (``AckStore._lock``, shared by its cursors) -> this environment's lock.
Every function given to :meth:`Environment.write` must be safe to run twice: a full map
aborts the transaction, grows the map and runs the function again; only the last run
commits. Every ``lmdb.Error`` leaves here as a ``StoreError`` (``lmdb_errors``).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from ..errors import CorruptStoreError, InvalidArgumentError, NotAStoreError, StoreLockedError
from ..history import drop_points
from .catalog import Catalog
from .fileio import create_new_file, temporary
from .lmdb_errors import translate
from .lmdb_file import check_size, walk
from .log import CursorLog
from .records import FORMAT_VERSION

__all__ = ["Environment", "LOCK_FILE"]

log = logging.getLogger("ackstore")

LOCK_FILE = "ackstore.lock"
"""the file in a store's directory whose lock says a writer has the store open"""

T = TypeVar("T")


class Environment:
    """One store's LMDB environment, catalog and record log database. Thread-safe: every
    transaction runs under :attr:`lock`. Open it with :meth:`open`."""

    path: Path
    readonly: bool
    env: lmdb.Environment
    catalog: Catalog
    log_db: lmdb._Database
    history_db: lmdb._Database | None
    lock: threading.Lock
    _pins: threading.local
    map_grows: int
    _lock_fd: int | None
    _walk_first: bool
    _older: int | None
    _history_missing: bool

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        readonly: bool,
        map_size: int,
        sync: bool,
        metasync: bool,
        create: bool,
        walk_first: bool,
    ) -> Environment:
        """Open (or create) the environment at ``path``; a file is a single-file snapshot.

        ``walk_first``: walk the file's B-trees in Python before LMDB reads them.
        """
        self = cls()
        self.path = path
        self.readonly = readonly
        self.lock = threading.Lock()
        self._pins = threading.local()
        """a thread's pinned read transaction (:meth:`pinned`), as ``txn``"""
        self.map_grows = 0
        self._lock_fd = None
        self._walk_first = walk_first
        self._older = None
        """the format of an older store this writer opened, until its first write raises it"""
        self._history_missing = False
        """that store has no history database: the first write makes it"""
        if path.exists() and not path.is_dir():
            if not readonly:
                raise NotAStoreError(
                    f"{path} exists and is a file, not a store directory; allowed: a store directory "
                    "(a single-file snapshot opens with readonly=True)"
                )
            self._open_snapshot(map_size)
        else:
            self._open_dir(map_size, sync, metasync, create)
        return self

    def _open_dir(self, map_size: int, sync: bool, metasync: bool, create: bool) -> None:
        path = self.path
        exists = (path / "data.mdb").exists()
        if self.readonly and not exists:
            raise NotAStoreError(f"no store at {path}: it has no data.mdb (a readonly open never creates one)")
        if not create and not exists:
            raise NotAStoreError(f"no store at {path}: it has no data.mdb (nothing was created)")
        if not exists and path.exists():
            extra = sorted(p.name for p in path.iterdir() if p.name not in (LOCK_FILE, "lock.mdb"))
            if extra:
                raise NotAStoreError(
                    f"{path} exists and is not a store (it holds {', '.join(extra[:3])}); "
                    "allowed: an empty or missing directory, or an existing store"
                )
        if exists:
            check_size(path)
        if not self.readonly:
            path.mkdir(parents=True, exist_ok=True)
            self._take_writer_lock()
        try:
            env = lmdb.open(
                str(path),
                map_size=map_size,
                subdir=True,
                readonly=self.readonly,
                create=not self.readonly,
                sync=sync,
                metasync=metasync,
                writemap=False,
                map_async=False,
                readahead=False,
                max_dbs=8,
                lock=True,
            )
        except lmdb.InvalidError as exc:
            self._release_writer_lock()
            raise NotAStoreError(f"{path} is not a store: LMDB says {exc}") from None
        except lmdb.Error as exc:
            self._release_writer_lock()
            if "already open in this process" in str(exc):
                raise StoreLockedError(
                    f"store {path} is already open in this process: share that AckStore object "
                    "(LMDB allows one environment per path per process)"
                ) from None
            raise translate(exc, path, "cannot open store") from None
        try:
            env.reader_check()  # free the reader slots of processes that died (kill -9) holding one
            if exists and self._walk_first:
                self._walk(env)
            with env.begin() as txn:
                has_meta = txn.get(b"meta") is not None
            if exists and not has_meta:
                raise NotAStoreError(f"{path} holds an LMDB environment that is not an ackstore store")
            self.env = env
            self.catalog = Catalog(env, path, create=not has_meta)
            self.log_db = env.open_db(b"log", create=not has_meta)
            self.history_db = self._history_db(env, create=not has_meta)
            if not has_meta:
                self.write(self.catalog.init)
            elif self.read(self.catalog.read_format) < FORMAT_VERSION and not self.readonly:
                # this writer may write what an older ackstore cannot decode: its first write
                # checksums the catalog, makes the history database and raises the version
                # (in that write's transaction), so that an older ackstore refuses the store
                # (FormatVersionError) instead of misreading it; an open that writes nothing
                # (a command refused or declined) leaves the store as it was
                self._older = self.catalog.version
                self._history_missing = self.history_db is None
        except BaseException as exc:
            env.close()
            self._release_writer_lock()
            if isinstance(exc, lmdb.Error):
                raise translate(exc, path, "cannot open store") from None
            raise

    def _open_snapshot(self, map_size: int) -> None:
        """A single-file snapshot (from ``copy``): read-only, no lock file, nothing written."""
        check_size(self.path)
        try:
            env = lmdb.open(
                str(self.path), map_size=map_size, subdir=False, readonly=True, lock=False, readahead=False, max_dbs=8
            )
        except lmdb.InvalidError as exc:
            raise NotAStoreError(f"{self.path} is not a store snapshot: LMDB says {exc}") from None
        except lmdb.Error as exc:
            raise translate(exc, self.path, "cannot open snapshot") from None
        self.env = env
        try:
            if self._walk_first:
                self._walk(env)
            with env.begin() as txn:
                if txn.get(b"meta") is None:
                    raise NotAStoreError(f"{self.path} holds an LMDB environment that is not an ackstore store")
            self.catalog = Catalog(env, self.path, create=False)
            self.log_db = env.open_db(b"log", create=False)
            self.history_db = self._history_db(env, create=False)
            self.read(self.catalog.read_format)
        except BaseException as exc:
            env.close()
            if isinstance(exc, lmdb.Error):
                raise translate(exc, self.path, "cannot open snapshot") from None
            raise

    def walk(self) -> None:
        """Walk the file's B-trees in Python; raise CorruptStoreError naming the damage."""
        self._walk(self.env)

    def _walk(self, env: lmdb.Environment) -> None:
        """Walk the file's B-trees in Python (a read transaction pins the pages walked)."""
        with env.begin() as txn:
            problems = walk(self.path, txn.id())
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise CorruptStoreError(f"store {self.path}: the file's B-tree is damaged: {problems[0]}{more}", self.path)

    def _take_writer_lock(self) -> None:
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreLockedError(
                    f"store {self.path} is locked by another writer (pid {holder}); one writer per store: "
                    "close the other one, or open with readonly=True",
                    self.path,
                    holder,
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _release_writer_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    # -- transactions ---------------------------------------------------------------------------

    def write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in one write transaction; on a full map abort, grow it, replay.

        ``fn`` must be replayable: it may run more than once, only the last run commits.
        """
        with self.lock:
            while True:
                txn = self.env.begin(write=True)
                try:
                    if self._older is not None:
                        self._raise_format(txn, self._older)
                    result = fn(txn)
                    txn.commit()
                    self._older, self._history_missing = None, False
                    return result
                except lmdb.MapFullError:
                    self._abort(txn)
                    self.grow()
                except lmdb.Error as exc:
                    self._abort(txn)
                    raise translate(exc, self.path, "writing to store") from exc
                except BaseException:
                    self._abort(txn)
                    raise

    def _abort(self, txn: lmdb.Transaction) -> None:
        """Abort a write transaction; a history database it made is gone with it."""
        txn.abort()
        if self._history_missing:
            self.history_db = None

    def _history_db(self, env: lmdb.Environment, create: bool) -> lmdb._Database | None:
        """The cursors' history points (``ackstore.history``); None for a store older than
        them until a writer's first write makes it (:meth:`_raise_format`)."""
        try:
            return env.open_db(b"history", create=create)
        except lmdb.NotFoundError:
            return None

    def _raise_format(self, txn: lmdb.Transaction, older: int) -> None:
        """The first write to a store of an older format: in the same transaction, make the
        history database if there is none, checksum the catalog and raise the version to
        this one's (replayable: from the version the store had, ``older``)."""
        if self._history_missing:  # (made again when the transaction is replayed)
            self.history_db = self.env.open_db(b"history", txn=txn, create=True)
        self.catalog.version = older
        self.catalog.migrate(txn)

    def drop_cursors(self, tid: int, names: list[str]) -> int:
        """Remove cursors ``names`` of topic ``tid`` from the catalog with every record of their
        logs, in one write transaction; how many were there. O(their records)."""
        catalog, log_db = self.catalog, self.log_db

        def drop(txn: lmdb.Transaction) -> int:
            gone = 0
            for name in names:
                cid = catalog.cursor_id(txn, tid, name)
                if cid is not None:
                    CursorLog(log_db, cid).drop(txn)
                    drop_points(txn, self.history_db, cid)
                    catalog.delete_cursor(txn, tid, name)
                    gone += 1
            return gone

        return self.write(drop)

    def drop_topic(self, name: str) -> bool:
        """Remove topic ``name``, every cursor of it with its log, and its ledger directory, in
        one write transaction; False when there is no such topic."""
        catalog, log_db = self.catalog, self.log_db

        def drop(txn: lmdb.Transaction) -> bool:
            found = catalog.topic(txn, name)
            if found is None:
                return False
            tid = found[0]
            for cname, cid in catalog.cursor_entries(txn, tid):
                CursorLog(log_db, cid).drop(txn)
                drop_points(txn, self.history_db, cid)
                catalog.delete_cursor(txn, tid, cname)
            catalog.delete_topic(txn, name, tid)
            return True

        return self.write(drop)

    def grow(self) -> None:
        """Double the map (lock held)."""
        size = self.env.info()["map_size"]
        new = size * 2
        self.env.set_mapsize(new)
        self.map_grows += 1
        log.info("ackstore: grew the LMDB map of %s from %d to %d bytes", self.path, size, new)

    def read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn`` in a read transaction (a consistent snapshot of the flushed state): a
        new one, or the one this thread pinned (:meth:`pinned`)."""
        pinned = getattr(self._pins, "txn", None)
        if pinned is not None:
            try:
                return fn(pinned)
            except lmdb.Error as exc:
                raise translate(exc, self.path, "reading store") from exc
        with self.lock:
            try:
                txn = self._begin()
                try:
                    return fn(txn)
                finally:
                    txn.abort()
            except lmdb.Error as exc:
                raise translate(exc, self.path, "reading store") from exc

    def _begin(self) -> lmdb.Transaction:
        """A new read transaction (lock held)."""
        try:
            return self.env.begin()
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)  # adopt the size another process grew the map to
            return self.env.begin()

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Every :meth:`read` of this thread in the block runs in one read transaction: a
        reader's read that must not see two flushes holds one snapshot for all it reads (the
        writer cannot trim a record under it; LMDB keeps the pages the snapshot sees until
        the block ends). A block inside another one shares its transaction."""
        if getattr(self._pins, "txn", None) is not None:
            yield
            return
        with self.lock:
            try:
                txn = self._begin()
            except lmdb.Error as exc:
                raise translate(exc, self.path, "reading store") from exc
        self._pins.txn = txn
        try:
            yield
        finally:
            self._pins.txn = None
            with self.lock:
                txn.abort()

    @property
    def map_size(self) -> int:
        """The map's current size in bytes."""
        with self.lock:
            return int(self.env.info()["map_size"])

    def copy(self, dest: Path, compact: bool) -> int:
        """Write a consistent single-file snapshot to ``dest`` (beside it, then renamed); its size."""
        if os.path.lexists(dest):
            raise InvalidArgumentError(f"copy destination {dest} exists; allowed: a path that does not exist yet")
        with temporary(dest.with_name(dest.name + ".partial")) as tmp:
            fd = create_new_file(tmp)
            try:
                with self.lock:
                    self.env.copyfd(fd, compact=compact)
                os.fsync(fd)
            except BaseException as exc:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                if isinstance(exc, (lmdb.Error, OSError)):
                    raise translate(exc, dest.parent, f"copy of {self.path} to") from exc
                raise
            os.close(fd)
            os.replace(tmp, dest)
        return dest.stat().st_size

    def close(self) -> None:
        """Close the environment and release the writer's lock file."""
        with self.lock:
            self.env.close()
        self._release_writer_lock()
