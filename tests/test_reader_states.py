"""A reader sees flushed states only: a read-only cursor (lazy and budget opens) and a
dump of a store a writer is flushing are each one flushed state, never parts of two.

The writer is another process (one environment per path per process) driven a step at
a time over a pipe, so nothing here depends on timing: each flush happens exactly
between the reads the test chooses."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from ackstore.recovery.dump import dump_lines
from pyroaring import BitMap

from ackstore import AckStore, Position, ReadOnlyError
from ackstore.cursor.lane import STATE_MAX_RUNS
from ackstore.cursor.small import set_form_chains

from .forms import end_form

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

LEDGERS = 15

WRITER = r"""
import dataclasses, json, sys
from pyroaring import BitMap
from ackstore import AckStore, CursorConfig
store = AckStore.open(sys.argv[1], sync=False)
topic = store.topic("t")
for ledger in range(int(sys.argv[4])):
    topic.add_ledger(ledger)
    topic.close_ledger(ledger, 1_000_000)
cfg = CursorConfig(max_individual_ack_cache_bytes=int(sys.argv[2]), full_marker_every=4)
extra = json.loads(sys.argv[6])  # a cursor's config beside cfg's, by name
curs = {n: topic.cursor(n, dataclasses.replace(cfg, **extra.get(n, {}))) for n in sys.argv[3].split(",")}
small = set(sys.argv[5].split(","))  # one growing range a ledger: a small cursor's state slots
r = 0

def state(cur):
    return {"md": str(cur.mark_delete_position), "props": cur.properties,
            "ranges": [[l, x] for l, x in cur.ledger_ranges()], "usage": dataclasses.astuple(cur.log_usage())}

for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "round":  # of the cursors named, or of every cursor
        r += 1
        for n, cur in curs.items():
            if arg and n not in arg:
                continue
            for ledger in range(int(sys.argv[4])):
                cur.ack_entries(ledger, range(1, r * 10 + 1) if n in small else range(r * 100 + 1, r * 100 + 41, 2))
            cur.set_property("round", r)
        store.flush()
        print(json.dumps({n: state(c) for n, c in curs.items() if not arg or n in arg}), flush=True)
    elif cmd == "form":  # acks in ledger 0 only and no property: a state the small form holds
        r += 1
        for cur in curs.values():
            cur.ack_entries(0, BitMap(range(1, r * 10 + 1)) | BitMap(range(r * 10 + 3, r * 10 + 60, 4)))
        store.flush()
        print(json.dumps({n: state(c) for n, c in curs.items()}), flush=True)
    elif cmd == "delete":
        topic.delete_cursor(arg[0])
        del curs[arg[0]]
        print("{}", flush=True)
