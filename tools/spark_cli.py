"""``ackstore-spark``: the bulk jobs. ``ackstore-spark --help`` explains them.

ackstore-spark pipeline out/ --scale small                          # local[*]
ackstore-spark pipeline /shared/run --master spark://host:7077      # a cluster: the environment travels
ackstore-spark pack-env                                             # build (or reuse) that archive, print it
PYSPARK_DRIVER_PYTHON=.venv/bin/python spark-submit --master spark://host:7077 \
    tools/spark_cli.py pipeline /shared/run                        # the same through spark-submit
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from ackstore.recovery.exit_path import run

from ackstore import __version__

__all__ = ["main"]


def _master(requested: str | None) -> str | None:
    """The master this run will use: ``--master``, else what spark-submit set, else None
    (local[*], unless SPARK_HOME says a Spark installation decides)."""
    if requested:
        return requested
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # launched by spark-submit: its JVM holds the conf
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connect to that JVM, so SparkConf reads its settings
        return SparkConf().get("spark.master", None)
    return None


def _session(args: _Args) -> Any:
    from ackstore.tools.spark_env import ENV_NAME, build_env_archive, is_local_master
    from pyspark.sql import SparkSession

    master = _master(args.master)
    builder = SparkSession.builder.appName("ackstore").config("spark.ui.showConsoleProgress", "true")
    if args.master:
        builder = builder.master(args.master)
    elif master is None and "SPARK_HOME" not in os.environ and not os.environ.get("PYSPARK_SUBMIT_ARGS"):
        builder = builder.master("local[*]")
    if is_local_master(master) and not args.env_archive:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # tasks run here: this very Python
    else:  # executors elsewhere: ship the packed environment and run its Python
        archive = args.env_archive or build_env_archive(args.env_cache, args.python_prefix)
        builder = builder.config("spark.archives", f"{Path(archive).resolve()}#{ENV_NAME}")
        os.environ["PYSPARK_PYTHON"] = f"./{ENV_NAME}/bin/python"
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class _Args:
    """One run's settings (what the options say, checked)."""

    command: str
    outdir: Path
    master: str | None
    env_archive: Path | None
    env_cache: Path | None
    python_prefix: str | None
    scale: str = "small"
    seed: int = 1
    plant_faults: int = 0


def _with(command: Callable[..., Any], options: list[Callable[[Any], Any]]) -> Callable[..., Any]:
    """``command`` with ``options``, listed in its help in this order."""
    for option in reversed(options):
        command = option(command)
    return command


def _environment_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the environment a cluster run ships (every job's, and pack-env's)."""
    return _with(
        command,
        [
            click.option(
                "--env-cache",
                type=click.Path(path_type=Path),
                metavar="DIR",
                help="where environment archives are built and reused (default $ACKSTORE_CACHE or ~/.cache/ackstore)",
            ),
            click.option(
                "--python-prefix",
                metavar="PREFIX",
                help="the prefix of the executors' Python when it differs from this one's (e.g. /usr for "
                "/usr/bin/python3.11); default: the same path as here",
            ),
        ],
    )


def _job_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every job reads: where it runs."""
    command = _environment_options(command)
    return _with(
        command,
        [
            click.option("--master", help="Spark master (default local[*], or what spark-submit sets)"),
            click.option(
                "--env-archive",
                type=click.Path(path_type=Path),
                metavar="PATH",
                help="a prebuilt environment archive (from pack-env) to ship instead of building one; "
                "without it a non-local master gets one built or reused from --env-cache",
            ),
        ],
    )


