"""The storage objects of kube's scheduler_perf volume cases, as its harness makes them:

- a pod of a ``createPods`` with volume and claim templates gets its own claim and its own
  volume, bound to each other from the start (the claim's ``volumeName`` and
  ``pv.kubernetes.io/bind-completed``, the volume's ``claimRef``; both ``Bound``), and one
  volume ``vol`` naming the claim (kube's ``CreatePodWithPersistentVolume``). The volume
  is named ``<namespace>-<claim>`` and its CSI handle or EBS volume ID is that name (kube
  numbers EBS IDs per operation, ``vol-<i>``, so its init and measured volumes share IDs;
  here every volume is distinct);
- ``nodeAllocatableStrategy``: a CSINode per node with each driver's allocatable count
  and the migrated in-tree plugins (``storage.alpha.kubernetes.io/migrated-plugins``), as
  kube's ``NodeAllocatableStrategy`` does; the node's extra allocatable is set on the node.

The dev cluster runs kube-controller-manager (kube's harness does not): its volume
controller takes a ``claimRef`` without the claim's UID for another claim's, and marks a
claim it sees before its volume ``Lost``. So the volume names its claim's UID, and pods
are created once every claim is ``Bound`` (see ``wait_claims_bound``).
"""

from __future__ import annotations

import copy
import json
import time
from typing import TYPE_CHECKING, Any

from scheduler_perf_ops import NodesOp

if TYPE_CHECKING:  # the builders run without the client (unit tests)
    from kubernetes import client

Json = dict[str, Any]
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def _body(manifest: Json) -> Any:
    """A manifest as a request body (the client sends plain dicts as they are)."""
    return manifest


def claim_and_volume(
    claim_template: Json, volume_template: Json, claim_name: str, namespace: str, labels: dict[str, str]
) -> tuple[Json, Json]:
    """A claim and a volume bound to each other."""
    claim = copy.deepcopy(claim_template)
    volume = copy.deepcopy(volume_template)
    volume_name = f"{namespace}-{claim_name}"
    claim.setdefault("apiVersion", "v1")
    claim.setdefault("kind", "PersistentVolumeClaim")
    claim_meta = claim.setdefault("metadata", {})
    claim_meta.update(name=claim_name, namespace=namespace)
    claim_meta["labels"] = {**(claim_meta.get("labels") or {}), **labels}
    claim_meta["annotations"] = {**(claim_meta.get("annotations") or {}), BIND_COMPLETED: "true"}
    claim["spec"]["volumeName"] = volume_name
    volume.setdefault("apiVersion", "v1")
    volume.setdefault("kind", "PersistentVolume")
    volume_meta = volume.setdefault("metadata", {})
    volume_meta["name"] = volume_name
    volume_meta["labels"] = {**(volume_meta.get("labels") or {}), **labels}
    spec = volume["spec"]
    if "csi" in spec:
        spec["csi"]["volumeHandle"] = volume_name
    if "awsElasticBlockStore" in spec:
        spec["awsElasticBlockStore"]["volumeID"] = volume_name
    spec["claimRef"] = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": namespace,
        "name": claim_name,
    }
    return claim, volume


def create_claim_and_volume(core: client.CoreV1Api, claim: Json, volume: Json) -> None:
    """The claim, then the volume pre-bound to it by UID (kube-controller-manager's volume
    controller takes a ``claimRef`` without the claim's UID for another claim's and
    marks the claim ``Lost``), both marked ``Bound``."""
    bound = {"status": {"phase": "Bound"}}
    namespace = claim["metadata"]["namespace"]
    created: Any = core.create_namespaced_persistent_volume_claim(
        namespace, _body(claim), _preload_content=False
    )
    volume["spec"]["claimRef"]["uid"] = json.loads(created.data)["metadata"]["uid"]
    core.create_persistent_volume(_body(volume))
    core.patch_persistent_volume_status(volume["metadata"]["name"], bound)
    core.patch_namespaced_persistent_volume_claim_status(claim["metadata"]["name"], namespace, bound)


