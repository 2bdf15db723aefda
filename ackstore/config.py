"""Per-cursor (subscription) configuration."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["MAX_HISTORY_SECONDS", "CursorConfig"]

MiB = 1 << 20
MAX_SETTING = (1 << 63) - 1
"""the largest value an int setting takes (it is persisted as a signed 64-bit int)"""
MAX_HISTORY_SECONDS = 366 * 24 * 3600
"""the longest history window a cursor keeps: a year"""


@dataclass(frozen=True, slots=True)
class CursorConfig:
    """Settings of one cursor. Persisted with the cursor; a store-wide default applies to new ones.

    - ``max_individual_ack_cache_bytes``: the LRU byte budget of ledger ack sets held in
      memory (PIP-81's ``maxIndividualAckCacheBytesPerCursor``).
    - ``max_unacked_ranges_to_persist``: ranges a flush persists at most (PIP-299);
      ``0`` means no limit.
    - ``dispatcher_pause_on_ack_state_persistent``: pause sequential reads while the
      range count is over that limit (PIP-299).
    - ``full_marker_every``: a full marker is written after this many delta markers.
    - ``max_deliveries``: an entry delivered this many times is not delivered again: the
      :class:`~ackstore.Dispatcher` hands it to its ``dead_letter`` callback, then acks
      it; ``0`` (the default) means no limit.
    - ``history_seconds``: how long the states this cursor's flushes wrote are kept, so
      that ``Cursor.restore_as_of`` can put it back to one; ``0`` (the default) keeps none.
    """

    max_individual_ack_cache_bytes: int = 3 * MiB
    """the LRU byte budget of the ledger ack sets held in memory (PIP-81's
    maxIndividualAckCacheBytesPerCursor); 0..2**63-1"""
    max_unacked_ranges_to_persist: int = 10_000
    """ranges a flush persists at most (PIP-299); 0: no limit"""
    dispatcher_pause_on_ack_state_persistent: bool = False
    """pause sequential reads while the range count is over that limit (PIP-299)"""
    full_marker_every: int = 64
    """a full marker is written after this many delta markers; 1..1000000"""
    max_deliveries: int = 0
    """an entry delivered this many times goes to the Dispatcher's dead_letter instead; 0: no limit"""
    history_seconds: int = 0
    """how long the states this cursor's flushes wrote are kept, to restore one
    (``Cursor.restore_as_of``); 0 (the default): none are; 0..MAX_HISTORY_SECONDS"""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int):
                if type(value) is not int:
                    raise InvalidTypeError(f"CursorConfig.{f.name} must be an int, got {value!r}")
            elif type(value) is not bool:
                raise InvalidTypeError(f"CursorConfig.{f.name} must be a bool, got {value!r}")
        if not 0 <= self.max_individual_ack_cache_bytes <= MAX_SETTING:
            raise InvalidArgumentError(
                f"CursorConfig.max_individual_ack_cache_bytes={self.max_individual_ack_cache_bytes}: "
                f"allowed 0..{MAX_SETTING}"
            )
        if not 0 <= self.max_unacked_ranges_to_persist <= MAX_SETTING:
            raise InvalidArgumentError(
                f"CursorConfig.max_unacked_ranges_to_persist={self.max_unacked_ranges_to_persist}: "
                f"allowed 0..{MAX_SETTING} (0 = no limit)"
            )
        if not 0 <= self.max_deliveries <= 1_000_000:
            raise InvalidArgumentError(
                f"CursorConfig.max_deliveries={self.max_deliveries}: allowed 0..1000000 (0 = no limit)"
            )
        if not 0 <= self.history_seconds <= MAX_HISTORY_SECONDS:
            raise InvalidArgumentError(
                f"CursorConfig.history_seconds={self.history_seconds}: allowed 0..{MAX_HISTORY_SECONDS} (0 = off)"
            )
        if not 1 <= self.full_marker_every <= 1_000_000:
            raise InvalidArgumentError(f"CursorConfig.full_marker_every={self.full_marker_every}: allowed 1..1000000")

    def pauses(self, ranges: int) -> bool:
        """PIP-299: whether a cursor holding ``ranges`` ack ranges pauses its sequential reads
        (pausing is on and they are more than a flush persists). O(1)."""
        limit = self.max_unacked_ranges_to_persist
        return self.dispatcher_pause_on_ack_state_persistent and limit > 0 and ranges > limit

    def to_obj(self) -> dict[str, Any]:
        """The settings as a plain dict (what the catalog persists; :meth:`from_obj` reads it).
        Every setting is an int or a bool: no copy of a value is made. O(settings)."""
        return {name: getattr(self, name) for name in _NAMES}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> CursorConfig:
        """The config a catalog entry holds (fields this version does not know are ignored).
        Configs are immutable, so equal entries share one object: O(1) for a repeated one."""
        try:
            return _from_items(tuple((k, type(v), v) for k, v in obj.items()))  # True and 1 differ here
        except TypeError:  # an unhashable value: damage, which the constructor names
            return _build(obj)


_NAMES = tuple(f.name for f in fields(CursorConfig))
"""the settings' names, in their order"""


def _build(obj: dict[str, Any]) -> CursorConfig:
    known = set(_NAMES)
    return CursorConfig(**{k: v for k, v in obj.items() if k in known})


@lru_cache(maxsize=256)
def _from_items(items: tuple[tuple[str, type, Any], ...]) -> CursorConfig:
    return _build({k: v for k, _, v in items})
