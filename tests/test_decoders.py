"""Arbitrary bytes into every decoder of stored values: a typed error (CorruptRecordError for
records, CorruptStoreError for catalog entries), never another exception, never a hang."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from ackstore import CorruptRecordError, CorruptStoreError
from ackstore.ledger_acks import LedgerAcks
from ackstore.storage.catalog import Catalog
from ackstore.storage.records import (
    RECORD_LEDGER,
    RECORD_MARKER,
    IndexEntry,
    Marker,
    decode_ledger,
    decode_ledger_owned,
    decode_marker,
    decode_record,
    encode_ledger,
    encode_marker,
    encode_record,
    ledger_span,
)

DECODERS = (decode_record, decode_ledger, decode_ledger_owned, ledger_span, decode_marker)
VALID = (
    encode_ledger(7, LedgerAcks(BitMap([1, 2, 3, 9, 4000]), {12: (4, 0b0101)}), 3),
    encode_ledger(7, LedgerAcks(BitMap(range(0, 50_000, 3)))),
    encode_marker(Marker(True, -1, (1, 5), (1, 6), {"k": 1}, {7: IndexEntry(3, 2), 8: None}, extra={"c": 3})),
)


def _only_typed(value: bytes) -> None:
    for decode in DECODERS:
        with contextlib.suppress(CorruptRecordError):
            decode(value)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(value: bytes) -> None:
    _only_typed(value)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=4))
def test_damaged_valid_records(valid: bytes, flips: list[tuple[int, int]]) -> None:
    raw = bytearray(valid)
    for at, mask in flips:
        raw[at % len(raw)] ^= mask
    _only_typed(bytes(raw))


body = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=20) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=4), inner, max_size=6),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.sampled_from([RECORD_LEDGER, RECORD_MARKER, 3, 4, 99]), body)
def test_checksummed_envelopes_with_any_body(rtype: int, obj: object) -> None:
    """The CRC holds, so the body's shape is what is tested: wrong shapes are typed errors."""
    _only_typed(encode_record(rtype, msgpack.packb(obj)))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=64), st.binary(max_size=200))
def test_catalog_values(key: bytes, value: bytes) -> None:
    catalog = Catalog.codec("test")  # the codecs only; no environment needed
    for version in (2, 3):
        catalog.version = version
        for decode in (catalog.topic_entry, catalog.cursor_entry, catalog.ledger_entry):
            with contextlib.suppress(CorruptStoreError):
                decode(key, value)


@pytest.mark.parametrize(
    "flags", [128, 8 | 4, 16 | 2, 16 | 4, 16 | 8, 32 | 2, 32 | 4, 32 | 8, 32 | 16, 64 | 1, 64 | 32, -1, "2"]
)
def test_unknown_bitmap_flags_are_damage(flags: object) -> None:
    from ackstore.storage.bitmaps import decode_bitmap

    with pytest.raises(CorruptRecordError, match="encoding flags"):
        decode_bitmap(flags, 0, 10, b"")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00\x02", b"\x00\x02\x05\x01", b"\x80\x80", b"\x00\x00\x03", b"\x00\x02\x00", b"\x00\x02\x07"],
    ids=["empty", "two varints", "four varints", "unterminated", "step 0", "count 0", "past last"],
)
def test_a_damaged_stride_payload_is_a_corrupt_record(payload: bytes) -> None:
    """A stride (format 8) decodes only to values inside the record's [first, last]."""
    from ackstore.storage.bitmaps import _STRIDE, decode_bitmap

    assert decode_bitmap(_STRIDE, 0, 10, b"\x00\x02\x06") == BitMap(range(0, 11, 2))  # the healthy one
    with pytest.raises(CorruptRecordError, match="stride"):
        decode_bitmap(_STRIDE, 0, 10, payload)
