"""Start and stop the real node: containerd, the kubelet and kube-proxy (and the DRA
test driver, which tests start on it: ``devcluster.realnode.dra``).

Each process is started detached, with its log in ``<files>/logs`` and its pid in
``<files>/pids``; it is ours when its command line names the node's folder (as the
control plane's are checked in ``devcluster.processes``). ``down`` stops exactly what
``up`` started, and what those started: the pods' processes (found in the kubelet's
cgroups) and containerd's shims (which name our containerd's socket).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import processes
from devcluster.binaries import Binaries, cache_dir, ensure_binaries
from devcluster.errors import DevClusterError
from devcluster.kube import core_v1
from devcluster.nodes import is_ready
from devcluster.realnode import config, host, images
from devcluster.realnode.config import NodeLayout

# What each command comes from, for the error that names what to install.
# containerd itself is built (hack/build-binaries.sh containerd: Debian's has no CDI);
# Debian's ctr client is used to import images.
PREREQUISITES: dict[str, str] = {
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "ip": "iproute2",
    "podman": "podman",
    "mmdebstrap": "mmdebstrap",
    "gcc": "gcc",
}
CNI_PLUGINS = ("bridge", "host-local", "loopback")
COMPONENTS = ("containerd", "kubelet", "kube-proxy")
# Kubelet plugins tests start on the node (devcluster.realnode.dra); ``down`` stops them too.
PLUGINS = ("dra-test-driver",)
_READY_TIMEOUT_S = 120


class RealNodeError(DevClusterError):
    """The real node could not start (missing packages, another node running)."""


def missing_prerequisites() -> list[str]:
    missing = [
        f"{command} ({package})" for command, package in PREREQUISITES.items() if not shutil.which(command)
    ]
    missing += [
        f"CNI plugin {plugin} (containernetworking-plugins)"
        for plugin in CNI_PLUGINS
        if not (config.CNI_PLUGINS_DIR / plugin).exists()
    ]
    return missing


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise RealNodeError("a real node needs root (a kubelet mounts, makes cgroups and network namespaces)")
    missing = missing_prerequisites()
    if missing:
        raise RealNodeError(
            f"a real node needs {', '.join(missing)}; `make real-node-deps` installs them from Debian"
        )


def layout_of(cluster: str, cache: Path | None = None) -> NodeLayout:
    return NodeLayout.of(cluster, images.ref_of("pause"), cache)


def running(layout: NodeLayout) -> dict[str, int]:
    """Component -> pid, for the node's components that are alive."""
    found = {}
    for component in (*COMPONENTS, *PLUGINS):
        pid_file = layout.pids / f"{component}.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            if processes.is_ours(pid, layout.files):
                found[component] = pid
    return found


def other_running_node(layout: NodeLayout) -> str | None:
    """The folder of the real node running on this machine, if it is not ``layout``'s:
    the bridge, the kubelet's port and its device-plugin folder allow one node per
    machine, whichever checkout started it."""
    try:
        owner = Path(config.ACTIVE_NODE.read_text().strip())
    except OSError:
        return None
    if owner == layout.files:
        return None
    other = NodeLayout(owner.name, owner, config.RUN_ROOT / owner.name, layout.images, "")
    return str(owner) if running(other) else None


def _claim_machine(layout: NodeLayout) -> None:
    config.ACTIVE_NODE.parent.mkdir(parents=True, exist_ok=True)
    config.ACTIVE_NODE.write_text(f"{layout.files}\n")


def _release_machine(layout: NodeLayout) -> None:
    with contextlib.suppress(OSError):
        if Path(config.ACTIVE_NODE.read_text().strip()) == layout.files:
            config.ACTIVE_NODE.unlink()


# The processes this process started, to tell why one is gone (its exit status).
_STARTED: dict[str, subprocess.Popen[bytes]] = {}


