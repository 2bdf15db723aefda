"""``ackstore salvage``: a clean store from what a damaged file still holds, never a mix of
two flushes, and a report that says what was lost."""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ackstore import AckStore, CursorConfig, InvalidArgumentError, Position, check
from ackstore.salvage import salvage

from .test_damage_defects import _log_pages

T = "persistent://t/ns/salvage"
ROOT = Path(__file__).parent.parent


def _build(path: Path, flushes: int = 25, cursors: int = 3) -> list[dict[str, object]]:
    """``cursors`` cursors x ``flushes`` flushes; returns the state after every flush (its history)."""
    history = []
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 50_000)
        topic.add_ledger(2)
        curs = [topic.cursor(f"c{i}", CursorConfig(full_marker_every=8)) for i in range(cursors)]
        curs[0].ack_batch_index(Position(2, 3), 4, [1])
        curs[0].set_property("k", 9)
        for f in range(flushes):
            for cur in curs:
                cur.ack([Position(1, e) for e in range(f * 600, f * 600 + 500, 3)])
                cur.ack(Position(2, 10 + f))
            store.flush()
            history.append(_state_of(store))
    return history


def _state_of(store: AckStore, name: str = T) -> dict[str, object]:
    topic = store.topic(name)
    return {
        c: (
            topic.cursor(c).mark_delete_position,
            topic.cursor(c).read_position,
            list(topic.cursor(c).ack_ranges()),
            topic.cursor(c).partial_batches(),
            topic.cursor(c).properties,
        )
        for c in topic.cursors()
    }


def _state(path: Path) -> dict[str, object]:
    with AckStore.open(path, readonly=True) as store:
        return _state_of(store)


def test_salvage_of_a_clean_store_is_the_same_store(tmp_path: Path) -> None:
    history = _build(tmp_path / "s")
    report = salvage(tmp_path / "s", tmp_path / "new")
    assert all(c.complete for c in report.cursors) and len(report.cursors) == 3
    assert _state(tmp_path / "new") == history[-1]
    assert check(tmp_path / "new") == []
    with pytest.raises(InvalidArgumentError, match="exists"):
        salvage(tmp_path / "s", tmp_path / "new")


@pytest.mark.slow
def test_salvage_recovers_what_damaged_branch_keys_hide(tmp_path: Path) -> None:
    """The case check --fix must refuse: salvage reads past the damaged B-tree."""
    path = tmp_path / "s"
    history = _build(path, cursors=16)
    psize, branches, _ = _log_pages(path)
    assert branches, "the log needs a branch page for this test"
    raw = bytearray((path / "data.mdb").read_bytes())
    off = branches[0] * psize
    assert struct.unpack_from("<H", raw, off + 12)[0] >= 16 + 2 * 4, "the branch needs 4 nodes for this test"
    (ptr,) = struct.unpack_from("<H", raw, off + 16 + 2 * 2)
    raw[off + ptr + 8 + 15] ^= 0x40
    (path / "data.mdb").write_bytes(bytes(raw))
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "salvage", str(path), str(tmp_path / "new")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.count("complete: newest marker") == 16
    assert _state(tmp_path / "new") == history[-1]


