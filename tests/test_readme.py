"""The README's quick start runs as written and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_quick_start_runs_as_written_and_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import tempfile

    text = README.read_text()
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "README quick start", "exec"), {})
    assert list(tmp_path.iterdir()) == []
    lines = out.getvalue().splitlines()
    assert lines[0] == "7:1 7:2"
    assert lines[1] == "3 (Position(8, 100), Position(8, 199))"
    assert lines[2] == "66" and f"every dirty cursor: {lines[2]}" in text
    assert lines[3] == "3 {Position(7, 9): (10, frozenset({0, 3}))}"


def test_the_dead_letter_example_runs_as_written(tmp_path: Path) -> None:
    text = (README.parent / "docs" / "cursors.md").read_text()
    block = re.search(r"## Delivery counts and dead letters\n.*?```python\n(.*?)```", text, re.S)
    assert block is not None
    code = block.group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README dead letter", "exec"), {})
    assert out.getvalue().splitlines() == [
        "dead letter: 1:0 after 2 deliveries",
        "dead letter: 1:1 after 2 deliveries",
        "dead letter: 1:2 after 2 deliveries",
        "{} True",
    ]
