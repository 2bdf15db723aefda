"""Delivery counts: kept per entry beside the acks, persisted by the group flush as deltas,
recovered, budgeted; the dispatcher's max_deliveries and dead letter; kill -9 rounds."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackstore import (
    AckStore,
    CursorConfig,
    Dispatcher,
    InvalidArgumentError,
    InvalidPositionError,
    InvalidTypeError,
    Position,
    testing,
)
from ackstore.dispatch.reads import Entry
from ackstore.testing import InMemoryLedgerReader

from .forms import end_form

T = "persistent://t/ns/deliveries"
ROOT = Path(__file__).parent.parent
P = Position


def _topic(store: AckStore, entries: int = 1000):  # type: ignore[no-untyped-def]
    topic = store.topic(T)
    if not topic.ledgers():
        topic.add_ledger(1)
        topic.close_ledger(1, entries)
        topic.add_ledger(2)
    return topic


def test_counts_rise_per_delivery_and_an_ack_of_any_kind_takes_them_away(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        assert cur.record_deliveries([P(1, 5), P(1, 5), P(1, 6), P(1, 7), P(1, 8), P(1, 9), P(2, 3)]) == [
            1,
            2,
            1,
            1,
            1,
            1,
            1,
        ]
        assert cur.delivery_count(P(1, 5)) == 2 and cur.delivery_count(P(1, 4)) == 0
        cur.ack(P(1, 6))  # individually
        cur.ack_cumulative(P(1, 5))  # cumulatively
        cur.ack_batch_index(P(1, 7), 2, [0, 1])  # a completed batch
        cur.ack_batch_index(P(1, 8), 2, [0])  # a partial one keeps it
        assert cur.delivery_counts() == {P(1, 8): 1, P(1, 9): 1, P(2, 3): 1}
        assert cur.delivery_counts(P(1, 9), P(2, 0)) == {P(1, 9): 1}
        assert cur.record_deliveries([P(1, 6)]) == [0]  # acked: not counted
        cur._check()


def test_a_reset_drops_every_count(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        asyncio.run(d.read_more(5))
        assert cur.delivery_counts() == {P(1, e): 1 for e in range(5)}
        d.reset(P(1, 2))
        assert cur.delivery_counts() == {}
        asyncio.run(d.read_more(1))
        d.seek(P(1, 0))
        assert cur.delivery_counts() == {}


def test_bad_input_is_a_typed_error_and_counts_nothing(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        with pytest.raises(InvalidPositionError, match="1000"):
            cur.record_deliveries([P(1, 3), P(1, 1000)])  # past the sealed end
        with pytest.raises(InvalidTypeError):
            cur.record_deliveries(5)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError):
            cur.record_deliveries([P(1, 3)], durable="yes")  # type: ignore[arg-type]
        assert cur.delivery_counts() == {}
        with pytest.raises(InvalidArgumentError, match="max_deliveries=-1"):
            CursorConfig(max_deliveries=-1)
        limited = topic.cursor("d", CursorConfig(max_deliveries=3))
        with pytest.raises(InvalidArgumentError, match="dead_letter"):
            Dispatcher(limited, InMemoryLedgerReader(topic))
        with pytest.raises(InvalidArgumentError, match="delay"):
            Dispatcher(cur, InMemoryLedgerReader(topic)).redeliver([P(1, 1)], delay=-1)


@pytest.mark.parametrize("restart", ["close", "crash after flush"])
def test_counts_survive_a_restart_through_records_and_delta_markers(store_path: Path, restart: str) -> None:
    """A base record with counts, then delta markers that carry only the counts set since."""
    with AckStore.open(store_path) as store:
        cur = _topic(store, 2000).cursor("c")
        cur.ack_entries(1, range(0, 2000, 2))  # (more ranges than the state layout takes)
        cur.record_deliveries([P(1, e) for e in range(1, 200, 2)])
        first = store.flush()
        flushes = []
        for e in (201, 203, 201):
            cur.record_deliveries([P(1, e)])
            flushes.append(store.flush())
        expected = {**{P(1, e): 1 for e in range(1, 200, 2)}, P(1, 201): 2, P(1, 203): 1}
        assert cur.delivery_counts() == expected
        # markers only: what changed rides in them, the ledger is not written again
        assert [(f.ledger_records, f.markers) for f in flushes] == [(0, 1)] * 3
        assert max(f.bytes_written for f in flushes) < first.bytes_written / 3
        if restart != "close":
            testing.crash(store)
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        assert cur.delivery_counts() == expected
        cur._check()


def _sealed_cursor(store: AckStore, ledgers: int, entries: int, budget: int):  # type: ignore[no-untyped-def]
    """Cursor ``c`` with a cache budget of ``budget`` bytes over ledgers 1..``ledgers``, each
    sealed with ``entries`` entries."""
    topic = store.topic(T)
    for ledger in range(1, ledgers + 1):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, entries)
    return topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=budget))


def test_counts_are_budgeted_and_swap_with_their_ledger(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _sealed_cursor(store, 20, 500, 4000)
        for ledger in range(1, 21):
            cur.ack_entries(ledger, range(1, 500, 3))
            cur.record_deliveries([P(ledger, e) for e in range(2, 60, 3)])
        stats = cur.stats()
        assert stats.ledgers_swapped_out > 0 and stats.cache_bytes <= 4000 + stats.largest_ledger_bytes
        expected = {P(lg, e): 1 for lg in range(1, 21) for e in range(2, 60, 3)}
        assert cur.delivery_counts() == expected
        cur._check()
    with AckStore.open(store_path, readonly=True) as store:
        cur = store.topic(T).cursor("c", CursorConfig(max_individual_ack_cache_bytes=4000))
        assert cur.delivery_counts() == expected


def test_a_store_without_counts_opens_with_none(store_path: Path) -> None:
    """Records written before counts existed (no ninth field) read as no counts."""
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        cur.ack([P(1, 3)])
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        assert cur.delivery_counts() == {} and cur.delivery_count(P(1, 0)) == 0


class _Consumer:
    """Fails on ``poison`` every time; acks everything else."""

    def __init__(self, cur, poison: Position) -> None:  # type: ignore[no-untyped-def]
        self.cur, self.poison = cur, poison
        self.dead: list[tuple[Position, int]] = []

    async def dead_letter(self, entry: Entry, count: int) -> None:
        self.dead.append((entry.position, count))


def test_a_poison_entry_is_dead_lettered_after_max_deliveries(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store, entries=10)
        cur = topic.cursor("c", CursorConfig(max_deliveries=3))
        poison = P(1, 4)
        consumer = _Consumer(cur, poison)
        clock = [0.0]
        d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=consumer.dead_letter, clock=lambda: clock[0])
        deliveries = 0
        for entry in asyncio.run(d.read_more(10)):
            if entry.position == poison:
                deliveries += 1
                d.redeliver([poison], delay=5.0)  # a negative ack with a delay
            else:
                cur.ack(entry.position)
        while not consumer.dead:
            assert asyncio.run(d.replay_read(10)) == []  # not due yet
            clock[0] += 5.0
            for entry in asyncio.run(d.replay_read(10)):
                assert entry.position == poison
                deliveries += 1
                d.redeliver([poison], delay=5.0)
        assert deliveries == 3 and consumer.dead == [(poison, 3)]
        assert cur.is_acked(poison) and cur.delivery_counts() == {} and d.stats()["dead_lettered"] == 1
        assert cur.mark_delete_position == P(2, -1)  # ledger 1 wholly acked: M moves to the next


def test_durable_counts_are_on_disk_before_the_entries_are_handed_out(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        topic = _topic(store, entries=10)
        cur = topic.cursor("c")
        d = Dispatcher(cur, InMemoryLedgerReader(topic), durable_counts=True)
        asyncio.run(d.read_more(3))
        testing.crash(store)  # nothing flushed by hand
    with AckStore.open(store_path) as store:
        assert _topic(store).cursor("c").delivery_counts() == {P(1, e): 1 for e in range(3)}


# -- kill -9 after every delivery -----------------------------------------------------------------

_CHILD = """
import asyncio, sys
from ackstore import AckStore, CursorConfig, Dispatcher, Position
from ackstore.testing import InMemoryLedgerReader
path, durable, flush = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
store = AckStore.open(path)
topic = store.topic("t")
cur = topic.cursor("c", CursorConfig(max_deliveries=4))
async def dead_letter(entry, count):
    print("dead", count, flush=True)
