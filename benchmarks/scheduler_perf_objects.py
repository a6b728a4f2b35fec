"""The objects scheduler_perf's operations make on the API server: KWOK nodes from a
case's node template, namespaces (with their template's labels), pods from a pod
template (with their claims and volumes, ``scheduler_perf_volumes``), ``createAny``
objects, and a PriorityClass per ``spec.priority`` of a pod template.

kube's harness runs its API server without the Priority admission plugin, so its
templates give a pod ``spec.priority`` (10 for PreemptionBasic's measured pods) and no
class; a real API server refuses such a pod unless its ``priorityClassName`` names a class
of that value. So each value gets a class, ``scheduler-perf-priority-<value>``, and the
pod names it: the pod's priority is the template's, as in kube's runs.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from null_binder import raw_list
from scheduler_perf_ops import AnyOp, NamespacesOp, NodesOp, PodsOp
from scheduler_perf_plan import instance
from scheduler_perf_volumes import (
    claim_and_volume,
    create_claim_and_volume,
    csi_node,
    delete_claims_and_volumes,
    replace_csi_nodes,
    wait_claims_bound,
)
from throughput_cluster import RunTimeoutError, wait_nodes_schedulable
from throughput_schedulers import REPO

sys.path.insert(0, str(REPO / "hack"))
from devcluster import kube, names

PERF_LABEL = "rl-scheduler.io/scheduler-perf"  # "node", "init", or the run's id
ROLE_LABEL = "rl-scheduler.io/scheduler-perf-role"  # a run's pods but the measured ones
PRIORITY_CLASS_PREFIX = "scheduler-perf-priority-"
# kube decodes its templates with Go's case-insensitive JSON, so pod-with-node-inclusion-
# policy.yaml's ``NodeTaintsPolicy`` is ``nodeTaintsPolicy``; the API server would drop it.
SPREAD_FIELDS = {
    name.lower(): name
    for name in (
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "labelSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "matchLabelKeys",
    )
}


def node_manifest(template: dict[str, Any], name: str, labels: dict[str, str]) -> dict[str, Any]:
    node = copy.deepcopy(template)
    metadata = node.setdefault("metadata", {})
    if "generateName" not in metadata and metadata.get("name"):
        name = metadata["name"]  # a node the case's pods name (SchedulingDaemonset's)
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["labels"] = {
        **(metadata.get("labels") or {}),
        names.HOSTNAME_LABEL: name,
        names.KWOK_TYPE_LABEL: names.KWOK_TYPE_VALUE,
        names.GENERATED_BY_LABEL: names.GENERATED_BY_VALUE,
        PERF_LABEL: "node",
        **labels,
    }
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        names.KWOK_NODE_ANNOTATION: names.KWOK_NODE_VALUE,
        "node.alpha.kubernetes.io/ttl": "0",
    }
    status = node.setdefault("status", {})
    for amounts in ("capacity", "allocatable"):  # YAML reads ``foo.com/bar: 1`` as a number
        if amounts in status:
            status[amounts] = {name: str(value) for name, value in status[amounts].items()}
    status.setdefault("allocatable", dict(status.get("capacity") or {}))
    return node


def pod_manifest(template: dict[str, Any], name: str, scheduler_name: str, run: str) -> dict[str, Any]:
    pod = copy.deepcopy(template)
    metadata = pod.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["labels"] = {**(metadata.get("labels") or {}), PERF_LABEL: run}
    pod["spec"]["schedulerName"] = scheduler_name
    if pod["spec"].get("topologySpreadConstraints"):
        pod["spec"]["topologySpreadConstraints"] = [
            {SPREAD_FIELDS.get(k.lower(), k): v for k, v in constraint.items()}
            for constraint in pod["spec"]["topologySpreadConstraints"]
        ]
    for container in pod["spec"].get("containers") or []:  # YAML reads ``cpu: 9`` as a number
        for kind, amounts in (container.get("resources") or {}).items():
            if kind in ("requests", "limits"):  # not ``claims``, a list of DRA claim names
                container["resources"][kind] = {name: str(value) for name, value in (amounts or {}).items()}
    if "priority" in pod["spec"]:
        pod["spec"]["priorityClassName"] = priority_class_name(int(pod["spec"]["priority"]))
    return pod


@dataclass(frozen=True)
class PodObjects:
    """A pod to create, with its claim and volume when its operation has templates."""

    namespace: str
    pod: dict[str, Any]
    claim: dict[str, Any] | None = None
    volume: dict[str, Any] | None = None


def pod_objects(
    op: PodsOp, index: int, name: str, scheduler_name: str, run: str, claim_name: str = ""
) -> PodObjects:
    """Pod ``index`` of ``op``; its claim is named ``claim_name`` (default: as the pod)."""
    pod = pod_manifest(instance(op.template, index, op.count, op.text), name, scheduler_name, run)
    if op.background:
        pod["metadata"]["labels"][ROLE_LABEL] = "background"
    if op.claim is None or op.volume is None:
        return PodObjects(op.namespace, pod)
    claim_name = claim_name or name
    claim, volume = claim_and_volume(op.claim, op.volume, claim_name, op.namespace, {PERF_LABEL: run})
    pod["spec"]["volumes"] = [{"name": "vol", "persistentVolumeClaim": {"claimName": claim_name}}]
    return PodObjects(op.namespace, pod, claim, volume)


def create_all(core: client.CoreV1Api, pods: list[PodObjects]) -> None:
    """The pods' claims and volumes, then, once the claims are bound, the pods."""
    pairs = [(p.claim, p.volume) for p in pods if p.claim is not None and p.volume is not None]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda pair: create_claim_and_volume(core, *pair), pairs))
    wait_claims_bound(core, [claim for claim, _ in pairs])
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod(p.namespace, kube.body(p.pod)), pods))


