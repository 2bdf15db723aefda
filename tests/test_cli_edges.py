"""The ``ackstore`` tool at its edges: closed streams, broken pipes, a killed parent, names
that hold '/' or control characters. One line, no traceback, a meaningful exit status."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyroaring import BitMap

from ackstore import AckStore, Position

ROOT = Path(__file__).parent.parent
T = "persistent://a/b/t"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s"
    with AckStore.open(path) as s:
        topic = s.topic(T)
        topic.add_ledger(1)
        for name in ("x", "sub/with/slash", "new\nline"):
            topic.cursor(name).ack([Position(1, e) for e in range(0, 8000, 2)])
    return path


def _sh(command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a shell (for redirections like ``>&-``), the tool as ``ACK``."""
    tool = f"{sys.executable} -m ackstore.recovery"
    return subprocess.run(["bash", "-c", command.replace("ACK", tool)], capture_output=True, text=True, cwd=ROOT)


def _tool(*args: object) -> subprocess.CompletedProcess[str]:
    """The tool run as ``python -m ackstore.recovery ARGS``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def _clean(err: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 1, err


def test_closed_stdout_and_stdin(store: Path, tmp_path: Path) -> None:
    r = _sh(f"ACK stat {store} >&-")
    _clean(r.stderr)
    assert r.returncode in (0, 1)
    r = _sh(f"ACK restore {tmp_path / 'r'} - <&-")
    _clean(r.stderr)
    assert r.returncode == 1 and "dump" in r.stderr and not (tmp_path / "r").exists()


def test_a_reader_that_closes_the_output_early_ends_the_command_quietly(store: Path) -> None:
    """``ackstore dump S | head``: the reader took what it wanted; the command ends with exit
    0 and nothing on stderr, as ``cat`` would, and a full dump still comes out whole."""
    r = _sh(f"ACK dump {store} | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}")
    assert (r.returncode, r.stderr) == (0, "")
    whole = _sh(f"ACK dump {store} | wc -l")
    assert whole.returncode == 0 and int(whole.stdout) > 4000


def test_no_command_is_a_usage_error_with_the_help_and_the_help_names_every_command() -> None:
    """A bare ``ackstore`` (or ``ackstore-spark``) is a usage error (exit 2) that shows the
    help on stderr; ``--help`` exits 0 and lists every command, history and rewind among them."""
    from ackstore.recovery.cli import cli

    bare = _tool()
    assert bare.returncode == 2 and bare.stdout == "" and "Commands:" in bare.stderr
    shown = _tool("--help")
    assert shown.returncode == 0
    listed = {line.split()[0] for line in shown.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(cli.commands) and {"history", "rewind"} <= listed
    assert "history" in shown.stdout.split("Commands:")[0] and "rewind" in shown.stdout.split("Commands:")[0]
    spark = subprocess.run(
        [sys.executable, "-m", "ackstore.tools.spark_cli"], capture_output=True, text=True, timeout=60
    )
    assert spark.returncode == 2 and "Commands:" in spark.stderr


@pytest.mark.parametrize(
    "command,reads",
    [
        (
            "generate",
            {"--master", "--env-archive", "--env-cache", "--python-prefix", "--scale", "--seed", "--plant-faults"},
        ),
        (
            "pipeline",
            {"--master", "--env-archive", "--env-cache", "--python-prefix", "--scale", "--seed", "--plant-faults"},
        ),
        ("compact", {"--master", "--env-archive", "--env-cache", "--python-prefix"}),
        ("audit", {"--master", "--env-archive", "--env-cache", "--python-prefix"}),
        ("pack-env", {"--env-cache", "--python-prefix"}),
    ],
)
def test_each_spark_command_shows_the_options_it_reads(command: str, reads: set[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.tools.spark_cli", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    shown = {line.split()[0].rstrip(",") for line in r.stdout.splitlines() if line.strip().startswith("--")}
    assert shown - {"-h", "--help"} == reads, shown


def test_a_writer_command_on_a_held_store_says_what_an_operator_can_do(store: Path) -> None:
    """compact (or a delete, rewind, check --fix) while a process holds the store: one line
    naming the pid and what to do, never a library argument."""
    with AckStore.open(store):
        for args in (("compact", store), ("check", store, "--fix"), ("delete-cursor", store, T, "x", "--yes")):
            r = _tool(*args)
            assert r.returncode == 1 and r.stderr.count("\n") == 1, (args, r.stderr)
            assert f"held by a writer, pid {os.getpid()}" in r.stderr and "readonly=True" not in r.stderr
            assert "the commands that only read (stat, cursors, check, dump, copy, history) work" in r.stderr


@pytest.mark.slow
def test_cursor_names_with_a_slash_and_control_characters(store: Path) -> None:
    r = _sh(f"ACK recover {store} --cursor '{T}/sub/with/slash'")
    assert r.returncode == 0, r.stderr
    assert "3,999 ranges" in r.stdout
    r = _sh(f"ACK cursors {store}")
    lines = r.stdout.splitlines()
    assert lines[0] == "cursor\tmark-delete\tranges\tledgers"  # a header, then a line a cursor
    assert len(lines) == 4 and f"{T}/new\\nline\t1:0\t3999\t1" in lines  # the newline cannot forge a line
    r = _sh(f"ACK stat {store}")
    assert "new\\nline: mark-delete" in r.stdout and "\nline:" not in r.stdout


def _interruptible() -> None:
    """In a child before it runs the tool: Ctrl-C's default action, whatever the suite inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 300 cursors of ~28,000 scattered acks each (a salvage of it takes long
    enough to be interrupted), built once: each test works on a copy of it."""
    src = tmp_path_factory.mktemp("big") / "store"
    with AckStore.open(src, sync=False) as s:
        topic = s.topic(T)
        topic.add_ledger(1)
        for i in range(300):
            topic.cursor(f"c{i}").ack_entries(1, BitMap(range(i, 200_000, 7)))
    return src


def _salvage_under_way(tmp_path: Path, big_store: Path, **popen: object) -> subprocess.Popen[str]:
    """``ackstore salvage`` of a copy of ``big_store``, started and seen building its target
    (``NEW.salvaging`` exists); skips the test when it finished before that was seen."""
    src = tmp_path / "big"
    shutil.copytree(big_store, src)
    tool: subprocess.Popen[str] = subprocess.Popen(
        [sys.executable, "-m", "ackstore.recovery", "salvage", str(src), str(tmp_path / "new")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        text=True,
        **popen,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "new.salvaging").exists() and tool.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if tool.poll() is not None:
        pytest.skip("the salvage finished before it could be interrupted")  # pragma: no cover
    return tool


@pytest.mark.slow
def test_killing_the_tool_kills_its_worker(tmp_path: Path, big_store: Path) -> None:
    """The command runs in a forked worker; a kill -9 of the tool must not leave the worker
    to finish the job unseen (a salvage target appearing after the caller saw it die)."""
    tool = _salvage_under_way(tmp_path, big_store, stderr=subprocess.DEVNULL)
    os.kill(tool.pid, signal.SIGKILL)
    tool.wait()
    time.sleep(2.0)  # long enough for an orphaned worker to finish a salvage of this size
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_leaves_nothing(tmp_path: Path, big_store: Path) -> None:
    """Ctrl-C reaches the tool and its worker (one process group, as from a terminal): one
    line, exit 1, no traceback, and the salvage it interrupted leaves nothing behind."""
    # as from a terminal: a suite started in the background of a shell without job control
    # runs with SIGINT ignored, which the tool would inherit (and then finish the salvage)
    tool = _salvage_under_way(
        tmp_path, big_store, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_interruptible
    )
    os.killpg(tool.pid, signal.SIGINT)
    _, err = tool.communicate(timeout=60)
    _clean(err)
    assert tool.returncode == 1 and "aborted" in err
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.salvaging").exists()


CTRL_C_IN_IMPORT = r"""
import sys
class CtrlC:  # a Ctrl-C while the tool imports its modules (here: the moment click is imported)
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, CtrlC())
from ackstore import launch
getattr(launch, sys.argv[1])()
"""


@pytest.mark.parametrize("script", ["ackstore", "ackstore_spark"])
def test_ctrl_c_while_the_tool_imports_is_one_line(script: str) -> None:
    r = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_IMPORT, script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr == f"{script.replace('_', '-')}: aborted\n"


@pytest.mark.slow
def test_sigterm_is_one_line_and_leaves_nothing(tmp_path: Path, big_store: Path) -> None:
    """SIGTERM to the tool alone (a service manager stopping it): the worker is told, cleans
    up what it was building as Ctrl-C does, and the tool says so in one line, exit 1."""
    tool = _salvage_under_way(tmp_path, big_store, stderr=subprocess.PIPE)
    tool.send_signal(signal.SIGTERM)
    _, err = tool.communicate(timeout=60)
    _clean(err)
    assert tool.returncode == 1 and "aborted (SIGTERM)" in err, err
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.salvaging").exists()


@pytest.mark.slow
def test_sigterm_during_restore_leaves_no_restoring_directory(tmp_path: Path) -> None:
    """A restore of 30 cursors of ~28,000 scattered acks (a dump of 29 MB: the restore runs
    for seconds, hundreds of times the 5 ms the test looks every) is stopped by SIGTERM."""
    src, dump = tmp_path / "store", tmp_path / "dump.jsonl"
    with AckStore.open(src, sync=False) as s:
        topic = s.topic(T)
        topic.add_ledger(1)
        for i in range(30):
            topic.cursor(f"c{i}").ack_entries(1, BitMap(range(i, 200_000, 7)))
    subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "dump", str(src), "-o", str(dump)],
        check=True,
        cwd=ROOT,
    )
    tool = subprocess.Popen(
        [sys.executable, "-m", "ackstore.recovery", "restore", str(tmp_path / "new"), str(dump)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "new.restoring").exists() and tool.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if tool.poll() is not None:
        pytest.skip("the restore finished before it could be interrupted")  # pragma: no cover
    tool.send_signal(signal.SIGTERM)
    _, err = tool.communicate(timeout=60)
    _clean(err)
    assert tool.returncode == 1 and "aborted (SIGTERM)" in err, err
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.restoring").exists()


def test_os_errors_say_what_was_done_to_which_path_and_what_to_do(tmp_path: Path) -> None:
    import errno

    from ackstore.recovery.exit_path import describe_os_error

    afile = tmp_path / "afile"
    afile.write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.recovery", "restore", str(afile / "new"), os.devnull],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"ackstore: error: restore {afile / 'new'}") and "Not a directory" in r.stderr
    assert "check the path" in r.stderr and "[Errno" not in r.stderr
    full = describe_os_error(OSError(errno.ENOSPC, "No space left on device", "/x/out.partial"), "dump")
    assert full == (
        "dump /x/out.partial: No space left on device; free space on that file system (or give the command "
        "another path) and run it again"
    )
    locked = describe_os_error(PermissionError(errno.EACCES, "Permission denied", "/s/ackstore.lock"), "stat")
    assert locked.startswith("stat /s/ackstore.lock: Permission denied; run the command as a user")


NO_SPARK = r"""
import sys
class NoSpark:  # an install without the Spark extras
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoSpark())
from ackstore.tools.spark_cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ackstore_spark_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", NO_SPARK, "pipeline", str(tmp_path / "out"), "--scale", "small"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "ackstore-spark: error: pyspark is not installed; install the Spark extras: pip install 'ackstore[spark]'"
    ]


