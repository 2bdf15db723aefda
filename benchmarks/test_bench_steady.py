"""The steady broker workload (``steady.py``): a flush per round of every cursor, timed
alone (the round's acks are applied untimed, as the peers keep their state in memory),
with both peers in the same process on the same state. Each group is one size: 1,000 or
10,000 cursors, ``k`` acks a cursor a round, sync off or on.

The three engines are measured in the same rounds: each round applies the round's acks to
all three and flushes each, ackstore's flush being the case's target (pytest-benchmark
times it) and each peer's timed alone around it. So ackstore's time and the peers' are
medians over the same rounds on a machine in the same state, and the ratio against the
faster peer is taken round by round (the median of each round's ackstore flush over that
peer's flush of the same round): a shared machine whose speed drifts, between cases or
within one, moves both flushes of a round together, and the ratio stands. The order of the three
flushes rotates from round to round (each engine flushes first, second and last equally
often), because the engine that flushes right after the acks finds its state in the CPU's
caches. Each flush's CPU time (its thread's: not the wait for the disk a sync makes) is
taken too, and set against the peer of less CPU round by round in the same way. Besides
the times, per cursor a round: the write(2) bytes each engine handed the kernel, the
logical bytes (keys and values) and, for ackstore, the size of Pulsar's ``PositionInfo``
for the same state.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap

from ackstore.ledger_acks import run_end

from .conftest import bench_paired
from .kernel import wchar as _wchar
from .steady import ENGINES, AckstoreSteady, Steady, position_info_bytes

#: (cursors, k, sync) of each group
SIZES = [(n, k, sync) for n in (1000, 10_000) for k in (10, 50, 100) for sync in (False, True)]
WARM = 12  # untimed rounds first: held-back acks, holes and ledger records as the workload keeps them
PEERS = [name for name in ENGINES if name != "ackstore"]


@pytest.mark.parametrize("cursors,k,sync", SIZES, ids=[f"{n}x{k}-sync-{'on' if s else 'off'}" for n, k, s in SIZES])
def test_steady_flush(benchmark: Any, tmp_path: Path, cursors: int, k: int, sync: bool) -> None:
    state = Steady(cursors, k)
    engines = {name: ENGINES[name](tmp_path / name, state, sync) for name in ENGINES}
    ours = engines["ackstore"]
    times: dict[str, list[float]] = {name: [] for name in PEERS}
    cpu: dict[str, list[float]] = {name: [] for name in ENGINES}  # each flush's CPU time (its thread's)
    wchar = dict.fromkeys(ENGINES, 0)
    names = list(ENGINES)
    orders = [names[i:] + names[:i] for i in range(len(names))]  # each engine first, then in the middle, then last
    rounds = 24 if cursors <= 1000 else 15
    mark = 0  # the kernel's count as ackstore's flush began its round (0: none yet)
    after: list[str] = []  # the peers due after ackstore's flush of the round
    done = 0  # rounds set up

    def flush_peer(name: str) -> None:
        before = _wchar()
        started, spent = time.perf_counter(), time.thread_time()
        engines[name].flush()
        cpu[name].append(time.thread_time() - spent)
        times[name].append(time.perf_counter() - started)
        wchar[name] += _wchar() - before

    def flush_ours() -> None:
        spent = time.thread_time()
        ours.flush()
        cpu["ackstore"].append(time.thread_time() - spent)

    def round_setup() -> None:
        """The previous round's peers due after ackstore's flush; then this round's acks on
        every engine and the peers due before ackstore's flush (its place rotates)."""
        nonlocal mark, after, done
        if mark:
            wchar["ackstore"] += _wchar() - mark  # ackstore's flush of the previous round
        for name in after:
            flush_peer(name)
        order = orders[done % len(orders)]
        done += 1
        at = order.index("ackstore")
        after = order[at + 1 :]
        batches = state.step()
        for engine in engines.values():
            engine.ack(batches)
        for name in order[:at]:
            flush_peer(name)
        mark = _wchar()

    try:
        for _ in range(WARM):
            batches = state.step()
            for engine in engines.values():
                engine.ack(batches)
                engine.flush()
        benchmark.group = f"steady: {cursors:,} cursors, k={k}, sync {'on' if sync else 'off'}"
        benchmark.pedantic(flush_ours, setup=round_setup, rounds=rounds)
        wchar["ackstore"] += _wchar() - mark
        for name in after:
            flush_peer(name)
        info = sum(position_info_bytes((1, state.md[c]), state.ranges(c)) for c in range(cursors)) / cursors
        # each round's ackstore flush against the faster peer's flush of the same round
        faster = min(PEERS, key=lambda name: statistics.median(times[name]))
        leaner = min(PEERS, key=lambda name: statistics.median(cpu[name]))  # the peer of less CPU
        mine = benchmark.stats.stats.data
        assert len(mine) == len(times[faster]) == len(cpu["ackstore"]) == len(cpu[leaner]) == rounds
        benchmark.extra_info.update(
            paired=statistics.median(ours_t / peer_t for ours_t, peer_t in zip(mine, times[faster], strict=True)),
            paired_cpu=statistics.median(o / p for o, p in zip(cpu["ackstore"], cpu[leaner], strict=True)),
            cpu=statistics.median(cpu["ackstore"]),
            bytes=ours.logical,
            wchar=wchar["ackstore"] // rounds,
            cursors=cursors,
            k=k,
            sync=sync,
            engine=ours.name,
            position_info=round(info, 1),
            peers={
                name: {
                    "engine": engines[name].name,
                    "median": statistics.median(times[name]),
                    "cpu": statistics.median(cpu[name]),
                    "wchar": wchar[name] // rounds,
                    "bytes": engines[name].logical,
                }
                for name in PEERS
            },
        )
    finally:
        for engine in engines.values():
            engine.close()


