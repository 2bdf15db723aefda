"""The benchmark tables made from suites run each in a process of its own (``make
bench-docs``): the cases of every saved run in one table, the docs' block rewritten only
by a run of every group it has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.tables import load_runs, main


def _case(group: str, name: str, median: float, **extra: Any) -> dict[str, Any]:
    return {"group": group, "name": name, "stats": {"median": median}, "extra_info": extra}


def _save(directory: Path, suite: str, cases: list[dict[str, Any]]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{suite}.json").write_text(json.dumps({"benchmarks": cases}))


def _docs(path: Path, groups: list[str]) -> Path:
    rows = "\n".join(f"| {g} | x | 1.00 ms |  | baseline |  |  |  |" for g in groups)
    path.write_text(f"# t\n\n<!-- begin ratios -->\n\n| group | case |\n|---|---|\n{rows}\n\n<!-- end ratios -->\n")
    return path


def test_the_runs_of_two_suites_make_one_ratio_table(tmp_path: Path, capsys: Any) -> None:
    runs = tmp_path / "runs"
    _save(runs, "test_bench_a", [_case("a", "test_base", 0.004, baseline=True), _case("a", "test_ours", 0.001)])
    _save(runs, "test_bench_b", [_case("b", "test_base", 0.002, baseline=True, bytes=100), _case("b", "test_x", 0.004)])
    assert len(load_runs(runs)) == 4
    docs = _docs(tmp_path / "bench.md", ["a", "b"])
    assert main([str(runs), "--docs", str(docs)]) == 0
    text = docs.read_text()
    assert "| a | ours | 1.00 ms |  | 4.00x |" in text
    assert "| b | x | 4.00 ms |  | 0.50x |" in text
    assert "| a | base | 4.00 ms |  | baseline |" in text
    assert "ours" in capsys.readouterr().out


def test_a_run_without_every_group_of_the_docs_leaves_its_table(tmp_path: Path, capsys: Any) -> None:
    runs = tmp_path / "runs"
    _save(runs, "test_bench_a", [_case("a", "test_base", 0.004, baseline=True), _case("a", "test_ours", 0.001)])
    docs = _docs(tmp_path / "bench.md", ["a", "b"])
    before = docs.read_text()
    assert main([str(runs), "--docs", str(docs)]) == 0
    assert docs.read_text() == before
    assert "left out 1 of its groups (b)" in capsys.readouterr().err


def test_a_directory_without_runs_and_a_bad_call_are_said(tmp_path: Path, capsys: Any) -> None:
    assert main([str(tmp_path)]) == 1
    assert "holds no benchmark runs" in capsys.readouterr().err
    assert main([]) == 2
    assert "usage: python -m benchmarks.tables" in capsys.readouterr().err
