"""A sequential read after a long acked run: ``Dispatcher.read_more(100)`` hops over the run
whole, so its cost stays flat as the run grows from 10 thousand to 10 million entries (the
10k case is the baseline)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ackstore import AckStore, Dispatcher
from ackstore.testing import InMemoryLedgerReader

GROUP = "read_more(100) past an acked run"
ROUNDS = 5


def _reader(path: Path, run: int) -> Any:
    store = AckStore.open(path, sync=False)
    topic = store.topic("persistent://bench/ns/reads")
    topic.add_ledger(1)
    topic.close_ledger(1, run + 1 + 100)
    cur = topic.cursor("c")
    cur.ack_entries(1, range(1, run + 1))  # entry 0 stays unacked: the mark-delete stays behind the run
    d = Dispatcher(cur, InMemoryLedgerReader(topic))
    d.add_consumer("x")
    return store, d


@pytest.mark.parametrize("run", [10_000, 1_000_000, 10_000_000])
def test_read_past_an_acked_run(benchmark: Any, tmp_path: Path, run: int) -> None:
    store, d = _reader(tmp_path / "s", run)
    got: list[int] = []
    benchmark.group = GROUP
    # each round starts over at entry 0 (rewind), so every read hops over the whole run
    benchmark.pedantic(lambda: got.append(len(asyncio.run(d.read_more(100)))), setup=d.rewind, rounds=ROUNDS)
    assert got == [100] * ROUNDS
    benchmark.extra_info.update(baseline=run == 10_000, ops=100)
    store.close()
