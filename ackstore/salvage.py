"""Salvage: rebuild a clean store from whatever a damaged file still holds.

Like SQLite's ``.recover``, this never lets LMDB walk the damaged file: it reads the file
in Python (:mod:`ackstore.storage.lmdb_file`), and it returns only what a committed
transaction wrote. The rules, in order:

1. **The newest transaction's trees are the truth.** The file is walked from the newest
   meta page's roots. Every intact leaf page reached holds committed, current entries. A
   healthy store (a clean walk) therefore salvages to exactly its committed state, also
   when the writer was killed in the middle of a flush: that flush's pages lie past the
   committed file's last page or on pages its free list names, and are never read.
2. **Pages damage hides are found by elimination.** LMDB accounts for every page up to the
   meta's last one: it is reached from a root, or the free list names it. A page that is
   neither (and says it is a leaf) is a live page a damaged branch page no longer points
   to: its entries are read too. Pages on the free list hold stale copies (replaced
   configurations, trimmed ledgers, deleted cursors, garbage records) or the writes of a
   transaction that never committed: they are never read. When the free list itself is
   damaged nothing tells those apart, so only pages reached through the trees are used,
   and the report says so.
3. **Every cursor gets one flush's state**: recovery runs as at open over its records
   (the newest marker whose chain and every referenced record are intact), never a mix.
4. **"Complete" is proven, not assumed**: a cursor is complete when its state comes from
   its newest marker, no damaged record of it is newer, and no key range its records or
   its catalog entries may lie in was lost, or the tree holding them gave back as many
   entries as its own record counts. Otherwise the report names what could not be placed.
5. **Without a free list, every page is read.** A file cut short past its free list, or
   whose two meta pages are both damaged (no root, no free list), leaves nothing to tell
   live pages from stale copies: every page left is read, stale copies included, the
   newest state of each cursor found is kept, and no cursor is proven complete.

Entries of hidden pages are sorted by what they are: log records are self-describing
(type, format version, CRC32, and markers and ledger records name their cursor), so are
a format-3 catalog's topic and cursor entries; a ledger-directory value starts with its
type byte (5 or 6), which no record starts with.

History (``CursorConfig.history_seconds``) is not carried: each cursor gets its newest
state back, the report says how many kept states of its history the file held
(``CursorSalvage.history_lost``), and a cursor that keeps history starts a new one.

Limits: a format 1 or 2 catalog carries no checksums, so it is not salvaged (its cursors'
records are found, but not their names); a topic's directory is rebuilt from the entries
found (a middle ledger found only open is sealed after its highest salvaged ack).
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .config import CursorConfig
from .errors import AckStoreError, CorruptRecordError, CorruptStoreError, InvalidArgumentError, NotAStoreError
from .history import CLOCK_KEY, decode_point
from .position import Position
from .storage.catalog import RECORD_CURSOR, RECORD_TOPIC, Catalog, name_key
from .storage.fileio import temporary
from .storage.lmdb_file import MAIN_TREE, PageCounts, Survey, has_magic, leaf_nodes, survey, tree_name
from .storage.log import MemoryLog, RecoveredState, recover_cursor
from .storage.records import (
    RECORD_LEDGER,
    RECORD_MARKER,
    decode_record,
    log_bounds,
    log_entry,
    open_slot,
    record_type,
    slot_key,
    split_log_key,
    split_slot_key,
)
from .store import AckStore

__all__ = ["salvage", "SalvageReport", "CursorSalvage"]

_LOG, _TOPICS, _CURSORS, _LEDGERS, _META, _HISTORY = (
    tree_name(n) for n in (b"log", b"topics", b"cursors", b"ledgers", b"meta", b"history")
)
"""the trees of an ackstore file, by the name the walk gives them"""
_LEDGER_KEY = struct.Struct(">QQ")
Ranges = list[tuple[bytes | None, bytes | None]]
"""key ranges ``[low, high)`` of one tree (None: unbounded)"""


@dataclass(frozen=True, slots=True)
class CursorSalvage:
    """What one cursor got back."""

    topic: str
    """the topic's name"""
    cursor: str
    """the subscription's name"""
    marker_seq: int
    """the marker its state comes from; -1: none intact (the cursor starts empty)"""
    newest_marker_seen: int
    """the newest marker (or damaged record) of this cursor found; -1: none"""
    markers_skipped: int
    """newer markers passed over (damaged, or their records were)"""
    reasons: tuple[str, ...]
    """why each was skipped"""
    records_found: int
    """the cursor's records found in the file"""
    mark_delete: str
    """the mark-delete position salvaged, as LEDGER:ENTRY"""
    ranges: int
    """ack ranges salvaged above it"""
    problems: tuple[str, ...] = ()
    """what could not be applied to the new store"""
    doubts: tuple[str, ...] = ()
    """why completeness could not be proven (empty: it was); see the module docstring"""
    history_lost: int = 0
    """states its history kept that the file still holds points of and the new store does
    not carry: salvage brings back the newest state only, and a cursor that keeps history
    starts a new one at it (0: it kept none, or none was found)"""
    history_damaged: int = 0
    """of ``history_lost``, the points that were damaged in the file (they fail their checksum)"""

    @property
    def complete(self) -> bool:
        """True when the state is provably the cursor's newest committed one."""
        return (
            self.marker_seq >= 0
            and self.marker_seq >= self.newest_marker_seen
            and not self.problems
            and not self.doubts
        )


