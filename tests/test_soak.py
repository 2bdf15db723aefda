"""A soak: 2,000 cursors acking (with holes, the mark-delete following behind) and flushing
for a fixed number of rounds; memory, file size and garbage stay bounded. Short in
``make test``, long (``--long``) under ``make stress``."""

from __future__ import annotations

import random
import resource
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

CURSORS = 2_000


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() // 1024


@pytest.mark.stress
def test_two_thousand_cursors_stay_bounded(tmp_path: Path, long_run: bool) -> None:
    rounds = 240 if long_run else 42
    rng = random.Random(20261123)
    samples = []
    with AckStore.open(tmp_path / "soak", sync=False, map_size=1 << 26) as store:
        topic = store.topic("persistent://t/ns/soak")
        topic.add_ledger(1)
        cfg = CursorConfig(full_marker_every=8, max_individual_ack_cache_bytes=64 << 10)
        cursors = [topic.cursor(f"sub-{i}", cfg) for i in range(CURSORS)]
        for r in range(rounds):
            base = r * 40
            for cur in cursors:
                cur.ack([Position(1, base + e) for e in range(40) if rng.random() < 0.9])  # ~10% holes
                if r >= 3:
                    cur.ack_cumulative(Position(1, base - 80))  # holes older than two rounds get acked
            store.flush()
            if r % 6 == 5:
                garbage = sum(c.log_usage().garbage_bytes for c in cursors[:200])
                live = sum(c.log_usage().live_bytes for c in cursors[:200])
                size = (tmp_path / "soak" / "data.mdb").stat().st_size
                samples.append((r, _rss_kib(), size, garbage, live))
    last = samples[-1]
    # after a few full-marker generations (trimming keeps one back) the file stops growing:
    # compare the last third of the run with its start
    settled = samples[(2 * len(samples)) // 3]
    print("\nround, RSS KiB, file bytes, garbage bytes (200 cursors), live bytes (200 cursors)")
    print("\n".join(str(s) for s in samples))
    assert last[1] <= settled[1] * 1.1 + 4_000, "RSS keeps growing"
    assert last[2] <= settled[2] * 1.1, "the file keeps growing"
    assert last[2] <= CURSORS * 16 * 1024, "more than 16 KiB of file per cursor"
    assert all(s[3] <= 16 * s[4] + 200 * 4096 for s in samples), "garbage is not trimmed"
