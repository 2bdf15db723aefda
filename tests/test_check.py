"""ackstore.check finds every planted fault; check(fix=True) leaves a clean store at the newest intact marker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, check
from ackstore.storage.records import RECORD_LEDGER

from . import rawlog
from .store_state import sealed_two_open_one
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
    seqs = {seq for seq, _ in rawlog.records(store_path)}
    records_now = len(seqs)
    findings = check(store_path)
    for f in findings:  # each names its record and says what is wrong with it
        if f.kind == "corrupt-record":
            assert f.message == "record checksum mismatch" and f.seq in seqs, f
        elif f.kind == "broken-marker":
            assert f.seq in markers and f.message.startswith(f"marker {f.seq}: "), f
        elif f.kind == "no-intact-marker":
            want = f"{records_now} records but no intact marker: recovery starts the cursor empty"
            assert (f.seq, f.message) == (-1, want), f
    # LMDB copies a page on write, so an older page may still hold an intact copy of what
    # was damaged: the page-level scan then says so (hidden-marker), and salvage can use it
    assert expected_kinds <= {f.kind for f in findings} <= expected_kinds | {"hidden-marker"}, findings
    assert all(f.topic == T and f.cursor == "c" for f in findings)
    before = len(rawlog.records(store_path))
    fixed = check(store_path, fix=True)
    assert [f.kind for f in fixed] == [f.kind for f in findings] and all(f.fixed for f in fixed)
    # each says how: the marker it rolled back to, the log's records before and after, and
    # (on the cursor's first finding) how many newer flushes' acks are lost
    after = len(rawlog.records(store_path))
    back = {"every-marker": "no intact marker: cursor reset", "garbage": f"rolled back to marker {markers[-1]}"}
    lost = {"every-marker": len(markers), "garbage": 0}.get(fault, 1)
    how = back.get(fault, f"rolled back to marker {markers[-2]}") + f"; log rewritten {before} -> {after} records"
    if lost:
        how += f"; the acks of {lost} newer flush(es) are lost and their messages will be redelivered"
    assert [f.message for f in fixed] == [f"{f.message} ({how})" for f in findings]
    assert [f.lost for f in fixed] == [lost] + [0] * (len(fixed) - 1)
    assert all(str(f).endswith(f"({how}) [fixed]") for f in fixed)
    assert check(store_path) == []
    state = _recovered(store_path)
    if expected_state is None:
        assert state[1] == [] and state[0] == Position(1, -1)
    else:
        assert state == expected_state
    assert len(rawlog.markers(store_path)) == 1  # the log was rewritten: one full marker, live records only
    ledgers = {first.ledger for first, _ in state[1]} | {p.ledger for p in state[2]}
    assert len(rawlog.records(store_path)) == 1 + (len(ledgers) if layout == "marker" else 0)


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
    from ackstore import InvalidArgumentError

    _build(store_path)
    with AckStore.open(store_path, readonly=True) as store:
        assert check(store) == []
        with pytest.raises(InvalidArgumentError, match=r"check.fix=True. needs a writable store"):
            check(store, fix=True)


def _plant(path: Path, acks: list[Position], batch: Position | None = None) -> tuple[int, dict[int, int]]:
    """Topic ``t``: ledgers 1 and 2 sealed at 20 entries, 3 open; cursor ``c`` with ``acks``
    (and a partial batch: index 1 of 4 at ``batch``), one flush in the marker layout. Its
    marker's sequence, and each ledger's record's."""
    from ackstore.cursor.lane import set_state_bound

    before = set_state_bound(-1)
    try:
        with AckStore.open(path) as store:
            cur = sealed_two_open_one(store, "t", 20)
            cur.ack(acks)
            if batch is not None:
                cur.ack_batch_index(batch, 4, [1])
            store.flush()
    finally:
        set_state_bound(before)
    (marker,) = rawlog.markers(path)
    records = [seq for seq, t in rawlog.records(path) if t == RECORD_LEDGER]
    from ackstore.storage.records import decode_ledger

    env = __import__("lmdb").open(str(path), max_dbs=8, readonly=True)
    with env.begin() as txn:
        db = env.open_db(b"log", txn=txn)
        by_ledger = {decode_ledger(txn.get(rawlog.log_key(0, seq), db=db))[0]: seq for seq in records}
    env.close()
    return marker, by_ledger


def _set_md(md: tuple[int, int]):  # type: ignore[no-untyped-def]
    def change(marker) -> None:  # type: ignore[no-untyped-def]
        marker.mark_delete = md

    return change


