"""Record codec: keys of the per-cursor log, ledger records and marker records.

Every record value is ``msgpack([type, format_version, crc32(body), body])``
where ``body`` is itself msgpack bytes. A record whose checksum or decoding
fails is reported as :class:`~ackstore.errors.CorruptRecordError` and treated
by recovery as absent.

Log keys are ``struct('>QQ')`` of ``(cursor id, sequence)``: big-endian, so
LMDB's key order is the log order and a reverse scan reads back to front.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from dataclasses import dataclass, field
from itertools import accumulate
from operator import sub
from typing import Any

import msgpack
from pyroaring import FrozenBitMap

from ..errors import CorruptRecordError
from ..ledger_acks import LedgerAcks
from .bitmaps import decode_bitmap, encode_bitmap

__all__ = [
    "FORMAT_VERSION",
    "RECORD_LEDGER",
    "RECORD_MARKER",
    "IndexEntry",
    "Marker",
    "log_key",
    "split_log_key",
    "encode_record",
    "decode_record",
    "record_type",
    "encode_ledger",
    "decode_ledger",
    "decode_ledger_owned",
    "encode_marker",
    "decode_marker",
]

#: 2 added the Rice-coded gap payload (flag ``_RICE``); 3 checksummed the catalog (see
#: ``catalog.py``) and put the cursor id in every marker; 4 added the open ledger's last
#: confirmed entry to the catalog and string values to marker properties; 5 lets a marker's
#: index entry carry the acks made since the ledger's record (``IndexEntry.adds``). Records
#: of 1-4 read unchanged.
FORMAT_VERSION = 5
RECORD_LEDGER = 1
RECORD_MARKER = 2

_KEY = struct.Struct(">QQ")


def log_key(cursor_id: int, seq: int) -> bytes:
    """Key of record ``seq`` in cursor ``cursor_id``'s log."""
    return _KEY.pack(cursor_id, seq)


def split_log_key(key: bytes) -> tuple[int, int]:
    """``(cursor id, sequence)`` of a log key."""
    return _KEY.unpack(key)  # type: ignore[return-value]


def encode_record(rtype: int, body: bytes) -> bytes:
    return msgpack.packb([rtype, FORMAT_VERSION, zlib.crc32(body), body])  # type: ignore[no-any-return]


def decode_record(value: bytes | memoryview) -> tuple[int, Any]:
    """Check and decode one record: ``(type, body object)``. Raises CorruptRecordError."""
    try:
        rtype, version, crc, body = msgpack.unpackb(value)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CorruptRecordError(f"record does not decode: {exc}") from None
    if not isinstance(body, bytes) or type(crc) is not int or type(version) is not int or type(rtype) is not int:
        raise CorruptRecordError("record envelope has the wrong shape")  # a flipped bit can make any field a list
    if version > FORMAT_VERSION:
        raise CorruptRecordError(f"record format {version} is newer than this ackstore reads ({FORMAT_VERSION})")
    if zlib.crc32(body) != crc:
        raise CorruptRecordError("record checksum mismatch")
    try:
        return rtype, msgpack.unpackb(body, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecordError(f"record body does not decode: {exc}") from None


def record_type(value: bytes | memoryview) -> int | None:
    """The type field of a record without checking it (None if unreadable). Cheap."""
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
    flags, first, last, payload = encode_bitmap(acks.bitmap)
    batches = [
        [entry, size, mask.to_bytes((size + 7) // 8, "little")] for entry, (size, mask) in sorted(acks.batches.items())
    ]
    fields = [ledger, flags, first, last, payload, acks.runs, batches]
    if cursor_id is not None:
        fields.append(cursor_id)
    return encode_record(RECORD_LEDGER, msgpack.packb(fields))


def decode_ledger(value: bytes | memoryview) -> tuple[int, LedgerAcks]:
    """``(ledger, acks)`` of a ledger record. Raises CorruptRecordError."""
    ledger, acks, _ = decode_ledger_owned(value)
    return ledger, acks


def decode_ledger_owned(value: bytes | memoryview) -> tuple[int, LedgerAcks, int | None]:
    """``(ledger, acks, cursor id or None)``: formats 1 and 2 did not record the cursor."""
    rtype, body = decode_record(value)
    if rtype != RECORD_LEDGER:
        raise CorruptRecordError(f"expected a ledger record, found type {rtype}")
    try:
        owner = body[7] if len(body) == 8 else None
        ledger, flags, first, last, payload, runs, batches = body[:7]
        bm = decode_bitmap(flags, first, last, payload)
        parsed = {int(e): (int(s), int.from_bytes(m, "little")) for e, s, m in batches}
    except Exception as exc:
        raise CorruptRecordError(f"ledger record body has the wrong shape: {exc}") from None
    acks = LedgerAcks(bm, parsed)
    if acks.runs != runs:
        raise CorruptRecordError(f"ledger {ledger} record says {runs} runs, bitmap has {acks.runs}")
    return int(ledger), acks, owner


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """Where a ledger's newest record (its base) is, how many ranges the ledger holds, and
    (format 5) the entries acked since that record was written: the ledger is the base's
    acks plus ``adds``. A flush that changed a ledger by a few acks writes only them, here,
    in the marker; when they grow past a fraction of the ledger it writes a new base."""

    seq: int
    runs: int
    adds: FrozenBitMap | None = None


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


def _index_item(ledger: int, e: IndexEntry | None) -> list[Any]:
    """A marker's index item: ``[ledger, seq, runs]`` (seq -1: the ledger vanished), and
    since format 5 the acks since that record as a fourth item: the first entry, then the
    gaps to each next one (small ints, 1-3 bytes each in msgpack)."""
    if e is None:
        return [ledger, -1, 0]
    if e.adds is None:
        return [ledger, e.seq, e.runs]
    values = e.adds.to_array()
    return [ledger, e.seq, e.runs, [values[0], *map(sub, values[1:], values[:-1])] if values else []]


def _index_entry(item: list[Any]) -> IndexEntry | None:
    _, seq, runs, *rest = item
    if seq < 0:
        return None
    adds = None
    if rest:
        try:  # array('I') refuses anything but ints in 0..2**32-1: damage, not a crash
            adds = FrozenBitMap(array("I", accumulate(rest[0])))
        except (TypeError, OverflowError) as exc:
            raise CorruptRecordError(f"an index entry's adds are not a list of gaps ({exc})") from None
    return IndexEntry(int(seq), int(runs), adds)


def _properties(raw: Any) -> dict[str, int | str]:
    """A marker's properties: str keys, int or str values (anything else is damage)."""
    out: dict[str, int | str] = {}
    for key, value in raw.items():
        if type(key) is not str or type(value) not in (int, str):
            raise CorruptRecordError(f"a property {key!r} = {value!r} is neither an int nor a str")
        out[key] = value
    return out


def decode_marker(value: bytes | memoryview) -> Marker:
    rtype, body = decode_record(value)
    if rtype != RECORD_MARKER:
        raise CorruptRecordError(f"expected a marker record, found type {rtype}")
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
