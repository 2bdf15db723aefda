"""A cursor's record log: open-time recovery back to front, and every other scan of it.

:class:`CursorLog` is the one place that walks a cursor's keys: recovery, swap-in reads,
usage, garbage trimming after a flush, the full scan ``check`` does, and compaction's
rewrite. The functions below it are its implementation, each taking the transaction.

Recovery:

The cursor's log is scanned from its newest record backwards. For each marker
met, the delta chain is walked back to its full marker and every ledger record
the resulting index references is read and checked. The first marker whose
whole chain and references are intact is the recovered state; every marker
skipped on the way is reported with its reason. Nothing half-written is ever
loaded: a marker is only written in the same transaction as its records.

A cursor's state markers may sit in its two state slots (format 12, see
:mod:`ackstore.storage.records`) instead of under log keys: every read of a record by its
sequence (:func:`fetch_record`) and the back-to-front walk take them as part of the log,
by their sequences.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import lmdb
from pyroaring import BitMap

from ..errors import CorruptRecordError
from ..ledger_acks import LedgerAcks
from ..stats import NO_RECOVERY, LogUsage, RecoveryReport
from .pure_codecs import ENVELOPE, STATE_TAG
from .records import (
    RECORD_MARKER,
    IndexEntry,
    Marker,
    decode_ledger_owned,
    decode_marker,
    decode_record,
    expected_ledger,
    ledger_span,
    log_bounds,
    log_key,
    log_keys_of,
    names_line,
    open_slot,
    record_type,
    seal_slot,
    slot_key,
    slot_seq,
    split_log_key,
    state_ledger,
)

__all__ = [
    "CursorLog",
    "fetch_record",
    "LogTxn",
    "MemoryLog",
    "MissingRecordError",
    "RecoveredState",
    "recover_cursor",
    "resolve_marker",
    "ResolvedMarker",
    "read_ledger_record",
    "log_usage",
    "newest_logged",
    "newest_marker",
    "NewestMarker",
    "trim_records",
    "slot_values",
]


class LogTxn(Protocol):
    """What recovery needs of a transaction: a key's value, and a cursor over the log's keys
    (an ``lmdb.Transaction``, or a :class:`MemoryLog` of records a page scan found)."""

    def get(self, key: bytes, db: Any = ...) -> bytes | None: ...
    def cursor(self, db: Any = ...) -> Any: ...


class MissingRecordError(CorruptRecordError):
    """A record a marker references is not in the log (trimmed under a reader, or lost)."""


@dataclass(slots=True)
class ResolvedMarker:
    """A marker with its chain resolved into a full index."""

    seq: int
    marker: Marker
    index: dict[int, IndexEntry]
    full_seq: int
    full_index_seqs: set[int]
    deltas_since_full: int
    chain_bytes: int
    full_bytes: int
    chain: list[int] = field(default_factory=list)  # marker sequences, newest first, down to the full one


@dataclass(slots=True)
class RecoveredState:
    """What a cursor starts from."""

    resolved: ResolvedMarker | None
    ledgers: dict[int, LedgerAcks] = field(default_factory=dict)  # loaded, least recently written first
    swapped: set[int] = field(default_factory=set)  # referenced by the marker, left on disk
    next_seq: int = 0
    report: RecoveryReport = NO_RECOVERY
    slot: int = 1  # the state slot the next state marker must not overwrite (see read_slots)
    slots: int = 0  # which state slots hold a value, readable or not (bit 0, bit 1)
    forced: set[int] = field(default_factory=set)  # loaded beyond the budget: state past their end


SLOTS = (0, 1)


def _slot_values(txn: LogTxn, db: lmdb._Database | None, cursor_id: int) -> Iterator[tuple[int, bytes, bytes]]:
    """``(slot, key, value)`` of each of the cursor's state slots that holds a value, read
    as they are asked for. O(1)."""
    for slot in SLOTS:
        key = slot_key(cursor_id, slot)
        value = txn.get(key, db=db)
        if value is not None:
            yield slot, key, value


def read_slots(
    txn: LogTxn, db: lmdb._Database | None, cursor_id: int
) -> tuple[list[tuple[int, bytes, int]], list[str], int]:
    """The cursor's state slots that hold a value: ``(sequence, state marker record, slot)``
    newest first (the record not yet checked), what was wrong with the others, and which
    hold a value at all (bit 0, bit 1). O(1)."""
    found: list[tuple[int, bytes, int]] = []
    damaged: list[str] = []
    held = 0
    for slot, key, value in _slot_values(txn, db, cursor_id):
        held |= 1 << slot
        try:
            seq, record = open_slot(key, value)
        except CorruptRecordError as exc:
            damaged.append(f"marker? state slot {slot} is damaged ({exc}); it may have held a newer state")
            continue
        found.append((seq, record if isinstance(record, bytes) else bytes(record), slot))
    if len(found) > 1 and found[0][0] < found[1][0]:
        found.reverse()
    return found, damaged, held


def slot_values(
    txn: LogTxn, db: lmdb._Database | None, cursor_id: int, c: Any = None
) -> tuple[bytes | None, bytes | None] | None:
    """The values of the cursor's two state slots (None where one holds none) when its log
    is only those slots; None for any other log (then recovery reads it) or for an empty
    one. Unchecked: ``ackstore.cursor.small.small_of_slots`` checks them. O(1): a look at
    the cursor's log keys and the two slots, with ``c`` (a cursor of ``txn`` on ``db``: a
    bulk open's one for all its cursors, made once) or one made here."""
    head, key0, key1 = log_keys_of(cursor_id)
    if c is None:
        c = txn.cursor(db=db)
    if c.set_range(head) and c.key()[:8] == head:
        return None  # records under log keys: recovery's to resolve
    v0, v1 = c.get(key0), c.get(key1)  # (a cursor's get: no keywords to parse)
    return None if v0 is None and v1 is None else (v0, v1)


