"""Compaction: rewrite cursors' logs as their live records plus one full marker.

Which cursors it rewrites is :func:`rewritten_of`'s: not one that keeps history (its log is
its window) nor one over its PIP-299 cap (a rewrite writes what a flush would, and its
flushes wrote the lowest ranges up to the cap), each named in an INFO line.

All the cursors given in ONE write transaction: a crash leaves the store as before or as
after. A cursor in the small form writes its whole state as the group flush writes a
state it cannot put as a marker (:func:`_take_forms`: a state slot, or a base of its own
chain: a record of each ledger holding state and a full marker), and everything of its
log below that state goes; it stays in the form. Any other cursor plans its rewrite
(``plan_rewrite``: its ledgers' records, encoded from memory or copied from the old
record, and a full marker; a small cursor's one state marker; a swapped-out ledger whose
record is a state marker is written as a ledger record of its own), the plans are written
through :class:`~ackstore.storage.log.CursorLog`, everything below each new log is
deleted, and the cursors adopt the new logs once the transaction commits. A form the
state layout does not take now (over its budget, a field past the fixed layout) is
rewritten by its parts, as the flush hands it to them. With ``verify``, every rewritten
cursor is recovered from its new log inside the same transaction and compared with its
state in memory (:func:`_read_back`; a form's as a snapshot); a difference aborts it all
(``check --fix`` uses this, so a repair never keeps less than open recovered: a form over
its PIP-299 cap, whose flush writes the lowest ranges alone, is rewritten whole by its
parts). A rewritten cursor's history points are dropped in the same transaction (the
markers they named are gone).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lmdb

from .cursor import small
from .cursor.snapshot import form_snapshot, recovered_snapshot
from .errors import StoreError
from .history import drop_points
from .stats import CompactStats
from .storage.log import CursorLog
from .storage.records import RECORD_MARKER, encode_ledger, record_type, state_ledger

if TYPE_CHECKING:
    from .cursor import Cursor
    from .cursor.core import CursorCore
    from .cursor.plan import RewritePlan
    from .storage.env import Environment
    from .storage.log import RecoveredState

__all__ = ["compact_cursors", "rewritten_of"]

log = logging.getLogger("ackstore")


@dataclass(slots=True)
class _Forms:
    """What :func:`_take_forms` took: the forms written, as cursors, each one's first
    sequence (its log below it goes) and its ``base`` before (what :func:`_give_back` puts
    back), and their puts (``flush_small``'s, then ``flush_bases``')."""

    cursors: list[CursorCore]
    starts: list[int]
    bases: list[int]
    puts: list[Iterable[tuple[Any, Any]]]


def rewritten_of(cursors: list[Cursor], windows: Collection[int], drop_history: bool, verify: bool) -> list[Cursor]:
    """The cursors of ``cursors`` a compaction rewrites; an INFO line names those it leaves as
    they are: a cursor that keeps history (its id in ``windows``; its log is its window),
    unless ``drop_history``, and one holding more ranges than its PIP-299 cap (a rewrite
    writes what a flush would: the lowest ranges up to the cap, which its flushes wrote),
    unless ``verify`` (a repair keeps everything the open recovered). O(cursors)."""
    kept = [] if drop_history else [cur for cur in cursors if cur.cursor_id in windows]
    ids = {cur.cursor_id for cur in kept}
    capped = [] if verify else [cur for cur in cursors if cur.cursor_id not in ids and cur._core.over_cap()]
    for left, why in ((kept, "that keep history"), (capped, "over their max_unacked_ranges_to_persist")):
        if left:
            log.info(
                "ackstore: compaction leaves %d cursor(s) %s as they are (%s)",
                len(left),
                why,
                ", ".join(f"{cur.topic.name}/{cur.name}" for cur in left[:5]),
            )
    ids.update(cur.cursor_id for cur in capped)
    return [cur for cur in cursors if cur.cursor_id not in ids]


def compact_cursors(storage: Environment, cursors: list[CursorCore], verify: bool = False) -> list[CompactStats]:
    """Rewrite ``cursors``' logs in one transaction; bytes and records per cursor. The
    store's flush lock and lock must be held (no flush may run meanwhile)."""
    forms = _take_forms(
        [cur for cur in cursors if cur.small is not None and not cur.small.logged and not (verify and cur.over_cap())]
    )
    taken = set(forms.cursors)
    plans: list[tuple[CursorCore, RewritePlan]] = []

    def rewrite(txn: lmdb.Transaction) -> list[CompactStats]:
        out = _rewrite_forms(storage, txn, forms)
        if verify:
            for cur in forms.cursors:
                recovered = CursorLog(storage.log_db, cur.cursor_id).recover(txn, None, "all")
                _read_back(cur, recovered, cur.small.next_seq - 1)
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
                _read_back(cur, log.recover(txn, None, "all"), marker_seq)
            out.append(
                CompactStats(cur.topic.name, cur.name, usage.records, usage.record_bytes, len(plan.items) + 1, after)
            )
        return out

    try:
        plans += [(cur, cur.plan_rewrite()) for cur in cursors if cur not in taken]
        stats = storage.write(rewrite)
    except BaseException:
        _give_back(forms)
        raise
    for cur, plan in plans:
        cur.adopt_rewrite(plan)
    return stats


