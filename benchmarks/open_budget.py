"""Open time and memory of a cursor with lots of persisted ack state under the 3 MiB budget.

    python -m benchmarks.open_budget build out/state-10mb --mb 10
    python -m benchmarks.open_budget build out/state-100mb --mb 100
    /usr/bin/time -v python -m benchmarks.open_budget open out/state-100mb

Both states have 10,000 ledgers of sparse random acks; only the bytes per ledger differ,
so the marker index is the same size and the budget alone decides what is read.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import time
from pathlib import Path

from pyroaring import BitMap

from ackstore import AckStore, CursorConfig

__all__ = ["build", "open_cursor", "main"]

T = "persistent://bench/ns/big"
LEDGERS = 10_000
SPAN = (1 << 32) - 1


def build(path: Path, megabytes: float, ledgers: int = LEDGERS, seed: int = 1) -> int:
    """Write a store whose cursor holds about ``megabytes`` of ack records; return the bytes."""
    if path.exists():
        shutil.rmtree(path)
    per_ledger = int(megabytes * 1e6 / ledgers / 4.1)  # sparse random 32-bit gaps cost ~4 B a value
    rng = random.Random(seed)
    total = 0
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        cur = topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=1 << 40, max_unacked_ranges_to_persist=0))
        for ledger in range(1, ledgers + 1):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, SPAN)
            cur.ack_entries(ledger, BitMap(rng.sample(range(1, SPAN - 1), per_ledger)))
            if ledger % 1000 == 0:
                total += store.flush().bytes_written
                print(f"  {ledger}/{ledgers} ledgers, {total / 1e6:.1f} MB written", flush=True)
        total += store.flush().bytes_written
    return total


def open_cursor(path: Path, budget: int = 3 << 20, verify: str = "keys") -> dict[str, float]:
    t0 = time.perf_counter()
    with AckStore.open(path, readonly=True, verify=verify) as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=budget))
        seconds = time.perf_counter() - t0
        stats = cur.stats()
    return {
        "open_seconds": seconds,
        "ranges": stats.ack_range_count,
        "ledgers_in_memory": stats.ledgers_in_memory,
        "ledgers_swapped_out": stats.ledgers_swapped_out,
        "cache_bytes": stats.cache_bytes,
        "bytes_read": stats.recovery.bytes_loaded,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.open_budget",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write a store with about --mb megabytes of ack records")
    b.add_argument("path", type=Path)
    b.add_argument("--mb", type=float, default=10.0)
    o = sub.add_parser("open", help="open its cursor read-only under a budget and print the figures")
    o.add_argument("path", type=Path)
    o.add_argument("--budget", type=int, default=3 << 20)
    o.add_argument("--verify", choices=["keys", "all", "loaded"], default="keys")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        print(f"wrote {build(args.path, args.mb) / 1e6:.1f} MB of records")
    else:
        for key, value in open_cursor(args.path, args.budget, args.verify).items():
            print(f"{key}: {value:,.4f}" if isinstance(value, float) else f"{key}: {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