def _with_records(found: list[str], records: dict[int, int]) -> list[str]:
    """``found`` with each ``{L}`` the sequence of ledger L's record."""
    return [re.sub(r"\{(\d+)\}", lambda m: str(records[int(m.group(1))]), line) for line in found]


def _found(path: Path) -> list[str]:
    """What check says, a line a finding (its kind, the cursor, the record, what is wrong)."""
    return sorted(str(f) for f in check(path))


@pytest.mark.parametrize(
    "ack,count,found",
    [(10, 10, ["beyond-ledger-end: t/c record {1}: ack at 1:10 but the ledger has 10 entries"]), (9, 10, [])],
)
def test_beyond_a_ledgers_end_is_found_at_its_first_entry_past_it(
    store_path: Path, ack: int, count: int, found: list[str]
) -> None:
    """An ack at the entry count (the first entry past a sealed ledger's end) is a finding;
    one at the count less one is not."""
    _, records = _plant(store_path, [Position(1, 3), Position(1, ack)])
    rawlog.put_ledger_count(store_path, topic_id=0, ledger=1, count=count)
    assert _found(store_path) == _with_records(found, records)


@pytest.mark.parametrize(
    "md,found",
    [((2, 5), ["at-or-below-mark-delete: t/c record {2}: ack at 2:5 is at or below 2:5"]), ((2, 4), []), ((1, 19), [])],
)
def test_an_ack_at_the_mark_delete_position_is_found_and_one_past_it_is_not(
    store_path: Path, md: tuple[int, int], found: list[str]
) -> None:
    """Acks at 2:5 and 2:9 under a marker whose mark-delete position is 2:5 (a buggy writer's):
    the ack at M is a finding; with M at 2:4 (the ack at M + 1) or in the ledger before, none."""
    marker, records = _plant(store_path, [Position(2, 5), Position(2, 9)])
    rawlog.forge(store_path, marker, _set_md(md))
    assert _found(store_path) == _with_records(found, records)


@pytest.mark.parametrize(
    "dropped,found", [(2, ["unknown-ledger: t/c record {2}: acks in ledger 2, which the topic does not hold"]), (1, [])]
)
def test_acks_in_a_ledger_the_directory_lost_are_found(store_path: Path, dropped: int, found: list[str]) -> None:
    """The directory entry of the ledger holding acks gone (the ledgers around it kept): a
    finding; the entry of another ledger gone (the first: a trim), none."""
    _, records = _plant(store_path, [Position(2, 5), Position(2, 9)])
    rawlog.drop_ledger(store_path, topic_id=0, ledger=dropped)
    assert _found(store_path) == _with_records(found, records)


_TRIM_THEN_CRASH = """
import os, sys
from ackstore import AckStore, Position
from ackstore.cursor import lane
if sys.argv[2] == "marker":
    lane.set_state_bound(-1)
from tests.store_state import sealed_two_open_one
store = AckStore.open(sys.argv[1])
cur = sealed_two_open_one(store, "t", 20)
cur.ack([Position(1, 0), Position(1, 1), Position(1, 5), Position(2, 3)])
store.flush()
cur.topic.trim_ledgers(2)  # durable at once; the cursor's state (ledger 1 gone) at its next flush
os._exit(0)  # a crash before that flush
"""


@pytest.mark.parametrize("layout", ["state", "marker"])
def test_acks_in_a_ledger_trimmed_since_the_newest_flush_are_no_finding(store_path: Path, layout: str) -> None:
    """A trim is durable at once, the cursor's state at its next flush: a crash between
    them leaves a flushed state with acks in a ledger the directory no longer holds. That
    is no damage (an open drops them, as the writer did before the crash): check finds
    nothing, a reader's snapshot holds nothing of the trimmed ledger, and a reopen keeps
    what the flush held of the ledgers left."""
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    subprocess.run([sys.executable, "-c", _TRIM_THEN_CRASH, str(store_path), layout], check=True, cwd=root)
    assert check(store_path) == []
    with AckStore.open(store_path, readonly=True) as reader:
        snap = reader.topic("t").cursor("c").snapshot()
        assert [ledger for ledger, _ in snap.ranges] == [2], snap.ranges
    with AckStore.open(store_path) as store:
        cur = store.topic("t").cursor("c")
        assert cur.is_acked(Position(2, 3)) and not cur.is_acked(Position(2, 2))


