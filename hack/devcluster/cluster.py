"""Start and stop a local control plane with kwokctl's binary runtime.

kwokctl generates the PKI, the kubeconfig and the component flags, starts each
component as a detached process with a pid file under the cluster's directory, and
deletes them again. We give it our own binaries (so it downloads nothing), bind every
component to 127.0.0.1 (its default is 0.0.0.0) and turn on RBAC + Node authorization
and the default admission plugins, so RBAC tests against it mean something.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from devcluster import hami, names, processes
from devcluster.binaries import Binaries, cache_dir, ensure_binaries
from devcluster.errors import (
    ClusterNotRunningError,
    ClusterStartError,
    InvalidArgumentError,
    PortInUseError,
)
from devcluster.kube import wait_for_service_account
from devcluster.realnode import config as realnode_config
from devcluster.realnode import host as realnode_host
from devcluster.realnode import node as realnode

LOOPBACK = "127.0.0.1"
DEFAULT_NAME = "rl-dev"
# kwokctl derives process and file names from the cluster name.
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
# Generous: a cold page cache on 2 cores can take a while to start kube-apiserver.
_START_TIMEOUT_S = 120


@dataclass(frozen=True)
class ClusterConfig:
    """What `up` starts."""

    name: str = DEFAULT_NAME
    #: kube-apiserver's port on 127.0.0.1; 0 lets kwokctl pick a free one.
    port: int = 0
    #: Run the default kube-scheduler (the baseline); off to leave every pod to ours.
    kube_scheduler: bool = True
    #: How long kwokctl may take to bring the components up before we give up.
    start_timeout_s: int = _START_TIMEOUT_S
    #: One real node (kubelet, kube-proxy, containerd) beside the KWOK ones; the API
    #: server then advertises the node's bridge address, where pods reach it, and
    #: listens on every address (see devcluster.realnode).
    real_node: bool = False


@dataclass(frozen=True)
class ClusterInfo:
    """A running cluster: where its state and kubeconfig are."""

    name: str
    workdir: Path
    kubeconfig: Path
    server: str


def validate_config(config: ClusterConfig) -> None:
    """Reject a bad name or port before anything is started."""
    if not _NAME_RE.match(config.name):
        raise InvalidArgumentError(
            f"cluster name {config.name!r}: use 1-32 lowercase letters, digits and '-'"
        )
    if config.port != 0 and not 1024 <= config.port <= 65535:
        raise InvalidArgumentError(f"port {config.port}: choose 1024-65535, or 0 for any free port")
    if config.start_timeout_s < 1:
        raise InvalidArgumentError(f"start timeout {config.start_timeout_s} s: must be positive")


def check_port_free(port: int) -> None:
    """Raise PortInUseError if something already listens on 127.0.0.1:port (or 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # No SO_REUSEADDR: we want the bind to fail exactly when a listener exists.
        try:
            sock.bind((LOOPBACK, port))
        except OSError as err:
            raise PortInUseError(
                f"port {port} on {LOOPBACK} is already in use ({err.strerror}); "
                "stop what holds it or pass another --port (0 picks a free one)"
            ) from err


def cluster_workdir(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "clusters" / name


def _kwokctl_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    # kwokctl keeps clusters in $KWOK_WORKDIR/clusters/<name>: that is our layout.
    env["KWOK_WORKDIR"] = str(cache)
    return env


def _kwokctl_config(config: ClusterConfig, binaries: Binaries) -> str:
    """The KwokctlConfiguration document (JSON is valid YAML)."""
    options: dict[str, object] = {
        "runtime": "binary",
        "bindAddress": LOOPBACK,
        "kubeApiserverPort": config.port,
        "securePort": True,
        "kubeAuthorization": True,
        "kubeAdmission": True,
        "quietPull": True,
        "etcdBinary": str(binaries.etcd),
        "kubeApiserverBinary": str(binaries.kube_apiserver),
        "kubeControllerManagerBinary": str(binaries.kube_controller_manager),
        "kubeSchedulerBinary": str(binaries.kube_scheduler),
        "kubectlBinary": str(binaries.kubectl),
        "kwokControllerBinary": str(binaries.kwok),
    }
    if not config.kube_scheduler:
        options["disable"] = ["kube-scheduler"]
    # One instance of each: leader election buys nothing and, on a loaded 2-core
    # machine, a missed lease renewal makes the controller manager or the scheduler
    # exit for good, leaving a cluster that silently stops binding pods.
    no_leader_election = [{"key": "leader-elect", "value": "false"}]
    # The core Workload API (scheduling.k8s.io/v1alpha2 PodGroups and the pod field
    # spec.schedulingGroup) is alpha in 1.36: served only with its feature gate and
    # group enabled. On the API server only: kube-scheduler and the controllers keep
    # their defaults.
    api_server_args = [
        {"key": "feature-gates", "value": "GenericWorkload=true"},
        {"key": "runtime-config", "value": "scheduling.k8s.io/v1alpha2=true"},
    ]
    # The controllers' client at kube's defaults (20 requests/s, burst 30) makes the
    # resourceclaim controller create claims from templates at about 10 pods/s, which
    # then paces every scheduler in a benchmark of DRA pods; kube's own scheduler_perf
    # runs its controllers without that limit.
    controller_manager_args = [
        *no_leader_election,
        {"key": "kube-api-qps", "value": "1000"},
        {"key": "kube-api-burst", "value": "1000"},
    ]
    patches: list[dict[str, object]] = [
        {"name": "kube-controller-manager", "extraArgs": controller_manager_args},
        {"name": "kube-scheduler", "extraArgs": no_leader_election},
    ]
    if config.real_node:
        # Pods reach the API server through the `kubernetes` Service, which kube-proxy
        # forwards to the advertised address (the node's bridge), and which must be in
        # the server's certificate. The other components keep talking to 127.0.0.1, so
        # the API server listens on every address. `kubectl logs` and `exec` reach the
        # kubelet at the node's InternalIP (its hostname resolves nowhere).
        options["kubeApiserverCertSANs"] = [realnode_config.KUBERNETES_SERVICE_IP, realnode_config.GATEWAY]
        api_server_args += [
            {"key": "bind-address", "value": "0.0.0.0"},
            {"key": "advertise-address", "value": realnode_config.GATEWAY},
            {"key": "service-cluster-ip-range", "value": realnode_config.SERVICE_SUBNET},
            {"key": "kubelet-preferred-address-types", "value": "InternalIP"},
        ]
    patches.append({"name": "kube-apiserver", "extraArgs": api_server_args})
    if config.real_node:
        # kwokctl's controller fakes every node's status by default: the kubelet's node
        # is its own, and KWOK keeps the nodes annotated as fake (devcluster.nodes).
        patches.append(
            {
                "name": "kwok-controller",
                "extraArgs": [
                    {"key": "manage-all-nodes", "value": "false"},
                    {
                        "key": "manage-nodes-with-annotation-selector",
                        "value": f"{names.KWOK_NODE_ANNOTATION}={names.KWOK_NODE_VALUE}",
                    },
                ],
            }
        )
    document = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": options,
        "componentsPatches": patches,
    }
    return json.dumps(document, indent=2) + "\n"


def is_running(name: str, cache: Path | None = None) -> bool:
    """Every component of the cluster has a live process."""
    workdir = cluster_workdir(name, cache)
    return bool(processes.components(workdir)) and not processes.dead_components(workdir)


def down(name: str = DEFAULT_NAME, *, cache: Path | None = None, out: TextIO | None = None) -> bool:
    """Stop the cluster and delete its state. Returns False if there was nothing to do."""
    out = out or sys.stderr
    cache = cache or cache_dir()
    workdir = cluster_workdir(name, cache)
    if not workdir.exists():
        return False
    # The real node first: its pods' volumes are mounted under its own folder, and it
    # needs the API server no longer.
    realnode.down(name, cache=cache, out=out)
    binaries = Binaries.in_cache(cache)
    # kwokctl deletes the pid files along with the workdir, and does not stop a
    # component that was restarted behind its back (processes.restart): take the
    # pids first, so whatever survives kwokctl's teardown is stopped below.
    started = processes.running_pids(workdir)
    try:
        if binaries.kwokctl.exists():
            # kwokctl's own teardown first; it knows its components. Its failure is
            # not fatal: whatever it leaves is stopped below.
            done = subprocess.run(
                [str(binaries.kwokctl), "--name", name, "delete", "cluster"],
                env=_kwokctl_env(cache),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                check=False,
                timeout=120,
            )
            out.write(done.stdout)
    finally:
        processes.stop(workdir, also=started)
        shutil.rmtree(workdir, ignore_errors=True)
    return True


def _server_of(kubeconfig: Path) -> str:
    match = re.search(r"server:\s*(\S+)", kubeconfig.read_text())
    return match.group(1) if match else ""


def info(name: str = DEFAULT_NAME, cache: Path | None = None) -> ClusterInfo:
    """The running cluster called name; ClusterNotRunningError if it is not up."""
    workdir = cluster_workdir(name, cache)
    kubeconfig = workdir / "kubeconfig.yaml"
    if not kubeconfig.exists() or not is_running(name, cache):
        dead = processes.dead_components(workdir)
        why = f"{', '.join(dead)} not running" if dead else f"no cluster state in {workdir}"
        raise ClusterNotRunningError(
            f"cluster {name!r} is not running ({why}); start it with `python -m devcluster up`"
        )
    return ClusterInfo(name, workdir, kubeconfig, _server_of(kubeconfig))


def up(
    config: ClusterConfig | None = None,
    *,
    cache: Path | None = None,
    out: TextIO | None = None,
) -> ClusterInfo:
    """Build what is missing, start the cluster and wait until it serves requests.

    Idempotent: a cluster that is already running is returned as it is; a stale one
    (state left by a crash) is removed first. On any failure, including Ctrl-C,
    everything this call started is stopped again and its state removed.
    """
    config = config or ClusterConfig()
    out = out or sys.stderr
    cache = cache or cache_dir()
    validate_config(config)
    workdir = cluster_workdir(config.name, cache)
    if workdir.exists():
        if is_running(config.name, cache):
            return info(config.name, cache)
        print(f"removing stale state of cluster {config.name!r}", file=out)
        down(config.name, cache=cache, out=out)
    if config.port:
        check_port_free(config.port)
    binaries = ensure_binaries(env={**os.environ, "RL_DEVCLUSTER_CACHE": str(cache)}, out=out)
    if config.real_node:
        _prepare_real_node(config, cache)

    # Outside clusters/: kwokctl warns about any file it finds there.
    config_path = cache / "kwokctl" / f"{config.name}.yaml"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(_kwokctl_config(config, binaries))
    command = [
        str(binaries.kwokctl),
        "--name", config.name,
        "--config", str(config_path),
        "create", "cluster",
        # Never touch the user's ~/.kube/config; they get our kubeconfig path instead.
        "--kubeconfig", "",
        "--wait", f"{config.start_timeout_s}s",
        "--timeout", f"{config.start_timeout_s}s",
    ]  # fmt: skip
    start = time.monotonic()
    try:
        _run_kwokctl(command, _kwokctl_env(cache), workdir, config.name, out)
        result = info(config.name, cache)
        _wait_until_serving(result)
        # KWOK plays the nodes' kubelets; this plays HAMi's device plugin on them.
        hami.start_component(workdir, result.kubeconfig)
        if config.real_node:
            realnode.up(config.name, result.kubeconfig, cache=cache, out=out)
    except BaseException:
        # Ctrl-C and errors alike: leave nothing half-started behind.
        down(config.name, cache=cache, out=out)
        raise
    finally:
        config_path.unlink(missing_ok=True)
    print(
        f"cluster {config.name!r} up in {time.monotonic() - start:.1f} s at {result.server}\n"
        f"export KUBECONFIG={result.kubeconfig}",
        file=out,
    )
    return result


def _prepare_real_node(config: ClusterConfig, cache: Path) -> None:
    """Before the control plane: check the packages, and make the bridge whose address
    the API server will listen on (after recording the machine as it was)."""
    realnode.check_prerequisites()
    layout = realnode.layout_of(config.name, cache)
    other = realnode.other_running_node(layout)
    if other:
        raise InvalidArgumentError(
            f"the real node in {other} is running; one real node per machine: stop it first"
        )
    realnode_host.HostRecord.load_or_take(layout.host_record)
    realnode_host.create_bridge()


def _run_kwokctl(command: list[str], env: dict[str, str], workdir: Path, name: str, out: TextIO) -> None:
    """Run `kwokctl create cluster`, failing fast if a component dies meanwhile.

    kwokctl itself would wait out its whole --wait for a component that exited at
    once, and may even exit 0; watching the pid files turns that into a prompt error
    that quotes the dead component's log.
    """
    tail: collections.deque[str] = collections.deque(maxlen=30)

    def pump(stream: TextIO) -> None:
        for line in stream:
            tail.append(line.rstrip("\n"))
            out.write(line)

    def failure(what: str) -> ClusterStartError:
        dead = processes.dead_components(workdir)
        detail = "".join(f"\n--- last lines of {c}.log ---\n{processes.log_tail(workdir, c)}" for c in dead)
        return ClusterStartError(
            f"cluster {name!r}: {what}; everything started was stopped again."
            + (detail or "\nkwokctl said:\n" + "\n".join(tail))
        )

    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        reader = threading.Thread(target=pump, args=(proc.stdout,), daemon=True)
        reader.start()
        while proc.poll() is None:
            dead = processes.dead_components(workdir)
            if dead:
                proc.terminate()
                proc.wait(timeout=30)
                raise failure(f"{', '.join(dead)} exited while starting")
            time.sleep(0.25)
        reader.join(timeout=5)
    if proc.returncode != 0:
        raise failure(f"kwokctl create cluster exited {proc.returncode}")
    if processes.dead_components(workdir) or not processes.components(workdir):
        raise failure("not every component is running after kwokctl finished")


def _wait_until_serving(cluster: ClusterInfo, timeout_s: float = 60) -> None:
    """Wait for the controllers, not just the API server.

    kwokctl returns once kube-apiserver answers; pods can only be created once
    kube-controller-manager has made the namespace's default ServiceAccount (the
    ServiceAccount admission plugin rejects them before that).
    """
    wait_for_service_account(cluster.kubeconfig, "default", timeout_s=timeout_s)
