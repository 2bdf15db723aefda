"""Operators can see it: Prometheus metrics scraped over real HTTP, the cardinality cap,
one warning per crossing of the PIP-299 cap, and ``ackstore stat --prometheus``."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from ackstore import AckStore, CursorConfig, Dispatcher, Position
from ackstore.metrics import CURSOR_METRICS, OTHER, AckStoreCollector
from ackstore.testing import InMemoryLedgerReader

T = "persistent://t/ns/metrics"
ROOT = Path(__file__).parent.parent


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(registry: CollectorRegistry) -> str:
    port = _free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            return resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _workload(store: AckStore) -> list[int]:
    """Acks with holes, a flush, a cap crossed (truncated marker), a swap-in. Returns flush bytes."""
    topic = store.topic(T)
    for ledger in (1, 2, 3):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, 1000)
    topic.add_ledger(4)
    capped = topic.cursor("capped", CursorConfig(max_unacked_ranges_to_persist=3, max_individual_ack_cache_bytes=1))
    plain = topic.cursor("plain")
    written = []
    capped.ack([Position(1, e) for e in range(5, 50, 5)])  # 9 ranges > 3
    capped.ack([Position(2, e) for e in range(1, 30, 2)])
    plain.ack([Position(1, 3), Position(1, 4), Position(3, 7)])
    written.append(store.flush().bytes_written)
    assert capped.is_acked(Position(1, 10))  # ledger 1 was evicted (tiny budget): a swap-in
    plain.ack(Position(3, 9))
    written.append(store.flush().bytes_written)
    return written


def test_a_real_scrape_matches_the_stats(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        written = _workload(store)
        for cur in store.open_cursors():
            cur.stats()  # measures the caches exactly, so the scrape's running totals match it
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store))
        got = _samples(_scrape(registry))
        st = store.stats()
        assert got[("ackstore_flushes_total", ())] == st.flushes == 2
        assert got[("ackstore_flush_bytes_total", ())] == st.flush_bytes == sum(written)
        assert got[("ackstore_flush_duration_seconds_count", ())] == 2
        assert got[("ackstore_flush_duration_seconds_bucket", (("le", "+Inf"),))] == 2
        assert got[("ackstore_cursors", ())] == 2 and got[("ackstore_topics", ())] == 1
        assert got[("ackstore_map_size_bytes", ())] == store.map_size
        for cur in (store.topic(T).cursor("capped"), store.topic(T).cursor("plain")):
            cs = cur.stats()
            labels = (("subscription", cur.name), ("topic", T))
            expect = {
                "ack_ranges": cs.ack_range_count,
                "persisted_ranges": cs.persisted_ranges,
                "ranges_over_limit": cs.ranges_over_limit,
                "truncated": float(cs.truncated),
                "cache_bytes": cs.cache_bytes,
                "cache_budget_bytes": cs.cache_budget,
                "ledgers_in_memory": cs.ledgers_in_memory,
                "ledgers_swapped_out": cs.ledgers_swapped_out,
                "swap_ins_total": cs.swap_ins,
                "evictions_total": cs.evictions,
                "write_backs_total": cs.write_backs,
                "flushes_total": cs.flushes,
                "flush_bytes_total": cs.total_flush_bytes,
                "recovery_markers_skipped": cs.recovery.markers_skipped,
                "revisions_total": cs.revisions_done,
                "revision_running": cs.revision_running,
            }
            for name, value in expect.items():
                assert got[(f"ackstore_cursor_{name}", labels)] == value, (cur.name, name)
        capped = store.topic(T).cursor("capped").stats()
        assert capped.truncated and capped.ranges_over_limit == 21 and capped.swap_ins >= 1


def test_the_cardinality_cap_sums_the_smallest_cursors(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        for i in range(6):
            topic.cursor(f"c{i}").ack([Position(1, e) for e in range(0, 2 * (i + 1) + 1, 2)][1:])
        store.flush()
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store, max_cursors=2))
        got = _samples(_scrape(registry))
    ranges = {k[1]: v for k, v in got.items() if k[0] == "ackstore_cursor_ack_ranges"}
    assert ranges == {
        (("subscription", "c5"), ("topic", T)): 6,
        (("subscription", "c4"), ("topic", T)): 5,
        (("subscription", OTHER), ("topic", OTHER)): 1 + 2 + 3 + 4,
    }
    assert {k[1] for k, _ in got.items() if k[0] == "ackstore_cursor_flushes_total"} == set(ranges)


def test_history_metrics_count_the_states_and_the_bytes_a_window_keeps(store_path: Path) -> None:
    """A cursor keeping an hour of history exports its kept states and their bytes; with
    nothing old enough to trim, that is every record its live state does not need, plus the
    points; a cursor without history exports 0 for both. A second scrape after a flush
    counts again."""
    from ackstore.storage.records import split_log_key, split_slot_key

    cfg = CursorConfig(history_seconds=3600, max_unacked_ranges_to_persist=0, full_marker_every=4)
    with AckStore.open(store_path, sync=False) as store:
        topic = store.topic(T)
        for ledger in (1, 2, 3):
            topic.add_ledger(ledger)
            if ledger < 3:
                topic.close_ledger(ledger, 5000)
        kept, plain = topic.cursor("kept", cfg), topic.cursor("plain")
        for r in range(10):
            for cur in (kept, plain):
                cur.ack_entries(1 + r % 3, range(r, 3000, 7 + r))
            store.flush()
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store))
        got = _samples(_scrape(registry))

        def raw(txn):  # type: ignore[no-untyped-def]
            log = [
                (k, v)
                for k, v in txn.cursor(db=store.storage.log_db)
                if split_slot_key(bytes(k)) is None and split_log_key(bytes(k))[0] == 0  # (the other's slots)
            ]
            points = [(k, v) for k, v in txn.cursor(db=store.storage.history_db) if split_log_key(bytes(k))[0] == 0]
            return sum(len(k) + len(v) for k, v in log), sum(len(k) + len(v) for k, v in points), len(points)

        log_bytes, point_bytes, npoints = store.storage.read(raw)
        usage = kept.log_usage()
        labels = (("subscription", "kept"), ("topic", T))
        assert got[("ackstore_cursor_history_states", labels)] == npoints == len(kept.history()) == 10
        assert usage.garbage_bytes == 0 and usage.record_bytes == log_bytes
        assert got[("ackstore_cursor_history_bytes", labels)] == log_bytes - usage.live_bytes + point_bytes > 0
        none = (("subscription", "plain"), ("topic", T))
        assert got[("ackstore_cursor_history_states", none)] == got[("ackstore_cursor_history_bytes", none)] == 0
        kept.ack_entries(1, range(3000, 3100))
        store.flush()
        again = _samples(_scrape(registry))
        assert again[("ackstore_cursor_history_states", labels)] == 11
        assert again[("ackstore_cursor_history_bytes", labels)] == kept.log_usage().history_bytes
        assert again[("ackstore_cursor_history_bytes", labels)] > got[("ackstore_cursor_history_bytes", labels)]


def test_one_warning_per_crossing_and_one_info_on_return(store_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ackstore")
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(max_unacked_ranges_to_persist=4))
        for e in range(0, 40, 2):
            cur.ack(Position(1, e + 1))  # one more range each time
            store.flush()
        over = [r for r in caplog.records if r.levelno == logging.WARNING and "max_unacked" in r.getMessage()]
        assert len(over) == 1 and "c has 5 ack ranges" in over[0].getMessage()
        assert "redelivered" in over[0].getMessage()
        cur.ack_cumulative(Position(1, 36))
        for _ in range(3):
            cur.ack(Position(1, 100))
            store.flush()
        back = [r for r in caplog.records if r.levelno == logging.INFO and "back to" in r.getMessage()]
        assert len(back) == 1
        cur.ack([Position(1, e) for e in range(200, 220, 2)])
        store.flush()
        over = [r for r in caplog.records if r.levelno == logging.WARNING and "max_unacked" in r.getMessage()]
        assert len(over) == 2  # a second crossing warns again


def test_the_dispatcher_logs_pause_and_resume_once(store_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    caplog.set_level(logging.INFO, logger="ackstore")
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100)
        cfg = CursorConfig(max_unacked_ranges_to_persist=2, dispatcher_pause_on_ack_state_persistent=True)
        cur = topic.cursor("c", cfg)
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        d.add_consumer("x")
        cur.ack([Position(1, 10), Position(1, 20), Position(1, 30)])

        async def reads(n: int) -> None:
            for _ in range(n):
                await d.read_more(1)

        asyncio.run(reads(5))
        cur.ack_cumulative(Position(1, 25))
        asyncio.run(reads(5))
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store, dispatchers=[d]))
        got = _samples(_scrape(registry))
    msgs = [r.getMessage() for r in caplog.records if "dispatcher of" in r.getMessage()]
    assert len(msgs) == 2 and "pauses" in msgs[0] and "resumes" in msgs[1]
    labels = (("subscription", "c"), ("topic", T))
    assert got[("ackstore_dispatcher_pause_checks_total", labels)] == d.pause_checks >= 10
    assert got[("ackstore_dispatcher_paused_reads_total", labels)] == d.paused == 5


def test_stat_prometheus_of_an_offline_store(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        _workload(store)
    with AckStore.open(store_path, readonly=True) as store:  # what a restart sees (PIP-299 capped)
        expected = {c: store.topic(T).cursor(c).stats() for c in ("capped", "plain")}
    assert expected["capped"].ack_range_count == 3
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "stat", "--prometheus", str(store_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    got = _samples(r.stdout)
    for name, st in expected.items():
        labels = (("subscription", name), ("topic", T))
        assert got[("ackstore_cursor_ack_ranges", labels)] == st.ack_range_count
        assert got[("ackstore_cursor_persisted_ranges", labels)] == st.persisted_ranges
        assert got[("ackstore_cursor_truncated", labels)] == float(st.truncated)
    assert got[("ackstore_cursors", ())] == 2
    assert len(CURSOR_METRICS) == len({m.name for m in CURSOR_METRICS})
    bad = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "stat", "--prometheus", "--json", str(store_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
