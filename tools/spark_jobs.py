"""The Spark side: generate ack-hole workloads, compact and audit store snapshots in bulk.

Each job is extract -> transform -> load; the transforms are pure functions of
DataFrames (tested with small inputs in a local session). Executors run the real engine
inside ``mapPartitions``; stores travel as single-file snapshots on shared storage and are
copied to executor-local temp before they are opened.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from .workloads import WorkloadSpec, engine_digest, run_spec

__all__ = [
    "SCALES",
    "specs_for_scale",
    "specs_df",
    "generate_transform",
    "audit_transform",
    "verdict_transform",
    "overlap_check",
    "below_mark_delete_check",
    "outside_directory_check",
    "hole_distribution",
    "scenario_table",
    "compact_transform",
    "run_generate",
    "run_compact",
    "run_audit",
]

SCALES: dict[str, dict[str, int]] = {
    "tiny": {"per_scenario": 1, "ledgers": 2, "entries": 300, "cursors": 2},
    "small": {"per_scenario": 4, "ledgers": 4, "entries": 2000, "cursors": 2},
    "medium": {"per_scenario": 20, "ledgers": 10, "entries": 10_000, "cursors": 3},
    "large": {"per_scenario": 100, "ledgers": 20, "entries": 50_000, "cursors": 4},
}


def specs_for_scale(scale: str, seed: int = 1) -> list[WorkloadSpec]:
    from .workloads import SCENARIOS

    if scale not in SCALES:
        raise ValueError(f"scale {scale!r} is not allowed: allowed {', '.join(SCALES)}")
    size = SCALES[scale]
    specs = []
    for scenario in SCENARIOS:
        for i in range(size["per_scenario"]):
            specs.append(
                WorkloadSpec(
                    spec_id=f"{scenario}-{i}",
                    scenario=scenario,
                    seed=seed * 1000 + i,
                    ledgers=size["ledgers"],
                    entries=size["entries"],
                    cursors=size["cursors"],
                    hole_rate=0.02 + 0.02 * (i % 4),
                    flush_every=max(100, size["entries"] // 4),
                    crash_probability=0.2,
                ).validate()
            )
    return specs


def specs_df(spark: SparkSession, specs: list[WorkloadSpec]) -> DataFrame:
    """Extract: the specs as a DataFrame, each validated first (nothing is written for a bad one)."""
    return spark.createDataFrame([Row(**s.validate().to_row()) for s in specs])


def generate_transform(specs: DataFrame, snapshot_dir: str) -> DataFrame:
    """Transform: run every spec through the engine on the executors; one row per cursor."""

    def run(rows: Iterable[Row]) -> Iterator[Row]:
        work = Path(tempfile.mkdtemp(prefix="ackstore-gen-"))
        try:
            for row in rows:
                for out in run_spec(WorkloadSpec.from_row(row.asDict()), work, Path(snapshot_dir)):
                    yield Row(**out)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return specs.rdd.mapPartitions(run).toDF()


def _compact_snapshot(path: str) -> Row:
    """Rewrite one snapshot with live records only (local copy, compact, copy back, rename)."""
    from ackstore import AckStore, AckStoreError

    work = Path(tempfile.mkdtemp(prefix="ackstore-compact-"))
    before = Path(path).stat().st_size
    try:
        (work / "store").mkdir()
        shutil.copyfile(path, work / "store" / "data.mdb")
        with AckStore.open(work / "store", sync=False) as store:
            stats = store.compact()
            store.copy(work / "out.mdb", compact=True)
        tmp = Path(path + ".compacting")
        shutil.copyfile(work / "out.mdb", tmp)
        tmp.replace(path)
        return Row(
            snapshot=Path(path).stem,
            bytes_before=before,
            bytes_after=Path(path).stat().st_size,
            records_before=sum(s.records_before for s in stats),
            records_after=sum(s.records_after for s in stats),
            error="",
        )
    except (AckStoreError, OSError) as exc:
        return Row(
            snapshot=Path(path).stem,
            bytes_before=before,
            bytes_after=before,
            records_before=0,
            records_after=0,
            error=str(exc),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compact_transform(snapshots: DataFrame) -> DataFrame:
    """Transform: compact every snapshot (column ``path``) in place; one row of bytes before/after each."""
    rdd = snapshots.rdd.mapPartitions(lambda rows: (_compact_snapshot(row.path) for row in rows))
    schema = (
        "snapshot string, bytes_before long, bytes_after long, records_before long, records_after long, error string"
    )
    return snapshots.sparkSession.createDataFrame(rdd, schema)


def _snapshots_df(spark: SparkSession, outdir: Path) -> DataFrame:
    """The snapshot paths, sliced into ~4 tasks per core (no shuffle): even load, visible progress."""
    paths = sorted(str(p) for p in (outdir / "snapshots").glob("*.mdb"))
    slices = max(1, min(len(paths), 4 * spark.sparkContext.defaultParallelism))
    return spark.createDataFrame(spark.sparkContext.parallelize([(p,) for p in paths], slices), "path string")


def run_compact(spark: SparkSession, outdir: Path) -> DataFrame:
    """Compact: every snapshot rewritten with live records; rows to ``outdir/compaction`` (Parquet)."""
    rows = compact_transform(_snapshots_df(spark, outdir))
    rows.write.mode("overwrite").parquet(str(outdir / "compaction"))
    return spark.read.parquet(str(outdir / "compaction"))


def _audit_snapshot(path: str) -> Iterator[Row]:
    from ackstore import AckStore, AckStoreError, check

    spec_id = Path(path).stem
    local = Path(tempfile.mkdtemp(prefix="ackstore-audit-")) / Path(path).name
    try:
        shutil.copyfile(path, local)
        with AckStore.open(local, readonly=True, verify="all") as store:
            findings = [str(f) for f in check(store)]
            for topic_name in store.topics():
                topic = store.topic(topic_name)
                for name in topic.cursors():
                    t0 = time.perf_counter()
                    cur = topic.cursor(name)
                    seconds = time.perf_counter() - t0
                    by_ledger = list(cur.ledger_ranges())
                    digest, acked = engine_digest(cur, by_ledger)
                    state_bytes = cur.log_usage().live_bytes
                    ranges = [(ledger, first, last) for ledger, rs in by_ledger for first, last in rs]
                    ledgers = [(lid, -1 if count is None else count) for lid, count in topic.ledgers()]
                    yield Row(
                        spec_id=spec_id,
                        topic=topic_name,
                        cursor=name,
                        digest=digest,
                        acked=acked,
                        mark_delete=str(cur.mark_delete_position),
                        range_count=cur.ack_range_count,
                        findings=findings,
                        error="",
                        recover_seconds=seconds,
                        bytes=Path(path).stat().st_size,
                        state_bytes=state_bytes,
                        ranges=ranges,
                        ledgers=ledgers,
                    )
    except (AckStoreError, OSError) as exc:  # a snapshot that cannot be opened is a finding, not a crash
        yield Row(
            spec_id=spec_id,
            topic="",
            cursor="",
            digest="",
            acked=0,
            mark_delete="",
            range_count=0,
            findings=[f"unreadable: {exc}"],
            error=str(exc),
            recover_seconds=0.0,
            bytes=0,
            state_bytes=0,
            ranges=[],
            ledgers=[],
        )
    finally:
        shutil.rmtree(local.parent, ignore_errors=True)


AUDIT_SCHEMA = (
    "spec_id string, topic string, cursor string, digest string, acked long, mark_delete string, "
    "range_count long, findings array<string>, error string, recover_seconds double, bytes long, state_bytes long, "
    "ranges array<struct<ledger:long, first:long, last:long>>, "
    "ledgers array<struct<ledger:long, count:long>>"
)


def audit_transform(snapshots: DataFrame) -> DataFrame:
    """Transform: check and recover every snapshot (column ``path``) on the executors."""
    rdd = snapshots.rdd.mapPartitions(lambda rows: (out for row in rows for out in _audit_snapshot(row.path)))
    # the rows are built by _audit_snapshot with fixed types: skip per-value verification (~40% of the cost)
    return snapshots.sparkSession.createDataFrame(rdd, AUDIT_SCHEMA, verifySchema=False)


def verdict_transform(expected: DataFrame, audited: DataFrame) -> DataFrame:
    """Transform: one row per expected cursor: did the store recover exactly what was flushed?"""
    a = audited.select("spec_id", "topic", "cursor", "digest", "findings", "error")
    return (
        expected.select("spec_id", "scenario", "topic", "cursor", "expected_digest")
        .join(a, ["spec_id", "topic", "cursor"], "left")
        .withColumn("digest_ok", F.coalesce(F.col("digest") == F.col("expected_digest"), F.lit(False)))
        .withColumn("clean", F.coalesce(F.size("findings") == 0, F.lit(False)))
        .select("spec_id", "scenario", "topic", "cursor", "digest_ok", "clean", "findings")
    )


def ranges_table(audited: DataFrame) -> DataFrame:
    """``(store, topic, cursor, ledger, first, last)``: every ack range of every store."""
    return audited.select(F.col("spec_id").alias("store"), "topic", "cursor", F.explode("ranges").alias("r")).select(
        "store", "topic", "cursor", "r.ledger", "r.first", "r.last"
    )


def overlap_check(ranges: DataFrame) -> DataFrame:
    """Ranges of one cursor that overlap or touch the previous one (they must have been merged)."""
    w = Window.partitionBy("store", "topic", "cursor", "ledger").orderBy("first")
    return ranges.withColumn("prev_last", F.lag("last").over(w)).where(F.col("first") <= F.col("prev_last") + 1)


def below_mark_delete_check(ranges: DataFrame, audited: DataFrame) -> DataFrame:
    """Ranges at or below their cursor's mark-delete position."""
    md = audited.where(F.col("mark_delete") != "").select(
        F.col("spec_id").alias("store"),
        "topic",
        "cursor",
        F.split("mark_delete", ":").getItem(0).cast("long").alias("md_ledger"),
        F.split("mark_delete", ":").getItem(1).cast("long").alias("md_entry"),
    )
    return ranges.join(md, ["store", "topic", "cursor"]).where(
        (F.col("ledger") < F.col("md_ledger"))
        | ((F.col("ledger") == F.col("md_ledger")) & (F.col("first") <= F.col("md_entry")))
    )


