"""A deterministic ack workload shared by the crash child process and the test that checks it.

Round ``r`` of seed ``s`` is always the same list of operations, whatever the state,
and every operation is valid on the fixed ledger directory, so the parent can replay
the rounds on the model and know exactly what the child persisted.
"""

from __future__ import annotations

import random
import sys
from typing import Any

TOPIC = "persistent://t/ns/crash"
CURSOR = "c"
LEDGERS = [(1, 3000), (2, 3000), (3, 3000), (4, 3000), (5, None)]  # the last one stays open
OPEN_TOP = 3999
BATCH = 8

Op = tuple[str, Any]


def round_ops(seed: int, rnd: int) -> list[Op]:
    rng = random.Random(seed * 1_000_003 + rnd)
    ops: list[Op] = []
    for _ in range(rng.randint(1, 5)):
        x = rng.random()
        ledger, count = rng.choice(LEDGERS)
        top = (count or OPEN_TOP + 1) - 1
        if x < 0.7:
            start = rng.randint(0, top)
            n = rng.randint(1, 200)
            if rng.random() < 0.5:  # a run with holes
                ops.append(("ack", [(ledger, e) for e in range(start, min(start + n, top + 1)) if rng.random() < 0.8]))
            else:
                ops.append(("ack", [(ledger, rng.randint(0, top)) for _ in range(n)]))
        elif x < 0.75:
            ops.append(("cum", (1 if rng.random() < 0.7 else ledger, rng.randint(-1, 300))))
        else:
            entry = rng.randint(0, top)
            ops.append(("batch", ((ledger, entry), rng.sample(range(BATCH), rng.randint(1, 4)))))
    return ops


def apply_engine(cursor: Any, ops: list[Op]) -> None:
    for kind, arg in ops:
        if kind == "ack":
            if arg:
                cursor.ack(arg)
        elif kind == "cum":
            cursor.ack_cumulative(arg)
        else:
            cursor.ack_batch_index(arg[0], BATCH, arg[1])


def apply_model(topic: Any, cursor: Any, ops: list[Op]) -> None:
    for kind, arg in ops:
        if kind == "ack":
            topic.ack(cursor, arg)
        elif kind == "cum":
            topic.ack_cumulative(cursor, arg)
        else:
            topic.ack_batch(cursor, arg[0], BATCH, arg[1])


def main() -> None:
    """Child: ``crash_workload.py STORE SEED FIRST_ROUND``; acks and flushes until killed."""
    from ackstore import AckStore

    path, seed, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = AckStore.open(path, sync=True)
    cursor = store.topic(TOPIC).cursor(CURSOR)
    print("ready", flush=True)
    rnd = first
    while True:
        apply_engine(cursor, round_ops(seed, rnd))
        store.flush()
        print(f"flushed {rnd}", flush=True)
        rnd += 1


if __name__ == "__main__":
    main()
