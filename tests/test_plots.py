"""The report's plots from plain rows (no Spark): files are real PNGs of the stated size."""

from __future__ import annotations

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