def _read_back(cur: CursorCore, recovered: RecoveredState, seq: int) -> None:
    """``verify``: raise StoreError, which aborts the compaction, unless ``recovered`` (the
    cursor's new log, recovered in the rewrite's transaction) is the cursor's state, read at
    sequence ``seq`` (its new newest state). A form's is compared as a snapshot: its M,
    properties, ranges, partial batches and delivery counts; the parts' (``rewrite_differs``)
    ledger by ledger."""
    if cur.small is None:
        diff = cur.rewrite_differs(recovered, seq)
    elif recovered.resolved is None or recovered.resolved.seq != seq:
        diff = f"recovery found marker {None if recovered.resolved is None else recovered.resolved.seq}, not {seq}"
    else:
        diff = None if recovered_snapshot(recovered) == form_snapshot(cur.small) else "the states differ"
    if diff is not None:
        raise StoreError(
            f"the rewrite of cursor {cur.topic.name}/{cur.name} did not read back ({diff}); nothing was changed"
        )


def _take_forms(cursors: list[CursorCore]) -> _Forms:
    """The whole state of each of ``cursors``' small forms, encoded and adopted by the group
    flush's own steps (``flush_small``, then ``flush_bases`` for a state over a slot's
    bound), as a state it cannot put as a marker of a chain (``base`` -2 for one in a
    chain: its newest state is not the chain's), so written whole: a slot's, or a base's. A form the state
    layout does not take now is left as it was and out of what this returns (its parts
    rewrite it). O(their states)."""
    if not cursors:
        return _Forms([], [], [], [])
    states = [cur.small for cur in cursors]
    starts, bases = [s.next_seq for s in states], [s.base for s in states]
    for s in states:
        if s.base >= 0:  # (a chain: written whole as a state of its parts' is, not as its marker)
            s.base = -2
        s.set_props(s.props)  # (changed: the flush writes it)
    version, _, *rest = small.flush_format()
    based: list[Any] = []  # (no room kept in a slot: the value a state gives, whatever the slots held)
    puts, _, over, _ = small.flush_small(states, version, 0, *rest, None, None, based)
    chunks = [puts]
    if based:
        chunks.append(small.flush_bases(based, version, rest[3], [], over)[0])
    declined = {id(s) for s in over}
    forms = _Forms([], [], [], chunks)
    for cur, s, start, base in zip(cursors, states, starts, bases, strict=True):
        if id(s) in declined:
            s.base = base  # (as it was: its parts take it)
        else:
            forms.cursors.append(cur)
            forms.starts.append(start)
            forms.bases.append(base)
    return forms


def _rewrite_forms(storage: Environment, txn: lmdb.Transaction, forms: _Forms) -> list[CompactStats]:
    """Write what :func:`_take_forms` took and delete each form's log below its new state
    (its older state slot too); their figures."""
    db = storage.log_db
    logs = [CursorLog(db, cur.cursor_id) for cur in forms.cursors]
    before = [log.usage(txn, -1) for log in logs]  # (every record of the old logs)
    c = txn.cursor(db=db)
    for puts in forms.puts:
        c.putmulti(puts)
    out = []
    for cur, log, usage, start in zip(forms.cursors, logs, before, forms.starts, strict=True):
        log.trim(txn, start)
        drop_points(txn, storage.history_db, cur.cursor_id)
        form = cur.small
        out.append(
            CompactStats(
                cur.topic.name, cur.name, usage.records, usage.record_bytes, form.next_seq - start, form.last_bytes
            )
        )
    return out


def _give_back(forms: _Forms) -> None:
    """The rewrite was not written: each form as it was before it, and changed (its next
    flush writes it)."""
    small.undo_small([cur.small for cur in forms.cursors])
    for cur, base in zip(forms.cursors, forms.bases, strict=True):
        cur.small.base = base
        cur._changed()
