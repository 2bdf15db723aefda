"""The file a long run leaves: ``python -m benchmarks.disk_bound [CURSORS] [FLUSHES]``.

CURSORS cursors (default 300), each with one ledger of ~2,500 ack ranges, then FLUSHES
flushes (default 200) with one new ack per cursor before each. Prints ``data.mdb``'s size
against the live bytes (what recovery reads, summed over the cursors) and against issue
15's bound: 4x live + 16 KiB per cursor.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

from ackstore import AckStore, Position

from .states import UNBOUNDED

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = [int(a) for a in (sys.argv[1:] if argv is None else argv)]
    cursors, flushes = (args + [300, 200][len(args) :])[:2]
    with tempfile.TemporaryDirectory() as tmp, AckStore.open(Path(tmp) / "s", sync=False) as store:
        topic = store.topic("persistent://bench/ns/disk")
        topic.add_ledger(1)
        curs = [topic.cursor(f"c{i}", UNBOUNDED) for i in range(cursors)]
        for cur in curs:
            cur.ack_entries(1, range(1, 5000, 2))
        store.flush()
        fresh, rng = iter(range(5001, 1 << 31)), random.Random(1)
        for _ in range(flushes):
            for cur in curs:
                cur.ack(Position(1, next(fresh) + rng.randrange(2)))
            store.flush()
        live = sum(cur.log_usage().live_bytes for cur in curs)
        size = (Path(tmp) / "s" / "data.mdb").stat().st_size
        bound = 4 * live + cursors * 16 * 1024
        print(f"{cursors} cursors, {flushes} flushes: data.mdb {size:,} B, live {live:,} B ({size / live:.1f}x); ")
        print(f"bound 4x live + 16 KiB per cursor = {bound:,} B: {'within' if size <= bound else 'over'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
