"""The report's plots from plain rows (no Spark): files are real PNGs of the stated size."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ackstore.tools.plots import PLOTS, write_plots
from PIL import Image

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out


def test_write_plots_makes_the_pngs_including_unreadable_rows(tmp_path: Path) -> None:
    rows = [
        {"scenario": "missed_acks", "holes": h, "range_count": h + 1, "state_bytes": 300 * h, "recover_seconds": 1e-3}
        for h in (1, 5, 9)
    ] + [{"scenario": "baseline", "holes": 0, "range_count": None, "state_bytes": None, "recover_seconds": None}]
    assert write_plots(tmp_path, rows) == [f"plots/{name}" for name in PLOTS]
    for name in PLOTS:
        with Image.open(tmp_path / "plots" / name) as image:
            assert image.format == "PNG" and image.size == (800, 450)


def test_a_dwarfing_scenario_gets_a_log_axis(tmp_path: Path) -> None:
    from ackstore.tools.plots import wants_log_scale

    assert wants_log_scale([1.3, 2.0, 90.0]) and not wants_log_scale([1.3, 2.0, 9.0]) and not wants_log_scale([0, 0])
    rows = [
        {"scenario": "sequential", "holes": 3, "range_count": 1, "state_bytes": 200},
        {"scenario": "missed_acks", "holes": 900, "range_count": 900, "state_bytes": 1800},
    ]
    assert write_plots(tmp_path, rows) == [f"plots/{name}" for name in PLOTS]  # 200 B/range vs 2: log


@pytest.mark.parametrize("scenarios", [7, 12])
def test_the_scenario_names_under_each_plot_never_overlap(
    tmp_path: Path, scenarios: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every plot with the seven scenarios of a run, and with more: no two x labels' boxes
    overlap, and each stays inside the image (the holes plot wrote them side by side, run
    together)."""
    from ackstore.tools import plots
    from ackstore.tools.workloads import SCENARIOS

    names = (list(SCENARIOS) * 2)[:scenarios]
    names = [n if i < len(SCENARIOS) else f"{n}_again" for i, n in enumerate(names)]
    rows = [{"scenario": n, "holes": 10 + i, "range_count": 5 + i, "state_bytes": 300 + i} for i, n in enumerate(names)]
    seen = []
    save = plots._save

    def checked(plt, fig, ax, title, path, grid_axis="y"):  # type: ignore[no-untyped-def]
        fig.tight_layout()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [label.get_window_extent(renderer) for label in ax.get_xticklabels() if label.get_text()]
        assert len(boxes) == scenarios, title
        for a, b in itertools.pairwise(boxes):
            assert not a.overlaps(b), (title, a, b)
        width, _ = fig.canvas.get_width_height()
        assert all(box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 for box in boxes), title
        seen.append(title)
        return save(plt, fig, ax, title, path, grid_axis)

    monkeypatch.setattr(plots, "_save", checked)
    plots.write_plots(tmp_path, rows)
    assert len(seen) == len(plots.PLOTS)
