"""Storage objects from their manifests (the API's camelCase JSON): a pod's claim
volumes and inline disks, PersistentVolumeClaims, PersistentVolumes, StorageClasses and
CSINodes. Errors name the object and the field."""

from __future__ import annotations

from typing import Any

from scheduler.errors import SchedulerInputError
from scheduler.objects.csi_migration import in_tree_identity
from scheduler.objects.fields import FieldReader, Manifest
from scheduler.objects.selectors import NodeSelector, NodeSelectorTerm, Requirement
from scheduler.objects.volumes import (
    BETA_STORAGE_CLASS,
    BIND_COMPLETED,
    SELECTED_NODE,
    Claim,
    ClaimRef,
    CsiNode,
    InlineDisk,
    PersistentVolume,
    PodVolume,
    StorageClass,
)
from scheduler.resources.quantity import ceil_int, parse_quantity

_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


class VolumeSpecError(SchedulerInputError):
    """A storage object the scheduler cannot read."""


def pod_volumes(
    reader: FieldReader, spec: Manifest, pod_name: str
) -> tuple[tuple[PodVolume, ...], tuple[InlineDisk, ...]]:
    """The pod's claim volumes (in spec order) and its inline disks."""
    claims: list[PodVolume] = []
    disks: list[InlineDisk] = []
    for i, raw in enumerate(reader.sequence(spec.get("volumes"), "spec.volumes")):
        path = f"spec.volumes[{i}]"
        volume = reader.mapping(raw, path)
        name = reader.string(volume.get("name"), f"{path}.name")
        if volume.get("persistentVolumeClaim") is not None:
            source = reader.mapping(volume["persistentVolumeClaim"], f"{path}.persistentVolumeClaim")
            claim = reader.string(source.get("claimName"), f"{path}.persistentVolumeClaim.claimName")
            if not claim:
                raise reader.fail(f"{path}.persistentVolumeClaim.claimName", "must not be empty")
            claims.append(PodVolume(name, claim))
        elif volume.get("ephemeral") is not None:
            claims.append(PodVolume(name, f"{pod_name}-{name}", ephemeral=True))
        else:
            disk = _inline_disk(reader, volume, path)
            if disk is not None:
                disks.append(disk)
    return tuple(claims), tuple(disks)


def _inline_disk(reader: FieldReader, volume: Manifest, path: str) -> InlineDisk | None:
    def source(kind: str) -> Manifest:
        return reader.mapping(volume.get(kind), f"{path}.{kind}")

    def text(item: Manifest, kind: str, key: str, default: str = "") -> str:
        return reader.string(item.get(key), f"{path}.{kind}.{key}", default)

    def read_only(item: Manifest, kind: str) -> bool:
        value = item.get("readOnly")
        if value is not None and not isinstance(value, bool):
            raise reader.fail(f"{path}.{kind}.readOnly", f"expected true or false, got {value!r}")
        return bool(value)

    if volume.get("gcePersistentDisk") is not None:
        item = source("gcePersistentDisk")
        pd = text(item, "gcePersistentDisk", "pdName")
        return InlineDisk("gcePersistentDisk", (pd,), read_only(item, "gcePersistentDisk"))
    if volume.get("awsElasticBlockStore") is not None:
        item = source("awsElasticBlockStore")
        return InlineDisk("awsElasticBlockStore", (text(item, "awsElasticBlockStore", "volumeID"),))
    if volume.get("iscsi") is not None:
        item = source("iscsi")
        return InlineDisk("iscsi", (text(item, "iscsi", "iqn"),), read_only(item, "iscsi"))
    if volume.get("rbd") is not None:
        item = source("rbd")
        monitors = frozenset(
            reader.string(m, f"{path}.rbd.monitors[{j}]")
            for j, m in enumerate(reader.sequence(item.get("monitors"), f"{path}.rbd.monitors"))
        )
        identity = (text(item, "rbd", "pool", "rbd"), text(item, "rbd", "image"))
        return InlineDisk("rbd", identity, read_only(item, "rbd"), monitors)
    return None


