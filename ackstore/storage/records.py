"""Record codec: keys of the per-cursor log, ledger records and marker records.

Record values (format 6) start with a fixed envelope, then the body::

    offset  size  field
    0       1     0xC1 (a byte msgpack never writes: formats 1-5 started with 0x94)
    1       1     record type (1 ledger, 2 marker; the catalog uses others)
    2       1     format version that wrote it
    3       4     crc32 of the body, seeded with ``type << 8 | version`` (little-endian)
    7       ...   body

Formats 1-5 wrote ``msgpack([type, format_version, crc32(body), body])``: 3 bytes more a
record; both read. A body is msgpack bytes, except a *delta marker's* (below). A record
whose checksum or decoding fails is reported as :class:`~ackstore.errors.CorruptRecordError`
and treated by recovery as absent.

A marker that is not truncated (the one written by every flush) has a fixed layout,
little-endian, when every field fits 32 bits (otherwise, and for a PIP-299 truncated
marker, it is written as a msgpack array); the envelope's format version says which
layout (formats 6-8 wrote delta markers only in it, without the flags byte)::

    0xC1                                         (a msgpack body never starts with it)
    (format 9) flags                             (u8: 0x01 a full marker; no other bit is set)
    prev, md ledger, md entry + 1, rp ledger, rp entry + 1, cursor id, items   (6 x u32, u16)
                   (prev 0xFFFFFFFF: none, a full marker of a cursor's first state)
    then per item: ledger, seq + 1 (0: the ledger vanished), runs, adds        (3 x u32, u16)
                   and (format 7) counts                                       (u16)
                   then ``adds`` x u32: the entries acked since that record, ascending
                   then ``counts`` x (entry, count): delivery counts set since  (2 x u32)
    then the properties as a msgpack map, when there are any

An item's ``runs`` is the range count of the record with the acks since it (what a reader
checks). From format 15 a marker may go on naming the mark-delete ledger's record after the
mark-delete position moved past acks in it: the record and the acks since then hold that
ledger's entries from the one after the position the record was written at up to the
position, one range counted with the others; a reader checks the count, then drops what
lies at or below the position, as for any record of that ledger.

A small cursor's flush (format 10) writes its whole state as one full marker in the
*state layout*: its ledgers inside it, so the cursor's log holds one value where the
marker layout needs a ledger record per ledger too. The marker's index entries name the
marker's own sequence (it is each ledger's record). Varints are little-endian base 128;
an entry is written as the gap from the one before (from the mark-delete entry + 1 in the
mark-delete ledger, from 0 in any other)::

    0xC2                                          (neither msgpack nor the fixed layout)
    flags                                         (u8: 0x01 properties follow the ledgers,
                                                   0x02 each ledger lists partial batches,
                                                   0x04 each ledger lists delivery counts,
                                                   0x08 (format 16) the state holds only the
                                                   lowest ranges a flush persists: PIP-299)
    cursor id, md ledger, md entry + 1, ledgers   (varints)
    then per ledger, ascending, none below the mark-delete ledger:
        ledger - (previous ledger + 1; the first: - md ledger), runs       (varints)
        per run: gap to its first entry, its length - 1                    (varints;
                 the gap after a run counts from its last entry + 2)
        (0x02) batches, then per batch: entry gap, batch size, the mask    ((size + 7) // 8
               bytes, little-endian; bit i: batch index i acked)
        (0x04) counts, then per count: entry gap, count - 1                (varints)
    then (0x01) the properties as a msgpack map

A steady consumer's flush (the mark-delete position and a few holes above it) writes at
most 48 bytes a cursor, key included (``tests/test_state_layout.py`` holds it to that).

Delivery counts (format 7) are a flat msgpack list ``[entry, count, ...]``, entries
ascending, counts >= 1, never for an acknowledged entry: a ledger record's ninth field
(the counts when it was written) and a msgpack marker index item's fifth (the counts set
since that ledger's record; the newest marker naming an entry wins); a fixed-layout delta
marker carries them as pairs of u32. A full marker's items are its whole index (no dropped
ledger), each with the acks and counts since that ledger's record.

The read position fields of both marker forms are never used: the read position is not
persisted (a restart reads again from the mark-delete position + 1, as Pulsar does); a
writer stores M + 1 there and open ignores whatever an older writer stored.

Log keys are ``struct('>QQ')`` of ``(cursor id, sequence)``: big-endian, so
LMDB's key order is the log order and a reverse scan reads back to front.

State slots (format 12): a small cursor that keeps no history writes its state markers
into two *slots* instead, after every log key in the same database, and alternates
between them, so that its newest state and the one before it (to fall back to) are both
kept without a trim, and a flush of many steady cursors rewrites one slot of each: values
that sit together on a few pages, not the one or two pages per cursor its own keys would
dirty. A slot's key and value::

    key    0xFF, slot (u8: 0 or 1), cursor id (u64)         10 bytes, big-endian; no log
                                                            key starts with 0xFF (cursor
                                                            ids stay below 2**63)
    value  seq (varint), crc32(key + those varint bytes) (u32, big-endian), any number of
           zero bytes (room: this release pads every value to a multiple of 16 bytes,
           and a slot's first value reserves 8 more), then the state marker record (its
           envelope and its own checksum, as in the log: it starts with 0xC1)

Recovery reads a cursor's two slots with its log keys, newest sequence first.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from operator import sub
from typing import Any

import msgpack
from pyroaring import BitMap, FrozenBitMap

from ..errors import CorruptRecordError
from ..ledger_acks import NO_ENTRIES, LedgerAcks
from . import codecs
from .bitmaps import decode_bitmap, encode_bitmap
from .index_entry import IndexEntry, entry_of
from .pure_codecs import ENVELOPE, FIXED_HEAD, STATE_TRUNCATED, seal_envelope

__all__ = [
    "FORMAT_VERSION",
    "RECORD_LEDGER",
    "RECORD_MARKER",
    "IndexEntry",
    "entry_of",
    "Marker",
    "log_key",
    "log_bounds",
    "split_log_key",
    "SLOT_PREFIX",
    "slot_key",
    "log_keys_of",
    "names_line",
    "split_slot_key",
    "seal_slot",
    "SLOT_ALIGN",
    "SLOT_RESERVE",
    "first_slot_value",
    "slot_seq",
    "slot_padding",
    "slot_room",
    "open_slot",
    "log_entry",
    "encode_record",
    "open_record",
    "decode_record",
    "record_type",
    "encode_ledger",
    "decode_ledger",
    "decode_ledger_owned",
    "expected_ledger",
    "ledger_span",
    "encode_marker",
    "encode_fixed_marker",
    "FIXED_FULL",
    "pack_properties",
    "unpack_properties",
    "MarkerItem",
    "encode_state_marker",
    "state_ledger",
    "decode_marker",
]

FORMAT_VERSION = 16
"""2 added the Rice-coded gap payload (flag ``_RICE``); 3 checksummed the catalog (see
``catalog.py``) and put the cursor id in every marker; 4 added the open ledger's last
confirmed entry to the catalog and string values to marker properties; 5 lets a marker's
index entry carry the acks made since the ledger's record (``IndexEntry.adds``). Records of
1-4 read unchanged; 6 has the fixed envelope and the fixed delta marker layout (see the
module docstring). Records of 1-5 read unchanged. 7 adds delivery counts: a ledger record's
ninth field and an index item's fifth (``[entry, count, ...]`` flat); a delta marker's items
gain a u16 count of them. Records of 1-6 read unchanged. 8 adds the stride code of a ledger
record's payload (``bitmaps._STRIDE``). Records of 1-7 read unchanged. 9 writes full markers
in the fixed layout too (a flags byte after the tag says which). Records of 1-8 read
unchanged. 10 adds the state layout: a small cursor's whole state in one full marker, its
ledgers inside it (see the module docstring). Records of 1-9 read unchanged. 11 adds the
``history`` database (``ackstore/history.py``): an older ackstore would trim a history
cursor's kept states away, so it must refuse the store. Records of 1-10 read unchanged. 12
adds the state slots (see the module docstring). 13 checksums history points and adds the
store's flush clock to the history database (``ackstore/history.py``): records of 1-12 and
points of 11-12 read unchanged. 14 adds the Elias-Fano codes (``bitmaps.py``). 15 lets a
marker go on naming M's ledger's record after M moved past acks in it (the module
docstring): records of 1-14 read unchanged; an older release would take such a chain into
its small form without the range the record holds at or below M, and count wrong. 16 adds a
state marker's flag 0x08, a state that holds only the lowest ranges a flush persists
(PIP-299), which an older release refuses as damage: records of 1-15 read unchanged."""
RECORD_LEDGER = 1
RECORD_MARKER = 2

_KEY = struct.Struct(">QQ")


def log_key(cursor_id: int, seq: int) -> bytes:
    """Key of record ``seq`` in cursor ``cursor_id``'s log."""
    return _KEY.pack(cursor_id, seq)


