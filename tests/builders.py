"""Small builders for pods and nodes, written as manifests and parsed the way the live
scheduler parses them, so tests exercise the same path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from scheduler.framework.plugin import CycleContext
from scheduler.objects.node import Node
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.resources.gpu import (
    GPU_CORES_RESOURCE,
    GPU_MEMORY_PERCENT_RESOURCE,
    GPU_MEMORY_RESOURCE,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    USE_GPU_TYPE,
    share_resources,
)
from scheduler.resources.hami import REGISTER_ANNOTATION, Device, format_register
from scheduler.state.cluster_state import ClusterState
from scheduler.state.gpu_fit import gpus_fitting

GPU_MEMORY_MIB = 16 * 1024
SPLIT_COUNT = 10


def pod_manifest(
    name: str = "p",
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    gpus: int = 0,
    gpu_milli: int | None = None,
    gpu_cores: int | None = None,
    gpu_memory: int | None = None,
    gpu_memory_percent: int | None = None,
    gpu_models: str | None = None,
    annotations: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    host_ports: Iterable[int | tuple[int, str, str]] = (),
    topology_spread: Iterable[Mapping[str, Any]] = (),
    priority: int | None = None,
    preemption_policy: str | None = None,
    nominated_node_name: str | None = None,
    start_time: str | None = None,
    deletion_timestamp: str | None = None,
    preempted_by_scheduler: bool = False,
) -> dict[str, Any]:
    """A pod manifest. ``start_time`` and ``deletion_timestamp`` are RFC 3339 times
    (``2024-01-01T00:00:00Z``); ``preempted_by_scheduler`` writes the DisruptionTarget
    condition a scheduler sets on the pods it preempts."""
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
    if gpu_milli is not None:  # a share as the trace writes it: cores and memory alike
        requests.update(share_resources(gpu_milli))
    for resource, value in (
        (GPU_CORES_RESOURCE, gpu_cores),
        (GPU_MEMORY_RESOURCE, gpu_memory),
        (GPU_MEMORY_PERCENT_RESOURCE, gpu_memory_percent),
    ):
        if value is not None:
            requests[resource] = str(value)
    requests.update(extra or {})
    all_annotations: dict[str, str] = dict(annotations or {})
    if gpu_models is not None:
        all_annotations[USE_GPU_TYPE] = gpu_models
    ports = []
    for port in host_ports:
        number, protocol, host_ip = (port, "TCP", "") if isinstance(port, int) else port
        ports.append({"containerPort": number, "hostPort": number, "protocol": protocol, "hostIP": host_ip})
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
    if ports:
        container["ports"] = ports
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "rl-scheduler"}
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if topology_spread:
        spec["topologySpreadConstraints"] = list(topology_spread)
    if priority is not None:
        spec["priority"] = priority
    if preemption_policy is not None:
        spec["preemptionPolicy"] = preemption_policy
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
        "annotations": all_annotations,
    }
    if deletion_timestamp is not None:
        metadata["deletionTimestamp"] = deletion_timestamp
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    status: dict[str, Any] = {}
    if nominated_node_name is not None:
        status["nominatedNodeName"] = nominated_node_name
    if start_time is not None:
        status["startTime"] = start_time
    if preempted_by_scheduler:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    if status:
        manifest["status"] = status
    return manifest


def make_pod(name: str = "p", **kwargs: Any) -> Pod:
    return pod_from_manifest(pod_manifest(name, **kwargs))


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    gpus: int = 0,
    model: str | None = None,
    hami: bool = True,
    gpu_memory: int = GPU_MEMORY_MIB,
    split: int = SPLIT_COUNT,
    devices: Iterable[Device] | None = None,
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A node; ``gpus`` GPUs of type ``NVIDIA-<model>`` registered by HAMi's device plugin
    (``devices`` to write the register annotation's devices yourself), or with
    ``hami=False`` whole GPUs of the plain device plugin (``model`` as GFD's label)."""
    allocatable: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    annotations: dict[str, str] = {}
    registered = list(devices) if devices is not None else None
    if registered is None and gpus and hami:
        registered = [
            Device(f"GPU-{name}-{i}", i, split, gpu_memory, 100, f"NVIDIA-{model}" if model else "NVIDIA")
            for i in range(gpus)
        ]
    if registered is not None:
        allocatable[GPU_RESOURCE] = str(sum(d.count for d in registered))
        annotations[REGISTER_ANNOTATION] = format_register(registered)
    elif gpus:
        allocatable[GPU_RESOURCE] = str(gpus)
        if model:
            all_labels[GPU_PRODUCT_LABEL] = model
    allocatable.update(extra or {})
    spec: dict[str, Any] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def make_node(name: str, **kwargs: Any) -> Node:
    return node_from_manifest(node_manifest(name, **kwargs))


def make_state(nodes: Iterable[Node], placed: Iterable[tuple[Pod, str]] = ()) -> ClusterState:
    """A state holding ``nodes`` with ``placed`` pods (GPU pods take the first GPUs)."""
    state = ClusterState(nodes)
    for pod, node in placed:
        gpus: tuple[int, ...] = ()
        if pod.gpu.count:
            fits = gpus_fitting(state, np.array([state.node_index[node]]), pod.gpu)[0]
            gpus = tuple(int(g) for g in np.flatnonzero(fits)[: pod.gpu.count])
        state.place(pod, node, gpus)
    return state


def context(
    state: ClusterState, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]] | None = None
) -> CycleContext:
    return CycleContext(state, pod, namespace_labels or {})


def all_nodes(state: ClusterState) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.arange(len(state), dtype=np.int64)


def verdicts(
    plugin: Any,
    state: ClusterState,
    pod: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Run one filter plugin over all nodes: node name -> its rejection reasons
    (empty tuple: the node passes). A PreFilter rejection applies to every node.
    ``namespace_labels`` feeds pod affinity's ``namespaceSelector``."""
    ctx = context(state, pod, namespace_labels)
    status = plugin.pre_filter(ctx)
    names = state.node_names
    if status.code.name == "SKIP":
        return dict.fromkeys(names, ())
    if not status.ok:
        return dict.fromkeys(names, status.reasons)
    out: dict[str, list[str]] = {name: [] for name in names}
    for rejection in plugin.filter(ctx, all_nodes(state)):
        for position in np.flatnonzero(rejection.nodes):
            out[names[position]].append(rejection.reason)
    return {name: tuple(reasons) for name, reasons in out.items()}