d = Dispatcher(cur, InMemoryLedgerReader(topic), dead_letter=dead_letter, durable_counts=durable)
got = asyncio.run(d.read_more(1))
if got:  # the consumer dies on it: the parent kills this process now
    if flush:  # a background flush ran before the kill
        store.flush()
    print("delivered", cur.delivery_count(got[0].position), flush=True)
else:
    store.flush()
    print("done", cur.is_acked(Position(1, 0)), flush=True)
sys.stdin.readline()
"""


def _one_round(path: Path, durable: bool, flush: bool) -> str:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), "1" if durable else "0", "1" if flush else "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith(("delivered", "done")):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return " / ".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("durable", [True, False])
def test_a_poison_entry_reaches_the_dead_letter_across_kill_9(tmp_path: Path, durable: bool) -> None:
    """The consumer process is killed after every delivery of the one entry; every other
    round a flush ran before the kill. With durable counts the entry reaches the dead letter
    after exactly max_deliveries (4) deliveries; without, after 4 + the deliveries no flush
    saved (a crash loses the counts since the last flush, never more)."""
    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.close_ledger(1, 1)
        topic.cursor("c", CursorConfig(max_deliveries=4))
    outputs, unsaved = [], 0
    for round_ in range(12):
        flush = round_ % 2 == 1
        out = _one_round(path, durable, flush)
        outputs.append(out)
        if "done" in out:
            break
        unsaved += out.startswith("delivered") and not flush
    delivered = [o for o in outputs if o.startswith("delivered")]
    assert outputs[-1].endswith("done True"), outputs
    assert any("dead 4" in o for o in outputs), outputs
    assert len(delivered) == 4 + (0 if durable else unsaved), outputs


def _counted_store(path: Path) -> dict[Position, int]:
    with AckStore.open(path) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        cur.ack_entries(1, range(0, 1000, 3))
        cur.record_deliveries([P(1, e) for e in range(1, 90, 3)] * 2 + [P(1, 2), P(2, 7)])
        store.flush()
        for e in range(300, 400, 3):
            cur.ack(P(1, e + 1))  # garbage for compaction to drop
            store.flush()
        return cur.delivery_counts()


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


@pytest.mark.slow
def test_the_tools_carry_counts_dump_restore_compact_salvage_check_stat(tmp_path: Path) -> None:
    from ackstore import check
    from ackstore.salvage import salvage

    path = tmp_path / "s"
    expected = _counted_store(path)
    assert len(expected) == 32 and max(expected.values()) == 2

    def counts_of(p: Path) -> dict[Position, int]:
        with AckStore.open(p, readonly=True) as store:
            return store.topic(T).cursor("c").delivery_counts()

    assert check(path) == []
    stat = _cli("stat", path)
    assert stat.returncode == 0 and "30 entries delivered more than once (most 2)" in stat.stdout, stat.stdout
    dumped = _cli("dump", path, "--output", tmp_path / "d.jsonl")
    assert dumped.returncode == 0, dumped.stderr
    assert (tmp_path / "d.jsonl").read_text().count('"type":"deliveries"') == 32
    restored = _cli("restore", tmp_path / "r", tmp_path / "d.jsonl")
    assert restored.returncode == 0, restored.stderr
    assert counts_of(tmp_path / "r") == expected
    with AckStore.open(path) as store:
        store.compact()
    assert counts_of(path) == expected and check(path) == []
    report = salvage(path, tmp_path / "v")
    (c,) = report.cursors
    assert c.complete and c.problems == () and c.doubts == () and report.damage == []
    assert counts_of(tmp_path / "v") == expected


def test_restore_delivery_counts_checks_everything_first(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        with pytest.raises(InvalidArgumentError, match="delivery count 0"):
            cur.restore_delivery_counts({P(1, 1): 3, P(1, 2): 0})
        assert cur.delivery_counts() == {}
        assert cur.restore_delivery_counts({P(1, 1): 3}) == 1 and cur.delivery_count(P(1, 1)) == 3


def test_a_record_counting_an_acked_entry_is_damage() -> None:
    from pyroaring import BitMap

    from ackstore import CorruptRecordError
    from ackstore.ledger_acks import LedgerAcks
    from ackstore.storage.records import decode_ledger_owned, encode_ledger

    la = LedgerAcks(BitMap([1, 2, 3]), None, {5: 2})
    assert decode_ledger_owned(encode_ledger(7, la, 1))[1].counts == {5: 2}
    la.counts[2] = 1  # a writer never leaves a count on an acked entry
    with pytest.raises(CorruptRecordError, match="acknowledged entry"):
        decode_ledger_owned(encode_ledger(7, la, 1))


def test_redeliveries_count_each_delivery_of_an_entry_delivered_before(store_path: Path) -> None:
    """``stats().redeliveries`` and the metric count deliveries of entries delivered before
    (a first delivery, or one of an acked entry, is not one), by ``record_deliveries`` and
    through a Dispatcher's replay; they live in memory (a reopen starts at 0)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ackstore import Dispatcher
    from ackstore.metrics import AckStoreCollector
    from ackstore.testing import InMemoryLedgerReader

    def scraped(store: AckStore) -> float:
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(store))
        (value,) = [
            sample.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for sample in family.samples
            if sample.name == "ackstore_cursor_redeliveries_total" and sample.labels["subscription"] == "c"
        ]
        return value

    with AckStore.open(store_path) as store:
        topic = _topic(store)
        cur = topic.cursor("c")
        assert cur.record_deliveries([P(1, 1), P(1, 2)]) == [1, 1] and cur.stats().redeliveries == 0
        assert cur.record_deliveries([P(1, 1)]) == [2] and cur.stats().redeliveries == 1
        assert cur.record_deliveries([P(1, 1), P(1, 1), P(1, 3)]) == [3, 4, 1] and cur.stats().redeliveries == 3
        cur.ack(P(1, 1))
        assert cur.record_deliveries([P(1, 1)]) == [0] and cur.stats().redeliveries == 3
        assert scraped(store) == 3.0
        d = Dispatcher(cur, InMemoryLedgerReader(topic))
        read = asyncio.run(d.read_more(5))  # 1:0, 1:2 (a second time), 1:3 (a second), 1:4, 1:5
        assert [e.position for e in read] == [P(1, 0), P(1, 2), P(1, 3), P(1, 4), P(1, 5)]
        assert cur.stats().redeliveries == 5
        d.redeliver([P(1, 4)])
        assert [e.position for e in asyncio.run(d.replay_read(5))] == [P(1, 4)]
        assert cur.stats().redeliveries == 6 and scraped(store) == 6.0
    with AckStore.open(store_path) as store:
        assert _topic(store).cursor("c").stats().redeliveries == 0


