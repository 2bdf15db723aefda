"""Where a ledger's newest record is: the marker index's entry, a type of its own so that
the field declarations (:mod:`ackstore.fields`) name it without importing the codecs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from pyroaring import FrozenBitMap

__all__ = ["IndexEntry", "entry_of"]


class IndexEntry(NamedTuple):
    """Where a ledger's newest record (its base) is, how many ranges the ledger holds, and
    (format 5) the entries acked since that record was written: the ledger is the base's
    acks plus ``adds``. A flush that changed a ledger by a few acks writes only them, here,
    in the marker; when they grow past a fraction of the ledger it writes a new base.
    (A named tuple: a flush makes two per changed ledger, and a tuple is made faster.)"""

    seq: int
    runs: int
    adds: FrozenBitMap | None = None
    counts: dict[int, int] | None = None
    """(format 7) delivery counts set since that record, their values now"""


entry_of: Callable[[tuple[int, int, FrozenBitMap | None, dict[int, int] | None]], IndexEntry] = partial(
    tuple.__new__, IndexEntry
)
"""``entry_of((seq, runs, adds, counts))``: an IndexEntry made from its four fields without the
namedtuple's Python-level ``__new__`` (~60 % of its cost; a flush makes one per changed
ledger, an open one per ledger of every state marker it decodes)"""
