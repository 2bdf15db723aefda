"""The record codec: every encoding round-trips, damage is detected."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, FrozenBitMap

from ackstore import CorruptRecordError
from ackstore.fields import native
from ackstore.ledger_acks import LedgerAcks, count_runs
from ackstore.storage.bitmaps import decode_bitmap, encode_bitmap
from ackstore.storage.records import (
    IndexEntry,
    Marker,
    decode_ledger,
    decode_marker,
    decode_record,
    encode_fixed_marker,
    encode_ledger,
    encode_marker,
)

from .codec_impls import IMPLEMENTATIONS

T = TypeVar("T")
_TOP = (1 << 32) - 1  # the top entry id a ledger record may hold


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, (1 << 32) - 2), max_size=300) | st.lists(st.integers(0, 5000), max_size=4000))
def test_bitmap_encodings_round_trip(values: list[int]) -> None:
    bm = BitMap(values)
    assert decode_bitmap(*encode_bitmap(BitMap(bm))) == bm


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, (1 << 32) - 10),
    step=st.integers(1, 1 << 20),
    count=st.integers(1, 3000),
    holes=st.booleans(),
    extra=st.lists(st.integers(0, 200_000), max_size=3),
)
def test_strides_and_stride_holes_round_trip(start: int, step: int, count: int, holes: bool, extra: list[int]) -> None:
    """Evenly spaced acks, or a span with evenly spaced holes (the stride code, format 8),
    and the same with a few values off the stride (any other code) decode to themselves."""
    count = min(count, ((1 << 32) - 1 - start) // step + 1)
    stride = BitMap(array("I", range(start, start + step * count, step)))  # not pyroaring's stepped range (see below)
    bm = BitMap(range(stride.min(), stride.max() + 1)) - stride if holes and step > 1 else stride
    for values in (
        bm,
        bm | BitMap(x + (bm.min() if bm else 0) for x in extra if x + (bm.min() if bm else 0) < 1 << 32),
    ):
        assert decode_bitmap(*encode_bitmap(BitMap(values))) == values


@pytest.mark.parametrize(
    ("name", "keep", "limit"),
    [
        ("random 10% acks", lambda r, e: r.random() < 0.1, 2.0),
        ("alternating", lambda r, e: e % 2 == 0, 0.5),
        ("runs of 1000, single holes", lambda r, e: e % 1001 != 1000, 0.5),
        ("runs of ~1000, random holes", lambda r, e: r.random() >= 0.001, 2.0),
    ],
)
def test_bytes_per_range_stays_small(name: str, keep, limit: float) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    bm = BitMap(e for e in range(200_000) if keep(rng, e))
    flags, _first, _last, payload = encode_bitmap(BitMap(bm))
    assert len(payload) / count_runs(bm) <= limit, (name, flags, len(payload))


def _decoded_flips(value: bytes, decode: Callable[[bytes], T]) -> Iterator[T]:
    """``decode`` of ``value`` with each byte flipped in turn, where it does not raise
    CorruptRecordError (the caller asserts those decoded to the original)."""
    for i in range(len(value)):
        broken = bytearray(value)
        broken[i] ^= 0xFF
        try:
            yield decode(bytes(broken))
        except CorruptRecordError:
            continue


def test_ledger_record_round_trip_and_damage() -> None:
    acks = LedgerAcks(BitMap([1, 2, 3, 9]), {5: (8, 0b101)})
    value = encode_ledger(42, acks)
    ledger, back = decode_ledger(value)
    assert ledger == 42 and back.bitmap == acks.bitmap and back.batches == acks.batches and back.runs == 2
    for got in _decoded_flips(value, decode_ledger):  # a flip the envelope tolerates changes nothing
        assert got[0] == 42 and got[1].bitmap == acks.bitmap


def test_marker_round_trip() -> None:
    m = Marker(False, 7, (3, 4), (3, 5), {"k": 1}, {3: IndexEntry(5, 2), 4: None}, truncated=True)
    assert decode_marker(encode_marker(m)) == m
    with pytest.raises(CorruptRecordError, match="expected a marker"):
        decode_marker(encode_ledger(1, LedgerAcks(BitMap([1]))))


def _delta(index: dict[int, IndexEntry | None], props: dict[str, int | str] | None = None, **kw: int) -> Marker:
    return Marker(
        False,
        kw.get("prev", 11),
        (kw.get("md_l", 3), kw.get("md_e", -1)),
        (kw.get("rp_l", 3), kw.get("rp_e", 0)),
        props or {},
        index,
        extra={"c": kw.get("c", 9)},
    )


def _encode_delta(m: Marker) -> bytes:
    return encode_fixed_marker(
        m.prev, m.mark_delete, m.read_position, m.properties, sorted(m.index.items()), m.extra["c"], m.full
    )


DELTAS = [
    _delta({3: IndexEntry(40, 2500, FrozenBitMap([5003]))}),  # the common one: one new ack
    _delta({3: IndexEntry(40, 7, FrozenBitMap(range(100, 164))), 4: None, 9: IndexEntry(41, 1)}),
    _delta({}, {"k": 1, "s": "v"}, md_e=(1 << 32) - 2, rp_e=(1 << 32) - 2),
    _delta({(1 << 32) - 1: IndexEntry((1 << 32) - 2, (1 << 32) - 1)}, prev=(1 << 32) - 2, c=(1 << 32) - 1),
]


FULLS = [
    replace(DELTAS[0], full=True),
    replace(DELTAS[2], full=True),
    replace(_delta({3: IndexEntry(40, 7, FrozenBitMap(range(100, 164)), {170: 2}), 9: IndexEntry(41, 1)}), full=True),
    replace(DELTAS[0], full=True, prev=-1),  # (a cursor's first state: it follows no marker)
]


@pytest.mark.parametrize("m", DELTAS + FULLS)
def test_a_marker_takes_the_fixed_layout_and_round_trips(m: Marker) -> None:
    value = _encode_delta(m)
    assert isinstance(decode_record(value)[1], bytes)  # the fixed layout, not msgpack
    assert decode_marker(value) == m
    for got in _decoded_flips(value, decode_marker):  # every single-byte flip is caught, or changes nothing
        assert got == m


def test_the_common_delta_marker_is_small() -> None:
    """One new ack in one ledger: 16-byte key + this value <= 80 bytes (issue 15's target)."""
    assert 16 + len(_encode_delta(DELTAS[0])) <= 80


@pytest.mark.parametrize(
    "m",
    [
        _delta({1 << 32: IndexEntry(1, 1)}),  # a ledger id past 32 bits
        _delta({3: IndexEntry(1 << 32, 1)}),  # a sequence past 32 bits
        _delta({}, md_e=(1 << 32) - 1),  # entry + 1 does not fit
        _delta({}, rp_l=1 << 40),
        _delta({3: IndexEntry(5, 1, FrozenBitMap(range(70_000)))}),  # over 65,535 adds
    ],
)
def test_a_delta_marker_that_does_not_fit_the_layout_is_written_as_msgpack(m: Marker) -> None:
    value = _encode_delta(m)
    assert not isinstance(decode_record(value)[1], bytes)
    assert decode_marker(value) == m


def test_fixed_markers_of_format_8_still_read() -> None:
    """Formats 6-8 wrote delta markers only in the fixed layout, with no flags byte."""
    import struct
    import zlib

    head = struct.pack("<BIIIIIIH", 0xC1, 7, 3, 0, 3, 1, 9, 1) + struct.pack("<IIIHH", 3, 41, 2500, 1, 0)
    body = head + struct.pack("<I", 5003)
    value = struct.pack("<BBBI", 0xC1, 2, 8, zlib.crc32(body, 2 << 8 | 8)) + body
    assert decode_marker(value) == replace(DELTAS[0], prev=7, mark_delete=(3, -1), read_position=(3, 0))


def test_a_full_marker_naming_a_dropped_ledger_is_damage() -> None:
    value = _encode_delta(replace(DELTAS[1], full=True))  # its index holds a dropped ledger
    with pytest.raises(CorruptRecordError, match="a full marker names a ledger as dropped"):
        decode_marker(value)


def test_records_of_format_5_still_read() -> None:
    """As format 5 wrote them: a msgpack envelope ``[type, version, crc32(body), body]``,
    a marker body as a msgpack array, adds as the first entry and gaps."""
    import zlib

    import msgpack

    def old(rtype: int, body: bytes) -> bytes:
        return msgpack.packb([rtype, 5, zlib.crc32(body), body])

    marker_body = msgpack.packb([False, 7, 3, -1, 3, 4, {"k": "v"}, [[3, 5, 2, [10, 2, 3]], [4, -1, 0]], False, 9])
    m = decode_marker(old(2, marker_body))
    assert m == Marker(
        False,
        7,
        (3, -1),
        (3, 4),
        {"k": "v"},
        {3: IndexEntry(5, 2, FrozenBitMap([10, 12, 15])), 4: None},
        extra={"c": 9},
    )
    ledger_body = msgpack.packb([42, 0, 1, 4, BitMap([1, 2, 4]).serialize(), 2, [], 9])
    ledger, acks = decode_ledger(old(1, ledger_body))
    assert ledger == 42 and list(acks.bitmap) == [1, 2, 4] and acks.runs == 2
    with pytest.raises(CorruptRecordError, match="checksum"):
        decode_marker(msgpack.packb([2, 5, zlib.crc32(marker_body) ^ 1, marker_body]))


def test_gap_planes_are_the_same_bytes_compiled_with_numpy_and_in_plain_python() -> None:
    """The gap planes of a flush's encode: the compiled twin's, the pure twin's with numpy
    (the ``fast`` extra) and without it give the same bytes, which every decoder reads back
    to the values; values not ascending from ``first`` are refused alike."""
    import random

    from pyroaring import BitMap

    from ackstore.storage import pure_codecs

    rng = random.Random(4)
    sets = [
        BitMap([5]),
        BitMap([0]),
        BitMap(range(1, 5000, 2)),
        BitMap(rng.sample(range(1 << 32), 3000)),
        BitMap(rng.sample(range(100_000), 20_000)),
    ]
    twins = [lambda v, f: pure_codecs.gap_planes(v, f, use_numpy=False), pure_codecs.gap_planes]
    twins += [native.gap_planes] if native is not None else []
    for values in sets:
        first = values.min() - rng.randrange(3) if values.min() >= 2 else values.min()
        raw = [twin(values.to_array(), first) for twin in twins]
        assert all(r == raw[0] for r in raw) and len(raw[0]) == 4 * len(values)
        for impl in IMPLEMENTATIONS:
            assert BitMap.deserialize(impl.acks_roaring(4, first, _TOP, raw[0])) == values, impl
    for twin in twins:
        for bad, first in ((array("I", [3, 9]), 4), (array("I", [3, 3]), 0), (array("I", [5, 4]), 0)):
            with pytest.raises(ValueError, match="values are not ascending from first"):
                twin(bad, first)
        with pytest.raises(ValueError, match="no values to code"):
            twin(array("I"), 0)


def _in_runs(rng: random.Random, span: int, length: int, count: int) -> BitMap:
    """``count`` runs of ``length`` values each at random starts in ``0..span``."""
    out = BitMap()
    for start in rng.sample(range(span - length), count):
        out.add_range(start, start + length)
    return out


def _spaced_runs(span: int, length: int, every: int) -> BitMap:
    """Runs of ``length`` values starting every ``every`` entries of ``0..span``: gaps that
    repeat a pattern (zlib's, not the Elias-Fano code's)."""
    out = BitMap()
    for start in range(0, span - length, every):
        out.add_range(start, start + length)
    return out


def test_encode_bitmap_round_trips_every_path_it_chooses() -> None:
    import random

    from pyroaring import BitMap

    from ackstore.storage import bitmaps as records

    rng = random.Random(9)
    cases = {
        "empty holes (one run)": (BitMap(range(10, 5000)), 0),
        "stride 2": (BitMap(range(1, 50_000, 2)), records._STRIDE),  # three varints
        "stride 20": (BitMap(range(1, 50_000, 20)), records._STRIDE),
        "a few evenly spaced": (BitMap(range(1, 50_000, 1001)), records._STRIDE),
        "a handful evenly spaced": (BitMap([10, 20, 30, 40]), records._STRIDE),
        "evenly spaced holes": (BitMap(range(100_000)) - BitMap(range(5, 100_000, 7)), records._STRIDE),
        "two values": (BitMap([3, 9]), records._RICE),
        "dense random": (BitMap(random.Random(3).sample(range(65_536), 30_000)), 0),
        "random holes in runs": (BitMap(range(100_000)) - BitMap(rng.sample(range(100_000), 60)), records._RICE),
        "many random holes": (BitMap(range(100_000)) - BitMap(rng.sample(range(100_000), 2000)), records._EF),
        "random values past the gap limit": (BitMap(rng.sample(range(1 << 24), 300_000)), records._EF),
        "holes in runs of 3": (BitMap(range(100_000)) - _in_runs(rng, 100_000, 3, 700), records._BOUNDS),
        "acks in runs of 20": (_in_runs(rng, 100_000, 20, 1_500), records._BOUNDS),
        "holes in runs of 20, evenly spaced": (BitMap(range(100_000)) - _spaced_runs(100_000, 20, 50), records._GAPS),
        "runs of 3 past the gap limit": (_in_runs(rng, 1 << 24, 3, 100_000), records._BOUNDS),
        "a pattern past the gap limit": (BitMap(range(0, 1 << 21, 7)) | BitMap([1]), records._ZLIB),
    }
    for name, (values, flag) in cases.items():
        flags, first, last, payload = records.encode_bitmap(BitMap(values))
        code = records._GAPS | records._ZLIB | records._RICE | records._STRIDE | records._EF | records._BOUNDS
        assert flags & code == flag, name
        assert records.decode_bitmap(flags, first, last, payload) == values, name
        assert len(payload) <= len(values.serialize()), name


FIGURES = {  # the workloads of benchmarks/figures.py: 1 = acked
    "random 10% acks": lambda r, e: r.random() < 0.1,
    "alternating acks": lambda r, e: e % 2 == 0,
    "runs of 1000, single holes": lambda r, e: e % 1001 != 1000,
    "runs of ~1000, random holes": lambda r, e: r.random() >= 0.001,
}
MORE = {
    "random 50%": lambda r, e: r.random() < 0.5,
    "random 90%": lambda r, e: r.random() < 0.9,
    "random 1%": lambda r, e: r.random() < 0.01,
    "every 10th": lambda r, e: e % 10 == 0,
    "runs of 10, random": lambda r, e: (e // 10) % 2 == 0 or r.random() < 0.01,
    "runs of ~50": lambda r, e: r.random() >= 0.02,
}


@pytest.mark.parametrize("size", [50_000, 5_000])
def test_the_chosen_encoding_is_near_the_smallest_candidate(size: int) -> None:
    """Choosing from statistics keeps figures.py's workloads within 5% of trying every
    candidate; other shapes within 2x (dense random sets and short runs: zlib of the roaring
    form, never chosen, squeezes a bitmap container's unused tail or run headers)."""
    from ackstore.storage.bitmaps import smallest_encoding

    for patterns, limit in ((FIGURES, 1.05), (MORE, 2.0)):
        for name, keep in patterns.items():
            rng = random.Random(1)
            bm = BitMap(e for e in range(1, size) if keep(rng, e))
            chosen = encode_bitmap(BitMap(bm))
            assert decode_bitmap(*chosen) == bm, name
            assert len(chosen[3]) <= limit * len(smallest_encoding(BitMap(bm))[3]) + 2, name


def test_rice_code_round_trips_edges_and_random_sets() -> None:
    import random

    from pyroaring import BitMap

    from ackstore.storage import bitmaps as records

    edges = [
        (BitMap([0]), 0),
        (BitMap([(1 << 32) - 1]), 0),  # one gap past the escape: written raw
        (BitMap([5, 6, 7, 1 << 31, (1 << 32) - 1]), 5),  # a k for small gaps, then huge ones
        (BitMap(range(0, 256 * 1000, 1000)), 0),
    ]
    rng = random.Random(2)
    for _ in range(200):
        values = BitMap(rng.sample(range(rng.choice([300, 70_000, 1 << 32])), rng.randint(1, 256)))
        edges.append((values, max(0, values.min() - rng.randrange(4))))
    for values, first in edges:
        for impl in IMPLEMENTATIONS:
            code = records._rice(values, first)
            assert BitMap.deserialize(impl.acks_roaring(8, first, _TOP, code)) == values, impl


def test_small_random_hole_sets_are_rice_coded_near_their_entropy() -> None:
    import math
    import random

    from pyroaring import BitMap

    from ackstore.storage import bitmaps as records

    rng = random.Random(1)
    holes = BitMap(rng.sample(range(1, 50_000), 60))
    acks = BitMap(range(50_000)) - holes
    flags, first, last, payload = records.encode_bitmap(BitMap(acks))
    assert flags & records._RICE and flags & records._HOLES
    assert records.decode_bitmap(flags, first, last, payload) == acks
    entropy_bytes = math.log2(math.comb(last - first + 1, 60)) / 8
    assert len(payload) <= 1.15 * entropy_bytes + 3  # k and the count


def test_a_ledger_record_names_its_cursor_and_older_ones_read() -> None:
    from ackstore.storage.records import decode_ledger_owned

    acks = LedgerAcks(BitMap([1, 2, 9]))
    assert decode_ledger_owned(encode_ledger(4, acks, 17))[::2] == (4, 17)
    assert decode_ledger_owned(encode_ledger(4, acks))[::2] == (4, None)  # as formats 1 and 2 wrote it
    assert decode_ledger(encode_ledger(4, acks, 17))[1].bitmap == acks.bitmap


def test_a_format_6_delta_marker_reads_with_its_own_item_layout() -> None:
    """Format 6 wrote delta items without the counts field; they decode as before."""
    import struct
    import zlib

    head = struct.pack("<BIIIIIIH", 0xC1, 4, 1, 10, 1, 11, 3, 1)
    body = head + struct.pack("<IIIH", 7, 3, 2, 2) + struct.pack("<II", 20, 40)
    value = struct.pack("<BBBI", 0xC1, 2, 6, zlib.crc32(body, 2 << 8 | 6)) + body
    m = decode_marker(value)
    assert (m.prev, m.mark_delete, m.extra) == (4, (1, 9), {"c": 3})
    assert m.index == {7: IndexEntry(2, 2, FrozenBitMap([20, 40]), None)}


@pytest.mark.parametrize("tail", [b"\x92\x01", b"\x91\x01", b"\xc1", b"\x81\x01\x01"])
def test_damaged_properties_of_a_fixed_delta_marker_are_corrupt_records(tail: bytes) -> None:
    """The properties after a fixed-layout delta's items: a truncated, non-map or wrongly
    typed msgpack tail is a CorruptRecordError (recovery skips the marker), never another error."""
    import struct
    import zlib

    body = struct.pack("<BIIIIIIH", 0xC1, 0, 1, 1, 1, 1, 3, 0) + tail
    value = struct.pack("<BBBI", 0xC1, 2, 7, zlib.crc32(body, 2 << 8 | 7)) + body
    with pytest.raises(CorruptRecordError):
        decode_marker(value)


@pytest.mark.parametrize("step", [3, 1 << 15, 1 << 16, 1 << 20, 1 << 28])
@pytest.mark.parametrize("holes", [False, True])
def test_a_stride_up_to_the_last_entry_id_decodes(step: int, holes: bool) -> None:
    """Strides that reach the top 65,536 entry ids: pyroaring's stepped range constructor
    never returns for a step of 2**16 or more there, so the decoder builds those otherwise
    (this test would hang, not fail, without that)."""
    from ackstore.storage.bitmaps import _STRIDE

    top = (1 << 32) - 1
    stride = BitMap(array("I", range(top - step * 8, top + 1, step)))  # nine values
    values = BitMap(range(stride.min(), top + 1)) - stride if holes else stride
    flags, first, last, payload = encode_bitmap(BitMap(values))
    assert flags & _STRIDE
    assert decode_bitmap(flags, first, last, payload) == values
