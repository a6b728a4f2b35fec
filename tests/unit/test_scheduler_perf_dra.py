"""scheduler_perf's DRA cases: kube's template functions, which DRA cases are planned and
why the others are skipped, the driver's ResourceSlices (kube's ``resourceSlice``), the
harness' own allocation (``allocResourceClaims``) and the independent check of claims."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scheduler_perf_plan
from scheduler_perf_claim_checks import broken_claim_constraints
from scheduler_perf_dra import allocation_on, driver_nodes, refused_dra_object, resource_slice
from scheduler_perf_ops import AllocClaimsOp, NodesOp, Plan, PodsOp, ResourceDriverOp
from scheduler_perf_plan import fill, instance, plan

DRIVER = "test-driver.cdi.k8s.io"
CLASS = {
    "metadata": {"name": "test-class"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}
NODES: list[dict[str, Any]] = [{"metadata": {"name": n, "labels": {}}} for n in ("n0", "n1")]


def kube_plan(case: str, nodes: int) -> Plan | str:
    [(path, spec)] = [(p, c) for p, c in scheduler_perf_plan.test_cases() if c["name"] == case]
    return plan(path, spec, nodes)


@pytest.mark.parametrize(
    ("text", "index", "expected"),
    [
        pytest.param("test-claim-{{DivideInt .Index 5}}", 12, "test-claim-2", id="DivideInt: 12 / 5 = 2"),
        pytest.param("gpu-{{Mod .Index 25}}", 27, "gpu-2", id="Mod: 27 % 25 = 2"),
        pytest.param("pod-{{.Index}} of {{.Count}}", 3, "pod-3 of 9", id="Index and Count"),
        pytest.param("{{ .Index }}", 4, "4", id="spaces inside the braces"),
        pytest.param("{{DivideInt 30000 .Count}}", 1, "3333", id="DivideInt of a number by .Count"),
        pytest.param('{{printf "%d" .Index}}', 1, '{{printf "%d" .Index}}', id="other actions kept"),
    ],
)
def test_template_functions(text: str, index: int, expected: str) -> None:
    assert fill(text, index, 9) == expected


def test_claim_template_case_at_kube_fast_size() -> None:
    planned = kube_plan("SchedulingWithResourceClaimTemplate", 2)
    assert isinstance(planned, Plan)
    assert planned.workload == "fast"
    drivers = [op for op in planned.ops if isinstance(op, ResourceDriverOp)]
    assert drivers == [ResourceDriverOp(DRIVER, 10, "scheduler-perf-dra-*")]
    assert planned.measured_pods == 10
    nodes = [op for op in planned.ops if isinstance(op, NodesOp)]
    # nodesWithoutDRA (the default template) and nodesWithDRA: only the second matches
    assert driver_nodes(nodes, drivers[0].nodes) == ["perf-1-0"]


def test_shared_claims_are_named_per_five_pods() -> None:
    planned = kube_plan("SchedulingWithResourceClaim", 2)
    assert isinstance(planned, Plan)
    measured = next(op for op in planned.ops if isinstance(op, PodsOp) and op.measured)
    names = [
        instance(measured.template, i, 10, measured.text)["spec"]["resourceClaims"][0]["resourceClaimName"]
        for i in range(10)
    ]
    assert names == ["test-claim-0"] * 5 + ["test-claim-1"] * 5


def test_scaled_dra_case_keeps_devices_per_node() -> None:
    # 5000pods_500nodes at 50 nodes: nodes, init and measured pods / 10, 10 devices a node
    planned = kube_plan("SchedulingWithResourceClaimTemplate", 50)
    assert isinstance(planned, Plan)
    assert [op.max_claims for op in planned.ops if isinstance(op, ResourceDriverOp)] == [10]
    assert [op.count for op in planned.ops if isinstance(op, PodsOp)] == [250, 250]


def test_first_available_allocates_init_claims() -> None:
    planned = kube_plan("FirstAvailable", 2)
    assert isinstance(planned, Plan)
    assert AllocClaimsOp("init") in planned.ops


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("Partitionable", "partitionable devices"),
        ("PartitionableBacktracking", "partitionable devices"),
        ("ConsumableCapacity", "consumable capacity"),
        ("DeviceTaintToleration", "DeviceTaintRules"),
        ("ExtendedResource", "extended resources backed by DRA"),
        ("ImplicitExtendedResource_25Classes", "extended resources backed by DRA"),
        ("ExtendedResourceScoring", "extended resources backed by DRA"),
        ("PublishResourceSlices", "no measured pods"),
    ],
)
def test_dra_cases_skipped_with_their_reason(case: str, reason: str) -> None:
    skipped = kube_plan(case, 2)
    assert isinstance(skipped, str)
    assert reason in skipped, skipped


def test_version_other_than_v1_refused() -> None:
    manifest = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceClass", "spec": {}}
    assert "v1beta2" in refused_dra_object(manifest)
    assert refused_dra_object(manifest, versions=False) == ""


def test_resource_slice_as_kube_publishes_it() -> None:
    slice_ = resource_slice(DRIVER, "perf-1-0", 2, {"l": "v"})
    assert slice_["metadata"] == {"name": "perf-1-0", "labels": {"l": "v"}}
    spec = slice_["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (DRIVER, "perf-1-0", "perf-1-0")
    assert [d["name"] for d in spec["devices"]] == ["instance-0", "instance-1"]
    assert spec["devices"][1]["attributes"]["dra.example.com/numa"] == {"int": 1}
    assert spec["devices"][0]["capacity"] == {"memory": {"value": "1Gi"}}


def claim(name: str, namespace: str = "init", **exactly: Any) -> dict[str, Any]:
    request = {"name": "req-0", "exactly": {"deviceClassName": "test-class", **exactly}}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"devices": {"requests": [request]}}}


def test_harness_allocation_uses_each_device_once() -> None:
    # two nodes of one device each: two claims fill them, a third finds none
    slices = [resource_slice(DRIVER, n, 1, {}) for n in ("n0", "n1")]
    used: set[tuple[str, str, str]] = set()
    rng = random.Random(0)
    first = allocation_on(claim("c0"), {"test-class": CLASS}, slices, used, rng)
    second = allocation_on(claim("c1"), {"test-class": CLASS}, slices, used, rng)
    assert first is not None
    assert second is not None
    pools = {a["devices"]["results"][0]["pool"] for a in (first, second)}
    assert pools == {"n0", "n1"}
    assert allocation_on(claim("c2"), {"test-class": CLASS}, slices, used, rng) is None


def test_harness_allocation_refuses_claims_it_does_not_understand() -> None:
    with pytest.raises(ValueError, match="not one request of one device"):
        allocation_on(claim("c", count=2), {"test-class": CLASS}, [], set(), random.Random(0))


def allocated(name: str, node: str, device: str, pod_uid: str, namespace: str = "test") -> dict[str, Any]:
    result = {"request": "req-0", "driver": DRIVER, "pool": node, "device": device}
    selector = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }
    return {
        **claim(name, namespace),
        "status": {
            "allocation": {"devices": {"results": [result]}, "nodeSelector": selector},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": pod_uid}],
        },
    }


def pod(name: str, node: str, uid: str, claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "test", "uid": uid},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "resource", "resourceClaimName": claim_name}]},
    }


SLICES = [resource_slice(DRIVER, n, 2, {}) for n in ("n0", "n1")]


@pytest.mark.parametrize(
    ("pods", "claims", "broken"),
    [
        pytest.param(
            [pod("p0", "n0", "u0", "c0"), pod("p1", "n1", "u1", "c1")],
            [allocated("c0", "n0", "instance-0", "u0"), allocated("c1", "n1", "instance-0", "u1")],
            [],
            id="each claim on its pod's node",
        ),
        pytest.param(
            [pod("p0", "n1", "u0", "c0")],
            [allocated("c0", "n0", "instance-0", "u0")],
            [
                "test/claim c0: allocation's node selector excludes n1 (pods on n1)",
                f"test/claim c0: device {DRIVER}/n0/instance-0 is not on node n1 (pods on n1)",
                "test/claim c0: request req-0 got no device (pods on n1)",
            ],
            id="pod on another node than its claim's device",
        ),
        pytest.param(
            [pod("p0", "n0", "u0", "c0"), pod("p1", "n0", "u1", "c1")],
            [allocated("c0", "n0", "instance-0", "u0"), allocated("c1", "n0", "instance-0", "u1")],
            [f"device {DRIVER}/n0/instance-0 allocated to two claims"],
            id="one device in two claims",
        ),
        pytest.param(
            [pod("p0", "n0", "u0", "c0")],
            [allocated("c0", "n0", "instance-0", "u0"), allocated("c0", "n0", "instance-0", "u9", "init")],
            [f"device {DRIVER}/n0/instance-0 allocated to two claims"],
            id="one device in claims of one name in two namespaces",
        ),
        pytest.param(
            [pod("p0", "n0", "u0", "gone")],
            [],
            ["pod test/p0 on n0: claim resource (gone) does not exist"],
            id="a claim that does not exist",
        ),
        pytest.param(
            [pod("p0", "n0", "u0", "c0")],
            [claim("c0", "test")],
            ["test/claim c0: not allocated (pods on n0)"],
            id="a bound pod's claim not allocated",
        ),
    ],
)
def test_claim_checks(pods: list[dict[str, Any]], claims: list[dict[str, Any]], broken: list[str]) -> None:
    assert broken_claim_constraints(pods, NODES, claims, [CLASS], SLICES) == broken


def test_the_steady_state_case_keeps_ten_pods_for_ten_seconds() -> None:
    planned = kube_plan("SteadyStateClusterResourceClaimTemplate", 500)
    assert isinstance(planned, Plan)
    assert planned.steady is not None
    _, op = planned.steady
    assert (op.count, op.steady_s, op.namespace) == (10, 10.0, "test")