def node_objects(
    ops: list[NodesOp], made_by: str = "node", first: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes of ``ops`` (the ``first + i``-th ``createNodes`` of a case for ``ops[i]``),
    labelled ``made_by``, and their CSINodes."""
    manifests, csi_nodes = [], []
    for op_index, op in enumerate(ops, first):
        for i in range(op.count):
            labels = {op.label_key: op.label_values[i % len(op.label_values)]} if op.label_key else {}
            labels[PERF_LABEL] = made_by
            name = f"perf-{op_index}-{i}"
            manifest = node_manifest(instance(op.template, i, op.count, op.text), name, labels)
            manifest["status"]["allocatable"].update(op.allocatable)
            manifests.append(manifest)
            csi = csi_node(manifest["metadata"]["name"], op, {PERF_LABEL: made_by})
            if csi is not None:
                csi_nodes.append(csi)
    return manifests, csi_nodes


def make_nodes(core: client.CoreV1Api, ops: list[NodesOp], timeout_s: float) -> None:
    """This benchmark's nodes become exactly those of ``ops`` (other nodes are left alone;
    the benchmark's own cluster has none)."""
    existing = [n["metadata"]["name"] for n in perf_nodes(core)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(core.delete_node, existing))
    manifests, csi_nodes = node_objects(ops)
    replace_csi_nodes(client.StorageV1Api(core.api_client), csi_nodes, f"{PERF_LABEL}=node")
    deadline = time.monotonic() + timeout_s
    while perf_nodes(core):  # a deleted node lingers until its finalizers run
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"old nodes still there after {timeout_s:.0f} s")
        time.sleep(1.0)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda m: core.create_node(kube.body(m)), manifests))
    wait_nodes_schedulable(core, {m["metadata"]["name"] for m in manifests}, timeout_s)