def wait_claims_bound(core: client.CoreV1Api, claims: list[Json], timeout_s: float = 60) -> None:
    """Until every claim is ``Bound``. A claim the volume controller saw before its
    volume is ``Lost`` until the controller syncs it again; it is marked ``Bound`` anew
    (the volume names it by UID, so the controller keeps it so)."""
    wanted = {(c["metadata"]["namespace"], c["metadata"]["name"]) for c in claims}
    deadline = time.monotonic() + timeout_s
    while wanted:
        listed: Any = core.list_persistent_volume_claim_for_all_namespaces(_preload_content=False)
        phases = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): (c.get("status") or {}).get("phase")
            for c in json.loads(listed.data)["items"]
        }
        wanted = {key for key in wanted if phases.get(key) != "Bound"}
        for namespace, name in wanted:
            if phases.get((namespace, name)) == "Lost":
                core.patch_namespaced_persistent_volume_claim_status(
                    name, namespace, {"status": {"phase": "Bound"}}
                )
        if wanted and time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted)} claims not bound after {timeout_s:.0f} s, e.g. {min(wanted)}")
        if wanted:
            time.sleep(0.5)


def delete_claims_and_volumes(
    core: client.CoreV1Api, namespaces: set[str], selector: str, timeout_s: float = 120
) -> None:
    """Claims, then volumes, with ``selector``, and wait until they are gone (their
    protection finalizers go once no pod uses them)."""
    for namespace in namespaces:
        core.delete_collection_namespaced_persistent_volume_claim(namespace, label_selector=selector)
    core.delete_collection_persistent_volume(label_selector=selector)
    deadline = time.monotonic() + timeout_s
    while (
        core.list_persistent_volume_claim_for_all_namespaces(label_selector=selector, limit=1).items
        or core.list_persistent_volume(label_selector=selector, limit=1).items
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"claims or volumes {selector} still there after {timeout_s:.0f} s")
        time.sleep(1.0)


def csi_node(node_name: str, op: NodesOp, labels: dict[str, str]) -> Json | None:
    """The CSINode ``op``'s strategy gives the node, or None without one."""
    if not op.csi_allocatable and not op.migrated_plugins:
        return None
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": node_name,
            "labels": labels,
            "annotations": {MIGRATED_PLUGINS_ANNOTATION: ",".join(op.migrated_plugins)},
        },
        "spec": {
            "drivers": [
                {"name": driver, "nodeID": node_name, "allocatable": dict(allocatable)}
                for driver, allocatable in sorted(op.csi_allocatable.items())
            ]
        },
    }


def replace_csi_nodes(storage: client.StorageV1Api, manifests: list[Json], selector: str) -> None:
    """The CSINodes with ``selector`` become exactly ``manifests``."""
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    storage.delete_collection_csi_node(label_selector=selector)
    deadline = time.monotonic() + 60
    while storage.list_csi_node(label_selector=selector, limit=1).items:
        if time.monotonic() > deadline:
            raise TimeoutError(f"CSINodes {selector} still there after 60 s")
        time.sleep(0.5)
    for manifest in manifests:
        try:
            storage.create_csi_node(_body(manifest))
        except ApiException as error:
            if error.status != 409:
                raise
            storage.replace_csi_node(manifest["metadata"]["name"], _body(manifest))


def storage_objects(core: client.CoreV1Api, selector: str) -> tuple[list[Json], list[Json], list[Json]]:
    """The claims, volumes and CSINodes with ``selector``, as plain JSON."""

    def items(response: Any) -> list[Json]:
        listed: list[Json] = json.loads(response.data)["items"]
        return listed

    from kubernetes import client as kube_client  # noqa: PLC0415

    storage = kube_client.StorageV1Api(core.api_client)
    return (
        items(
            core.list_persistent_volume_claim_for_all_namespaces(
                label_selector=selector, _preload_content=False
            )
        ),
        items(core.list_persistent_volume(label_selector=selector, _preload_content=False)),
        items(storage.list_csi_node(label_selector=selector, _preload_content=False)),
    )
