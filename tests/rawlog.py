"""Raw access to a store's record log, for planting faults the way a disk would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lmdb

from ackstore.storage.records import (
    RECORD_MARKER,
    log_entry,
    log_key,
    open_slot,
    record_type,
    slot_key,
    slot_seq,
    split_slot_key,
)


def _scan(path: Path, cursor_id: int) -> list[tuple[int, bytes, int]]:
    """``[(seq, record, bytes of key and value)]`` of one cursor's log, its state slots' too,
    oldest first: what :func:`records` and :func:`sizes` read."""
    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False, subdir=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin() as txn:
            out = []
            for key, value in txn.cursor(db=db):
                cid, seq, record = log_entry(key, value)
                if cid == cursor_id:
                    out.append((seq, bytes(record), len(key) + len(value)))
            return sorted(out)
    finally:
        env.close()


def records(path: Path, cursor_id: int = 0) -> list[tuple[int, int]]:
    """``[(seq, type)]`` of one cursor's log, its state slots' too, oldest first."""
    return [(seq, record_type(record) or -1) for seq, record, _ in _scan(path, cursor_id)]


def sizes(path: Path, cursor_id: int = 0) -> dict[int, int]:
    """``{seq: bytes}`` of one cursor's records (key and value), its state slots' too."""
    return {seq: size for seq, _, size in _scan(path, cursor_id)}


def lengths(path: Path, cursor_id: int = 0) -> dict[int, int]:
    """``{seq: bytes}`` of one cursor's records (the record alone: a state slot's without its
    seal), its state slots' too."""
    return {seq: len(record) for seq, record, _ in _scan(path, cursor_id)}


def slots(path: Path, cursor_id: int = 0) -> dict[int, int]:
    """``{slot: seq}`` of one cursor's state slots that hold a state."""
    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False, subdir=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin() as txn:
            out = {}
            for slot in (0, 1):
                key = slot_key(cursor_id, slot)
                value = txn.get(key, db=db)
                if value is not None:
                    out[slot] = open_slot(key, value)[0]
            return out
    finally:
        env.close()


def key_of(txn: lmdb.Transaction, db: object, seq: int, cursor_id: int = 0) -> bytes:
    """The key record ``seq`` is stored under: its log key, or the state slot holding it."""
    key = log_key(cursor_id, seq)
    if txn.get(key, db=db) is None:
        for slot in (0, 1):
            skey = slot_key(cursor_id, slot)
            value = txn.get(skey, db=db)
            if value is not None and slot_seq(value)[0] == seq:
                return skey
    return key


def markers(path: Path, cursor_id: int = 0) -> list[int]:
    return [seq for seq, t in records(path, cursor_id) if t == RECORD_MARKER]