def test_version() -> None:
    from ackstore import __version__
    from ackstore.storage.codecs import IMPLEMENTATION
    from ackstore.storage.records import FORMAT_VERSION

    for tool, line in (
        ("ackstore.recovery", f"ackstore {__version__} (store format {FORMAT_VERSION}, {IMPLEMENTATION} codecs)"),
        ("ackstore.tools.spark_cli", f"ackstore-spark {__version__}"),
    ):
        code = (
            f"import sys; from {tool.replace('.recovery', '.recovery.cli')} import main; sys.exit(main(['--version']))"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == line, (r.stdout, r.stderr)


def test_make_demo_and_make_run_end_with_what_a_person_needs(tmp_path: Path) -> None:
    """The demo says where its store is; a pipeline run ends with a few lines (what was
    audited, each phase's time, the planted faults) before the report's path and the verdict,
    not the whole summary."""
    from ackstore.tools.spark_cli import _summary_lines

    store = tmp_path / "demo"
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.tools.demo", "--path", str(store), "--ledgers", "3", "--entries", "2000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith(f"the store is at {store} ")
    summary = {
        "stores": 24,
        "cursors": 48,
        "ranges": 10_727,
        "generate_seconds": 8.13,
        "compact_seconds": 2.5,
        "audit_seconds": 6.5,
        "planted_faults": [{"a": 1}, {"b": 2}],
        "planted_missed": [],
        "false_positives": [],
        "unexpected_cursors": [],
        "by_scenario": [{"x": 1}] * 50,
    }
    assert _summary_lines(summary) == [
        "audit: 24 stores, 48 cursors, 10,727 ranges; generate 8.1 s, compact 2.5 s, audit 6.5 s",
        "faults planted: 2, found 2; false positives: 0; cursors no spec made: 0",
    ]


def test_a_signal_passed_on_to_a_worker_that_is_gone_raises_nothing() -> None:
    """The tool passes its SIGTERM or SIGHUP on to its worker; the wait that reaps the worker
    runs the handler on its way out when the signal came meanwhile, so the worker is gone by
    then: the handler says nothing (a traceback there replaced the command's one line, and
    lost the worker's status). Signal 0 to a reaped child: nothing is sent anywhere."""
    from recovery.cli import _forward

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)  # (gone: reaped)
    _forward(child.pid, 0, None)


