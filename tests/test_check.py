"""ackstore.check finds every planted fault; check(fix=True) leaves a clean store at the newest intact marker."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, check
from ackstore.storage.records import RECORD_LEDGER

from . import rawlog
from .test_recovery import T, _build, _state


def _recovered(path: Path):  # type: ignore[no-untyped-def]
    with AckStore.open(path, readonly=True) as store:
        return _state(store.topic(T).cursor("c"))


def test_clean_store_has_no_findings(store_path: Path) -> None:
    _build(store_path)
    assert check(store_path) == []


#: each fault on each layout it applies to (a state-layout log holds no ledger records)
FAULTS = [
    *[(f, "marker") for f in ("newest-marker", "ledger-record", "missing-record", "every-marker", "garbage")],
    *[(f, "state") for f in ("newest-marker", "every-marker")],
]


@pytest.mark.parametrize("fault,layout", FAULTS)
def test_planted_faults_are_found_and_fixed(
    store_path: Path, fault: str, layout: str, request: pytest.FixtureRequest
) -> None:
    if layout == "marker":
        request.getfixturevalue("marker_layout")
    states = _build(store_path, CursorConfig(full_marker_every=100))
    markers = rawlog.markers(store_path)
    ledger_records = [seq for seq, t in rawlog.records(store_path) if t == RECORD_LEDGER]
    if fault == "newest-marker":
        rawlog.damage(store_path, markers[-1])
        expected_kinds, expected_state = {"corrupt-record", "broken-marker"}, states[-2]
    elif fault == "ledger-record":
        rawlog.damage(store_path, ledger_records[-1])
        expected_kinds, expected_state = {"corrupt-record", "broken-marker"}, states[-2]
    elif fault == "missing-record":
        rawlog.damage(store_path, ledger_records[-1], how="delete")
        expected_kinds, expected_state = {"broken-marker"}, states[-2]
    elif fault == "every-marker":
        for seq in markers:
            rawlog.damage(store_path, seq)
        expected_kinds, expected_state = {"corrupt-record", "broken-marker", "no-intact-marker"}, None
    else:  # a superseded record nobody needs any more
        rawlog.damage(store_path, ledger_records[1])
        expected_kinds, expected_state = {"corrupt-record"}, states[-1]
    findings = check(store_path)
    # LMDB copies a page on write, so an older page may still hold an intact copy of what
    # was damaged: the page-level scan then says so (hidden-marker), and salvage can use it
    assert expected_kinds <= {f.kind for f in findings} <= expected_kinds | {"hidden-marker"}, findings
    assert all(f.topic == T and f.cursor == "c" for f in findings)
    fixed = check(store_path, fix=True)
    assert [f.kind for f in fixed] == [f.kind for f in findings] and all(f.fixed for f in fixed)
    assert check(store_path) == []
    state = _recovered(store_path)
    if expected_state is None:
        assert state[1] == [] and state[0] == Position(1, -1)
    else:
        assert state == expected_state
    assert len(rawlog.markers(store_path)) == 1  # the log was rewritten: one full marker, live records only
    assert len(rawlog.records(store_path)) <= 1 + 3


def test_invariant_faults_are_found(store_path: Path) -> None:
    """A state that reached disk outside the directory's rules is reported and fixed by the reconcile."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        cur.ack([Position(1, 5), Position(1, 50)])
        store.flush()
    # seal ledger 1 shorter than the persisted acks, behind the cursor's back (a buggy writer
    # would: a well-formed, checksummed directory entry)
    rawlog.put_ledger_count(store_path, topic_id=0, ledger=1, count=10)
    findings = check(store_path)
    assert [f.kind for f in findings] == ["beyond-ledger-end"]
    check(store_path, fix=True)
    assert check(store_path) == []
    assert _recovered(store_path)[1] == [(Position(1, 5), Position(1, 5))]


def test_check_on_an_open_store_and_readonly_fix_refused(store_path: Path) -> None:
    _build(store_path)
    with AckStore.open(store_path, readonly=True) as store:
        assert check(store) == []
        with pytest.raises(Exception, match="writable"):
            check(store, fix=True)


@pytest.mark.parametrize("key", [b"next_cursor", b"next_topic"])
def test_check_finds_a_damaged_or_too_low_id_counter(tmp_path: Path, key: bytes) -> None:
    """A flipped bit in an id counter (the next ``cursor()`` or ``topic()`` would fail), or
    one intact but not above an id in use (it would hand out an id records carry)."""
    import struct
    import zlib

    import lmdb

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.cursor("a")
        topic.cursor("b")
    assert check(path) == []
    for value in ("flip", "low"):
        env = lmdb.open(str(path), max_dbs=8)
        try:
            db = env.open_db(b"meta", create=False)
            with env.begin(write=True) as txn:
                raw = bytearray(txn.get(key, db=db))
                if value == "flip":
                    raw[7] ^= 1
                else:
                    raw = bytearray(struct.pack(">QI", 0, zlib.crc32(key + struct.pack(">Q", 0))))
                txn.put(key, bytes(raw), db=db)
        finally:
            env.close()
        found = check(path)
        assert [f.kind for f in found] == ["corrupt-catalog"], found
        assert key.decode() in found[0].message
