"""The pure-Python twins of the compiled decoders (and Rice coder) in ``ackstore/_native.c``.

Each function returns exactly the bytes its compiled twin returns and raises the same
``ValueError`` for the same damage (``tests/test_codecs.py`` runs both on the same cases);
:mod:`ackstore.storage.codecs` picks one at import. Bitmaps come back in the portable
roaring serialization (what ``BitMap.deserialize`` reads), with array and bitmap
containers only, as a bitmap built from its values serializes.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from itertools import accumulate, islice, pairwise
from typing import Any

import msgpack
from pyroaring import BitMap

from ..ledger_acks import run_bounds

__all__ = [
    "NO_PREV",
    "gap_planes",
    "plane_values",
    "rice_values",
    "rice_code",
    "stride_of",
    "uint32_values",
    "code_count",
    "positions_by_ledger",
    "delta_fields",
    "fixed_marker",
    "state_marker",
    "state_fields",
    "cursor_fields",
    "cursor_entry",
    "scan_cursors",
    "ledger_fields",
    "ledger_span",
    "scan_page",
    "scan_directory",
    "directory_entry",
    "open_envelope",
    "seal_envelope",
    "TAG",
    "varint",
    "read_varint",
    "point_value",
    "slot_head",
    "ENVELOPE",
    "DIR_KEY",
    "DIR_SEALED",
    "DIR_OPEN",
    "FIXED_HEAD",
    "FIXED_ITEM",
    "FIXED_COUNT",
    "STATE_TAG",
]

_U32 = 0xFFFFFFFF
_RICE_ESCAPE = 32
_SWAP = sys.byteorder == "big"  # array('I') is native-endian; the layouts are little-endian


def _ranged(name: str, value: Any, lo: int, hi: int) -> None:
    """An int argument in ``lo..hi``, as the compiled twin checks it: ValueError naming it
    for any other int, TypeError for a non-int (before anything is read)."""
    if not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is outside {lo}..{hi}")


_SSIZE = (1 << 63) - 1


def plane_values(planes: bytes, first: int) -> list[int]:
    """The values of gap planes (``pure_acks.acks_roaring`` reads them), ascending, repeats kept (a
    gap of 0). O(n)."""
    if len(planes) % 4:
        raise ValueError(f"gap planes of {len(planes)} bytes are not four planes of equal length")
    n = len(planes) // 4
    interleaved = bytearray(4 * n)
    for i in range(4):
        interleaved[i::4] = planes[i * n : (i + 1) * n]
    gaps = array("I")
    gaps.frombytes(bytes(interleaved))
    if _SWAP:
        gaps.byteswap()
    values = list(islice(accumulate(gaps, initial=first), 1, None))
    if not 0 <= first <= _U32 or (values and values[-1] > _U32):
        raise ValueError("gap record decodes past 2^32")
    return values


def positions_by_ledger(items: Any) -> list[tuple[int, bytes]] | None:
    """Acks' positions grouped per ledger, ascending, each ledger's entries as the portable
    roaring serialization of them; None (nothing raised) when ``items`` is not a list or
    tuple, or an item is not a 2-tuple (a Position is one) of ints with the ledger in
    0..2**63-1 and the entry in 0..2**32-2: the caller's own checks then say what is wrong.
    O(n log n)."""
    if not isinstance(items, (list, tuple)):
        return None
    per: dict[int, list[int]] = {}
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            return None
        ledger, entry = item
        if type(ledger) is not int or type(entry) is not int:
            return None
        if not (0 <= ledger <= _SSIZE and 0 <= entry < _U32):
            return None
        per.setdefault(ledger, []).append(entry)
    return [(ledger, BitMap(per[ledger], optimize=False).serialize()) for ledger in sorted(per)]


def rice_values(payload: bytes, first: int) -> array:  # type: ignore[type-arg]
    """The values of a Rice code (:func:`rice_code`'s), ascending. O(n) big-int shifts."""
    if not payload:
        raise ValueError("Rice payload ends early")
    k = payload[0]
    if k > 31:
        raise ValueError(f"Rice parameter k={k} is over 31")
    count, pos = code_count(payload, 1, "Rice payload ends early")
    body = payload[pos:]
    bits = len(body) * 8
    if count > bits // (1 + k):
        raise ValueError("Rice payload ends early")
    if not 0 <= first <= _U32:
        raise ValueError("Rice record decodes past 2^32")
    end = bits + 64  # 64 zero bits appended: every 64-bit window below is in range
    x = int.from_bytes(body, "big") << 64
    mask, window = (1 << k) - 1, (1 << _RICE_ESCAPE) - 1
    out = array("I")
    i, value = 0, first - 1
    for _ in range(count):
        w = (x >> (end - i - _RICE_ESCAPE)) & window
        q = _RICE_ESCAPE - (~w & window).bit_length()  # leading ones
        if q == _RICE_ESCAPE:
            i += _RICE_ESCAPE + 32
            g = (x >> (end - i)) & 0xFFFFFFFF
        else:
            i += q + 1 + k
            g = (q << k) | ((x >> (end - i)) & mask)
        if i > bits:
            raise ValueError("Rice payload ends early")
        value += g + 1  # the first gap counts from first - 1, the others were stored minus one
        if value > _U32:
            raise ValueError("Rice record decodes past 2^32")
        out.append(value)
    return out


def rice_code(values: bytes | array, first: int) -> bytes:  # type: ignore[type-arg]
    """The Rice code ``pure_acks.acks_roaring`` reads, of ``values`` (native-endian uint32,
    ascending, as ``BitMap.to_array()`` gives them), the first gap counted from ``first``:
    ``k`` (from the mean gap: within ~10% of the entropy of gaps drawn at random), the
    count as a varint, then each gap (minus one after the first) as its quotient by
    ``2**k`` in unary (ones, then a zero) and ``k`` remainder bits, most significant bit
    first; a quotient of 32 or more is 32 ones and the raw 32-bit gap. O(n) big-int shifts."""
    _ranged("first", first, 0, _U32)
    arr = uint32_values(values)
    if not 0 <= first <= _U32:
        raise ValueError("values are not ascending from first")
    gaps = [arr[0] - first, *(b - a - 1 for a, b in pairwise(arr))]
    if min(gaps) < 0:
        raise ValueError("values are not ascending from first")
    mean = sum(gaps) / len(gaps)
    k = min(31, max(0, int(mean * 0.69).bit_length() - 1)) if mean >= 2 else 0
    mask = (1 << k) - 1
    acc = width = 0
    for g in gaps:
        q = g >> k
        if q >= _RICE_ESCAPE:
            acc = (acc << (_RICE_ESCAPE + 32)) | (((1 << _RICE_ESCAPE) - 1) << 32) | g
            width += _RICE_ESCAPE + 32
        else:
            acc = (acc << (q + 1 + k)) | (((1 << q) - 1) << (k + 1)) | (g & mask)
            width += q + 1 + k
    pad = -width % 8
    return bytes([k]) + varint(len(gaps)) + (acc << pad).to_bytes((width + pad) // 8, "big")


def code_count(payload: bytes, pos: int, early: str) -> tuple[int, int]:
    """A code's count, the varint at ``payload[pos]``, and where it ends; ValueError
    ``early`` when the payload ends first (or the varint runs past 64 bits)."""
    count = shift = 0
    while True:
        if pos >= len(payload) or shift > 63:
            raise ValueError(early)
        byte = payload[pos]
        pos += 1
        count |= (byte & 0x7F) << shift
        if byte < 0x80:
            return count, pos
        shift += 7


_UNKNOWN: Any = object()
_np: Any = _UNKNOWN


def _numpy() -> Any:
    """numpy, imported on first use, or None where it is not installed (optional: it computes
    the gaps ~50x faster than the loop; the bytes are the same either way). Imported here
    rather than with the package because it is about a third of ``import ackstore``'s time;
    the compiled twin needs it not at all."""
    global _np
    if _np is _UNKNOWN:
        try:
            import numpy
        except ImportError:  # pragma: no cover - exercised by the loop directly
            numpy = None  # type: ignore[assignment]
        _np = numpy
    return _np


def gap_planes(values: bytes | array | memoryview, first: int, use_numpy: bool = True) -> bytes:  # type: ignore[type-arg]
    """The gap planes ``pure_acks.acks_roaring`` reads (before their zlib), of ``values``
    (native-endian uint32, ascending, as ``BitMap.to_array()`` gives them), the first gap
    counted from ``first``: each gap as a little-endian uint32, split into its 4 byte planes,
    low bytes first. ValueError for no values or values not ascending from ``first``.
    ``use_numpy``: with numpy when it is installed (tests read both ways). O(n)."""
    _ranged("first", first, 0, _U32)
    arr = uint32_values(values)
    np = _numpy() if use_numpy else None
    if np is not None:
        a = np.frombuffer(arr, dtype=np.uint32)
        if a[0] < first or bool((a[1:] <= a[:-1]).any()):
            raise ValueError("values are not ascending from first")
        gaps = np.empty(len(a), dtype="<u4")
        gaps[0] = a[0] - first
        np.subtract(a[1:], a[:-1], out=gaps[1:])
        return bytes(gaps.view(np.uint8).reshape(-1, 4).T.tobytes())
    if arr[0] < first or any(b <= a for a, b in pairwise(arr)):
        raise ValueError("values are not ascending from first")
    gaps = array("I", [arr[0] - first])
    gaps.extend(b - a for a, b in pairwise(arr))
    if sys.byteorder == "big":
        gaps.byteswap()
    raw = gaps.tobytes()
    return b"".join(raw[i::4] for i in range(4))


def uint32_values(values: bytes | array | memoryview) -> array:  # type: ignore[type-arg]
    """The values a coder is given (native-endian uint32: an ``array('I')``, or any buffer of
    their bytes, as the compiled twins' buffer reads it) as an ``array('I')``; ValueError
    for a length not a multiple of 4 or no values."""
    if isinstance(values, array):
        arr = values
    else:
        if isinstance(values, memoryview):
            values = values.cast("B")
        if len(values) % 4:
            raise ValueError(f"values of {len(values)} bytes are not 32-bit values")
        arr = array("I")
        arr.frombytes(values)
    if not arr:
        raise ValueError("no values to code")
    return arr


def stride_of(payload: bytes, first: int, last: int) -> tuple[int, int, int]:
    """``(low, step, count)`` of a stride payload (three varints: the first value's offset
    from ``first``, the step, the count; ``bitmaps._stride``): ``count`` values every
    ``step`` from ``low``. ValueError unless they lie in ``first..last`` and in 32 bits.
    O(1)."""
    early = f"a stride payload of {len(payload)} bytes is not 3 varints"
    offset, pos = code_count(payload, 0, early)
    step, pos = code_count(payload, pos, early)
    count, pos = code_count(payload, pos, early)
    if pos != len(payload):
        raise ValueError(early)
    low = first + offset
    high = low + step * (count - 1)
    if count < 1 or step < 1 or low < 0 or high > min(last, 0xFFFFFFFF):
        raise ValueError(f"a stride of {count} values every {step} from {low} leaves [{first}, {last}]")
    return low, step, count


def varint(n: int) -> bytes:
    """``n >= 0`` as a little-endian base-128 varint (7 bits a byte, high bit: more follow)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# the fixed marker layout (records.py's module docstring); records.encode_fixed_marker
# writes the format-9 one with these structs
_HEAD = struct.Struct("<BIIIIIIH")  # formats 6-8: tag, prev, md l, md e + 1, rp l, rp e + 1, cursor id, items
FIXED_HEAD = struct.Struct("<BBIIIIIIH")  # format 9: a flags byte after the tag
_ITEM = struct.Struct("<IIIH")  # format 6: ledger, seq + 1 (0: vanished), runs, adds
FIXED_ITEM = struct.Struct("<IIIHH")  # format 7 on: and the number of delivery counts
FIXED_COUNT = struct.Struct("<II")  # entry, delivery count
_FLAGS = 0x01  # every flag a writer sets (full)
NO_PREV = 0xFFFFFFFF
"""a fixed marker's ``prev`` field for none (-1 given): a full marker of a cursor's first
state; no marker's ``prev`` is this sequence (a writer's next one would not fit 32 bits)"""

Item = tuple[int, int, int, bytes | None, dict[int, int] | None]


def delta_fields(body: bytes, version: int) -> tuple[int, int, int, int, int, int, int, list[Item], int]:
    """A fixed-layout marker body as format ``version`` wrote it: ``(flags, prev, md
    ledger, md entry, rp ledger, rp entry, cursor id, items, end)``, items ``(ledger, seq,
    runs, adds, counts)`` (seq -1: the ledger vanished; adds None or the entries' portable
    roaring bytes; counts None or ``{entry: count}``, from format 7 on); flags from format
    9 on (0 before: a delta marker); the properties start at ``end``.
    O(items + adds + counts)."""
    _ranged("version", version, 0, 255)
    head = FIXED_HEAD if version >= 9 else _HEAD
    if len(body) < head.size:
        raise ValueError("a fixed-layout marker ends early")
    if version >= 9:
        _, flags, prev, md_l, md_e, rp_l, rp_e, cid, n = FIXED_HEAD.unpack_from(body)
        if flags & ~_FLAGS:
            raise ValueError(f"a fixed-layout marker's flags 0x{flags:02x} are not ones this ackstore writes")
    else:
        flags = 0
        _, prev, md_l, md_e, rp_l, rp_e, cid, n = _HEAD.unpack_from(body)
    pos = head.size
    items: list[Item] = []
    layout = FIXED_ITEM if version >= 7 else _ITEM
    for _ in range(n):
        if len(body) - pos < layout.size:
            raise ValueError("a fixed-layout marker ends early")
        ledger, seq, runs, nadds, *more = layout.unpack_from(body, pos)
        ncounts = more[0] if more else 0
        pos += layout.size
        adds = None
        if nadds:
            if len(body) - pos < 4 * nadds:
                raise ValueError(f"a fixed-layout marker's item for ledger {ledger} ends early")
            raw = array("I")
            raw.frombytes(body[pos : pos + 4 * nadds])
            if _SWAP:
                raw.byteswap()
            adds = BitMap(raw, optimize=False).serialize()
            pos += 4 * nadds
        counts = None
        if ncounts:
            if len(body) - pos < 8 * ncounts:
                raise ValueError(f"a fixed-layout marker's counts for ledger {ledger} end early")
            counts = dict(FIXED_COUNT.iter_unpack(body[pos : pos + 8 * ncounts]))
            pos += 8 * ncounts
        items.append((ledger, seq - 1, runs, adds, counts))
    return flags, prev, md_l, md_e - 1, rp_l, rp_e - 1, cid, items, pos


_MARKER = 2
"""a marker record's type (records.RECORD_MARKER)"""
OUTSIDE_LAYOUT = "a marker field is not an unsigned int the fixed layout holds (32 bits; 16 for counts of items)"
"""what :func:`fixed_marker` raises when a field does not fit its layout"""


def fixed_marker(
    version: int,
    flags: int,
    prev: int,
    md_l: int,
    md_e: int,
    rp_l: int,
    rp_e: int,
    cursor_id: int,
    items: list[tuple[Any, ...]],
    properties: bytes,
) -> bytes:
    """A whole marker record in the fixed envelope (format ``version``) and the fixed
    layout of records.py's module docstring, what :func:`delta_fields` reads back (``prev``
    -1 for none is written as :data:`NO_PREV`, which no other ``prev`` may be): ``items``
    ``(ledger, entry)`` or ``(ledger, entry, named)``, ascending by ledger; ``entry`` None
    (the ledger vanished) or ``(seq, runs, adds, counts, ...)`` with ``adds`` None or a
    pyroaring bitmap and ``counts`` None or ``{entry: count}``; ``named`` a bitmap of adds
    to leave out (what the chain named already) or None; ``properties`` the msgpack map's
    bytes (empty: none). OverflowError (:data:`OUTSIDE_LAYOUT`) when a field does not fit:
    the caller writes the msgpack form. O(items + adds + named + counts)."""
    item, count = FIXED_ITEM.pack, FIXED_COUNT.pack
    if prev == NO_PREV:  # (reserved for none)
        raise OverflowError(OUTSIDE_LAYOUT)
    prev = NO_PREV if prev == -1 else prev
    try:
        parts = [FIXED_HEAD.pack(TAG, flags, prev, md_l, md_e + 1, rp_l, rp_e + 1, cursor_id, len(items))]
        for it in items:
            ledger, e = it[0], it[1]
            named = it[2] if len(it) > 2 else None
            if e is None:
                parts.append(item(ledger, 0, 0, 0, 0))
                continue
            seq, runs, adds, counts = e[0], e[1], e[2], e[3]
            ncounts = len(counts) if counts else 0
            if adds and named:
                adds = adds - named
            if not adds:
                parts.append(item(ledger, seq + 1, runs, 0, ncounts))
            else:
                values = adds.to_array()
                if _SWAP:
                    values.byteswap()
                parts.append(item(ledger, seq + 1, runs, len(values), ncounts))
                parts.append(values.tobytes())
            if counts:
                parts.extend(count(entry, counts[entry]) for entry in sorted(counts))
        parts.append(properties)
        return seal_envelope(_MARKER, version, b"".join(parts))
    except struct.error:
        raise OverflowError(OUTSIDE_LAYOUT) from None


_SHAPE = "a ledger record's body is not [ledger, flags, first, last, payload, runs, batches(, owner(, counts))]"
_INT64 = range(-(1 << 63), 1 << 63)


def _ints(*values: Any) -> bool:
    return all(type(x) is int and x in _INT64 for x in values)


_CURSOR_SHAPE = "a cursor entry's body is not [topic id, name, cursor id, config map]"


def cursor_fields(body: bytes) -> tuple[int, str, int, bytes]:
    """``(topic id, name, cursor id, config map bytes)`` of a cursors catalog entry's msgpack
    body, its configuration not decoded: the map's bytes, which end the body (configurations
    repeat, so the caller decodes each distinct one once). ValueError unless the body is
    ``[64-bit int, UTF-8 str, 64-bit int, map...]``. O(the name)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(body)
    try:
        if unpacker.read_array_header() != 4:
            raise ValueError(_CURSOR_SHAPE)
        tid, name, cid = unpacker.unpack(), unpacker.unpack(), unpacker.unpack()
        start = unpacker.tell()
    except Exception:  # msgpack raises several unrelated types
        raise ValueError(_CURSOR_SHAPE) from None
    is_map = start < len(body) and (0x80 <= body[start] <= 0x8F or body[start] in (0xDE, 0xDF))
    if not (_ints(tid, cid) and type(name) is str and is_map):
        raise ValueError(_CURSOR_SHAPE)
    return tid, name, cid, bytes(body[start:])


def cursor_entry(value: bytes, max_version: int) -> tuple[int, str, int, bytes]:
    """:func:`cursor_fields` of a cursors catalog entry in the fixed envelope (type 4:
    ``catalog.RECORD_CURSOR``), the envelope checked first (:func:`open_envelope`, then the
    type). ValueError says what failed; an entry in the msgpack envelope is one ("not in the
    fixed envelope")."""
    _ranged("max_version", max_version, 0, 255)
    return cursor_fields(_fixed_body(value, 4, max_version, "type {}, not a cursor entry"))


def scan_cursors(
    items: Iterable[tuple[bytes, bytes]], prefix: bytes, max_version: int, most_name: int
) -> tuple[list[tuple[str, int, bytes, bytes]], tuple[bytes, bytes] | None]:
    """A topic's cursors catalog entries, ``(key, value)`` from ``items`` until a key without
    the topic's 8-byte ``prefix``: ``(found, stop)``, found ``[(name, cursor id, config map
    bytes, value)]`` of each entry in the fixed envelope that checks (:func:`cursor_entry`)
    and is stored under its own key (the prefix, then the name's UTF-8 bytes, at most
    ``most_name`` of them), in their order; stop the first pair that is not, which the
    caller reads itself (a msgpack envelope, a hashed name, damage) before it scans on with
    the same items, or None when the topic's entries ended. O(entries)."""
    _ranged("max_version", max_version, 0, 255)
    _ranged("most_name", most_name, 0, 1 << 20)
    if len(prefix) != 8:
        raise ValueError(f"prefix of {len(prefix)} bytes is not allowed: a topic's is 8")
    found: list[tuple[str, int, bytes, bytes]] = []
    for key, value in items:
        if key[:8] != prefix:
            return found, None
        try:
            tid, name, cid, cfg = cursor_entry(value, max_version)
        except ValueError:
            return found, (key, value)
        raw = name.encode()
        if cid < 0 or len(raw) > most_name or tid < 0 or tid.to_bytes(8, "big") != prefix or key[8:] != raw:
            return found, (key, value)
        found.append((name, cid, cfg, value))
    return found, None


def _fixed_body(value: bytes, rtype: int, max_version: int, other: str) -> bytes:
    """The body of a record of type ``rtype`` in the fixed envelope, the envelope checked
    first (:func:`open_envelope`); ValueError says what failed (``other``: of another type,
    formatted with it)."""
    if value[:1] != b"\xc1":
        raise ValueError("record is not in the fixed envelope")
    found, _, body = open_envelope(value, max_version)
    if found != rtype:
        raise ValueError(other.format(found))
    return body


def ledger_fields(body: bytes) -> tuple[int, int, int, int, int | None]:
    """``(ledger, lowest, highest, runs, owner)`` of a ledger record's msgpack body, its
    bitmap not decoded: the lowest and highest entry holding any state (the first and last
    ack, partial batches' and delivery counts' entries; 2**32 and -1 when none), the run
    count it states, the cursor id (None before format 3). ValueError unless the body is
    ``[ledger, flags, first, last, payload, runs, batches(, owner(, counts))]``: 64-bit
    ints, bytes, ``[[entry, size, mask bytes], ...]``, ``[entry, count, ...]``. O(batches
    + counts)."""
    try:
        fields = msgpack.unpackb(body)
    except Exception:  # msgpack raises several unrelated types
        raise ValueError(_SHAPE) from None
    if type(fields) is not list or not 7 <= len(fields) <= 9:
        raise ValueError(_SHAPE)
    ledger, flags, first, last, payload, runs, batches = fields[:7]
    if not _ints(ledger, flags, first, last, runs) or type(payload) is not bytes or type(batches) is not list:
        raise ValueError(_SHAPE)
    low, high = (first, last) if last >= first else (1 << 32, -1)
    for batch in batches:
        if type(batch) is not list or len(batch) != 3 or not _ints(*batch[:2]) or type(batch[2]) is not bytes:
            raise ValueError(_SHAPE)
        low, high = min(low, batch[0]), max(high, batch[0])
    owner = fields[7] if len(fields) > 7 else None
    if len(fields) > 7 and not _ints(owner):
        raise ValueError(_SHAPE)
    if len(fields) == 9:
        counts = fields[8]
        if type(counts) is not list or not _ints(*counts):
            raise ValueError(_SHAPE)
        for entry in counts[::2]:
            low, high = min(low, entry), max(high, entry)
    return ledger, low, high, runs, owner


ENVELOPE = struct.Struct("<BBBI")
"""records.py's fixed envelope (format 6 on): tag, type, version, crc32 of the body seeded with
type and version"""
TAG = 0xC1
"""the first byte of a record in the fixed envelope, and of a fixed-layout marker body"""


def seal_envelope(rtype: int, version: int, body: bytes) -> bytes:
    """``body`` in the fixed envelope of a record of type ``rtype`` and format ``version``
    (what :func:`open_envelope` checks). O(len(body))."""
    return ENVELOPE.pack(TAG, rtype, version, zlib.crc32(body, rtype << 8 | version)) + body


def open_envelope(value: bytes | memoryview, max_version: int) -> tuple[int, int, bytes]:
    """``(type, format version, body bytes)`` of a record in the fixed envelope, checked in
    this order: its length, a version up to ``max_version``, its checksum. ValueError says
    what failed (``records`` raises it as CorruptRecordError)."""
    if len(value) < ENVELOPE.size:
        raise ValueError(f"record of {len(value)} bytes is shorter than its envelope")
    _, rtype, version, crc = ENVELOPE.unpack_from(value)
    body = bytes(value[ENVELOPE.size :])
    if version > max_version:
        raise ValueError(f"record format {version} is newer than this ackstore reads ({max_version})")
    if zlib.crc32(body, rtype << 8 | version) != crc:
        raise ValueError("record checksum mismatch")
    return rtype, version, body


def ledger_span(value: bytes, rtype: int, max_version: int) -> tuple[int, int, int, int, int | None]:
    """:func:`ledger_fields` of a record in the fixed envelope (format 6 on), the envelope
    checked first (:func:`open_envelope`, then the type ``rtype``). ValueError says what
    failed; a record in the msgpack envelope of formats 1-5 is one ("not in the fixed
    envelope")."""
    _ranged("rtype", rtype, 0, 255)
    _ranged("max_version", max_version, 0, 255)
    return ledger_fields(_fixed_body(value, rtype, max_version, "expected a ledger record, found type {}"))


# catalog.py's ledger-directory entries (format 3 on): key topic id, ledger; value type,
# version, entry count (-1: open), [last confirmed entry,] crc32 of key and value before it
DIR_KEY = struct.Struct(">QQ")
DIR_SEALED = struct.Struct(">BBqI")
DIR_OPEN = struct.Struct(">BBqqI")


def directory_entry(key: bytes, value: bytes, sealed_type: int, open_type: int) -> tuple[int, int | None] | None:
    """``(entry count or -1 while open, last confirmed entry or None)`` of a
    ledger-directory value stored under ``key``, or None unless its size, type, count and
    checksum check."""
    if len(value) == DIR_SEALED.size:
        rtype, _, count, crc = DIR_SEALED.unpack(value)
        if rtype == sealed_type and count >= -1 and zlib.crc32(key + value[:10]) == crc:
            return count, None
    elif len(value) == DIR_OPEN.size:
        rtype, _, count, confirmed, crc = DIR_OPEN.unpack(value)
        if rtype == open_type and count == -1 and confirmed >= -1 and zlib.crc32(key + value[:18]) == crc:
            return -1, confirmed
    return None


def scan_directory(
    items: Iterable[tuple[bytes, bytes]], prefix: bytes, sealed_type: int, open_type: int
) -> tuple[bytes, bytes, int | None, tuple[bytes, bytes] | None]:
    """A topic's ledger-directory entries, ``(key, value)`` from ``items`` until a key
    without ``prefix``, each checked (a 16-byte key, then :func:`directory_entry`): ``(ids,
    counts, confirmed, bad)``, ids and counts as native int64 bytes (``array('q')``),
    confirmed the last entry's last confirmed entry (None when it is sealed or there is
    none), bad the first entry that fails (the scan stops there; the first entry past the
    prefix is checked as well) or None. O(entries)."""
    _ranged("sealed_type", sealed_type, 0, 255)
    _ranged("open_type", open_type, 0, 255)
    ids, counts = array("q"), array("q")
    confirmed: int | None = None
    for key, value in items:
        entry = directory_entry(key, value, sealed_type, open_type) if len(key) == DIR_KEY.size else None
        if entry is None:  # the first entry past the topic is checked too: a damaged topic id in a
            # key moves an entry out of its topic's range (and its checksum, over the key, fails)
            return ids.tobytes(), counts.tobytes(), confirmed, (key, value)
        if not key.startswith(prefix):
            break
        ids.append(DIR_KEY.unpack(key)[1])
        counts.append(entry[0])
        confirmed = entry[1]
    return ids.tobytes(), counts.tobytes(), confirmed, None


_NODE = struct.Struct("<HHHH")
_NOT_PLAIN = 0x07  # a leaf node's flags: overflow value, named database record, duplicates
_BIGDATA = 0x01  # the value is on overflow pages: the node holds their first page number
Problem = tuple[int, str, "int | bytes"]


def int_key_order(key: bytes) -> bytes:
    """A little-endian integer key (LMDB's ``MDB_INTEGERKEY``) as bytes that compare in
    the integer's order."""
    return key[::-1].rjust(8, b"\0")


def scan_page(
    buf: Any,
    off: int,
    n: int,
    upper: int,
    psize: int,
    leaf: bool,
    integer_keys: bool,
    all_special: bool,
    kmin: int = 0,
    kmax: int = 0xFFFF,
    allowed: int = 0xFFFF,
    required: int = 0,
) -> tuple[Problem | None, list[tuple[int, int, bytes, int, int]], list[bytes], list[int]]:
    """The ``n`` nodes of the B-tree page at ``off`` of ``buf`` (LMDB's layout: see
    :mod:`ackstore.storage.lmdb_file`), checked in order: each node's offset inside the
    page's node area (``upper`` .. ``psize - 8``), its key inside the page and of a size
    the tree holds (``kmin`` .. ``kmax`` bytes; a branch page's first key is unused), a
    leaf node's flags within ``allowed`` and holding ``required``, a plain leaf value inside
    the page; then that the nodes tile the node area (LMDB packs them: each node's extent,
    8 bytes + key + its data or overflow page number, rounded up to even, ends where the
    next begins, from ``upper`` to the page's end: a damaged size shows); then the keys in
    order. Returns ``(problem, specials, keys, children)``: ``problem`` is None or ``(node,
    what, value)`` for the first node that fails (``"offset"`` and its offset, ``"key"``
    and its key size, ``"ksize"`` and its key size, ``"flags"`` and its flags, ``"data"``
    and its data size, ``"extent"`` and its offset) or the first key out of order
    (``"order"`` and the key), and then ``keys`` and ``children`` are empty;
    ``specials`` ``(node, flags, key, key end, data size)`` of the leaf nodes before the
    problem that are not plain in-page data (every leaf node with ``all_special``);
    ``keys`` a branch page's every key, a leaf page's first and last; ``children`` a
    branch page's child page numbers. O(n log n)."""
    for name, value, hi in (
        ("off", off, _SSIZE),
        ("n", n, _SSIZE),
        ("upper", upper, _SSIZE),
        ("psize", psize, _SSIZE),
        ("kmin", kmin, 0xFFFF),
        ("kmax", kmax, 0xFFFF),
        ("allowed", allowed, 0xFFFF),
        ("required", required, 0xFFFF),
    ):
        _ranged(name, value, 0, hi)
    if off < 0 or n < 0 or psize < 24 or off > len(buf) - psize or 16 + 2 * n > psize:
        raise ValueError("a page outside the buffer")
    specials: list[tuple[int, int, bytes, int, int]] = []
    keys: list[bytes] = []
    children: list[int] = []
    extents: list[tuple[int, int, int]] = []
    for i, ptr in enumerate(struct.unpack_from(f"<{n}H", buf, off + 16)):
        if not upper <= ptr <= psize - 8:
            return (i, "offset", ptr), specials, [], []
        lo, hi, nflags, ksize = _NODE.unpack_from(buf, off + ptr)
        kend = ptr + 8 + ksize
        if kend > psize:
            return (i, "key", ksize), specials, [], []
        if not kmin <= ksize <= kmax and (leaf or i > 0):
            return (i, "ksize", ksize), specials, [], []
        key = bytes(buf[off + ptr + 8 : off + kend])
        keys.append(key)
        if not leaf:
            children.append(lo | hi << 16 | nflags << 32)
            extents.append((ptr, 8 + ksize, i))
            continue
        if nflags & ~allowed or nflags & required != required:
            return (i, "flags", nflags), specials, [], []
        dsize = lo | hi << 16
        if nflags & _NOT_PLAIN or all_special:
            specials.append((i, nflags, key, kend, dsize))
        elif kend + dsize > psize:
            return (i, "data", dsize), specials, [], []
        extents.append((ptr, 8 + ksize + (8 if nflags & _BIGDATA else dsize), i))
    at = upper
    for ptr, size, i in sorted(extents):
        if ptr != at:
            return (i, "extent", ptr), specials, [], []
        at = ptr + size + (size & 1)
    if at != psize and extents:
        ptr, _, i = max(extents)
        return (i, "extent", ptr), specials, [], []
    order = [int_key_order(k) for k in keys] if integer_keys else keys
    bad = next((i for i in range(1 if leaf else 2, n) if not order[i - 1] < order[i]), None)
    if bad is not None:
        return (bad, "order", keys[bad]), specials, [], []
    return None, specials, keys[:1] + keys[-1:] if leaf else keys, children


# the state layout (format 10, records.py's module docstring): a small cursor's whole state
# in one marker
STATE_TAG = 0xC2
STATE_PROPS, STATE_BATCHES, STATE_COUNTS, STATE_TRUNCATED = 0x01, 0x02, 0x04, 0x08
_STATE_FLAGS = STATE_PROPS | STATE_BATCHES | STATE_COUNTS | STATE_TRUNCATED
_LEDGER_MAX = (1 << 63) - 1


def state_marker(
    version: int,
    cursor_id: int,
    md_l: int,
    md_e: int,
    ledgers: list[tuple[int, BitMap, dict[int, tuple[int, int]], dict[int, int]]],
    properties: bytes,
    truncated: bool = False,
) -> bytes:
    """A whole marker record in the fixed envelope (format ``version``) and the state layout
    of records.py's module docstring, what :func:`state_fields` reads back: the mark-delete
    position ``(md_l, md_e)`` and ``ledgers``, ascending, none below ``md_l``, each
    ``(ledger, acked bitmap, {entry: (batch size, mask)}, {entry: delivery count})`` with
    nothing at or below ``md_e`` in ``md_l``; ``properties`` the msgpack map's bytes (empty:
    none); ``truncated``: the state holds only the lowest ranges a flush persists (PIP-299:
    flag :data:`STATE_TRUNCATED`, format 16). ValueError for an argument outside the layout (nothing is returned).
    O(ledgers + runs + batches + counts)."""
    _ranged("cursor_id", cursor_id, 0, _LEDGER_MAX)
    _ranged("md_l", md_l, 0, _LEDGER_MAX)
    _ranged("md_e", md_e, -1, _U32 - 1)
    flags = (
        (STATE_PROPS if properties else 0)
        | (STATE_TRUNCATED if truncated else 0)
        | (
            (STATE_BATCHES if any(b for _, _, b, _ in ledgers) else 0)
            | (STATE_COUNTS if any(c for _, _, _, c in ledgers) else 0)
        )
    )
    out = bytearray((STATE_TAG, flags))
    out += varint(cursor_id) + varint(md_l) + varint(md_e + 1) + varint(len(ledgers))
    last = md_l
    for ledger, bitmap, batches, counts in ledgers:
        _ranged("ledger", ledger, last, _LEDGER_MAX)
        start = md_e + 1 if ledger == md_l else 0
        out += varint(ledger - last)
        last = ledger + 1
        runs = run_bounds(bitmap)
        out += varint(len(runs))
        at = start
        for first, end in runs:
            if first < at:
                raise ValueError(f"ledger {ledger} holds entry {first}, at or below the mark-delete position")
            out += varint(first - at) + varint(end - first)
            at = end + 2
        if flags & STATE_BATCHES:
            out += varint(len(batches))
            at = start
            for entry in sorted(batches):
                size, mask = batches[entry]
                if entry < at or not 1 <= size <= _U32:
                    raise ValueError(
                        f"ledger {ledger}'s partial batch at entry {entry} of size {size} is outside the layout"
                    )
                out += varint(entry - at) + varint(size) + mask.to_bytes((size + 7) // 8, "little")
                at = entry + 1
        if flags & STATE_COUNTS:
            out += varint(len(counts))
            at = start
            for entry in sorted(counts):
                n = counts[entry]
                if entry < at or entry > _U32 or not 1 <= n <= _U32:
                    raise ValueError(f"ledger {ledger}'s delivery count {n} of entry {entry} is outside the layout")
                out += varint(entry - at) + varint(n - 1)
                at = entry + 1
    out += properties
    return seal_envelope(_MARKER, version, bytes(out))


def slot_head(key: bytes, value: bytes) -> tuple[int, int]:
    """A state slot's value (``ackstore/storage/records.py``): its sequence (a varint, at
    most 2**63 - 1) and the offset of the record, after the check (a big-endian CRC32 of
    ``key`` and the varint's bytes) and the zero bytes of room that may follow it; ValueError
    when it holds no whole sequence and check or the check fails. O(the room)."""
    seq, end = read_varint(value, 0, (1 << 63) - 1, "sequence", "a state slot")
    if len(value) - end < 4:
        raise ValueError("a state slot ends inside its check")
    if zlib.crc32(value[:end], zlib.crc32(key)) != int.from_bytes(value[end : end + 4], "big"):
        raise ValueError("a state slot's check does not match its key and sequence")
    start = end + 4
    while start < len(value) and value[start] == 0:
        start += 1
    return seq, start


def point_value(micros: int, fields: tuple[int, ...]) -> bytes:
    """A big-endian u64 ``micros``, then each int of ``fields`` as a varint (a history
    point's value: ``ackstore/history.py``); ``_native.point_value``'s twin."""
    if not isinstance(micros, int):
        raise TypeError(f"micros must be an int, got {type(micros).__name__}")
    if not 0 <= micros <= _I63:
        raise ValueError(f"micros={micros} is outside 0..{_I63}")
    if not isinstance(fields, tuple):
        raise TypeError(f"argument 2 must be tuple, not {type(fields).__name__}")
    out = bytearray(micros.to_bytes(8, "big"))
    for n in fields:
        if not isinstance(n, int):
            raise TypeError(f"a point field must be an int, got {type(n).__name__}")
        if not 0 <= n <= _I63:
            raise ValueError(f"a point field={n} is outside 0..{_I63}")
        if n < 0x80:  # most fields of most points: one byte
            out.append(n)
        else:
            out += varint(n)
    return bytes(out)


_I63 = (1 << 63) - 1


def read_varint(body: bytes, i: int, most: int, what: str, kind: str = "a state marker") -> tuple[int, int]:
    """The varint at ``body[i]`` and the offset after it; ValueError (naming ``kind``'s
    ``what``) past the end or over ``most``."""
    n = shift = 0
    while True:
        if i >= len(body):
            raise ValueError(f"{kind} ends inside its {what}")
        b = body[i]
        i += 1
        if shift > 63 or (shift == 63 and b & 0x7E):  # more than 64 bits
            raise ValueError(f"{kind}'s {what} is not a varint")
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if n > most:
        raise ValueError(f"{kind}'s {what} {n} is over {most}")
    return n, i


StateLedger = tuple[int, list[int], dict[int, tuple[int, int]], dict[int, int]]


def state_fields(body: bytes) -> tuple[int, int, int, list[StateLedger], int]:
    """``(cursor id, md ledger, md entry, ledgers, end)`` of a state-layout marker body (the
    envelope's body, its tag first): each ledger ``(ledger, [first, last, ...] of its runs,
    {entry: (batch size, mask)}, {entry: count})``; ``end``: where the properties start.
    ValueError for a body that does not follow the layout. O(len(body))."""
    if len(body) < 2 or body[0] != STATE_TAG or body[1] & ~_STATE_FLAGS:
        raise ValueError("a state marker's head is damaged (tag or flags)")
    flags = body[1]
    cid, i = read_varint(body, 2, _LEDGER_MAX, "cursor id")
    md_l, i = read_varint(body, i, _LEDGER_MAX, "mark-delete ledger")
    md_e1, i = read_varint(body, i, _U32, "mark-delete entry")
    n, i = read_varint(body, i, len(body), "ledger count")
    ledgers: list[StateLedger] = []
    last = md_l
    for _ in range(n):
        step, i = read_varint(body, i, _LEDGER_MAX - last, "ledger id")
        ledger = last + step
        last = ledger + 1
        at = md_e1 if ledger == md_l else 0
        start = at
        nruns, i = read_varint(body, i, len(body), "run count")
        runs: list[int] = []
        for _ in range(nruns):
            gap, i = read_varint(body, i, _U32, "run start")
            length, i = read_varint(body, i, _U32, "run length")
            first = at + gap
            end = first + length
            if end >= _U32 + 1:
                raise ValueError(f"a state marker's ledger {ledger} run ends past entry 2**32-1")
            runs += (first, end)
            at = end + 2
        batches: dict[int, tuple[int, int]] = {}
        counts: dict[int, int] = {}
        if flags & STATE_BATCHES:
            nb, i = read_varint(body, i, len(body), "batch count")
            at = start
            for _ in range(nb):
                gap, i = read_varint(body, i, _U32, "batch entry")
                size, i = read_varint(body, i, _U32, "batch size")
                width = (size + 7) // 8
                if not size or i + width > len(body):
                    raise ValueError(f"a state marker's ledger {ledger} batch of size {size} is damaged")
                entry = at + gap
                batches[entry] = (size, int.from_bytes(body[i : i + width], "little"))
                i += width
                at = entry + 1
        if flags & STATE_COUNTS:
            nc, i = read_varint(body, i, len(body), "count count")
            at = start
            for _ in range(nc):
                gap, i = read_varint(body, i, _U32, "counted entry")
                count, i = read_varint(body, i, _U32 - 1, "delivery count")
                entry = at + gap
                counts[entry] = count + 1
                at = entry + 1
        for entries in (batches, counts):
            if entries and max(entries) > _U32:
                raise ValueError(f"a state marker's ledger {ledger} names an entry past 2**32-1")
        ledgers.append((ledger, runs, batches, counts))
    if not flags & STATE_PROPS and i != len(body):
        raise ValueError(f"a state marker has {len(body) - i} bytes after its ledgers")
    return cid, md_l, md_e1 - 1, ledgers, i
