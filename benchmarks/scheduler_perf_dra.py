"""DRA objects of kube's scheduler_perf on the API server, made as kube's harness makes them
(``test/integration/scheduler_perf/dra.go`` of the pinned module):

- ``createResourceDriver``: for each node whose name matches the glob, one ResourceSlice
  named after the node, of the driver, in pool ``<node>`` (one slice), with
  ``maxClaimsPerNode`` devices ``instance-<i>``: attributes ``model`` "A100", ``family``
  "GPU", ``driverVersion`` 1.2.3, ``dra.example.com/numa`` i, capacity ``memory`` 1Gi.
  Our nodes are named ``perf-<op>-<i>`` (``scheduler_perf_objects``): a node matches when
  its template's kube name (``generateName``, or ``name``) followed by ``x`` does, as
  ``scheduler-perf-dra-*`` matches kube's ``scheduler-perf-dra-<random>``.
- ``allocResourceClaims``: every unallocated claim of the namespace, one at a time, on a
  node picked at random that has a free device, written to ``status.allocation`` (no pod
  reserves it; nothing deallocates it). kube calls its structured allocator; here only
  the claims kube's DRA configs allocate this way are understood (one request of one
  device of a class whose selectors name the driver, ``device.driver == "..."``); any
  other claim is an error that names it.

What rl-scheduler does not implement (``docs/dra.md``, "Not implemented") skips a test
case with ``refused_dra_object``'s reason.
"""

from __future__ import annotations

import fnmatch
import json
import random
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from scheduler_perf_ops import NodesOp

Json = dict[str, Any]
NOT_IMPLEMENTED = "rl-scheduler does not implement them, docs/dra.md"
DRA_EXTENDED = f"extended resources backed by DRA (DRAExtendedResource; {NOT_IMPLEMENTED})"
DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"]+)"\s*$')


def refused_dra_object(manifest: Json, versions: bool = True) -> str:
    """Why a ``createAny`` object of resource.k8s.io is not made ("" when it is): a DRA
    feature rl-scheduler does not implement, else (``versions``) an API version other
    than resource.k8s.io/v1."""
    version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    spec = manifest.get("spec") or {}
    devices = spec.get("devices") or []
    if kind == "DeviceTaintRule":
        return f"DeviceTaintRules ({NOT_IMPLEMENTED})"
    if kind == "DeviceClass" and spec.get("extendedResourceName"):
        return f"{spec['extendedResourceName']}: {DRA_EXTENDED}"
    if kind == "ResourceSlice" and (
        spec.get("sharedCounters") or any(d.get("consumesCounters") for d in devices)
    ):
        return f"partitionable devices ({NOT_IMPLEMENTED})"
    if kind == "ResourceSlice" and any(d.get("allowMultipleAllocations") for d in devices):
        return f"consumable capacity ({NOT_IMPLEMENTED})"
    if versions and version != "resource.k8s.io/v1":
        return f"{version} (only resource.k8s.io/v1 objects are made)"
    return ""


