"""Bitmap codecs of a ledger record's payload: roaring, holes, zlib, gap planes, Rice, Elias-Fano.

:func:`encode_bitmap` returns ``(flags, first, last, payload)``; :func:`decode_bitmap`
reverses it. The flags say how the payload is coded:

========  ==========================================================================
``1``     holes: the payload holds the complement of the acks within [first, last]
``2``     zlib: the payload is zlib-compressed
``4``     gaps: zlib of the byte planes of uint32 gaps between values (not roaring)
``8``     Rice: a Golomb-Rice code of the gaps (small sparse sets, near their entropy)
``16``    stride (format 8): evenly spaced values, three varints: the first value's offset
          from ``first``, the step, the count (alone, or with ``1``)
``32``    Elias-Fano (format 14): the count, then each value's offset from ``first`` as
          ``L`` low bits (packed) and a high part in unary (one set bit at ``high + i``),
          ``L = floor(log2(span / count))`` (alone, or with ``1``): as small as the gap
          planes for holes scattered at random, and read without a decompression
          (``ackstore/_acks.c`` documents the bits)
``64``    run bounds (format 14, alone): the Elias-Fano code of the entries inside
          ``(first, last]`` where the acks stop and start again, an even number of them
          (the acks run from ``first`` to the first - 1, from the second to the third - 1,
          ..., from the last to ``last``): acks and holes in short runs, two values a run
========  ==========================================================================

The Elias-Fano codes, the Rice code and the gap planes are read by one function
(:func:`ackstore.storage.codecs.acks_roaring`) straight into the bitmap a cursor keeps: the
values, or their complement, with each container in its smallest form, so nothing is
flipped or optimized after it.

The gap planes are computed in compiled code where it was built (else with numpy where the
``fast`` extra installed it, or in plain Python: the same bytes). Decoding goes through
:mod:`ackstore.storage.codecs` (compiled where it could be built, the same results in pure
Python otherwise).
"""

from __future__ import annotations

import math
import zlib

from pyroaring import BitMap

from ..errors import CorruptRecordError
from ..ledger_acks import bitmap_of_range, count_runs
from . import codecs
from .pure_codecs import stride_of, varint

__all__ = ["encode_bitmap", "decode_bitmap", "smallest_encoding"]

_HOLES = 1  # the payload holds the complement of the acks within [first, last]
"""ledger payload encodings (bit flags)"""
_ZLIB = 2  # the payload is zlib-compressed
_GAPS = 4  # the payload is zlib(byte planes of uint32 gaps between values), not a roaring bitmap

_RICE = 8  # the payload is a Rice code of the gaps: small sparse sets near their entropy
_STRIDE = 16  # (format 8) the payload is varints: offset of the first value from ``first``, step, count
_EF = 32  # (format 14) the payload is an Elias-Fano code of the values (``codecs.ef_code``)
_BOUNDS = 64  # (format 14) the payload is an Elias-Fano code of the runs' inner bounds

_U32_MAX = (1 << 32) - 1
"""the largest entry id"""

_RICE_MAX_VALUES = 256
"""the Rice code is tried for sets up to this many values (the pure-Python coder takes ~1 us a
value)"""

_ROARING_RUN_LENGTH = 80
"""a set whose runs average this many values or more is written as roaring: its run containers
cost 4 bytes a run (<= 0.05 B a value), the gap planes would not gain"""

_EF_OVER_ZLIB = 1.02
"""an Elias-Fano code is taken over zlib's when it is at most this much larger: it is read
several times faster, with no decompression (holes scattered by chance: the two are within
1% of each other; gaps that repeat a pattern: zlib's is much smaller)"""

_ZLIB_OVER_ENTROPY = 1.3
"""zlib of the gap planes costs about this much over the entropy of random gaps (measured: 1.14x
at a mean gap of 10, 1.29x at 2)"""

_GAPS_MAX_VALUES = 1 << 18
"""the gap encoding is used for sets up to this many values (bounds flush CPU)"""


def _gap_planes(values: BitMap, first: int) -> bytes:
    """Gaps between consecutive values (the first from ``first``) as little-endian uint32,
    split into 4 byte planes, low bytes first (:func:`ackstore.storage.codecs.gap_planes`,
    compiled where possible)."""
    return codecs.gap_planes(values.to_array(), first)


def _rice(values: BitMap, first: int) -> bytes:
    """``k``, the value count (varint) and a Golomb-Rice code of the gaps, most significant
    bit first (:func:`ackstore.storage.codecs.rice_code`, compiled where possible): each gap
    (minus one after the first) as its quotient by ``2**k`` in unary, then ``k`` remainder
    bits. For gaps drawn at random (holes scattered by chance) this is within ~10% of their
    entropy. O(values): ~20 ns a value compiled, ~1 us in Python (small sets only)."""
    return codecs.rice_code(values.to_array(), first)


