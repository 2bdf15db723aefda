"""A power-cut model for ``sync=False``: the data file copied byte for byte at random
instants while a writer flushes opens to the state of some earlier flush, never a mix
(or, if a copy caught a page half written, to a typed error that says so)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackstore import AckStore, AckStoreError

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

ROOT = Path(__file__).parent.parent
T = "persistent://t/ns/powercut"

WRITER = r"""
import json, random, sys
from ackstore import AckStore, Position
path, rounds = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
with AckStore.open(path, sync=False) as store:
    topic = store.topic(sys.argv[3])
    topic.add_ledger(1)
    cur = topic.cursor("c")
    print("ready", flush=True)
    for r in range(rounds):
        cur.ack([Position(1, rng.randrange(1, 5000)) for _ in range(20)])
        if r % 7 == 0:
            cur.ack_cumulative(Position(1, r))
        store.flush()
        state = [str(cur.mark_delete_position), [[str(a), str(b)] for a, b in cur.ack_ranges()]]
        print(json.dumps(state), flush=True)
"""


@pytest.mark.stress
def test_copies_taken_during_flushes_open_to_a_flushed_state(tmp_path: Path, long_run: bool) -> None:
    copies = 200 if long_run else 16
    rounds = 4000 if long_run else 400
    path = tmp_path / "store"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(rounds), T],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    rng = random.Random(20261123)
    taken = []
    for i in range(copies):
        time.sleep(rng.uniform(0.0, 0.02))
        dest = tmp_path / f"copy{i}"
        dest.mkdir()
        try:
            shutil.copyfile(path / "data.mdb", dest / "data.mdb")  # whatever bytes are there right now
        except FileNotFoundError:
            continue
        taken.append(dest)
        if child.poll() is not None:
            break
    out, _ = child.communicate(timeout=300)
    assert child.returncode == 0
    history = [json.loads(line) for line in out.splitlines() if line.startswith("[")]
    empty = ["1:-1", []]
    outcomes = {"flushed state": 0, "typed error": 0}
    for dest in taken:
        try:
            with AckStore.open(dest, readonly=True) as store:
                cur = store.topic(T).cursor("c")
                state = [str(cur.mark_delete_position), [[str(a), str(b)] for a, b in cur.ack_ranges()]]
        except AckStoreError:
            outcomes["typed error"] += 1
            continue
        assert state == empty or state in history, f"{dest.name}: a state no flush had"
        outcomes["flushed state"] += 1
    print(outcomes)
    assert outcomes["flushed state"] >= len(taken) // 2
