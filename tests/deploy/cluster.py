"""Talking to the dev cluster as the chart's ServiceAccount, and with the pinned kubectl."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import names
from devcluster import nodes as devnodes
from tests.e2e.support import replace_nodes, wait_for
from tests.e2e.workloads import mixed_nodes

# prometheus-operator's ServiceMonitor, reduced to what the API server needs to accept one.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "plural": "servicemonitors",
            "singular": "servicemonitor",
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}


def run_kubectl(
    kubectl: Path, kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECTL_COMMAND_HEADERS": "false"},
    )


def service_account_kubeconfig(
    admin_kubeconfig: Path, core: client.CoreV1Api, namespace: str, account: str, path: Path
) -> Path:
    """A kubeconfig that authenticates as ``namespace/account`` with a bound token
    (the TokenRequest API, as the kubelet gets one for a pod)."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    token = core.create_namespaced_service_account_token(account, namespace, request).status.token
    admin: dict[str, Any] = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dev", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "dev", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def fresh_namespace(
    core: client.CoreV1Api, name: str, labels: dict[str, str], timeout_s: float = 120
) -> None:
    """Create ``name``, first waiting out the deletion of an earlier one (a kept cluster)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            core.create_namespace({"metadata": {"name": name, "labels": labels}})
            return
        except ApiException as error:
            if error.status != 409:
                raise
        existing = core.read_namespace(name)
        if existing.status.phase != "Terminating":
            core.patch_namespace(name, {"metadata": {"labels": labels}})
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"namespace {name} still terminating after {timeout_s} s")
        time.sleep(1)


@contextlib.contextmanager
def mixed_cluster(core: client.CoreV1Api, count: int = 10) -> Iterator[None]:
    """``count`` mixed CPU and GPU nodes for a module, gone again after it: the tests
    that follow in the session (tests/e2e) expect only the nodes they make."""
    replace_nodes(core, mixed_nodes(count))
    try:
        yield
    finally:
        devnodes.delete_generated_nodes(core)
        selector = names.GENERATED_SELECTOR
        wait_for(lambda: not core.list_node(label_selector=selector).items, 60, "our nodes to go")