@pytest.mark.slow
def test_sigterm_to_the_process_group_during_salvage_leaves_nothing(tmp_path: Path, big_store: Path) -> None:
    """A service manager's stop sends SIGTERM to the whole process group: the worker gets it
    twice (directly, and passed on by the tool). The first starts its cleanup; the second
    must not cut it short: one line, exit 1, neither NEW nor NEW.salvaging left, at every
    moment tried."""
    for attempt in range(2):
        where = tmp_path / str(attempt)
        where.mkdir()
        tool = _salvage_under_way(
            where, big_store, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_interruptible
        )
        time.sleep(0.05 * attempt)
        os.killpg(tool.pid, signal.SIGTERM)
        _, err = tool.communicate(timeout=60)
        _clean(err)
        assert tool.returncode == 1 and "aborted" in err, err
        assert not (where / "new").exists() and not (where / "new.salvaging").exists(), attempt


CTRL_C_IN_PYTHON_M = r"""
import runpy, sys
MODULE = sys.argv[1]
class CtrlC:  # a Ctrl-C the moment `python -m ackstore.recovery` imports one of its modules
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, CtrlC())
sys.argv = ["-m", "stat", sys.argv[2]]
runpy.run_module("ackstore.recovery", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["lmdb", "click", "ackstore.recovery.cli", "ackstore.store", "pyroaring"])
def test_ctrl_c_while_python_m_imports_the_tool_is_one_line(store: Path, module: str) -> None:
    """``python -m ackstore.recovery`` imports the package first (which imports nothing
    heavy), then the tool in its ``__main__``: a Ctrl-C while any of the tool's modules
    loads is one line and exit 1, never a traceback."""
    r = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_PYTHON_M, module, str(store)], capture_output=True, text=True, timeout=60
    )
    assert (r.returncode, r.stderr) == (1, "ackstore: aborted\n")


ABORTS = r"""
import os, sys
from ackstore.recovery import cli
def main(argv):  # C code that writes to the standard error, then aborts (LMDB's assert on a damaged page)
    os.write(2, b"mdb.c:1234: Assertion 'IS_LEAF(mp)' failed in mdb_cursor_next()\n")
    os.abort()