@dataclass(slots=True)
class SalvageReport:
    """The whole salvage: pages read, what was found, and every cursor's outcome."""

    source: str
    """the damaged store read"""
    dest: str
    """the new store written"""
    pages: int = 0
    """pages of the file read"""
    leaf_pages: int = 0
    """leaf pages among them"""
    unreadable_pages: int = 0
    """pages whose header or nodes could not be read"""
    records: int = 0
    """log records found"""
    topics: int = 0
    """topics rebuilt"""
    cursors: list[CursorSalvage] = field(default_factory=list)
    """every cursor's outcome"""
    orphan_cursor_ids: list[int] = field(default_factory=list)
    """cursors whose catalog entry was lost: their state is kept as cursor ``_salvaged`` of
    topic ``_salvaged_cursor_<id>`` (names and configuration unknown)"""
    placeholder_topics: dict[int, str] = field(default_factory=dict)
    """topic id -> the name given to a topic whose own entry was lost (its cursors kept)"""
    inferred_ledgers: dict[str, list[int]] = field(default_factory=dict)
    """per topic, ledgers the directory had lost and the cursors' states name (added back)"""
    sealed_ledgers: dict[str, dict[int, int]] = field(default_factory=dict)
    """per topic, ledgers found open below its last ledger (their seal was lost) and the
    entry count each was sealed at: one past what the cursors hold of it"""
    unbounded_topics: dict[str, str] = field(default_factory=dict)
    """topics whose open ledger's last confirmed entry could not be set again, and why"""
    damage: list[str] = field(default_factory=list)
    """what the walk of the file found damaged (empty: a healthy file)"""
    hidden_pages: int = 0
    """pages read because damage hid them from the trees (live pages found by elimination)"""
    incomplete_trees: list[str] = field(default_factory=list)
    """trees whose entries could not all be accounted for (some may be lost)"""
    cut_short: tuple[int, int] | None = None
    """``(pages left, pages the file had)`` when the file was cut short and every page left was
    read (rule 5); None otherwise"""
    meta_lost: bool = False
    """True when both meta pages were damaged and every page was read (rule 5)"""

    @property
    def complete(self) -> bool:
        """Every cursor complete, and nothing kept under a placeholder name."""
        return (
            all(c.complete for c in self.cursors)
            and not self.orphan_cursor_ids
            and not self.placeholder_topics
            and not self.incomplete_trees
        )


@dataclass(slots=True)
class _Found:
    logs: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    damaged_seqs: dict[int, list[int]] = field(default_factory=dict)  # cursor id -> seqs whose record fails
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (id, last ledger id)
    cursors: dict[tuple[int, str], tuple[int, dict[str, Any]]] = field(default_factory=dict)
    ledgers: dict[int, dict[int, int]] = field(default_factory=dict)  # topic id -> ledger -> count
    confirmed: dict[int, tuple[int, int]] = field(default_factory=dict)  # topic id -> (open ledger, confirmed)
    entries: dict[str, int] = field(default_factory=dict)  # tree -> entries found for it
    conflicts: list[str] = field(default_factory=list)  # a key found twice with different values
    history: dict[int, int] = field(default_factory=dict)  # cursor id -> history points found
    history_damaged: dict[int, int] = field(default_factory=dict)  # cursor id -> of them, damaged
    damaged_keys: dict[str, Ranges] = field(default_factory=dict)
    """tree -> where each key found damaged (out of order) lies: between its neighbours"""


