"""rl-scheduler against a real kube-apiserver with KWOK nodes: it binds, it reports
like kube-scheduler, it refuses what cannot fit, and it survives bad input."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e import checker
from tests.e2e.support import (
    SchedulerProcess,
    api_dicts,
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, mixed_workload, pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-scheduler-e2e"


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(100))
    return api


@pytest.fixture(scope="module")
def scheduler(
    dev_cluster: Any, core: client.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    with running_scheduler(
        dev_cluster.kubeconfig, SCHEDULER, tmp_path_factory.mktemp("logs"), "--profile", "fgd"
    ) as s:
        yield s


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())
    with scratch_namespace(core, f"e2e-{slug[:30].strip('-')}", request.node.nodeid) as name:
        yield name


def pending_report(core: client.CoreV1Api, namespace: str, scheduler: SchedulerProcess) -> str:
    """What a failed wait leaves to read: the pods still pending and why, the log."""
    pending = [p for p in core.list_namespaced_pod(namespace).items if not p.spec.node_name]
    lines = [f"{len(pending)} pods pending"]
    for item in pending[:10]:
        conditions = [(c.reason, c.message) for c in item.status.conditions or []]
        lines.append(f"  {item.metadata.name}: {conditions}")
    lines.append("scheduler log (tail):")
    lines.append(scheduler.log()[-4000:])
    return "\n".join(lines)


def test_binds_1000_mixed_pods_on_100_mixed_nodes_without_violations(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    workload = mixed_workload(namespace, SCHEDULER, 1000)
    create_pods(core, workload)

    def all_bound() -> bool:
        return all(p.spec.node_name for p in core.list_namespaced_pod(namespace).items)

    try:
        wait_for(all_bound, 600, "1000 pods to be bound", interval_s=2)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{pending_report(core, namespace, scheduler)}") from None
    pods = api_dicts(core, core.list_pod_for_all_namespaces().items)
    nodes = api_dicts(core, core.list_node().items)
    assert checker.check(nodes, pods) == []
    # the counter moves when the bind's answer is handled, just after the API shows the pod bound
    scheduled = {"result": "scheduled"}
    wait_for(
        lambda: scheduler.metric("scheduler_schedule_attempts_total", scheduled) >= 1000, 30, "1000 scheduled"
    )
    # kopf wrote nothing onto the pods it watched
    for item in core.list_namespaced_pod(namespace).items:
        assert not item.metadata.finalizers
        assert not any(key.startswith("kopf.") for key in (item.metadata.annotations or {}))


@pytest.mark.parametrize(
    ("manifest_changes", "message"),
    [
        pytest.param(
            {"cpu": "1000"},
            "0/100 nodes are available: 20 node(s) had untolerated taint(s), 80 Insufficient cpu.",
            id="absurd cpu request",
        ),
        pytest.param(
            {"extra": {"nodeSelector": {"disk": "nvme"}}},
            "0/100 nodes are available: 20 node(s) had untolerated taint(s), "
            "80 node(s) didn't match Pod's node affinity/selector.",
            id="no node has the label",
        ),
        pytest.param(
            {
                "extra": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "pause",
                            "resources": {
                                "requests": {"example.com/fpga": "1"},
                                "limits": {"example.com/fpga": "1"},
                            },
                        }
                    ]
                }
            },
            "0/100 nodes are available: 20 node(s) had untolerated taint(s), "
            "80 Insufficient example.com/fpga.",
            id="unknown extended resource",
        ),
        pytest.param(
            {"gpus": 1, "gpu_percent": 150},
            "spec.containers[0].resources.nvidia.com/gpucores: must be a percentage in 0..100, got 150",
            id="malformed GPU share",
        ),
        pytest.param(
            {"gpus": 1, "annotations": {"rl-scheduler.io/gpu-milli": "500"}},
            "0/100 nodes are available: the annotation rl-scheduler.io/gpu-milli is retired: ask a GPU "
            "share with HAMi's resources instead",
            id="the retired GPU share annotation",
        ),
        pytest.param(
            {
                "extra": {
                    "affinity": {
                        "podAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": {"app": "nowhere"}},
                                    "topologyKey": "no-such-key",
                                }
                            ]
                        }
                    }
                }
            },
            "0/100 nodes are available: 20 node(s) had untolerated taint(s), "
            "80 node(s) didn't match pod affinity rules.",
            id="affinity to a topology no node has",
        ),
    ],
)
def test_impossible_and_bad_pods_get_failed_scheduling(
    core: client.CoreV1Api,
    scheduler: SchedulerProcess,
    namespace: str,
    manifest_changes: dict[str, Any],
    message: str,
) -> None:
    create_pods(core, [pod("impossible", namespace, SCHEDULER, **manifest_changes)])

    def reported() -> bool:
        return any(
            e.reason == "FailedScheduling" and message in (e.message or "")
            for e in pod_events(core, namespace, "impossible")
        )

    try:
        wait_for(reported, 60, f"FailedScheduling with {message!r}")
    except AssertionError as error:
        seen = [(e.reason, e.message) for e in pod_events(core, namespace, "impossible")]
        raise AssertionError(f"{error}; events: {seen}\n{scheduler.log()[-3000:]}") from None

    def condition() -> Any:
        conditions = core.read_namespaced_pod("impossible", namespace).status.conditions or []
        return next(
            (c for c in conditions if c.type == "PodScheduled" and message in (c.message or "")), None
        )

    wait_for(lambda: condition() is not None, 30, "the PodScheduled condition")
    assert (condition().status, condition().reason) == ("False", "Unschedulable")
    # the scheduler carries on: a good pod still gets placed
    create_pods(core, [pod("fine", namespace, SCHEDULER)])
    wait_for(
        lambda: bool(core.read_namespaced_pod("fine", namespace).spec.node_name), 60, "the next pod to bind"
    )
    assert scheduler.process is not None
    assert scheduler.process.poll() is None


def test_a_pod_deleted_while_queued_is_forgotten(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    create_pods(core, [pod("doomed", namespace, SCHEDULER, cpu="1000")])
    wait_for(
        lambda: scheduler.metric("scheduler_pending_pods", {"queue": "unschedulable"}) >= 1,
        60,
        "the pod to park",
    )
    core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)
    wait_for(
        lambda: scheduler.metric("scheduler_pending_pods", {"queue": "unschedulable"}) == 0,
        30,
        "the queue to forget it",
    )
    failures = scheduler.metric("scheduler_schedule_attempts_total", {"result": "unschedulable"})
    time.sleep(3)
    assert scheduler.metric("scheduler_schedule_attempts_total", {"result": "unschedulable"}) == failures


def test_a_parked_pod_binds_when_a_node_gains_its_label(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    """A node update reaches the cache through the node watch and sends the parked pod
    back to the active queue (kube-scheduler's NodeUpdate event). While it waits,
    ``scheduler_unschedulable_pods`` names the plugin that rejected it, as kube's does."""
    label, node = "e2e.rl-scheduler.io/joined", "e2e-node-001"
    create_pods(core, [pod("waiting", namespace, SCHEDULER, extra={"nodeSelector": {label: "yes"}})])
    wait_for(
        lambda: scheduler.metric("scheduler_pending_pods", {"queue": "unschedulable"}) >= 1,
        60,
        "the pod to park",
    )
    wait_for(
        lambda: scheduler.metric("scheduler_unschedulable_pods", {"plugin": "NodeAffinity"}) >= 1,
        30,
        "the gauge to count it under NodeAffinity",
    )
    reason = "node(s) didn't match Pod's node affinity/selector"
    assert scheduler.metric("scheduler_unschedulable_pods", {"plugin": reason}) == 0
    try:
        core.patch_node(node, {"metadata": {"labels": {label: "yes"}}})
        wait_for(
            lambda: core.read_namespaced_pod("waiting", namespace).spec.node_name == node,
            30,
            f"the pod to bind to {node}",
        )
    finally:
        core.patch_node(node, {"metadata": {"labels": {label: None}}})


def test_gated_pods_wait_then_schedule(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    gated = pod("gated", namespace, SCHEDULER, extra={"schedulingGates": [{"name": "example.com/approval"}]})
    create_pods(core, [gated])
    wait_for(
        lambda: scheduler.metric("scheduler_pending_pods", {"queue": "gated"}) >= 1, 30, "the pod to be gated"
    )
    assert not core.read_namespaced_pod("gated", namespace).spec.node_name
    core.patch_namespaced_pod("gated", namespace, {"spec": {"schedulingGates": None}})
    wait_for(lambda: bool(core.read_namespaced_pod("gated", namespace).spec.node_name), 30, "the pod to bind")


def test_scheduled_event_names_the_pod_and_node(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    create_pods(core, [pod("reported", namespace, SCHEDULER)])
    wait_for(
        lambda: bool(core.read_namespaced_pod("reported", namespace).spec.node_name), 60, "the pod to bind"
    )
    node = core.read_namespaced_pod("reported", namespace).spec.node_name
    wait_for(
        lambda: any(
            e.reason == "Scheduled" and e.message == f"Successfully assigned {namespace}/reported to {node}"
            for e in pod_events(core, namespace, "reported")
        ),
        30,
        "the Scheduled event",
    )
    assert scheduler.get("/healthz")[0] == 200


def test_replicas_with_preferred_anti_affinity_spread_over_nodes(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    """The policy packs pods that ask for nothing; replicas that prefer not to share a
    node get a node each (a Deployment's usual spreading), the policy choosing among the
    nodes without one."""
    replicas = 8

    def group(app: str, spread: bool) -> list[dict[str, Any]]:
        anti = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": app}},
                        },
                    }
                ]
            }
        }
        extra = {"affinity": anti} if spread else None
        labels = {"app": app}
        return [pod(f"{app}-{i}", namespace, SCHEDULER, labels=labels, extra=extra) for i in range(replicas)]

    create_pods(core, group("packed", spread=False) + group("spread", spread=True))

    def nodes_of(app: str) -> list[str]:
        items = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
        return [p.spec.node_name for p in items if p.spec.node_name]

    wait_for(
        lambda: len(nodes_of("packed")) == len(nodes_of("spread")) == replicas, 60, "both groups to bind"
    )
    assert len(set(nodes_of("spread"))) == replicas, nodes_of("spread")
    assert len(set(nodes_of("packed"))) < replicas, nodes_of("packed")


