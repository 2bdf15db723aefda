"""``ackstore-spark``: the bulk jobs. ``ackstore-spark --help`` explains them.

ackstore-spark pipeline out/ --scale small            # local[*]
ackstore-spark audit out/ --master spark://host:7077  # any cluster; OUTDIR on shared storage
spark-submit --master yarn -m tools.spark_cli pipeline /shared/ackstore-run --scale medium
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _session(master: str | None):  # type: ignore[no-untyped-def]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("ackstore").config("spark.ui.showConsoleProgress", "true")
    if master:
        builder = builder.master(master)
    elif "SPARK_HOME" not in os.environ and not os.environ.get("PYSPARK_SUBMIT_ARGS"):
        builder = builder.master("local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ackstore-spark",
        description="Stress-generate ack-hole workloads through the real engine, then audit the stores "
        "(checks, recovery against expected digests, cross-store Spark SQL checks).",
    )
    parser.add_argument(
        "command", choices=["generate", "compact", "audit", "pipeline"], help="pipeline = generate + compact + audit"
    )
    parser.add_argument("outdir", type=Path, help="output directory (shared storage on a cluster)")
    parser.add_argument("--master", help="Spark master (default local[*], or what spark-submit sets)")
    parser.add_argument("--scale", default="small", choices=["tiny", "small", "medium", "large"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--plant-faults",
        type=int,
        default=0,
        metavar="N",
        help="after generate, damage N random snapshots in known ways (planted.json); audit must find exactly those",
    )
    args = parser.parse_args(argv)
    if args.plant_faults < 0:
        parser.error(f"--plant-faults {args.plant_faults} is not allowed: allowed 0 or more")
    if args.outdir.exists() and not args.outdir.is_dir():
        parser.error(f"OUTDIR {args.outdir} is not allowed: it exists and is not a directory")
    try:
        return _run(args)
    except (ValueError, OSError) as exc:  # bad specs, too many faults to plant, unwritable OUTDIR
        print(f"ackstore-spark: error: {exc}", file=sys.stderr)
        return 1


def _plant(args: argparse.Namespace) -> None:
    """``--plant-faults N``: damage N snapshots in known ways and say which."""
    if args.plant_faults:
        from tools.faults import plant_faults

        for fault in plant_faults(args.outdir, args.plant_faults, args.seed):
            print(f"planted {fault['kind']} in {fault['spec_id']}")


def _run(args: argparse.Namespace) -> int:
    from tools.spark_jobs import run_audit, run_compact, run_generate, specs_for_scale  # spark-submit runs this file

    spark = _session(args.master)
    try:
        args.outdir.mkdir(parents=True, exist_ok=True)
        if args.command in ("generate", "pipeline"):
            specs = specs_for_scale(args.scale, args.seed)
            t0 = time.perf_counter()
            print(f"generate: {len(specs)} workload specs at scale {args.scale} ...", flush=True)
            rows = run_generate(spark, args.outdir, specs).count()
            print(f"generate: {rows} cursors in {time.perf_counter() - t0:.1f} s -> {args.outdir / 'snapshots'}")
            if args.command == "generate":
                _plant(args)
        if args.command in ("compact", "pipeline"):
            compacted = run_compact(spark, args.outdir).collect()
            before, after = sum(r.bytes_before for r in compacted), sum(r.bytes_after for r in compacted)
            errors = [f"{r.snapshot}: {r.error}" for r in compacted if r.error]
            print(
                f"compact: {len(compacted)} snapshots, {before:,} -> {after:,} bytes"
                + (f"; failed: {errors}" if errors else "")
            )
        if args.command == "pipeline":  # after compaction, so it does not rewrite the damage away
            _plant(args)
        if args.command in ("audit", "pipeline"):
            print("audit: checking and recovering every snapshot ...", flush=True)
            summary = run_audit(spark, args.outdir)
            shown = {k: v for k, v in summary.items() if k != "by_scenario"}
            print(json.dumps(shown, indent=2))
            print(f"report: {args.outdir / 'report.md'} (and summary.json)")
            print(f"audit verdict: {summary['verdict']}")
            return 0 if summary["verdict"] == "PASS" else 1
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
