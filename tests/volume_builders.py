"""Storage manifests for tests (claims, volumes, classes, CSINodes, pods with claim
volumes), as the API server would hold them, and a state that holds them parsed the
way the live scheduler parses them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.objects.volume_manifest import (
    claim_from_manifest,
    csi_node_from_manifest,
    storage_class_from_manifest,
    volume_from_manifest,
)
from scheduler.objects.volumes import BIND_COMPLETED, SELECTED_NODE
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_state, pod_manifest

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
Manifest = dict[str, Any]


def claim_manifest(
    name: str,
    *,
    namespace: str = "default",
    storage_class: str | None = None,
    size: str = "1Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    volume: str | None = None,
    bound: bool = False,
    selected_node: str | None = None,
    owner_uid: str | None = None,
    selector: Mapping[str, str] | None = None,
    phase: str | None = None,
    deleting: bool = False,
) -> Manifest:
    """A claim; ``volume`` names its PV, ``bound`` adds bind-completed (both: bound)."""
    metadata: Manifest = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": {}}
    if bound:
        metadata["annotations"][BIND_COMPLETED] = "yes"
    if selected_node is not None:
        metadata["annotations"][SELECTED_NODE] = selected_node
    if owner_uid is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}
        ]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Manifest = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume is not None:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = {"matchLabels": dict(selector)}
    status = {"phase": phase or ("Bound" if bound else "Pending")}
    kind = {"apiVersion": "v1", "kind": "PersistentVolumeClaim"}
    return {**kind, "metadata": metadata, "spec": spec, "status": status}


def volume_manifest(
    name: str,
    *,
    storage_class: str = "",
    size: str = "10Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    nodes: Sequence[str] | None = None,
    zones: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    claim: tuple[str, str] | None = None,
    phase: str = "Available",
    csi: tuple[str, str] | None = None,
) -> Manifest:
    """A PV; ``nodes`` (hostnames) or ``zones`` make its required node affinity,
    ``claim`` (namespace, name) its claimRef, ``csi`` (driver, handle) its source."""
    spec: Manifest = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": storage_class,
    }
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["hostPath"] = {"path": f"/mnt/{name}"}
    expressions = []
    if nodes is not None:
        expressions.append({"key": HOSTNAME, "operator": "In", "values": list(nodes)})
    if zones is not None:
        expressions.append({"key": ZONE, "operator": "In", "values": list(zones)})
    if expressions:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if claim is not None:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": claim[0], "name": claim[1]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": phase},
    }


def storage_class_manifest(
    name: str,
    *,
    provisioner: str = "example.com/local",
    mode: str = "WaitForFirstConsumer",
    zones: Sequence[str] | None = None,
) -> Manifest:
    manifest: Manifest = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Delete",
    }
    if zones is not None:
        manifest["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return manifest


def csi_node_manifest(name: str, limits: Mapping[str, int]) -> Manifest:
    drivers = [{"name": d, "nodeID": name, "allocatable": {"count": c}} for d, c in limits.items()]
    kind = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode"}
    return {**kind, "metadata": {"name": name}, "spec": {"drivers": drivers}}


def claim_pod_manifest(
    name: str,
    claims: Iterable[str] = (),
    *,
    namespace: str = "default",
    ephemeral: Iterable[str] = (),
    scheduler: str | None = None,
    uid: str | None = None,
    extra_volumes: Iterable[Manifest] = (),
) -> Manifest:
    """A pod mounting ``claims`` (by name) and generic ephemeral volumes ``ephemeral``
    (by volume name)."""
    manifest = pod_manifest(name, namespace=namespace)
    volumes: list[Manifest] = [{"name": f"v-{c}", "persistentVolumeClaim": {"claimName": c}} for c in claims]
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": template}} for v in ephemeral]
    volumes += list(extra_volumes)
    manifest["spec"]["volumes"] = volumes
    manifest["spec"]["containers"][0]["volumeMounts"] = [
        {"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes
    ]
    manifest["metadata"]["uid"] = uid or f"uid-{name}"
    if scheduler is not None:
        manifest["spec"]["schedulerName"] = scheduler
    return manifest


def claim_pod(name: str, claims: Iterable[str] = (), **kwargs: Any) -> Pod:
    return pod_from_manifest(claim_pod_manifest(name, claims, **kwargs))


def volume_state(
    nodes: Iterable[Node],
    *,
    placed: Iterable[tuple[Pod, str]] = (),
    claims: Iterable[Manifest] = (),
    volumes: Iterable[Manifest] = (),
    classes: Iterable[Manifest] = (),
    csi_nodes: Iterable[Manifest] = (),
) -> ClusterState:
    state = make_state(nodes, placed)
    catalog = state.volumes
    for manifest in claims:
        catalog.put_claim(claim_from_manifest(manifest))
    for manifest in volumes:
        catalog.put_volume(volume_from_manifest(manifest))
    for manifest in classes:
        catalog.put_class(storage_class_from_manifest(manifest))
    for manifest in csi_nodes:
        catalog.put_csi_node(csi_node_from_manifest(manifest))
    return state
