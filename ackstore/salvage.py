"""Salvage: rebuild a clean store from whatever a damaged file still holds.

Like SQLite's ``.recover``, this does not trust the damaged B-tree. It reads the data file
page by page (:mod:`ackstore.storage.lmdb_file`'s layout), keeps every leaf node whose
bytes check (overflow values included), and sorts them by what they say they are: records
are self-describing (type, format version, CRC32; markers and ledger records name their
cursor), and so is a format-3 catalog (topic and cursor entries are checksummed records,
ledger-directory entries carry a CRC over their key). Stale copies left in freed pages are
found too; they are older versions of the same self-describing values.

Then, for every cursor, recovery runs as at open but over the salvaged records: the newest
marker whose delta chain and every referenced record are intact wins. The new store gets
exactly that flushed state: never an ack that was not flushed, never a mix of two flushes.
What could not be kept is reported per cursor (which marker it came from, the newest one
seen, what was skipped and why).

Limits: a format 1 or 2 catalog carries no checksums, so it is not salvaged (its cursors'
records are found, but not their names); a topic's directory is rebuilt from the entries
found (a middle ledger found only open is sealed after its highest salvaged ack).
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .config import CursorConfig
from .errors import AckStoreError, CorruptStoreError, InvalidArgumentError, NotAStoreError
from .position import Position
from .storage.catalog import LEDGER_ENTRY_BYTES, OPEN_LEDGER_ENTRY_BYTES, RECORD_CURSOR, RECORD_TOPIC, Catalog
from .storage.lmdb_file import PageCounts, leaf_nodes
from .storage.log import MemoryLog, RecoveredState, recover_cursor
from .storage.records import RECORD_LEDGER, RECORD_MARKER, decode_record, record_type, split_log_key
from .store import AckStore

__all__ = ["salvage", "SalvageReport", "CursorSalvage"]


@dataclass(frozen=True, slots=True)
class CursorSalvage:
    """What one cursor got back."""

    topic: str
    cursor: str
    marker_seq: int  # the marker its state comes from; -1: none intact (the cursor starts empty)
    newest_marker_seen: int  # the newest record of this cursor found in the file (-1: none)
    markers_skipped: int
    reasons: tuple[str, ...]
    records_found: int
    mark_delete: str
    ranges: int
    problems: tuple[str, ...] = ()  # what could not be applied to the new store

    @property
    def complete(self) -> bool:
        """True when no record newer than the marker the state came from survives (a flush
        whose every record was destroyed cannot be seen: ``check`` before damage can)."""
        return self.marker_seq >= 0 and self.marker_seq >= self.newest_marker_seen and not self.problems


@dataclass(slots=True)
class SalvageReport:
    """The whole salvage: pages read, what was found, and every cursor's outcome."""

    source: str
    dest: str
    pages: int = 0
    leaf_pages: int = 0
    unreadable_pages: int = 0
    records: int = 0
    topics: int = 0
    cursors: list[CursorSalvage] = field(default_factory=list)
    #: cursors whose catalog entry was lost: their state is kept as cursor ``_salvaged`` of
    #: topic ``_salvaged_cursor_<id>`` (names and configuration unknown)
    orphan_cursor_ids: list[int] = field(default_factory=list)
    #: topic id -> the name given to a topic whose own entry was lost (its cursors kept)
    placeholder_topics: dict[int, str] = field(default_factory=dict)
    #: per topic, ledgers the directory had lost and the cursors' states name (added back)
    inferred_ledgers: dict[str, list[int]] = field(default_factory=dict)
    #: topics whose open ledger's last confirmed entry could not be set again, and why
    unbounded_topics: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Found:
    logs: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (id, last ledger id)
    cursors: dict[tuple[int, str], tuple[int, dict[str, Any]]] = field(default_factory=dict)
    ledgers: dict[int, dict[int, int]] = field(default_factory=dict)  # topic id -> ledger -> count
    confirmed: dict[int, tuple[int, int]] = field(
        default_factory=dict
    )  # topic id -> open ledger's (id, last confirmed)


def _scan(path: Path, report: SalvageReport, progress: Callable[[int, int], None] | None) -> _Found:
    """Every leaf node of every page that checks, sorted by what it is."""
    found = _Found()
    counts = PageCounts()
    codec = Catalog.codec(path)
    for key, value in leaf_nodes(path, counts, progress):
        _sort(key, value, found, report, codec)
    report.pages, report.leaf_pages, report.unreadable_pages = counts.pages, counts.leaf_pages, counts.unreadable
    return found