@pytest.mark.parametrize("seed", range(12))
def test_salvage_gives_a_flushed_state_after_byte_damage(tmp_path: Path, seed: int) -> None:
    """Every cursor comes back as it was after SOME flush (the newest whose records
    survive), and the report says when that is not the newest."""
    path = tmp_path / "s"
    history = _build(path, flushes=12)
    rng = random.Random(seed)
    raw = bytearray((path / "data.mdb").read_bytes())
    for _ in range(3):
        if rng.random() < 0.5:
            pg = rng.randrange(2, len(raw) // 4096)
            raw[pg * 4096 : (pg + 1) * 4096] = bytes(4096)
        else:
            raw[rng.randrange(8192, len(raw))] ^= 1 << rng.randrange(8)
    damaged = tmp_path / "damaged"
    shutil.copytree(path, damaged)
    (damaged / "data.mdb").write_bytes(bytes(raw))
    report = salvage(damaged, tmp_path / "new")
    with AckStore.open(tmp_path / "new", readonly=True) as store:  # a topic whose entry was lost has a placeholder
        got = {(t, c): s for t in {c.topic for c in report.cursors} for c, s in _state_of(store, t).items()}
    assert sorted(got) == sorted((c.topic, c.cursor) for c in report.cursors)
    for c in report.cursors:
        # a cursor whose catalog entry was lost comes back under a placeholder name: any cursor's
        states = [h[c.cursor] for h in history] if c.cursor in history[0] else [s for h in history for s in h.values()]
        state = got[(c.topic, c.cursor)]
        if c.marker_seq >= 0:
            assert state in states, f"seed {seed}: {c.cursor} is no flushed state"  # never a mix
        else:
            assert state[2] == []
        if c.complete:  # proven the newest: it is the state the last flush wrote
            assert c.cursor in history[-1] and state == history[-1][c.cursor], (seed, c)
            assert c.marker_seq == c.newest_marker_seen and not c.doubts and not c.problems
        else:  # and the report says why not
            assert c.marker_seq < c.newest_marker_seen or c.doubts or c.problems or c.marker_seq < 0, (seed, c)


def test_salvage_never_revives_what_a_committed_transaction_removed(tmp_path: Path) -> None:
    """Markers deleted by a committed transaction still sit, intact, on pages the free list
    names: they are stale copies, not hidden state. Salvage returns what the trees hold (the
    committed state), and check has nothing to report."""
    from . import rawlog

    path = tmp_path / "s"
    history = _build(path, flushes=6)
    for seq in rawlog.markers(path, cursor_id=1)[-1:]:  # the marker before is kept to fall back to
        rawlog.damage(path, seq, cursor_id=1, how="delete")
    committed = _state(path)
    assert committed["c1"] == history[-2]["c1"]
    assert check(path) == []
    report = salvage(path, tmp_path / "new")
    assert _state(tmp_path / "new") == committed
    assert report.complete and report.hidden_pages == 0


def test_salvage_keeps_the_open_ledgers_bound_and_string_properties(tmp_path: Path) -> None:
    src = tmp_path / "src"
    with AckStore.open(src) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 10)
        topic.add_ledger(2)
        topic.advance(2, 30)
        cur = topic.cursor("c")
        cur.ack(Position(2, 25))
        cur.set_property("owner", "svc")
        topic.advance(2, 40)
    report = salvage(src, tmp_path / "new")
    assert report.unbounded_topics == {}
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        topic = store.topic(T)
        assert topic.last_confirmed == Position(2, 40)
        assert topic.cursor("c").properties == {"owner": "svc"}
        assert list(topic.cursor("c").ack_ranges()) == [(Position(2, 25), Position(2, 25))]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["marker", "default"])
