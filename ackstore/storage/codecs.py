"""The decoders recovery spends its time in (and the encoders a flush runs: the marker
record, the Rice coder and the gap planes; the page scan of an open's structure walk), compiled where possible.

``ackstore._native`` (C, built by ``pip install`` where a compiler and the Python headers
exist) or, without it, :mod:`ackstore.storage.pure_codecs` and
:mod:`ackstore.storage.pure_acks`: the same functions, the same
bytes, the same errors. Set ``ACKSTORE_PURE_PYTHON=1`` before importing ackstore to use
the pure functions anyway. ``IMPLEMENTATION`` says which is in use.
"""

from __future__ import annotations

from ..fields import native
from . import pure_acks, pure_codecs

__all__ = [
    "IMPLEMENTATION",
    "NO_PREV",
    "acks_roaring",
    "ef_code",
    "gap_planes",
    "rice_code",
    "positions_by_ledger",
    "delta_fields",
    "fixed_marker",
    "state_marker",
    "state_fields",
    "cursor_fields",
    "cursor_entry",
    "scan_cursors",
    "ledger_fields",
    "ledger_span",
    "ledger_acks",
    "scan_page",
    "scan_directory",
    "point_value",
    "slot_head",
    "open_envelope",
    "native",
]

_impl = native or pure_codecs
IMPLEMENTATION = "native" if native is not None else "python"
NO_PREV = pure_codecs.NO_PREV
acks_roaring = (native or pure_acks).acks_roaring
ef_code = (native or pure_acks).ef_code
ledger_acks = (native or pure_acks).ledger_acks
rice_code = _impl.rice_code
gap_planes = _impl.gap_planes
positions_by_ledger = _impl.positions_by_ledger
delta_fields = _impl.delta_fields
fixed_marker = _impl.fixed_marker
state_marker = _impl.state_marker
state_fields = _impl.state_fields
cursor_fields = _impl.cursor_fields
cursor_entry = _impl.cursor_entry
scan_cursors = _impl.scan_cursors
ledger_fields = _impl.ledger_fields
ledger_span = _impl.ledger_span
scan_page = _impl.scan_page
scan_directory = _impl.scan_directory
point_value = _impl.point_value
slot_head = _impl.slot_head
open_envelope = _impl.open_envelope
