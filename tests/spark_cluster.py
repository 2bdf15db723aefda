"""A Spark standalone cluster on 127.0.0.1 for tests: one master and one worker, started
with the Spark that pyspark ships, on free ports, stopped by process group at the end
(also when the test fails).

The worker starts with a bare environment (no PYTHONPATH, no virtual environment on its
PATH), as a node of a real cluster would, so an executor finds ackstore only in what the
job ships.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "standalone_cluster", "bare_env"]

BARE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Cluster:
    url: str  #: spark://127.0.0.1:PORT
    web: str  #: the master's web UI (its /json/ lists workers and applications)
    work_dir: Path  #: the worker's work directory: app-*/N/ holds each executor's files and logs

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.web + "/json/", timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bare_env(home: Path) -> dict[str, str]:
    """A node's environment: system PATH (plus java's directory), no Python settings."""
    import shutil

    java = shutil.which("java")
    path = BARE_PATH if java is None else f"{Path(java).resolve().parent}:{BARE_PATH}"
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "SPARK_LOCAL_IP": "127.0.0.1"}
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 15
    for proc in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def standalone_cluster(root: Path, cores: int = 2, memory: str = "2g", timeout: float = 90.0) -> Iterator[Cluster]:
    """Start a master and one worker under ``root``; yield when the worker is registered."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    root.mkdir(parents=True, exist_ok=True)
    env = {**bare_env(root), "SPARK_HOME": str(spark_home), "SPARK_LOG_DIR": str(root / "logs")}
    port, web_port, worker_port, worker_web = (_free_port() for _ in range(4))
    work = root / "work"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(root / "master.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(web_port)],
                    env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}", work)
        _wait(lambda: cluster.state(), timeout, procs, root / "master.log")
        with open(root / "worker.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                     "--port", str(worker_port), "--webui-port", str(worker_web), "--cores", str(cores),
                     "--memory", memory, "--work-dir", str(work), cluster.url],
                    env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        _wait(lambda: cluster.state()["aliveworkers"] >= 1 or None, timeout, procs, root / "worker.log")
        yield cluster
    finally:
        _stop(procs)


def _wait(probe: Any, timeout: float, procs: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a Spark daemon exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if probe():
                return
        except (OSError, ValueError):  # not listening yet, or (ValueError) a master still starting
            pass  # answers /json/ with its HTML page before the JSON one is up
        time.sleep(0.5)
    raise TimeoutError(f"Spark did not come up in {timeout:.0f} s: {log.read_text(errors='replace')[-2000:]}")
