"""Preemption as kube-scheduler does it: each scenario runs twice on the same nodes, once
for kube-scheduler (built from source, running in the dev cluster) and once for
rl-scheduler, each in a namespace of its own. The high-priority pod must evict exactly
the pods kube-scheduler evicts, land on the same node, and be reported the same way.

Two nodes of 32 cores. Fillers are bound by ``nodeName`` with distinct priorities, so
kube's reprieve order (priority, then start time) never falls to a tie of start times,
which the API keeps to the second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import nodes as devnodes
from scheduler.k8s.scheduling.lifetimes_starts import kube_part
from tests.e2e import checker
from tests.e2e.support import (
    api_dicts,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-preemption"
KUBE_SCHEDULER = "default-scheduler"
NODES = ["preempt-a", "preempt-b"]
A, B = NODES
INCOMING_PRIORITY = 1000


@dataclass(frozen=True)
class Filler:
    name: str
    node: str
    cpu: int  # cores
    priority: int
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    fillers: tuple[Filler, ...]
    incoming_cpu: int
    victims: frozenset[str]  # what kube-scheduler evicts (checked too)
    node: str  # where the incoming pod binds ("" stays pending)
    budget: dict[str, Any] | None = None  # a PodDisruptionBudget's spec
    never: bool = False  # preemptionPolicy Never


def full(node: str, prefix: str, priorities: list[int], cpu: int = 8, **labels: str) -> tuple[Filler, ...]:
    return tuple(Filler(f"{prefix}-{p}", node, cpu, p, labels) for p in priorities)


SCENARIOS = [
    pytest.param(
        # a: 4 x 8 cores (100-130), b: 4 x 8 cores (200-230); 8 cores wanted. Each node
        # needs one victim; a's highest victim priority (100) is the lowest.
        Scenario(
            full(A, "a", [100, 110, 120, 130]) + full(B, "b", [200, 210, 220, 230]),
            8,
            frozenset({"a-100"}),
            A,
        ),
        id="the node whose victims have the lowest priority",
    ),
    pytest.param(
        # a: 8 x 4 cores, b: 2 x 16 cores; 16 cores wanted: a needs 4 victims, b one.
        # Highest victim priority: 107 on a, 100 on b (reprieve keeps b-150).
        Scenario(
            full(A, "a", list(range(100, 108)), cpu=4) + full(B, "b", [100, 150], cpu=16),
            16,
            frozenset({"b-100"}),
            B,
        ),
        id="fewest victims, lowest priorities",
    ),
    pytest.param(
        # Both nodes alike, but a's pods are under a budget that allows no disruption.
        Scenario(
            full(A, "a", [100, 110, 120, 130], app="guarded")
            + full(B, "b", [100, 110, 120, 130], app="free"),
            8,
            frozenset({"b-100"}),
            B,
            budget={"minAvailable": 4, "selector": {"matchLabels": {"app": "guarded"}}},
        ),
        id="a PodDisruptionBudget is respected",
    ),
    pytest.param(
        # 24 cores wanted: a gives up its three lowest, b (all 500) nothing.
        Scenario(
            full(A, "a", [100, 110, 120, 130]) + full(B, "b", [500, 501, 502, 503]),
            24,
            frozenset({"a-100", "a-110", "a-120"}),
            A,
        ),
        id="several victims, the most important reprieved",
    ),
    pytest.param(
        Scenario(
            full(A, "a", [100, 110, 120, 130]) + full(B, "b", [200, 210, 220, 230]),
            8,
            frozenset(),
            "",
            never=True,
        ),
        id="preemptionPolicy Never evicts nobody",
    ),
]


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    topology = devnodes.Topology(zones=1, racks_per_zone=1)
    size = devnodes.NODE_TYPES["cpu-small"]
    replace_nodes(api, [devnodes.NodeSpec(name, size, *topology.place(i)) for i, name in enumerate(NODES)])
    create_priority_classes(api)
    return api


@pytest.fixture(scope="module")
def rl_scheduler(
    dev_cluster: Any, core: client.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    del core  # the nodes first
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path_factory.mktemp("logs")) as scheduler:
        yield scheduler


def priority_class(value: int, never: bool = False) -> str:
    """The PriorityClass of ``value`` (the API sets a pod's priority from its class)."""
    return f"rl-e2e-{value}{'-never' if never else ''}"


def create_priority_classes(core: client.CoreV1Api) -> None:
    """Every class the scenarios use, made before any pod names one (the admission
    plugin refuses a class its informer has not seen yet)."""
    scheduling = client.SchedulingV1Api(core.api_client)
    values = {(f.priority, False) for param in SCENARIOS for f in param.values[0].fillers}
    for value, never in values | {(INCOMING_PRIORITY, False), (INCOMING_PRIORITY, True)}:
        body = {
            "metadata": {"name": priority_class(value, never)},
            "value": value,
            "preemptionPolicy": "Never" if never else "PreemptLowerPriority",
        }
        try:
            scheduling.create_priority_class(body)
        except ApiException as error:
            if error.status != 409:
                raise
    known = {priority_class(v, n) for v, n in values}

    def seen() -> bool:
        return known <= {c.metadata.name for c in scheduling.list_priority_class().items}

    wait_for(seen, 30, "the priority classes")
    time.sleep(1.0)  # the admission plugin's informer has them by now


@dataclass
class Result:
    node: str
    victims: frozenset[str]
    message: str  # the incoming pod's first FailedScheduling message
    preempted_events: int


def run(core: client.CoreV1Api, namespace: str, scenario: Scenario, scheduler: str) -> Result:
    policy = client.PolicyV1Api(core.api_client)
    if scenario.budget is not None:
        policy.create_namespaced_pod_disruption_budget(
            namespace, {"metadata": {"name": "guard"}, "spec": scenario.budget}
        )
    for filler in scenario.fillers:
        extra = {"nodeName": filler.node, "priorityClassName": priority_class(filler.priority)}
        core.create_namespaced_pod(
            namespace,
            pod(
                filler.name,
                namespace,
                scheduler,
                cpu=str(filler.cpu),
                memory="1Gi",
                labels=filler.labels,
                extra=extra,
            ),
        )
    names = {f.name for f in scenario.fillers}

    def running() -> bool:
        items = core.list_namespaced_pod(namespace).items
        return {p.metadata.name for p in items if p.status.phase == "Running"} == names

    wait_for(running, 60, "the fillers to run")
    if scenario.budget is not None:
        wait_for(
            lambda: (
                policy.read_namespaced_pod_disruption_budget("guard", namespace).status.current_healthy == 4
            ),
            60,
            "the budget to count its pods",
        )
    time.sleep(1.0)  # the schedulers' caches have the fillers by now (they take milliseconds)
    incoming = pod(
        "incoming", namespace, scheduler, cpu=str(scenario.incoming_cpu), memory="1Gi",
        extra={"priorityClassName": priority_class(INCOMING_PRIORITY, never=scenario.never)},
    )  # fmt: skip
    core.create_namespaced_pod(namespace, incoming)

    def failed_messages() -> list[str]:
        return [e.message for e in pod_events(core, namespace, "incoming") if e.reason == "FailedScheduling"]

    if scenario.node:
        wait_for(
            lambda: bool(core.read_namespaced_pod("incoming", namespace).spec.node_name),
            90,
            f"{scheduler} to bind",
        )
    else:
        wait_for(lambda: bool(failed_messages()), 60, f"{scheduler} to report the pod")
    left = {
        p.metadata.name
        for p in core.list_namespaced_pod(namespace).items
        if p.metadata.deletion_timestamp is None
    }
    preempted = [e for e in core.list_namespaced_event(namespace).items if e.reason == "Preempted"]
    messages = failed_messages()
    return Result(
        core.read_namespaced_pod("incoming", namespace).spec.node_name or "",
        frozenset(names - left),
        messages[0] if messages else "",
        len(preempted),
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_same_victims_as_kube_scheduler(
    core: client.CoreV1Api, rl_scheduler: Any, request: pytest.FixtureRequest, scenario: Scenario
) -> None:
    results = {}
    for scheduler in (KUBE_SCHEDULER, SCHEDULER):
        with scratch_namespace(
            core, f"preempt-{'kube' if scheduler == KUBE_SCHEDULER else 'rl'}", request.node.nodeid
        ) as namespace:
            results[scheduler] = run(core, namespace, scenario, scheduler)
            if scheduler == SCHEDULER:
                # The scenario's pods are the only ones on its nodes (other tests'
                # namespaces may still be going, their pods on nodes gone).
                violations = checker.check(
                    api_dicts(core, core.list_node().items),
                    api_dicts(core, core.list_namespaced_pod(namespace).items),
                )
    kube, ours = results[KUBE_SCHEDULER], results[SCHEDULER]
    assert (kube.node, kube.victims) == (scenario.node, scenario.victims), (
        "the scenario is not what kube does"
    )
    assert (ours.node, ours.victims) == (kube.node, kube.victims), rl_scheduler.log()[-3000:]
    assert kube_part(ours.message) == kube.message  # then, ours, when the pod is likely to start
    assert ours.preempted_events == kube.preempted_events == len(scenario.victims)
    assert violations == []
