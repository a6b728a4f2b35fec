"""scheduler_perf on the local control plane at kube's smallest sizes (its 5Nodes
workloads; 10 or 1 node for the cases that have no 5Nodes one): every measured pod bound
by kube-scheduler and by rl-scheduler, no hard constraint broken (``scheduler_perf_checks``,
``scheduler_perf_fit``, ``scheduler_perf_volume_checks``), and the pods nobody waits for
(gated, unschedulable, churned) left pending for kube's reason. One row per test case and
the operations it exercises."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from devcluster.testing import DevCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scheduler_perf
from scheduler_perf_ops import PodsOp

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
    ],
)
def test_scheduler_perf_smallest_workloads(
    dev_cluster: DevCluster, tmp_path: Path, case: str, nodes: int, others_pending: str | None
) -> None:
    """``others_pending``: what every pending background or churned pod must say ("": no
    such pod may be pending; None: no expectation, they are deleted or preempt); the
    gated ones must all be pending."""
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