def _pages_to_read(sv: Survey, report: SalvageReport, pages: int) -> tuple[set[int], set[int]]:
    """The intact leaf pages the trees reach, and the live pages damage hides (rule 2); of
    a file cut short (``pages`` is how many it holds) whose free list was lost, or whose meta
    pages are both damaged, every page left (rule 5)."""
    reached = set(sv.leaf_tree)
    if sv.meta is None:  # no root to walk from, no free list: every page, as for a file cut short
        report.meta_lost = True
        report.damage.append(
            "both meta pages are damaged, so every page was read, stale copies included; nothing that came back "
            "is proven complete"
        )
        return reached, set(range(2, pages))
    if sv.free is None and pages <= sv.meta.last_pgno:
        report.cut_short = (pages, sv.meta.last_pgno + 1)
        report.damage.append(
            f"the file is cut short: {pages} of its {sv.meta.last_pgno + 1:,} pages are left and its free list "
            "is lost, so every page left was read, stale copies included; nothing that came back is proven complete"
        )
        return reached, set(range(2, pages)) - reached
    if not sv.problems or sv.meta is None:
        return reached, set()
    if sv.free is None:
        report.damage.append(
            "the free list is damaged: pages the trees do not reach cannot be told from stale copies or "
            "writes that never committed, so none of them was read"
        )
        return reached, set()
    # pages no tree reaches and the free list does not name, and pages the walk reached but
    # found damaged (or below a damaged branch key): read what of them still parses
    hidden = set(range(2, sv.meta.last_pgno + 1)) - reached - sv.free
    return reached, hidden


def _scan(path: Path, sv: Survey, report: SalvageReport, progress: Callable[[int, int], None] | None) -> _Found:
    """Every entry of the pages salvage may read, sorted by what it is."""
    found = _Found()
    counts = PageCounts()
    codec = Catalog.codec(path)
    pages = path.stat().st_size // (sv.meta.page_size if sv.meta is not None else 4096)
    reached, hidden = _pages_to_read(sv, report, pages)
    report.hidden_pages = len(hidden)
    seen: dict[tuple[str, bytes], bytes] = {}

    def tree_of(pgno: int, key: bytes, value: bytes) -> str | None:
        return sv.leaf_tree.get(pgno) or sv.page_tree.get(pgno) or _tree_of(key, value)

    for pgno, key, value in _ordered(leaf_nodes(path, counts, progress, reached | hidden), hidden, found, tree_of):
        tree = tree_of(pgno, key, value)
        if tree is None:
            continue
        old = seen.setdefault((tree, key), value)
        if old is not value:  # two live pages hold one key: damage made a copy (or a stale one)
            if old != value:
                found.conflicts.append(f"{tree}: key {key[:24].hex()} has two different values")
                if tree in (_CURSORS, _TOPICS) or split_slot_key(key) is not None:
                    # one made again under its name has a higher id; a state slot is only
                    # ever written over with a newer state (a stale page holds an older one)
                    _sort(tree, key, value, found, report, codec, newer_only=True)
            continue
        if _sort(tree, key, value, found, report, codec):
            found.entries[tree] = found.entries.get(tree, 0) + 1
    report.pages, report.leaf_pages, report.unreadable_pages = counts.pages, counts.leaf_pages, counts.unreadable
    return found


