"""The compiled decoders and their pure-Python twins: the same bytes and the same errors
on the same cases, healthy and damaged (``ackstore.storage.codecs``)."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
import zlib
from array import array
from pathlib import Path
from types import ModuleType

import msgpack
import pytest
from pyroaring import BitMap, FrozenBitMap

from ackstore.storage import bitmaps, codecs, pure_acks, pure_codecs, records
from ackstore.storage.catalog import _LEDGER_TYPE
from ackstore.storage.records import FORMAT_VERSION, IndexEntry, decode_marker, encode_fixed_marker

from .codec_impls import IMPLEMENTATIONS, NOT_COMPILED, damaged

TOP = (1 << 32) - 1  # the top entry id a ledger record may hold

ROOT = Path(__file__).resolve().parent.parent


def _outcome(impl: ModuleType, name: str, *args: object) -> tuple[str, object]:
    try:
        return "ok", getattr(impl, name)(*args)
    except ValueError as exc:
        return "error", str(exc)
    except OverflowError as exc:  # the marker encoder: a field the fixed layout cannot hold
        return "overflow", str(exc)
    except TypeError as exc:
        return "type", str(exc)


@pytest.fixture(params=["simd", "one bit at a time"])
def ef_reads(request: pytest.FixtureRequest) -> object:
    """The compiled reader of Elias-Fano codes both ways it scans a code's high part (8 bits at
    a time with SSE2, where the build has it, or a set bit at a time): the same outcomes."""
    native = codecs.native
    if native is None:
        if request.param != "simd":
            pytest.skip(NOT_COMPILED)
        yield None
        return
    was = native._ef_simd(request.param == "simd")
    try:
        yield request.param
    finally:
        native._ef_simd(was)


def _same_everywhere(name: str, *args: object) -> tuple[str, object]:
    """The outcome of ``name(*args)``, checked identical in every implementation."""
    outcomes = [_outcome(impl, name, *args) for impl in IMPLEMENTATIONS]
    assert all(o == outcomes[0] for o in outcomes), (name, [o[0] for o in outcomes], outcomes)
    return outcomes[0]


def _sets(rng: random.Random) -> list[BitMap]:
    return [
        BitMap([0]),
        BitMap([(1 << 32) - 1]),
        BitMap(range(1, 5000, 2)),
        BitMap(range(65_530, 65_545)),  # across a container boundary
        BitMap(range(0, 9000)),  # a bitmap container (over 4,096 values in one)
        BitMap(rng.sample(range(1 << 32), 300)),
        BitMap(rng.sample(range(100_000), 20_000)),
        *(BitMap(rng.sample(range(rng.choice([300, 70_000, 1 << 32])), rng.randint(1, 256))) for _ in range(40)),
    ]


@pytest.mark.parametrize(("flag", "encode", "most"), [(4, bitmaps._gap_planes, 1 << 32), (8, bitmaps._rice, 256)])
def test_codes_decode_to_the_same_bytes_and_the_same_set(flag: int, encode: object, most: int) -> None:
    """Gap planes (flag 4) and Rice codes (flag 8) up to the top entry: every set back, and
    damaged codes give the same outcome."""
    rng = random.Random(1)
    for values in _sets(rng):
        if len(values) > most:
            continue
        first = max(0, values.min() - rng.randrange(3))
        code = encode(values, first)  # type: ignore[operator]
        kind, out = _same_everywhere("acks_roaring", flag, first, TOP, code)
        assert kind == "ok" and BitMap.deserialize(out) == values  # type: ignore[arg-type]
        for _ in range(20):
            _same_everywhere("acks_roaring", flag, first, TOP, damaged(code, rng))


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_the_compiled_crc32_is_zlibs_whichever_way_it_runs() -> None:
    """The CRC-32 every compiled codec checks records with is ``zlib.crc32``: for every length
    up to 600 bytes and longer ones, from any running value, folded 16 bytes at a time with
    PCLMULQDQ (where the CPU has it) or by its tables and zlib."""
    native = codecs.native
    assert native is not None
    rng = random.Random(32)
    lengths = [*range(0, 600), *(rng.randrange(600, 70_000) for _ in range(60))]
    was = native._crc_folds(True)
    try:
        for folds in (True, False):
            native._crc_folds(folds)
            for n in lengths:
                data, value = rng.randbytes(n), rng.randrange(1 << 32)
                assert native._crc32(data, value) == zlib.crc32(data, value), (folds, n)
                assert native._crc32(data) == zlib.crc32(data), (folds, n)
    finally:
        native._crc_folds(was)


def test_the_rice_coder_writes_the_same_bytes_everywhere() -> None:
    """The flush's Rice coder: identical bytes from every implementation, which every
    decoder reads back to the set; bad input is the same ValueError everywhere."""
    rng = random.Random(2)
    for values in _sets(rng):
        if len(values) > 256:
            continue
        first = max(0, values.min() - rng.randrange(3))
        kind, code = _same_everywhere("rice_code", values.to_array(), first)
        assert kind == "ok" and code == bitmaps._rice(values, first)
        assert BitMap.deserialize(_same_everywhere("acks_roaring", 8, first, TOP, code)[1]) == values  # type: ignore[arg-type]
    assert _same_everywhere("rice_code", array("I"), 0) == ("error", "no values to code")
    assert _same_everywhere("rice_code", b"\x01\x02\x03", 0) == ("error", "values of 3 bytes are not 32-bit values")
    for values, first in (([5, 5], 0), ([3, 2], 0), ([5], 6)):
        assert _same_everywhere("rice_code", array("I", values), first) == (
            "error",
            "values are not ascending from first",
        ), (values, first)
    for first in (-1, 1 << 32):
        assert _same_everywhere("rice_code", array("I", [1]), first) == (
            "error",
            f"first={first} is outside 0..4294967295",
        )


def _ledger_sets(rng: random.Random) -> list[tuple[BitMap, int, int]]:
    """Sets with the span a ledger record gives them (``first..last`` around them): scattered,
    in runs, dense, across container boundaries, at both ends of the entry range."""
    top = (1 << 32) - 1
    out = []
    for values in _sets(rng):
        first = max(0, values.min() - rng.randrange(3))
        out.append((values, first, min(top, values.max() + rng.randrange(3))))
    runs = BitMap()
    for start in rng.sample(range(200_000), 300):
        runs.add_range(start, start + rng.randrange(1, 9))
    out += [
        (runs, 0, 200_010),
        (BitMap(range(0, 65_536 * 3, 2)), 0, 65_536 * 3),  # every other entry: arrays of 4,096 and bitmaps
        (BitMap([5, 6, 7]), 5, 7),  # the whole span: no holes
        (BitMap([top]), top - 3, top),
        (BitMap([0, top]), 0, top),  # 2**32 entries, two values: a million empty containers' worth of holes
        # one in twenty over four containers, the span's ends inside them: as holes, every
        # container a bitset (written straight from the holes)
        (BitMap(rng.sample(range(70_000, 270_000), 10_000)), 69_990, 270_005),
        # the same acked, one in twenty a hole, and a run of holes across a boundary: as holes,
        # every container a bitset, its runs counted across the boundaries they go on over
        (
            BitMap(range(69_990, 270_006))
            - BitMap(rng.sample(range(70_000, 270_000), 10_000))
            - BitMap(range(131_000, 131_100)),
            69_990,
            270_005,
        ),
        # alternating runs over three containers, one run across each boundary: as run bounds,
        # every container a bitset (written straight from the bounds)
        (
            _alternating(rng, 1_000, 200_000) | BitMap(range(65_000, 66_000)) | BitMap(range(131_000, 132_000)),
            0,
            200_010,
        ),
    ]
    return out


def _alternating(rng: random.Random, start: int, stop: int) -> BitMap:
    """Runs of 1 to 9 acks and gaps of 1 to 9 from ``start`` to ``stop``."""
    out, at = BitMap(), start
    while at < stop:
        n = rng.randrange(1, 10)
        out.add_range(at, min(at + n, stop))
        at += n + rng.randrange(1, 10)
    return out


@pytest.mark.usefixtures("ef_reads")
def test_ledger_acks_decode_to_the_same_bytes_and_the_set_they_stand_for() -> None:
    """``acks_roaring``: every code (Elias-Fano, Rice, gap planes) of every set, as the
    values or as the holes they leave in their span, gives the same bytes from every
    implementation and the set it stands for, each container in its smallest form; a
    damaged code gives the same outcome everywhere."""
    rng = random.Random(4)
    for values, first, last in _ledger_sets(rng):
        kind, ef = _same_everywhere("ef_code", values.to_array(), first, last)
        assert kind == "ok", ef
        codes = [(32, ef), (4, bitmaps._gap_planes(values, first))]
        if len(values) <= 256:
            codes.append((8, bitmaps._rice(values, first)))
        for flag, code in codes:
            for holes in (0, 1):
                if holes and last - first > 1 << 20:
                    continue  # (the pure twin writes every container of the span)
                kind, out = _same_everywhere("acks_roaring", flag | holes, first, last, code)
                assert kind == "ok", (flag, holes, out)
                want = values.flip(first, last + 1) if holes else BitMap(values)
                got = BitMap.deserialize(out)  # type: ignore[arg-type]
                assert got == want, (flag, holes)
                smallest = BitMap(want)
                smallest.run_optimize()
                assert len(out) <= len(smallest.serialize()), (flag, holes)  # type: ignore[arg-type]
                for _ in range(8):
                    _same_everywhere("acks_roaring", flag | holes, first, last, damaged(code, rng))
        # the run-bounds code: where the acks (values..., from their first to their last) stop and start
        bounds = bitmaps._inner_bounds(values)
        if bounds:
            low, high = values.min(), values.max()
            kind, code = _same_everywhere("ef_code", bounds.to_array(), low, high)
            kind, out = _same_everywhere("acks_roaring", 64, low, high, code)
            assert kind == "ok" and BitMap.deserialize(out) == values  # type: ignore[arg-type]
            for _ in range(8):
                _same_everywhere("acks_roaring", 64, low, high, damaged(code, rng))  # type: ignore[arg-type]


def test_the_elias_fano_code_is_near_the_entropy_of_scattered_values() -> None:
    """Random values (holes scattered by chance) cost at most ~10% over the entropy of their
    gaps, about what zlib of the gap planes makes, and the code's size follows from its count
    and span alone (2 + floor(log2(span / count)) bits a value, about)."""
    rng = random.Random(6)
    for span, count in ((50_000, 2_500), (100_000, 1_000), (1 << 20, 50_000), (10_000, 3_000)):
        values = BitMap(rng.sample(range(span), count))
        ef = codecs.ef_code(values.to_array(), 0, span - 1)
        entropy = bitmaps._gap_entropy(count, bitmaps.count_runs(values), span) / 8
        planes = zlib.compress(bitmaps._gap_planes(values, 0), 1)
        assert len(ef) <= 1.12 * entropy, (span, count, len(ef), entropy)
        assert len(ef) <= 1.02 * len(planes), (span, count, len(ef), len(planes))


@pytest.mark.usefixtures("ef_reads")
def test_the_ledger_acks_errors_say_what_is_wrong() -> None:
    top = (1 << 32) - 1
    cases = [
        (("ef_code", array("I"), 0, 5), "no values to code"),
        (("ef_code", b"\x01\x02\x03", 0, 5), "values of 3 bytes are not 32-bit values"),
        (("ef_code", array("I", [3, 2]), 0, 5), "values are not ascending within first..last"),
        (("ef_code", array("I", [6]), 0, 5), "values are not ascending within first..last"),
        (("ef_code", array("I", [1]), 2, 5), "values are not ascending within first..last"),
        (("ef_code", array("I", [1, 2, 3]), 1, 2), "values are not ascending within first..last"),
        (("ef_code", array("I", [1]), 0, top + 1), f"last={top + 1} is outside 0..{top}"),
        (("acks_roaring", 2, 0, 5, b""), "acks_roaring reads an Elias-Fano or Rice code or gap planes, not flags 2"),
        (("acks_roaring", 41, 0, 5, b""), "acks_roaring reads an Elias-Fano or Rice code or gap planes, not flags 41"),
        (("acks_roaring", 32, 5, 4, b""), "last=4 is below first=5"),
        (("acks_roaring", 32, 0, 5, b""), "Elias-Fano payload ends early"),
        (("acks_roaring", 32, 0, 5, b"\x00"), "Elias-Fano count 0 is outside 1..6"),
        (("acks_roaring", 32, 0, 5, b"\x07"), "Elias-Fano count 7 is outside 1..6"),
        (
            ("acks_roaring", 32, 0, 5, b"\x01\x00"),
            "Elias-Fano payload of 2 bytes does not hold 1 values over 6 entries",
        ),
        (("acks_roaring", 33, 0, 5, b"\x01\x00\x00"), "Elias-Fano values are not ascending within their span"),
        (("acks_roaring", 32, 0, 5, b"\x01\x00\x03"), "Elias-Fano values are not ascending within their span"),
        (("acks_roaring", 32, 0, 5, b"\x01\x00\x80"), "Elias-Fano values are not ascending within their span"),
        (("acks_roaring", 4, 0, 5, b"\x09\x00\x00\x00"), "a ledger record's value 9 is past its last entry 5"),
        (("acks_roaring", 8, 0, 5, b"\x00\x09\x00"), "Rice payload ends early"),
        (("acks_roaring", 256, 0, 5, b""), "flags=256 is outside 0..255"),
        (("acks_roaring", 65, 0, 5, b""), "acks_roaring reads an Elias-Fano or Rice code or gap planes, not flags 65"),
        (("acks_roaring", 64, 0, 9, b"\x01\x04\x01"), "1 run bounds inside 0..9 are not pairs after the first run"),
        (("acks_roaring", 64, 0, 9, b"\x02\x04\x05"), "2 run bounds inside 0..9 are not pairs after the first run"),
    ]
    for (name, *args), message in cases:
        assert _same_everywhere(name, *args) == ("error", message), (name, args)
    # the smallest legal codes: one value, its low part empty, its high bit first
    assert BitMap.deserialize(_same_everywhere("acks_roaring", 32, 0, 5, b"\x01\x00\x01")[1]) == BitMap([0])
    assert BitMap.deserialize(_same_everywhere("acks_roaring", 33, 0, 5, b"\x01\x00\x01")[1]) == BitMap(range(1, 6))
    # two bounds, 3 and 7, in 0..9: acks 0..2 and 7..9
    code = _same_everywhere("ef_code", array("I", [3, 7]), 0, 9)[1]
    assert BitMap.deserialize(_same_everywhere("acks_roaring", 64, 0, 9, code)[1]) == BitMap([0, 1, 2, 7, 8, 9])


def test_the_errors_say_what_is_wrong() -> None:
    assert _same_everywhere("acks_roaring", 4, 0, TOP, b"\x01\x02\x03") == (
        "error",
        "gap planes of 3 bytes are not four planes of equal length",
    )
    assert _same_everywhere("acks_roaring", 4, TOP - 1, TOP, b"\x00\x00\x00\x01") == (
        "error",
        "gap record decodes past 2^32",
    )
    assert _same_everywhere("acks_roaring", 8, 0, TOP, b"") == ("error", "Rice payload ends early")
    assert _same_everywhere("acks_roaring", 8, 0, TOP, b"\x40\x01\x00") == ("error", "Rice parameter k=64 is over 31")
    assert _same_everywhere("acks_roaring", 8, 0, TOP, b"\x00\xff\xff\xff\x7f") == ("error", "Rice payload ends early")
    for version in (6, 7, 9):
        assert _same_everywhere("delta_fields", b"\xc1\x00", version) == ("error", "a fixed-layout marker ends early")
    head = b"\xc1\x03" + bytes(26)
    assert _same_everywhere("delta_fields", head, 9) == (
        "error",
        "a fixed-layout marker's flags 0x03 are not ones this ackstore writes",
    )


def test_fixed_markers_decode_to_the_same_fields() -> None:
    rng = random.Random(3)
    for _ in range(300):
        items: list[tuple[int, IndexEntry | None]] = []
        for ledger in sorted(rng.sample(range(1, 10_000), rng.randint(0, 6))):
            adds = BitMap(rng.sample(range(1 << 20), rng.randint(0, 40)))
            counts = {e: rng.randint(1, 9) for e in rng.sample(range(1 << 20), rng.randint(0, 5))}
            entry = IndexEntry(rng.randrange(1 << 20), 7, adds or None, counts or None)
            items.append((ledger, None if rng.random() < 0.2 else entry))
        props = {"k": 1} if rng.random() < 0.3 else {}
        md = (rng.randrange(100), rng.randrange(-1, 100))
        full = rng.random() < 0.3 and all(e is not None for _, e in items)
        cid = rng.randrange(99)
        record = encode_fixed_marker(rng.randrange(1000), md, (md[0], md[1] + 1), props, items, cid, full)
        body = record[7:]
        kind, fields = _same_everywhere("delta_fields", body, 9)
        assert kind == "ok"
        flags, _, md_l, md_e, _, _, _, decoded, _ = fields  # type: ignore[misc]
        assert (flags, md_l, md_e) == (int(full), *md)
        assert [(lg, s) for lg, s, *_ in decoded] == [(lg, e.seq if e else -1) for lg, e in items]
        for (_, _, _, adds, counts), (_, e) in zip(decoded, items, strict=True):
            assert (BitMap.deserialize(adds) if adds is not None else None) == (e.adds if e else None)
            assert counts == (e.counts if e else None)
        for _ in range(5):
            bad = damaged(body, rng)
            for version in (9, 7, 6):  # and read as the layouts of formats 7 and 6
                _same_everywhere("delta_fields", bad, version)


def _bitmap(rng: random.Random) -> BitMap | FrozenBitMap:
    """A set of any container kind (array, bitmap, run), mutable or frozen."""
    kind = rng.randrange(5)
    if kind == 0:
        values = BitMap(rng.sample(range(1 << 32), rng.randint(1, 12)))
    elif kind == 1:
        start = rng.randrange(1 << 20)  # runs (under 65,536 values: a marker's adds are a u16 count)
        values = BitMap(range(start, start + rng.randrange(1, 60_000), rng.choice([1, 3])))
    elif kind == 2:
        values = BitMap(rng.sample(range(70_000), rng.randint(4_000, 6_000)))  # a bitmap container
    elif kind == 3:
        values = BitMap(range(65_530, 65_560)) | BitMap([1, 2, 3, 7, 1 << 31])
    else:
        values = BitMap(rng.sample(range(300), rng.randint(1, 100)))
    if rng.random() < 0.5:
        values.run_optimize()
    return FrozenBitMap(values) if rng.random() < 0.5 else values


def test_the_marker_encoder_writes_the_same_bytes_everywhere() -> None:
    """A flush's marker record (``fixed_marker``): identical bytes from every implementation
    for adds of every container kind, with or without what the chain named already, counts,
    vanished ledgers and properties; each decodes to the marker it was given. A field the
    layout cannot hold is the same OverflowError everywhere, and ``encode_fixed_marker``
    then writes the msgpack form, which decodes to the same marker."""
    rng = random.Random(4)
    for case in range(400):
        items: list[tuple[object, ...]] = []
        expected: dict[int, IndexEntry | None] = {}
        for ledger in sorted(rng.sample(range(1, 10_000), rng.randint(0, 5))):
            if rng.random() < 0.2:
                items.append((ledger, None))
                expected[ledger] = None
                continue
            adds = _bitmap(rng) if rng.random() < 0.7 else None
            counts = {e: rng.randint(1, 9) for e in rng.sample(range(1 << 20), rng.randint(0, 4))} or None
            entry = IndexEntry(rng.randrange(1 << 20), rng.randrange(1 << 20), adds, counts)
            named = None
            if adds is not None and rng.random() < 0.6:
                named = FrozenBitMap(list(adds)[: rng.randrange(len(adds) + 1)]) if rng.random() < 0.7 else _bitmap(rng)
            items.append((ledger, entry, named) if rng.random() < 0.8 else (ledger, entry))
            left = (adds - named if named else adds) if adds is not None and len(items[-1]) == 3 else adds
            expected[ledger] = IndexEntry(entry.seq, entry.runs, FrozenBitMap(left) if left else None, counts)
        props = {"k": 1, "name": "x"} if rng.random() < 0.3 else {}
        md = (rng.randrange(1 << 20), rng.randrange(-1, 1 << 20))
        full = case % 3 == 0 and all(e is not None for _, e, *_ in items)
        args = (FORMAT_VERSION, int(full), rng.randrange(1000), *md, md[0], md[1] + 1, rng.randrange(99), items)
        kind, record = _same_everywhere("fixed_marker", *args, msgpack.packb(props) if props else b"")
        assert kind == "ok" and isinstance(record, bytes)
        assert record == encode_fixed_marker(args[2], md, (md[0], md[1] + 1), props, items, args[7], full)  # type: ignore[arg-type]
        marker = decode_marker(record)
        assert (marker.full, marker.mark_delete, marker.properties, marker.extra["c"]) == (full, md, props, args[7])
        assert marker.index == expected
    entry = IndexEntry(3, 4, FrozenBitMap([5, 6]), {9: 2})
    too_big = [
        (9, 0, pure_codecs.NO_PREV, 1, 1, 1, 2, 7, [(1, entry)]),  # (reserved: the prev of none)
        (9, 0, -2, 1, 1, 1, 2, 7, [(1, entry)]),
        (9, 0, 1, 1 << 32, 1, 1, 2, 7, [(1, entry)]),
        (9, 0, 1, 1, (1 << 32) - 1, 1, 2, 7, [(1, entry)]),  # stored + 1
        (9, 0, 1, 1, 1, 1, 2, 1 << 32, [(1, entry)]),
        (9, 256, 1, 1, 1, 1, 2, 7, [(1, entry)]),
        (9, 0, 1, 1, 1, 1, 2, 7, [(1 << 32, entry)]),
        (9, 0, 1, 1, 1, 1, 2, 7, [(1, entry._replace(seq=(1 << 32) - 1))]),
        (9, 0, 1, 1, 1, 1, 2, 7, [(1, entry._replace(adds=FrozenBitMap(range(70_000))))]),
        (9, 0, 1, 1, 1, 1, 2, 7, [(1, entry._replace(counts={1 << 32: 1}))]),
        (9, 0, 1, 1, 1, 1, 2, 7, [(i, None) for i in range(70_000)]),
    ]
    for args in too_big:
        assert _same_everywhere("fixed_marker", *args, b"") == ("overflow", pure_codecs.OUTSIDE_LAYOUT), args[:8]
    items = [(1 << 32, entry), (1 << 33, None)]
    record = encode_fixed_marker(5, (1 << 33, 4), (1 << 33, 5), {}, items, 7, full=False)  # type: ignore[arg-type]
    assert record[7] != 0xC1 and decode_marker(record).index == dict(items)
    # a full marker that follows none (a cursor's first state, or compaction's) is in the
    # fixed layout, its prev field NO_PREV, and reads back as the msgpack form's -1
    kind, record = _same_everywhere("fixed_marker", 9, 1, -1, 1, 1, 1, 2, 7, [(1, entry)], b"")
    assert kind == "ok" and record[7] == 0xC1 and record[9:13] == b"\xff\xff\xff\xff"  # type: ignore[index]
    marker = decode_marker(record)  # type: ignore[arg-type]
    assert (marker.full, marker.prev, marker.index) == (True, -1, {1: entry})
    assert decode_marker(encode_fixed_marker(-1, (1, 1), (1, 2), {}, [(1, entry)], 7, True)) == marker


def test_ledger_fields_give_the_same_outcome_everywhere() -> None:
    """A ledger record's fields without its bitmap decoded (what a lazy open reads of
    every record it checks): the lowest and highest entry with state, the runs and owner,
    equal to the decoded record's on real records, and the same outcome everywhere on
    every shape a ledger record can take and on damaged copies."""
    import msgpack

    from ackstore.ledger_acks import LedgerAcks
    from ackstore.storage.records import decode_ledger_owned, encode_ledger

    rng = random.Random(5)
    for _ in range(200):
        bm = BitMap(rng.sample(range(1 << 20), rng.randint(0, 30)))
        batches = {rng.randrange(1 << 20): (8, 0b101) for _ in range(rng.randint(0, 2))}
        batches = {e: b for e, b in batches.items() if e not in bm}
        counts = {e: rng.randint(1, 9) for e in rng.sample(range(1 << 20), rng.randint(0, 3)) if e not in bm}
        cid = rng.choice([None, rng.randrange(1 << 40)])
        record = encode_ledger(rng.randrange(1 << 40), LedgerAcks(bm, batches, counts), cid)
        body = record[7:]
        kind, fields = _same_everywhere("ledger_fields", body)
        assert kind == "ok"
        ledger, acks, owner = decode_ledger_owned(record)
        state = set(acks.bitmap) | set(acks.batches) | set(acks.counts)
        assert fields == (ledger, min(state, default=1 << 32), max(state, default=-1), acks.runs, owner)
        for _ in range(10):
            _same_everywhere("ledger_fields", damaged(body, rng))
    shapes = [
        [1, 0, 5, 4, b"", 0, []],  # empty (last < first)
        [1, 0, -3, 2**63 - 1, b"x", 1, [[-7, 2, b"\x01"]], 2**63 - 1, [9, 1, -(2**63), 3]],
        [1, 0, 0, 0, b"", 0, [], 2**64 - 1],  # beyond 64-bit signed
        [1, 0, 0, 0, "text", 0, []],  # a str payload
        [1, 0, 0, 0, b"", 0, [[1, 2]]],  # a short batch
        [1, 0, 0, 0, b"", 0, [], None],  # no owner
        [1, 0, 0, 0, b"", 0, [], 3, [1.5, 2]],  # a float count
        [1, True, 0, 0, b"", 0, []],  # a bool flag
        [1, 0, 0, 0, b"", 0, [], 3, [], 4],  # ten fields
        [1, 0, 0, 0, b"", 0],  # six
        {"ledger": 1},
    ]
    outcomes = [_same_everywhere("ledger_fields", msgpack.packb(shape))[0] for shape in shapes]
    assert outcomes == ["ok", "ok"] + ["error"] * 9
    big = msgpack.packb([1, 0, 0, 70_000, b"", 1, [[e, 2, b"\x01"] for e in range(70_000, 70_020)], 3, list(range(40))])
    assert _same_everywhere("ledger_fields", big) == ("ok", (1, 0, 70_019, 1, 3))
    assert _same_everywhere("ledger_fields", big + b"\x00")[0] == "error"  # trailing bytes


def test_ledger_span_checks_the_envelope_alike_everywhere() -> None:
    """A ledger record's envelope and checksum checked before its fields, short records
    (the compiled code's own CRC-32 table) and long ones (zlib's): the same fields as the
    body alone gives, and the same error for every damaged copy, everywhere."""
    from ackstore.ledger_acks import LedgerAcks
    from ackstore.storage.records import FORMAT_VERSION, RECORD_LEDGER, RECORD_MARKER, encode_ledger, encode_record

    rng = random.Random(9)
    for size in (0, 1, 3, 40, 600, 5_000):
        bm = BitMap(rng.sample(range(1 << 24), size))
        record = encode_ledger(rng.randrange(1 << 30), LedgerAcks(bm), 7)
        fields = _same_everywhere("ledger_fields", record[7:])
        assert _same_everywhere("ledger_span", record, RECORD_LEDGER, FORMAT_VERSION) == fields
        errors = set()
        for _ in range(60):
            kind, out = _same_everywhere("ledger_span", damaged(record, rng), RECORD_LEDGER, FORMAT_VERSION)
            errors.add(out if kind == "error" else "ok")
        assert "record checksum mismatch" in errors
    marker = encode_record(RECORD_MARKER, b"\x90")
    assert _same_everywhere("ledger_span", marker, RECORD_LEDGER, FORMAT_VERSION) == (
        "error",
        f"expected a ledger record, found type {RECORD_MARKER}",
    )
    assert _same_everywhere("ledger_span", marker, RECORD_LEDGER, 1)[1] == (
        f"record format {FORMAT_VERSION} is newer than this ackstore reads (1)"
    )
    assert _same_everywhere("ledger_span", b"\xc1\x01", 1, 9)[1] == "record of 2 bytes is shorter than its envelope"
    assert _same_everywhere("ledger_span", b"\x94\x01", 1, 9)[1] == "record is not in the fixed envelope"


def test_open_envelope_is_the_same_everywhere() -> None:
    """A record's fixed envelope (every record a store reads: log records, catalog entries):
    type, version and body of short records (the compiled code's own CRC-32 table) and long
    ones (zlib's), and the same error for every cut, flipped bit or added byte, everywhere."""
    from ackstore.storage.records import FORMAT_VERSION, RECORD_LEDGER, RECORD_MARKER, encode_record

    rng = random.Random(29)
    errors = set()
    for size in (0, 1, 5, 40, 600, 5_000):
        body = rng.randbytes(size)
        for rtype in (RECORD_LEDGER, RECORD_MARKER):
            record = encode_record(rtype, body)
            assert _same_everywhere("open_envelope", record, FORMAT_VERSION) == ("ok", (rtype, FORMAT_VERSION, body))
            for _ in range(40):
                kind, out = _same_everywhere("open_envelope", damaged(record, rng), FORMAT_VERSION)
                errors.add(out if kind == "error" else "ok")
    assert {"record checksum mismatch", "ok"} <= errors
    record = encode_record(RECORD_MARKER, b"\x90")
    assert _same_everywhere("open_envelope", record, FORMAT_VERSION - 1)[1] == (
        f"record format {FORMAT_VERSION} is newer than this ackstore reads ({FORMAT_VERSION - 1})"
    )
    for cut in range(7):
        assert _same_everywhere("open_envelope", record[:cut], FORMAT_VERSION)[1] == (
            f"record of {cut} bytes is shorter than its envelope"
        )


_FRESH_PAIRS = """
import struct, zlib
from array import array
from ackstore.storage import codecs
from ackstore.storage.catalog import _LEDGER_TYPE

def pair(ledger):
    key = struct.pack(">QQ", 0, ledger * 3)
    body = bytes([_LEDGER_TYPE, 0]) + struct.pack(">q", ledger)
    return key, body + struct.pack(">I", zlib.crc32(body, zlib.crc32(key)))

def pairs():  # each pair made as it is read, as an LMDB cursor makes them: nothing else holds it
    for ledger in range(1, 200):
        yield pair(ledger)

ids, counts, confirmed, bad = codecs.native.scan_directory(pairs(), struct.pack(">Q", 0), _LEDGER_TYPE, 1)
assert bad is None, bad
assert list(array("q", ids)) == [3 * i for i in range(1, 200)], list(array("q", ids))[:5]
"""


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_the_compiled_directory_scan_reads_each_key_while_it_holds_it() -> None:
    """A pair nothing else holds is released as the scan moves on; the ledger id is read from
    its key before that (it was read after: freed memory, which Python's debug allocator
    fills with a pattern, so the ids came out wrong)."""
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    run = subprocess.run([sys.executable, "-c", _FRESH_PAIRS], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def _one_bit_flipped(pairs: list[tuple[bytes, bytes]], rng: random.Random) -> list[tuple[bytes, bytes]]:
    """``pairs`` with one bit flipped in one key or value, sorted again as a database keeps them."""
    i, side = rng.randrange(len(pairs)), rng.randrange(2)
    spoiled = list(pairs)
    part = bytearray(spoiled[i][side])
    part[rng.randrange(len(part))] ^= 1 << rng.randrange(8)
    spoiled[i] = (bytes(part), spoiled[i][1]) if side == 0 else (spoiled[i][0], bytes(part))
    return sorted(spoiled)


def test_the_directory_scan_gives_the_same_outcome_everywhere(tmp_path: Path) -> None:
    """A topic's ledger-directory entries as a real store wrote them (sealed ledgers, an
    open one with its last confirmed entry, another topic's after them), then with a bit
    flipped in a key or a value: the same ids, counts, confirmed entry and first bad
    entry from every implementation; the store's own load names the damaged ledger."""

    import lmdb

    from ackstore import AckStore, CorruptStoreError
    from ackstore.storage.catalog import _OPEN_LEDGER_TYPE

    with AckStore.open(tmp_path / "s") as store:
        for name, n in (("persistent://t/ns/a", 40), ("persistent://t/ns/b", 3)):
            topic = store.topic(name)
            for ledger in range(1, n + 1):
                topic.add_ledger(ledger * 3)
                if ledger < n:
                    topic.close_ledger(ledger * 3, ledger)
            topic.advance(n * 3, 7)
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8, readonly=True, lock=False)
    with env.begin() as txn:
        pairs = list(txn.cursor(db=env.open_db(b"ledgers", txn=txn, create=False)))
    env.close()
    prefix = struct.pack(">Q", 0)
    kind, (ids, counts, confirmed, bad) = _same_everywhere(
        "scan_directory", pairs, prefix, _LEDGER_TYPE, _OPEN_LEDGER_TYPE
    )
    assert kind == "ok" and bad is None and confirmed == 7
    assert list(array("q", ids)) == [3 * i for i in range(1, 41)]
    assert list(array("q", counts)) == [*range(1, 40), -1]
    rng = random.Random(4)
    found_bad = 0
    for _ in range(300):
        spoiled = _one_bit_flipped(pairs, rng)
        caught = False
        for p in (prefix, struct.pack(">Q", 1)):  # each topic's scan starts at its prefix, as set_range does
            start = next((j for j, (key, _) in enumerate(spoiled) if key >= p), len(spoiled))
            kind, out = _same_everywhere("scan_directory", spoiled[start:], p, _LEDGER_TYPE, _OPEN_LEDGER_TYPE)
            caught = caught or (kind == "ok" and out[3] is not None)  # type: ignore[index]
        found_bad += caught
    # every flip is caught by a topic's scan: one in a key's topic id moves the entry out of
    # its topic's range, and the first entry past a range is checked too
    assert found_bad == 300
    target = pairs[5]
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.put(target[0], target[1][:-1] + bytes([target[1][-1] ^ 4]), db=env.open_db(b"ledgers", txn=txn))
    env.close()
    with AckStore.open(tmp_path / "s") as store, pytest.raises(CorruptStoreError, match="ledger 18 of topic id 0"):
        store.topic("persistent://t/ns/a")


def test_the_page_scan_gives_the_same_outcome_everywhere(tmp_path: Path) -> None:
    """The structure walk's page scan, on every page of a real store and on copies with
    bits flipped: the same problem, specials, keys and children from every implementation,
    read as leaf or branch pages, with byte or integer keys, plain or all-special."""

    from ackstore import AckStore, Position

    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        for i in range(120):
            topic.cursor(f"c{i}").ack([Position(1, e) for e in range(0, 400, 3 + i % 5)])
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    psize, rng = 4096, random.Random(4)
    pages = [data[p * psize : (p + 1) * psize] for p in range(2, len(data) // psize)]
    found = set()
    for trial in range(1500):
        page = bytearray(pages[trial % len(pages)])
        for _ in range(rng.randrange(4) if trial >= len(pages) else 0):
            page[rng.randrange(psize)] ^= 1 << rng.randrange(8)
        _, _, _, lower, upper = struct.unpack_from("<QHHHH", page)
        if not (16 <= lower <= upper <= psize and not (lower - 16) % 2):
            continue
        for leaf in (True, False):
            for flags in ((False, False), (True, True), (False, True)):
                for rules in ((), (16, 16, 1, 0), (1, 511, 2, 2), (9, 511, 1, 0)):
                    n = (lower - 16) // 2
                    kind, out = _same_everywhere("scan_page", bytes(page), 0, n, upper, psize, leaf, *flags, *rules)
                    assert kind == "ok"
                    found.add(out[0][1] if out[0] else None)  # type: ignore[index]
    # healthy pages and each kind of damage
    assert found >= {None, "offset", "key", "order", "ksize", "flags", "extent"}, found
    assert _same_everywhere("scan_page", bytes(100), 0, 1, 20, 4096, True, False, False) == (
        "error",
        "a page outside the buffer",
    )


def _leaf_page(pairs: list[tuple[bytes, bytes]], psize: int = 4096) -> tuple[bytes, int]:
    """A well-formed LMDB leaf page holding ``pairs`` in the order given (nodes packed from
    the page's end, as LMDB packs them), and its ``upper``."""
    page, upper, ptrs = bytearray(psize), psize, []
    for key, value in pairs:
        extent = 8 + len(key) + len(value)
        upper -= extent + extent % 2
        page[upper : upper + extent] = (
            struct.pack("<HHHH", len(value) & 0xFFFF, len(value) >> 16, 0, len(key)) + key + value
        )
        ptrs.append(upper)
    page[10:16] = struct.pack("<HHH", 0x02, 16 + 2 * len(ptrs), upper)  # P_LEAF, lower, upper
    page[16 : 16 + 2 * len(ptrs)] = struct.pack(f"<{len(ptrs)}H", *ptrs)
    return bytes(page), upper


def test_a_pages_integer_keys_are_in_order_as_integers_not_as_bytes() -> None:
    """LMDB's integer keys (little-endian) in their integer order, 1 before 256: in order
    for a tree of integer keys, out of order as bytes (256's first byte is 0)."""
    keys = [struct.pack("<Q", 1), struct.pack("<Q", 256)]
    page, upper = _leaf_page([(k, b"v") for k in keys])
    kind, out = _same_everywhere("scan_page", page, 0, 2, upper, 4096, True, True, False)
    assert kind == "ok" and out == (None, [], keys, [])
    kind, out = _same_everywhere("scan_page", page, 0, 2, upper, 4096, True, False, False)
    assert kind == "ok" and out[0] == (1, "order", keys[1])


@pytest.mark.parametrize(
    "name,args,named",
    [
        ("scan_page", (bytes(100), 2**63, 1, 20, 4096, True, False, False), "off=9223372036854775808"),
        ("scan_page", (bytes(8192), 0, 1, 20, 4096, True, False, False, 65536), "kmin=65536"),
        ("scan_page", (bytes(8192), 0, 1, 20, 4096, True, False, False, 0, 65536), "kmax=65536"),
        ("scan_directory", ([], b"", 256, 1), "sealed_type=256"),
        ("scan_directory", ([], b"", 1, 256), "open_type=256"),
    ],
)
def test_an_argument_out_of_range_is_named_with_its_value(name: str, args: tuple[object, ...], named: str) -> None:
    kind, out = _same_everywhere(name, *args)
    assert kind == "error" and str(out).startswith(f"{named} is outside 0.."), out


def test_a_directory_entry_under_a_key_of_another_size_is_the_bad_one() -> None:
    """A sealed ledger's value, well formed and checksummed over its 15-byte key (a buggy
    writer's): the scan stops at it and names it, whatever its value says."""
    key = struct.pack(">Q", 0) + bytes(7)
    body = bytes([_LEDGER_TYPE, 0]) + struct.pack(">q", 5)
    value = body + struct.pack(">I", zlib.crc32(key + body))
    assert pure_codecs.directory_entry(key, value, _LEDGER_TYPE, 1) == (5, None)  # its value checks
    kind, out = _same_everywhere("scan_directory", [(key, value)], struct.pack(">Q", 0), _LEDGER_TYPE, 1)
    assert kind == "ok" and out == (b"", b"", None, (key, value))


def test_the_compiled_module_is_built_where_a_compiler_is() -> None:
    """``make test``'s install builds it on a machine with a C compiler and the headers."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if os.environ.get("ACKSTORE_PURE_PYTHON"):
        pytest.skip(
            "ACKSTORE_PURE_PYTHON is set: the pure-Python twins were asked for (the compiled module is not used)"
        )
    if not (shutil.which(compiler) and headers):
        pytest.skip("no C compiler or Python headers here: the pure-Python decoders are in use")
    assert codecs.native is not None and codecs.IMPLEMENTATION == "native"


def test_the_pure_path_runs_a_store_when_asked(tmp_path: Path) -> None:
    """``ACKSTORE_PURE_PYTHON=1`` uses the pure decoders: a store written by the compiled
    ones opens and reads the same there."""
    script = f"""
import sys
from ackstore import AckStore, Position
from ackstore.storage import codecs
with AckStore.open({str(tmp_path / "s")!r}) as store:
    t = store.topic("t")
    if sys.argv[1] == "write":
        t.add_ledger(1)
    c = t.cursor("c")
    if sys.argv[1] == "write":
        c.ack([Position(1, e) for e in range(0, 3000, 3)]); c.ack(Position(1, 5000)); store.flush()
        for e in range(1, 40, 3):
            c.ack(Position(1, e)); store.flush()
    print(codecs.IMPLEMENTATION, c.stats().ack_range_count, c.mark_delete_position, c.stats().last_marker_seq)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    written = subprocess.run([sys.executable, "-c", script, "write"], env=env, capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    env["ACKSTORE_PURE_PYTHON"] = "1"
    read = subprocess.run([sys.executable, "-c", script, "read"], env=env, capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split()[0] == "python"
    assert read.stdout.split()[1:] == written.stdout.split()[1:]


def test_pure_twins_are_the_fallback() -> None:
    assert codecs.IMPLEMENTATION in ("native", "python")
    assert (codecs.acks_roaring is pure_acks.acks_roaring) == (codecs.native is None)


@pytest.mark.parametrize(
    "name,args",
    [
        ("acks_roaring", (4, 2**64, 5, b"")),
        ("acks_roaring", (4, 0, -1, b"")),
        ("acks_roaring", (8, 2**32, 2**32, b"")),
        ("rice_code", (bytes(8), 2**64)),
        ("rice_code", (memoryview(array("I", [1, 2])), 0)),
        ("rice_code", (memoryview(array("I", [1, 2])).cast("B"), 0)),
        ("ef_code", (memoryview(array("I", [1, 2])), 0, 5)),
        ("ef_code", (bytes(8), 0, 2**64)),
        ("acks_roaring", (2**64, 0, 5, b"")),
        ("acks_roaring", (32, -1, 5, b"")),
        ("delta_fields", (bytes(40), 2**31)),
        ("delta_fields", (bytes(40), -1)),
        ("ledger_span", (bytes(40), 1, 2**31)),
        ("ledger_span", (bytes(40), 2**70, 1)),
        ("scan_page", (bytes(100), 2**63, 1, 20, 4096, True, False, False)),
        ("scan_page", (bytes(8192), 0, 2**62, 20, 4096, True, False, False)),
        ("scan_page", (bytes(8192), 0, 1, 20, 4096, True, False, False, 0, 2**63)),
        ("scan_page", (bytes(8192), 0, 1, 20, 4096, True, False, False, 0, 5, 1.5)),
        ("scan_directory", ([], b"", 300, 1)),
    ],
)
def test_out_of_range_arguments_fail_alike_in_every_implementation(name: str, args: tuple[object, ...]) -> None:
    """An int outside what an argument allows is one ValueError naming it, a non-int one
    TypeError, in both twins (the compiled one raised OverflowError where the pure one
    raised ValueError or went on); a memoryview of 32-bit values is its bytes in both."""
    kind, out = _same_everywhere(name, *args)
    if name in ("rice_code", "ef_code") and isinstance(args[0], memoryview):
        assert kind == "ok", out
    else:
        assert kind == ("type" if 1.5 in args else "error"), out


def test_point_value_is_the_same_everywhere() -> None:
    """A history point's value (a u64 and varints): the same bytes from every
    implementation on random fields, and the same error for a negative or too large one,
    a field that is not an int, or fields that are not a tuple."""
    rng = random.Random(3)
    for _ in range(500):
        fields = tuple(rng.randrange(1 << rng.choice((3, 7, 8, 14, 30, 62))) for _ in range(rng.randrange(12)))
        kind, out = _same_everywhere("point_value", rng.randrange(1 << 62), fields)
        assert kind == "ok", out
    for bad in ((-1, ()), (1 << 63, ()), (5, (-1,)), (5, (1 << 63,)), (5, ("x",)), (5, [1, 2]), ("x", ())):
        kind, _ = _same_everywhere("point_value", *bad)
        assert kind != "ok", bad


def test_acks_positions_are_grouped_alike_everywhere() -> None:
    """``positions_by_ledger``: the ledgers ascending, each one's entries (deduplicated) as
    roaring bytes, the same from every implementation; None, raising nothing, for anything
    but 2-tuples of ints in range (the caller's checks name the bad item)."""
    from ackstore import Position

    top = (1 << 32) - 2
    assert _same_everywhere("positions_by_ledger", [Position(7, 3), (7, 1), (2, top), (7, 3)]) == (
        "ok",
        [(2, BitMap([top]).serialize()), (7, BitMap([1, 3]).serialize())],
    )
    assert _same_everywhere("positions_by_ledger", ()) == ("ok", [])
    for bad in ([(1, top + 1)], [(1, -1)], [(-1, 0)], [(1 << 63, 0)], [(1, True)], [(1, 2, 3)], [[1, 2]], [(1, 2.0)]):
        assert _same_everywhere("positions_by_ledger", [(1, 0), *bad]) == ("ok", None), bad
    assert _same_everywhere("positions_by_ledger", iter([(1, 0)])) == ("ok", None)
    rng = random.Random(5)
    for i in range(80):
        # entries near each other (bytes they share), anywhere, or repeated; the ledgers
        # interleaved (sorted by comparison), or each one's positions together, unsorted
        # (sorted by radix): of a few positions (fewer than the radix sort's 64) or thousands
        size = rng.choice([rng.randrange(70), rng.randrange(5_000)])
        base = rng.randrange(top - 300)
        spans = ((0, 70_000), (0, top + 1), (base, base + 300), (5, 6))  # (5: the one entry repeated)
        entries = [rng.randrange(*rng.choice(spans)) for _ in range(size)]
        items = [(rng.randrange(3), entry) for entry in entries]
        if i % 2:
            items.sort(key=lambda item: item[0])  # (stable: each ledger's entries stay unsorted)
        grouped = _same_everywhere("positions_by_ledger", items)[1]
        want: dict[int, set[int]] = {}
        for ledger, entry in items:
            want.setdefault(ledger, set()).add(entry)
        assert [(ledger, sorted(BitMap.deserialize(raw))) for ledger, raw in grouped] == [  # type: ignore[union-attr]
            (ledger, sorted(want[ledger])) for ledger in sorted(want)
        ]


def test_gap_planes_decode_to_the_same_bytes_everywhere() -> None:
    """Gap planes (flag 4): the same bytes from every implementation (each container in its
    smallest form), gaps of 2**31 and more read unsigned, the top entry id reachable and one
    past it refused alike."""

    def planes(gaps: list[int]) -> bytes:
        raw = array("I", gaps)
        if sys.byteorder == "big":
            raw.byteswap()
        data = raw.tobytes()
        return b"".join(data[i::4] for i in range(4))

    top = (1 << 32) - 1
    cases = [
        ([0, 1, 1, 1], 5),
        ([0] + [1] * 5000, 3),  # a run across a container's worth of values: a bitmap container, not a run
        ([0, (1 << 31) + 5], 0),
        ([0, top - 1], 1),
        ([0], top),
        ([], 7),
    ]
    for gaps, first in cases:
        outcome, raw = _same_everywhere("acks_roaring", 4, first, TOP, planes(gaps))
        values = [first + sum(gaps[: i + 1]) for i in range(len(gaps))]
        assert outcome == "ok" and list(BitMap.deserialize(raw)) == values, (gaps, first)  # type: ignore[arg-type]
        smallest = BitMap(values)
        smallest.run_optimize()
        assert raw == smallest.serialize()
    assert _same_everywhere("acks_roaring", 4, top, top, planes([0, 1]))[0] == "error"
    for bad in (top + 1, -1):
        outcome = _same_everywhere("acks_roaring", 4, bad, top, planes([0]))
        assert outcome == ("error", f"first={bad} is outside 0..{top}")


def _ledger_record(fields: list[object]) -> bytes:
    return records.encode_record(records.RECORD_LEDGER, msgpack.packb(fields))


def _read_alike(value: bytes) -> object:
    """``ledger_acks`` of ``value``, the same in every implementation; where it reads the
    record, exactly what the long way reads from it (the one pass never takes a record the
    long way refuses, nor reads one otherwise)."""
    kind, quick = _same_everywhere("ledger_acks", value, records.RECORD_LEDGER, FORMAT_VERSION)
    assert kind == "ok", quick
    if quick is not None:
        ledger, raw, runs, owner = quick  # type: ignore[misc]
        long_ledger, acks, long_owner = records._ledger_the_long_way(value)
        assert (ledger, BitMap.deserialize(raw), runs, owner) == (long_ledger, acks.bitmap, acks.runs, long_owner)
        assert not acks.batches and not acks.counts
    return quick


@pytest.mark.usefixtures("ef_reads")
def test_a_ledger_record_of_acks_only_is_read_in_one_pass_as_the_long_way_reads_it() -> None:
    """``ledger_acks``: a record holding acks only, coded as ``acks_roaring`` reads them (the
    Elias-Fano codes of the values, the holes or the run bounds; the Rice code), gives the
    same ``(ledger, acks, runs, owner)`` in every implementation, as the long way reads it;
    every other record (partial batches, delivery counts, other codes, a stated run count
    that is not the set's, another record type, the msgpack envelope) is None; and a damaged
    record is None everywhere or reads as the long way reads it."""
    rng = random.Random(8)
    read = 0
    for values, first, last in _ledger_sets(rng):
        if last - first > 1 << 20:
            continue  # (the pure twin writes every container of the span)
        runs = bitmaps.count_runs(values)
        codes = [(32, first, last, codecs.ef_code(values.to_array(), first, last))]
        holes = BitMap(values).flip(first, last + 1)
        if holes:
            codes.append((33, first, last, codecs.ef_code(holes.to_array(), first, last)))
        if len(values) <= 256:
            codes.append((8, first, last, bitmaps._rice(values, first)))
        if 0 < len(holes) <= 256:
            codes.append((9, first, last, bitmaps._rice(holes, first)))
        bounds = bitmaps._inner_bounds(values)
        if bounds:
            low, high = values.min(), values.max()
            codes.append((64, low, high, codecs.ef_code(bounds.to_array(), low, high)))
        for flags, lo, hi, code in codes:
            ledger, owner = rng.randrange(1 << 40), rng.randrange(1 << 20)
            for tail in ([owner], [], [owner, []]) if flags == 32 else ([owner],):  # owned, not, with no counts
                value = _ledger_record([ledger, flags, lo, hi, code, runs, [], *tail])
                quick = _read_alike(value)
                assert quick is not None and quick[2] == runs, (flags, tail)  # type: ignore[index]
                read += 1
            value = _ledger_record([ledger, flags, lo, hi, code, runs, [], owner])
            for _ in range(4):
                _read_alike(damaged(value, rng))
            assert _read_alike(_ledger_record([ledger, flags, lo, hi, code, runs + 1, [], owner])) is None
            with pytest.raises(records.CorruptRecordError, match=f"says {runs + 1} runs"):
                records.decode_ledger_owned(_ledger_record([ledger, flags, lo, hi, code, runs + 1, [], owner]))
    assert read > 150
    values = BitMap(range(1, 5000, 3))
    runs = bitmaps.count_runs(values)
    acks = records.LedgerAcks(values, {7: (4, 0b0101)}, {8: 2})
    others = [
        records.encode_ledger(5, acks, 9),  # a partial batch and a delivery count
        records.encode_ledger(5, records.LedgerAcks(values, None, {8: 2}), 9),
        records.encode_ledger(5, records.LedgerAcks(values, {7: (4, 0b0101)}, None), 9),
        _ledger_record([5, 0, 1, 4999, values.serialize(), runs, [], 9]),  # the portable form
        _ledger_record([5, 4 | 2, 1, 4999, zlib.compress(bitmaps._gap_planes(values, 1)), runs, [], 9]),
        _ledger_record([5, 4, 1, 4999, bitmaps._gap_planes(values, 1), runs, [], 9]),  # planes are compressed
        _ledger_record([5, 32 | 2, 1, 4999, codecs.ef_code(values.to_array(), 1, 4999), runs, [], 9]),
        records.encode_record(records.RECORD_MARKER, msgpack.packb([5, 32, 1, 4999, b"", runs, [], 9])),
        msgpack.packb([records.RECORD_LEDGER, 2, 0, b""]),  # the msgpack envelope of formats 1-5
    ]
    for value in others:
        assert _read_alike(value) is None
    for value in others[5:7]:  # codes the one pass could read but the long way refuses
        with pytest.raises(records.CorruptRecordError):
            records.decode_ledger_owned(value)
    ledger, got, owner = records.decode_ledger_owned(others[0])
    assert (ledger, got.bitmap, got.batches, got.counts, owner) == (5, values, {7: (4, 0b0101)}, {8: 2}, 9)


def test_a_cursor_entry_is_checked_and_read_alike_everywhere() -> None:
    """``cursor_entry``: a cursors catalog entry in the fixed envelope gives what
    ``cursor_fields`` gives of its body, its envelope, checksum and type checked first, and
    the same error everywhere for every damaged copy, another record type or format, or an
    entry not in the fixed envelope."""
    from ackstore.storage.catalog import RECORD_CURSOR
    from ackstore.storage.records import FORMAT_VERSION, RECORD_MARKER, encode_record

    rng = random.Random(11)
    cfg = {"max_individual_ack_cache_bytes": 1 << 20}
    for tid, name, cid in [(0, "c", 0), (1 << 40, "sub-é" * 40, (1 << 63) - 1), (5, "x" * 3_000, 1)]:
        body = msgpack.packb([tid, name, cid, cfg])
        entry = encode_record(RECORD_CURSOR, body)
        fields = _same_everywhere("cursor_fields", body)
        assert fields[0] == "ok" and _same_everywhere("cursor_entry", entry, FORMAT_VERSION) == fields
        errors = set()
        for _ in range(60):
            kind, out = _same_everywhere("cursor_entry", damaged(entry, rng), FORMAT_VERSION)
            errors.add(out if kind == "error" else "ok")
        assert "record checksum mismatch" in errors
    other = encode_record(RECORD_MARKER, msgpack.packb([1, "c", 2, cfg]))
    assert _same_everywhere("cursor_entry", other, FORMAT_VERSION) == (
        "error",
        f"type {RECORD_MARKER}, not a cursor entry",
    )
    entry = encode_record(RECORD_CURSOR, msgpack.packb([1, "c", 2, cfg]))
    assert _same_everywhere("cursor_entry", entry, 1)[1] == (
        f"record format {FORMAT_VERSION} is newer than this ackstore reads (1)"
    )
    assert _same_everywhere("cursor_entry", b"\x94\x01", 9)[1] == "record is not in the fixed envelope"
    assert _same_everywhere("cursor_entry", entry, 256)[0] == "error"  # (max_version outside 0..255)


def test_a_cursor_entrys_fields_are_read_alike_and_its_config_left_as_bytes() -> None:
    """``cursor_fields``: a cursors catalog entry's body gives the same ``(topic id, name,
    cursor id, config map bytes)`` in every implementation, the bytes the map as stored; every
    other shape (a field missing or of another type, a name that is not UTF-8, an int past
    64 bits, a config that is not a map) is the same ValueError everywhere, and so is any
    damaged body."""
    rng = random.Random(9)
    shape = ("error", "a cursor entry's body is not [topic id, name, cursor id, config map]")
    cfg = {"max_individual_ack_cache_bytes": 1 << 20, "dispatcher_pause_on_ack_state_persistent": True}
    for tid, name, cid in [(0, "c", 0), (1 << 40, "sub-é" * 40, (1 << 63) - 1), (7, "", 3), (5, "x" * 70_000, 1)]:
        body = msgpack.packb([tid, name, cid, cfg])
        kind, out = _same_everywhere("cursor_fields", body)
        assert kind == "ok" and out[:3] == (tid, name, cid), out  # type: ignore[index]
        assert out[3] == msgpack.packb(cfg) and msgpack.unpackb(out[3]) == cfg  # type: ignore[index]
        for _ in range(30):
            kind, _ = _same_everywhere("cursor_fields", damaged(body, rng))
            assert kind in ("ok", "error")
    for fields in (
        [1, "c", 2],
        [1, "c", 2, cfg, 5],
        [1, b"c", 2, cfg],
        [True, "c", 2, cfg],
        [1, "c", (1 << 64) - 1, cfg],  # past a signed 64-bit int
        [1, "c", 2, [1]],
        [1, "c", 2, None],
        [1.0, "c", 2, cfg],
    ):
        assert _same_everywhere("cursor_fields", msgpack.packb(fields)) == shape, fields
    bad_utf8 = b"\x94\x01\xa2\xff\xfe\x02" + msgpack.packb(cfg)
    assert _same_everywhere("cursor_fields", bad_utf8) == shape
    assert _same_everywhere("cursor_fields", b"\x94\x01\xa1c\x02") == shape  # no config at all


def test_the_cursors_scan_gives_the_same_outcome_everywhere(tmp_path: Path) -> None:
    """A topic's cursors catalog entries as a real store wrote them (short names, one past
    the length a key holds, which the key hashes, another topic's after them), then with a
    bit flipped in a key or a value: the same entries read and the same entry left to the
    caller from every implementation; the store's own open of every cursor gets them all,
    and names a damaged one."""

    import lmdb

    from ackstore import AckStore, CorruptStoreError
    from ackstore.storage.catalog import _RAW_NAME_BYTES

    long_name = "n" * (_RAW_NAME_BYTES + 1)
    names = [f"c{i}" for i in range(30)] + [long_name, "ü-named"]
    with AckStore.open(tmp_path / "s") as store:
        for topic_name, made in (("persistent://t/ns/a", names), ("persistent://t/ns/b", ["other"])):
            topic = store.topic(topic_name)
            topic.add_ledger(1)
            for name in made:
                topic.cursor(name)
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8, readonly=True, lock=False)
    with env.begin() as txn:
        pairs = list(txn.cursor(db=env.open_db(b"cursors", txn=txn, create=False)))
    env.close()
    prefix = struct.pack(">Q", 0)
    hashed = next(i for i, (key, _) in enumerate(pairs) if key[8:9] == b"\x00")
    kind, (found, stop) = _same_everywhere("scan_cursors", pairs, prefix, FORMAT_VERSION, _RAW_NAME_BYTES)
    assert kind == "ok" and stop == pairs[hashed]
    assert [f[0] for f in found] == [key[8:].decode() for key, _ in pairs[:hashed]]
    kind, (found, stop) = _same_everywhere("scan_cursors", pairs[hashed + 1 :], prefix, FORMAT_VERSION, 600)
    assert kind == "ok" and stop is None and len(found) == len(names) - hashed - 1
    assert all(f[3] == v for f, (_, v) in zip(found, pairs[hashed + 1 :], strict=False))
    rng = random.Random(5)
    left = 0
    for _ in range(300):
        spoiled = _one_bit_flipped(pairs, rng)
        kind, out = _same_everywhere("scan_cursors", spoiled, prefix, FORMAT_VERSION, _RAW_NAME_BYTES)
        left += kind == "ok" and out[1] is not None  # type: ignore[index]
    assert left >= 250  # (a flip in a key's topic id can move an entry out of the scan's range)
    for bad in (([], b"1234567", FORMAT_VERSION, 10), ([], prefix, 256, 10), ([], prefix, FORMAT_VERSION, -1)):
        assert _same_everywhere("scan_cursors", *bad)[0] == "error"
    with AckStore.open(tmp_path / "s") as store:
        assert sorted(store.topic("persistent://t/ns/a").open_cursors()) == sorted(names)
    target = pairs[3]
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.put(target[0], target[1][:-1] + bytes([target[1][-1] ^ 4]), db=env.open_db(b"cursors", txn=txn))
    env.close()
    damaged = f"{target[0][8:].decode()}' is damaged"
    with AckStore.open(tmp_path / "s") as store, pytest.raises(CorruptStoreError, match=damaged):
        store.topic("persistent://t/ns/a").open_cursors()


_GAP_FLUSH = """
import random, sys
from pyroaring import BitMap
from ackstore import AckStore, Position
from ackstore.storage import codecs
with AckStore.open(sys.argv[1], sync=False) as store:
    topic = store.topic("persistent://t/ns/gaps")
    topic.add_ledger(1)
    topic.close_ledger(1, 50_000)
    topic.add_ledger(2)
    cur = topic.cursor("c")
    cur.ack_entries(1, BitMap(e for e in range(1, 50_000) if random.Random(e).random() < 0.1))
    store.flush()
print(codecs.IMPLEMENTATION, "numpy" in sys.modules)
with AckStore.open(sys.argv[1]) as store:
    print(store.topic("persistent://t/ns/gaps").cursor("c").ack_range_count)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    codecs.native is None, reason="the compiled module computes gap planes; the pure twin may use numpy"
)
def test_a_flush_that_writes_gap_planes_does_not_import_numpy(tmp_path: Path) -> None:
    """A record of many scattered acks is written as gap planes: the compiled module computes
    them, so the first such flush imports nothing (numpy's import took 45 ms of a flush and
    left a thread in the process), and the record reads back."""
    env = {k: v for k, v in os.environ.items() if k != "ACKSTORE_PURE_PYTHON"}
    out = subprocess.run(
        [sys.executable, "-c", _GAP_FLUSH, str(tmp_path / "store")], capture_output=True, text=True, env=env, check=True
    )
    implementation, numpy_loaded, ranges = out.stdout.split()
    assert (implementation, numpy_loaded) == ("native", "False")
    assert int(ranges) > 1000
