"""The dump format: JSON Lines, one object per line, streamed; and its reader for restore.

A dump starts with a header line, then for each topic its ledger directory (and, when the
topic tracks it, its open ledger's last confirmed entry) followed by each of its cursors
(configuration, positions, int and string properties) and that cursor's ranges, partial
batches and delivery counts (and, when asked, one ``history`` line per state its history
keeps, oldest first: time, mark-delete position, ranges, partial batches, delivery counts,
properties), and ends with an ``end`` line carrying the counts, so a
truncated dump is refused. Output is deterministic: the same state always dumps to the same bytes.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from pyroaring import BitMap

from ackstore import (
    AckStore,
    AckStoreError,
    CursorConfig,
    CursorSnapshot,
    Position,
    UnknownCursorError,
    UnknownTopicError,
)
from ackstore.cursor import Cursor
from ackstore.history import iso
from ackstore.storage.fileio import temporary

__all__ = ["DumpError", "dump_lines", "write_dump", "restore", "DUMP_FORMAT"]

DUMP_FORMAT = 5
"""2 added the topic's last confirmed entry and string property values; 3 dropped the read
position (it is not persisted: a restart reads from the mark-delete position + 1, and so does
a restored store); 1 and 2 still restore, their read position ignored; 4 added delivery
counts (``deliveries`` lines); 5 added the kept states of a cursor's history (``history``
lines, with ``dump --history``), which restore reads and counts but does not bring back"""


class DumpError(AckStoreError):
    """A dump that cannot be restored: names the line and what was wrong."""


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def dump_lines(
    store: AckStore,
    cursors: Iterable[tuple[str, str]] | None = None,
    progress: Callable[[], None] | None = None,
    history: bool = False,
) -> Iterator[dict[str, Any]]:
    """Every object of the dump, in order. ``cursors`` limits it to some ``(topic, cursor)``;
    ``progress`` is called after each cursor; ``history`` adds the kept states of each
    cursor that keeps history (``Cursor.history_snapshots``).

    Each cursor is read whole before its lines are made (:meth:`Cursor.snapshot`), so on a
    store a writer is flushing, each cursor is one flushed state. A cursor (or topic) the
    writer deletes during the dump is left out and named in the end line's ``skipped``
    (``[[topic, cursor], ...]``, only when there are some)."""
    wanted = None if cursors is None else set(cursors)
    counts = {"topics": 0, "cursors": 0, "ranges": 0, "batches": 0, "deliveries": 0}
    if history:
        counts["history"] = 0
    skipped: list[list[str]] = []
    yield {"type": "ackstore-dump", "format": DUMP_FORMAT}
    for topic_name in store.topics():
        try:
            topic = store.topic(topic_name)
            names = [n for n in topic.cursors() if wanted is None or (topic_name, n) in wanted]
        except UnknownTopicError:  # deleted since the list was read
            skipped.extend([topic_name, n] for t, n in sorted(wanted or ()) if t == topic_name)
            continue
        if wanted is not None and not names:
            continue
        counts["topics"] += 1
        yield {
            "type": "topic",
            "topic": topic_name,
            "ledgers": [list(x) for x in topic.ledgers()],
            "tracked": topic.directory.tracked,
            "confirmed": topic.directory.confirmed,
        }
        for name in names:
            try:
                cur = topic.cursor(name)
                snap = cur.snapshot()
            except (UnknownCursorError, UnknownTopicError):  # deleted by the writer meanwhile
                skipped.append([topic_name, name])
                if progress is not None:
                    progress()
                continue
            yield from _cursor_lines(topic_name, name, cur, snap, counts)
            if history:
                yield from _history_lines(topic_name, name, cur, counts)
            if progress is not None:
                progress()
    yield {"type": "end", **counts, **({"skipped": skipped} if skipped else {})}


def _cursor_lines(
    topic: str, name: str, cur: Cursor, snap: CursorSnapshot, counts: dict[str, int]
) -> Iterator[dict[str, Any]]:
    """A cursor's lines, from one snapshot of it."""
    counts["cursors"] += 1
    yield {
        "type": "cursor",
        "topic": topic,
        "cursor": name,
        "config": cur.config.to_obj(),
        "mark_delete": str(snap.mark_delete_position),
        "properties": snap.properties,
    }
    for ledger, ranges in snap.ranges:
        for first, last in ranges:
            counts["ranges"] += 1
            yield {
                "type": "range",
                "topic": topic,
                "cursor": name,
                "first": f"{ledger}:{first}",
                "last": f"{ledger}:{last}",
            }
    for pos, (size, indexes) in sorted(snap.partial_batches.items()):
        counts["batches"] += 1
        yield {
            "type": "batch",
            "topic": topic,
            "cursor": name,
            "position": str(pos),
            "batch_size": size,
            "indexes": sorted(indexes),
        }
    for pos, n in snap.delivery_counts.items():
        counts["deliveries"] += 1
        yield {"type": "deliveries", "topic": topic, "cursor": name, "position": str(pos), "count": n}