def _ordered(
    nodes: Iterator[tuple[int, bytes, bytes]],
    suspect: set[int],
    found: _Found,
    tree_of: Callable[[int, bytes, bytes], str | None],
) -> Iterator[tuple[int, bytes, bytes]]:
    """The nodes, less those of a suspect page (damaged, or hidden by damage) whose key is out
    of order with its neighbours while they are in order with each other: a damaged key (a
    record under it would be filed at the wrong place). The range its true key lies in is
    kept as lost, so no cursor whose records may lie there is called complete."""
    page: list[tuple[int, bytes, bytes]] = []
    for node in itertools.chain(nodes, [(-1, b"", b"")]):
        if page and node[0] != page[0][0]:
            keys = [k for _, k, _ in page]
            for i, item in enumerate(page):
                if page[0][0] in suspect and _misplaced(keys, i):
                    tree = tree_of(*item)
                    if tree is not None:
                        around = (keys[i - 1] if i else None, keys[i + 1] if i + 1 < len(keys) else None)
                        found.damaged_keys.setdefault(tree, []).append(around)
                    continue
                yield item
            page = []
        if node[0] >= 0:
            page.append(node)


def _misplaced(keys: list[bytes], i: int) -> bool:
    """Key ``i`` breaks the page's order where its neighbours keep it."""
    before = keys[i - 1] if i else None
    after = keys[i + 1] if i + 1 < len(keys) else None
    if (before is None or before < keys[i]) and (after is None or keys[i] < after):
        return False
    if before is not None and after is not None:
        return before < after
    if before is None:  # the first key: out of order when the next two are in order
        return after is not None and (i + 2 >= len(keys) or after < keys[i + 2])
    return i < 2 or keys[i - 2] < before  # the last key, likewise with the two before it


def _tree_of(key: bytes, value: bytes) -> str | None:
    """The tree an entry of a hidden page belongs to, from its shape (None: not ours)."""
    if len(key) == 16 and value[:1] in (b"\x05", b"\x06"):
        return _LEDGERS  # a directory value starts with its type byte; no record does
    if split_slot_key(key) is not None:
        return _LOG  # a state slot (its value starts with the sequence, not a record)
    rtype = record_type(value)
    if rtype in (RECORD_LEDGER, RECORD_MARKER) and len(key) == 16:
        return _LOG
    if rtype == RECORD_TOPIC:
        return _TOPICS
    if rtype == RECORD_CURSOR:
        return _CURSORS
    return None  # meta keys and named-database records: the new store writes its own


def _sort(
    tree: str, key: bytes, value: bytes, found: _Found, report: SalvageReport, codec: Catalog, newer_only: bool = False
) -> bool:
    """File one entry of ``tree``; False for a value that fails its check (left out; a
    damaged log record is remembered: it may be a newer marker). ``newer_only``: a second
    value of a topic or cursor entry's key replaces the first only if its id is higher
    (ids only grow: one deleted and made again under its name has the higher), of a state
    slot's only if its sequence is."""
    try:
        if tree == _LEDGERS:
            count, confirmed = codec.ledger_state(key, value)
            tid, ledger = _LEDGER_KEY.unpack(key)
            if confirmed is not None:
                found.confirmed[tid] = max(found.confirmed.get(tid, (ledger, confirmed)), (ledger, confirmed))
            found.ledgers.setdefault(tid, {})[ledger] = count
        elif tree == _LOG:
            slotted = split_slot_key(key)
            if len(key) != 16 and slotted is None:
                return False
            cid, seq = split_log_key(key) if slotted is None else (slotted[0], -1)
            try:
                if slotted is None:
                    decode_record(value)
                else:
                    seq, record = open_slot(key, value)
                    decode_record(record)
            except CorruptRecordError:
                found.damaged_seqs.setdefault(cid, []).append(seq)  # -1: a slot's sequence is damaged
                return False
            logs = found.logs.setdefault(cid, {})
            if newer_only and key in logs:
                if log_entry(key, logs[key])[1] >= seq:
                    return True
                report.records -= 1  # replaced
            logs[key] = value
            report.records += 1
        elif tree == _TOPICS:
            name, tid, last, _ = codec.topic_entry(key, value)
            if not newer_only or tid > found.topics.get(name, (-1, -1))[0]:
                found.topics[name] = (tid, last)
        elif tree == _CURSORS:
            tid, name, cid, cfg = codec.cursor_entry(key, value)
            if not newer_only or cid > found.cursors.get((tid, name), (-1, {}))[0]:
                found.cursors[(tid, name)] = (cid, cfg)
        elif tree == _HISTORY:  # counted only: salvage does not carry history
            if len(key) != 16:
                return False
            if key == CLOCK_KEY:
                return True
            cid, seq = split_log_key(key)
            found.history[cid] = found.history.get(cid, 0) + 1
            try:
                decode_point(cid, seq, value)
            except CorruptRecordError:
                found.history_damaged[cid] = found.history_damaged.get(cid, 0) + 1
        else:
            return tree == _META
    except AckStoreError:
        return False
    return True


