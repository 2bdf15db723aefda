"""The damage campaign: bit flips, zeroed pages, damaged node and page headers of live
pages, and files cut at a page boundary, in copies of a small store; then ``open``,
``ackstore check`` and ``salvage`` on each, counted by outcome.

A short seeded slice runs in ``make test``; ``make stress`` (``--long``) runs 500 trials.
``python -m tests.test_damage_campaign 500`` prints the same table by itself.

What must hold in every trial:
- ``AckStore.open(readonly=True)``, lazy (the default) or ``load="budget"`` (drawn per trial),
  and reading every cursor's whole state,
  raises nothing but ``AckStoreError`` (no raw error) and is never killed by a signal (LMDB
  aborting on a damaged page);
- open never gives a state silently: what it gives is the newest flushed state, or an
  older flushed state with the fallback reported (``stats().recovery``); never a state no
  flush wrote, never a deleted cursor;
- ``ackstore check`` ends with exit 0 or 1 and no traceback, never killed by a signal, and
  never calls clean a store whose damage lies in a page the trees reach (or cuts one off);
- ``salvage`` gives every cursor a state it had after some flush (or nothing, when no intact
  marker is left): never an ack that was not flushed, never a deleted cursor; and it says
  "complete" only for the newest state.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position
from ackstore.errors import CorruptStoreError
from ackstore.salvage import salvage

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

T = "persistent://t/ns/campaign"
ROOT = Path(__file__).parent.parent

CHILD = r"""
import json, sys
from ackstore import AckStore, AckStoreError
out = {}
try:
    with AckStore.open(sys.argv[1], readonly=True, load=sys.argv[3]) as s:
        t = s.topic(sys.argv[2])
        out["state"] = {}
        out["ledgers"] = [list(x) for x in t.ledgers()]
        for c in t.cursors():
            cur = t.cursor(c)
            out["state"][c] = [str(cur.mark_delete_position), [[str(a), str(b)] for a, b in cur.ack_ranges()],
                               cur.stats().recovery.markers_skipped, cur.config.full_marker_every]
    out["open"] = "opened"
except AckStoreError as exc:
    out["open"] = "typed:" + type(exc).__name__
except Exception as exc:
    out["open"] = "RAW:" + type(exc).__name__ + ":" + str(exc)[:100]
print(json.dumps(out))
"""


def build(path: Path) -> list[dict[str, list[object]]]:
    """3 cursors x 25 flushes; the state of each cursor after every flush. Along the way a
    cursor's configuration changes, a fourth cursor is deleted and the first ledger is
    trimmed, so the file's free pages hold stale copies of all three."""
    history = []
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 100_000)
        topic.add_ledger(2)
        topic.close_ledger(2, 1_000)
        topic.add_ledger(3)
        curs = [topic.cursor(f"c{i}", CursorConfig(full_marker_every=8)) for i in range(3)]
        gone = topic.cursor("gone")
        for f in range(25):
            for i, cur in enumerate(curs):
                if f < 22:
                    cur.ack([Position(1, e) for e in range(f * 600 + i, f * 600 + 500, 3)])
                cur.ack([Position(2, f * 3 + i), Position(3, f * 3 + i)])
            if f < 20:
                gone.ack([Position(1, f), Position(3, f)])
            if f == 12:
                curs[0].update_config(full_marker_every=5)
            if f == 20:
                topic.delete_cursor("gone")
            if f == 22:
                topic.trim_ledgers(2)
            store.flush()
            history.append(
                {
                    c.name: [str(c.mark_delete_position), [[str(a), str(b)] for a, b in c.ack_ranges()]]
                    for c in (*curs, *([gone] if f < 20 else []))  # the deleted one while it lived
                }
            )
    return history


def fitted(state: list[object]) -> list[object]:
    """A flushed state as the directory after the trim shows it: an older flush's acks in the
    trimmed ledger 1 vanish and its mark-delete moves to ledger 2 (what a fallback gives)."""
    md, ranges = state
    kept = [r for r in ranges if not str(r[0]).startswith("1:")]  # type: ignore[union-attr]
    if str(md).startswith("1:"):
        md = "2:-1"
        if kept and kept[0][0] == "2:0":  # M moves over the acks that now follow it
            md = kept.pop(0)[1]
    return [md, kept]


