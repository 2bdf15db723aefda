"""Planting known faults into snapshots, so an audit can be shown to find exactly them.

Kinds: ``damaged-marker`` (a byte of a cursor's newest marker flipped), ``damaged-record``
(a byte of its newest ledger record flipped, in a snapshot that holds one; a store of
small cursors holds none, and then the newest state marker, which holds their ledgers, is
the record flipped), ``garbage-file`` (the snapshot overwritten
with bytes that are not an LMDB file), ``revived-cursor`` (a catalog entry for the
deleted ``unsubscribed`` cursor put back, as a repair that brought back a deleted
subscription would). Nothing is truncated: a short file under a memory
map can kill the reading process instead of raising.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import lmdb

from ackstore.errors import CorruptRecordError
from ackstore.storage.catalog import Catalog
from ackstore.storage.records import (
    RECORD_LEDGER,
    RECORD_MARKER,
    log_entry,
    record_type,
    slot_seq,
    split_slot_key,
)

from .workloads import UNSUBSCRIBED

__all__ = ["FAULT_KINDS", "plant_faults", "planted"]

FAULT_KINDS = ("damaged-marker", "damaged-record", "garbage-file", "revived-cursor")
PLANTED_FILE = "planted.json"


def _entries(txn: lmdb.Transaction, db: object) -> list[tuple[int, int, bytes, bytes]]:
    """``(cursor id, sequence, key, record)`` of every log entry (a state slot's record
    without its sequence and check)."""
    out = []
    for key, value in txn.cursor(db=db):
        try:
            cid, seq, record = log_entry(key, value)
        except CorruptRecordError:  # a state slot whose head does not check: no record to flip
            cid, seq, record = split_slot_key(key)[0], slot_seq(value)[0], b""  # type: ignore[index]
        out.append((cid, seq, key, bytes(record)))
    return out


def _flip_newest(path: Path, rtype: int) -> bool:
    """Flip a byte of the newest record of type ``rtype`` of the cursor with the highest id
    holding one (its record's checksum then fails)."""
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=8)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            found = [e for e in _entries(txn, db) if record_type(e[3]) == rtype]
            if not found:
                return False
            _, _, key, _ = max(found)
            raw = bytearray(txn.get(key, db=db))
            raw[-2] ^= 0x5A
            txn.put(key, bytes(raw), db=db)
            return True
    finally:
        env.close()


def _holds(path: Path, rtype: int) -> bool:
    """Whether the snapshot's log holds a record of type ``rtype``."""
    env = lmdb.open(str(path), subdir=False, lock=False, readonly=True, max_dbs=8)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin() as txn:
            return any(record_type(record) == rtype for _, _, _, record in _entries(txn, db))
    finally:
        env.close()


def _revive(path: Path) -> bool:
    """Put a catalog entry for the deleted ``unsubscribed`` cursor back (sharing the first
    cursor's log, so it recovers to a real state)."""
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=8)
    try:
        db = env.open_db(b"cursors", create=False)
        codec = Catalog.codec(path)
        with env.begin(write=True) as txn:
            first = next(iter(txn.cursor(db=db)), None)
            if first is None:
                return False
            tid, _, cid, cfg = codec.cursor_entry(*first)
            key, value = codec.cursor_item(tid, UNSUBSCRIBED, cid, cfg)
            txn.put(key, value, db=db)
        return True
    finally:
        env.close()


def plant_faults(outdir: Path, n: int, seed: int = 1) -> list[dict[str, Any]]:
    """Damage ``n`` random snapshots of ``outdir/snapshots``; record them in ``outdir/planted.json``."""
    snapshots = sorted((outdir / "snapshots").glob("*.mdb"))
    if not 0 <= n <= len(snapshots):
        raise ValueError(f"--plant-faults {n} is not allowed: allowed 0..{len(snapshots)} (the snapshots there)")
    rng = random.Random(seed)
    out = []
    chosen = rng.sample(snapshots, n)
    kinds = [FAULT_KINDS[i % len(FAULT_KINDS)] for i in range(n)]
    if "damaged-record" in kinds:  # a store of small cursors holds no ledger record: give it one that does
        i = kinds.index("damaged-record")
        holders = [j for j, path in enumerate(chosen) if _holds(path, RECORD_LEDGER)]
        if holders and i not in holders:
            j = holders[0]
            chosen[i], chosen[j] = chosen[j], chosen[i]
    for path, kind in zip(chosen, kinds, strict=True):
        if kind == "garbage-file":
            path.write_bytes(b"this is not an ackstore snapshot\n" * 64)
        elif kind == "revived-cursor":
            if not _revive(path):
                path.write_bytes(b"no cursor to revive\n" * 64)
                kind = "garbage-file"
        elif not (
            _flip_newest(path, RECORD_MARKER)
            if kind == "damaged-marker"
            else _flip_newest(path, RECORD_LEDGER) or _flip_newest(path, RECORD_MARKER)
        ):
            path.write_bytes(b"no record to damage\n" * 64)
            kind = "garbage-file"
        out.append({"spec_id": path.stem, "kind": kind})
    (outdir / PLANTED_FILE).write_text(json.dumps(out, indent=2))
    return out


def planted(outdir: Path) -> list[dict[str, Any]]:
    path = outdir / PLANTED_FILE
    return json.loads(path.read_text()) if path.exists() else []
