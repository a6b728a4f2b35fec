"""Kubernetes API access for the dev tools: one client factory and a few waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from devcluster.errors import ClusterNotRunningError

# Typed views of the two untyped helpers of the client that we use.
_load_kube_config: Callable[..., None] = config.load_kube_config
parse_quantity: Callable[[str], Decimal] = utils.parse_quantity

# The Python client's default pool of 4 connections serialises parallel node creation.
_POOL_SIZE = 16


def api_client(kubeconfig: Path) -> client.ApiClient:
    """A fresh ApiClient for the cluster in kubeconfig (not the user's default one)."""
    if not kubeconfig.exists():
        raise ClusterNotRunningError(f"kubeconfig {kubeconfig} does not exist; is the cluster up?")
    configuration = client.Configuration()
    _load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = _POOL_SIZE
    return client.ApiClient(configuration)


def body(manifest: dict[str, Any]) -> Any:
    """A manifest as a request body: the client sends plain dicts as they are,
    though its signatures name model classes (V1Pod, V1Node)."""
    return manifest


def core_v1(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(kubeconfig))


def wait_for_service_account(
    kubeconfig: Path, namespace: str, *, timeout_s: float = 60, api: client.CoreV1Api | None = None
) -> None:
    """Wait until the namespace's default ServiceAccount exists (pods need it)."""
    api = api or core_v1(kubeconfig)
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while True:
        try:
            api.read_namespaced_service_account("default", namespace)
            return
        except ApiException as err:
            last_error = f"{err.status} {err.reason}"
        except OSError as err:  # connection refused while the API server settles
            last_error = str(err)
        if time.monotonic() > deadline:
            raise ClusterNotRunningError(
                f"namespace {namespace!r} has no default ServiceAccount after {timeout_s:.0f} s "
                f"(is kube-controller-manager running?): {last_error}"
            )
        time.sleep(0.2)


def ensure_namespace(api: client.CoreV1Api, name: str, kubeconfig: Path) -> None:
    """Create the namespace if needed and wait until pods can be created in it."""
    try:
        api.create_namespace(body({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    except ApiException as err:
        if err.status != 409:  # 409: it exists already
            raise
    wait_for_service_account(kubeconfig, name, api=api, timeout_s=30)