def _history_lines(topic: str, name: str, cur: Cursor, counts: dict[str, int]) -> Iterator[dict[str, Any]]:
    """A cursor's kept states, oldest first, a line each."""
    for point, snap in cur.history_snapshots():
        counts["history"] += 1
        yield {
            "type": "history",
            "topic": topic,
            "cursor": name,
            "time": iso(round(point.time * 1e6)),
            "mark_delete": str(snap.mark_delete_position),
            "ranges": [[ledger, first, last] for ledger, runs in snap.ranges for first, last in runs],
            "batches": [[str(pos), size, sorted(ix)] for pos, (size, ix) in snap.partial_batches.items()],
            "deliveries": [[str(pos), n] for pos, n in snap.delivery_counts.items()],
            "properties": snap.properties,
        }


def write_dump(objects: Iterable[dict[str, Any]], out: IO[str], fmt: str = "json") -> int:
    """Write the dump as JSON Lines (``json``, restorable) or CSV (``csv``, ranges and batches only)."""
    n = 0
    if fmt == "json":
        for obj in objects:
            out.write(_line(obj) + "\n")
            n += 1
        return n
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["kind", "topic", "cursor", "first", "last", "batch_size", "indexes"])
    for obj in objects:
        if obj["type"] == "range":
            writer.writerow(["range", obj["topic"], obj["cursor"], obj["first"], obj["last"], "", ""])
        elif obj["type"] == "batch":
            indexes = " ".join(map(str, obj["indexes"]))
            writer.writerow(["batch", obj["topic"], obj["cursor"], obj["position"], "", obj["batch_size"], indexes])
        else:
            continue
        n += 1
    return n


