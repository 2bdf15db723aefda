"""ackstore against what a Python developer would otherwise write (``peers.py``), on five
workloads, in one process: the flush after each round's new acks, the file size after
the rounds, and the time to reopen to a usable state. The baseline of every flush
group is SQLite with one row per range at ``synchronous=NORMAL`` (WAL): the
bar to beat (one indexed statement per new ack, as a competent user writes it). The
baseline of every reopen group is unpickling the same ``{ledger: BitMap}`` maps from one
LMDB value per cursor (the least work that holds the state again); ackstore reopens as
it is opened by default (lazily: the records within each cursor's budget, here all, read
and checked, each ledger decoded on first use; the "then every ledger read" row adds
reading them all), with ``load="budget"`` (every ledger within the budget decoded at
open), and read-only. ``wchar``
is what each flush hands to write(2) (``/proc/self/io``): LMDB writes whole pages, SQLite
its WAL frames, so a flush of a few dozen logical bytes costs kilobytes there. ackstore and
the pickled BitMaps run on LMDB with ``sync=False``, which,
like WAL at NORMAL, stays consistent on a power cut but may lose the last flushes;
SQLite at FULL is the fsync-every-commit row.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from .kernel import wchar as _wchar
from .peers import PEERS, REOPENS, WORKLOADS, Workload

ROUNDS = 10
_built: dict[tuple[str, str], Any] = {}


def _peer(workload: Workload, name: str, root: Path) -> Any:
    """The peer loaded with the workload's state (built once per module, reused by the open test)."""
    key = (workload.name, name)
    if key not in _built:
        path = root / f"{len(_built)}"
        path.mkdir(parents=True)
        peer = PEERS[name](path, workload)
        peer.load(workload.build(random.Random(7)))  # type: ignore[attr-defined]
        _built[key] = peer
    return _built[key]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield tmp_path_factory.mktemp("peers")
    for peer in _built.values():
        peer.close()
    _built.clear()


@pytest.mark.parametrize("peer", list(PEERS))
@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_flush(benchmark, root: Path, workload: Workload, peer: str) -> None:  # type: ignore[no-untyped-def]
    p = _peer(workload, peer, root)
    rng = random.Random(11)

    def touch() -> None:
        for cursor, ledger, entry in workload.touch(rng, p.state):
            p.ack(cursor, ledger, entry)

    benchmark.group = f"peers, flush: {workload.name}"
    written = _wchar()
    benchmark.pedantic(p.flush, setup=touch, rounds=ROUNDS)
    benchmark.extra_info.update(
        baseline=peer.endswith("NORMAL"), bytes=p.file_bytes(), wchar=(_wchar() - written) // ROUNDS
    )


@pytest.mark.parametrize("peer", [*PEERS, *REOPENS])
@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_reopen(benchmark, root: Path, workload: Workload, peer: str) -> None:  # type: ignore[no-untyped-def]
    """Reopen to a usable state; the baseline is unpickling the same maps."""
    p = _peer(workload, "ackstore" if peer in REOPENS else peer, root)
    options = REOPENS.get(peer, {})
    benchmark.group = f"peers, reopen to a usable state: {workload.name}"
    benchmark.pedantic(lambda: p.reopen(**options), rounds=5)
    benchmark.extra_info.update(baseline=peer.startswith("pickled"), bytes=p.file_bytes())