@pytest.mark.parametrize(
    "md,dropped,found",
    [
        ((2, 3), 2, ["mark-delete-outside-directory: t/c: mark-delete 2:3 names no ledger of the topic"]),
        ((1, 3), 1, []),
    ],
)
def test_a_mark_delete_position_in_a_ledger_the_directory_lost_is_found(
    store_path: Path, md: tuple[int, int], dropped: int, found: list[str]
) -> None:
    """M in ledger 2, whose entry is gone while 1 and 3 stay: a finding. M in ledger 1, whose
    entry is gone as a trim takes it (the first ledger): none."""
    marker, _ = _plant(store_path, [Position(3, 5)])
    rawlog.forge(store_path, marker, _set_md(md))
    rawlog.drop_ledger(store_path, topic_id=0, ledger=dropped)
    assert _found(store_path) == found


@pytest.mark.parametrize(
    "how,found",
    [
        (how, ["bad-batch: t/c record {2}: partial batch at 2:7 is empty, full, or also acked whole"])
        for how in ("empty", "full", "acked")
    ]
    + [("partial", []), ("one-short", [])],
)
def test_a_batch_that_is_empty_full_or_acked_whole_is_found(store_path: Path, how: str, found: list[str]) -> None:
    """A ledger record whose partial batch at 2:7 has no index acked, every index, or whose
    entry is also acked whole (the marker counting its ranges so): a finding each; the
    partial batch as written (index 1 of 4), or one index short of full, none."""
    marker, records = _plant(store_path, [Position(2, 2)], batch=Position(2, 7))

    def change(acks) -> None:  # type: ignore[no-untyped-def]
        size = acks.batches[7][0]
        if how == "empty":
            acks.own_batches()[7] = (size, 0)
        elif how == "full":
            acks.own_batches()[7] = (size, (1 << size) - 1)
        elif how == "one-short":  # every index but the first: still partial
            acks.own_batches()[7] = (size, (1 << size) - 2)
        elif how == "acked":  # the bitmap alone: LedgerAcks.add would take the batch away, as it should
            acks.bitmap.add(7)
            acks.runs += 1

    rawlog.forge(store_path, records[2], change)
    if how == "acked":

        def runs(marker) -> None:  # type: ignore[no-untyped-def]
            entry = marker.index[2]
            marker.index[2] = entry._replace(runs=entry.runs + 1)

        rawlog.forge(store_path, marker, runs)
    assert _found(store_path) == _with_records(found, records)


def _plant_counter(path: Path, key: bytes, how: str) -> None:
    """The meta catalog's id counter ``key`` with a bit flipped (``how="flip"``), or intact
    at 0 (``"low"``)."""
    import struct
    import zlib

    import lmdb

    env = lmdb.open(str(path), max_dbs=8)
    try:
        db = env.open_db(b"meta", create=False)
        with env.begin(write=True) as txn:
            raw = bytearray(txn.get(key, db=db))
            if how == "flip":
                raw[7] ^= 1
            else:
                raw = bytearray(struct.pack(">QI", 0, zlib.crc32(key + struct.pack(">Q", 0))))
            txn.put(key, bytes(raw), db=db)
    finally:
        env.close()


@pytest.mark.parametrize("key", [b"next_cursor", b"next_topic"])
def test_check_finds_a_damaged_or_too_low_id_counter(tmp_path: Path, key: bytes) -> None:
    """A flipped bit in an id counter (the next ``cursor()`` or ``topic()`` would fail), or
    one intact but not above an id in use (it would hand out an id records carry)."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.cursor("a")
        topic.cursor("b")
    assert check(path) == []
    for value in ("flip", "low"):
        _plant_counter(path, key, value)
        found = check(path)
        assert [(f.kind, f.topic, f.cursor) for f in found] == [("corrupt-catalog", "", "")], found
        assert key.decode() in found[0].message


def test_a_ledger_holding_only_a_partial_batch_is_checked_clean(store_path: Path) -> None:
    """A ledger whose record holds a partial batch and no whole acks is read and checked
    like any other: nothing is wrong, so nothing is found."""
    marker, records = _plant(store_path, [Position(1, 3)], batch=Position(2, 5))
    assert set(records) == {1, 2} and marker > max(records.values())
    assert check(store_path) == []


def test_fix_rolls_back_only_the_damaged_cursor_to_its_first_marker_and_says_so(store_path: Path) -> None:
    """Two topics each with a cursor ``c`` (the damaged one keeps history) and a healthy
    cursor beside them: a fix rewrites the damaged cursor alone, back to its first marker
    (sequence 0), and each of its findings says so, the history it dropped and the one flush
    lost; the other cursors' logs are left byte for byte."""
    with AckStore.open(store_path) as store:
        cursors = []
        for name, config in (("a", CursorConfig(history_seconds=3600)), ("b", None)):
            topic = store.topic(f"persistent://t/ns/{name}")
            topic.add_ledger(1)
            cursors += [topic.cursor("c", config), topic.cursor("healthy")]
        for e in (3, 5):
            for cur in cursors:
                cur.ack([Position(1, e)])
            store.flush()
        damaged, others = cursors[0].cursor_id, [cur.cursor_id for cur in cursors[1:]]
    markers = rawlog.markers(store_path, damaged)
    assert markers[0] == 0 and len(markers) == 2
    before = {cid: rawlog.sizes(store_path, cid) for cid in others}
    records = len(rawlog.records(store_path, damaged))
    rawlog.damage(store_path, markers[-1], damaged)
    fixed = check(store_path, fix=True)
    assert {(f.topic, f.cursor) for f in fixed} == {("persistent://t/ns/a", "c")} and all(f.fixed for f in fixed)
    how = (
        f"rolled back to marker 0; log rewritten {records} -> 1 records; its history was dropped (it starts again "
        "at the next flush); the acks of 1 newer flush(es) are lost and their messages will be redelivered"
    )
    assert all(f.message.endswith(f" ({how})") for f in fixed), [f.message for f in fixed]
    assert sorted(f.lost for f in fixed) == [0] * (len(fixed) - 1) + [1]
    assert {cid: rawlog.sizes(store_path, cid) for cid in others} == before
    assert check(store_path) == []


