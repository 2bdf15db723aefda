"""The benchmark peers (``benchmarks/peers.py``) are only fair if they are right: each one,
after acks, flushes and a reopen, holds exactly the acks the workload made."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyroaring import BitMap

from benchmarks.peers import PEERS, Workload


@pytest.mark.parametrize("name", list(PEERS))
def test_a_peer_round_trips_its_state(tmp_path: Path, name: str) -> None:
    rng = random.Random(3)
    start = {"a": {1: BitMap(rng.sample(range(1, 300), 80)), 2: BitMap()}, "b": {1: BitMap(range(1, 300, 2))}}
    workload = Workload("t", 2, 300, lambda r: start, lambda r, s: [])
    peer = PEERS[name](tmp_path, workload)
    expected = {c: {lg: BitMap(bm) for lg, bm in ls.items()} for c, ls in start.items()}
    peer.load(start)  # type: ignore[attr-defined]
    for _ in range(400):
        cursor = rng.choice("ab")
        ledger = rng.choice(sorted(expected[cursor]))
        entry = rng.randrange(1, 300)
        peer.ack(cursor, ledger, entry)  # type: ignore[attr-defined]
        expected[cursor][ledger].add(entry)
        if rng.random() < 0.2:
            peer.flush()  # type: ignore[attr-defined]
    peer.flush()  # type: ignore[attr-defined]
    peer.reopen()  # type: ignore[attr-defined]
    state = peer.state if not hasattr(peer, "cursors") else _ackstore_state(peer)  # type: ignore[attr-defined]
    nonempty = {c: {lg: bm for lg, bm in ls.items() if bm} for c, ls in expected.items()}
    assert {c: {lg: bm for lg, bm in ls.items() if bm} for c, ls in state.items()} == nonempty
    peer.close()  # type: ignore[attr-defined]


def _ackstore_state(peer) -> dict[str, dict[int, BitMap]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[int, BitMap]] = {}
    for name, cur in peer.cursors.items():
        out[name] = {}
        for ledger, ranges in cur.ledger_ranges():
            bm = BitMap()
            for first, last in ranges:
                bm.add_range(first, last + 1)
            out[name][ledger] = bm
    return out
