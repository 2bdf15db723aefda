"""A small dispatcher over a cursor: sequential and replay reads, position resets through
the PIP-269 revision controller, consumer epochs (PIP-194) and the PIP-299 pause.

Reads are asyncio coroutines. Sequential reads start at the cursor's read position and
move it when they complete; replay reads re-read positions below it from the replay
queue (negative acks, redeliveries) and touch no cursor position. Every position reset
(``reset``, ``seek``, ``skip``, ``clear_backlog``, ``rewind``) runs as one revision: new
reads are refused while it runs, a second reset fails fast, and a read that started
under an older revision is discarded when it completes, both before its read-position
move and, if that already happened, before delivery. The dispatcher's own state (replay
queue, recently-joined consumers, delayed-delivery tracker) changes inside the same
revision. No compensation and no "rewind after in-flight read" are needed. The shared
read path lives in :class:`~ackstore.dispatch.read_loop.CursorReadLoop`.

Delayed delivery: with ``deliver_at`` set, an entry read before its delivery time is held
in the tracker (``delayed``) instead of delivered; a replay read releases held entries
whose time has come. A position reset clears the tracker (the entries are read again).

Delivery counts: every entry handed out (sequential read, replay, redelivery) counts one
more delivery in the cursor (``cursor.delivery_count``), persisted with the acks. With
``CursorConfig.max_deliveries`` set, an entry delivered that many times is not delivered
again: it is *due* for the dead letter from the release that reaches the limit
(``redeliver``), from a read that finds it there, or, after a restart, from the
dispatcher's construction. The ``dead_letter`` coroutine receives each due entry with its
count and, once it returns, the entry is acked: at once in a task when an event loop is
running, else at the start of the next read (or ``await dispatcher.dead_letter_due()``).
A dead letter that raises leaves the entry due (``stats()["dead_letter_due"]``, the
error in ``last_dead_letter_error``); the next read tries it again. A crash between the
dead letter and the ack calls ``dead_letter`` again after the restart (at-least-once to
the dead letter). ``durable_counts=True`` flushes each read's counts
before the entries are handed out, so a crash never loses a delivery; without it a crash
loses the counts since the last flush.

PIP-299: with pausing on, sequential reads are refused while the cursor is blocked on
ack-state persistence; replay reads go on (they are what unblocks it). A single-consumer
(exclusive / failover) dispatcher never pauses: its one consumer acks in order, and
pausing it would stop the acks that bring the range count back.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..cursor.validate import pair as pair_of
from ..errors import InvalidArgumentError, InvalidPositionError, InvalidTypeError
from ..position import MAX_ENTRY, Position, trusted
from .read_loop import CursorPositions, CursorReadLoop, RevisionInProgressError
from .reads import Entry, LedgerReader
from .revision import CursorStateRevisionController

if TYPE_CHECKING:
    from ..history import HistoryPoint

log = logging.getLogger("ackstore")

__all__ = ["RECEIVED_KEPT", "Consumer", "Dispatcher", "RevisionInProgressError"]


RECEIVED_KEPT = 100
"""the newest positions a :class:`Consumer` keeps in ``received``: at least this many and
at most twice as many (older ones are let go), so a dispatcher that runs for days holds a
bounded number of them"""


@dataclass
class Consumer:
    """An in-process consumer: keeps the newest positions it received, drops messages of an
    older epoch."""

    name: str
    """the consumer's name, unique within its dispatcher"""
    epoch: int = 0
    """the newest consumer epoch (PIP-194) it has seen; a message of an older one is dropped"""
    received: list[Position] = field(default_factory=list)
    """positions received, in order: the newest :data:`RECEIVED_KEPT` at least (up to twice
    that many; older ones are let go)"""
    dropped: int = 0
    """messages dropped because they carried an older epoch"""
    received_count: int = 0
    """every position received since the consumer was added, those let go included"""

    def receive(self, entry: Entry, epoch: int) -> None:
        """Take one entry sent with ``epoch``: kept, or dropped when the epoch is older."""
        self.receive_all([entry], epoch)

    def receive_all(self, entries: list[Entry], epoch: int) -> None:
        """Take ``entries``, in order, sent with ``epoch``: kept, or all dropped when the
        epoch is older. O(entries), amortized."""
        if epoch < self.epoch:
            self.dropped += len(entries)
            return
        received = self.received
        received.extend([e.position for e in entries])
        self.received_count += len(entries)
        if len(received) > 2 * RECEIVED_KEPT:
            del received[:-RECEIVED_KEPT]


