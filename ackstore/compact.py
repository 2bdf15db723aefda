"""Compaction: rewrite cursors' logs as their live records plus one full marker.

All the cursors given in ONE write transaction: a crash leaves the store as before or as
after. Each cursor plans its rewrite (``plan_rewrite``: its ledgers' records, encoded from
memory or copied from the old record, and a full marker; a small cursor's one state marker;
a swapped-out ledger whose record is a state marker is written as a ledger record of its
own), the plans are written through
:class:`~ackstore.storage.log.CursorLog`, everything below each new log is deleted, and the
cursors adopt the new logs once the transaction commits. With ``verify``, every rewritten
cursor is recovered from its new log inside the same transaction and compared with its
state in memory; a difference aborts it all (``check --fix`` uses this, so a repair never
keeps less than open recovered). A rewritten cursor's history points are dropped in the
same transaction (the markers they named are gone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lmdb

from .errors import StoreError
from .history import drop_points
from .stats import CompactStats
from .storage.log import CursorLog
from .storage.records import RECORD_MARKER, encode_ledger, record_type, state_ledger

if TYPE_CHECKING:
    from .cursor.core import CursorCore
    from .storage.env import Environment

__all__ = ["compact_cursors"]


def compact_cursors(storage: Environment, cursors: list[CursorCore], verify: bool = False) -> list[CompactStats]:
    """Rewrite ``cursors``' logs in one transaction; bytes and records per cursor. The
    store's flush lock and lock must be held (no flush may run meanwhile)."""
    plans = [(cur, cur.plan_rewrite()) for cur in cursors]

    def rewrite(txn: lmdb.Transaction) -> list[CompactStats]:
        out = []
        for cur, plan in plans:
            log = CursorLog(storage.log_db, cur.cursor_id)
            usage = log.usage(txn, -1)  # every record is below ``plan.start``
            after = 0
            for i, (ledger, _, src) in enumerate(plan.items):
                if isinstance(src, int) and src >= plan.start:  # (it would read what this rewrite put)
                    raise StoreError(
                        f"compaction: record {src} of ledger {ledger} is not below the rewrite's first "
                        f"sequence {plan.start}; nothing was changed"
                    )
                value = src if isinstance(src, bytes) else log.get(txn, src)
                if value is None:
                    raise StoreError(f"compaction: record {src!r} of ledger {ledger} is missing; run check --fix")
                if isinstance(src, int) and record_type(value) == RECORD_MARKER:  # a state marker holds it
                    value = encode_ledger(ledger, state_ledger(value, src, ledger)[0], cur.cursor_id)
                log.put(txn, plan.start + i, value)
                after += 16 + len(value)
            marker_seq = plan.start + len(plan.items)
            after += log.put_marker(txn, marker_seq, plan.marker, plan.slot)
            log.trim(txn, plan.start)  # the slots' older states too
            drop_points(txn, storage.history_db, cur.cursor_id)  # the states they named are gone
            if verify:
                diff = cur.rewrite_differs(log.recover(txn, None, "all"), marker_seq)
                if diff is not None:
                    raise StoreError(
                        f"the rewrite of cursor {cur.topic.name}/{cur.name} did not read back ({diff}); "
                        "nothing was changed"
                    )
            out.append(
                CompactStats(cur.topic.name, cur.name, usage.records, usage.record_bytes, len(plan.items) + 1, after)
            )
        return out

    stats = storage.write(rewrite)
    for cur, plan in plans:
        cur.adopt_rewrite(plan)
    return stats
