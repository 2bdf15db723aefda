"""A flush after one ledger changed, against rewriting the whole ack state.

The cursor holds 1,000 sealed ledgers of 1,000 entries with every third entry acked
(~333,000 ranges). Each round acks one more entry of one ledger, then:

- ackstore: ``store.flush()`` writes that ledger's record and a delta marker;
- baseline: the whole state is serialized as one value (every range as
  ``(ledger, first, last)``, msgpack) and put into LMDB in one transaction: how a
  cursor that persists its individually-deleted ranges as one blob has to flush.

Both write to LMDB with ``sync=False`` in the same process; ``bytes`` is what one flush
puts (keys + values).
"""

from __future__ import annotations

import random
from pathlib import Path

import lmdb
import msgpack
import pytest

from ackstore import AckStore, Position

from .conftest import bench_flushes
from .states import sealed_cursor

LEDGERS, ENTRIES = 1000, 1000
GROUP = "flush: 1 ledger of 1,000 changed"


@pytest.fixture
def loaded(store: AckStore):  # type: ignore[no-untyped-def]
    cur = sealed_cursor(store, LEDGERS, ENTRIES, lambda ledger: range(1, ENTRIES, 3))
    store.flush()
    rng = random.Random(7)
    pending = iter(rng.sample([Position(ld, e) for ld in range(1, LEDGERS + 1) for e in range(2, ENTRIES, 3)], 500))
    return store, cur, lambda: cur.ack(next(pending))


def test_flush_rewrite_everything_baseline(benchmark, loaded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, cur, ack_one_more = loaded
    env = lmdb.open(str(tmp_path / "blob"), map_size=1 << 30, sync=False)
    written: list[int] = []

    def run() -> None:
        blob = msgpack.packb([(ledger, f, t) for ledger, ranges in cur.ledger_ranges() for f, t in ranges])
        with env.begin(write=True) as txn:
            txn.put(b"cursor/c", blob)
        written.append(len(blob) + len(b"cursor/c"))

    benchmark.group = GROUP
    benchmark.pedantic(run, setup=ack_one_more, rounds=15)
    benchmark.extra_info.update(baseline=True, bytes=written[-1])
    env.close()


def test_flush_ackstore(benchmark, loaded) -> None:  # type: ignore[no-untyped-def]
    store, _, ack_one_more = loaded
    assert bench_flushes(benchmark, store, GROUP, ack_one_more, rounds=15) < 1000  # one record, one delta marker
