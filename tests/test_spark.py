"""The Spark jobs on a local[2] session: transforms on small inputs, and a tiny pipeline end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from ackstore.tools.spark_jobs import (
    hole_distribution,
    range_check_counts,
    range_checks,
    ranges_table,
    run_audit,
    run_generate,
    scenario_table,
    specs_df,
    specs_for_scale,
    verdict_transform,
)
from ackstore.tools.workloads import WorkloadError, WorkloadSpec

from . import rawlog

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out


def test_bad_spec_is_rejected_naming_the_field(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkloadError, match=r"hole_rate=1.5 is not allowed: a number in 0..1"):
        specs_df(spark, [WorkloadSpec("a", "missed_acks", hole_rate=1.5)])
    with pytest.raises(WorkloadError, match=r"scenario='nope'"):
        WorkloadSpec("a", "nope").validate()
    assert not any(tmp_path.iterdir())


AUDITED = (
    "spec_id string, topic string, cursor string, digest string, findings array<string>, error string, "
    "range_count long, state_bytes long, recover_seconds double, mark_delete string, "
    "range_ledger array<long>, range_first array<long>, range_last array<long>, "
    "ledgers array<struct<ledger:long, count:long>>, counts_digest string, counted_acked long, "
    "count_histogram array<long>, restored_digest string"
)


def _audited(spark, rows):  # type: ignore[no-untyped-def]
    """Audit rows with the given (mark-delete, ranges, directory); the rest filled in."""
    out = []
    for i, (md, ranges, ledgers) in enumerate(rows):
        columns = list(zip(*ranges, strict=True)) if ranges else [[], [], []]
        row = (f"s{i}", "t", "c", "d", [], "", len(ranges), 0, 0.0, md, *map(list, columns), ledgers, "k", 0, [], "")
        out.append(row)
    return spark.createDataFrame(out, AUDITED)


def test_range_checks_in_one_pass(spark) -> None:  # type: ignore[no-untyped-def]
    audited = _audited(
        spark,
        [
            # out of order on purpose: the check sorts; 1:6..9 touches 1:0..5, 1:4..4 overlaps it
            ("1:7", [(1, 20, 30), (1, 6, 9), (1, 0, 5), (2, 0, 0), (1, 4, 4)], [(1, 40), (2, -1)]),
            # 1:8..10 runs past sealed ledger 1 (10 entries); ledger 9 is not in the directory
            ("1:-1", [(1, 0, 5), (1, 8, 10), (2, 3, 4), (9, 0, 0)], [(1, 10), (2, -1)]),
            ("", [], []),  # an unreadable store: no mark-delete, no ranges
        ],
    )
    counts = range_check_counts(range_checks(audited))
    got = {r.spec_id: (r.overlapping, r.below_mark_delete, r.outside_directory) for r in counts.collect()}
    assert got == {"s0": (2, 3, 0), "s1": (0, 0, 2)}  # s2 has no ranges: no row
    flagged = range_checks(audited).where("store = 's0' and overlaps").orderBy("first").collect()
    assert [(r.ledger, r.first) for r in flagged] == [(1, 4), (1, 6)]
    table = ranges_table(audited).where("store = 's1'").orderBy("ledger", "first").collect()
    assert [(r.ledger, r.first, r.last) for r in table] == [(1, 0, 5), (1, 8, 10), (2, 3, 4), (9, 0, 0)]


def test_the_small_tables_are_plain_python() -> None:
    rows = [
        {"scenario": "a", "holes": 3, "range_count": 4, "state_bytes": 400, "recover_seconds": 0.002},
        {"scenario": "a", "holes": 1, "range_count": 0, "state_bytes": 100, "recover_seconds": 0.004},
        {"scenario": "a", "holes": 10, "range_count": 0, "state_bytes": 0, "recover_seconds": 0.0},
        {"scenario": "b", "holes": 7, "range_count": None, "state_bytes": None, "recover_seconds": None},
        {"scenario": None, "holes": None, "range_count": None, "state_bytes": None, "recover_seconds": None},
    ]
    assert scenario_table(rows) == [
        {"scenario": "a", "cursors": 3, "holes": 14, "ranges": 4, "state_bytes": 500, "bytes_per_range": 125.0,
         "avg_recover_ms": 2.0},
        {"scenario": "b", "cursors": 1, "holes": 7, "ranges": None, "state_bytes": None, "bytes_per_range": None,
         "avg_recover_ms": None},
    ]  # fmt: skip
    assert hole_distribution(rows) == [
        {"scenario": "a", "min": 1, "p50": 3, "p90": 10, "max": 10},
        {"scenario": "b", "min": 7, "p50": 7, "p90": 7, "max": 7},
    ]


def test_verdict_transform(spark) -> None:  # type: ignore[no-untyped-def]
    expected = spark.createDataFrame(
        [
            ("a", "x", "t", "c", "d1", "k", "r", 0),
            ("b", "x", "t", "c", "d2", "k", "", 0),
            ("c", "x", "t", "c", "d3", "k", "", 0),
            ("e", "x", "t", "c", "d5", "k", "", 0),
            ("f", "x", "t", "c", "d6", "k", "", 0),
            ("g", "x", "t", "c", "d7", "k", "r1", 0),
        ],
        "spec_id string, scenario string, topic string, cursor string, expected_digest string, "
        "expected_counts_digest string, expected_restore_digest string, holes long",
    )
    audited = spark.createDataFrame(
        [
            ("a", "t", "c", "d1", [], "", 0, 0, 0.0, "1:-1", [], [], [], [], "k", 0, [0, 3], "r"),
            ("b", "t", "c", "zz", ["corrupt-record"], "", 0, 0, 0.0, "1:-1", [], [], [], [], "k", 0, [], ""),
            ("d", "", "", "", ["unreadable: x"], "x", 0, 0, 0.0, "", [], [], [], [], "", 0, [], ""),
            ("e", "t", "c", "d5", [], "", 0, 0, 0.0, "1:-1", [], [], [], [], "other counts", 0, [], ""),
            # a count on an acked entry
            ("f", "t", "c", "d6", [], "", 0, 0, 0.0, "1:-1", [], [], [], [], "k", 1, [], ""),
            ("g", "t", "c", "d7", [], "", 0, 0, 0.0, "1:-1", [], [], [], [], "k", 0, [], "r2"),  # restored wrongly
        ],
        AUDITED,
    )
    rows = {r.spec_id: (r.digest_ok, r.clean) for r in verdict_transform(expected, audited).collect()}
    assert rows == {
        "a": (True, True), "b": (False, False), "c": (False, False), "e": (True, True), "f": (True, True),
        "g": (True, True),
    }  # fmt: skip
    from ackstore.tools.spark_jobs import per_cursor_table as table

    counted = {r.spec_id: r.counts_ok for r in table(expected, audited).collect() if r.scenario}
    assert counted == {"a": True, "b": True, "c": False, "e": False, "f": False, "g": True}
    restored = {r.spec_id: (r.restored, r.restore_ok) for r in table(expected, audited).collect() if r.scenario}
    assert restored == {
        "a": (True, True), "b": (False, True), "c": (False, True), "e": (False, True), "f": (False, True),
        "g": (True, False),
    }  # fmt: skip
    from ackstore.tools.spark_jobs import per_cursor_table

    unreadable = [r for r in per_cursor_table(expected, audited).collect() if r.error]
    assert [(r.spec_id, r.scenario) for r in unreadable] == [("d", None)]  # kept by the full join


def test_tiny_pipeline_end_to_end_finds_planted_faults(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    specs = specs_for_scale("tiny")
    expected = run_generate(spark, tmp_path, specs)
    assert expected.count() == len(specs) * 2
    assert {r.scenario for r in expected.select("scenario").distinct().collect()} == {s.scenario for s in specs}
    summary = run_audit(spark, tmp_path)
    assert summary["verdict"] == "PASS", summary
    assert summary["snapshots"] == len(specs) and summary["cursors"] == len(specs) * 2
    assert summary["plots"] == ["plots/holes.png", "plots/bytes_per_range.png"]
    report = (tmp_path / "report.md").read_text()
    assert "*Holes* are the entries a cursor left unacknowledged" in report
    # poison messages: delivered 2-5 times and never acked, their counts audited against the generator's
    hist = {r["scenario"]: r["entries_by_count"] for r in summary["count_histogram"]}
    assert set(hist) == {"poison_messages"} and sum(hist["poison_messages"][1:5]) > 0, hist
    assert "## Delivery counts" in report
    # bad deploy: every cursor restored as of the deploy holds what the generator recorded then
    assert summary["restored"] == summary["restored_ok"] == 2, summary
    assert "Bad deploy: 2 of 2 cursors restored" in report
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
    from ackstore.tools.faults import plant_faults

    run_generate(spark, tmp_path, specs_for_scale("tiny"))
    plants = plant_faults(tmp_path, 4, seed=5)
    assert sorted(p["kind"] for p in plants) == ["damaged-marker", "damaged-record", "garbage-file", "revived-cursor"]
    summary = run_audit(spark, tmp_path)
    assert summary["planted_missed"] == [] and summary["false_positives"] == []
    assert summary["verdict"] == "PASS" and len(summary["planted_faults"]) == 4
    assert len(summary["unexpected_cursors"]) == 1 and summary["unexpected_cursors"][0].endswith("/unsubscribed")
    verdict = (tmp_path / "report.md").read_text().split("## Verdict")[1].split("\n## ")[0]
    unexpected, planted_part = verdict.split("Planted (expected")
    assert "**PASS**: the audit found exactly the 4 planted faults" in unexpected
    assert unexpected.count(": none") == 3, unexpected  # the planted faults' cursors are not listed as unexpected
    assert "unsubscribed" in planted_part and "missed: none" in planted_part
    with pytest.raises(ValueError, match=r"allowed 0\.\.7"):
        plant_faults(tmp_path, 8)


def test_compaction_keeps_every_digest_and_shrinks(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ackstore.tools.spark_jobs import run_compact

    run_generate(spark, tmp_path, specs_for_scale("tiny"))
    rows = run_compact(spark, tmp_path).collect()
    assert len(rows) == 7 and all(r.error == "" for r in rows)
    assert all(r.records_after <= r.records_before and r.bytes_after <= r.bytes_before for r in rows)
    kept = {r.snapshot.split("-")[0]: r.kept_history for r in rows}
    assert kept.pop("bad_deploy") == 2 and set(kept.values()) == {0}  # its two cursors keep history: left alone
    assert run_audit(spark, tmp_path)["verdict"] == "PASS"
    report = (tmp_path / "report.md").read_text()
    assert "cursors left as they are (history)" in report and "| bad_deploy | 1 |" in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "{out}", "--plant-faults", "-1"], "--plant-faults -1 is not allowed: allowed 0 or more"),
        (["audit", "{file}"], "is not allowed: it exists and is not a directory"),
        (["pipeline", "{out}", "--scale", "huge"], "'huge' is not one of"),
        (["pipeline", "{out}[2]"], "Spark reads [ ] { } * ? \\ in a path as a glob"),
    ],
)
def test_spark_cli_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    import subprocess
    import sys

    (tmp_path / "f").write_text("x")
    argv = [a.format(out=tmp_path / "out", file=tmp_path / "f") for a in args]
    proc = subprocess.run([sys.executable, "-m", "ackstore.tools.spark_cli", *argv], capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