@pytest.mark.parametrize("form", [True, False], ids=["small form", "parts"])
def test_a_count_at_its_highest_delivered_again_stays_there_and_is_written_as_such(
    store_path: Path, form: bool
) -> None:
    """A count set by hand to 2**32-1 and delivered again stays 2**32-1, in the small form
    and in the parts alike, with or without a cache budget that swaps the ledger out: the
    flush writes it, and the store reopens to it (the parts once counted on to 2**32, which
    their flush wrote into a ledger record that every read after called damaged)."""
    top = (1 << 32) - 1
    for budget in (None, 1):
        config = CursorConfig(max_individual_ack_cache_bytes=budget) if budget else CursorConfig()
        path = store_path / f"b{budget}"
        with AckStore.open(path) as store:
            cur = _topic(store, entries=100).cursor("c", config)
            cur.ack([P(1, e) for e in range(1, 90, 2)])  # (holes: the ledger's record holds the counts)
            store.flush()
            if not form:
                end_form(cur)
            assert (cur._core.small is not None) == form
            assert cur.restore_delivery_counts({P(1, 2): top, P(1, 4): 7}) == 2
            assert cur.record_deliveries([P(1, 2), P(1, 4)]) == [top, 8]
            assert (cur._core.small is not None) == form  # (the form serves both calls)
            store.flush()
            cur.ack(P(2, 3))
            store.flush()
            assert cur.delivery_counts() == {P(1, 2): top, P(1, 4): 8}
        with AckStore.open(path) as store:
            cur = _topic(store).cursor("c", config)
            assert cur.delivery_counts() == {P(1, 2): top, P(1, 4): 8}
            assert cur.record_deliveries([P(1, 2)]) == [top]


