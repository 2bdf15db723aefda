"""Offline consistency check of a store, with an optional repair: ``check(store, fix=False)``.

Used by the ``ackstore check`` command, the Spark audit and the tests. For every cursor
it reads every record of its log (checksums), resolves markers back to front as open-time
recovery does (chains and references, every referenced record read), and checks the
recovered state's invariants: ranges within the ledger directory, above the mark-delete
position, range counts as the marker says, partial batches well formed.

``fix=True`` rolls each cursor with findings back to its newest intact marker, fits it to
the ledger directory, and rewrites its log as live records plus one full marker,
dropping every unreachable or damaged record: all fixed cursors in one transaction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import lmdb

from .errors import CorruptRecordError, CorruptStoreError, InvalidArgumentError, StoreError
from .history import decode_point
from .storage.log import CursorLog, fetch_record, resolve_marker
from .storage.records import decode_record
from .store import AckStore, Topic

__all__ = ["Finding", "check", "FINDING_KINDS"]

FINDING_KINDS = (
    "damaged-file",  # the file's size or B-tree structure is damaged (LMDB cannot read it safely)
    "corrupt-catalog",  # a topic, cursor or ledger-directory entry fails its checksum (not fixable in place)
    "corrupt-record",  # a record fails its checksum or does not decode
    "broken-marker",  # a marker whose chain or references are not intact (recovery skips it)
    "no-intact-marker",  # the cursor has records but no marker recovery can start from
    "unknown-ledger",  # the recovered state has acks in a ledger the directory does not hold
    "beyond-ledger-end",  # acks at or past a sealed ledger's entry count
    "at-or-below-mark-delete",  # acks the mark-delete position already covers
    "mark-delete-outside-directory",  # the mark-delete position names no ledger of the topic
    "bad-batch",  # a partial batch that is empty, full, or also acked whole
    "damaged-history",  # a kept history point that does not decode, or whose state cannot be restored
)
"""every kind a :class:`Finding` may be (the source says what each means)"""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in a cursor's log or state."""

    kind: str
    """what was found: one of ``FINDING_KINDS``"""
    topic: str
    """the topic concerned ("" for the store as a whole)"""
    cursor: str
    """the cursor concerned ("" for a topic or the store)"""
    message: str
    """what is wrong, and after a fix what was done"""
    seq: int = -1
    """the record concerned, -1 for none"""
    fixed: bool = False
    """True once ``check(fix=True)`` repaired it"""
    lost: int = 0
    """flushes whose state the fix gave up (the cursor rolled back past their markers: the acks
    they held are lost, those messages redelivered); on a cursor's first finding only"""

    def __str__(self) -> str:
        where = f"{self.topic}/{self.cursor}" + (f" record {self.seq}" if self.seq >= 0 else "")
        return f"{self.kind}: {where}: {self.message}" + (" [fixed]" if self.fixed else "")


def check(
    store: AckStore | str | os.PathLike[str],
    fix: bool = False,
    progress: Callable[[str, str], None] | None = None,
) -> list[Finding]:
    """Check every cursor of ``store`` (an open AckStore or a path); repair with ``fix``.

    Returns the findings (after a fix, each marked ``fixed``); an empty list means clean.
    A path is opened read-only (writable with ``fix``) and closed again. ``progress`` is
    called with ``(topic, cursor)`` after each cursor.
    """
    opened = not isinstance(store, AckStore)
    if opened:
        try:  # verify="all" walks the B-trees (our reader) before LMDB touches them
            s = AckStore.open(store, readonly=not fix, verify="all", create=False)  # type: ignore[arg-type]
        except CorruptStoreError as exc:
            return [_damaged_file(exc, fix)]
    else:
        s = store  # type: ignore[assignment]
        if fix and s.readonly:
            raise InvalidArgumentError("check(fix=True) needs a writable store; this one was opened readonly=True")
        try:
            s.storage.walk()
        except CorruptStoreError as exc:
            return [_damaged_file(exc, fix)]
    try:
        findings: list[Finding] = []
        broken: list[tuple[Topic, str]] = []
        damaged: list[str] = []
        seen: dict[int, tuple[str, str, int]] = {}  # cursor id -> topic, name, marker recovery uses
        tids: list[int] = []  # the topic ids in use (of the entries that check)
        catalog = s.storage.catalog
        for topic_name in s.storage.read(lambda txn: catalog.topic_names(txn, damaged)):
            try:
                topic = s.topic(topic_name)
            except CorruptStoreError as exc:
                findings.append(Finding("corrupt-catalog", topic_name, "", str(exc)))
                continue
            tids.append(topic.topic_id)
            names = [n for n, _ in s.storage.read(partial(catalog.cursor_entries, tid=topic.topic_id, damaged=damaged))]
            for name in names:
                try:
                    found = _check_cursor(s, topic, name, seen)
                except CorruptStoreError as exc:
                    findings.append(Finding("corrupt-catalog", topic_name, name, str(exc)))
                    continue
                except CorruptRecordError as exc:  # the log's tree itself (a key not a log key's)
                    why = "recovery cannot walk this cursor's log: `salvage` keeps what is intact"
                    findings.append(Finding("corrupt-record", topic_name, name, f"{exc} ({why})"))
                    continue
                if found:
                    broken.append((topic, name))
                findings.extend(found)
                if progress is not None:
                    progress(topic_name, name)
        findings.extend(Finding("corrupt-catalog", "", "", message) for message in damaged)
        findings.extend(_check_counters(s, tids, seen))
        if fix and broken:
            findings = _fix(s, broken, findings)
        return findings
    finally:
        if opened:
            s.close()


