"""Reader processes running ``stat``, ``check`` and ``copy`` while a writer flushes: each sees
a consistent flushed state, ``check`` reports no false damage, and a reader killed with
-9 leaves no reader slot behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lmdb
import pytest

from ackstore import AckStore

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

ROOT = Path(__file__).parent.parent
T = "persistent://t/ns/readers"

WRITER = r"""
import json, sys, time
from ackstore import AckStore, Position
with AckStore.open(sys.argv[1], sync=False) as store, open(sys.argv[4], "w") as log:
    topic = store.topic(sys.argv[2])
    topic.add_ledger(1)
    cur = topic.cursor("c")
    store.flush()
    print("ready", flush=True)
    deadline = time.monotonic() + float(sys.argv[3])
    r = 0
    while time.monotonic() < deadline:
        cur.ack([Position(1, 3 * r + 1), Position(1, 3 * r + 2)])
        store.flush()
        log.write(json.dumps([str(cur.mark_delete_position), cur.ack_range_count]) + "\n")
        log.flush()
        r += 1
"""

HOLDER = r"""
import sys, time
from ackstore import AckStore
store = AckStore.open(sys.argv[1], readonly=True)
txn = store.storage.env.begin()  # a read transaction: a reader slot in the lock file
print("holding", flush=True)
time.sleep(60)
"""


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.stress
def test_readers_while_the_writer_flushes(tmp_path: Path, long_run: bool) -> None:
    path = tmp_path / "store"
    seconds = 30.0 if long_run else 4.0
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), T, str(seconds), str(tmp_path / "history")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    results = []
    i = 0
    while writer.poll() is None:
        check = _cli("check", path)
        stat = _cli("stat", path, "--json")
        copy = _cli("copy", path, tmp_path / f"snap{i}")
        results.append((check.returncode, check.stdout, stat.returncode, copy.returncode, stat.stderr + copy.stderr))
        i += 1
    writer.communicate(timeout=60)
    history = [json.loads(line) for line in (tmp_path / "history").read_text().splitlines()]
    assert writer.returncode == 0 and len(history) > 10 and results
    for n, (check_rc, check_out, stat_rc, copy_rc, errors) in enumerate(results):
        assert check_rc == 0, check_out  # no false damage (and no hidden marker) while a writer runs
        assert stat_rc == 0 and copy_rc == 0, errors
        with AckStore.open(tmp_path / f"snap{n}", readonly=True) as snap:
            cur = snap.topic(T).cursor("c")
            assert [str(cur.mark_delete_position), cur.ack_range_count] in [*history, ["1:-1", 0]]


def test_a_reader_killed_with_minus_nine_leaves_no_reader_slot(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with AckStore.open(path) as store:
        store.topic(T).add_ledger(1)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    env = lmdb.open(str(path), readonly=True, max_dbs=8)
    assert str(holder.pid) in env.readers()
    env.close()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    time.sleep(0.1)
    with AckStore.open(path) as store:  # opening clears the dead process's slot
        assert str(holder.pid) not in store.storage.env.readers()


def test_a_long_reader_is_shown_and_warned_about_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A reader process holding one read transaction while the writer flushes 150 times:
    LMDB keeps every page it sees (the file grows). The writer warns once when it holds
    back more than ``reader_warn_flushes``; ``stats()``, the metrics and ``ackstore stat``
    show its pid and how far behind it is; once it is gone, none is shown."""
    import logging

    from prometheus_client import CollectorRegistry, generate_latest

    from ackstore import Position
    from ackstore.metrics import AckStoreCollector

    path = tmp_path / "store"
    with AckStore.open(path, sync=False) as store:
        store.topic(T).add_ledger(1)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with AckStore.open(path, sync=False, reader_warn_flushes=100) as store, caplog.at_level(logging.WARNING):
            cur = store.topic(T).cursor("c")
            appeared = None  # the newest transaction when the WARNING came
            for e in range(150):
                cur.ack([Position(1, 2 * e)])
                store.flush()
                if appeared is None and any("has held transaction" in r.getMessage() for r in caplog.records):
                    appeared = int(store.storage.env.info()["last_txnid"])
            warned = [r.getMessage() for r in caplog.records if "has held transaction" in r.getMessage()]
            oldest_txn = store.stats().oldest_reader.txnid  # type: ignore[union-attr]
            assert appeared is not None and appeared - oldest_txn == 101  # the first flush past the 100 allowed
            assert warned == [
                f"ackstore: a reader of {path} (pid {holder.pid}) has held transaction {oldest_txn} for 101 flushes: "
                "LMDB cannot reuse the pages it sees, so the file grows until it ends its read transaction (a hung "
                "reader, a stopped 'ackstore copy'?)"
            ], warned
            oldest = store.stats().oldest_reader
            assert oldest is not None and oldest.pid == holder.pid and oldest.behind >= 150
            registry = CollectorRegistry()
            registry.register(AckStoreCollector(store))
            scrape = generate_latest(registry).decode()
            behind = next(x for x in scrape.splitlines() if x.startswith("ackstore_oldest_reader_transactions_behind "))
            assert float(behind.split()[1]) >= 150
            r = _cli("stat", path)
            assert r.returncode == 0 and f"oldest reader: pid {holder.pid}" in r.stdout, r.stdout + r.stderr
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()
            cur.ack([Position(1, 1)])
            store.flush()
            assert store.stats().oldest_reader is None
    finally:
        holder.kill()
        holder.wait()


