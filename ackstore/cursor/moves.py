"""The moves of a cursor's positions that the read path makes: position resets (to an
entry, into a batch, clamped as Pulsar clamps a stale position) and the read position's
moves after reads. A part of :class:`~ackstore.cursor.state.AckState` (its base class),
kept apart because it is the read path's protocol, not the ack rules; no LMDB, no lock
(the caller holds the cursor's)."""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from ..errors import InvalidArgumentError, InvalidPositionError, InvalidTypeError
from ..ledger_acks import LedgerAcks, run_end
from ..position import Position, trusted
from .validate import check_entry, pair

if TYPE_CHECKING:
    from collections.abc import Iterable

    import lmdb

    from ..directory import LedgerDirectory
    from ..ledger_cache import LedgerCache

__all__ = [
    "LedgerSource",
    "MAX_BATCH_SIZE",
    "PositionMoves",
    "TopicView",
    "batch_mask",
    "batch_target",
    "check_batch_size",
    "clamp_target",
    "reset_target",
]

MAX_BATCH_SIZE = 1 << 16
"""The largest batch a batch-index ack (or a reset into a batch) accepts."""


class TopicView(Protocol):
    """What a cursor reads of its topic (a :class:`~ackstore.Topic`): its name, id, ledger
    directory and the directory's version, and the directory read again from the catalog."""

    name: str
    topic_id: int
    directory: LedgerDirectory
    version: int

    def reread_directory(self, txn: lmdb.Transaction) -> None: ...


class LedgerSource(Protocol):
    """Where the ack state finds per-ledger ack sets (the cursor's pages)."""

    cache: LedgerCache
    dirty: set[int]

    @overload
    def get(self, ledger: int, create: Literal[True]) -> LedgerAcks: ...
    @overload
    def get(self, ledger: int, create: bool = False) -> LedgerAcks | None: ...
    def peek(self, ledger: int) -> LedgerAcks | None: ...
    def known(self) -> set[int]: ...
    def vanish(self, ledger: int) -> int: ...
    def touched(self, ledger: int, la: LedgerAcks) -> int: ...
    def fit(self, incoming: int = 0, keep: Iterable[int] = ()) -> None: ...
    def runs(self) -> int: ...


class PositionMoves:
    """Resets and read-position moves over the ack state's fields (set by AckState)."""

    # (AckState has the rest)
    __slots__ = (
        "md", "range_count", "meta_dirty", "properties", "rp", "cache", "dirty", "limit_ledger", "limit_value",
        "limit_version",
    )  # fmt: skip

    topic: TopicView
    ledgers: LedgerSource
    md: Position
    rp: Position
    range_count: int
    meta_dirty: bool
    properties: dict[str, int | str]
    cache: LedgerCache
    dirty: set[int]
    limit_ledger: int
    limit_value: int
    limit_version: int

    def advance(self) -> None:
        raise NotImplementedError  # AckState's

    def check_entry(self, ledger: int, entry: Any, low: int = 0) -> None:
        raise NotImplementedError  # AckState's

    def touched(self, ledger: int, la: LedgerAcks) -> None:
        raise NotImplementedError  # AckState's

    def put_batch(self, ledger: int, entry: int, batch: tuple[int, int]) -> LedgerAcks:
        """The partial batch ``(size, mask)`` of ``ledger:entry`` recorded (the caller checked
        it): partial batches live in the ledger's base record, so its next record is a new
        base. The pages fit their budget after, the ledger kept. Returns the ledger's acks.
        O(1) + the evictions."""
        la = self.ledgers.get(ledger, create=True)
        la.own_batches()[entry] = batch
        la.added = None
        self.touched(ledger, la)
        self.ledgers.fit(keep=(ledger,))
        return la

    def reset_to(self, position: Any, batch: tuple[int, int] | None = None) -> None:
        """Everything before ``position`` acked, nothing from it on; reads start there. M may
        move backwards. ``batch``: ``(batch_index, batch_size)``, Pulsar's reset to a message
        inside a batch: indexes ``0..batch_index-1`` of the entry are acked too, so the next
        message delivered is exactly that one. Validated before anything changes."""
        ledger, entry = reset_target(self.topic, position)
        mask, size = (batch_target(self.topic, pair(position), *batch), batch[1]) if batch is not None else (0, 0)
        for known in list(self.ledgers.known()):
            self.range_count -= self.ledgers.vanish(known)
        self.md = trusted(ledger, entry - 1)
        self.rp = trusted(ledger, entry)
        self.meta_dirty = True
        if mask:
            self.put_batch(ledger, entry, (size, mask))
        self.advance()

    def move_read_position(self, position: Position) -> None:
        """A sequential read moved past ``position``'s predecessor (never backwards). Like
        Pulsar's next available position, it then hops a run of acked entries that starts
        there, and the position after a sealed ledger's last entry is the next ledger's
        first. In memory only (never persisted, never makes the cursor dirty).
        O(runs hopped + ledgers crossed)."""
        d = self.topic.directory
        ledger, entry = position
        while True:
            i = d.index(ledger)
            if i < 0:
                break
            count = d.counts[i]
            if 0 <= count <= entry:
                if i + 1 >= len(d.ids):
                    break
                ledger, entry = d.ids[i + 1], 0
                continue
            la = self.ledgers.get(ledger)
            if la is None or entry not in la.bitmap:
                break
            entry = run_end(la.bitmap, entry) + 1
        position = trusted(ledger, entry)
        if position > self.rp:
            self.rp = position

    def rewind(self) -> None:
        """Read again from the first unacked position (in memory only)."""
        self.rp = self.md.next()


