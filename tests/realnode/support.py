"""Helpers of the real-node tier: the cluster's tools, the chart, and what the machine
looks like (to check that a node's teardown leaves it as it was)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from devcluster import kube
from devcluster.binaries import Binaries
from devcluster.realnode import host
from tests.deploy.chart import CHART, set_flags
from tests.e2e.support import https_get, metrics_token


@dataclass(frozen=True)
class RealCluster:
    kubeconfig: Path
    binaries: Binaries
    node_name: str

    def core_v1(self) -> client.CoreV1Api:
        return kube.core_v1(self.kubeconfig)

    def api_client(self) -> client.ApiClient:
        return kube.api_client(self.kubeconfig)

    def kubectl(self, *args: str, check: bool = True, timeout_s: float = 120) -> str:
        done = subprocess.run(
            [str(self.binaries.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout + (done.stderr if not check else "")

    def helm(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binaries.helm), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )

    def api_server_port(self) -> int:
        match = re.search(r"server:\s*https://[^:]+:(\d+)", self.kubeconfig.read_text())
        assert match, f"no server in {self.kubeconfig}"
        return int(match.group(1))


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    """Poll ``condition`` until it returns something true; returns that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def install_chart(cluster: RealCluster, release: str, namespace: str, values: Mapping[str, Any]) -> None:
    done = cluster.helm(
        "install", release, str(CHART), "--namespace", namespace, "--create-namespace",
        "--wait", "--timeout", "4m", *set_flags(dict(values)),
    )  # fmt: skip
    if done.returncode != 0:
        pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False)
        logs = cluster.kubectl("logs", "-n", namespace, "-l", f"app.kubernetes.io/instance={release}",
                               "--all-containers", "--tail", "40", check=False)  # fmt: skip
        raise AssertionError(f"helm install {release} failed: {done.stderr}\n{pods}\n{logs}")


def uninstall_chart(cluster: RealCluster, release: str, namespace: str) -> None:
    cluster.helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m")


def scheduler_pods(core: client.CoreV1Api, namespace: str, release: str) -> list[Any]:
    selector = f"app.kubernetes.io/instance={release}"
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def is_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def pod_metrics(pod: Any, kubeconfig: Path, port: int = 10259) -> str:
    """The pod's /metrics, read over the pod network (the host routes to the bridge):
    HTTPS, with the token of a ServiceAccount allowed to get /metrics."""
    status, text = https_get(f"https://{pod.status.pod_ip}:{port}/metrics", metrics_token(kubeconfig))
    assert status == 200, f"/metrics answered {status}: {text[:300]}"
    return text


def metric_value(text: str, name: str, labels: Mapping[str, str]) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def lease_holder(cluster: RealCluster, namespace: str, name: str) -> str:
    coordination = client.CoordinationV1Api(cluster.api_client())
    try:
        return str(coordination.read_namespaced_lease(name, namespace).spec.holder_identity or "")
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return ""
        raise


# ---- the machine, before and after a node ------------------------------------------


def _iptables(command: str) -> list[str]:
    """Rules and chains of every table, without packet counters. A table that holds
    only its built-in chains, accepting, with no rule is left out: it filters nothing,
    as before the kernel loaded it (on a fresh machine no table is loaded until
    kube-proxy's first call, and none is unloaded afterwards)."""
    text = subprocess.run([f"{command}-save"], capture_output=True, text=True, check=False).stdout
    lines: list[str] = []
    table: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        table.append(re.sub(r"\s*\[\d+:\d+\]$", "", line))
        if line == "COMMIT":
            if not all(re.fullmatch(r"\*\w+|:[A-Z]+ ACCEPT|COMMIT", kept) for kept in table):
                lines.extend(table)
            table = []
    return lines + table


def host_fingerprint() -> dict[str, Any]:
    """What a real node changes on the machine, read the same way before and after."""
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    netns = sorted(p.name for p in host.NETNS_DIR.iterdir()) if host.NETNS_DIR.is_dir() else []
    cni_results = (
        sorted(p.name for p in host.CNI_RESULTS_DIR.iterdir()) if host.CNI_RESULTS_DIR.is_dir() else []
    )
    return {
        "sysctls": {name: host.read_sysctl(name) for name in host.SYSCTLS},
        "iptables": _iptables("iptables"),
        "ip6tables": _iptables("ip6tables"),
        "mounts": sorted(set(mounts)),
        "links": sorted(re.findall(r"^\d+: ([^:@]+)", links, flags=re.MULTILINE)),
        "netns": netns,
        "cni results": cni_results,
        "kubelet cgroups": sorted(str(p) for p in host.CGROUP_ROOT.glob(f"*/{host.KUBELET_CGROUP}")),
        "processes": sorted(_node_processes()),
    }


def _node_processes() -> list[str]:
    """Live processes of the kinds a node runs (containerd, its shims, kubelet,
    kube-proxy, pause)."""
    kinds = ("containerd", "containerd-shim-runc-v2", "kubelet", "kube-proxy", "pause")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
            name = entry.joinpath("comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if state != "Z" and name in kinds:
            found.append(name)
    return found


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)