def _at_newest(c: Any, cursor_id: int, below: bytes | None = None) -> bool:
    """LMDB cursor ``c`` (or a :class:`MemoryLog`'s) on the cursor's newest record under a
    log key (below key ``below``, when given): True there, False when it has none (``c``
    then anywhere). O(1)."""
    start, end = log_bounds(cursor_id)
    positioned = c.prev() if c.set_range(below or end) else c.last()
    return bool(positioned) and start <= c.key() < end


def newest_logged(
    txn: LogTxn, db: lmdb._Database | None, cursor_id: int, c: Any = None, states: bool = False
) -> tuple[tuple[bytes | None, bytes | None], tuple[int, bytes]] | None:
    """The values of the cursor's two state slots and its newest record under a log key,
    ``(seq, value)``, or None when it has none there (a cursor that keeps history writes
    its states under log keys), or, ``states``, when that record's body is not the state
    layout's (looked at before the slots are read). Unchecked, as :func:`slot_values`'s.
    O(1), with ``c`` as :func:`slot_values` takes it."""
    if c is None:
        c = txn.cursor(db=db)
    if not _at_newest(c, cursor_id) or (states and c.value()[ENVELOPE.size : ENVELOPE.size + 1] != b"%c" % STATE_TAG):
        return None
    _, key0, key1 = log_keys_of(cursor_id)
    found = split_log_key(bytes(c.key()))[1], bytes(c.value())
    return (c.get(key0), c.get(key1)), found


class NewestMarker(NamedTuple):
    """A cursor's newest record when it is a marker under a log key, newer than its state
    slots (:func:`newest_marker`): the marker resolved, and the slots as recovery reads them
    (the one holding the newer state, 1 when none; which hold a value)."""

    resolved: ResolvedMarker
    slot: int
    slots: int


def newest_marker(txn: LogTxn, db: lmdb._Database | None, cursor_id: int, c: Any = None) -> NewestMarker | None:
    """The cursor's newest record resolved (:func:`resolve_marker`) when it is a marker
    under a log key naming ledgers of the mark-delete position's line (``records.names_line``:
    the small form's chain), newer than what both state slots hold, their heads intact; None
    for any other log, or when the marker or its chain is damaged (recovery then says what
    it skipped). What recovery starts from (``recover_cursor``'s ``newest``), so that an open
    looking at it first does not resolve it again. O(the chain's markers), with ``c`` as
    :func:`slot_values` takes it."""
    if c is None:
        c = txn.cursor(db=db)
    if not _at_newest(c, cursor_id) or not names_line(c.value()):
        return None
    seq, value = split_log_key(bytes(c.key()))[1], bytes(c.value())
    found, damaged, held = read_slots(txn, db, cursor_id)  # (newest first, as recovery reads them)
    if damaged or (found and found[0][0] >= seq):
        return None
    try:
        return NewestMarker(resolve_marker(txn, db, cursor_id, seq, value), found[0][2] if found else 1, held)
    except CorruptRecordError:
        return None


def fetch_record(txn: LogTxn, db: lmdb._Database | None, cursor_id: int, seq: int) -> bytes | None:
    """Record ``seq`` of the cursor, under its log key or in a state slot; None if neither
    holds it. O(1): one lookup, three for a state slot's."""
    value = txn.get(log_key(cursor_id, seq), db=db)
    if value is None:
        for _, key, raw in _slot_values(txn, db, cursor_id):  # the first that holds it ends the look
            try:
                held, record = open_slot(key, raw)
            except CorruptRecordError:
                continue  # a damaged slot: neither its sequence nor a record in it can be trusted
            if held == seq:
                return record if isinstance(record, bytes) else bytes(record)
    return value  # type: ignore[no-any-return]


