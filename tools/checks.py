"""The audit's cross-store checks of ack ranges, as data: one row per check (its flag, its
per-cursor count, its summary total, whether it fails the verdict, what the report calls
it, its Spark expression). :func:`~ackstore.tools.spark_jobs.range_checks` computes them
all in one pass; the summary, the verdict and the report read this table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

__all__ = ["RangeCheck", "RANGE_CHECKS", "RANGE_FLAGS"]


@dataclass(frozen=True)
class RangeCheck:
    """One cross-store check of every ack range: the flag it sets on a range, the per-cursor
    count of flagged ranges, the summary's total, whether a nonzero total fails the verdict
    even when faults were planted (planted damage may legitimately trip the others), what
    the report calls it, and its Spark expression (over a range joined with its cursor's
    mark-delete position ``md_ledger``/``md_entry`` and its ledger's ``count``; ``earlier``
    is the window of the same ledger's earlier ranges)."""

    flag: str
    count: str
    summary: str
    fails_with_plants: bool
    described: str
    expression: Callable[[WindowSpec], Column]


RANGE_CHECKS = (
    RangeCheck(
        "overlaps",
        "overlapping",
        "overlapping_ranges",
        True,
        "ranges that overlap or touch a neighbour (they must have been merged)",
        lambda earlier: F.coalesce(F.col("first") <= F.max("last").over(earlier) + 1, F.lit(False)),
    ),
    RangeCheck(
        "below_mark_delete",
        "below_mark_delete",
        "ranges_below_mark_delete",
        False,
        "ranges at or below the mark-delete position",
        lambda _: F.coalesce(
            (F.col("ledger") < F.col("md_ledger"))
            | ((F.col("ledger") == F.col("md_ledger")) & (F.col("first") <= F.col("md_entry"))),
            F.lit(False),
        ),
    ),
    RangeCheck(
        "outside_directory",
        "outside_directory",
        "ranges_outside_directory",
        False,
        "ranges outside the ledger directory (an unknown ledger, or past a sealed end)",
        lambda _: F.col("count").isNull() | ((F.col("count") >= 0) & (F.col("last") >= F.col("count"))),
    ),
)
"""every range check, in the order the report lists them"""
RANGE_FLAGS = tuple(check.flag for check in RANGE_CHECKS)
"""each range check's flag column, in the same order"""
"""the flags of :func:`range_checks`"""
