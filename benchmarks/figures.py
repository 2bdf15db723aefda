"""Quick engine figures, printed as a table: ``python -m benchmarks.figures``.

Bytes per range on disk for three hole patterns, ack throughput (one position per
call and 1M per call, against raw pyroaring on the same ids in the same process),
and the bytes a flush writes when 1 ledger of 10,000 is dirty. The pytest-benchmark
suites in this folder are the measured record; this script is the quick look.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

from pyroaring import BitMap

from ackstore import AckStore, Position
from ackstore.storage.records import encode_ledger

from .states import T, sealed_cursor

__all__ = ["main"]

PATTERNS: dict[str, Callable[[random.Random, int], bool]] = {
    "random 10% acks": lambda r, e: r.random() < 0.1,
    "alternating acks": lambda r, e: e % 2 == 0,
    "runs of 1000, single holes": lambda r, e: e % 1001 != 1000,
    "runs of ~1000, random holes": lambda r, e: r.random() >= 0.001,
}


def bytes_per_range(root: Path, name: str, keep: Callable[[random.Random, int], bool]) -> tuple[int, int, float]:
    """1M entries in 20 ledgers of 50,000; returns (ranges, bytes flushed, bytes per range)."""
    rng = random.Random(1)
    with AckStore.open(root / name.replace(" ", "_").replace(",", ""), sync=False) as store:
        cur = sealed_cursor(
            store, 20, 50_000, lambda ledger: [e for e in range(1, 50_000) if keep(rng, e)]
        )  # 0: a hole
        stats = store.flush()
        return cur.ack_range_count, stats.bytes_written, stats.bytes_written / cur.ack_range_count


def ack_rates(root: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    with AckStore.open(root / "rates", sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        n = 300_000
        positions = [Position(1, 2 * e + 1) for e in range(n)]
        t = time.perf_counter()
        for p in positions:
            cur.ack(p)
        out["ack(p) one Position per call, acks/s"] = n / (time.perf_counter() - t)
        positions = [Position(1, 2 * e + 2_000_001) for e in range(n)]
        t = time.perf_counter()
        for p in positions:
            cur.ack((p,))
        out["ack((p,)) one-element tuple per call, acks/s"] = n / (time.perf_counter() - t)
    with AckStore.open(root / "rates-batch", sync=False) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        rng = random.Random(3)
        ids = rng.sample(range(1, 4_000_000), 1_000_000)
        positions = [Position(1, e) for e in ids]
        t = time.perf_counter()
        cur.ack(positions)
        engine = len(ids) / (time.perf_counter() - t)
        t = time.perf_counter()
        bm = BitMap()
        bm.update(ids)
        raw = len(ids) / (time.perf_counter() - t)
        out["ack(1M positions) per call, acks/s"] = engine
        out["raw pyroaring update(1M ints), ids/s"] = raw
        out["ratio ack(positions)/raw"] = engine / raw
        for ledger, (label, entries) in enumerate(
            [("list of ints", ids), ("array('I')", array("I", ids)), ("BitMap", BitMap(ids))], start=2
        ):
            topic.close_ledger(ledger - 1, 4_000_000)
            topic.add_ledger(ledger)
            t = time.perf_counter()
            cur.ack_entries(ledger, entries)
            rate = len(ids) / (time.perf_counter() - t)
            out[f"ack_entries(ledger, 1M as {label}), acks/s"] = rate
            out[f"ratio ack_entries({label})/raw"] = rate / raw
    return out


def flush_one_dirty(root: Path) -> tuple[int, int]:
    with AckStore.open(root / "flush", sync=False) as store:
        cur = sealed_cursor(store, 10_000, 1000, lambda ledger: range(1, 1000, 3))
        store.flush()
        cur.ack([Position(5000, 2)])
        stats = store.flush()
        record = len(encode_ledger(5000, cur._core._pages.cache.loaded[5000])) + 16
        return stats.bytes_written, record


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m benchmarks.figures", description=__doc__).parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("| workload (1M entries, 20 ledgers) | ranges | bytes flushed | bytes/range |")
        print("|---|---:|---:|---:|")
        for name, keep in PATTERNS.items():
            ranges, nbytes, per = bytes_per_range(root, name, keep)
            print(f"| {name} | {ranges:,} | {nbytes:,} | {per:.2f} |")
        print()
        for k, v in ack_rates(root).items():
            print(f"{k}: {v:,.2f}")
        written, record = flush_one_dirty(root)
        print(f"flush with 1 dirty ledger of 10,000: {written} bytes written; that ledger's record {record} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