def test_salvage_of_a_store_cut_at_every_page_boundary_brings_back_what_survives(
    tmp_path: Path, layout: str, request: pytest.FixtureRequest
) -> None:
    """A copy cut off (or a disk that filled) at each page boundary: salvage brings back
    every cursor whose intact marker and records lie in the pages left (at least that
    state; under a placeholder when its catalog entry is gone), each a state some flush
    wrote, none called complete; a cut that leaves nothing of ackstore's says what to do.
    A page the free list names holds a stale copy (of a record since trimmed, say): salvage
    reads none while the free list is intact, and neither does what is due here; in both
    layouts (the marker layout's ledger records and markers alone, or the state slots of the
    small cursors beside them) a cursor's live records lie where the newest transactions
    wrote, which most cuts take."""
    if layout == "marker":
        request.getfixturevalue("marker_layout")

    from ackstore import CorruptStoreError
    from ackstore.storage.lmdb_file import leaf_nodes, survey
    from ackstore.storage.log import MemoryLog, recover_cursor
    from ackstore.storage.records import split_log_key

    from .test_damage_campaign import T as CAMPAIGN_TOPIC
    from .test_damage_campaign import build, flushed

    base = tmp_path / "base"
    history = build(base)
    with AckStore.open(base, readonly=True) as store:
        topic = store.topic(CAMPAIGN_TOPIC)
        ids = {topic.cursor(c).cursor_id: c for c in topic.cursors()}
    pages = (base / "data.mdb").stat().st_size // 4096
    brought_back = salvaged = 0
    for cut in range(3, pages):
        src = tmp_path / f"cut{cut}"
        shutil.copytree(base, src)
        with open(src / "data.mdb", "r+b") as fh:
            fh.truncate(cut * 4096)
        left: dict[int, dict[bytes, bytes]] = {}
        freed = survey(src).free or set()  # (the free list's pages hold stale copies: salvage reads none)
        for _, key, value in leaf_nodes(src, pages_to_read=set(range(2, cut)) - freed):  # (values cut off: gone)
            if len(key) == 16 and split_log_key(key)[0] in ids:
                left.setdefault(split_log_key(key)[0], {})[key] = value
        due = {
            cid: recover_cursor(MemoryLog(items), None, cid, None, "all").report.marker_seq
            for cid, items in left.items()
        }
        due = {cid: seq for cid, seq in due.items() if seq >= 0}
        try:
            report = salvage(src, tmp_path / f"new{cut}")
        except CorruptStoreError as exc:
            assert not due, f"cut at page {cut}: salvage gave up though {sorted(due)} survive"
            assert "salvage" not in str(exc).split(";")[-1], f"circular advice: {exc}"
            continue
        salvaged += 1
        got: dict[int, int] = {}
        with AckStore.open(tmp_path / f"new{cut}", readonly=True) as store:
            for cs in report.cursors:
                cid = int(cs.topic.rsplit("_", 1)[1]) if cs.topic.startswith("_salvaged_cursor_") else None
                name = ids.get(cid) if cid is not None else cs.cursor
                if cid is None:
                    cid = next(i for i, n in ids.items() if n == name)
                cur = store.topic(cs.topic).cursor(cs.cursor)
                state = [str(cur.mark_delete_position), [[str(a), str(b)] for a, b in cur.ack_ranges()]]
                if cs.marker_seq < 0:  # none of its records survived: it starts empty, and says so
                    assert not cs.complete and cur.ack_range_count == 0, f"cut at page {cut}: {name}"
                    continue
                assert flushed(state, history, name), f"cut at page {cut}: {name} has a state no flush wrote"
                assert not cs.complete or state == history[-1][name], f"cut at page {cut}: {name} called complete"
                got[cid] = cs.marker_seq
        for cid, seq in due.items():
            assert got.get(cid, -1) >= seq, (
                f"cut at page {cut}: cursor {ids[cid]} came back at {got.get(cid)}, not {seq}"
            )
            brought_back += 1
    assert salvaged > 0 and (brought_back > 0 or layout == "marker")  # (the marker layout's cuts leave none)


def test_of_two_values_found_for_a_state_slot_the_newer_is_kept(tmp_path: Path) -> None:
    """A state slot is only ever written over with a newer state, so a page salvage reads
    that damage hid (a stale copy) may hold an older value of the same slot: whichever order
    the pages come in, the value with the higher sequence is the one filed, once."""
    from ackstore.salvage import _LOG, SalvageReport, _Found, _sort
    from ackstore.storage.catalog import Catalog
    from ackstore.storage.records import encode_state_marker, seal_slot, slot_key

    with AckStore.open(tmp_path / "s") as store:
        store.topic("persistent://t/ns/x")
    codec = Catalog.codec(tmp_path / "s" / "data.mdb")
    key = slot_key(3, 1)
    record = encode_state_marker(3, (1, 5), {}, [])
    older, newer = seal_slot(key, 7, record), seal_slot(key, 9, record)
    for first, second in ((older, newer), (newer, older)):
        found, report = _Found(), SalvageReport("a", "b")
        assert _sort(_LOG, key, first, found, report, codec)
        assert _sort(_LOG, key, second, found, report, codec, newer_only=True)
        assert found.logs == {3: {key: newer}} and report.records == 1


