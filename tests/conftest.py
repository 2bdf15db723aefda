from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", help="run the stress tests at full length")


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long")) or os.environ.get("ACKSTORE_LONG") == "1"


@pytest.fixture
def store_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


@pytest.fixture
def tmpfs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``tmpfs(size)`` mounts a tmpfs of ``size`` bytes in ``tmp_path`` and returns its
    path (root only; the test is skipped where mounting is not allowed); all are
    unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        mnt = tmp_path / f"tmpfs{len(mounted)}"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        mounted.append(mnt)
        return mnt

    try:
        yield mount
    finally:
        for mnt in mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test session: local[2], UI off."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("ackstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


#: what each test file tests (a marker per area: ``pytest -m storage``); a new file must be
#: named here, so that every test has its group
AREAS: dict[str, str] = {
    **dict.fromkeys(
        (
            "ack_state",
            "dead_letters",
            "delete",
            "delivery_counts",
            "errors",
            "pip299",
            "pulsar_edges",
            "pulsar_seek",
            "redelivery",
            "state_machine",
        ),
        "cursor",
    ),
    **dict.fromkeys(
        (
            "budget",
            "check",
            "codecs",
            "decoders",
            "defects",
            "deltas",
            "flush_chunks",
            "lane",
            "peers",
            "records",
            "recovery",
            "store",
        ),
        "storage",
    ),
    **dict.fromkeys(("metrics", "replicator", "revisions"), "dispatch"),
    **dict.fromkeys(("cli", "cli_edges", "damage_defects", "node_damage", "repair_tools", "salvage"), "cli"),
    **dict.fromkeys(("plots", "spark", "spark_cluster"), "spark"),
    **dict.fromkeys(
        ("crash", "damage_campaign", "full_disk", "power_cut", "readers", "reader_states", "soak"), "campaigns"
    ),
    **dict.fromkeys(("api_docs", "docs", "packaging", "readme"), "docs"),
}

#: tests that take over a second or so on a busy 2-core machine (subprocesses, kill -9
#: rounds, Spark, campaigns): ``make check`` (``-m "not slow"``) leaves them out and runs
#: the rest in under a minute; ``make test`` runs everything
SLOW_FILES = {
    "spark",
    "spark_cluster",
    "plots",
    "crash",
    "damage_campaign",
    "power_cut",
    "readers",
    "reader_states",
    "full_disk",
    "soak",
}
SLOW_TESTS = {
    "test_redelivery.py::test_kill_minus_nine_redelivers_every_dispatched_unacked_entry",
    "test_cli_edges.py::test_killing_the_tool_kills_its_worker",
    "test_cli_edges.py::test_ctrl_c_is_one_line_and_leaves_nothing",
    "test_cli_edges.py::test_cursor_names_with_a_slash_and_control_characters",
    "test_api_docs.py::test_the_api_reference_builds_with_warnings_as_errors",
    "test_repair_tools.py::test_kill_minus_nine_during_a_tool_leaves_stores_that_open",
    "test_repair_tools.py::test_salvage_of_a_store_killed_mid_flush_is_its_committed_state",
    "test_delete.py::test_deleting_and_recreating_cursors_keeps_the_file_bounded",
    "test_delete.py::test_cli_delete_cursor_and_topic",
    "test_store.py::test_map_grows_without_the_caller_seeing_it",
    "test_store.py::test_flush_writes_only_the_dirty_ledger_and_a_delta_marker",
    "test_store.py::test_acks_go_on_while_a_flush_encodes",
    "test_delivery_counts.py::test_a_poison_entry_reaches_the_dead_letter_across_kill_9",
    "test_delivery_counts.py::test_the_tools_carry_counts_dump_restore_compact_salvage_check_stat",
    "test_salvage.py::test_salvage_recovers_what_damaged_branch_keys_hide",
    "test_damage_defects.py::test_a_zeroed_leaf_page_is_an_error_not_sigabrt",
    "test_damage_defects.py::test_a_truncated_file_is_an_error_not_sigbus",
    "test_damage_defects.py::test_restore_refuses_a_planted_or_leftover_restoring_path",
    "test_budget.py::test_range_count_stays_exact_and_cache_bounded_under_random_work",
    "test_decoders.py::test_checksummed_envelopes_with_any_body",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        stem = path.stem.removeprefix("test_")
        if stem not in AREAS:
            raise pytest.UsageError(f"tests/{path.name} is in no area: name it in AREAS in tests/conftest.py")
        item.add_marker(getattr(pytest.mark, AREAS[stem]))
        test = f"{path.name}::{item.name.split('[')[0]}"
        if stem in SLOW_FILES or test in SLOW_TESTS or item.get_closest_marker("stress"):
            item.add_marker(pytest.mark.slow)
