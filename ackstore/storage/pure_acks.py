"""The pure-Python twins of ``ackstore/_acks.c``: a ledger record's coded acks to the bitmap
a cursor keeps, and the Elias-Fano coder.

:func:`acks_roaring` reads the values a ledger record's bitmap fields code (an Elias-Fano
code, a Rice code, or gap planes already decompressed) and returns the set they stand for
(the values, with the holes flag their complement within ``first..last``, or the runs whose
bounds they are) in the portable roaring serialization, each container in its smallest
form: runs when ``2 + 4 x runs`` is smaller than the other form (an array's
``2 + 2 x values`` up to 4,096 values, else a bitset's 8,192 bytes), the non-run form on a
tie. ``BitMap.deserialize`` of it is the ledger's acks, with no flip or optimize pass after
it. Each function returns exactly the bytes its compiled twin returns and raises the same
``ValueError`` for the same damage (``tests/test_codecs.py`` runs both on the same cases).
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

import msgpack

from .pure_codecs import (
    _ranged,
    code_count,
    ledger_fields,
    open_envelope,
    plane_values,
    rice_values,
    stride_of,
    uint32_values,
    varint,
)

__all__ = [
    "ACKS_CODES",
    "ONE_PASS_CODES",
    "acks_roaring",
    "ef_code",
    "ef_width",
    "ledger_acks",
    "ledger_bounds",
    "record_bounds",
]

_U32 = 0xFFFFFFFF
_HOLES, _GAPS, _RICE, _STRIDE, _EF, _BOUNDS = 1, 4, 8, 16, 32, 64
"""the record flags this reads (``ackstore.storage.bitmaps``)"""
ACKS_CODES = frozenset((_RICE, _RICE | _HOLES, _EF, _EF | _HOLES, _BOUNDS))
"""the codes of a ledger record's acks :func:`acks_roaring` reads straight from the record"""
ONE_PASS_CODES = ACKS_CODES | {0, _HOLES, _STRIDE, _STRIDE | _HOLES}
"""the codes :func:`record_bounds` reads: :data:`ACKS_CODES`, none (0, no code), no holes
(1, the empty roaring form) and a stride of acks or of holes (``ONE_PASS_CODES`` in
``_small.c``)"""
_EMPTY_ROARING = b"\x3a\x30\x00\x00\x00\x00\x00\x00"
"""the portable roaring form of no values (a ledger acked whole from first to last is
written as its holes, these bytes: ``bitmaps.encode_bitmap``)"""
_STRIDE_MOST = 1 << 20
"""the most values of a stride :func:`record_bounds` expands (more: ValueError)"""
_ARRAY_MAX = 4096
_COOKIE_RUNS, _COOKIE_NO_RUNS = 12347, 12346
_NO_OFFSETS_BELOW = 4
"""with run containers, offsets are written for 4 containers or more"""