def outside_directory_check(ranges: DataFrame, audited: DataFrame) -> DataFrame:
    """Ranges in a ledger the topic does not hold, or past a sealed ledger's end."""
    directory = audited.select(
        F.col("spec_id").alias("store"), "topic", "cursor", F.explode("ledgers").alias("d")
    ).select("store", "topic", "cursor", F.col("d.ledger").alias("ledger"), F.col("d.count").alias("count"))
    joined = ranges.join(directory, ["store", "topic", "cursor", "ledger"], "left")
    return joined.where(F.col("count").isNull() | ((F.col("count") >= 0) & (F.col("last") >= F.col("count"))))


def scenario_table(per_cursor: DataFrame) -> DataFrame:
    """Per scenario: cursors, holes, ranges recovered, live bytes, bytes per range, mean recovery ms."""
    return (
        per_cursor.groupBy("scenario")
        .agg(
            F.count("*").alias("cursors"),
            F.sum("holes").alias("holes"),
            F.sum("range_count").alias("ranges"),
            F.sum("state_bytes").alias("state_bytes"),
            F.round(F.avg("recover_seconds") * 1000, 2).alias("avg_recover_ms"),
        )
        .withColumn("bytes_per_range", F.round(F.col("state_bytes") / F.greatest(F.col("ranges"), F.lit(1)), 2))
        .orderBy("scenario")
    )


