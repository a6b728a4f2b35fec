"""The DynamicResources Filter for one pod on one node (dynamicresources.go): shared
claims already allocated, claims to allocate, and kube's reasons; and the per-node
free-devices view."""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.dra.free_devices import FreeDevices, free_devices
from scheduler.dra.node_filter import (
    CANNOT_ALLOCATE,
    IN_USE,
    NOT_AVAILABLE,
    devices_in_use,
    filter_node,
    pre_filter,
)
from scheduler.framework.status import Code
from tests.dra.builders import DRIVER_A, device, driver_class, exactly, make_claim, make_slice

CLASSES = {"class-a": driver_class("class-a", DRIVER_A)}
SLICES = [make_slice("slice-1", [device("gpu-0"), device("gpu-1")])]


def allocated(name: str, node: str, *devices: str, admin: bool = False) -> Any:
    return make_claim(
        name,
        exactly("req-0"),
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "req-0",
                            "driver": DRIVER_A,
                            "pool": "pool-1",
                            "device": d,
                            "adminAccess": admin,
                        }
                        for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "other", "uid": "uid-other"}],
        },
    )


SHARED = allocated("shared", "node-1", "gpu-0")
# (case, the pod's claims, other claims allocated in the cluster, node, code, reason, new devices)
CASES = [
    ("shared claim on its node", [SHARED], [], "node-1", Code.SUCCESS, "", []),
    (
        "shared claim elsewhere",
        [SHARED],
        [],
        "node-2",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        NOT_AVAILABLE,
        [],
    ),
    (
        "new claim takes the free device",
        [make_claim("c", exactly("req-0"))],
        [SHARED],
        "node-1",
        Code.SUCCESS,
        "",
        ["gpu-1"],
    ),
    (
        "shared and new claim together",
        [SHARED, make_claim("c", exactly("req-0"))],
        [SHARED],
        "node-1",
        Code.SUCCESS,
        "",
        ["gpu-1"],
    ),
    (
        "no device left",
        [make_claim("c", exactly("req-0", "class-a", 2))],
        [SHARED],
        "node-1",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        CANNOT_ALLOCATE,
        [],
    ),
    (
        "allocation fails before the shared claim is reported",
        [SHARED, make_claim("c", exactly("req-0", "class-a", 3))],
        [SHARED],
        "node-2",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        CANNOT_ALLOCATE,
        [],
    ),
    (
        "admin access does not consume",
        [make_claim("c", exactly("req-0", "class-a", 2))],
        [allocated("watch", "node-1", "gpu-0", admin=True)],
        "node-1",
        Code.SUCCESS,
        "",
        ["gpu-0", "gpu-1"],
    ),
    (
        "a selector error is an error",
        [make_claim("c", exactly("req-0", "class-a", 1, "1 / 0 == 1"))],
        [],
        "node-1",
        Code.ERROR,
        "CEL runtime error",
        [],
    ),
]


@pytest.mark.parametrize(
    ("pod_claims", "others", "node", "code", "reason", "new_devices"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_filter_node(
    pod_claims: list[Any], others: list[Any], node: str, code: Code, reason: str, new_devices: list[str]
) -> None:
    decision = filter_node(pod_claims, CLASSES, SLICES, node, {}, devices_in_use(others))
    assert decision.status.code == code
    assert reason in decision.status.message
    assert [r.device for a in decision.allocations for r in a.results] == new_devices


def test_free_devices_per_node() -> None:
    slices = [*SLICES, make_slice("slice-2", [device("gpu-0")], node="node-2", pool="pool-2")]
    view = free_devices(
        CLASSES["class-a"],
        slices,
        {"node-1": {}, "node-2": {}, "node-3": {}},
        {(DRIVER_A, "pool-1", "gpu-0")},
    )
    assert view == {"node-1": FreeDevices(1, 2), "node-2": FreeDevices(1, 1), "node-3": FreeDevices(0, 0)}


def test_pre_filter_claim_in_use() -> None:
    """dynamicresources.go PreFilter: a claim reserved for 256 other consumers is in use;
    one of them may still use it."""
    manifest_status = {
        "allocation": {"devices": {"results": []}},
        "reservedFor": [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)],
    }
    full = make_claim("full", exactly("req-0"), status=manifest_status)
    assert pre_filter([full], "new").code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre_filter([full], "new").message == IN_USE
    assert pre_filter([full], "u7").ok
    assert pre_filter([SHARED], "new").ok


def test_search_past_its_timeout() -> None:
    """kube's filterTimeout: req-1 can never be met (no driver-b devices), so the search
    backtracks through all C(30, 10) choices for req-0; the deadline stops it."""
    classes = {**CLASSES, "class-b": driver_class("class-b", "driver-b.example.com")}
    slices = [make_slice("slice-1", [device(f"gpu-{i}") for i in range(30)])]
    claim = make_claim("c", exactly("req-0", "class-a", 10), exactly("req-1", "class-b"))
    started = time.perf_counter()
    decision = filter_node([claim], classes, slices, "node-1", {}, set(), timeout_s=0.2)
    assert decision.status.code == Code.ERROR
    assert decision.status.message == "node node-1: timed out trying to allocate devices"
    assert time.perf_counter() - started < 1.0
