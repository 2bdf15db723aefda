"""The compiled open of a cursor's form held against its Python twin at every open.

``ackstore.cursor.small.form_read`` reads a cursor whose log is only its state slots, or
whose newest marker names records of its line, straight into the small form in one compiled
call; where it declines, the Python functions it stands for (``storage.log.slot_values``
then ``cursor.small.small_opened``; ``storage.log.newest_marker`` then
``cursor.small.chain_opened``) read the cursor, as they do where the module is not built.
:func:`checked_form_read` wraps it for the suite: whenever the compiled read returns a form,
the Python read of the same cursor in the same transaction must return the same form (every
field either twin shows) and the same report. A lazy open's form whose record waits for its
first use stays so for the test that opened it: an eager read is checked in its place, and
the lazy form must hold what that one holds but the runs."""

from __future__ import annotations

from typing import Any

from ackstore.cursor import small
from ackstore.storage.log import newest_marker, slot_values

__all__ = ["checked_form_read", "form_fields"]

_METHODS = ("runs", "counts", "batches", "records", "held", "charge", "top", "range_count")
_FIELDS = (
    "cursor_id", "md_l", "md_e", "rp_e", "rp_i", "spans", "limit", "limit_version", "n", "nc", "nb", "cap",
    "next_seq", "slot", "slots", "dirty", "persisted", "props", "logged", "every", "base", "budget", "marker",
    "record", "recs", "stale", "deltas", "chain_bytes", "base_bytes", "untrimmed", "passed", "fresh", "tail",
    "named", "cnamed", "flushes", "flush_bytes", "last_bytes", "redeliveries", "ended", "low", "dropped",
)  # fmt: skip


def form_fields(s: Any) -> dict[str, Any]:
    """Every field and reading of a small form (either twin's), by name."""
    return {**{f: getattr(s, f) for f in _FIELDS}, **{m: getattr(s, m)() for m in _METHODS}}


def checked_form_read(
    txn: Any,
    db: Any,
    cursor_id: int,
    config: Any,
    directory: Any,
    probe: Any = None,
    lines: Any = None,
    lazy: bool = False,
) -> Any:
    """:func:`ackstore.cursor.small.form_read`, its form checked against the Python read's.
    A lazy open's form whose record waits for its first use is left so (the suite uses it as
    a store does): an eager read of the same cursor is checked instead, and the lazy one holds
    what that holds but the runs."""
    got = small.form_read(txn, db, cursor_id, config, directory, probe, lines, lazy)
    if got is None:
        return None
    whole = got
    if got.small.unread:
        whole = small.form_read(txn, db, cursor_id, config, directory)
        assert whole is not None, f"cursor {cursor_id}: a lazy open read a form the eager one declines"
        unread = [{f: getattr(s.small, f) for f in _FIELDS if f != "low"} for s in (got, whole)]  # (low: read later)
        assert unread[0] == unread[1] and got[1:4] == whole[1:4] and got.small.unread, cursor_id
    values = slot_values(txn, db, cursor_id)
    if values is not None:
        want = small.small_opened(cursor_id, values, config, directory)
        assert want is not None, f"cursor {cursor_id}: the compiled open read a form small_opened declines"
    else:
        newest = newest_marker(txn, db, cursor_id)
        assert newest is not None, f"cursor {cursor_id}: the compiled open read a chain newest_marker does not"
        want = small.chain_opened(txn, db, cursor_id, newest, config, directory)
        assert want is not None, f"cursor {cursor_id}: the compiled open read a form chain_opened declines"
    assert form_fields(whole.small) == form_fields(want.small), cursor_id
    assert whole[1:4] == want[1:4], (whole[1:4], want[1:4])
    return got
