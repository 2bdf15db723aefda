"""pytest-benchmark suites. Every group has one case marked ``extra_info["baseline"]``,
run in the same process on the same data; the summary prints each case's ratio to it.

``extra_info["ops"]``: operations per round (for ops/s); ``extra_info["bytes"]``: bytes
the case writes or holds per round (for a size ratio).
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackstore import AckStore


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


def _steady(bench: Any) -> bool:
    """A case of the steady workload (its own table: :func:`_steady_lines`)."""
    return (bench.group or "").startswith("steady:") and "cursors" in bench.extra_info


def _day(bench: Any) -> bool:
    """A case of the broker's day (its own table: :func:`_day_lines`)."""
    return bool(bench.extra_info.get("day"))


def _ratio_lines(benchmarks: list[Any]) -> list[str]:
    groups: dict[str, list[Any]] = defaultdict(list)
    for bench in benchmarks:
        if not _steady(bench) and not _day(bench):
            groups[bench.group or bench.name].append(bench)
    if not groups:
        return []
    lines = [
        "| group | case | median | ops/s | speed vs baseline | bytes | bytes vs baseline | write(2) bytes a round |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for group, cases in sorted(groups.items()):
        base = next((c for c in cases if c.extra_info.get("baseline")), None)
        for c in sorted(cases, key=lambda c: not c.extra_info.get("baseline")):
            median = c.stats.median
            ops = c.extra_info.get("ops")
            nbytes = c.extra_info.get("bytes")
            speed = f"{base.stats.median / median:.2f}x" if base is not None and c is not base else "baseline"
            if "paired_speed" in c.extra_info:  # measured round by round beside its baseline
                speed = f"{c.extra_info['paired_speed']:.2f}x paired"
            size = ""
            if nbytes is not None and base is not None and base.extra_info.get("bytes"):
                r = nbytes / base.extra_info["bytes"]
                size = "baseline" if c is base else (f"{r:.2f}x" if r >= 0.01 else f"1/{1 / r:,.0f}" if r else "0")
            rate = f"{ops / median:,.0f}" if ops else ""
            held = "" if nbytes is None else f"{nbytes:,}"
            case = c.name.removeprefix("test_")
            wchar = c.extra_info.get("wchar")
            kernel = "" if wchar is None else f"{wchar:,}"
            lines.append(
                f"| {group} | {case} | {median * 1e3:.2f} ms | {rate} | {speed} | {held} | {size} | {kernel} |"
            )
    return lines


def _steady_lines(benchmarks: list[Any]) -> list[str]:
    """The steady workload's groups per cursor a flush: each engine's median time over the
    same rounds (ackstore's from pytest-benchmark, the peers' timed in its rounds), write(2)
    and logical bytes, ackstore's time against the faster peer's (the median of each round's
    ratio: both flushed in that round, on the same state), the same for CPU time, and
    Pulsar's PositionInfo."""
    cases = [bench for bench in benchmarks if _steady(bench)]
    if not cases:
        return []
    lines = [
        "| workload | engine | flush per cursor | vs the faster peer | CPU per cursor | CPU vs the leaner peer "
        "| write(2) B per cursor | logical B per cursor | Pulsar PositionInfo B |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in sorted(cases, key=lambda c: (c.extra_info["cursors"], c.extra_info["k"], c.extra_info["sync"])):
        info, group = case.extra_info, case.group.removeprefix("steady: ")
        n, peers = info["cursors"], sorted(info["peers"].values(), key=lambda p: p["engine"])
        ours = case.stats.median
        ratios = f"{info['paired']:.2f}x", f"{info['paired_cpu']:.2f}x"
        rows = [(info["engine"], ours, *ratios, info, f"{info['position_info']:,.0f}")]
        rows += [(p["engine"], p["median"], "", "", p, "") for p in peers]
        for engine, median, ratio, cpu_ratio, figures, position_info in rows:
            lines.append(
                f"| {group} | {engine} | {median / n * 1e6:.2f} us | {ratio} | {figures['cpu'] / n * 1e6:.2f} us "
                f"| {cpu_ratio} | {figures['wchar'] / n:,.0f} | {figures['bytes'] / n:,.0f} | {position_info} |"
            )
    return lines


def _day_lines(benchmarks: list[Any]) -> list[str]:
    """The broker's day per cursor a round: each engine's acks and flush (medians over the
    same rounds), ackstore's against the faster peer's round by round (acks and flush, and
    the flush alone), write(2) and logical bytes; a rollover case also gives its rollover
    rounds against the plain rounds between them."""
    cases = [bench for bench in benchmarks if _day(bench)]
    if not cases:
        return []
    lines = [
        "| workload | engine | acks + flush per cursor | acks | flush | vs the faster peer: acks + flush "
        "| flush alone | write(2) B per cursor | logical B per cursor |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    said = {
        "list": "one ack call per read",
        "each": "one ack call per entry",
        "entries": "one ack_entries call per ledger read",
        "stuck": "one ack call per read, 80 holes held",
        "capped": "one ack call per read, 80 holes held, 64 ranges persisted",
        "wide": "one ack call per read, 400 holes held",
        "queue": "one ack call per read, 1,000 holes held",
        "deep": "one ack call per read, 10,000 holes held",
        "over": "one ack call per read, 12,000 holes held, 10,000 ranges persisted",
        "late": "one ack call per read, every other entry acked 40 rounds late",
        "history": "one ack call per read, an hour of history",
        "aging": "one ack call per read, 80 holes held across 150 rollovers",
    }
    order = {variant: i for i, variant in enumerate(said)}  # (the table's order: the labels')
    for case in sorted(
        cases,
        key=lambda c: (
            c.extra_info["rollover"],
            c.extra_info["cursors"],
            order[c.extra_info["variant"]],
            c.extra_info["k"],
        ),
    ):
        info = case.extra_info
        n = info["cursors"]
        what = f"{n:,} cursors, k={info['k']}, " + said[info["variant"]]
        if info["rollover"]:
            what += f", rollover rounds ({info['total'] / info['plain']:.2f}x the plain rounds)"
        rows = [(info, "ackstore", f"{info['paired']:.2f}x", f"{info['paired_flush']:.2f}x")]
        rows += [(peer, peer["engine"], "", "") for peer in sorted(info["peers"].values(), key=lambda p: p["engine"])]
        for figures, engine, paired, paired_flush in rows:
            lines.append(
                f"| {what} | {engine} | {figures['total'] / n * 1e6:.2f} us | {figures['ack'] / n * 1e6:.2f} us "
                f"| {figures['flush'] / n * 1e6:.2f} us | {paired} | {paired_flush} | {figures['wchar'] / n:,.0f} "
                f"| {figures['bytes'] / n:,.0f} |"
            )
    return lines


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--docs-table",
        metavar="MARKDOWN",
        help="also write the ratio table into MARKDOWN, between <!-- begin ratios --> and <!-- end ratios -->",
    )


def _groups_left_out(target: Path, lines: list[str]) -> list[str]:
    """The groups of ``target``'s ratio table that ``lines`` (this run's rows) do not have."""
    import re

    block = re.search(r"<!-- begin ratios -->(.*?)<!-- end ratios -->", target.read_text(), re.S)
    if block is None:
        return []
    group_of = re.compile(r"^\| ([^|]+?) \|")
    had = {m.group(1) for line in block.group(1).splitlines()[2:] if (m := group_of.match(line))}
    ran = {m.group(1) for line in lines if (m := group_of.match(line))}
    return sorted(had - ran - {"group", "---"})


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = getattr(config, "_benchmarksession", None)
    benchmarks = [b for b in getattr(session, "benchmarks", []) if b]
    if not benchmarks:
        return
    terminalreporter.section("ratios against the baseline of each group (same process, same data)")
    lines = _ratio_lines(benchmarks)
    for line in lines:
        terminalreporter.write_line(line)
    steady = _steady_lines(benchmarks)
    if steady:
        terminalreporter.section("the steady workload, per cursor a flush")
        for line in steady:
            terminalreporter.write_line(line)
    day = _day_lines(benchmarks)
    if day:
        terminalreporter.section("a broker's day, per cursor a round")
        for line in day:
            terminalreporter.write_line(line)
    target = config.getoption("--docs-table")
    if target:
        from .docs_table import replace_block

        missing = _groups_left_out(Path(target), lines)
        if missing:  # a run of some suites only: the table keeps the whole run's rows
            terminalreporter.write_line(
                f"the ratio table in {target} was not written: this run left out {len(missing)} of its groups "
                f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); run every suite to rewrite it"
            )
        elif lines:
            replace_block(Path(target), "ratios", lines)
        if steady:
            replace_block(Path(target), "steady", steady)
        if day:
            replace_block(Path(target), "broker-day", day)
