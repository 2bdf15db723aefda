"""The recovery CLI: every command, its exit codes and its one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ackstore.recovery.cli import main

from ackstore import AckStore, CursorConfig, Position
from ackstore.storage.records import FORMAT_VERSION

from . import rawlog

T = "persistent://t/ns/cli"
ROOT = Path(__file__).parent.parent


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def invoke(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def _make(path: Path) -> None:
    with AckStore.open(path) as store:
        for topic_name, n in ((T, 4), (T + "-2", 2)):
            topic = store.topic(topic_name)
            for ledger in range(1, n + 1):
                topic.add_ledger(ledger)
                topic.close_ledger(ledger, 100)
            topic.add_ledger(n + 1)
            for sub in ("a", "b"):
                cur = topic.cursor(sub, CursorConfig(full_marker_every=2))
                cur.ack([Position(2, e) for e in range(0, 100, 3)])
                cur.ack_batch_index(Position(3, 4), 8, [1, 5])
                cur.set_property("k", 7)
                store.flush()
                cur.ack([Position(3, 9)])
                store.flush()
        store.topic(T).trim_ledgers(2)


def test_stat_and_cursors(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    code, out, _ = run("stat", store_path, "--json")
    assert code == 0
    doc = json.loads(out)
    cur = doc["topics"][T]["cursors"]["a"]
    assert cur["mark_delete"] == "2:0" and cur["ranges"] == 34 and cur["ledgers"] == 2
    assert cur["records"] >= 2 and cur["garbage_bytes"] >= 0 and cur["truncated"] is False
    code, out, _ = run("cursors", store_path, "--topic", T)
    assert code == 0
    assert out.splitlines() == ["cursor\tmark-delete\tranges\tledgers", f"{T}/a\t2:0\t34\t2", f"{T}/b\t2:0\t34\t2"]


def test_check_fix_cycle(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    assert run("check", store_path)[0] == 0
    rawlog.damage(store_path, rawlog.markers(store_path)[-1])
    code, out, _ = run("check", store_path)
    assert code == 1 and "broken-marker" in out and "corrupt-record" in out
    code, out, _ = run("check", store_path, "--fix", "--json")
    doc = json.loads(out)
    # clean now, but the fix rolled cursor a back past its damaged newest marker: a repair
    # that loses acks says how many flushes' and fails
    assert code == 1 and doc["clean"] and all(f["fixed"] for f in doc["findings"]) and doc["flushes_lost"] == 1
    assert run("check", store_path)[0] == 0


def test_check_fix_that_loses_acks_says_so_and_fails(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    rawlog.damage(store_path, rawlog.markers(store_path)[-1])
    code, out, _ = run("check", store_path, "--fix")
    assert code == 1
    assert "the store is clean, but the repair lost the acks of 1 flush(es)" in out
    assert "will be redelivered" in out


def test_dump_restore_dump_is_identical(store_path: Path, tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    first, second = tmp_path / "d1.jsonl", tmp_path / "d2.jsonl"
    assert run("dump", store_path, "-o", first)[0] == 0
    code, out, _ = run("restore", tmp_path / "restored", first)
    assert code == 0 and "4 cursors" in out
    assert run("dump", tmp_path / "restored", "-o", second)[0] == 0
    assert first.read_bytes() == second.read_bytes()
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert {"type": "batch", "topic": T, "cursor": "a", "position": "3:4", "batch_size": 8, "indexes": [1, 5]} in lines
    code, out, _ = run("dump", store_path, "--cursor", f"{T}/b", "--format", "csv")
    assert code == 0 and out.splitlines()[0] == "kind,topic,cursor,first,last,batch_size,indexes"
    assert all(f"{T},b," in row for row in out.splitlines()[1:])


def test_compact_and_copy(store_path: Path, tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    before = run("dump", store_path)[1]
    code, out, _ = run("compact", store_path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["bytes_after"] < doc["bytes_before"]
    assert all(c["records_after"] <= 3 for c in doc["cursors"])
    assert run("dump", store_path)[1] == before
    code, out, _ = run("copy", store_path, tmp_path / "snap.mdb")
    assert code == 0 and (tmp_path / "snap.mdb").is_file()
    assert run("dump", tmp_path / "snap.mdb")[1] == before
    assert run("check", tmp_path / "snap.mdb")[0] == 0


def test_compact_leaves_a_cursor_over_a_cap_lowered_since_its_flush(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    """The cap was lowered under a cursor's flushed state (7 ranges, cap 3) and nothing was
    flushed since: compaction writes what a flush would, so it leaves that cursor as it is
    and names it (its next flush writes the lowest 3 ranges); the other is rewritten."""
    from ackstore import testing

    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        capped, other = topic.cursor("c"), topic.cursor("d")
        capped.ack([Position(1, e) for e in range(1, 14, 2)])
        other.ack([Position(1, 2)])
        store.flush()
        capped.update_config(max_unacked_ranges_to_persist=3)  # persisted at once; no flush after it
        testing.crash(store)
    before = run("dump", store_path, "--cursor", f"{T}/c")[1]
    code, out, _ = run("compact", store_path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["over_cap"] == [f"{T}/c"] and [c["cursor"] for c in doc["cursors"]] == ["d"]
    assert run("dump", store_path, "--cursor", f"{T}/c")[1] == before  # 7 ranges still
    code, out, _ = run("compact", store_path)
    assert code == 0 and f"(the next flush writes the lowest ranges up to it): {T}/c" in out


def test_recover(store_path: Path, run, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    code, out, _ = run("recover", store_path, "--cursor", f"{T}/a", "--budget", "0", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ranges"] == 34 and doc["markers_skipped"] == 0 and doc["budget"] == 0
    # a small cursor: its two ledgers are in the one state marker the open reads (and checks)
    # straight into the small form, lazily or not: no ledger in the ack cache
    for load in ("lazy", "budget"):
        code, out, _ = run("recover", store_path, "--cursor", f"{T}/a", "--load", load, "--json")
        doc = json.loads(out)
        assert code == 0 and (doc["ranges"], doc["load"], doc["records_loaded"]) == (34, load, 2), doc
        assert doc["ledgers_in_memory"] == 0 and doc["bytes_read"] > 0, doc
    # a cursor of more ranges than the small form holds (its bound lowered to the pure twin's,
    # 8,192 runs): lazily its ledgers wait on disk
    from ackstore.cursor import small as small_form

    monkeypatch.setattr(small_form, "FORM_RUNS_FACTOR", 16)
    big = store_path.parent / "big"
    with AckStore.open(big) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.cursor("c").ack([Position(1, e) for e in range(0, 20_000, 2)])
    code, out, _ = run("recover", big, "--cursor", f"{T}/c", "--json")  # lazy, as AckStore.open
    lazy = json.loads(out)
    assert code == 0 and (lazy["ranges"], lazy["load"], lazy["ledgers_in_memory"]) == (9999, "lazy", 0)
    code, out, _ = run("recover", big, "--cursor", f"{T}/c", "--load", "budget", "--json")
    eager = json.loads(out)
    assert code == 0 and (eager["ranges"], eager["load"], eager["ledgers_in_memory"]) == (9999, "budget", 1)


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ackstore: error: "), err
    return lines[0]


def test_errors(store_path: Path, tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    code, _, err = run("stat", tmp_path / "missing")
    assert code == 2 and "does not exist" in _one_line_error(err)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    code, _, err = run("check", tmp_path / "plain")
    assert code == 1 and "no store at" in _one_line_error(err)
    code, _, err = run("recover", store_path, "--cursor", f"{T}/nope")
    assert code == 2 and "names no cursor of the store" in _one_line_error(err)
    code, _, err = run("recover", store_path, "--cursor", "nope")
    assert code == 2 and "TOPIC/SUBSCRIPTION" in _one_line_error(err)
    code, _, err = run("frobnicate")
    assert code == 2 and "No such command" in _one_line_error(err)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"ackstore-dump","format":1}\n{"type":"topic","topic":"x","ledgers":[[1,null]]}\n')
    code, _, err = run("restore", tmp_path / "r", bad)
    assert code == 1 and "cut short" in _one_line_error(err) and not (tmp_path / "r").exists()
    bad.write_text("not json\n")
    code, _, err = run("restore", tmp_path / "r", bad)
    assert code == 1 and "line 1 is not JSON" in _one_line_error(err)
    code, _, err = run("restore", store_path, bad)
    assert code == 1 and "not empty" in _one_line_error(err)


def test_newer_format_is_refused(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    rawlog.set_format(store_path, 99)
    code, _, err = run("stat", store_path)
    assert code == 1 and "format version 99" in _one_line_error(err)


@pytest.mark.parametrize("older", [9, 10, 11, 12])
def test_a_command_that_changes_nothing_leaves_an_older_store_at_its_format(store_path: Path, run, older) -> None:  # type: ignore[no-untyped-def]
    """A writer's open of an older store writes nothing until its first real write: a
    rewind refused, a delete of a cursor that does not exist, a delete answered "no", an
    open and close that changed nothing all leave the store at its format, so the older
    ackstore still opens it. The first write raises it (and makes the history database),
    in the same transaction."""
    _make(store_path)
    rawlog.set_format(store_path, older)
    attempts = [
        ("rewind", store_path, "--cursor", f"{T}/a", "--to", "0", "--yes"),
        ("delete-cursor", store_path, T, "nobody", "--yes"),
        ("delete-topic", store_path, "no-such-topic", "--yes"),
    ]
    for args in attempts:
        code, _, err = run(*args)
        assert code == 1, (args, err)
    declined = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "delete-cursor", str(store_path), T, "a"],
        input="n\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert declined.returncode == 1, declined.stderr
    with AckStore.open(store_path) as store:
        assert store.topic(T).cursor("a").ack_range_count > 0  # read, nothing changed
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == older
    with AckStore.open(store_path) as store:
        store.topic(T).cursor("a").ack(Position(5, 1))
    with AckStore.open(store_path, readonly=True) as store:
        assert store.format_version == FORMAT_VERSION and store.storage.history_db is not None


HOLD = """
import sys, time
from ackstore import AckStore
s = AckStore.open(sys.argv[1])
print("holding", flush=True); time.sleep(60)
"""


def test_compact_refuses_while_a_writer_holds_the_store_but_copy_works(store_path, tmp_path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        code, _, err = run("compact", store_path)
        assert code == 1 and "is held by a writer, pid" in _one_line_error(err)
        code, _, _ = run("copy", store_path, tmp_path / "live.mdb")
        assert code == 0 and (tmp_path / "live.mdb").stat().st_size > 0
    finally:
        holder.kill()
        holder.wait()


def test_real_subprocesses(store_path: Path) -> None:
    _make(store_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "check", str(store_path)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and "clean (4 cursors)" in done.stdout
    script = Path(sys.executable).parent / "ackstore"
    done = subprocess.run([str(script), "stat", str(store_path / "nope")], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_stat_shows_a_tracked_topics_last_confirmed_entry(store_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    _make(store_path)
    with AckStore.open(store_path) as store:
        store.topic(T).advance(5, 41)
    code, out, _ = run("stat", store_path)
    assert code == 0 and f"{T}: 4 ledgers, last confirmed 5:41, 2 cursors" in out  # 1 was trimmed
    code, out, _ = run("stat", store_path, "--json")
    doc = json.loads(out)["topics"]
    assert doc[T]["last_confirmed"] == "5:41" and doc[T + "-2"]["last_confirmed"] is None


def test_the_cli_reads_well(store_path: Path, tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    """One of each: singular nouns for one, --json before the command as after it, a
    header over the cursors' columns, compact saying the file keeps its size, a long name
    not echoed whole."""
    with AckStore.open(store_path) as store:
        topic = store.topic(T)
        topic.add_ledger(1)
        topic.cursor("a").ack([Position(1, 3)])
    code, out, _ = run("stat", store_path)
    assert code == 0 and ", 1 topic" in out and "1 ledger, 1 cursor" in out and "1 range, 1 ledger, " in out
    assert run("check", store_path)[1].strip() == f"{store_path}: clean (1 cursor)"
    assert run("--json", "cursors", store_path) == run("cursors", store_path, "--json")
    assert run("cursors", store_path)[1].splitlines()[0] == "cursor\tmark-delete\tranges\tledgers"
    code, out, _ = run("compact", store_path)
    assert code == 0 and "the file keeps its size" in out and "also shrinks" not in out
    code, _, err = run("recover", store_path, "--cursor", T + "/" + "x" * 1200)
    assert code == 2 and len(err) < 400, err
    dump = tmp_path / "d.jsonl"
    assert run("dump", store_path, "-o", dump)[0] == 0
    code, out, _ = run("restore", tmp_path / "r", dump)
    assert code == 0 and out.strip().endswith("1 topic, 1 cursor, 1 range, 0 batches, 0 deliveries")
