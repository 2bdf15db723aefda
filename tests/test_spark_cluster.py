"""The Spark jobs on a real standalone cluster (master + worker on 127.0.0.1), and the
environment archive they ship to its bare executors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ackstore.tools.spark_env import build_env_archive, env_key

from .spark_cluster import Cluster, standalone_cluster

pytestmark = pytest.mark.slow  # subprocesses, Spark or long campaigns: make check leaves them out

ROOT = Path(__file__).parent.parent
BIN = Path(sys.executable).parent


def _driver_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def test_the_archive_is_built_once_and_reused(tmp_path: Path) -> None:
    logs: list[str] = []
    first = build_env_archive(tmp_path, log=logs.append)
    mtime = first.stat().st_mtime_ns
    assert build_env_archive(tmp_path, log=logs.append) == first and first.stat().st_mtime_ns == mtime
    assert logs[0].startswith("env: built") and logs[1].startswith("env: reusing")
    assert env_key("/usr") != env_key()  # another interpreter prefix: another archive
    with tarfile.open(first) as tar:
        names = set(tar.getnames())
        python = tar.getmember("bin/python3")
    for needed in (
        "ackstore/__init__.py",
        "ackstore/tools/spark_jobs.py",
        "ackstore/recovery/cli.py",
        "lmdb/__init__.py",
    ):
        assert f"lib/python3.{sys.version_info[1]}/site-packages/{needed}" in names, needed
    assert not any("pyspark/" in n or "__pycache__" in n for n in names)  # executors take pyspark from Spark
    assert python.issym()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c


@pytest.mark.stress
@pytest.mark.parametrize("form", ["ackstore-spark", "spark-submit"])
def test_pipeline_on_a_standalone_cluster_with_bare_executors(
    cluster: Cluster, tmp_path: Path, form: str, long_run: bool
) -> None:
    """The tiny pipeline through ``ackstore-spark --master spark://...`` (and the README's
    spark-submit form) with a relative OUTDIR: the verdict and digests hold, the tasks ran
    on the worker, and the executors imported ackstore and lmdb from the shipped
    environment, not from this checkout. The default run takes the first form (~40 s with
    the cluster's start); ``--long`` (``make stress``) adds the spark-submit one."""
    if form == "spark-submit" and not long_run:
        pytest.skip("the spark-submit form runs with --long (make stress)")
    run = tmp_path / "run"
    run.mkdir()
    env = _driver_env()
    args = ["pipeline", "relout", "--scale", "tiny", "--env-cache", str(tmp_path / "cache")]
    if form == "spark-submit":
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        argv = [str(BIN / "spark-submit"), "--master", cluster.url, str(ROOT / "tools" / "spark_cli.py"), *args]
    else:
        argv = [str(BIN / "ackstore-spark"), *args, "--master", cluster.url]
    before = {a["id"] for a in cluster.state()["completedapps"]}
    proc = subprocess.run(argv, cwd=run, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = run / "relout"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "PASS" and summary["mismatched_or_unclean"] == [] and summary["unreadable"] == []
    assert summary["cursors"] == 14 and summary["master"] == cluster.url  # 7 scenarios x 2 cursors
    assert summary["restored"] == summary["restored_ok"] == 2  # the bad deploy's cursors, restored on the executors
    assert len(list((out / "snapshots").glob("*.mdb"))) == 7  # written where the driver said, not in the worker
    apps = [a for a in cluster.state()["completedapps"] + cluster.state()["activeapps"] if a["id"] not in before]
    assert [a["name"] for a in apps] == ["ackstore"]
    app_dir = cluster.work_dir / apps[0]["id"]
    assert list(app_dir.glob("*/stderr")), "no executor of this run ran on the worker"
    for e in summary["executors"]:
        assert e["executable"] == f"{app_dir}/{Path(e['executable']).relative_to(app_dir)}", e
        assert e["executable"].endswith("/environment/bin/python"), e
        for module in ("ackstore", "lmdb"):
            assert Path(e[module]).is_relative_to(app_dir) and "/environment/lib/" in e[module], e
        assert not Path(e["ackstore"]).is_relative_to(ROOT), e  # (a path's, not a string's prefix)
    report = (out / "report.md").read_text()
    assert f"master {cluster.url}" in report and "## What compaction did" in report


@pytest.mark.parametrize("bad", ["missing.tar.gz"])
def test_a_missing_env_archive_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    argv = ["audit", str(tmp_path / "o"), "--env-archive", str(tmp_path / bad)]
    proc = subprocess.run(
        [sys.executable, "-m", "ackstore.tools.spark_cli", *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 2 and "--env-archive" in proc.stderr and "no such file" in proc.stderr
