"""A Prometheus scrape of a store with 10,000 open cursors, against reading the same
figures with ``stats()`` in a loop; and one-position acks with the collector registered,
against the same acks without it (the collector must cost nothing on the ack path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest

from ackstore import AckStore, Position
from ackstore.metrics import AckStoreCollector

CURSORS = 10_000
SCRAPE = "scrape: 10,000 cursors, 100 with their own series"
ACK = "ack one position per call, collector registered"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("metrics") / "store"
    store = AckStore.open(path, sync=False, map_size=1 << 28)
    topic = store.topic("persistent://bench/ns/metrics")
    topic.add_ledger(1)
    cursors = [topic.cursor(f"sub-{i}") for i in range(CURSORS)]
    for i, cur in enumerate(cursors):
        cur.ack([Position(1, i % 50 + 1), Position(1, i % 50 + 3)])
    store.flush()
    yield store
    store.close()


def test_scrape_stats_loop_baseline(benchmark: Any, big: AckStore) -> None:
    benchmark.group = SCRAPE
    benchmark.pedantic(lambda: [c.stats() for c in big.open_cursors()], rounds=5)  # the figures, read the slow way
    benchmark.extra_info.update(baseline=True)


def test_scrape_collector(benchmark: Any, big: AckStore) -> None:
    registry = CollectorRegistry()
    registry.register(AckStoreCollector(big, max_cursors=100))
    benchmark.group = SCRAPE
    text = benchmark.pedantic(lambda: generate_latest(registry), rounds=5)
    benchmark.extra_info.update(bytes=len(text))


def _ack_loop(store: AckStore) -> Any:
    topic = store.topic("persistent://bench/ns/acks")
    topic.add_ledger(1)
    cur = topic.cursor("c")
    positions = iter([Position(1, e) for e in range(1, 2_000_000, 2)])

    def run() -> None:
        for _ in range(20_000):
            cur.ack(next(positions))

    return run


def test_ack_without_collector_baseline(benchmark: Any, tmp_path: Path) -> None:
    with AckStore.open(tmp_path / "a", sync=False) as store:
        benchmark.group = ACK
        benchmark.pedantic(_ack_loop(store), rounds=5)
        benchmark.extra_info.update(baseline=True, ops=20_000)


def test_ack_with_collector(benchmark: Any, tmp_path: Path) -> None:
    with AckStore.open(tmp_path / "b", sync=False) as store:
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store))
        generate_latest(registry)
        benchmark.group = ACK
        benchmark.pedantic(_ack_loop(store), rounds=5)
        benchmark.extra_info.update(ops=20_000)
