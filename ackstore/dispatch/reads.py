"""The read side: entries and the ``LedgerReader`` protocol.

A cursor process reads entries from its log through a :class:`LedgerReader`; an
in-memory one for tests and stress runs is in :mod:`ackstore.testing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..position import Position

__all__ = ["Entry", "LedgerReader"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the log, as a :class:`LedgerReader` returns it."""

    position: Position
    """where it is in the log"""
    payload: bytes
    """its bytes"""


class LedgerReader(Protocol):
    """What a dispatcher needs from the log."""

    def written(self, ledger: int) -> int:
        """Entries written so far in ``ledger``."""
        ...

    async def read(self, positions: list[Position]) -> list[Entry]:
        """The entries at ``positions`` (they exist)."""
        ...
