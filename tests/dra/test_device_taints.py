"""Device taints and request tolerations (DRADeviceTaints, beta and on in kube v1.36):
a device with a NoSchedule or NoExecute taint is allocated only to a request that
tolerates it (``allocator_incubating.go`` taintPreventsAllocation,
``resourceclaim.ToleratesTaint``); other effects are ignored."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra.allocator import allocate
from scheduler.dra.manifests import resource_claim_from_manifest
from scheduler.dra.objects import DraObjectError
from tests.dra.builders import DRIVER_A, claim_manifest, driver_class, exactly, first_available, make_slice

CLASSES = {"class-a": driver_class("class-a", DRIVER_A)}
MAINTENANCE = {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}


def _claim(*tolerations: dict[str, Any], request: dict[str, Any] | None = None) -> Any:
    request = request or exactly("req-0")
    if tolerations:
        request["exactly"]["tolerations"] = list(tolerations)
    return resource_claim_from_manifest(claim_manifest("c0", request))


def _devices(claims: list[Any], taints: list[dict[str, Any]]) -> Any:
    slices = [make_slice("s", [{"name": "tainted", "taints": taints}, {"name": "plain"}])]
    found = allocate(claims, CLASSES, slices, "node-1", {}, set())
    return None if found is None else [r.device for r in found[0].results]


# (case, the device's taints, the request's tolerations, devices allocated)
CASES = [
    ("no toleration: the plain device", [MAINTENANCE], [], ["plain"]),
    ("Exists on the key", [MAINTENANCE], [{"key": "maintenance", "operator": "Exists"}], ["tainted"]),
    ("Equal, the same value", [MAINTENANCE], [{"key": "maintenance", "value": "planned"}], ["tainted"]),
    ("Equal, another value", [MAINTENANCE], [{"key": "maintenance", "value": "other"}], ["plain"]),
    ("Exists with no key tolerates every taint", [MAINTENANCE], [{"operator": "Exists"}], ["tainted"]),
    (
        "another effect",
        [MAINTENANCE],
        [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}],
        ["plain"],
    ),
    (
        "two taints, one tolerated",
        [MAINTENANCE, {"key": "broken", "effect": "NoExecute"}],
        [{"key": "maintenance", "operator": "Exists"}],
        ["plain"],
    ),
    ("effect None is ignored", [{"key": "note", "effect": "None"}], [], ["tainted"]),
]


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_tolerations(
    taints: list[dict[str, Any]], tolerations: list[dict[str, Any]], expected: list[str]
) -> None:
    assert _devices([_claim(*tolerations)], taints) == expected


def test_two_devices_need_the_tainted_one_tolerated() -> None:
    two = exactly("req-0", "class-a", 2)
    assert _devices([_claim(request=two)], [MAINTENANCE]) is None
    two = exactly("req-0", "class-a", 2)
    tolerated = _claim({"key": "maintenance", "operator": "Exists"}, request=two)
    assert _devices([tolerated], [MAINTENANCE]) == ["tainted", "plain"]


def test_a_subrequest_tolerates() -> None:
    sub = exactly("only", "class-a", 2)
    sub["exactly"]["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
    claim = resource_claim_from_manifest(claim_manifest("c0", first_available("req-0", sub)))
    assert _devices([claim], [MAINTENANCE]) == ["tainted", "plain"]


def test_an_unknown_operator_is_refused_with_the_field() -> None:
    with pytest.raises(DraObjectError, match=r"spec.devices.requests\[0\].exactly.tolerations\[0\].operator"):
        _claim({"key": "k", "operator": "Lt"})