def _stride(values: BitMap, first: int, count: int) -> bytes:
    """The stride payload of evenly spaced ``values`` (``_is_stride`` said so)."""
    low = values.min()
    step = (values.max() - low) // (count - 1)
    return varint(low - first) + varint(step) + varint(count)


def _from_stride(payload: bytes, first: int, last: int) -> BitMap:
    """The values of a stride payload; CorruptRecordError unless they lie in [first, last]
    and in 32 bits (``pure_codecs.stride_of``). O(values)."""
    try:
        low, step, count = stride_of(payload, first, last)
    except ValueError as e:
        raise CorruptRecordError(str(e)) from None
    return bitmap_of_range(range(low, low + step * (count - 1) + 1, step))


def encode_bitmap(bitmap: BitMap, runs: int | None = None) -> tuple[int, int, int, bytes]:
    """A small encoding of an ack bitmap: ``(flags, first, last, payload)``, chosen from
    cheap statistics, not by encoding several ways and keeping the smallest.

    The set written is the acked entries, or the holes between the first and last acked
    entry when there are fewer holes. Then, from its count, run count, span and roaring
    size (``__sizeof__``: computed from the containers, nothing serialized):

    - runs of ``_ROARING_RUN_LENGTH`` values or more on average: a portable roaring
      bitmap (its run containers, 4 bytes a run, are under 0.05 B a value);
    - evenly spaced values (one gap repeated), acks or holes: the stride code (three
      varints; the acks themselves when they are evenly spaced, so reading them needs no
      complement);
    - a roaring form no larger than zlib would make the gaps if the runs lay at random
      (dense sets, where a bitmap container's 1 bit a position wins): roaring;
    - at most ``_RICE_MAX_VALUES`` values: the Rice code of the gaps (near that entropy,
      2 bytes of overhead, where zlib's framing would cost more than the data);
    - else an Elias-Fano code: of the values, or of the runs' inner bounds when there are
      fewer of those (runs of more than two values on average), unless zlib of the gaps'
      byte planes (up to ``_GAPS_MAX_VALUES`` values; more than that: of the roaring form)
      is smaller by more than ``_EF_OVER_ZLIB`` (gaps that repeat a pattern): the
      Elias-Fano codes are read fastest of the small codes.

    On every workload of ``benchmarks/figures.py`` and the tests' corpus the result is
    within a few percent of :func:`smallest_encoding`, which tries them all.
    ``runs``: the bitmap's run count when the caller knows it. O(containers) to choose,
    plus O(values) for the gap and Rice codes.
    """
    if not bitmap:
        return 0, 0, -1, b""
    first, last = bitmap.min(), bitmap.max()
    n = len(bitmap)
    if runs is None:
        runs = count_runs(bitmap)
    holes = last - first + 1 - n
    bitmap.run_optimize()  # the smallest in-memory form, as the cache budget counts it
    if holes and holes < n and _is_stride(bitmap, n):  # acks evenly spaced: a few bytes, no flip to read
        return _STRIDE, first, last, _stride(bitmap, first, n)
    if holes < n:  # write the holes: there are fewer, and one run fewer of them
        values, flag, count, vruns = bitmap.flip(first, last + 1), _HOLES, holes, runs - 1
        values.run_optimize()
    else:
        values, flag, count, vruns = bitmap, 0, n, runs
    if count == 0 or count >= _ROARING_RUN_LENGTH * vruns:
        return flag, first, last, values.serialize()
    span = last - first + 1
    level = _zlib_level(count)
    small = count <= _RICE_MAX_VALUES
    if _is_stride(values, count):  # evenly spaced: three varints
        return flag | _STRIDE, first, last, _stride(values, first, count)
    if values.__sizeof__() <= _ZLIB_OVER_ENTROPY * _gap_entropy(count, vruns, span) / 8:
        return flag, first, last, values.serialize()
    if small:
        return flag | _RICE, first, last, _rice(values, first)
    if 0 < 2 * (runs - 1) < count:  # fewer bounds than values: runs of three or more on average
        ef_flag, ef = _BOUNDS, codecs.ef_code(_inner_bounds(bitmap).to_array(), first, last)
    else:
        ef_flag, ef = flag | _EF, codecs.ef_code(values.to_array(), first, last)
    if count <= _GAPS_MAX_VALUES:
        other = flag | _GAPS, zlib.compress(_gap_planes(values, first), level)
    else:
        other = flag | _ZLIB, zlib.compress(values.serialize(), 1)
    if len(ef) <= _EF_OVER_ZLIB * len(other[1]):
        return ef_flag, first, last, ef
    return other[0], first, last, other[1]


def _inner_bounds(bitmap: BitMap) -> BitMap:
    """The entries inside ``(min, max]`` of non-empty ``bitmap`` where its runs stop (one
    past a run's last) and start again (a run's first): what the run-bounds code writes.
    O(containers), in C."""
    bounds = (bitmap - bitmap.shift(1)) | (bitmap - bitmap.shift(-1)).shift(1)  # firsts, and one past each last
    bounds.discard(bitmap.min())
    if bitmap.max() < _U32_MAX:
        bounds.discard(bitmap.max() + 1)
    return bounds


