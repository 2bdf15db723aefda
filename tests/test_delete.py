"""Deleting a subscription (Pulsar's unsubscribe) and a whole topic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackstore import (
    AckStore,
    CursorConfig,
    CursorDeletedError,
    Position,
    ReadOnlyError,
    TopicDeletedError,
    check,
    testing,
)
from ackstore.storage.records import split_log_key, split_slot_key

T = "persistent://t/ns/delete"
ROOT = Path(__file__).parent.parent


def _topic(store: AckStore, name: str = T):  # type: ignore[no-untyped-def]
    topic = store.topic(name)
    if not topic.ledgers():
        topic.add_ledger(1)
        topic.close_ledger(1, 1000)
        topic.add_ledger(2)
    return topic


def _log_cursor_ids(store: AckStore) -> set[int]:
    storage = store.storage

    def ids(txn):  # type: ignore[no-untyped-def]
        return {(split_slot_key(k) or split_log_key(k))[0] for k, _ in txn.cursor(db=storage.log_db)}

    return storage.read(ids)  # type: ignore[no-any-return]


def test_delete_cursor_is_durable_and_the_name_opens_fresh(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        old = topic.cursor("sub", CursorConfig(full_marker_every=2))
        keep = topic.cursor("keep")
        old.ack([Position(1, e) for e in range(0, 500, 3)])
        old.set_property("k", 7)
        keep.ack([Position(1, 5)])
        store.flush()
        old_id = old.cursor_id
        assert old_id in _log_cursor_ids(store)
        assert topic.delete_cursor("sub") is True
        assert topic.delete_cursor("sub") is False  # nothing left to delete
        assert topic.cursors() == ["keep"]
        assert old_id not in _log_cursor_ids(store)  # its records went in the same transaction
        for call in (
            lambda: old.ack([Position(1, 1)]),
            lambda: old.ack(Position(1, 1)),
            lambda: old.ack_cumulative(Position(1, 1)),
            lambda: old.is_acked(Position(1, 0)),
            lambda: old.mark_delete_position,
            lambda: old.read_position,
            lambda: old.ack_range_count,
            lambda: list(old.ack_ranges()),
            lambda: old.stats(),
            lambda: old.set_property("k", 1),
        ):
            with pytest.raises(CursorDeletedError, match="was deleted"):
                call()
        testing.crash(store)  # durable when delete_cursor returned: no flush needed
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        assert topic.cursors() == ["keep"]
        assert list(topic.cursor("keep").ack_ranges()) == [(Position(1, 5), Position(1, 5))]
        fresh = topic.cursor("sub", initial_position="latest")  # a new cursor: nothing of the old one
        assert fresh.cursor_id != old_id
        assert fresh.properties == {} and fresh.ack_range_count == 0
        assert fresh.mark_delete_position == Position(2, -1)
        assert check(store) == []


def test_delete_topic_removes_its_cursors_directory_and_entry(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        other = _topic(store, "persistent://t/ns/other")
        a, b = topic.cursor("a"), topic.cursor("b")
        a.ack([Position(1, 3)])
        other.cursor("x").ack([Position(1, 4)])
        store.flush()
        ids = {a.cursor_id, b.cursor_id}
        assert store.delete_topic(T) is True
        assert store.delete_topic(T) is False
        assert store.topics() == ["persistent://t/ns/other"]
        assert not ids & _log_cursor_ids(store)
        for call in (lambda: topic.cursor("a"), topic.ledgers, topic.cursors, lambda: topic.add_ledger(9)):
            with pytest.raises(TopicDeletedError):
                call()
        with pytest.raises(CursorDeletedError):
            a.ack([Position(1, 1)])
    with AckStore.open(store_path) as store:
        assert store.topics() == ["persistent://t/ns/other"]
        fresh = store.topic(T)  # a new, empty topic
        assert fresh.ledgers() == [] and fresh.cursors() == []
        assert list(store.topic("persistent://t/ns/other").cursor("x").ack_ranges()) == [
            (Position(1, 4), Position(1, 4))
        ]


def test_deleting_needs_a_writer(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _topic(store).cursor("c")
    with AckStore.open(store_path, readonly=True) as store:
        with pytest.raises(ReadOnlyError):
            store.topic(T).delete_cursor("c")
        with pytest.raises(ReadOnlyError):
            store.delete_topic(T)


READER = r"""
import sys
from ackstore import AckStore, CursorConfig, CursorDeletedError
with AckStore.open(sys.argv[1], readonly=True) as store:
    cur = store.topic(sys.argv[2]).cursor("sub", CursorConfig(max_individual_ack_cache_bytes=0))
    print("ranges", cur.ack_range_count, flush=True)
    sys.stdin.readline()
    print("listed", store.topic(sys.argv[2]).cursors(), flush=True)
    try:
        list(cur.ack_ranges())  # its records are gone: the refresh finds the cursor deleted
        print("read")
    except CursorDeletedError as exc:
        print("deleted", type(exc).__name__)