def log_bounds(cursor_id: int) -> tuple[bytes, bytes]:
    """The first key of cursor ``cursor_id``'s log and the first key past it (its state
    slots are elsewhere: after every log key)."""
    return _KEY.pack(cursor_id, 0), _KEY.pack(cursor_id + 1, 0)


def split_log_key(key: bytes) -> tuple[int, int]:
    """``(cursor id, sequence)`` of a log key; :class:`CorruptRecordError` when ``key`` is
    not one (a damaged node's key size: the tree's key, not 16 bytes)."""
    try:
        return _KEY.unpack(key)  # type: ignore[return-value]
    except struct.error:
        raise CorruptRecordError(
            f"a log key of {len(key)} bytes (a log key has {_KEY.size}): {bytes(key)[:24].hex()}"
        ) from None


SLOT_PREFIX = b"\xff"
"""what every state slot's key starts with (and no log key does)"""
_SLOT_KEY = struct.Struct(">1sBQ")
_CRC = struct.Struct(">I")


def slot_key(cursor_id: int, slot: int) -> bytes:
    """Key of cursor ``cursor_id``'s state slot ``slot`` (0 or 1)."""
    return _SLOT_KEY.pack(SLOT_PREFIX, slot, cursor_id)


_SLOT_HEADS = (slot_key(0, 0)[:2], slot_key(0, 1)[:2])  # (the slot keys' first bytes; the cursor id follows)
_U64 = struct.Struct(">Q")