def test_of_several_readers_the_oldest_is_shown_and_each_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two reader processes, the first holding its transaction from the start, the second
    from 150 flushes later: ``stats()``, the metric and ``ackstore stat`` name the first,
    exactly as far behind as the flushes since its transaction; each reader is warned
    about once, when it passes ``reader_warn_flushes``; when the first ends, the second is
    the oldest."""
    import logging

    from prometheus_client import CollectorRegistry, generate_latest

    from ackstore import Position
    from ackstore.metrics import AckStoreCollector
    from ackstore.readers import reader_slots

    path = tmp_path / "store"
    with AckStore.open(path, sync=False) as store:
        store.topic(T).add_ledger(1)
        store.topic(T).cursor("c")

    def hold() -> subprocess.Popen[str]:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        return holder

    first = hold()
    second = None
    try:
        with AckStore.open(path, sync=False, reader_warn_flushes=100) as store, caplog.at_level(logging.WARNING):
            cur = store.topic(T).cursor("c")
            for e in range(150):
                cur.ack([Position(1, 2 * e)])
                store.flush()
            second = hold()
            for e in range(150, 270):
                cur.ack([Position(1, 2 * e)])
                store.flush()
            env = store.storage.env
            held = {slot.pid: slot.txnid for slot in reader_slots(env)}
            last = int(env.info()["last_txnid"])
            assert held[second.pid] - held[first.pid] == 150
            warned = [r.getMessage() for r in caplog.records if "has held transaction" in r.getMessage()]
            assert sorted(m.split("(pid ")[1].split(")")[0] for m in warned) == sorted(
                [str(first.pid), str(second.pid)]
            ), warned
            oldest = store.stats().oldest_reader
            assert oldest is not None and (oldest.pid, oldest.txnid) == (first.pid, held[first.pid])
            assert oldest.behind == last - held[first.pid] == 270
            registry = CollectorRegistry()
            registry.register(AckStoreCollector(store))
            lines = generate_latest(registry).decode().splitlines()
            (behind,) = [x for x in lines if x.startswith("ackstore_oldest_reader_transactions_behind ")]
            assert float(behind.split()[1]) == 270.0
            r = _cli("stat", path)
            assert (
                r.returncode == 0
                and f"oldest reader: pid {first.pid}, sees transaction {held[first.pid]}, 270 " in (r.stdout)
            ), r.stdout + r.stderr
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
            cur.ack([Position(1, 1)])
            store.flush()
            oldest = store.stats().oldest_reader
            assert oldest is not None and oldest.pid == second.pid and oldest.behind == 121
    finally:
        for holder in (first, second):
            if holder is not None:
                holder.kill()
                holder.wait()
