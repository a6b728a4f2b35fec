"""Build a ``Node`` from a Kubernetes node manifest, its GPUs from HAMi's register
annotation (see ``scheduler.resources.gpu``)."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.errors import SchedulerInputError
from scheduler.objects.fields import FieldReader, Manifest
from scheduler.objects.node import Gpu, Node
from scheduler.objects.pod_manifest import resource_amounts
from scheduler.objects.taints import Taint
from scheduler.resources.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE, MAX_GPUS_PER_NODE, parse_list
from scheduler.resources.hami import (
    DEVICE_CORDON_ANNOTATION,
    DEVICE_VENDOR,
    REGISTER_ANNOTATION,
    SHARED_MODES,
    Device,
    ProtocolError,
    parse_register,
)

# HAMi's devcore with no core scaling: a GPU's cores are 100%.
FULL_CORES = 100


class NodeSpecError(SchedulerInputError):
    """A node manifest the scheduler cannot use."""


def _unusable(device: Device, cordoned: set[str]) -> str:
    """Why the scheduler does not place on ``device`` (empty: it does)."""
    if not device.health:
        return "unhealthy"
    if device.uuid in cordoned:
        return f"cordoned ({DEVICE_CORDON_ANNOTATION})"
    if device.mode not in SHARED_MODES:
        return f"mode {device.mode!r} (rl-scheduler places on {' and '.join(SHARED_MODES)} devices)"
    if device.cores != FULL_CORES:
        return f"devcore {device.cores} (core scaling is not supported)"
    if DEVICE_VENDOR not in device.type.upper():
        return f"type {device.type!r} is not an NVIDIA GPU"
    if device.count <= 0 or device.memory_mib <= 0:
        return f"count {device.count}, devmem {device.memory_mib}"
    return ""


def node_gpus(
    allocatable: Mapping[str, int], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[tuple[Gpu, ...], bool, str]:
    """``(gpus, sharing, problem)``: HAMi's usable devices when the node registers some
    and advertises ``nvidia.com/gpu``; else the advertised GPUs, whole."""
    advertised = allocatable.get(GPU_RESOURCE, 0)
    text = annotations.get(REGISTER_ANNOTATION)
    if text is None:
        if advertised > MAX_GPUS_PER_NODE:
            return (), False, f"{advertised} whole GPUs; at most {MAX_GPUS_PER_NODE} are supported"
        return (Gpu(type=labels.get(GPU_PRODUCT_LABEL, "")),) * advertised, False, ""
    if advertised <= 0:
        return (
            (),
            False,
            f"{REGISTER_ANNOTATION} without allocatable {GPU_RESOURCE}: the device plugin is down",
        )
    try:
        devices = parse_register(text)
    except ProtocolError as error:
        return (), False, f"metadata.annotations.{REGISTER_ANNOTATION}: {error}"
    if not devices:
        return (), False, f"metadata.annotations.{REGISTER_ANNOTATION}: no device"
    cordoned = set(parse_list(annotations.get(DEVICE_CORDON_ANNOTATION, "")))
    problems = []
    usable: list[Device] = []
    for device in devices:
        why = _unusable(device, cordoned)
        if why:
            problems.append(f"{device.uuid or f'device {device.index}'}: {why}")
        else:
            usable.append(device)
    if len(usable) > MAX_GPUS_PER_NODE:
        problems.append(f"{len(usable)} usable GPUs; the first {MAX_GPUS_PER_NODE} are used")
        usable = usable[:MAX_GPUS_PER_NODE]
    gpus = tuple(Gpu(d.uuid, d.memory_mib, d.count, d.type, d.mode, d.numa) for d in usable)
    return gpus, True, "; ".join(problems)


def node_from_manifest(manifest: Manifest) -> Node:
    metadata = manifest.get("metadata") or {}
    name = str(metadata.get("name") or "<unnamed>")
    reader = FieldReader(f"node {name}", NodeSpecError)
    metadata = reader.mapping(metadata, "metadata")
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    labels = reader.string_map(metadata.get("labels"), "metadata.labels")
    annotations = reader.string_map(metadata.get("annotations"), "metadata.annotations")
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
    gpus, sharing, problem = node_gpus(allocatable, labels, annotations)
    return Node(
        name=name,
        allocatable=allocatable,
        labels=labels,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        gpus=gpus,
        gpu_sharing=sharing,
        gpu_problem=problem,
    )
