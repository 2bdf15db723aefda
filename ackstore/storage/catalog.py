"""The catalog: topics, cursors, ledger directories and the meta keys, one codec each.

Four named LMDB databases beside the record log:

==========  ===============================  =================================================
database    key                              value (format 3)
==========  ===============================  =================================================
``meta``    ``magic``                        ``b"ackstore"``
            ``format``                       ``>Q`` format version (unchecksummed: older
                                             releases read it to refuse a newer store)
            ``formatx``                      ``>QI`` the same version + CRC32(key + value)
            ``next_topic``, ``next_cursor``  ``>QI`` the next id + CRC32(key + value)
``topics``  name key                         record envelope, type 3: ``[name, id, last id,
                                             tracked]`` (``tracked``, since format 4: the
                                             topic tracks its open ledger's last confirmed
                                             entry; a 3-item value reads as False)
``cursors`` ``>Q`` topic id + name key       record envelope, type 4: ``[topic id, name, id,
                                             config]``
``ledgers`` ``>QQ`` topic id, ledger id      ``>BBqI``: type 5, version, entry count (-1 open),
                                             CRC32(key + the first 10 bytes); or, for an open
                                             ledger of a tracking topic (format 4),
                                             ``>BBqqI``: type 6, version, -1, last confirmed
                                             entry (-1: none), CRC32(key + the first 18 bytes)
==========  ===============================  =================================================

The open ledger's value is one key per topic, rewritten in place by the flush after a
``topic.advance`` (a few bytes in the flush's own transaction).

A *name key* is the name's UTF-8 bytes, or for a name longer than ``_RAW_NAME_BYTES``
(LMDB keys stop at 511 bytes) a NUL byte and its SHA-256: names never hold NUL, so the
two forms cannot meet. Names are read back from the values, never from the keys.

Every value is checked on read: its checksum, its type, and that it names the key it is
stored under (a topic value carries its name, a cursor value its topic id and name, a
ledger value's checksum covers its key), so one flipped bit is damage reported as
:class:`~ackstore.errors.CorruptStoreError`, never another topic's or cursor's state.
Formats 1 and 2 stored plain values (msgpack maps, ``>q`` counts, ``>Q`` counters); a
reader decodes them as they are and a writer rewrites them once (:meth:`Catalog.migrate`).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from array import array
from collections.abc import Iterator
from typing import Any

import lmdb
import msgpack

from ..config import CursorConfig
from ..directory import LedgerDirectory
from ..errors import CorruptRecordError, CorruptStoreError, FormatVersionError, NotAStoreError, StoreError
from . import codecs
from .pure_codecs import DIR_KEY, DIR_OPEN, DIR_SEALED, directory_entry
from .records import FORMAT_VERSION, decode_record, encode_record, open_record

__all__ = [
    "Catalog",
    "CATALOG_CHECKSUMS_SINCE",
    "LEDGER_ENTRY_BYTES",
    "OPEN_LEDGER_ENTRY_BYTES",
    "MAGIC",
    "MAX_ID",
    "name_key",
    "RECORD_TOPIC",
    "RECORD_CURSOR",
]

MAGIC = b"ackstore"
CATALOG_CHECKSUMS_SINCE = 3
"""the first format version whose catalog values carry checksums"""
MAX_ID = 2**63
"""topic and cursor ids stay below it (the state slots' keys sort after every log key)"""
RECORD_TOPIC = 3
RECORD_CURSOR = 4
_LEDGER_TYPE = 5
_OPEN_LEDGER_TYPE = 6

_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
# a ledger-directory entry's layout, defined beside the twin of its compiled scan
_LEDGER_KEY = DIR_KEY
_LEDGER_VALUE = DIR_SEALED
_OPEN_LEDGER_VALUE = DIR_OPEN
LEDGER_ENTRY_BYTES = _LEDGER_VALUE.size
"""the sizes of a ledger-directory value (format 3 and later; the longer one since 4)"""
OPEN_LEDGER_ENTRY_BYTES = _OPEN_LEDGER_VALUE.size
_COUNTER = struct.Struct(">QI")
_RAW_NAME_BYTES = 503
"""names up to this many UTF-8 bytes are their own key (a cursor key adds 8 bytes: 511 in all)"""


def name_key(name: str) -> bytes:
    """The key bytes of a topic or cursor name (hashed past ``_RAW_NAME_BYTES``)."""
    raw = name.encode()
    if len(raw) <= _RAW_NAME_BYTES:
        return raw
    return b"\x00" + hashlib.sha256(raw).digest()


def _counter(key: bytes, value: int) -> bytes:
    return _COUNTER.pack(value, zlib.crc32(key + _U64.pack(value)))


class Catalog:
    """The catalog databases of one open environment, read and written in the store's format.

    ``version`` is the store's format version: below ``CATALOG_CHECKSUMS_SINCE`` the values
    are the plain ones of formats 1 and 2. Every method takes the transaction to work in.
    """

    def __init__(self, env: lmdb.Environment, path: object, create: bool) -> None:
        self.path = path
        self.meta = env.open_db(b"meta", create=create)
        self.topics_db = env.open_db(b"topics", create=create)
        self.cursors_db = env.open_db(b"cursors", create=create)
        self.ledgers_db = env.open_db(b"ledgers", create=create)
        self.version = FORMAT_VERSION

    @classmethod
    def codec(cls, path: object, version: int = FORMAT_VERSION) -> Catalog:
        """The value codecs alone, with no environment (``salvage`` decodes what a page scan
        finds with them; the ``*_entry`` methods are all it may call)."""
        self = cls.__new__(cls)
        self.path = path
        self.version = version
        return self

    def _damaged(self, what: str) -> CorruptStoreError:
        return CorruptStoreError(f"store {self.path}: {what}", self.path)

    # -- meta --------------------------------------------------------------------------------

    def init(self, txn: lmdb.Transaction) -> None:
        """Write the meta keys of a new store."""
        self.version = FORMAT_VERSION
        txn.put(b"magic", MAGIC, db=self.meta)
        txn.put(b"format", _U64.pack(FORMAT_VERSION), db=self.meta)
        txn.put(b"formatx", _counter(b"formatx", FORMAT_VERSION), db=self.meta)
        txn.put(b"next_topic", _counter(b"next_topic", 0), db=self.meta)
        txn.put(b"next_cursor", _counter(b"next_cursor", 0), db=self.meta)

    def read_format(self, txn: lmdb.Transaction) -> int:
        """The store's format version (also kept in ``self.version``); raises unless this ackstore reads it."""
        magic = txn.get(b"magic", db=self.meta)
        fmt = txn.get(b"format", db=self.meta)
        if magic != MAGIC or fmt is None or len(fmt) != 8:
            raise NotAStoreError(f"{self.path} holds an LMDB environment that is not an ackstore store")
        version = int(_U64.unpack(fmt)[0])
        checked = txn.get(b"formatx", db=self.meta)
        if checked is not None:
            if self.counter_entry(b"formatx", checked) != version:
                raise self._damaged(f"the format version ({version}) does not match its checksummed copy")
        elif CATALOG_CHECKSUMS_SINCE <= version <= FORMAT_VERSION:
            raise self._damaged(f"format {version} but its checksummed copy is missing")
        if version > FORMAT_VERSION:
            raise FormatVersionError(
                f"store {self.path} has format version {version}; this ackstore reads up to {FORMAT_VERSION}: "
                "upgrade ackstore"
            )
        self.version = version
        return version

    def counter_entry(self, key: bytes, raw: bytes | None) -> int:
        if raw is None:
            raise self._damaged(f"the meta key {key.decode()} is missing")
        if self.version < CATALOG_CHECKSUMS_SINCE and key != b"formatx":
            return int(_U64.unpack(raw)[0]) if len(raw) == 8 else self._bad_counter(key)
        if len(raw) != _COUNTER.size:
            return self._bad_counter(key)
        value, crc = _COUNTER.unpack(raw)
        if zlib.crc32(key + raw[:8]) != crc:
            return self._bad_counter(key)
        return int(value)

    def _bad_counter(self, key: bytes) -> int:
        raise self._damaged(f"the meta key {key.decode()} is damaged (checksum or size)")

    def next_id(self, txn: lmdb.Transaction, key: bytes) -> int:
        """Take the next topic or cursor id (``key`` is ``next_topic`` or ``next_cursor``)."""
        value = self.counter_entry(key, txn.get(key, db=self.meta))
        if value >= MAX_ID:  # a log key of a cursor id this high would reach the state slots
            raise StoreError(f"store {self.path} has used every id the format allows ({MAX_ID})")
        txn.put(key, _counter(key, value + 1), db=self.meta)
        return value

    def migrate(self, txn: lmdb.Transaction) -> None:
        """Rewrite a format 1/2 catalog with checksums and raise the store to this format.

        An older ackstore then refuses the store (FormatVersionError) instead of misreading
        it. Replayable: it reads the old form and writes the new one in the same transaction.
        """
        old = self.version
        if old >= CATALOG_CHECKSUMS_SINCE:
            txn.put(b"format", _U64.pack(FORMAT_VERSION), db=self.meta)
            txn.put(b"formatx", _counter(b"formatx", FORMAT_VERSION), db=self.meta)
            self.version = FORMAT_VERSION
            return
        topics = [(key, self.topic_entry(key, value)) for key, value in txn.cursor(db=self.topics_db)]
        cursors = [(key, self.cursor_entry(key, value)) for key, value in txn.cursor(db=self.cursors_db)]
        ledgers = [(key, self.ledger_state(key, value)) for key, value in txn.cursor(db=self.ledgers_db)]
        counters = {k: self.counter_entry(k, txn.get(k, db=self.meta)) for k in (b"next_topic", b"next_cursor")}
        self.version = FORMAT_VERSION
        for key, (name, tid, last, tracked) in topics:
            txn.put(key, self._encode_topic(name, tid, last, tracked), db=self.topics_db)
        for key, (tid, name, cid, cfg) in cursors:
            txn.put(key, self._encode_cursor(tid, name, cid, cfg), db=self.cursors_db)
        for key, (count, confirmed) in ledgers:
            txn.put(key, self._encode_ledger(key, count, confirmed), db=self.ledgers_db)
        for key, value in counters.items():
            txn.put(key, _counter(key, value), db=self.meta)
        txn.put(b"format", _U64.pack(FORMAT_VERSION), db=self.meta)
        txn.put(b"formatx", _counter(b"formatx", FORMAT_VERSION), db=self.meta)

    # -- topics ------------------------------------------------------------------------------

    def _encode_topic(self, name: str, tid: int, last: int, tracked: bool) -> bytes:
        return encode_record(RECORD_TOPIC, msgpack.packb([name, tid, last, tracked]))

    def topic_entry(self, key: bytes, raw: bytes) -> tuple[str, int, int, bool]:
        """``(name, topic id, last ledger id, tracked)`` of a topics value stored under
        ``key``; CorruptStoreError unless it checks and names that key."""
        try:
            tracked = False
            if self.version < CATALOG_CHECKSUMS_SINCE:
                obj = msgpack.unpackb(raw)
                name, tid, last = key.decode(), obj["id"], obj["last"]
            else:
                rtype, body = decode_record(raw)
                if rtype != RECORD_TOPIC:
                    raise CorruptRecordError(f"type {rtype}, not a topic entry")
                if len(body) == 4:
                    name, tid, last, tracked = body
                else:
                    name, tid, last = body
            if not (
                isinstance(name, str) and type(tid) is int and type(last) is int and tid >= 0 and type(tracked) is bool
            ):
                raise CorruptRecordError("fields have the wrong types")
            if name_key(name) != key:
                raise CorruptRecordError(f"it names topic {name!r}, not the one it is stored under")
        except Exception as exc:
            raise self._damaged(f"the catalog entry of topic key {_show(key)} is damaged ({exc})") from None
        return name, tid, last, tracked

    def topic(self, txn: lmdb.Transaction, name: str) -> tuple[int, int, bool] | None:
        """``(topic id, last ledger id, tracked)`` of topic ``name``, or None if there is none."""
        key = name_key(name)
        raw = txn.get(key, db=self.topics_db)
        if raw is None:
            return None
        _, tid, last, tracked = self.topic_entry(key, raw)
        return tid, last, tracked

    def put_topic(self, txn: lmdb.Transaction, name: str, tid: int, last: int, tracked: bool = False) -> None:
        txn.put(name_key(name), self._encode_topic(name, tid, last, tracked), db=self.topics_db)

    def topic_names(self, txn: lmdb.Transaction, damaged: list[str] | None = None) -> list[str]:
        """Every topic's name, sorted. With a ``damaged`` list, a damaged entry is described
        there and left out instead of raising (``check`` reports them)."""
        names = []
        for key, raw in txn.cursor(db=self.topics_db):
            try:
                names.append(self.topic_entry(key, raw)[0])
            except CorruptStoreError as exc:
                if damaged is None:
                    raise
                damaged.append(str(exc))
        return sorted(names)

    # -- cursors -----------------------------------------------------------------------------

    def _encode_cursor(self, tid: int, name: str, cid: int, cfg: dict[str, Any]) -> bytes:
        return encode_record(RECORD_CURSOR, msgpack.packb([tid, name, cid, cfg]))

    def cursor_entry(self, key: bytes, raw: bytes) -> tuple[int, str, int, dict[str, Any]]:
        """``(topic id, name, cursor id, config object)`` of a cursors value stored under
        ``key``; CorruptStoreError unless it checks and names that key."""
        tid, name, cid, cfg = self._cursor_head(key, raw)
        return tid, name, cid, self._config_map(key, cfg) if isinstance(cfg, bytes) else cfg

    def _config_map(self, key: bytes, cfg: bytes) -> dict[str, Any]:
        """The object of a cursors entry's config map (its bytes, as :meth:`_cursor_head` gives them)."""
        try:
            return msgpack.unpackb(cfg, strict_map_key=False)  # type: ignore[no-any-return]
        except Exception as exc:  # msgpack raises several unrelated types
            raise self._damaged(f"the catalog entry of cursor key {_show(key)} is damaged ({exc})") from None

    def _cursor_head(self, key: bytes, raw: bytes) -> tuple[int, str, int, Any]:
        """``(topic id, name, cursor id, config)`` of a cursors value stored under ``key``, its
        config the map's bytes as stored (its object before ``CATALOG_CHECKSUMS_SINCE``);
        CorruptStoreError unless the rest checks and names that key."""
        try:
            if self.version < CATALOG_CHECKSUMS_SINCE:
                obj = msgpack.unpackb(raw)
                tid, name, cid, cfg = _U64.unpack(key[:8])[0], key[8:].decode(), obj["id"], obj["cfg"]
                if not (type(cid) is int and isinstance(cfg, dict)):
                    raise CorruptRecordError("fields have the wrong types")
            elif raw[:1] == b"\xc1":  # (the fixed envelope: checked and read in one call)
                tid, name, cid, cfg = codecs.cursor_entry(raw, FORMAT_VERSION)
            else:
                rtype, _, body = open_record(raw)
                if rtype != RECORD_CURSOR:
                    raise CorruptRecordError(f"type {rtype}, not a cursor entry")
                tid, name, cid, cfg = codecs.cursor_fields(body)
            if cid < 0 or _cursor_key(tid, name) != key:
                raise CorruptRecordError(f"it names cursor {name!r} of topic id {tid}, not the one it is stored under")
        except Exception as exc:
            raise self._damaged(f"the catalog entry of cursor key {_show(key)} is damaged ({exc})") from None
        return tid, name, cid, cfg

    def _cursor_config(self, tid: int, name: str, cfg: Any) -> CursorConfig:
        """The configuration of cursor ``name`` of topic ``tid`` from its entry (``cfg``:
        :meth:`_cursor_head`'s), decoded once for each distinct one: entries of one
        configuration hold the same bytes. O(1) for a configuration seen before."""
        if not isinstance(cfg, bytes):
            return self._config(name, cfg)
        config = _CONFIGS.get(cfg)
        if config is None:
            config = self._config(name, self._config_map(_cursor_key(tid, name), cfg))
            if len(_CONFIGS) >= _CONFIGS_MOST:
                _CONFIGS.clear()
            _CONFIGS[cfg] = config
        return config

    def _cursor_found(
        self, txn: lmdb.Transaction, tid: int, name: str
    ) -> tuple[bytes, tuple[int, str, int, Any]] | None:
        """The key and :meth:`_cursor_head` of cursor ``name`` of topic ``tid``, or None if there is none."""
        key = _cursor_key(tid, name)
        raw = txn.get(key, db=self.cursors_db)
        return None if raw is None else (key, self._cursor_head(key, raw))

    def cursor(self, txn: lmdb.Transaction, tid: int, name: str) -> tuple[int, CursorConfig] | None:
        """``(cursor id, config)`` of cursor ``name`` of topic ``tid``, or None if there is none."""
        found = self._cursor_found(txn, tid, name)
        if found is None:
            return None
        _, (_, _, cid, cfg) = found
        return cid, self._cursor_config(tid, name, cfg)

    def _config(self, name: str, cfg: dict[str, Any]) -> CursorConfig:
        try:
            return CursorConfig.from_obj(cfg)
        except Exception as exc:
            raise self._damaged(f"cursor {name!r} has a configuration this ackstore refuses ({exc})") from None

    def cursor_configs(self, txn: lmdb.Transaction, tid: int) -> list[tuple[str, int, CursorConfig, bytes]]:
        """``[(name, cursor id, config, entry bytes)]`` of every cursor of topic ``tid``, sorted
        by name: one scan (a bulk open's). CorruptStoreError on a damaged entry."""
        if self.version < CATALOG_CHECKSUMS_SINCE:
            entries = [(name, cid, cfg, raw) for key, (_, name, cid, cfg), raw in self._cursor_scan(txn, tid, None)]
        else:
            entries = self._cursor_entries(txn, tid)
        config = self._cursor_config
        found = [(name, cid, config(tid, name, cfg), raw) for name, cid, cfg, raw in entries]
        found.sort()
        return found

    def _cursor_entries(self, txn: lmdb.Transaction, tid: int) -> list[tuple[str, int, bytes, bytes]]:
        """``[(name, cursor id, config map bytes, entry bytes)]`` of every cursor of topic
        ``tid`` (a catalog with checksums), in key order: read by ``codecs.scan_cursors``,
        and each entry it leaves (a hashed name, an older envelope, damage) by
        :meth:`_cursor_head`, which raises CorruptStoreError naming a damaged one. O(entries)."""
        prefix = _U64.pack(tid)
        cur = txn.cursor(db=self.cursors_db)
        if not cur.set_range(prefix):
            return []
        items = cur.iternext()
        entries: list[tuple[str, int, bytes, bytes]] = []
        while True:
            found, stop = codecs.scan_cursors(items, prefix, FORMAT_VERSION, _RAW_NAME_BYTES)
            entries += found
            if stop is None:
                return entries
            key, raw = stop
            _, name, cid, cfg = self._cursor_head(key, raw)
            entries.append((name, cid, cfg, raw))

    def cursor_raw(self, txn: lmdb.Transaction, tid: int, name: str) -> bytes | None:
        """The catalog entry of cursor ``name`` of topic ``tid`` as stored (None: none), to
        tell whether it changed since a scan read it."""
        return txn.get(_cursor_key(tid, name), db=self.cursors_db)

    def cursor_item(self, tid: int, name: str, cid: int, config: dict[str, Any]) -> tuple[bytes, bytes]:
        """The key and value of a cursors entry (what :meth:`put_cursor` writes)."""
        return _cursor_key(tid, name), self._encode_cursor(tid, name, cid, config)

    def cursor_id(self, txn: lmdb.Transaction, tid: int, name: str) -> int | None:
        """The id of cursor ``name`` of topic ``tid`` (its configuration not decoded), or None."""
        found = self._cursor_found(txn, tid, name)
        return None if found is None else found[1][2]

    def put_cursor(self, txn: lmdb.Transaction, tid: int, name: str, cid: int, config: CursorConfig) -> None:
        txn.put(*self.cursor_item(tid, name, cid, config.to_obj()), db=self.cursors_db)

    def delete_cursor(self, txn: lmdb.Transaction, tid: int, name: str) -> bool:
        """Remove cursor ``name`` of topic ``tid`` from the catalog; True if it was there."""
        return bool(txn.delete(_cursor_key(tid, name), db=self.cursors_db))

    def delete_topic(self, txn: lmdb.Transaction, name: str, tid: int) -> None:
        """Remove topic ``name`` (id ``tid``) and its whole ledger directory from the catalog
        (its cursors are removed one by one by the caller, with their logs)."""
        cur = txn.cursor(db=self.ledgers_db)
        prefix = _U64.pack(tid)
        ok = cur.set_range(prefix)
        while ok and cur.key().startswith(prefix):
            ok = cur.delete()
        txn.delete(name_key(name), db=self.topics_db)

    def cursor_entries(
        self, txn: lmdb.Transaction, tid: int, damaged: list[str] | None = None
    ) -> list[tuple[str, int]]:
        """``[(name, cursor id)]`` of topic ``tid``, sorted by name (``damaged``: as in topic_names)."""
        return sorted((name, cid) for _, (_, name, cid, _), _ in self._cursor_scan(txn, tid, damaged))

    def _cursor_scan(
        self, txn: lmdb.Transaction, tid: int, damaged: list[str] | None
    ) -> Iterator[tuple[bytes, tuple[int, str, int, Any], bytes]]:
        """The key, :meth:`_cursor_head` and value of every cursors entry of topic ``tid``, in
        key order; a damaged one is named in ``damaged`` and skipped (None: raise)."""
        prefix = _U64.pack(tid)
        cur = txn.cursor(db=self.cursors_db)
        if cur.set_range(prefix):
            for key, raw in cur:
                if not key.startswith(prefix):
                    break
                try:
                    yield key, self._cursor_head(key, raw), raw
                except CorruptStoreError as exc:
                    if damaged is None:
                        raise
                    damaged.append(str(exc))

    # -- ledger directories ------------------------------------------------------------------

    def _encode_ledger(self, key: bytes, count: int, confirmed: int | None = None) -> bytes:
        if confirmed is None:
            head = _LEDGER_VALUE.pack(_LEDGER_TYPE, FORMAT_VERSION, count, 0)[:10]
        else:
            head = _OPEN_LEDGER_VALUE.pack(_OPEN_LEDGER_TYPE, FORMAT_VERSION, count, confirmed, 0)[:18]
        return head + struct.pack(">I", zlib.crc32(key + head))

    def ledger_entry(self, key: bytes, raw: bytes) -> int:
        """The entry count (-1: open) of a ledger-directory value stored under ``key``."""
        return self.ledger_state(key, raw)[0]

    def ledger_state(self, key: bytes, raw: bytes) -> tuple[int, int | None]:
        """``(entry count or -1 while open, last confirmed entry or None)`` of a
        ledger-directory value stored under ``key``; CorruptStoreError unless it checks."""
        if self.version < CATALOG_CHECKSUMS_SINCE:
            if len(raw) == 8:
                return int(_I64.unpack(raw)[0]), None
        else:
            entry = directory_entry(key, raw, _LEDGER_TYPE, _OPEN_LEDGER_TYPE)
            if entry is not None:
                return entry
        tid, ledger = _LEDGER_KEY.unpack(key) if len(key) == 16 else (-1, -1)
        raise self._damaged(f"the directory entry of ledger {ledger} of topic id {tid} is damaged (checksum)")

    def put_ledger(
        self, txn: lmdb.Transaction, tid: int, ledger: int, count: int, confirmed: int | None = None
    ) -> None:
        """Write a ledger's directory entry (``confirmed``: an open ledger's last confirmed
        entry, when its topic tracks it)."""
        key = _LEDGER_KEY.pack(tid, ledger)
        txn.put(key, self._encode_ledger(key, count, confirmed), db=self.ledgers_db)  # writers hold a migrated catalog

    def delete_ledgers(self, txn: lmdb.Transaction, tid: int, ledgers: list[int]) -> None:
        for ledger in ledgers:
            txn.delete(_LEDGER_KEY.pack(tid, ledger), db=self.ledgers_db)

    def load_directory(self, txn: lmdb.Transaction, tid: int, last_id: int, tracked: bool = False) -> LedgerDirectory:
        """Topic ``tid``'s ledger directory, every entry checked. O(ledgers), compiled
        where built (``codecs.scan_directory``)."""
        ids, counts = array("q"), array("q")
        confirmed: int | None = None
        cur = txn.cursor(db=self.ledgers_db)
        prefix = _U64.pack(tid)
        if cur.set_range(prefix):
            if self.version < CATALOG_CHECKSUMS_SINCE:
                for key, value in cur:
                    if not key.startswith(prefix):
                        break
                    ids.append(_LEDGER_KEY.unpack(key)[1])
                    count, confirmed = self.ledger_state(key, value)
                    counts.append(count)
            else:
                raw_ids, raw_counts, confirmed, bad = codecs.scan_directory(
                    cur.iternext(), prefix, _LEDGER_TYPE, _OPEN_LEDGER_TYPE
                )
                if bad is not None:
                    key, value = bad
                    self.ledger_state(key, value)  # raises, naming the ledger
                    raise self._damaged(
                        f"a directory entry next to topic id {tid}'s is damaged (a {len(key)}-byte key)"
                    )
                ids.frombytes(raw_ids)
                counts.frombytes(raw_counts)
        if tracked and counts and counts[-1] < 0 and confirmed is None:
            confirmed = -1  # tracking began after this ledger was added: nothing confirmed on disk yet
        return LedgerDirectory(ids, counts, last_id, tracked, confirmed if counts and counts[-1] < 0 else None)


_CONFIGS: dict[bytes, CursorConfig] = {}
"""cursor configurations by the bytes of their catalog map (:meth:`Catalog._cursor_config`)"""
_CONFIGS_MOST = 1024


def _cursor_key(tid: int, name: str) -> bytes:
    """A cursors key: the topic id, then the cursor's name key."""
    return _U64.pack(tid) + name_key(name)


def _show(key: bytes) -> str:
    text = key.decode(errors="replace")
    return repr(text if len(text) <= 80 else text[:77] + "...")