def log_keys_of(cursor_id: int) -> tuple[bytes, bytes, bytes]:
    """What a look at cursor ``cursor_id``'s log starts from, made in one go (a bulk open
    looks at every cursor's): the 8 bytes every one of its log keys starts with (and no
    other key of the log database: a state slot's starts with :data:`SLOT_PREFIX`), and the
    keys of its state slots 0 and 1 (:func:`slot_key`'s). O(1)."""
    cid = _U64.pack(cursor_id)
    return cid, _SLOT_HEADS[0] + cid, _SLOT_HEADS[1] + cid


def split_slot_key(key: bytes) -> tuple[int, int] | None:
    """``(cursor id, slot)`` of a state slot's key; None for any other key."""
    if len(key) != _SLOT_KEY.size or not key.startswith(SLOT_PREFIX):
        return None
    _, slot, cid = _SLOT_KEY.unpack(key)
    return (cid, slot) if slot < 2 else None


SLOT_ALIGN = 16
"""a state slot's value is a multiple of this many bytes long (a slot's first value
:data:`SLOT_RESERVE` more): zero bytes of room before its record make it up
(:func:`slot_padding`). A state that grows or shrinks by a few bytes keeps its length, and
LMDB writes a value of the length it replaces over the old one in place; a value of another
length is taken out of its page and put back, every value after it on the page moved twice.
On the steady workload at k=10 (values of ~40 bytes that vary by a few) 70 % of the slots'
values changed length from one write to the next; padded to 16 bytes 0.2 % do (to 8 bytes,
29 %), and the flush's CPU falls by a fifth."""

SLOT_RESERVE = 8
"""zero bytes a slot's first value carries before its record, on top of its padding: the
values a flush of new cursors puts in order fill their pages, and the room their later,
smaller values leave takes a value that grows (else the page it fills splits in half and
stays about half empty, which a flush of every cursor then writes whole). On the steady
workload (1,000 cursors, 200 flushes) the 2,000 values stay on the 30-31 pages their first
two flushes filled; with none, on 26 that split to 46-51 as the entries' varints grow; with
16, on 34. Less than :data:`SLOT_ALIGN`, so a value's length tells a slot's first value
(:func:`first_slot_value`)."""


def slot_padding(length: int) -> int:
    """The zero bytes of room a state slot's value of ``length`` bytes (its room for a first
    value not counted) takes more, up to the next multiple of :data:`SLOT_ALIGN`
    (``slot_padding`` in ``ackstore/_native.h``, the same rule). A value of at most 1,997
    bytes (the largest state a slot holds, with its head) stays at most 2,008 with its
    reserve, under the 2,020 bytes an LMDB leaf page of 4 KiB holds beside a 10-byte key. O(1)."""
    return -length % SLOT_ALIGN


def first_slot_value(value: bytes) -> bool:
    """Whether ``value``, a state slot's value :func:`seal_slot` made, is a slot's first (it
    carries :data:`SLOT_RESERVE` bytes of room more than its padding). O(1)."""
    return len(value) % SLOT_ALIGN == SLOT_RESERVE


def seal_slot(key: bytes, seq: int, record: bytes, reserve: int = 0) -> bytes:
    """The value of state slot ``key`` holding ``record``, the state marker of sequence
    ``seq``, with ``reserve`` zero bytes of room before it, and as many more as make its
    length without them a multiple of :data:`SLOT_ALIGN` (:func:`slot_padding`)."""
    head = bytearray()
    while seq > 0x7F:
        head.append(seq & 0x7F | 0x80)
        seq >>= 7
    head.append(seq)
    reserve += slot_padding(len(head) + _CRC.size + len(record))
    return bytes(head) + _CRC.pack(zlib.crc32(key + head)) + bytes(reserve) + record


def slot_seq(value: bytes | memoryview) -> tuple[int, int]:
    """``(sequence, where its check starts)`` a state slot's value names, unchecked
    (``(-1, 0)`` when it does not hold a whole varint). O(1)."""
    seq = shift = 0
    for i in range(min(len(value), 10)):
        byte = value[i]
        seq |= (byte & 0x7F) << shift
        if byte < 0x80:
            return seq, i + 1
        shift += 7
    return -1, 0


