"""Per-cursor cost from 1,000 to 100,000 cursors in one store: flush, reopen, memory, file.

``python -m benchmarks.scale [SIZES] [--docs MARKDOWN]`` (default ``1000,10000,100000``)
prints one table (and with ``--docs`` writes it into MARKDOWN's ``scale`` block).
Each size runs in fresh processes (so its peak RSS is its own): build the store (every
cursor ~100 acks with holes in one sealed ledger, flushed), then a group flush of one new
ack per cursor in the open ledger (median of 9; every cursor holds the same entries at
every size), then a reopen of the whole store, every cursor opened
(``topic.open_cursors()``), as opened by default (lazily, the default 3 MiB budget per
cursor), and decoding at open (``load="budget"``) with that budget and with none (median
of 3), then the file and the process's RSS per cursor; beside
the flush, a raw LMDB transaction doing per cursor the puts and deletes a flush does.

The flush and the raw transaction are timed twice, each in its own process on a store
built the same way: *warm*, right after the acks that dirtied every cursor (as a
benchmark loop finds them), and *cold*, with the CPU's caches evicted before every timed
transaction (a buffer larger than the last-level cache written over first), as a
process that did other work between its acks and its flush finds them. A small store's
whole state stays in the caches between the acks and a warm flush and a large one's does
not, so the warm figure grows with the count for reasons that are the machine's; the
cold one compares every size under the same condition. Per-cursor figures should stay
flat (within ~1.3x) as the count grows; the ratios to the smallest size are printed
beside them.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .docs_table import docs_option, publish

__all__ = ["measure", "main"]

T = "persistent://bench/ns/scale"
#: flushes timed at every size (their median): the smallest size's flushes take a few
#: milliseconds each, where this machine's noise is of that order
FLUSHES = 9


def _llc_bytes() -> int:
    """The last-level cache's size as the kernel reports it (64 MiB where it says nothing)."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * unit)
    return max(sizes, default=64 << 20)


