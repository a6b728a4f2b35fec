"""Build a ``Node`` from a Kubernetes node manifest."""

from __future__ import annotations

from scheduler.errors import SchedulerInputError
from scheduler.objects.fields import FieldReader, Manifest
from scheduler.objects.node import Node
from scheduler.objects.pod_manifest import resource_amounts
from scheduler.objects.taints import Taint
from scheduler.resources.gpu import GPU_MODEL_LABEL, GPU_RESOURCE, MAX_GPUS_PER_NODE


class NodeSpecError(SchedulerInputError):
    """A node manifest the scheduler cannot use."""


def node_from_manifest(manifest: Manifest) -> Node:
    metadata = manifest.get("metadata") or {}
    name = str(metadata.get("name") or "<unnamed>")
    reader = FieldReader(f"node {name}", NodeSpecError)
    metadata = reader.mapping(metadata, "metadata")
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    labels = reader.string_map(metadata.get("labels"), "metadata.labels")
    allocatable = resource_amounts(reader, status.get("allocatable"), "status.allocatable")
    taints: list[Taint] = []
    for i, raw in enumerate(reader.sequence(spec.get("taints"), "spec.taints")):
        item = reader.mapping(raw, f"spec.taints[{i}]")
        effect = reader.string(item.get("effect"), f"spec.taints[{i}].effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise reader.fail(f"spec.taints[{i}].effect", f"unknown effect {effect!r}")
        taints.append(
            Taint(
                key=reader.string(item.get("key"), f"spec.taints[{i}].key"),
                effect=effect,  # type: ignore[arg-type]
                value=reader.string(item.get("value"), f"spec.taints[{i}].value"),
            )
        )
    gpu_count = allocatable.get(GPU_RESOURCE, 0)
    if gpu_count > MAX_GPUS_PER_NODE:
        raise reader.fail(
            f"status.allocatable.{GPU_RESOURCE}",
            f"{gpu_count} GPUs; at most {MAX_GPUS_PER_NODE} are supported",
        )
    return Node(
        name=name,
        allocatable=allocatable,
        labels=labels,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        gpu_count=gpu_count,
        gpu_model=labels.get(GPU_MODEL_LABEL, ""),
    )