def _workload_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the jobs that make workloads (generate, pipeline)."""
    return _with(
        command,
        [
            click.option(
                "--scale", default="small", show_default=True, type=click.Choice(["tiny", "small", "medium", "large"])
            ),
            click.option("--seed", type=int, default=1, show_default=True),
            click.option(
                "--plant-faults",
                type=int,
                default=0,
                metavar="N",
                help="after generate, damage N random snapshots in known ways (planted.json); audit must find "
                "exactly those",
            ),
        ],
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ackstore-spark", message="%(prog)s %(version)s")
def cli() -> None:
    """Stress-generate ack-hole workloads through the real engine, then audit the stores
    (checks, recovery against expected digests, cross-store Spark SQL checks).

    OUTDIR is made absolute before any job starts; on a cluster it must be on storage every
    executor sees at the same path (NFS, a shared mount). Exit status: 0 ok (audit PASS),
    1 failure (audit FAIL), 2 usage.
    """


def _job(name: str, help_text: str, makes_workloads: bool) -> None:
    def run(outdir: Path, **options: Any) -> int:
        return _checked_run(_Args(command=name, outdir=outdir, **options))

    if makes_workloads:
        run = _workload_options(run)
    cli.command(name, help=help_text)(click.argument("outdir", type=click.Path(path_type=Path))(_job_options(run)))


_job("generate", "Workload specs -> stores -> single-file snapshots in OUTDIR/snapshots, expected digests.", True)
_job("compact", "Rewrite every snapshot in OUTDIR/snapshots with only its live records.", False)
_job("audit", "Check and recover every snapshot against the expected digests; report.md and summary.json.", False)
_job("pipeline", "generate, then compact, then audit.", True)


@cli.command("pack-env")
@_environment_options
def pack_env(**options: Any) -> int:
    """Build (or reuse) the environment archive a cluster run ships, and print its path."""
    from ackstore.tools.spark_env import build_env_archive

    archive = build_env_archive(options["env_cache"], options["python_prefix"], log=lambda m: print(m, file=sys.stderr))
    print(archive)
    return 0


class _Usage(Exception):
    """A usage problem found after parsing (exit 2)."""


def _checked_run(args: _Args) -> int:
    if args.plant_faults < 0:
        raise _Usage(f"--plant-faults {args.plant_faults} is not allowed: allowed 0 or more")
    if args.env_archive is not None and not args.env_archive.is_file():
        raise _Usage(f"--env-archive {args.env_archive} is not allowed: no such file (make one with pack-env)")
    args.outdir = args.outdir.expanduser().resolve()  # executors run elsewhere: never a relative path
    if args.outdir.exists() and not args.outdir.is_dir():
        raise _Usage(f"OUTDIR {args.outdir} is not allowed: it exists and is not a directory")
    if any(c in str(args.outdir) for c in "[]{}*?\\"):
        raise _Usage(
            f"OUTDIR {args.outdir} is not allowed: Spark reads [ ] {{ }} * ? \\ in a path as a glob; "
            "allowed a path without them"
        )
    return _run(args)


def main(argv: list[str] | None = None) -> int:
    """Run ``ackstore-spark``; the one exit path: 0 ok, 1 failure, 2 usage, one line on errors."""
    # bad specs, too many faults to plant, an unwritable OUTDIR are ValueError / OSError
    spark = "install the Spark extras: pip install 'ackstore[spark]'"
    return run(cli, argv, "ackstore-spark", _Usage, (ValueError, OSError), {"pyspark": spark, "matplotlib": spark})


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    """What a run ends with before its verdict: what was audited, how long each phase took,
    what the planted faults gave (the whole of it is in summary.json and report.md)."""
    phases = ", ".join(
        f"{name} {summary[key]:.1f} s"
        for name, key in (("generate", "generate_seconds"), ("compact", "compact_seconds"), ("audit", "audit_seconds"))
        if isinstance(summary.get(key), (int, float))
    )
    planted, missed = summary.get("planted_faults", []), summary.get("planted_missed", [])
    lines = [
        f"audit: {summary.get('stores', 0):,} stores, {summary.get('cursors', 0):,} cursors, "
        f"{summary.get('ranges', 0):,} ranges; {phases}",
        f"faults planted: {len(planted)}, found {len(planted) - len(missed)}; "
        f"false positives: {len(summary.get('false_positives', []))}; "
        f"cursors no spec made: {len(summary.get('unexpected_cursors', []))}",
    ]
    return lines


def _plant(args: _Args) -> None:
    """``--plant-faults N``: damage N snapshots in known ways and say which."""
    if args.plant_faults:
        from ackstore.tools.faults import plant_faults

        for fault in plant_faults(args.outdir, args.plant_faults, args.seed):
            print(f"planted {fault['kind']} in {fault['spec_id']}")


def _run(args: _Args) -> int:
    from ackstore.tools.spark_env import executor_environment, versions  # spark-submit runs this file
    from ackstore.tools.spark_jobs import record_run, run_audit, run_compact, run_generate, specs_for_scale

    spark = _session(args)
    try:
        args.outdir.mkdir(parents=True, exist_ok=True)
        master = spark.sparkContext.master
        if args.command in ("generate", "pipeline"):
            specs = specs_for_scale(args.scale, args.seed)
            t0 = time.perf_counter()
            print(f"generate: {len(specs)} workload specs at scale {args.scale} on {master} ...", flush=True)
            rows = run_generate(spark, args.outdir, specs).count()
            seconds = time.perf_counter() - t0
            record_run(args.outdir, scale=args.scale, seed=args.seed, stores=len(specs), generate_seconds=seconds)
            print(f"generate: {rows} cursors in {seconds:.1f} s -> {args.outdir / 'snapshots'}")
            if args.command == "generate":
                _plant(args)
        if args.command in ("compact", "pipeline"):
            t0 = time.perf_counter()
            compacted = run_compact(spark, args.outdir).collect()
            record_run(args.outdir, compact_seconds=time.perf_counter() - t0)
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
            context = record_run(
                args.outdir,
                master=master,
                date=time.strftime("%Y-%m-%d %H:%M %Z"),
                versions=versions(),
                executors=executor_environment(spark),
            )
            summary = run_audit(spark, args.outdir, context)
            for line in _summary_lines(summary):
                print(line)
            print(f"report: {args.outdir / 'report.md'} (and summary.json)")
            print(f"audit verdict: {summary['verdict']}")
            return 0 if summary["verdict"] == "PASS" else 1
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
