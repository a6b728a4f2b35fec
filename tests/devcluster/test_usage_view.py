"""Requested versus allocatable, and the table the live view draws."""

from __future__ import annotations

from kubernetes.client import (
    V1Container,
    V1Node,
    V1NodeCondition,
    V1NodeStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
    V1ResourceRequirements,
)

from devcluster import names, view
from devcluster.usage import node_usage, pod_requests


def node(name: str, cpu: str, memory: str, gpus: str | None = None) -> V1Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable[names.GPU_RESOURCE] = gpus
    return V1Node(
        metadata=V1ObjectMeta(name=name, labels={names.ZONE_LABEL: "zone-a"}),
        status=V1NodeStatus(
            allocatable=allocatable, conditions=[V1NodeCondition(type="Ready", status="True")]
        ),
    )


def pod(node_name: str | None, cpu: str, memory: str, phase: str = "Running", init_cpu: str = "0") -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name="p"),
        spec=V1PodSpec(
            node_name=node_name,
            scheduler_name="default-scheduler",
            containers=[
                V1Container(
                    name="a",
                    resources=V1ResourceRequirements(requests={"cpu": cpu, "memory": memory}),
                ),
            ],
            init_containers=[
                V1Container(name="i", resources=V1ResourceRequirements(requests={"cpu": init_cpu}))
            ],
        ),
        status=V1PodStatus(phase=phase),
    )


def test_pod_requests_take_the_larger_of_containers_and_init() -> None:
    assert pod_requests(pod("n", "500m", "1Gi", init_cpu="2")).cpu_milli == 2000
    assert pod_requests(pod("n", "500m", "1Gi", init_cpu="100m")).cpu_milli == 500
    assert pod_requests(pod("n", "500m", "1Gi")).memory_mib == 1024


def test_only_bound_unfinished_pods_count() -> None:
    pods = [
        pod("n1", "1", "1Gi"),
        pod("n1", "1", "1Gi", phase="Succeeded"),  # released its resources
        pod(None, "1", "1Gi", phase="Pending"),  # not bound
    ]
    (row,) = node_usage([node("n1", "4", "8Gi")], pods)
    assert (row.requested.cpu_milli, row.requested.memory_mib, row.requested.pods) == (
        1000,
        1024,
        1,
    )


def test_render_shows_ratios_totals_and_pending() -> None:
    nodes = [node("n1", "4", "8Gi", gpus="8"), node("n2", "4", "8Gi")]
    pods = [pod("n1", "2", "2Gi"), pod(None, "1", "1Gi", phase="Pending")]
    table = view.render(nodes, pods)
    assert "2000/4000  50%" in table  # n1 cpu: 2000m of 4000m
    assert "2000/8000  25%" in table  # total cpu
    assert "0/8   0%" in table  # n1 GPUs
    assert "TOTAL (2 nodes)" in table
    assert "pending: 1 for default-scheduler" in table


def test_render_caps_rows_at_the_busiest_nodes() -> None:
    nodes = [node(f"n{i}", "4", "8Gi") for i in range(5)]
    table = view.render(nodes, [pod("n3", "3", "1Gi")], max_rows=2)
    assert "n3" in table.splitlines()[1]  # busiest first
    assert "... 3 more nodes" in table