def test_counts_at_their_bounds(store_path: Path) -> None:
    """A count is 1..2**32-1 (0 and 2**32 refused, nothing set); a position at or below the
    mark-delete position reads 0 whatever it was counted before; entry 0 of a ledger can be
    counted, reset to and redelivered like any other."""
    with AckStore.open(store_path) as store:
        cur = _topic(store, entries=10).cursor("c")
        assert cur.restore_delivery_counts({P(1, 5): 1, P(1, 6): (1 << 32) - 1}) == 2
        assert cur.delivery_counts() == {P(1, 5): 1, P(1, 6): (1 << 32) - 1}
        for n in (0, 1 << 32):
            with pytest.raises(InvalidArgumentError, match=r"allowed 1\.\.2\*\*32-1"):
                cur.restore_delivery_counts({P(1, 7): n})
            assert cur.delivery_count(P(1, 7)) == 0
        assert cur.record_deliveries([P(1, 0), P(1, 1)]) == [1, 1]
        cur.ack(P(1, 0))
        assert cur.mark_delete_position == P(1, 0)
        assert (cur.delivery_count(P(1, 0)), cur.delivery_count(P(1, 1))) == (0, 1)  # at M, above it
        cur.ack_cumulative(P(1, 5))
        assert [cur.delivery_count(P(1, e)) for e in (1, 5, 6)] == [0, 0, (1 << 32) - 1]  # below M, at M, above
        cur.read_path.reset_to(P(1, 0))  # entry 0: a real entry to reset to
        assert cur.read_position == P(1, 0) and cur.delivery_counts() == {}
        d = Dispatcher(cur, InMemoryLedgerReader(cur.topic))
        d.redeliver([P(1, 0)])
        assert d.replay == {P(1, 0)}