def resolve_marker(
    txn: LogTxn, db: lmdb._Database | None, cursor_id: int, seq: int, value: bytes | None = None
) -> ResolvedMarker:
    """Walk marker ``seq``'s delta chain back to its full marker and build its index
    (``value``: marker ``seq``'s record when the caller read it already).

    Raises CorruptRecordError naming the first broken or missing link.
    """
    chain: list[tuple[int, Marker, int]] = []
    s = seq
    while True:
        if value is None:
            value = fetch_record(txn, db, cursor_id, s)
        if value is None:
            raise MissingRecordError(f"marker {seq}: its chain needs marker {s}, which is missing")
        try:
            marker = decode_marker(value, s)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"marker {seq}: chain marker {s} is damaged ({exc})") from None
        owner = marker.extra.get("c", cursor_id)
        if owner != cursor_id:
            raise CorruptRecordError(f"marker {seq}: chain marker {s} belongs to cursor id {owner}, not {cursor_id}")
        chain.append((s, marker, len(value)))
        if marker.full:
            break
        if not 0 <= marker.prev < s:
            raise CorruptRecordError(f"marker {seq}: chain marker {s} points to {marker.prev}, not to an older marker")
        s = marker.prev
        value = None
    full_seq, full_marker, full_bytes = chain[-1]
    index: dict[int, IndexEntry] = {k: v for k, v in full_marker.index.items() if v is not None}
    full_index_seqs = {e.seq for e in index.values()}
    deltas = chain[:-1]  # newest first; none when marker ``seq`` is full (a small cursor's every marker)
    for _, delta, _ in reversed(deltas):
        for ledger, entry in delta.index.items():
            if entry is None:
                index.pop(ledger, None)
                continue
            old = index.get(ledger)
            if old is not None and old.seq == entry.seq and (old.adds or old.counts):
                # the same record as before: a delta marker names only the acks added (and the
                # counts set) since the chain last named this ledger (a union: repeats are
                # harmless; the newer count wins, and an ack takes a count away, as the
                # writer's index has it)
                counts = {**old.counts, **(entry.counts or {})} if old.counts else entry.counts
                adds = old.adds | entry.adds if old.adds and entry.adds else old.adds or entry.adds
                if counts and entry.adds:
                    counts = {e: n for e, n in counts.items() if e not in entry.adds} or None
                entry = IndexEntry(entry.seq, entry.runs, adds, counts)
            index[ledger] = entry
    return ResolvedMarker(  # positional (a restart builds one a cursor): the fields' order
        seq,
        chain[0][1],
        index,
        full_seq,
        full_index_seqs,
        len(deltas),
        sum([n for _, _, n in deltas]) if deltas else 0,
        full_bytes,
        [s for s, _, _ in chain],
    )


def _record(txn: LogTxn, db: lmdb._Database | None, cursor_id: int, seq: int, ledger: int, marker_seq: int) -> bytes:
    """Record ``seq``, which marker ``marker_seq`` names as ``ledger``'s; MissingRecordError if absent."""
    value = fetch_record(txn, db, cursor_id, seq)
    if value is None:
        raise MissingRecordError(f"marker {marker_seq}: ledger {ledger}'s record {seq} is missing")
    return value


def _damaged(marker_seq: int, ledger: int, seq: int, exc: CorruptRecordError) -> CorruptRecordError:
    return CorruptRecordError(f"marker {marker_seq}: ledger {ledger}'s record {seq} is damaged ({exc})")


def _ledger_in(
    value: bytes, cursor_id: int, seq: int, ledger: int, marker_seq: int, one_pass: bool = True
) -> tuple[int, LedgerAcks, int | None]:
    """``(ledger found, acks, owner)`` of record ``seq``: a ledger record, or (format 10) a
    state marker holding ``ledger``; ``one_pass``: as :func:`decode_ledger_owned` takes it.
    Raises CorruptRecordError naming the marker."""
    try:
        if record_type(value) == RECORD_MARKER:  # tracks no acks since it (of_runs): the next
            # flush writes the state again, never a delta against it
            acks, cid = state_ledger(value, seq, ledger)
            return ledger, acks, cid
        found, acks, owner = decode_ledger_owned(value, one_pass)
    except CorruptRecordError as exc:
        raise _damaged(marker_seq, ledger, seq, exc) from None
    acks.added = BitMap()  # tracked from the base on: the adds below land in it too
    return found, acks, owner


def _read_ledger(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    entry: IndexEntry,
    ledger: int,
    marker_seq: int,
    decoded: dict[int, LedgerAcks] | None = None,
    value: bytes | None = None,
) -> tuple[LedgerAcks, int]:
    """A ledger as ``entry`` says: its base record plus the acks made since (format 5),
    checked against the ranges the marker counted. The result tracks ``added`` from there
    (a ledger read from a state marker does not: its next flush writes the state whole).
    ``decoded``: the ledgers of the state marker ``marker_seq`` when it was decoded already
    (the one named is taken from it, not decoded again); ``value``: the record when the
    caller read it already."""
    seq = entry.seq
    owner: int | None
    if decoded is not None and seq == marker_seq and ledger in decoded:
        found, acks, owner = ledger, decoded.pop(ledger), cursor_id
        size = 0  # counted with the marker (recover_cursor)
    else:
        if value is None:
            value = _record(txn, db, cursor_id, seq, ledger, marker_seq)
        tried = not entry.adds and not entry.counts  # the common case: the record is the ledger's state
        if tried:
            expected = expected_ledger(value, ledger, cursor_id, entry.runs)
            if expected is not None:
                return expected, len(value)
        found, acks, owner = _ledger_in(value, cursor_id, seq, ledger, marker_seq, one_pass=not tried)
        size = len(value)
    if owner is not None and owner != cursor_id:
        raise CorruptRecordError(f"marker {marker_seq}: record {seq} belongs to cursor id {owner}, not {cursor_id}")
    if entry.adds:
        acks.update(entry.adds)  # read, not kept: the bitmaps take copies
    if entry.counts:
        acked = acks.bitmap
        for e, n in entry.counts.items():
            if e not in acked:  # acked since: the ack took its count away
                acks.own_counts()[e] = n
                if acks.added is not None:
                    acks.own_counts_added()[e] = n
    if found != ledger or acks.runs != entry.runs:
        raise CorruptRecordError(
            f"marker {marker_seq}: record {seq} holds ledger {found} with {acks.runs} ranges"
            + (f" ({len(entry.adds)} acks added since)" if entry.adds else "")
            + f", the marker expects ledger {ledger} with {entry.runs}"
        )
    return acks, size