store.close()
"""


@pytest.fixture
def parts_reader() -> Iterator[None]:
    """This process's cursors (the reader's) keep a chain of records in their parts, whose
    record reads and moves a test is about: with form chains off a reader does not read a
    cursor over a slot's bound into the small form (which reads every record at its open
    and none after)."""
    before = set_form_chains(False)
    yield
    set_form_chains(before)


class Writer:
    """The writer process: ``round()`` acks 20 entries of every ledger of every cursor (or
    of the cursors named) (``small``: extends one range a ledger instead, so the cursor
    stays small: every cursor, or the cursors named), sets the property ``round`` and
    flushes; keeps each cursor's flushed states."""

    def __init__(
        self,
        path: Path,
        budget: int,
        names: list[str],
        ledgers: int = LEDGERS,
        small: bool | list[str] = False,
        configs: dict[str, dict[str, int]] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(path),
                str(budget),
                ",".join(names),
                str(ledgers),
                ",".join(names if small is True else small or []),
                json.dumps(configs or {}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.states: dict[str, list[Any]] = {n: [] for n in names}
        self.usages: dict[str, tuple[int, ...]] = {}

    def _say(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the writer died"
        return dict(json.loads(answer))

    def round(self, *names: str) -> None:
        self._keep(self._say(" ".join(["round", *names])))

    def form(self) -> None:
        """Every cursor acks in ledger 0 only and sets no property (a state in the small
        form), then the writer flushes."""
        self._keep(self._say("form"))

    def _keep(self, said: dict[str, Any]) -> None:
        for name, state in said.items():
            self.usages[name] = tuple(state.pop("usage"))  # (the writer's log_usage() after that flush)
            self.states[name].append(state)

    def delete(self, name: str) -> None:
        self._say(f"delete {name}")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def _state(cur: Any) -> dict[str, Any]:
    snap = cur.snapshot()
    return {
        "md": str(snap.mark_delete_position),
        "props": snap.properties,
        "ranges": [[ledger, [list(r) for r in ranges]] for ledger, ranges in snap.ranges],
    }


def _ranges(cur: Any) -> list[Any]:
    return [[ledger, [list(r) for r in ranges]] for ledger, ranges in cur.ledger_ranges()]


@pytest.mark.parametrize("load,budget", [("lazy", 1 << 20), ("budget", 1 << 20), ("budget", 1)])
def test_a_reader_cursor_is_one_flushed_state_while_the_writer_flushes(tmp_path: Path, load: str, budget: int) -> None:
    """The reader touches half the ledgers, the writer flushes, the reader reads the whole
    cursor: each read equals one state the writer flushed, never older than the last."""
    writer = Writer(tmp_path / "s", budget, ["c"])
    try:
        writer.round()
        with AckStore.open(tmp_path / "s", readonly=True, load=load) as store:
            cur = store.topic("t").cursor("c")
            seen = 0
            for _ in range(24):
                for ledger in range(LEDGERS // 2):  # decoded (or swapped in) at this state
                    cur.is_acked((ledger, 101))
                writer.round()
                flushed = [s["ranges"] for s in writer.states["c"]]
                for got in (_ranges(cur), _state(cur)["ranges"]):
                    assert got in flushed, "a read-only cursor mixed flushed states"
                    at = flushed.index(got)
                    assert at >= seen, "a reader went back to an older flush"
                    seen = at
                snap = _state(cur)
                assert snap["props"] == {"round": flushed.index(snap["ranges"]) + 1}, "properties of another flush"
                assert cur.ack_range_count == sum(len(x) for _, x in snap["ranges"])
    finally:
        writer.close()


@pytest.mark.parametrize("small", [False, True], ids=["parts", "small form"])
def test_a_readers_first_read_after_its_open_is_the_newest_flush(
    tmp_path: Path, small: bool, request: pytest.FixtureRequest
) -> None:
    """A reader's cursors, opened one at a time and all at once, answer their first read from
    the state their open read while the writer wrote nothing since, and from the writer's
    newest flush once it flushed between the open and the read (the open's transaction is
    where a reader's cursor looks from: never a read older than the writer's newest flush)."""
    if not small:  # (the parts: the reader keeps the chain of records there)
        request.getfixturevalue("parts_reader")
    names = ["a", "b", "c"]
    writer = Writer(tmp_path / "s", 1 << 20, names, ledgers=3 if small else LEDGERS, small=small)
    try:
        writer.round()
        writer.round()  # (not small: 40 ranges in each of 15 ledgers, past the form's)
        for flushes_between in (0, 1, 2):
            with AckStore.open(tmp_path / "s", readonly=True) as store:
                topic = store.topic("t")
                one = topic.cursor("a")
                every = topic.open_cursors()
                opened = {name: cur for name, cur in every.items() if name != "a"} | {"a": one}
                for _ in range(flushes_between):
                    writer.round()
                for name, cur in sorted(opened.items()):
                    newest = writer.states[name][-1]
                    assert _ranges(cur) == newest["ranges"], (name, flushes_between)
                    assert _state(cur) == newest, (name, flushes_between)
                    assert (cur._core.small is not None) == small, "the cursor is not in the form the test is about"
    finally:
        writer.close()


def test_a_small_cursors_reader_moves_on_when_the_writer_wrote_over_its_state_slot(tmp_path: Path) -> None:
    """A small cursor's ledgers wait in its state marker after a lazy read-only open; by the
    time the reader reads them the writer has flushed twice, so the slot that marker was in
    holds a newer state: the read moves the reader to the writer's newest flush, whole, and
    reads that one (never a missing record, never a mix, never back to an older flush)."""
    writer = Writer(tmp_path / "s", 1 << 20, ["c"], ledgers=3, small=True)
    try:
        writer.round()
        with AckStore.open(tmp_path / "s", readonly=True) as store:
            cur = store.topic("t").cursor("c")
            end_form(cur)  # (the reader's parts, which this is about)
            assert cur._core._pages.cache.swapped == {0, 1, 2}  # waiting in the state marker
            seen = 0
            for _ in range(6):
                writer.round()
                writer.round()  # the reader's state marker is written over in its slot
                flushed = [s["ranges"] for s in writer.states["c"]]
                moves = cur._core._pages.generation
                for got in (_ranges(cur), _state(cur)["ranges"]):
                    assert got in flushed, "a read-only cursor mixed flushed states"
                    at = flushed.index(got)
                    assert at >= seen and at > 0, "a reader went back to an older flush"
                    seen = at
                assert cur._core._pages.generation > moves, "the reader did not move to a newer flush"
                assert at == len(flushed) - 1 and cur.stats().recovery.markers_skipped == 0
    finally:
        writer.close()


def test_a_reader_follows_the_writers_flushes_in_the_small_form_and_leaves_it_with_the_writer(
    tmp_path: Path,
) -> None:
    """A cursor whose flushed state is in the small form is opened into it by a reader too:
    each read answers from the form of the writer's newest flush (never an older one, no
    parts built), a change is refused with nothing changed, a property the form holds too;
    when the writer's state leaves the form (more ranges than it holds) the reader's parts
    take the newest flush. ``log_usage()`` is the form's too, as of the newest flush (the
    writer's own answer), and the parts' after the form ends, at the same flush."""
    writer = Writer(tmp_path / "s", 1 << 20, ["c", "d"], ledgers=1)
    try:
        for _ in range(3):
            writer.form()
        with AckStore.open(tmp_path / "s", readonly=True) as store:
            cur, other = store.topic("t").cursor("c"), store.topic("t").cursor("d")
            assert cur._core.small is not None and other._core.small is not None
            for _ in range(4):
                writer.form()
                newest = writer.states["c"][-1]
                assert _ranges(cur) == newest["ranges"] and str(cur.mark_delete_position) == newest["md"]
                assert cur.ack_range_count == len(newest["ranges"][0][1]) and cur.properties == {}
                first = newest["ranges"][0][1][0][0]
                assert cur.is_acked(Position(0, first)) and not cur.is_acked(Position(0, first - 1))
                assert cur.delivery_count(Position(0, first - 1)) == 0 and not cur.is_blocked_on_ack_state_persistent
                assert cur._core.small is not None and cur._core._unbuilt, "a read the form serves built the parts"
                with pytest.raises(ReadOnlyError):
                    cur.ack_entries(0, BitMap([first - 1]))
                assert not cur.is_acked(Position(0, first - 1)) and cur._core.small is not None
            usages = set()
            for _ in range(3):
                writer.round("d")  # (20 ranges more, and a property: in the form still)
                usage = dataclasses.astuple(other.log_usage())  # the form's: it catches up first
                assert usage == writer.usages["d"] and other._core.small is not None
                usages.add(usage)
            assert len(usages) > 1, "the states' usages do not tell the flushes apart"
            newest = writer.states["d"][-1]
            served = other.snapshot()  # served by the form, at the newest flush
            assert other._core.small is not None
            end_form(other)  # the parts, at the newest flush
            assert dataclasses.astuple(other.log_usage()) == usage
            snap = other.snapshot()
            assert snap == served
            assert other._core.small is None and [[x, [list(r) for r in y]] for x, y in snap.ranges] == newest["ranges"]
            for r in range(11, 11 + STATE_MAX_RUNS // 20 + 1):  # a property and 20 more ranges each: past the cap
                writer.round()
                newest = writer.states["c"][-1]
                assert str(cur.mark_delete_position) == newest["md"]
                assert _ranges(cur) == newest["ranges"] and cur.properties == newest["props"] == {"round": r}
            assert cur._core.small is None and len(newest["ranges"][0][1]) > STATE_MAX_RUNS
            cur._check()
            other._check()
    finally:
        writer.close()


def test_a_reader_opens_and_follows_states_under_log_keys_in_the_small_form(tmp_path: Path) -> None:
    """A cursor that keeps history writes each state under its log key, and so does one whose
    PIP-299 cut a slot does not take (600 ranges persisted of more, a slot taking 512): a
    reader opens both into the small form, as the writer's open does, answers as the
    writer's newest flush (the persisted cut for the second), and follows the writer's
    flushes in the form."""
    configs = {"kept": {"history_seconds": 3600}, "cut": {"max_unacked_ranges_to_persist": 600}}
    writer = Writer(tmp_path / "s", 1 << 22, ["kept", "cut"], ledgers=1, configs=configs)
    try:
        for _ in range(32):  # 20 ranges a round: 640 held
            writer.round()
        with AckStore.open(tmp_path / "s", readonly=True) as store:
            topic = store.topic("t")
            kept, cut = topic.cursor("kept"), topic.cursor("cut")
            assert kept._core.small is not None and cut._core.small is not None
            for _ in range(3):
                for name, cur in (("kept", kept), ("cut", cut)):
                    newest = writer.states[name][-1]
                    persisted = [[0, newest["ranges"][0][1][:600]]]
                    assert _ranges(cur) == (persisted if name == "cut" else newest["ranges"])
                    assert cur.properties == newest["props"] and str(cur.mark_delete_position) == newest["md"]
                    assert cur._core.small is not None and cur._core._unbuilt, "the reader left the form"
                    assert cur.is_blocked_on_ack_state_persistent is False
                    cur._check()
                assert cut.ack_range_count == 600 < len(writer.states["cut"][-1]["ranges"][0][1])
                writer.round()  # (a property changed: the cut state is written again)
    finally:
        writer.close()


@pytest.mark.parametrize("load", ["lazy", "budget"])
def test_a_small_cursors_reader_sees_each_new_flush_while_a_wider_cursors_log_stands_still(
    tmp_path: Path, load: str
) -> None:
    """Cursor "c" lives in its state slots only (no record under a log key); cursor "a",
    made before it, has records under log keys at higher sequences than c's. The writer
    flushes c alone: before each read the reader asks whether c's log moved, and it did
    (its state slots), though no log key of c's and nothing of a's changed, so every read
    is of the newest flush."""
    writer = Writer(tmp_path / "s", 1 << 20, ["a", "c"], ledgers=3, small=["c"])
    try:
        writer.round()
        for _ in range(3):
            writer.round("a")  # a's log keys climb past c's sequences
        with AckStore.open(tmp_path / "s", readonly=True, load=load) as store:
            cur = store.topic("t").cursor("c")
            assert store.topic("t").cursor("a").cursor_id < cur.cursor_id
            for r in range(5, 8):
                writer.round("c")
                flushed = [s["ranges"] for s in writer.states["c"]]
                assert _ranges(cur) == flushed[-1] == [[ledger, [[1, 10 * r]]] for ledger in range(3)]
                assert cur.properties == {"round": r}
    finally:
        writer.close()


def test_dump_writes_each_cursor_as_one_flushed_state_and_skips_one_deleted_meanwhile(tmp_path: Path) -> None:
    """The dump is pulled line by line while the writer flushes between cursors and
    deletes a cursor after the dump listed it: every dumped cursor is one flushed state
    (its ``round`` property names the flush its ranges come from) and the deleted one is
    left out and named, the dump still whole."""
    names = [f"c{i}" for i in range(6)]
    writer = Writer(tmp_path / "s", 1 << 20, names)
    try:
        writer.round()
        with AckStore.open(tmp_path / "s", readonly=True, verify="loaded") as store:
            lines = []
            for obj in dump_lines(store):
                lines.append(obj)
                if obj["type"] == "topic":
                    writer.delete("c3")  # listed, not yet dumped
                if obj["type"] in ("topic", "cursor"):
                    for _ in range(3):  # flushes between a cursor's first line and its ranges
                        writer.round()
    finally:
        writer.close()
    end = lines[-1]
    assert end["type"] == "end" and end["skipped"] == [["t", "c3"]]
    assert end["cursors"] == 5
    dumped: dict[str, dict[str, Any]] = {}
    for obj in lines:
        if obj["type"] == "cursor":
            dumped[obj["cursor"]] = {"props": obj["properties"], "md": obj["mark_delete"], "ranges": {}}
        elif obj["type"] == "range":
            ledger, first = map(int, obj["first"].split(":"))
            last = int(obj["last"].split(":")[1])
            dumped[obj["cursor"]]["ranges"].setdefault(ledger, []).append([first, last])
    assert sorted(dumped) == ["c0", "c1", "c2", "c4", "c5"]
    for name, got in dumped.items():
        state = writer.states[name][got["props"]["round"] - 1]
        assert state["props"] == got["props"]
        assert {ledger: ranges for ledger, ranges in state["ranges"]} == got["ranges"], (
            f"cursor {name}: ranges of another flush than its round={got['props']['round']}"
        )


RESIDUES = r"""
import json, sys
from pyroaring import BitMap
from ackstore import AckStore, CursorConfig, Position
ledgers, entries = int(sys.argv[2]), int(sys.argv[3])
store = AckStore.open(sys.argv[1], sync=False)
topic = store.topic("t")
for ledger in range(1, ledgers + 1):
    topic.add_ledger(ledger)
    topic.close_ledger(ledger, entries)
topic.add_ledger(ledgers + 1)
cur = topic.cursor("c", CursorConfig(full_marker_every=4))

def flush(r):
    cur.set_property("round", r)
    store.flush()
    return {"md": str(cur.mark_delete_position), "props": cur.properties, "count": cur.ack_range_count,
            "ranges": [[l, [list(x) for x in rs]] for l, rs in cur.ledger_ranges()],
            "batches": sorted([str(p), n, sorted(ix)] for p, (n, ix) in cur.partial_batches().items()),
            "counts": sorted([str(p), n] for p, n in cur.delivery_counts().items())}

for ledger in range(1, ledgers + 1):  # every 7th entry; residue class 6 is left for batches and counts
    cur.ack_entries(ledger, BitMap(range(0, entries, 7)))
print(json.dumps(flush(0)), flush=True)
for line in sys.stdin:
    r = int(line)  # one more residue class acked in every ledger, a batch and a delivery more
    for ledger in range(1, ledgers + 1):
        cur.ack([Position(ledger, e) for e in range(r, entries, 7)])
        cur.ack_batch_index(Position(ledger, 6), 8, [r])
        cur.record_deliveries([Position(ledger, 13)])
    print(json.dumps(flush(r)), flush=True)
store.close()
"""


@pytest.mark.parametrize(
    "ledgers,entries,load",
    [(10, 1_000, "lazy"), (10, 1_000, "budget"), (3, 21, "lazy"), (3, 21, "budget")],
    ids=["large-lazy", "large-budget", "small-lazy", "small-budget"],
)
def test_a_readers_cursor_read_ledger_by_ledger_answers_from_the_newest_flush_whole(
    tmp_path: Path, ledgers: int, entries: int, load: str
) -> None:
    """The writer acks one more residue class of every ledger at each flush; after flush i
    the reader counts the acked entries of ledgers 1..i with ``is_acked``, ledger by ledger,
    then reads every other figure: each read answers from flush i, the writer's newest when
    it began (a reader's cursor holding ledgers read at an older flush moves whole), never
    a ledger of one flush beside a ledger of another."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RESIDUES, str(tmp_path / "s"), str(ledgers), str(entries)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    flushed = [json.loads(proc.stdout.readline())]
    try:
        with AckStore.open(tmp_path / "s", readonly=True, load=load) as store:
            cur = store.topic("t").open_cursors()["c"]
            for r in range(1, 7):
                proc.stdin.write(f"{r}\n")
                proc.stdin.flush()
                state = json.loads(proc.stdout.readline())
                flushed.append(state)
                expect = {
                    ledger: sum(first <= e <= last for first, last in ranges for e in range(entries))
                    for ledger, ranges in state["ranges"]
                }
                md = Position.parse(state["md"])
                for ledger in range(1, r + 1):
                    got = sum(cur.is_acked(Position(ledger, e)) for e in range(entries))
                    below = sum(Position(ledger, e) <= md for e in range(entries))
                    assert got == expect.get(ledger, 0) + below, f"flush {r}: ledger {ledger} of another flush"
                assert cur.ack_range_count == state["count"]
                assert str(cur.mark_delete_position) == state["md"]
                assert cur.properties == {"round": r}
                assert _ranges(cur) == state["ranges"]
                batches = sorted([str(p), n, sorted(ix)] for p, (n, ix) in cur.partial_batches().items())
                assert batches == state["batches"]
                assert sorted([str(p), n] for p, n in cur.delivery_counts().items()) == state["counts"]
                assert _state(cur)["ranges"] == state["ranges"]
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


TRIMMED_READER = r"""
import sys
from ackstore import AckStore, Position, ReadOnlyError
with AckStore.open(sys.argv[1], readonly=True) as store:
    cur = store.topic("t").cursor("c")
    print(cur.is_acked(Position(1, 4)), flush=True)
    sys.stdin.readline()
    print(cur.is_acked(Position(1, 4)), cur.mark_delete_position, store.topic("t").ledgers()[0][0], flush=True)
"""


def test_a_reader_moving_to_a_flush_under_a_trimmed_directory_reads_what_it_must(tmp_path: Path) -> None:
    """The writer trims the ledger the reader's cursor has its mark-delete position in, then
    an eviction writes a ledger's record back (the cursor's log changed, no new marker): the
    reader moves to the newest state against the trimmed directory, which moves its
    mark-delete position into the next ledger and reads that ledger from its record. That
    read ran inside the transaction the move looked in, and waited for itself (a reader
    that never answered); it now answers."""
    from ackstore import CursorConfig

    path = tmp_path / "s"
    with AckStore.open(path, sync=False) as store:
        topic = store.topic("t")
        topic.add_ledger(0)
        topic.close_ledger(0, 10)
        topic.add_ledger(1)
        topic.close_ledger(1, 1000)
        topic.add_ledger(2)
        cur = topic.cursor("c", CursorConfig(max_individual_ack_cache_bytes=300))
        cur.ack([Position(0, 3), Position(0, 5)] + [Position(1, e) for e in range(1, 1000, 3)])
        store.flush()
        reader = subprocess.Popen(
            [sys.executable, "-c", TRIMMED_READER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert reader.stdout is not None and reader.stdout.readline().strip() == "True"
            topic.trim_ledgers(1)
            before = cur.stats().write_backs
            cur.ack([Position(1, 2)])
            cur.ack([Position(2, e) for e in range(0, 3000, 2)])  # evicts ledger 1, dirty: written back
            assert cur.stats().write_backs > before
            out, _ = reader.communicate("go\n", timeout=60)
        finally:
            reader.kill()
        assert out.split() == ["True", "1:-1", "1"]


RECORD_WRITER = r"""
import sys
from ackstore import AckStore, CursorConfig, Position
from ackstore.cursor.lane import set_state_bound
from ackstore.storage.records import log_key
set_state_bound(-1)  # the marker layout (no small form): ledger records, one of which a reader names
store = AckStore.open(sys.argv[1], sync=False)
topic = store.topic("t")
for ledger in (1, 2, 3):
    topic.add_ledger(ledger)
    topic.close_ledger(ledger, 1000)
topic.add_ledger(4)
cur = topic.cursor("c", CursorConfig(full_marker_every=1, max_unacked_ranges_to_persist=0))
cur.ack([Position(ledger, e) for ledger in (1, 2, 3) for e in range(1, 400, 2)])  # records, not a state slot
store.flush()
print("ready", flush=True)
k = 0
log_db = store._storage.log_db
for line in sys.stdin:
    named = log_key(cur.cursor_id, cur._core._pages.index[2].seq)  # the record of ledger 2 a reader now names
    if line.strip() == "pass":  # M passes ledger 2, whose state goes
        cur.ack_cumulative(Position(2, 999))
        store.flush()
    while store._storage.read(lambda txn: txn.get(named, db=log_db)) is not None:  # flushes until a trim took it
        k += 1
        if line.strip() == "pass":
            cur.set_property("k", k)
        else:  # a new base record of ledger 2 (a partial batch changed)
            cur.ack_batch_index(Position(2, 200 + 2 * k), 4, [0])
        store.flush()
    print("done", flush=True)
store.close()
"""


@contextmanager
def _record_writer(path: Path) -> Iterator[subprocess.Popen[str]]:
    """The ``RECORD_WRITER`` process on ``path``, ready; it ends cleanly after the block."""
    writer = subprocess.Popen(
        [sys.executable, "-c", RECORD_WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        yield writer
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0


class _Fetching:
    """A reader's storage that has the writer change the log just before each of the first
    ``times`` reads of a record: the record the reader's state names is gone when it looks."""

    def __init__(self, storage: Any, writer: subprocess.Popen[str], command: str, times: int) -> None:
        self.storage, self.writer, self.command, self.times, self.calls = storage, writer, command, times, 0

    def read(self, fn: Any) -> Any:
        self.calls += 1
        if self.calls <= self.times:
            assert self.writer.stdin is not None and self.writer.stdout is not None
            self.writer.stdin.write(self.command + "\n")
            self.writer.stdin.flush()
            assert self.writer.stdout.readline().strip() == "done"
        return self.storage.read(fn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)


@pytest.mark.parametrize("command,times", [("rewrite", 1), ("rewrite", 4), ("pass", 1)])
def test_a_reader_whose_record_is_trimmed_as_it_reads_moves_on_or_says_it_fell_behind(
    tmp_path: Path, command: str, times: int, parts_reader: None
) -> None:
    """The record a reader's state names is trimmed between the reader's look at the log and
    its read of the record: it moves to the writer's newest flush, reading the state and the
    record in one transaction (no trim can come between them, however often the writer
    trims), and answers from there (the ledger read back, or gone below M)."""
    with _record_writer(tmp_path / "s") as writer, AckStore.open(tmp_path / "s", readonly=True) as store:
        cur = store.topic("t").cursor("c")
        pages = cur._core._pages
        assert cur.is_acked(Position(1, 1)) and 2 in pages.swapped
        fetching = _Fetching(pages.storage, writer, command, times)
        pages.storage = fetching
        assert cur.is_acked(Position(2, 5))  # read back from the newer record, or below M
        assert fetching.calls == 1  # the read the trim came before; the move read the rest
        if command == "rewrite":
            assert not cur.is_acked(Position(2, 6))
            assert cur.batch_acked_indexes(Position(2, 202)) == frozenset({0})
        else:
            assert cur.mark_delete_position == Position(3, -1) and 2 not in pages.swapped


def test_a_readers_log_usage_whose_marker_is_trimmed_again_and_again_answers_as_of_the_newest(
    tmp_path: Path,
) -> None:
    """The writer trims the marker a reader's cursor stands on just before each of the
    reader's next five looks: ``log_usage`` reads the newest state and its usage in one
    transaction the second time, so no trim can come between them; the cursor moves there."""
    with _record_writer(tmp_path / "s") as writer, AckStore.open(tmp_path / "s", readonly=True) as store:
        cur = store.topic("t").cursor("c")
        core = cur._core
        end_form(cur)  # (the parts' path: the form's reads its state and usage in one transaction)
        first = cur.log_usage()
        stood_on = core._chain.marker_seq
        storage = store._storage
        fetching = store._storage = _Fetching(storage, writer, "rewrite", 5)
        try:
            usage = cur.log_usage()
        finally:
            store._storage = storage
        assert fetching.calls == 2  # the look at the trimmed marker, then one at the newest
        assert core._chain.marker_seq > stood_on
        assert usage == cur.log_usage() != first
        assert usage.records >= 4 and usage.live_bytes > 0
        assert cur.batch_acked_indexes(Position(2, 202)) == frozenset({0})


NEW_CURSOR_READER = r"""
import sys
from ackstore import AckStore, Position
store = AckStore.open(sys.argv[1], readonly=True, load=sys.argv[2])
topic = store.topic("t")
print(topic.cursor("a").mark_delete_position, flush=True)  # the topic's directory, read at its open
for line in sys.stdin:
    cur = topic.cursor(line.strip())
    print(cur.mark_delete_position, cur.is_acked(Position(0, 33)), len(list(cur.ack_ranges())), flush=True)
"""


@pytest.mark.parametrize("load", ["lazy", "budget"])
def test_a_cursor_a_reader_opens_later_is_read_with_the_directory_of_its_flush(tmp_path: Path, load: str) -> None:
    """The reader read the topic's directory when the open ledger was confirmed up to entry
    27; the writer then confirmed up to 35, made a cursor at "latest" (its mark-delete
    position 0:35), confirmed up to 40 and acked two entries past 35. The reader opening
    that cursor reads its state and the directory in one transaction, and shows it as the
    writer flushed it. Read against the reader's older directory it showed 0:27 and no
    range, a state no flush wrote."""
    path = tmp_path / "s"
    with AckStore.open(path, sync=False) as store:
        topic = store.topic("t")
        topic.add_ledger(0)
        topic.cursor("a")
        topic.advance(0, 27)
        store.flush()
        reader = subprocess.Popen(
            [sys.executable, "-c", NEW_CURSOR_READER, str(path), load],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert reader.stdout is not None and reader.stdout.readline().split() == ["0:-1"]
            topic.advance(0, 35)
            late = topic.cursor("c", initial_position="latest")  # flushed before it returns
            assert late.mark_delete_position == Position(0, 35)
            topic.advance(0, 40)
            late.ack_entries(0, [37, 38])  # a range past the reader's old directory's bound
            store.flush()
            out, _ = reader.communicate("c\n", timeout=60)
        finally:
            reader.kill()
    assert out.split() == ["0:35", "True", "1"]


def test_a_read_whose_record_is_trimmed_every_time_it_looks_answers_from_one_snapshot(
    tmp_path: Path, parts_reader: None
) -> None:
    """A whole-cursor read (``snapshot``, ``partial_batches``) reads a swapped-out ledger's
    record without keeping it; the writer trims that record before every one of the reader's
    record reads, 100 times in a row (a writer flushing in a tight loop against a reader the
    machine keeps waiting). The read moves to the newest flush once, then runs again holding
    one read transaction for the whole of it: nothing it reads can be trimmed under it, so
    it answers (it gave up with ReaderBehindError after 16 moves)."""
    with _record_writer(tmp_path / "s") as writer, AckStore.open(tmp_path / "s", readonly=True) as store:
        cur = store.topic("t").cursor("c")
        pages = cur._core._pages
        assert cur.is_acked(Position(1, 1)) and 2 in pages.swapped
        fetching = _Fetching(pages.storage, writer, "rewrite", 100)
        pages.storage = fetching
        snap = cur.snapshot()
        batches = cur.partial_batches()
        assert fetching.calls <= 2 * 2 * 3  # two reads, each run at most twice (the second in one snapshot), 3 ledgers
    for answer in (snap.partial_batches, batches):  # one flushed state: the batches of the writer's rounds 1..k
        k = len(answer)
        assert k >= 1 and answer == {Position(2, 200 + 2 * j): (4, frozenset({0})) for j in range(1, k + 1)}
    odd = [(e, e) for e in range(1, 400, 2)]
    assert snap.mark_delete_position == Position(1, -1) and snap.ranges == [(1, odd), (2, odd), (3, odd)]


def test_a_pinned_block_reads_one_snapshot_on_its_thread_only(store_path: Path) -> None:
    """``Environment.pinned``: every read of the thread in the block runs in one read
    transaction, so a write committed meanwhile is not seen there until the block ends;
    another thread's reads see it at once; a block inside another shares its transaction;
    the transaction ends with the block, also when the block raises (no reader slot held)."""
    import os
    import threading

    with AckStore.open(store_path) as store:
        storage = store.storage

        def seen() -> int:
            return storage.read(lambda txn: txn.id())

        store.topic("t").add_ledger(1)  # (a write transaction commits)
        with storage.pinned():
            before = seen()
            store.topic("t").close_ledger(1, 10)
            assert seen() == before
            with storage.pinned():
                assert seen() == before
            other: list[int] = []
            thread = threading.Thread(target=lambda: other.append(seen()))
            thread.start()
            thread.join()
            assert other == [before + 1]
            assert str(os.getpid()) in storage.env.readers()
        assert seen() == before + 1
        with pytest.raises(RuntimeError), storage.pinned():
            raise RuntimeError
        store.topic("t").add_ledger(2)
        assert seen() == before + 2 and str(os.getpid()) not in storage.env.readers()
