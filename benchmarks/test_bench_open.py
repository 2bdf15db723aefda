"""Open (recover) a large cursor under a small LRU byte budget, against loading it all.

The store holds one cursor over 2,000 ledgers of 5,000 entries with 10% random holes
(~0.9M ranges, ~4 MB of ack state in memory when all of it is loaded). Each round opens the store and the cursor
(back-to-front recovery to the newest marker, ``verify="keys"``) and closes it:

- baseline: an unlimited budget, every ledger decoded into memory;
- ackstore: a 1 MiB budget, the newest records loaded until it is spent, the rest left
  on disk and checked to exist.

``bytes`` is the ack state the open leaves in memory.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig

from .states import T, sealed_cursor

LEDGERS, ENTRIES = 2000, 5000
GROUP = "open: 2,000 ledgers, 10% holes"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("open") / "store"
    rng = random.Random(5)
    with AckStore.open(path, sync=False) as store:
        sealed_cursor(store, LEDGERS, ENTRIES, lambda ledger: [e for e in range(1, ENTRIES) if rng.random() >= 0.1])
    return path


def _open(path: Path, budget: int) -> int:
    with AckStore.open(path, readonly=True, verify="keys") as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=budget))
        return cur.stats().cache_bytes


def test_open_load_everything_baseline(benchmark, built: Path) -> None:
    held: list[int] = []
    benchmark.group = GROUP
    benchmark.pedantic(lambda: held.append(_open(built, 1 << 40)), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(baseline=True, bytes=held[-1])


def test_open_with_1mib_budget(benchmark, built: Path) -> None:
    held: list[int] = []
    benchmark.group = GROUP
    benchmark.pedantic(lambda: held.append(_open(built, 1 << 20)), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(bytes=held[-1])
    assert held[-1] <= 1 << 20
