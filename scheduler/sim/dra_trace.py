"""A trace replayed as DRA pods: nodes' GPUs become ResourceSlices of NVIDIA's DRA
driver and a pod asking for ``nvidia.com/gpu: n`` a ResourceClaim for n devices of the
``gpu.nvidia.com`` class, so the DRA path (the DynamicResources filter, the allocator,
the catalog's occupancy, the scores' view of DRA GPUs in ``scheduler.dra.gpu_view``)
can be checked against the plain replay of the same pods.

Only whole-GPU and CPU-only pods convert: a GPU share has no DRA form here
(``DraTraceError``). A placed pod's claim is allocated as Reserve allocates it (the
allocator's choice on the chosen node, assumed in the catalog), and the pod is placed
without GPU rows: the catalog holds its devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES
from scheduler.dra.gpu_view import DEFAULT_GPU_CLASSES, MODEL_ATTRIBUTE, sync_dra_gpus
from scheduler.dra.node_filter import filter_node
from scheduler.dra.objects import Allocation
from scheduler.errors import SchedulerInputError
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import GPU_RESOURCE, GpuRequest
from scheduler.state.cluster_state import ClusterState

GPU_CLASS: Final = DEFAULT_GPU_CLASSES[0]
DRIVER: Final = "gpu.nvidia.com"  # the driver NVIDIA's DRA driver publishes its slices as
CLAIM_REQUEST: Final = "gpus"


class DraTraceError(SchedulerInputError):
    """A trace pod with no DRA form (a GPU share)."""


def gpu_class_manifest() -> dict[str, Any]:
    """The DeviceClass NVIDIA's driver installs for full GPUs (its selector, shortened)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def node_as_dra(node: Node) -> tuple[Node, dict[str, Any] | None]:
    """The node without device-plugin GPUs, and the ResourceSlice of its GPUs (None
    when it has none): one device per GPU, its type as ``productName``."""
    if not node.gpus:
        return node, None
    allocatable = {k: v for k, v in node.allocatable.items() if k != GPU_RESOURCE}
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                MODEL_ATTRIBUTE: {"string": gpu.type},
                "uuid": {"string": gpu.uuid or f"GPU-{node.name}-{i}"},
            },
        }
        for i, gpu in enumerate(node.gpus)
    ]
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node.name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    return replace(node, allocatable=allocatable, gpus=(), gpu_sharing=False), manifest


def pod_as_dra(pod: Pod) -> tuple[Pod, dict[str, Any] | None]:
    """The pod without its GPU request and with a claim for its GPUs, and that claim
    (None for a CPU-only pod). Raises ``DraTraceError`` for a GPU share."""
    gpu = pod.gpu
    if not gpu.count:
        return pod, None
    if not gpu.is_whole:
        raise DraTraceError(f"pod {pod.key}", "gpu", "a GPU share has no DRA form here")
    name = f"{pod.name}-gpus"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": pod.namespace,
            "uid": f"{pod.uid}-gpus",
            "resourceVersion": "1",
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": CLAIM_REQUEST, "exactly": {"deviceClassName": GPU_CLASS, "count": gpu.count}}
                ]
            }
        },
    }
    requests = {k: v for k, v in pod.requests.items() if k != GPU_RESOURCE}
    return replace(pod, requests=requests, gpu=GpuRequest(), resource_claims=(name,)), claim


def dra_cluster(nodes: Sequence[Node]) -> ClusterState:
    """A state of ``nodes`` (in this order) whose GPUs come from ResourceSlices."""
    converted = [node_as_dra(n) for n in nodes]
    state = ClusterState(n for n, _ in converted)
    state.dra_gpu_classes = frozenset({GPU_CLASS})
    state.dra.apply(CLASSES, "ADDED", gpu_class_manifest())
    for _, manifest in converted:
        if manifest is not None:
            state.dra.apply(SLICES, "ADDED", manifest)
    sync_dra_gpus(state)
    return state


def add_claim(state: ClusterState, claim: dict[str, Any] | None) -> None:
    """A converted pod's claim, created before the pod is scheduled."""
    if claim is not None:
        state.dra.apply(CLAIMS, "ADDED", claim)


def place_dra_pod(state: ClusterState, pod: Pod, node: str) -> None:
    """Allocate the pod's claims on ``node`` as Reserve does, and place the pod (its
    GPUs are the catalog's: it takes no GPU rows)."""
    if pod.resource_claims:
        claims = state.dra.pod_claims(pod.namespace, pod.name, pod.resource_claims)
        pending = [c for c in claims if c.allocation is None]
        if pending:
            i = state.node_index[node]
            decision = filter_node(
                claims,
                state.dra.classes,
                state.dra.slice_index(),
                node,
                state.nodes[i].labels,
                state.dra.in_use(),
            )
            if not decision.status.ok:
                raise DraTraceError(f"pod {pod.key}", "resourceClaims", decision.status.message)
            for claim, allocation in zip(pending, decision.allocations, strict=True):
                state.dra.assume(replace(claim, allocation=Allocation(allocation.results)))
            sync_dra_gpus(state)
    state.place(pod, node)
