"""The wheel a team installs: no C sources in it, a stripped extension when a compiler
built one, and, built without a compiler, a pure wheel (``py3-none-any``) that installs and
runs a workload on the pure-Python twins."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.slow  # builds the extension

WORKLOAD = r"""
import sys, tempfile
from ackstore import AckStore, Position
from ackstore.storage import codecs
print(codecs.IMPLEMENTATION)
with AckStore.open(tempfile.mkdtemp() + "/s") as store:
    topic = store.topic("t")
    topic.add_ledger(1)
    cur = topic.cursor("c")
    cur.ack([Position(1, e) for e in range(0, 1000, 3)])
    store.flush()
with AckStore.open(store.path, readonly=True) as store:
    print(store.topic("t").cursor("c").ack_range_count)
"""


def _build(tmp: Path, env: dict[str, str]) -> Path:
    """A wheel of a copy of the sources (the checkout stays clean), built by the project's
    build backend in this environment (no build isolation: nothing is downloaded)."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".*", "out", "build", "*.egg-info", "*.so", "__pycache__"))
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp / 'dist')!r}))"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=src, env={**os.environ, **env}, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / "dist" / r.stdout.split()[-1]


def test_a_wheel_holds_no_sources_and_a_stripped_extension(tmp_path: Path) -> None:
    wheel = _build(tmp_path, {})
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".c")], names
    (native,) = [n for n in names if n.startswith("ackstore/_native") and n.endswith(".so")]
    data = zipfile.ZipFile(wheel).read(native)
    if sys.platform.startswith("linux"):
        assert b".symtab" not in data, "the extension is not stripped"
    assert "py3-none-any" not in wheel.name


def test_a_wheel_built_without_a_compiler_is_pure_and_runs(tmp_path: Path) -> None:
    wheel = _build(tmp_path, {"CC": "false", "LDSHARED": "false"})
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".c"))], names
    target = tmp_path / "installed"
    zipfile.ZipFile(wheel).extractall(target)
    # only the wheel and the dependencies: no .pth of the checkout's editable install
    paths = [str(target), *site.getsitepackages()]
    code = f"import sys; sys.path[:0] = {paths!r}; exec({WORKLOAD!r})"
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["python", "333"]  # the pure twins; entry 0 moved the mark-delete
