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
