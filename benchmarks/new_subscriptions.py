"""What a new subscription costs in its first rounds: making it, and its first acks and flushes.

    python -m benchmarks.new_subscriptions [--runs 7] [--cursors 1000]

A broker that makes many subscriptions at once (a deploy, a rebalance) pays for each one's
making and for its first rounds before it reaches the steady cost. Each run makes a store
of ``--cursors`` subscriptions (100 a topic), each acking 9 new entries a round with one
``cur.ack(list)``, one group flush a round, three rounds; it prints, per cursor, the CPU
time (``time.process_time``) of the making and of each round's acks and flush, the median
of the runs (and the least), and how many cursors are in the small form at the end. Run it
on two trees to compare them (``PYTHONPATH=<tree>``), the runs of each interleaved.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from pathlib import Path

from ackstore import AckStore, Position

from .per_cursor import PER_TOPIC, main_of, topics_of

__all__ = ["run", "main"]

ROUNDS = 3
ACKS = 9  # entries a subscription acks a round


def run(cursors: int) -> dict[str, float]:
    """One run: the CPU seconds a cursor of the making and of each round's acks and flush,
    and the cursors in the small form at the end."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, AckStore.open(Path(tmp) / "s", sync=False, map_size=1 << 30) as store:
        topics = topics_of(store, cursors, "new")
        gc.collect()
        started = time.process_time()
        made = [topics[i // PER_TOPIC].cursor(f"s{i}") for i in range(cursors)]
        out["making one"] = (time.process_time() - started) / cursors
        for r in range(ROUNDS):
            acks = [Position(1, e) for e in range(r * ACKS, (r + 1) * ACKS)]
            started = time.process_time()
            for cur in made:
                cur.ack(acks)
            acked = time.process_time()
            store.flush()
            out[f"round {r}: acks"] = (acked - started) / cursors
            out[f"round {r}: flush"] = (time.process_time() - acked) / cursors
        out["in the small form at the end"] = sum(cur._core.small is not None for cur in made)
    return out


def main(argv: list[str] | None = None) -> int:
    return main_of("new_subscriptions", __doc__ or "", run, 7, argv)


if __name__ == "__main__":
    sys.exit(main())
