"""PNG plots for the audit report (matplotlib, headless).

The inputs are plain rows collected from the audit (one per cursor), so the plots are
testable without Spark. Each function writes one file and returns its path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PLOTS", "write_plots", "holes_plot", "bytes_per_range_plot", "wants_log_scale"]

PLOTS = ("holes.png", "bytes_per_range.png")
"""Recovery time against state size is not plotted: at the sizes one audit holds every cursor
opens in a few ms and the plot was flat. How recovery grows with state size is measured over
a real range of sizes by ``benchmarks/test_bench_open.py`` (README, Figures)."""

LOG_SCALE_RATIO = 30.0
"""a linear axis stops being readable when the largest value is this many times the smallest"""


def wants_log_scale(values: Iterable[float]) -> bool:
    """True when one value dwarfs the rest (max / smallest positive >= ``LOG_SCALE_RATIO``)."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) >= LOG_SCALE_RATIO


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on executors or CI
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, ax: Any, title: str, path: Path, grid_axis: str = "y") -> Path:
    ax.set_title(title)
    ax.grid(axis=grid_axis, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _by_scenario(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[str(row["scenario"])].append(row)
    return dict(sorted(groups.items()))


def _scenario_ticks(ax: Any) -> None:
    """Scenario names under the x axis upright, one to a tick: side by side, long names run
    into each other (seven of them already did at 8 inches), and slanted ones' boxes still
    overlap; upright, a dozen fit."""
    ax.tick_params(axis="x", labelrotation=90)


def _log_axis(ax: Any, values: Iterable[float], label: str) -> None:
    """A log y axis from the power of ten below the smallest value, ticks as plain numbers."""
    import math

    from matplotlib.ticker import FuncFormatter

    positive = [v for v in values if v > 0]
    ax.set_yscale("log")
    ax.set_ylim(bottom=10 ** math.floor(math.log10(min(positive))))
    plain = FuncFormatter(lambda v, _: f"{v:,g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,g}" if f"{v:g}"[0] in "25" else ""))
    ax.set_ylabel(label)


def holes_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Box plot: holes per cursor (entries left unacked, all above the mark-delete
    position), by scenario; a log axis when one scenario dwarfs the others."""
    plt = _pyplot()
    groups = _by_scenario(rows)
    data = [[max(int(r["holes"]), 0) for r in g] for g in groups.values()]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.boxplot(data, tick_labels=list(groups), showfliers=True)
    _scenario_ticks(ax)
    ax.set_ylabel("unacked entries per cursor")
    if wants_log_scale(v for d in data for v in d):
        _log_axis(ax, [v for d in data for v in d], "unacked entries per cursor (log scale)")
    return _save(plt, fig, ax, "Ack holes per cursor, by scenario", path)


def bytes_per_range_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Bars: live log bytes per recovered ack range (sum over the scenario's cursors); a log
    axis when one bar dwarfs the others (the sequential scenario's few ranges do)."""
    plt = _pyplot()
    groups = _by_scenario(rows)
    values = [
        sum(int(r["state_bytes"] or 0) for r in g) / max(1, sum(int(r["range_count"] or 0) for r in g))
        for g in groups.values()
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bars = ax.bar(list(groups), values, color="#4c72b0")
    ax.bar_label(bars, labels=[f"{v:,.1f}" for v in values])
    _scenario_ticks(ax)
    ax.set_ylabel("bytes per range (records + markers)")
    if wants_log_scale(values):
        _log_axis(ax, values, "bytes per range, log scale (records + markers)")
    return _save(plt, fig, ax, "Persisted bytes per ack range, by scenario", path)


def write_plots(outdir: Path, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Write every plot into ``outdir/plots``; returns their paths relative to ``outdir``.

    ``rows``: one per cursor with ``scenario``, ``holes``, ``range_count`` and
    ``state_bytes`` (unreadable stores carry None and count as 0). Returns [] when
    matplotlib is not installed (it comes with the ``spark`` extra)."""
    try:
        _pyplot()
    except ImportError:
        return []
    plots = outdir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for name in ("recovery_time.png",):  # no longer made: a stale one must not linger beside the report
        (plots / name).unlink(missing_ok=True)
    holes_plot(rows, plots / PLOTS[0])
    bytes_per_range_plot(rows, plots / PLOTS[1])
    return [f"plots/{name}" for name in PLOTS]