def list_nodes(core: client.CoreV1Api, selector: str = "") -> list[dict[str, Any]]:
    """The cluster's nodes (those with the labels of ``selector``), as plain JSON."""
    response: Any = core.list_node(label_selector=selector, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def perf_nodes(core: client.CoreV1Api, made_by: str = "node") -> list[dict[str, Any]]:
    """This benchmark's nodes (``made_by`` a run's id: those its churn made)."""
    return list_nodes(core, f"{PERF_LABEL}={made_by}")


def delete_run_pods(
    core: client.CoreV1Api, namespaces: set[str], selector: str, timeout_s: float = 300
) -> None:
    """The pods with ``selector`` (their finalizers taken off: kube's pod-with-finalizer.yaml),
    then their claims and volumes; waits until they are gone. A collection delete the API
    server answers 504 (10,000 pods with claims: it gives up waiting after 60 s) is sent
    again until it goes through."""
    deadline = time.monotonic() + timeout_s
    for namespace in namespaces:
        while True:
            try:
                core.delete_collection_namespaced_pod(
                    namespace, label_selector=selector, grace_period_seconds=0
                )
                break
            except ApiException as error:
                if error.status != 504 or time.monotonic() > deadline:
                    raise
                print(f"  deleting pods in {namespace}: 504 from the API server, sent again", flush=True)
    for pod in raw_list(core, label_selector=selector)["items"]:
        meta = pod["metadata"]
        if meta.get("finalizers"):
            try:
                core.patch_namespaced_pod(meta["name"], meta["namespace"], {"metadata": {"finalizers": None}})
            except ApiException as error:
                if error.status != 404:
                    raise
    while raw_list(core, label_selector=selector, limit=1)["items"]:
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"pods {selector} still there after {timeout_s:.0f} s")
        time.sleep(1.0)
    delete_claims_and_volumes(core, namespaces, selector, timeout_s)


def priority_class_name(priority: int) -> str:
    return f"{PRIORITY_CLASS_PREFIX}{priority}"


def ensure_priority_classes(api: client.ApiClient, priorities: set[int]) -> None:
    """A PriorityClass for each value (kept if it exists with that value)."""
    scheduling = client.SchedulingV1Api(api)
    for value in sorted(priorities):
        manifest = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class_name(value), "labels": {PERF_LABEL: "priority"}},
            "value": value,
            "description": "scheduler_perf: a pod template's spec.priority",
        }
        try:
            scheduling.create_priority_class(kube.body(manifest))
        except ApiException as error:
            if error.status != 409:
                raise


def ensure_namespaces(
    core: client.CoreV1Api, kubeconfig: Path, ops: list[NamespacesOp], others: set[str]
) -> None:
    """The namespaces of ``ops`` with their template's labels (set again on one that
    exists), and ``others`` as they come; each ready for pods."""
    labels = {name: op.labels for op in ops for name in op.names}
    for name in sorted(set(labels) | others):
        metadata: dict[str, Any] = {"name": name}
        if labels.get(name):
            metadata["labels"] = labels[name]
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        try:
            core.create_namespace(kube.body(manifest))
        except ApiException as error:
            if error.status != 409:
                raise
            if labels.get(name):
                core.patch_namespace(name, {"metadata": {"labels": labels[name]}})
        kube.ensure_namespace(core, name, kubeconfig)


def create_any(core: client.CoreV1Api, op: AnyOp) -> None:
    """``createAny``'s objects (the kinds of ``ANY_KINDS``); one that exists is kept (DRA
    claims are deleted beforehand, ``scheduler_perf_dra.delete_claims``)."""
    resource = client.ResourceV1Api(core.api_client)
    creators: dict[str, Callable[..., Any]] = {
        "services": core.create_namespaced_service,
        "resourceclaims": resource.create_namespaced_resource_claim,
        "resourceclaimtemplates": resource.create_namespaced_resource_claim_template,
        "deviceclasses": resource.create_device_class,
    }
    for manifest in op.manifests:
        try:
            if op.namespace:
                creators[op.resource](op.namespace, kube.body(manifest))
            else:
                creators[op.resource](kube.body(manifest))
        except ApiException as error:
            if error.status != 409:
                raise
