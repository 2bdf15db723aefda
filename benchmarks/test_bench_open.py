"""Open (recover) a large cursor under a small LRU byte budget, against loading it all.

The store holds one cursor over 2,000 ledgers of 5,000 entries with 10% random holes
(~0.9M ranges, ~4 MB of ack state in memory when all of it is loaded). Each round opens the store and the cursor
(back-to-front recovery to the newest marker, ``verify="keys"``) and closes it:

- baseline: ``load="budget"`` with an unlimited budget, every ledger decoded into memory;
- ackstore, ``load="budget"``: a 1 MiB budget, the newest records decoded until it is
  spent, the rest left on disk and checked to exist;
- ackstore, lazily (the default open): the same 1 MiB budget's records read and checked,
  none decoded, the rest checked to exist.

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


def _open(path: Path, budget: int, load: str = "budget") -> int:
    with AckStore.open(path, readonly=True, verify="keys", load=load) as store:
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


def test_open_lazily(benchmark, built: Path) -> None:
    held: list[int] = []
    benchmark.group = GROUP
    benchmark.pedantic(lambda: held.append(_open(built, 1 << 20, "lazy")), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(bytes=held[-1])
    assert held[-1] == 0


WALK_GROUP = "open: the structure walk of the default open"


@pytest.fixture(scope="module")
def many_cursors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,000 cursors of 50 scattered acks each over one 100,000-entry ledger."""
    from ackstore import Position

    path = tmp_path_factory.mktemp("walk") / "store"
    rng = random.Random(6)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100_000)
        topic.add_ledger(2)
        for i in range(1000):
            topic.cursor(f"c{i}").ack([Position(1, rng.randrange(100_000)) for _ in range(50)])
        store.flush()
    return path


def _open_all(path: Path, verify: str, budget: int) -> None:
    with AckStore.open(path, readonly=True, verify=verify) as store:
        topic = store.topic(T)
        cfg = CursorConfig(max_individual_ack_cache_bytes=budget)
        for name in topic.cursors():
            topic.cursor(name, cfg)


@pytest.mark.parametrize("store_kind", ["2,000 ledgers, 1 MiB budget", "1,000 cursors"])
@pytest.mark.parametrize("verify", ["loaded", "keys"])
def test_open_walked_or_trusted(benchmark, built: Path, many_cursors: Path, store_kind: str, verify: str) -> None:
    """The same open with the file trusted (``verify="loaded"``: no walk; the baseline) and
    walked first (``"keys"``, the default). The walk is O(pages) in Python."""
    path, budget = (built, 1 << 20) if store_kind.startswith("2,000") else (many_cursors, 3 << 20)
    benchmark.group = f"{WALK_GROUP}: {store_kind}"
    benchmark.pedantic(lambda: _open_all(path, verify, budget), rounds=7, warmup_rounds=1)
    benchmark.extra_info.update(baseline=verify == "loaded")
