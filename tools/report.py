"""The audit's report: ``summary.json`` for scripts and ``report.md`` (tables, the verdict,
the plots) for people, from the summary :func:`~ackstore.tools.spark_jobs.run_audit` builds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .checks import RANGE_CHECKS

__all__ = ["write_report"]


def _n(value: Any) -> str:
    """A number with thousands separators (None: an em dash)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    aligns = ["---" if i == 0 else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(aligns) + "|",
        *("| " + " | ".join(str(c) if i == 0 else _n(c) for i, c in enumerate(row)) + " |" for row in rows),
    ]


def write_report(outdir: Path, summary: dict[str, Any]) -> None:
    """``summary.json`` for scripts and ``report.md`` for people."""
    (outdir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    s = summary
    phases = [
        f"{name} {s[key]:,.1f} s"
        for name, key in (("generate", "generate_seconds"), ("compact", "compact_seconds"))
        if s.get(key) is not None
    ]
    phases.append(
        f"audit {s['audit_seconds']:,.1f} s (of which the per-store transform {s['audit_transform_seconds']:,.1f} s: "
        f"{s['audit_stores_per_second']:,.1f} stores/s, {s['audit_mb_per_second']:,.2f} MB/s)"
    )
    run = ", ".join(
        f"{label} {s[key]}"
        for label, key in (("scale", "scale"), ("seed", "seed"), ("master", "master"), ("date", "date"))
        if s.get(key) is not None
    )
    lines = [
        f"# ackstore audit: {s['verdict']}",
        "",
        f"{_n(s['snapshots'])} stores, {_n(s['cursors'])} cursors, {_n(s['ranges'])} ack ranges recovered."
        + (f" Run: {run}." if run else ""),
        "",
        "Times: " + "; ".join(phases) + ".",
    ]
    if s.get("versions"):
        lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(s["versions"].items())) + "."]
    if s.get("executors"):
        lines += ["", "Executors (where the tasks imported ackstore from):"]
        lines += [
            f"- {e['host']}: Python {e['python']} at `{e['executable']}`, ackstore from `{e['ackstore']}`"
            for e in s["executors"]
        ]
    plants = set(s.get("planted_faults") or [])

    def unplanted(items: list[str], sep: str) -> list[str]:
        """The findings of snapshots no fault was planted in: the unexpected ones."""
        return [x for x in items if x.split(sep)[0] not in plants]

    lines += [
        "",
        "## Verdict",
        "",
        f"**{s['verdict']}**"
        + (
            f": the audit found exactly the {len(plants)} planted faults and nothing else"
            if plants and s["verdict"] == "PASS"
            else ""
        ),
        "",
        "Unexpected (in snapshots no fault was planted in):",
        "",
        f"- cursors whose recovered state differs from the expected digest (or, restored as of a "
        f"bad deploy, from the generator's record of that moment), or with findings: "
        f"{unplanted(s['mismatched_or_unclean'], '/') or 'none'}",
        f"- unreadable stores: {unplanted(s['unreadable'], ':') or 'none'}",
        f"- cursors no spec made (e.g. a deleted subscription come back): "
        f"{unplanted(s.get('unexpected_cursors') or [], '/') or 'none'}",
        *(f"- {check.described}: {_n(s[check.summary])}" for check in RANGE_CHECKS),
    ]
    if s.get("restored"):
        lines += [
            "",
            f"Bad deploy: {s['restored_ok']} of {s['restored']} cursors restored as of the deploy's time "
            "(`Cursor.restore_as_of`, flushed, read back) hold exactly the acks the generator recorded "
            "flushed at that moment, the wrong acks of the bad release gone.",
        ]
    if plants:
        found = [
            x
            for items, sep in (
                (s["mismatched_or_unclean"], "/"),
                (s["unreadable"], ":"),
                (s.get("unexpected_cursors") or [], "/"),
            )
            for x in items
            if x.split(sep)[0] in plants
        ]
        lines += [
            "",
            "Planted (expected: the audit must find each):",
            "",
            f"- planted faults: {s['planted_faults']}; missed: {s['planted_missed'] or 'none'}; "
            f"false positives: {s['false_positives'] or 'none'}",
            f"- what the audit found in them: {found or 'nothing'}",
        ]
    lines += [
        "",
        "## By scenario",
        "",
        "*Holes* are the entries a cursor left unacknowledged (every one lies above its mark-delete "
        "position); *ranges* are the runs of acknowledged entries above it, the unit ackstore persists. "
        "Many holes need not mean many ranges: the sequential scenario acks in order and leaves its "
        "backlog at the end, so it has thousands of holes but a few dozen ranges; the fixed cost of its "
        "markers and ledger records is spread over those few, which makes its bytes per range the "
        "highest (an outlier by construction) while its live bytes are the smallest.",
        "",
        *_table(
            ["scenario", "cursors", "holes", "ranges", "live bytes", "bytes/range", "avg recover ms"],
            [
                [
                    r["scenario"],
                    r["cursors"],
                    r["holes"],
                    r["ranges"],
                    r["state_bytes"],
                    r["bytes_per_range"],
                    r["avg_recover_ms"],
                ]
                for r in s.get("by_scenario", [])
            ],
        ),
        "",
        *_table(
            ["scenario", "holes per cursor: min", "p50", "p90", "max"],
            [[r["scenario"], r["min"], r["p50"], r["p90"], r["max"]] for r in s.get("holes_per_cursor", [])],
        ),
    ]
    if s.get("count_histogram"):
        top = max(len(r["entries_by_count"]) for r in s["count_histogram"])
        lines += [
            "",
            "## Delivery counts",
            "",
            "Entries not yet acknowledged, by how many times they were delivered (as the last flush "
            "saved it; the last column counts that many or more). Every cursor's counts matched what "
            "its generator recorded, and no acknowledged entry kept a count, unless listed above.",
            "",
            *_table(
                ["scenario", *(f"{n}x" + ("+" if n == top else "") for n in range(1, top + 1))],
                [[r["scenario"], *r["entries_by_count"]] for r in s["count_histogram"]],
            ),
        ]
    if s.get("compaction"):
        lines += [
            "",
            "## What compaction did",
            "",
            "Each store's logs rewritten as live records plus one full marker, then copied without free "
            "pages; the audit above ran on the compacted stores, so it also proves compaction changed no state. "
            "A cursor that keeps history is left as it is (a rewrite would drop its window): its records are "
            "not counted, and a store of such cursors only (bad_deploy's) shows no records rewritten.",
            "",
            *_table(
                [
                    "scenario",
                    "stores",
                    "bytes before",
                    "bytes after",
                    "after/before",
                    "records before",
                    "records after",
                    "cursors left as they are (history)",
                    "failed",
                ],
                [
                    [
                        r["scenario"],
                        r["snapshots"],
                        r["bytes_before"],
                        r["bytes_after"],
                        r["bytes_ratio"],
                        r["records_before"],
                        r["records_after"],
                        r.get("kept_history", 0),
                        r["failed"],
                    ]
                    for r in s["compaction"]
                ],
            ),
        ]
    if s.get("plots"):
        lines += ["", "## Plots", "", *(f"![{Path(p).stem}]({p})" for p in s["plots"])]
    elif "plots" in s:
        lines += ["", "Plots skipped: matplotlib is not installed (pip install 'ackstore[spark]')."]
    (outdir / "report.md").write_text("\n".join(lines) + "\n")
