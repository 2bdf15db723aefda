"""The compiled decoders and their pure-Python twins: the same bytes and the same errors
on the same cases, healthy and damaged (``ackstore.storage.codecs``)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import sysconfig
from array import array
from pathlib import Path
from types import ModuleType

import pytest
from pyroaring import BitMap

from ackstore.storage import bitmaps, codecs, pure_codecs
from ackstore.storage.records import IndexEntry, encode_fixed_marker

from .codec_impls import IMPLEMENTATIONS

ROOT = Path(__file__).resolve().parent.parent


def _outcome(impl: ModuleType, name: str, *args: object) -> tuple[str, object]:
    try:
        return "ok", getattr(impl, name)(*args)
    except ValueError as exc:
        return "error", str(exc)


def _same_everywhere(name: str, *args: object) -> tuple[str, object]:
    """The outcome of ``name(*args)``, checked identical in every implementation."""
    outcomes = [_outcome(impl, name, *args) for impl in IMPLEMENTATIONS]
    assert all(o == outcomes[0] for o in outcomes), (name, [o[0] for o in outcomes], outcomes)
    return outcomes[0]


def _damaged(data: bytes, rng: random.Random) -> bytes:
    """A bit flipped, a byte cut off the end, or a few bytes added."""
    kind = rng.randrange(3)
    if kind == 0 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if kind == 1 and data:
        return data[: rng.randrange(len(data))]
    return data + rng.randbytes(rng.randrange(1, 6))


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


@pytest.mark.parametrize(
    ("decoder", "encode", "most"),
    [("gaps_to_roaring", bitmaps._gap_planes, 1 << 32), ("rice_to_roaring", bitmaps._rice, 256)],
)
def test_codes_decode_to_the_same_bytes_and_the_same_set(decoder: str, encode: object, most: int) -> None:
    """Gap planes and Rice codes: every set back, and damaged codes give the same outcome."""
    rng = random.Random(1)
    for values in _sets(rng):
        if len(values) > most:
            continue
        first = max(0, values.min() - rng.randrange(3))
        code = encode(values, first)  # type: ignore[operator]
        kind, out = _same_everywhere(decoder, code, first)
        assert kind == "ok" and BitMap.deserialize(out) == values  # type: ignore[arg-type]
        for _ in range(20):
            _same_everywhere(decoder, _damaged(code, rng), first)


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
        assert BitMap.deserialize(_same_everywhere("rice_to_roaring", code, first)[1]) == values  # type: ignore[arg-type]
    assert _same_everywhere("rice_code", array("I"), 0) == ("error", "no values to code")
    assert _same_everywhere("rice_code", b"\x01\x02\x03", 0) == ("error", "values of 3 bytes are not 32-bit values")
    for values, first in (([5, 5], 0), ([3, 2], 0), ([5], 6), ([1], -1), ([1], 1 << 32)):
        assert _same_everywhere("rice_code", array("I", values), first) == (
            "error",
            "values are not ascending from first",
        ), (values, first)


def test_the_errors_say_what_is_wrong() -> None:
    assert _same_everywhere("gaps_to_roaring", b"\x01\x02\x03", 0) == (
        "error",
        "gap planes of 3 bytes are not four planes of equal length",
    )
    assert _same_everywhere("gaps_to_roaring", b"\x00\x00\x00\x01", (1 << 32) - 2) == (
        "error",
        "gap record decodes past 2^32",
    )
    assert _same_everywhere("rice_to_roaring", b"", 0) == ("error", "Rice payload ends early")
    assert _same_everywhere("rice_to_roaring", b"\x40\x01\x00", 0) == ("error", "Rice parameter k=64 is over 31")
    assert _same_everywhere("rice_to_roaring", b"\x00\xff\xff\xff\x7f", 0) == ("error", "Rice payload ends early")
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
            damaged = _damaged(body, rng)
            for version in (9, 7, 6):  # and read as the layouts of formats 7 and 6
                _same_everywhere("delta_fields", damaged, version)


def test_the_page_scan_gives_the_same_outcome_everywhere(tmp_path: Path) -> None:
    """The structure walk's page scan, on every page of a real store and on copies with
    bits flipped: the same problem, specials, keys and children from every implementation,
    read as leaf or branch pages, with byte or integer keys, plain or all-special."""
    import struct

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
                kind, out = _same_everywhere("scan_page", bytes(page), 0, (lower - 16) // 2, upper, psize, leaf, *flags)
                assert kind == "ok"
                found.add(out[0][1] if out[0] else None)  # type: ignore[index]
    assert found >= {None, "offset", "key", "order"}, found  # healthy pages and each kind of damage
    assert _same_everywhere("scan_page", bytes(100), 0, 1, 20, 4096, True, False, False) == (
        "error",
        "a page outside the buffer",
    )


def test_the_compiled_module_is_built_where_a_compiler_is() -> None:
    """``make test``'s install builds it on a machine with a C compiler and the headers."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if os.environ.get("ACKSTORE_PURE_PYTHON") or not (shutil.which(compiler) and headers):
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
    assert (codecs.gaps_to_roaring is pure_codecs.gaps_to_roaring) == (codecs.native is None)
