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


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference, built once for the tests that read it."""
    out = tmp_path_factory.mktemp("reference")
    _build_reference(out)
    return out


# the reference's build is the docs' and does not depend on which twins run: it is slow
# (a subprocess building every page), so the pure-Python pass and `make check` leave it out
@pytest.mark.slow
def test_the_api_reference_builds_with_warnings_as_errors(reference: Path) -> None:
    page = (reference / "ackstore.html").read_text()
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
        assert (reference / "ackstore" / f"{module}.html").exists(), module


@pytest.mark.stress
def test_the_api_reference_is_the_same_when_built_again(reference: Path, tmp_path: Path, long_run: bool) -> None:
    """A second build in another process (another hash seed) writes the same bytes. A build
    takes ~20 s: this one runs with ``--long`` (``make stress``)."""
    if not long_run:
        pytest.skip("the second build of the reference runs with --long (make stress)")
    again = tmp_path / "again"
    _build_reference(again)
    differ = [
        str(p.relative_to(again))
        for p in again.rglob("*")
        if p.is_file() and p.read_bytes() != (reference / p.relative_to(again)).read_bytes()
    ]
    assert not differ, f"the reference is not the same twice: {differ} (a memory address, an unordered set?)"


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


def _undocumented() -> list[str]:
    """Every public name of a module the reference does not mark internal that has no
    docstring: module members, and each class's own members (``@private`` ones are left out
    of the reference, and so here; a re-exported variable is checked where it is defined)."""
    import importlib

    import pdoc.doc
    from ackstore.tools.apidoc import internal, modules, resolve_names

    names = modules()
    resolve_names(names)
    docs = {name: pdoc.doc.Module(importlib.import_module(name)) for name in names}
    # a re-exported variable is documented where it is defined: pdoc cannot say where that is
    defined = {(v.name, id(v.default_value)) for m in docs.values() for v in m.variables if (v.docstring or "").strip()}
    missing: list[str] = []

    def documented(member: pdoc.doc.Doc) -> bool:  # type: ignore[type-arg]
        if (member.docstring or "").strip():
            return True
        return isinstance(member, pdoc.doc.Variable) and (member.name, id(member.default_value)) in defined

    for name in names:
        if internal(name):
            continue
        for member in docs[name].members.values():
            if isinstance(member, pdoc.doc.Module) or "@private" in (member.docstring or ""):
                continue
            if not documented(member):
                missing.append(f"{name}.{member.qualname}")
            if isinstance(member, pdoc.doc.Class) and member.taken_from[0] == name:
                for own in member.own_members:
                    if own.name.startswith("_") or "@private" in (own.docstring or ""):
                        continue
                    if not documented(own):
                        missing.append(f"{name}.{own.qualname}")
    return missing


def test_every_name_a_user_may_call_has_a_docstring() -> None:
    """What the reference shows outside the modules it marks internal is documented, each
    name (a module's members and its classes' own); the internal ones' pages say so first."""
    assert _undocumented() == []


@pytest.mark.slow
def test_internal_modules_say_so_in_the_reference(reference: Path) -> None:
    from ackstore.tools.apidoc import INTERNAL_NOTE

    note = "Engine internals"
    assert INTERNAL_NOTE.startswith(f"**{note}**")
    for module in ("cursor/plan", "storage/records", "flush"):
        assert note in (reference / "ackstore" / f"{module}.html").read_text(), module
    for module in ("cursor/facade", "store", "stats", "tools/spark_jobs"):
        assert note not in (reference / "ackstore" / f"{module}.html").read_text(), module
