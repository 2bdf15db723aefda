"""A restart of holey cursors: their ack state usable again, against unpickling the same
BitMaps.

What a user would otherwise write keeps each cursor's state as ``{ledger: BitMap}`` pickled
into one LMDB value; a restart unpickles every value (the baseline, the least work that holds
the state again). ackstore reopens the store (``verify="keys"``, the default) and every
cursor of the topic (``open_cursors``), then:

- ``every_ledger_decoded``: ``load="budget"`` with no budget: every ledger record read and
  decoded into memory at open;
- ``lazily_then_is_acked_everywhere``: the default lazy open, then one ``is_acked`` in every
  ledger of every cursor (each ledger decoded at first use);
- ``lazily``: the default lazy open alone (ledger records read and checked within the
  budget, none decoded);
- ``read_only_every_ledger_decoded``: as the first, by a reader (``readonly=True``).

A second group a shape times every cursor's ranges after a lazy reopen
(``ledger_ranges()``) against iterating the runs of the unpickled BitMaps.

Shapes (each a group): 1,000 cursors of one 50,000-entry ledger with 5% of its entries
unacked at random, or acked in alternating runs of 1 to 9 entries; 1,000 cursors of 10
ledgers of 5,000 entries with 5% holes; one cursor of 10,000 ledgers of 1,000 entries with 5%
holes. ``bytes``: the store's file against the pickles' (the baseline's).
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import pytest
from pyroaring import BitMap

from ackstore import AckStore, CursorConfig, Position
from ackstore.ledger_acks import run_bounds

T = "persistent://bench/ns/restart"
NO_BUDGET = CursorConfig(max_individual_ack_cache_bytes=1 << 40, max_unacked_ranges_to_persist=0)
MAP = 1 << 32


def _holes(rng: random.Random, n: int) -> BitMap:
    return BitMap(range(n)) - BitMap(rng.sample(range(1, n), n // 20))


def _runs(rng: random.Random, n: int) -> BitMap:
    out, at = BitMap(), 1
    while at < n:
        acked, unacked = rng.randrange(1, 10), rng.randrange(1, 10)
        out.add_range(at, min(at + acked, n))
        at += acked + unacked
    return out


#: shape: (cursors, ledgers a cursor, entries a ledger, the acks of a ledger)
SHAPES: dict[str, tuple[int, int, int, Callable[[random.Random, int], BitMap]]] = {
    "1,000 cursors x 1 ledger, 5% random holes": (1000, 1, 50_000, _holes),
    "1,000 cursors x 1 ledger, alternating runs": (1000, 1, 50_000, _runs),
    "1,000 cursors x 10 ledgers, 5% random holes": (1000, 10, 5_000, _holes),
    "1 cursor x 10,000 ledgers, 5% random holes": (1, 10_000, 1_000, _holes),
}


@pytest.fixture(scope="module", params=list(SHAPES))
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, int]:
    """The shape's store and the pickles of the same state: (shape, directory, ledgers)."""
    shape = request.param
    cursors, ledgers, entries, acks = SHAPES[shape]
    root = tmp_path_factory.mktemp("restart")
    rng = random.Random(7)
    values = []
    with AckStore.open(root / "store", sync=False, map_size=MAP) as store:
        topic = store.topic(T)
        for ledger in range(1, ledgers + 1):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, entries)
        topic.add_ledger(ledgers + 1)
        for c in range(cursors):
            cur = topic.cursor(f"c{c}", NO_BUDGET)
            state = {}
            for ledger in range(1, ledgers + 1):
                state[ledger] = acks(rng, entries)  # entry 0 unacked: M stays before ledger 1
                cur.ack_entries(ledger, state[ledger])
            values.append(pickle.dumps(state, protocol=5))
            if c % 100 == 99:
                store.flush()
        store.flush()
    env = lmdb.open(str(root / "pickles"), map_size=MAP)
    with env.begin(write=True) as txn:
        txn.cursor().putmulti([(c.to_bytes(8, "big"), v) for c, v in enumerate(values)])
    env.close()
    return shape, root, ledgers


def _size(path: Path) -> int:
    return (path / "data.mdb").stat().st_size


def _unpickle(root: Path) -> int:
    env = lmdb.open(str(root / "pickles"), map_size=MAP, readonly=True, lock=False)
    with env.begin() as txn:
        states = [pickle.loads(v) for _, v in txn.cursor()]
    env.close()
    return len(states)


def _decoded(root: Path, readonly: bool = False) -> int:
    with AckStore.open(root / "store", load="budget", readonly=readonly, map_size=MAP) as store:
        return len(store.topic(T).open_cursors(NO_BUDGET))


def _lazily_then_is_acked(root: Path, ledgers: int) -> int:
    with AckStore.open(root / "store", map_size=MAP) as store:
        cursors = store.topic(T).open_cursors(NO_BUDGET)
        for cur in cursors.values():
            for ledger in range(1, ledgers + 1):
                cur.is_acked(Position(ledger, 17))
        return len(cursors)


def _lazily(root: Path) -> int:
    with AckStore.open(root / "store", map_size=MAP) as store:
        return len(store.topic(T).open_cursors(NO_BUDGET))


def _unpickle_then_runs(root: Path) -> int:
    env = lmdb.open(str(root / "pickles"), map_size=MAP, readonly=True, lock=False)
    with env.begin() as txn:
        runs = sum(len(run_bounds(bm)) for _, v in txn.cursor() for bm in pickle.loads(v).values())
    env.close()
    return runs


def _ledger_ranges(root: Path) -> int:
    with AckStore.open(root / "store", map_size=MAP) as store:
        cursors = store.topic(T).open_cursors(NO_BUDGET)
        return sum(len(runs) for cur in cursors.values() for _, runs in cur.ledger_ranges())


CASES: dict[str, Callable[[Path, int], Any]] = {
    "unpickle_the_same_bitmaps_baseline": lambda root, ledgers: _unpickle(root),
    "every_ledger_decoded": lambda root, ledgers: _decoded(root),
    "lazily": lambda root, ledgers: _lazily(root),
    "lazily_then_is_acked_everywhere": _lazily_then_is_acked,
    "read_only_every_ledger_decoded": lambda root, ledgers: _decoded(root, readonly=True),
}
RANGES: dict[str, Callable[[Path], Any]] = {
    "unpickle_then_every_bitmaps_runs_baseline": _unpickle_then_runs,
    "ledger_ranges_of_every_cursor": _ledger_ranges,
}


@pytest.mark.parametrize("case", list(CASES))
def test_restart(benchmark: Any, built: tuple[str, Path, int], case: str) -> None:
    shape, root, ledgers = built
    benchmark.group = f"restart: {shape}"
    benchmark.pedantic(lambda: CASES[case](root, ledgers), rounds=5, warmup_rounds=1)
    baseline = case.endswith("_baseline")
    benchmark.extra_info.update(baseline=baseline, bytes=_size(root / ("pickles" if baseline else "store")))


@pytest.mark.parametrize("case", list(RANGES))
def test_restart_ranges(benchmark: Any, built: tuple[str, Path, int], case: str) -> None:
    """Every cursor's ranges after a reopen (``ledger_ranges()``), against iterating the runs
    of the unpickled BitMaps (``run_bounds``: pyroaring's shift and difference, in C)."""
    shape, root, _ = built
    benchmark.group = f"restart, every cursor's ranges: {shape}"
    benchmark.pedantic(lambda: RANGES[case](root), rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(baseline=case.endswith("_baseline"))