def test_a_damaged_state_slot_head_makes_the_older_state_unproven(tmp_path: Path) -> None:
    """A small cursor after five flushes: a bit of its newest state slot's head (the
    sequence or its checksum) flipped. The open falls back to the other slot and says so;
    salvage brings back that older flushed state but never calls it complete (the damaged
    slot may have held a newer one), says why, and exits 1."""
    from ackstore.storage.records import slot_key

    from . import rawlog

    path = tmp_path / "s"
    states = []
    with AckStore.open(path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        cur = topic.cursor("c")
        for f in range(5):
            cur.ack(Position(1, 2 * f + 1))
            store.flush()
            states.append(list(cur.ack_ranges()))
        cid = cur.cursor_id
    newest = max(rawlog.slots(path, cid).items(), key=lambda item: item[1])[0]
    key = slot_key(cid, newest)
    rng = random.Random(4)
    for bit in sorted(rng.sample(range(8 * 5), 10)):  # the head: a 1-byte varint and a u32 checksum
        damaged = tmp_path / f"d{bit}"
        shutil.copytree(path, damaged)
        env = __import__("lmdb").open(str(damaged), max_dbs=8)
        db = env.open_db(b"log")
        with env.begin(write=True) as txn:
            value = bytearray(txn.get(key, db=db))
            value[bit // 8] ^= 1 << (bit % 8)
            txn.put(key, bytes(value), db=db)
        env.close()
        with AckStore.open(damaged, readonly=True) as store:
            opened = store.topic(T).cursor("c")
            assert list(opened.ack_ranges()) == states[3] and opened.stats().recovery.markers_skipped == 1
        report = salvage(damaged, tmp_path / f"n{bit}")
        (c,) = report.cursors
        assert not c.complete and any("state slot" in d for d in c.doubts), (bit, c)
        assert _state(tmp_path / f"n{bit}")["c"][2] == states[3]
    run = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "salvage", str(damaged), str(tmp_path / "cli")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "not proven the newest (a state slot of it is damaged" in run.stdout, run.stdout


@pytest.mark.parametrize(
    "keys,i,out",
    [
        ("abc", 1, False),  # in order
        ("a", 0, False),  # alone
        ("azc", 1, True),  # out of order where its neighbours keep it
        ("azb", 1, True),
        ("aab", 1, True),  # equal to the one before: out of order too
        ("cza", 1, False),  # its neighbours are out of order themselves: it cannot be told
        ("cab", 0, True),  # the first key, the next two in order
        ("cba", 0, False),  # the first key, the next two out of order too
        ("ca", 0, True),  # the first of two
        ("ab0", 2, True),  # the last key, the two before it in order
        ("ba0", 2, False),  # the last key, the two before it out of order too
        ("b0", 1, True),  # the last of two
        ("abb", 1, True),  # equal to the one after
        ("aza", 1, False),  # its neighbours equal: it cannot be told
        ("cbb", 0, False),  # the first key, the next two equal
        ("bb0", 2, False),  # the last key, the two before it equal
    ],
)
def test_a_key_is_misplaced_where_its_neighbours_keep_the_order(keys: str, i: int, out: bool) -> None:
    """Salvage's reading of a damaged page: key ``i`` breaks the page's order (and is left
    out) only where the keys around it keep it."""
    from ackstore.salvage import _misplaced

    assert _misplaced([k.encode() for k in keys], i) is out


def test_a_misplaced_key_of_a_suspect_page_is_left_out_and_its_range_kept_as_lost() -> None:
    """Salvage's filter over the nodes read, page by page: on a suspect page the key out of
    order (here the first, a middle and the last of their pages) is left out, and the range
    between its neighbours is kept as lost for its tree; the same keys on a page not
    suspect pass, and the page number -1 ends the last page only."""
    from ackstore.salvage import _Found, _ordered

    nodes = [
        (4, b"z", b"1"), (4, b"b", b"2"), (4, b"c", b"3"),  # the first key misplaced
        (5, b"a", b"4"), (5, b"q", b"5"), (5, b"c", b"6"), (5, b"d", b"7"),  # a middle one
        (7, b"a", b"8"), (7, b"b", b"9"), (7, b"0", b"x"),  # the last one
        (9, b"a", b"y"), (9, b"z", b"z"), (9, b"c", b"w"),  # not suspect: all pass
    ]  # fmt: skip
    found = _Found()
    kept = list(_ordered(iter(nodes), {4, 5, 7}, found, lambda pgno, key, value: f"tree{pgno}"))
    assert [v for _, _, v in kept] == [b"2", b"3", b"4", b"6", b"7", b"8", b"9", b"y", b"z", b"w"]
    assert found.damaged_keys == {"tree4": [(None, b"b")], "tree5": [(b"a", b"c")], "tree7": [(b"b", None)]}


def test_salvage_refuses_what_holds_no_store_and_what_is_too_short_with_their_words(tmp_path: Path) -> None:
    from ackstore import CorruptStoreError, NotAStoreError

    (tmp_path / "empty").mkdir()
    with pytest.raises(NotAStoreError) as caught:
        salvage(tmp_path / "empty", tmp_path / "new")
    assert str(caught.value).startswith(f"no store at {tmp_path / 'empty'}: it has no data.mdb")
    with AckStore.open(tmp_path / "s") as store:
        store.topic("t").add_ledger(1)
    cut = tmp_path / "cut.mdb"
    cut.write_bytes((tmp_path / "s" / "data.mdb").read_bytes()[:5000])  # its first meta page and a part
    with pytest.raises(CorruptStoreError) as short:
        salvage(cut, tmp_path / "new")
    assert str(short.value).startswith(f"{cut} is 5,000 bytes: too short to hold anything salvage could read")
    assert not (tmp_path / "new").exists()


def _history_cursor(path: Path) -> int:
    """A store at ``path`` whose cursor "c" of topic "t" keeps history: five flushes, one ack
    each (ledger 1, entries 0..4), so five kept states. Returns its cursor id."""
    with AckStore.open(path) as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c", CursorConfig(history_seconds=3600))
        for e in range(5):
            cur.ack(Position(1, e))
            store.flush()
        return cur.cursor_id


def test_salvage_counts_the_history_points_it_does_not_carry_and_the_damaged_ones(tmp_path: Path) -> None:
    """A cursor that keeps history: salvage brings back its newest state and says how many
    kept states it leaves behind, and how many of those points were damaged in the file."""
    import lmdb

    from ackstore.storage.records import log_key

    cid = _history_cursor(tmp_path / "s")
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
    db = env.open_db(b"history")
    with env.begin(write=True) as txn:
        key, value = next(iter(txn.cursor(db=db)))
        assert bytes(key)[:8] == log_key(cid, 0)[:8]
        txn.put(key, value[:-1] + bytes([value[-1] ^ 1]), db=db)
    env.close()
    report = salvage(tmp_path / "s", tmp_path / "new")
    (c,) = report.cursors
    assert (c.cursor, c.history_lost, c.history_damaged) == ("c", 5, 1)
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        assert store.topic("t").cursor("c").mark_delete_position == Position(1, 4)


def test_the_entries_of_a_damaged_page_the_walk_reached_are_filed_to_its_tree(tmp_path: Path) -> None:
    """A history page the walk reaches but finds damaged (a point's data runs past the
    page): its other points are still read and filed to the history tree, as the walk says
    (by their shape alone they would be nothing of ackstore's), so the report counts the
    four kept states salvage does not carry."""
    from . import rawlog

    cid = _history_cursor(tmp_path / "s")
    rawlog.patch_node(tmp_path / "s", 2, cid, dsize=5000, db=b"history")
    report = salvage(tmp_path / "s", tmp_path / "new")
    (damage,) = report.damage
    assert re.fullmatch(r"database 'history' page \d+: node 2's data of 5000 bytes runs past the page", damage)
    (c,) = report.cursors
    assert (c.cursor, c.history_lost, c.history_damaged, c.complete) == ("c", 4, 0, True)


def test_a_middle_ledger_found_open_is_sealed_past_what_the_cursors_hold_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory whose middle ledger reads as open (a buggy writer's entry): the salvaged
    topic has one open ledger, its last; the middle one is sealed one entry past what any
    cursor holds of it (none hold anything of it here: one entry), the report says so, and
    the cursor is as flushed."""
    from . import rawlog

    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        for ledger in (1, 2):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 10)
        topic.add_ledger(3)
        cur = topic.cursor("c")
        cur.ack_cumulative(Position(2, 9))
        cur.ack(Position(3, 4))
        store.flush()
        tid = topic.topic_id
    rawlog.put_ledger_count(tmp_path / "s", tid, 2, -1)
    report = salvage(tmp_path / "s", tmp_path / "new")
    assert [(c.cursor, c.complete) for c in report.cursors] == [("c", True)]
    assert report.sealed_ledgers == {"t": {2: 1}} and report.inferred_ledgers == {}
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        topic = store.topic("t")
        assert topic.ledgers() == [(1, 10), (2, 1), (3, None)]
        cur = topic.cursor("c")
        assert cur.mark_delete_position == Position(3, -1)
        assert list(cur.ack_ranges()) == [(Position(3, 4), Position(3, 4))]
    from ackstore.recovery.cli import main

    assert main(["salvage", str(tmp_path / "s"), str(tmp_path / "cli")]) == 0
    assert (
        "  t: ledgers [2] were found open below its last ledger (their seal was lost); sealed one entry past "
        "what the cursors hold of each: 2 at 1 entry\n"
    ) in capsys.readouterr().out


def test_a_file_cut_short_says_how_many_of_its_pages_are_left(tmp_path: Path) -> None:
    """A copy cut to half its pages, the free list among what is gone: the report says the
    file was cut, how many of how many pages are left, and that nothing is proven whole."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        for ledger in (1, 2, 3):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 100_000)
        curs = [topic.cursor(f"c{i}", CursorConfig(max_unacked_ranges_to_persist=0)) for i in range(5)]
        for r in range(30):
            for cur in curs:
                cur.ack_entries(1 + r % 3, range(r * 1000 + 1, r * 1000 + 800, 2))
            store.flush()
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    left = len(data) // 4096 // 2
    (tmp_path / "cut.mdb").write_bytes(data[: left * 4096])
    report = salvage(tmp_path / "cut.mdb", tmp_path / "new")
    assert report.cut_short is not None and report.cut_short[0] == left < report.cut_short[1]
    assert (
        f"the file is cut short: {left} of its {report.cut_short[1]:,} pages are left and its free list is lost, so "
        "every page left was read, stale copies included; nothing that came back is proven complete"
    ) in report.damage
    assert not any(c.complete for c in report.cursors)


@pytest.mark.parametrize("where", ["log", "slot 0", "slot 1", "other cursor", "catalog", "directory", "topics"])
def test_a_cursors_doubts_name_each_lost_range_its_keys_may_lie_in(where: str) -> None:
    """What a cursor's completeness cannot be proven against: a lost key range of the log
    over its records or either of its state slots, of the catalog over its entry, of its
    topic's ledger directory, or of the topics' catalog; another cursor's range is not one."""
    from ackstore.salvage import _CURSORS, _LEDGERS, _LOG, _TOPICS, _doubts
    from ackstore.storage.records import log_key, slot_key

    tid, name, cid = 3, "c", 7
    one = {
        "log": (_LOG, log_key(cid, 5)),
        "slot 0": (_LOG, slot_key(cid, 0)),
        "slot 1": (_LOG, slot_key(cid, 1)),
        "other cursor": (_LOG, log_key(cid + 1, 5)),
        "catalog": (_CURSORS, struct.pack(">Q", tid) + b"c"),
        "directory": (_LEDGERS, struct.pack(">QQ", tid, 9)),
        "topics": (_TOPICS, b"t"),
    }[where]
    tree, key = one
    said = {
        "log": ["damage lost part of the record log where this cursor's records lie"],
        "catalog": ["damage lost part of the catalog where this cursor's entry lies"],
        "directory": ["damage lost part of this topic's ledger directory"],
        "topics": ["damage lost part of the topics' catalog"],
    }
    expected = said["log"] if where.startswith("slot") else said.get(where, [])
    assert _doubts({tree: [(key, key + b"\x00")]}, tid, name, cid) == expected


def test_a_second_copy_of_a_catalog_entry_replaces_the_first_only_with_a_higher_id() -> None:
    """Pages damage hid are read after the live ones (``newer_only``): a topic or cursor
    entry found there again replaces the live one only if its id is higher (made again
    since); with the same id it is a stale copy (an older configuration), and the live one
    stays."""
    from ackstore.salvage import _CURSORS, _TOPICS, SalvageReport, _Found, _sort
    from ackstore.storage.catalog import Catalog, name_key

    codec = Catalog.codec("store")
    found, report = _Found(), SalvageReport("store", "new")
    key = struct.pack(">Q", 2) + name_key("c")
    assert _sort(_CURSORS, key, codec._encode_cursor(2, "c", 5, {"full_marker_every": 9}), found, report, codec)
    for cid, cfg in ((5, {"full_marker_every": 3}), (4, {"full_marker_every": 4})):
        _sort(_CURSORS, key, codec._encode_cursor(2, "c", cid, cfg), found, report, codec, newer_only=True)
    assert found.cursors[(2, "c")] == (5, {"full_marker_every": 9})
    _sort(_CURSORS, key, codec._encode_cursor(2, "c", 6, {}), found, report, codec, newer_only=True)
    assert found.cursors[(2, "c")] == (6, {})
    assert _sort(_TOPICS, name_key("t"), codec._encode_topic("t", 2, 7, False), found, report, codec)
    _sort(_TOPICS, name_key("t"), codec._encode_topic("t", 2, 3, False), found, report, codec, newer_only=True)
    assert found.topics["t"] == (2, 7)
    _sort(_TOPICS, name_key("t"), codec._encode_topic("t", 3, 1, False), found, report, codec, newer_only=True)
    assert found.topics["t"] == (3, 1)


def test_an_lmdb_file_holding_nothing_of_ackstores_is_refused_with_what_to_do(tmp_path: Path) -> None:
    import lmdb

    from ackstore import CorruptStoreError

    env = lmdb.open(str(tmp_path / "other"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        for i in range(200):
            txn.put(b"key-%04d" % i, b"x" * 100)
    env.close()
    with pytest.raises(CorruptStoreError) as caught:
        salvage(tmp_path / "other", tmp_path / "new")
    said = f"{tmp_path / 'other'}: salvage found no cursor record or topic or cursor entry"
    assert str(caught.value).startswith(said)
    assert caught.value.hint == (
        "nothing of ackstore's is left to bring back: restore the store from a copy ('ackstore copy' or "
        "'ackstore dump' made earlier) or start a new one"
    )
    assert not (tmp_path / "new").exists()


def test_a_file_whose_meta_pages_and_first_pages_are_lost_is_read_from_its_first_leaf(tmp_path: Path) -> None:
    """Both meta pages damaged and pages 2..63 zeroed: the file is still taken for a store
    (a leaf page lies further on) and the cursors whose records lie past the lost pages
    come back each as one of the states flushed, none proven complete."""
    flushed = {}
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        for i in range(1500):
            cur = topic.cursor(f"c{i:03}")
            cur.ack([Position(1, e) for e in range(i % 7, 200, 3)])
            flushed[cur.name] = list(cur.ack_ranges())
        store.flush()
    data = bytearray((tmp_path / "s" / "data.mdb").read_bytes())
    assert len(data) > 100 * 4096
    for page in (0, 1):
        data[page * 4096 + 24 : page * 4096 + 200] = bytes(176)
    data[2 * 4096 : 64 * 4096] = bytes(62 * 4096)
    (tmp_path / "cut.mdb").write_bytes(bytes(data))
    report = salvage(tmp_path / "cut.mdb", tmp_path / "new")
    assert report.meta_lost and report.cursors and not any(c.complete for c in report.cursors)
    back = []  # the catalog's pages are among the lost: names and topics may be placeholders
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        for topic in {c.topic for c in report.cursors}:
            back += [list(cur.ack_ranges()) for cur in store.topic(topic).open_cursors().values()]
    assert 0 < len(back) < len(flushed) and all(ranges in flushed.values() for ranges in back)


def test_a_file_whose_meta_pages_are_both_damaged_is_read_page_by_page(tmp_path: Path) -> None:
    """Both meta pages damaged (LMDB's magic left, the rest zeroed): no root to walk from
    and no free list, so every page is read as for a file cut short; the newest state of
    each cursor comes back, none proven complete, and the report says why."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        cur = topic.cursor("c")
        for e in (0, 1, 2, 5, 9):
            cur.ack([Position(1, e)])
            store.flush()
    data = bytearray((tmp_path / "s" / "data.mdb").read_bytes())
    for page in (0, 1):
        data[page * 4096 + 24 : page * 4096 + 200] = bytes(176)
    (tmp_path / "nometa.mdb").write_bytes(bytes(data))
    report = salvage(tmp_path / "nometa.mdb", tmp_path / "new")
    assert report.meta_lost and [(c.topic, c.cursor) for c in report.cursors] == [("t", "c")]
    (c,) = report.cursors
    assert not c.complete and (
        "both meta pages of the file are damaged: a newer state, or this cursor's deletion, may be lost" in c.doubts
    )
    assert (
        "both meta pages are damaged, so every page was read, stale copies included; nothing that came back is "
        "proven complete"
    ) in report.damage
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        cur = store.topic("t").cursor("c")
        assert cur.mark_delete_position == Position(1, 2) and cur.is_acked(Position(1, 9))
    assert check(tmp_path / "new") == []


def test_a_file_of_no_store_at_all_is_still_refused(tmp_path: Path) -> None:
    from ackstore import NotAStoreError

    (tmp_path / "noise.mdb").write_bytes(random.Random(3).randbytes(64 * 4096))
    with pytest.raises(NotAStoreError, match="not an LMDB data file"):
        salvage(tmp_path / "noise.mdb", tmp_path / "new")


def test_salvage_carries_delivery_counts_an_empty_sealed_ledger_and_a_cursor_that_never_acked(tmp_path: Path) -> None:
    """What a clean store holds comes back exactly, and each cursor is complete: delivery
    counts, a sealed ledger with no entries between two others, a cursor that never acked."""
    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        topic.close_ledger(1, 10)
        topic.add_ledger(2)
        topic.close_ledger(2, 0)  # sealed empty
        topic.add_ledger(3)
        cur = topic.cursor("c", CursorConfig(max_deliveries=5))
        cur.ack([Position(1, e) for e in (0, 1, 4)])
        cur.record_deliveries([Position(1, 2), Position(1, 2), Position(3, 7)])
        topic.cursor("idle")
    report = salvage(tmp_path / "s", tmp_path / "new")
    assert sorted((c.cursor, c.complete, c.problems) for c in report.cursors) == [("c", True, ()), ("idle", True, ())]
    assert {c.cursor: c.mark_delete for c in report.cursors} == {"c": "1:1", "idle": "1:-1"}
    with AckStore.open(tmp_path / "new", readonly=True) as store:
        topic = store.topic("t")
        assert topic.ledgers() == [(1, 10), (2, 0), (3, None)]
        cur = topic.cursor("c")
        assert cur.delivery_counts() == {Position(1, 2): 2, Position(3, 7): 1}
        assert cur.mark_delete_position == Position(1, 1) and cur.is_acked(Position(1, 4))
        assert topic.cursor("idle").mark_delete_position == Position(1, -1)


def test_an_entry_of_a_hidden_page_is_filed_by_its_shape() -> None:
    """A page damage hid names no tree: each entry is filed by what it looks like. A ledger
    directory value, sealed or open, starts with its type byte; a state slot has its own
    key; records and catalog entries say their type; anything else is not ackstore's."""
    import msgpack

    from ackstore.salvage import _CURSORS, _LEDGERS, _LOG, _TOPICS, _tree_of
    from ackstore.storage.catalog import RECORD_CURSOR, RECORD_TOPIC
    from ackstore.storage.records import RECORD_MARKER, encode_record, log_key, slot_key

    ledger_key = struct.pack(">QQ", 1, 2)
    assert _tree_of(ledger_key, b"\x05" + bytes(13)) == _tree_of(ledger_key, b"\x06" + bytes(21)) == _LEDGERS
    assert _tree_of(slot_key(7, 1), b"\x00" * 12) == _LOG
    assert _tree_of(log_key(7, 3), encode_record(RECORD_MARKER, msgpack.packb([]))) == _LOG
    assert _tree_of(b"t", encode_record(RECORD_TOPIC, msgpack.packb([]))) == _TOPICS
    assert _tree_of(struct.pack(">Q", 1) + b"c", encode_record(RECORD_CURSOR, msgpack.packb([]))) == _CURSORS
    assert _tree_of(b"format", b"\x00" * 8) is None