def batch_mask(batch_size: Any, indexes: Any) -> int:
    """The mask of a batch-index ack: bit ``i`` for each index ``i`` of ``indexes``; a typed
    error unless ``batch_size`` is a batch's size (1..:data:`MAX_BATCH_SIZE`) and each index
    one of its own. O(indexes)."""
    if type(batch_size) is not int:
        raise InvalidTypeError(f"batch_size must be an int, got {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidArgumentError(f"batch_size {batch_size} is not allowed: allowed 1..{MAX_BATCH_SIZE}")
    try:
        idx = list(indexes)
    except TypeError:
        raise InvalidTypeError(f"indexes must be an iterable of ints, got {indexes!r}") from None
    mask = 0
    for i in idx:
        if type(i) is not int:
            raise InvalidTypeError(f"batch index must be an int, got {i!r}")
        if not 0 <= i < batch_size:
            raise InvalidArgumentError(f"batch index {i} is outside the batch: allowed 0..{batch_size - 1}")
        mask |= 1 << i
    return mask


def check_batch_size(ledger: int, entry: int, batch_size: int, old: tuple[int, int] | None) -> None:
    """An InvalidArgumentError unless a batch-index ack's ``batch_size`` is the size of the
    partial batch ``old`` recorded at ``ledger:entry`` (None: none is)."""
    if old is not None and old[0] != batch_size:
        raise InvalidArgumentError(
            f"batch_size {batch_size} does not match the {old[0]} already recorded for {ledger}:{entry}"
        )


def reset_target(topic: TopicView, position: Any) -> tuple[int, int]:
    """The place a reset to ``position`` moves to; a typed error unless it is one.

    As in Pulsar, the position just after a sealed ledger's last entry, ``(L, count)``
    (an exclusive seek past message ``L:count-1``), is the next ledger's first entry
    ``(next, 0)``; with no next ledger yet it stays ``(L, count)`` (everything of L is
    acked). Positions further out are errors.
    """
    if not isinstance(position, tuple) or len(position) != 2:
        raise InvalidTypeError(f"reset position must be a Position, got {position!r}")
    ledger, entry = position
    if type(entry) is int and type(ledger) is int:
        d = topic.directory
        count = d.count(ledger) if ledger in d else None
        if count is not None and count >= 0 and entry == count:
            following = d.next_after(ledger)
            return (following, 0) if following is not None else (ledger, entry)
        if count is not None and count < 0 and d.confirmed is not None and entry == d.confirmed + 1:
            return ledger, entry  # the next entry to be written: a reset to the latest position
    check_entry(topic.directory, topic.name, ledger, entry)
    return ledger, entry


def clamp_target(topic: TopicView, position: Any) -> tuple[int, int]:
    """Pulsar's reset rule for a position that is not (or no longer) in the log: the
    next valid position. Before the first ledger (its ledger trimmed) it is the
    earliest, ``(first, 0)``; in a ledger the topic does not hold, or past a ledger's
    end, the next ledger's first entry; past the newest ledger's end (or in a ledger
    newer than it) the latest, the next entry to be written. A position that is a place
    comes back as :func:`reset_target` gives it. Wrong types still raise, and so
    does a target past an open ledger whose last entry is not tracked
    (``topic.advance``): where the latest lies is not known then. O(log ledgers)."""
    pair(position)  # a typed error for anything but two ints
    try:
        return reset_target(topic, position)
    except InvalidPositionError:
        d = topic.directory
        if not d.ids:
            raise
    ledger, entry = position
    i = bisect_left(d.ids, ledger)
    if i < len(d.ids) and d.ids[i] == ledger:
        if entry < 0:
            return ledger, 0
        i += 1  # past this ledger's end
    if i < len(d.ids):
        return d.ids[i], 0
    last, count = d.ids[-1], d.counts[-1]
    if count < 0 and d.confirmed is None:
        raise InvalidPositionError(
            f"reset position {ledger}:{entry} lies past topic {topic.name!r}'s open ledger {last}, whose "
            "last entry is not tracked, so the latest position is not known: allowed a position in the "
            "topic's ledgers (topic.advance tracks the open ledger's last confirmed entry)"
        )
    if count >= 0:
        return last, count
    assert d.confirmed is not None  # refused above
    return last, d.confirmed + 1


def batch_target(topic: TopicView, position: tuple[int, int] | None, batch_index: Any, batch_size: Any) -> int:
    """Validate a reset into a batch: ``batch_index`` of a batch of ``batch_size`` at the
    entry ``position`` (a written entry; None checks the batch alone). Returns the mask
    of the indexes before it."""
    if type(batch_size) is not int or type(batch_index) is not int:
        raise InvalidTypeError(f"batch_index and batch_size must be ints, got {batch_index!r} and {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidArgumentError(f"batch_size {batch_size} is not allowed: allowed 1..{MAX_BATCH_SIZE}")
    if not 0 <= batch_index < batch_size:
        raise InvalidArgumentError(f"batch_index {batch_index} is outside the batch: allowed 0..{batch_size - 1}")
    if batch_index and position is not None:
        check_entry(topic.directory, topic.name, position[0], position[1])  # a message inside a batch: a real entry
    return (1 << batch_index) - 1
