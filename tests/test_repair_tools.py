"""The tools an operator reaches for never make things worse: salvage, compact, copy and
check --fix keep exactly the committed state of a healthy store (also one killed in the
middle of a flush), never bring back what a committed transaction replaced or deleted,
and every store they leave opens; the default open refuses damage instead of trusting it."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackstore import AckStore, CorruptStoreError, Position, check
from ackstore.salvage import salvage
from ackstore.storage.lmdb_file import read_metas

from .store_state import build_store, state_at

ROOT = Path(__file__).parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _seeds(long_run: bool, short: int, long: int) -> range:
    return range(long if long_run else short)


@pytest.mark.stress
def test_a_healthy_store_salvages_compacts_copies_and_fixes_to_exactly_itself(tmp_path: Path, long_run: bool) -> None:
    """Seeded stores with deleted cursors and topics, trimmed ledgers, changed configurations,
    names with '/', bounds, batches and 22-byte records: salvage gives exactly the committed
    state and says complete; compact, copy and check --fix leave a store that opens to it."""
    for seed in _seeds(long_run, 6, 40):
        work = tmp_path / str(seed)
        path = work / "s"
        expected = build_store(path, seed)
        report = salvage(path, work / "salvaged")
        assert state_at(work / "salvaged") == expected, seed
        assert report.complete and report.hidden_pages == 0 and report.damage == [], seed
        assert check(work / "salvaged") == []
        with AckStore.open(path) as store:
            store.copy(work / "copy.mdb")
            store.compact()
        assert state_at(path) == expected, seed
        assert state_at(work / "copy.mdb") == expected, seed
        assert check(path, fix=True) == [] and state_at(path) == expected, seed


def test_the_22_byte_record_comes_back(tmp_path: Path) -> None:
    """A ledger record of exactly 22 bytes is a log record, not a ledger-directory entry."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        t = store.topic("t")
        t.add_ledger(7)
        t.cursor("c").ack([Position(7, 6), Position(7, 16), Position(7, 60)])
    assert check(path) == []
    report = salvage(path, tmp_path / "new")
    assert report.complete
    assert state_at(tmp_path / "new") == state_at(path)


def test_a_file_shorter_than_its_last_page_number_opens(tmp_path: Path) -> None:
    """LMDB counts pages a transaction allocated and freed before it committed ("loose"
    pages) and never writes them: a healthy file can end short of the meta's last page.
    Made here by raising the last page number in both meta pages."""
    path = tmp_path / "s"
    expected = build_store(path, 3)
    raw = bytearray((path / "data.mdb").read_bytes())
    for meta in read_metas(path):
        off = meta.page * meta.page_size + 16 + 24 + 2 * 48  # header, magic..mapsize, two db records
        (last,) = struct.unpack_from("<Q", raw, off)
        struct.pack_into("<Q", raw, off, last + 3)
    (path / "data.mdb").write_bytes(bytes(raw))
    assert state_at(path) == expected
    assert check(path) == []
    with AckStore.open(path) as store:
        store.topic("persistent://t/ns/small3").cursor("c").ack([Position(7, 1)])
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "stat", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr


FLUSHER = r"""
import random, sys
from ackstore import AckStore, Position, CursorConfig
store = AckStore.open(sys.argv[1], sync=False)
t = store.topic("t")
if not t.ledgers():
    t.add_ledger(1)
curs = [t.cursor(f"c{i}", CursorConfig(full_marker_every=3)) for i in range(8)]
rng = random.Random(int(sys.argv[2]))
ready = False
while True:
    for cur in curs:
        cur.ack([Position(1, rng.randrange(1_000_000)) for _ in range(rng.randint(1, 300))])
    store.flush()
    if not ready:  # a kill from here on leaves a committed state to salvage, however busy the machine
        print("ready", flush=True)
        ready = True
"""


@pytest.mark.stress
def test_salvage_of_a_store_killed_mid_flush_is_its_committed_state(tmp_path: Path, long_run: bool) -> None:
    """kill -9 in the middle of flushes leaves the pages of a transaction that never
    committed in the file. Salvage (and check) must not take them for state: salvage gives
    what open gives, complete, whether or not a writer reopened the store since."""
    path = tmp_path / "s"
    script = tmp_path / "flusher.py"
    script.write_text(FLUSHER)
    for kill in _seeds(long_run, 6, 40):
        child = subprocess.Popen([sys.executable, str(script), str(path), str(kill)], stdout=subprocess.PIPE, env=ENV)
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        time.sleep(0.05 + 0.05 * (kill % 5))
        child.kill()
        child.wait()
        committed = state_at(path)
        assert check(path) == [], kill  # a crash is not damage
        out = tmp_path / f"salvaged{kill}"
        report = salvage(path, out)
        assert state_at(out) == committed, kill
        assert report.complete, kill
        shutil.rmtree(out)