class _Evictor:
    """Writes a buffer 1.25x the last-level cache (at most 2 GiB): what the caches held
    before is gone (``evict()``, O(buffer))."""

    def __init__(self) -> None:
        self.size = min(_llc_bytes() * 5 // 4, 2 << 30)
        self.buf = bytearray(self.size)
        self.view = (ctypes.c_char * self.size).from_buffer(self.buf)
        self.fill = 0

    def evict(self) -> None:
        self.fill = (self.fill + 1) & 0xFF
        ctypes.memset(self.view, self.fill, self.size)


def _raw_lmdb(n: int, path: Path, evictor: _Evictor | None = None) -> float:
    """Seconds of one raw py-lmdb write transaction that does per cursor what a flush of
    this workload does to the log (a ledger record and a marker put, the two records they
    replace deleted), over a log of ``n`` cursors of 4 records each: median of 5. Its
    per-cursor figure shows what of the flush's growth with the count is LMDB's."""
    import struct

    import lmdb

    key = struct.Struct(">QQ").pack
    record, marker = os.urandom(300), os.urandom(60)
    env = lmdb.open(str(path), map_size=1 << 33, sync=False, max_dbs=2)
    db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        for c in range(n):
            for s in range(4):
                txn.put(key(c, s), marker if s % 2 else record, db=db)
    times = []
    for r in range(5):
        s = 4 + 2 * r
        if evictor is not None:
            evictor.evict()
        t0 = time.perf_counter()
        with env.begin(write=True) as txn:
            for c in range(n):
                txn.put(key(c, s), record, db=db)
                txn.put(key(c, s + 1), marker, db=db)
                txn.delete(key(c, s - 4), db=db)
                txn.delete(key(c, s - 3), db=db)
        times.append(time.perf_counter() - t0)
    env.close()
    return statistics.median(times)


def measure(n: int, root: Path, cold: bool = False) -> dict[str, float]:
    """One size's figures, per cursor (run in its own process). ``cold``: only the flush
    and the raw transaction, with the caches evicted before each one timed."""
    from ackstore import AckStore, CursorConfig, Position

    evictor = _Evictor() if cold else None
    path = root / (f"c{n}" if cold else f"s{n}")
    with AckStore.open(path, sync=False, map_size=1 << 32) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 10_000)
        topic.add_ledger(2)
        curs = [topic.cursor(f"sub-{i}") for i in range(n)]
        for i, cur in enumerate(curs):
            cur.ack_entries(1, range(i % 50, 10_000, 97))
        store.flush()
        flushes = []
        for r in range(FLUSHES):
            for i, cur in enumerate(curs):
                cur.ack(Position(2, r * 10 + i % 7))  # the same state per cursor at every size
            if evictor is not None:
                evictor.evict()
            t0 = time.perf_counter()
            store.flush()
            flushes.append(time.perf_counter() - t0)
    del curs
    if evictor is not None:
        return {
            "flush_cold_us": statistics.median(flushes) / n * 1e6,
            "raw_cold_us": _raw_lmdb(n, root / f"rawc{n}", evictor) / n * 1e6,
        }
    file_bytes = (path / "data.mdb").stat().st_size
    reopen: dict[str, float] = {}
    for label, budget, load in (
        ("default", None, "lazy"),
        ("decoded", None, "budget"),
        ("decoded, no budget", 1 << 40, "budget"),
    ):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with AckStore.open(path, readonly=True, load=load) as store:
                topic = store.topic(T)
                config = None if budget is None else CursorConfig(max_individual_ack_cache_bytes=budget)
                topic.open_cursors(config)
                times.append(time.perf_counter() - t0)
            gc.collect()  # the closed store's cursors (they hold cycles): not the next round's garbage
        reopen[label] = statistics.median(times) / n
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "cursors": n,
        "flush_us": statistics.median(flushes) / n * 1e6,
        "raw_us": _raw_lmdb(n, root / f"raw{n}") / n * 1e6,
        "reopen_us": reopen["default"] * 1e6,
        "reopen_decoded_us": reopen["decoded"] * 1e6,
        "reopen_unbounded_us": reopen["decoded, no budget"] * 1e6,
        "file_bytes": file_bytes / n,
        "rss_bytes": rss / n,
    }


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv and argv[0] == "--one":
        n, root = int(argv[1]), Path(argv[2])
        print(json.dumps(measure(n, root, cold=argv[3:] == ["cold"])))
        return 0
    docs, argv = docs_option(argv)
    sizes = [int(x) for x in (argv[0] if argv else "1000,10000,100000").split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ackstore-scale-") as tmp:
        for n in sizes:
            row: dict[str, float] = {}
            for mode in ("warm", "cold"):
                print(f"scale: {n:,} cursors, {mode} ...", file=sys.stderr, flush=True)
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.scale", "--one", str(n), tmp, mode],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                )
                row.update(json.loads(out.stdout))
            rows.append(row)
    base = rows[0]
    columns = (
        ("flush / cursor, warm", "flush_us", "µs", 1.0),
        ("flush / cursor, cold caches", "flush_cold_us", "µs", 1.0),
        ("raw LMDB txn / cursor, warm", "raw_us", "µs", 1.0),
        ("raw LMDB txn / cursor, cold caches", "raw_cold_us", "µs", 1.0),
        ("reopen / cursor (default: lazy)", "reopen_us", "µs", 1.0),
        ("reopen / cursor (load='budget', 3 MiB)", "reopen_decoded_us", "µs", 1.0),
        ("reopen / cursor (load='budget', no budget)", "reopen_unbounded_us", "µs", 1.0),
        ("file / cursor", "file_bytes", "KB", 1e-3),
        ("peak RSS / cursor", "rss_bytes", "KB", 1e-3),
    )
    lines = ["| cursors | " + " | ".join(c[0] for c in columns) + " |", "|---:|" + "---:|" * len(columns)]
    for r in rows:
        cells = [f"{r[key] * scale:,.1f} {unit} ({r[key] / base[key]:.2f}x)" for _, key, unit, scale in columns]
        lines.append(f"| {r['cursors']:,.0f} | " + " | ".join(cells) + " |")
    publish(lines, docs, "scale")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
