"""Validation of positions and entries against a topic's ledger directory.

Every check raises a typed error naming the value and what is allowed; nothing here
changes state.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import Any

from pyroaring import BitMap

from ..directory import LedgerDirectory
from ..errors import InvalidArgumentError, InvalidPositionError, InvalidTypeError, UnknownLedgerError
from ..ledger_acks import bitmap_of_range
from ..position import MAX_ENTRY

__all__ = [
    "ledger_limit",
    "check_entry",
    "check_ack",
    "ack_limit",
    "check_entries",
    "Checks",
    "pair",
    "int_dtype",
    "entries_bitmap",
    "refuse_entries",
    "describe",
    "quoted",
    "utf8_size",
    "check_property",
    "check_property_key",
    "MAX_PROPERTY_KEY_BYTES",
    "MAX_PROPERTY_VALUE_BYTES",
]

MAX_PROPERTY_KEY_BYTES = 1024
"""The longest property key, in UTF-8 bytes."""
MAX_PROPERTY_VALUE_BYTES = 4096
"""The longest string property value, in UTF-8 bytes (every marker carries every property)."""


def ledger_limit(d: LedgerDirectory, topic: str, ledger: Any) -> int:
    """Highest entry id allowed in ``ledger``; raises for an unknown or trimmed ledger. O(log n)."""
    if type(ledger) is not int:
        raise InvalidTypeError(f"ledger must be an int, got {ledger!r} ({type(ledger).__name__})")
    i = d.index(ledger)
    if i < 0:
        first = d.first()
        if first is not None and 0 <= ledger < first:
            why = f"it was trimmed (the topic's first ledger is {first})"
        else:
            why = f"the topic's ledgers are {describe(d)}"
        raise UnknownLedgerError(f"ledger {ledger} is not in topic {topic!r}: {why}")
    count = d.counts[i]
    return d.open_limit() if count < 0 else count - 1


def check_entry(d: LedgerDirectory, topic: str, ledger: int, entry: Any, low: int = 0) -> None:
    """Raise unless ``ledger:entry`` lies in the ledger (``low`` is -1 for a mark-delete)."""
    if type(entry) is not int:
        raise InvalidTypeError(f"entry must be an int, got {entry!r} ({type(entry).__name__})")
    limit = ledger_limit(d, topic, ledger)
    if not low <= entry <= limit:
        if d.count(ledger) >= 0:
            why = " (the ledger is sealed)"
        elif limit < 0:
            why = " (the ledger is open with no confirmed entry yet; topic.advance confirms entries)"
        elif limit != MAX_ENTRY:
            why = f" (the ledger is open and its last confirmed entry is {ledger}:{limit}; topic.advance moves it)"
        else:
            why = ""
        raise InvalidPositionError(
            f"position {ledger}:{entry} is outside ledger {ledger}: allowed entries {low}..{limit}{why}"
        )


def check_ack(d: LedgerDirectory, topic: str, md: tuple[int, int], ledger: int, entry: Any, low: int = 0) -> None:
    """:func:`check_entry` for an ack (or a delivery) of a cursor at mark-delete position
    ``md``: a position at or below M passes whatever its ledger, one trimmed since included
    (the ack is ignored, as Pulsar ignores it), if its entry is one a ledger can have; a
    ledger never added above M stays an error."""
    try:
        check_entry(d, topic, ledger, entry, low)
    except UnknownLedgerError:
        if not 0 <= ledger < md[0]:
            raise
        if not low <= entry <= MAX_ENTRY:
            raise InvalidPositionError(
                f"position {ledger}:{entry} is not a position: allowed entries {low}..{MAX_ENTRY}"
            ) from None


def ack_limit(limit: Callable[[Any], int], md_l: int, ledger: Any) -> int:
    """``limit(ledger)`` (:func:`ledger_limit`, or a cache of it) for an ack of a cursor whose
    mark-delete position is in ledger ``md_l``: a ledger below it that the topic no longer has
    (trimmed) allows any entry, all of them at or below M (ignored). O(limit)."""
    try:
        return limit(ledger)
    except UnknownLedgerError:
        if not 0 <= ledger < md_l:
            raise
        return MAX_ENTRY


def check_entries(limit: Callable[[Any], int], check: Callable[[int, Any], object], ledger: int, bm: BitMap) -> None:
    """Acks of the entries ``bm`` of ``ledger`` checked (``Cursor.ack_entries``' rule): the
    ledger's ack limit first (``limit``: :func:`ack_limit`'s, which raises for a ledger never
    added), then, past it, the highest entry (``check``: :func:`check_ack`'s). O(limit)."""
    top = limit(ledger)
    if bm and bm.max() > top:
        check(ledger, bm.max())


class Checks:
    """The checks of an ack or a delivery at mark-delete position ``md`` of a topic's
    ledgers ``d`` (``topic`` its name), for a caller that holds no ack state: :meth:`limit`
    (:func:`ack_limit`) and :meth:`check` (:func:`check_ack`)."""

    __slots__ = ("d", "topic", "md")

    def __init__(self, d: LedgerDirectory, topic: str, md: tuple[int, int]) -> None:
        self.d, self.topic, self.md = d, topic, md

    def limit(self, ledger: Any) -> int:
        return ack_limit(lambda x: ledger_limit(self.d, self.topic, x), self.md[0], ledger)

    def check(self, ledger: int, entry: Any) -> None:
        check_ack(self.d, self.topic, self.md, ledger, entry)


def int_dtype(obj: Any) -> bool:
    """True for a numpy-like array of integers (taken without a Python int per entry)."""
    return getattr(getattr(obj, "dtype", None), "kind", "") in ("i", "u")


def entries_bitmap(entries: Iterable[int]) -> tuple[BitMap | None, Any]:
    """``Cursor.ack_entries``' entries as a BitMap (the caller's own when given one: to be
    read, not changed), and the entries themselves (any other iterable read into a list: an
    iterator is read once). A BitMap, range, array or integer ndarray is taken without a
    Python int per entry. The BitMap is None when they are not ints from 0 to 2**32 - 1
    (:func:`refuse_entries` then says why). O(entries); O(1) for a BitMap."""
    if isinstance(entries, BitMap):
        return entries, entries
    if not (isinstance(entries, (range, array)) or int_dtype(entries)):
        try:
            entries = list(entries)
        except TypeError:
            return None, entries
        if not set(map(type, entries)) <= {int}:
            return None, entries
    elif isinstance(entries, array) and entries.typecode in ("f", "d"):
        return None, entries
    try:
        if isinstance(entries, range):
            return bitmap_of_range(entries), entries
        if isinstance(entries, array) and entries.typecode != "I":  # (the one BitMap reads as it is)
            return BitMap(array("I", entries)), entries
        return BitMap(entries), entries
    except (TypeError, OverflowError, ValueError):
        return None, entries


def refuse_entries(entries: Any, check: Callable[[int], object]) -> None:
    """Raise the typed error for the entries :func:`entries_bitmap` did not take (the second
    value it gave): naming what is not an iterable of ints, the first entry that is not an
    int, or (``check(entry)`` of each) the first that is not an entry of the ledger."""
    if isinstance(entries, array) and entries.typecode in ("f", "d"):
        raise InvalidTypeError(f"entries must be ints, got an array of typecode {entries.typecode!r}")
    if not (isinstance(entries, (list, BitMap, range, array)) or int_dtype(entries)):
        raise InvalidTypeError(f"entries must be an iterable of ints, got {entries!r}")
    for entry in entries:
        if type(entry) is not int:
            raise InvalidTypeError(f"entry must be an int, got {entry!r} ({type(entry).__name__})")
    for entry in list(entries):
        check(entry)
    raise InvalidTypeError("entries must be ints from 0 to 2**32 - 1")  # pragma: no cover


def pair(item: Any) -> tuple[int, int]:
    """``(ledger, entry)`` of a Position or a 2-tuple of ints; a typed error for anything else."""
    try:
        ledger, entry = item
    except (TypeError, ValueError):
        raise InvalidTypeError(f"expected a Position(ledger, entry), got {item!r}") from None
    if type(ledger) is not int or type(entry) is not int:
        raise InvalidTypeError(f"expected a Position(ledger, entry) of ints, got {item!r}")
    return ledger, entry


def describe(d: LedgerDirectory) -> str:
    """The directory's ledgers in a few words, for messages."""
    if not len(d):
        return "none yet (add one with topic.add_ledger)"
    if len(d) <= 6:
        return ", ".join(str(x) for x in d.ids)
    return f"{d.ids[0]}..{d.ids[-1]} ({len(d)} ledgers)"


def quoted(text: str) -> str:
    """``text`` quoted for a message, cut to its start when long: a 1,000-byte name is not
    echoed whole."""
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text):,} characters)"


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, or -1 when it cannot be stored (a lone surrogate)."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        return -1


