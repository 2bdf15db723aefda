"""A small local demo workload: acks with holes across many ledgers, flush, reopen, report.

Run ``python -m ackstore.tools.demo --help`` (``make demo`` runs it). ``make run`` runs the Spark
pipeline (``tools/spark_cli.py``).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ackstore import AckStore, CursorConfig, Position

__all__ = ["main", "run_demo"]

TOPIC = "persistent://demo/ns/orders"


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.name == "data.mdb")


def run_demo(path: Path, ledgers: int, entries: int, hole_rate: float, seed: int) -> dict[str, Any]:
    """Write a holey workload into a fresh store at ``path``, reopen it, and return the figures."""
    rng = random.Random(seed)
    if path.exists():
        shutil.rmtree(path)
    started = time.perf_counter()
    acked = 0
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(TOPIC)
        cur = topic.cursor("sub-a", CursorConfig(max_unacked_ranges_to_persist=0))  # persist every range
        for ledger in range(1, ledgers + 1):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, entries)
            batch = [Position(ledger, e) for e in range(entries) if rng.random() >= hole_rate]
            if ledger == 1:
                batch = batch[1:] if batch and batch[0].entry == 0 else batch  # keep a hole at the front
            cur.ack(batch)
            acked += len(batch)
            if ledger % 20 == 0:
                store.flush()
            if ledger % max(1, ledgers // 10) == 0:
                print(f"  wrote ledger {ledger}/{ledgers}: {cur.ack_range_count:,} ranges", flush=True)
        before = (cur.mark_delete_position, cur.ack_range_count, list(cur.ack_ranges())[:3])
        stats = store.flush()
    write_s = time.perf_counter() - started
    t0 = time.perf_counter()
    with AckStore.open(path, readonly=True) as store:
        cur = store.topic(TOPIC).cursor("sub-a")
        open_s = time.perf_counter() - t0
        after = (cur.mark_delete_position, cur.ack_range_count, list(cur.ack_ranges())[:3])
        report = cur.stats().recovery
        cache = cur.stats().cache_bytes
        live = cur.log_usage().live_bytes
    return {
        "acked": acked,
        "write_seconds": write_s,
        "last_flush": stats,
        "recovered_equal": before == after,
        "mark_delete": after[0],
        "ranges": after[1],
        "first_ranges": after[2],
        "open_seconds": open_s,
        "recovered_from_marker": report.marker_seq,
        "records_loaded": report.records_loaded,
        "bytes_loaded": report.bytes_loaded,
        "cache_bytes": cache,
        "live_bytes": live,
        "store_bytes": _dir_bytes(path),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackstore.tools.demo",
        description="Ack a workload with random holes across many ledgers, flush, reopen the store "
        "and print what recovery found and how long it took.",
    )
    parser.add_argument("--path", type=Path, default=Path("out/demo-store"), help="store directory (recreated)")
    parser.add_argument("--ledgers", type=int, default=200, help="ledgers in the topic (default 200)")
    parser.add_argument("--entries", type=int, default=10_000, help="entries per ledger (default 10000)")
    parser.add_argument("--hole-rate", type=float, default=0.05, help="fraction of entries left unacked")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.ledgers < 1 or args.entries < 1 or not 0.0 <= args.hole_rate <= 1.0:
        parser.error("--ledgers and --entries must be >= 1, --hole-rate within 0..1")
    print(f"ackstore demo: {args.ledgers} ledgers x {args.entries} entries, {args.hole_rate:.0%} holes")
    r = run_demo(args.path, args.ledgers, args.entries, args.hole_rate, args.seed)
    print(f"acked {r['acked']:,} entries in {r['write_seconds']:.2f} s")
    print(f"recovered from marker {r['recovered_from_marker']} in {r['open_seconds'] * 1000:.1f} ms:")
    print(f"  mark-delete {r['mark_delete']}, {r['ranges']:,} ack ranges, first {r['first_ranges']}")
    print(
        f"  {r['records_loaded']} ledger records decoded at open (each is decoded when first used), "
        f"{r['cache_bytes']:,} bytes held"
    )
    print(
        f"  {r['live_bytes'] / max(1, int(r['ranges'])):.2f} bytes per range on disk "
        f"({r['live_bytes']:,} B live in the log); store file {r['store_bytes']:,} B"
    )
    print(f"state after reopen equals state before close: {r['recovered_equal']}")
    print(f"the store is at {args.path} (`ackstore stat {args.path}` shows it; `--path` puts it elsewhere)")
    return 0 if r["recovered_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