def slot_room(key: bytes, value: bytes) -> int:
    """The zero bytes of room state slot ``key``'s ``value`` reserves (a slot's first value
    does). Raises CorruptRecordError."""
    try:
        _, start = codecs.slot_head(key, value)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    return start - slot_seq(value)[1] - _CRC.size


def open_slot(key: bytes, value: bytes | memoryview) -> tuple[int, bytes | memoryview]:
    """``(sequence, state marker record)`` of state slot ``key``'s ``value``, its sequence
    checked (:func:`ackstore.storage.codecs.slot_head`; the record checks itself when
    decoded). Raises CorruptRecordError."""
    try:
        seq, start = codecs.slot_head(key, value)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    return seq, value[start:]


def log_entry(key: bytes, value: bytes) -> tuple[int, int, bytes | memoryview]:
    """``(cursor id, sequence, record)`` of an entry of the log database, under a log key or
    in a state slot (its head checked). Raises CorruptRecordError."""
    slotted = split_slot_key(key)
    if slotted is None:
        cid, seq = split_log_key(key)
        return cid, seq, value
    seq, record = open_slot(key, value)
    return slotted[0], seq, record


def encode_record(rtype: int, body: bytes) -> bytes:
    return seal_envelope(rtype, FORMAT_VERSION, body)


def open_record(value: bytes | memoryview) -> tuple[int, int, bytes]:
    """Check one record's envelope and checksum: ``(type, format version, body bytes)``.
    Raises CorruptRecordError."""
    if value[:1] == b"\xc1":
        try:
            return codecs.open_envelope(value, FORMAT_VERSION)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise CorruptRecordError(str(exc)) from None
    try:  # formats 1-5: a msgpack array
        rtype, version, crc, body = msgpack.unpackb(value)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CorruptRecordError(f"record does not decode: {exc}") from None
    if not isinstance(body, bytes) or type(crc) is not int or type(version) is not int or type(rtype) is not int:
        raise CorruptRecordError("record envelope has the wrong shape")  # a flipped bit can make any field a list
    if version > FORMAT_VERSION:
        raise CorruptRecordError(f"record format {version} is newer than this ackstore reads ({FORMAT_VERSION})")
    if zlib.crc32(body) != crc:
        raise CorruptRecordError("record checksum mismatch")
    return rtype, version, body


def decode_record(value: bytes | memoryview) -> tuple[int, Any]:
    """Check and decode one record: ``(type, body object)``; a fixed-layout body (a delta
    marker's) comes back as its bytes. Raises CorruptRecordError."""
    rtype, _, body = open_record(value)
    if body[:1] in (b"\xc1", b"\xc2"):  # the fixed and the state layout
        return rtype, body
    return rtype, _unpack_body(body)


