"""The Spark jobs on a local[2] session: transforms on small inputs, and a tiny pipeline end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.spark_jobs import (
    below_mark_delete_check,
    overlap_check,
    run_audit,
    run_generate,
    specs_df,
    specs_for_scale,
    verdict_transform,
)
from tools.workloads import WorkloadError, WorkloadSpec

from . import rawlog


def test_bad_spec_is_rejected_naming_the_field(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkloadError, match=r"hole_rate=1.5 is not allowed: a number in 0..1"):
        specs_df(spark, [WorkloadSpec("a", "missed_acks", hole_rate=1.5)])
    with pytest.raises(WorkloadError, match=r"scenario='nope'"):
        WorkloadSpec("a", "nope").validate()
    assert not any(tmp_path.iterdir())


def test_overlap_and_below_mark_delete_checks(spark) -> None:  # type: ignore[no-untyped-def]
    ranges = spark.createDataFrame(
        [("s", "t", "c", 1, 0, 5), ("s", "t", "c", 1, 6, 9), ("s", "t", "c", 1, 20, 30), ("s", "t", "c", 2, 0, 0)],
        "store string, topic string, cursor string, ledger long, first long, last long",
    )
    assert [tuple(r)[3:6] for r in overlap_check(ranges).collect()] == [(1, 6, 9)]
    audited = spark.createDataFrame(
        [("s", "t", "c", "1:7")], "spec_id string, topic string, cursor string, mark_delete string"
    )
    below = below_mark_delete_check(ranges, audited).select("ledger", "first").orderBy("first").collect()
    assert [tuple(r) for r in below] == [(1, 0), (1, 6)]


def test_outside_directory_check_and_hole_distribution(spark) -> None:  # type: ignore[no-untyped-def]
    from tools.spark_jobs import hole_distribution, outside_directory_check

    ranges = spark.createDataFrame(
        [("s", "t", "c", 1, 0, 5), ("s", "t", "c", 1, 8, 10), ("s", "t", "c", 2, 3, 4), ("s", "t", "c", 9, 0, 0)],
        "store string, topic string, cursor string, ledger long, first long, last long",
    )
    audited = spark.createDataFrame(
        [("s", "t", "c", [(1, 10), (2, -1)])],
        "spec_id string, topic string, cursor string, ledgers array<struct<ledger:long, count:long>>",
    )
    bad = outside_directory_check(ranges, audited).select("ledger", "first").orderBy("ledger").collect()
    assert [tuple(r) for r in bad] == [(1, 8), (9, 0)]
    expected = spark.createDataFrame([("a", 1), ("a", 3), ("a", 10), ("b", 7)], "scenario string, holes long")
    rows = [tuple(r) for r in hole_distribution(expected).collect()]
    assert rows == [("a", 1, 3, 10, 10), ("b", 7, 7, 7, 7)]


def test_scenario_table(spark) -> None:  # type: ignore[no-untyped-def]
    from tools.spark_jobs import scenario_table

    per_cursor = spark.createDataFrame(
        [("a", 3, 4, 400, 0.002), ("a", 1, 0, 100, 0.004), ("b", 0, None, None, None)],
        "scenario string, holes long, range_count long, state_bytes long, recover_seconds double",
    )
    rows = [tuple(r) for r in scenario_table(per_cursor).collect()]
    assert rows == [("a", 2, 4, 4, 500, 3.0, 125.0), ("b", 1, 0, None, None, None, None)]


def test_verdict_transform(spark) -> None:  # type: ignore[no-untyped-def]
    expected = spark.createDataFrame(
        [("a", "x", "t", "c", "d1"), ("b", "x", "t", "c", "d2"), ("c", "x", "t", "c", "d3")],
        "spec_id string, scenario string, topic string, cursor string, expected_digest string",
    )
    audited = spark.createDataFrame(
        [("a", "t", "c", "d1", [], ""), ("b", "t", "c", "zz", ["corrupt-record"], "")],
        "spec_id string, topic string, cursor string, digest string, findings array<string>, error string",
    )
    rows = {r.spec_id: (r.digest_ok, r.clean) for r in verdict_transform(expected, audited).collect()}
    assert rows == {"a": (True, True), "b": (False, False), "c": (False, False)}


def test_tiny_pipeline_end_to_end_finds_planted_faults(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    specs = specs_for_scale("tiny")
    expected = run_generate(spark, tmp_path, specs)
    assert expected.count() == len(specs) * 2
    assert {r.scenario for r in expected.select("scenario").distinct().collect()} == {s.scenario for s in specs}
    summary = run_audit(spark, tmp_path)
    assert summary["verdict"] == "PASS", summary
    assert summary["snapshots"] == len(specs) and summary["cursors"] == len(specs) * 2
    assert summary["plots"] == ["plots/holes.png", "plots/bytes_per_range.png", "plots/recovery_time.png"]
    report = (tmp_path / "report.md").read_text()
    for plot in summary["plots"]:
        assert (tmp_path / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({plot})" in report
    by_scenario = {r["scenario"]: r for r in summary["by_scenario"]}
    assert all(r["cursors"] == 2 and r["state_bytes"] > 0 for r in by_scenario.values())
    for r in by_scenario.values():
        assert abs(r["bytes_per_range"] - r["state_bytes"] / max(1, r["ranges"])) < 0.0051, r
    # plant faults: a damaged newest marker in one snapshot, garbage bytes for another
    first, second = sorted((tmp_path / "snapshots").glob("*.mdb"))[:2]
    rawlog.damage(first, rawlog.markers(first)[-1])
    second.write_bytes(b"not a store")
    summary = run_audit(spark, tmp_path)
    assert summary["verdict"] == "FAIL"
    assert {m.split("/")[0] for m in summary["mismatched_or_unclean"]} == {first.stem, second.stem}
    assert [u.split(":")[0] for u in summary["unreadable"]] == [second.stem]


def test_audit_finds_exactly_the_planted_faults(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tools.faults import plant_faults

    run_generate(spark, tmp_path, specs_for_scale("tiny"))
    plants = plant_faults(tmp_path, 3, seed=5)
    assert sorted(p["kind"] for p in plants) == ["damaged-marker", "damaged-record", "garbage-file"]
    summary = run_audit(spark, tmp_path)
    assert summary["planted_missed"] == [] and summary["false_positives"] == []
    assert summary["verdict"] == "PASS" and len(summary["planted_faults"]) == 3
    with pytest.raises(ValueError, match=r"allowed 0\.\.5"):
        plant_faults(tmp_path, 6)


def test_compaction_keeps_every_digest_and_shrinks(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tools.spark_jobs import run_compact

    run_generate(spark, tmp_path, specs_for_scale("tiny"))
    rows = run_compact(spark, tmp_path).collect()
    assert len(rows) == 5 and all(r.error == "" for r in rows)
    assert all(r.records_after <= r.records_before and r.bytes_after <= r.bytes_before for r in rows)
    assert run_audit(spark, tmp_path)["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "{out}", "--plant-faults", "-1"], "--plant-faults -1 is not allowed: allowed 0 or more"),
        (["audit", "{file}"], "is not allowed: it exists and is not a directory"),
        (["pipeline", "{out}", "--scale", "huge"], "invalid choice: 'huge'"),
    ],
)
def test_spark_cli_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    import subprocess
    import sys

    (tmp_path / "f").write_text("x")
    argv = [a.format(out=tmp_path / "out", file=tmp_path / "f") for a in args]
    proc = subprocess.run([sys.executable, "-m", "tools.spark_cli", *argv], capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
