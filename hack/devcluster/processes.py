"""The cluster's component processes, as kwokctl's binary runtime leaves them.

kwokctl starts each component detached (setsid) and records it in
<workdir>/pids/<component>.pid, with its log in <workdir>/logs/<component>.log.
We read those to tell a dead component from a slow one and to stop what kwokctl
itself failed to stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):  # gone, or being written right now
        return None


def is_ours(pid: int, workdir: Path) -> bool:
    """True if pid is alive and is a process kwokctl started for this cluster.

    Checked through its command line (it names files in the workdir), so a recycled
    pid that now belongs to something else is never mistaken for ours, or signalled.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and str(workdir) in cmdline  # a zombie has exited already


def components(workdir: Path) -> dict[str, int | None]:
    """Component name -> pid (None while its pid file is unreadable)."""
    pid_dir = workdir / "pids"
    if not pid_dir.is_dir():
        return {}
    return {f.stem: _read_pid(f) for f in sorted(pid_dir.glob("*.pid"))}


def running_pids(workdir: Path) -> list[int]:
    return [p for p in components(workdir).values() if p is not None and is_ours(p, workdir)]


def dead_components(workdir: Path) -> list[str]:
    """Components that were started and are no longer running."""
    return [
        name for name, pid in components(workdir).items() if pid is not None and not is_ours(pid, workdir)
    ]


def log_tail(workdir: Path, component: str, lines: int = 15) -> str:
    path = workdir / "logs" / f"{component}.log"
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def processes_of(workdir: Path) -> list[int]:
    """Every live component of the cluster, with or without a pid file (kwokctl deletes
    them, and a component restarted by a test has a new pid): processes running a
    binary from the workdir. A client that merely names the workdir (a scheduler given
    its kubeconfig, a ``tail`` of a log) is not one."""
    prefix = f"{workdir}/".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            program = entry.joinpath("cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if program.startswith(prefix) and is_ours(int(entry.name), workdir):
            pids.append(int(entry.name))
    return pids


def stop(workdir: Path, grace_s: float = 5, also: Iterable[int] = ()) -> None:
    """Stop the cluster's processes still running: those of its pid files, of ``also``
    (pids read before the pid files went) and any other component still running.
    SIGTERM, then SIGKILL after grace_s; returns when they are gone or after both waits."""
    pids = sorted(set(running_pids(workdir)) | set(also) | set(processes_of(workdir)))
    pids = [p for p in pids if is_ours(p, workdir)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = [p for p in pids if is_ours(p, workdir)]
        if not pids:
            return


def restart(workdir: Path, component: str, down_s: float = 0.0, grace_s: float = 10) -> int:
    """Stop one component and start it again with the same command line, environment
    and log file (for tests of how clients live through a restart). Returns the new pid."""
    pid_file = workdir / "pids" / f"{component}.pid"
    pid = _read_pid(pid_file)
    if pid is None or not is_ours(pid, workdir):
        raise RuntimeError(f"{component} is not running in {workdir}")
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in proc.joinpath("cmdline").read_bytes().split(b"\0") if a]
    entries = proc.joinpath("environ").read_bytes().split(b"\0")
    environ = dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)
    cwd = os.readlink(proc / "cwd")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while is_ours(pid, workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_ours(pid, workdir):
        os.kill(pid, signal.SIGKILL)
    time.sleep(down_s)
    with (workdir / "logs" / f"{component}.log").open("ab") as log:
        process = subprocess.Popen(
            argv, cwd=cwd, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    pid_file.write_text(f"{process.pid}\n")
    return process.pid