def _check_counters(s: AckStore, tids: list[int], seen: dict[int, tuple[str, str, int]]) -> list[Finding]:
    """The id counters in the meta catalog: each intact (checksum, size) and above every id
    in use, ``tids`` and ``seen``'s cursor ids (a damaged one would make the next ``topic()``
    or ``cursor()`` fail, or hand out an id some records already carry)."""
    catalog, out = s.storage.catalog, []
    in_use = {b"next_topic": max(tids, default=-1), b"next_cursor": max(seen, default=-1)}

    def read(txn: lmdb.Transaction) -> None:
        for key, highest in in_use.items():
            try:
                value = catalog.counter_entry(key, txn.get(key, db=catalog.meta))
            except CorruptStoreError as exc:
                out.append(Finding("corrupt-catalog", "", "", str(exc)))
                continue
            if value <= highest:
                out.append(
                    Finding(
                        "corrupt-catalog",
                        "",
                        "",
                        f"the meta key {key.decode()} is {value}, not above id {highest} in use",
                    )
                )

    s.storage.read(read)
    return out


def _check_cursor(s: AckStore, topic: Topic, name: str, seen: dict[int, tuple[str, str, int]]) -> list[Finding]:
    return s.storage.read(lambda txn: _check_in(txn, s, topic, name, seen))


def _check_in(
    txn: lmdb.Transaction, s: AckStore, topic: Topic, name: str, seen: dict[int, tuple[str, str, int]]
) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, message: str, seq: int = -1) -> None:
        out.append(Finding(kind, topic.name, name, message, seq))

    found = s.storage.catalog.cursor(txn, topic.topic_id, name)
    if found is None:
        return out
    cid = found[0]
    log = CursorLog(s.storage.log_db, cid)
    records = 0
    for seq, value in log.records(txn):
        records += 1
        try:
            decode_record(value)
        except CorruptRecordError as exc:
            add("corrupt-record", str(exc), seq)
    _check_history(txn, s, cid, add)
    state = log.recover(txn, budget=0, verify="all")
    seen[cid] = (topic.name, name, state.report.marker_seq)
    for reason in state.report.skipped_reasons:
        if reason.startswith("marker "):  # ("marker? ..." is a damaged record: a corrupt-record finding above)
            add("broken-marker", reason, int(reason.split()[1].rstrip(":")))
    resolved = state.resolved
    if resolved is None:
        if records:
            add("no-intact-marker", f"{records} records but no intact marker: recovery starts the cursor empty")
        return out
    d = topic.directory
    md_l, md_e = resolved.marker.mark_delete
    if len(d) and md_l not in d and not d.trimmed(md_l):
        add("mark-delete-outside-directory", f"mark-delete {md_l}:{md_e} names no ledger of the topic")
    for ledger, entry in sorted(resolved.index.items()):
        try:  # the base record plus the acks since it, as open reads them
            la = log.read_ledger(txn, ledger, entry)
        except CorruptRecordError:  # recovery (verify="all") would have skipped this marker; defensive
            continue
        entries = sorted(la.batches) + ([la.bitmap.min(), la.bitmap.max()] if la.bitmap else [])
        if not entries:
            continue
        if ledger not in d:
            if d.trimmed(ledger):  # trimmed since this state was flushed: an open drops it
                continue
            add("unknown-ledger", f"acks in ledger {ledger}, which the topic does not hold", entry.seq)
            continue
        count = d.count(ledger)
        if count >= 0 and max(entries) >= count:
            add("beyond-ledger-end", f"ack at {ledger}:{max(entries)} but the ledger has {count} entries", entry.seq)
        if ledger < md_l or (ledger == md_l and min(entries) <= md_e):
            add("at-or-below-mark-delete", f"ack at {ledger}:{min(entries)} is at or below {md_l}:{md_e}", entry.seq)
        for e, (size, mask) in la.batches.items():
            if not 0 < mask < (1 << size) - 1 or e in la.bitmap:
                add("bad-batch", f"partial batch at {ledger}:{e} is empty, full, or also acked whole", entry.seq)
    return out


