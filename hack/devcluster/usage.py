"""Requested versus allocatable resources per node, computed from API objects.

Pod requests follow kube-scheduler's rule: the larger of the sum over containers and
the largest init container, plus the pod overhead. Only pods that hold resources
count: bound and not finished (Succeeded/Failed pods have released theirs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from devcluster import names
from devcluster.kube import parse_quantity
from scheduler.resources.hami import ProtocolError, parse_register

_MIB = Decimal(1024 * 1024)


@dataclass
class Resources:
    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0
    pods: int = 0

    def add(self, other: Resources) -> None:
        self.cpu_milli += other.cpu_milli
        self.memory_mib += other.memory_mib
        self.gpus += other.gpus
        self.pods += other.pods


def from_resource_list(values: dict[str, Any] | None) -> Resources:
    """Resources of a node's allocatable or a container's requests."""
    values = values or {}

    def quantity(key: str) -> Decimal:
        return parse_quantity(values[key]) if key in values else Decimal(0)

    return Resources(
        cpu_milli=int(quantity("cpu") * 1000),
        memory_mib=int(quantity("memory") / _MIB),
        gpus=int(quantity(names.GPU_RESOURCE)),
        pods=int(quantity("pods")),
    )


def pod_requests(pod: Any) -> Resources:
    """What kube-scheduler accounts for one pod (a V1Pod); pods=1."""
    total = Resources()
    for container in pod.spec.containers or []:
        total.add(from_resource_list(container.resources.requests if container.resources else None))
    for init in pod.spec.init_containers or []:
        r = from_resource_list(init.resources.requests if init.resources else None)
        total.cpu_milli = max(total.cpu_milli, r.cpu_milli)
        total.memory_mib = max(total.memory_mib, r.memory_mib)
        total.gpus = max(total.gpus, r.gpus)
    total.add(from_resource_list(pod.spec.overhead))
    total.pods = 1
    return total


def holds_resources(pod: Any) -> bool:
    return bool(pod.spec.node_name) and pod.status.phase not in ("Succeeded", "Failed")


@dataclass
class NodeUsage:
    name: str
    zone: str
    gpu_model: str
    allocatable: Resources
    requested: Resources = field(default_factory=Resources)
    ready: bool = False


def gpu_model(annotations: dict[str, str]) -> str:
    """The GPU type HAMi registered on the node (without the plugin's ``NVIDIA-``)."""
    try:
        devices = parse_register(annotations.get(names.REGISTER_ANNOTATION, "[]"))
    except ProtocolError:
        return "?"
    return devices[0].type.removeprefix("NVIDIA-") if devices else ""


def node_usage(nodes: list[Any], pods: list[Any]) -> list[NodeUsage]:
    """One row per node (V1Node list), sorted by name."""
    rows: dict[str, NodeUsage] = {}
    for node in nodes:
        labels = node.metadata.labels or {}
        conditions = node.status.conditions or []
        rows[node.metadata.name] = NodeUsage(
            name=node.metadata.name,
            zone=labels.get(names.ZONE_LABEL, ""),
            gpu_model=gpu_model(node.metadata.annotations or {}),
            allocatable=from_resource_list(node.status.allocatable),
            ready=any(c.type == "Ready" and c.status == "True" for c in conditions),
        )
    for pod in pods:
        if holds_resources(pod) and pod.spec.node_name in rows:
            rows[pod.spec.node_name].requested.add(pod_requests(pod))
    return [rows[name] for name in sorted(rows)]


def totals(rows: list[NodeUsage]) -> tuple[Resources, Resources]:
    """(requested, allocatable) summed over rows."""
    requested, allocatable = Resources(), Resources()
    for row in rows:
        requested.add(row.requested)
        allocatable.add(row.allocatable)
    return requested, allocatable
