"""The DRA allocation checker the parity test relies on: a good allocation passes and
each kind of bad one is caught (pure logic, no cluster)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e import dra_checker

DRIVER = "gpu.example.com"
NODE = "n1"
POD_UID = "uid-1"


def _gpu(name: str, model: str, memory: str, numa: int) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}},
    }


SLICES = [
    {
        "spec": {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": {"name": NODE},
            "devices": [
                _gpu("gpu-0", "a100", "80Gi", 0),
                _gpu("gpu-1", "a100", "40Gi", 1),
                _gpu("gpu-2", "t4", "16Gi", 0),
            ],
        }
    },
    {
        "spec": {
            "driver": DRIVER,
            "nodeName": "n2",
            "pool": {"name": "n2"},
            "devices": [_gpu("gpu-0", "t4", "16Gi", 0)],
        }
    },
]
CLASSES = {"gpu": {"spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}}
A100 = {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}}
BIG = {"cel": {"expression": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) > 0'}}


def _result(request: str, device: str, pool: str = NODE) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device}


def _claim() -> dict[str, Any]:
    """A big a100 ("big") and, first available, two a100s or any one device ("alt"),
    all on one numa node: gpu-0 (80Gi, numa 0) and gpu-2 (numa 0) satisfy it."""
    return {
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "big",
                        "exactly": {"deviceClassName": "gpu", "count": 1, "selectors": [A100, BIG]},
                    },
                    {
                        "name": "alt",
                        "firstAvailable": [
                            {"name": "two", "deviceClassName": "gpu", "count": 2, "selectors": [A100]},
                            {"name": "one", "deviceClassName": "gpu", "count": 1},
                        ],
                    },
                ],
                "constraints": [{"matchAttribute": f"{DRIVER}/numa"}],
            }
        },
        "status": {
            "allocation": {
                "devices": {"results": [_result("big", "gpu-0"), _result("alt/one", "gpu-2")]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": POD_UID}],
        },
    }


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return claim["status"]["allocation"]["devices"]["results"]  # type: ignore[no-any-return]


def _set_result(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(claim: dict[str, Any]) -> None:
        _results(claim)[index].update(fields)

    return change


def _unreserve(claim: dict[str, Any]) -> None:
    claim["status"]["reservedFor"] = []


def _other_node(claim: dict[str, Any]) -> None:
    claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = ["n2"]


def _extra_device(claim: dict[str, Any]) -> None:
    _results(claim).append(_result("big", "gpu-1"))


def _unallocated(claim: dict[str, Any]) -> None:
    claim["status"] = {}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param(_set_result(0, device="gpu-1"), "fails a selector of big", id="capacity selector: 40Gi"),
        pytest.param(
            _set_result(0, device="gpu-2"), "fails a selector of big", id="attribute selector: a t4"
        ),
        pytest.param(_set_result(1, device="gpu-1"), "matchAttribute", id="constraint: numa 1 beside 0"),
        pytest.param(_set_result(1, pool="n2"), "is not on node n1", id="a device of another node"),
        pytest.param(_set_result(1, request="alt/two"), "got 1, not 2", id="subrequest count"),
        pytest.param(_set_result(1, request="nope"), "unknown request", id="a request the claim lacks"),
        pytest.param(_set_result(1, adminAccess=True), "adminAccess differs", id="admin access not asked"),
        pytest.param(_extra_device, "got 2, not 1", id="ExactCount exceeded"),
        pytest.param(_unreserve, "not in reservedFor", id="reservedFor without the pod"),
        pytest.param(_other_node, "node selector excludes n1", id="allocation node selector"),
        pytest.param(_unallocated, "not allocated", id="no allocation"),
    ],
)
def test_a_bad_allocation_is_caught(change: Callable[[dict[str, Any]], None], problem: str) -> None:
    claim = _claim()
    assert dra_checker.check_claim(claim, CLASSES, SLICES, NODE, {}, [POD_UID]) == []
    change(claim)
    problems = dra_checker.check_claim(claim, CLASSES, SLICES, NODE, {}, [POD_UID])
    assert any(problem in p for p in problems), problems


def test_all_mode_needs_every_selected_device() -> None:
    claim = _claim()
    claim["spec"]["devices"]["requests"][0]["exactly"] = {
        "deviceClassName": "gpu",
        "allocationMode": "All",
        "selectors": [A100],
    }
    claim["spec"]["devices"]["constraints"] = []
    assert any(
        "(All) got 1 of 2" in p for p in dra_checker.check_claim(claim, CLASSES, SLICES, NODE, {}, [POD_UID])
    )
    _results(claim).append(_result("big", "gpu-1"))
    assert dra_checker.check_claim(claim, CLASSES, SLICES, NODE, {}, [POD_UID]) == []


def test_a_device_in_two_claims() -> None:
    first, second = _claim(), copy.deepcopy(_claim())
    second["metadata"]["name"] = "d"
    assert dra_checker.devices_given_twice([first, second]) == [
        (DRIVER, NODE, "gpu-0"),
        (DRIVER, NODE, "gpu-2"),
    ]
    for result in _results(second):
        result["adminAccess"] = True
    assert dra_checker.devices_given_twice([first, second]) == []


@pytest.mark.parametrize(
    ("slice_spec", "node", "labels", "on"),
    [
        pytest.param({"nodeName": "n1"}, "n1", {}, True, id="nodeName"),
        pytest.param({"nodeName": "n1"}, "n2", {}, False, id="nodeName, another node"),
        pytest.param({"allNodes": True}, "n2", {}, True, id="allNodes"),
        pytest.param(
            {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "r", "operator": "In", "values": ["x"]}]}
                    ]
                }
            },
            "n2",
            {"r": "x"},
            True,
            id="nodeSelector matches",
        ),
        pytest.param(
            {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "r", "operator": "In", "values": ["x"]}]}
                    ]
                }
            },
            "n2",
            {"r": "y"},
            False,
            id="nodeSelector does not",
        ),
    ],
)
def test_slice_on_node(slice_spec: dict[str, Any], node: str, labels: dict[str, str], on: bool) -> None:
    assert dra_checker.slice_on_node({"spec": slice_spec}, node, labels) is on
