"""PNG plots for the audit report (matplotlib, headless).

The inputs are plain rows collected from the audit (one per cursor), so the plots are
testable without Spark. Each function writes one file and returns its path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PLOTS", "write_plots", "holes_plot", "bytes_per_range_plot", "recovery_time_plot"]

PLOTS = ("holes.png", "bytes_per_range.png", "recovery_time.png")


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


def holes_plot(rows: list[Mapping[str, Any]], path: Path) -> Path:
    """Box plot: holes per cursor (written entries left unacked at the end of the run), by scenario."""
    plt = _pyplot()
    groups = _by_scenario(rows)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.boxplot([[int(r["holes"]) for r in g] for g in groups.values()], tick_labels=list(groups), showfliers=True)
    ax.set_ylabel("unacked entries per cursor")
    return _save(plt, fig, ax, "Ack holes per cursor, by scenario", path)


def bytes_per_range_plot(rows: list[Mapping[str, Any]], path: Path) -> Path:
    """Bars: live log bytes per recovered ack range (sum over the scenario's cursors)."""
    plt = _pyplot()
    groups = _by_scenario(rows)
    values = [
        sum(int(r["state_bytes"] or 0) for r in g) / max(1, sum(int(r["range_count"] or 0) for r in g))
        for g in groups.values()
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bars = ax.bar(list(groups), values, color="#4c72b0")
    ax.bar_label(bars, labels=[f"{v:.1f}" for v in values])
    ax.set_ylabel("bytes per range (records + markers)")
    return _save(plt, fig, ax, "Persisted bytes per ack range, by scenario", path)


def recovery_time_plot(rows: list[Mapping[str, Any]], path: Path) -> Path:
    """Scatter: time to recover one cursor against its live state size, by scenario."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for scenario, group in _by_scenario(rows).items():
        ax.scatter(
            [int(r["state_bytes"] or 0) / 1024 for r in group],
            [float(r["recover_seconds"] or 0.0) * 1000 for r in group],
            label=scenario,
            s=14,
            alpha=0.7,
        )
    ax.set_xlabel("live state, KiB")
    ax.set_ylabel("recovery (cursor open), ms")
    ax.legend(fontsize=8)
    return _save(plt, fig, ax, "Recovery time by state size", path, grid_axis="both")


def write_plots(outdir: Path, rows: list[Mapping[str, Any]]) -> list[str]:
    """Write every plot into ``outdir/plots``; returns their paths relative to ``outdir``.

    ``rows``: one per cursor with ``scenario``, ``holes``, ``range_count``, ``state_bytes``
    and ``recover_seconds`` (unreadable stores carry None and count as 0). Returns [] when
    matplotlib is not installed (it comes with the ``spark`` extra)."""
    try:
        _pyplot()
    except ImportError:
        return []
    plots = outdir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    holes_plot(rows, plots / PLOTS[0])
    bytes_per_range_plot(rows, plots / PLOTS[1])
    recovery_time_plot(rows, plots / PLOTS[2])
    return [f"plots/{name}" for name in PLOTS]
