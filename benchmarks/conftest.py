"""pytest-benchmark suites. Every group has one case marked ``extra_info["baseline"]``,
run in the same process on the same data; the summary prints each case's ratio to it.

``extra_info["ops"]``: operations per round (for ops/s); ``extra_info["bytes"]``: bytes
the case writes or holds per round (for a size ratio).
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackstore import AckStore

from .tables import day_lines, ratio_lines, steady_lines, write_tables


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AckStore]:
    with AckStore.open(tmp_path / "store", sync=False) as s:
        yield s


def bench_flushes(benchmark: Any, store: AckStore, group: str, dirty: Any, rounds: int) -> int:
    """Time ``store.flush()`` after ``dirty()`` each round; records and returns the bytes
    the last flush wrote."""
    written: list[int] = []
    benchmark.group = group
    benchmark.pedantic(lambda: written.append(store.flush().bytes_written), setup=dirty, rounds=rounds)
    benchmark.extra_info.update(bytes=written[-1])
    return written[-1]


def _trimmer() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _trimmer()


def fresh_heap() -> None:
    """Hand the free pages of the process's C heap back to the system (glibc's
    ``malloc_trim``; nothing elsewhere): what a round allocates then is touched for the first
    time, as in the new process a restart is, whatever earlier rounds and groups left free
    (which otherwise favours whichever side reuses it: the same case read 0.11x after another
    group and 0.17x alone)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def bench_paired(benchmark: Any, run: Any, baseline: Any, rounds: int, warmup_rounds: int = 1) -> None:
    """Time ``run()`` for ``rounds`` rounds, each right after one untimed-by-the-benchmark
    run of ``baseline()`` that is timed on its own: ``extra_info["paired_speed"]`` is the
    median of the rounds' baseline time over ``run``'s (the warmup rounds left out), which
    the ratio table prints as the case's speed. Two medians taken minutes apart move with
    whatever else this machine runs; a pair of runs a moment apart moves together. Each
    side starts on a trimmed heap (:func:`fresh_heap`): these are reopens, whose memory a
    restart touches for the first time."""
    base: list[float] = []
    case: list[float] = []

    def setup() -> None:
        fresh_heap()
        t = time.perf_counter()
        baseline()
        base.append(time.perf_counter() - t)
        fresh_heap()

    def timed() -> None:
        t = time.perf_counter()
        run()
        case.append(time.perf_counter() - t)

    benchmark.pedantic(timed, setup=setup, rounds=rounds, warmup_rounds=warmup_rounds)
    pairs = list(zip(base, case, strict=True))[warmup_rounds:]
    benchmark.extra_info["paired_speed"] = statistics.median(b / c for b, c in pairs)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--docs-table",
        metavar="MARKDOWN",
        help="also write the ratio table into MARKDOWN, between <!-- begin ratios --> and <!-- end ratios -->",
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = getattr(config, "_benchmarksession", None)
    benchmarks = [b for b in getattr(session, "benchmarks", []) if b]
    if not benchmarks:
        return
    for title, lines in (
        ("ratios against the baseline of each group (same process, same data)", ratio_lines(benchmarks)),
        ("the steady workload, per cursor a flush", steady_lines(benchmarks)),
        ("a broker's day, per cursor a round", day_lines(benchmarks)),
    ):
        if lines or title.startswith("ratios"):
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
    target = config.getoption("--docs-table")
    if target:
        for line in write_tables(benchmarks, Path(target)):
            terminalreporter.write_line(line)
