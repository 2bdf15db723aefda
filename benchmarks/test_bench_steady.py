"""The steady broker workload (``steady.py``): a flush per round of every cursor, timed
alone (the round's acks are applied untimed, as the peers keep their state in memory),
with both peers in the same process on the same state. Each group is one size: 1,000 or
10,000 cursors, ``k`` acks a cursor a round, sync off or on; its baseline is the pickled
state in LMDB. Besides the time, each case records per cursor a round: the write(2) bytes
the process handed the kernel, the logical bytes (keys and values) and, for ackstore, the
size of Pulsar's ``PositionInfo`` for the same state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .steady import ENGINES, Steady, position_info_bytes

#: (cursors, k, sync) of each group, and the rounds timed
SIZES = [(n, k, sync) for n in (1000, 10_000) for k in (10, 50, 100) for sync in (False, True)]
WARM = 12  # untimed rounds first: held-back acks, holes and ledger records as the workload keeps them


def _wchar() -> int:
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("wchar:"))


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("cursors,k,sync", SIZES, ids=[f"{n}x{k}-sync-{'on' if s else 'off'}" for n, k, s in SIZES])
def test_steady_flush(benchmark: Any, tmp_path: Path, engine: str, cursors: int, k: int, sync: bool) -> None:
    state = Steady(cursors, k)
    peer = ENGINES[engine](tmp_path / engine, state, sync)
    try:
        for _ in range(WARM):
            peer.ack(state.step())
            peer.flush()
        rounds = 12 if cursors <= 1000 else 4
        written = _wchar()
        benchmark.group = f"steady: {cursors:,} cursors, k={k}, sync {'on' if sync else 'off'}"
        benchmark.pedantic(peer.flush, setup=lambda: peer.ack(state.step()), rounds=rounds)
        wchar = (_wchar() - written) // rounds
        info = sum(position_info_bytes((1, state.md[c]), state.ranges(c)) for c in range(cursors)) / cursors
        benchmark.extra_info.update(
            baseline=engine == "pickle",
            bytes=peer.logical,
            wchar=wchar,
            cursors=cursors,
            k=k,
            sync=sync,
            engine=peer.name,
            position_info=round(info, 1),
        )
    finally:
        peer.close()


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


@pytest.mark.parametrize("case", ["pickle", "ackstore", "ackstore, every cursor read"])
def test_steady_reopen(benchmark: Any, reopened: Any, case: str) -> None:
    """Reopen to a usable state after the steady workload ran: ackstore's bulk open (lazy),
    and then with every cursor's ranges read; the baseline unpickles every cursor's state."""
    cursors, k, rounds = REOPEN
    engine = reopened["pickle" if case == "pickle" else "ackstore"]
    options = {"read_all": True} if case.endswith("read") else {}
    benchmark.group = f"steady workload, reopen: {cursors:,} cursors, k={k}, after {rounds:,} flushes"
    benchmark.pedantic(lambda: engine.reopen(**options), rounds=5)
    benchmark.extra_info.update(baseline=case == "pickle")
