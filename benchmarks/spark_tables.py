"""The two tables of docs/spark.md, measured: the pipeline's phase times, and the audit's
throughput against a plain single-process loop.

    python -m benchmarks.spark_tables [--docs docs/spark.md] [--rounds 3]

1. ``ackstore-spark pipeline OUTDIR --scale S --master local[2]`` at the small and medium
   scales, each in a fresh process (its JVM start included, as a user runs it): the whole
   run's wall time and each phase's, from the run's own record (``summary.json``).
2. On the medium run's snapshots, the audit four ways, best of ``--rounds`` each, the JVM
   started before timing (``benchmarks.audit_throughput``): the plain loop, the Spark
   transform, the same work with its rows left in Python, and the whole audit phase.

With ``--docs`` the tables are written into the file's ``pipeline`` and ``audit`` blocks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .docs_table import docs_option, publish

__all__ = ["main", "pipeline_lines", "audit_lines"]

MASTER = "local[2]"


def _pipeline(outdir: Path, scale: str) -> tuple[float, dict[str, float]]:
    """One pipeline run in its own process: its wall time and the run's summary."""
    cli = Path(sys.executable).with_name("ackstore-spark")
    started = time.perf_counter()
    r = subprocess.run(
        [str(cli), "pipeline", str(outdir), "--scale", scale, "--master", MASTER], capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if r.returncode != 0:
        raise SystemExit(f"spark_tables: the {scale} pipeline failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    summary = json.loads((outdir / "summary.json").read_text())
    if summary.get("verdict") != "PASS":
        raise SystemExit(f"spark_tables: the {scale} pipeline's audit did not pass: {summary.get('verdict')}")
    return seconds, summary


def pipeline_lines(root: Path) -> tuple[list[str], Path]:
    """The pipeline table (small and medium scales), and the medium run's OUTDIR."""
    lines = [
        "| run | whole pipeline | generate | compact | audit (whole phase) | of it, the per-store transform |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for scale in ("small", "medium"):
        outdir = root / scale
        seconds, s = _pipeline(outdir, scale)
        lines.append(
            f"| {scale}, {MASTER} | {seconds:.1f} s | {s['generate_seconds']:.1f} s | {s['compact_seconds']:.1f} s "
            f"| {s['audit_seconds']:.1f} s | {s['audit_transform_seconds']:.1f} s |"
        )
    return lines, root / "medium"


def audit_lines(outdir: Path, rounds: int) -> list[str]:
    """The audit throughput table on ``outdir``'s snapshots."""
    from .audit_throughput import measure

    paths, mb, sides = measure(outdir, MASTER, rounds)
    loop = sides[0][1][0]
    lines = [
        f"{len(paths)} snapshots, {mb:.1f} MB, best of {rounds}.",
        "",
        "| side | seconds | stores/s | vs the loop |",
        "|---|---:|---:|---:|",
    ]
    for i, (name, (seconds, _)) in enumerate(sides):
        if i == 0:
            versus = "1x"
        elif i == len(sides) - 1:
            versus = f"{seconds / loop:.2f}x the loop's time"
        else:
            versus = f"{loop / seconds:.2f}x throughput"
        lines.append(f"| {name} | {seconds:.2f} | {len(paths) / seconds:.1f} | {versus} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    docs, rest = docs_option(list(sys.argv[1:] if argv is None else argv))
    rounds = int(rest[rest.index("--rounds") + 1]) if "--rounds" in rest else 3
    with tempfile.TemporaryDirectory(prefix="ackstore-spark-tables-") as tmp:
        lines, medium = pipeline_lines(Path(tmp))
        publish(lines, docs, "pipeline")
        publish(audit_lines(medium, rounds), docs, "audit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
