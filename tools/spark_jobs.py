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
from array import array
from collections.abc import Iterable, Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from .checks import RANGE_CHECKS, RANGE_FLAGS
from .report import write_report
from .workloads import WorkloadSpec, digest_of_counts, engine_digest, run_spec

HISTOGRAM_TOP = 8
"""the audit's delivery-count histogram: counts 1..HISTOGRAM_TOP, the last one 'or more'"""

__all__ = [
    "SCALES",
    "specs_for_scale",
    "specs_df",
    "generate_transform",
    "audit_transform",
    "with_restores",
    "ranges_table",
    "range_checks",
    "range_check_counts",
    "RANGE_FLAGS",
    "per_cursor_table",
    "verdict_transform",
    "scenario_table",
    "hole_distribution",
    "compaction_table",
    "compact_transform",
    "record_run",
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
"""the workload sizes ``--scale`` names: specs per scenario, ledgers, entries a ledger, cursors a spec"""


def specs_for_scale(scale: str, seed: int = 1) -> list[WorkloadSpec]:
    """Every scenario's workload specs at ``scale`` (a name of :data:`SCALES`), seeded."""
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
            kept = sum(  # compaction leaves a cursor that keeps history as it is
                1
                for name in store.topics()
                for cursor in store.topic(name).cursors()
                if store.topic(name).cursor(cursor).config.history_seconds
            )
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
            kept_history=kept,
            error="",
        )
    except (AckStoreError, OSError) as exc:
        return Row(
            snapshot=Path(path).stem,
            bytes_before=before,
            bytes_after=before,
            records_before=0,
            records_after=0,
            kept_history=0,
            error=str(exc),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compact_transform(snapshots: DataFrame) -> DataFrame:
    """Transform: compact every snapshot (column ``path``) in place; one row of bytes before/after each."""
    rdd = snapshots.rdd.mapPartitions(lambda rows: (_compact_snapshot(row.path) for row in rows))
    schema = (
        "snapshot string, bytes_before long, bytes_after long, records_before long, records_after long, "
        "kept_history long, error string"
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


def _restored_digests(local: Path, restores: list[Any]) -> dict[tuple[str, str], str]:
    """Each ``(topic, cursor, time)`` of ``restores`` restored with ``Cursor.restore_as_of``
    in a writable copy of the snapshot ``local``, flushed, and read back by a reader: the
    digest of what the restore made durable (or the error that stopped it)."""
    from ackstore import AckStore, AckStoreError

    work = local.parent / "restore"
    work.mkdir()
    shutil.copyfile(local, work / "data.mdb")
    out: dict[tuple[str, str], str] = {}
    with AckStore.open(work, sync=False) as store:
        for r in restores:
            try:
                store.topic(r.topic).cursor(r.cursor).restore_as_of(r.time)
            except AckStoreError as exc:
                out[(r.topic, r.cursor)] = f"error: {exc}"
        store.flush()
    with AckStore.open(work, readonly=True) as store:
        for r in restores:
            if (r.topic, r.cursor) not in out:
                out[(r.topic, r.cursor)] = engine_digest(store.topic(r.topic).cursor(r.cursor))[0]
    return out


def _audit_snapshot(path: str, restores: list[Any] | None = None) -> Iterator[Row]:
    """One snapshot's audit rows, a row per cursor; ``restores`` (``bad_deploy``): the
    cursors to restore as of a time, each row then carries the restored state's digest."""
    from ackstore import AckStore, AckStoreError, Position, check

    spec_id = Path(path).stem
    local = Path(tempfile.mkdtemp(prefix="ackstore-audit-")) / Path(path).name
    try:
        shutil.copyfile(path, local)
        restored = _restored_digests(local, restores) if restores else {}
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
                    counts = {(p.ledger, p.entry): n for p, n in cur.delivery_counts().items()}
                    histogram = [0] * (HISTOGRAM_TOP + 1)  # index n: entries delivered n times (the top: or more)
                    for n in counts.values():
                        histogram[min(n, HISTOGRAM_TOP)] += 1
                    state_bytes = cur.log_usage().live_bytes
                    ledger_col, first_col, last_col = array("l"), array("l"), array("l")
                    for ledger, rs in by_ledger:
                        ledger_col.extend(repeat(ledger, len(rs)))
                        first_col.extend(first for first, _ in rs)
                        last_col.extend(last for _, last in rs)
                    ledgers = [(lid, -1 if count is None else count) for lid, count in topic.ledgers()]
                    yield Row(
                        spec_id=spec_id,
                        topic=topic_name,
                        cursor=name,
                        digest=digest,
                        acked=acked,
                        counts_digest=digest_of_counts(counts),
                        restored_digest=restored.get((topic_name, name), ""),
                        counted_acked=sum(1 for p in counts if cur.is_acked(Position(*p))),
                        count_histogram=histogram,
                        mark_delete=str(cur.mark_delete_position),
                        range_count=cur.ack_range_count,
                        findings=findings,
                        error="",
                        recover_seconds=seconds,
                        bytes=Path(path).stat().st_size,
                        state_bytes=state_bytes,
                        range_ledger=ledger_col,
                        range_first=first_col,
                        range_last=last_col,
                        ledgers=ledgers,
                    )
    except (AckStoreError, OSError) as exc:  # a snapshot that cannot be opened is a finding, not a crash
        yield Row(
            spec_id=spec_id,
            topic="",
            cursor="",
            digest="",
            acked=0,
            counts_digest="",
            restored_digest="",
            counted_acked=0,
            count_histogram=[],
            mark_delete="",
            range_count=0,
            findings=[f"unreadable: {exc}"],
            error=str(exc),
            recover_seconds=0.0,
            bytes=0,
            state_bytes=0,
            range_ledger=array("l"),
            range_first=array("l"),
            range_last=array("l"),
            ledgers=[],
        )
    finally:
        shutil.rmtree(local.parent, ignore_errors=True)


AUDIT_SCHEMA = (
    "spec_id string, topic string, cursor string, digest string, acked long, counts_digest string, "
    "restored_digest string, counted_acked long, count_histogram array<long>, mark_delete string, "
    "range_count long, findings array<string>, error string, recover_seconds double, bytes long, state_bytes long, "
    "range_ledger array<long>, range_first array<long>, range_last array<long>, "
    "ledgers array<struct<ledger:long, count:long>>"
)
#: the audit rows' ranges travel as three parallel arrays of 8-byte ints (``array('l')``,
#: which PySpark's pickler hands the JVM as a long[]: far cheaper than a struct per range)


def audit_transform(snapshots: DataFrame) -> DataFrame:
    """Transform: check and recover every snapshot (column ``path``; an optional column
    ``restores``, an array of ``(topic, cursor, time)``, names cursors to restore as of a
    time: :func:`with_restores`) on the executors."""
    restores = "restores" in snapshots.columns

    def audit(rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            yield from _audit_snapshot(row.path, row.restores if restores else None)

    rdd = snapshots.rdd.mapPartitions(audit)
    # the rows are built by _audit_snapshot with fixed types: skip per-value verification (~40% of the cost)
    return snapshots.sparkSession.createDataFrame(rdd, AUDIT_SCHEMA, verifySchema=False)


def with_restores(snapshots: DataFrame, expected: DataFrame) -> DataFrame:
    """The snapshots with a ``restores`` column: per store, the ``(topic, cursor, time)`` of
    each expected cursor with a ``restore_time`` (``bad_deploy``; null for the others)."""
    if "restore_time" not in expected.columns:  # generated before bad_deploy existed
        return snapshots
    restores = (
        expected.where(F.col("restore_time") >= 0)
        .groupBy("spec_id")
        .agg(F.collect_list(F.struct("topic", "cursor", F.col("restore_time").alias("time"))).alias("restores"))
    )
    spec_id = F.regexp_extract("path", r"([^/]+)\.mdb$", 1)
    return snapshots.withColumn("spec_id", spec_id).join(F.broadcast(restores), "spec_id", "left").drop("spec_id")


def ranges_table(audited: DataFrame) -> DataFrame:
    """``(store, topic, cursor, ledger, first, last)``: every ack range of every store."""
    zipped = F.arrays_zip(
        F.col("range_ledger").alias("ledger"), F.col("range_first").alias("first"), F.col("range_last").alias("last")
    )
    return audited.select(F.col("spec_id").alias("store"), "topic", "cursor", F.explode(zipped).alias("r")).select(
        "store", "topic", "cursor", "r.ledger", "r.first", "r.last"
    )


def range_checks(audited: DataFrame) -> DataFrame:
    """Every ack range of every store with each of :data:`RANGE_CHECKS` as a flag column, in
    ONE pass over the ranges (the per-cursor mark-delete positions and ledger directories
    are small and broadcast; one window sorts each ledger's ranges)."""
    keys = ["store", "topic", "cursor"]
    store = F.col("spec_id").alias("store")
    readable = audited.where(F.col("mark_delete") != "")
    md = readable.select(
        store,
        "topic",
        "cursor",
        F.split("mark_delete", ":").getItem(0).cast("long").alias("md_ledger"),
        F.split("mark_delete", ":").getItem(1).cast("long").alias("md_entry"),
    )
    directory = readable.select(store, "topic", "cursor", F.explode("ledgers").alias("d")).select(
        *keys, F.col("d.ledger").alias("ledger"), F.col("d.count").alias("count")
    )
    earlier = Window.partitionBy(*keys, "ledger").orderBy("first", "last").rowsBetween(Window.unboundedPreceding, -1)
    joined = (
        ranges_table(audited)
        .join(F.broadcast(md), keys, "left")
        .join(F.broadcast(directory), [*keys, "ledger"], "left")
    )
    return joined.select(
        *keys, "ledger", "first", "last", *(check.expression(earlier).alias(check.flag) for check in RANGE_CHECKS)
    )


def range_check_counts(flagged: DataFrame) -> DataFrame:
    """Per cursor, how many of its ranges raised each check's flag (its ``count`` column)."""
    return flagged.groupBy(F.col("store").alias("spec_id"), "topic", "cursor").agg(
        *(F.sum(F.col(check.flag).cast("long")).alias(check.count) for check in RANGE_CHECKS)
    )


def per_cursor_table(expected: DataFrame, audited: DataFrame, counts: DataFrame | None = None) -> DataFrame:
    """Transform: one row per cursor, expected or audited (a full join): did the store
    recover exactly what was flushed (``digest_ok``), with no findings (``clean``), plus its
    figures and (given ``counts``, from :func:`range_check_counts`) its range-check counts.
    A store that could not be read has a row with its ``error`` and no scenario; an
    expected cursor it held has ``digest_ok`` False."""
    keys = ["spec_id", "topic", "cursor"]
    if "expected_restore_digest" not in expected.columns:  # generated before bad_deploy existed
        expected = expected.withColumn("expected_restore_digest", F.lit(""))
    figures = audited.select(
        *keys,
        "digest",
        "restored_digest",
        "counts_digest",
        "counted_acked",
        "count_histogram",
        "findings",
        "error",
        "range_count",
        "state_bytes",
        "recover_seconds",
        "mark_delete",
    )
    if counts is not None:
        figures = figures.join(counts, keys, "left")
    return (
        expected.select(
            *keys, "scenario", "expected_digest", "expected_counts_digest", "expected_restore_digest", "holes"
        )
        .join(figures, keys, "full")
        .withColumn("digest_ok", F.coalesce(F.col("digest") == F.col("expected_digest"), F.lit(False)))
        .withColumn(  # bad_deploy: restored as of the deploy, the generator's record of that moment
            "restore_ok",
            F.coalesce(
                (F.col("expected_restore_digest") == "")
                | (F.col("restored_digest") == F.col("expected_restore_digest")),
                F.lit(False),
            ),
        )
        .withColumn("restored", F.coalesce(F.col("expected_restore_digest") != "", F.lit(False)))
        .withColumn(
            "counts_ok",  # the delivery counts the last flush saved, none on an acked entry
            F.coalesce(
                (F.col("counts_digest") == F.col("expected_counts_digest")) & (F.col("counted_acked") == 0),
                F.lit(False),
            ),
        )
        .withColumn("clean", F.coalesce(F.size("findings") == 0, F.lit(False)))
        .drop(
            "digest",
            "expected_digest",
            "counts_digest",
            "expected_counts_digest",
            "restored_digest",
            "expected_restore_digest",
        )
    )


def verdict_transform(expected: DataFrame, audited: DataFrame) -> DataFrame:
    """Transform: one row per expected cursor: ``digest_ok`` and ``clean`` (and findings)."""
    return (
        per_cursor_table(expected, audited)
        .where(F.col("scenario").isNotNull())
        .select("spec_id", "scenario", "topic", "cursor", "digest_ok", "clean", "findings")
    )


# -- the small tables: plain Python over the per-cursor rows, collected once ---------------------


def _percentile(values: list[int], q: float) -> int:
    """The smallest value with at least ``q`` of the values at or below it (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, -(-int(q * 100) * len(ordered) // 100) - 1)]


def scenario_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario: cursors, holes, ranges recovered, live bytes, bytes per range, mean
    recovery ms. ``rows``: per-cursor dicts (``scenario``, ``holes``, ``range_count``,
    ``state_bytes``, ``recover_seconds``; None for a cursor whose store was unreadable)."""
    out = []
    for scenario, group in _groups(rows).items():
        ranges = _total(group, "range_count")
        state = _total(group, "state_bytes")
        seconds = [r["recover_seconds"] for r in group if r["recover_seconds"] is not None]
        out.append(
            {
                "scenario": scenario,
                "cursors": len(group),
                "holes": _total(group, "holes"),
                "ranges": ranges,
                "state_bytes": state,
                "bytes_per_range": None if state is None else round(state / max(ranges or 0, 1), 2),
                "avg_recover_ms": round(sum(seconds) / len(seconds) * 1000, 2) if seconds else None,
            }
        )
    return out


def count_histogram(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario with delivery counts: how many entries were delivered n times (the
    last bucket: ``HISTOGRAM_TOP`` or more), summed over its cursors."""
    out = []
    for scenario, group in _groups(rows).items():
        totals = [0] * (HISTOGRAM_TOP + 1)
        for r in group:
            for n, k in enumerate(r["count_histogram"] or []):
                totals[n] += k
        if any(totals):
            out.append({"scenario": scenario, "entries_by_count": totals[1:]})
    return out


def hole_distribution(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Holes per cursor, by scenario: min, median, p90, max (nearest rank)."""
    out = []
    for scenario, group in _groups(rows).items():
        holes = [int(r["holes"]) for r in group]
        out.append(
            {
                "scenario": scenario,
                "min": min(holes),
                "p50": _percentile(holes, 0.5),
                "p90": _percentile(holes, 0.9),
                "max": max(holes),
            }
        )
    return out


def compaction_table(compacted: list[dict[str, Any]], scenarios: dict[str, str]) -> list[dict[str, Any]]:
    """Per scenario: snapshots, bytes and records before and after compaction, and the
    bytes ratio. ``scenarios`` maps a snapshot (spec id) to its scenario."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in compacted:
        groups.setdefault(scenarios.get(row["snapshot"], "?"), []).append(row)
    out = []
    for scenario, group in sorted(groups.items()):
        before, after = sum(r["bytes_before"] for r in group), sum(r["bytes_after"] for r in group)
        out.append(
            {
                "scenario": scenario,
                "snapshots": len(group),
                "bytes_before": before,
                "bytes_after": after,
                "records_before": sum(r["records_before"] for r in group),
                "records_after": sum(r["records_after"] for r in group),
                "kept_history": sum(r.get("kept_history", 0) or 0 for r in group),
                "bytes_ratio": round(after / before, 3) if before else None,
                "failed": sum(1 for r in group if r["error"]),
            }
        )
    return out


def _groups(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("scenario") is not None:
            groups.setdefault(row["scenario"], []).append(row)
    return dict(sorted(groups.items()))


def _total(group: list[dict[str, Any]], key: str) -> int | None:
    values = [r[key] for r in group if r[key] is not None]
    return sum(values) if values else None


# -- the jobs ---------------------------------------------------------------------------------


def record_run(outdir: Path, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``outdir/run.json`` (scale, seed, phase times...); returns it all."""
    path = outdir / "run.json"
    run = json.loads(path.read_text()) if path.exists() else {}
    run.update(fields)
    path.write_text(json.dumps(run, indent=2, sort_keys=True))
    return run


def run_generate(spark: SparkSession, outdir: Path, specs: list[WorkloadSpec]) -> DataFrame:
    """Generate: specs -> stores -> snapshots in ``outdir/snapshots``; expected rows as Parquet."""
    snapshots = outdir / "snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)
    tasks = max(1, min(len(specs), 4 * spark.sparkContext.defaultParallelism))  # even load, visible progress
    expected = generate_transform(specs_df(spark, specs).repartition(tasks), str(snapshots))
    expected.write.mode("overwrite").parquet(str(outdir / "expected"))
    return spark.read.parquet(str(outdir / "expected"))


def run_audit(spark: SparkSession, outdir: Path, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Audit: every snapshot checked and recovered, compared with ``expected``; tables + summary.

    Few jobs: the per-store transform (its rows, ranges included, move into the JVM once
    and are cached), one write of the ranges table, one pass that computes the per-cursor
    verdict and every range check and writes it, and one collect of that small table; the
    small summaries are then plain Python over it. ``context`` (scale, seed, master,
    versions...) goes into the report as given."""
    started = time.perf_counter()
    # the joins here are per cursor (hundreds to thousands of rows): a handful of shuffle
    # partitions, not the default 200 tasks of nothing each
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism)))
    paths = sorted(str(p) for p in (outdir / "snapshots").glob("*.mdb"))
    expected = spark.read.parquet(str(outdir / "expected"))
    audited = audit_transform(with_restores(_snapshots_df(spark, outdir), expected)).cache()
    audited.count()
    transform_seconds = time.perf_counter() - started
    range_checks(audited).write.mode("overwrite").parquet(str(outdir / "ranges"))  # the one pass over ranges
    counts = range_check_counts(spark.read.parquet(str(outdir / "ranges")))  # three flag columns: a cheap scan
    per_cursor = per_cursor_table(expected, audited, counts).cache()
    per_cursor.drop("findings").write.mode("overwrite").parquet(str(outdir / "verdict"))
    rows = [r.asDict() for r in per_cursor.collect()]
    per_cursor.unpersist()
    audited.unpersist()
    expected_rows = [r for r in rows if r["scenario"] is not None]
    summary: dict[str, Any] = {
        **(context or {}),
        "snapshots": len(paths),
        "cursors": len(expected_rows),
        "mismatched_or_unclean": sorted(
            f"{r['spec_id']}/{r['topic']}/{r['cursor']}"
            for r in expected_rows
            if not (r["digest_ok"] and r["counts_ok"] and r["restore_ok"] and r["clean"])
        ),
        # bad_deploy: cursors restored as of the deploy, and those whose restored state was the generator's
        "restored": sum(1 for r in expected_rows if r["restored"]),
        "restored_ok": sum(1 for r in expected_rows if r["restored"] and r["restore_ok"]),
        "count_histogram": count_histogram(expected_rows),
        "unreadable": sorted(f"{r['spec_id']}: {r['error']}" for r in rows if r["error"]),
        # a cursor no spec made (a deleted one come back, or one that appeared from nowhere)
        "unexpected_cursors": sorted(
            f"{r['spec_id']}/{r['topic']}/{r['cursor']}" for r in rows if r["scenario"] is None and not r["error"]
        ),
        **{check.summary: sum(r[check.count] or 0 for r in rows) for check in RANGE_CHECKS},
        "ranges": sum(r["range_count"] or 0 for r in rows),
        "holes_per_cursor": hole_distribution(expected_rows),
        "by_scenario": scenario_table(expected_rows),
        "audit_transform_seconds": transform_seconds,
        "audit_stores_per_second": len(paths) / transform_seconds if transform_seconds else 0.0,
        "audit_mb_per_second": sum(Path(p).stat().st_size for p in paths) / 1e6 / transform_seconds
        if transform_seconds
        else 0.0,
    }
    if (outdir / "compaction").exists():
        scenarios = {r["spec_id"]: r["scenario"] for r in expected_rows}
        compacted = [r.asDict() for r in spark.read.parquet(str(outdir / "compaction")).collect()]
        summary["compaction"] = compaction_table(compacted, scenarios)
    from .plots import write_plots

    summary["plots"] = write_plots(outdir, expected_rows)
    from .faults import planted

    flagged = (
        {m.split("/")[0] for m in summary["mismatched_or_unclean"]}
        | {u.split(":")[0] for u in summary["unreadable"]}
        | {u.split("/")[0] for u in summary["unexpected_cursors"]}
    )
    plants = {p["spec_id"] for p in planted(outdir)}
    summary["planted_faults"] = sorted(plants)
    summary["planted_missed"] = sorted(plants - flagged)
    summary["false_positives"] = sorted(flagged - plants)
    if plants:  # with planted faults, the audit passes when it finds exactly them
        passed = flagged == plants and not any(summary[c.summary] for c in RANGE_CHECKS if c.fails_with_plants)
    else:
        passed = not flagged and not any(summary[c.summary] for c in RANGE_CHECKS)
    summary["verdict"] = "PASS" if passed else "FAIL"
    summary["audit_seconds"] = time.perf_counter() - started
    write_report(outdir, summary)
    return summary
