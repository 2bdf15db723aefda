"""A deterministic ack workload shared by the crash child process and the test that checks it.

Round ``r`` of seed ``s`` is always the same list of operations, whatever the state,
and every operation is valid on the fixed ledger directory, so the parent can replay
the rounds on the model and know exactly what the child persisted.
"""

from __future__ import annotations

import random
import sys
import time
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


#: entries a steady round consumes
STEADY_K = 15


def log_position(i: int) -> tuple[int, int]:
    """The ``i``-th entry of the log, in order across its ledgers (wrapping around)."""
    sizes = [count or OPEN_TOP + 1 for _, count in LEDGERS]
    i %= sum(sizes)
    for (ledger, _), size in zip(LEDGERS, sizes, strict=True):
        if i < size:
            return ledger, i
        i -= size
    raise AssertionError("unreachable")


def _held(seed: int, rnd: int) -> dict[int, int]:
    """The entries (log indexes) steady round ``rnd`` holds back, and the round each is made."""
    rng = random.Random(seed * 7_919 + rnd)
    start = rnd * STEADY_K
    return {i: rnd + rng.randint(1, 3) for i in rng.sample(range(start, start + STEADY_K), rng.choice((1, 1, 2)))}


STEADY_FROM = sum(count for _, count in LEDGERS if count is not None)
"""where the steady workload starts in the log: the open ledger's first entry (a broker's
subscription consumes the ledger being written)"""


def steady_ops(seed: int, rnd: int) -> list[Op]:
    """A broker's round on the open ledger: the next ``STEADY_K`` entries in order as one
    BitMap, less one or two held back, and the ones held back in the three rounds before
    that are due now, one position at a time (the small form takes both); the mark-delete
    position moves every round, a few holes stay open. Round 0 first acks the sealed
    ledgers whole (a subscription caught up). The same whatever the state, like
    :func:`round_ops`."""
    held = _held(seed, rnd)
    batch = [log_position(STEADY_FROM + i) for i in range(rnd * STEADY_K, (rnd + 1) * STEADY_K) if i not in held]
    due = [i for r in range(max(0, rnd - 3), rnd) for i, when in _held(seed, r).items() if when == rnd]
    late = [log_position(STEADY_FROM + i) for i in due]
    ops: list[Op] = [("cum", (LEDGERS[-2][0], LEDGERS[-2][1] - 1))] if rnd == 0 else []  # type: ignore[operator]
    for ledger in sorted({lg for lg, _ in batch}):
        ops.append(("entries", (ledger, [e for lg, e in batch if lg == ledger])))
    return [*ops, ("each", late)]


def holey_ops(seed: int, rnd: int) -> list[Op]:
    """A cursor of many holes (a third of the open ledger's entries, more ranges than a state
    slot takes) acking one or two of them a round, in the open ledger M stands in: round 0
    acks the sealed ledgers whole and every third entry of the open one; the same whatever
    the state, like :func:`round_ops`."""
    last, count = LEDGERS[-2]
    open_ledger = LEDGERS[-1][0]
    if rnd == 0:
        return [("cum", (last, count - 1)), ("entries", (open_ledger, list(range(1, OPEN_TOP + 1, 3))))]
    rng = random.Random(seed * 104_729 + rnd)
    return [("each", [(open_ledger, 3 * rng.randrange(OPEN_TOP // 3) + 2) for _ in range(rng.randint(1, 2))])]


WORKLOADS = {
    "random": round_ops,
    "steady": steady_ops,
    "history": round_ops,
    "steady-history": steady_ops,
    "holey-chain": holey_ops,
}
"""``history``: the random workload on a cursor that keeps an hour of history (its kept
states are checked too); ``steady-history``: the steady one on such a cursor (its states
flushed from the small form, under log keys); ``holey-chain``: a cursor of many holes whose
small form keeps a chain of its own (``set_form_chains``): markers naming its record, new
records as the acks since outgrow them"""


def run_and_kill(argv: list[str], pause: float) -> str:
    """Run ``python argv...`` (the project on its path) until it prints ``ready``, let it run
    ``pause`` seconds more, kill it with SIGKILL; what it printed."""
    import os
    import signal
    import subprocess
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    child = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(pause)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL
    return out


def apply_engine(cursor: Any, ops: list[Op]) -> None:
    from pyroaring import BitMap

    from ackstore import Position

    for kind, arg in ops:
        if kind == "ack":
            if arg:
                cursor.ack(arg)
        elif kind == "entries":
            cursor.ack_entries(arg[0], BitMap(arg[1]))
        elif kind == "each":
            for position in arg:
                cursor.ack(Position(*position))
        elif kind == "cum":
            cursor.ack_cumulative(arg)
        else:
            cursor.ack_batch_index(arg[0], BATCH, arg[1])


def apply_model(topic: Any, cursor: Any, ops: list[Op]) -> None:
    for kind, arg in ops:
        if kind in ("ack", "each"):
            topic.ack(cursor, arg)
        elif kind == "entries":
            topic.ack(cursor, [(arg[0], e) for e in arg[1]])
        elif kind == "cum":
            topic.ack_cumulative(cursor, arg)
        else:
            topic.ack_batch(cursor, arg[0], BATCH, arg[1])


def main() -> None:
    """Child: ``crash_workload.py STORE SEED FIRST_ROUND [WORKLOAD]``; acks and flushes until killed."""
    from ackstore import AckStore

    path, seed, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ops = WORKLOADS[sys.argv[4] if len(sys.argv) > 4 else "random"]
    if len(sys.argv) > 4 and sys.argv[4].endswith("chain"):
        from ackstore.cursor.small import set_form_chains

        set_form_chains(True)
    store = AckStore.open(path, sync=True)
    cursor = store.topic(TOPIC).cursor(CURSOR)
    print("ready", flush=True)
    rnd = first
    pause = 0.002 if len(sys.argv) > 4 and sys.argv[4].endswith("history") else 0.0
    while True:
        apply_engine(cursor, ops(seed, rnd))
        store.flush()
        print(f"flushed {rnd}{' small' if cursor._core.small is not None else ''}", flush=True)
        rnd += 1
        if pause:  # fewer rounds a kill: the parent checks every state the history keeps against its model
            time.sleep(pause)


if __name__ == "__main__":
    main()
