"""Bad input: a typed error that names the value and what is allowed, and nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from ackstore import (
    AckStore,
    AckStoreError,
    CursorConfig,
    FormatVersionError,
    InvalidArgumentError,
    InvalidPositionError,
    InvalidTypeError,
    LedgerStateError,
    NotAStoreError,
    Position,
    ReadOnlyError,
    StoreClosedError,
    StoreLockedError,
    UnknownCursorError,
    UnknownLedgerError,
    UnknownTopicError,
)

from . import rawlog

T = "persistent://t/ns/err"


@pytest.fixture
def opened(store_path: Path):  # type: ignore[no-untyped-def]
    store = AckStore.open(store_path)
    topic = store.topic(T)
    for ledger in (3, 4):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 10)
    topic.add_ledger(5)
    topic.trim_ledgers(4)
    cur = topic.cursor("c")
    cur.ack([Position(4, 2), Position(5, 7)])
    cur.ack_batch_index(Position(5, 9), 4, [0])
    store.flush()
    yield store, topic, cur
    if not store.closed:
        store.close()


def _snapshot(cur):  # type: ignore[no-untyped-def]
    return cur.mark_delete_position, list(cur.ack_ranges()), cur.partial_batches(), cur.ack_range_count


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        ((-1, 0), InvalidArgumentError, ["ledger -1", "allowed 0.."]),
        ((1, -2), InvalidArgumentError, ["entry -2", "allowed -1.."]),
        ((1 << 63, 0), InvalidArgumentError, ["out of range"]),
        ((1, 1 << 32), InvalidArgumentError, ["entry 4294967296"]),
        (("1", 0), InvalidTypeError, ["ledger must be an int", "'1'"]),
        ((1, 2.0), InvalidTypeError, ["entry must be an int", "2.0"]),
    ],
)
def test_position_rejects(args: tuple[object, object], error: type[Exception], words: list[str]) -> None:
    with pytest.raises(error) as info:
        Position(*args)  # type: ignore[arg-type]
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize("text", ["7", "7:x", "a:b", "1:2:3", "-1:0"])
def test_position_parse_rejects(text: str) -> None:
    with pytest.raises(AckStoreError, match=text.split(":")[0] if text != "-1:0" else "ledger -1"):
        Position.parse(text)


def test_position_parse_and_order() -> None:
    assert Position.parse(" 7:5 ") == Position(7, 5)
    assert Position(7, -1) < Position(7, 0) < Position(8, -1)
    assert str(Position(7, 5)) == "7:5" and repr(Position(7, 5)) == "Position(7, 5)"
    assert len({Position(1, 1), Position(1, 1), (1, 1)}) == 1


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda c: c.ack([Position(4, 1), Position(9, 1)]), UnknownLedgerError, ["ledger 9", "4, 5"]),
        (lambda c: c.ack([Position(4, 1), (3, -1)]), InvalidPositionError, ["3:-1", "allowed entries 0.."]),
        (lambda c: c.ack_entries(3, [1, -1]), InvalidPositionError, ["3:-1"]),
        (lambda c: c.ack_batch_index(Position(3, 1), 0, [0]), InvalidArgumentError, ["batch_size 0"]),
        (lambda c: c.ack([Position(4, 1), Position(4, 10)]), InvalidPositionError, ["4:10", "0..9", "sealed"]),
        (lambda c: c.ack([Position(4, 10)]), InvalidPositionError, ["4:10", "0..9"]),
        (lambda c: c.ack([(4, 1), (4, -1)]), InvalidPositionError, ["4:-1", "allowed entries 0.."]),
        (lambda c: c.ack([(4, 1), (4, "x")]), InvalidTypeError, ["'x'"]),
        (lambda c: c.ack([(4, 1), 5]), InvalidTypeError, ["Position"]),
        (lambda c: c.ack(7), InvalidTypeError, ["iterable"]),
        (lambda c: c.ack_entries(4, [1, 10]), InvalidPositionError, ["4:10", "0..9"]),
        (lambda c: c.ack_entries(4, [1, -1]), InvalidPositionError, ["4:-1"]),
        (lambda c: c.ack_entries(4, [1, "x"]), InvalidTypeError, ["'x'"]),
        (lambda c: c.ack_entries(9, [1]), UnknownLedgerError, ["ledger 9"]),
        (lambda c: c.ack_cumulative(Position(4, 11)), InvalidPositionError, ["4:11"]),
        (lambda c: c.ack_cumulative("4:1"), InvalidTypeError, ["'4:1'"]),
        (lambda c: c.ack_batch_index(Position(5, 1), 0, [0]), InvalidArgumentError, ["batch_size 0", "1.."]),
        (lambda c: c.ack_batch_index(Position(5, 1), 4, [1, 4]), InvalidArgumentError, ["index 4", "0..3"]),
        (lambda c: c.ack_batch_index(Position(5, 1), 4, [-1]), InvalidArgumentError, ["index -1", "0..3"]),
        (lambda c: c.ack_batch_index(Position(5, 9), 8, [1]), InvalidArgumentError, ["batch_size 8", "4"]),
        (lambda c: c.ack_batch_index(Position(5, 1), "4", [1]), InvalidTypeError, ["batch_size"]),
        (lambda c: c.set_property("", 1), InvalidTypeError, ["property key"]),
        (lambda c: c.set_property("k", 1 << 70), InvalidArgumentError, ["64-bit"]),
    ],
)
def test_cursor_rejects_and_writes_nothing(opened, call, error, words) -> None:  # type: ignore[no-untyped-def]
    store, _, cur = opened
    before = _snapshot(cur)
    with pytest.raises(error) as info:
        call(cur)
    for w in words:
        assert w in str(info.value)
    assert _snapshot(cur) == before
    assert not cur.dirty
    assert store.flush().bytes_written == 0


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda t: t.add_ledger(5), LedgerStateError, ["ledger 5", "increase", "5"]),
        (lambda t: t.add_ledger(6), LedgerStateError, ["ledger 5 is still open"]),
        (lambda t: t.add_ledger(-6), InvalidArgumentError, ["ledger -6"]),
        (lambda t: t.close_ledger(4, 20), LedgerStateError, ["already sealed"]),
        (lambda t: t.close_ledger(9, 20), LedgerStateError, ["no such ledger"]),
        (lambda t: t.close_ledger(5, 5), LedgerStateError, ["5:9", "entries >= 10"]),
        (lambda t: t.close_ledger(5, -1), LedgerStateError, ["entries must be an int in 0..4294967295"]),
        (lambda t: t.trim_ledgers(6), LedgerStateError, ["newest ledger 5"]),
        (lambda t: t.cursor(""), InvalidArgumentError, ["cursor name ''"]),
        (lambda t: t.cursor(3), InvalidTypeError, ["cursor name must be a str"]),
    ],
)
def test_topic_rejects_and_writes_nothing(opened, store_path, call, error, words) -> None:  # type: ignore[no-untyped-def]
    store, topic, _ = opened
    before = topic.ledgers()
    with pytest.raises(error) as info:
        call(topic)
    for w in words:
        assert w in str(info.value)
    assert topic.ledgers() == before
    store.close()
    with AckStore.open(store_path, readonly=True) as ro:
        assert ro.topic(T).ledgers() == before
        assert ro.topic(T).cursors() == ["c"]


def test_config_rejects() -> None:
    with pytest.raises(InvalidArgumentError, match="max_unacked_ranges_to_persist=-1"):
        CursorConfig(max_unacked_ranges_to_persist=-1)
    with pytest.raises(InvalidTypeError, match="must be a bool"):
        CursorConfig(dispatcher_pause_on_ack_state_persistent=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="full_marker_every=0"):
        CursorConfig(full_marker_every=0)


def test_a_configs_plain_dict_is_every_setting_in_order_and_reads_back() -> None:
    """What the catalog persists of a config: each setting by name, in the class's order, its
    value as set; ``from_obj`` reads back the equal config (the very object for a repeat)."""
    from dataclasses import fields

    config = CursorConfig(max_deliveries=5, history_seconds=60, dispatcher_pause_on_ack_state_persistent=True)
    obj = config.to_obj()
    assert list(obj.items()) == [(f.name, getattr(config, f.name)) for f in fields(CursorConfig)]
    assert obj["max_deliveries"] == 5 and obj["dispatcher_pause_on_ack_state_persistent"] is True
    again = CursorConfig.from_obj(obj)
    assert again == config and CursorConfig.from_obj(dict(obj)) is again
    obj["max_deliveries"] = 6  # (a plain dict of its own: the config does not change)
    assert config.max_deliveries == 5


def test_open_rejects_bad_options(store_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"map_size=10\b"):
        AckStore.open(store_path, map_size=10)
    with pytest.raises(InvalidTypeError, match="sync must be a bool"):
        AckStore.open(store_path, sync="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="flush_interval=0"):
        AckStore.open(store_path, flush_interval=0)
    assert not store_path.exists()


def test_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("hello")
    with pytest.raises(NotAStoreError, match="is a file"):
        AckStore.open(f)
    assert f.read_text() == "hello"


def test_nonempty_directory_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotAStoreError, match=r"notes\.txt"):
        AckStore.open(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_foreign_lmdb_is_not_a_store(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path / "other"))
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()
    with pytest.raises(NotAStoreError, match="not an ackstore store"):
        AckStore.open(tmp_path / "other")


def test_missing_path_readonly(tmp_path: Path) -> None:
    with pytest.raises(NotAStoreError, match="no store at"):
        AckStore.open(tmp_path / "nothing", readonly=True)
    assert not (tmp_path / "nothing").exists()


def test_newer_format_version(store_path: Path) -> None:
    AckStore.open(store_path).close()
    rawlog.set_format(store_path, 99)
    with pytest.raises(FormatVersionError, match=r"format version 99.*upgrade"):
        AckStore.open(store_path)


def test_second_writer_is_refused(store_path: Path) -> None:
    AckStore.open(store_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store_path), T], stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(StoreLockedError, match=rf"locked by another writer \(pid {holder.pid}\)"):
            AckStore.open(store_path)
        with AckStore.open(store_path, readonly=True) as ro:  # readers are welcome
            assert ro.topics() == [T]
    finally:
        holder.kill()
        holder.wait()
    AckStore.open(store_path).close()  # the lock died with its holder


def test_second_open_in_one_process_is_refused(store_path: Path) -> None:
    with AckStore.open(store_path):
        with pytest.raises(StoreLockedError, match="locked by another writer"):
            AckStore.open(store_path)
        with pytest.raises(StoreLockedError, match="already open in this process"):
            AckStore.open(store_path, readonly=True)


HOLD = """
import sys, time
from ackstore import AckStore
s = AckStore.open(sys.argv[1]); s.topic(sys.argv[2])
print("holding", flush=True); time.sleep(60)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}