KILLED = {
    "compact": [sys.executable, "-m", "ackstore.recovery", "compact", "{s}"],
    "check --fix": [sys.executable, "-m", "ackstore.recovery", "check", "--fix", "{s}"],
    "salvage": [sys.executable, "-m", "ackstore.recovery", "salvage", "{s}", "{out}"],
    "restore": [sys.executable, "-m", "ackstore.recovery", "restore", "{out}", "{dump}"],
}


@pytest.mark.stress
@pytest.mark.parametrize("tool", sorted(KILLED))
def test_kill_minus_nine_during_a_tool_leaves_stores_that_open(tmp_path: Path, tool: str, long_run: bool) -> None:
    """Killed at any moment, a writing tool leaves its store as before or as after (compact,
    check --fix: the same state either way) and its output absent or whole."""
    path = tmp_path / "s"
    expected = build_store(path, 11, flushes=30)
    dump = tmp_path / "dump.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "dump", str(path), "-o", str(dump)], cwd=ROOT, env=ENV
    )
    assert r.returncode == 0
    started = time.monotonic()  # one whole run first: the kills spread over its length
    whole = [a.format(s=path, out=tmp_path / "whole", dump=dump) for a in KILLED[tool]]
    assert subprocess.run(whole, cwd=ROOT, env=ENV, capture_output=True).returncode in (0, 1)
    length = time.monotonic() - started
    kills = _seeds(long_run, 5, 25)
    for kill in kills:
        out = tmp_path / f"out{kill}"
        argv = [a.format(s=path, out=out, dump=dump) for a in KILLED[tool]]
        child = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(length * (kill + 0.5) / len(kills))
        child.send_signal(signal.SIGKILL)
        child.wait()
        time.sleep(0.05)  # the tool's worker dies with it (it asked the kernel to)
        assert state_at(path) == expected, (tool, kill)
        if out.exists():  # the output appears whole or not at all
            assert state_at(out) == expected, (tool, kill)
        for leftover in tmp_path.glob(f"out{kill}.*"):
            shutil.rmtree(leftover)


def test_a_catalog_key_damaged_is_an_error_not_a_new_cursor(tmp_path: Path) -> None:
    """One flipped bit in a cursor's catalog key must not make cursor(name) create the
    cursor again, empty: the lookup that misses checks the topic's entries and refuses."""
    import lmdb

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        t = store.topic("t")
        t.add_ledger(1)
        for name in ("sub-0", "sub-1", "sub-2"):
            t.cursor(name).ack([Position(1, e) for e in range(0, 400, 2)])
    env = lmdb.open(str(path), max_dbs=8)
    db = env.open_db(b"cursors", create=False)
    with env.begin(write=True) as txn:  # the key moves (a flipped bit), the value stays
        key = next(k for k, _ in txn.cursor(db=db) if k.endswith(b"sub-1"))
        value = txn.get(key, db=db)
        txn.delete(key, db=db)
        txn.put(key[:-1] + b"9", value, db=db)
    env.close()
    with AckStore.open(path) as store:
        with pytest.raises(CorruptStoreError, match="sub-1"):
            store.topic("t").cursor("sub-1")
        with pytest.raises(CorruptStoreError):
            store.topic("t").cursors()


def test_a_newest_marker_disguised_as_a_ledger_record_is_a_reported_fallback(tmp_path: Path) -> None:
    """A flipped type byte makes the newest marker look like a ledger record: open falls back
    to the marker before it and says so (it checks every record newer than the one it uses)."""
    from . import rawlog

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        t = store.topic("t")
        t.add_ledger(1)
        cur = t.cursor("c")
        for i in range(4):
            cur.ack([Position(1, 10 * i + 1)])
            store.flush()
    newest = rawlog.markers(path, cursor_id=0)[-1]

    def disguise(raw: bytearray) -> None:
        raw[1] = 1  # type: marker -> ledger

    rawlog.edit(path, newest, disguise)
    with AckStore.open(path, readonly=True) as store:
        cur = store.topic("t").cursor("c")
        rec = cur.stats().recovery
        assert rec.markers_skipped == 1 and "may have been a newer marker" in rec.skipped_reasons[0]
        assert [r[0] for r in cur.ack_ranges()] == [Position(1, 1), Position(1, 11), Position(1, 21)]


def test_salvage_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    from ackstore import InvalidArgumentError, NotAStoreError

    junk = tmp_path / "junk.mdb"
    junk.write_bytes(b"not a store" * 4000)
    with pytest.raises(NotAStoreError):
        salvage(junk, tmp_path / "new")
    path = tmp_path / "s"
    build_store(path, 1)
    (tmp_path / "new.salvaging").mkdir()
    (tmp_path / "new.salvaging" / "keep-me").write_text("someone's file")
    with pytest.raises(InvalidArgumentError, match="salvaging exists"):
        salvage(path, tmp_path / "new")
    assert (tmp_path / "new.salvaging" / "keep-me").exists()
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "salvage", str(junk), str(tmp_path / "n2")], cwd=ROOT
    )
    assert r.returncode == 1 and not (tmp_path / "n2").exists()
