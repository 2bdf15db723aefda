"""Prometheus metrics of an open store, computed at scrape time (extra ``ackstore[metrics]``).

::

    from prometheus_client import REGISTRY, start_http_server
    from ackstore.metrics import AckStoreCollector

    REGISTRY.register(AckStoreCollector(store, max_cursors=100))
    start_http_server(9464, addr="127.0.0.1")

Every figure is read from ``store.stats()`` and each open cursor's ``stats()`` when
Prometheus scrapes: no second bookkeeping and nothing on the ack path. The engine never
imports this module (or prometheus-client).

Cardinality: the ``max_cursors`` cursors with the most ack ranges get their own series
(labels ``topic`` and ``subscription``); the others are summed into one series labelled
``topic="_other", subscription="_other"`` (0/1 gauges become counts of cursors). Only the
cursors the store object has opened are seen (a cursor process opens its own; ``ackstore
stat --prometheus`` opens every cursor of an offline store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from .stats import CURSOR_FIGURES

if TYPE_CHECKING:
    from .dispatch.dispatcher import Dispatcher
    from .store import AckStore

__all__ = ["AckStoreCollector", "CURSOR_METRICS", "HISTORY_METRICS", "OTHER"]

OTHER = "_other"
"""the label value of the series that sums the cursors past ``max_cursors``"""


@dataclass(frozen=True, slots=True)
class _CursorMetric:
    name: str
    kind: str  # "gauge" or "counter"
    doc: str
    figure: str  # a name of ackstore.stats.CURSOR_FIGURES


CURSOR_METRICS = (
    _CursorMetric("ack_ranges", "gauge", "Acknowledged ranges above the mark-delete position", "ack_range_count"),
    _CursorMetric("persisted_ranges", "gauge", "Ranges the newest marker holds", "persisted_ranges"),
    _CursorMetric(
        "ranges_over_limit", "gauge", "Ranges a flush now keeps in memory only (PIP-299)", "ranges_over_limit"
    ),
    _CursorMetric("truncated", "gauge", "1 while the newest marker holds only part of the ranges", "truncated"),
    _CursorMetric(
        "blocked_on_ack_state_persistent",
        "gauge",
        "1 while sequential reads are paused because the ranges exceed the cap",
        "blocked",
    ),
    _CursorMetric("cache_bytes", "gauge", "Bytes of ledger ack sets held in memory (upper bound)", "cache_bytes"),
    _CursorMetric("cache_budget_bytes", "gauge", "The cursor's cache budget in bytes", "cache_budget"),
    _CursorMetric("ledgers_in_memory", "gauge", "Ledgers whose ack set is loaded", "ledgers_in_memory"),
    _CursorMetric("ledgers_swapped_out", "gauge", "Ledgers whose ack set is on disk only", "ledgers_swapped_out"),
    _CursorMetric("swap_ins", "counter", "Ledgers loaded back from disk", "swap_ins"),
    _CursorMetric("evictions", "counter", "Ledgers evicted to fit the budget", "evictions"),
    _CursorMetric("write_backs", "counter", "Dirty ledgers written before eviction", "write_backs"),
    _CursorMetric("flushes", "counter", "Flushes that wrote this cursor", "flushes"),
    _CursorMetric("flush_bytes", "counter", "Bytes this cursor's flushes wrote", "total_flush_bytes"),
    _CursorMetric(
        "recovery_markers_skipped", "gauge", "Broken markers recovery skipped when the cursor opened", "markers_skipped"
    ),
    _CursorMetric("revisions", "counter", "Position resets completed (PIP-269)", "revisions_done"),
    _CursorMetric("revision_running", "gauge", "1 while a position reset runs", "revision_running"),
    _CursorMetric(
        "redeliveries", "counter", "Deliveries of entries delivered before (since the store opened)", "redeliveries"
    ),
)
"""every per-cursor metric: name (without the ``ackstore_cursor_`` prefix and the counters'
``_total``), type, help, and the figure of ``Cursor.figures()`` / ``stats()`` it shows"""
_COLUMNS = [CURSOR_FIGURES.index(m.figure) for m in CURSOR_METRICS]
_FLUSHES = CURSOR_FIGURES.index("flushes")

HISTORY_METRICS = (
    _CursorMetric("history_states", "gauge", "Flushed states the cursor's history keeps", "history_states"),
    _CursorMetric(
        "history_bytes",
        "gauge",
        "Bytes the cursor's history keeps: records only its kept states need, and its points",
        "history_bytes",
    ),
)
"""a cursor's history (``CursorConfig.history_seconds``): read from the store, not from
``Cursor.figures()``; 0 for a cursor that keeps none"""
_HISTORY_COLUMNS = [len(CURSOR_FIGURES), len(CURSOR_FIGURES) + 1]


class AckStoreCollector:
    """A prometheus-client collector over one open :class:`~ackstore.AckStore`.

    ``max_cursors``: cursors with their own series (the rest are summed as ``_other``).
    ``dispatchers``: dispatchers whose PIP-299 pause checks and paused reads to export.
    """

    def __init__(self, store: AckStore, max_cursors: int = 100, dispatchers: Iterable[Dispatcher] = ()) -> None:
        if type(max_cursors) is not int or max_cursors < 0:
            from .errors import InvalidArgumentError

            raise InvalidArgumentError(f"max_cursors={max_cursors!r}: allowed an int >= 0")
        self.store = store
        """the store scraped"""
        self.max_cursors = max_cursors
        """cursors with their own series; the rest are summed as ``_other``"""
        self.dispatchers = list(dispatchers)
        """the dispatchers whose pause checks and paused reads are exported"""
        self._history_bytes: dict[int, tuple[int, int]] = {}  # cursor id -> (its flushes, history bytes)

    def describe(self) -> list[Metric]:
        """None: the metrics are computed at scrape time (registering must not scrape)."""
        return []  # computed at scrape time: registering must not scrape

    def collect(self) -> Iterator[Metric]:
        """The store's, every cursor's and the dispatchers' metrics, read now."""
        yield from self._store_metrics()
        yield from self._cursor_metrics()
        yield from self._dispatcher_metrics()

    # -- the store -----------------------------------------------------------------------------

    def _store_metrics(self) -> Iterator[Metric]:
        st = self.store.stats()
        yield _counter("ackstore_flushes", "Group flushes that wrote something", st.flushes)
        yield _counter("ackstore_flush_bytes", "Bytes (keys and values) the flushes wrote", st.flush_bytes)
        yield _counter("ackstore_records_trimmed", "Garbage records deleted after full markers", st.records_trimmed)
        yield _counter("ackstore_map_grows", "Times the LMDB map grew", st.map_grows)
        hist = HistogramMetricFamily("ackstore_flush_duration_seconds", "Duration of group flushes")
        hist.add_metric(
            [],
            [(_bound(b), c) for b, c in st.flush_seconds_buckets],
            st.flush_seconds_sum,
        )
        yield hist
        yield _gauge("ackstore_file_size_bytes", "Size of the store's data file", st.file_bytes)
        yield _gauge("ackstore_map_size_bytes", "Size of the LMDB map", st.map_size)
        yield _gauge("ackstore_topics", "Topics in the store", st.topics)
        yield _gauge("ackstore_cursors", "Cursors this store object has open", st.cursors)
        oldest = st.oldest_reader
        yield _gauge(
            "ackstore_oldest_reader_transactions_behind",
            "Transactions committed since the one the oldest reader sees (LMDB keeps its pages: the file grows)",
            0 if oldest is None else oldest.behind,
        )
        if oldest is not None and oldest.seconds is not None:
            yield _gauge(
                "ackstore_oldest_reader_seconds",
                "Seconds this writer has seen the oldest reader hold its transaction",
                oldest.seconds,
            )
        info = InfoMetricFamily("ackstore_store", "The store's path and format version")
        info.add_metric([], {"path": st.path, "format_version": str(st.format_version), "readonly": str(st.readonly)})
        yield info

    # -- cursors -------------------------------------------------------------------------------

    def _cursor_metrics(self) -> Iterator[Metric]:
        cursors = self.store.open_cursors()
        rows = []
        for cur in cursors:
            figures = cur.figures()
            rows.append((cur.topic.name, cur.name, figures + self._history(cur, figures[_FLUSHES])))
        rows.sort(key=lambda r: (-r[2][0], r[0], r[1]))  # the most ack ranges first
        own, rest = rows[: self.max_cursors], rows[self.max_cursors :]
        other = [sum(col) for col in zip(*(r[2] for r in rest), strict=True)] if rest else []
        for m, col in zip(CURSOR_METRICS + HISTORY_METRICS, _COLUMNS + _HISTORY_COLUMNS, strict=True):
            name = f"ackstore_cursor_{m.name}"
            family: GaugeMetricFamily | CounterMetricFamily
            if m.kind == "counter":
                family = CounterMetricFamily(name, m.doc, labels=["topic", "subscription"])
            else:
                family = GaugeMetricFamily(name, m.doc, labels=["topic", "subscription"])
            for topic, sub, values in own:
                family.add_metric([topic, sub], values[col])
            if rest:
                family.add_metric([OTHER, OTHER], other[col])
            yield family

    def _history(self, cur: Any, flushes: int) -> tuple[int, int]:
        """The states and bytes a cursor's history keeps. The bytes are counted from the log
        (``Cursor.log_usage``, O(records)); on the writer once per flush of the cursor (a
        scrape between two flushes reuses the figure), on a reader at every scrape."""
        states = cur.history_kept()
        if not states:
            return 0, 0
        cached = self._history_bytes.get(cur.cursor_id)
        if cached is None or cached[0] != flushes or self.store.readonly:
            cached = self._history_bytes[cur.cursor_id] = (flushes, cur.log_usage().history_bytes)
        return states, cached[1]

    # -- dispatchers ---------------------------------------------------------------------------

    def _dispatcher_metrics(self) -> Iterator[Metric]:
        if not self.dispatchers:
            return
        for kind, name, doc, value in _DISPATCHER_METRICS:
            family = kind(name, doc, labels=["topic", "subscription"])
            for d in self.dispatchers:
                family.add_metric([d.cursor.topic.name, d.cursor.name], value(d))
            yield family