def test_fix_of_two_cursors_of_one_name_says_each_ones_own_rollback(store_path: Path) -> None:
    """Cursor ``c`` of two topics, both damaged at their newest marker, one with three flushes
    and one with two: each finding names its own cursor's rollback (marker 1 and marker 0),
    not the other's of the same name; a finding no rewrite fixes (an id counter too low)
    comes back as it was found."""
    history = CursorConfig(history_seconds=3600)
    with AckStore.open(store_path) as store:
        cursors = []
        for name in ("a", "b"):
            topic = store.topic(f"persistent://t/ns/{name}")
            topic.add_ledger(1)
            cursors.append(topic.cursor("c", history))
        for e in (3, 5, 7):
            for cur in cursors[: 1 if e == 7 else 2]:
                cur.ack([Position(1, e)])
            store.flush()
        ids = [cur.cursor_id for cur in cursors]
    for cid in ids:
        rawlog.damage(store_path, rawlog.markers(store_path, cid)[-1], cid)
    _plant_counter(store_path, b"next_topic", "low")
    fixed = check(store_path, fix=True)
    (counter,) = [f for f in fixed if not f.fixed]
    assert (counter.kind, counter.topic, counter.cursor) == ("corrupt-catalog", "", "")
    assert counter.message.startswith("the meta key next_topic is 0, not above id ")
    said = {(f.topic, re.findall(r"\((rolled back to marker \d+);", f.message)[-1]) for f in fixed if f.fixed}
    assert said == {
        ("persistent://t/ns/a", "rolled back to marker 1"),
        ("persistent://t/ns/b", "rolled back to marker 0"),
    }
    assert [f.kind for f in check(store_path)] == ["corrupt-catalog"]  # the counter is the only finding left


