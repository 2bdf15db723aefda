"""Regression tests for damaged files, signals, planted symlinks and leftovers (the
adversarial run's items 2, 4, 5 and 7). The CLI runs as a real subprocess here: a signal
in LMDB must become one line and exit 1, never a traceback or a dead process.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, Position, check
from ackstore.storage.lmdb_file import P_BRANCH, P_LEAF, current_meta, read_metas

from .forms import end_form
from .test_full_disk import fill

T = "persistent://t/ns/damage"
ROOT = Path(__file__).parent.parent


def _cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _one_line_failure(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ackstore: error: "), r.stderr
    return lines[0]


def _build(path: Path, flushes: int = 30, cursors: int = 3) -> dict[str, object]:
    """``cursors`` cursors x ``flushes`` flushes: a log B-tree with branch pages. Returns the state."""
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        curs = [topic.cursor(f"c{i}", CursorConfig(full_marker_every=8)) for i in range(cursors)]
        for f in range(flushes):
            for cur in curs:
                cur.ack([Position(1, e) for e in range(f * 1200, f * 1200 + 1000, 3)])  # past the state layout
            store.flush()
        return {c.name: (c.mark_delete_position, c.ack_range_count) for c in curs}


def _state(path: Path) -> dict[str, object]:
    with AckStore.open(path, readonly=True) as store:
        topic = store.topic(T)
        return {n: (topic.cursor(n).mark_delete_position, topic.cursor(n).ack_range_count) for n in topic.cursors()}


def _log_pages(path: Path) -> tuple[int, list[int], list[int]]:
    """``(page size, branch pages, leaf pages)`` of the ``log`` database, read from the file."""
    from ackstore.storage.lmdb_file import survey

    meta = current_meta(read_metas(path))
    data = (path / "data.mdb").read_bytes()
    psize = meta.page_size
    root = survey(path).named[b"log"].root
    branches, leaves, todo = [], [], [root]
    while todo:
        pg = todo.pop()
        off = pg * psize
        _, _, flags, lower, _ = struct.unpack_from("<QHHHH", data, off)
        if flags & P_BRANCH:
            branches.append(pg)
            for i in range((lower - 16) // 2):
                (ptr,) = struct.unpack_from("<H", data, off + 16 + 2 * i)
                lo, hi, fl, _ = struct.unpack_from("<HHHH", data, off + ptr)
                todo.append(lo | hi << 16 | fl << 32)
        elif flags & P_LEAF:
            leaves.append(pg)
    return psize, branches, leaves


def _digest(path: Path) -> str:
    return hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest()


# -- 2. check --fix never leaves less than open recovers -----------------------------------------


def _said_as_damaged_file(path: Path, hint: str) -> None:
    """``check`` and ``check(fix=True)`` each give one damaged-file finding of the store as a
    whole (no topic, cursor or record): what is wrong, then ``hint``, the step that works;
    the fix says it fixed nothing, and why."""
    (found,) = check(path)
    assert (found.kind, found.topic, found.cursor, found.seq, found.fixed) == ("damaged-file", "", "", -1, False)
    assert found.message.endswith(f"; {hint}") and str(found) == f"damaged-file: /: {found.message}"
    detail = found.message[: -len(hint) - 2]
    (tried,) = check(path, fix=True)
    assert (tried.kind, tried.topic, tried.cursor, tried.fixed) == ("damaged-file", "", "", False)
    assert tried.message == f"{detail} (not fixed: an in-place repair could lose what the file still holds); {hint}"


def test_check_says_a_file_cut_short_is_to_be_restored(tmp_path: Path) -> None:
    """A data file cut below its newest root, too short to salvage: check's one finding
    says so, and says to restore a copy (not to run salvage, nor check again)."""
    path = tmp_path / "store"
    _build(path, cursors=2)
    os.truncate(path / "data.mdb", 5000)
    _said_as_damaged_file(
        path,
        "a copy cut off or a disk that filled: restore the store from a copy if there is one, else start a new "
        "one (too little of it is left to read)",
    )


def test_check_fix_refuses_a_store_whose_branch_keys_are_damaged(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _build(path, cursors=16)
    psize, branches, _ = _log_pages(path)
    assert branches, "the log needs a branch page for this test"
    raw = bytearray((path / "data.mdb").read_bytes())
    off = branches[0] * psize
    assert struct.unpack_from("<H", raw, off + 12)[0] >= 16 + 2 * 4, "the branch needs 4 nodes for this test"
    (ptr,) = struct.unpack_from("<H", raw, off + 16 + 2 * 2)  # node 2's key: (cursor id, seq) big-endian
    raw[off + ptr + 8] ^= 0x01  # a high bit of its cursor id: lookups now miss keys a scan still finds
    (path / "data.mdb").write_bytes(bytes(raw))
    before = _digest(path)
    findings = check(path)
    assert [f.kind for f in findings] == ["damaged-file"]
    assert "out of order" in findings[0].message
    _said_as_damaged_file(path, "'ackstore salvage STORE NEW' rebuilds what it still holds")
    r = _cli("check", "--fix", path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "not fixed" in r.stdout and "STILL NOT CLEAN" in r.stdout
    assert _digest(path) == before  # nothing was written


def test_check_fix_keeps_what_open_recovers_on_a_damaged_record(tmp_path: Path) -> None:
    from . import rawlog

    path = tmp_path / "store"
    _build(path, flushes=6)
    newest = rawlog.markers(path, cursor_id=1)[-1]
    rawlog.damage(path, newest, cursor_id=1)
    opened = _state(path)
    findings = check(path, fix=True)
    assert findings and all(f.fixed for f in findings)
    assert check(path) == []
    assert _state(path) == opened


# -- 5. signals become one line ------------------------------------------------------------------


def _open_in_child(path: Path) -> str:
    code = textwrap.dedent(
        f"""
        from ackstore import AckStore
        try:
            with AckStore.open({str(path)!r}, readonly=True) as s:
                for t in s.topics():
                    for c in s.topic(t).cursors():
                        list(s.topic(t).cursor(c).ack_ranges())
            print("opened")
        except Exception as exc:
            print(type(exc).__name__)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    return r.stdout.strip() or f"signal {-r.returncode}"


