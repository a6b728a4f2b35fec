"""The operator's own pod watch against the real API server: from a listing's
resourceVersion it delivers the pod events that follow, in order. (Resuming after
the connection drops of an API server restart is in test_operator_ha; 410 Gone, which
needs an etcd compaction, is in tests/k8s/test_watch.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.api import KubeApi
from scheduler.k8s.settings import ClientSettings
from scheduler.k8s.watch import PodWatch
from tests.e2e.support import ensure_namespace, run_then_close
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
NAMESPACE = "pod-watch"


async def wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def test_events_after_the_listing_arrive_in_order(dev_cluster: Any) -> None:
    core = dev_cluster.core_v1()
    ensure_namespace(core, NAMESPACE)
    api = KubeApi(ClientSettings(kubeconfig=dev_cluster.kubeconfig), "pod-watch-test", "test")
    seen: list[tuple[str, str]] = []
    relists: list[str] = []

    def deliver(kind: str, manifest: dict[str, Any]) -> None:
        if manifest["metadata"]["namespace"] == NAMESPACE:
            seen.append((kind, manifest["metadata"]["name"]))

    async def relist() -> str:  # a fresh listing's version is never gone
        relists.append("relisted")
        _items, version = await api.list_with_version(api.core.list_pod_for_all_namespaces)
        return version

    async def scenario() -> None:
        _items, version = await api.list_with_version(api.core.list_pod_for_all_namespaces)
        watch = asyncio.create_task(PodWatch(api, deliver, relist).run(version))
        try:
            await asyncio.to_thread(
                core.create_namespaced_pod, NAMESPACE, pod("watched", NAMESPACE, "nobody")
            )
            await wait_for(lambda: ("ADDED", "watched") in seen, "the ADDED event")
            await asyncio.to_thread(
                core.patch_namespaced_pod, "watched", NAMESPACE, {"metadata": {"labels": {"step": "2"}}}
            )
            await wait_for(lambda: ("MODIFIED", "watched") in seen, "the MODIFIED event")
            await asyncio.to_thread(
                core.delete_namespaced_pod,
                "watched",
                NAMESPACE,
                body=client.V1DeleteOptions(grace_period_seconds=0),
            )
            await wait_for(lambda: ("DELETED", "watched") in seen, "the DELETED event")
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    run_then_close(api, scenario)
    assert relists == []
    kinds = [kind for kind, _name in seen]
    assert kinds[0] == "ADDED"
    assert kinds[-1] == "DELETED"
    assert "MODIFIED" in kinds[1:-1]
