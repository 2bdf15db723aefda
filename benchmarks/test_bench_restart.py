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

A third pair of groups holds a restart flat in the number of cursors: 100,000 cursors of one
1,000-entry ledger with 5% holes opened once, against 1,000 such cursors opened 100 times
(the baseline: the same number of cursors opened), lazily and with every ledger decoded.

Shapes (each a group): 1,000 cursors of one 50,000-entry ledger with 5% of its entries
unacked at random, or acked in alternating runs of 1 to 9 entries; 1,000 cursors of 10
ledgers of 5,000 entries with 5% holes; one cursor of 10,000 ledgers of 1,000 entries with 5%
holes. ``bytes``: the store's file against the pickles' (the baseline's).

Each of ackstore's cases runs its baseline right before every round and reports the median
of the rounds' ratios ("paired" in the table): the unpickling baseline alone moved from 8 to
12 ms between runs on this shared machine, which two medians taken apart carry into the
ratio. Each side starts on a trimmed heap (``conftest.fresh_heap``), as a restart's new
process does: without it, what earlier groups left free made the same case read 0.11x or
0.17x by the order the groups ran in.
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

from .conftest import bench_paired

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
    """A case of the shape's group; each of ackstore's paired with the unpickling baseline
    run right before it (:func:`~benchmarks.conftest.bench_paired`)."""
    shape, root, ledgers = built
    benchmark.group = f"restart: {shape}"
    baseline = case.endswith("_baseline")
    run = lambda: CASES[case](root, ledgers)  # noqa: E731
    if baseline:
        benchmark.pedantic(run, rounds=5, warmup_rounds=1)
    else:
        bench_paired(benchmark, run, lambda: _unpickle(root), rounds=5)
    benchmark.extra_info.update(baseline=baseline, bytes=_size(root / ("pickles" if baseline else "store")))


@pytest.mark.parametrize("case", list(RANGES))
def test_restart_ranges(benchmark: Any, built: tuple[str, Path, int], case: str) -> None:
    """Every cursor's ranges after a reopen (``ledger_ranges()``), against iterating the runs
    of the unpickled BitMaps (``run_bounds``: pyroaring's shift and difference, in C)."""
    shape, root, _ = built
    benchmark.group = f"restart, every cursor's ranges: {shape}"
    baseline = case.endswith("_baseline")
    if baseline:
        benchmark.pedantic(lambda: RANGES[case](root), rounds=3, warmup_rounds=1)
    else:
        bench_paired(benchmark, lambda: RANGES[case](root), lambda: _unpickle_then_runs(root), rounds=3)
    benchmark.extra_info.update(baseline=baseline)


FLAT_ENTRIES, FEW, MANY = 1000, 1000, 100_000


def _flat_store(root: Path, cursors: int) -> Path:
    """A store of ``cursors`` cursors, each of one ``FLAT_ENTRIES``-entry ledger with 5% of
    its entries unacked at random."""
    rng = random.Random(7)
    with AckStore.open(root, sync=False, map_size=MAP) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, FLAT_ENTRIES)
        topic.add_ledger(2)
        for c in range(cursors):
            topic.cursor(f"c{c}", NO_BUDGET).ack_entries(1, _holes(rng, FLAT_ENTRIES))
            if c % 1000 == 999:
                store.flush()
        store.flush()
    return root


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("flat")
    return {n: _flat_store(root / str(n), n) for n in (FEW, MANY)}


def _open(path: Path, load: str) -> int:
    with AckStore.open(path, load=load, map_size=MAP) as store:
        return len(store.topic(T).open_cursors(NO_BUDGET))


@pytest.mark.parametrize("load", ["lazy", "budget"])
@pytest.mark.parametrize("case", ["a_thousand_cursors_opened_a_hundred_times_baseline", "a_hundred_thousand_once"])
def test_restart_flat(benchmark: Any, flat: dict[int, Path], load: str, case: str) -> None:
    """The same number of cursor opens, 100,000: one store of 100,000 cursors against one of
    1,000 opened 100 times; ``budget``: every ledger decoded at open."""
    opened = "lazily" if load == "lazy" else "every ledger decoded"
    benchmark.group = f"restart, flat in the cursors: 100,000 opened, {opened}"
    if case.endswith("_baseline"):
        run = lambda: sum(_open(flat[FEW], load) for _ in range(MANY // FEW))  # noqa: E731
    else:
        run = lambda: _open(flat[MANY], load)  # noqa: E731
    assert benchmark.pedantic(run, rounds=3, warmup_rounds=1) == MANY
    benchmark.extra_info.update(baseline=case.endswith("_baseline"))