def _sort(key: bytes, value: bytes, found: _Found, report: SalvageReport, codec: Catalog) -> None:
    """File one leaf node: a log record, or a catalog entry that checks (the catalog's own
    decoders: checksum, type, and the key it names)."""
    if len(key) == 16 and len(value) in (LEDGER_ENTRY_BYTES, OPEN_LEDGER_ENTRY_BYTES):
        try:
            count, confirmed = codec.ledger_state(key, value)
        except CorruptStoreError:
            return
        tid, ledger = struct.unpack(">QQ", key)
        if confirmed is not None:
            found.confirmed[tid] = max(found.confirmed.get(tid, (ledger, confirmed)), (ledger, confirmed))
        per = found.ledgers.setdefault(tid, {})
        old = per.get(ledger)
        per[ledger] = count if old is None or old < 0 else old  # a sealed version wins
        return
    rtype = record_type(value)
    try:
        if rtype in (RECORD_LEDGER, RECORD_MARKER) and len(key) == 16:
            decode_record(value)
            cid, _ = split_log_key(key)
            found.logs.setdefault(cid, {})[key] = value
            report.records += 1
        elif rtype == RECORD_TOPIC:
            name, tid, last, _ = codec.topic_entry(key, value)
            seen = found.topics.get(name)
            found.topics[name] = (tid, max(last, seen[1]) if seen else last)
        elif rtype == RECORD_CURSOR:
            tid, name, cid, cfg = codec.cursor_entry(key, value)
            found.cursors[(tid, name)] = (cid, cfg)
    except AckStoreError:
        return


def salvage(
    damaged: str | os.PathLike[str],
    new: str | os.PathLike[str],
    progress: Callable[[int, int], None] | None = None,
) -> SalvageReport:
    """Rebuild a clean store at ``new`` (which must not exist) from the damaged store or
    snapshot ``damaged``, which is only read. Returns what came back, cursor by cursor."""
    src, dest = Path(damaged), Path(new)
    data = src / "data.mdb" if src.is_dir() else src
    if not data.exists():
        raise NotAStoreError(f"no store at {src}: it has no data.mdb")
    if data.stat().st_size < 8192:
        raise NotAStoreError(f"{data} is {data.stat().st_size} bytes: too short to hold an LMDB file")
    if os.path.lexists(dest):
        raise InvalidArgumentError(f"salvage destination {dest} exists; allowed: a path that does not exist yet")
    report = SalvageReport(str(src), str(dest))
    found = _scan(data, report, progress)
    for tid, _ in found.cursors:  # a cursor whose topic entry was lost: keep it under a placeholder name
        if tid not in {t for t, _ in found.topics.values()}:
            placeholder = f"_salvaged_topic_{tid}"
            found.topics[placeholder] = (tid, -1)
            report.placeholder_topics[tid] = placeholder
    states: list[tuple[str, int, str, dict[str, Any], RecoveredState, int, int]] = []
    known_cids = set()
    for name, (tid, _) in sorted(found.topics.items()):
        for (ctid, cname), (cid, cfg) in sorted(found.cursors.items()):
            if ctid != tid:
                continue
            known_cids.add(cid)
            items = found.logs.get(cid, {})
            state = recover_cursor(MemoryLog(items), None, cid, None, "all")  # type: ignore[arg-type]
            newest = max((split_log_key(k)[1] for k in items), default=-1)  # any record: a newer flush existed
            states.append((name, tid, cname, cfg, state, newest, len(items)))
    report.orphan_cursor_ids = sorted(set(found.logs) - known_cids)
    for cid in report.orphan_cursor_ids:  # records whose cursor entry was lost: keep their state anyway
        items = found.logs[cid]
        state = recover_cursor(MemoryLog(items), None, cid, None, "all")  # type: ignore[arg-type]
        if state.resolved is None:
            continue
        placeholder, fake_tid = f"_salvaged_cursor_{cid}", -1 - cid
        found.topics[placeholder] = (fake_tid, -1)
        newest = max(split_log_key(k)[1] for k in items)
        states.append((placeholder, fake_tid, "_salvaged", {}, state, newest, len(items)))
    report.topics = len(found.topics)
    tmp = dest.with_name(dest.name + ".salvaging")
    if tmp.is_symlink() or tmp.is_file():
        tmp.unlink()  # a planted link is removed, never followed
    elif tmp.exists():
        shutil.rmtree(tmp)  # left by a salvage that was killed
    with AckStore.open(tmp) as store:
        for name, (tid, last) in sorted(found.topics.items()):
            mine = [s for s in states if s[0] == name]
            inferred = _rebuild_topic(store, name, last, found.ledgers.get(tid, {}), mine)
            if inferred:
                report.inferred_ledgers[name] = inferred
        for name, _, cname, cfg, state, newest, records in states:
            problems = _rebuild_cursor(store, name, cname, cfg, state)
            report.cursors.append(_outcome(name, cname, state, newest, records, problems))
        for name, (tid, _) in sorted(found.topics.items()):
            topic = store.topic(name)
            ledger, confirmed = found.confirmed.get(tid, (-1, -1))
            if topic.ledgers()[-1:] == [(ledger, None)]:  # the open ledger's bound, once its cursors are back
                try:
                    topic.advance(ledger, confirmed)
                except AckStoreError as exc:
                    report.unbounded_topics[name] = str(exc)
    os.replace(tmp, dest)
    return report