def _parse(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    number = 0
    it = iter(lines)
    while True:
        try:
            text = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise DumpError(f"dump line {number + 1} is not UTF-8 ({exc.reason}); is this an ackstore dump?") from None
        number += 1
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DumpError(f"dump line {number} is not JSON ({exc.msg}); is this an ackstore dump?") from None
        except RecursionError:
            raise DumpError(f"dump line {number} is nested too deeply; is this an ackstore dump?") from None
        if not isinstance(obj, dict) or "type" not in obj:
            raise DumpError(f"dump line {number} has no 'type'; is this an ackstore dump?")
        yield number, obj


def restore(dump: IO[str], dest: Path, sync: bool = True) -> dict[str, int]:
    """Build a new store at ``dest`` from a JSON Lines dump; it appears whole or not at all.

    The store is built at ``dest.restoring`` beside it and renamed into place at the end, so
    a failure leaves nothing behind (a kill -9 leaves ``dest.restoring``, which a later
    restore refuses to remove on its own). ``dest`` must not exist (or be an empty directory).
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DumpError(f"restore target {dest} exists and is not empty; allowed: a new path")
    tmp = dest.with_name(dest.name + ".restoring")
    if os.path.lexists(tmp):  # another restore's, or one that was killed: never removed unseen
        raise DumpError(f"{tmp} exists (a restore running, or one that was killed); remove it and restore again")
    counts = {"topics": 0, "cursors": 0, "ranges": 0, "batches": 0, "deliveries": 0, "history": 0}
    with temporary(tmp):
        try:
            with AckStore.open(tmp, sync=sync) as store:
                _apply(store, _parse(dump), counts)
            if dest.exists():
                dest.rmdir()
            tmp.rename(dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return counts


def _expect_cursor(cur: Cursor | None, obj: dict[str, Any], number: int) -> Cursor:
    """A range or batch line must follow the cursor line it belongs to; returns that cursor."""
    if cur is None or (obj.get("topic"), obj.get("cursor")) != (cur.topic.name, cur.name):
        raise DumpError(
            f"dump line {number}: a {obj.get('type')} of {obj.get('topic')!r}/{obj.get('cursor')!r} "
            "does not follow that cursor's line"
        )
    return cur


def _apply(store: AckStore, objects: Iterator[tuple[int, dict[str, Any]]], counts: dict[str, int]) -> None:
    header = next(objects, None)
    if header is None or header[1].get("type") != "ackstore-dump":
        raise DumpError("dump line 1 is not an ackstore dump header")
    if header[1].get("format") not in (1, 2, 3, 4, DUMP_FORMAT):
        raise DumpError(f"dump format {header[1].get('format')!r} is not one this ackstore reads (1..{DUMP_FORMAT})")
    cur: Cursor | None = None
    pending: dict[int, BitMap] = {}

    def settle() -> None:
        if cur is not None:
            for ledger, bm in sorted(pending.items()):
                cur.ack_entries(ledger, bm)
            pending.clear()

    ended = False
    for number, obj in objects:
        try:
            kind = obj["type"]
            if kind == "topic":
                settle()
                cur = None
                topic = store.topic(obj["topic"])
                topic.add_ledgers((ledger, count) for ledger, count in obj["ledgers"])  # one transaction
                if obj.get("tracked"):  # before its cursors: their acks are checked against it
                    last, count = obj["ledgers"][-1]
                    if count is None:  # open: its last confirmed entry (none yet: -1)
                        confirmed = obj.get("confirmed")
                        topic.advance(last, -1 if confirmed is None else confirmed)
                    else:  # sealed: its last entry, which only turns tracking on
                        topic.advance(last, count - 1)
                counts["topics"] += 1
            elif kind == "cursor":
                settle()
                topic = store.topic(obj["topic"])
                cur = topic.cursor(obj["cursor"], CursorConfig.from_obj(obj["config"]))
                cur.ack_cumulative(Position.parse(obj["mark_delete"]))
                for key, value in sorted(obj["properties"].items()):
                    cur.set_property(key, value)
                counts["cursors"] += 1
            elif kind == "range":
                _expect_cursor(cur, obj, number)
                first, last = Position.parse(obj["first"]), Position.parse(obj["last"])
                if first.ledger != last.ledger or first > last:
                    raise DumpError(f"dump line {number}: range {first}..{last} is not within one ledger")
                pending.setdefault(first.ledger, BitMap()).add_range(first.entry, last.entry + 1)
                counts["ranges"] += 1
            elif kind == "batch":
                cur = _expect_cursor(cur, obj, number)
                settle()
                cur.ack_batch_index(Position.parse(obj["position"]), obj["batch_size"], obj["indexes"])
                counts["batches"] += 1
            elif kind == "deliveries":
                cur = _expect_cursor(cur, obj, number)
                settle()
                cur.restore_delivery_counts({Position.parse(obj["position"]): obj["count"]})
                counts["deliveries"] += 1
            elif kind == "history":  # a kept state: counted, not brought back (the new store's history starts anew)
                cur = _expect_cursor(cur, obj, number)
                counts["history"] += 1
            elif kind == "end":
                settle()
                # format 1-3 has no deliveries, a dump without --history no history count
                found = {k: obj.get(k, 0 if k in ("deliveries", "history") else None) for k in counts}
                if found != counts:
                    raise DumpError(f"dump line {number}: the end line counts {found}, the dump held {counts}")
                ended = True
            else:
                raise DumpError(f"dump line {number}: unknown type {kind!r}")
        except DumpError:
            raise
        except (AckStoreError, LookupError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise DumpError(f"dump line {number} cannot be restored: {exc or type(exc).__name__}") from None
    if not ended:
        raise DumpError("the dump has no end line: it was cut short")