def _peek_ledger(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    entry: IndexEntry,
    ledger: int,
    marker_seq: int,
    decoded: dict[int, LedgerAcks] | None = None,
) -> tuple[int, int, int]:
    """``(lowest, highest, record bytes)``: the lowest and highest entry ``ledger`` holds
    any state for (acked, partly acked, counted; 2**32 and -1 when none), from its
    record's fields and ``entry`` (the acks and counts since), its bitmap not decoded. The
    record is checked as :func:`_read_ledger` checks it bar the decode: envelope,
    checksum, fields, ledger, owner, and the range count the marker expects when no acks
    came since. ``decoded``: the ledgers of the state marker ``marker_seq``, decoded (and
    so checked) with it; one of them is read from there (no bytes: counted with the marker)."""
    if decoded is not None and entry.seq == marker_seq and ledger in decoded:
        acks, size = decoded[ledger], 0  # counted with the marker (recover_cursor)
    else:
        value = _record(txn, db, cursor_id, entry.seq, ledger, marker_seq)
        if record_type(value) != RECORD_MARKER:
            return _span_of(value, cursor_id, entry, ledger, marker_seq)
        # a state marker: small, decoded whole
        acks, size = _read_ledger(txn, db, cursor_id, entry, ledger, marker_seq, value=value)
    lowest = acks.lowest()
    return (lowest if lowest >= 0 else 1 << 32), acks.highest(), size


def _span_of(value: bytes, cursor_id: int, entry: IndexEntry, ledger: int, marker_seq: int) -> tuple[int, int, int]:
    """:func:`_peek_ledger` of a ledger record ``value``: its fields read, its bitmap not decoded."""
    try:
        found, lowest, highest, runs, owner = ledger_span(value)
    except CorruptRecordError as exc:
        raise _damaged(marker_seq, ledger, entry.seq, exc) from None
    if found != ledger or (owner is not None and owner != cursor_id):
        raise CorruptRecordError(
            f"marker {marker_seq}: record {entry.seq} holds ledger {found} of cursor id {owner}, "
            f"the marker expects ledger {ledger} of {cursor_id}"
        )
    if entry.adds:
        lowest, highest = min(lowest, entry.adds.min()), max(highest, entry.adds.max())
    elif runs != entry.runs:
        raise CorruptRecordError(
            f"marker {marker_seq}: record {entry.seq} holds ledger {found} with {runs} ranges, "
            f"the marker expects {entry.runs}"
        )
    if entry.counts:
        lowest, highest = min(lowest, min(entry.counts)), max(highest, max(entry.counts))
    return lowest, highest, len(value)


def _newest_first(items: list[tuple[int, IndexEntry]]) -> list[tuple[int, IndexEntry]]:
    """Index entries newest first: a ledger with acks since its record was touched after
    every ledger without, then by record sequence. O(n log n)."""
    return sorted(items, key=lambda kv: (bool(kv[1].adds), kv[1].seq), reverse=True)


def _check_left(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    marker_seq: int,
    left: list[tuple[int, IndexEntry]],
    verify: str,
) -> None:
    """Check the records of the ledgers ``left`` on disk at open as ``verify`` says (see
    :func:`_load_records`). O(len(left)) page touches, or reads for ``"all"``."""
    if verify == "all":
        for ledger, entry in left:
            _read_ledger(txn, db, cursor_id, entry, ledger, marker_seq)
    elif verify == "keys" and left:
        probe = txn.cursor(db=db)
        for ledger, entry in left:
            if not probe.set_key(log_key(cursor_id, entry.seq)) and fetch_record(txn, db, cursor_id, entry.seq) is None:
                raise CorruptRecordError(f"marker {marker_seq}: ledger {ledger}'s record {entry.seq} is missing")


def _cut_candidate(index: dict[int, IndexEntry], md_ledger: int) -> int | None:
    """The one ledger of a marker's index whose state may lie past its end however the
    directory changed since (None: none but the mark-delete ledger's): its highest. A
    flush wrote every ledger within the directory's bounds as they were then, and after it
    only the ledger open then can be sealed, or given a durable bound (``topic.advance``),
    below that state (after a reset held in memory only, and a crash); the marker's ledgers
    are that one or older, all sealed before. O(ledgers)."""
    last = max(index, default=None)
    return None if last is None or last == md_ledger else last


