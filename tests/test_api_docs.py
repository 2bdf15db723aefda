"""The API reference builds offline from the docstrings, with warnings as errors (``make docs``),
and a docstring pdoc cannot read fails it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ackstore

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def _build_reference(out: Path) -> None:
    """``python -m ackstore.tools.apidoc OUT``, which must succeed."""
    r = subprocess.run(
        [sys.executable, "-m", "ackstore.tools.apidoc", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_api_reference_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    _build_reference(tmp_path)
    again = tmp_path / "again"
    _build_reference(again)
    differ = [
        str(p.relative_to(again))
        for p in again.rglob("*")
        if p.is_file() and p.read_bytes() != (tmp_path / p.relative_to(again)).read_bytes()
    ]
    assert not differ, f"the reference is not the same twice: {differ} (a memory address, an unordered set?)"
    page = (tmp_path / "ackstore.html").read_text()
    for name in ackstore.__all__:  # every public name has its entry
        assert f'id="{name}"' in page, name
    for module in (
        "cursor/facade",
        "store",
        "storage/records",
        "dispatch/dispatcher",
        "recovery/cli",
        "tools/spark_jobs",
    ):
        assert (tmp_path / "ackstore" / f"{module}.html").exists(), module


def test_a_docstring_pdoc_cannot_read_fails_the_build(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "brokendoc"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('def f(x: \'NoSuchType\') -> None:\n    """A function."""\n')
    code = (
        "import sys, warnings, pdoc; warnings.simplefilter('error'); "
        f"pdoc.pdoc('brokendoc', output_directory={str(tmp_path / 'out')!r})"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(pkg.parent)}
    )
    assert r.returncode != 0 and "NoSuchType" in r.stderr
