"""Seeded ack-hole workloads, run through the real engine (no Spark needed here).

A :class:`WorkloadSpec` names a scenario and its sizes; :func:`run_spec` plays it against a
fresh store through the cursor API, flushing every ``flush_every`` acks and, with
``crash_probability``, "crashing" at flush points (the store is dropped unflushed and
reopened, so acks since the last flush are lost, as a killed process loses them). It
returns one row per cursor with the digest of what must be recovered, computed from its
own record of the acks (not from the engine), and exports the store as a single-file
snapshot.

Scenarios (PIP-299's ack-hole stories): ``missed_acks`` (a fraction never acked),
``mixed_delays`` (short delays acked soon, long ones held back), ``many_consumers`` (several
consumers each leaving scattered holes), ``negative_acks`` (nacked messages acked on
redelivery, later), ``sequential`` (in-order bursts, the baseline), ``poison_messages``
(every entry is delivered before it is acked; a share fails its consumer on every
delivery: delivered 2-5 times and never acked, the delivery counts the audit checks),
``bad_deploy`` (the cursors keep history; a healthy consumer leaves holes through the first
60 % of the entries, then a bad release, after a known time, acks everything after them
and half the holes it should have left: the rows carry that time and the generator's own
record of the flushed acks at it, which the audit restores each cursor to and compares).
"""

from __future__ import annotations

import hashlib
import itertools
import random
import shutil
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ackstore import AckStore, CursorConfig, Position, testing
from ackstore.config import MAX_HISTORY_SECONDS

__all__ = [
    "SCENARIOS",
    "WorkloadSpec",
    "WorkloadError",
    "run_spec",
    "digest_of_runs",
    "engine_digest",
    "state_digest",
]

SCENARIOS = (
    "missed_acks",
    "mixed_delays",
    "many_consumers",
    "negative_acks",
    "sequential",
    "poison_messages",
    "bad_deploy",
)

DEPLOY_AT = 0.6
"""``bad_deploy``: the share of the positions the healthy release consumes"""


UNSUBSCRIBED = "unsubscribed"
"""every generated topic also gets a cursor of this name, acked, flushed and then deleted (an
unsubscribe): no audited snapshot may hold it"""


class WorkloadError(ValueError):
    """A spec with impossible parameters: names the field and what is allowed."""


@dataclass(frozen=True)
class WorkloadSpec:
    spec_id: str
    scenario: str
    seed: int = 1
    topics: int = 1
    ledgers: int = 3
    entries: int = 1000
    cursors: int = 1
    hole_rate: float = 0.05
    flush_every: int = 500
    crash_probability: float = 0.0

    def validate(self) -> WorkloadSpec:
        def bad(field: str, allowed: str) -> WorkloadError:
            return WorkloadError(f"spec {self.spec_id!r}: {field}={getattr(self, field)!r} is not allowed: {allowed}")

        if not self.spec_id or "/" in self.spec_id:
            raise bad("spec_id", "a non-empty name without '/'")
        if self.scenario not in SCENARIOS:
            raise bad("scenario", f"one of {', '.join(SCENARIOS)}")
        for name, low, high in (
            ("topics", 1, 100),
            ("ledgers", 1, 10_000),
            ("entries", 1, 10_000_000),
            ("cursors", 1, 1000),
            ("flush_every", 1, 10**9),
        ):
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= high:
                raise bad(name, f"an int in {low}..{high}")
        for name in ("hole_rate", "crash_probability"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise bad(name, "a number in 0..1")
        return self

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> WorkloadSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in known}).validate()

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def digest_of_counts(counts: dict[tuple[int, int], int]) -> str:
    """A stable digest of delivery counts ``{(ledger, entry): count}``."""
    return hashlib.sha256(b"".join([b"%d:%d=%d;" % (*p, n) for p, n in sorted(counts.items())])).hexdigest()[:32]


def digest_of_runs(runs: list[tuple[int, int, int]]) -> str:
    """A stable digest of acked entries given as ``(ledger, first, last)`` runs."""
    return hashlib.sha256(b"".join([b"%d:%d-%d;" % run for run in runs])).hexdigest()[:32]


