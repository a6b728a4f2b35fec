"""Manifests of resource.k8s.io/v1 objects for the DRA tests, in the shape the API
server returns them, and their parsed models."""

from __future__ import annotations

from typing import Any

from scheduler.dra.manifests import (
    device_class_from_manifest,
    resource_claim_from_manifest,
    resource_slice_from_manifest,
)
from scheduler.dra.objects import DeviceClass, ResourceClaim, ResourceSlice

DRIVER_A = "driver-a.example.com"
DRIVER_B = "driver-b.example.com"


def device(name: str, *, memory: str | None = None, **attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if memory is not None:
        out["capacity"] = {"memory": {"value": memory}}
    if attributes:
        typed = {}
        for key, value in attributes.items():
            if isinstance(value, bool):
                typed[key] = {"bool": value}
            elif isinstance(value, int):
                typed[key] = {"int": value}
            elif isinstance(value, str) and value.startswith("v"):
                typed[key] = {"version": value[1:]}
            else:
                typed[key] = {"string": value}
        out["attributes"] = typed
    return out


def slice_manifest(
    name: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = "node-1",
    driver: str = DRIVER_A,
    pool: str = "pool-1",
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
        **spec,
    }
    if node is not None and not {"nodeSelector", "allNodes", "perDeviceNodeSelection"} & spec.keys():
        body["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body,
    }


def make_slice(name: str, devices: list[dict[str, Any]], **kwargs: Any) -> ResourceSlice:
    return resource_slice_from_manifest(slice_manifest(name, devices, **kwargs))


def class_manifest(name: str, *selectors: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def driver_class(name: str, driver: str) -> DeviceClass:
    """kube's test ``class(name, driver)``: selects the driver's devices."""
    return device_class_from_manifest(class_manifest(name, f'device.driver == "{driver}"'))


def exactly(
    name: str,
    cls: str = "class-a",
    count: int | None = None,
    *selectors: str,
    mode: str | None = None,
    admin: bool | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        spec["count"] = count
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if mode is not None:
        spec["allocationMode"] = mode
    if admin is not None:
        spec["adminAccess"] = admin
    return {"name": name, "exactly": spec}


def first_available(name: str, *subrequests: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subrequests]}


def claim_manifest(
    name: str,
    *requests: dict[str, Any],
    constraints: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    out: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }
    if status is not None:
        out["status"] = status
    return out


def make_claim(name: str, *requests: dict[str, Any], **kwargs: Any) -> ResourceClaim:
    return resource_claim_from_manifest(claim_manifest(name, *requests, **kwargs))