def _lost_ranges(sv: Survey, found: _Found, report: SalvageReport) -> dict[str, Ranges]:
    """Per tree, the key ranges that may have lost entries (rule 4). A tree that gave back as
    many entries as its record counts lost nothing but the keys found damaged (each lies
    between its neighbours); otherwise every range the walk found damaged is in doubt too;
    everything is, for a tree the main tree no longer names."""
    out: dict[str, Ranges] = {}
    for tree, low, high in sv.lost:
        out.setdefault(tree, []).append((low, high))
    if sv.meta is None:
        out[MAIN_TREE] = [(None, None)]
    if MAIN_TREE in out:  # the named databases' records may be wrong or missing
        for tree in (_LOG, _TOPICS, _CURSORS, _LEDGERS):
            out.setdefault(tree, []).append((None, None))
    for name, db in sv.named.items():
        tree = tree_name(name)
        damaged = found.damaged_keys.get(tree, [])
        if tree in out and MAIN_TREE not in out and found.entries.get(tree, 0) + len(damaged) == db.entries:
            del out[tree]  # every entry the tree holds was found (some on hidden pages)
    for tree, ranges in found.damaged_keys.items():
        out.setdefault(tree, []).extend(ranges)
    report.incomplete_trees = sorted(t for t in out if t != _META)
    return out


def _cut_doubt(report: SalvageReport) -> list[str]:
    if report.meta_lost:
        return ["both meta pages of the file are damaged: a newer state, or this cursor's deletion, may be lost"]
    if report.cut_short is None:
        return []
    left, had = report.cut_short
    return [
        f"the file was cut short ({left} of {had} pages left): a newer state, or this cursor's deletion, may be lost"
    ]


def _intersects(ranges: Ranges, lo: bytes, hi: bytes) -> bool:
    return any((low is None or low < hi) and (high is None or high > lo) for low, high in ranges)


def _doubts(lost: dict[str, Ranges], tid: int, name: str, cid: int) -> list[str]:
    """Why a cursor's completeness cannot be proven: a lost range its keys may lie in."""
    out = []
    lost_log = lost.get(_LOG, [])
    if _intersects(lost_log, *log_bounds(cid)) or any(
        _intersects(lost_log, key, key + b"\x00") for key in (slot_key(cid, 0), slot_key(cid, 1))
    ):
        out.append("damage lost part of the record log where this cursor's records lie")
    ckey = struct.pack(">Q", tid) + name_key(name)
    if _intersects(lost.get(_CURSORS, []), ckey, ckey + b"\x00"):
        out.append("damage lost part of the catalog where this cursor's entry lies")
    prefix = struct.pack(">Q", tid)
    if _intersects(lost.get(_LEDGERS, []), prefix, struct.pack(">Q", tid + 1)):
        out.append("damage lost part of this topic's ledger directory")
    if lost.get(_TOPICS):
        out.append("damage lost part of the topics' catalog")
    return out