@pytest.mark.slow
def test_a_truncated_file_is_an_error_not_sigbus(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _build(path, flushes=10)
    size = (path / "data.mdb").stat().st_size
    with open(path / "data.mdb", "r+b") as fh:
        fh.truncate(size // 2)
    assert _open_in_child(path) == "CorruptStoreError"
    for args in (("stat", path), ("check", path), ("check", "--fix", path), ("copy", path, tmp_path / "c")):
        line = _one_line_failure(_cli(*args)) if args[0] != "check" else None
        if args[0] == "check":
            r = _cli(*args)
            assert r.returncode == 1 and "Traceback" not in r.stderr and "truncated" in r.stdout
        else:
            assert "truncated" in line  # type: ignore[operator]
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_a_zeroed_leaf_page_is_an_error_not_sigabrt(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _build(path, flushes=10)
    psize, _, leaves = _log_pages(path)
    with open(path / "data.mdb", "r+b") as fh:
        fh.seek(leaves[0] * psize)
        fh.write(bytes(psize))
    outcome = _open_in_child(path)
    assert not outcome.startswith("signal") or outcome == "signal 6"  # what LMDB alone does
    for args in (("stat", path), ("cursors", path), ("dump", path), ("copy", path, tmp_path / "c")):
        r = _cli(*args)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (args, r.returncode, r.stderr)
        if r.returncode == 1:
            _one_line_failure(r)
    r = _cli("check", path)
    assert r.returncode == 1 and "damaged-file" in r.stdout and "Traceback" not in r.stderr
    r = _cli("check", "--fix", path)
    assert r.returncode == 1 and "not fixed" in r.stdout


def test_the_guard_turns_a_signal_into_one_line(tmp_path: Path) -> None:
    """Whatever LMDB does on a damaged file, the command's process survives to report it."""
    path = tmp_path / "store"
    _build(path, flushes=4)
    psize, _, leaves = _log_pages(path)
    with open(path / "data.mdb", "r+b") as fh:
        fh.seek(leaves[-1] * psize)
        fh.write(bytes(psize))
    r = _cli("stat", path)
    if r.returncode != 0:
        line = _one_line_failure(r)
        assert "damaged" in line


# -- 4. planted symlinks are never followed -------------------------------------------------------


def test_copy_and_dump_never_write_through_a_planted_symlink(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _build(path, flushes=2)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "snap.partial").symlink_to(victim)
    (tmp_path / "out.jsonl.partial").symlink_to(victim)
    assert _cli("copy", path, tmp_path / "snap").returncode == 0
    assert _cli("dump", path, "-o", tmp_path / "out.jsonl").returncode == 0
    assert victim.read_text() == "precious"
    assert (tmp_path / "snap").stat().st_size > 0 and not (tmp_path / "snap").is_symlink()
    assert (tmp_path / "out.jsonl").read_text().startswith('{"format"')
    assert not os.path.lexists(tmp_path / "snap.partial") and not os.path.lexists(tmp_path / "out.jsonl.partial")


@pytest.mark.slow
def test_restore_refuses_a_planted_or_leftover_restoring_path(tmp_path: Path) -> None:
    """A ``.restoring`` path may be another restore's, or someone's: it is never followed nor
    removed; the error says what to do."""
    path = tmp_path / "store"
    _build(path, flushes=2)
    dump = tmp_path / "d.jsonl"
    assert _cli("dump", path, "-o", dump).returncode == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    (tmp_path / "new.restoring").symlink_to(victim)
    r = _cli("restore", tmp_path / "new", dump)
    assert r.returncode == 1 and "remove it and restore again" in r.stderr
    assert sorted(p.name for p in victim.iterdir()) == ["keep"] and not os.path.lexists(tmp_path / "new")
    (tmp_path / "again.restoring").mkdir()  # left by a restore that was killed
    assert _cli("restore", tmp_path / "again", dump).returncode == 1
    (tmp_path / "again.restoring").rmdir()
    assert _cli("restore", tmp_path / "again", dump).returncode == 0
    assert _state(tmp_path / "again") == _state(path)


# -- 7. the smaller ones -------------------------------------------------------------------------


def test_compact_of_a_path_that_is_not_a_store_creates_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_line_failure(_cli("compact", empty))
    assert "no store" in line and list(empty.iterdir()) == []
    line = _one_line_failure(_cli("check", "--fix", empty))
    assert list(empty.iterdir()) == []


MALFORMED = [
    '{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"t","ledgers":[[1,null]]}\n'
    '{"type":"cursor","topic":"t","cursor":"c","config":{"max_unacked_ranges_to_persist":18446744073709551616},'
    '"mark_delete":"1:-1","read_position":"1:0","properties":{}}\n',
    '{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"t","ledgers":[[1,null]]}\n'
    '{"type":"cursor","topic":"t","cursor":"c","config":[1,2],"mark_delete":"1:-1","read_position":"1:0",'
    '"properties":{}}\n',
    '{"type":"ackstore-dump","format":1}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
    '{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"' + "t" * 1100 + '","ledgers":[]}\n',
    '{"type":"ackstore-dump","format":1}\n{"type":"range","topic":"t","cursor":"c","first":"1:1","last":"1:2"}\n',
    '{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"t","ledgers":"x"}\n',
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_dumps_are_one_line_errors(tmp_path: Path, text: str) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text(text)
    line = _one_line_failure(_cli("restore", tmp_path / "new", dump))
    assert "dump line" in line
    assert not os.path.lexists(tmp_path / "new") and not os.path.lexists(tmp_path / "new.restoring")


def test_invalid_utf8_in_a_dump_is_a_one_line_error(tmp_path: Path) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_bytes(b'{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"\xff\xfe"}\n')
    line = _one_line_failure(_cli("restore", tmp_path / "new", dump))
    assert "UTF-8" in line or "utf-8" in line


def test_a_reader_whose_record_the_writer_trimmed_refreshes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with AckStore.open(path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.close_ledger(1, 1000)
        topic.add_ledger(2)
        cur = topic.cursor("c", CursorConfig(full_marker_every=1))
        cur.ack([Position(1, 1), Position(2, 1)])
    script = tmp_path / "writer.py"
    script.write_text(
        "import sys\nfrom ackstore import AckStore, CursorConfig, Position\n"
        "with AckStore.open(sys.argv[1]) as store:\n"
        "    cur = store.topic('t').cursor('c')\n"
        "    for step in range(5, 17, 2):\n"
        "        cur.ack([Position(1, step), Position(2, step)])\n"
        "        store.flush()\n"
    )
    with AckStore.open(path, readonly=True) as reader:
        rcur = reader.topic("t").cursor("c", CursorConfig(max_individual_ack_cache_bytes=0))
        end_form(rcur)  # (the reader's parts, which this is about)
        assert rcur.stats().ledgers_swapped_out >= 1
        # three full markers: the records the reader points to are trimmed
        subprocess.run([sys.executable, str(script), str(path)], check=True, cwd=ROOT, timeout=60)
        first = list(rcur.ack_ranges())  # ledger 2's record is gone: the reader refreshes
        again = list(rcur.ack_ranges())
    new = [(Position(ledger, e), Position(ledger, e)) for ledger in (1, 2) for e in (1, *range(5, 17, 2))]
    # like any live iteration, the first pass may show ledger 1 as it was when it started
    assert [r for r in first if r[0].ledger == 2] == [r for r in new if r[0].ledger == 2]
    assert again == new


# -- a full disk -----------------------------------------------------------------------------------


@pytest.fixture
def tiny_fs(tmpfs) -> Path:  # type: ignore[no-untyped-def]
    """A 256 KiB tmpfs."""
    return tmpfs(256 << 10)  # type: ignore[no-any-return]


def test_copy_and_dump_on_a_full_disk_are_one_line_and_leave_nothing(tmp_path: Path, tiny_fs: Path) -> None:
    path = tmp_path / "store"
    _build(path, flushes=30)
    fill(tiny_fs, leave=8192)  # to the last block, then give back less than a snapshot needs
    line = _one_line_failure(_cli("copy", path, tiny_fs / "snap"))
    assert "no space left on the device" in line
    line = _one_line_failure(_cli("dump", path, "-o", tiny_fs / "out.jsonl"))
    assert "No space left" in line or "no space left" in line
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["filler"]


def test_a_directory_key_whose_topic_id_is_damaged_is_found_not_a_vanished_ledger(tmp_path: Path) -> None:
    """A flipped bit in the topic id of a directory key moves the entry out of its topic's
    range, where no scan of that topic met it: the open ledger vanished and every cursor's
    acks in it were dropped, silently. The entry past a topic's range is checked too: the
    open is a CorruptStoreError naming it, and check a corrupt-catalog finding."""
    import lmdb

    from ackstore import CorruptStoreError

    path = tmp_path / "s"
    with AckStore.open(path) as store:
        topic = store.topic("persistent://t/ns/dir")
        topic.add_ledger(2)
        topic.close_ledger(2, 1000)
        topic.add_ledger(3)
        topic.cursor("c").ack([Position(3, 5)])
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        db = env.open_db(b"ledgers", txn=txn)
        key = struct.pack(">QQ", 0, 3)
        value = txn.get(key, db=db)
        txn.delete(key, db=db)
        txn.put(struct.pack(">QQ", 0x20, 3), value, db=db)  # the topic id's low byte: 0x00 -> 0x20
    env.close()
    with (
        pytest.raises(CorruptStoreError, match="directory entry of ledger 3 of topic id 32"),
        AckStore.open(path, readonly=True) as store,
    ):
        store.topic("persistent://t/ns/dir").ledgers()
    assert [f.kind for f in check(path)] == ["corrupt-catalog"]