def test_a_count_the_mark_delete_passed_stays_gone_through_swap_out_and_in(store_path: Path) -> None:
    """M moves over a counted entry without a new base record (the marker says the count is
    gone): its ledger swapped out and in again must not bring the count back, in memory or
    in what ``delivery_counts`` shows from below M."""
    with AckStore.open(store_path) as store:
        cur = _sealed_cursor(store, 5, 1000, 3000)
        cur.record_deliveries([P(1, e) for e in range(0, 10)])
        cur.ack_entries(1, range(20, 1000, 2))
        store.flush()  # ledger 1's base record holds the counts of 0-9
        cur.ack([P(1, 0), P(1, 1)])  # M moves to 1:1; the counts of 0 and 1 go
        store.flush()
        assert cur.mark_delete_position == P(1, 1)
        for ledger in range(2, 6):  # ledger 1 swapped out by the others
            cur.ack_entries(ledger, range(1, 1000, 2))
        assert cur.stats().ledgers_swapped_out > 0
        expected = {P(1, e): 1 for e in range(2, 10)}
        assert cur.delivery_counts(P(1, 0)) == expected
        cur.ack(P(1, 501))  # swaps ledger 1 in
        assert cur.delivery_counts(P(1, 0)) == expected
        assert cur.delivery_count(P(1, 1)) == 0 and cur.delivery_count(P(1, 2)) == 1
        cur._check()


def test_delivery_counts_of_a_span_hold_its_start_and_not_its_end(store_path: Path) -> None:
    """``delivery_counts(start, end)`` is ``[start, end)``: an end inside a ledger keeps that
    ledger's counts below it, a count at the end is left out, and M bounds the start."""
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        cur.record_deliveries([P(1, 2), P(1, 5), P(1, 5), P(2, 1)])
        assert cur.delivery_counts(P(1, 0), P(1, 5)) == {P(1, 2): 1}
        assert cur.delivery_counts(P(1, 2), P(1, 6)) == {P(1, 2): 1, P(1, 5): 2}
        assert cur.delivery_counts(P(1, 3), P(2, 1)) == {P(1, 5): 2}
        assert cur.delivery_counts(P(1, 5), P(2, 2)) == {P(1, 5): 2, P(2, 1): 1}
        assert cur.delivery_counts(P(2, 0)) == {P(2, 1): 1}


def test_delivery_counts_of_any_span_are_the_whole_counts_filtered_to_it(store_path: Path) -> None:
    """Spans narrow and wide, within one ledger and across several, on a cursor holding a
    few hundred counts in four ledgers (its parts): each is every count in it, as the whole
    ``delivery_counts()`` filtered to ``[start, end)`` says (a Dispatcher asks a read's span)."""
    import random

    rng = random.Random(3)
    with AckStore.open(store_path) as store:
        topic = _topic(store)
        for ledger in (2, 3):
            topic.close_ledger(ledger, 1000)
            topic.add_ledger(ledger + 1)
        cur = topic.cursor("c")
        end_form(cur)  # (its parts: a new cursor starts in the small form)
        cur.record_deliveries([P(ledger, rng.randrange(400)) for ledger in (1, 2, 4) for _ in range(120)])
        cur.ack([P(2, e) for e in range(0, 400, 7)])
        every = cur.delivery_counts()
        assert len(every) > 250 and cur._core.small is None
        for _ in range(300):
            a = P(rng.choice((1, 2, 3, 4)), rng.randrange(420))
            b = P(rng.choice((a.ledger, a.ledger, 4, 5)), rng.randrange(420))
            start, end = min(a, b), max(a, b)
            assert cur.delivery_counts(start, end) == {p: n for p, n in every.items() if start <= p < end}, (start, end)
            assert cur.delivery_counts(start) == {p: n for p, n in every.items() if start <= p}, start


def test_delivery_counts_look_past_a_ledger_with_acks_and_no_counts(store_path: Path) -> None:
    with AckStore.open(store_path) as store:
        cur = _topic(store).cursor("c")
        cur.ack([P(1, 7)])
        cur.record_deliveries([P(2, 3)])
        assert cur.delivery_counts() == {P(2, 3): 1}