_DISPATCHER_METRICS: tuple[
    tuple[type[CounterMetricFamily | GaugeMetricFamily], str, str, Callable[[Any], int]], ...
] = (
    (
        CounterMetricFamily,
        "ackstore_dispatcher_pause_checks",
        "PIP-299 checks a dispatcher made (only while pausing is on)",
        lambda d: d.pause_checks,
    ),
    (
        CounterMetricFamily,
        "ackstore_dispatcher_paused_reads",
        "Sequential reads a dispatcher paused because the ack state was too big to persist",
        lambda d: d.paused,
    ),
    (
        CounterMetricFamily,
        "ackstore_dispatcher_dead_lettered",
        "Entries a dispatcher handed to its dead letter after max_deliveries deliveries",
        lambda d: d.dead_lettered,
    ),
    (
        CounterMetricFamily,
        "ackstore_dispatcher_dead_letter_failures",
        "Calls of a dispatcher's dead letter that raised (the entry stays due; the next read tries again)",
        lambda d: d.dead_letter_failures,
    ),
    (
        GaugeMetricFamily,
        "ackstore_dispatcher_dead_letter_due",
        "Entries at max_deliveries waiting for the dead letter (a failing dead letter keeps them here)",
        lambda d: len(d.dead),
    ),
)
"""a dispatcher's metrics: family, name, help, its value"""


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _bound(b: float) -> str:
    return "+Inf" if b == float("inf") else repr(b)