Ends = Callable[[list[tuple[int, int]]], list[int]]
"""which of ``(ledger, highest entry with state)`` hold state at or past the ledger's end, as
the topic's directory says (:meth:`LedgerDirectory.past_end`)"""


def _load_lazily(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    resolved: ResolvedMarker,
    budget: int | None,
    verify: str,
    ends: Ends | None,
) -> tuple[dict[int, LedgerAcks], set[int], int, set[int]]:
    """:func:`_load_records` for a lazy open: the records an eager open would decode
    (newest first, up to ``budget`` bytes of records, which are no more than the decoded
    state's; None: all) are read and checked without decoding (:func:`_peek_ledger`); the
    rest as ``verify`` says. Decoded all the same: the mark-delete ledger when it holds an
    entry at or below M + 1, and a ledger holding state at or past its end (``ends``),
    states no flush leaves (the cursor then drops them). O(records read), plus a sort
    under a budget."""
    md_ledger, md_entry = resolved.marker.mark_delete
    index, seq, within = resolved.index, resolved.seq, resolved.marker.ledgers
    clip: list[tuple[int, IndexEntry]] = []
    spent = 0
    entry = index.get(md_ledger)
    if entry is not None:
        lowest, highest, spent = _peek_ledger(txn, db, cursor_id, entry, md_ledger, seq, within)
        if lowest <= md_entry + 1 or (ends is not None and ends([(md_ledger, highest)])):
            clip.append((md_ledger, entry))
    items = [kv for kv in index.items() if kv[0] != md_ledger]
    if budget is not None:
        items = _newest_first(items)
    spans: list[tuple[int, int]] = []
    read = spent
    stopped = len(items)
    for i, (ledger, entry) in enumerate(items):
        if budget is not None and read >= budget:
            stopped = i
            break
        _, highest, size = _peek_ledger(txn, db, cursor_id, entry, ledger, seq, within)
        read += size
        spans.append((ledger, highest))
    last = _cut_candidate(index, md_ledger)
    if ends is not None and last is not None and last not in {ledger for ledger, _ in spans}:
        spans.append((last, _peek_ledger(txn, db, cursor_id, index[last], last, seq, within)[1]))
    _check_left(txn, db, cursor_id, seq, items if verify == "all" else items[stopped:], verify)
    if ends is not None and spans:
        clip += [(ledger, index[ledger]) for ledger in ends(spans)]
    decoded: dict[int, LedgerAcks] = {}
    nbytes = 0
    for ledger, entry in clip[::-1]:  # LRU order: the mark-delete ledger last
        acks, size = _read_ledger(txn, db, cursor_id, entry, ledger, seq, within)
        acks.size = acks.nbytes()
        decoded[ledger] = acks
        nbytes += size
    return decoded, set(index).difference(decoded), nbytes, set(decoded).difference((md_ledger,))


def _load_records(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    resolved: ResolvedMarker,
    budget: int | None,
    verify: str,
    lazy: bool,
    ends: Ends | None,
) -> tuple[dict[int, LedgerAcks], set[int], int, set[int]]:
    """Load records newest first until ``budget`` bytes are spent (None: all), or, ``lazy``,
    none that can wait.

    The mark-delete ledger is always loaded and loaded records are checksummed; a budget
    of 0 loads only it. A ledger read that does not fit the budget but holds state at or
    past its end (``ends``) is loaded all the same, as a lazy open decodes it: the cursor
    drops that state at open. ``lazy`` leaves it on disk too when its record and index entry
    show nothing at or below M + 1 (the record checked, its bitmap not decoded): the
    state is then as a flush left it, with nothing for the cursor to drop or to advance
    over at open, so it can wait for its first use like any other. A lazy open reads and
    checksums, without decoding, the records an eager one would have decoded (newest
    first, up to ``budget`` bytes of records), so damage there fails this marker at open
    either way. A state marker's ledgers (decoded with it, so checked) follow the same
    rule: those that can wait are left in the marker, read again at first use. The
    records left on disk beyond that are checked as ``verify`` says: ``"keys"``
    that each exists (one page touched per record), ``"all"`` read and checksummed too
    (O(state)), ``"loaded"`` not at all (a damaged one then surfaces at swap-in). Returns
    the loaded ledgers in LRU order (least recently written first), the swapped-out ids,
    the bytes read, and the ledgers loaded beyond the budget because they hold state past
    their end (the cursor drops it; they may then be evicted).
    """
    if lazy:
        return _load_lazily(txn, db, cursor_id, resolved, budget, verify, ends)
    md_ledger, index = resolved.marker.mark_delete[0], resolved.index
    # every ledger of a state marker is as new as the others (its order is kept)
    order = list(index.items()) if resolved.marker.ledgers is not None else _newest_first(list(index.items()))
    if len(order) > 1:
        order.sort(key=lambda kv: kv[0] != md_ledger)  # stable: the mark-delete ledger first
    loaded: list[tuple[int, LedgerAcks]] = []
    swapped: set[int] = set()
    spent = nbytes = 0
    full = budget is not None and budget <= 0  # the mark-delete ledger at most: the others wait
    left: list[tuple[int, IndexEntry]] = []
    forced: set[int] = set()
    last = _cut_candidate(index, md_ledger) if ends is not None else None
    for ledger, entry in order:
        if not full or ledger in (md_ledger, last):  # the last: read to see it is not cut
            acks, size = _read_ledger(txn, db, cursor_id, entry, ledger, resolved.seq, resolved.marker.ledgers)
            acks.size = acks.nbytes()
            if budget is not None and (full or spent + acks.size > budget) and ledger != md_ledger and loaded:
                full = True  # the first that does not fit ends the loading (it was checked anyway)
                if ends is None or not ends([(ledger, acks.highest())]):
                    swapped.add(ledger)
                    continue
                forced.add(ledger)
                # one holding state at or past its end stays, as a lazy open decodes it: the
                # cursor drops that state at open, so its range count and reads agree
            spent += acks.size
            nbytes += size
            loaded.append((ledger, acks))
        else:
            left.append((ledger, entry))
            swapped.add(ledger)
    _check_left(txn, db, cursor_id, resolved.seq, left, verify)
    # LRU order: least recently written first, the mark-delete ledger (loaded first) last
    split = 1 if loaded and loaded[0][0] == md_ledger else 0
    return dict(loaded[split:][::-1] + loaded[:split]), swapped, nbytes, forced


