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

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ackstore import AckStore, Position

__all__ = ["run", "main"]

PER_TOPIC = 100
ROUNDS = 3
ACKS = 9  # entries a subscription acks a round


def run(cursors: int) -> dict[str, float]:
    """One run: the CPU seconds a cursor of the making and of each round's acks and flush,
    and the cursors in the small form at the end."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, AckStore.open(Path(tmp) / "s", sync=False, map_size=1 << 30) as store:
        topics = []
        for t in range(0, cursors, PER_TOPIC):
            topic = store.topic(f"persistent://new/ns/t{t // PER_TOPIC}")
            topic.add_ledger(1)
            topics.append(topic)
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
    parser = argparse.ArgumentParser(prog="python -m benchmarks.new_subscriptions", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs whose median is printed (default 7)")
    parser.add_argument("--cursors", type=int, default=1000, help="subscriptions a run makes (default 1000)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cursors < 1:
        parser.error(f"--runs {args.runs} and --cursors {args.cursors}: each at least 1")
    runs = [run(args.cursors) for _ in range(args.runs)]
    for name in runs[0]:
        values = [r[name] for r in runs]
        if name.startswith("in the small form"):
            print(f"{name}: {int(min(values))} of {args.cursors}")
        else:
            print(f"{name}: median {statistics.median(values) * 1e6:.2f} us a cursor (least {min(values) * 1e6:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