def _rebuild_topic(
    store: AckStore, name: str, last: int, ledgers: dict[int, int], states: list[tuple[Any, ...]]
) -> list[int]:
    """The topic's directory from the entries found; a ledger a cursor's state needs but no
    entry names (its page was lost) is added too, sealed past everything the cursors hold
    of it unless it is the last. Returns the ledger ids that had to be inferred."""
    highest: dict[int, int] = {}  # ledger -> the highest entry any cursor's state names in it

    def note(ledger: int, entry: int) -> None:
        highest[ledger] = max(highest.get(ledger, -1), entry)

    for *_, state, _, _ in states:
        for ledger, la in state.ledgers.items():
            note(ledger, max([*([la.bitmap.max()] if la.bitmap else []), *la.batches], default=-1))
        if state.resolved is not None:
            m = state.resolved.marker
            note(*m.mark_delete)
    inferred = sorted(set(highest) - set(ledgers))
    if last >= 0 and last not in ledgers and last not in highest:
        inferred.append(last)
    ids = sorted(set(ledgers) | set(inferred))
    topic = store.topic(name)
    for i, ledger in enumerate(ids):
        count = ledgers.get(ledger, -1)
        topic.add_ledger(ledger)
        if count < 0 and i + 1 < len(ids):  # found only open (or not at all), yet not the last
            count = highest.get(ledger, -1) + 2  # one entry past what the cursors hold: M stays put
        if count >= 0:
            topic.close_ledger(ledger, count)
    return inferred


def _rebuild_cursor(
    store: AckStore, topic_name: str, name: str, cfg: dict[str, Any], state: RecoveredState
) -> list[str]:
    problems: list[str] = []
    try:
        config = CursorConfig.from_obj(cfg)
    except AckStoreError as exc:
        problems.append(f"its configuration was refused ({exc}); defaults used")
        config = CursorConfig()
    cur = store.topic(topic_name).cursor(name, config)
    resolved = state.resolved
    if resolved is None:
        return problems
    marker = resolved.marker

    def attempt(what: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except AckStoreError as exc:
            problems.append(f"{what}: {exc}")

    attempt("mark-delete", partial(cur.ack_cumulative, Position(*marker.mark_delete)))
    for ledger, la in sorted(state.ledgers.items()):
        attempt(f"ledger {ledger}", partial(cur.ack_entries, ledger, la.bitmap))
        for entry, (size, mask) in sorted(la.batches.items()):
            indexes = [i for i in range(size) if mask >> i & 1]
            attempt(f"batch {ledger}:{entry}", partial(cur.ack_batch_index, Position(ledger, entry), size, indexes))
    for key, value in sorted(marker.properties.items()):
        attempt(f"property {key!r}", partial(cur.set_property, key, value))
    return problems


def _outcome(
    topic: str, name: str, state: RecoveredState, newest: int, records: int, problems: list[str]
) -> CursorSalvage:
    r = state.report
    md = state.resolved.marker.mark_delete if state.resolved is not None else None
    return CursorSalvage(
        topic=topic,
        cursor=name,
        marker_seq=r.marker_seq,
        newest_marker_seen=newest,
        markers_skipped=r.markers_skipped,
        reasons=r.skipped_reasons,
        records_found=records,
        mark_delete=f"{md[0]}:{md[1]}" if md is not None else "-",
        ranges=sum(la.runs for la in state.ledgers.values()),
        problems=tuple(problems),
    )
