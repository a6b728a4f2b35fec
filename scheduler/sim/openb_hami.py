"""openb rows as HAMi nodes and pods, and back.

A trace node is a node of HAMi's device plugin: its GPUs registered in
``hami.io/node-nvidia-register`` (type ``NVIDIA-<model>``, the plugin's own prefix for
names without ``NVIDIA``; memory from ``OPENB_GPU_MEMORY_MIB``; ``TRACE_SPLIT_COUNT``
vGPU slots) and ``nvidia.com/gpu`` advertised as GPUs x slots. A trace pod is a HAMi
pod: ``num_gpu`` as ``nvidia.com/gpu``, a share of ``gpu_milli`` as
``nvidia.com/gpucores`` and ``nvidia.com/gpumem-percentage`` of ``gpu_milli / 10``
each, ``gpu_spec`` as ``nvidia.com/use-gputype``. ``trace_pod_row`` and
``trace_node_row`` give the rows back (tested), so the simulator, the training and the
live scheduler see one thing.
"""

from __future__ import annotations

from typing import Any

from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import (
    GPU_RESOURCE,
    MILLI_PER_GPU,
    USE_GPU_TYPE,
    parse_model_list,
    share_resources,
)
from scheduler.resources.hami import REGISTER_ANNOTATION, Device, format_register

TRACE_NAMESPACE = "openb"
# The FGD simulator gives every node room for 1001 pods, so only resources bind.
TRACE_MAX_PODS = 1001
# vGPU slots per GPU: every openb share is at least 10 milli (50 in the shipped
# traces), so at most 100 pods share a GPU and slots never bind before cores do.
TRACE_SPLIT_COUNT = 100
TYPE_PREFIX = "NVIDIA-"
# Memory of each openb GPU model, MiB. The trace names the models only; sizes are the
# vendor's data sheets (NVIDIA Tesla P100 16 GB, T4 16 GB, V100 16 and 32 GB as the
# trace's README says of V100M16 and V100M32, A10 24 GB). G2 and G3 are "undisclosed
# internal GPU codes" (the trace's README): 16 GiB stands in for them and for any
# model not listed. A share asks its memory as a percentage, so no size changes a
# placement of the trace.
OPENB_GPU_MEMORY_MIB = {
    "A10": 24 * 1024,
    "P100": 16 * 1024,
    "T4": 16 * 1024,
    "V100M16": 16 * 1024,
    "V100M32": 32 * 1024,
    "G2": 16 * 1024,
    "G3": 16 * 1024,
}
DEFAULT_GPU_MEMORY_MIB = 16 * 1024


def gpu_type(model: str) -> str:
    """``V100M16`` -> ``NVIDIA-V100M16``, what HAMi's device plugin registers."""
    return f"{TYPE_PREFIX}{model}"


def trace_model(device_type: str) -> str:
    return device_type.removeprefix(TYPE_PREFIX)


def trace_devices(name: str, gpus: int, model: str) -> list[Device]:
    memory = OPENB_GPU_MEMORY_MIB.get(model, DEFAULT_GPU_MEMORY_MIB)
    return [
        Device(
            uuid=f"GPU-{name}-{i}",
            index=i,
            count=TRACE_SPLIT_COUNT,
            memory_mib=memory,
            cores=100,
            type=gpu_type(model),
        )
        for i in range(gpus)
    ]


def trace_node_manifest(name: str, cpu_milli: int, memory_mib: int, gpus: int, model: str) -> dict[str, Any]:
    allocatable = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": str(TRACE_MAX_PODS)}
    metadata: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if gpus:
        allocatable[GPU_RESOURCE] = str(gpus * TRACE_SPLIT_COUNT)
        metadata["annotations"] = {REGISTER_ANNOTATION: format_register(trace_devices(name, gpus, model))}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def trace_node_row(node: Node) -> tuple[int, int, int, str]:
    """``(cpu_milli, memory_mib, gpu, model)`` of a trace node."""
    return (
        node.allocatable.get("cpu", 0),
        node.allocatable.get("memory", 0) >> 20,
        node.gpu_count,
        trace_model(node.gpu_model),
    )


def trace_pod_manifest(
    name: str, cpu_milli: int, memory_mib: int, num_gpu: int, gpu_milli: int, gpu_spec: str = ""
) -> dict[str, Any]:
    """The pod spec a trace row stands for."""
    requests = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi"}
    annotations: dict[str, str] = {}
    if num_gpu:
        requests[GPU_RESOURCE] = str(num_gpu)
        if gpu_milli < MILLI_PER_GPU:
            requests.update(share_resources(gpu_milli))
        models, _ = parse_model_list(gpu_spec)
        if models:
            annotations[USE_GPU_TYPE] = ",".join(models)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": TRACE_NAMESPACE, "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": "task",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": dict(requests)},
                }
            ]
        },
    }


def trace_pod_row(pod: Pod) -> tuple[int, int, int, int, str]:
    """``(cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec)`` of a trace pod."""
    gpu = pod.gpu
    return (
        pod.cpu_milli,
        pod.memory >> 20,
        gpu.count,
        gpu.milli_per_gpu if gpu.count else 0,
        "|".join(gpu.models),
    )