#: the reopen groups' workload: cursors, k, rounds flushed before the store is reopened
REOPEN = (1000, 50, 1000)


@pytest.fixture(scope="module")
def reopened(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The ackstore and pickle engines after REOPEN's rounds of one workload (in lockstep)."""
    cursors, k, rounds = REOPEN
    state = Steady(cursors, k)
    root = tmp_path_factory.mktemp("steady-reopen")
    engines = {name: ENGINES[name](root / name, state, False) for name in ("ackstore", "pickle")}
    for _ in range(rounds):
        batches = state.step()
        for engine in engines.values():
            engine.ack(batches)
            engine.flush()
    yield engines
    for engine in engines.values():
        engine.close()


@pytest.mark.parametrize(
    "case",
    [
        "pickle",
        "ackstore",
        "ackstore, every cursor read",
        "ackstore, read-only",
        "ackstore, read-only, every cursor read",
    ],
)
def test_steady_reopen(benchmark: Any, reopened: Any, case: str) -> None:
    """Reopen to a usable state after the steady workload ran: ackstore's bulk open (lazy),
    and then with every cursor's ranges read, by the writer and by a reader; the baseline
    unpickles every cursor's state (each of ackstore's rounds right after one of it:
    :func:`~benchmarks.conftest.bench_paired`)."""
    cursors, k, rounds = REOPEN
    engine = reopened["pickle" if case == "pickle" else "ackstore"]
    options = {"read_all": case.endswith("read"), "readonly": "read-only" in case} if case != "pickle" else {}
    benchmark.group = f"steady workload, reopen: {cursors:,} cursors, k={k}, after {rounds:,} flushes"
    if case == "pickle":
        benchmark.pedantic(engine.reopen, rounds=5)
    else:
        bench_paired(benchmark, lambda: engine.reopen(**options), reopened["pickle"].reopen, rounds=5)
    benchmark.extra_info.update(baseline=case == "pickle")


#: the ack groups' workloads: (cursors, k)
ACKS = [(1000, 10), (10_000, 10), (1000, 100)]


class _PeerAcks:
    """What a peer's developer writes to keep the steady state in memory (the pickle and
    SQLite engines keep exactly this): per cursor its mark-delete entry and a BitMap of the
    acks above it, a round's batch or-ed in, the mark-delete moved over the run at M + 1."""

    def __init__(self, cursors: int) -> None:
        self.md = [-1] * cursors
        self.acked = [BitMap() for _ in range(cursors)]

    def ack(self, batches: list[BitMap]) -> None:
        md, acked = self.md, self.acked
        for c, batch in enumerate(batches):
            mine = acked[c]
            mine |= batch
            m = md[c]
            if m + 1 in mine:
                m = run_end(mine, m + 1)
                mine.remove_range(0, m + 1)
                md[c] = m


@pytest.mark.parametrize("cursors,k", ACKS, ids=[f"{n}x{k}" for n, k in ACKS])
@pytest.mark.parametrize("case", ["python peer", "ackstore"])
def test_steady_acks(benchmark: Any, tmp_path: Path, cursors: int, k: int, case: str) -> None:
    """A round's acks of the steady workload, one BitMap a cursor (``ack_entries``), each
    cursor in the small form (its state flushed, untimed, after every round); the baseline
    keeps the same state in memory as a peer does (a BitMap and the mark-delete entry a
    cursor, in plain Python)."""
    state = Steady(cursors, k)
    engine: Any = _PeerAcks(cursors) if case == "python peer" else AckstoreSteady(tmp_path / "s", state, False)
    batches: list[BitMap] = []

    def round_setup() -> None:
        nonlocal batches
        if case == "ackstore":
            engine.flush()
        batches = state.step()

    try:
        for _ in range(WARM):
            round_setup()
            engine.ack(batches)
        if case == "ackstore":
            assert all(cur._core.small is not None for cur in engine.cursors), "a steady cursor out of the small form"
        benchmark.group = f"steady workload, a round's acks: {cursors:,} cursors, k={k}"
        benchmark.pedantic(lambda: engine.ack(batches), setup=round_setup, rounds=15 if cursors <= 1000 else 9)
        benchmark.extra_info.update(baseline=case == "python peer")
    finally:
        if case == "ackstore":
            engine.close()
