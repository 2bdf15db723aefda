"""Audit throughput: the Spark audit transform against a plain single-process loop.

    python -m benchmarks.audit_throughput OUTDIR [--master local[2]] [--rounds 3]

OUTDIR is what ``ackstore-spark generate`` wrote (its ``snapshots/``). Both sides run the
same per-snapshot work (``ackstore.tools.spark_jobs._audit_snapshot``: copy to local temp, check,
open read-only with verify="all", recover and digest every cursor, list its ranges). JVM
start is excluded: the session is created and a trivial job run before timing. Each side
is timed ``--rounds`` times; the best round is reported, as stores/s and MB/s, with the
Spark/loop ratio. A third row runs the same work on the executors without building the
DataFrame, to show what moving the rows (all ack ranges included) into the JVM costs; a
fourth times the whole audit phase (``run_audit``: snapshots to report).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["main", "measure", "loop_audit", "spark_audit"]


def loop_audit(paths: list[str]) -> tuple[float, int]:
    """Seconds and cursor rows for one pass of the plain loop."""
    from ackstore.tools.spark_jobs import _audit_snapshot

    started = time.perf_counter()
    rows = sum(1 for p in paths for _ in _audit_snapshot(p))
    return time.perf_counter() - started, rows


def spark_audit(spark, outdir: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Seconds and cursor rows for one pass of the Spark audit transform."""
    from ackstore.tools.spark_jobs import _snapshots_df, audit_transform

    started = time.perf_counter()
    rows = audit_transform(_snapshots_df(spark, outdir)).count()
    return time.perf_counter() - started, rows


def spark_audit_phase(spark, outdir: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Seconds for the whole audit phase, snapshots to report (``run_audit``: the transform,
    the range checks, the verdict, the tables, the plots); it rewrites OUTDIR's audit outputs."""
    from ackstore.tools.spark_jobs import run_audit

    started = time.perf_counter()
    summary = run_audit(spark, outdir)
    if summary["verdict"] != "PASS":
        raise SystemExit(f"audit_throughput: the audit of {outdir} did not pass: {summary['verdict']}")
    return time.perf_counter() - started, summary["cursors"]


def spark_rdd_only(spark, paths: list[str]) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """The same per-snapshot work on the executors, rows left in Python (no DataFrame): where
    the time goes when the audit's rows, ranges included, move into the JVM."""
    from ackstore.tools.spark_jobs import _audit_snapshot

    sc = spark.sparkContext
    started = time.perf_counter()
    rows = sc.parallelize(paths, max(1, min(len(paths), 4 * sc.defaultParallelism))).flatMap(_audit_snapshot).count()
    return time.perf_counter() - started, rows


def measure(outdir: Path, master: str, rounds: int) -> tuple[list[str], float, list[tuple[str, tuple[float, int]]]]:
    """The snapshots, their MB, and each side's best ``(seconds, cursor rows)`` of ``rounds``:
    the plain loop, the Spark transform, the same work with rows kept in Python, the whole
    audit phase (JVM and first-job start excluded). SystemExit when there are no snapshots."""
    paths = sorted(str(p) for p in (outdir / "snapshots").glob("*.mdb"))
    if not paths:
        raise SystemExit(f"audit_throughput: error: no snapshots in {outdir / 'snapshots'}")
    mb = sum(Path(p).stat().st_size for p in paths) / 1e6
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("ackstore-audit-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.range(4).count()  # JVM and first-job start, excluded
        loop = min(loop_audit(paths) for _ in range(rounds))
        sparked = min(spark_audit(spark, outdir) for _ in range(rounds))
        rdd_only = min(spark_rdd_only(spark, paths) for _ in range(rounds))
        phase = min(spark_audit_phase(spark, outdir) for _ in range(rounds))
    finally:
        spark.stop()
    assert loop[1] == sparked[1], f"the two sides audited different cursor counts: {loop[1]} vs {sparked[1]}"
    sides = [
        ("plain loop, one process, the per-store work only", loop),
        (f"Spark {master}, the per-store transform (DataFrame)", sparked),
        (f"Spark {master}, same work, rows kept in Python", rdd_only),
        (f"Spark {master}, the whole audit phase (snapshots to report)", phase),
    ]
    return paths, mb, sides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="a directory written by 'ackstore-spark generate'")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    paths, mb, sides = measure(args.outdir, args.master, args.rounds)
    loop, sparked, phase = sides[0][1], sides[1][1], sides[3][1]
    print(f"{len(paths)} snapshots, {mb:.1f} MB, {loop[1]} cursors; best of {args.rounds}")
    print("| side | seconds | stores/s | MB/s |")
    print("|---|---:|---:|---:|")
    for name, (seconds, _) in sides:
        print(f"| {name} | {seconds:.2f} | {len(paths) / seconds:.1f} | {mb / seconds:.2f} |")
    print(f"transform / loop throughput: {loop[0] / sparked[0]:.2f}x (target >= 1.5x)")
    print(f"audit phase / loop time: {phase[0] / loop[0]:.2f}x (target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