def flushed(state: list[object], history: list[dict[str, list[object]]], cursor: str) -> bool:
    """``state`` is one the cursor had after some flush (as the current directory shows it)."""
    return any(cursor in h and (state == h[cursor] or state == fitted(h[cursor])) for h in history)


#: a node header's changes: key size, flags, data size (as a disk or a bad write makes them)
NODE_CHANGES = [
    *[("ksize", k) for k in (17, 18, 20, 24, 32, 15, 8, 0, 272)],
    *[("flags", f) for f in (1, 2, 4)],
    *[("dsize", d) for d in (-1, 1, 0, 65535)],
]


def damage(src: Path, dst: Path, rng: random.Random) -> tuple[str, bool]:
    """Damage a copy of ``src`` at ``dst``: a zeroed page, a bit flip, a node header or a
    page header of a live page, or the file cut at a page boundary. Returns what was done,
    and whether ``check`` must find it (damage to what the trees reach)."""
    from ackstore.storage.lmdb_file import survey

    shutil.copytree(src, dst)
    raw = bytearray((dst / "data.mdb").read_bytes())
    sv = survey(src)
    assert sv.meta is not None
    live = sorted(sv.page_tree)
    kind = rng.random()
    must = False
    if kind < 0.25:
        pg = rng.randrange(2, len(raw) // 4096)
        raw[pg * 4096 : (pg + 1) * 4096] = bytes(4096)
        how = f"zeroed page {pg}"
    elif kind < 0.45:
        off = rng.randrange(8192, len(raw))
        raw[off] ^= 1 << rng.randrange(8)
        how = f"bit flip at {off}"
    elif kind < 0.75:
        log = [p for p, t in sv.leaf_tree.items() if t == "database 'log'"]
        pg = rng.choice(log if rng.random() < 0.7 else sorted(sv.leaf_tree))
        off = pg * 4096
        (lower,) = struct.unpack_from("<H", raw, off + 12)
        i = rng.randrange((lower - 16) // 2)
        (ptr,) = struct.unpack_from("<H", raw, off + 16 + 2 * i)
        lo, hi, flags, ksize = struct.unpack_from("<HHHH", raw, off + ptr)
        field, value = rng.choice(NODE_CHANGES)
        if field == "ksize":
            ksize = value
        elif field == "flags":
            flags |= value
        else:
            dsize = (lo | hi << 16) + value if value in (-1, 1) else value
            lo, hi = dsize & 0xFFFF, dsize >> 16 & 0xFFFF
        before = bytes(raw[off + ptr : off + ptr + 8])
        struct.pack_into("<HHHH", raw, off + ptr, lo, hi, flags, ksize)
        how = f"node {i} of page {pg} ({sv.leaf_tree[pg]}): {field} {value:+d}"
        # +1 may round to the same even extent (the record fails its own check instead); a
        # flag the node had already changes nothing
        must = (field != "dsize" or value != 1) and before != bytes(raw[off + ptr : off + ptr + 8])
    elif kind < 0.85:
        pg = rng.choice(live)
        field, at, value = rng.choice(
            [
                ("pgno", 0, pg + 1),
                ("flags", 10, 0x01),
                ("flags", 10, 0x02),
                ("flags", 10, 0x08),
                ("lower", 12, 2),
                ("upper", 14, 2),
            ]
        )
        if field in ("lower", "upper"):
            (old,) = struct.unpack_from("<H", raw, pg * 4096 + at)
            value = old + rng.choice([-value, value])
        elif field == "flags":
            (old,) = struct.unpack_from("<H", raw, pg * 4096 + at)
            value ^= old
        struct.pack_into("<Q" if field == "pgno" else "<H", raw, pg * 4096 + at, value)
        how, must = f"page {pg} header {field} -> {value}", True
    else:
        keep = rng.randrange(3, len(raw) // 4096)
        raw = raw[: keep * 4096]
        how, must = f"cut at page {keep} of {len(live) and sv.meta.last_pgno + 1}", any(p >= keep for p in live)
    (dst / "data.mdb").write_bytes(bytes(raw))
    return how, must


def holds_records(data: Path) -> bool:
    """Whether any page of the LMDB file ``data`` is a leaf holding a node that is not a
    named database (the main tree's nodes, flag ``F_SUBDATA``) nor a ledger-directory entry
    (which salvage reads, but which holds no cursor's state) nor, by its layout, a free-list
    node (an 8-byte transaction id, a count and that many page numbers): a record of ackstore's,
    read here by LMDB's page layout alone, not by salvage's reader. A value on overflow
    pages (flag ``F_BIGDATA``: a large state marker) counts only when the file still holds
    them, and a page the intact free list names not at all (a stale copy, which salvage
    does not read)."""
    from ackstore.storage.catalog import _LEDGER_TYPE, _OPEN_LEDGER_TYPE
    from ackstore.storage.lmdb_file import survey
    from ackstore.storage.pure_codecs import directory_entry

    types = _LEDGER_TYPE, _OPEN_LEDGER_TYPE  # (a sealed ledger's directory entry, an open one's)
    raw = data.read_bytes()
    sv = survey(data.parent)
    freed = sv.free or set()
    for pg in range(2, len(raw) // 4096):
        if pg in freed or sv.leaf_tree.get(pg) == "free list":  # (the free list's own nodes are not records)
            continue
        off = pg * 4096
        flags, lower = struct.unpack_from("<HH", raw, off + 10)
        if not flags & 0x02 or lower < 16:  # not a leaf page
            continue
        for i in range((lower - 16) // 2):
            (ptr,) = struct.unpack_from("<H", raw, off + 16 + 2 * i)
            if ptr + 8 > 4096:
                continue
            lo, hi, node_flags, ksize = struct.unpack_from("<HHHH", raw, off + ptr)
            if node_flags & 0x02:
                continue
            value = raw[off + ptr + 8 + ksize : off + ptr + 8 + ksize + (lo | hi << 16)]
            if not node_flags & 0x01 and directory_entry(raw[off + ptr + 8 : off + ptr + 8 + ksize], value, *types):
                continue  # (a ledger-directory entry, its checksum checked: no cursor's state)
            if ksize == 8 and len(value) >= 8 and len(value) == 8 * (1 + int.from_bytes(value[:8], "little")):
                continue  # (a free-list node by its layout, a transaction id's freed pages, on a page the cut orphaned)
            if not node_flags & 0x01:
                return True
            if ptr + 16 + ksize <= 4096:  # the overflow pages' number after the key, and the value's size
                (opg,) = struct.unpack_from("<Q", raw, off + ptr + 8 + ksize)
                if opg * 4096 + 16 + (lo | hi << 16) <= len(raw):
                    return True
    return False


def trial(base: Path, history: list[dict[str, list[object]]], work: Path, rng: random.Random) -> Counter[str]:
    """One damaged copy through open, check and salvage; the outcomes counted."""
    out: Counter[str] = Counter()
    damaged = work / "damaged"
    how, must_find = damage(base, damaged, rng)
    load = rng.choice(["lazy", "budget"])
    how += f", load={load!r}"
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(damaged), T, load], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    opened = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {"open": f"signal {-r.returncode}"}
    kind = opened["open"]
    newest = history[-1]
    if kind == "opened":
        for c, (md, ranges, skipped, every) in opened["state"].items():
            if c not in newest:
                out[f"OPEN GAVE A CURSOR THAT IS NOT THERE ({how}): {c}"] += 1
            elif not flushed([md, ranges], history, c):
                out[f"OPEN GAVE A STATE NO FLUSH WROTE ({how}): {c}"] += 1
            elif [md, ranges] != newest[c] and not skipped:
                out[f"OPEN ROLLED BACK SILENTLY ({how}): {c}"] += 1
            elif [md, ranges] != newest[c]:
                out["open: an older flushed state, reported"] += 1
            if every != (5 if c == "c0" else 8):
                out[f"OPEN GAVE AN OLD CONFIGURATION ({how}): {c}"] += 1
        if set(newest) - set(opened["state"]):
            out[f"OPEN LOST A CURSOR SILENTLY ({how})"] += 1
        if opened["ledgers"] != [[2, 1000], [3, None]]:
            out[f"OPEN GAVE ANOTHER DIRECTORY ({how}): {opened['ledgers']}"] += 1
    elif kind.startswith("signal"):
        out[f"OPEN KILLED BY A {kind.upper()} ({how})"] += 1
    out[f"open: {kind.split(':')[0] if kind.startswith(('typed', 'RAW')) else kind}"] += 1
    if kind.startswith("RAW"):
        out[f"RAW {kind} ({how})"] += 1
    c = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "check", str(damaged)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    if c.returncode not in (0, 1) or "Traceback" in c.stderr or "Traceback" in c.stdout:
        last = (c.stderr.strip().splitlines() or [""])[-1][:160]
        out[f"CHECK CRASHED ({how}): rc {c.returncode}: {last}"] += 1
    else:
        out[f"check: exit {c.returncode}"] += 1
        if c.returncode == 0 and must_find:
            out[f"CHECK CALLED A DAMAGED STORE CLEAN ({how})"] += 1
    try:
        report = salvage(damaged, work / "salvaged")
    except CorruptStoreError as exc:
        if how.startswith("cut") and not holds_records(damaged / "data.mdb"):  # what it says: nothing left
            out["salvage: a file cut before every record: nothing to bring back, it said"] += 1
        else:
            out[f"SALVAGE FAILED ({how}): {type(exc).__name__}: {exc}"] += 1
        return out
    except Exception as exc:  # counted: the campaign says what happened
        out[f"SALVAGE FAILED ({how}): {type(exc).__name__}: {exc}"] += 1
        return out
    missing = set(newest) - {cs.cursor for cs in report.cursors}
    if report.cut_short and missing:  # their pages are gone; the report says the file was cut short
        out["salvage: a file cut short: cursors whose pages are gone left out, the cut said"] += len(missing)
    elif len(missing) > len(report.orphan_cursor_ids):
        out[f"SALVAGE LOST A CURSOR SILENTLY ({how}): {sorted(missing)}"] += 1
    out["salvage: topic entry lost, cursors kept under a placeholder"] += len(report.placeholder_topics)
    with AckStore.open(work / "salvaged", readonly=True) as store:
        for cs in report.cursors:
            cur = store.topic(cs.topic).cursor(cs.cursor)
            state = [str(cur.mark_delete_position), [[str(a), str(b)] for a, b in cur.ack_ranges()]]
            if cs.cursor == "_salvaged":  # its entry was lost: which cursor it was is unknown
                was = any(flushed(state, history, c) for c in (*history[-1], *(["gone"] if report.cut_short else [])))
                out[
                    "salvage: cursor entry lost, a flushed state kept under a placeholder"
                    if was
                    else f"SALVAGE GAVE NO FLUSHED STATE ({how}): orphan {cs.topic}"
                ] += 1
            elif cs.marker_seq < 0:
                out["salvage: cursor without an intact marker"] += state[1] == []
            elif cs.cursor not in newest and report.cut_short and flushed(state, history, cs.cursor) and cs.doubts:
                out["salvage: a file cut short: a deleted cursor's flushed state kept, its doubt said"] += 1
            elif cs.cursor not in newest:
                out[f"SALVAGE GAVE A CURSOR THAT IS NOT THERE ({how}): {cs.cursor}"] += 1
            elif state == newest[cs.cursor]:
                out["salvage: newest state"] += 1
            elif flushed(state, history, cs.cursor):
                out["salvage: an older flushed state"] += 1
                if cs.complete:
                    out[f"SALVAGE SAID COMPLETE FOR AN OLDER STATE ({how}): {cs.cursor}"] += 1
            else:
                out[f"SALVAGE GAVE NO FLUSHED STATE ({how}): {cs.cursor}"] += 1
    return out


def campaign(trials: int, seed: int = 20261123) -> Counter[str]:
    total: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        history = build(base)
        rng = random.Random(seed)
        for i in range(trials):
            work = Path(tmp) / f"t{i}"
            work.mkdir()
            total += trial(base, history, work, rng)
            shutil.rmtree(work)
    return total


@pytest.mark.stress
def test_byte_damage_campaign(long_run: bool) -> None:
    trials = 500 if long_run else int(os.environ.get("ACKSTORE_DAMAGE_TRIALS", "16"))
    total = campaign(trials)
    print("\n".join(f"{v:5d}  {k}" for k, v in sorted(total.items())))
    bad = {k: v for k, v in total.items() if k.split(" ", 1)[0].isupper()}  # every finding is named in capitals
    assert not bad, bad
    assert total["check: exit 0"] + total["check: exit 1"] == trials


if __name__ == "__main__":  # python -m tests.test_damage_campaign [TRIALS]
    result = campaign(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
    print("\n".join(f"{v:5d}  {k}" for k, v in sorted(result.items())))
