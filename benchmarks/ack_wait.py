"""How long an ack in another thread waits while a group flush of many cursors runs.

``python -m benchmarks.ack_wait [CURSORS] [--docs MARKDOWN]`` (default 50,000) prints one
table (and with ``--docs`` writes it into MARKDOWN's ``ack-wait`` block).

A store of CURSORS cursors (~100 acks with holes in one sealed ledger each) gets one new
ack per cursor, then a group flush of them all while a second thread acks another cursor
every half millisecond and times each ack from when it was due to when it returned. After
two untimed flushes (every cursor
then in the small form, as its flushes keep it), three flushes (median), each way: the
flush as it runs (cursors taken, encoded and adopted ``flush.CHUNK`` at a time, the store
lock let go between chunks) against the same flush in one chunk (the baseline: the store
lock held while every cursor is taken, and again while every cursor adopts). The figure
is the longest ack wait during each flush; the flush's own time is beside it. Acks wait
for the store lock and, in CPython, for the interpreter lock, which the flush's thread holds
for up to a switch interval (5 ms) at a time of its Python code, and through each compiled
call it makes (a chunk's: ``flush_small`` writes every small form of it in one).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .docs_table import docs_option, publish

__all__ = ["main", "measure"]

T = "persistent://bench/ns/ack-wait"
FLUSHES = 3
WARM = 2
"""untimed flushes first: the first flushes after the setup move each cursor into the small
form (its parts' flush, then the one that takes the form), each unlike the steady flush"""


def _acker(cur: Any, first: int, stop: threading.Event, waits: list[float]) -> None:
    """Ack ``cur``'s entries of ledger 2 from ``first`` on, each due half a millisecond after
    the one before returned, until ``stop`` is set; each ack's wait is from when it was due to
    when it returned, so a wait for the interpreter lock before the call counts as much as
    one for the store lock inside it."""
    from ackstore import Position

    entry = first
    while not stop.is_set():
        due = time.perf_counter() + 0.0005
        time.sleep(0.0005)
        cur.ack(Position(2, entry))
        waits.append(time.perf_counter() - due)
        entry += 1


def measure(n: int, chunk: int, root: Path) -> tuple[float, float]:
    """(median flush seconds, median of each flush's longest ack seconds) for ``n`` cursors
    taken ``chunk`` at a time."""
    from ackstore import AckStore, Position
    from ackstore import flush as group_flush

    saved, group_flush.CHUNK = group_flush.CHUNK, chunk
    try:
        with AckStore.open(root / f"s{chunk}", sync=False, map_size=1 << 33) as store:
            topic = store.topic(T)
            topic.add_ledger(1)
            topic.close_ledger(1, 10_000)
            topic.add_ledger(2)
            cursors = [topic.cursor(f"sub-{i}") for i in range(n)]
            other = topic.cursor("acker")
            for i, cur in enumerate(cursors):
                cur.ack_entries(1, range(i % 50, 10_000, 97))
            store.flush()
            for r in range(WARM):  # untimed: every cursor settles in the form its flushes keep
                for i, cur in enumerate(cursors):
                    cur.ack(Position(2, r * 10 + i % 7))
                store.flush()
            flushes: list[float] = []
            longest: list[float] = []
            for r in range(WARM, WARM + FLUSHES):
                for i, cur in enumerate(cursors):
                    cur.ack(Position(2, r * 10 + i % 7))
                stop = threading.Event()
                waits: list[float] = []
                thread = threading.Thread(target=_acker, args=(other, 100_000 * (r + 1), stop, waits))
                thread.start()
                time.sleep(0.01)
                t0 = time.perf_counter()
                store.flush()
                flushes.append(time.perf_counter() - t0)
                stop.set()
                thread.join()
                longest.append(max(waits))
    finally:
        group_flush.CHUNK = saved
    return statistics.median(flushes), statistics.median(longest)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    docs, argv = docs_option(argv)
    n = int(argv[0]) if argv else 50_000
    from ackstore import flush as group_flush

    with tempfile.TemporaryDirectory(prefix="ackstore-ack-wait-") as tmp:
        one = measure(n, 1 << 62, Path(tmp))
        chunked = measure(n, group_flush.CHUNK, Path(tmp))
    lines = [
        "| cursors | flush | longest ack during the flush | longest ack vs baseline |",
        "|---|---:|---:|---:|",
        f"| {n:,}, one chunk (baseline) | {one[0] * 1e3:,.0f} ms | {one[1] * 1e3:,.1f} ms | baseline |",
        f"| {n:,}, chunks of {group_flush.CHUNK:,} | {chunked[0] * 1e3:,.0f} ms | {chunked[1] * 1e3:,.1f} ms "
        f"| {one[1] / chunked[1]:.0f}x shorter |",
    ]
    publish(lines, docs, "ack-wait")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