def resource_slice(driver: str, node: str, capacity: int, labels: dict[str, str]) -> Json:
    """kube's ``resourceSlice(driverName, nodeName, capacity)``."""
    devices = [
        {
            "name": f"instance-{i}",
            "attributes": {
                "model": {"string": "A100"},
                "family": {"string": "GPU"},
                "driverVersion": {"version": "1.2.3"},
                "dra.example.com/numa": {"int": i},
            },
            "capacity": {"memory": {"value": "1Gi"}},
        }
        for i in range(capacity)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": node, "labels": dict(labels)},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node_name(template: Json, op_index: int, index: int) -> str:
    """The name ``scheduler_perf_objects.make_nodes`` gives node ``index`` of the
    ``op_index``-th ``createNodes``."""
    metadata = template.get("metadata") or {}
    if "generateName" not in metadata and metadata.get("name"):
        return str(metadata["name"])
    return f"perf-{op_index}-{index}"


def driver_nodes(node_ops: Sequence[NodesOp], glob: str) -> list[str]:
    """The nodes whose kube name matches ``glob`` (kube's ``filepath.Match``)."""
    names = []
    for op_index, op in enumerate(node_ops):
        metadata = op.template.get("metadata") or {}
        kube_name = f"{metadata['generateName']}x" if "generateName" in metadata else metadata.get("name", "")
        if fnmatch.fnmatchcase(kube_name, glob):
            names += [node_name(op.template, op_index, i) for i in range(op.count)]
    return names


def _raw(response: Any) -> Json:
    data: Json = json.loads(response.data)
    return data


def replace_slices(
    resource: client.ResourceV1Api, slices: Iterable[Json], selector: str, timeout_s: float
) -> None:
    """The slices with ``selector`` become exactly ``slices``."""
    resource.delete_collection_resource_slice(label_selector=selector)
    deadline = time.monotonic() + timeout_s
    while _raw(resource.list_resource_slice(label_selector=selector, _preload_content=False))["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"ResourceSlices {selector} still there after {timeout_s:.0f} s")
        time.sleep(0.5)
    for manifest in slices:
        resource.create_resource_slice(manifest)  # type: ignore[arg-type]  # a dict is sent as it is


def _driver_of(device_class: Json) -> str:
    selectors = (device_class.get("spec") or {}).get("selectors") or []
    drivers = {
        m.group(1)
        for s in selectors
        if (m := DRIVER_SELECTOR.match((s.get("cel") or {}).get("expression", "")))
    }
    if len(drivers) != 1 or len(selectors) != 1 or (device_class.get("spec") or {}).get("config"):
        raise ValueError(f"DeviceClass {device_class['metadata']['name']}: not one device.driver selector")
    return drivers.pop()


def _one_device_class(claim: Json) -> str:
    """The class of a claim of one request of one device, with nothing else."""
    devices = claim["spec"]["devices"]
    requests = devices.get("requests") or []
    exactly = requests[0].get("exactly") if len(requests) == 1 else None
    if (
        exactly is None
        or devices.get("constraints")
        or devices.get("config")
        or exactly.get("selectors")
        or exactly.get("adminAccess")
        or exactly.get("allocationMode", "ExactCount") != "ExactCount"
        or int(exactly.get("count", 1)) != 1
    ):
        name = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        raise ValueError(f"ResourceClaim {name}: not one request of one device")
    return str(exactly["deviceClassName"])


def allocated_devices(claims: Iterable[Json]) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every device in an allocation."""
    return {
        (r["driver"], r["pool"], r["device"])
        for claim in claims
        for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        or []
    }


def allocation_on(
    claim: Json,
    classes: dict[str, Json],
    slices: Sequence[Json],
    used: set[tuple[str, str, str]],
    rng: random.Random,
) -> Json | None:
    """An allocation of ``claim`` (``_one_device_class``) to a free device of a node picked
    at random, the first free one in its slice, or None; the device is added to ``used``."""
    cls = _one_device_class(claim)
    driver = _driver_of(classes[cls])
    by_node: dict[str, list[Json]] = {}
    for slice_ in slices:
        spec = slice_["spec"]
        if spec["driver"] == driver and spec.get("nodeName"):
            by_node.setdefault(spec["nodeName"], []).append(slice_)
    nodes = sorted(by_node)
    rng.shuffle(nodes)
    request = claim["spec"]["devices"]["requests"][0]["name"]
    for node in nodes:
        for slice_ in by_node[node]:
            pool = slice_["spec"]["pool"]["name"]
            for device in slice_["spec"].get("devices") or []:
                key = (driver, pool, device["name"])
                if key in used:
                    continue
                used.add(key)
                return {
                    "devices": {
                        "results": [
                            {"request": request, "driver": driver, "pool": pool, "device": device["name"]}
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                        ]
                    },
                }
    return None


def allocate_claims(resource: client.ResourceV1Api, namespace: str, seed: int = 0) -> int:
    """``allocResourceClaims`` on ``namespace`` ("": every namespace); how many it allocated."""
    everything = _raw(resource.list_resource_claim_for_all_namespaces(_preload_content=False))["items"]
    classes = {
        c["metadata"]["name"]: c for c in _raw(resource.list_device_class(_preload_content=False))["items"]
    }
    slices = _raw(resource.list_resource_slice(_preload_content=False))["items"]
    used = allocated_devices(everything)
    rng = random.Random(seed)
    mine = [c for c in everything if not namespace or c["metadata"]["namespace"] == namespace]
    allocated = 0
    for index, claim in enumerate(mine):
        if (claim.get("status") or {}).get("allocation"):
            continue
        allocation = allocation_on(claim, classes, slices, used, rng)
        if allocation is None:
            raise RuntimeError(f"could not allocate claim {index} out of {len(mine)}")
        claim.setdefault("status", {})["allocation"] = allocation
        meta = claim["metadata"]
        resource.replace_namespaced_resource_claim_status(meta["name"], meta["namespace"], claim)
        allocated += 1
    return allocated


def wait_claims_released(resource: client.ResourceV1Api, namespaces: Iterable[str], timeout_s: float) -> None:
    """Until no claim in ``namespaces`` is allocated (after a run, kube-controller-manager
    deallocates a claim whose pods are gone and deletes those made for them)."""
    deadline = time.monotonic() + timeout_s
    for namespace in namespaces:
        while True:
            try:
                items = _raw(resource.list_namespaced_resource_claim(namespace, _preload_content=False))[
                    "items"
                ]
            except ApiException as error:
                if error.status == 404:
                    break
                raise
            held = [c["metadata"]["name"] for c in items if (c.get("status") or {}).get("allocation")]
            if not held:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"claims {namespace}/{held[:3]} still allocated after {timeout_s:.0f} s")
            time.sleep(0.5)


def delete_claims(resource: client.ResourceV1Api, namespaces: Iterable[str], timeout_s: float) -> None:
    """Every ResourceClaim in ``namespaces``, waiting until they are gone (a claim a pod
    used keeps kube's finalizer until kube-controller-manager sees the pod gone)."""
    namespaces = list(namespaces)
    for namespace in namespaces:
        resource.delete_collection_namespaced_resource_claim(namespace)
    deadline = time.monotonic() + timeout_s
    for namespace in namespaces:
        while _raw(resource.list_namespaced_resource_claim(namespace, _preload_content=False))["items"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"claims in {namespace} still there after {timeout_s:.0f} s")
            time.sleep(0.5)


def dra_objects(resource: client.ResourceV1Api) -> tuple[list[Json], list[Json], list[Json]]:
    """Every ResourceClaim, DeviceClass and ResourceSlice."""
    claims = _raw(resource.list_resource_claim_for_all_namespaces(_preload_content=False))["items"]
    classes = _raw(resource.list_device_class(_preload_content=False))["items"]
    slices = _raw(resource.list_resource_slice(_preload_content=False))["items"]
    return claims, classes, slices