def _loaded(
    resolved: ResolvedMarker,
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    budget: int | None,
    verify: str,
    lazy: bool,
    ends: Ends | None,
) -> tuple[RecoveredState, int]:
    """The state marker ``resolved`` holds, its records loaded as :func:`recover_cursor`'s
    arguments say (:func:`_load_records`), and the bytes read. Raises CorruptRecordError."""
    ledgers, swapped, nbytes, forced = _load_records(txn, db, cursor_id, resolved, budget, verify, lazy, ends)
    if resolved.marker.ledgers is not None:  # a state marker: its ledgers decoded with it
        nbytes += resolved.full_bytes
    return RecoveredState(resolved, ledgers, swapped, forced=forced), nbytes


def recover_cursor(
    txn: LogTxn,
    db: lmdb._Database | None,
    cursor_id: int,
    budget: int | None,
    verify: str,
    lazy: bool = False,
    ends: Ends | None = None,
    at: int | None = None,
    newest: NewestMarker | None = None,
) -> RecoveredState:
    """Find the newest intact marker of ``cursor_id`` and load what it references; with
    ``at``, the newest at or below that sequence (what a reopen right after the flush that
    wrote marker ``at`` recovered: a history point's state; ``next_seq`` is then past it).
    ``newest``: the cursor's newest record as the caller found and resolved it already
    (:func:`newest_marker`: a marker newer than both state slots, their heads intact),
    recovered from without a look at the log again unless a record it names is damaged.

    With a ``budget``, records are loaded newest first until that many bytes of ack
    state are in memory; the rest are checked as ``verify`` says and stay swapped out.
    ``lazy``: none are loaded that can wait, those within the budget only read and
    checked (see :func:`_load_records`).
    """
    started = time.perf_counter()
    loading = (txn, db, cursor_id, budget, verify, lazy, ends)
    if newest is not None and at is None:
        try:
            first, nbytes = _loaded(newest.resolved, *loading)
        except CorruptRecordError:
            pass  # (the walk below reads the log, and says what it skipped)
        else:  # what the walk below makes of it: its first record is this marker
            seq = newest.resolved.seq
            first.next_seq, first.slot, first.slots = seq + 1, newest.slot, newest.slots
            first.report = RecoveryReport(seq, 0, (), len(first.ledgers), nbytes, time.perf_counter() - started)
            return first
    lo, hi = log_bounds(cursor_id)
    if at is not None:
        hi = log_key(cursor_id, at + 1)
    slots, skipped, held = read_slots(txn, db, cursor_id)
    if at is not None and slots:
        slots = [s for s in slots if s[0] <= at]
    keep_slot = slots[0][2] if slots else 1
    cur = txn.cursor(db=db)
    positioned = _at_newest(cur, cursor_id, hi)
    next_seq = 0
    state: RecoveredState | None = None
    met_marker = False
    while True:  # the log's records and the slots' state markers, newest first
        seq = split_log_key(cur.key())[1] if positioned and cur.key() >= lo else -1
        if slots and slots[0][0] > seq:
            seq, value, slot = slots.pop(0)
        elif seq < 0:
            break
        else:
            value, slot = cur.value(), -1
            positioned = cur.prev()
        if next_seq == 0:
            next_seq = seq + 1
        rtype = record_type(value)
        if rtype != RECORD_MARKER:
            # newer than every marker: a ledger record written back by eviction (normal), or
            # the newest marker made unreadable or disguised by damage (a flipped type byte):
            # checked, so that a fallback past a damaged newest marker is never silent
            if not met_marker:
                try:
                    decode_record(value)
                except CorruptRecordError as exc:
                    skipped.append(f"marker? record {seq} is damaged ({exc}); it may have been a newer marker")
        else:
            met_marker = True
            try:
                if newest is not None and newest.resolved.seq == seq:
                    resolved = newest.resolved
                else:
                    resolved = resolve_marker(txn, db, cursor_id, seq, value)
                state, nbytes = _loaded(resolved, *loading)
            except CorruptRecordError as exc:
                skipped.append(str(exc))
            else:
                loaded = (seq, len(state.ledgers), nbytes)
                if slot >= 0:  # the state recovered from: the next state marker keeps it
                    keep_slot = slot
                break
    if state is None:
        state = RecoveredState(None)
        loaded = (-1, 0, 0)
    state.next_seq = next_seq
    state.slot, state.slots = keep_slot, held
    marker_seq, records, nbytes = loaded
    skips = sum(1 for s in skipped if s.startswith("marker")) if skipped else 0  # "marker?" too: a damaged record
    state.report = RecoveryReport(marker_seq, skips, tuple(skipped), records, nbytes, time.perf_counter() - started)
    return state


