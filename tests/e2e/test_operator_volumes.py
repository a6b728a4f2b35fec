"""Pods with volumes that need a scheduler's decision (a PersistentVolumeClaim, a
generic ephemeral volume) stay Pending with a reason naming the volume and the claim;
pods with volumes the kubelet alone mounts bind, and so do the pods after them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.support import (
    SchedulerProcess,
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-volumes"
NO_BINDING = "rl-scheduler does not bind volumes yet; use the default scheduler for this pod"


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(10))
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "volumes", request.node.nodeid) as name:
        yield name


def with_volumes(name: str, namespace: str, *volumes: dict[str, Any]) -> dict[str, Any]:
    manifest = pod(name, namespace, SCHEDULER)
    manifest["spec"]["volumes"] = list(volumes)
    mount = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes]
    manifest["spec"]["containers"][0]["volumeMounts"] = mount
    return manifest


def test_claims_stay_pending_with_a_reason_and_other_pods_bind(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    claim_volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}
    ephemeral = {
        "name": "scratch",
        "ephemeral": {
            "volumeClaimTemplate": {
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }
        },
    }
    kubelet_only = [
        {"name": "tmp", "emptyDir": {}},
        {"name": "conf", "configMap": {"name": "app", "optional": True}},
        {
            "name": "info",
            "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
        },
    ]
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path, "--profile", "fgd") as scheduler:
        create_pods(
            core,
            [
                with_volumes("db-0", namespace, claim_volume),
                with_volumes("job", namespace, ephemeral),
                with_volumes("web", namespace, *kubelet_only),
                *(pod(f"plain-{i}", namespace, SCHEDULER) for i in range(5)),
            ],
        )
        expected = {
            "db-0": f'pod has PersistentVolumeClaim volume "data" (claim "data-db-0"): {NO_BINDING}',
            "job": f'pod has ephemeral volume "scratch" (claim "job-scratch"): {NO_BINDING}',
        }
        wait_for(
            lambda: _bound(core, namespace) == {"web", *(f"plain-{i}" for i in range(5))},
            60,
            "6 pods to bind",
        )
        for name, reason in expected.items():
            message = f"0/10 nodes are available: {reason}."
            wait_for(lambda n=name: _failed(core, namespace, n), 60, f"a FailedScheduling event for {name}")
            [event] = _failed(core, namespace, name)
            assert (event.type, event.message) == ("Warning", message), _log(scheduler)
            current = core.read_namespaced_pod(name, namespace)
            assert current.spec.node_name is None
            assert current.status.phase == "Pending"
            [condition] = [c for c in current.status.conditions or [] if c.type == "PodScheduled"]
            assert (condition.status, condition.reason, condition.message) == (
                "False",
                "Unschedulable",
                message,
            )

        # The scheduler goes on binding after them.
        create_pods(core, [pod("later", namespace, SCHEDULER)])
        wait_for(lambda: "later" in _bound(core, namespace), 60, "a later pod to bind")
        assert not {"db-0", "job"} & _bound(core, namespace)


def _bound(core: client.CoreV1Api, namespace: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name}


def _failed(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    return [e for e in pod_events(core, namespace, name) if e.reason == "FailedScheduling"]


def _log(scheduler: SchedulerProcess) -> str:
    return scheduler.log()[-3000:]
