"""Every code block of the README and docs/ runs, or names only what exists.

- ``python`` blocks run as written (in a temporary directory);
- ``sh`` blocks and ``$ `` lines of console transcripts: a ``make`` target must be in the
  Makefile; an ``ackstore`` / ``ackstore-spark`` command must exist, with every option it
  names in that command's ``--help``;
- ``yaml`` blocks (alert rules): every ``ackstore_*`` metric they name is one the collector
  exports.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(kind: str) -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for i, m in enumerate(FENCE.finditer(page.read_text())):
            if m.group(1) == kind:
                out.append((f"{page.relative_to(ROOT)}#{i}", m.group(2)))
    return out


def test_the_pages_exist_and_the_readme_is_short() -> None:
    assert {p.name for p in PAGES} >= {
        "README.md",
        "architecture.md",
        "format.md",
        "operations.md",
        "spark.md",
        "reliability.md",
        "benchmarks.md",
        "cursors.md",
    }
    assert len((ROOT / "README.md").read_text().splitlines()) < 250
    for page in PAGES:  # users read these: no issue numbers, no session history
        assert not re.search(r"\bissue \d+|\bthis round\b|\bbefore this round\b", page.read_text(), re.I), page
    for page in PAGES:  # every relative link points at a file that exists
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), (page, target)


@pytest.mark.parametrize(("where", "code"), _blocks("python"), ids=[w for w, _ in _blocks("python")])
def test_python_blocks_run_as_written(where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = code.replace("/tmp/", f"{tmp_path}/")  # blocks that name a fixed path get a fresh one
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, where, "exec"), {"__name__": "__docs__"})


@cache
def _help(tool: str, sub: str) -> str:
    module = "ackstore.recovery" if tool == "ackstore" else "ackstore.tools.spark_cli"
    r = subprocess.run(
        [sys.executable, "-m", module, *([sub] if sub else []), "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACKSTORE_NO_FORK": "1"},
        timeout=60,
    )
    assert r.returncode == 0, (tool, sub, r.stderr)
    return r.stdout


def _commands() -> list[tuple[str, str]]:
    out = []
    for where, code in _blocks("sh") + _blocks(""):
        console = not where or any(line.startswith("$ ") for line in code.splitlines())
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line and not line.startswith("#"):
                out.append((where, line))
    return out


@pytest.mark.parametrize(("where", "line"), _commands(), ids=[f"{w}:{line[:40]}" for w, line in _commands()])
def test_commands_in_the_docs_exist(where: str, line: str) -> None:
    words = shlex.split(line.split("|")[0])
    while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
        words.pop(0)
    tool = Path(words[0]).name
    if tool == "make":
        targets = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M)
        assert all(w in targets for w in words[1:] if "=" not in w), (where, line, targets)
    elif tool in ("ackstore", "ackstore-spark"):
        sub = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
        text = _help(tool, sub)
        for option in [w.split("=")[0] for w in words if w.startswith("--")]:
            assert option in text, (where, line, option)
    elif tool == "spark-submit":
        assert (ROOT / "tools" / "spark_cli.py").exists()
    elif tool == "python":
        assert words[1] == "-m" and (ROOT / (words[2].replace(".", "/") + ".py")).exists(), (where, line)
    elif tool in ("head", "curl"):
        pass
    else:
        pytest.fail(f"{where}: a command the docs test does not know: {line!r}")


def test_alert_rules_name_metrics_the_collector_exports(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from ackstore import AckStore, Dispatcher
    from ackstore.metrics import AckStoreCollector
    from ackstore.testing import InMemoryLedgerReader

    with AckStore.open(tmp_path / "s") as store:
        topic = store.topic("t")
        topic.add_ledger(1)
        registry = CollectorRegistry()
        d = Dispatcher(topic.cursor("c"), InMemoryLedgerReader(topic))
        registry.register(AckStoreCollector(store, dispatchers=[d]))
        exported = set(re.findall(r"^(ackstore_\w+)", generate_latest(registry).decode(), re.M))
    named = {m for _, code in _blocks("yaml") for m in re.findall(r"\b(ackstore_\w+)", code)}
    assert named and named <= exported, named - exported


def test_the_spark_scales_page_says_what_each_scale_makes() -> None:
    """docs/spark.md's sentence on the scales names each one's specs, cursors, ledgers and
    entries as ``specs_for_scale`` makes them (the page said 20 specs where the run made 28)."""
    from ackstore.tools.spark_jobs import specs_for_scale

    page = " ".join((ROOT / "docs" / "spark.md").read_text().split())
    for scale in ("tiny", "small", "medium", "large"):
        specs = specs_for_scale(scale, 1)
        ((ledgers, entries),) = {(s.ledgers, s.entries) for s in specs}
        cursors = sum(s.cursors * s.topics for s in specs)
        said = f"{len(specs):,} specs, {cursors:,} cursors over {ledgers} ledgers of {entries:,}"
        assert said in page, (scale, said)


# a measured figure: a number (or a range of two) with the unit of a time, a ratio, bytes
# or a share; "1,000 cursors", "k = 50" and "1 MiB budget" are the workload, not figures
FIGURE = re.compile(r"(?<![\w.,])~?(\d[\d,]*(?:\.\d+)?)(?:-(\d[\d,]*(?:\.\d+)?))?\s?(x|µs|us|ms|B|KB|MB|%)(?![\w])")


def _prose_and_tables(text: str) -> tuple[list[str], set[str]]:
    """The page's prose lines (outside tables and code) and every figure its tables hold."""
    text = FENCE.sub("", text)
    prose, cells = [], set()
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            prose.append(line)
            header = []
            continue
        row = [cell.strip() for cell in line.strip().strip("|").split("|")]
        header = header or row
        for name, cell in zip(header, row, strict=False):
            cells.update(_figures(cell))
            if re.fullmatch(r"[\d,]+", cell) and re.search(r"\bB\b|bytes", name):
                cells.add(f"{cell}B")  # a column of bytes holds bare numbers
    return prose, cells


def _figures(text: str) -> list[str]:
    out = []
    for m in FIGURE.finditer(text):
        unit = "us" if m.group(3) == "µs" else m.group(3)
        out += [f"{n}{unit}" for n in m.group(1, 2) if n]
    return out


def test_every_figure_in_the_benchmarks_prose_is_in_its_tables() -> None:
    """A figure the prose of benchmarks.md gives is read from a table ``make bench-docs``
    writes into the same page: when the tables are written anew, a figure they no longer
    hold fails here until the prose follows (or drops it)."""
    prose, cells = _prose_and_tables((ROOT / "docs" / "benchmarks.md").read_text())
    assert len(cells) > 100 and {"x", "B", "us", "ms"} <= {re.sub(r"^[\d.,]+", "", c) for c in cells}  # tables read
    missing = [(line.strip()[:60], f) for line in prose for f in _figures(line) if f not in cells]
    assert missing == []


def test_the_figure_pattern_reads_ranges_and_units() -> None:
    assert _figures("0.2-0.5x the peer, 56-70 B a cursor, 2.3 µs, ~30% and 1,000 cursors") == [
        "0.2x",
        "0.5x",
        "56B",
        "70B",
        "2.3us",
        "30%",
    ]