def _damaged_file(exc: CorruptStoreError, fix: bool) -> Finding:
    """The finding of a file damaged past what check reads, with the next step that works
    (never "run 'ackstore check'": this is it)."""
    hint = exc.hint or ""
    if not hint or "ackstore check" in hint:
        hint = "'ackstore salvage STORE NEW' rebuilds what it still holds"
    unfixable = " (not fixed: an in-place repair could lose what the file still holds)" if fix else ""
    return Finding("damaged-file", "", "", f"{exc.detail}{unfixable}; {hint}")


def _check_history(txn: lmdb.Transaction, s: AckStore, cid: int, add: Callable[..., None]) -> None:
    """Every history point the cursor keeps decodes, and the state it names can be
    restored: its marker's chain resolves and every record it references is there."""
    db, log_db = s.storage.history_db, s.storage.log_db
    if db is None:
        return
    for seq, value in CursorLog(db, cid).records(txn):
        try:
            point = decode_point(cid, seq, value)
        except CorruptRecordError as exc:
            add("damaged-history", str(exc))
            continue
        try:
            resolved = resolve_marker(txn, log_db, cid, point.seq)
            for entry in resolved.index.values():
                if fetch_record(txn, log_db, cid, entry.seq) is None:
                    raise CorruptRecordError(f"record {entry.seq} it names is missing")
        except CorruptRecordError as exc:
            add("damaged-history", f"the state flushed at point {point.seq} cannot be restored: {exc}", point.seq)


def _fix(s: AckStore, broken: list[tuple[Topic, str]], findings: list[Finding]) -> list[Finding]:
    cursors = [topic.cursor(name) for topic, name in broken]
    try:
        stats = {(st.topic, st.cursor): st for st in s.compact(cursors, verify=True, drop_history=True)}
    except StoreError as exc:  # the rewrite did not read back: refuse, change nothing
        why = f"not fixed: an in-place repair would not keep what open recovers ({exc})"
        return [replace(f, message=f"{f.message} ({why})") for f in findings]
    fixed = []
    counted: set[tuple[str, str]] = set()
    for f in findings:
        st = stats.get((f.topic, f.cursor))
        if st is None:
            fixed.append(f)
            continue
        cur = next(c for c in cursors if c.topic.name == f.topic and c.name == f.cursor)
        rec = cur.stats().recovery
        lost = rec.markers_skipped if rec.marker_seq >= 0 else max(rec.markers_skipped, 1)
        how = (
            f"rolled back to marker {rec.marker_seq}" if rec.marker_seq >= 0 else "no intact marker: cursor reset"
        ) + f"; log rewritten {st.records_before} -> {st.records_after} records"
        if cur.config.history_seconds:
            how += "; its history was dropped (it starts again at the next flush)"
        if lost:
            how += f"; the acks of {lost} newer flush(es) are lost and their messages will be redelivered"
        first = (f.topic, f.cursor) not in counted
        counted.add((f.topic, f.cursor))
        fixed.append(replace(f, message=f"{f.message} ({how})", fixed=True, lost=lost if first else 0))
    return fixed