def check_property(key: Any, value: Any) -> None:
    """A property: a valid key and a 64-bit int or a str of up to ``MAX_PROPERTY_VALUE_BYTES``
    UTF-8 bytes; typed errors naming the value otherwise."""
    check_property_key(key)
    if type(value) is str:
        if not 0 <= utf8_size(value) <= MAX_PROPERTY_VALUE_BYTES:
            shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
            raise InvalidArgumentError(
                f"property {key!r} value {shown} is not allowed: allowed a str of "
                f"0..{MAX_PROPERTY_VALUE_BYTES} UTF-8 bytes (valid Unicode, no lone surrogates)"
            )
    elif type(value) is not int or not -(1 << 63) <= value < (1 << 63):
        raise InvalidArgumentError(
            f"property {key!r} value must be a 64-bit int or a str, got {value!r} ({type(value).__name__})"
        )


def check_property_key(key: Any) -> None:
    """A property key: a non-empty str of 1..``MAX_PROPERTY_KEY_BYTES`` UTF-8 bytes."""
    if not isinstance(key, str) or not key:
        raise InvalidTypeError(f"property key must be a non-empty str, got {key!r}")
    if not 1 <= utf8_size(key) <= MAX_PROPERTY_KEY_BYTES:
        raise InvalidArgumentError(
            f"property key {key!r} is not allowed: allowed 1..{MAX_PROPERTY_KEY_BYTES} UTF-8 bytes "
            "(valid Unicode, no lone surrogates)"
        )