def _storage_bytes(reader: FieldReader, raw: Any, path: str) -> int:
    amounts = reader.mapping(raw, path)
    if amounts.get("storage") is None:
        return 0
    value = parse_quantity(amounts["storage"], obj=reader.obj, field=f"{path}.storage")
    if value < 0:
        raise reader.fail(f"{path}.storage", f"must not be negative, got {amounts['storage']!r}")
    return ceil_int(value)


def _modes(reader: FieldReader, raw: Any, path: str) -> tuple[str, ...]:
    return tuple(reader.string(m, f"{path}[{i}]") for i, m in enumerate(reader.sequence(raw, path)))


def _meta(manifest: Manifest, kind: str, namespaced: bool) -> tuple[FieldReader, Manifest, str, str]:
    metadata = manifest.get("metadata") or {}
    name = str(metadata.get("name") or "<unnamed>")
    namespace = str(metadata.get("namespace") or "default") if namespaced else ""
    reader = FieldReader(f"{kind} {namespace + '/' if namespaced else ''}{name}", VolumeSpecError)
    return reader, reader.mapping(metadata, "metadata"), name, namespace


def claim_from_manifest(manifest: Manifest) -> Claim:
    reader, metadata, name, namespace = _meta(manifest, "persistentvolumeclaim", namespaced=True)
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    annotations = reader.string_map(metadata.get("annotations"), "metadata.annotations")
    storage_class = annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None:
        storage_class = reader.string(spec.get("storageClassName"), "spec.storageClassName")
    controller_uid = ""
    for i, raw in enumerate(reader.sequence(metadata.get("ownerReferences"), "metadata.ownerReferences")):
        owner = reader.mapping(raw, f"metadata.ownerReferences[{i}]")
        if owner.get("controller") is True:
            controller_uid = reader.string(owner.get("uid"), f"metadata.ownerReferences[{i}].uid")
    resources = reader.mapping(spec.get("resources"), "spec.resources")
    return Claim(
        namespace=namespace,
        name=name,
        uid=reader.string(metadata.get("uid"), "metadata.uid"),
        resource_version=reader.string(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        storage_class=storage_class,
        volume_name=reader.string(spec.get("volumeName"), "spec.volumeName"),
        bind_completed=BIND_COMPLETED in annotations,
        phase=reader.string(status.get("phase"), "status.phase", "Pending"),
        deleting=metadata.get("deletionTimestamp") is not None,
        access_modes=_modes(reader, spec.get("accessModes"), "spec.accessModes"),
        volume_mode=reader.string(spec.get("volumeMode"), "spec.volumeMode", "Filesystem") or "Filesystem",
        request_bytes=_storage_bytes(reader, resources.get("requests"), "spec.resources.requests"),
        selector=reader.label_selector(spec.get("selector"), "spec.selector"),
        attributes_class=reader.string(
            spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"
        ),
        selected_node=annotations.get(SELECTED_NODE),
        controller_uid=controller_uid,
        annotations=annotations,
    )


def volume_from_manifest(manifest: Manifest) -> PersistentVolume:
    reader, metadata, name, _ = _meta(manifest, "persistentvolume", namespaced=False)
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    annotations = reader.string_map(metadata.get("annotations"), "metadata.annotations")
    storage_class = annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None:
        storage_class = reader.string(spec.get("storageClassName"), "spec.storageClassName")
    claim_ref = None
    if spec.get("claimRef") is not None:
        ref = reader.mapping(spec["claimRef"], "spec.claimRef")
        claim_ref = ClaimRef(
            namespace=reader.string(ref.get("namespace"), "spec.claimRef.namespace"),
            name=reader.string(ref.get("name"), "spec.claimRef.name"),
            uid=reader.string(ref.get("uid"), "spec.claimRef.uid"),
        )
    affinity = reader.mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
    csi = reader.mapping(spec.get("csi"), "spec.csi")
    labels = reader.string_map(metadata.get("labels"), "metadata.labels")
    csi_driver = reader.string(csi.get("driver"), "spec.csi.driver")
    csi_handle = reader.string(csi.get("volumeHandle"), "spec.csi.volumeHandle")
    if not csi:  # an in-tree source kube-scheduler counts as its CSI driver's (csi_migration)
        csi_driver, csi_handle = in_tree_identity(spec, labels)
    return PersistentVolume(
        name=name,
        resource_version=reader.string(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        storage_class=storage_class,
        capacity_bytes=_storage_bytes(reader, spec.get("capacity"), "spec.capacity"),
        access_modes=_modes(reader, spec.get("accessModes"), "spec.accessModes"),
        volume_mode=reader.string(spec.get("volumeMode"), "spec.volumeMode", "Filesystem") or "Filesystem",
        phase=reader.string(status.get("phase"), "status.phase", "Pending"),
        claim_ref=claim_ref,
        labels=labels,
        node_affinity=reader.node_selector(affinity.get("required"), "spec.nodeAffinity.required"),
        deleting=metadata.get("deletionTimestamp") is not None,
        attributes_class=reader.string(
            spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"
        ),
        csi_driver=csi_driver,
        csi_handle=csi_handle,
        annotations=annotations,
    )


def storage_class_from_manifest(manifest: Manifest) -> StorageClass:
    reader, _, name, _ = _meta(manifest, "storageclass", namespaced=False)
    mode = reader.string(manifest.get("volumeBindingMode"), "volumeBindingMode", "Immediate")
    if mode not in _BINDING_MODES:
        raise reader.fail("volumeBindingMode", f"unknown mode {mode!r} (one of {', '.join(_BINDING_MODES)})")
    terms = []
    path = "allowedTopologies"
    for i, raw in enumerate(reader.sequence(manifest.get(path), path)):
        term = reader.mapping(raw, f"{path}[{i}]")
        expressions = []
        exprs_path = f"{path}[{i}].matchLabelExpressions"
        for j, e in enumerate(reader.sequence(term.get("matchLabelExpressions"), exprs_path)):
            expression = reader.mapping(e, f"{exprs_path}[{j}]")
            values = tuple(
                reader.string(v, f"{exprs_path}[{j}].values[{k}]")
                for k, v in enumerate(reader.sequence(expression.get("values"), f"{exprs_path}[{j}].values"))
            )
            key = reader.string(expression.get("key"), f"{exprs_path}[{j}].key")
            expressions.append(Requirement(key, "In", values))
        terms.append(NodeSelectorTerm(tuple(expressions)))
    return StorageClass(
        name=name,
        provisioner=reader.string(manifest.get("provisioner"), "provisioner"),
        binding_mode=mode,  # type: ignore[arg-type]
        allowed_topologies=NodeSelector(tuple(terms)) if terms else None,
    )


def csi_node_from_manifest(manifest: Manifest) -> CsiNode:
    reader, _, name, _ = _meta(manifest, "csinode", namespaced=False)
    spec = reader.mapping(manifest.get("spec"), "spec")
    limits: dict[str, int] = {}
    for i, raw in enumerate(reader.sequence(spec.get("drivers"), "spec.drivers")):
        driver = reader.mapping(raw, f"spec.drivers[{i}]")
        allocatable = reader.mapping(driver.get("allocatable"), f"spec.drivers[{i}].allocatable")
        if allocatable.get("count") is not None:
            driver_name = reader.string(driver.get("name"), f"spec.drivers[{i}].name")
            limits[driver_name] = reader.integer(allocatable["count"], f"spec.drivers[{i}].allocatable.count")
    return CsiNode(name, limits)
