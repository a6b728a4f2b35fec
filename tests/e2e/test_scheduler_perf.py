"""scheduler_perf on the local control plane at kube's smallest sizes (its 5Nodes
workloads; 10 or 1 node for the cases that have no 5Nodes one, 2 for the DRA ones' fast
workloads): every measured pod bound by kube-scheduler and by rl-scheduler, no hard
constraint broken (``scheduler_perf_checks``, ``scheduler_perf_fit``,
``scheduler_perf_volume_checks``, ``scheduler_perf_claim_checks``), and the pods nobody
waits for (gated, unschedulable, churned) left pending for kube's reason. One row per test case and
the operations it exercises."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import kube
from devcluster.testing import DevCluster
from tests.e2e import dra_checker
from tests.local_cluster import local_cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scheduler_perf
from scheduler_perf_dra import allocate_claims, dra_objects, driver_nodes, replace_slices, resource_slice
from scheduler_perf_objects import PERF_LABEL
from scheduler_perf_ops import NodesOp, PodsOp

DRIVER = "test-driver.cdi.k8s.io"

pytestmark = [pytest.mark.cluster, pytest.mark.binaries]

# The API server's PodScheduled condition on a pod with scheduling gates.
GATED = "Scheduling is blocked due to non-empty scheduling gates"


@pytest.mark.parametrize(
    ("case", "nodes", "others_pending"),
    [
        pytest.param("SchedulingBasic", 5, "", id="plain pods"),
        pytest.param("SchedulingSecrets", 5, "", id="pods with secret volumes"),
        pytest.param("SchedulingNodeAffinity", 5, "", id="node affinity"),
        pytest.param("MixedSchedulingBasePod", 5, "", id="mixed init pods"),
        pytest.param("TopologySpreading", 5, "", id="spreading"),
        pytest.param("PreferredTopologySpreading", 5, "", id="preferred spreading"),
        # tainted nodes, spreading that honours taints (nodeTaintsPolicy)
        pytest.param("SchedulingWithNodeInclusionPolicy", 5, "", id="node inclusion policy"),
        pytest.param("SchedulingPodAntiAffinity", 5, "", id="required anti-affinity"),
        pytest.param("SchedulingPodMatchingAntiAffinity", 5, "", id="matching anti-affinity"),
        pytest.param("SchedulingPreferredPodAffinity", 5, "", id="preferred affinity"),
        pytest.param("SchedulingPodAffinity", 5, "", id="required affinity"),
        pytest.param("SchedulingPreferredPodAntiAffinity", 5, "", id="preferred anti-affinity"),
        # createNamespaces from a template (labels) and createPodSets over them; the
        # terms select namespaces by label
        pytest.param(
            "SchedulingRequiredPodAntiAffinityWithNSSelector", 10, "", id="anti-affinity, ns selector"
        ),
        pytest.param("SchedulingRequiredPodAffinityWithNSSelector", 10, "", id="affinity, ns selector"),
        pytest.param(
            "SchedulingPreferredAntiAffinityWithNSSelector", 10, "", id="preferred anti, ns selector"
        ),
        pytest.param(
            "SchedulingPreferredAffinityWithNSSelector", 10, "", id="preferred affinity, ns selector"
        ),
        # createAny of a Service: the measured pods are its endpoints (default spreading)
        pytest.param("DefaultTopologySpreading", 5, "", id="service and default spreading"),
        # measured pods of priority 10 (a PriorityClass the harness makes) on nodes full of
        # priority-0 init pods: each is bound only by preempting
        pytest.param("PreemptionBasic", 5, "", id="preemption"),
        # each pod with its own claim and volume, bound from the start: in-tree AWS EBS,
        # the same migrated to CSI (CSINodes with a limit of 39), and CSI volumes
        pytest.param("SchedulingInTreePVs", 5, "", id="in-tree volumes"),
        pytest.param("SchedulingMigratedInTreePVs", 5, "", id="migrated in-tree volumes"),
        pytest.param("SchedulingCSIPVs", 5, "", id="CSI volumes"),
        # preemption by pods with volumes
        pytest.param("PreemptionPVs", 5, "", id="preemption with volumes"),
        # a node named by the template, pods bound to it by metadata.name
        pytest.param("SchedulingDaemonset", 5, "", id="daemonset pods on a named node"),
        # node i has foo.com/bar-i: 1, pod i asks for it (kube's templates with {{.Index}})
        pytest.param("SchedulingWithExtendedResource", 11, "", id="extended resources, one node each"),
        # gated pods for the scheduler under test (left pending, gated), a barrier, pods
        # deleted 50 a second while the measured pods are scheduled
        pytest.param("SchedulingWhileGated", 1, GATED, id="gated pods and deletions"),
        pytest.param(
            "SchedulingGatedPodsWithPodAffinityImpactForThroughput", 1, GATED, id="gated pods with affinity"
        ),
        # pods with a finalizer, scheduled and deleted while the measured pods are
        pytest.param("SchedulingDeletedPodsWithFinalizers", 10, None, id="deleted pods with finalizers"),
        # churn: a pod of priority 10 every 200 ms, preempting init pods
        pytest.param("PreemptionAsync", 5, None, id="churn of preempting pods"),
        # churn: an unschedulable pod (9 CPUs) every 200 ms, left pending
        pytest.param("Unschedulable", 5, "Insufficient cpu", id="churn of unschedulable pods"),
        # churn: a node, a 9-CPU pod and a service made and deleted every second
        pytest.param("SchedulingWithMixedChurn", 10, "Insufficient cpu", id="mixed churn"),
        # DRA at kube's fast size (a node with the driver's 10 devices, a node without):
        # a claim per pod from a ResourceClaimTemplate
        pytest.param("SchedulingWithResourceClaimTemplate", 2, "", id="DRA claim templates"),
        # claims shared by five pods each (pod i names test-claim-<i / 5>), 2 devices a node
        pytest.param("SchedulingWithResourceClaim", 2, "", id="DRA shared claims"),
        # firstAvailable: a class no device has, else the driver's class
        # (allocResourceClaims: none at this size)
        pytest.param("FirstAvailable", 2, "", id="DRA firstAvailable"),
        # steady state: 10 pods with a claim each from a template, deleted once bound and
        # made anew, for 10 s (kube's empty_100nodes: 100 nodes of 10 devices)
        pytest.param("SteadyStateClusterResourceClaimTemplate", 100, "", id="DRA steady state"),
        # kube's event-handling cases are in the next test, on a cluster of their own
    ],
)
def test_scheduler_perf_smallest_workloads(
    dev_cluster: DevCluster, tmp_path: Path, case: str, nodes: int, others_pending: str | None
) -> None:
    """``others_pending``: what every pending background or churned pod must say ("": no
    such pod may be pending; None: no expectation, they are deleted or preempt); the
    gated ones must all be pending."""
    run_and_check(dev_cluster, tmp_path, case, nodes, others_pending)


@pytest.fixture(scope="module")
def own_cluster(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    """A control plane with no nodes but the benchmark's: kube's event-handling cases
    assume one, as kube's harness has (an update template names the node kube's harness
    made, and the suite's shared control plane keeps other tests' nodes)."""
    yield from local_cluster(request, "-events")


@pytest.mark.parametrize(
    ("case", "nodes"),
    [
        # kube's event-handling cases, in sequence from an empty cluster, measured over
        # their metric window: pods unschedulable until blockers are deleted (ports,
        # resources, spreading, affinity, a ReadWriteOncePod claim); until pods and
        # nodes are updated (tolerations, gates removed, labels, a resize, a node made
        # schedulable, given room, labels or taints); until pods or nodes are added
        pytest.param("EventHandlingPodDelete", 2, id="event handling: pods deleted"),
        pytest.param("EventHandlingPodUpdate", 1, id="event handling: pods updated and resized"),
        pytest.param("EventHandlingPodAdd", 2, id="event handling: pods added"),
        pytest.param("EventHandlingNodeAdd", 2, id="event handling: nodes added"),
        pytest.param("EventHandlingNodeUpdate", 2, id="event handling: nodes updated"),
    ],
)
def test_event_handling_cases(own_cluster: DevCluster, tmp_path: Path, case: str, nodes: int) -> None:
    run_and_check(own_cluster, tmp_path, case, nodes, "")


def run_and_check(
    dev_cluster: DevCluster, tmp_path: Path, case: str, nodes: int, others_pending: str | None
) -> None:
    """The case at ``nodes`` with kube-scheduler and ``fgd-reserve``, one round: every
    measured pod bound, no constraint broken, the other pods pending as ``others_pending``
    says."""
    args = scheduler_perf.parse_args(
        [
            "--nodes",
            str(nodes),
            "--cases",
            case,
            "--schedulers",
            "kube-scheduler,fgd-reserve",
            "--rounds",
            "1",
        ]
    )
    args.run_timeout = 120
    plans, _ = scheduler_perf.plans(args)
    assert [p.case for p in plans] == [case]
    results = scheduler_perf.run_case(dev_cluster.core_v1(), dev_cluster.kubeconfig, plans[0], args, tmp_path)
    assert [r.scheduler for r in results] == ["kube-scheduler", "fgd-reserve"]
    for result in results:
        assert not result.error, result.scheduler
        assert result.measured > 0
        assert result.bound == result.measured, (result.scheduler, result.pending)
        assert not result.broken, (result.scheduler, result.broken)
        if others_pending == "":
            assert not result.others_pending, (result.scheduler, result.others_pending)
        elif others_pending is not None:
            # gated pods are made before the measured ones and never bound; churned pods
            # come every interval and a fast run may end before one is pending
            if others_pending == GATED:
                background = sum(op.count for op in plans[0].ops if isinstance(op, PodsOp) and op.background)
                assert sum(result.others_pending.values()) == background, result.scheduler
            assert all(others_pending in reason for reason in result.others_pending), (
                result.scheduler,
                result.others_pending,
            )


@pytest.mark.parametrize(
    "case",
    [
        pytest.param("SchedulingBasic", id="plain pods"),
        pytest.param("PreemptionBasic", id="preemption"),
    ],
)
def test_measured_pods_made_while_the_scheduler_runs(
    dev_cluster: DevCluster, tmp_path: Path, case: str
) -> None:
    """``--measured while-running`` (kube's harness order): each scheduler's /readyz
    answered before its measured pods were made, so none binds before that, and every
    one is bound without breaking a constraint."""
    args = scheduler_perf.parse_args(
        ["--nodes", "5", "--cases", case, "--schedulers", "kube-scheduler,fgd-reserve", "--rounds", "1",
         "--measured", "while-running"]
    )  # fmt: skip
    args.run_timeout = 120
    plans, _ = scheduler_perf.plans(args)
    results = scheduler_perf.run_case(dev_cluster.core_v1(), dev_cluster.kubeconfig, plans[0], args, tmp_path)
    assert [r.scheduler for r in results] == ["kube-scheduler", "fgd-reserve"]
    for result in results:
        assert not result.error, result.scheduler
        assert result.bound == result.measured > 0, (result.scheduler, result.pending)
        assert not result.broken, (result.scheduler, result.broken)
        assert 0 < result.ready_s < result.first_bind_s, result.scheduler
        assert result.created_s >= 0, result.scheduler


def new_claim(name: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


def test_harness_allocates_claims_as_kube_allocates_them(dev_cluster: DevCluster) -> None:
    """``allocResourceClaims`` on the API server: three claims of one device on two nodes
    of two devices each (kube's driver slices) get three different devices, each
    allocation valid for its node by ``dra_checker``; a fifth claim finds no device."""
    core = dev_cluster.core_v1()
    resource = client.ResourceV1Api(core.api_client)
    nodes = [NodesOp(2, {"metadata": {"generateName": "scheduler-perf-dra-"}})]
    names = driver_nodes(nodes, "scheduler-perf-dra-*")
    assert names == ["perf-0-0", "perf-0-1"]
    slices = [resource_slice(DRIVER, n, 2, {PERF_LABEL: "driver"}) for n in names]
    replace_slices(resource, slices, f"{PERF_LABEL}=driver", 60)
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "perf-alloc-class"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    namespace = "perf-alloc"
    core.create_namespace(kube.body({"metadata": {"name": namespace}}))
    resource.create_device_class(kube.body(cls))
    request: dict[str, Any] = {"name": "req-0", "exactly": {"deviceClassName": "perf-alloc-class"}}
    try:
        for i in range(3):
            resource.create_namespaced_resource_claim(namespace, kube.body(new_claim(f"c{i}", request)))
        assert allocate_claims(resource, namespace) == 3
        claims = [c for c in dra_objects(resource)[0] if c["metadata"]["namespace"] == namespace]
        assert len(claims) == 3
        for made in claims:
            allocation = made["status"]["allocation"]
            [node] = allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
            assert dra_checker.check_claim(made, {"perf-alloc-class": cls}, slices, node, {}, []) == []
        assert dra_checker.devices_given_twice(claims) == []
        assert allocate_claims(resource, namespace) == 0  # all three were allocated already
        for i in range(3, 5):
            resource.create_namespaced_resource_claim(namespace, kube.body(new_claim(f"c{i}", request)))
        with pytest.raises(RuntimeError, match="could not allocate claim"):
            allocate_claims(resource, namespace)
    finally:
        core.delete_namespace(namespace)
        resource.delete_device_class("perf-alloc-class")
        replace_slices(resource, [], f"{PERF_LABEL}=driver", 60)