def _unpack_body(body: bytes) -> Any:
    try:
        return msgpack.unpackb(body, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecordError(f"record body does not decode: {exc}") from None


def record_type(value: bytes | memoryview) -> int | None:
    """The type field of a record without checking it (None if unreadable). Cheap."""
    if value[:1] == b"\xc1":
        return value[1] if len(value) >= ENVELOPE.size else None
    try:
        unpacker = msgpack.Unpacker()
        unpacker.feed(bytes(value[:16]))
        size = unpacker.read_array_header()
        if size != 4:
            return None
        rtype = unpacker.unpack()
        return rtype if isinstance(rtype, int) else None
    except Exception:
        return None


def encode_ledger(ledger: int, acks: LedgerAcks, cursor_id: int | None = None) -> bytes:
    """A ledger record: the ledger id, its encoded ack bitmap, its run count, partial batches,
    and (format 3) the id of the cursor it belongs to."""
    flags, first, last, payload = encode_bitmap(acks.bitmap, acks.runs)
    batches = [
        [entry, size, mask.to_bytes((size + 7) // 8, "little")] for entry, (size, mask) in sorted(acks.batches.items())
    ]
    fields = [ledger, flags, first, last, payload, acks.runs, batches]
    if cursor_id is not None:
        fields.append(cursor_id)
        if acks.counts:
            fields.append(flat_counts(acks.counts))
    return encode_record(RECORD_LEDGER, msgpack.packb(fields))


def flat_counts(counts: dict[int, int]) -> list[int]:
    """Delivery counts as msgpack writes them: ``[entry, count, ...]``, entries ascending."""
    entries = sorted(counts)
    flat = entries * 2
    flat[::2] = entries
    flat[1::2] = map(counts.__getitem__, entries)
    return flat


def parse_counts(flat: Any) -> dict[int, int]:
    """:func:`flat_counts` back; CorruptRecordError unless entries ascend and counts are >= 1."""
    if not isinstance(flat, list) or len(flat) % 2 or not all(type(x) is int for x in flat):
        raise CorruptRecordError(f"delivery counts {str(flat)[:60]} are not [entry, count, ...] ints")
    counts = dict(zip(flat[::2], flat[1::2], strict=True))
    entries = flat[::2]
    if any(not 0 <= e < 1 << 32 for e in entries) or any(b <= a for a, b in pairwise(entries)):
        raise CorruptRecordError("delivery counts' entries are not ascending 32-bit entry ids")
    if any(not 1 <= c < 1 << 32 for c in counts.values()):
        raise CorruptRecordError("a delivery count is not in 1..2**32-1")
    return counts


def _ledger_body(value: bytes | memoryview) -> Any:
    """A ledger record's body, its envelope and checksum checked. Raises CorruptRecordError."""
    rtype, body = decode_record(value)
    if rtype != RECORD_LEDGER:
        raise CorruptRecordError(f"expected a ledger record, found type {rtype}")
    return body


def ledger_span(value: bytes | memoryview) -> tuple[int, int, int, int, int | None]:
    """``(ledger, lowest, highest, runs, cursor id or None)`` of a ledger record: the lowest
    and highest entry holding any state (first and last ack, partial batches, delivery
    counts; 2**32 and -1 when none) and the run count it states, read from its fields
    without decoding its bitmap (compiled where built: ``codecs.ledger_span``), the
    record's envelope and checksum checked. Raises CorruptRecordError."""
    try:
        return codecs.ledger_span(value, RECORD_LEDGER, FORMAT_VERSION)
    except ValueError as exc:
        if value[:1] == b"\xc1":
            raise CorruptRecordError(str(exc)) from None
    rtype, _, body = open_record(value)  # formats 1-5: the msgpack envelope
    if rtype != RECORD_LEDGER:
        raise CorruptRecordError(f"expected a ledger record, found type {rtype}")
    try:
        return codecs.ledger_fields(body)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None


def decode_ledger(value: bytes | memoryview) -> tuple[int, LedgerAcks]:
    """``(ledger, acks)`` of a ledger record. Raises CorruptRecordError."""
    ledger, acks, _ = decode_ledger_owned(value)
    return ledger, acks


def decode_ledger_owned(value: bytes | memoryview, one_pass: bool = True) -> tuple[int, LedgerAcks, int | None]:
    """``(ledger, acks, cursor id or None)``: formats 1 and 2 did not record the cursor. A
    record of acks only is read in one pass (``codecs.ledger_acks``); any other, or damage,
    the long way, which names what is wrong. ``one_pass=False``: the caller tried the one
    pass on ``value`` already (:func:`expected_ledger`), so it is not tried again."""
    quick = codecs.ledger_acks(value, RECORD_LEDGER, FORMAT_VERSION) if one_pass else None
    if quick is not None:
        ledger, acks, runs, owner = quick
        return ledger, LedgerAcks.of_runs(BitMap.deserialize(acks), runs, NO_ENTRIES, NO_ENTRIES), owner
    return _ledger_the_long_way(value)


def expected_ledger(value: bytes | memoryview, ledger: int, cursor_id: int, runs: int) -> LedgerAcks | None:
    """Ledger ``ledger``'s acks from a record of acks only read in one pass
    (``codecs.ledger_acks``) when it holds exactly what a marker expects: that ledger, of
    cursor ``cursor_id``, with ``runs`` ranges; tracking acks from there on (``added``, as
    a base record read for a cursor does). None for any other record: the caller reads it
    the long way, which names any damage or difference."""
    quick = codecs.ledger_acks(value, RECORD_LEDGER, FORMAT_VERSION)
    if quick is None or quick[0] != ledger or quick[2] != runs or quick[3] != cursor_id:
        return None
    acks = LedgerAcks.of_runs(BitMap.deserialize(quick[1]), runs, NO_ENTRIES, NO_ENTRIES)
    acks.added = BitMap()
    return acks


def _ledger_the_long_way(value: bytes | memoryview) -> tuple[int, LedgerAcks, int | None]:
    """:func:`decode_ledger_owned` of any record: its envelope, its body's fields one by one,
    its bitmap decoded (:func:`decode_bitmap`), then its batches and counts."""
    body = _ledger_body(value)
    try:
        owner = body[7] if len(body) in (8, 9) else None
        ledger, flags, first, last, payload, runs, batches = body[:7]
        bm = decode_bitmap(flags, first, last, payload)
        parsed = {int(e): (int(s), int.from_bytes(m, "little")) for e, s, m in batches} if batches else {}
        counts = parse_counts(body[8]) if len(body) == 9 else None
    except Exception as exc:
        raise CorruptRecordError(f"ledger record body has the wrong shape: {exc}") from None
    if counts and any(e in bm for e in counts):
        raise CorruptRecordError(f"ledger {ledger} record counts deliveries of an acknowledged entry")
    acks = LedgerAcks(bm, parsed, counts)
    if acks.runs != runs:
        raise CorruptRecordError(f"ledger {ledger} record says {runs} runs, bitmap has {acks.runs}")
    return int(ledger), acks, owner


@dataclass(slots=True)
class Marker:
    """A commit point of one cursor.

    ``full`` markers carry the whole ``index``; delta markers carry only the
    ledgers that changed since ``prev`` (``None`` for a ledger that vanished).
    """

    full: bool
    prev: int  # sequence of the previous marker, -1 for none
    mark_delete: tuple[int, int]
    read_position: tuple[int, int]
    properties: dict[str, int | str]
    index: dict[int, IndexEntry | None]
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    ledgers: dict[int, LedgerAcks] | None = None
    """(format 10) a state marker's ledgers: it is its index's record of each (their index
    entries name the marker's own sequence); None for any other marker"""


def encode_marker(marker: Marker) -> bytes:
    """A marker record. Its body (format 5) is a msgpack array, not a map: ``[full, prev,
    md ledger, md entry, rp ledger, rp entry, properties, index, truncated, cursor id]``
    (no key names: the common delta marker of one changed ledger is ~40 bytes)."""
    index = [_index_item(ledger, e) for ledger, e in sorted(marker.index.items())]
    md, rp = marker.mark_delete, marker.read_position
    body = msgpack.packb(
        [
            marker.full,
            marker.prev,
            md[0],
            md[1],
            rp[0],
            rp[1],
            marker.properties,
            index,
            marker.truncated,
            marker.extra.get("c", -1),
        ]
    )
    return encode_record(RECORD_MARKER, body)


MarkerItem = tuple[int, "IndexEntry | None"] | tuple[int, "IndexEntry", "FrozenBitMap | None"]
"""an item of a marker to encode: ``(ledger, entry)``, or ``(ledger, entry, named)`` whose
``named`` adds the marker leaves out (the chain named them already)"""

FIXED_FULL = 0x01
"""the fixed layout's flag of a full marker, whose index is the cursor's whole index
(codecs.fixed_marker writes the layout)"""


def encode_fixed_marker(
    prev: int,
    mark_delete: tuple[int, int],
    read_position: tuple[int, int],
    properties: dict[str, int | str],
    items: Sequence[MarkerItem],
    cursor_id: int,
    full: bool = False,
) -> bytes:
    """A marker that is not truncated, in the fixed layout of the module docstring: a delta
    marker (``items``: the ledgers changed since ``prev``) or with ``full`` a full one (the
    whole index; no ``None`` items); ``items`` ascending by ledger, each ``(ledger, entry)``
    or ``(ledger, entry, named)`` to leave out of ``entry``'s adds those ``named`` already
    (a delta marker's). Encoded by :func:`ackstore.storage.codecs.fixed_marker`; a field that
    does not fit the layout (an id or sequence of 2**32 or more, 65,536 items, adds or
    counts) falls back to :func:`encode_marker`'s msgpack array. O(items + adds + counts)."""
    md_l, md_e = mark_delete
    props = pack_properties(properties)
    try:
        return codecs.fixed_marker(
            FORMAT_VERSION, FIXED_FULL if full else 0, prev, md_l, md_e, *read_position, cursor_id, items, props
        )
    except OverflowError:
        index = {item[0]: _named_out(item) for item in items}
        marker = Marker(full, prev, mark_delete, read_position, properties, index, extra={"c": cursor_id})
        return encode_marker(marker)


def _named_out(item: MarkerItem) -> IndexEntry | None:
    """An item's entry, less the adds its ``named`` part says were named already."""
    entry = item[1]
    named = item[2] if len(item) > 2 else None
    if entry is None or not entry.adds or not named:
        return entry
    return entry._replace(adds=entry.adds - named)


def _decode_fixed(body: bytes, version: int) -> Marker:
    """The fixed-layout marker of :func:`encode_fixed_marker` (decoded by
    :func:`ackstore.storage.codecs.delta_fields`; format 7's items carry counts, format 9's
    head a flags byte: formats 6-8 wrote delta markers only)."""
    try:
        flags, prev, md_l, md_e, rp_l, rp_e, cid, items, end = codecs.delta_fields(body, version)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    deserialize = FrozenBitMap.deserialize
    index: dict[int, IndexEntry | None] = {
        ledger: entry_of((seq, runs, deserialize(adds) if adds is not None else None, _checked(counts)))
        if seq >= 0
        else None
        for ledger, seq, runs, adds, counts in items
    }
    full = bool(flags & FIXED_FULL)
    if full and None in index.values():
        raise CorruptRecordError("a full marker names a ledger as dropped")
    props = _tail_properties(body, end)
    if prev == codecs.NO_PREV:
        prev = -1  # (none: the msgpack form's -1)
    return Marker(full, prev, (md_l, md_e), (rp_l, rp_e), props, index, False, {"c": cid})


def pack_properties(properties: dict[str, int | str]) -> bytes:
    """A marker's properties as it writes them after its ledgers: a msgpack map (b"": none)."""
    return msgpack.packb(properties) if properties else b""


def unpack_properties(packed: bytes) -> dict[str, int | str]:
    """:func:`pack_properties`'s bytes as the properties they hold (b"": none); a dict of
    its own. CorruptRecordError when they are not a map of str to int or str."""
    return _tail_properties(packed, 0)


def _tail_properties(body: bytes, end: int) -> dict[str, int | str]:
    """The properties a fixed- or state-layout marker body ends with, from ``end`` (none
    when nothing follows). Raises CorruptRecordError."""
    if end >= len(body):
        return {}
    try:
        return _properties(msgpack.unpackb(body[end:]))
    except CorruptRecordError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types; a list has no .items()
        raise CorruptRecordError(f"a marker's properties do not decode: {exc}") from None


def _checked(counts: dict[int, int] | None) -> dict[int, int] | None:
    if counts and not all(n >= 1 for n in counts.values()):
        raise CorruptRecordError("a delivery count is 0")
    return counts


def _index_item(ledger: int, e: IndexEntry | None) -> list[Any]:
    """A marker's index item: ``[ledger, seq, runs]`` (seq -1: the ledger vanished), and
    since format 5 the acks since that record as a fourth item: the first entry, then the
    gaps to each next one (small ints, 1-3 bytes each in msgpack)."""
    if e is None:
        return [ledger, -1, 0]
    if e.adds is None and not e.counts:
        return [ledger, e.seq, e.runs]
    values = e.adds.to_array() if e.adds is not None else []
    item = [ledger, e.seq, e.runs, [values[0], *map(sub, values[1:], values[:-1])] if values else []]
    if e.counts:
        item.append(flat_counts(e.counts))
    return item


def _index_entry(item: list[Any]) -> IndexEntry | None:
    """A msgpack marker's index item as its entry (None: the ledger vanished). The common
    item, ``[ledger, seq, runs]`` of ints, takes no more than a tuple made (``entry_of``)."""
    if len(item) == 3:
        seq, runs = item[1], item[2]
        if type(seq) is int and type(runs) is int:
            return entry_of((seq, runs, None, None)) if seq >= 0 else None
    _, seq, runs, *rest = item
    if seq < 0:
        return None
    adds = None
    if rest:
        try:  # array('I') refuses anything but ints in 0..2**32-1: damage, not a crash
            adds = FrozenBitMap(array("I", accumulate(rest[0])))
        except (TypeError, OverflowError) as exc:
            raise CorruptRecordError(f"an index entry's adds are not a list of gaps ({exc})") from None
    counts = parse_counts(rest[1]) if len(rest) > 1 else None
    return entry_of((int(seq), int(runs), adds, counts or None))


def _properties(raw: Any) -> dict[str, int | str]:
    """A marker's properties: str keys, int or str values (anything else is damage)."""
    out: dict[str, int | str] = {}
    for key, value in raw.items():
        if type(key) is not str or type(value) not in (int, str):
            raise CorruptRecordError(f"a property {key!r} = {value!r} is neither an int nor a str")
        out[key] = value
    return out


def encode_state_marker(
    cursor_id: int,
    mark_delete: tuple[int, int],
    properties: dict[str, int | str],
    ledgers: Iterable[tuple[int, LedgerAcks]],
    truncated: bool = False,
) -> bytes:
    """A state marker (format 10, the state layout of the module docstring): the mark-delete
    position, the properties and every ledger's acks, partial batches and delivery counts,
    ``ledgers`` ascending, none below the mark-delete ledger (``truncated``: they hold only the
    lowest ranges a flush persists, PIP-299, format 16). Encoded by
    :func:`ackstore.storage.codecs.state_marker`. O(ledgers + runs + batches + counts)."""
    props = pack_properties(properties)
    return codecs.state_marker(
        FORMAT_VERSION,
        cursor_id,
        mark_delete[0],
        mark_delete[1],
        [(ledger, la.bitmap, la.batches, la.counts) for ledger, la in ledgers],
        props,
        truncated,
    )


def _decode_state(body: bytes, seq: int) -> Marker:
    """The state marker of :func:`encode_state_marker` stored as record ``seq`` (its index
    entries name that sequence). Raises CorruptRecordError."""
    try:
        cid, md_l, md_e, items, end = codecs.state_fields(body)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    ledgers: dict[int, LedgerAcks] = {}
    index: dict[int, IndexEntry | None] = {}
    for ledger, runs, batches, counts in items:
        bm = BitMap()
        for i in range(0, len(runs), 2):  # maximal runs: the layout keeps a gap between two
            bm.add_range(runs[i], runs[i + 1] + 1)
        if batches or counts:
            if any(e in bm for e in batches) or any(e in bm for e in counts):
                raise CorruptRecordError(f"a state marker's ledger {ledger} has a batch or a count of an acked entry")
        elif not runs:
            raise CorruptRecordError(f"a state marker names ledger {ledger} with nothing in it")
        n = len(runs) // 2
        ledgers[ledger] = LedgerAcks.of_runs(bm, n, batches, counts)
        index[ledger] = entry_of((seq, n, None, None))
    props = _tail_properties(body, end)
    truncated = bool(body[1] & STATE_TRUNCATED)
    return Marker(True, -1, (md_l, md_e), (md_l, md_e + 1), props, index, truncated, {"c": cid}, ledgers)


def state_ledger(value: bytes | memoryview, seq: int, ledger: int) -> tuple[LedgerAcks, int]:
    """``ledger``'s acks in the state marker ``value`` (record ``seq``), and the cursor id
    it names. Raises CorruptRecordError (also when the record is not a state marker, or
    holds no such ledger)."""
    marker = decode_marker(value, seq)
    if marker.ledgers is None:
        raise CorruptRecordError(f"record {seq} is a marker that holds no ledgers, not ledger {ledger}'s record")
    la = marker.ledgers.get(ledger)
    if la is None:
        raise CorruptRecordError(f"state marker {seq} holds no ledger {ledger}")
    return la, marker.extra["c"]


_SMALL_MARKER = 1024
"""the most bytes of a msgpack marker :func:`names_line` looks into (the items of a few
ledgers with the acks and counts a chain names since their records are well under it)"""

_LINE_ITEMS = 256
"""the most ledgers a marker :func:`names_line` says yes to names (a small form's line holds
as many: M's and the 255 it spans after it)"""


def names_line(value: bytes | memoryview) -> bool:
    """Whether a marker record names at most :data:`_LINE_ITEMS` ledgers, none before the
    mark-delete position's (a delta marker of a change of properties alone names none), read
    from its envelope and head (the fixed layout, format 9 on:
    its items ascend) or its body (a msgpack array of format 5 on, of at most
    :data:`_SMALL_MARKER` bytes), unchecked: a look before resolving it
    (``storage.log.newest_marker``), which checks it. O(1) for the fixed layout."""
    at = ENVELOPE.size
    if len(value) < at + 1 or value[0] != 0xC1 or value[1] != RECORD_MARKER or value[2] < 5:
        return False
    if value[at] == 0xC1:  # the fixed layout
        if value[2] < 9 or len(value) < at + FIXED_HEAD.size:
            return False
        _, _, _, md_l, _, _, _, _, items = FIXED_HEAD.unpack_from(value, at)
        if not items:
            return True
        first = value[at + FIXED_HEAD.size : at + FIXED_HEAD.size + 4]
        return items <= _LINE_ITEMS and len(first) == 4 and int.from_bytes(first, "little") >= md_l
    if len(value) > _SMALL_MARKER:
        return False
    try:
        body = msgpack.unpackb(value[at:], strict_map_key=False)
        return len(body[7]) <= _LINE_ITEMS and all(item[0] >= body[2] for item in body[7])
    except Exception:  # any other shape: resolving it says what it is
        return False


def decode_marker(value: bytes | memoryview, seq: int = -1) -> Marker:
    """A marker record (``seq``: its sequence, which a state marker's index entries name).
    Raises CorruptRecordError."""
    rtype, version, raw = open_record(value)
    if rtype != RECORD_MARKER:
        raise CorruptRecordError(f"expected a marker record, found type {rtype}")
    if raw[:1] == b"\xc1":  # formats 6-9: the fixed layout
        return _decode_fixed(raw, version)
    if raw[:1] == b"\xc2" and version >= 10:  # format 10: the state layout
        return _decode_state(raw, seq)
    body = _unpack_body(raw)
    try:
        if isinstance(body, list):  # format 5
            full, prev, md_l, md_e, rp_l, rp_e, props, items, truncated, cid = body
            extra: dict[str, Any] = {} if cid == -1 else {"c": cid}
        else:  # formats 1-4: a map
            full, prev, props, items, truncated = body["f"], body["p"], body["pr"], body["ix"], body["tr"]
            (md_l, md_e), (rp_l, rp_e) = body["md"], body["rp"]
            extra = dict(body.get("x", {}))
        index: dict[int, IndexEntry | None] = {int(item[0]): _index_entry(item) for item in items}
        return Marker(
            full=bool(full),
            prev=int(prev),
            mark_delete=(int(md_l), int(md_e)),
            read_position=(int(rp_l), int(rp_e)),
            properties=_properties(props),
            index=index,
            truncated=bool(truncated),
            extra=extra,
        )
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"marker body has the wrong shape: {exc}") from None