def salvage(
    damaged: str | os.PathLike[str],
    new: str | os.PathLike[str],
    progress: Callable[[int, int], None] | None = None,
) -> SalvageReport:
    """Rebuild a clean store at ``new`` (which must not exist) from the damaged store or
    snapshot ``damaged``, which is only read. Returns what came back, cursor by cursor.

    ``new`` is built at ``new.salvaging`` beside it and renamed into place when done: a
    failure leaves nothing at ``new``; an existing ``new.salvaging`` is refused, not
    removed (it may be another salvage's)."""
    src, dest = Path(damaged), Path(new)
    data = src / "data.mdb" if src.is_dir() else src
    if not data.exists():
        raise NotAStoreError(f"no store at {src}: it has no data.mdb")
    if data.stat().st_size < 8192:
        if not has_magic(data):
            raise NotAStoreError(f"{data} is not a store: {data.stat().st_size:,} bytes that are not an LMDB data file")
        raise CorruptStoreError(
            f"{data} is {data.stat().st_size:,} bytes: too short to hold anything salvage could read",
            src,
            hint="a copy cut off or a disk that filled: restore the store from a copy if there is one, else start a "
            "new one",
        )
    if os.path.lexists(dest):
        raise InvalidArgumentError(f"salvage destination {dest} exists; allowed: a path that does not exist yet")
    tmp = dest.with_name(dest.name + ".salvaging")
    if os.path.lexists(tmp):
        raise InvalidArgumentError(
            f"{tmp} exists (a salvage running, or one that was killed); remove it and run salvage again"
        )
    report = SalvageReport(str(src), str(dest))
    sv = survey(data)
    report.damage = list(sv.problems)
    if sv.meta is None and not _looks_like_lmdb(data):
        raise NotAStoreError(f"{data} is not an LMDB data file (no valid meta page): nothing to salvage")
    found = _scan(data, sv, report, progress)
    if not found.logs and not found.topics and not found.cursors:
        dirs = sum(map(len, found.ledgers.values()))  # (a ledger directory alone: no cursor's state to bring back)
        only = f" but {dirs} ledger-directory entries of topics whose entries are lost" if dirs else ""
        raise CorruptStoreError(
            f"{src}: salvage found no cursor record or topic or cursor entry in {data}{only}",
            src,
            hint="nothing of ackstore's is left to bring back: restore the store from a copy ('ackstore copy' or "
            "'ackstore dump' made earlier) or start a new one",
        )
    lost = _lost_ranges(sv, found, report)
    states = _recover_all(found, report, lost)
    report.topics = len(found.topics)
    with temporary(tmp):
        try:
            _build(tmp, found, states, report)
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return report


def _looks_like_lmdb(data: Path) -> bool:
    """False for a file whose meta pages are both unreadable and that holds no leaf page
    (read up to the first leaf: a store whose first pages were lost too is still read)."""
    return any(True for _ in leaf_nodes(data))


def _recover_all(
    found: _Found, report: SalvageReport, lost: dict[str, Ranges]
) -> list[tuple[str, int, str, dict[str, Any], RecoveredState, int, int, list[str], tuple[int, int]]]:
    """Every cursor's state, recovered from its records as at open (rule 3)."""
    tids = {t for t, _ in found.topics.values()}
    for tid, _ in found.cursors:  # a cursor whose topic entry was lost: keep it under a placeholder name
        if tid not in tids:
            placeholder = f"_salvaged_topic_{tid}"
            found.topics[placeholder] = (tid, -1)
            tids.add(tid)
            report.placeholder_topics[tid] = placeholder
    states = []
    known_cids = set()
    conflicts = list(found.conflicts)
    for name, (tid, _) in sorted(found.topics.items()):
        for (ctid, cname), (cid, cfg) in sorted(found.cursors.items()):
            if ctid != tid:
                continue
            known_cids.add(cid)
            doubts = _doubts(lost, tid, cname, cid) + conflicts + _cut_doubt(report) + _slot_doubt(found, cid)
            states.append((name, tid, cname, cfg, *_recover_one(found, cid), doubts, _history_of(found, cid)))
    report.orphan_cursor_ids = sorted(set(found.logs) - known_cids)
    for cid in report.orphan_cursor_ids:  # records whose cursor entry was lost: keep their state anyway
        state, newest, records = _recover_one(found, cid)
        if state.resolved is None:
            continue
        placeholder, fake_tid = f"_salvaged_cursor_{cid}", -1 - cid
        found.topics[placeholder] = (fake_tid, -1)
        lost_entry = ["its catalog entry was lost", *_slot_doubt(found, cid)]
        states.append(
            (placeholder, fake_tid, "_salvaged", {}, state, newest, records, lost_entry, _history_of(found, cid))
        )
    return states


def _slot_doubt(found: _Found, cid: int) -> list[str]:
    """A state slot of the cursor whose sequence does not check may have held a newer state
    than any found (as a damaged record under a log key may have been a newer marker)."""
    if -1 in found.damaged_seqs.get(cid, ()):
        return ["a state slot of it is damaged (its sequence does not check): it may have held a newer state"]
    return []


