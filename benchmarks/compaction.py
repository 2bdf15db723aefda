"""What a compaction costs a store of steady subscriptions, and the flushes after it.

    python -m benchmarks.compaction [--runs 5] [--cursors 1000]

An operator compacts a store (``store.compact()``, ``ackstore compact``) while its
subscriptions are at their steady work. Each run makes a store of ``--cursors``
subscriptions (100 a topic), each acking 10 entries in order a round, one held back for two
rounds, with ``ack_entries``, one group flush a round; five rounds, then a compaction of
every cursor, then three more rounds. It prints, per cursor, the CPU time
(``time.process_time``) of the compaction and of each flush after it, the median of the
runs (and the least), and how many cursors are in the small form at the end. Run it on two
trees to compare them (``PYTHONPATH=<tree>``), the runs of each interleaved.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from pathlib import Path

from pyroaring import BitMap

from ackstore import AckStore, Cursor

from .per_cursor import PER_TOPIC, main_of, topics_of

__all__ = ["run", "main"]

BEFORE = 5  # rounds flushed before the compaction
AFTER = 3  # and after it


def _round(cursors: list[Cursor], r: int) -> None:
    batch = BitMap(range(10 * r, 10 * r + 10))
    batch.discard(10 * r + 3)
    if r >= 2:
        batch.add(10 * (r - 2) + 3)
    for cur in cursors:
        cur.ack_entries(1, batch)


def run(cursors: int) -> dict[str, float]:
    """One run: the CPU seconds a cursor of the compaction and of each flush after it, and
    the cursors in the small form at the end."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, AckStore.open(Path(tmp) / "s", sync=False, map_size=1 << 30) as store:
        topics = topics_of(store, cursors, "compact")
        made = [topics[i // PER_TOPIC].cursor(f"s{i}") for i in range(cursors)]
        for r in range(BEFORE):
            _round(made, r)
            store.flush()
        gc.collect()
        started = time.process_time()
        store.compact()
        out["the compaction"] = (time.process_time() - started) / cursors
        for r in range(BEFORE, BEFORE + AFTER):
            _round(made, r)
            started = time.process_time()
            store.flush()
            out[f"flush {r - BEFORE + 1} after it"] = (time.process_time() - started) / cursors
        out["in the small form at the end"] = sum(cur._core.small is not None for cur in made)
    return out


def main(argv: list[str] | None = None) -> int:
    return main_of("compaction", __doc__ or "", run, 5, argv)


if __name__ == "__main__":
    sys.exit(main())
