"""The report's plots from plain rows (no Spark): files are real PNGs of the stated size."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from tools.plots import PLOTS, write_plots


def test_write_plots_makes_three_pngs_including_unreadable_rows(tmp_path: Path) -> None:
    rows = [
        {"scenario": "missed_acks", "holes": h, "range_count": h + 1, "state_bytes": 300 * h, "recover_seconds": 1e-3}
        for h in (1, 5, 9)
    ] + [{"scenario": "baseline", "holes": 0, "range_count": None, "state_bytes": None, "recover_seconds": None}]
    assert write_plots(tmp_path, rows) == [f"plots/{name}" for name in PLOTS]
    for name in PLOTS:
        with Image.open(tmp_path / "plots" / name) as image:
            assert image.format == "PNG" and image.size == (800, 450)