def test_a_namespace_labelled_after_the_start_reaches_pod_affinity(
    core: client.CoreV1Api, scheduler: SchedulerProcess, namespace: str
) -> None:
    """Namespaces after the start's listing come from kopf's watch (it starts once the
    scheduler is first idle): a namespace labelled now is what a namespaceSelector
    of a required pod affinity finds."""
    wait_for(lambda: "kopf starts" in scheduler.log(), 60, "kopf to start")
    team = f"team-{abs(hash(namespace)) % 10**6}"
    core.patch_namespace(namespace, {"metadata": {"labels": {"team": team}}})
    time.sleep(2)  # kopf's watch delivers the label; nothing to poll for it
    create_pods(core, [pod("anchor", namespace, SCHEDULER, labels={"app": "anchor"})])
    wait_for(lambda: core.read_namespaced_pod("anchor", namespace).spec.node_name, 60, "the anchor bound")
    anchor_node = core.read_namespaced_pod("anchor", namespace).spec.node_name
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "anchor"}},
                    "namespaceSelector": {"matchLabels": {"team": team}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    create_pods(core, [pod("follower", namespace, SCHEDULER, extra={"affinity": affinity})])
    wait_for(lambda: core.read_namespaced_pod("follower", namespace).spec.node_name, 60, "the follower bound")
    assert core.read_namespaced_pod("follower", namespace).spec.node_name == anchor_node
