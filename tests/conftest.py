from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if Path(__file__).resolve().parents[1].name == "mutants":  # mutmut runs this suite on its copy of the source
    for module in list(sys.modules.values()):  # the editable install points the package at the checkout:
        mapping = getattr(module, "MAPPING", None)  # point it at the mutated copy instead
        if isinstance(mapping, dict) and "ackstore" in mapping and "__editable__" in getattr(module, "__name__", ""):
            mapping["ackstore"] = str(Path(__file__).resolve().parents[1] / "ackstore")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", help="run the stress tests at full length")


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long")) or os.environ.get("ACKSTORE_LONG") == "1"


@pytest.fixture(autouse=True)
def chain_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every open in the suite holds the compiled read of a cursor's form against its Python
    twin (``tests/chain_twins.py``)."""
    from ackstore import store_cursors

    from .chain_twins import checked_form_read

    monkeypatch.setattr(store_cursors, "form_read", checked_form_read)


@pytest.fixture
def store_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


@pytest.fixture
def form_chains() -> Iterator[None]:
    """The small form keeps a chain of its own for a state a slot does not take
    (``ackstore.cursor.small.set_form_chains``: on by default; pinned on for the test, as a
    test elsewhere or a state machine step may switch it)."""
    from ackstore.cursor.small import set_form_chains

    before = set_form_chains(True)
    try:
        yield
    finally:
        set_form_chains(before)


@pytest.fixture
def marker_layout() -> Iterator[None]:
    """Every cursor flushes in the marker layout (a ledger record per changed ledger and a
    marker), never the state layout: for the tests of those records themselves."""
    from ackstore.cursor.lane import set_state_bound

    before = set_state_bound(-1)
    try:
        yield
    finally:
        set_state_bound(before)


@pytest.fixture
def parts_chains() -> Iterator[None]:
    """Small forms keep no chain of their own (``set_form_chains(False)``): a state over a
    slot's bound is written, and read at open, by the cursor's parts, for the tests of the
    parts' records, budget and recovery themselves."""
    from ackstore.cursor.small import set_form_chains

    before = set_form_chains(False)
    try:
        yield
    finally:
        set_form_chains(before)


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
            "pages",
            "puts",
            "check",
            "codecs",
            "decoders",
            "defects",
            "deltas",
            "fields",
            "chain_open",
            "marker_chain",
            "form_chain",
            "ledger_acks",
            "lock",
            "flush_chunks",
            "history",
            "lane",
            "peers",
            "records",
            "recovery",
            "small",
            "state_layout",
            "store",
            "walk",
        ),
        "storage",
    ),
    **dict.fromkeys(("metrics", "replicator", "revisions"), "dispatch"),
    **dict.fromkeys(("cli", "cli_edges", "damage_defects", "node_damage", "repair_tools", "salvage"), "cli"),
    **dict.fromkeys(("plots", "spark", "spark_cluster"), "spark"),
    **dict.fromkeys(
        ("crash", "damage_campaign", "full_disk", "power_cut", "readers", "reader_states", "soak"), "campaigns"
    ),
    **dict.fromkeys(
        (
            "api_docs",
            "bench_tables",
            "docs",
            "imports",
            "mutant_screen",
            "packaging",
            "public_names",
            "readme",
            "wheel",
        ),
        "docs",
    ),
}

#: the slow tests (subprocesses, kill -9 rounds, Spark, campaigns) carry ``@pytest.mark.slow``
#: (a module: ``pytestmark``) where they are defined, and every ``stress`` test is slow:
#: ``make check`` (``-m "not slow"``) leaves them out; ``make test`` runs everything


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        stem = path.stem.removeprefix("test_")
        if stem not in AREAS:
            raise pytest.UsageError(f"tests/{path.name} is in no area: name it in AREAS in tests/conftest.py")
        item.add_marker(getattr(pytest.mark, AREAS[stem]))
        if item.get_closest_marker("stress"):
            item.add_marker(pytest.mark.slow)


if os.environ.get("ACKSTORE_LAYOUT"):  # (a debugging aid: every form's layouts lowered, as tests.forms.LAYOUTS)
    from ackstore import _native as _n

    _flat, _room, _moves, _dead = map(int, os.environ["ACKSTORE_LAYOUT"].split(","))
    _n._set_run_chunks(_flat, _room)
    _n._set_count_moves(_moves, _dead)