def edit(path: Path, seq: int, change: Callable[[bytearray], None], cursor_id: int = 0) -> None:
    """Change record ``seq``'s bytes in place with ``change`` (a state slot's record, its
    sequence and check left as they are)."""
    env = lmdb.open(str(path), max_dbs=8, subdir=path.is_dir(), lock=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            key = key_of(txn, db, seq, cursor_id)
            value = txn.get(key, db=db)
            assert value is not None, f"no record {seq}"
            head = len(value) - len(open_slot(key, value)[1]) if split_slot_key(key) is not None else 0  # its head
            raw = bytearray(value[head:])
            change(raw)
            txn.put(key, value[:head] + bytes(raw), db=db)
    finally:
        env.close()


def damage(path: Path, seq: int, cursor_id: int = 0, how: str = "flip") -> None:
    """Flip a byte near the end of record ``seq`` (or delete it with ``how="delete"``)."""
    if how != "delete":

        def flip(raw: bytearray) -> None:
            raw[-2] ^= 0x5A

        edit(path, seq, flip, cursor_id)
        return
    env = lmdb.open(str(path), max_dbs=8, subdir=path.is_dir(), lock=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            key = key_of(txn, db, seq, cursor_id)
            assert txn.delete(key, db=db), f"no record {seq}"
    finally:
        env.close()


def set_format(path: Path, version: int) -> None:
    """Write ``version`` as the store's format version, as another ackstore release would.

    A newer release keeps the checksummed copy in step; an older one (1 or 2) had plain
    catalog values and no copy, so the catalog is rewritten in that form.
    """
    import struct
    import zlib

    import msgpack

    from ackstore.storage.catalog import CATALOG_CHECKSUMS_SINCE, Catalog

    env = lmdb.open(str(path), max_dbs=8)
    try:
        catalog = Catalog(env, path, create=False)  # outside the write transaction: LMDB has one writer
        with env.begin(write=True) as txn:
            meta = catalog.meta
            txn.put(b"format", version.to_bytes(8, "big"), db=meta)
            if version >= CATALOG_CHECKSUMS_SINCE:
                txn.put(
                    b"formatx",
                    struct.pack(">QI", version, zlib.crc32(b"formatx" + version.to_bytes(8, "big"))),
                    db=meta,
                )
                return
            topics = [(k, catalog.topic_entry(k, v)) for k, v in txn.cursor(db=catalog.topics_db)]
            cursors = [(k, catalog.cursor_entry(k, v)) for k, v in txn.cursor(db=catalog.cursors_db)]
            ledgers = [(k, catalog.ledger_entry(k, v)) for k, v in txn.cursor(db=catalog.ledgers_db)]
            counters = {k: catalog.counter_entry(k, txn.get(k, db=meta)) for k in (b"next_topic", b"next_cursor")}
            for key, (_, tid, last, _) in topics:
                txn.put(key, msgpack.packb({"id": tid, "last": last}), db=catalog.topics_db)
            for key, (_, _, cid, cfg) in cursors:
                txn.put(key, msgpack.packb({"id": cid, "cfg": cfg}), db=catalog.cursors_db)
            for key, count in ledgers:
                txn.put(key, struct.pack(">q", count), db=catalog.ledgers_db)
            for key, value in counters.items():
                txn.put(key, struct.pack(">Q", value), db=meta)
            txn.delete(b"formatx", db=meta)
    finally:
        env.close()


def put_ledger_count(path: Path, topic_id: int, ledger: int, count: int) -> None:
    """Write a well-formed directory entry for ``ledger`` (as a buggy writer would)."""
    from ackstore.storage.catalog import Catalog

    env = lmdb.open(str(path), max_dbs=8)
    try:
        catalog = Catalog(env, path, create=False)
        with env.begin(write=True) as txn:
            catalog.put_ledger(txn, topic_id, ledger, count)
    finally:
        env.close()


def node_offset(path: Path, seq: int, cursor_id: int = 0, db: bytes = b"log") -> int:
    """The file offset of the LMDB node header (``lo u16, hi u16, flags u16, ksize u16``) of
    record ``seq`` in its live leaf page of the log tree (``db``: of that tree, e.g. the
    history's points; LookupError: no such node)."""
    import struct

    from ackstore.storage.lmdb_file import data_file, survey, tree_name

    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False, subdir=path.is_dir())
    try:
        with env.begin() as txn:
            key = key_of(txn, env.open_db(db, create=False, txn=txn), seq, cursor_id)
    finally:
        env.close()
    sv = survey(path)
    assert sv.meta is not None and not sv.problems, sv.problems
    psize, raw = sv.meta.page_size, data_file(path).read_bytes()
    for pgno, tree in sv.leaf_tree.items():
        if tree != tree_name(db):
            continue
        off = pgno * psize
        (lower,) = struct.unpack_from("<H", raw, off + 12)
        for i in range((lower - 16) // 2):
            (ptr,) = struct.unpack_from("<H", raw, off + 16 + 2 * i)
            (ksize,) = struct.unpack_from("<H", raw, off + ptr + 6)
            if raw[off + ptr + 8 : off + ptr + 8 + ksize] == key:
                return off + ptr
    raise LookupError(f"no live node holds record {seq} of cursor {cursor_id}")


def patch_node(
    path: Path,
    seq: int,
    cursor_id: int = 0,
    *,
    flags: int | None = None,
    ksize: int | None = None,
    dsize: int | None = None,
    db: bytes = b"log",
) -> None:
    """Change the node header of record ``seq`` (of tree ``db``) in the file, as damage
    would: its flags, its key size, its data size (``lo | hi << 16``)."""
    import struct

    from ackstore.storage.lmdb_file import data_file

    at = node_offset(path, seq, cursor_id, db)
    with open(data_file(path), "r+b") as fh:
        fh.seek(at)
        lo, hi, old_flags, old_ksize = struct.unpack("<HHHH", fh.read(8))
        if dsize is not None:
            lo, hi = dsize & 0xFFFF, dsize >> 16
        fh.seek(at)
        fh.write(
            struct.pack("<HHHH", lo, hi, old_flags if flags is None else flags, old_ksize if ksize is None else ksize)
        )


def drop_ledger(path: Path, topic_id: int, ledger: int) -> None:
    """Remove ``ledger``'s directory entry and nothing else (as a buggy writer would)."""
    from ackstore.storage.catalog import _LEDGER_KEY, Catalog

    env = lmdb.open(str(path), max_dbs=8)
    try:
        catalog = Catalog(env, path, create=False)
        with env.begin(write=True) as txn:
            assert txn.delete(_LEDGER_KEY.pack(topic_id, ledger), db=catalog.ledgers_db), ledger
    finally:
        env.close()


def forge(path: Path, seq: int, change: Callable[[object], None], cursor_id: int = 0) -> None:
    """Decode record ``seq`` (a marker, or a ledger record's acks), let ``change`` edit it,
    and write it back well formed and checksummed, as a buggy writer would have written it."""
    from ackstore.storage.records import decode_ledger_owned, decode_marker, encode_ledger, encode_marker

    def rewrite(raw: bytearray) -> None:
        if record_type(bytes(raw)) == RECORD_MARKER:
            marker = decode_marker(bytes(raw), seq)
            change(marker)
            value = encode_marker(marker)
        else:
            ledger, acks, owner = decode_ledger_owned(bytes(raw))
            change(acks)
            value = encode_ledger(ledger, acks, owner)
        raw[:] = value

    edit(path, seq, rewrite, cursor_id)