def _zlib_level(count: int) -> int:
    """zlib's level for a set of ``count`` values: 6 costs 3x level 1 for ~1% on big sets."""
    return 6 if count <= 1024 else 1


def _gap_entropy(count: int, runs: int, span: int) -> float:
    """Bits the gaps of ``count`` values in ``runs`` runs over ``span`` positions would take
    if the runs were placed at random: which gaps start a run (binary entropy), and the
    geometric-distributed distance before each run. O(1)."""
    p = runs / count
    starts = 0.0 if p >= 1 else -count * (p * math.log2(p) + (1 - p) * math.log2(1 - p))
    return starts + runs * math.log2(math.e * ((span - count) / runs + 1))


def _is_stride(values: BitMap, count: int) -> bool:
    """Evenly spaced (one gap repeated: zlib codes it in a few bytes, Rice or a bitmap in
    bits per value): the span is ``count - 1`` steps and every value but the last has its
    successor one step on (one chain, then). O(containers), in C."""
    if count < 3:
        return False
    low, high = values.min(), values.max()
    step, rest = divmod(high - low, count - 1)
    return rest == 0 and values.intersection_cardinality(values.shift(step)) == count - 1


def smallest_encoding(bitmap: BitMap) -> tuple[int, int, int, bytes]:
    """The yardstick :func:`encode_bitmap` is measured against (tests, benchmarks): every
    candidate it chooses from (acks or holes; roaring, zlib of roaring, gap planes, Rice;
    Elias-Fano; the same zlib levels) made, the smallest kept. Decodes with :func:`decode_bitmap`."""
    if not bitmap:
        return 0, 0, -1, b""
    first, last = bitmap.min(), bitmap.max()
    bitmap.run_optimize()
    holes = bitmap.flip(first, last + 1)
    holes.run_optimize()
    found = []
    for flag, values in ((0, bitmap), (_HOLES, holes)):
        raw = values.serialize()
        found += [(flag, raw), (flag | _ZLIB, zlib.compress(raw, 1))]
        if values and len(values) <= _GAPS_MAX_VALUES:
            found.append((flag | _GAPS, zlib.compress(_gap_planes(values, first), _zlib_level(len(values)))))
        if values and len(values) <= _RICE_MAX_VALUES:
            found.append((flag | _RICE, _rice(values, first)))
        if values:
            found.append((flag | _EF, codecs.ef_code(values.to_array(), first, last)))
    bounds = _inner_bounds(bitmap)
    if bounds:
        found.append((_BOUNDS, codecs.ef_code(bounds.to_array(), first, last)))
        if values and _is_stride(values, len(values)):
            found.append((flag | _STRIDE, _stride(values, first, len(values))))
    flag, payload = min(found, key=lambda c: len(c[1]))
    return flag, first, last, payload


_KNOWN_FLAGS = _HOLES | _ZLIB | _GAPS | _RICE | _STRIDE | _EF | _BOUNDS
"""every flag a writer sets; any other bit is damage (or a newer format)"""


def decode_bitmap(flags: int, first: int, last: int, payload: bytes) -> BitMap:
    """The acks of a ledger record's bitmap fields. Unknown flag bits, or two codes
    together (Rice and gap planes, a stride with another), raise CorruptRecordError (they
    would decode as something else)."""
    if (
        type(flags) is not int
        or flags & ~_KNOWN_FLAGS
        or (flags & _RICE and flags & _GAPS)
        or (flags & _STRIDE and flags & (_ZLIB | _GAPS | _RICE | _EF))
        or (flags & _EF and flags & (_ZLIB | _GAPS | _RICE))
        or (flags & _BOUNDS and flags != _BOUNDS)
    ):
        raise CorruptRecordError(f"a ledger record's encoding flags {flags!r} are not ones this ackstore writes")
    if last < first:
        return BitMap()
    if flags & _STRIDE:
        bitmap = _from_stride(payload, first, last)
        if not flags & _HOLES:
            return bitmap  # evenly spaced acks: no runs to gather (a step of 1 is built as one run)
    elif flags & (_EF | _BOUNDS | _RICE | _GAPS):  # read straight into the form the cursor keeps
        code = zlib.decompress(payload) if flags & _GAPS and payload else payload
        return BitMap.deserialize(codecs.acks_roaring(flags & ~_ZLIB, first, last, code))
    else:
        bitmap = BitMap.deserialize(zlib.decompress(payload) if flags & _ZLIB else payload)
    if flags & _HOLES:
        bitmap = bitmap.flip(first, last + 1)
    bitmap.run_optimize()  # the smallest in-memory form, as the cache budget counts it
    return bitmap
