"""Damage to the LMDB node header of a log record (its key size, flags or data size) is
found: by the default open (a CorruptStoreError, never a raw exception), by ``check`` (a
finding, never "clean"), and by salvage (never an older state called complete); and a
flush that cannot trim a damaged record still flushes every cursor."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ackstore import AckStore, CorruptStoreError, CursorConfig, Position, check
from ackstore.salvage import salvage

from . import rawlog
from .forms import end_form

T = "t"

#: (key size, flags, data size) changes the issue's campaign made; None keeps the field
VARIANTS = [
    *[{"ksize": k} for k in (17, 18, 20, 24, 32, 15, 8, 0, 272)],
    *[{"flags": f} for f in (1, 2, 4)],
    *[{"dsize": d} for d in ("-1", "+1", 0, 65535)],
]


def _build(path: Path) -> dict[str, int]:
    """Two cursors over three flushes; returns their cursor ids."""
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100_000)
        topic.add_ledger(2)
        a = topic.cursor("a", CursorConfig(full_marker_every=1))
        b = topic.cursor("b")
        for r in range(3):
            a.ack_entries(1, range(r * 1000 + 1, r * 1000 + 400, 3))
            b.ack([Position(1, r)])
            store.flush()
        return {"a": a.cursor_id, "b": b.cursor_id}


def _newest(path: Path, cid: int) -> int:
    return rawlog.records(path, cid)[-1][0]


def _damage(path: Path, cid: int, seq: int, change: dict[str, object]) -> tuple[int, int]:
    """Make the change to the node of ``cid``'s record ``seq``; its data size before and after."""
    import struct

    from ackstore.storage.lmdb_file import data_file

    at = rawlog.node_offset(path, seq, cid)
    raw = data_file(path).read_bytes()
    lo, hi, flags, _ = struct.unpack_from("<HHHH", raw, at)
    dsize = lo | hi << 16
    if "flags" in change:
        rawlog.patch_node(path, seq, cid, flags=flags | int(change["flags"]))  # type: ignore[call-overload]
    elif "ksize" in change:
        rawlog.patch_node(path, seq, cid, ksize=int(change["ksize"]))  # type: ignore[call-overload]
    else:
        d = change["dsize"]
        new = {"-1": dsize - 1, "+1": dsize + 1}.get(d, d)  # type: ignore[call-overload]
        rawlog.patch_node(path, seq, cid, dsize=new)
        return dsize, int(new)
    return dsize, dsize


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_node_header_damage_is_found_by_open_check_and_salvage(tmp_path: Path, change: dict[str, object]) -> None:
    path = tmp_path / "s"
    ids = _build(path)
    size, damaged = _damage(path, ids["a"], _newest(path, ids["a"]), change)
    for load in ("lazy", "budget"):
        for readonly in (True, False):
            try:
                store = AckStore.open(path, readonly=readonly, load=load)
            except CorruptStoreError as exc:  # the walk: the node's page is damaged
                assert "database 'log' page" in str(exc)
                continue
            # a size whose extent rounds to the same even bytes (a slot's value is a multiple
            # of 16 bytes long: one less): the record's own envelope fails instead, and
            # recovery says it fell back
            assert damaged != size and (damaged + 1) // 2 == (size + 1) // 2, "a damaged node passed the walk"
            with store:
                assert store.topic(T).cursor("a").stats().recovery.markers_skipped == 1
    assert check(path), "check called a store with a damaged node clean"
    report = salvage(path, tmp_path / "new")
    a = next(c for c in report.cursors if c.cursor == "a")
    assert not a.complete, f"salvage called cursor a complete at marker {a.marker_seq} ({a.ranges} ranges)"


def test_a_flush_that_cannot_trim_a_damaged_record_flushes_every_cursor(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """A store opened without the walk (``verify="loaded"``) whose older record of cursor
    ``a`` LMDB refuses to delete (node flag 0x02): the flushes that would trim it still
    write every cursor; ``a`` keeps its old records, and a WARNING names it."""
    path = tmp_path / "s"
    ids = _build(path)
    damaged = _newest(path, ids["a"]) - 1
    rawlog.patch_node(path, damaged, ids["a"], flags=0x02)
    with AckStore.open(path, verify="loaded") as store, caplog.at_level(logging.WARNING, "ackstore"):
        topic = store.topic(T)
        a, b = topic.cursor("a"), topic.cursor("b")
        for r in range(3, 8):
            end_form(a)  # (its parts' chain and trims)
            a.ack_entries(1, range(r * 1000 + 1, r * 1000 + 400, 3))
            b.ack([Position(1, r)])
            store.flush()
            # a trim that did not run does not tell the chain the log is clean of the record:
            # it is at or above the floor, or among what the chain knows a trim kept under it
            chain = a._core._planner.chain
            assert chain.floor <= damaged or damaged in chain.kept, (chain.floor, chain.kept)
    assert any("cursor t/a" in r.getMessage() and "cannot be trimmed" in r.getMessage() for r in caplog.records)
    with AckStore.open(path, readonly=True, verify="loaded") as store:
        topic = store.topic(T)
        assert topic.cursor("b").mark_delete_position == Position(1, 7)
        assert topic.cursor("a").ack_range_count == 8 * 133


def test_a_key_cut_short_in_the_log_is_a_finding_and_a_typed_error_never_a_raw_one(tmp_path: Path) -> None:
    """A node whose key size a disk changed leaves the log's tree a key that is no log key
    (15 bytes, sorting among a cursor's records): ``check`` names it as a finding of that
    cursor, an open reading it raises a typed error or recovers around it, and salvage
    keeps every cursor."""
    import lmdb

    from ackstore import AckStoreError
    from ackstore.storage.records import log_key

    path = tmp_path / "s"
    ids = _build(path)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        db = env.open_db(b"log", txn=txn, create=False)
        txn.put(log_key(ids["b"], 5)[:15], b"\x00" * 20, db=db)  # between a's records and b's
    env.close()
    for load in ("lazy", "budget"):
        try:
            with AckStore.open(path, readonly=True, load=load) as store:
                assert store.topic(T).cursor("b").mark_delete_position == Position(1, 2)
                store.topic(T).cursor("a")
        except AckStoreError as exc:
            assert "a log key of 15 bytes" in str(exc)
    findings = check(path)
    assert [(f.kind, f.cursor) for f in findings if "15 bytes" in f.message] == [("corrupt-record", "a")], findings
    report = salvage(path, tmp_path / "new")
    assert {c.cursor for c in report.cursors} == {"a", "b"}
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        assert store.topic(T).cursor("b").mark_delete_position == Position(1, 2)