def hole_distribution(expected: DataFrame) -> DataFrame:
    """Holes per cursor, by scenario: min, median, p90, max."""
    return (
        expected.groupBy("scenario")
        .agg(
            F.min("holes").alias("min"),
            F.percentile_approx("holes", 0.5).alias("p50"),
            F.percentile_approx("holes", 0.9).alias("p90"),
            F.max("holes").alias("max"),
        )
        .orderBy("scenario")
    )


def run_generate(spark: SparkSession, outdir: Path, specs: list[WorkloadSpec]) -> DataFrame:
    """Generate: specs -> stores -> snapshots in ``outdir/snapshots``; expected rows as Parquet."""
    snapshots = outdir / "snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)
    tasks = max(1, min(len(specs), 4 * spark.sparkContext.defaultParallelism))  # even load, visible progress
    expected = generate_transform(specs_df(spark, specs).repartition(tasks), str(snapshots))
    expected.write.mode("overwrite").parquet(str(outdir / "expected"))
    return spark.read.parquet(str(outdir / "expected"))


def run_audit(spark: SparkSession, outdir: Path) -> dict[str, Any]:
    """Audit: every snapshot checked and recovered, compared with ``expected``; tables + summary."""
    paths = sorted(str(p) for p in (outdir / "snapshots").glob("*.mdb"))
    snapshots = _snapshots_df(spark, outdir)
    started = time.perf_counter()
    audited = audit_transform(snapshots).cache()
    audited.count()
    seconds = time.perf_counter() - started
    expected = spark.read.parquet(str(outdir / "expected"))
    verdict = verdict_transform(expected, audited)
    ranges = ranges_table(audited)
    ranges.write.mode("overwrite").parquet(str(outdir / "ranges"))
    verdict.write.mode("overwrite").parquet(str(outdir / "verdict"))
    bad = verdict.where(~F.col("digest_ok") | ~F.col("clean")).orderBy("spec_id", "topic", "cursor").collect()
    unreadable = audited.where(F.col("error") != "").select("spec_id", "error").collect()
    summary: dict[str, Any] = {
        "snapshots": len(paths),
        "cursors": verdict.count(),
        "mismatched_or_unclean": [f"{r.spec_id}/{r.topic}/{r.cursor}" for r in bad],
        "unreadable": [f"{r.spec_id}: {r.error}" for r in unreadable],
        "overlapping_ranges": overlap_check(ranges).count(),
        "ranges_below_mark_delete": below_mark_delete_check(ranges, audited).count(),
        "ranges_outside_directory": outside_directory_check(ranges, audited).count(),
        "holes_per_cursor": [r.asDict() for r in hole_distribution(expected).collect()],
        "audit_seconds": seconds,
        "audit_stores_per_second": len(paths) / seconds if seconds else 0.0,
        "audit_mb_per_second": sum(Path(p).stat().st_size for p in paths) / 1e6 / seconds if seconds else 0.0,
    }
    per_cursor = expected.join(
        audited.select("spec_id", "topic", "cursor", "range_count", "state_bytes", "recover_seconds"),
        ["spec_id", "topic", "cursor"],
        "left",
    ).cache()
    summary["by_scenario"] = [r.asDict() for r in scenario_table(per_cursor).collect()]
    from .plots import write_plots

    summary["plots"] = write_plots(
        outdir,
        [
            r.asDict()
            for r in per_cursor.select("scenario", "holes", "range_count", "state_bytes", "recover_seconds").collect()
        ],
    )
    from .faults import planted

    flagged = {m.split("/")[0] for m in summary["mismatched_or_unclean"]} | {
        u.split(":")[0] for u in summary["unreadable"]
    }
    plants = {p["spec_id"] for p in planted(outdir)}
    summary["planted_faults"] = sorted(plants)
    summary["planted_missed"] = sorted(plants - flagged)
    summary["false_positives"] = sorted(flagged - plants)
    if plants:  # with planted faults, the audit passes when it finds exactly them
        passed = flagged == plants and not summary["overlapping_ranges"]
    else:
        passed = not flagged and not any(
            summary[k] for k in ("overlapping_ranges", "ranges_below_mark_delete", "ranges_outside_directory")
        )
    summary["verdict"] = "PASS" if passed else "FAIL"
    _write(outdir, summary)
    return summary


