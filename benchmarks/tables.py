"""The tables of a benchmark run: the ratio of every case to its group's baseline, the
steady workload's per cursor a flush, and the broker's day per cursor a round.

``benchmarks/conftest.py`` prints them at the end of a pytest run (and writes them into
``docs/benchmarks.md`` with ``--docs-table``). ``make bench-docs`` runs each suite in a
process of its own instead, each saving its cases with ``--benchmark-json``, and builds
the tables from those files:

    python -m benchmarks.tables out/bench --docs docs/benchmarks.md

A suite then starts in a fresh process, whatever the suites before it did: all in one
process, the steady workload's flush reads markedly slower after the peers' suite than
alone, and the metrics suite's scrape against its baseline moves with whichever suites ran
first. A case and its baseline run side by side in one process.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .docs_table import docs_option, replace_block

__all__ = ["day_lines", "groups_left_out", "load_runs", "main", "ratio_lines", "steady_lines", "write_tables"]


def _steady(bench: Any) -> bool:
    """A case of the steady workload (its own table: :func:`steady_lines`)."""
    return (bench.group or "").startswith("steady:") and "cursors" in bench.extra_info


def _day(bench: Any) -> bool:
    """A case of the broker's day (its own table: :func:`day_lines`)."""
    return bool(bench.extra_info.get("day"))


def ratio_lines(benchmarks: list[Any]) -> list[str]:
    """The ratio table: every case but the steady workload's and the broker's day's, by
    group, its median against its group's baseline (or paired with it, round by round),
    its operations a second, its bytes against the baseline's and what it handed write(2)."""
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


def steady_lines(benchmarks: list[Any]) -> list[str]:
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


def day_lines(benchmarks: list[Any]) -> list[str]:
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


def groups_left_out(target: Path, lines: list[str]) -> list[str]:
    """The groups of ``target``'s ratio table that ``lines`` (this run's rows) do not have."""
    block = re.search(r"<!-- begin ratios -->(.*?)<!-- end ratios -->", target.read_text(), re.S)
    if block is None:
        return []
    group_of = re.compile(r"^\| ([^|]+?) \|")
    had = {m.group(1) for line in block.group(1).splitlines()[2:] if (m := group_of.match(line))}
    ran = {m.group(1) for line in lines if (m := group_of.match(line))}
    return sorted(had - ran - {"group", "---"})


def write_tables(benchmarks: list[Any], target: Path) -> list[str]:
    """Write the run's tables into ``target``'s blocks: the ratio table only when the run
    has every group the file's table has (a run of some suites keeps the whole run's rows),
    the steady and broker's-day tables when the run has them. Returns what was not written."""
    said: list[str] = []
    lines = ratio_lines(benchmarks)
    missing = groups_left_out(target, lines)
    if missing:
        said.append(
            f"the ratio table in {target} was not written: this run left out {len(missing)} of its groups "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); run every suite to rewrite it"
        )
    elif lines:
        replace_block(target, "ratios", lines)
    steady = steady_lines(benchmarks)
    if steady:
        replace_block(target, "steady", steady)
    day = day_lines(benchmarks)
    if day:
        replace_block(target, "broker-day", day)
    return said


def load_runs(directory: Path) -> list[Any]:
    """Every case saved in ``directory``'s ``*.json`` files (pytest-benchmark's
    ``--benchmark-json``), each with what the tables read of a case: its group, name, median
    and extra info. ValueError for a directory with no such file."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise ValueError(f"{directory} holds no benchmark runs (*.json from pytest --benchmark-json)")
    cases = []
    for path in files:
        for bench in json.loads(path.read_text())["benchmarks"]:
            cases.append(
                SimpleNamespace(
                    group=bench["group"],
                    name=bench["name"],
                    stats=SimpleNamespace(median=bench["stats"]["median"]),
                    extra_info=bench["extra_info"],
                )
            )
    return cases


def main(argv: list[str]) -> int:
    """``python -m benchmarks.tables RUN_DIR [--docs MARKDOWN]``: print the tables of the runs
    saved in RUN_DIR, and write them into MARKDOWN's blocks."""
    docs, args = docs_option(argv)
    if len(args) != 1:
        print("usage: python -m benchmarks.tables RUN_DIR [--docs MARKDOWN]", file=sys.stderr)
        return 2
    try:
        cases = load_runs(Path(args[0]))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    for title, lines in (
        ("ratios against the baseline of each group", ratio_lines(cases)),
        ("the steady workload, per cursor a flush", steady_lines(cases)),
        ("a broker's day, per cursor a round", day_lines(cases)),
    ):
        if lines:
            print(f"\n{title}\n" + "\n".join(lines))
    if docs is not None:
        for line in write_tables(cases, docs):
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