def start(layout: NodeLayout, component: str, argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    """Start one of the node's processes detached, its log and pid in the node's folder."""
    layout.logs.mkdir(parents=True, exist_ok=True)
    layout.pids.mkdir(parents=True, exist_ok=True)
    with (layout.logs / f"{component}.log").open("ab") as log:
        process = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    _STARTED[component] = process
    (layout.pids / f"{component}.pid").write_text(f"{process.pid}\n")
    return process.pid


def wait(layout: NodeLayout, component: str, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if component not in running(layout):
            started = _STARTED.get(component)
            status = started.poll() if started is not None else None
            # Just started, it may not show its command line yet (Python's vfork resumes
            # us before the kernel has set it up): alive is enough then.
            if started is None or status is not None:
                raise RealNodeError(
                    f"{component} is not running (exit status {status}); last lines of "
                    f"{layout.logs / component}.log:\n" + processes.log_tail(layout.files, component)
                )
        if time.monotonic() > deadline:
            raise RealNodeError(f"{component}: {what} not seen in {timeout_s:.0f} s (log: {layout.logs})")
        time.sleep(0.2)


def _node_ready(api: client.CoreV1Api, name: str) -> bool:
    try:
        return is_ready(api.read_node(name))
    except ApiException as error:
        if error.status == 404:  # not registered yet
            return False
        raise


def write_configs(layout: NodeLayout, kubeconfig: Path) -> None:
    for folder in (layout.files, layout.run, layout.images, layout.cni_config_dir, layout.kubelet_root):
        folder.mkdir(parents=True, exist_ok=True)
    layout.containerd_config.write_text(config.containerd_config(layout))
    (layout.cni_config_dir / "10-rl-devcluster.conflist").write_text(
        config.as_text(config.cni_config(layout))
    )
    layout.kubelet_config.write_text(config.as_text(config.kubelet_config(layout)))
    layout.kube_proxy_config.write_text(
        config.as_text(config.kube_proxy_config(kubeconfig, layout.node_name))
    )


def up(
    cluster: str,
    kubeconfig: Path,
    *,
    cache: Path | None = None,
    out: TextIO | None = None,
) -> NodeLayout:
    """Start the node of ``cluster`` (whose API server advertises ``config.GATEWAY``) and
    wait until it is Ready. Idempotent; on failure everything started is stopped."""
    out = out or sys.stderr
    cache = cache or cache_dir()
    check_prerequisites()
    binaries = ensure_binaries(("node", "containerd"), out=out)
    layout = layout_of(cluster, cache)
    other = other_running_node(layout)
    if other:
        raise RealNodeError(f"the real node in {other} is running; one per machine: stop it first")
    _claim_machine(layout)
    if all(component in running(layout) for component in COMPONENTS):
        return layout
    start = time.monotonic()
    try:
        _start_components(layout, kubeconfig, binaries, out)
        api = core_v1(kubeconfig)
        wait(layout, "kubelet", lambda: _node_ready(api, layout.node_name), _READY_TIMEOUT_S, "node Ready")
    except BaseException:
        down(cluster, cache=cache, out=out)
        raise
    print(f"real node {layout.node_name} Ready in {time.monotonic() - start:.1f} s", file=out)
    return layout


def _start_components(layout: NodeLayout, kubeconfig: Path, binaries: Binaries, out: TextIO) -> None:
    write_configs(layout, kubeconfig)
    host.HostRecord.load_or_take(layout.host_record)
    host.create_bridge()
    if "containerd" not in running(layout):
        # Its runc shim is found on PATH: the one built beside it, not Debian's.
        path = f"{binaries.containerd.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        start(
            layout,
            "containerd",
            [str(binaries.containerd), "--config", str(layout.containerd_config)],
            env={**os.environ, "PATH": path},
        )
    wait(
        layout,
        "containerd",
        lambda: images.ctr(layout.containerd_socket, "version").returncode == 0,
        30,
        "its socket answering",
    )
    images.build("pause")
    for name in ("pause",):
        result = images.import_image(layout.containerd_socket, name)
        if not result.skipped:
            print(f"imported {result.ref} into the node in {result.seconds:.1f} s", file=out)
    if "kubelet" not in running(layout):
        start(
            layout,
            "kubelet",
            [
                str(binaries.kubelet),
                "--config", str(layout.kubelet_config),
                "--kubeconfig", str(kubeconfig),
                "--root-dir", str(layout.kubelet_root),
                "--cert-dir", str(layout.kubelet_root / "pki"),
                "--hostname-override", layout.node_name,
                "--node-ip", config.GATEWAY,
                "--node-labels", ",".join(f"{k}={v}" for k, v in sorted(config.NODE_LABELS.items())),
            ],
        )  # fmt: skip
    if "kube-proxy" not in running(layout):
        start(layout, "kube-proxy", [str(binaries.kube_proxy), "--config", str(layout.kube_proxy_config)])


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop(layout: NodeLayout, components: Sequence[str], grace_s: float = 10) -> None:
    pids = [pid for name, pid in running(layout).items() if name in components]
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(processes.is_ours(p, layout.files) for p in pids):
        time.sleep(0.1)
    _signal_all([p for p in pids if processes.is_ours(p, layout.files)], signal.SIGKILL)


def _remove_containers(layout: NodeLayout) -> None:
    """Kill every container of the node's containerd and delete it (their snapshots go
    with them; the images stay for the next node)."""
    socket = layout.containerd_socket
    if images.ctr(socket, "version").returncode != 0:
        return
    tasks = [line.split()[0] for line in images.ctr(socket, "tasks", "ls").stdout.splitlines()[1:] if line]
    for task in tasks:
        images.ctr(socket, "tasks", "kill", "--all", "--signal", "SIGKILL", task)
    for container in images.ctr(socket, "containers", "ls", "-q").stdout.split():
        images.ctr(socket, "tasks", "delete", "--force", container)
        images.ctr(socket, "containers", "delete", container)


def _pids_naming(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (containerd's shims name its socket)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in entry.joinpath("cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def _kill_pods_processes() -> None:
    """Whatever still runs in the kubelet's cgroups: the processes of its pods."""
    for procs in host.CGROUP_ROOT.glob(f"*/{host.KUBELET_CGROUP}/**/cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            _signal_all([int(p) for p in procs.read_text().split()], signal.SIGKILL)


def down(cluster: str, *, cache: Path | None = None, out: TextIO | None = None) -> bool:
    """Stop the node's processes and its pods', undo its changes to the machine and
    delete its state (not its images). False if there was no node."""
    out = out or sys.stderr
    cache = cache or cache_dir()
    layout = NodeLayout.of(cluster, "", cache)
    if not layout.files.exists() and not layout.run.exists():
        return False
    stop(layout, ("kubelet", "kube-proxy", *PLUGINS))
    proxy = Binaries.in_cache(cache).kube_proxy
    if proxy.exists():
        subprocess.run([str(proxy), "--cleanup"], capture_output=True, check=False, timeout=60)
    _remove_containers(layout)
    record = host.HostRecord()
    if layout.host_record.is_file():
        record = host.HostRecord.load_or_take(layout.host_record)
    if not record.kubelet_cgroups_existed:
        _kill_pods_processes()
    stop(layout, ("containerd",))
    shims = _pids_naming(str(layout.containerd_socket))
    _signal_all(shims, signal.SIGKILL)
    for line in host.restore(layout):
        print(f"real node: {line}", file=out)
    shutil.rmtree(layout.run, ignore_errors=True)
    shutil.rmtree(layout.files, ignore_errors=True)
    _release_machine(layout)
    return True
