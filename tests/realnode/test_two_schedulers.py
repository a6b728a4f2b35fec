"""kube-scheduler and rl-scheduler binding to one real node at once: neither sees the
other's assumed pods, so both can count on the same room, and the kubelet refuses the
pod that comes second (``OutOfcpu``). The test measures how often, and checks that
rl-scheduler says so on each of its refused pods (a ``RejectedByNode`` event) and in
``rl_scheduler_node_rejections_total``.

    sudo make real-node-tests   # or: .venv/bin/pytest -m realnode tests/realnode/test_two_schedulers.py

prints ``two schedulers on one node: ...`` with the counts."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client

from scheduler.objects.pod_manifest import pod_from_manifest
from tests.realnode.conftest import RELEASE
from tests.realnode.support import (
    RealCluster,
    is_ready,
    metric_value,
    pod_metrics,
    scheduler_pods,
    wait_for,
)

pytestmark = pytest.mark.realnode
PODS_PER_SCHEDULER = 8
SCHEDULERS = {"kube-scheduler": "default-scheduler", "rl-scheduler": "rl-scheduler"}


def free_milli_cpu(core: client.CoreV1Api, node: str) -> int:
    allocatable = core.read_node(node).status.allocatable["cpu"]
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    used = 0
    for item in pods:
        if item.status.phase in ("Succeeded", "Failed"):
            continue
        used += pod_from_manifest(core.api_client.sanitize_for_serialization(item)).cpu_milli
    milli = pod_from_manifest(
        {
            "metadata": {"name": "n"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": allocatable}}}]},
        }
    ).cpu_milli
    return milli - used


def sleeper(name: str, namespace: str, scheduler: str, cpu_milli: int, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": "two-schedulers"}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "sleep",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": f"{cpu_milli}m", "memory": "8Mi"}},
                }
            ],
        },
    }


def settled(item: Any) -> bool:
    """Running, refused by the kubelet, or left pending by its scheduler."""
    if item.status.phase in ("Running", "Failed"):
        return True
    conditions = item.status.conditions or []
    return not item.spec.node_name and any(
        c.type == "PodScheduled" and c.status == "False" for c in conditions
    )


def test_both_schedulers_fill_one_node_and_the_kubelet_refusals_are_counted_and_reported(
    real_cluster: RealCluster,
    core: client.CoreV1Api,
    release: str,
    scratch: str,
    images: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    the_scheduler = wait_for(
        lambda: [p for p in scheduler_pods(core, release, RELEASE) if is_ready(p)], 120, "a Ready scheduler"
    )[0]
    node = real_cluster.node_name
    # Each scheduler alone would fill the node's free CPU with its pods: together
    # they ask for twice that, created at once.
    free = free_milli_cpu(core, node)
    cpu = math.floor(free / PODS_PER_SCHEDULER)
    assert cpu >= 10, f"{free}m free on {node}: too little to measure"
    manifests = [
        sleeper(f"{short}-{i}", scratch, name, cpu, images["scheduler"])
        for short, name in (("kube", SCHEDULERS["kube-scheduler"]), ("rl", SCHEDULERS["rl-scheduler"]))
        for i in range(PODS_PER_SCHEDULER)
    ]
    order = [
        m
        for pair in zip(manifests[:PODS_PER_SCHEDULER], manifests[PODS_PER_SCHEDULER:], strict=True)
        for m in pair
    ]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda m: core.create_namespaced_pod(scratch, m), order))

    def all_settled() -> list[Any]:
        items = core.list_namespaced_pod(scratch, label_selector="test=two-schedulers").items
        return items if len(items) == len(manifests) and all(settled(p) for p in items) else []

    items = wait_for(all_settled, 180, "every pod running, refused or pending")
    counts = {
        who: {
            "running": sum(1 for p in items if p.spec.scheduler_name == name and p.status.phase == "Running"),
            "refused": sum(
                1
                for p in items
                if p.spec.scheduler_name == name
                and p.status.phase == "Failed"
                and (p.status.reason or "").startswith("OutOf")
            ),
            "pending": sum(1 for p in items if p.spec.scheduler_name == name and not p.spec.node_name),
        }
        for who, name in SCHEDULERS.items()
    }
    with capsys.disabled():
        print(
            f"\ntwo schedulers on one node: {2 * PODS_PER_SCHEDULER} pods of {cpu}m "
            f"({free}m free on {node}), created at once: {counts}"
        )
    assert sum(c["running"] for c in counts.values()) * cpu <= free  # the kubelet never over-commits
    ours = [
        p
        for p in items
        if p.spec.scheduler_name == SCHEDULERS["rl-scheduler"] and (p.status.reason or "").startswith("OutOf")
    ]
    for item in ours:

        def reported(name: str = item.metadata.name) -> bool:
            events = core.list_namespaced_event(scratch, field_selector=f"involvedObject.name={name}").items
            return any(e.reason == "RejectedByNode" and node in (e.message or "") for e in events)

        wait_for(reported, 30, f"a RejectedByNode event on {item.metadata.name}")
    metrics = pod_metrics(the_scheduler, real_cluster.kubeconfig)
    refused = sum(
        metric_value(metrics, "rl_scheduler_node_rejections_total", {"reason": reason}) or 0.0
        for reason in {p.status.reason for p in ours}
    )
    assert refused == len(ours)
