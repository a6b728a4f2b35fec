"""A local Ray cluster for tests: ``ray start --head --block`` in a session of its own,
stopped by its process id (never ``ray stop``, which stops every Ray on the machine).

Settings it needs (found on a 2-core container, ray 2.60): the node on 127.0.0.1; free
ports for the head and for the client, dashboard and agent servers (their fixed
defaults would collide with a second cluster, e.g. another xdist worker's); a temp dir
of its own, short because Ray's socket paths must fit 107 bytes; a 256 MB object store
(the default takes 30% of memory in /dev/shm; tasks here pass kilobytes). No
``--block``-less start: its daemons would outlive a failed test unseen.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CPUS = 2
OBJECT_STORE_BYTES = 256 * 1024 * 1024
START_S = 120  # a deadline for the start, not an assertion on its speed
STOP_S = 60
STARTED = "Ray runtime started"


@dataclass(frozen=True)
class LocalRay:
    process: subprocess.Popen[bytes]
    address: str
    folder: Path

    @property
    def log(self) -> str:
        return (self.folder / "start.log").read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start() -> LocalRay:
    folder = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    port = free_port()
    argv = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--num-cpus={CPUS}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={folder}",
    ]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with (folder / "start.log").open("wb") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    cluster = LocalRay(process, f"127.0.0.1:{port}", folder)
    deadline = time.monotonic() + START_S
    while STARTED not in cluster.log:
        if process.poll() is not None or time.monotonic() > deadline:
            log_text = cluster.log
            stop(cluster)
            raise RuntimeError(f"ray start did not start a cluster:\n{log_text[-4000:]}")
        time.sleep(0.2)
    return cluster


def _session_members(session: int) -> list[int]:
    """Processes of the session ``ray start`` leads (Ray's workers among them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # after the name: state, ppid, pgrp, session
            found.append(int(entry.name))
    return found


def stop(cluster: LocalRay) -> None:
    """SIGTERM to ``ray start --block`` (it stops what it started), then SIGKILL to
    anything of its session still there."""
    if cluster.process.poll() is None:
        cluster.process.send_signal(signal.SIGTERM)
        try:
            cluster.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            cluster.process.kill()
            cluster.process.wait()
    for pid in _session_members(cluster.process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(cluster.folder, ignore_errors=True)