def _write(outdir: Path, summary: dict[str, Any]) -> None:
    """``summary.json`` for scripts and ``report.md`` for people."""
    (outdir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    lines = [
        f"# ackstore audit: {summary['verdict']}",
        "",
        f"{summary['snapshots']} snapshots, {summary['cursors']} cursors; audit {summary['audit_seconds']:.2f} s "
        f"({summary['audit_stores_per_second']:.1f} stores/s, {summary['audit_mb_per_second']:.2f} MB/s).",
        "",
        "| scenario | cursors | holes | ranges recovered | live bytes | bytes/range | avg recover ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['scenario']} | {r['cursors']} | {r['holes']} | {r['ranges']} | {r['state_bytes']} | "
            f"{r['bytes_per_range']} | {r['avg_recover_ms']} |"
            for r in summary.get("by_scenario", [])
        ),
        "",
        f"- stores whose recovered state differs from the expected digest, or with findings: "
        f"{summary['mismatched_or_unclean'] or 'none'}",
        f"- unreadable snapshots: {summary['unreadable'] or 'none'}",
        f"- overlapping ranges: {summary['overlapping_ranges']}; ranges at or below the mark-delete: "
        f"{summary['ranges_below_mark_delete']}; ranges outside the ledger directory: "
        f"{summary['ranges_outside_directory']}",
        "",
        "| scenario | holes per cursor: min | p50 | p90 | max |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r['scenario']} | {r['min']} | {r['p50']} | {r['p90']} | {r['max']} |"
            for r in summary.get("holes_per_cursor", [])
        ),
    ]
    if summary.get("planted_faults"):
        lines.append(
            f"- planted faults: {summary['planted_faults']}; missed: {summary['planted_missed'] or 'none'}; "
            f"false positives: {summary['false_positives'] or 'none'}"
        )
    if summary.get("plots"):
        lines += ["", "## Plots", "", *(f"![{Path(p).stem}]({p})" for p in summary["plots"])]
    elif "plots" in summary:
        lines += ["", "Plots skipped: matplotlib is not installed (pip install 'ackstore[spark]')."]
    (outdir / "report.md").write_text("\n".join(lines) + "\n")