def test_fix_refuses_a_rewrite_that_would_not_read_back(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repair's rewrite is recovered inside its own transaction before it commits: one
    whose new marker would not read back (planted: a flipped byte) is refused, every finding
    says so and is not fixed, and the store is as it was (the damage is still found)."""
    from ackstore.cursor.plan import Planner

    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(history_seconds=3600))
        for e in (3, 5):
            cur.ack([Position(1, e)])
            store.flush()
        cid = cur.cursor_id
    rawlog.damage(store_path, rawlog.markers(store_path, cid)[-1], cid)
    found = check(store_path)
    real = Planner.rewrite_plan

    def broken(self: Planner) -> object:
        plan = real(self)
        plan.marker = plan.marker[:-1] + bytes([plan.marker[-1] ^ 1])
        return plan

    monkeypatch.setattr(Planner, "rewrite_plan", broken)
    fixed = check(store_path, fix=True)
    assert [f.kind for f in fixed] == [f.kind for f in found] and not any(f.fixed for f in fixed)
    assert all("(not fixed: an in-place repair would not keep what open recovers (" in f.message for f in fixed)
    monkeypatch.setattr(Planner, "rewrite_plan", real)
    assert check(store_path) == found


def test_fix_of_a_cursor_whose_only_marker_is_damaged_loses_that_one_flush(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.cursor("c").ack([Position(1, 4)])
        store.flush()
    (marker,) = rawlog.markers(store_path)
    rawlog.damage(store_path, marker)
    fixed = check(store_path, fix=True)
    assert sorted(f.lost for f in fixed) == [0] * (len(fixed) - 1) + [1] and "no-intact-marker" in {
        f.kind for f in fixed
    }
    assert all("(no intact marker: cursor reset; " in f.message for f in fixed)
    assert all(
        f.message.endswith("the acks of 1 newer flush(es) are lost and their messages will be redelivered)")
        for f in fixed
    )


def _flip_catalog(path: Path, db_name: bytes, which: int = 0) -> bytes:
    """Flip a bit in the last byte of the ``which``-th value of catalog database
    ``db_name`` (its checksum no longer holds); returns its key."""
    import lmdb

    env = lmdb.open(str(path), max_dbs=8)
    try:
        db = env.open_db(db_name, create=False)
        with env.begin(write=True) as txn:
            key, raw = list(txn.cursor(db=db))[which]
            txn.put(key, raw[:-1] + bytes([raw[-1] ^ 1]), db=db)
        return bytes(key)
    finally:
        env.close()


def _two_topics(path: Path) -> None:
    with AckStore.open(path) as store:
        for name in ("a", "b"):
            topic = store.topic(name)
            topic.add_ledger(1)
            topic.close_ledger(1, 100)
            topic.add_ledger(2)
            for cursor in ("c", "d"):
                topic.cursor(cursor).ack([Position(1, 5)])
    assert check(path) == []


@pytest.mark.parametrize("db_name,which", [(b"topics", 1), (b"cursors", 3)])
def test_a_damaged_topic_or_cursor_entry_is_a_finding_of_the_store_and_the_rest_is_checked(
    tmp_path: Path, db_name: bytes, which: int
) -> None:
    """A catalog entry that fails its checksum is named by its key, as a finding of the store
    (its topic and cursor names are in the damaged entry); every other cursor is checked."""
    path = tmp_path / "s"
    _two_topics(path)
    _flip_catalog(path, db_name, which)
    seen: list[tuple[str, str]] = []
    found = check(path, progress=lambda t, c: seen.append((t, c)))
    assert [(f.kind, f.topic, f.cursor) for f in found] == [("corrupt-catalog", "", "")], found
    what = "topic" if db_name == b"topics" else "cursor"
    assert re.fullmatch(
        rf"store {re.escape(str(path))}: the catalog entry of {what} key .* is damaged \(.*\)", found[0].message
    )
    assert seen == ([("a", "c"), ("a", "d")] if what == "topic" else [("a", "c"), ("a", "d"), ("b", "c")])


def test_a_damaged_ledger_directory_entry_is_a_finding_of_its_topic(tmp_path: Path) -> None:
    """The topic cannot be loaded (its directory fails a checksum): one finding names the
    topic, its cursors are not checked, and the other topic's are."""
    path = tmp_path / "s"
    _two_topics(path)
    _flip_catalog(path, b"ledgers", 0)  # topic a's first ledger
    seen: list[tuple[str, str]] = []
    found = check(path, progress=lambda t, c: seen.append((t, c)))
    assert [(f.kind, f.topic, f.cursor) for f in found] == [("corrupt-catalog", "a", "")], found
    assert found[0].message.startswith(f"store {path}: the directory entry of ledger 1 of topic id 0 is damaged")
    assert seen == [("b", "c"), ("b", "d")]


def test_a_cursor_whose_intact_entry_holds_a_configuration_refused_is_a_finding_of_that_cursor(tmp_path: Path) -> None:
    """An entry whose checksum holds but whose configuration this release refuses: the
    finding names the topic and the cursor; the others are checked."""
    import lmdb
    import msgpack

    from ackstore.storage.catalog import RECORD_CURSOR, encode_record

    path = tmp_path / "s"
    _two_topics(path)
    env = lmdb.open(str(path), max_dbs=8)
    try:
        db = env.open_db(b"cursors", create=False)
        with env.begin(write=True) as txn:
            key = list(txn.cursor(db=db))[1][0]  # topic a's cursor d
            txn.put(key, encode_record(RECORD_CURSOR, msgpack.packb([0, "d", 1, {"max_deliveries": -1}])), db=db)
    finally:
        env.close()
    seen: list[tuple[str, str]] = []
    found = check(path, progress=lambda t, c: seen.append((t, c)))
    assert [(f.kind, f.topic, f.cursor) for f in found] == [("corrupt-catalog", "a", "d")], found
    assert found[0].message.startswith(f"store {path}: cursor 'd' has a configuration this ackstore refuses (")
    assert seen == [("a", "c"), ("b", "c"), ("b", "d")]