def test_readonly_and_closed(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        store.topic(T).add_ledger(1)
        store.topic(T).cursor("c")
    with AckStore.open(store_path, readonly=True) as ro:
        with pytest.raises(UnknownTopicError, match="no topic 'nope'"):
            ro.topic("nope")
        with pytest.raises(UnknownCursorError, match="no cursor 'nope'"):
            ro.topic(T).cursor("nope")
        cur = ro.topic(T).cursor("c")
        assert ro.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=0)) is cur  # in memory only
        with pytest.raises(ReadOnlyError):
            cur.update_config(full_marker_every=5)
        with pytest.raises(ReadOnlyError):
            cur.ack([Position(1, 1)])
        with pytest.raises(ReadOnlyError):
            ro.topic(T).add_ledger(2)
    with pytest.raises(StoreClosedError):
        cur.ack([Position(1, 1)])
    with pytest.raises(StoreClosedError):
        ro.topic(T)


def test_reads_after_close_raise_whether_or_not_there_is_anything_to_read(tmp_path: Path) -> None:
    """As Pulsar's ManagedCursorTest#readFromClosedLedger expects: an error either way."""
    import asyncio

    from ackstore import Dispatcher, StoreClosedError
    from ackstore.testing import InMemoryLedgerReader

    store = AckStore.open(tmp_path / "s")
    topic = store.topic("t")
    topic.add_ledger(1)  # open, nothing written: nothing to read
    d = Dispatcher(topic.cursor("c"), InMemoryLedgerReader(topic))
    assert asyncio.run(d.read_more(2)) == []
    store.close()
    for read in (d.read_more, d.replay_read):
        with pytest.raises(StoreClosedError):
            asyncio.run(read(2))


def test_update_config_names_a_wrong_type_not_an_unknown_field(tmp_path: Path) -> None:
    from ackstore import InvalidTypeError

    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        with pytest.raises(InvalidTypeError, match="max_deliveries must be an int, got '2'"):
            cur.update_config(max_deliveries="2")
        with pytest.raises(InvalidArgumentError, match=r"unknown CursorConfig fields \['nope'\]"):
            cur.update_config(nope=1)
        assert cur.config.max_deliveries == 0
