"""The Python environment the Spark jobs ship to executors that have only Python and Java.

lmdb, pyroaring and msgpack are compiled, so a ``--py-files`` zip cannot carry them (and
PySpark puts only ``.zip``/``.egg``/``.jar`` py-files on the executors' path). PySpark's
"Python package management" guide ships such packages as a packed virtual environment
through ``spark.archives``: each executor unpacks it into its working directory as
``./environment`` and runs ``./environment/bin/python``. We pack with venv-pack (pinned
in the ``spark`` extra): it is the tool that guide shows, it makes one ordinary tarball
that Spark unpacks itself, and nothing runs on the executors to bootstrap it (a PEX file
unpacks itself into a cache on every executor's first run, and conda-pack needs conda).

What goes in: a fresh venv holding copies of exactly the files the driver imports, the
``ackstore`` package and its ``ackstore.recovery`` and ``ackstore.tools`` as the driver has them (an editable
checkout included) and the installed distributions of their runtime dependencies (from
each one's RECORD: the same versions, no network, no build). pyspark itself stays out:
executors take it from their own Spark. The archive is named by a digest of the Python
version, the platform, those distributions' versions and the packages' source files, and
kept in a cache directory: it is built once and reused until one of them changes.

The venv's ``bin/python`` is a symlink to the driver's base interpreter, so executors need
a Python of the same minor version at the same path; ``python_prefix`` (venv-pack's
``--python-prefix``) points it elsewhere, e.g. ``/usr`` for ``/usr/bin/python3``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import shutil
import sys
import sysconfig
import tempfile
import time
import venv
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "ENV_NAME",
    "PACKAGES",
    "RUNTIME",
    "default_cache_dir",
    "env_key",
    "build_env_archive",
    "is_local_master",
    "where_imported",
    "executor_environment",
    "versions",
]

ENV_NAME = "environment"
"""the directory name executors unpack the archive as (``spark.archives`` ``PATH#ENV_NAME``)"""
PACKAGES = ("ackstore", "ackstore.recovery", "ackstore.tools")
"""the project's packages, copied from where the driver imports them"""
RUNTIME = ("lmdb", "msgpack", "pyroaring", "numpy")
"""the distributions executors need (numpy is optional: ackstore decodes without it, slower)"""


def default_cache_dir() -> Path:
    """``$ACKSTORE_CACHE`` or ``$XDG_CACHE_HOME/ackstore`` (default ``~/.cache/ackstore``)."""
    if os.environ.get("ACKSTORE_CACHE"):
        return Path(os.environ["ACKSTORE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ackstore"


def is_local_master(master: str | None) -> bool:
    """True for the masters that run tasks in this machine's processes: none, ``local``, ``local[N]``,
    ``local[*]``, ``local[N, F]`` (they need no shipped environment)."""
    return master is None or master == "local" or master.startswith("local[")


def _distributions() -> list[metadata.Distribution]:
    dists = []
    for name in RUNTIME:
        try:
            dists.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            if name != "numpy":
                raise
    return dists


def _package_dirs() -> list[Path]:
    import importlib

    return [Path(importlib.import_module(name).__file__ or "").parent for name in PACKAGES]


def _installed_as(root: Path) -> Path:
    """Where a package directory goes in site-packages: recovery/ and tools/ of the checkout
    install inside the ackstore package."""
    return Path("ackstore", root.name) if root.name in ("recovery", "tools") else Path(root.name)


def _source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def env_key(python_prefix: str | None = None) -> str:
    """The digest that names an archive: Python, platform, dependency versions, sources."""
    h = hashlib.sha256()
    base = getattr(sys, "_base_executable", sys.executable)
    h.update(f"{sys.version_info[:2]} {sysconfig.get_platform()} {base} {python_prefix}".encode())
    for dist in _distributions():
        h.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
    for root in _package_dirs():
        for path in _source_files(root):
            h.update(str(_installed_as(root) / path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _copy_distribution(dist: metadata.Distribution, site: Path) -> int:
    """Copy a distribution's files (its RECORD) into ``site``; scripts outside it are left."""
    n = 0
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if ".." in parts or "__pycache__" in parts:
            continue
        src = Path(str(dist.locate_file(file)))
        if not src.is_file():
            continue
        dest = site / Path(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        n += 1
    return n


def build_env_archive(
    cache_dir: Path | None = None,
    python_prefix: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """The archive for this driver's code and dependencies: reused from ``cache_dir`` when
    one with the same digest exists, else built there (a few seconds). Returns its path."""
    import venv_pack

    cache = cache_dir or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"ackstore-env-{env_key(python_prefix)}.tar.gz"
    if out.exists():
        log(f"env: reusing {out} ({out.stat().st_size:,} B)")
        return out
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ackstore-env-", dir=cache) as tmp:
        env = Path(tmp) / ENV_NAME
        venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
        site = env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        for dist in _distributions():
            _copy_distribution(dist, site)
        for root in _package_dirs():
            shutil.copytree(root, site / _installed_as(root), ignore=shutil.ignore_patterns("__pycache__"))
        partial = Path(tmp) / "partial.tar.gz"
        venv_pack.pack(prefix=str(env), output=str(partial), python_prefix=python_prefix, verbose=False)
        os.replace(partial, out)
    log(f"env: built {out} ({out.stat().st_size:,} B) in {time.perf_counter() - started:.1f} s")
    return out


def where_imported(_: object = None) -> dict[str, str]:
    """What this Python process runs and imports ackstore and lmdb from (run on executors)."""
    import platform
    import socket

    import lmdb

    import ackstore

    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "ackstore": str(Path(ackstore.__file__ or "").parent),
        "lmdb": str(Path(lmdb.__file__ or "").parent),
    }


def executor_environment(spark: object, tasks: int | None = None) -> list[dict[str, str]]:
    """``where_imported`` as the executors see it: one small job over ``tasks`` tasks
    (default: the default parallelism), distinct answers."""
    sc = spark.sparkContext  # type: ignore[attr-defined]
    n = tasks or sc.defaultParallelism
    seen = sc.parallelize(range(n), n).map(where_imported).collect()
    return [dict(t) for t in sorted({tuple(sorted(d.items())) for d in seen})]


def versions() -> dict[str, str]:
    """The versions a report states: Python, ackstore, and the libraries it runs on."""
    import platform

    out = {"python": platform.python_version()}
    for name in ("ackstore", "pyspark", *RUNTIME):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
