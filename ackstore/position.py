"""Positions in a segmented log: ``(ledger, entry)``, ordered by ledger then entry."""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Position", "MAX_LEDGER", "MAX_ENTRY", "check_ledger_id", "trusted"]

MAX_LEDGER = (1 << 63) - 1
"""Ledger ids are unsigned 63-bit (they are packed into big-endian keys)."""
MAX_ENTRY = (1 << 32) - 2
"""Entry ids live in 32-bit roaring bitmaps; the top value is kept free as a sentinel."""


def check_ledger_id(ledger: Any, what: str = "ledger") -> int:
    """Return ``ledger`` if it is a valid ledger id, else raise a typed error."""
    if type(ledger) is not int:
        if isinstance(ledger, bool) or not isinstance(ledger, int):
            raise InvalidTypeError(f"{what} must be an int, got {ledger!r} ({type(ledger).__name__})")
        ledger = int(ledger)
    if ledger < 0 or ledger > MAX_LEDGER:
        raise InvalidArgumentError(f"{what} {ledger} is out of range: allowed 0..{MAX_LEDGER}")
    return ledger


class Position(tuple):  # type: ignore[type-arg]
    """A position ``(ledger, entry)`` in a topic's log.

    Ordered (ledger first), hashable, and cheap: it is a 2-tuple underneath.
    ``entry == -1`` means "before the first entry of ``ledger``" and is allowed
    for mark-delete positions. Write it as ``"7:5"``; :meth:`parse` reads that.
    """

    __slots__ = ()

    def __new__(cls, ledger: int, entry: int) -> Position:
        check_ledger_id(ledger)
        if type(entry) is not int:
            if isinstance(entry, bool) or not isinstance(entry, int):
                raise InvalidTypeError(f"entry must be an int, got {entry!r} ({type(entry).__name__})")
            entry = int(entry)
        if entry < -1 or entry > MAX_ENTRY:
            raise InvalidArgumentError(f"entry {entry} is out of range: allowed -1..{MAX_ENTRY}")
        return tuple.__new__(cls, (ledger, entry))

    @property
    def ledger(self) -> int:
        """The ledger id."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def entry(self) -> int:
        """The entry id inside the ledger (``-1``: before its first entry)."""
        return self[1]  # type: ignore[no-any-return]

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse ``"ledger:entry"`` (e.g. ``"7:5"`` or ``"7:-1"``)."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"Position.parse takes a str like '7:5', got {text!r}")
        parts = text.strip().split(":")
        if len(parts) != 2:
            raise InvalidArgumentError(f"cannot parse position {text!r}: expected 'ledger:entry', e.g. '7:5'")
        try:
            ledger, entry = int(parts[0]), int(parts[1])
        except ValueError:
            raise InvalidArgumentError(
                f"cannot parse position {text!r}: ledger and entry must be integers, e.g. '7:5'"
            ) from None
        return cls(ledger, entry)

    def next(self) -> Position:
        """The position right after this one in the same ledger."""
        return tuple.__new__(Position, (self[0], self[1] + 1))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Position({self[0]}, {self[1]})"

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}"

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])


def trusted(ledger: int, entry: int) -> Position:
    """Build a Position without validation (internal, for values already checked)."""
    return tuple.__new__(Position, (ledger, entry))  # type: ignore[no-any-return]