"""


def test_a_reader_in_another_process_sees_it_gone(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        topic.cursor("sub").ack([Position(1, 3), Position(1, 9), Position(2, 4)])
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store_path), T],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert reader.stdout is not None and reader.stdin is not None
    assert reader.stdout.readline().split() == ["ranges", "3"]
    with AckStore.open(store_path) as store:
        assert store.topic(T).delete_cursor("sub")
    out, _ = reader.communicate("go\n", timeout=60)
    assert out.splitlines() == ["listed []", "deleted CursorDeletedError"]


@pytest.mark.stress
def test_deleting_and_recreating_cursors_keeps_the_file_bounded(store_path: Path, long_run: bool) -> None:
    """1,000 cursors deleted and created again, round after round: the freed pages are
    reused, so the file stops growing after the first rounds."""
    rounds = 100 if long_run else 25
    sizes = []
    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        for r in range(rounds):
            curs = [topic.cursor(f"sub-{i}") for i in range(1000)]
            for i, cur in enumerate(curs):
                cur.ack([Position(1, (i + r + k * 7) % 1000) for k in range(20)])
            store.flush()
            for i in range(1000):
                assert topic.delete_cursor(f"sub-{i}")
            sizes.append((store_path / "data.mdb").stat().st_size)
        assert topic.cursors() == []
    settled = sizes[min(3, rounds - 1)]
    assert sizes[-1] <= settled * 1.25, sizes  # bounded: no growth round after round
    assert sizes[-1] < 16 << 20


def _cli(*args: object, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )


@pytest.mark.slow
def test_cli_delete_cursor_and_topic(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        topic.cursor("a").ack([Position(1, 1)])
        topic.cursor("b")
    no = _cli("delete-cursor", store_path, T, "a", stdin="n\n")
    assert no.returncode == 1 and "aborted" in no.stderr
    silent = _cli("delete-cursor", store_path, T, "a", stdin="")  # no answer is a no
    assert silent.returncode == 1
    yes = _cli("delete-cursor", store_path, T, "a", stdin="y\n")
    assert yes.returncode == 0, yes.stderr
    assert "deleted cursor 'a'" in yes.stdout
    missing = _cli("delete-cursor", store_path, T, "a", "--yes")
    assert missing.returncode == 1 and "has no cursor 'a'" in missing.stdout
    listed = _cli("cursors", store_path, "--json")
    assert [r["cursor"] for r in json.loads(listed.stdout)] == ["b"]
    gone = _cli("delete-topic", store_path, T, "--yes", "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout) == {"deleted": True, "cursors": 1}
    assert _cli("check", store_path).returncode == 0
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topics() == []


def test_delete_waits_for_a_flush_in_flight(store_path: Path) -> None:
    """A deletion takes the flush lock: a flush carrying the cursor finishes first, and
    nothing it wrote of the cursor survives the deletion."""
    import threading

    with AckStore.open(store_path, sync=False) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        for ledger_entry in range(0, 1000, 2):
            cur.ack(Position(1, ledger_entry))
        flusher = threading.Thread(target=store.flush)
        flusher.start()
        time.sleep(0)
        topic.delete_cursor("c")
        flusher.join()
        assert topic.cursors() == [] and _log_cursor_ids(store) == set()


def test_deleting_a_cursor_leaves_the_next_cursors_first_record(store_path: Path, marker_layout: None) -> None:
    """A cursor's log ends where the next cursor's begins (its first record, sequence 0, is
    the first key past it): deleting the first cursor deletes its records alone."""
    from . import rawlog

    with AckStore.open(store_path) as store:
        topic = _topic(store)
        gone, kept = topic.cursor("gone"), topic.cursor("kept")
        for cur in (gone, kept):
            cur.ack([Position(1, e) for e in range(0, 60, 3)])
        store.flush()
        ids = gone.cursor_id, kept.cursor_id
        state = kept.snapshot()
    assert ids[1] == ids[0] + 1
    before = rawlog.sizes(store_path, ids[1])
    assert 0 in before and rawlog.sizes(store_path, ids[0])
    with AckStore.open(store_path) as store:
        assert store.topic(T).delete_cursor("gone") is True
    assert rawlog.sizes(store_path, ids[1]) == before and rawlog.sizes(store_path, ids[0]) == {}
    with AckStore.open(store_path, readonly=True) as store:
        assert store.topic(T).cursor("kept").snapshot() == state
    assert check(store_path) == []