def _history_of(found: _Found, cid: int) -> tuple[int, int]:
    """The history points of cursor ``cid`` found, and how many of them are damaged."""
    return found.history.get(cid, 0), found.history_damaged.get(cid, 0)


def _recover_one(found: _Found, cid: int) -> tuple[RecoveredState, int, int]:
    """A cursor's state, the newest marker (or damaged record) seen, and its records found."""
    items = found.logs.get(cid, {})
    state = recover_cursor(MemoryLog(items), None, cid, None, "all")
    entries = (log_entry(key, value) for key, value in items.items())
    markers = [seq for _, seq, record in entries if record_type(record) == RECORD_MARKER]
    newest = max([*markers, *found.damaged_seqs.get(cid, [])], default=-1)
    return state, newest, len(items)


def _build(tmp: Path, found: _Found, states: list[tuple[Any, ...]], report: SalvageReport) -> None:
    """The new store: directories, cursors, bounds."""
    with AckStore.open(tmp) as store:
        for name, (tid, last) in sorted(found.topics.items()):
            mine = [s for s in states if s[0] == name]
            inferred, sealed = _rebuild_topic(store, name, last, found.ledgers.get(tid, {}), mine)
            if inferred:
                report.inferred_ledgers[name] = inferred
            if sealed:
                report.sealed_ledgers[name] = sealed
        for name, _, cname, cfg, state, newest, records, doubts, history in states:
            problems = _rebuild_cursor(store, name, cname, cfg, state)
            report.cursors.append(_outcome(name, cname, state, newest, records, problems, doubts, history))
        for name, (tid, _) in sorted(found.topics.items()):
            topic = store.topic(name)
            ledger, confirmed = found.confirmed.get(tid, (-1, -1))
            if topic.ledgers()[-1:] == [(ledger, None)]:  # the open ledger's bound, once its cursors are back
                try:
                    topic.advance(ledger, confirmed)
                except AckStoreError as exc:
                    report.unbounded_topics[name] = str(exc)


def _rebuild_topic(
    store: AckStore, name: str, last: int, ledgers: dict[int, int], states: list[tuple[Any, ...]]
) -> tuple[list[int], dict[int, int]]:
    """The topic's directory from the entries found; a ledger a cursor's state needs but no
    entry names (its page was lost) is added too, sealed past everything the cursors hold
    of it unless it is the last, as is a ledger found open below the last (its seal was
    lost). Returns the ledger ids that had to be inferred, and the entry counts given to
    ledgers found open."""
    highest: dict[int, int] = {}  # ledger -> the highest entry any cursor's state names in it

    def note(ledger: int, entry: int) -> None:
        highest[ledger] = max(highest.get(ledger, -1), entry)

    for *_, state, _, _, _, _ in states:
        for ledger, la in state.ledgers.items():
            note(ledger, la.highest())
        if state.resolved is not None:
            m = state.resolved.marker
            note(*m.mark_delete)
    inferred = sorted(set(highest) - set(ledgers))
    if last >= 0 and last not in ledgers and last not in highest:
        inferred.append(last)
    ids = sorted(set(ledgers) | set(inferred))
    topic = store.topic(name)
    sealed: dict[int, int] = {}
    for i, ledger in enumerate(ids):
        count = ledgers.get(ledger, -1)
        topic.add_ledger(ledger)
        if count < 0 and i + 1 < len(ids):  # found only open (or not at all), yet not the last
            count = highest.get(ledger, -1) + 2  # one entry past what the cursors hold: M stays put
            if ledger in ledgers:
                sealed[ledger] = count
        if count >= 0:
            topic.close_ledger(ledger, count)
    return inferred, sealed


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
    counts = {
        Position(ledger, e): n for ledger, la in sorted(state.ledgers.items()) for e, n in sorted(la.counts.items())
    }
    if counts:
        attempt("delivery counts", partial(cur.restore_delivery_counts, counts))
    for key, value in sorted(marker.properties.items()):
        attempt(f"property {key!r}", partial(cur.set_property, key, value))
    return problems


def _outcome(
    topic: str,
    name: str,
    state: RecoveredState,
    newest: int,
    records: int,
    problems: list[str],
    doubts: list[str],
    history: tuple[int, int],
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
        doubts=tuple(doubts),
        history_lost=history[0],
        history_damaged=history[1],
    )