def read_ledger_record(
    txn: lmdb.Transaction, db: lmdb._Database, cursor_id: int, ledger: int, entry: IndexEntry
) -> LedgerAcks:
    """Read and check one swapped-out ledger's record (for swap-in)."""
    try:
        acks, _ = _read_ledger(txn, db, cursor_id, entry, ledger, -1)
    except CorruptRecordError as exc:
        raise type(exc)(f"{str(exc).replace('marker -1: ', '')}; run 'ackstore check --fix' on the store") from None
    return acks


def log_usage(
    txn: lmdb.Transaction,
    db: lmdb._Database,
    cursor_id: int,
    marker_seq: int,
    keeps: tuple[int, frozenset[int]] | None = None,
    history_db: lmdb._Database | None = None,
) -> LogUsage:
    """Records and bytes of ``cursor_id`` in the log; live = referenced by marker
    ``marker_seq``; ``keeps``: what its history keeps besides (records from a sequence on,
    and those its full marker names: ``CursorHistory.keeps``), whose points in
    ``history_db`` are counted too. O(records + points)."""
    live: set[int] = set()
    if marker_seq >= 0:
        resolved = resolve_marker(txn, db, cursor_id, marker_seq)
        live = {e.seq for e in resolved.index.values()} | set(resolved.chain)
    kept_from, named = keeps if keeps is not None else (-1, frozenset())
    records = total = garbage = history = 0
    c = txn.cursor(db=db)
    start, end = log_bounds(cursor_id)
    ok = c.set_range(start)
    while ok and c.key() < end:
        size = len(c.key()) + len(c.value())
        records += 1
        total += size
        seq = split_log_key(c.key())[1]
        if seq not in live:
            if keeps is not None and (seq >= kept_from or seq in named):
                history += size
            else:
                garbage += size
        ok = c.next()
    for _, key, value in _slot_values(txn, db, cursor_id):  # a state slot's value is a record of the log
        size = len(key) + len(value)
        records += 1
        total += size
        if slot_seq(value)[0] not in live:
            garbage += size
    points = 0
    if keeps is not None and history_db is not None:
        points = sum(16 + len(value) for _, value in CursorLog(history_db, cursor_id).records(txn))
    return LogUsage(records, total, total - garbage - history, garbage, history + points)


