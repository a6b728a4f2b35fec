"""The operator's own watches against the real API server: from a listing's
resourceVersion each delivers the events that follow, in order, for pods and for
nodes. (Resuming after the connection drops of an API server restart is in
test_operator_ha; 410 Gone, which needs an etcd compaction, is in tests/k8s/test_watch.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.client.watch import ResourceWatch
from scheduler.k8s.process.settings import ClientSettings
from tests.e2e.support import ensure_namespace, run_then_close
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
NAMESPACE = "watches"
NAME = "watched"


@dataclass(frozen=True)
class Kind:
    """One kind's watch and the three writes that should come back through it."""

    name: str
    path: str  # the collection the watch reads
    create: Callable[[client.CoreV1Api], Any]
    label: Callable[[client.CoreV1Api], Any]
    delete: Callable[[client.CoreV1Api], Any]
    ours: Callable[[dict[str, Any]], bool]


def bare_node(name: str) -> dict[str, Any]:
    """A node no KWOK controller manages, so that only this test writes to it."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"step": "1"}}}


KINDS = [
    Kind(
        "pod",
        "/api/v1/pods",
        lambda core: core.create_namespaced_pod(NAMESPACE, pod(NAME, NAMESPACE, "nobody")),
        lambda core: core.patch_namespaced_pod(NAME, NAMESPACE, {"metadata": {"labels": {"step": "2"}}}),
        lambda core: core.delete_namespaced_pod(
            NAME, NAMESPACE, body=client.V1DeleteOptions(grace_period_seconds=0)
        ),
        lambda manifest: manifest["metadata"].get("namespace") == NAMESPACE,
    ),
    Kind(
        "node",
        "/api/v1/nodes",
        lambda core: core.create_node(bare_node(f"{NAMESPACE}-{NAME}")),
        lambda core: core.patch_node(f"{NAMESPACE}-{NAME}", {"metadata": {"labels": {"step": "2"}}}),
        lambda core: core.delete_node(f"{NAMESPACE}-{NAME}"),
        lambda manifest: manifest["metadata"]["name"] == f"{NAMESPACE}-{NAME}",
    ),
]


async def wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_events_after_the_listing_arrive_in_order(dev_cluster: Any, kind: Kind) -> None:
    core = dev_cluster.core_v1()
    ensure_namespace(core, NAMESPACE)
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "watch-test", "test")
    seen: list[str] = []
    relists: list[str] = []

    def deliver(event_type: str, manifest: dict[str, Any]) -> None:
        if kind.ours(manifest):
            seen.append(event_type)

    async def relist() -> str:  # a fresh listing's version is never gone
        relists.append("relisted")
        _items, version = await api.list_with_version(kind.path)
        return version

    async def scenario() -> None:
        _items, version = await api.list_with_version(kind.path)
        watch = asyncio.create_task(ResourceWatch(api, kind.name, kind.path, deliver, relist).run(version))
        created = False
        try:
            await asyncio.to_thread(kind.create, core)
            created = True
            await wait_for(lambda: "ADDED" in seen, "the ADDED event")
            await asyncio.to_thread(kind.label, core)
            await wait_for(lambda: "MODIFIED" in seen, "the MODIFIED event")
            await asyncio.to_thread(kind.delete, core)
            created = False
            await wait_for(lambda: "DELETED" in seen, "the DELETED event")
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            if created:
                await asyncio.to_thread(kind.delete, core)

    run_then_close(api, scenario)
    assert relists == []
    assert seen[0] == "ADDED"
    assert seen[-1] == "DELETED"
    assert "MODIFIED" in seen[1:-1]