class Dispatcher(CursorReadLoop):
    """Dispatches a cursor's entries to consumers, round robin."""

    def __init__(
        self,
        cursor: CursorPositions,
        reader: LedgerReader,
        controller: CursorStateRevisionController | None = None,
        single_consumer: bool = False,
        epochs: bool = True,
        deliver_at: Callable[[Position], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        dead_letter: Callable[[Entry, int], Awaitable[object]] | None = None,
        durable_counts: bool = False,
    ) -> None:
        super().__init__(cursor, reader, controller)
        if cursor.config.max_deliveries and dead_letter is None:
            raise InvalidArgumentError(
                f"cursor {cursor.name!r} has max_deliveries={cursor.config.max_deliveries}: "
                "the Dispatcher needs a dead_letter coroutine to hand such entries to"
            )
        if dead_letter is not None and not _is_coroutine_function(dead_letter):
            raise InvalidTypeError(
                f"dead_letter must be a coroutine function, async def (entry, count), got {dead_letter!r}"
            )
        if type(durable_counts) is not bool:
            raise InvalidTypeError(f"durable_counts must be a bool, got {durable_counts!r}")
        self.dead_letter = dead_letter
        """the coroutine an entry past ``max_deliveries`` is handed to (then acked)"""
        self.durable_counts = durable_counts
        """count a delivery in the store (persisted with the acks at the next flush), not in memory only"""
        self.dead_lettered = 0
        """entries the dead letter took (and that were then acked)"""
        self.dead: dict[Position, Entry | None] = {}
        """entries due for the dead letter, in the order they became due (the Entry once read)"""
        self.dead_letter_failures = 0
        """calls of the dead letter that raised (their entries stay due)"""
        self.last_dead_letter_error: BaseException | None = None
        """what the last failing call raised"""
        self._draining = False
        self._drain_task: asyncio.Task[int] | None = None
        self.single_consumer = single_consumer
        """every entry goes to the first consumer (Failover-like); else round robin"""
        self.epochs = epochs
        """PIP-194 consumer epochs on (False only to show, in tests, what epochs prevent)"""
        self.deliver_at = deliver_at
        """the time an entry may be delivered (delayed delivery), on ``clock``; None: at once"""
        self.clock = clock
        """the clock ``deliver_at`` times are on"""
        self.epoch = 0
        """the current consumer epoch: a position reset or restore moves every consumer to a new one"""
        self.consumers: dict[str, Consumer] = {}
        """the consumers by name"""
        self.replay: set[Position] = set()
        """entries released for redelivery (negative acks), delivered before new reads"""
        self.recently_joined: dict[str, Position] = {}
        """a consumer that joined a shared dispatcher: the read position it may not get entries past yet"""
        self.delayed: dict[Position, float] = {}
        """the delayed-delivery tracker: entries read and held back until their time"""
        self._joined_during_revision: set[str] = set()
        self.paused = self.pause_checks = 0
        self._blocked = False
        self._turn = 0
        limit = cursor.config.max_deliveries
        if limit:  # a restart left these at the limit: due now, not after the next read finds them
            self.dead.update((p, None) for p, n in cursor.delivery_counts().items() if n >= limit)

    # -- consumers ------------------------------------------------------------------------
    def add_consumer(self, name: str) -> Consumer:
        """A new consumer, at the current epoch; on a shared dispatcher it gets no entry past
        the read position it joined at until the entries before are acked."""
        consumer = self.consumers[name] = Consumer(name, self.epoch)
        if len(self.consumers) > 1:  # Key_Shared style: it may not get entries past this point yet
            if self.controller.revision_running:
                self._joined_during_revision.add(name)  # its position is the one the reset ends at
            else:
                self.recently_joined[name] = self.cursor.read_position
        return consumer

    def remove_consumer(self, name: str) -> None:
        """Forget a consumer (what it was sent and did not ack is the caller's to redeliver)."""
        self.consumers.pop(name, None)
        self.recently_joined.pop(name, None)

    def reconnect(self, name: str) -> Consumer:
        """A reconnecting consumer starts over at the dispatcher's epoch (PIP-194)."""
        consumer = self.consumers[name]
        consumer.epoch = self.epoch
        return consumer

    def redeliver(self, positions: list[Position], *, delay: float = 0.0) -> None:
        """Negative acks: these positions go to the replay queue, or with ``delay`` (seconds,
        Pulsar's negative-ack delay) to the delayed tracker, which a replay read releases
        once the time has come."""
        if type(delay) not in (int, float) or not 0 <= delay < float("inf"):
            raise InvalidArgumentError(f"delay={delay!r} is not allowed: allowed a number of seconds >= 0")
        items = [trusted(*pair_of(p)) for p in positions]
        items = [p for p in items if not self.cursor.is_acked(p)]  # acked: nothing to deliver again
        for p in items:  # a position the log never had raises here, typed, before anything is queued
            self.cursor.read_path.check_position(p)
        limit = self.cursor.config.max_deliveries
        if limit:  # the release that reaches the limit dead-letters (Kafka share groups archive there)
            last = [p for p in items if self.cursor.delivery_count(p) >= limit]
            if last:
                self.dead.update((p, None) for p in last if p not in self.dead)
                items = [p for p in items if p not in self.dead]
                self._drain_soon()
        if delay:
            at = self.clock() + delay
            for p in items:
                self.delayed[p] = at
        else:
            self.replay.update(items)

    # -- dead letters -------------------------------------------------------------------------
    async def dead_letter_due(self) -> int:
        """Hand every entry due for the dead letter to it now, each acked once it returns;
        returns how many. Raises what the dead letter raises: that entry and the ones after
        it stay due. Reads do this first by themselves (logging a failure instead)."""
        return await self._drain(raise_errors=True)

    def _drain_soon(self) -> None:
        """Dead-letter the due entries in a task when an event loop runs here (else the next read does)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = loop.create_task(self._drain(raise_errors=False))

    async def _drain(self, raise_errors: bool) -> int:
        if self._draining or not self.dead:
            return 0
        assert self.dead_letter is not None
        self._draining = True
        done = 0
        try:
            for p in list(self.dead):
                if p not in self.dead:  # a reset dropped it meanwhile
                    continue
                if self.cursor.is_acked(p):  # acked since (a consumer, a cumulative ack)
                    del self.dead[p]
                    continue
                entry = self.dead[p] or (await self.reader.read([p]))[0]
                count = self.cursor.delivery_count(p)
                try:
                    await self.dead_letter(entry, count)
                except Exception as exc:
                    self.dead_letter_failures += 1
                    self.last_dead_letter_error = exc
                    if raise_errors:
                        raise
                    log.warning(
                        "ackstore: dead letter of %s/%s %s failed (%r); %d entries stay due, the next read tries again",
                        self.cursor.topic.name,
                        self.cursor.name,
                        p,
                        exc,
                        len(self.dead),
                    )
                    break
                if self.dead.pop(p, False) is not False:  # still due: no reset dropped it meanwhile
                    self.cursor.ack([p])
                    self.dead_lettered += 1
                    done += 1
        finally:
            self._draining = False
        return done

    # -- reads ------------------------------------------------------------------------------
    async def read_more(self, n: int = 10) -> list[Entry]:
        """One sequential read of up to ``n`` (an int >= 1) entries from the read position;
        [] if refused (a reset runs, or PIP-299 pauses reads)."""
        self._check_count(n, "read_more")
        if self._refused():
            return []
        if self.dead:
            await self._drain(raise_errors=False)
        if self._pause_for_ack_state():
            self.paused += 1
            return []
        epoch = self.epoch
        done = await self._sequential(n)
        if done is None:
            return []
        return await self._hand_out(done[0], epoch)

    def _pause_for_ack_state(self) -> bool:
        """PIP-299: evaluated only when pausing is on for this cursor (``pause_checks`` counts it)."""
        if self.single_consumer or not self.cursor.config.dispatcher_pause_on_ack_state_persistent:
            return False
        self.pause_checks += 1
        blocked = self.cursor.is_blocked_on_ack_state_persistent
        if blocked != self._blocked:  # once per crossing, never per read
            self._blocked = blocked
            cfg, cur = self.cursor.config, self.cursor
            if blocked:
                log.warning(
                    "ackstore: dispatcher of %s/%s pauses sequential reads: %d ack ranges exceed "
                    "max_unacked_ranges_to_persist=%d (dispatcher_pause_on_ack_state_persistent is on)",
                    cur.topic.name,
                    cur.name,
                    cur.ack_range_count,
                    cfg.max_unacked_ranges_to_persist,
                )
            else:
                log.info("ackstore: dispatcher of %s/%s resumes sequential reads", cur.topic.name, cur.name)
        return blocked

    async def replay_read(self, n: int = 10) -> list[Entry]:
        """One replay read of up to ``n`` queued positions (never paused by PIP-299); held
        delayed entries whose time has come are queued first."""
        self._check_count(n, "replay_read")
        if self._refused():
            return []
        if self.dead:
            await self._drain(raise_errors=False)
        now = self.clock()
        for p in [p for p, at in self.delayed.items() if at <= now]:
            del self.delayed[p]
            self.replay.add(p)
        self.replay.difference_update([p for p in self.replay if p in self.dead or self.cursor.is_acked(p)])
        positions = sorted(self.replay)[:n]
        epoch = self.epoch
        done = await self._read(positions)
        if done is None:
            return []
        self.replay.difference_update(positions)
        return await self._hand_out(done[0], epoch)

    async def _hand_out(self, entries: list[Entry], epoch: int) -> list[Entry]:
        """Dead-letter the entries delivered ``max_deliveries`` times, count one more delivery
        of the others that are due, and hand those out; returns them."""
        limit = self.cursor.config.max_deliveries
        if limit and entries:
            held = self._counts_of(entries)
            counted = [(e, held.get(e.position, 0)) for e in entries]
            self.dead.update((e.position, e) for e, n in counted if n >= limit)
            entries = [e for e, n in counted if n < limit]
        due = self._due(entries)
        if due:
            self.cursor.record_deliveries([e.position for e in due], durable=self.durable_counts)
        handed = self._deliver(due, epoch)
        if self.dead:
            await self._drain(raise_errors=False)
        return handed

    def _counts_of(self, entries: list[Entry]) -> dict[Position, int]:
        """The delivery counts the cursor holds from the lowest of ``entries`` through the
        highest: one call a read, not one an entry. O(entries + counts between)."""
        positions = [e.position for e in entries]
        low, high = min(positions), max(positions)
        end = Position(high.ledger, high.entry + 1) if high.entry < MAX_ENTRY else None
        return self.cursor.delivery_counts(low, end)

    def _due(self, entries: list[Entry]) -> list[Entry]:
        """The entries due now; the others wait in the delayed tracker."""
        if self.deliver_at is not None:
            now, due = self.clock(), []
            for entry in entries:
                at = self.deliver_at(entry.position)
                if at > now:
                    self.delayed[entry.position] = at
                else:
                    due.append(entry)
            entries = due
        return entries

    def _deliver(self, entries: list[Entry], epoch: int) -> list[Entry]:
        """Hand ``entries`` out round robin; returns them."""
        names = sorted(self.consumers)
        if not names:
            return entries
        turn, n = self._turn, len(names)
        for k in range(min(n, len(entries))):  # consumer turn + k takes every n-th entry from k on
            consumer = self.consumers[names[(turn + k) % n]]
            consumer.receive_all(entries[k::n], epoch if self.epochs else consumer.epoch)
        self._turn = turn + len(entries)
        return entries

    # -- position resets (PIP-269) -----------------------------------------------------------
    def _clear_side_state(self) -> None:
        self.dead.clear()  # a reset drops the counts: nothing is at the limit any more
        self.replay.clear()
        self.recently_joined.clear()
        self.delayed.clear()

    def _end_revision(self, edit_cursor: Callable[[], object]) -> None:
        super()._end_revision(edit_cursor)
        for name in self._joined_during_revision:
            if name in self.consumers:
                self.recently_joined[name] = self.cursor.read_position
        self._joined_during_revision.clear()

    async def reset_after(
        self,
        position: Position,
        disconnect: Callable[[], Awaitable[object]],
        *,
        batch_index: int | None = None,
        batch_size: int | None = None,
        strict: bool = False,
    ) -> None:
        """A reset that first awaits ``disconnect`` (e.g. closing every consumer), as a broker's
        reset-cursor does; other tasks run meanwhile, and the revision keeps them consistent.
        The target is settled (and checked) before anything changes, as in :meth:`reset`."""
        target, batch = self._target(position, batch_index, batch_size, strict)
        self._start_revision()
        try:
            await disconnect()
        finally:
            self._end_revision(lambda: self.cursor.read_path.reset_to(target, batch))

    def reset(
        self,
        position: Position,
        *,
        batch_index: int | None = None,
        batch_size: int | None = None,
        strict: bool = False,
    ) -> Position:
        """Everything before ``position`` acked, nothing from it on; read from it. Returns
        where the reset went.

        ``batch_index`` and ``batch_size`` (together) reset to a message inside a batch
        entry, as Pulsar does for a batch message id: indexes ``0..batch_index-1`` of the
        entry are acked, so the next message delivered is exactly that one; one revision.

        By default a position that is not in the log any more (or not yet) is clamped as
        Pulsar clamps it: before the first ledger (retention deleted it) to the earliest,
        past the last entry to the latest, in a missing ledger or past a ledger's end to the
        next ledger's first entry (a clamped target drops the batch index: that message is
        gone). ``strict=True`` raises UnknownLedgerError / InvalidPositionError instead.
        Nothing changes when it raises."""
        target, batch = self._target(position, batch_index, batch_size, strict)
        self._revise(lambda: self.cursor.read_path.reset_to(target, batch))
        return self.cursor.read_position if self.controller.enabled else target

    def _target(
        self, position: Any, batch_index: Any, batch_size: Any, strict: Any
    ) -> tuple[Position, tuple[int, int] | None]:
        """Where a reset goes (clamped unless ``strict``) and its batch; typed errors first."""
        if type(strict) is not bool:
            raise InvalidTypeError(f"strict must be a bool, got {strict!r}")
        if (batch_index is None) != (batch_size is None):
            raise InvalidArgumentError(
                f"batch_index={batch_index!r} and batch_size={batch_size!r}: allowed both or neither"
            )
        batch = None if batch_index is None else (batch_index, batch_size)
        try:
            self.cursor.read_path.check_reset_target(position, batch)
        except InvalidPositionError:  # not a place in the log: Pulsar's clamp, unless strict
            if strict:
                raise
            return self.cursor.read_path.clamp_reset_target(position), None
        return trusted(*position), batch

    def seek(
        self,
        position: Position,
        *,
        batch_index: int | None = None,
        batch_size: int | None = None,
        strict: bool = False,
    ) -> int:
        """A reset (same arguments as :meth:`reset`) that also bumps the consumer epoch
        (PIP-194); returns the new epoch. A bad argument raises before anything changes."""
        target, batch = self._target(position, batch_index, batch_size, strict)
        self.epoch += 1
        for consumer in self.consumers.values():
            consumer.epoch = self.epoch  # the seek response carries the epoch to each consumer
        self._revise(lambda: self.cursor.read_path.reset_to(target, batch))
        return self.epoch

    def restore_as_of(self, when: datetime | float) -> HistoryPoint:
        """``Cursor.restore_as_of`` as a position change: one revision (reads in flight are
        discarded, as for a reset) and a new consumer epoch (PIP-194), as :meth:`seek`;
        reads start again at the first unacked entry after the restored mark-delete
        position. Returns the point restored; a bad time (or a cursor that keeps no
        history) raises before anything changes."""
        self.cursor.check_restore(when)
        self.epoch += 1
        for consumer in self.consumers.values():
            consumer.epoch = self.epoch
        restored: list[HistoryPoint] = []
        self._revise(lambda: restored.append(self.cursor.restore_as_of(when)))
        return restored[0]

    def skip(self, n: int, *, include_acked: bool = False) -> None:
        """Acknowledge the next ``n`` unacked entries after the mark-delete position.

        With ``include_acked=True`` (Pulsar's ``IndividualDeletedEntries.Include``) the
        ``n`` entries are counted whether acked or not: the mark-delete position moves to
        the ``n``-th written entry after it (or the last written one), acking everything up
        to there. Either way O(ledgers passed + ranges touched), not O(n) over acked runs.
        """
        if type(n) is not int or n < 0:
            raise InvalidArgumentError(f"skip count {n!r} is not allowed: allowed an int >= 0")
        if type(include_acked) is not bool:
            raise InvalidArgumentError(f"include_acked must be a bool, got {include_acked!r}")
        if include_acked:
            target = self._nth_written(self.cursor.mark_delete_position, n)
            self._revise(lambda: self.cursor.ack_cumulative(target) if target is not None else None)
            return
        positions = self._next_positions(self.cursor.mark_delete_position.next(), n)
        self._revise(lambda: self.cursor.ack(positions) if positions else None)

    def _nth_written(self, after: Position, n: int) -> Position | None:
        """The ``n``-th written position after ``after``, counting acked ones too (the last
        written one if fewer follow); None when none follows or ``n`` is 0."""
        if n <= 0:
            return None
        ledger, entry = after.ledger, after.entry + 1
        target = None
        for lid, _ in self.cursor.topic.ledgers():
            if lid < ledger:
                continue
            start = entry if lid == ledger else 0
            written = self.reader.written(lid)
            take = min(n, written - start)
            if take > 0:
                target, n = trusted(lid, start + take - 1), n - take
                if not n:
                    break
        return target

    def clear_backlog(self) -> None:
        """Acknowledge everything written so far."""
        ledgers = self.cursor.topic.ledgers()
        last = next(
            (trusted(lid, self.reader.written(lid) - 1) for lid, _ in reversed(ledgers) if self.reader.written(lid)),
            None,
        )
        self._revise(lambda: self.cursor.ack_cumulative(last) if last is not None else None)

    def stats(self) -> dict[str, int]:
        """The dispatcher's counters: revisions (PIP-269), the epoch, paused reads, the replay
        and delayed queues, and the dead letter's."""
        return {
            **self.revision_stats(),
            "epoch": self.epoch,
            "reads_paused": self.paused,
            "pause_checks": self.pause_checks,
            "replay_queue": len(self.replay),
            "delayed": len(self.delayed),
            "dead_lettered": self.dead_lettered,
            "dead_letter_due": len(self.dead),
            "dead_letter_failures": self.dead_letter_failures,
        }


def _is_coroutine_function(fn: object) -> bool:
    """``fn`` is an ``async def`` (a function, bound method, partial of one, or an object whose
    ``__call__`` is one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
