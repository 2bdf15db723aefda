"""Raw access to a store's record log, for planting faults the way a disk would."""

from __future__ import annotations

from pathlib import Path

import lmdb

from ackstore.records import RECORD_MARKER, log_key, record_type, split_log_key


def records(path: Path, cursor_id: int = 0) -> list[tuple[int, int]]:
    """``[(seq, type)]`` of one cursor's log, oldest first."""
    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False, subdir=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin() as txn:
            out = []
            for key, value in txn.cursor(db=db):
                cid, seq = split_log_key(key)
                if cid == cursor_id:
                    out.append((seq, record_type(value) or -1))
            return out
    finally:
        env.close()


def markers(path: Path, cursor_id: int = 0) -> list[int]:
    return [seq for seq, t in records(path, cursor_id) if t == RECORD_MARKER]


def damage(path: Path, seq: int, cursor_id: int = 0, how: str = "flip") -> None:
    """Flip a byte near the end of record ``seq`` (or delete it with ``how="delete"``)."""
    env = lmdb.open(str(path), max_dbs=8, subdir=path.is_dir(), lock=path.is_dir())
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            key = log_key(cursor_id, seq)
            value = txn.get(key, db=db)
            assert value is not None, f"no record {seq}"
            if how == "delete":
                txn.delete(key, db=db)
            else:
                raw = bytearray(value)
                raw[-2] ^= 0x5A
                txn.put(key, bytes(raw), db=db)
    finally:
        env.close()


def set_format(path: Path, version: int) -> None:
    """Write ``version`` as the store's format version, as another ackstore release would."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        meta = env.open_db(b"meta")  # outside the write transaction: LMDB has one writer
        with env.begin(write=True) as txn:
            txn.put(b"format", version.to_bytes(8, "big"), db=meta)
    finally:
        env.close()
