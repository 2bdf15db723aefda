"""The steady workload keeping an hour of history, beside the same workload keeping none.

``python -m benchmarks.history_window [CURSORS] [FLUSHES] [K] [--docs MARKDOWN]`` (default
100 cursors, 4,000 flushes, k = 50) prints one table (and with ``--docs`` writes it into
MARKDOWN's ``history`` block).

Two stores in one process play the same steady workload (``steady.py``: each cursor acks
the next ``k`` entries in order, holding one or two back for 1-3 rounds, so its
mark-delete position moves every flush): in one every cursor keeps an hour of history
(``CursorConfig.history_seconds=3600``), in the other none. The flush clock moves one
second a flush (``time.time`` is replaced in this process: an hour of flushes runs in
seconds), so the window fills after 3,600 flushes and then slides. Printed per cursor:
the bytes a kept flush costs (``log_usage().history_bytes`` over the states kept: the
records only those states need, and their points), the bytes a flush writes
(``FlushStats.bytes_written``, keys and values), the flush's time over the last 500
flushes (the history store's against the other's, in the same run), and ``data.mdb``
against the disk bound: 4x (live + what the window keeps) + 16 KiB a cursor.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from ackstore import CursorConfig

from .docs_table import docs_option, publish
from .kernel import wchar as _wchar
from .steady import CONFIG, AckstoreSteady, Steady

__all__ = ["main", "measure"]

WINDOW = 3600
TIMED = 500


class _Clock:
    """``time.time`` for this process: one second a flush."""

    def __init__(self) -> None:
        self.now = time.time()
        self.real = time.time

    def __call__(self) -> float:
        return self.now


def measure(cursors: int, flushes: int, k: int) -> dict[str, dict[str, float]]:
    """Both stores' figures, per cursor (see the module docstring)."""
    clock = _Clock()
    time.time = clock  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            configs = {"history": CursorConfig(max_unacked_ranges_to_persist=0, history_seconds=WINDOW), "none": CONFIG}
            states = {name: Steady(cursors, k) for name in configs}
            engines = {
                name: AckstoreSteady(Path(tmp) / name, states[name], False, cfg) for name, cfg in configs.items()
            }
            spent = dict.fromkeys(configs, 0.0)
            written = dict.fromkeys(configs, 0)
            handed = dict.fromkeys(configs, 0)
            for i in range(flushes):
                for name, engine in engines.items():
                    engine.ack(states[name].step())
                    wchar = _wchar()
                    started = time.perf_counter()
                    engine.flush()
                    if i >= flushes - TIMED:
                        spent[name] += time.perf_counter() - started
                        written[name] += engine.logical
                        handed[name] += _wchar() - wchar
                clock.now += 1.0
            out = {}
            for name, engine in engines.items():
                usages = [cur.log_usage() for cur in engine.cursors]
                kept = sum(len(cur.history()) for cur in engine.cursors)
                live = sum(u.live_bytes for u in usages)
                history = sum(u.history_bytes for u in usages)
                size = (Path(tmp) / name / "data.mdb").stat().st_size
                bound = 4 * (live + history) + 16 * 1024 * cursors
                out[name] = {
                    "states": kept / cursors,
                    "kept_flush_bytes": history / kept if kept else 0.0,
                    "flush_bytes": written[name] / TIMED / cursors,
                    "wchar": handed[name] / TIMED / cursors,
                    "flush_us": spent[name] / TIMED / cursors * 1e6,
                    "live": live / cursors,
                    "history": history / cursors,
                    "file": size / cursors,
                    "bound": bound / cursors,
                }
                engine.close()
            return out
    finally:
        time.time = clock.real  # type: ignore[assignment]


def table(cursors: int, flushes: int, k: int) -> list[str]:
    got = measure(cursors, flushes, k)
    h, n = got["history"], got["none"]
    rows = [
        "| per cursor | keeping an hour of history | keeping none |",
        "|---|---|---|",
        f"| states kept | {h['states']:,.0f} | {n['states']:,.0f} |",
        f"| bytes a kept flush costs (records only it needs + its point) | {h['kept_flush_bytes']:,.0f} B | - |",
        f"| bytes a flush writes (keys + values) | {h['flush_bytes']:,.0f} B | {n['flush_bytes']:,.0f} B |",
        f"| bytes handed to write(2) a flush (LMDB's pages) | {h['wchar']:,.0f} B | {n['wchar']:,.0f} B |",
        f"| flush time (last {TIMED} flushes) | {h['flush_us']:.2f} us ({h['flush_us'] / n['flush_us']:.2f}x) "
        f"| {n['flush_us']:.2f} us |",
        f"| live bytes | {h['live']:,.0f} B | {n['live']:,.0f} B |",
        f"| what the window keeps | {h['history']:,.0f} B | {n['history']:,.0f} B |",
        f"| `data.mdb` | {h['file']:,.0f} B | {n['file']:,.0f} B |",
        f"| bound: 4x (live + window) + 16 KiB | {_bound(h)} | {_bound(n)} |",
    ]
    return [
        f"{cursors:,} cursors, k = {k}, {flushes:,} flushes at one a second (the window fills at {WINDOW:,}), "
        "sync off, in one process:",
        "",
        *rows,
    ]


def _bound(figures: dict[str, float]) -> str:
    return f"{figures['bound']:,.0f} B ({'within' if figures['file'] <= figures['bound'] else 'OVER'})"


def main(argv: list[str] | None = None) -> int:
    docs, args = docs_option(sys.argv[1:] if argv is None else argv)
    numbers = [int(a) for a in args]
    cursors, flushes, k = (numbers + [100, 4000, 50][len(numbers) :])[:3]
    publish(table(cursors, flushes, k), docs, "history")
    return 0


if __name__ == "__main__":
    sys.exit(main())