cli.main = main
sys.exit(cli.guarded([]))
"""


def test_what_c_code_prints_before_an_abort_is_folded_into_the_one_line() -> None:
    r = subprocess.run([sys.executable, "-c", ABORTS], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ackstore: error: the store's file is damaged"), r.stderr
    assert "SIGABRT: mdb.c:1234: Assertion 'IS_LEAF(mp)' failed" in r.stderr


LEAVES = r"""
import os, signal, sys
from pathlib import Path
from ackstore.recovery import cli
from ackstore.storage.fileio import temporary
def main(argv):  # a worker killed with a temporary file made, before its cleanup can run
    with temporary(Path(argv[0])) as tmp:
        tmp.write_text("half")
        os.kill(os.getpid(), signal.SIGSEGV)
cli.main = main
sys.exit(cli.guarded([sys.argv[1]]))
"""


def test_a_worker_killed_by_a_signal_leaves_no_temporary_file(tmp_path: Path) -> None:
    partial = tmp_path / "dest.mdb.partial"
    r = subprocess.run([sys.executable, "-c", LEAVES, str(partial)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "SIGSEGV" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not partial.exists()


@pytest.mark.slow
def test_every_command_walks_the_file_before_lmdb_reads_it(tmp_path: Path) -> None:
    """A store of five cursors of scattered acks, five of its pages zeroed in turn: every
    reading command ends in one line (exit 0 or 1, never a traceback, never LMDB's own
    text), leaves no temporary file, and what stat says agrees with what cursors says;
    whenever check finds the file's structure damaged, so do stat and cursors."""
    import random

    src = tmp_path / "s"
    rng = random.Random(52)
    with AckStore.open(src) as s:
        topic = s.topic(T)
        topic.add_ledger(1)
        topic.close_ledger(1, 1_000_000)
        topic.add_ledger(2)
        curs = [topic.cursor(f"c{i}") for i in range(5)]
        for _ in range(5):
            for cur in curs:
                cur.ack([Position(1, rng.randrange(1_000_000)) for _ in range(2000)])
            s.flush()
    pages = (src / "data.mdb").stat().st_size // 4096
    hits = 0  # pages whose damage check saw in the file's structure: the rule below is exercised
    for page in sorted(rng.sample(range(2, pages), 8)[:5]):
        damaged = tmp_path / f"z{page}"
        shutil.copytree(src, damaged)
        with open(damaged / "data.mdb", "r+b") as f:
            f.seek(page * 4096)
            f.write(bytes(4096))
        codes = {}
        for command in ("stat", "cursors", "check", "dump", "copy"):
            extra = {"dump": ["-o", str(tmp_path / f"d{page}")], "copy": [str(tmp_path / f"c{page}.mdb")]}.get(
                command, []
            )
            r = _tool(command, damaged, *extra)
            _clean(r.stderr)
            assert "mdb.c" not in r.stderr and r.returncode in (0, 1), (page, command, r.stderr)
            codes[command] = (r.returncode, "B-tree is damaged" in r.stderr + r.stdout)
            if command == "check":
                assert "run 'ackstore check'" not in r.stdout, r.stdout  # check's advice is a step after it
        assert codes["stat"] == codes["cursors"], (page, codes)
        if codes["check"][1]:
            assert codes["stat"] == (1, True), (page, codes)
            hits += 1
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")], page
    assert hits >= 2, hits


def test_a_file_that_is_no_store_is_said_to_be_none_and_a_cut_one_says_what_works(store: Path, tmp_path: Path) -> None:
    """A six-byte text file (or a store directory holding one as data.mdb) is not a store,
    and every command says so, suggesting no repair; a real data file cut to a few bytes is
    damaged past salvage, and the advice is a copy, never a salvage that would refuse."""
    text = tmp_path / "six.txt"
    text.write_text("hello\n")
    folder = tmp_path / "sixdir"
    folder.mkdir()
    (folder / "data.mdb").write_text("hello\n")
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "data.mdb").write_bytes((store / "data.mdb").read_bytes()[:3000])
    for target in (text, folder):
        for command in ("stat", "cursors", "check", "salvage"):
            extra = [str(tmp_path / f"new-{command}")] if command == "salvage" else []
            r = _tool(command, target, *extra)
            _clean(r.stderr)
            assert r.returncode == 1 and "not" in r.stderr and "salvage" not in r.stderr, (command, r.stderr)
    for command in ("stat", "check"):
        r = _tool(command, cut)
        said = r.stderr + r.stdout
        assert r.returncode == 1 and "restore the store from a copy" in said and "salvage" not in said, said