class CursorLog:
    """The records of one cursor in the store's log database. Every method takes the
    transaction it works in (from :meth:`Environment.read` or :meth:`Environment.write`)."""

    __slots__ = ("db", "cursor_id")  # one a cursor, made at every open: nothing it does not need

    def __init__(self, db: lmdb._Database, cursor_id: int) -> None:
        self.db = db
        self.cursor_id = cursor_id

    def recover(
        self,
        txn: lmdb.Transaction,
        budget: int | None,
        verify: str,
        lazy: bool = False,
        ends: Ends | None = None,
        at: int | None = None,
        newest: NewestMarker | None = None,
    ) -> RecoveredState:
        """The newest intact marker (at or below sequence ``at``) and what it references
        (see :func:`recover_cursor`; ``newest``: its resolution, when the caller made it)."""
        return recover_cursor(txn, self.db, self.cursor_id, budget, verify, lazy, ends, at, newest)

    def newest(self, txn: lmdb.Transaction) -> int:
        """The highest sequence the log holds, under a log key or in a state slot whose
        head checks (-1: none): a flush of this cursor, or a write-back, raises it. O(1)."""
        c = txn.cursor(db=self.db)
        newest = split_log_key(c.key())[1] if _at_newest(c, self.cursor_id) else -1
        slots, _, _ = read_slots(txn, self.db, self.cursor_id)
        return max(newest, slots[0][0]) if slots else newest

    def read_ledger(self, txn: lmdb.Transaction, ledger: int, entry: IndexEntry) -> LedgerAcks:
        """A swapped-out ledger's record, checked against the index entry."""
        return read_ledger_record(txn, self.db, self.cursor_id, ledger, entry)

    def usage(
        self,
        txn: lmdb.Transaction,
        marker_seq: int,
        keeps: tuple[int, frozenset[int]] | None = None,
        history_db: lmdb._Database | None = None,
    ) -> LogUsage:
        """Records and bytes; live = referenced by ``marker_seq`` (see :func:`log_usage`). O(records)."""
        return log_usage(txn, self.db, self.cursor_id, marker_seq, keeps, history_db)

    def get(self, txn: lmdb.Transaction, seq: int) -> bytes | None:
        """Record ``seq``, under its log key or in a state slot (:func:`fetch_record`)."""
        return fetch_record(txn, self.db, self.cursor_id, seq)

    def put(self, txn: lmdb.Transaction, seq: int, value: bytes) -> None:
        txn.put(log_key(self.cursor_id, seq), value, db=self.db)

    def put_marker(self, txn: lmdb.Transaction, seq: int, value: bytes, slot: int = -1) -> int:
        """Put marker ``seq``, into state slot ``slot`` (-1: under its log key); the bytes
        of its key and value."""
        if slot < 0:
            key = log_key(self.cursor_id, seq)
        else:
            key = slot_key(self.cursor_id, slot)
            value = seal_slot(key, seq, value)
        txn.put(key, value, db=self.db)
        return len(key) + len(value)

    def records(self, txn: lmdb.Transaction) -> Iterator[tuple[int, bytes]]:
        """``(seq, value)`` of every record: those under log keys oldest first, then the
        state slots' (a slot whose sequence does not check comes as ``(-1, its value)``,
        which does not decode either)."""
        c = txn.cursor(db=self.db)
        start, end = log_bounds(self.cursor_id)
        ok = c.set_range(start)
        while ok and c.key() < end:
            yield split_log_key(c.key())[1], c.value()
            ok = c.next()
        for _, key, value in _slot_values(txn, self.db, self.cursor_id):
            try:
                seq, record = open_slot(key, value)
            except CorruptRecordError:
                seq, record = -1, value
            yield seq, bytes(record)

    def drop(self, txn: lmdb.Transaction) -> None:
        """Delete every record of this cursor (it is being deleted). O(records)."""
        c = txn.cursor(db=self.db)
        start, end = log_bounds(self.cursor_id)
        ok = c.set_range(start)
        while ok and c.key() < end:
            ok = c.delete()
        for slot in SLOTS:
            txn.delete(slot_key(self.cursor_id, slot), db=self.db)

    def trim(self, txn: lmdb.Transaction, below: int, keep: frozenset[int] = frozenset()) -> int:
        """Delete the records below sequence ``below`` that ``keep`` does not name; how many."""
        return trim_records(txn.cursor(db=self.db), self.cursor_id, below, keep)


def trim_records(c: lmdb.Cursor, cursor_id: int, below: int, keep: Collection[int] = ()) -> int:
    """Delete with LMDB cursor ``c`` (over the log database, in a write transaction) cursor
    ``cursor_id``'s records below sequence ``below`` that ``keep`` does not name, in its
    state slots too; how many.
    A group flush trims many cursors' garbage with one LMDB cursor. O(records below)."""
    end = log_key(cursor_id, below)
    kept = {log_key(cursor_id, seq) for seq in keep if seq < below}  # compared as keys: nothing to split
    trimmed = 0
    ok = c.set_range(log_bounds(cursor_id)[0])
    while ok:
        key = c.key()
        if key >= end:
            break
        if key in kept:
            ok = c.next()
        else:
            ok = c.delete()  # and on to the next record
            trimmed += 1
    for slot in SLOTS:  # a state slot's marker below the bound, unless kept (a sequence it cannot read: left to check)
        if c.set_key(slot_key(cursor_id, slot)):
            value = c.value()
            seq = slot_seq(value)[0]
            if 0 <= seq < below and seq not in keep:
                c.delete()
                trimmed += 1
    return trimmed


class MemoryLog:
    """A read-only stand-in for a transaction over the log database, holding records found
    outside the B-tree (a page scan): recovery runs over it as over LMDB."""

    def __init__(self, items: dict[bytes, bytes]) -> None:
        self.keys = sorted(items)
        self.items = items

    def get(self, key: bytes, db: object = None) -> bytes | None:
        return self.items.get(key)

    def cursor(self, db: object = None) -> _MemoryCursor:
        return _MemoryCursor(self)


class _MemoryCursor:
    def __init__(self, log: MemoryLog) -> None:
        self.log = log
        self.i = -1

    def _ok(self) -> bool:
        return 0 <= self.i < len(self.log.keys)

    def set_range(self, key: bytes) -> bool:
        self.i = bisect_left(self.log.keys, key)
        return self._ok()

    def set_key(self, key: bytes) -> bool:
        return self.set_range(key) and self.log.keys[self.i] == key

    def get(self, key: bytes) -> bytes | None:
        """``key``'s value, the cursor left at it (None, and unplaced, when there is none)."""
        return self.value() if self.set_key(key) else None

    def last(self) -> bool:
        self.i = len(self.log.keys) - 1
        return self._ok()

    def prev(self) -> bool:
        self.i -= 1
        return self._ok()

    def next(self) -> bool:
        self.i += 1
        return self._ok()

    def key(self) -> bytes:
        return self.log.keys[self.i]

    def value(self) -> bytes:
        return self.log.items[self.log.keys[self.i]]