def ef_width(span: int, n: int) -> int:
    """The low-part width of an Elias-Fano code of ``n`` values over ``span`` entries:
    floor(log2(span / n)), 0 when the span is under twice the count. O(1)."""
    return max((span // n).bit_length() - 1, 0)


def ef_code(values: bytes | array | memoryview, first: int, last: int) -> bytes:  # type: ignore[type-arg]
    """The Elias-Fano code of ``values`` (native-endian uint32, ascending, within
    ``first..last``, as ``BitMap.to_array()`` gives them) that :func:`acks_roaring` reads:
    the count as a varint, then each value's offset from ``first`` split into its ``L`` low
    bits (packed, ``n x L`` bits) and its high part ``h``, one set bit at ``h + i`` of
    ``n + ((last - first) >> L) + 1`` bits; both least significant bit first, each padded to
    a whole byte; ``L`` is :func:`ef_width` of the span and the count. O(values + span / 2**L)."""
    _ranged("first", first, 0, _U32)
    _ranged("last", last, 0, _U32)
    arr = uint32_values(values)
    n = len(arr)
    span = last - first + 1 if last >= first else 0
    if n > span:
        raise ValueError("values are not ascending within first..last")
    width = ef_width(span, n)
    mask = (1 << width) - 1
    low = bytearray((n * width + 7) // 8)
    high = bytearray((n + ((span - 1) >> width) + 1 + 7) // 8)
    acc = filled = at = 0
    before = first - 1
    for i, v in enumerate(arr):
        if v <= before or v > last:
            raise ValueError("values are not ascending within first..last")
        before = v
        x = v - first
        acc |= (x & mask) << filled
        filled += width
        while filled >= 8:
            low[at] = acc & 0xFF
            acc >>= 8
            filled -= 8
            at += 1
        h = (x >> width) + i
        high[h >> 3] |= 1 << (h & 7)
    if filled:
        low[at] = acc
    return varint(n) + bytes(low) + bytes(high)


def _ef_values(payload: bytes, first: int, last: int) -> list[int]:
    """The values of an Elias-Fano code (:func:`ef_code`'s), ascending. O(values + span / 2**L)."""
    span = last - first + 1
    n, pos = code_count(payload, 0, "Elias-Fano payload ends early")
    if not 1 <= n <= span:
        raise ValueError(f"Elias-Fano count {n} is outside 1..{span}")
    width = ef_width(span, n)
    low_bytes, high_bits = (n * width + 7) // 8, n + ((span - 1) >> width) + 1
    if len(payload) - pos != low_bytes + (high_bits + 7) // 8:
        raise ValueError(f"Elias-Fano payload of {len(payload)} bytes does not hold {n} values over {span} entries")
    low, high = payload[pos : pos + low_bytes], payload[pos + low_bytes :]
    mask = (1 << width) - 1
    out: list[int] = []
    acc = filled = at = 0
    i, before, top = 0, -1, span - 1
    for byte_at, byte in enumerate(high):
        while byte:
            bit = (byte & -byte).bit_length() - 1
            byte &= byte - 1
            if i == n:
                raise ValueError("Elias-Fano values are not ascending within their span")
            while filled < width:
                acc |= low[at] << filled
                at += 1
                filled += 8
            x = (byte_at * 8 + bit - i) << width | (acc & mask)
            acc >>= width
            filled -= width
            if x <= before or x > top:
                raise ValueError("Elias-Fano values are not ascending within their span")
            before = x
            out.append(first + x)
            i += 1
    if i != n:
        raise ValueError("Elias-Fano values are not ascending within their span")
    return out


def acks_roaring(flags: Any, first: Any, last: Any, code: bytes) -> bytes:
    """The acks a ledger record's bitmap fields hold (``bitmaps.decode_bitmap``'s, for its
    Elias-Fano codes, the Rice code and the gap planes, the planes decompressed already), in
    the portable serialization with each container in its smallest form (the module
    docstring). ``flags``: the record's: the Elias-Fano code of the values (32), the Rice
    code (8) or the gap planes (4), each perhaps with the holes (1): the values are the holes
    of ``first..last``; or the Elias-Fano code of the runs' inner bounds (64, alone): an even
    number of them, where the acks stop and start again (the acks run from ``first`` to the
    first bound - 1, from the second to the third - 1, ..., from the last to ``last``).
    ``first..last``: the ledger's span, which the values lie in. ValueError for damage.
    O(values + the bytes written)."""
    return _roaring_of_bounds(_acks_bounds(flags, first, last, code))


def _acks_bounds(flags: Any, first: Any, last: Any, code: bytes) -> list[int]:
    """The bounds of the runs :func:`acks_roaring` writes (``[b[2i], b[2i + 1])`` each,
    maximal), checked as it checks them. ValueError for damage."""
    _ranged("flags", flags, 0, 255)
    _ranged("first", first, 0, _U32)
    _ranged("last", last, 0, _U32)
    kind = flags & ~_HOLES
    if kind not in (_EF, _RICE, _GAPS) and flags != _BOUNDS:
        raise ValueError(f"acks_roaring reads an Elias-Fano or Rice code or gap planes, not flags {flags}")
    if last < first:
        raise ValueError(f"last={last} is below first={first}")
    code = bytes(code)
    if kind == _RICE:
        values: list[int] = list(rice_values(code, first))
    elif kind == _GAPS:
        values = sorted(set(plane_values(code, first)))  # ascending already: repeats dropped
    else:
        values = _ef_values(code, first, last)
    if values and values[-1] > last:
        raise ValueError(f"a ledger record's value {values[-1]} is past its last entry {last}")
    if flags == _BOUNDS:
        if not values or len(values) % 2 or values[0] == first:
            raise ValueError(f"{len(values)} run bounds inside {first}..{last} are not pairs after the first run")
        return [first, *values, last + 1]
    return _bounds_of_values(values, bool(flags & _HOLES), first, last)


def ledger_acks(value: bytes | memoryview, rtype: int, max_version: int) -> tuple[int, bytes, int, int | None] | None:
    """``(ledger, acks, runs, owner or None)`` of a ledger record in the fixed envelope (type
    ``rtype``) read in one pass when it holds acks only (no partial batch, no delivery count)
    coded as :func:`acks_roaring` reads them straight from the record (flags 8, 9, 32, 33,
    64): its acks in the portable serialization (:func:`acks_roaring`'s bytes) and its number
    of maximal runs, which is the one the record states. None for every other record, damaged
    or not (``records.decode_ledger_owned`` then reads it the long way and names any damage).
    O(values + the bytes written)."""
    read = ledger_bounds(value, rtype, max_version)
    if read is None or (len(read[0]) == 9 and read[0][8]):
        return None
    fields, bounds = read
    return fields[0], _roaring_of_bounds(bounds), fields[5], fields[7] if len(fields) > 7 else None


def ledger_bounds(
    value: bytes | memoryview, rtype: int, max_version: int, codes: frozenset[int] = ACKS_CODES
) -> tuple[list[Any], list[int]] | None:
    """``(fields, bounds)`` of a ledger record in the fixed envelope (type ``rtype``) read in
    one pass: its body's fields (``[ledger, flags, first, last, payload, runs, batches(,
    owner(, counts))]``) and the bounds of its runs of acks (``[b[2i], b[2i + 1])`` each,
    maximal), when it holds no partial batch and codes its acks in one of ``codes``
    (:data:`ACKS_CODES`, which :func:`acks_roaring` reads straight from the record, or
    :data:`ONE_PASS_CODES`), their number of runs the one the record states; None for every
    other record, damaged or not. The compiled twin reads the same records (``ledger_acks``
    in ``_acks.c``, ``small_of_record`` in ``_small.c``). O(values)."""
    _ranged("rtype", rtype, 0, 255)
    _ranged("max_version", max_version, 0, 255)
    if len(value) < 7 or value[0] != 0xC1 or value[1] != rtype:
        return None
    try:
        body = open_envelope(value, max_version)[2]
        ledger_fields(body)  # the body's shape, as the long way reads it
    except ValueError:
        return None
    fields = msgpack.unpackb(body)
    flags, first, last, payload, runs, batches = fields[1:7]
    if batches or flags not in codes:
        return None
    try:
        bounds = record_bounds(flags, first, last, payload)
    except ValueError:
        return None
    return (fields, bounds) if len(bounds) // 2 == runs else None


def record_bounds(flags: Any, first: Any, last: Any, code: bytes) -> list[int]:
    """The bounds of the runs of acks a ledger record's bitmap fields hold (``[b[2i], b[2i +
    1])`` each, maximal): a code :func:`acks_roaring` reads, a stride of acks or holes, no
    holes (one run, ``first..last``) or no acks (flags 0, no code). ValueError for damage or
    another code. ``ledger_run_bounds`` in ``_acks.c``, the same. O(values)."""
    if flags == 0 and not code:
        return []
    if flags == _HOLES and bytes(code) == _EMPTY_ROARING and 0 <= first <= last <= _U32:
        return [first, last + 1]
    if flags in (_STRIDE, _STRIDE | _HOLES):
        _ranged("first", first, 0, _U32)
        _ranged("last", last, first, _U32)
        low, step, count = stride_of(bytes(code), first, last)
        if count > _STRIDE_MOST:
            raise ValueError(f"a stride of {count} values: more than {_STRIDE_MOST} read in one pass")
        return _bounds_of_values(list(range(low, low + step * count, step)), bool(flags & _HOLES), first, last)
    return _acks_bounds(flags, first, last, code)


def _bounds_of_values(values: list[int], holes: bool, first: int, last: int) -> list[int]:
    """The bounds of the runs ``[b[2i], b[2i + 1])`` of ascending ``values``, or with
    ``holes`` of their complement within ``first..last``. O(values)."""
    bounds: list[int] = []
    if holes:
        at = first
        for v in values:
            if v > at:
                bounds += (at, v)
            at = v + 1
        if at <= last:
            bounds += (at, last + 1)
    else:
        for v in values:
            if bounds and bounds[-1] == v:
                bounds[-1] = v + 1
            else:
                bounds += (v, v + 1)
    return bounds


_ONES = b"\xff" * 8192


def _bitset(runs: list[tuple[int, int]]) -> bytes:
    """A bitset container's 8,192 bytes with the bits of ``runs`` (lows ``(lo, hi)``) set:
    whole bytes by slice, the partial ones at either end of a run by their bits. O(runs)."""
    out = bytearray(8192)
    for lo, hi in runs:
        a, b = lo >> 3, hi >> 3
        if a == b:
            out[a] |= ((1 << (hi - lo + 1)) - 1) << (lo & 7)
            continue
        out[a] |= (0xFF << (lo & 7)) & 0xFF
        out[a + 1 : b] = _ONES[: b - a - 1]
        out[b] |= (1 << ((hi & 7) + 1)) - 1
    return bytes(out)


def _roaring_of_bounds(bounds: list[int]) -> bytes:
    """The portable serialization of the runs ``[b[2i], b[2i + 1])``, each container in its
    smallest form (the module docstring). O(runs + containers + the bytes written)."""
    containers: list[tuple[int, list[tuple[int, int]]]] = []  # (key, its runs' lows: (lo, hi))
    for start, end in zip(bounds[::2], bounds[1::2], strict=True):
        low_key = start >> 16
        if not containers or containers[-1][0] != low_key:
            containers.append((low_key, []))
        if (end - 1) >> 16 == low_key:  # within one container (most runs)
            containers[-1][1].append((start & 0xFFFF, (end - 1) & 0xFFFF))
            continue
        for key in range(low_key, ((end - 1) >> 16) + 1):
            if containers[-1][0] != key:
                containers.append((key, []))
            base = key << 16
            containers[-1][1].append((max(start, base) - base, min(end, base + 65536) - 1 - base))
    heads, bodies, forms = [], [], []
    for key, runs in containers:
        card = sum(hi - lo + 1 for lo, hi in runs)
        other = 2 + 2 * card if card <= _ARRAY_MAX else 8192
        heads.append(struct.pack("<HH", key, card - 1))
        if 2 + 4 * len(runs) < other:
            forms.append(2)
            bodies.append(struct.pack(f"<H{2 * len(runs)}H", len(runs), *(x for lo, hi in runs for x in (lo, hi - lo))))
        elif card <= _ARRAY_MAX:
            forms.append(0)
            lows = [x for lo, hi in runs for x in range(lo, hi + 1)]
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
        else:
            forms.append(1)
            bodies.append(_bitset(runs))
    nc = len(containers)
    if 2 in forms:
        flags = bytearray((nc + 7) // 8)
        for j, form in enumerate(forms):
            if form == 2:
                flags[j // 8] |= 1 << (j % 8)
        head = struct.pack("<I", _COOKIE_RUNS | (nc - 1) << 16) + bytes(flags)
    else:
        head = struct.pack("<II", _COOKIE_NO_RUNS, nc)
    head += b"".join(heads)
    if 2 not in forms or nc >= _NO_OFFSETS_BELOW:
        at = len(head) + 4 * nc
        for body in bodies:
            head += struct.pack("<I", at)
            at += len(body)
    return head + b"".join(bodies)