def _runs_from_set(acked: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
    runs: list[tuple[int, int, int]] = []
    for ledger, entry in sorted(acked):
        if runs and runs[-1][0] == ledger and runs[-1][2] == entry - 1:
            runs[-1] = (ledger, runs[-1][1], entry)
        else:
            runs.append((ledger, entry, entry))
    return runs


def engine_digest(cursor: Any, ledger_ranges: list[tuple[int, list[tuple[int, int]]]] | None = None) -> tuple[str, int]:
    """The digest of everything a cursor counts as acked (below and above its mark-delete).

    ``ledger_ranges`` is ``list(cursor.ledger_ranges())`` when the caller already has it."""
    ranges = list(cursor.ledger_ranges()) if ledger_ranges is None else ledger_ranges
    return state_digest(cursor.mark_delete_position, cursor.topic.ledgers(), ranges)


def state_digest(
    md: Position, directory: list[tuple[int, int | None]], ledger_ranges: list[tuple[int, list[tuple[int, int]]]]
) -> tuple[str, int]:
    """The digest of a state (a mark-delete position and the ranges above it, as a cursor or
    a ``CursorSnapshot`` holds them) over a topic's ledger directory, and the entries it acks.
    Ranges above the mark-delete position never touch it (M + 1 is unacked by definition)
    and each ledger's ranges are maximal, so the runs need no merging."""
    runs: list[tuple[int, int, int]] = []
    for ledger, count in directory:
        if ledger < md.ledger and count:
            runs.append((ledger, 0, count - 1))
        elif ledger == md.ledger and md.entry >= 0:
            runs.append((ledger, 0, md.entry))
    for ledger, ranges in ledger_ranges:
        runs.extend([(ledger, first, last) for first, last in ranges])
    return digest_of_runs(runs), sum(last - first + 1 for _, first, last in runs)


def _positions(spec: WorkloadSpec) -> list[tuple[int, int]]:
    """Every position of the spec's sealed ledgers, ascending."""
    return [(ledger, e) for ledger in range(1, spec.ledgers + 1) for e in range(spec.entries)]


def _ack_order(spec: WorkloadSpec, rng: random.Random, consumer: int) -> tuple[list[tuple[int, int]], int]:
    """The positions one cursor acks, in order, for the spec's scenario, and where in that
    order a bad release starts acking (``bad_deploy``; -1 for the others)."""
    if spec.scenario == "bad_deploy":
        good, bad = _deploy_orders(_positions(spec), rng, spec.hole_rate)
        return good + bad, len(good)
    return _scenario_order(spec, rng, consumer), -1


def _chunks(order: list[tuple[int, int]], size: int, cut: int) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """``(start, chunk)``: ``order`` in chunks of ``size``, none across ``cut`` (-1: none)."""
    bounds = [0, cut, len(order)] if 0 < cut < len(order) else [0, len(order)]
    for lo, hi in itertools.pairwise(bounds):
        for start in range(lo, hi, size):
            yield start, order[start : min(start + size, hi)]


def _scenario_order(spec: WorkloadSpec, rng: random.Random, consumer: int) -> list[tuple[int, int]]:
    positions = _positions(spec)
    hole = spec.hole_rate
    if spec.scenario == "sequential":
        return positions
    if spec.scenario == "poison_messages":  # the poison ones are delivered, never acked
        return [p for p in positions if rng.random() >= hole]
    if spec.scenario == "missed_acks":
        return [p for p in positions if rng.random() >= hole]
    if spec.scenario == "mixed_delays":
        short = [p for p in positions if rng.random() >= hole]
        held = set(positions) - set(short)
        late = [p for p in sorted(held) if rng.random() < 0.5]  # half the long delays end in the run
        return short + late
    if spec.scenario == "many_consumers":  # this cursor's consumers each miss a scattered share
        return [p for i, p in enumerate(positions) if (i + consumer) % 7 or rng.random() >= hole * 7]
    # negative_acks: nacked ones are acked later, after a redelivery delay
    first: list[tuple[int, int]] = []
    nacked: list[tuple[int, int]] = []
    for p in positions:
        (nacked if rng.random() < hole else first).append(p)
    return first + nacked[: len(nacked) * 3 // 4]


def _deploy_orders(
    positions: list[tuple[int, int]], rng: random.Random, hole: float
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``bad_deploy``: what the healthy release acks (the first ``DEPLOY_AT`` of the
    positions, with holes), then what the bad one acks (half those holes, and the rest)."""
    cut = int(len(positions) * DEPLOY_AT)
    good = [p for p in positions[:cut] if rng.random() >= hole]
    kept = set(good)
    holes = [p for p in positions[:cut] if p not in kept]
    return good, holes[::2] + positions[cut:]


def _deliver(
    cur: Any,
    chunk: list[tuple[int, int]],
    positions: list[tuple[int, int]],
    rng: random.Random,
    counts: dict[tuple[int, int], int],
) -> None:
    """Poison messages: the chunk's entries (ascending) are delivered once before they are
    acked; the poison ones between them (never acked) 2-5 times each. ``counts`` is this
    generator's own record of what the store must hold (not read from the engine)."""
    if not chunk:
        return
    acked = set(chunk)
    span = positions[bisect_left(positions, chunk[0]) : bisect_right(positions, chunk[-1])]
    poison = [p for p in span if p not in acked]
    deliveries = list(chunk) + [p for p in poison for _ in range(rng.randint(2, 5))]
    cur.record_deliveries([Position(*p) for p in deliveries])
    for p in deliveries:
        counts[p] = counts.get(p, 0) + 1


def run_spec(spec: WorkloadSpec, workdir: Path, snapshot_dir: Path) -> list[dict[str, Any]]:
    """Play ``spec`` in ``workdir``, export ``snapshot_dir/<spec_id>.mdb``, return one row per cursor."""
    spec.validate()
    rng = random.Random(spec.seed)
    path = workdir / spec.spec_id
    if path.exists():
        shutil.rmtree(path)
    started = time.perf_counter()
    history = MAX_HISTORY_SECONDS if spec.scenario == "bad_deploy" else 0  # audited whenever the audit runs
    config = CursorConfig(max_unacked_ranges_to_persist=0, history_seconds=history)
    store = AckStore.open(path, sync=False)
    names = [
        (f"persistent://gen/{spec.spec_id}/t{t}", f"sub-{c}") for t in range(spec.topics) for c in range(spec.cursors)
    ]
    for t in range(spec.topics):
        topic = store.topic(f"persistent://gen/{spec.spec_id}/t{t}")
        for ledger in range(1, spec.ledgers + 1):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, spec.entries)
    flushed: dict[tuple[str, str], set[tuple[int, int]]] = {key: set() for key in names}
    pending: dict[tuple[str, str], set[tuple[int, int]]] = {key: set() for key in names}
    #: delivery counts: what the store holds now, and what the last flush saved
    counts: dict[tuple[str, str], dict[tuple[int, int], int]] = {key: {} for key in names}
    saved: dict[tuple[str, str], dict[tuple[int, int], int]] = {key: {} for key in names}
    crashes = flushes = 0
    every = _positions(spec) if spec.scenario == "poison_messages" else []  # what may be delivered
    #: bad_deploy: per cursor, the time of the deploy and the flushed acks at it
    deployed: dict[tuple[str, str], tuple[float, str]] = {}
    for i, key in enumerate(names):
        order, deploy = _ack_order(spec, rng, i)
        for start, chunk in _chunks(order, spec.flush_every, deploy):
            if start == deploy:  # the healthy release's acks are flushed: the bad one starts now
                store.flush()
                flushes += 1
                for k in names:
                    flushed[k] |= pending[k]
                    pending[k] = set()
                saved = {k: dict(v) for k, v in counts.items()}
                at = time.time()
                deployed[key] = (at, digest_of_runs(_runs_from_set(flushed[key])))
                while time.time() <= at:  # every later flush is after the known time
                    time.sleep(0.001)
            cur = store.topic(key[0]).cursor(key[1], config)
            if spec.scenario == "poison_messages":
                _deliver(cur, chunk, every, rng, counts[key])
            cur.ack([Position(*p) for p in chunk])
            pending[key].update(chunk)
            for p in chunk:
                counts[key].pop(p, None)
            if spec.crash_probability and rng.random() < spec.crash_probability:
                testing.crash(store)  # a crash: everything since the last flush is gone
                crashes += 1
                pending = {k: set() for k in names}
                counts = {k: dict(v) for k, v in saved.items()}
                store = AckStore.open(path, sync=False)
            else:
                store.flush()
                flushes += 1
                saved = {k: dict(v) for k, v in counts.items()}
                for k in names:
                    flushed[k] |= pending[k]
                    pending[k] = set()
    for t in range(spec.topics):  # a subscription that came and went: the audit must not find it
        topic = store.topic(f"persistent://gen/{spec.spec_id}/t{t}")
        gone = topic.cursor(UNSUBSCRIBED, config)
        gone.ack([Position(1, e) for e in range(0, min(spec.entries, 200), 2)])
        store.flush()
        topic.delete_cursor(UNSUBSCRIBED)
    store.close()
    for k in names:
        flushed[k] |= pending[k]  # close() flushed them
    saved = counts
    snapshot_dir.mkdir(parents=True, exist_ok=True)
    snapshot = snapshot_dir / f"{spec.spec_id}.mdb"
    snapshot.unlink(missing_ok=True)
    with AckStore.open(path, readonly=True) as ro:
        size = ro.copy(snapshot)
    seconds = time.perf_counter() - started
    shutil.rmtree(path, ignore_errors=True)
    rows = []
    for topic_name, cursor_name in names:
        acked = flushed[(topic_name, cursor_name)]
        runs = _runs_from_set(acked)
        rows.append(
            {
                "spec_id": spec.spec_id,
                "scenario": spec.scenario,
                "topic": topic_name,
                "cursor": cursor_name,
                "expected_digest": digest_of_runs(runs),
                "expected_counts_digest": digest_of_counts(saved[(topic_name, cursor_name)]),
                "counted": len(saved[(topic_name, cursor_name)]),
                "acked": len(acked),
                "holes": spec.ledgers * spec.entries - len(acked),
                "runs": len(runs),
                "flushes": flushes,
                "crashes": crashes,
                "seconds": seconds,
                "snapshot": str(snapshot),
                "snapshot_bytes": size,
                # bad_deploy: the deploy's time and the generator's record of the flushed acks then
                "restore_time": deployed.get((topic_name, cursor_name), (-1.0, ""))[0],
                "expected_restore_digest": deployed.get((topic_name, cursor_name), (-1.0, ""))[1],
            }
        )
    return rows
